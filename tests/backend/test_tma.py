"""TMA on sm_90a (``newt/backend/cuda/tma.py``): which accesses match, where the boxes land in shared
memory (against TMA's swizzle and wgmma's canonical tiles), the sm_90a SASS (UTMALDG/UTMASTG, SYNCS
mbarrier instructions, HGMMA, no spill) offline, and on a GPU descriptor matmuls and copies against torch."""

from __future__ import annotations

import collections
import re

import pytest

import newt
import newt.language as nl
from newt.backend.cuda import compile_cuda, generate_cuda
from newt.backend.cuda.axisinfo import analyze_axis_info
from newt.backend.cuda.dot.wgmma import GmmaShared
from newt.backend.cuda.tma import Poly, match_access, same_layout, tile_plan
from newt.frontend import build_ir
from newt.runtime import specialize as sp
from newt.tools.tensor_descriptor import TensorDescriptor

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def tma_on(monkeypatch):
    """TMA is opt-in (``NEWT_TMA=1``) until a GPU run has checked it (``tma._DEFAULT_ON``)."""
    monkeypatch.setenv("NEWT_TMA", "1")


@newt.jit
def desc_matmul(a_desc, b_desc, c_desc, K, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    pid_m = nl.program_id(0)
    pid_n = nl.program_id(1)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, k * BK])
        b = b_desc.load([k * BK, pid_n * BN])
        acc = nl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@newt.jit
def desc_copy3(x_desc, y_desc, B0: nl.constexpr, B1: nl.constexpr, B2: nl.constexpr):
    a = nl.program_id(0) * B0
    b = nl.program_id(1) * B1
    c = nl.program_id(2) * B2
    y_desc.store([a, b, c], x_desc.load([a, b, c]) + 1)


@newt.jit
def desc_copy5(x_desc, y_desc, B: nl.constexpr):
    p = nl.program_id(0)
    y_desc.store([p % 3, p // 3, 0, 0, 0], x_desc.load([p % 3, p // 3, 0, 0, 0]) * 2)


@newt.jit
def ptr_like_desc(x_ptr, y_ptr, M, N, stride, BM: nl.constexpr, BN: nl.constexpr):
    """The descriptor's form written by hand (no descriptor): TMA too."""
    rm = nl.program_id(0) * BM + nl.arange(0, BM)
    rn = nl.program_id(1) * BN + nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = nl.load(x_ptr + rm[:, None] * stride + rn[None, :], mask=mask, other=0.0)
    nl.store(y_ptr + rm[:, None] * stride + rn[None, :], x, mask=mask)


@newt.jit
def ptr_other_one(x_ptr, y_ptr, M, N, stride, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.program_id(0) * BM + nl.arange(0, BM)
    rn = nl.program_id(1) * BN + nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = nl.load(x_ptr + rm[:, None] * stride + rn[None, :], mask=mask, other=1.0)   # not TMA's zero fill
    nl.store(y_ptr + rm[:, None] * stride + rn[None, :] + 1, x, mask=mask)           # not a box of the map


@newt.jit
def mixed_matmul(a_desc, b_ptr, c_ptr, M, N, K, stride_bk, stride_cm, BM: nl.constexpr, BN: nl.constexpr,
                 BK: nl.constexpr):
    """A through a descriptor, B and C through pointers (B advanced in the loop: cp.async)."""
    pid_m = nl.program_id(0)
    pid_n = nl.program_id(1)
    rn = pid_n * BN + nl.arange(0, BN)
    rk = nl.arange(0, BK)
    b_tile = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :]
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, k * BK])
        b = nl.load(b_tile, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = nl.dot(a, b, acc)
        b_tile += BK * stride_bk
    rm = pid_m * BM + nl.arange(0, BM)
    nl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(nl.float16), mask=(rm[:, None] < M) &
             (rn[None, :] < N))


def _ir(k, args, nw=4, ns=3):
    s = sp.specialize(k, args, {})
    return build_ir(k, s.arg_types, s.constexprs, s.divisibility, num_warps=nw, num_stages=ns)


def _ops(cubin) -> collections.Counter:
    from newt.backend.cuda.sass import find_cuobjdump, sass
    if find_cuobjdump() is None:
        pytest.skip("cuobjdump (nvidia-cuda-cuobjdump + nvdisasm wheels) is not installed")
    return collections.Counter(re.findall(r"\b(UTMALDG|UTMASTG|SYNCS\.[.\w]+|HGMMA\.[.\w]+|LDGSTS[.\w]*|STG[.\w]*|"
                                          r"LDG[.\w]*)", sass(cubin)))


