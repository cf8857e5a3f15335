"""Linear layouts, index expressions, swizzles and the axis analysis (no GPU, no NVRTC)."""

from __future__ import annotations

import itertools
import os
import sys

import pytest

from newt.backend.cuda.axisinfo import analyze_axis_info
from newt.backend.cuda.layout import Layout, SwizzledShared, bit_index_expr, blocked_for, in_thread_map, mma_accumulator
from newt.backend.cuda.plan import _scan_layout, compact, mem_layout, scan_layout

sys.path.insert(0, os.path.dirname(__file__))
from kernels import P, aligned, f32, i32, ir


def owners(lay: Layout) -> dict:
    """flat index -> list of (reg, lane, warp) holding it."""
    out = {}
    for r, ln, w in itertools.product(range(lay.nregs), range(32), range(lay.num_warps)):
        out.setdefault(lay.flat(r, ln, w), []).append((r, ln, w))
    return out


@pytest.mark.parametrize("shape,nw,vec", [((1024,), 4, 4), ((128, 64), 4, 8), ((16, 16), 8, 1), ((8,), 4, 1),
                                          ((64, 32, 2), 2, 2)])
def test_blocked_covers_every_element(shape, nw, vec):
    lay = blocked_for(shape, nw, vec=vec)
    own = owners(lay)
    n = 1
    for d in shape:
        n *= d
    assert sorted(own) == list(range(n))
    assert lay.covers_all()


def test_blocked_vector_runs_are_contiguous():
    lay = blocked_for((1024,), 4, vec=4)
    # registers 0..3 of a thread are 4 consecutive elements
    for ln in range(32):
        base = lay.flat(0, ln, 0)
        assert [lay.flat(r, ln, 0) for r in range(4)] == [base, base + 1, base + 2, base + 3]
    # lanes are 4 elements apart: a warp reads 512 contiguous bytes per access
    assert lay.flat(0, 1, 0) - lay.flat(0, 0, 0) == 4


def test_broadcast_layout_has_zero_bases():
    lay = blocked_for((4,), 4, vec=1)  # 4 elements, 128 threads
    assert lay.has_thread_dups()
    own = owners(lay)
    assert all(len(v) == 32 for v in own.values())


def test_mma_accumulator_matches_ptx_fragment():
    lay = mma_accumulator((16, 8), 1, 1)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        # c0, c1: (g, 2t), (g, 2t+1); c2, c3: (g+8, 2t), (g+8, 2t+1)
        assert lay.coords(0, lane, 0) == (g, 2 * t)
        assert lay.coords(1, lane, 0) == (g, 2 * t + 1)
        assert lay.coords(2, lane, 0) == (g + 8, 2 * t)
        assert lay.coords(3, lane, 0) == (g + 8, 2 * t + 1)


def test_mma_accumulator_warps_and_repeats():
    lay = mma_accumulator((128, 128), 2, 2, num_warps=4)
    assert lay.nregs == 128
    own = owners(lay)
    assert sorted(own) == list(range(128 * 128)) and all(len(v) == 1 for v in own.values())
    # acc[(mi * NREP + ni) * 4 + c]: tile (mi, ni) of warp (wm, wn) starts at ((mi*2+wm)*16, (ni*2+wn)*8)
    nrep = 128 // 16
    for mi, ni, wm, wn in [(0, 0, 0, 0), (1, 3, 1, 0), (3, 7, 1, 1)]:
        r = (mi * nrep + ni) * 4
        w = wm + 2 * wn
        assert lay.coords(r, 0, w) == ((mi * 2 + wm) * 16, (ni * 2 + wn) * 8)


def test_slice_and_broadcast_round_trip():
    lay = mma_accumulator((128, 64), 4, 1, num_warps=4)
    row = compact(lay.drop_dims([1]))  # what a row reduction produces
    assert row.shape == (128,)
    # broadcasting the row vector back to the tile needs no data movement
    proj = lay.project_to((128, 1))
    m = in_thread_map(compact(row.with_shape((128, 1))), proj.reg, proj.lane, proj.warp)
    assert m is not None


def test_in_thread_map_refuses_cross_thread_moves():
    a = blocked_for((64, 64), 4, vec=4)
    b = blocked_for((64, 64), 4, vec=4, order=[0, 1])
    assert in_thread_map(a, b.reg, b.lane, b.warp) is None
    assert in_thread_map(a, a.reg, a.lane, a.warp) == [1 << j for j in range(len(a.reg))]


@pytest.mark.parametrize("mapping", [[1, 2, 4], [4, 1, 2], [0, 8, 16, 1], [2, 0, 1]])
def test_bit_index_expr_is_the_bit_map(mapping):
    expr = bit_index_expr("i", mapping)
    for i in range(1 << len(mapping)):
        want = 0
        for j, m in enumerate(mapping):
            if i >> j & 1:
                want |= m
        assert eval(expr, {"i": i}) == want, (expr, i)


@pytest.mark.parametrize("rows,inner,eb", [(128, 32, 2), (32, 128, 2), (64, 64, 2), (64, 16, 4), (32, 64, 1),
                                           (16, 8, 4)])
