"""How the interpreter holds newt values in torch tensors, and exact conversions.

Every IR dtype has a *representation* dtype (what values of that type are
while the kernel runs) and a *storage* dtype (how they sit in memory):

==========  ==============  ==============  ====================================
newt        representation  storage         note
==========  ==============  ==============  ====================================
int1        bool            uint8           a byte in memory, 0/1 in registers
int8..64    int8..int64     same
uint8       uint8           uint8           torch supports it fully
uint16      int32           int16           value in [0, 2**16)
uint32      int64           int32           value in [0, 2**32)
uint64      int64           int64           the two's complement bits
fp8e4nv     float8_e4m3fn   same            arithmetic upcasts to fp32
fp8e5       float8_e5m2     same
fp8e4b8     float8_e4m3fnuz same            AMD's formats: NaN is 0x80, no -0
fp8e5b16    float8_e5m2fnuz same
fp8e4b15    float8_e4m3fn   same            the same bits as e4m3fn with bias 15: the value is
                                            the e4m3fn value times 2**-8 (``to_f32``)
fp16, bf16  float16, bf16   same            torch rounds every op once (RNE)
fp32, fp64  float32/64      same
pointers    int64           int64           byte addresses
==========  ==============  ==============  ====================================

Narrow unsigned types live in a wider signed type so that every torch op
works on them; arithmetic masks the result back to the type's width.  uint64
keeps the bits and emulates what differs from int64 (comparisons, division,
right shift, conversion to float).

Conversions follow the GPU (PTX ``cvt``): float downcasts round to nearest
even once (a fp64 source goes through fp32 with round-to-odd so that no double
rounding happens), ``rtz`` truncates, fp8 conversions saturate to the largest
finite value (``.satfinite``), float->int truncates and saturates with NaN->0.
"""

from __future__ import annotations

import torch

from newt.language import core as lc

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

_REP = {
    "int1": torch.bool, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "uint8": torch.uint8, "uint16": torch.int32, "uint32": torch.int64, "uint64": torch.int64,
    "fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2, "fp16": torch.float16, "bf16": torch.bfloat16,
    "fp8e4b15": torch.float8_e4m3fn, "fp8e4b8": torch.float8_e4m3fnuz, "fp8e5b16": torch.float8_e5m2fnuz,
    "fp32": torch.float32, "fp64": torch.float64,
}
_STORE = dict(_REP)
_STORE.update({"int1": torch.uint8, "uint16": torch.int16, "uint32": torch.int32})

# bit patterns as signed ints of the same width (for bitcasts)
_BITS = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}

#: unsigned types kept in a wider signed representation -> their mask
NARROW_UNSIGNED_MASK = {"uint16": 0xFFFF, "uint32": 0xFFFFFFFF}

_FP8_MAX = {"fp8e4nv": 448.0, "fp8e5": 57344.0, "fp8e4b15": 1.75, "fp8e4b8": 240.0, "fp8e5b16": 57344.0}

#: torch dtypes holding fp8 bit patterns (torch has few ops for them: handlers work on the bits or in fp32)
FP8_TORCH = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)

#: formats held in another format's bits: value = held value * scale (e4b15 in e4m3fn: bias 15 vs 7)
_HELD_SCALE = {"fp8e4b15": 2.0 ** -8}


def to_f32(x: torch.Tensor, dt) -> torch.Tensor:
    """The fp32 values of a float representation (exact for every format narrower than fp32)."""
    s = _HELD_SCALE.get(dt.name)
    y = x.to(torch.float32)
    return y * s if s else y


def rep_dtype(dt) -> torch.dtype:
    """The torch dtype holding values of newt dtype ``dt`` while the kernel runs."""
    if dt.is_ptr():
        return torch.int64
    return _REP[dt.name]


def storage_dtype(dt) -> torch.dtype:
    """The torch dtype of ``dt`` in memory."""
    if dt.is_ptr():
        return torch.int64
    return _STORE[dt.name]


def itemsize(dt) -> int:
    if dt.is_ptr():
        return 8
    if dt.name == "int1":
        return 1
    return dt.primitive_bitwidth // 8


def from_storage(t: torch.Tensor, dt) -> torch.Tensor:
    """Values read from memory (storage dtype) -> representation."""
    name = dt.name
    if name == "int1":
        return t != 0
    m = NARROW_UNSIGNED_MASK.get(name)
    if m is not None:
        return t.to(rep_dtype(dt)) & m
    return t