def _mm_args(M=512, N=256, K=256, BM=128, BN=128, BK=64, dt=torch.float16):
    a, b, c = torch.empty(M, K, dtype=dt), torch.empty(K, N, dtype=dt), torch.empty(M, N, dtype=dt)
    return (TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BK, BN]),
            TensorDescriptor.from_tensor(c, [BM, BN]), K, BM, BN, BK)


# ---------------------------------------------------------------------------
# shared tiles
# ---------------------------------------------------------------------------


def _tma_swizzle(addr: int, swizzle: int) -> int:
    """Where TMA puts the byte at linear box offset ``addr`` (Swizzle<B, 4, 3>: bits [4, 4+B) ^= [7, 7+B))."""
    if not swizzle:
        return addr
    b = {32: 1, 64: 2, 128: 3}[swizzle]
    return addr ^ (((addr >> 7) & ((1 << b) - 1)) << 4)


@pytest.mark.parametrize("block,eb", [((64, 64), 2), ((128, 128), 2), ((64, 32), 2), ((16, 16), 2), ((8, 8), 2),
                                      ((32, 64), 4), ((64, 256), 1), ((2, 8, 32), 4), ((4, 2, 2, 2, 128), 1),
                                      ((4, 128), 2), ((256,), 2), ((64,), 4), ((2, 2, 64), 4)])
def test_each_copy_lands_where_tma_puts_it(block, eb):
    """Every element of every atom copy: the plan's offset is TMA's swizzled offset of that copy's box."""
    p = tile_plan(block, eb)
    assert p is not None
    rows = p.rows
    W = p.row_bytes
    seen = set()
    for r in range(rows):
        for c in range(p.inner):
            atom, cc = divmod(c, p.atom_cols)
            want = atom * p.atom_bytes + _tma_swizzle(r * W + cc * eb, p.swizzle)
            got = p.offset(r, c)
            assert got == want
            seen.add(got)
            e = p.offset_expr(str(r), str(c)).replace("/", "//")
            assert eval(e) == got
    assert len(seen) == rows * p.inner and max(seen) < p.size_bytes
    assert (p.box[-1] * eb <= p.swizzle if p.swizzle else p.box[-1] * eb % 16 == 0) and all(b <= 256 for b in p.box)


@pytest.mark.parametrize("rows,inner,eb", [(128, 64, 2), (64, 128, 2), (64, 32, 2), (128, 16, 2), (256, 64, 2),
                                           (64, 256, 2), (128, 128, 1), (64, 64, 1)])
def test_boxes_land_in_the_wgmma_layout(rows, inner, eb):
    """The pipeline's wgmma tiles (GmmaShared) are byte for byte what the TMA copies write."""
    p = tile_plan((rows, inner), eb)
    t = GmmaShared(rows, inner, eb)
    assert same_layout(p, t)
    assert all(p.offset(r, c) == t.offset(r, c) for r in range(rows) for c in range(inner))


def test_boxes_tma_cannot_land_are_refused():
    assert tile_plan((64, 4), 2) is None          # 8-byte rows
    assert tile_plan((512, 64), 2) is None        # 512 rows in one box dimension
    assert tile_plan((4, 512), 2) is None         # 4 rows: no swizzle, and 512 elements in one copy
    p = tile_plan((4, 128), 2)                    # 4 rows: a second 128-byte atom would be off the period
    assert p.swizzle == 0 and p.atoms == 1 and p.box == (4, 128)
    assert tile_plan((256,), 4).swizzle == 0      # 1-D: one row


# ---------------------------------------------------------------------------
# matching
# ---------------------------------------------------------------------------


def test_poly_identities():
    x = Poly.index(0) + Poly.const(3)
    assert ((x * x) - (Poly.index(0) * Poly.index(0) + Poly.index(0).scale(6) + Poly.const(9))).is_zero()
    assert (x.remap(lambda d: d + 1) - Poly.index(1) - Poly.const(3)).is_zero()


