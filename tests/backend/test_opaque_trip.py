"""Pipelined loops of a constant trip count on sm_90a (issues 24 / 28): their bound reaches ptxas as an opaque
value where that gives a smaller kernel.

Tutorial 06's causal backward runs its masked (diagonal) loops a constant number of steps.  With the constant in
view, ptxas took those loops and the unmasked ones after them off the uniform datapath at d=128: loop counters,
ring slots and wgmma descriptors in vector registers, copied to uniform ones (``R2UR``) at every use, and more
spilling.  ``pipeline.opaque_trip_count`` hides the bound behind an empty asm (``opaque_int``); since that is not
a gain everywhere, ``compiler._opaque_trip_retry`` compiles such a kernel both ways and keeps the opaque version
only where it spills no more and has less SASS (``NEWT_OPAQUE_TRIP=1`` always, ``=0`` never: the CUDA of before).

``_causal_dkdv`` is a small causal dK/dV kernel of that shape written here (the diagonal query blocks under the
mask, a constant number of them, then the rows below, unmasked).  Triton's tutorial file, where at hand, is
compiled through the drop-in (slow, skipped without it).  On the GPU (``-m gpu``) the kernel against float64
torch, both ways."""

from __future__ import annotations

import os
import sys

import pytest

import newt
import newt.language as nl
from newt.backend.cuda.compiler import kernel_text_bytes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hopper_kernels import count, loops, sass_text, tutorial_bwd

torch = pytest.importorskip("torch")


@newt.jit
def _causal_dkdv(Q, K, V, DO, DK, DV, M, D, stride_tok, n_rows, BN: nl.constexpr, BM: nl.constexpr,
                 HD: nl.constexpr, DIAG: nl.constexpr):
    # dK and dV of causal attention for BN keys: the query blocks on the diagonal (DIAG steps of BM rows under
    # the mask, row >= key), then the rows below it in steps of BM, unmasked.  M holds the forward's base-2
    # log-sum-exp per row, D = rowsum(O * dO)
    start_n = nl.program_id(0) * BN
    keys = start_n + nl.arange(0, BN)
    d = nl.arange(0, HD)
    k = nl.load(K + keys[:, None] * stride_tok + d[None, :])
    v = nl.load(V + keys[:, None] * stride_tok + d[None, :])
    dk = nl.zeros([BN, HD], nl.float32)
    dv = nl.zeros([BN, HD], nl.float32)
    row0 = start_n
    for _ in range(DIAG):
        rows = row0 + nl.arange(0, BM)
        qt = nl.load(Q + rows[None, :] * stride_tok + d[:, None])
        do = nl.load(DO + rows[:, None] * stride_tok + d[None, :])
        pt = nl.math.exp2(nl.dot(k, qt) - nl.load(M + rows)[None, :])
        pt = nl.where(rows[None, :] >= keys[:, None], pt, 0.0)
        dv += nl.dot(pt.to(nl.float16), do)
        dpt = nl.dot(v, nl.trans(do))
        dst = pt * (dpt - nl.load(D + rows)[None, :])
        dk += nl.dot(dst.to(nl.float16), nl.trans(qt))
        row0 += BM
    for r in range(row0, n_rows, BM):
        rows = r + nl.arange(0, BM)
        qt = nl.load(Q + rows[None, :] * stride_tok + d[:, None])
        do = nl.load(DO + rows[:, None] * stride_tok + d[None, :])
        pt = nl.math.exp2(nl.dot(k, qt) - nl.load(M + rows)[None, :])
        dv += nl.dot(pt.to(nl.float16), do)
        dpt = nl.dot(v, nl.trans(do))
        dst = pt * (dpt - nl.load(D + rows)[None, :])
        dk += nl.dot(dst.to(nl.float16), nl.trans(qt))
    nl.store(DK + keys[:, None] * stride_tok + d[None, :], dk.to(nl.float16))
    nl.store(DV + keys[:, None] * stride_tok + d[None, :], dv.to(nl.float16))


