"""fp32 -> bf16 conversion (``f32_to_bf16`` / ``f32_to_bf16_rz`` of the prelude): the hardware ``cvt`` on
sm_80+, the exact integer rounding below.

Offline: the integer rounding, compiled as host C++ from the prelude's text, against a reference that
rounds the value (frexp / ldexp / rint in double: IEEE round to nearest even, or toward zero, which is
what PTX's ``cvt.rn`` / ``cvt.rz`` specify, subnormals kept and overflow to infinity) over every exponent,
sign and rounding-relevant low half, and, marked slow, every one of the 2**32 inputs; the PTX and SASS
of sm_80+ use the instruction (two conversions per ``F2FP.BF16.F32.PACK_AB``) and sm_75's the integer
path; bf16 matmuls on sm_90a (wgmma) and sm_80 (mma.sync) have fp16's epilogue (the integer rounding
made the 128x256 wgmma kernel 2216 SASS instructions against fp16's 1288).

On a GPU: every one of the 2**32 fp32 bit patterns through a cast kernel holding eight elements a
thread, against the integer rounding computed with torch: the same bits for every non-NaN input, a NaN
for every NaN (its bits are the hardware's: see docs/backend.md).
"""

from __future__ import annotations

import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys

import pytest

import newt
import newt.language as nl
from newt.backend.cuda.prelude import PRELUDE

sys.path.insert(0, os.path.dirname(__file__))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _soft_helpers() -> str:
    """The prelude's integer-rounding helpers, as written there."""
    start = PRELUDE.index("__device__ __forceinline__ bf16_t f32_to_bf16_soft(")
    end = PRELUDE.index("#if __CUDA_ARCH__ >= 800", start)
    return PRELUDE[start:end]


_HARNESS = r"""
#include <cfenv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#define __device__
#define __forceinline__ inline
struct bf16_t { unsigned short x; };
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
%(helpers)s
// The value rounded to bf16's 8 significant bits (quantum 2^(e-7), at least 2^-133: the subnormals),
// in double (exact: |f| / q < 2^9 with at most 24 significant bits), to nearest even or toward zero;
// 2^128 and above is infinity. Encoded through float: the result has its low 16 bits zero.
static unsigned short reference(unsigned u, bool rz) {
  const float f = __uint_as_float(u);
  const unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
  if (std::isinf(f)) return sign | 0x7f80;
  if (f == 0.0f) return sign;
  int e;
  std::frexp(std::fabs((double)f), &e);  // |f| = m 2^e, m in [0.5, 1)
  const int E = (e - 1) < -126 ? -126 : (e - 1);
  const double q = std::ldexp(1.0, E - 7);
  const double s = std::fabs((double)f) / q;
  const double r = (rz ? std::trunc(s) : std::nearbyint(s)) * q;
  if (r >= std::ldexp(1.0, 128)) return sign | 0x7f80;
  const unsigned b = __float_as_uint((float)r);
  if (b & 0xffffu) { std::printf("reference not a bf16: %%08x\n", u); std::exit(2); }
  return sign | (unsigned short)(b >> 16);
}
static unsigned long long checked = 0, bad = 0;
static void check(unsigned u) {
  ++checked;
  const bf16_t rn = f32_to_bf16_soft(__uint_as_float(u)), rz = f32_to_bf16_rz_soft(__uint_as_float(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: a quiet NaN of the input's sign
    const unsigned short want_sign = (unsigned short)((u >> 16) & 0x8000u);
    for (unsigned short h : {rn.x, rz.x})
      if ((h & 0x7f80) != 0x7f80 || !(h & 0x40) || (h & 0x8000) != want_sign) {
        if (bad++ < 8) std::printf("NaN %%08x -> %%04x\n", u, h);
      }
    return;
  }
  const unsigned short wn = reference(u, false), wz = reference(u, true);
  if (rn.x != wn || rz.x != wz) {
    if (bad++ < 8) std::printf("%%08x: rn %%04x (want %%04x) rz %%04x (want %%04x)\n", u, rn.x, wn, rz.x, wz);
  }
}
int main(int argc, char** argv) {
  std::fesetround(FE_TONEAREST);
  if (argc > 1 && std::strcmp(argv[1], "all") == 0) {
    unsigned u = 0;
    do check(u); while (++u != 0);
  } else {
    // every upper half (sign, exponent, 7 fraction bits) with the low halves that decide the rounding
    const unsigned lows[] = {0x0000, 0x0001, 0x3fff, 0x4000, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xc000,
                             0xfffe, 0xffff, 0x1234, 0x9abc, 0x5555, 0xaaaa};
    for (unsigned hi = 0; hi < 0x10000u; ++hi)
      for (unsigned lo : lows) check((hi << 16) | lo);
    // every low half at the edges: zero / subnormal / smallest normals, around 1, the largest finite
    // values (rounding to infinity), each sign
    const unsigned exps[] = {0x00, 0x01, 0x02, 0x7e, 0x7f, 0x80, 0xfd, 0xfe};
    const unsigned fracs[] = {0x00, 0x01, 0x3f, 0x40, 0x7e, 0x7f};
    for (unsigned s = 0; s < 2; ++s)
      for (unsigned e : exps)
        for (unsigned f : fracs)
          for (unsigned lo = 0; lo < 0x10000u; ++lo) check((s << 31) | (e << 23) | (f << 16) | lo);
  }
  std::printf("checked %%llu bad %%llu\n", checked, bad);
  return bad != 0;
}
"""


