"""The runtime's interpreter route: NEWT_INTERPRET=1 / interpret=True, autotune and heuristics on the CPU."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import driver

from . import kernels as K
from .conftest import needs_interpreter

pytestmark = needs_interpreter


def interp(kernel):
    return newt.jit(interpret=True)(kernel.fn)


def test_vector_add_on_the_cpu():
    k = interp(K.add_kernel)
    x, y, out = torch.randn(1000), torch.randn(1000), torch.empty(1000)
    k[lambda m: (newt.cdiv(m["n_elements"], m["BLOCK_SIZE"]),)](x, y, out, 1000, BLOCK_SIZE=128)
    torch.testing.assert_close(out, x + y)


def test_environment_variable(monkeypatch):
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    k = newt.jit(K.add_kernel.fn)
    assert k.is_interpreted()
    x, out = torch.arange(64, dtype=torch.float32), torch.empty(64)
    k[(1,)](x, x, out, 64, BLOCK_SIZE=64)
    torch.testing.assert_close(out, 2 * x)
    assert not newt.jit(interpret=False)(K.add_kernel.fn).is_interpreted()


def test_interpreted_launch_never_needs_a_gpu(monkeypatch):
    monkeypatch.setattr(driver, "_HAS_GPU", False)

    def no_cuda(*a, **k):
        raise AssertionError("the interpreter path must not touch the CUDA driver")
    monkeypatch.setattr(driver, "cu", no_cuda)
    k = interp(K.grid3_kernel)
    out = torch.zeros(2 * 2 * 3, dtype=torch.int32)
    k[(2, 2, 3)](out, X=2, Y=2)
    expect = [i + 10 * j + 100 * kk for kk in range(3) for j in range(2) for i in range(2)]
    assert out.tolist() == expect


def test_scalars_ints_equal_to_one_and_defaults():
    k = interp(K.scalars_kernel)
    out = torch.empty(16)
    k[(1,)](out, 1.5, 1, True)
    assert torch.all(out == 2.5)
    k[(1,)](out, 2.0, 3, False)
    assert torch.all(out == 6.0)


def test_constexpr_jit_function_and_helpers():
    k = interp(K.helper_kernel)
    x, out = torch.linspace(-2, 2, 50), torch.empty(50)
    k[(4,)](x, out, 50, BLOCK=16, ACT=K.relu)
    torch.testing.assert_close(out, torch.relu(x * 2 * K.SCALE))
    k[(4,)](x, out, 50, BLOCK=16, ACT=None)
    torch.testing.assert_close(out, x * 2 * K.SCALE)


def test_type_errors_are_the_same_as_on_the_gpu():
    k = interp(K.add_kernel)
    x = torch.empty(16)
    with pytest.raises(TypeError, match="missing required argument 'n_elements'"):
        k[(1,)](x, x, x, BLOCK_SIZE=16)
    with pytest.raises(TypeError, match="argument 'n_elements': cannot pass a list"):
        k[(1,)](x, x, x, [1], BLOCK_SIZE=16)
    with pytest.raises(TypeError, match="unexpected keyword argument 'BLOCK'"):
        k[(1,)](x, x, x, 16, BLOCK=16)


def test_out_of_bounds_names_the_kernel():
    from newt.interpreter import OutOfBoundsError
    k = interp(K.add_kernel)
    x = torch.empty(16)
    with pytest.raises(OutOfBoundsError, match="add_kernel"):
        k[(2,)](x, x, x, 32, BLOCK_SIZE=16)


def test_warmup_builds_the_ir():
    k = interp(K.add_kernel)
    ck = k.warmup(torch.float32, torch.float32, torch.float32, 64, BLOCK_SIZE=64)
    irfn = getattr(ck, "ir", ck)  # the compiled kernel (with NVRTC) carries the IR it interprets
    assert irfn.name == "add_kernel" and "store" in str(irfn)


def test_parameter_named_num_stages():
    k = interp(K.stages_kernel)
    out = torch.zeros(16, dtype=torch.int32)
    k[(1,)](out, 16, BLOCK=16, num_stages=2)
    assert out.tolist() == [i + 2 for i in range(16)]


def test_autotune_on_the_cpu_picks_by_timing():
    calls = []

    @newt.autotune([newt.Config({"BLOCK_SIZE": 16}), newt.Config({"BLOCK_SIZE": 256}),
                    newt.Config({"BLOCK_SIZE": 4096}, num_warps=32)],
                   key=["n_elements"], reset_to_zero=["out_ptr"])
    @newt.jit(interpret=True)
    def k(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr):
        offs = nl.program_id(0) * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
        m = offs < n_elements
        nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m) + nl.load(y_ptr + offs, mask=m), mask=m)

    x, y, out = torch.randn(2000), torch.randn(2000), torch.empty(2000)

    def grid(meta):
        calls.append(meta["BLOCK_SIZE"])
        return (newt.cdiv(meta["n_elements"], meta["BLOCK_SIZE"]),)
    k[grid](x, y, out, 2000)
    torch.testing.assert_close(out, x + y)
    assert k.best_config in k.configs and set(k.configs_timings) == set(k.configs)
    assert all(t[0] > 0 for t in k.configs_timings.values())
    # one timed run per config, then the real launch
    assert sorted(calls[:3]) == [16, 256, 4096] and calls[3] == k.best_config.kwargs["BLOCK_SIZE"]
    k[grid](x, y, out, 2000)
    assert len(calls) == 5


def test_autotune_on_the_cpu_skips_configs_that_fail(caplog):
    @newt.autotune([newt.Config({"BLOCK_SIZE": 3}), newt.Config({"BLOCK_SIZE": 64})], key=["n_elements"])
    @newt.jit(interpret=True)
    def k(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr):
        offs = nl.program_id(0) * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
        m = offs < n_elements
        nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m), mask=m)

    x, out = torch.randn(100), torch.empty(100)
    k[lambda m: (newt.cdiv(m["n_elements"], m["BLOCK_SIZE"]),)](x, x, out, 100)
    assert k.best_config.kwargs == {"BLOCK_SIZE": 64}
    (bad,) = k.failed_configs
    assert bad.kwargs == {"BLOCK_SIZE": 3} and "power of 2" in k.failed_configs[bad].replace("power of two",
                                                                                               "power of 2")
    torch.testing.assert_close(out, x)


def test_heuristics_on_the_cpu():
    @newt.heuristics({"BLOCK_SIZE": lambda a: newt.next_power_of_2(a["n_elements"])})
    @newt.jit(interpret=True)
    def k(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr):
        offs = nl.arange(0, BLOCK_SIZE)
        m = offs < n_elements
        nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m) * 3, mask=m)

    x, out = torch.randn(100), torch.empty(100)
    k[(1,)](x, x, out, 100)
    torch.testing.assert_close(out, 3 * x)


def test_print_autotuning_through_the_interpreter(tmp_path):
    script = tmp_path / "tune.py"
    script.write_text(textwrap.dedent('''
        import torch, newt, newt.language as nl

        @newt.autotune([newt.Config({"B": 32}), newt.Config({"B": 64})], key=["n"])
        @newt.jit
        def k(x_ptr, n, B: nl.constexpr):
            offs = nl.program_id(0) * B + nl.arange(0, B)
            nl.store(x_ptr + offs, offs, mask=offs < n)

        x = torch.zeros(100, dtype=torch.int32)
        k[lambda m: (newt.cdiv(m["n"], m["B"]),)](x, 100)
        assert x.tolist() == list(range(100))
        print("best", k.best_config)
    '''))
    import os
    env = dict(os.environ, NEWT_INTERPRET="1", NEWT_PRINT_AUTOTUNING="1")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "newt autotuning: k key (100, torch.int32)" in r.stdout and "best config {B:" in r.stdout


@pytest.mark.parametrize("opts, match", [({"num_warps": 3}, "num_warps must be a power of two"),
                                         ({"num_warps": 64}, "num_warps must be a power of two"),
                                         ({"num_warps": 0}, "num_warps must be a power of two"),
                                         ({"num_stages": 0}, "num_stages must be an int >= 1"),
                                         ({"maxnreg": 300}, "maxnreg must be an int from 1 to 255")])
def test_launch_jit_refuses_the_options_a_gpu_launch_refuses(opts, match):
    """Issue 22, item 16: ``launch_jit(..., num_warps=3)`` ran (Triton, and newt's GPU launch, refuse it)."""
    from newt.runtime.interpret import launch_jit
    x, out = torch.randn(64), torch.empty(64)
    with pytest.raises(ValueError, match=f"add_kernel: {match}"):
        launch_jit(K.add_kernel, (1,), (x, x, out, 64), {"BLOCK_SIZE": 64, **opts})
    launch_jit(K.add_kernel, (1,), (x, x, out, 64), {"BLOCK_SIZE": 64, "num_warps": 2})  # a valid one runs
    torch.testing.assert_close(out, x + x)
