"""The compiled launch path on a real GPU: results, the compiled path taken (its counters), streams, a
callable grid, an autotuned kernel, and the CPU-tensor error.  ``python3 -m pytest tests/runtime -m gpu``."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl

from . import kernels as K

pytestmark = pytest.mark.gpu


def _compiled(kernel):
    fast = kernel.grid_launcher()
    if type(fast).__name__ != "Dispatcher":
        pytest.skip("the compiled launcher is not available here")
    return fast


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_hits_launch_correctly(dtype):
    K.add_kernel.clear_cache()
    disp = _compiled(K.add_kernel)
    for n in (1000, 1000, 4096, 4096, 17, 17):
        x, y = torch.randn(n, device="cuda").to(dtype), torch.randn(n, device="cuda").to(dtype)
        out = torch.empty_like(x)
        K.add_kernel[lambda meta, n=n: (triton_cdiv(n, meta["BLOCK_SIZE"]),)](x, y, out, n, BLOCK_SIZE=256)
        torch.testing.assert_close(out, x + y)
    st = disp.stats()
    assert st["hits"] >= 3 and st["forwarded"] <= 3, st


def triton_cdiv(a, b):
    return (a + b - 1) // b


def test_a_side_stream_and_unaligned_views():
    K.add_kernel.clear_cache()
    disp = _compiled(K.add_kernel)
    base = torch.randn(4097, device="cuda")
    s = torch.cuda.Stream()
    for off in (0, 1, 0, 1):
        x = base[off:off + 4096]
        out = torch.zeros(4096, device="cuda")
        with torch.cuda.stream(s):
            K.add_kernel[(16,)](x, x, out, 4096, BLOCK_SIZE=256)
        K.add_kernel[(16,)](x, x, out, 4096, BLOCK_SIZE=256, stream=s)
        s.synchronize()
        torch.testing.assert_close(out, 2 * x)
    assert disp.stats()["hits"] >= 4  # the aligned and the unaligned specialization both hit


def test_autotuned_hits_in_c():
    at = newt.autotune([newt.Config({"BLOCK_SIZE": 128}), newt.Config({"BLOCK_SIZE": 512})],
                       key=["n_elements"])(newt.jit(K.add_kernel.fn))
    x = torch.randn(10000, device="cuda")
    out = torch.empty_like(x)
    g = lambda meta: (triton_cdiv(10000, meta["BLOCK_SIZE"]),)
    for _ in range(3):
        out.zero_()
        at[g](x, x, out, 10000)
        torch.testing.assert_close(out, 2 * x)
    if at._c_launch is None:
        pytest.skip("the compiled launcher is not available here")
    assert at._c_launch.stats()["hits"] == 2


def test_a_cpu_tensor_is_refused_by_name():
    K.add_kernel.clear_cache()
    _compiled(K.add_kernel)
    x = torch.randn(16, device="cuda")
    K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)
    with pytest.raises(ValueError, match="argument 'y_ptr' is a tensor on cpu"):
        K.add_kernel[(1,)](x, torch.randn(16), x, 16, BLOCK_SIZE=16)


@newt.jit
def _scalars(out_ptr, a, b, flag, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    v = nl.full((BLOCK,), a, nl.float32) * b
    if flag:
        v = v + 1.0
    nl.store(out_ptr + offs, v)


def test_scalars_through_the_compiled_path():
    _compiled(_scalars)
    out = torch.empty(16, device="cuda")
    for a, b, flag in ((3, 2.5, True), (3, 2.5, True), (2 ** 40, 0.5, False), (2 ** 40, 0.5, False)):
        _scalars[(1,)](out, a, b, flag, BLOCK=16)
        torch.testing.assert_close(out, torch.full((16,), float(a) * b + (1.0 if flag else 0.0), device="cuda"))
    assert _scalars._fast.stats()["hits"] == 2