@pytest.mark.parametrize("which", ["edges", pytest.param("all", marks=pytest.mark.slow)])
def test_integer_rounding_is_ieee_round_to_nearest_even_and_toward_zero(which, tmp_path):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    (tmp_path / "t.cpp").write_text(_HARNESS % {"helpers": _soft_helpers()})
    subprocess.run([cxx, "-O2", "-std=c++17", "-o", str(tmp_path / "t"), str(tmp_path / "t.cpp")], check=True)
    r = subprocess.run([str(tmp_path / "t"), which], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    n = int(re.search(r"checked (\d+) bad 0", r.stdout).group(1))
    assert n == (1 << 32 if which == "all" else (1 << 16) * 16 + 2 * 8 * 6 * (1 << 16))


def _soft_rn(u: int) -> int:
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return ((u >> 16) | 0x40) & 0xFFFF
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def test_constant_folding_and_torch_agree_with_the_integer_rounding():
    """``const_literal``'s bf16 bits (constants in the generated code) and torch's CPU conversion (the
    interpreter's) round like the device for random and boundary non-NaN inputs. NaN: constants are 0x7fc0,
    torch's NaN another quiet NaN (0xffff with torch 2.13 on the CPU): NaNs compare as NaNs, not as bits."""
    torch = pytest.importorskip("torch")
    from newt.backend.cuda.ctypes import _bf16_bits
    rng = random.Random(13)
    us = [rng.getrandbits(32) for _ in range(20000)]
    us += [(s << 31) | (e << 23) | m for s in (0, 1) for e in (0, 1, 0x7F, 0xFE) for m in
           (0, 0x7FFF, 0x8000, 0x8001, 0x18000, 0x7F7FFF, 0x7F8000, 0x7FFFFF)]
    us = [u for u in us if (u & 0x7FFFFFFF) <= 0x7F800000]
    fs = [struct.unpack("<f", struct.pack("<I", u))[0] for u in us]
    want = [_soft_rn(u) for u in us]
    assert [_bf16_bits(f) for f in fs] == want
    t = torch.tensor(us, dtype=torch.int64).to(torch.int32).view(torch.float32).to(torch.bfloat16)
    assert (t.view(torch.int16).to(torch.int64) & 0xFFFF).tolist() == want
    assert _bf16_bits(math.nan) == 0x7FC0
    t = torch.tensor([math.nan, -math.nan]).to(torch.bfloat16)
    assert all((b & 0x7FC0) == 0x7FC0 for b in (t.view(torch.int16).to(torch.int64) & 0xFFFF).tolist())


# ---------------------------------------------------------------------------------------------------
# the generated code: PTX and SASS
# ---------------------------------------------------------------------------------------------------


@newt.jit
def cast_to_bf16(x_ptr, out_ptr, n, MODE: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    if MODE == "rtz":
        y = x.to(out_ptr.dtype.element_ty, fp_downcast_rounding="rtz")
    else:
        y = x.to(out_ptr.dtype.element_ty)
    nl.store(out_ptr + offs, y, mask=m)


@newt.jit
def bits_to_bf16(out_ptr, base, MODE: nl.constexpr, BLOCK: nl.constexpr):
    """Every fp32 bit pattern ``base + i`` (int32 arithmetic wraps) cast to bf16."""
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    x = (base + offs).to(nl.float32, bitcast=True)
    if MODE == "rtz":
        y = x.to(nl.bfloat16, fp_downcast_rounding="rtz")
    else:
        y = x.to(nl.bfloat16)
    nl.store(out_ptr + offs, y)


def _sass_or_skip(cubin):
    from newt.backend.cuda import sass
    try:
        return sass(cubin)
    except Exception as e:
        pytest.skip(f"cuobjdump unavailable: {e}")


def _instructions(s: str) -> list:
    return [ln for ln in s.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", ln)]


def _cast_kernel(target, mode, dt):
    sig = {"x_ptr": "*fp32:16", "out_ptr": f"*{dt}:16", "n": "i32:16"}
    ck = newt.compile(cast_to_bf16, signature=sig, constexprs={"MODE": mode, "BLOCK": 1024}, target=target,
                      num_warps=4, cache=False)
    assert ck.metadata.n_spills == 0
    return ck, _instructions(_sass_or_skip(ck.asm["cubin"]))


_PACK = {"bf16": r"\bF2FP\.BF16(\.F32)?\.PACK_AB\b", "fp16": r"\bF2FP(\.F16)?(\.F32)?\.PACK_AB\b"}
_SINGLE = {"bf16": r"\bF2F\.BF16\.F32\b", "fp16": r"\bF2F\.F16\.F32\b"}


@pytest.mark.parametrize("mode", ["rtne", "rtz"])
@pytest.mark.parametrize("target", ["sm_80", "sm_89", "sm_90a", "sm_120"])
def test_sm80_and_later_convert_in_hardware_like_fp16(target, mode):
    """Eight elements a thread: eight ``cvt``s in the PTX, no integer rounding; in the SASS the same
    conversion instructions as the fp16 cast: on sm_80-sm_90a ptxas pairs them (four
    ``F2FP.BF16.F32.PACK_AB``, what ``cvt.rn.bf16x2.f32`` also gives), on sm_120 it keeps eight
    ``F2F.BF16.F32`` (as fp16's eight ``F2F.F16.F32``)."""
    ck, s = _cast_kernel(target, mode, "bf16")
    ptx = ck.asm["ptx"]
    rnd = "rz" if mode == "rtz" else "rn"
    assert ptx.count(f"cvt.{rnd}.bf16.f32") == 8, "one cvt an element"
    assert "32767" not in ptx and "0x7fff" not in ptx.lower(), "the integer rounding is still there"
    counts = {}
    for dt in ("bf16", "fp16"):
        ins = s if dt == "bf16" else _cast_kernel(target, mode, "fp16")[1]
        packs = [ln for ln in ins if re.search(_PACK[dt], ln)]
        singles = [ln for ln in ins if re.search(_SINGLE[dt], ln)]
        assert all((".RZ" in ln) == (mode == "rtz") for ln in packs + singles)
        assert 2 * len(packs) + len(singles) == 8, (dt, packs, singles)
        counts[dt] = (len(packs), len(singles), len(ins))
    assert counts["bf16"][:2] == counts["fp16"][:2], counts
    assert counts["bf16"][2] <= counts["fp16"][2], counts
    if target != "sm_120":
        assert counts["bf16"][0] == 4


def test_below_sm80_keeps_the_integer_rounding():
    """A target without bf16 conversions (sm_75: a Target made up here; newt ships none below sm_80)
    compiles the same source to the integer path."""
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.backend.cuda.targets import Target
    from newt.frontend import build_ir
    sm75 = Target("sm_75", (7, 5), max_shared=64 * 1024, shared_per_sm=64 * 1024, mma_sync=False,
                  features=frozenset())
    f = build_ir(cast_to_bf16, {"x_ptr": nl.pointer_type(nl.float32), "out_ptr": nl.pointer_type(nl.bfloat16),
                                "n": nl.int32}, {"MODE": "rtne", "BLOCK": 1024},
                 divisibility={"x_ptr": 16, "out_ptr": 16, "n": 16}, num_warps=4, num_stages=3)
    m = generate_cuda(f, "sm_80", 4, 3)
    b = compile_cuda(m, sm75)
    assert b.n_spills == 0
    assert "cvt.rn.bf16" not in b.ptx and "32767" in b.ptx
    assert "F2FP" not in _sass_or_skip(b.cubin)


def _bench_matmul(monkeypatch, lowering, dt, target, cfg):
    monkeypatch.setenv("NEWT_DOT_LOWERING", lowering)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import bench
    from common import instantiate
    mod = instantiate(bench.TEMPLATE, "newt", "bf16_cast_test")
    k = mod._matmul_tile
    while hasattr(k, "fn") and not hasattr(k, "constexpr_names"):
        k = k.fn
    bm, bn, bk, st, w = cfg
    sig = {"a_ptr": f"*{dt}:16", "b_ptr": f"*{dt}:16", "c_ptr": f"*{dt}:16"}
    sig.update({n: "i32:16" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
    return newt.compile(k, signature=sig, constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8,
                                                      "stride_ak": 1, "stride_bn": 1, "stride_cn": 1},
                        target=target, num_warps=w, num_stages=st, cache=False)


@pytest.mark.parametrize("lowering,target,cfg", [
    ("wgmma", "sm_90a", (128, 256, 64, 3, 8)), ("wgmma", "sm_90a", (256, 128, 64, 3, 8)),
    ("wgmma", "sm_90a", (64, 64, 32, 5, 2)), ("mma_sync", "sm_80", (128, 128, 32, 4, 4))],
    ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v)
def test_bf16_matmul_has_fp16s_epilogue(lowering, target, cfg, monkeypatch):
    """bench.py's matmul (``acc.to(c_ptr.dtype.element_ty)``): the bf16 kernel converts its accumulators
    with as many packed conversions as the fp16 kernel, is no longer than it (before: 1.72x the SASS of
    fp16 at 128x256x64 on sm_90a) and does not spill."""
    got = {}
    for dt in ("fp16", "bf16"):
        ck = _bench_matmul(monkeypatch, lowering, dt, target, cfg)
        assert ck.metadata.n_spills == 0, (dt, ck.metadata.n_spills)
        s = _instructions(_sass_or_skip(ck.asm["cubin"]))
        got[dt] = (len(s), sum(bool(re.search(_PACK[dt], ln)) for ln in s))
    bm, bn, _, _, w = cfg
    assert got["bf16"][1] == got["fp16"][1] == bm * bn // (32 * w) // 2, got
    assert got["bf16"][0] <= got["fp16"][0] * 1.02, got


# ---------------------------------------------------------------------------------------------------
# on the GPU
# ---------------------------------------------------------------------------------------------------


def _reference_bits(u, rz: bool):
    """The integer rounding on torch int64 tensors (bits as 0..2**32-1): bf16 bits as int64."""
    return (u >> 16) if rz else ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["rtne", "rtz"])
def test_every_fp32_bit_pattern_on_the_gpu(mode):
    torch = pytest.importorskip("torch")
    from gpu_launch import compile_fn, launch
    BLOCK, CHUNK = 1024, 1 << 28
    b = compile_fn(bits_to_bf16, {"out_ptr": nl.pointer_type(nl.bfloat16), "base": nl.int32},
                   {"MODE": mode, "BLOCK": BLOCK}, div={"out_ptr": 16}, num_warps=4)
    assert b.n_spills == 0
    out = torch.empty(CHUNK, device="cuda", dtype=torch.bfloat16)
    ar = torch.arange(CHUNK, device="cuda", dtype=torch.int64)
    for c in range((1 << 32) // CHUNK):
        base = c * CHUNK
        launch(b, (CHUNK // BLOCK,), out, base - (1 << 32) if base >= 1 << 31 else base)
        u = ar + base
        got = out.view(torch.int16).to(torch.int64) & 0xFFFF
        nan_in = (u & 0x7FFFFFFF) > 0x7F800000
        want = _reference_bits(u, mode == "rtz")
        wrong = (got != want) & ~nan_in
        assert not wrong.any(), f"{int(wrong.sum())} wrong, first input {int(u[wrong][0]):08x}: " \
                                f"{int(got[wrong][0]):04x} for {int(want[wrong][0]):04x}"
        got_nan = ((got & 0x7F80) == 0x7F80) & ((got & 0x7F) != 0)
        assert bool((got_nan == nan_in).all()), "a NaN lost, or one made"
