"""Tutorial 06's attention backward (issue 28) on sm_90a, offline: a kernel of the tutorial's shape (``_bwd``
below: a dK/dV loop over 32-row blocks of Q and dO read as ``qT`` through transposed pointers, a dQ loop over
32-column blocks of K and V, ``dv += tl.dot(p, do)`` and ``tl.trans`` operands, the tutorial's launch:
BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32, 4 warps, 5 stages) compiled as the drop-in compiles the
tutorial.  ``x += dot(a, b)`` accumulates on the tensor cores (dot/fold.py): no second accumulator, no FADD per
accumulator element, no spill in the loops.  When Triton's tutorial file is at hand (``.ext/triton-tutorials`` or
``$TUT_DIR``) its own ``_attn_bwd`` is compiled through the drop-in too.  On the GPU (``-m gpu``) the backward
against torch's autograd in float64."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

import newt
import newt.language as nl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hopper_kernels import count, loops, sass_text, tutorial_bwd

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


@newt.jit
def _dkdv(dk, dv, Q, k, v, DO, M, D, stride_tok, start_n, start_m, num_steps, BLOCK_M1: nl.constexpr,
          BLOCK_N1: nl.constexpr, HEAD_DIM: nl.constexpr, MASK: nl.constexpr):
    offs_m = start_m + nl.arange(0, BLOCK_M1)
    offs_n = start_n + nl.arange(0, BLOCK_N1)
    offs_k = nl.arange(0, HEAD_DIM)
    qT_ptrs = Q + offs_m[None, :] * stride_tok + offs_k[:, None]
    do_ptrs = DO + offs_m[:, None] * stride_tok + offs_k[None, :]
    curr_m = start_m
    for _ in range(num_steps):
        qT = nl.load(qT_ptrs)
        offs_m = curr_m + nl.arange(0, BLOCK_M1)
        m = nl.load(M + offs_m)
        pT = nl.math.exp2(nl.dot(k, qT) - m[None, :])
        if MASK:
            pT = nl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        do = nl.load(do_ptrs)
        dv += nl.dot(pT.to(nl.float16), do)
        Di = nl.load(D + offs_m)
        dpT = nl.dot(v, nl.trans(do))
        dsT = (pT * (dpT - Di[None, :])).to(nl.float16)
        dk += nl.dot(dsT, nl.trans(qT))
        curr_m += BLOCK_M1
        qT_ptrs += BLOCK_M1 * stride_tok
        do_ptrs += BLOCK_M1 * stride_tok
    return dk, dv


@newt.jit
def _dq(dq, q, K, V, do, m, D, stride_tok, start_m, start_n, num_steps, BLOCK_M2: nl.constexpr,
        BLOCK_N2: nl.constexpr, HEAD_DIM: nl.constexpr, MASK: nl.constexpr):
    offs_m = start_m + nl.arange(0, BLOCK_M2)
    offs_n = start_n + nl.arange(0, BLOCK_N2)
    offs_k = nl.arange(0, HEAD_DIM)
    kT_ptrs = K + offs_n[None, :] * stride_tok + offs_k[:, None]
    vT_ptrs = V + offs_n[None, :] * stride_tok + offs_k[:, None]
    Di = nl.load(D + offs_m)
    curr_n = start_n
    for _ in range(num_steps):
        kT = nl.load(kT_ptrs)
        vT = nl.load(vT_ptrs)
        p = nl.math.exp2(nl.dot(q, kT) - m)
        if MASK:
            offs_n = curr_n + nl.arange(0, BLOCK_N2)
            p = nl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        dp = nl.dot(do, vT)
        ds = (p * (dp - Di[:, None])).to(nl.float16)
        dq += nl.dot(ds, nl.trans(kT))
        curr_n += BLOCK_N2
        kT_ptrs += BLOCK_N2 * stride_tok
        vT_ptrs += BLOCK_N2 * stride_tok
    return dq


@newt.jit
def _bwd(Q, K, V, sm_scale, DO, DQ, DK, DV, M, D, stride_h, stride_tok, N_CTX, BLOCK_M1: nl.constexpr,
         BLOCK_N1: nl.constexpr, BLOCK_M2: nl.constexpr, BLOCK_N2: nl.constexpr, SLICE: nl.constexpr,
         HEAD_DIM: nl.constexpr, CAUSAL: nl.constexpr):
    # one (head, BLOCK_N1 keys) tile of dK / dV, then one (head, BLOCK_M2 queries) tile of dQ; K comes pre-scaled
    # by sm_scale / ln 2, M holds the forward's row maxima plus log2 of the row sums, D = rowsum(O * dO)
    bh = nl.program_id(2)
    pid = nl.program_id(0)
    adj = (stride_h * bh).to(nl.int64)
    Q += adj
    K += adj
    V += adj
    DO += adj
    DQ += adj
    DK += adj
    DV += adj
    M += bh * N_CTX
    D += bh * N_CTX
    offs_k = nl.arange(0, HEAD_DIM)
    start_n = pid * BLOCK_N1
    offs_n = start_n + nl.arange(0, BLOCK_N1)
    dv = nl.zeros([BLOCK_N1, HEAD_DIM], dtype=nl.float32)
    dk = nl.zeros([BLOCK_N1, HEAD_DIM], dtype=nl.float32)
    k = nl.load(K + offs_n[:, None] * stride_tok + offs_k[None, :])
    v = nl.load(V + offs_n[:, None] * stride_tok + offs_k[None, :])
    start_m = 0
    if CAUSAL:
        start_m = start_n
        steps = BLOCK_N1 // (BLOCK_M1 // SLICE)
        dk, dv = _dkdv(dk, dv, Q, k, v, DO, M, D, stride_tok, start_n, start_m, steps, BLOCK_M1 // SLICE, BLOCK_N1,
                       HEAD_DIM, True)
        start_m += steps * (BLOCK_M1 // SLICE)
    dk, dv = _dkdv(dk, dv, Q, k, v, DO, M, D, stride_tok, start_n, start_m, (N_CTX - start_m) // BLOCK_M1,
                   BLOCK_M1, BLOCK_N1, HEAD_DIM, False)
    nl.store(DV + offs_n[:, None] * stride_tok + offs_k[None, :], dv)
    dk *= sm_scale
    nl.store(DK + offs_n[:, None] * stride_tok + offs_k[None, :], dk)
    start_m = pid * BLOCK_M2
    offs_m = start_m + nl.arange(0, BLOCK_M2)
    q = nl.load(Q + offs_m[:, None] * stride_tok + offs_k[None, :])
    do = nl.load(DO + offs_m[:, None] * stride_tok + offs_k[None, :])
    dq = nl.zeros([BLOCK_M2, HEAD_DIM], dtype=nl.float32)
    m = nl.load(M + offs_m)[:, None]
    start_n = 0
    steps = N_CTX // BLOCK_N2
    if CAUSAL:
        end_n = start_m + BLOCK_M2
        steps = BLOCK_M2 // (BLOCK_N2 // SLICE)
        dq = _dq(dq, q, K, V, do, m, D, stride_tok, start_m, end_n - steps * (BLOCK_N2 // SLICE), steps, BLOCK_M2,
                 BLOCK_N2 // SLICE, HEAD_DIM, True)
        end_n -= steps * (BLOCK_N2 // SLICE)
        steps = end_n // BLOCK_N2
        start_n = end_n - steps * BLOCK_N2
    dq = _dq(dq, q, K, V, do, m, D, stride_tok, start_m, start_n, steps, BLOCK_M2, BLOCK_N2, HEAD_DIM, False)
    dq *= 0.6931471824645996
    nl.store(DQ + offs_m[:, None] * stride_tok + offs_k[None, :], dq)


#: the tutorial's backward launch (Triton 3.6's 06-fused-attention.py, ``_attention.backward``)
LAUNCH = dict(BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32, num_warps=4, num_stages=5)


def compile_bwd(d=64, causal=False, H=2, N=1024):
    q = torch.empty(H, N, d, dtype=torch.float16)
    m = torch.empty(H, N, dtype=torch.float32)
    return _bwd.warmup(q, q, q, 0.5, q, q, q, q, m, m, q.stride(0), q.stride(1), N, SLICE=2, HEAD_DIM=d,
                       CAUSAL=causal, grid=(N // 128, 1, H), **LAUNCH)


@pytest.fixture(autouse=True)
def _sm90(monkeypatch):
    monkeypatch.setenv("NEWT_TARGET", "sm_90a")
    for k in ("NEWT_TMA", "NEWT_CPASYNC_FENCE", "NEWT_PIPE_ISSUE", "NEWT_CONVERT_ADDR", "NEWT_DOT_LOWERING",
              "NEWT_DOT_FOLD_ADD"):
        monkeypatch.delenv(k, raising=False)


def _loops(ck) -> list:
    return loops(sass_text(ck))


def _fresh(monkeypatch, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    _bwd.clear_cache()  # the flags are read at a specialization's first compile


@pytest.mark.parametrize("d", [64, 128])
def test_accumulating_dots_fold_into_the_accumulator(d, monkeypatch):
    """``dv += tl.dot(p, do)`` / ``dk += ...`` / ``dq += ...``: wgmma accumulates into the loop-carried tile.
    Without the fold (``NEWT_DOT_FOLD_ADD=0``, the behaviour before) each of them is a dot into a fresh zero
    accumulator plus one FADD per element (64 a thread per 128x64 fp32 tile at d=64), and the two accumulators
    of the dK/dV loop (128 registers at d=64) spill: 792 bytes at d=64.  At d=128 the two 128x128 fp32
    accumulators alone are 256 registers a thread: both ways spill (so does Triton 3.9: 3,476 bytes), the fold
    less."""
    _fresh(monkeypatch, {})
    ck = compile_bwd(d)
    body = _loops(ck)
    assert len(body) == 2, "the dK/dV and the dQ loop"
    acc_elems = 128 * d // 128  # one 128 x d fp32 tile over 128 threads: elements a thread
    for b in body:
        assert count(b, "HGMMA") >= 20
        # exp2's argument (qkT - m) and dpT - Di are the only FADDs left: one 128x32 (32x128) tile each, 32 a thread
        assert count(b, "FADD") <= 64 < acc_elems + 64
        if d == 64:
            assert count(b, "STL") == count(b, "LDL") == 0
    if d == 64:
        assert ck.n_spills <= 64
    _fresh(monkeypatch, {"NEWT_DOT_FOLD_ADD": "0"})
    off = compile_bwd(d)
    assert count(max(_loops(off), key=len), "FADD") >= 64 + 2 * acc_elems
    assert off.n_spills > ck.n_spills


def test_causal_backward_has_four_clean_loops(monkeypatch):
    """The causal backward (the masked diagonal loops first): four loops, none spills."""
    _fresh(monkeypatch, {})
    ck = compile_bwd(64, causal=True)
    body = _loops(ck)
    assert len(body) == 4
    for b in body:
        assert count(b, "HGMMA") >= 10 and count(b, "STL") == count(b, "LDL") == 0
    assert ck.n_spills <= 64


def test_fold_applies_only_to_a_zero_accumulator_used_once():
    """Unit: ``x + dot(a, b, 0)`` folds; a dot whose result has a second use, or whose accumulator is not zero,
    stays a dot and an add."""
    from newt.backend.cuda.dot.fold import fold_dot_adds
    from newt.frontend import build_ir
    from newt.language.core import pointer_type

    @newt.jit
    def k(a_ptr, o_ptr, USE_TWICE: nl.constexpr, ACC_ONE: nl.constexpr):
        r = nl.arange(0, 16)
        a = nl.load(a_ptr + r[:, None] * 16 + r[None, :])
        acc = nl.zeros([16, 16], dtype=nl.float32)
        for _ in range(4):
            if ACC_ONE:
                d = nl.dot(a, a, nl.full([16, 16], 1.0, nl.float32))
            else:
                d = nl.dot(a, a)
            acc += d
            if USE_TWICE:
                acc += d * 2.0
        nl.store(o_ptr + r[:, None] * 16 + r[None, :], acc)

    types = {"a_ptr": pointer_type(nl.float16), "o_ptr": pointer_type(nl.float32)}
    for twice, one, folds in ((False, False, 1), (True, False, 0), (False, True, 0)):
        fn = build_ir(k, types, {"USE_TWICE": twice, "ACC_ONE": one})
        n_dot = sum(op.name == "dot" for op in fn.walk())
        n_add = sum(op.name == "add" for op in fn.walk())
        assert fold_dot_adds(fn) == folds
        assert sum(op.name == "dot" for op in fn.walk()) == n_dot
        assert sum(op.name == "add" for op in fn.walk()) == n_add - folds
        if folds:
            dot = next(op for op in fn.walk() if op.name == "dot")
            assert dot.operands[2].owner.__class__.__name__ == "Region"  # the loop-carried acc


@pytest.mark.slow
@pytest.mark.parametrize("d", [64, 128])
def test_tutorial_file_backward_compiles_like_this_one(d):
    """Triton 3.6's own ``_attn_bwd`` through the drop-in (``--capability 9.0``): HGMMA for every dot, the
    accumulating ones folded (FADDs: 64 a thread per loop), at d=64 no spill store or load in its loops."""
    counts, spills, _ = tutorial_bwd(d, False, ("HGMMA", "FADD", "STL", "LDL"))
    assert len(counts) == 2
    for hg, fadd, stl, ldl in counts:
        assert hg >= 20 and fadd <= 64 and (d == 128 or stl + ldl == 0)
    assert d == 128 or spills <= 64  # d=128: 256 accumulator registers, spills like Triton's


def _reference(q, k, v, do, causal, sm_scale):
    qd, kd, vd = (t.double().detach().requires_grad_() for t in (q, k, v))
    s = qd @ kd.transpose(-1, -2) * sm_scale
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool, device=q.device), 1), float("-inf"))
    p = torch.softmax(s, -1)
    o = p @ vd
    o.backward(do.double())
    lse = torch.logsumexp(s, -1)
    return o, lse, qd.grad, kd.grad, vd.grad


@pytest.mark.gpu
@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, False), (128, True)])
@pytest.mark.parametrize("fold,async_ra", [("1", "0"), ("0", "0"), ("1", "1")])
def test_backward_matches_torch_on_the_gpu(d, causal, fold, async_ra, monkeypatch):
    """The backward above (the tutorial's algorithm and launch) against torch's float64 autograd, with the
    accumulating dots folded (default) and not, and with the opt-in in-flight register-A accumulations."""
    monkeypatch.delenv("NEWT_TARGET", raising=False)
    _fresh(monkeypatch, {"NEWT_DOT_FOLD_ADD": fold, "NEWT_ASYNC_RA": async_ra})
    H, N = 3, 1024
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(H, N, d, device="cuda", generator=g, dtype=torch.float16) for _ in range(4))
    sm_scale = 0.5 / math.sqrt(d)
    o, lse, dq_ref, dk_ref, dv_ref = _reference(q, k, v, do, causal, sm_scale)
    o16 = o.detach().half()
    M = (lse / math.log(2)).float().contiguous()  # the forward's m_i + log2(l_i), in log2 units
    delta = (o16.float() * do.float()).sum(-1).contiguous()
    k_scaled = (k * (sm_scale / math.log(2))).contiguous()
    dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
    _bwd[(N // 128, 1, H)](q, k_scaled, v, sm_scale, do, dq, dk, dv, M, delta, q.stride(0), q.stride(1), N,
                           SLICE=2, HEAD_DIM=d, CAUSAL=causal, **LAUNCH)
    torch.cuda.synchronize()
    for got, ref, name in ((dq, dq_ref, "dq"), (dk, dk_ref, "dk"), (dv, dv_ref, "dv")):
        assert not got.isnan().any(), name
        err = (got.double() - ref).abs().max().item()
        assert err < 2e-2 * max(1.0, ref.abs().max().item()), (name, err)


# ---- fp8 forward: P from registers (dot/fp8_regs.py) ---------------------------------------------------------------

def _fp8_fwd(d, monkeypatch, mode=None):
    from test_tut06_attention import _desc_attn, compile_desc_attn
    monkeypatch.setenv("NEWT_TMA", "0")  # the cp.async pipeline's fp8 path (descriptor tiles default to TMA)
    if mode is None:
        monkeypatch.delenv("NEWT_FP8_A_REGS", raising=False)
    else:
        monkeypatch.setenv("NEWT_FP8_A_REGS", mode)
    _desc_attn.clear_cache()
    return compile_desc_attn(d=d, dt=torch.float8_e5m2, cfg=(128, 64, 4, 2))


@pytest.mark.parametrize("d", [64, 128])
def test_fp8_p_goes_to_qgmma_from_registers(d, monkeypatch):
    """Tutorial 06's fp8 forward (V stored transposed): ``p.to(fp8)`` feeds P·V's QGMMA from registers, four
    elements converted to a word by two F2FP pairs and put in the A fragment by quad shuffles: no store of P to
    shared memory, the loop's one barrier (the pipeline's).  Before (``NEWT_FP8_A_REGS=0``) P went through shared
    memory every iteration: 32 STS, three barriers, one F2FP and a NaN test per element, ~1,340 instructions."""
    ck = _fp8_fwd(d, monkeypatch, "1")
    body = max(_loops(ck), key=len)
    cu = ck.asm["cuda"]
    assert "quad shuffles" in cu and "stage operand a" not in cu
    assert count(body, "QGMMA") >= 8 and count(body, "HGMMA") == 0
    assert count(body, "STS") == 0 and count(body, "BAR.SYNC") == 1
    assert count(body, "F2FP") == 32  # 128x64 P over 128 threads: 64 elements, two a conversion
    assert count(body, "FSETP") == 0
    # the QK dot's 4 (d=64) or 6 instructions and P·V's 4 each get one WARPGROUP.ARRIVE before them at most:
    # ptxas did not serialize the wgmmas (one ARRIVE + DEPBAR per instruction)
    assert count(body, "WARPGROUP") <= 6
    assert len(body) < 800
    assert ck.n_spills == 0
    # the default since the H100 run of session 12 (unset is the register path); NEWT_FP8_A_REGS=0 stages P
    assert max(_loops(_fp8_fwd(d, monkeypatch)), key=len) == body
    off = max(_loops(_fp8_fwd(d, monkeypatch, "0")), key=len)
    assert count(off, "STS") >= 32 and count(off, "BAR.SYNC") >= 3 and len(off) > len(body) + 400


def test_fp8_byte_mode_keeps_p_v_in_flight(monkeypatch):
    """``NEWT_FP8_A_REGS=bytes``: the cast's bytes shuffled, P·V left in flight into the next iteration (its
    wait is ``wgmma_wait<1>``); still no shared-memory P."""
    ck = _fp8_fwd(64, monkeypatch, "bytes")
    cu = ck.asm["cuda"]
    assert "quad shuffles" in cu and "wgmma_wait<1>" in cu
    body = max(_loops(ck), key=len)
    assert count(body, "STS") == 0 and count(body, "BAR.SYNC") == 1 and count(body, "F2FP") == 64


def test_fp8_quad_shuffle_scheme_builds_the_ptx_a_fragment():
    """The scheme fp8_regs.py emits, run in Python over a quad: lane t holds the accumulator layout's column
    pairs ``8 j + 2 t, + 1``; after packing X0 = groups (0, 2), X1 = groups (1, 3), reading ``odd ? X1 : X0`` from
    lane qa and ``odd ? X0 : X1`` from ``qa ^ 1`` and the two ``prmt``, register q of lane t holds the bytes of
    columns ``4 t .. 4 t + 3`` (q = 0, 1) and ``16 + 4 t ..`` (q = 2, 3), as PTX's m64nNk32 A fragment says."""
    def byte_perm(x, y, s):
        b = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
        return sum(b[(s >> (4 * i)) & 7] << (8 * i) for i in range(4))

    def pair(t, g):  # the column numbers (as the byte values) of lane t's pair in column group g
        return (8 * g + 2 * t) | ((8 * g + 2 * t + 1) << 8)

    x = {t: (pair(t, 0) | pair(t, 2) << 16, pair(t, 1) | pair(t, 3) << 16) for t in range(4)}
    for lane in range(32):
        t, base = lane & 3, lane & ~3
        qa = base | ((lane & 1) << 1) | ((lane >> 1) & 1)
        s_lo, s_hi = (0x1054, 0x3276) if lane & 2 else (0x5410, 0x7632)

        def sent(src_lane, first):
            o = src_lane & 1
            x0, x1 = x[src_lane & 3]
            return (x1 if o else x0) if first else (x0 if o else x1)

        ya, yb = sent(qa, True), sent(qa ^ 1, False)
        lo, hi = byte_perm(ya, yb, s_lo), byte_perm(ya, yb, s_hi)
        assert [(lo >> (8 * i)) & 0xFF for i in range(4)] == [4 * t + i for i in range(4)], lane
        assert [(hi >> (8 * i)) & 0xFF for i in range(4)] == [16 + 4 * t + i for i in range(4)], lane


