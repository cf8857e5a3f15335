"""torch references of the libdevice functions (``newt.language.extra.libdevice``), for the ``libdevice`` op.

``reference(name, arg_dtypes, result_dtype)`` gives a function of the operands' representations (see
``dtypes.py``: a uint32 is an int64 in ``[0, 2**32)``, a uint64 its bits in an int64) returning the
result's.  fp32 functions are computed in fp64 and rounded once to fp32 (at least as accurate as the GPU's
libdevice, whose fp32 functions are accurate to a few ulp); the IEEE operations with a rounding mode
(``add_rz``, ``div_ru``, ``sqrt_rd``, ``fma_rn``, conversions) are exact: the fp64 result and the sign of
its exact error (TwoSum / Dekker's product) decide the rounding.  The ``fast_*`` approximations return the
accurate value (the GPU's differ by their documented error).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from newt.language import core as lc

from . import dtypes as D
from .errors import InterpreterError

__all__ = ["reference"]

F64 = torch.float64
F32 = torch.float32
_MODES = ("rn", "rz", "rd", "ru")
_LN10 = math.log(10.0)


# ---------------------------------------------------------------------------
# exact arithmetic helpers
# ---------------------------------------------------------------------------


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a, b):
    """Dekker: p + e == a * b exactly (barring overflow)."""
    p = a * b
    split = 134217729.0  # 2**27 + 1

    def halves(x):
        c = split * x
        hi = c - (c - x)
        return hi, x - hi
    ah, al = halves(a)
    bh, bl = halves(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _round(r, resid, mode: str, out: torch.dtype):
    """Round the exact value ``r + resid`` (``r`` fp64, ``resid`` of the error's sign only: exact in sign)
    to ``out`` (fp32 or fp64) in rounding mode ``mode``."""
    f = r.to(out)
    fb = f.to(F64)
    rs = torch.nan_to_num(torch.sign(resid), nan=0.0)
    side = torch.sign(r - fb)  # where the exact value lies relative to f
    side = torch.where(side == 0, rs, torch.nan_to_num(side, nan=0.0))
    down = torch.nextafter(f, torch.full_like(f, -math.inf))
    up = torch.nextafter(f, torch.full_like(f, math.inf))
    if mode == "rn":
        if out == F64:
            return f  # r is the fp64 value nearest the exact one
        # r may sit exactly half-way between two fp32 values while the exact value does not: go its way
        other = torch.where(side > 0, up, down).to(F64)
        mid = (r == (fb + other) / 2) & (rs != 0) & (r != fb)
        return torch.where(mid & (rs > 0), torch.maximum(f, other.to(out)),
                           torch.where(mid & (rs < 0), torch.minimum(f, other.to(out)), f))
    if mode == "rd":
        return torch.where(side < 0, down, f)
    if mode == "ru":
        return torch.where(side > 0, up, f)
    # rz: toward zero
    positive = (r > 0) | ((r == 0) & (rs > 0))
    negative = (r < 0) | ((r == 0) & (rs < 0))
    return torch.where(positive & (side < 0), down, torch.where(negative & (side > 0), up, f))


def _exact_op(op: str, xs, mode: str, out):
    """``op`` (add sub mul div rcp sqrt fma) of fp64 values, rounded to ``out`` in ``mode``."""
    if op in ("add", "sub"):
        a, b = xs
        r, e = _two_sum(a, b if op == "add" else -b)
    elif op == "mul":
        r, e = _two_prod(*xs)
    elif op in ("div", "rcp"):
        a, b = xs if op == "div" else (torch.ones_like(xs[0]), xs[0])
        r = a / b
        p, pe = _two_prod(r, b)
        e = ((a - p) - pe) * torch.sign(b)
    elif op == "sqrt":
        (a,) = xs
        r = _sqrt64(a)
        p, pe = _two_prod(r, r)
        e = (a - p) - pe
    elif op == "fma":
        a, b, c = xs
        p, pe = _two_prod(a, b)
        s, se = _two_sum(p, c)
        r = s + (se + pe)
        e = ((s - r) + se) + pe
        r = torch.where(torch.isfinite(p), r, a * b + c)
    else:  # pragma: no cover - the table names only these
        raise InterpreterError(f"no exact operation {op!r}")
    return _round(r, e, mode, out)


def _sqrt64(x):
    """The correctly rounded fp64 square root of fp64 values (torch's CPU one is a ulp off for about 1% of
    inputs; numpy's is exact)."""
    import numpy as np
    with np.errstate(invalid="ignore"):
        return torch.from_numpy(np.sqrt(x.contiguous().numpy())).view(x.shape)


def _f64(x):
    return x.to(F64)


def _to(out_name: str):
    return F32 if out_name == "fp32" else F64


# ---------------------------------------------------------------------------
# integer helpers
# ---------------------------------------------------------------------------


def _bitlen(u):
    """Bit length of int64 bit patterns read as unsigned (0..64)."""
    n = torch.zeros_like(u)
    for s in (32, 16, 8, 4, 2, 1):
        hi = D.lshr64(u, s)
        m = hi != 0
        n = n + torch.where(m, s, 0)
        u = torch.where(m, hi, u)
    return n + (u != 0).to(u.dtype)


def _u32(x):
    return x.to(torch.int64) & 0xFFFFFFFF


def _i32(x):
    """Low 32 bits of int64 values as int32."""
    return D.wrap_int(x.to(torch.int64), lc.int32)


def _popcount(u):
    u = u - (D.lshr64(u, 1) & 0x5555555555555555)
    u = (u & 0x3333333333333333) + (D.lshr64(u, 2) & 0x3333333333333333)
    u = (u + D.lshr64(u, 4)) & 0x0F0F0F0F0F0F0F0F
    return D.lshr64(u * 0x0101010101010101, 56)


def _brev(u, bits: int):
    r = torch.zeros_like(u)
    for i in range(bits):
        r = r | (((u >> i) & 1) << (bits - 1 - i))
    return r


def _byte_perm(x, y, s):
    x, y, s = torch.broadcast_tensors(x, y, s)  # (a uniform operand has one program row, others several)
    src = [(_u32(x) >> (8 * k)) & 0xFF for k in range(4)] + [(_u32(y) >> (8 * k)) & 0xFF for k in range(4)]
    table = torch.stack(src, -1)
    out = torch.zeros(table.shape[:-1], dtype=torch.int64)
    sel = _u32(s)
    for n in range(4):
        idx = ((sel >> (4 * n)) & 7).unsqueeze(-1)
        out = out | (torch.gather(table, -1, idx).squeeze(-1) << (8 * n))
    return _i32(out)


def _mulhi_u32(a, b):
    a, b = _u32(a), _u32(b)
    return (a * (b >> 16) + ((a * (b & 0xFFFF)) >> 16)) >> 16


def _sext24(a):
    return ((a.to(torch.int64) & 0xFFFFFF) ^ 0x800000) - 0x800000


# ---------------------------------------------------------------------------
# float helpers
# ---------------------------------------------------------------------------


def _round_half_away(x):
    t = torch.trunc(x)
    return torch.where((x - t).abs() >= 0.5, t + torch.sign(x), t)


def _cbrt(x):
    y = torch.sign(x) * x.abs().pow(1.0 / 3.0)
    ok = torch.isfinite(y) & (y != 0)
    y2 = y - (y * y * y - x) / (3 * y * y)  # one Newton step: the fp64 pow is a few ulp off
    return torch.where(ok, y2, y)


def _tgamma(x):
    g = torch.exp(torch.lgamma(x))
    neg = (x < 0) & (torch.ceil(-x) % 2 == 1)
    g = torch.where(neg, -g, g)
    bad = (x < 0) & (x == torch.floor(x))
    g = torch.where(bad | (x == -math.inf), torch.full_like(x, math.nan), g)
    return torch.where(x == 0, torch.copysign(torch.full_like(x, math.inf), x), g)


def _sinpi(x):
    r = torch.fmod(x, 2.0)  # exact
    y = torch.sin(math.pi * r)
    return torch.where(r == torch.round(r), torch.copysign(torch.zeros_like(x), x), y)


def _cospi(x):
    r = torch.fmod(x.abs(), 2.0)
    y = torch.cos(math.pi * r)
    return torch.where(r == 0.5, torch.zeros_like(x), torch.where(r == 1.5, torch.zeros_like(x), y))


def _norm(*xs, recip=False):
    m = torch.stack([x.abs() for x in torch.broadcast_tensors(*xs)]).amax(0)
    safe = torch.where(m == 0, torch.ones_like(m), m)
    s = sum((x / safe) ** 2 for x in xs)
    n = torch.where(m == 0, torch.zeros_like(m), safe * torch.sqrt(s))
    n = torch.where(sum(torch.isinf(x).to(torch.int32) for x in xs) > 0, torch.full_like(m, math.inf), n)
    return 1.0 / n if recip else n


def _logb(x):
    m, e = torch.frexp(x)
    r = (e - 1).to(x.dtype)
    r = torch.where(x == 0, torch.full_like(x, -math.inf), r)
    return torch.where(torch.isinf(x), torch.full_like(x, math.inf), torch.where(torch.isnan(x), x, r))


def _ilogb(x):
    m, e = torch.frexp(x)
    r = (e - 1).to(torch.int64)
    r = torch.where((x == 0) | torch.isnan(x), -(2 ** 31), r)
    return _i32(torch.where(torch.isinf(x), 2 ** 31 - 1, r))


def _remainder(x, y):
    x, y = torch.broadcast_tensors(x, y)
    flat = [math.remainder(a, b) if not (math.isinf(a) or b == 0 or math.isnan(a) or math.isnan(b))
            else math.nan for a, b in zip(x.reshape(-1).tolist(), y.reshape(-1).tolist())]
    return torch.tensor(flat, dtype=F64).reshape(x.shape)


def _ldexp(x, n, wide):
    n = n.to(torch.int64).clamp(-2300, 2300)
    if wide:  # fp64: two exact steps unless the result is subnormal
        h = n // 2
        return x * torch.exp2(h.to(F64)) * torch.exp2((n - h).to(F64))
    return x * torch.exp2(n.clamp(-400, 400).to(F64))


def _bessel_jn_scalar(n: int, x: float) -> float:
    sign = 1.0
    if n < 0:
        n, sign = -n, (-1.0) ** n
    if math.isnan(x):
        return x
    if n == 0 or n == 1 or x == 0 or math.isinf(x):
        t = torch.tensor([x], dtype=F64)
        if math.isinf(x):
            return 0.0
        if x == 0:
            return sign * (1.0 if n == 0 else 0.0)
        v = torch.special.bessel_j0(t) if n == 0 else torch.special.bessel_j1(t)
        return sign * float(v)
    ax = abs(x)
    if ax > n:  # forward recurrence is stable
        j0 = float(torch.special.bessel_j0(torch.tensor([ax], dtype=F64)))
        j1 = float(torch.special.bessel_j1(torch.tensor([ax], dtype=F64)))
        for k in range(1, n):
            j0, j1 = j1, (2 * k / ax) * j1 - j0
        r = j1
    else:  # Miller's backward recurrence, normalized by J0 + 2 (J2 + J4 + ...) = 1
        m = 2 * ((max(n, int(ax)) + 20 + int(math.sqrt(40 * max(n, ax)))) // 2)
        jp, j, total, r = 0.0, 1.0, 0.0, 0.0
        for k in range(m, 0, -1):
            jm = (2 * k / ax) * j - jp
            jp, j = j, jm
            if abs(j) > 1e250:
                j, jp, total, r = j * 1e-250, jp * 1e-250, total * 1e-250, r * 1e-250
            if k - 1 == n:
                r = j
            if (k - 1) % 2 == 0 and k - 1 > 0:
                total += 2 * j
        total += j
        r = r / total
    if x < 0 and n % 2 == 1:
        r = -r
    return sign * r


def _bessel_yn_scalar(n: int, x: float) -> float:
    sign = 1.0
    if n < 0:
        n, sign = -n, (-1.0) ** n
    if math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    if math.isinf(x):
        return 0.0
    t = torch.tensor([x], dtype=F64)
    y0, y1 = float(torch.special.bessel_y0(t)), float(torch.special.bessel_y1(t))
    if n == 0:
        return y0
    for k in range(1, n):
        y0, y1 = y1, (2 * k / x) * y1 - y0
        if math.isinf(y1):
            break
    return sign * y1


def _bessel(fn, n, x):
    n, x = torch.broadcast_tensors(n.to(torch.int64), x)
    flat = [fn(int(a), float(b)) for a, b in zip(n.reshape(-1).tolist(), x.reshape(-1).tolist())]
    return torch.tensor(flat, dtype=F64).reshape(x.shape)


#: unary float functions computed on fp64 values
_UNARY = {
    "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc, "rint": torch.round, "nearbyint": torch.round,
    "round": _round_half_away, "exp2": torch.exp2, "rsqrt": torch.rsqrt, "sqrt": _sqrt64, "sin": torch.sin,
    "cos": torch.cos, "tan": torch.tan, "sinpi": _sinpi, "cospi": _cospi, "log2": torch.log2, "exp": torch.exp,
    "exp10": lambda x: torch.pow(10.0, x), "cosh": torch.cosh, "sinh": torch.sinh, "tanh": torch.tanh,
    "atan": torch.atan, "asin": torch.asin, "acos": torch.acos, "log": torch.log, "log10": torch.log10,
    "log1p": torch.log1p, "acosh": torch.acosh, "asinh": torch.asinh, "atanh": torch.atanh, "expm1": torch.expm1,
    "cbrt": _cbrt, "rcbrt": lambda x: 1.0 / _cbrt(x), "j0": torch.special.bessel_j0,
    "j1": torch.special.bessel_j1, "y0": torch.special.bessel_y0, "y1": torch.special.bessel_y1,
    "cyl_bessel_i0": torch.special.i0, "cyl_bessel_i1": torch.special.i1, "erf": torch.erf,
    "erfinv": torch.erfinv, "erfc": torch.erfc, "erfcx": torch.special.erfcx,
    "erfcinv": lambda y: -torch.special.ndtri(y / 2) / math.sqrt(2.0), "normcdfinv": torch.special.ndtri,
    "normcdf": torch.special.ndtr, "lgamma": torch.lgamma, "tgamma": _tgamma, "logb": _logb, "abs": torch.abs,
    "saturatef": lambda x: torch.where(torch.isnan(x), torch.zeros_like(x), x.clamp(0.0, 1.0)),
    "fast_sinf": torch.sin, "fast_cosf": torch.cos, "fast_log2f": torch.log2, "fast_logf": torch.log,
    "fast_expf": torch.exp, "fast_tanf": torch.tan, "fast_exp10f": lambda x: torch.pow(10.0, x),
    "fast_log10f": torch.log10,
}

#: binary float functions computed on fp64 values
_BINARY: dict[str, Callable[..., Any]] = {
    "atan2": torch.atan2, "hypot": lambda x, y: _norm(x, y), "rhypot": lambda x, y: _norm(x, y, recip=True),
    "copysign": torch.copysign, "fmod": torch.fmod, "remainder": _remainder,
    "fdim": lambda x, y: torch.where(torch.isnan(x) | torch.isnan(y), x + y,
                                     torch.where(x > y, x - y, torch.zeros_like(x))),
    "pow": torch.pow, "fast_powf": torch.pow, "fast_dividef": torch.div,
}

_PREDICATES = {
    "isnan": torch.isnan, "isinf": torch.isinf, "signbit": torch.signbit, "finitef": torch.isfinite,
    "isfinited": torch.isfinite,
}

_ROUND_TO_INT = {"rn": torch.round, "rz": torch.trunc, "rd": torch.floor, "ru": torch.ceil}


def _float_to_int(mode, src, to_name):
    """``float2int_rn`` & co: round in ``mode``, convert saturating (NaN -> 0); unsigned results keep their
    bits in the (signed) result type as Triton declares it."""
    target = {"int": lc.int32, "uint": lc.uint32, "ll": lc.int64, "ull": lc.uint64}[to_name]
    rnd = _ROUND_TO_INT[mode]

    def f(x):
        v = D.cast(rnd(x), src, target)
        return D.cast(v, lc.uint32, lc.int32) if to_name == "uint" else v
    return f


def _int_to_float(mode, src_name, out):
    """``ll2float_rz`` & co: the integer as fp64 (nearest) and the sign of what that rounding lost."""
    def f(x):
        if src_name in ("int32", "uint32"):
            r = x.to(F64)
            e = torch.zeros_like(r)
        elif src_name == "int64":
            r = x.to(F64)
            top = r >= 2.0 ** 63
            back = torch.where(top, torch.zeros_like(x), r.to(torch.int64))
            e = torch.where(top, torch.full_like(r, -1.0), torch.sign(x - back).to(F64))
        else:  # uint64 bits
            r = D.cast(x, lc.uint64, lc.float64)
            top = r >= 2.0 ** 64
            hi = r >= 2.0 ** 63
            below = 2.0 ** 63 - 1024  # the largest double under 2**63
            back = torch.where(hi, (r - 2.0 ** 63).clamp(max=below).to(torch.int64) + D.INT64_MIN,
                               r.clamp(max=below).to(torch.int64))
            kx, kb = D.ucmp_key(x), D.ucmp_key(back)
            e = torch.where(top, torch.full_like(r, -1.0), torch.sign(kx - kb).to(F64))
            e = torch.where(~top & (kx != kb), torch.where(kx > kb, 1.0, -1.0).to(F64), e)
        return _round(r, e, mode, out)
    return f


def reference(name: str, arg_names: list, ret_name: str):
    """The torch function computing libdevice ``name`` for the variant with argument dtypes ``arg_names``."""
    base, _, mode = name.rpartition("_")
    if mode not in _MODES:
        base, mode = name, ""
    a0 = arg_names[0]
    out = _to(ret_name) if ret_name in ("fp32", "fp64") else None
    # IEEE operations with a rounding mode
    if mode and base in ("add", "sub", "mul", "div", "rcp", "sqrt", "fma"):
        return lambda *xs: _exact_op(base, [_f64(x) for x in xs], mode, out)
    if name == "rsqrt_rn":
        return lambda x: (1.0 / _sqrt64(_f64(x))).to(F32)
    if name == "fma":
        return lambda *xs: _exact_op("fma", [_f64(x) for x in xs], "rn", out)
    # conversions
    if mode and base == "double2float":
        return lambda x: _round(x, torch.zeros_like(x), mode, F32)
    if mode and (base.startswith("double2") or base.startswith("float2")):
        src = lc.float64 if base.startswith("double2") else lc.float32
        return _float_to_int(mode, src, base.split("2", 1)[1])
    if mode and base.split("2")[-1] in ("float", "double") and base.split("2")[0] in ("int", "uint", "ll", "ull"):
        return _int_to_float(mode, a0, out)
    if name == "hiloint2double":
        return lambda hi, lo: ((hi.to(torch.int64) << 32) | _u32(lo)).view(F64)
    if name in ("double2loint", "double2hiint"):
        return lambda x: _i32(x.view(torch.int64) >> (32 if name == "double2hiint" else 0))
    if name in ("int_as_float", "float_as_int", "float_as_uint", "longlong_as_double", "double_as_longlong"):
        src, dst = lc.dtype_from_name(a0), lc.dtype_from_name(ret_name)
        return lambda x: D.bitcast(x, src, dst)
    if name == "uint_as_float":
        return lambda x: _i32(x).view(F32)
    # integers
    if a0 in ("int32", "int64", "uint32", "uint64") and ret_name not in ("fp32", "fp64"):
        wide = a0 in ("int64", "uint64")
        if name == "clz":
            return lambda x: _i32((64 if wide else 32) - _bitlen(x.to(torch.int64) if wide else _u32(x)))
        if name == "popc":
            return lambda x: _i32(_popcount(x.to(torch.int64) if wide else _u32(x)))
        if name == "ffs":
            return lambda x: _i32(_bitlen(x.to(torch.int64) & -x.to(torch.int64)))
        if name == "brev":
            return (lambda x: _brev(x, 64)) if wide else (lambda x: _i32(_brev(_u32(x), 32)))
        if name == "byte_perm":
            return _byte_perm
        if name == "abs":
            return torch.abs
        if name == "mulhi":
            return {"int32": lambda a, b: _i32((a.to(torch.int64) * b.to(torch.int64)) >> 32),
                    "uint32": _mulhi_u32, "int64": D.mulhi_s64, "uint64": D.mulhi_u64}[a0]
        if name == "mul24":
            if a0 == "int32":
                return lambda a, b: _i32(_sext24(a) * _sext24(b))
            return lambda a, b: ((a & 0xFFFFFF) * (b & 0xFFFFFF)) & 0xFFFFFFFF
        if name == "sad":
            if a0 == "int32":
                return lambda x, y, z: _i32((x.to(torch.int64) - y.to(torch.int64)).abs() + z)
            return lambda x, y, z: ((x - y).abs() + z) & 0xFFFFFFFF
        if name in ("hadd", "rhadd"):
            extra = 1 if name == "rhadd" else 0
            if a0 == "int32":
                return lambda a, b: _i32((a.to(torch.int64) + b.to(torch.int64) + extra) >> 1)
            return lambda a, b: (a + b + extra) >> 1
    if name in _PREDICATES:
        p = _PREDICATES[name]
        return lambda x: p(x).to(torch.int32)
    if name == "ilogb":
        return _ilogb
    if name in ("llrint", "llround"):
        rnd = torch.round if name == "llrint" else _round_half_away
        src = lc.dtype_from_name(a0)
        return lambda x: D.cast(rnd(x), src, lc.int64)
    if name == "rcp64h":
        def rcp64h(x):
            hi = (x.view(torch.int64) >> 32) << 32
            r = 1.0 / hi.view(F64)
            return ((r.view(torch.int64) >> 32) << 32).view(F64)
        return rcp64h
    if name == "nextafter":
        return torch.nextafter  # in the operands' own precision
    if name in ("fmod", "copysign") and a0 == "fp32":
        return _BINARY[name]  # exact in fp32
    if name in ("ldexp", "scalbn"):
        return lambda x, n: _ldexp(_f64(x), n, a0 == "fp64").to(out)
    if name == "pow" and arg_names[1] == "int32":
        return lambda x, n: torch.pow(_f64(x), n.to(F64)).to(out)
    if name in ("jn", "yn"):
        fn = _bessel_jn_scalar if name == "jn" else _bessel_yn_scalar
        return lambda n, x: _bessel(fn, n, _f64(x)).to(out)
    if name in ("norm3d", "norm4d", "rnorm3d", "rnorm4d"):
        return lambda *xs: _norm(*[_f64(x) for x in xs], recip=name.startswith("r")).to(out)
    if name in _UNARY:
        f = _UNARY[name]
        return lambda x: f(_f64(x)).to(out)
    if name in _BINARY:
        f2 = _BINARY[name]
        return lambda x, y: f2(_f64(x), _f64(y)).to(out)
    raise InterpreterError(f"no torch reference for libdevice.{name} ({', '.join(arg_names)})")
