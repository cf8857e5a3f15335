"""The Hopper dot lowering (``dot/wgmma.py``), offline: shared-memory layouts against the wgmma
descriptor's canonical layouts, the accumulator layout against the PTX fragment definition, and
sm_90a SASS (HGMMA, no spills) for every dot kernel of the examples and of the corpus."""

from __future__ import annotations

import itertools
import re

import pytest
from kernels import corpus_configs, ir

import newt
import newt.language as nl
from newt.backend.cuda import compile_cuda, generate_cuda
from newt.backend.cuda.dot import LOWERINGS, select_dot_lowering
from newt.backend.cuda.dot.wgmma import (
    GmmaShared,
    WgmmaLowering,
    gmma_address,
    gmma_desc_fields,
    warpgroups,
    wgmma_accumulator,
)


def _swizzle(addr: int, W: int) -> int:
    """The hardware's Swizzle<B, 4, 3> over byte addresses: bits [4, 4+B) ^= bits [7, 7+B)."""
    b = {128: 3, 64: 2, 32: 1}[W]
    mask = (1 << b) - 1
    return addr ^ (((addr >> 7) & mask) << 4)


def _canonical(start: int, lbo: int, sbo: int, W: int, eb: int, k_major: bool, mn: int, k: int) -> int:
    """Byte address of element (mn, k) of one wgmma operand, from its descriptor, following the
    canonical layouts of the PTX ISA (as CUTLASS writes them in 16-byte units T):
    K-major ``((8, m), (T, 2k)) : ((W, SBO), (1, T))``, MN-major ``((T, W/16, m), (8, k)) : ((1, T, LBO),
    (W, SBO))``, then the W-byte swizzle on the address."""
    if k_major:
        lin = start + (mn % 8) * W + (mn // 8) * sbo + k * eb
    else:
        per = W // eb
        lin = start + (mn % per) * eb + (mn // per) * lbo + (k % 8) * W + (k // 8) * sbo
    return _swizzle(lin, W)


@pytest.mark.parametrize("rows,inner,eb", [(128, 64, 2), (64, 128, 2), (64, 32, 2), (128, 16, 2), (32, 256, 2),
                                           (16, 64, 2), (256, 64, 2), (64, 64, 2)])
def test_gmma_shared_is_a_bijection_and_matches_swizzled_shared_up_to_128_bytes(rows, inner, eb):
    t = GmmaShared(rows, inner, eb)
    offs = {t.offset(r, c) for r in range(rows) for c in range(inner)}
    assert len(offs) == rows * inner and max(offs) < t.size_bytes  # a bijection of element slots
    if inner * eb <= 128:
        from newt.backend.cuda.layout import SwizzledShared
        s = SwizzledShared(rows, inner, eb)
        assert all(t.offset(r, c) == s.offset(r, c) for r in range(rows) for c in range(inner))
    # the C++ expression is the same function
    for r, c in [(0, 0), (rows - 1, inner - 1), (3, inner // 2 + 1), (rows // 2 + 5 if rows > 8 else 1, 7)]:
        e = t.offset_expr(str(r), str(c)).replace("/", "//")
        assert eval(e) == t.offset(r, c)


# (M, N, K, num_warps, A inner dim, B inner dim): both majors for both operands
LAYOUT_CASES = [(m, n, k, w, ia, ib) for (m, n, k, w) in [(128, 128, 64, 8), (128, 256, 64, 8), (64, 256, 32, 4),
                                                           (128, 64, 32, 4), (64, 64, 16, 4), (256, 128, 64, 8),
                                                           (64, 128, 128, 8), (128, 16, 32, 4)]
                for ia in (0, 1) for ib in (0, 1)]


@pytest.mark.parametrize("M,N,K,nw,ia,ib", LAYOUT_CASES)
def test_descriptors_address_the_staged_tiles(M, N, K, nw, ia, ib):
    """Every element each wgmma instruction reads through its descriptors (the lowering's start
    addresses and offsets) is the element the tile's layout stores there."""
    eb = 2
    low = WgmmaLowering()
    ta = low.shared_tile(M if ia == 1 else K, K if ia == 1 else M, eb)   # A (M, K)
    tb = low.shared_tile(N if ib == 0 else K, K if ib == 0 else N, eb)   # B (K, N)
    a_k, b_k = ia == 1, ib == 0
    wgm, wgn, dup = warpgroups(M, N, nw)
    Nw = N if dup else N // wgn
    n_inst = min(256, Nw)
    for g_m, g_n in itertools.product(range(wgm), range(1 if dup else wgn)):
        for kk in range(0, K, 16):
            for mi in range(M // (64 * wgm)):
                m0 = (mi * wgm + g_m) * 64
                lbo, sbo, _ = gmma_desc_fields(ta, a_k)
                # the emitter's warpgroup offset + the per-instruction offset
                sa = (g_m * 64 * ta.swizzle_bytes if a_k else (g_m * 64 // ta.atom_cols) * ta.rows * ta.swizzle_bytes)
                start = sa + gmma_address(ta, a_k, mi * 64 * wgm, kk)
                for m, k in itertools.product(range(64), range(16)):
                    want = ta.offset(m0 + m, kk + k) if a_k else ta.offset(kk + k, m0 + m)
                    assert _canonical(start, lbo, sbo, ta.swizzle_bytes, eb, a_k, m, k) == want
            for ni in range(Nw // n_inst):
                n0 = g_n * Nw + ni * n_inst
                lbo, sbo, _ = gmma_desc_fields(tb, b_k)
                sb = (g_n * Nw * tb.swizzle_bytes if b_k else (g_n * Nw // tb.atom_cols) * tb.rows * tb.swizzle_bytes)
                start = sb + gmma_address(tb, b_k, ni * n_inst, kk)
                for n, k in itertools.product(range(n_inst), range(16)):
                    want = tb.offset(n0 + n, kk + k) if b_k else tb.offset(kk + k, n0 + n)
                    assert _canonical(start, lbo, sbo, tb.swizzle_bytes, eb, b_k, n, k) == want


@pytest.mark.parametrize("M,N,nw", [(128, 128, 8), (128, 256, 8), (64, 256, 4), (128, 64, 4), (64, 64, 4),
                                    (256, 128, 8), (64, 128, 8), (64, 32, 8), (128, 16, 4)])
def test_accumulator_layout_is_the_ptx_fragment(M, N, nw):
    """wgmma m64nNk16 D fragment (PTX ISA): thread t of warpgroup g's warp w holds, in register
    4 j + c of instruction (mi, ni), row 16 (t/32 % 4) + (t%32)/4 + 8 (c/2) of its 64-row block and
    column 8 j + 2 (t % 4) + c % 2 of its N_inst block."""
    lay = wgmma_accumulator((M, N), nw)
    wgm, wgn, dup = warpgroups(M, N, nw)
    Nw = N if dup else N // wgn
    n_inst = min(256, Nw)
    n_reps = Nw // n_inst
    seen = set()
    for tid in range(32 * nw):
        warp, lane = tid // 32, tid % 32
        g = warp // 4
        g_m = g % wgm
        g_n = 0 if dup else g // wgm
        for r in range(lay.nregs):
            d = r % (n_inst // 2)
            ni = (r // (n_inst // 2)) % n_reps
            mi = r // (n_inst // 2) // n_reps
            j, c = divmod(d, 4)
            row = (mi * wgm + g_m) * 64 + 16 * (warp % 4) + lane // 4 + 8 * (c // 2)
            col = g_n * Nw + ni * n_inst + 8 * j + 2 * (lane % 4) + c % 2
            assert lay.coords(r, lane, warp) == (row, col)
            seen.add((row, col))
    assert len(seen) == M * N


def test_selection_follows_the_environment(monkeypatch):
    f = ir("matmul.py", "matmul_kernel", *corpus_configs()[5][2:5], num_warps=4, num_stages=4)
    dot = next(op for op in f.walk() if op.name == "dot")
    from newt.backend.cuda.targets import get_target
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")
    assert select_dot_lowering(dot, get_target("sm_90a"), 4).name == "wgmma"
    assert select_dot_lowering(dot, get_target("sm_80"), 4).name == "mma.sync"
    assert select_dot_lowering(dot, get_target("sm_90a"), 2).name == "mma.sync"  # no whole warpgroup
    # 64 rows over 8 warps: the second warpgroup would split N / duplicate, kept on mma.sync (not yet run)
    f64 = ir("matmul.py", "matmul_kernel", *corpus_configs()[6][2:5], num_warps=8, num_stages=4)  # BLOCK_M 64
    dot64 = next(op for op in f64.walk() if op.name == "dot")
    assert select_dot_lowering(dot64, get_target("sm_90a"), 8).name == "mma.sync"
    assert select_dot_lowering(dot64, get_target("sm_90a"), 4).name == "wgmma"
    monkeypatch.setenv("NEWT_DOT_LOWERING", "mma_sync")
    assert select_dot_lowering(dot, get_target("sm_90a"), 4).name == "mma.sync"
    monkeypatch.setenv("NEWT_DOT_LOWERING", "bogus")
    with pytest.raises(ValueError, match="NEWT_DOT_LOWERING"):
        select_dot_lowering(dot, get_target("sm_90a"), 4)
    assert isinstance(LOWERINGS[0], WgmmaLowering)


def _sass_or_skip(b):
    from newt.backend.cuda import sass
    try:
        return sass(b.cubin)
    except Exception as e:
        pytest.skip(f"cuobjdump unavailable: {e}")


DOT_CONFIGS = [c for c in corpus_configs() if c[0] in ("matmul.py", "attention.py") and c[5] % 4 == 0]


def _cid(c):
    return f"{c[0]}-" + "-".join(f"{k}{v}" for k, v in c[3].items() if k.isupper() and isinstance(v, int)) + \
        f"-w{c[5]}-s{c[6]}"


@pytest.mark.parametrize("cfg", DOT_CONFIGS, ids=_cid)
def test_corpus_dots_are_hgmma_on_sm90a(cfg, monkeypatch):
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")
    f = ir(*cfg[:5], num_warps=cfg[5], num_stages=cfg[6])
    m = generate_cuda(f, "sm_90a", cfg[5], cfg[6])
    assert m.metadata["dot_lowerings"] == ["wgmma"]
    b = compile_cuda(m, "sm_90a")
    assert b.n_spills == 0 and b.stack_frame == 0, b.log
    s = _sass_or_skip(b)
    assert re.search(r"HGMMA\.64x\d+x16\.F32", s), "no HGMMA in the SASS"
    assert not re.search(r"\bHMMA\b", s)
    assert "wgmma serialization" not in b.log.lower()


def test_matmul_accumulation_stays_in_flight_across_iterations(monkeypatch):
    """The pipelined K loop leaves one wgmma group in flight (``WARPGROUP.DEPBAR.LE gsb0, 0x1`` in the
    loop, a full drain after it) and the ring has one more buffer than ``num_stages``."""
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")
    cfg = next(c for c in corpus_configs() if c[0] == "matmul.py" and c[3]["BLOCK_M"] == 128 and c[3]["BLOCK_N"] == 256)
    m = generate_cuda(ir(*cfg[:5], num_warps=cfg[5], num_stages=cfg[6]), "sm_90a", cfg[5], cfg[6])
    assert "wgmma_wait<1>();" in m.source and "wgmma_wait<0>();  // the last iteration's wgmma" in m.source
    assert m.shared_bytes == (cfg[6] + 1) * (128 * 64 + 64 * 256) * 2
    b = compile_cuda(m, "sm_90a")
    assert b.n_spills == 0
    s = _sass_or_skip(b)
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in s and "WARPGROUP.DEPBAR.LE gsb0, 0x0" in s


@pytest.mark.parametrize("nw", [4, 8])
def test_attention_p_feeds_wgmma_from_registers(nw, monkeypatch):
    """Attention's P (the first dot's accumulator) is the second wgmma's A straight from registers:
    no staging of P through shared memory in the loop."""
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")
    cfg = next(c for c in corpus_configs() if c[0] == "attention.py")
    m = generate_cuda(ir(*cfg[:5], num_warps=nw, num_stages=3), "sm_90a", nw, 3)
    assert "A from registers" in m.source and "stage operand" not in m.source
    b = compile_cuda(m, "sm_90a")
    assert b.n_spills == 0 and b.stack_frame == 0, b.log
    s = _sass_or_skip(b)
    assert re.search(r"HGMMA\.64x64x16\.F32 R\d+, R\d+, gdesc", s), "no register-A HGMMA"


def _bench_matmul(monkeypatch, lowering, sig_hint, bm=128, bn=128, bk=64, w=8, s=3):
    import sys
    from pathlib import Path

    import newt
    monkeypatch.setenv("NEWT_DOT_LOWERING", lowering)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench
    from common import instantiate
    m = instantiate(bench.TEMPLATE, "newt", "wgmma_test")
    k = m._matmul_tile
    while hasattr(k, "fn") and not hasattr(k, "constexpr_names"):
        k = k.fn
    sig = {"a_ptr": f"*fp16{sig_hint}", "b_ptr": f"*fp16{sig_hint}", "c_ptr": f"*fp16{sig_hint}"}
    sig.update({n: f"i32{sig_hint}" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
    return newt.compile(k, signature=sig, constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8,
                                                      "stride_ak": 1, "stride_bn": 1, "stride_cn": 1},
                        target="sm_90a", num_warps=w, num_stages=s, cache=False)


@pytest.mark.parametrize("lowering", ["wgmma", "mma_sync"])
def test_masked_k_matmul_does_not_spill(lowering, monkeypatch):
    """bench.py's Triton-style matmul (masks on the K loop), 128x128x64, 8 warps, 3 stages, with Triton's
    default specialization (pointers and ints divisible by 16): no spill on either lowering."""
    ck = _bench_matmul(monkeypatch, lowering, ":16")
    assert ck.metadata.n_spills == 0
    assert ck.metadata.n_regs <= (160 if lowering == "wgmma" else 255)


def test_unaligned_masked_k_matmul_does_not_spill(monkeypatch):
    """Nothing known divisible: 2-byte loads, not pipelined, staged every iteration.  The staging
    addresses are recomputed in the loop, the loop's pointer blocks are a base plus 32-bit offsets, and
    each operand is staged right after its load (584 bytes of spill at first, 176-220 before the last
    change, none now)."""
    ck = _bench_matmul(monkeypatch, "wgmma", "")
    assert ck.metadata.n_spills == 0
    src = ck.asm["cuda"]
    assert "_o[i] = (int)(" in src and "fresh_int(" in src and "where it is loaded" in src
    # one barrier before the first load, one before the wgmma: none between a load and its staging
    loop = re.search(r"for \(int (\w+) = 0; \1 < \w+; \1 \+= 1\) \{", src)
    body = src[loop.start():src.index("wgmma_fence();", loop.start())]
    assert body.count("__syncthreads()") == 2


# ---------------------------------------------------------------------------------------------------
# fp8: wgmma k32, both operands K-major; an N-major B tile is transposed in shared memory (dot/transpose.py)
# ---------------------------------------------------------------------------------------------------

TRANSPOSE_SHAPES = [(32, 16), (32, 64), (64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128),
                    (64, 256), (32, 128)]


@pytest.mark.parametrize("rows,inner", TRANSPOSE_SHAPES)
def test_transpose_has_no_bank_conflicts(rows, inner):
    """Each of a warp's four 4-byte reads and four writes is one wavefront, for every block group."""
    from newt.backend.cuda.dot.transpose import bank_wavefronts, plan_transpose
    src, dst = GmmaShared(rows, inner, 1), GmmaShared(inner, rows, 1)
    plan = plan_transpose(src, dst)
    for r_hi, c_hi in itertools.product(range(0, rows // 4, 8), range(0, inner // 4, 4)):
        assert bank_wavefronts(src, dst, plan, r_hi, c_hi) == (4, 4)


_HARNESS = r"""
#include <cstdio>
#include <cstring>
static unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {  // PTX prmt, default mode
  unsigned long long v = ((unsigned long long)y << 32) | x; unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
static unsigned char smem[%(bytes)d];
int main() {
  for (int i = 0; i < %(src)d; ++i) smem[i] = (unsigned char)(i * 7 + (i >> 8) * 13 + 1);
  memset(smem + %(src)d, 0, %(dst)d);
  for (int warp_id = 0; warp_id < %(nw)d; ++warp_id)
    for (int lane_id = 0; lane_id < 32; ++lane_id) {
%(body)s
    }
  fwrite(smem, 1, sizeof smem, stdout);
  return 0;
}
"""


@pytest.mark.parametrize("rows,inner", TRANSPOSE_SHAPES)
@pytest.mark.parametrize("nw", [4, 8])
def test_transpose_code_moves_every_byte(rows, inner, nw, tmp_path):
    """The emitted transposition, compiled as host C++ (one thread after another, ``prmt`` written out
    from the PTX definition), puts source element (r, c) at destination element (c, r), for every element."""
    import shutil
    import subprocess
    from types import SimpleNamespace

    from newt.backend.cuda.dot.transpose import emit_transpose
    from newt.backend.cuda.emitter import Chunk
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src, dst = GmmaShared(rows, inner, 1), GmmaShared(inner, rows, 1)
    c = Chunk(3)
    emit_transpose(SimpleNamespace(nw=nw), c, src, "(smem + 0)", dst, f"(smem + {src.size_bytes})")
    lines: list = []
    c.render(lines, [])
    code = _HARNESS % {"bytes": src.size_bytes + dst.size_bytes, "src": src.size_bytes, "dst": dst.size_bytes,
                       "nw": nw, "body": "\n".join(re.sub(r"#pragma unroll.*", "", ln) for ln in lines)}
    (tmp_path / "t.cpp").write_text(code)
    subprocess.run([cxx, "-O1", "-o", str(tmp_path / "t"), str(tmp_path / "t.cpp")], check=True)
    out = subprocess.run([str(tmp_path / "t")], check=True, capture_output=True).stdout
    base = src.size_bytes
    for r in range(rows):
        for col in range(inner):
            assert out[base + dst.offset(col, r)] == out[src.offset(r, col)], (r, col)


def _fp8_matmul(monkeypatch, b_major, dt="fp8e4nv", cfg=(128, 128, 128, 3, 8)):
    from kernels import P, f16, i32
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")
    bm, bn, bk, s, w = cfg
    t = getattr(nl, {"fp8e4nv": "float8e4nv", "fp8e5": "float8e5"}[dt])
    runtime = ["stride_am", "stride_bk" if b_major == "n" else "stride_bn", "stride_cm"]
    ty = dict(a_ptr=P(t), b_ptr=P(t), c_ptr=P(f16), M=i32, N=i32, K=i32, **{n: i32 for n in runtime})
    div = {n: 16 for n in ty}
    ce = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, ACTIVATION="", stride_ak=1, stride_cn=1,
              **({"stride_bn": 1} if b_major == "n" else {"stride_bk": 1}))
    return generate_cuda(ir("matmul.py", "matmul_kernel", ty, ce, div, w, s), "sm_90a", w, s)


@pytest.mark.parametrize("b_major", ["n", "k"])
@pytest.mark.parametrize("dt,cfg", [("fp8e4nv", (128, 128, 128, 3, 8)), ("fp8e5", (128, 128, 64, 4, 4)),
                                    ("fp8e4nv", (64, 128, 64, 4, 4)), ("fp8e4nv", (128, 256, 64, 3, 8))])
def test_fp8_matmul_is_qgmma(b_major, dt, cfg, monkeypatch):
    """The pipelined fp8 matmul: QGMMA k32 with both operands K-major, in flight across iterations, no
    spill; an N-major B is transposed in shared memory (into two alternating K-major copies, its
    shared memory counted in the pipeline's budget), a K-major B is read where cp.async put it."""
    m = _fp8_matmul(monkeypatch, b_major, dt, cfg)
    assert m.metadata["dot_lowerings"] == ["wgmma"]
    assert "wgmma_wait<1>();" in m.source
    bm, bn, bk, s, w = cfg
    ring = (s + 1) * (bm * bk + bk * bn)
    if b_major == "n":
        assert "transpose the" in m.source and m.shared_bytes == ring + 2 * bk * bn
    else:
        assert "transpose the" not in m.source and m.shared_bytes == ring
    b = compile_cuda(m, "sm_90a")
    assert b.n_spills == 0 and b.stack_frame == 0, b.log
    s = _sass_or_skip(b)
    ty = {"fp8e4nv": "E4M3", "fp8e5": "E5M2"}[dt]
    assert re.search(rf"QGMMA\.64x{min(256, bn)}x32\.F32\.{ty}\.{ty}", s), "no QGMMA in the SASS"
    assert not re.search(r"\bHMMA\b", s)


def test_fp8_selection(monkeypatch):
    """fp8 dots take wgmma on sm_90a (K a multiple of 32) and stay off it elsewhere."""
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")
    from kernels import P, f16, i32

    from newt.backend.cuda.targets import get_target
    ty = dict(a_ptr=P(nl.float8e4nv), b_ptr=P(nl.float8e4nv), c_ptr=P(f16), M=i32, N=i32, K=i32, stride_am=i32,
              stride_bk=i32, stride_cm=i32)
    for bk, want in ((64, "wgmma"), (16, "fma")):
        f = ir("matmul.py", "matmul_kernel", ty, dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=bk, GROUP_M=8, ACTIVATION="",
                                                      stride_ak=1, stride_bn=1, stride_cn=1), None, 8, 3)
        d = next(op for op in f.walk() if op.name == "dot")
        assert select_dot_lowering(d, get_target("sm_90a"), 8).name == want
        assert select_dot_lowering(d, get_target("sm_80"), 8).name == "fma"



@newt.jit
def _k_loop_fp8_promoted(a_ptr, b_ptr, c_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    rk = nl.arange(0, K)
    acc = nl.zeros((M, N), dtype=nl.float32)
    for k in range(0, 4):
        a = nl.load(a_ptr + rm[:, None] * K * 4 + k * K + rk[None, :])
        b = nl.load(b_ptr + (k * K + rk[:, None]) * N + rn[None, :])
        acc = nl.dot(a, b, acc, max_num_imprecise_acc=64)
    nl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def test_fp8_promotion_sums_each_piece_in_fp32(monkeypatch):
    """``max_num_imprecise_acc=64`` on a K=128 tile: two pieces, each from zero (scale-d 0 on its first
    wgmma), waited for and added in fp32; such a dot does not stay in flight."""
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")
    ck = newt.compile(_k_loop_fp8_promoted,
                      signature={"a_ptr": "*fp8e4nv:16", "b_ptr": "*fp8e4nv:16", "c_ptr": "*fp32:16"},
                      constexprs={"M": 128, "N": 128, "K": 128}, target="sm_90a", num_warps=8, num_stages=3,
                      cache=False)
    cu = ck.asm["cuda"]
    assert "wgmma_wait<1>" not in cu and "transpose the" in cu
    starts = re.findall(r"wgmma_m64n128k32_e4m3_e4m3\(&part\d+\[0\], [^;]*, 0\);", cu)
    assert len(starts) == 2  # two 64-long pieces, each from zero
    assert len(re.findall(r"wgmma_m64n128k32_e4m3_e4m3\(&", cu)) == 4  # 4 k steps of 32
    assert ck.metadata.n_spills == 0
    s = _sass_or_skip(type("B", (), {"cubin": ck.asm["cubin"]})())
    assert "QGMMA.64x128x32.F32.E4M3.E4M3" in s


# --- attention on the Hopper path: shared memory, registers, SASS (offline) --------------------------------


def _attn_module(monkeypatch, stage, head_dim, nw, stages=3, block_m=128):
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")
    cfg = next(c for c in corpus_configs() if c[0] == "attention.py" and c[3]["STAGE"] == (stage & 1 or 3))
    cx = dict(cfg[3], HEAD_DIM=head_dim, STAGE=stage, BLOCK_M=block_m)
    return generate_cuda(ir(cfg[0], cfg[1], cfg[2], cx, cfg[4], num_warps=nw, num_stages=stages), "sm_90a", nw,
                         stages)


@pytest.mark.parametrize("nw", [4, 8])
def test_causal_attention_d128_fits_one_ring_and_does_not_spill(nw, monkeypatch):
    """Causal attention (STAGE=3: two pipelined loops over K and V) at d=128, 128x64 blocks, 3 stages: the
    loops run one after the other, so their rings share one region (3 x (K + V tiles)) next to Q's staged
    tile -- 128 KB, Triton's figure -- where two rings (224 KB) left no room for anything else and the
    in-flight variant (294912 bytes) was rejected.  No spill in either warp count."""
    m = _attn_module(monkeypatch, 3, 128, nw)
    ring = (4 if nw == 8 else 3) * (64 * 128 * 2) * 2  # 8 warps: P.V in flight, one buffer more
    assert m.shared_bytes == ring + 128 * 128 * 2, m.shared_bytes
    assert m.source.count("software pipeline, 3 stages") == 2
    assert "SMEM_PIPE1" not in m.source  # both loops address the one region
    b = compile_cuda(m, "sm_90a")
    if nw == 4:  # 255 registers: NVRTC 13.0's ptxas spilled 64 bytes on the device (2026-12-02), 13.5's none;
        # Triton 3.9's build of the same config spills 2012
        assert b.n_spills <= 64, b.log
        return
    assert b.n_spills == 0 and b.stack_frame == 0, b.log
    s = _sass_or_skip(b)
    assert not re.search(r"\b(LDL|STL)\b", s)
    assert len(re.findall(r"HGMMA\.64x128x16\.F32 R\d+, R\d+, gdesc", s)) >= 2 * 4  # P.V: A from registers


def test_pipelined_loops_share_their_ring_at_the_largest_size(monkeypatch):
    """The region is the largest ring, each loop's buffers from its start (1024-byte aligned for wgmma)."""
    m1 = _attn_module(monkeypatch, 1, 64, 8)
    m3 = _attn_module(monkeypatch, 3, 64, 8)
    assert m3.shared_bytes == m1.shared_bytes == 4 * 2 * (64 * 64 * 2) + 128 * 64 * 2
    assert re.search(r"smem \+ \(SMEM_PIPE0 \+ 32768\)", m3.source)  # V's buffers after K's 4 x 8 KB


@pytest.mark.parametrize("block_m,nw,blocks", [(128, 8, 2), (64, 4, 4)])
def test_causal_attention_d64_fits_triton_blocks_per_sm(block_m, nw, blocks, monkeypatch):
    """Causal, d=64: 128x64 at 8 warps and 64x64 at 4 warps take at most 128 registers without a spill, so
    2 and 4 blocks per SM as in Triton's builds of the same source (127 and 128 registers): ptxas' free
    choice lands a little above the cap (142, 144), and compile_cuda then asks for that many blocks."""
    m = _attn_module(monkeypatch, 3, 64, nw, block_m=block_m)
    b = compile_cuda(m, "sm_90a")
    assert b.n_regs <= 128 and b.n_spills == 0, (b.n_regs, b.log)
    assert blocks * (b.shared + 1024) <= 228 * 1024
    if m.metadata["min_blocks"] != 1:
        assert f"__launch_bounds__({32 * nw}, {blocks})" in m.source and "min_blocks_raised" in m.metadata


def test_causal_mask_index_is_one_add_per_thread(monkeypatch):
    """``start_n + offs_n`` in the diagonal loop: one per-thread base and register immediates, not the
    16 register-dependent halves of ``offs_n`` held in registers across the loop (NVVM hoists those)."""
    m = _attn_module(monkeypatch, 2, 64, 8)
    body = m.source[m.source.index("mask = offs_m[:, None] >= (start_n + offs_n[None, :])"):]
    body = body[:body.index("nl.where")]
    base = re.search(r"const int (v\d+_base\d*) = .*;", body)
    assert base, body
    assert re.search(rf"\] = \(int\)\(\(unsigned int\){base.group(1)} \+ \(unsigned int\)\(", body), body
    b = compile_cuda(m, "sm_90a")
    assert b.n_spills == 0 and b.n_regs <= 128, b.n_regs


def test_exp2_is_the_ftz_approximation(monkeypatch):
    """exp2 on fp32 lowers as Triton's does, ``ex2.approx.ftz.f32``: no FSETP + FMUL pair around each
    MUFU.EX2 for subnormal results (one softmax element each)."""
    m = _attn_module(monkeypatch, 1, 64, 8)
    b = compile_cuda(m, "sm_90a")
    assert "ex2.approx.ftz.f32" in b.ptx and not re.search(r"ex2\.approx\.f32", b.ptx)
    s = _sass_or_skip(b)
    assert not re.search(r"FSETP\.GEU\.AND P\d+, PT, R\d+, -126", s)  # the non-ftz range check


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("block_m,block_n,nw", [(128, 64, 4), (128, 64, 8), (64, 64, 4)])
def test_attention_configs_on_gpu(block_m, block_n, nw, head_dim, causal):
    """bench.py's attention configs (the autotuner's whole list), both head dims, causal (two pipelined loops
    sharing one ring, the diagonal loop's mask) and not, against SDPA in fp32."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    import os
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from gpu_launch import compile_fn, launch
    from kernels import CORPUS, jit_source
    Z, H, NCTX = 1, 3, 512
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn((Z, H, NCTX, head_dim), device="cuda", generator=gen).to(torch.float16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    sm = head_dim ** -0.5
    stage = 3 if causal else 1
    b = compile_fn(jit_source(os.path.join(CORPUS, "attention.py"), "attn_fwd"),
                   {"Q": nl.pointer_type(nl.float16), "K": nl.pointer_type(nl.float16),
                    "V": nl.pointer_type(nl.float16), "sm_scale": nl.float32, "Out": nl.pointer_type(nl.float16),
                    "stride_qm": nl.int32, "stride_kn": nl.int32, "stride_vn": nl.int32, "stride_om": nl.int32,
                    "N_CTX": nl.int32},
                   {"HEAD_DIM": head_dim, "BLOCK_M": block_m, "BLOCK_N": block_n, "STAGE": stage},
                   div={"Q": 16, "K": 16, "V": 16, "Out": 16, "stride_qm": 16, "stride_kn": 16, "stride_vn": 16,
                        "stride_om": 16, "N_CTX": 16}, num_warps=nw, num_stages=3)
    launch(b, (NCTX // block_m, Z * H), q, k, v, sm, o, q.stride(2), k.stride(2), v.stride(2), o.stride(2), NCTX)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal,
                                                           scale=sm)
    torch.testing.assert_close(o.float(), ref, rtol=1e-2, atol=1e-2)
    # 128x64 at 4 warps with d=128 sits at 255 registers (NVRTC 13.0 spilled 8 and 64 bytes, 2026-12-02)
    assert b.n_spills <= (64 if (block_m, nw, head_dim) == (128, 4, 128) else 0), b.log


@pytest.mark.parametrize("stage", [1, 3])
@pytest.mark.parametrize("block_m,head_dim,nw,in_flight", [(128, 64, 8, True), (128, 128, 8, True), (128, 64, 4, True),
                                                           (128, 128, 4, False), (64, 128, 4, False),
                                                           (64, 64, 4, False)])
def test_attention_pv_dot_stays_in_flight(stage, block_m, head_dim, nw, in_flight, monkeypatch):
    """Attention's ``acc = dot(p, v, acc * alpha)`` is left in flight into the next iteration (Triton does
    the same): its accumulator is read only after the next QK dot's full wait, which fences the
    loop-carried registers; the ring gets the extra buffer; ptxas does not serialize the wgmma.  Not at
    128x64, 4 warps, d=128, where P's fragments live next to 192 accumulator registers per thread, nor at
    64x64, 4 warps, where the extra buffer would cost a resident block per SM (Triton's pick there)."""
    m = _attn_module(monkeypatch, stage, head_dim, nw, block_m=block_m)
    loops = 1 if stage == 1 else 2
    assert m.source.count("wgmma_wait<1>();") == (loops if in_flight else 0)
    assert m.source.count("the previous iteration's in-flight wgmma is complete") == (loops if in_flight else 0)
    tiles = (64 * head_dim * 2) * 2  # a K and a V tile
    assert m.shared_bytes == (4 if in_flight else 3) * tiles + block_m * head_dim * 2
    b = compile_cuda(m, "sm_90a")
    assert b.n_spills <= (8 if (head_dim, nw) == (128, 4) else 0), b.log
    assert "wgmma serialization" not in b.log.lower(), b.log
    s = _sass_or_skip(b)
    lines = s.splitlines()
    pv = [k for k, ln in enumerate(lines) if re.search(r"HGMMA\.\S+ R\d+, R\d+, gdesc.*gsb0", ln)]
    assert pv, "no register-A HGMMA"
    for k in pv:  # the wait after each P.V group leaves it in flight
        nxt = next(ln for ln in lines[k + 1:] if "WARPGROUP.DEPBAR" in ln)
        assert ("gsb0, 0x1" in nxt) == in_flight, nxt
