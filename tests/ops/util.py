"""Inputs with edge cases and exact references for the op tests."""

from __future__ import annotations

import math
import struct

import torch

import newt.language as nl

INT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
              torch.uint64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES

NL = {torch.int8: nl.int8, torch.int16: nl.int16, torch.int32: nl.int32, torch.int64: nl.int64,
      torch.uint8: nl.uint8, torch.uint16: nl.uint16, torch.uint32: nl.uint32, torch.uint64: nl.uint64,
      torch.float16: nl.float16, torch.bfloat16: nl.bfloat16, torch.float32: nl.float32,
      torch.float64: nl.float64, torch.bool: nl.int1, torch.float8_e4m3fn: nl.float8e4nv,
      torch.float8_e5m2: nl.float8e5}

BITS_VIEW = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits(dt: torch.dtype) -> int:
    return torch.empty((), dtype=dt).element_size() * 8


def signed(dt: torch.dtype) -> bool:
    return dt in (torch.int8, torch.int16, torch.int32, torch.int64)


def int_range(dt):
    b = bits(dt)
    if signed(dt):
        return -(1 << (b - 1)), (1 << (b - 1)) - 1
    return 0, (1 << b) - 1


def wrap(v: int, dt) -> int:
    b = bits(dt)
    v &= (1 << b) - 1
    if signed(dt) and v >= 1 << (b - 1):
        v -= 1 << b
    return v


def int_values(dt, n: int, gen: torch.Generator | None = None, nonzero=False):
    """``n`` ints of ``dt`` (Python list): the type's boundaries first, then random values."""
    lo, hi = int_range(dt)
    edge = [lo, hi, 0, 1, 2, 3, 7, lo + 1, hi - 1, hi // 2, (hi // 2) + 1]
    if signed(dt):
        edge += [-1, -2, -3, -7, -(hi // 2)]
    vals = [v for v in edge if lo <= v <= hi]
    g = gen or torch.Generator().manual_seed(0)
    while len(vals) < n:
        r = int(torch.randint(0, 1 << 62, (1,), generator=g)) << 2 | int(torch.randint(0, 4, (1,), generator=g))
        span = hi - lo + 1
        vals.append(lo + r % span)
        small = int(torch.randint(-100, 100, (1,), generator=g))
        if lo <= small <= hi:
            vals.append(small)
    vals = vals[:n]
    if nonzero:
        vals = [v if v != 0 else 5 for v in vals]
    return vals


def tensor_of(vals, dt) -> torch.Tensor:
    return torch.tensor(vals, dtype=dt)


def float_values(dt, n: int, gen=None, specials=True):
    g = gen or torch.Generator().manual_seed(0)
    fin = torch.finfo(dt)
    sp = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -2.5, float(fin.max), -float(fin.max), float(fin.tiny),
          float(fin.tiny) / 4 if dt != torch.bfloat16 else float(fin.tiny) / 2, float("inf"), float("-inf"),
          float("nan")] if specials else []
    r = (torch.randn(n, generator=g, dtype=torch.float64) * torch.exp(torch.randn(n, generator=g,
                                                                                   dtype=torch.float64) * 3))
    vals = torch.tensor(sp + r.tolist(), dtype=torch.float64)[:n]
    return vals.to(dt)


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def assert_same(got: torch.Tensor, want: torch.Tensor, *, rtol=0.0, atol=0.0, msg=""):
    """Exact (bitwise for floats, NaN == NaN) unless a tolerance is given."""
    assert got.dtype == want.dtype, f"{msg} dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{msg} shape {tuple(got.shape)} != {tuple(want.shape)}"
    if rtol or atol:
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, msg=msg or None)
        return
    if got.dtype.is_floating_point:
        g, w = got.to(torch.float64), want.to(torch.float64)
        same = (g == w) | (torch.isnan(g) & torch.isnan(w))
        # -0.0 and 0.0 compare equal; check the sign too
        same &= (torch.signbit(g) == torch.signbit(w)) | torch.isnan(g)
        if not bool(same.all()):
            i = int(torch.nonzero(~same)[0])
            raise AssertionError(f"{msg} element {i}: got {got.view(-1)[i].item()!r}, want "
                                 f"{want.view(-1)[i].item()!r} ({int((~same).sum())} differ)")
    else:
        gl, wl = got.reshape(-1).tolist(), want.reshape(-1).tolist()
        if gl != wl:
            i = next(k for k, (a, b) in enumerate(zip(gl, wl)) if a != b)
            raise AssertionError(f"{msg} element {i}: got {gl[i]!r}, want {wl[i]!r} "
                                 f"({sum(a != b for a, b in zip(gl, wl))} differ)")


def cdiv(a, b):
    return -(-a // b)


def isfinite(x: float) -> bool:
    return not (math.isnan(x) or math.isinf(x))


# ---------------------------------------------------------------------------
# exact rounding reference (integer arithmetic on Fractions)
# ---------------------------------------------------------------------------

_FORMATS = {torch.float16: (5, 10), torch.bfloat16: (8, 7), torch.float32: (8, 23), torch.float64: (11, 52),
            torch.float8_e4m3fn: (4, 3), torch.float8_e5m2: (5, 2)}


def format_max(dt) -> float:
    if dt == torch.float8_e4m3fn:
        return 448.0
    e, m = _FORMATS[dt]
    bias = (1 << (e - 1)) - 1
    return float((2 - Fraction(1, 1 << m)) * Fraction(2) ** bias)


def round_exact(x, dt, mode: str = "rtne", saturate: bool = False) -> float:
    """Round the exact value ``x`` (int, float or Fraction) to float format ``dt``; returns a Python float.

    ``saturate`` clamps overflow (and infinities) to the largest finite value,
    like PTX ``.satfinite`` conversions to fp8.
    """
    from fractions import Fraction as F
    if isinstance(x, float):
        if math.isnan(x):
            return x
        if math.isinf(x):
            return math.copysign(format_max(dt), x) if saturate else x
        if x == 0:
            return x
    q = F(x)
    if q == 0:
        return 0.0
    e_bits, m = _FORMATS[dt]
    bias = (1 << (e_bits - 1)) - 1
    emin = 1 - bias
    s = -1.0 if q < 0 else 1.0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while F(2) ** e > a:
        e -= 1
    while F(2) ** (e + 1) <= a:
        e += 1
    e = max(e, emin)
    quantum = F(2) ** (e - m)
    t = a / quantum
    n = t.numerator // t.denominator
    frac = t - n
    if mode == "rtz":
        M = n
    else:
        M = n + 1 if frac > F(1, 2) or (frac == F(1, 2) and n % 2 == 1) else n
    v = M * quantum
    mx = F(format_max(dt))
    if v > mx:
        if mode == "rtz" or saturate or dt == torch.float8_e4m3fn:
            return s * float(mx)
        return s * math.inf
    return s * float(v)


from fractions import Fraction  # noqa: E402