def test_descriptor_tiles_match_with_their_coordinates():
    fn = _ir(desc_matmul, _mm_args(), nw=8)
    axis = analyze_axis_info(fn)
    got = [(op, match_access(fn, op, axis)) for op in fn.walk() if op.name in ("load", "store")]
    assert len(got) == 3 and all(a is not None for _, a in got)
    names = {p.value: p.name for p in fn.params}
    a = got[0][1]
    assert names[a.base] == "a_desc.0" and [names[d] for d in a.dims] == ["a_desc.1", "a_desc.2"]
    assert names[a.strides[0]] == "a_desc.3" and a.strides[1] == 1 and a.box == (128, 64)
    # coordinates: (pid_m * 128, k * 64)
    assert {tuple(c.terms.values()) for c in a.coords} == {(128,), (64,)}
    assert got[2][1].box == (128, 128) and got[2][1].dtype == "fp16"


def test_hand_written_descriptor_form_matches_and_others_do_not():
    x = torch.empty(100, 64)
    fn = _ir(ptr_like_desc, (x, x, 100, 64, 64, 32, 64))
    axis = analyze_axis_info(fn)
    assert all(match_access(fn, op, axis) is not None for op in fn.walk() if op.name in ("load", "store"))
    fn = _ir(ptr_other_one, (x, x, 100, 64, 64, 32, 64))
    axis = analyze_axis_info(fn)
    assert all(match_access(fn, op, axis) is None for op in fn.walk() if op.name in ("load", "store"))
    # a stride the specialization cannot prove 16-byte aligned (72 fp32 = 288 bytes is, 72 % 16 is not 0)
    fn = _ir(ptr_like_desc, (x, x, 100, 64, 72, 32, 64))
    axis = analyze_axis_info(fn)
    assert all(match_access(fn, op, axis) is None for op in fn.walk() if op.name in ("load", "store"))