# ---- m and Di in the dK/dV loop: loaded in the accumulator's slice layout (plan.py) -----------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_row_vectors_load_in_the_accumulator_slice(causal, monkeypatch):
    """``m = tl.load(M + offs_m)`` / ``Di`` broadcast against ``qkT`` / ``dpT`` (wgmma accumulators) load straight
    in the accumulator's column slice (LDG.64, each lane its own columns): the dK/dV loop keeps one barrier (the
    pipeline's) and stores nothing to shared memory.  ``NEWT_SLICE_LOADS=0`` (the coalesced layout, before): each
    goes through shared memory, two more barriers apiece."""
    _fresh(monkeypatch, {})
    ck = compile_bwd(64, causal=causal)
    dkdv = [b for b in _loops(ck) if count(b, "HGMMA") >= 24 or (causal and count(b, "FSEL") and
                                                                   count(b, "HGMMA") == 20 and count(b, "LDG"))]
    assert dkdv, "no dK/dV loop found"
    for b in dkdv:
        assert count(b, "BAR.SYNC") == 1 and count(b, "STS") == 0
        assert count(b, "LDG.E.64") >= 4  # m and Di: 8-byte loads (four each for 32 columns, two for 16)
    assert ck.n_spills <= 16  # causal: 8 bytes with dv/dk in flight (Triton 3.9: 164)
    _fresh(monkeypatch, {"NEWT_SLICE_LOADS": "0"})
    off = compile_bwd(64, causal=causal)
    assert max(count(b, "BAR.SYNC") for b in _loops(off)) >= 5


