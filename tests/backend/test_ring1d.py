"""1-D loads through the cp.async ring (issues 24/28, ``NEWT_RING_1D=1``; pipeline.py ``RingRow``).

A 1-D block load in a software-pipelined loop whose address advances with the loop -- tutorial 06's
``m = tl.load(M + offs_m)`` and ``Di = tl.load(D + offs_m)`` in its dK/dV loop, used as ``x[None, :]`` against a
wgmma accumulator -- is copied by cp.async into a ring of its own, ``num_stages - 1`` iterations ahead in the 2-D
tiles' commit groups, and read back from shared memory in the value's layout (the accumulator's column slice)
where it is first used.  Without the flag (the default) such a load stays LDGs in the loop body, issued after
QK's wgmma wait: the loop waits on them.  Offline: the generated CUDA's copy / commit / wait / read order, the
copy widths (4, 8 or 16 bytes from the axis analysis; no ring where 4 bytes cannot be reached), the SASS of
tutorial 06's backward (no LDG of m / Di in the dK/dV loops, two more LDGSTS, no new spill bytes, shared memory
that keeps 2 blocks per SM at d=64), and the flag off leaves the generated code as it was.  On the GPU
(``-m gpu``): a small ring kernel and the backward against torch."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

import newt
import newt.language as nl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hopper_kernels import count, loops, sass_text, tutorial_bwd

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
#: sm_90's shared memory per SM and what the runtime reserves per block: 2 blocks fit below 115,712 bytes each
SM_SHARED, BLOCK_RESERVED = 233472, 1024


@pytest.fixture(autouse=True)
def _sm90(monkeypatch):
    monkeypatch.setenv("NEWT_TARGET", "sm_90a")
    for k in ("NEWT_TMA", "NEWT_CPASYNC_FENCE", "NEWT_PIPE_ISSUE", "NEWT_CONVERT_ADDR", "NEWT_DOT_LOWERING",
              "NEWT_DOT_FOLD_ADD", "NEWT_SLICE_LOADS", "NEWT_ASYNC_RA", "NEWT_WGMMA_ZERO_START", "NEWT_RING_1D",
              "NEWT_WARP_SPECIALIZE"):
        monkeypatch.delenv(k, raising=False)
    # the ring was built and measured with every dot of the backward waited at once (the default until session 12):
    # with dv/dk in flight too (NEWT_ASYNC_RA, now on by default) the ring's extra buffers take the d=64 backward
    # past two blocks per SM (2 x 117,760 > 233,472 bytes), so the two stay separate: the ring is opt-in and off
    monkeypatch.setenv("NEWT_ASYNC_RA", "0")


def _ring(monkeypatch, on):
    if on is None:
        monkeypatch.delenv("NEWT_RING_1D", raising=False)
    else:
        monkeypatch.setenv("NEWT_RING_1D", on)


@newt.jit
def _ring_mm(A, B, R, O, K, n_valid, stride_a, stride_b, BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr,
             BLOCK_K: nl.constexpr, MASK: nl.constexpr, OTHER: nl.constexpr, CARRIED: nl.constexpr):
    # acc = sum over k blocks of (A_k @ B_k) * r_k[None, :], r_k = R[k // BLOCK_K] (a row per iteration, through
    # a loop-carried pointer or from the induction variable), masked to its first n_valid columns
    offs_m = nl.arange(0, BLOCK_M)
    offs_n = nl.arange(0, BLOCK_N)
    offs_k = nl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * stride_a + offs_k[None, :]
    b_ptrs = B + offs_k[:, None] * stride_b + offs_n[None, :]
    r_ptr = R
    r_ptrs = R + offs_n
    acc = nl.zeros([BLOCK_M, BLOCK_N], dtype=nl.float32)
    for k in range(0, K, BLOCK_K):
        a = nl.load(a_ptrs)
        b = nl.load(b_ptrs)
        if CARRIED == 2:  # a loop-carried pointer block (anchored: the copy keeps the load's own layout)
            rp = r_ptrs
        elif CARRIED:
            rp = r_ptr + offs_n
        else:
            rp = R + (k // BLOCK_K) * BLOCK_N + offs_n
        if MASK == 2:  # constant over pairs of columns: 8-byte copies of fp32
            r = nl.load(rp, mask=(offs_n // 2) * 2 < n_valid, other=OTHER)
        elif MASK:
            r = nl.load(rp, mask=offs_n < n_valid, other=OTHER)
        else:
            r = nl.load(rp)
        acc += nl.dot(a, b) * r[None, :].to(nl.float32)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_b
        r_ptr += BLOCK_N
        r_ptrs += BLOCK_N
    nl.store(O + offs_m[:, None] * BLOCK_N + offs_n[None, :], acc)


CFG = dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=32)


def compile_ring(mask=False, other=0.0, carried=1, rdt="fp32", aligned=True, stages=3):
    h = ":16" if aligned else ""
    sig = {"A": "*fp16:16", "B": "*fp16:16", "R": f"*{rdt}{h}", "O": "*fp32:16", "K": "i32:16", "n_valid": "i32",
           "stride_a": "i32:16", "stride_b": "i32:16"}
    return newt.compile(_ring_mm, signature=sig, constexprs={**CFG, "MASK": mask, "OTHER": other,
                                                             "CARRIED": carried},
                        target="sm_90a", num_warps=4, num_stages=stages, cache=False)


def _plain_ldg(body) -> int:
    return count(body, "LDG.E")  # (not LDGSTS, not LDGDEPBAR)


# (variant, the cp.async width of the row's copies): fp32 rows 16 bytes a copy where contiguous and aligned,
# 8 under a mask constant over column pairs, 4 where a run-time mask (constancy 1) or an unknown alignment allows
# one element, 4 through a loop-carried pointer block (the load's coalesced layout: one element a thread);
# fp16 rows 16 bytes
VARIANTS = [
    ({}, 16),
    ({"carried": 0}, 16),
    ({"carried": 2}, 4),
    ({"mask": True}, 4),
    ({"mask": True, "other": 2.0}, 4),
    ({"mask": 2, "other": -1.0}, 8),
    ({"rdt": "fp16"}, 16),
    ({"aligned": False}, 4),
]


@pytest.mark.parametrize("kw,width", VARIANTS, ids=[str(v[0]) or "plain" for v in VARIANTS])
def test_row_loads_go_through_the_ring(kw, width, monkeypatch):
    """The row's LDGs leave the loop: one more LDGSTS (the row's copy, predicated to the threads that own its
    elements), its value read with LDS; without the flag a plain LDG in the loop."""
    _ring(monkeypatch, "1")
    ck = compile_ring(**kw)
    cu = ck.asm["cuda"]
    assert f"cp_async_{width}_own(" in cu
    body = max(loops(sass_text(ck)), key=len)
    _ring(monkeypatch, None)
    off_ck = compile_ring(**kw)
    off = max(loops(sass_text(off_ck)), key=len)
    assert "_own(" not in off_ck.asm["cuda"]
    assert _plain_ldg(body) == 0 < _plain_ldg(off)
    assert count(body, "LDGSTS") == count(off, "LDGSTS") + 1
    assert count(body, "LDS") > count(off, "LDS")
    suffix = {16: "LDGSTS.E.BYPASS.128", 8: "LDGSTS.E.64", 4: "LDGSTS.E "}[width]
    assert any(x.startswith(suffix) for x in body)
    assert ck.n_spills == off_ck.n_spills == 0


def test_a_row_that_cannot_copy_4_bytes_stays_a_load(monkeypatch):
    """fp16 with a run-time mask: one element (2 bytes) a copy, below cp.async's 4: no ring, the code is the
    code without the flag."""
    _ring(monkeypatch, "1")
    on = compile_ring(mask=True, rdt="fp16").asm["cuda"]
    _ring(monkeypatch, None)
    assert on == compile_ring(mask=True, rdt="fp16").asm["cuda"]


def test_copies_commit_with_the_tiles_and_are_read_after_the_wait(monkeypatch):
    """The generated CUDA, 3 stages: each prologue iteration copies the row into buffer s of its ring before the
    group's ``cp_async_commit``; in the loop, ``cp_async_wait<1>`` and the barrier, then iteration it + 2's tiles
    and row into buffer ``wr`` and the commit, then the body reads buffer ``rd`` of the row's ring -- after the
    dot (where it is first used), with ``other`` where the mask is off; ``cp_async_wait<0>`` after the loop."""
    _ring(monkeypatch, "1")
    cu = compile_ring(mask=True, other=2.0).asm["cuda"]
    pipe = cu[cu.index("// software pipeline, 3 stages"):]
    ring = re.search(r"cp_async_4_own\(smem_u32\(smem \+ (SMEM_PIPE\d+) \+ \(0\) \* (\d+) ", pipe)
    assert ring, "no row copy in the first prologue iteration"
    buf, slot = ring.group(1), int(ring.group(2))
    assert slot == 64 * 4  # one 64-element fp32 row a buffer
    prologue = pipe[:pipe.index("int rd")]
    parts = prologue.split("// prologue: iteration ")[1:]
    assert len(parts) == 2
    for s, part in enumerate(parts):
        row = part.index(f"cp_async_4_own(smem_u32(smem + {buf} + ({s}) * {slot}")
        tiles = [m.start() for m in re.finditer(r"cp_async_16\(", part)]
        assert len(tiles) == 2 and max(tiles) < row < part.index("cp_async_commit();")
    loop = pipe[pipe.index("int rd"):pipe.index("cp_async_wait<0>();")]
    rd, wr = re.search(r"int (rd\d+) = 0, (wr\d+) = 2;", loop).groups()
    order = [loop.index(x) for x in ("cp_async_wait<1>();", "__syncthreads();",
                                     f"cp_async_4_own(smem_u32(smem + {buf} + ({wr}) * {slot}", "cp_async_commit();",
                                     "wgmma_commit();", f"(smem + {buf} + {rd} * {slot})")]
    assert order == sorted(order), order
    read = loop.index(f"(smem + {buf} + {rd} * {slot})")
    assert re.search(r"if \(!v\d+(_\d+)?\[i\]\) v\d+\[i\] = ", loop[read:]), "other= where the mask is off"
    assert loop.count("cp_async_commit();") == 1 and loop.count("__syncthreads();") == 1
    assert "cp_async_wait<0>();" in pipe


def test_rows_are_planned_only_for_loads_that_advance(monkeypatch):
    """The planner: tutorial 06's backward at d=64 gets exactly two rows, m and Di of the dK/dV loop (the dQ
    loop's Di is loaded once before its loop); none without the flag."""
    from test_tut06_bwd import _bwd, compile_bwd

    import newt.backend.cuda.codegen as cg

    seen = []

    def spy(*a, **k):
        seen.append(real(*a, **k))
        return seen[-1]
    real = cg.plan_pipelines
    monkeypatch.setattr(cg, "plan_pipelines", spy)

    def rows():
        seen.clear()
        _bwd.clear_cache()
        compile_bwd(64)
        pipes = seen[-1]
        return [(p.loop, rw) for p, rw in pipes.rows.values()], pipes

    _ring(monkeypatch, "1")
    got, pipes = rows()
    assert len(got) == 2 and got[0][0] is got[1][0]
    for _loop, rw in got:
        assert rw.vec * rw.elem_bytes == 16 and rw.slot == 32 * 4
        assert rw.op.result.type.element_ty.name == "fp32"
    _ring(monkeypatch, None)
    assert not rows()[0]