@newt.jit
def ptr_copy_1d(x_ptr, y_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(y_ptr + offs, nl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_rank_1_blocks_keep_the_pointer_path():
    """A 1-D block (the elementwise kernels' form) is not a TMA access: the driver refused every rank-1 map
    on the H200 run of 2026-12-02 (811 GPU tests failed with NEWT_TMA=1 before this rule)."""
    x = torch.empty(4096)
    fn = _ir(ptr_copy_1d, (x, x, 4096, 256))
    axis = analyze_axis_info(fn)
    ops = [op for op in fn.walk() if op.name in ("load", "store")]
    assert ops and all(match_access(fn, op, axis) is None for op in ops)


# ---------------------------------------------------------------------------
# SASS (offline)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cfg", [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (64, 128, 64, 4, 4), (128, 64, 32, 4, 4)])
def test_descriptor_matmul_is_tma_mbarriers_and_wgmma_without_spills(dt, cfg):
    BM, BN, BK, nw, ns = cfg
    fn = _ir(desc_matmul, _mm_args(BM=BM, BN=BN, BK=BK, dt=dt), nw=nw, ns=ns)
    m = generate_cuda(fn, "sm_90a", nw, ns)
    assert m.metadata["pipelined_loops"] == 1 and m.metadata["dot_lowerings"] == ["wgmma"]
    assert [r["arg"] for r in m.metadata["tensormaps"]] == ["a_desc", "b_desc", "c_desc"]
    b = compile_cuda(m, "sm_90a")
    assert b.n_spills == 0, b.log
    ops = _ops(b.cubin)
    assert ops["UTMALDG"] >= 2 and ops["UTMASTG"] >= 1 and not ops["LDGSTS"]
    assert any(k.startswith("SYNCS.PHASECHK") for k in ops) and any(k.startswith("SYNCS.ARRIVE") for k in ops)
    assert any(k.startswith("HGMMA") for k in ops)


def test_a_ring_with_tma_and_cp_async_loads():
    a = torch.empty(512, 256, dtype=torch.float16)
    fn = _ir(mixed_matmul, (TensorDescriptor.from_tensor(a, [128, 64]), a, a, 512, 256, 256, 256, 256, 128, 128, 64),
             nw=8)
    m = generate_cuda(fn, "sm_90a", 8, 3)
    assert [r["arg"] for r in m.metadata["tensormaps"]] == ["a_desc", "c_ptr"]
    b = compile_cuda(m, "sm_90a")
    ops = _ops(b.cubin)
    assert b.n_spills == 0 and ops["UTMALDG"] and ops["LDGSTS.E.BYPASS.128"] and ops["UTMASTG"]
    assert "cp_async_wait<1>();" in m.source and "mbar_wait(" in m.source


def test_the_default_tma_mode_and_a_bad_setting(monkeypatch):
    from newt.backend.cuda import tma
    fn = _ir(desc_matmul, _mm_args(), nw=8)
    monkeypatch.delenv("NEWT_TMA")
    m = generate_cuda(fn, "sm_90a", 8, 3)
    assert bool(m.metadata["tensormaps"]) == (tma._DEFAULT_MODE != "off")
    monkeypatch.setenv("NEWT_TMA", "maybe")
    with pytest.raises(ValueError, match="NEWT_TMA"):
        tma.tma_enabled(tma_target())


def test_newt_tma_desc_sends_descriptor_tiles_through_tma_and_keeps_pointer_accesses(monkeypatch):
    """``NEWT_TMA=desc``: a tensor descriptor's tiles go through TMA, a pointer-form access of the very same
    shape (which ``NEWT_TMA=1`` would also take) stays on cp.async / plain stores."""
    from newt.backend.cuda import tma
    a = torch.empty(512, 256, dtype=torch.float16)
    fn = _ir(mixed_matmul, (TensorDescriptor.from_tensor(a, [128, 64]), a, a, 512, 256, 256, 256, 256, 128, 128, 64),
             nw=8)
    monkeypatch.setenv("NEWT_TMA", "1")
    assert [r["arg"] for r in generate_cuda(fn, "sm_90a", 8, 3).metadata["tensormaps"]] == ["a_desc", "c_ptr"]
    monkeypatch.setenv("NEWT_TMA", "desc")
    assert tma.tma_mode(tma_target()) == "desc"
    m = generate_cuda(fn, "sm_90a", 8, 3)
    assert [r["arg"] for r in m.metadata["tensormaps"]] == ["a_desc"]
    ops = _ops(compile_cuda(m, "sm_90a").cubin)
    assert ops["UTMALDG"] and not ops["UTMASTG"] and ops["LDGSTS.E.BYPASS.128"]
    assert tma.tma_mode(__import__("newt.backend.cuda.targets", fromlist=["x"]).get_target("sm_80")) == "off"


def test_descriptor_tiles_go_through_tma_by_default(monkeypatch):
    """Unset ``NEWT_TMA`` on sm_90a is ``desc`` (the H100, 2026-12-07: tutorial 06's forward 0.78-0.92x
    Triton's time at N=4096 with it against 0.93-1.07x without, the GPU suite 2,369 passed under it;
    benchmarks/results_session11_2026-12-07.md): a descriptor's tiles on TMA, the pointer form on cp.async."""
    from newt.backend.cuda import tma
    monkeypatch.delenv("NEWT_TMA", raising=False)
    assert tma.tma_mode(tma_target()) == "desc"
    a = torch.empty(512, 256, dtype=torch.float16)
    fn = _ir(mixed_matmul, (TensorDescriptor.from_tensor(a, [128, 64]), a, a, 512, 256, 256, 256, 256, 128, 128, 64),
             nw=8)
    m = generate_cuda(fn, "sm_90a", 8, 3)
    assert [r["arg"] for r in m.metadata["tensormaps"]] == ["a_desc"]


def tma_target():
    from newt.backend.cuda.targets import get_target
    return get_target("sm_90a")


def test_newt_tma_0_and_sm_80_keep_the_pointer_path(monkeypatch):
    fn = _ir(desc_matmul, _mm_args(), nw=8)
    m = generate_cuda(fn, "sm_80", 8, 3)
    assert not m.metadata["tensormaps"] and "tma_load" not in m.source
    ops = _ops(compile_cuda(m, "sm_80").cubin)
    assert not ops["UTMALDG"] and ops["LDGSTS.E.BYPASS.LTC128B.128"] + ops["LDGSTS.E.BYPASS.128"] > 0
    monkeypatch.setenv("NEWT_TMA", "0")
    m = generate_cuda(fn, "sm_90a", 8, 3)
    assert not m.metadata["tensormaps"] and "newt_tmap" not in m.source
    ops = _ops(compile_cuda(m, "sm_90a").cubin)
    assert not ops["UTMALDG"] and not ops["UTMASTG"] and any(k.startswith("HGMMA") for k in ops)


@pytest.mark.parametrize("k,args", [
    (desc_copy3, lambda: (TensorDescriptor.from_tensor(torch.empty(6, 40, 64), [2, 8, 32]),
                          TensorDescriptor.from_tensor(torch.empty(6, 40, 64), [2, 8, 32]), 2, 8, 32)),
    (desc_copy5, lambda: (TensorDescriptor.from_tensor(torch.empty(3, 5, 4, 4, 16, dtype=torch.float16),
                                                       [1, 1, 4, 4, 16]),
                          TensorDescriptor.from_tensor(torch.empty(3, 5, 4, 4, 16, dtype=torch.float16),
                                                       [1, 1, 4, 4, 16]), 1)),
])
def test_n_d_descriptor_copies_are_one_tma_load_and_one_tma_store(k, args):
    fn = _ir(k, args())
    m = generate_cuda(fn, "sm_90a", 4, 3)
    b = compile_cuda(m, "sm_90a")
    ops = _ops(b.cubin)
    assert ops["UTMALDG"] == 1 and ops["UTMASTG"] == 1 and b.n_spills == 0
    assert not any(k.startswith(("LDG", "STG")) for k in ops)


# ---------------------------------------------------------------------------
# on the GPU
# ---------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M,N,K,cfg", [(512, 512, 512, (128, 128, 64, 8, 3)), (300, 272, 208, (128, 128, 64, 8, 3)),
                                       (1000, 528, 1040, (128, 256, 64, 8, 3)), (77, 48, 80, (64, 128, 64, 4, 4)),
                                       (200, 144, 96, (128, 64, 32, 4, 4))])
