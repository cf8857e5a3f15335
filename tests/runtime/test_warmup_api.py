"""The compiled-kernel API as Triton's tutorial 02 uses it, on a machine with no GPU: ``kernel.warmup(...,
grid=...)`` compiles through NVRTC and returns a compiled kernel with the ptxas register count,
``_init_handles()``, ``metadata.shared`` / ``num_warps`` / ``num_stages`` / ``name``, ``asm``; and
``compiled[grid](*args)`` runs it through the interpreter."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt.backend.cuda.compiler import cubin_register_count
from newt.runtime import compiler, driver

from .conftest import needs_backend, needs_interpreter

pytestmark = [needs_backend, needs_interpreter]


@newt.jit
def row_softmax(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: nl.constexpr,
                num_stages: nl.constexpr):
    # a persistent row loop, as tutorial 02 writes it
    for row in nl.range(nl.program_id(0), n_rows, nl.num_programs(0), num_stages=num_stages):
        cols = nl.arange(0, BLOCK)
        x = nl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
        e = nl.exp(x - nl.max(x, axis=0))
        nl.store(out_ptr + row * out_stride + cols, e / nl.sum(e, axis=0), mask=cols < n_cols)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(driver, "_HAS_GPU", False)


def _tutorial_02_host(x, y, num_warps=8):
    """The host wrapper's warmup part, verbatim in shape: occupancy from n_regs and shared memory."""
    n_rows, n_cols = x.shape
    block = 1 << (n_cols - 1).bit_length()
    kernel = row_softmax.warmup(y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK=block, num_stages=4,
                                num_warps=num_warps, grid=(1,))
    kernel._init_handles()
    n_regs = kernel.n_regs
    size_smem = kernel.metadata.shared
    occupancy = 65536 // (n_regs * 32 * num_warps)
    occupancy = min(occupancy, 232448 // max(size_smem, 1))
    num_programs = min(132 * occupancy, n_rows)
    kernel[(num_programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, block, 4)
    return kernel


def test_tutorial_02_wrapper_runs_without_a_gpu(no_gpu):
    x = torch.randn(37, 100)
    y = torch.empty_like(x)
    kernel = _tutorial_02_host(x, y)
    torch.testing.assert_close(y, torch.softmax(x, dim=1))
    md = kernel.metadata
    assert (md.num_warps, md.num_stages, md.name) == (8, 4, "row_softmax")
    assert md.shared >= 0 and kernel.n_spills == 0


def test_n_regs_is_the_cubins_register_count(no_gpu):
    x = torch.randn(4, 300)
    kernel = row_softmax.warmup(torch.empty_like(x), x, 300, 300, 4, 300, BLOCK=512, num_stages=2, num_warps=4,
                                grid=(1,))
    # the ptxas report and the cubin's own EIATTR_REGCOUNT record agree: a real count, not a default
    assert kernel.n_regs == cubin_register_count(kernel.asm["cubin"], kernel.metadata.name) > 0
    assert kernel.n_max_threads == 128  # __launch_bounds__(32 * num_warps)
    assert {"cuda", "ptx", "cubin"} <= set(kernel.asm.keys()) and ".entry row_softmax" in kernel.asm["ptx"]
    assert kernel._init_handles() is None and kernel.module is None  # nothing to load without a GPU


def test_compiled_kernel_from_the_disk_cache_still_interprets(no_gpu):
    x = torch.randn(8, 64)
    row_softmax.warmup(torch.empty_like(x), x, 64, 64, 8, 64, BLOCK=64, num_stages=1, num_warps=4, grid=(1,))
    compiler.clear_memory_cache()
    row_softmax.clear_cache()
    kernel = row_softmax.warmup(torch.empty_like(x), x, 64, 64, 8, 64, BLOCK=64, num_stages=1, num_warps=4,
                                grid=(1,))
    assert kernel.ir is None  # made from the cache entry
    y = torch.empty_like(x)
    kernel[(3,)](y, x, 64, 64, 8, 64)  # run-time arguments only
    torch.testing.assert_close(y, torch.softmax(x, dim=1))
    with pytest.raises(TypeError, match="takes 6 run-time arguments"):
        kernel[(1,)](y, x, 64)


@pytest.mark.gpu
def test_tutorial_02_wrapper_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    x = torch.randn(1823, 781, device="cuda")
    y = torch.empty_like(x)
    kernel = _tutorial_02_host(x, y)
    torch.testing.assert_close(y, torch.softmax(x, dim=1))
    assert kernel.module is not None and kernel.function is not None


def test_warmup_of_an_interpreted_kernel_gives_the_same_api(monkeypatch):
    """NEWT_INTERPRET=1 (a CPU CI, the drop-in mode): warmup still compiles through NVRTC for the numbers the
    host code reads, and the compiled kernel launches through the interpreter even where a GPU exists."""
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    k = newt.jit(row_softmax.fn)
    assert k.is_interpreted()
    x = torch.randn(9, 40)
    y = torch.empty_like(x)
    ck = k.warmup(y, x, 40, 40, 9, 40, BLOCK=64, num_stages=2, num_warps=4, grid=(1,))
    ck._init_handles()
    assert ck.n_regs == cubin_register_count(ck.asm["cubin"], ck.metadata.name) > 0
    assert ck.interpreted and ck.module is None
    ck[(2, 1, 1)](y, x, 40, 40, 9, 40, 64, 2)  # all arguments, constexprs included (tutorial 02's call)
    torch.testing.assert_close(y, torch.softmax(x, dim=1))
