"""The fp8 formats Triton declares beyond e4m3/e5m2: ``float8e4b15`` (bias 15, no inf), AMD's ``float8e4b8``
and ``float8e5b16`` ("fnuz": NaN is 0x80, no negative zero).  Values, conversions both ways, abs/neg, and the
CUDA prelude's conversions compiled on the host and compared bit for bit with the interpreter's."""

from __future__ import annotations

import math
import shutil
import subprocess

import pytest
import torch

import newt
import newt.language as nl

FORMATS = {  # name: (dtype, mantissa bits, bias, fnuz)
    "e4b15": (nl.float8e4b15, 3, 15, False),
    "e4b8": (nl.float8e4b8, 3, 8, True),
    "e5b16": (nl.float8e5b16, 2, 16, True),
}


def ref_value(byte: int, mb: int, bias: int, fnuz: bool) -> float:
    """The value of an fp8 bit pattern, from the format's definition."""
    sign = -1.0 if byte & 0x80 else 1.0
    if fnuz and byte == 0x80:
        return math.nan
    if not fnuz and byte & 0x7F == 0x7F:
        return math.nan
    e = (byte & 0x7F) >> mb
    m = byte & ((1 << mb) - 1)
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - mb)
    return sign * (1 + m / (1 << mb)) * 2.0 ** (e - bias)


def test_dtype_attributes():
    for name, (dt, mb, bias, _) in FORMATS.items():
        assert dt.is_fp8() and dt.is_floating() and dt.primitive_bitwidth == 8
        assert dt.fp_mantissa_width == mb and dt.exponent_bias == bias
        assert getattr(dt, f"is_fp8{name}")()
        assert nl.str_to_ty(f"fp8{name}") == dt
        assert repr(dt) == f"nl.float8{name}"


