"""C++ spellings of newt dtypes and of constants."""

from __future__ import annotations

import math
import struct

from newt.ir.types import pointee, scalar_of

__all__ = ["ctype", "const_literal", "is_lowp_float", "compute_ctype", "to_compute", "from_compute", "ptx_bits"]

_CT = {
    "int1": "bool", "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long",
    "fp16": "half_t", "bf16": "bf16_t", "fp32": "float", "fp64": "double", "fp8e4nv": "fp8e4_t", "fp8e5": "fp8e5_t",
    "fp8e4b15": "fp8e4b15_t", "fp8e4b8": "fp8e4b8_t", "fp8e5b16": "fp8e5b16_t",
}

#: low-precision float storage types computed in fp32
_LOWP = {"fp16": "half", "bf16": "bf16", "fp8e4nv": "fp8e4", "fp8e5": "fp8e5", "fp8e4b15": "fp8e4b15",
         "fp8e4b8": "fp8e4b8", "fp8e5b16": "fp8e5b16"}

#: the fp8 formats without infinities beyond e4m3: (mantissa bits, bias, fnuz), as in the prelude
_FP8X = {"fp8e4b15": (3, 15, False), "fp8e4b8": (3, 8, True), "fp8e5b16": (2, 16, True)}


def ctype(ty) -> str:
    t = scalar_of(ty)
    if t.is_ptr():
        return ctype(pointee(t)) + "*"
    return _CT[t.name]


def is_lowp_float(ty) -> bool:
    return scalar_of(ty).name in _LOWP


def compute_ctype(ty) -> str:
    """The type arithmetic happens in (fp32 for fp16/bf16/fp8)."""
    return "float" if is_lowp_float(ty) else ctype(ty)


def to_compute(expr: str, ty) -> str:
    t = scalar_of(ty)
    if t.name in _LOWP:
        return f"{_LOWP[t.name]}_to_f32({expr})"
    return expr


def from_compute(expr: str, ty, rounding: str = "rtne") -> str:
    t = scalar_of(ty)
    if t.name in _LOWP:
        suffix = "_rz" if rounding == "rtz" else ""
        return f"f32_to_{_LOWP[t.name]}{suffix}({expr})"
    return expr


def ptx_bits(ty) -> int:
    t = scalar_of(ty)
    if t.is_ptr():
        return 64
    return max(8, t.primitive_bitwidth)


def _f32_literal(v: float) -> str:
    if math.isnan(v):
        return "__int_as_float(0x7fc00000)"
    if math.isinf(v):
        return "__int_as_float(0x7f800000)" if v > 0 else "__int_as_float(0xff800000)"
    f = struct.unpack("<f", struct.pack("<f", v))[0]
    s = repr(f)
    # shortest decimal that rounds to the same float32
    for digits in range(6, 10):
        cand = f"{f:.{digits}g}"
        if struct.unpack("<f", struct.pack("<f", float(cand)))[0] == f:
            s = cand
            break
    if "e" not in s and "." not in s and "inf" not in s:
        s += ".0"
    return s + "f"


def _f64_literal(v: float) -> str:
    if math.isnan(v):
        return "__longlong_as_double(0x7ff8000000000000ll)"
    if math.isinf(v):
        return "__longlong_as_double(0x7ff0000000000000ll)" if v > 0 else \
            "__longlong_as_double(0xfff0000000000000ll)"
    s = repr(float(v))
    if "e" not in s and "." not in s:
        s += ".0"
    return s


def _bf16_bits(v: float) -> int:
    u = struct.unpack("<I", struct.pack("<f", v))[0]
    if math.isnan(v):
        return 0x7FC0
    u += 0x7FFF + ((u >> 16) & 1)
    return (u >> 16) & 0xFFFF


def _fp8_bits(v: float, mbits: int, bias: int, maxv: float, has_inf: bool) -> int:
    if math.isnan(v):
        return 0x7F if not has_inf else 0x7E
    sign = 0x80 if math.copysign(1.0, v) < 0 else 0
    a = abs(v)
    if a > maxv:
        a = maxv
    if a == 0:
        return sign
    min_normal = 2.0 ** (1 - bias)
    if a < min_normal:
        q = 2.0 ** (1 - bias - mbits)
        m = int(round(a / q))
        if m >= (1 << mbits):
            return sign | (1 << mbits)
        return sign | m
    e = math.floor(math.log2(a))
    q = 2.0 ** (e - mbits)
    r = round(a / q) * q
    if r > maxv:
        r = maxv
    e = math.floor(math.log2(r))
    m = int(round(r / 2.0 ** e * (1 << mbits))) - (1 << mbits)
    return sign | ((e + bias) << mbits) | m


def const_literal(value, ty) -> str:
    """A C++ expression of type ``ctype(ty)`` with the exact value."""
    t = scalar_of(ty)
    n = t.name
    if t.is_ptr():
        return f"(({ctype(t)})(unsigned long long)({int(value)}ull))"
    if n == "int1":
        return "true" if value else "false"
    if t.is_int():
        bits = t.primitive_bitwidth
        iv = int(value)
        mask = (1 << bits) - 1
        iv &= mask
        if t.is_int_signed() and iv >= 1 << (bits - 1):
            iv -= 1 << bits
        if bits == 64:
            if t.is_int_signed():
                return f"{iv}ll" if iv != -(1 << 63) else "(-9223372036854775807ll - 1)"
            return f"{iv}ull"
        if bits == 32:
            if t.is_int_signed():
                return str(iv) if iv != -(1 << 31) else "(-2147483647 - 1)"
            return f"{iv}u"
        return f"({ctype(t)})({iv})"
    v = float(value)
    if n == "fp32":
        return _f32_literal(v)
    if n == "fp64":
        return _f64_literal(v)
    if n == "fp16":
        try:
            bits = struct.unpack("<H", struct.pack("<e", v))[0]
        except OverflowError:
            bits = 0x7C00 if v > 0 else 0xFC00
        return f"half_t{{0x{bits:04x}}}"
    if n == "bf16":
        return f"bf16_t{{0x{_bf16_bits(v):04x}}}"
    if n == "fp8e4nv":
        return f"fp8e4_t{{0x{_fp8_bits(v, 3, 7, 448.0, False):02x}}}"
    if n == "fp8e5":
        if math.isinf(v):
            return f"fp8e5_t{{0x{(0x7C if v > 0 else 0xFC):02x}}}"
        return f"fp8e5_t{{0x{_fp8_bits(v, 2, 15, 57344.0, True):02x}}}"
    if n in _FP8X:
        mb, bias, fnuz = _FP8X[n]
        emax = (1 << (7 - mb)) - 1 - bias
        maxv = 2.0 ** emax * (1 + ((1 << mb) - (1 if fnuz else 2)) / (1 << mb))
        if math.isnan(v):
            b = 0x80 if fnuz else 0x7F
        else:
            b = _fp8_bits(v, mb, bias, maxv, False)  # a finite format; inf saturates like the conversions
            if fnuz and b & 0x7F == 0:
                b = 0
        return f"{ctype(t)}{{0x{b:02x}}}"
    raise NotImplementedError(n)