def test_descriptor_matmul_on_the_gpu(dt, M, N, K, cfg):
    """Partial tiles in M, N and K (TMA's zero fill), sizes that are not multiples of the blocks."""
    BM, BN, BK, nw, ns = cfg
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(K, N, device="cuda", dtype=dt)
    c = torch.full((M, N), 7.0, device="cuda", dtype=dt)
    grid = (newt.cdiv(M, BM), newt.cdiv(N, BN))
    ck = desc_matmul[grid](TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BK, BN]),
                           TensorDescriptor.from_tensor(c, [BM, BN]), K, BM=BM, BN=BN, BK=BK, num_warps=nw,
                           num_stages=ns)
    assert len(ck.metadata["tensormaps"]) == 3
    ref = (a.float() @ b.float()).to(dt)
    torch.testing.assert_close(c, ref, atol=1e-1 if dt == torch.bfloat16 else 3e-2, rtol=2e-2)



@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape,block", [((6, 40, 64), (2, 8, 32)), ((5, 37, 80), (4, 16, 32)),
                                         ((3, 3, 112), (2, 2, 64))])
def test_descriptor_copy_3d_on_the_gpu(shape, block):
    x = torch.randn(shape, device="cuda")
    y = torch.full_like(x, -5.0)
    grid = tuple(newt.cdiv(s, b) for s, b in zip(shape, block))
    ck = desc_copy3[grid](TensorDescriptor.from_tensor(x, list(block)), TensorDescriptor.from_tensor(y, list(block)),
                          *block)
    assert len(ck.metadata["tensormaps"]) == 2  # load and store through TMA (rows of 16-byte multiples)
    torch.testing.assert_close(y, x + 1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_descriptor_copy_5d_on_the_gpu():
    x = torch.randn(3, 5, 3, 4, 16, device="cuda").half()    # the box (1, 1, 4, 4, 16) overhangs dim 2
    y = torch.zeros_like(x)
    box = [1, 1, 4, 4, 16]
    desc_copy5[(15,)](TensorDescriptor.from_tensor(x, box), TensorDescriptor.from_tensor(y, box), 1)
    torch.testing.assert_close(y, x * 2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_nan_padding_through_tma_on_the_gpu():
    @newt.jit
    def pad_read(x_desc, out_ptr, B: nl.constexpr):
        t = x_desc.load([0, 0])
        r = nl.arange(0, B)
        nl.store(out_ptr + r[:, None] * B + r[None, :], t)
    x = torch.randn(5, 16, device="cuda")
    out = torch.zeros(32, 32, device="cuda")
    ck = pad_read[(1,)](TensorDescriptor(x, [5, 16], [16, 1], [32, 32], padding="nan"), out, 32)
    assert ck.metadata["tensormaps"][0]["fill"] == "nan"
    torch.testing.assert_close(out[:5, :16], x)
    assert torch.isnan(out[5:]).all() and torch.isnan(out[:, 16:]).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_ring_with_tma_and_cp_async_loads_on_the_gpu():
    M, N, K = 300, 272, 208
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = torch.full((M, N), 7.0, device="cuda").half()
    mixed_matmul[(newt.cdiv(M, 128), newt.cdiv(N, 128))](TensorDescriptor.from_tensor(a, [128, 64]), b, c, M, N, K,
                                                          b.stride(0), c.stride(0), BM=128, BN=128, BK=64, num_warps=8)
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), atol=3e-2, rtol=2e-2)