# ---- tutorial 06's backward (test_tut06_bwd.py's kernel, the tutorial's launch) --------------------------------

def _bwd_on_off(monkeypatch, d, causal):
    from test_tut06_bwd import _bwd, compile_bwd
    out = []
    for on in ("1", None):
        _ring(monkeypatch, on)
        _bwd.clear_cache()
        out.append(compile_bwd(d, causal=causal))
    return out


@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, False), (128, True)])
def test_backward_reads_m_and_di_from_the_ring(d, causal, monkeypatch):
    """With the flag, the dK/dV loops (SASS loops 1, and 1-2 causal) load nothing with LDG: m and Di are two
    more LDGSTS (16 bytes a copy) and LDS.64 reads in the accumulator's slice; no new spill bytes (d=128: fewer);
    the rings add 2 x 5 x 128 bytes (one 1 KB step of the wgmma-aligned pipeline region), so d=64 still fits 2
    blocks per SM; the loops grow by at most a few dozen instructions (the row copies' addresses)."""
    on, off = _bwd_on_off(monkeypatch, d, causal)
    assert "cp_async_16_own(" in on.asm["cuda"] and "_own(" not in off.asm["cuda"]
    lon, loff = loops(sass_text(on)), loops(sass_text(off))
    assert len(lon) == len(loff) == (4 if causal else 2)
    dkdv = (0, 1) if causal else (0,)
    for i in dkdv:
        assert _plain_ldg(loff[i]) >= 4  # m and Di: LDG.E.64 (four each for 32 columns, two for 16)
        assert _plain_ldg(lon[i]) == 0
        assert count(lon[i], "LDGSTS") == count(loff[i], "LDGSTS") + 2
        assert count(lon[i], "LDS.64") >= count(loff[i], "LDS.64") + 4
        assert count(lon[i], "BAR.SYNC") == 1 and count(lon[i], "STS") == 0
        assert count(lon[i], "HGMMA") == count(loff[i], "HGMMA")
        assert count(lon[i], "WARPGROUP") == count(loff[i], "WARPGROUP")  # ptxas serialized nothing more
        assert len(lon[i]) <= len(loff[i]) + 32
    assert on.n_spills <= off.n_spills
    shared = on.metadata.shared if hasattr(on.metadata, "shared") else on.metadata["shared"]
    shared_off = off.metadata.shared if hasattr(off.metadata, "shared") else off.metadata["shared"]
    assert shared_off < shared <= shared_off + 2048
    if d == 64:
        assert 2 * (shared + BLOCK_RESERVED) <= SM_SHARED