def test_register_a_accumulations_stay_in_flight(monkeypatch):
    """d=64: ``dv += dot(p, do)`` and ``dk += dot(ds, qT^T)`` (A in registers, B from the cp.async ring) stay in
    flight as in Triton's schedule: dv until dpT's wait, dk until the next iteration's QK wait (one
    ``wgmma_wait<1>`` each; dq's too), with no spill: the default since the H100 run of session 12 (unset or
    ``NEWT_ASYNC_RA=1``).  ``NEWT_ASYNC_RA=0``: every dot waits at once."""
    _fresh(monkeypatch, {"NEWT_ASYNC_RA": "1"})
    ck = compile_bwd(64)
    cu = ck.asm["cuda"]
    assert cu.count("wgmma_wait<1>") == 3
    assert ck.n_spills == 0
    assert compile_bwd(128).asm["cuda"].count("wgmma_wait<1>") == 0  # 256 accumulator registers: waited
    _fresh(monkeypatch, {"NEWT_ASYNC_RA": "0"})
    assert compile_bwd(64).asm["cuda"].count("wgmma_wait<1>") == 0
    monkeypatch.delenv("NEWT_ASYNC_RA")
    _bwd.clear_cache()
    assert compile_bwd(64).asm["cuda"].count("wgmma_wait<1>") == 3


