"""Loads of a ``tl.range(..., num_stages=n)`` loop without a dot, through a cp.async ring (``NEWT_PIPE_ROWS=1``,
pipeline.py: ``rows_only_on``; issue 24's loop knobs, issue 28's tutorial 02).

Triton pipelines the loads of such a loop through shared memory: tutorial 02's softmax (a persistent loop over
rows, ``num_stages=4``) keeps ``num_stages - 1`` rows in shared memory, and its host code sizes the grid from
the kernel's registers and shared memory.  newt used to pipeline only loads that feed a dot, so the same kernel
had no row in shared memory and fewer registers, the tutorial launched 1,716 programs where Triton's kernel gets
1,056, and its small cells ran 1.15-1.73x Triton's time on the H100 (2026-12-07).  With the flag, the row loads
are copied ``num_stages - 1`` iterations ahead into ``num_stages - 1`` buffers (the copies of iteration it + n - 1
go into the buffer the body has just read, after a barrier at its end) and read back with ``other`` applied
where the mask is off.  Offline: the plan, the generated order, shared memory as Triton's, the flag off and a
loop without ``num_stages`` untouched.  On the GPU (``-m gpu``): the kernel against torch."""

from __future__ import annotations

import pytest

import newt
import newt.language as nl

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _sm90(monkeypatch):
    monkeypatch.setenv("NEWT_TARGET", "sm_90a")
    for k in ("NEWT_TMA", "NEWT_RING_1D", "NEWT_PIPE_ROWS"):
        monkeypatch.delenv(k, raising=False)


@newt.jit
def _softmax_rows(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK_SIZE: nl.constexpr,
                  num_stages: nl.constexpr):
    # tutorial 02's kernel, written here: a persistent loop over rows
    row_start = nl.program_id(0)
    row_step = nl.num_programs(0)
    for row_idx in nl.range(row_start, n_rows, row_step, num_stages=num_stages):
        cols = nl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        row = nl.load(in_ptr + row_idx * in_stride + cols, mask=mask, other=-float("inf"))
        num = nl.exp(row - nl.max(row, axis=0))
        nl.store(out_ptr + row_idx * out_stride + cols, num / nl.sum(num, axis=0), mask=mask)


@newt.jit
def _softmax_plain(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK_SIZE: nl.constexpr):
    row_start = nl.program_id(0)
    row_step = nl.num_programs(0)
    for row_idx in range(row_start, n_rows, row_step):  # no num_stages: the kernel's stages do not apply here
        cols = nl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        row = nl.load(in_ptr + row_idx * in_stride + cols, mask=mask, other=-float("inf"))
        num = nl.exp(row - nl.max(row, axis=0))
        nl.store(out_ptr + row_idx * out_stride + cols, num / nl.sum(num, axis=0), mask=mask)


def _compile(kernel, n_cols=512, stages=4, **kw):
    x = torch.empty((64, n_cols), dtype=torch.float32)
    block = 1 << (n_cols - 1).bit_length()
    extra = {"num_stages": stages} if kernel is _softmax_rows else {}
    kernel.clear_cache()
    return kernel.warmup(x, x, x.stride(0), x.stride(0), 64, n_cols, BLOCK_SIZE=block, num_warps=8,
                         grid=(1,), **extra, **kw)


@pytest.mark.parametrize("n_cols,stages", [(512, 4), (2048, 4), (8192, 4), (1000, 3), (512, 2)])
def test_rows_of_a_num_stages_loop_go_through_a_ring(n_cols, stages, monkeypatch):
    monkeypatch.setenv("NEWT_PIPE_ROWS", "1")
    ck = _compile(_softmax_rows, n_cols, stages)
    src = ck.asm["cuda"]
    row_bytes = (1 << (n_cols - 1).bit_length()) * 4
    assert f"software pipeline, {stages} stages" in src
    assert src.count("cp_async_commit();") == stages  # S - 1 in the prologue, one a iteration
    assert f"cp_async_wait<{stages - 2}>();" in src and "every thread has read this iteration's buffer" in src
    # S - 1 buffers of one row each (Triton 3.9 for the same kernel: 6,176 / 24,608 / 98,336 bytes at 4 stages)
    assert (stages - 1) * row_bytes <= ck.metadata.shared < (stages - 1) * row_bytes + 1024
    body = src[src.index("for (int v"):]
    read = body.index("(smem + SMEM_PIPE0 + rd")  # the row read from this iteration's buffer
    assert body.index("cp_async_wait") < read < body.rindex("st_global") < body.index("every thread has read")
    # (wait, read the row, compute and store it, then refill the buffer it came from)
    assert "0xff800000" in body  # other=-inf where the mask is off (the copy wrote zeros)
    assert ck.metadata.n_spills == 0


def test_the_flag_off_and_a_loop_without_num_stages_are_untouched(monkeypatch):
    off = _compile(_softmax_rows)
    assert "software pipeline" not in off.asm["cuda"] and off.metadata.shared < 1024
    monkeypatch.setenv("NEWT_PIPE_ROWS", "1")
    plain = _compile(_softmax_plain)
    assert "software pipeline" not in plain.asm["cuda"]
    monkeypatch.delenv("NEWT_PIPE_ROWS")
    assert _compile(_softmax_rows).asm["cuda"] == off.asm["cuda"]


def _check_on_gpu(n_rows, n_cols, stages, programs):
    x = torch.randn((n_rows, n_cols), device="cuda", dtype=torch.float32)
    y = torch.full_like(x, float("nan"))
    block = 1 << (n_cols - 1).bit_length()
    _softmax_rows[(programs,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=block,
                               num_stages=stages, num_warps=8)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.softmax(x, dim=1), atol=1e-6, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("n_rows,n_cols,stages,programs", [(4096, 512, 4, 1056), (4096, 2048, 4, 1056),
                                                           (1000, 1000, 3, 37), (7, 8192, 4, 3), (64, 512, 2, 64),
                                                           (5, 512, 4, 8)])
def test_the_ring_softmax_matches_torch_on_the_gpu(n_rows, n_cols, stages, programs, monkeypatch):
    """More programs than rows (a loop with no iteration), fewer rows than stages, masked columns: the
    prologue's and the tail's copies past the last row are predicated off."""
    monkeypatch.delenv("NEWT_TARGET", raising=False)
    monkeypatch.setenv("NEWT_PIPE_ROWS", "1")
    _softmax_rows.clear_cache()
    _check_on_gpu(n_rows, n_cols, stages, programs)