def test_flag_off_leaves_the_code_as_it_was(monkeypatch):
    """``NEWT_RING_1D`` unset and ``=0`` generate the same CUDA (the backward at d=64, causal); a kernel with no
    1-D load in a pipelined loop (bench.py's matmul) is the same with the flag on.  (Against the tree before the
    ring, byte for byte: benchmarks/tut06_bwd_offline.md, "1-D loads through the ring".)"""
    import hopper_kernels as H
    from test_tut06_bwd import _bwd, compile_bwd
    texts = []
    for on in (None, "0", "1"):
        _ring(monkeypatch, on)
        _bwd.clear_cache()
        texts.append(compile_bwd(64, causal=True).asm["cuda"])
    assert texts[0] == texts[1] != texts[2]
    mm = []
    for on in (None, "1"):
        _ring(monkeypatch, on)
        mm.append(re.sub(r"^// Generated by.*\n", "", H.matmul(monkeypatch, {}).asm["cuda"]))
    assert mm[0] == mm[1]


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True])
def test_tutorial_file_backward_through_the_ring(causal):
    """Triton 3.6's own ``_attn_bwd`` through the drop-in (``--capability 9.0``, d=64) with ``NEWT_RING_1D=1``:
    no LDG in its dK/dV loops, two more LDGSTS than without the flag, no spill, 2 blocks per SM."""
    lon, spills, shared = tutorial_bwd(64, causal, ("LDG.E", "LDGSTS"), {"NEWT_RING_1D": "1"})
    loff, _, _ = tutorial_bwd(64, causal, ("LDG.E", "LDGSTS"), {"NEWT_RING_1D": "0"})
    assert len(lon) == len(loff) == (4 if causal else 2)
    for i in ((0, 1) if causal else (0,)):  # the dK/dV loops
        assert loff[i][0] >= 4 and lon[i][0] == 0 and lon[i][1] == loff[i][1] + 2
    assert spills == 0 and 2 * (shared + BLOCK_RESERVED) <= SM_SHARED