@pytest.mark.parametrize("causal", [False, True])
def test_backward_matches_torch_in_the_interpreter(causal, monkeypatch):
    """The kernel and the reference of the GPU test above agree in newt's interpreter (N=256, one head)."""
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    _bwd.clear_cache()
    H, N, d = 1, 256, 64
    g = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(H, N, d, generator=g).half() for _ in range(4))
    sm_scale = 0.5 / math.sqrt(d)
    o, lse, dq_ref, dk_ref, dv_ref = _reference(q, k, v, do, causal, sm_scale)
    M = (lse / math.log(2)).float().contiguous()
    delta = (o.detach().half().float() * do.float()).sum(-1).contiguous()
    k_scaled = (k * (sm_scale / math.log(2))).contiguous()
    dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
    _bwd[(N // 128, 1, H)](q, k_scaled, v, sm_scale, do, dq, dk, dv, M, delta, q.stride(0), q.stride(1), N,
                           SLICE=2, HEAD_DIM=d, CAUSAL=causal, **LAUNCH)
    for got, ref in ((dq, dq_ref), (dk, dk_ref), (dv, dv_ref)):
        assert not got.isnan().any()
        assert (got.double() - ref).abs().max().item() < 2e-3 * max(1.0, ref.abs().max().item())


def test_zero_accumulator_dots_start_with_scale_d_zero(monkeypatch):
    """``qkT = tl.dot(k, qT)`` and ``dpT = tl.dot(v, tl.trans(do))`` (zero accumulators): their first k step is a
    wgmma with scale-d 0 and a write-only accumulator, so no zeros are moved into the accumulator registers
    every iteration (``NEWT_WGMMA_ZERO_START=1``; ``=trial``: tried by a second compile and kept where it wins, see
    ``compiler._zero_start_retry`` and test_causal_masks.py).  Causal d=64, the unmasked dK/dV loop: 64 IMAD
    (``IMAD.MOV`` of a zero register) without it (``=0``), 18 with it (Triton 3.9: 14)."""
    _fresh(monkeypatch, {"NEWT_WGMMA_ZERO_START": "1"})
    ck = compile_bwd(64, causal=True)
    assert "_z(&" in ck.asm["cuda"]
    on = _loops(ck)[1]
    _fresh(monkeypatch, {"NEWT_WGMMA_ZERO_START": "0"})
    off_ck = compile_bwd(64, causal=True)
    assert "_z(&" not in off_ck.asm["cuda"]
    off = _loops(off_ck)[1]
    assert count(on, "HGMMA") == count(off, "HGMMA") == 24
    assert count(on, "IMAD.MOV") + 30 <= count(off, "IMAD.MOV")
    assert len(on) + 30 <= len(off)