def test_swizzle_is_a_bijection_and_ldmatrix_is_conflict_free(rows, inner, eb):
    sw = SwizzledShared(rows, inner, eb)
    offs = {sw.offset(r, c) for r in range(rows) for c in range(inner)}
    assert len(offs) == rows * inner and max(offs) < sw.size_bytes
    # the C++ expression agrees with the model
    for r, c in [(0, 0), (3, inner - 1), (rows - 1, inner // 2)]:
        assert eval(sw.offset_expr(str(r), str(c)).replace("/", "//"), {}) == sw.offset(r, c)
    # 8 rows x one 16-byte chunk (one ldmatrix phase) hit 8 distinct bank groups
    if sw.row_bytes >= 16:
        for r0 in range(0, rows - 7, 8):
            for c in range(0, inner, 16 // eb):
                groups = {(sw.offset(r0 + k, c) // 16) % 8 for k in range(8)}
                assert len(groups) == 8, (r0, c, groups)


@pytest.mark.parametrize("shape,axis,nw", [((4, 256), 1, 4), ((256, 4), 0, 4), ((8, 1024), 1, 8), ((64, 64), 1, 1),
                                           ((32, 32), 0, 2), ((1, 128), 1, 4), ((2048,), 0, 4)])
def test_scan_layout_orders_axis_bits(shape, axis, nw):
    lay = scan_layout(shape, axis, nw)
    assert lay.covers_all()
    assert _scan_layout(lay, axis, nw) is lay
    assert _scan_layout(blocked_for(shape, nw, vec=1), axis, nw).covers_all()


def test_axis_info_vector_add():
    f = ir("vector_add.py", "add_kernel", dict(x_ptr=P(f32), y_ptr=P(f32), out_ptr=P(f32), n_elements=i32),
           dict(BLOCK_SIZE=1024), aligned("x_ptr", "y_ptr", "out_ptr", "n_elements"))
    info = analyze_axis_info(f)
    loads = [op for op in f.walk() if op.name == "load"]
    for ld in loads:
        pi = info[ld.operands[0]]
        assert pi.contiguity == (1024,) and pi.divisibility[0] >= 16
        mi = info[ld.operands[1]]
        assert mi.constancy[0] >= 16  # offsets < n with n % 16 == 0
        lay = mem_layout((1024,), pi, 4, 4)
        assert lay.reg[:2] == (1, 2)  # 4 consecutive fp32 per thread: 16-byte accesses


def test_axis_info_without_alignment_falls_back_to_scalars():
    f = ir("vector_add.py", "add_kernel", dict(x_ptr=P(f32), y_ptr=P(f32), out_ptr=P(f32), n_elements=i32),
           dict(BLOCK_SIZE=1024), {})
    info = analyze_axis_info(f)
    ld = next(op for op in f.walk() if op.name == "load")
    assert info[ld.operands[0]].divisibility[0] == 4  # only the element size is known
    assert mem_layout((1024,), info[ld.operands[0]], 4, 4).reg[0] != 1


@pytest.mark.parametrize("M,K,wm,wn,nw", [(128, 64, 4, 1, 4), (128, 64, 8, 1, 8), (64, 32, 2, 2, 4),
                                          (16, 16, 1, 1, 1), (64, 64, 2, 1, 4)])
def test_mma_a_fragment_matches_the_ptx_fragment(M, K, wm, wn, nw):
    """m16n8k16 A fragment (PTX ISA): lane = 4 * group + t; fragment register q holds
    (row group + 8 * (q & 1), cols 2t, 2t+1 + 8 * (q >> 1)); element j is the lower (j = 0) or upper half.
    The layout's register (mi * K/16 + s) * 8 + 2q + j is that element of k step s, m repetition mi."""
    from newt.backend.cuda.layout import mma_a_fragment
    lay = mma_a_fragment((M, K), wm, wn, num_warps=nw)
    mrep = M // (16 * wm)
    for w in range(nw):
        wmi = w % wm  # warps along M come first in the warp id
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for mi in range(mrep):
                for s in range(K // 16):
                    for q in range(4):
                        for j in range(2):
                            r = (mi * (K // 16) + s) * 8 + 2 * q + j
                            row = (mi * wm + wmi) * 16 + g + 8 * (q & 1)
                            col = s * 16 + 2 * t + j + 8 * (q >> 1)
                            assert lay.coords(r, lane, w) == (row, col)
    # per thread the same elements as the accumulator of an (M, K) result: a register permutation
    acc = mma_accumulator((M, K), wm, wn, num_warps=nw)
    assert in_thread_map(acc, lay.reg, lay.lane, lay.warp) is not None or wn > 1


def test_vector_runs_of_layouts():
    from newt.backend.cuda.emitter import _vec_run
    assert _vec_run(mma_accumulator((128, 128), 2, 2, num_warps=4), 2) == 2   # column pairs
    assert _vec_run(blocked_for((128, 128), 4, vec=8), 2) == 8               # 16 bytes of halves
    assert _vec_run(blocked_for((128, 128), 4, vec=8), 4) == 4               # 16 bytes of floats
    assert _vec_run(blocked_for((1024,), 4, vec=1), 4) == 1