@pytest.fixture(autouse=True)
def _sm90(monkeypatch):
    monkeypatch.setenv("NEWT_TARGET", "sm_90a")
    for k in ("NEWT_TMA", "NEWT_DOT_LOWERING", "NEWT_DOT_FOLD_ADD", "NEWT_WGMMA_ZERO_START", "NEWT_RING_1D",
              "NEWT_ASYNC_RA", "NEWT_OPAQUE_TRIP", "NEWT_WARP_SPECIALIZE"):
        monkeypatch.delenv(k, raising=False)


def _compile(monkeypatch, mode: str | None, d: int = 128, bn: int = 128, N: int = 1024):
    if mode is None:
        monkeypatch.delenv("NEWT_OPAQUE_TRIP", raising=False)
    else:
        monkeypatch.setenv("NEWT_OPAQUE_TRIP", mode)
    _causal_dkdv.clear_cache()  # the flag is read at a specialization's first compile
    q = torch.empty(N, d, dtype=torch.float16)
    m = torch.empty(N, dtype=torch.float32)
    return _causal_dkdv.warmup(q, q, q, q, q, q, m, m, q.stride(0), N, BN=bn, BM=32, HD=d, DIAG=bn // 32,
                               num_warps=4, num_stages=5, grid=(N // bn,))


def test_the_constant_bound_costs_the_uniform_datapath_and_the_opaque_one_keeps_it(monkeypatch):
    """d=128, 128 keys, 4 warps (two 128x128 fp32 accumulators: ptxas spills either way).  With the constant
    (``=0``) both loops copy their descriptors to uniform registers (42 and 100 ``R2UR`` with NVRTC 13) and the
    diagonal loop's counter is a vector register; by trial (the default) the opaque bound is kept: no ``R2UR``
    in the diagonal loop, uniform counters (``UIADD3``), fewer instructions in both loops and fewer spill bytes
    (3,952 -> 3,264)."""
    off = _compile(monkeypatch, "0")
    on = _compile(monkeypatch, None)
    assert "opaque_int(" not in off.asm["cuda"] and "opaque_int(" in on.asm["cuda"]
    lo, ln = loops(sass_text(off)), loops(sass_text(on))
    assert len(lo) == len(ln) == 2, "the diagonal loop and the one after it"
    assert count(lo[0], "R2UR") >= 16 and count(lo[1], "R2UR") >= 32
    assert count(ln[0], "R2UR") == 0 and count(ln[1], "R2UR") < count(lo[1], "R2UR")
    assert count(lo[0], "UIADD3") < count(ln[0], "UIADD3")
    for a, b in zip(ln, lo):
        assert len(a) < len(b)
        assert count(a, "HGMMA") == count(b, "HGMMA")
    assert on.n_spills < off.n_spills


def test_always_mode_and_the_trial_agree_where_it_gains(monkeypatch):
    """``=1`` hides every constant bound without a trial; where that gains, the trial keeps the same CUDA."""
    one = _compile(monkeypatch, "1")
    trial = _compile(monkeypatch, None)
    assert "opaque_int(" in one.asm["cuda"] and one.asm["cuda"] == trial.asm["cuda"]


def test_the_trial_keeps_the_constant_where_the_opaque_bound_is_no_smaller(monkeypatch):
    """d=128 with 64 keys (no spill): the opaque version is not smaller (``=1`` shows it compiles to more SASS),
    so the trial keeps the first: the kernel of ``=0``."""
    trial = _compile(monkeypatch, None, bn=64)
    off = _compile(monkeypatch, "0", bn=64)
    one = _compile(monkeypatch, "1", bn=64)
    assert "opaque_int(" not in trial.asm["cuda"] and "opaque_int(" in one.asm["cuda"]
    t_trial, t_off, t_one = (kernel_text_bytes(k.asm["cubin"], k.metadata.name) for k in (trial, off, one))
    assert t_trial == t_off <= t_one
    assert trial.n_spills == off.n_spills <= one.n_spills


def test_run_time_bounds_are_left_as_they_are(monkeypatch):
    """A kernel whose pipelined loops all have run-time bounds: no trial (no ``const_trip_loops``) and the same
    CUDA in every mode."""
    @newt.jit
    def rows_times_cols(A, B, C, n, BM: nl.constexpr, BK: nl.constexpr):
        i = nl.program_id(0) * BM + nl.arange(0, BM)
        j = nl.arange(0, 64)
        acc = nl.zeros([BM, 64], nl.float32)
        for k0 in range(0, n, BK):
            kk = k0 + nl.arange(0, BK)
            acc += nl.dot(nl.load(A + i[:, None] * n + kk[None, :]), nl.load(B + kk[:, None] * 64 + j[None, :]))
        nl.store(C + i[:, None] * 64 + j[None, :], acc)

    a = torch.empty(128, 256, dtype=torch.float16)
    c = torch.empty(128, 64, dtype=torch.float32)
    srcs = []
    for mode in ("0", "1", None):
        if mode is None:
            monkeypatch.delenv("NEWT_OPAQUE_TRIP", raising=False)
        else:
            monkeypatch.setenv("NEWT_OPAQUE_TRIP", mode)
        rows_times_cols.clear_cache()
        ck = rows_times_cols.warmup(a, a, c, 256, BM=64, BK=64, num_warps=4, num_stages=3, grid=(2,))
        assert "const_trip_loops" not in ck.metadata
        srcs.append(ck.asm["cuda"])
    assert srcs[0] == srcs[1] == srcs[2] and "opaque_int(" not in srcs[0]


# ---- Triton's tutorial 06 through the drop-in (slow; skipped without the file) -----------------------------------

@pytest.mark.slow
def test_tutorial_causal_backward_d128(monkeypatch):
    """Triton's own ``_attn_bwd``, causal, d=128: its four loops lose their ``R2UR`` (38 / 100 / 52 / 80 with the
    constant bound, NVRTC 13) and shrink (618 / 1,069 / 477 / 616 -> 554 / 825 / 372 / 534 instructions; Triton 3.9:
    680 / 795 / 441 / 495), spill bytes 4,180 -> 3,916 (Triton: 5,028)."""
    pre = ("", "HGMMA", "R2UR")
    off, s_off, _ = tutorial_bwd(128, True, pre, {"NEWT_OPAQUE_TRIP": "0"})
    on, s_on, _ = tutorial_bwd(128, True, pre, {})
    assert len(off) == len(on) == 4
    assert s_on < s_off
    assert sum(r[2] for r in off) >= 100 and sum(r[2] for r in on) == 0
    for a, b in zip(on, off):
        assert a[0] < b[0] and a[1] == b[1]


# ---- GPU ----------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("mode", ["0", "1"])
def test_causal_dkdv_matches_torch_on_the_gpu(d, mode, monkeypatch):
    """``_causal_dkdv`` against float64 torch, with the constant bound and with the opaque one."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    monkeypatch.delenv("NEWT_TARGET", raising=False)
    monkeypatch.setenv("NEWT_OPAQUE_TRIP", mode)
    _causal_dkdv.clear_cache()
    N, BN = 1024, 128
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = ((torch.randn(N, d, device="cuda", generator=g) * 0.3).half() for _ in range(4))
    causal = torch.ones(N, N, device="cuda", dtype=torch.bool).tril()  # [row, key]: row >= key
    s = q.double() @ k.double().T
    m = s.masked_fill(~causal, float("-inf")).amax(1)
    p = torch.exp2(s - m[:, None]).masked_fill(~causal, 0.0)
    delta = (torch.randn(N, device="cuda", generator=g) * 0.1).double()
    ref_dv = p.T @ do.double()
    ref_dk = (p * (do.double() @ v.double().T - delta[:, None])).T @ q.double()
    dk, dv = torch.full_like(q, float("nan")), torch.full_like(q, float("nan"))
    _causal_dkdv[(N // BN,)](q, k, v, do, dk, dv, m.float().contiguous(), delta.float().contiguous(), q.stride(0), N,
                             BN=BN, BM=32, HD=d, DIAG=BN // 32, num_warps=4, num_stages=5)
    torch.cuda.synchronize()
    for got, ref in ((dk, ref_dk), (dv, ref_dv)):
        assert not got.isnan().any()
        err = (got.double() - ref).abs().max().item()
        assert err < 2e-2 * max(1.0, ref.abs().max().item()), err