# ---- correctness: the interpreter checks the reference, the GPU the generated code ------------------------------

def _ring_inputs(kw, device):
    g = torch.Generator().manual_seed(0)
    steps, BM, BN, BK = 6, CFG["BLOCK_M"], CFG["BLOCK_N"], CFG["BLOCK_K"]
    K = steps * BK
    a = (torch.randn(BM, K, generator=g) / 4).half()
    b = (torch.randn(K, BN, generator=g) / 4).half()
    rdt = torch.float16 if kw.get("rdt") == "fp16" else torch.float32
    r_store = torch.randn(steps * BN + 1, generator=g).to(rdt)
    r = r_store[1:] if kw.get("aligned", True) is False else r_store[:-1]  # (one element off: 4-byte aligned)
    n_valid = 39 if kw.get("mask") else BN  # (odd: the pair mask keeps column 39, the plain one drops it)
    ref = torch.zeros(BM, BN, dtype=torch.float64)
    for it in range(steps):
        row = r[it * BN:(it + 1) * BN].double().clone()
        if kw.get("mask"):
            cols = torch.arange(BN)
            row[(cols // 2 * 2 if kw["mask"] == 2 else cols) >= n_valid] = kw.get("other", 0.0)
        ref += (a[:, it * BK:(it + 1) * BK].double() @ b[it * BK:(it + 1) * BK].double()) * row[None, :]
    args = [t.to(device) for t in (a, b, r)]
    out = torch.full((BM, BN), float("nan"), device=device)
    return args, out, K, n_valid, ref


def _run_ring(kw, device):
    (a, b, r), out, K, n_valid, ref = _ring_inputs(kw, device)
    _ring_mm[(1,)](a, b, r, out, K, n_valid, a.stride(0), b.stride(0), **CFG, MASK=kw.get("mask", False),
                   OTHER=kw.get("other", 0.0), CARRIED=kw.get("carried", 1), num_warps=4, num_stages=3)
    return out, ref


@pytest.mark.parametrize("kw", [v[0] for v in VARIANTS], ids=[str(v[0]) or "plain" for v in VARIANTS])
def test_ring_kernel_reference_in_the_interpreter(kw, monkeypatch):
    """The ring kernel and its float64 reference agree in newt's interpreter (no pipeline there: this checks the
    reference the GPU test uses)."""
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    _ring_mm.clear_cache()
    out, ref = _run_ring(kw, "cpu")
    assert (out.double() - ref).abs().max().item() < 1e-3 * max(1.0, ref.abs().max().item())


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [v[0] for v in VARIANTS], ids=[str(v[0]) or "plain" for v in VARIANTS])
@pytest.mark.parametrize("on", ["1", "0"])
def test_ring_kernel_matches_torch_on_the_gpu(kw, on, monkeypatch):
    """The ring kernel on the device (3 stages, 6 iterations: the prologue, the steady state and the tail's
    masked-off copies), every row variant, with the flag and without, against float64."""
    monkeypatch.delenv("NEWT_TARGET", raising=False)
    _ring(monkeypatch, on)
    _ring_mm.clear_cache()
    out, ref = _run_ring(kw, "cuda")
    torch.cuda.synchronize()
    assert not out.isnan().any()
    assert (out.double().cpu() - ref).abs().max().item() < 1e-3 * max(1.0, ref.abs().max().item())


@pytest.mark.gpu
@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, False), (128, True)])
@pytest.mark.parametrize("async_ra", ["0", "1"])
def test_backward_with_the_ring_matches_torch_on_the_gpu(d, causal, async_ra, monkeypatch):
    """test_tut06_bwd.py's GPU check of the backward (against torch's float64 autograd) with ``NEWT_RING_1D=1``,
    with and without the in-flight register-A accumulations (their extra ring buffer: the rows' rings follow
    the tiles' buffer count)."""
    from test_tut06_bwd import test_backward_matches_torch_on_the_gpu as check
    _ring(monkeypatch, "1")
    check(d, causal, "1", async_ra, monkeypatch)
