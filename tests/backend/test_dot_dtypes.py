"""tf32 and int8 dots on Hopper's wgmma, offline: sm_90a SASS (HGMMA .TF32 k8, IGMMA .S8 k32, no
mma.sync, no spill), the selection rules, and the shared-memory transposition of 4-byte tiles that
makes a tf32 operand K-major (every element moved, no bank conflicts in the access model)."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest

import newt
import newt.language as nl
from newt.backend.cuda.dot import select_dot_lowering
from newt.backend.cuda.dot.transpose import bank_wavefronts, emit_transpose, min_wavefronts, plan_transpose
from newt.backend.cuda.dot.wgmma import GmmaShared
from newt.backend.cuda.targets import get_target


@newt.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
        BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, BLOCK_K: nl.constexpr, ACC: nl.constexpr, PREC: nl.constexpr):
    offs_m = nl.program_id(0) * BLOCK_M + nl.arange(0, BLOCK_M)
    offs_n = nl.program_id(1) * BLOCK_N + nl.arange(0, BLOCK_N)
    offs_k = nl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = nl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for k in range(0, nl.cdiv(K, BLOCK_K)):
        a = nl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0)
        b = nl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0)
        acc = nl.dot(a, b, acc, input_precision=PREC)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    nl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@pytest.fixture(autouse=True)
def _wgmma(monkeypatch):
    """tf32/int8 take wgmma only when asked for until a GPU run has checked them (dot/wgmma.py)."""
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")


def compile_mm(dt, b_major, cfg, prec=None, target="sm_90a", hint=":16"):
    """The masked-K matmul for ``dt`` operands (fp32 -> fp32, int8 -> int32), A K-contiguous, B N- or
    K-contiguous (``b_major``), pointers and runtime ints divisible by 16 unless ``hint`` is ''."""
    bm, bn, bk, w, s = cfg
    acc = "i32" if dt == "i8" else "fp32"
    sig = {"a_ptr": f"*{dt}{hint}", "b_ptr": f"*{dt}{hint}", "c_ptr": f"*{acc}{hint}"}
    sig.update({n: f"i32{hint}" for n in ("M", "N", "K", "stride_am", "stride_cm",
                                          "stride_bk" if b_major == "n" else "stride_bn")})
    ce = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "ACC": nl.int32 if dt == "i8" else nl.float32,
          "PREC": prec if dt == "fp32" else None, "stride_ak": 1, ("stride_bn" if b_major == "n" else "stride_bk"): 1}
    return newt.compile(_mm, signature=sig, constexprs=ce, target=target, num_warps=w, num_stages=s, cache=False)


def _sass_or_skip(ck) -> str:
    from newt.backend.cuda import sass
    try:
        return sass(ck.asm["cubin"])
    except RuntimeError as e:
        pytest.skip(f"cuobjdump unavailable: {e}")


# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): bench.py's tf32 configs and narrower ones
TF32_CFGS = [(128, 128, 32, 8, 3), (128, 256, 32, 8, 3), (64, 128, 32, 4, 4), (128, 64, 16, 4, 4), (64, 64, 8, 4, 2)]
INT8_CFGS = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (64, 128, 64, 4, 4), (128, 64, 128, 4, 3), (64, 64, 32, 4, 2)]


@pytest.mark.parametrize("b_major", ["n", "k"])
@pytest.mark.parametrize("dt,cfg", [("fp32", c) for c in TF32_CFGS] + [("i8", c) for c in INT8_CFGS],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v)
def test_tf32_int8_matmul_on_wgmma(dt, cfg, b_major):
    """The pipelined K loop: one wgmma group in flight across iterations; an N-major B is transposed in
    shared memory into two alternating K-major copies (counted in shared memory), a K-major B is read
    where cp.async put it; SASS has the warpgroup MMA only, and nothing spills."""
    bm, bn, bk, w, s = cfg
    ck = compile_mm(dt, b_major, cfg)
    cu = ck.asm["cuda"]
    eb = 4 if dt == "fp32" else 1
    kstep = 8 if dt == "fp32" else 32
    assert f"wgmma m64n{min(bn, 256)}k{kstep}" in cu
    assert "wgmma_wait<1>();" in cu
    stage = (bm * bk + bk * bn) * eb  # at least two pipeline buffers (fewer stages where the budget is short)
    if b_major == "n":
        assert f"transpose the {bk}x{bn} tile of {eb}-byte elements" in cu
        assert ck.metadata.shared >= 2 * stage + 2 * bk * bn * eb
    else:
        assert "transpose the" not in cu
        assert ck.metadata.shared >= 2 * stage
    assert ck.metadata.shared <= get_target("sm_90a").max_shared
    assert ck.metadata.n_spills == 0, ck.metadata
    sass = _sass_or_skip(ck)
    want = rf"HGMMA\.64x{min(bn, 256)}x8\.F32\.TF32" if dt == "fp32" else rf"IGMMA\.64x{min(bn, 256)}x32\.S8\.S8"
    assert re.search(want, sass), f"no {want} in the SASS"
    assert not re.search(r"\b(HMMA|IMMA)\b", sass)


@pytest.mark.parametrize("prec,want", [("tf32", "wgmma"), ("ieee", "fma"), ("tf32x3", "mma.sync")])
def test_fp32_selection_follows_input_precision(prec, want, monkeypatch):
    """Only one tf32 product per element is a wgmma: ieee stays on FMA, tf32x3 (three products) on
    mma.sync; off Hopper tf32 is mma.sync; NEWT_DOT_LOWERING=mma_sync turns wgmma off."""
    from newt.frontend import build_ir
    P = nl.pointer_type
    ty = dict(a_ptr=P(nl.float32), b_ptr=P(nl.float32), c_ptr=P(nl.float32), M=nl.int32, N=nl.int32, K=nl.int32,
              stride_am=nl.int32, stride_ak=nl.int32, stride_bk=nl.int32, stride_bn=nl.int32, stride_cm=nl.int32)
    f = build_ir(_mm, ty, dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, ACC=nl.float32, PREC=prec), num_warps=8,
                 num_stages=3)
    d = next(op for op in f.walk() if op.name == "dot")
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")
    assert select_dot_lowering(d, get_target("sm_90a"), 8).name == want
    assert select_dot_lowering(d, get_target("sm_80"), 8).name == ("fma" if prec == "ieee" else "mma.sync")
    monkeypatch.setenv("NEWT_DOT_LOWERING", "mma_sync")
    assert select_dot_lowering(d, get_target("sm_90a"), 8).name == ("fma" if prec == "ieee" else "mma.sync")
    from newt.backend.cuda.dot import wgmma
    monkeypatch.delenv("NEWT_DOT_LOWERING")
    default = want if wgmma._TF32_INT8_DEFAULT else ("fma" if prec == "ieee" else "mma.sync")
    assert select_dot_lowering(d, get_target("sm_90a"), 8).name == default


# ---------------------------------------------------------------------------------------------------
# transposing 4-byte tiles (tf32 operands that are not K-major)
# ---------------------------------------------------------------------------------------------------

SHAPES4 = [(32, 128), (32, 256), (16, 128), (8, 64), (64, 128), (128, 64), (16, 64), (8, 128), (64, 64), (32, 16)]


@pytest.mark.parametrize("rows,inner", SHAPES4)
def test_transpose4_has_no_bank_conflicts(rows, inner):
    """Every 128-bit read and write of every block group: each quarter-warp touches the eight 16-byte
    positions of a 128-byte line once (4 wavefronts an instruction)."""
    src, dst = GmmaShared(rows, inner, 4), GmmaShared(inner, rows, 4)
    plan = plan_transpose(src, dst)
    rb = plan.rb
    for r_hi, c_hi in itertools.product(range(0, rows // 4, 1 << rb), range(0, inner // 4, 1 << (5 - rb))):
        assert bank_wavefronts(src, dst, plan, r_hi, c_hi) == (min_wavefronts(4), min_wavefronts(4)), (r_hi, c_hi)


def test_transpose_rejects_what_it_cannot_move():
    with pytest.raises(ValueError, match="cannot transpose"):
        plan_transpose(GmmaShared(8, 16, 4), GmmaShared(16, 8, 4))  # 128 elements: under one block group
    with pytest.raises(ValueError, match="transposed shapes"):
        plan_transpose(GmmaShared(32, 64, 4), GmmaShared(32, 64, 4))


_HARNESS = r"""
#include <cstdio>
#include <cstring>
struct uint4 { unsigned x, y, z, w; };
static uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
alignas(16) static unsigned char smem[%(bytes)d];
int main() {
  unsigned* s = reinterpret_cast<unsigned*>(smem);
  for (int i = 0; i < %(src)d / 4; ++i) s[i] = 0x9e3779b9u * (unsigned)(i + 1);
  memset(smem + %(src)d, 0, %(dst)d);
  for (int warp_id = 0; warp_id < %(nw)d; ++warp_id)
    for (int lane_id = 0; lane_id < 32; ++lane_id) {
%(body)s
    }
  fwrite(smem, 1, sizeof smem, stdout);
  return 0;
}
"""


@pytest.mark.parametrize("rows,inner", SHAPES4)
@pytest.mark.parametrize("nw", [4, 8])
def test_transpose4_code_moves_every_element(rows, inner, nw, tmp_path):
    """The emitted transposition of 4-byte elements, compiled as host C++ (one thread after another),
    puts source element (r, c) at destination element (c, r), every one of them."""
    from newt.backend.cuda.emitter import Chunk
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src, dst = GmmaShared(rows, inner, 4), GmmaShared(inner, rows, 4)
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
            o_src, o_dst = src.offset(r, col), base + dst.offset(col, r)
            assert out[o_dst:o_dst + 4] == out[o_src:o_src + 4], (r, col)