@newt.jit
def _roundtrip(x_ptr, f_ptr, back_ptr, abs_ptr, neg_ptr, N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    f = x.to(nl.float32)
    nl.store(f_ptr + offs, f)
    nl.store(back_ptr + offs, f.to(x.dtype))
    nl.store(abs_ptr + offs, nl.abs(x))
    nl.store(neg_ptr + offs, -x)


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_bit_pattern(backend, name):
    dt, mb, bias, fnuz = FORMATS[name]
    bits = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    f = backend.empty(256)
    back, ab, ng = (backend.zeros(256, dtype=torch.uint8) for _ in range(3))
    x = backend.put(bits)
    r = newt.reinterpret
    backend.launch(_roundtrip, (1,), r(x, dt), f, r(back, dt), r(ab, dt), r(ng, dt), N=256)
    f, back, ab, ng = (backend.get(t) for t in (f, back, ab, ng))
    for b in range(256):
        want = ref_value(b, mb, bias, fnuz)
        got = f[b].item()
        assert (math.isnan(want) and math.isnan(got)) or (got == want and math.copysign(1, got) ==
                                                           math.copysign(1, want)), (b, got, want)
        if math.isnan(want):
            assert math.isnan(ref_value(back[b].item(), mb, bias, fnuz))
            assert math.isnan(ref_value(ab[b].item(), mb, bias, fnuz))
            continue
        assert back[b].item() == (0 if fnuz and want == 0 else b)  # fp32 -> fp8 is exact on fp8 values
        assert ref_value(ab[b].item(), mb, bias, fnuz) == abs(want)
        nv = ref_value(ng[b].item(), mb, bias, fnuz)
        assert nv == -want and (not fnuz or ng[b].item() != 0x80)  # fnuz: -0 is 0, never the NaN


def _finite_values(mb, bias, fnuz):
    """The non-negative finite values, ascending (the bit patterns 0x00..0x7f are in value order)."""
    return [v for v in (ref_value(b, mb, bias, fnuz) for b in range(128)) if not math.isnan(v)]


def ref_round(v: float, mb, bias, fnuz, rz: bool) -> float:
    """Nearest (ties to even mantissa) or toward-zero fp8 value, saturating to the largest finite value."""
    if math.isnan(v):
        return math.nan
    grid = _finite_values(mb, bias, fnuz)
    a = min(abs(v), grid[-1])
    lo = max(g for g in grid if g <= a)
    hi = min(g for g in grid if g >= a)
    if rz or lo == hi:
        r = lo
    else:
        dl, dh = a - lo, hi - a
        if dl != dh:
            r = lo if dl < dh else hi
        else:  # the even pattern
            r = lo if grid.index(lo) % 2 == 0 else hi
    return math.copysign(r, v) if not (fnuz and r == 0) else 0.0


@newt.jit
def _convert(x_ptr, rn_ptr, rz_ptr, N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    nl.store(rn_ptr + offs, x.to(rn_ptr.dtype.element_ty))
    nl.store(rz_ptr + offs, x.to(rz_ptr.dtype.element_ty, fp_downcast_rounding="rtz"))


def _probe_values(mb, bias, fnuz):
    grid = _finite_values(mb, bias, fnuz)
    vals = set(grid)
    for a, b in zip(grid, grid[1:]):
        vals.update({(a + b) / 2, a + (b - a) / 4, b - (b - a) / 4})
    vals.update({grid[-1] * 1.01, grid[-1] * 4, math.inf, math.nan, grid[1] / 3})
    vals = sorted(vals | {-v for v in vals}, key=lambda v: (math.isnan(v), v))
    n = 1 << (len(vals) - 1).bit_length()
    return torch.tensor(vals + [0.0] * (n - len(vals)), dtype=torch.float32)


@pytest.mark.parametrize("name", list(FORMATS))
def test_fp32_to_fp8_rounding(backend, name):
    dt, mb, bias, fnuz = FORMATS[name]
    x = _probe_values(mb, bias, fnuz)
    n = x.numel()
    rn, rz = backend.zeros(n, dtype=torch.uint8), backend.zeros(n, dtype=torch.uint8)
    backend.launch(_convert, (1,), backend.put(x), newt.reinterpret(rn, dt), newt.reinterpret(rz, dt), N=n)
    rn, rz = backend.get(rn), backend.get(rz)
    for i, v in enumerate(x.tolist()):
        for got, is_rz in ((rn[i].item(), False), (rz[i].item(), True)):
            want = ref_round(v, mb, bias, fnuz, is_rz)
            gv = ref_value(got, mb, bias, fnuz)
            assert (math.isnan(want) and math.isnan(gv)) or (gv == want and math.copysign(1, gv) ==
                                                             math.copysign(1, want)), (v, is_rz, got, want)


@pytest.mark.parametrize("name", list(FORMATS))
def test_fp8_variants_compile_for_sm80_and_sm90a(name):
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.frontend import build_ir
    dt = FORMATS[name][0]
    P = nl.pointer_type
    for target in ("sm_80", "sm_90a"):
        f = build_ir(_roundtrip, dict(x_ptr=P(dt), f_ptr=P(nl.float32), back_ptr=P(dt), abs_ptr=P(dt),
                                      neg_ptr=P(dt)), dict(N=256))
        assert compile_cuda(generate_cuda(f, target, 4, 3), target).cubin
        f = build_ir(_convert, dict(x_ptr=P(nl.float32), rn_ptr=P(dt), rz_ptr=P(dt)), dict(N=64))
        assert compile_cuda(generate_cuda(f, target, 4, 3), target).cubin


_HOST_SHIM = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
#define __device__
#define __forceinline__ inline
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
struct fp8e4b15_t { unsigned char x; };
struct fp8e4b8_t { unsigned char x; };
struct fp8e5b16_t { unsigned char x; };
%(section)s
int main() {
  for (int b = 0; b < 256; ++b) {
    printf("%%08x %%08x %%08x\n", __float_as_uint(fp8e4b15_to_f32(fp8e4b15_t{(unsigned char)b})),
           __float_as_uint(fp8e4b8_to_f32(fp8e4b8_t{(unsigned char)b})),
           __float_as_uint(fp8e5b16_to_f32(fp8e5b16_t{(unsigned char)b})));
  }
  unsigned u;
  while (scanf("%%x", &u) == 1) {
    float f = __uint_as_float(u);
    printf("%%02x %%02x %%02x %%02x %%02x %%02x\n", f32_to_fp8e4b15(f).x, f32_to_fp8e4b8(f).x, f32_to_fp8e5b16(f).x,
           f32_to_fp8e4b15_rz(f).x, f32_to_fp8e4b8_rz(f).x, f32_to_fp8e5b16_rz(f).x);
  }
}
"""


def test_cuda_prelude_conversions_match_the_interpreter(tmp_path):
    """The prelude's C++ (its fp8-variant section, compiled for the host) against the interpreter, bit for bit."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    from newt.backend.cuda.prelude import PRELUDE
    from newt.interpreter import dtypes as D
    start = PRELUDE.index("// ---- fp8 without infinities")
    end = PRELUDE.index("// ----", start + 10)
    src = tmp_path / "fp8x.cpp"
    src.write_text(_HOST_SHIM % {"section": PRELUDE[start:end]})
    exe = tmp_path / "fp8x"
    subprocess.run([cxx, "-std=c++17", "-O1", "-o", str(exe), str(src)], check=True, capture_output=True)
    probes = torch.cat([_probe_values(mb, bias, fnuz) for (_, mb, bias, fnuz) in FORMATS.values()]
                       + [torch.randn(2000) * s for s in (1e-3, 1.0, 1e3)])
    inp = "\n".join(f"{b:08x}" for b in probes.view(torch.int32).tolist()) + "\n"
    out = subprocess.run([str(exe)], input=inp, capture_output=True, text=True, check=True).stdout.split("\n")
    dts = [FORMATS[n][0] for n in FORMATS]
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    for j, dt in enumerate(dts):
        want = D.to_f32(D.from_bits(codes.view(torch.int8), dt), dt)
        got = torch.tensor([int(out[b].split()[j], 16) for b in range(256)], dtype=torch.int64).to(torch.int32)
        got = got.view(torch.float32)
        same = (got == want) | (torch.isnan(got) & torch.isnan(want))
        assert bool(same.all()), (dt, codes[~same][:8].tolist())
        assert torch.equal(torch.signbit(got[~torch.isnan(got)]), torch.signbit(want[~torch.isnan(want)]))
    rows = [ln.split() for ln in out[256:] if ln]
    assert len(rows) == probes.numel()
    for j, dt in enumerate(dts):
        for k, rnd in ((j, "rtne"), (j + 3, "rtz")):
            want = D.bits_of(D.cast(probes, nl.float32, dt, rnd), dt).to(torch.int32) & 0xFF
            got = torch.tensor([int(r[k], 16) for r in rows], dtype=torch.int32)
            bad = got != want
            assert not bool(bad.any()), (dt, rnd, probes[bad][:5].tolist(), got[bad][:5].tolist(),
                                         want[bad][:5].tolist())