def to_storage(t: torch.Tensor, dt) -> torch.Tensor:
    """Representation -> the dtype written to memory (wrapping narrow unsigned types)."""
    name = dt.name
    if name == "int1":
        return t.to(torch.uint8)
    if name in NARROW_UNSIGNED_MASK:
        return t.to(storage_dtype(dt))
    return t


# ---------------------------------------------------------------------------
# integer helpers
# ---------------------------------------------------------------------------


def is_unsigned(dt) -> bool:
    return dt.is_int() and not dt.is_int_signed() and not dt.is_ptr()


def wrap_int(t: torch.Tensor, dt) -> torch.Tensor:
    """Bring an integer tensor (any int dtype holding the right low bits) to ``dt``'s representation."""
    name = dt.name
    m = NARROW_UNSIGNED_MASK.get(name)
    if m is not None:
        return (t.to(torch.int64) & m).to(rep_dtype(dt))
    rd = rep_dtype(dt)
    if t.dtype == rd:
        return t
    if name == "int1":
        return (t & 1) != 0
    if name == "uint8":
        return (t.to(torch.int64) & 0xFF).to(torch.uint8)
    return t.to(rd)


def lshr64(a: torch.Tensor, s) -> torch.Tensor:
    """Logical right shift of int64 bit patterns by ``s`` (0..64)."""
    if isinstance(s, int):
        if s <= 0:
            return a
        if s >= 64:
            return torch.zeros_like(a)
        return (a >> s) & ((1 << (64 - s)) - 1)
    sc = s.clamp(0, 64)
    return (a >> sc) & ((torch.ones_like(a) << (64 - sc)) - 1)


def ucmp_key(a: torch.Tensor) -> torch.Tensor:
    """Map uint64 bit patterns (int64) to int64 values with the same order as the unsigned values."""
    return a ^ INT64_MIN


def mulhi_u64(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """High 64 bits of the unsigned 128-bit product of two int64 bit patterns."""
    m32 = 0xFFFFFFFF
    u0, u1 = u & m32, lshr64(u, 32)
    v0, v1 = v & m32, lshr64(v, 32)
    w0 = u0 * v0
    t = u1 * v0 + lshr64(w0, 32)
    w1 = (t & m32) + u0 * v1
    w2 = lshr64(t, 32)
    return u1 * v1 + w2 + lshr64(w1, 32)


def mulhi_s64(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """High 64 bits of the signed 128-bit product."""
    hi = mulhi_u64(u, v)
    hi = hi - torch.where(u < 0, v, torch.zeros_like(v))
    return hi - torch.where(v < 0, u, torch.zeros_like(u))


def udiv64(n: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Unsigned 64-bit division of bit patterns; ``d`` must be non-zero."""
    big = d < 0  # divisor >= 2**63: quotient is 0 or 1
    q_big = (ucmp_key(n) >= ucmp_key(d)).to(torch.int64)
    dd = torch.where(big, torch.ones_like(d), d)
    q = torch.div(lshr64(n, 1), dd, rounding_mode="trunc") << 1
    r = n - q * dd
    q = q + (ucmp_key(r) >= ucmp_key(dd)).to(torch.int64)
    return torch.where(big, q_big, q)


# ---------------------------------------------------------------------------
# float helpers
# ---------------------------------------------------------------------------

_FLOAT_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
               torch.float64: torch.int64, torch.float8_e4m3fn: torch.int8, torch.float8_e5m2: torch.int8,
               torch.float8_e4m3fnuz: torch.int8, torch.float8_e5m2fnuz: torch.int8}


def _step_toward_zero(r: torch.Tensor) -> torch.Tensor:
    """The next representable value toward zero (``r`` non-zero, finite or inf)."""
    bits = r.view(_FLOAT_BITS[r.dtype])
    return (bits - 1).view(r.dtype)


def f64_to_f32_odd(x: torch.Tensor) -> torch.Tensor:
    """fp64 -> fp32 rounding to odd: exact for a second rounding to any narrower format."""
    f = x.to(torch.float32)
    back = f.to(torch.float64)
    over = back.abs() > x.abs()
    f = torch.where(over, _step_toward_zero(f), f)
    inexact = f.to(torch.float64) != x
    bits = f.view(torch.int32)
    return torch.where(inexact & ~torch.isnan(x), bits | 1, bits).view(torch.float32)


def add_f64_odd(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + b in fp64 rounded to odd (via the exact TwoSum error)."""
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    bits = s.view(torch.int64)
    fix = (err != 0) & ((bits & 1) == 0) & torch.isfinite(s)
    toward_bigger = (err > 0) == (s > 0)
    adj = torch.where(toward_bigger, bits + 1, bits - 1)
    return torch.where(fix, adj, bits).view(torch.float64)


def fp8_saturate(x: torch.Tensor, name: str) -> torch.Tensor:
    m = _FP8_MAX[name]
    return torch.where(torch.isnan(x), x, x.clamp(-m, m))


def _to_narrow_float(x: torch.Tensor, dst, rounding: str) -> torch.Tensor:
    """Float (fp16/bf16/fp32/fp64/fp8) -> narrower float ``dst`` with one rounding."""
    name = dst.name
    td = rep_dtype(dst)
    src = x
    if x.dtype == torch.float64 and td != torch.float32:
        x32 = f64_to_f32_odd(x)
    elif x.dtype in FP8_TORCH or x.dtype in (torch.float16, torch.bfloat16):
        x32 = x.to(torch.float32)
    else:
        x32 = x
    if name in _FP8_MAX:
        x32 = fp8_saturate(x32, name)
    scale = _HELD_SCALE.get(name)
    r = (x32 / scale if scale else x32).to(td)  # a power-of-two scale: the rounding is the same
    if rounding == "rtz":
        wide = torch.float64
        val = to_f32(r, dst).to(wide) if scale else r.to(wide)
        over = val.abs() > src.to(wide).abs()
        step = _step_toward_zero(r)
        if td in (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):  # -min steps to 0x80, the NaN: to 0 instead
            step = torch.where(step.view(torch.int8) == -128, torch.zeros_like(step), step)
        r = torch.where(over, step, r)
    return r


def _float_to_int(x: torch.Tensor, dst) -> torch.Tensor:
    """Truncate toward zero, saturate to the range of ``dst``, NaN -> 0 (PTX cvt.rzi)."""
    x = x.to(torch.float64)
    x = torch.where(torch.isnan(x), torch.zeros_like(x), torch.trunc(x))
    bits = dst.primitive_bitwidth
    if dst.is_int_signed():
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        lo, hi = 0, (1 << bits) - 1
    if bits < 64:
        return x.clamp(lo, hi).to(torch.int64).to(rep_dtype(dst))
    two63 = float(1 << 63)
    if dst.is_int_signed():
        inr = (x >= -two63) & (x < two63)
        r = torch.where(inr, x, torch.zeros_like(x)).to(torch.int64)
        r = torch.where(x >= two63, torch.full_like(r, INT64_MAX), r)
        return torch.where(x < -two63, torch.full_like(r, INT64_MIN), r)
    # uint64
    low = (x >= 0) & (x < two63)
    high = (x >= two63) & (x < 2 * two63)
    r = torch.where(low, x, torch.zeros_like(x)).to(torch.int64)
    rh = (torch.where(high, x - two63, torch.zeros_like(x))).to(torch.int64) ^ INT64_MIN
    r = torch.where(high, rh, r)
    return torch.where(x >= 2 * two63, torch.full_like(r, -1), r)


def _int_to_f64_odd(v: torch.Tensor, unsigned64: bool) -> torch.Tensor:
    """int64 value (or uint64 bits) -> fp64 rounded to odd (exact below 2**53)."""
    lo = (v & 0xFFFFFFFF).to(torch.float64)
    if unsigned64:
        hi = lshr64(v, 32).to(torch.float64)
    else:
        hi = (v >> 32).to(torch.float64)
    return add_f64_odd(hi * 4294967296.0, lo)


def _int_to_float(v: torch.Tensor, src, dst) -> torch.Tensor:
    td = rep_dtype(dst)
    u64 = src.name == "uint64"
    if src.name == "int1" or (td in (torch.float32, torch.float64) and not u64):
        return v.to(td)  # int64 -> fp32/fp64 conversions round once (checked by the tests)
    if td == torch.float64:
        return _u64_to_f64(v)
    # fp32 from uint64, and fp16 / bf16 / fp8 from any integer: through fp64 rounded to odd
    wide = _int_to_f64_odd(v.to(torch.int64), u64)
    return _to_narrow_float(wide, dst, "rtne")


def _u64_to_f64(v: torch.Tensor) -> torch.Tensor:
    neg = v < 0
    half = lshr64(v, 1) | (v & 1)
    return torch.where(neg, half.to(torch.float64) * 2.0, v.to(torch.float64))


def cast(x: torch.Tensor, src, dst, rounding: str = "rtne") -> torch.Tensor:
    """Value conversion ``src`` -> ``dst`` with the GPU's semantics (see the module docstring)."""
    if src == dst:
        return x
    rounding = rounding or "rtne"
    if src.is_ptr() or dst.is_ptr():
        return x.to(torch.int64)
    if src.name in _HELD_SCALE:  # exact in fp32
        x, src = to_f32(x, src), lc.float32
        if dst == src:
            return x
    if dst.name == "int1":  # never emitted by the front end; be total anyway
        return x != 0
    if src.is_floating():
        if dst.is_floating():
            if dst.primitive_bitwidth > src.primitive_bitwidth:  # every widening is exact
                return x.to(rep_dtype(dst))
            return _to_narrow_float(x, dst, rounding)
        return _float_to_int(x, dst)
    # integer source
    if dst.is_floating():
        return _int_to_float(x, src, dst)
    if src.name == "int1":
        return x.to(rep_dtype(dst))
    # int -> int: extend by the source signedness (the representation already holds the
    # extended value; uint64 holds its bits), then truncate to the destination width.
    return wrap_int(x.to(torch.int64) if x.dtype != torch.int64 else x, dst)


def bits_of(x: torch.Tensor, dt) -> torch.Tensor:
    """The bit pattern of values of ``dt`` as a signed int tensor of the same width."""
    if dt.is_ptr():
        return x
    bd = _BITS[dt.primitive_bitwidth]
    if dt.is_floating():
        return x.view(bd)
    if dt.name == "int1":
        return x.to(torch.int8)
    if x.dtype == bd:
        return x
    if x.dtype == torch.uint8:
        return x.view(torch.int8)
    return x.to(bd)


def from_bits(b: torch.Tensor, dt) -> torch.Tensor:
    """Inverse of :func:`bits_of`."""
    if dt.is_ptr():
        return b.to(torch.int64)
    if dt.is_floating():
        return b.view(rep_dtype(dt))
    if dt.name == "int1":
        return b != 0
    if dt.name == "uint8":
        return b.view(torch.uint8)
    m = NARROW_UNSIGNED_MASK.get(dt.name)
    if m is not None:
        return b.to(rep_dtype(dt)) & m
    return b


def bitcast(x: torch.Tensor, src, dst) -> torch.Tensor:
    if src == dst or (src.is_ptr() and dst.is_ptr()):
        return x
    return from_bits(bits_of(x, src), dst)


def tf32_round(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> tf32 (10 mantissa bits), round to nearest with ties away from zero (``cvt.rna.tf32.f32``)."""
    bits = x.view(torch.int32)
    r = ((bits + 0x1000) & ~0x1FFF)
    keep = ~torch.isfinite(x)
    return torch.where(keep, x, r.view(torch.float32))


def python_constant(value, dt) -> torch.Tensor:
    """A Python number as a one-element tensor of ``dt``'s representation, converted like the GPU."""
    if dt.is_ptr():
        return torch.tensor([int(value)], dtype=torch.int64)
    if dt.name == "int1":
        return torch.tensor([bool(value)])
    if dt.is_floating():
        t = torch.tensor([float(value)], dtype=torch.float64)
        return cast(t, lc.float64, dt)
    if isinstance(value, float):
        return cast(torch.tensor([value], dtype=torch.float64), lc.float64, dt)
    v = int(value)
    bits = dt.primitive_bitwidth
    v &= (1 << bits) - 1 if bits < 64 else (1 << 64) - 1
    if dt.is_int_signed() or dt.name == "uint64":
        if v >= 1 << (bits - 1):
            v -= 1 << bits
    if dt.name == "uint64":
        return torch.tensor([v], dtype=torch.int64)
    return torch.tensor([v], dtype=rep_dtype(dt))
