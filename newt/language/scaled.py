"""``nl.dot_scaled``: the product of two blocks in OCP microscaling (MX) formats, written in the newt language.

Numeric definition (Triton's documented emulation, the path every GPU without native MX instructions takes):

1. Each operand's elements are decoded exactly: ``e2m1`` (fp4, two per uint8, the first element in the low
   nibble, packed along K unless ``*_k_pack=False``), ``e4m3`` / ``e5m2`` (fp8, as uint8 bits or the fp8
   dtype), ``bf16`` / ``fp16`` (as uint16 bits or the float dtype).
2. An operand with a scale is multiplied by it: the scale is an ``e8m0`` byte per group of 32 elements
   along K (``lhs_scale`` is [M, K // 32], ``rhs_scale`` is [N, K // 32]: not transposed), worth
   ``2 ** (byte - 127)``; the byte 255 is NaN.  The product is exact in fp32.
3. Both operands are rounded once to the compute type, ``bf16`` (``fp16`` when either format is ``fp16``),
   the element type the hardware multiplies, and ``nl.dot`` accumulates their products in fp32 (onto
   ``acc`` when given).

The interpreter and the CUDA backend only see the primitive ops below (bit operations, casts, reshapes and
an ordinary ``dot``), so they agree by construction; ``fast_math`` changes nothing here.
"""

from __future__ import annotations

from . import builtins as _b
from .core import bfloat16, float8e4nv, float8e5, float16, float32, inline_jit, uint8, uint32

_FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")
#: format -> (its float dtype's name, the unsigned type its bits may come as)
_ELEM = {"e4m3": ("fp8e4nv", "uint8"), "e5m2": ("fp8e5", "uint8"), "bf16": ("bf16", "uint16"),
         "fp16": ("fp16", "uint16")}
GROUP = 32  # elements per e8m0 scale


def _compile_time(fn):
    """A helper the front end runs in Python at compile time (its exceptions become errors at the call site)."""
    fn.__newt_constexpr_function__ = True
    fn.__name__ = "nl.dot_scaled"
    return fn


def _inline(fn):
    """A helper written in the newt language, inlined like ``@inline_jit`` but not a public ``nl`` name."""
    fn.__newt_inline__ = True
    return fn


@_compile_time
def _check(a_shape, a_dtype, a_fmt, a_kpack, a_scale, b_shape, b_dtype, b_fmt, b_kpack, b_scale, out_dtype):
    """Triton's rules for the operands; returns the compute dtype.  ``*_scale``: (shape, dtype) or None."""
    for side, fmt in (("lhs", a_fmt), ("rhs", b_fmt)):
        if fmt not in _FORMATS:
            raise ValueError(f"{side}_format must be one of {', '.join(_FORMATS)}; got {fmt!r}")
    if out_dtype != float32:
        raise ValueError(f"only out_dtype=nl.float32 is supported, got {out_dtype!r}")
    if len(a_shape) != len(b_shape) or len(a_shape) not in (2, 3):
        raise ValueError(f"both operands must be 2-D (or both 3-D); got shapes {list(a_shape)} and {list(b_shape)}")
    if len(a_shape) == 3 and a_shape[0] != b_shape[0]:
        raise ValueError(f"the batch dimensions differ: {a_shape[0]} and {b_shape[0]}")
    for side, fmt, dt, kpack in (("lhs", a_fmt, a_dtype, a_kpack), ("rhs", b_fmt, b_dtype, b_kpack)):
        if fmt == "e2m1":
            if dt.name != "uint8":
                raise ValueError(f"an e2m1 {side} must be packed as nl.uint8 (two values a byte), got {dt!r}")
        else:
            if not kpack:
                raise ValueError(f"only e2m1 operands can be packed along a dimension other than K ({side})")
            if dt.name not in _ELEM[fmt]:
                raise ValueError(f"a {fmt} {side} must be nl.{_ELEM[fmt][1]} bits or the {fmt} dtype, got {dt!r}")
    m, ka = a_shape[-2], a_shape[-1]
    kb, n = b_shape[-2], b_shape[-1]
    if a_fmt == "e2m1":
        m, ka = (m, 2 * ka) if a_kpack else (2 * m, ka)
    if b_fmt == "e2m1":
        kb, n = (2 * kb, n) if b_kpack else (kb, 2 * n)
    if ka != kb:
        raise ValueError(f"the operands hold different numbers of K elements: {ka} (lhs) and {kb} (rhs)")
    for side, scale, rows in (("lhs", a_scale, m), ("rhs", b_scale, n)):
        if scale is None:
            continue
        shape, dt = scale
        if dt.name not in ("uint8", "int8"):
            raise ValueError(f"{side}_scale holds e8m0 bytes: nl.uint8, got {dt!r}")
        want = tuple(a_shape[:-2]) + (rows, ka // GROUP)
        if ka % GROUP or tuple(shape) != want:
            raise ValueError(f"{side}_scale must have shape {list(want)} (one scale per {GROUP} elements of K), "
                             f"got {list(shape)}")
    return float16 if "fp16" in (a_fmt, b_fmt) else bfloat16


@_inline
def _swap_last(x):
    if len(x.shape) == 3:
        return _b.permute(x, 0, 2, 1)
    return _b.trans(x)


@_inline
def _interleave_last(a, b):
    c = _b.join(a, b)
    return _b.reshape(c, c.shape[:-2] + (2 * c.shape[-2],))


@_inline
def _e2m1_to_f32(n):
    """fp4 nibbles (uint8 0..15: sign, 2 exponent bits, 1 mantissa bit) -> fp32, exactly."""
    em = (n & 7).to(uint32)
    normal = (((em >> 1) + 126) << 23) | ((em & 1) << 22)
    mag = _b.where(em >= 2, normal, _b.where(em == 1, 0x3F000000, 0))
    return (mag | ((n & 8).to(uint32) << 28)).to(float32, bitcast=True)


@_inline
def _decode(x, fmt, k_pack, is_rhs):
    """The operand's elements as exact fp32 values, in [.., M, K] (lhs) or [.., K, N] (rhs) order."""
    if fmt == "e2m1":
        lo = _e2m1_to_f32(x & 0xF)
        hi = _e2m1_to_f32(x >> 4)
        # packed along the last axis for a K-packed lhs and an N-packed rhs, along the other one otherwise
        if k_pack != is_rhs:
            return _interleave_last(lo, hi)
        return _swap_last(_interleave_last(_swap_last(lo), _swap_last(hi)))
    if fmt == "e4m3":
        if x.dtype != float8e4nv:
            x = x.to(float8e4nv, bitcast=True)
    elif fmt == "e5m2":
        if x.dtype != float8e5:
            x = x.to(float8e5, bitcast=True)
    elif fmt == "bf16":
        if x.dtype != bfloat16:
            x = x.to(bfloat16, bitcast=True)
    elif fmt == "fp16":
        if x.dtype != float16:
            x = x.to(float16, bitcast=True)
    return x.to(float32)  # (an unknown format was reported by _check already)


@_inline
def _scale_values(s, K):
    """e8m0 bytes [.., R, K // 32] -> 2 ** (byte - 127) in fp32 repeated to [.., R, K]; the byte 255 is NaN."""
    u = s.to(uint8, bitcast=True).to(uint32)
    bits = _b.where(u == 0, 0x00400000, u << 23)  # byte 0 is 2**-127, an fp32 subnormal
    v = _b.where(u == 255, float("nan"), bits.to(float32, bitcast=True))
    shape = v.shape
    rep = _b.broadcast_to(_b.expand_dims(v, len(shape)), shape + (K // shape[-1],))
    return _b.reshape(rep, shape[:-1] + (K,))


@_inline
def _operand(x, scale, fmt, k_pack, is_rhs, compute):
    v = _decode(x, fmt, k_pack, is_rhs)
    if scale is not None:
        if is_rhs:
            v = v * _swap_last(_scale_values(scale, v.shape[-2]))
        else:
            v = v * _scale_values(scale, v.shape[-1])
    return v.to(compute)


@inline_jit
def dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc=None, fast_math=False, lhs_k_pack=True,
               rhs_k_pack=True, out_dtype=float32):
    """The matrix product of two blocks in microscaling formats (OCP MX): ``lhs @ rhs`` (+ ``acc``), fp32.

    ``lhs_format`` / ``rhs_format``: ``"e2m1"`` (fp4, two per uint8 byte, first element in the low bits,
    packed along K, or along M / N with ``*_k_pack=False``), ``"e4m3"``, ``"e5m2"`` (fp8 as uint8 or the fp8
    dtype), ``"bf16"``, ``"fp16"``.  ``lhs_scale`` ([M, K // 32]) and ``rhs_scale`` ([N, K // 32], not
    transposed) are e8m0 bytes (uint8, ``2 ** (byte - 127)``) or None.  The scaled operands are rounded to
    bf16 (fp16 when either format is fp16) and their products accumulated in fp32, as Triton's emulation does;
    ``fast_math`` is accepted and changes nothing.  3-D operands give a batched product.
    """
    if lhs_scale is None:
        ls = None
    else:
        ls = (lhs_scale.shape, lhs_scale.dtype)
    if rhs_scale is None:
        rs = None
    else:
        rs = (rhs_scale.shape, rhs_scale.dtype)
    compute = _check(lhs.shape, lhs.dtype, lhs_format, lhs_k_pack, ls, rhs.shape, rhs.dtype,
                                   rhs_format, rhs_k_pack, rs, out_dtype)
    a = _operand(lhs, lhs_scale, lhs_format, lhs_k_pack, False, compute)
    b = _operand(rhs, rhs_scale, rhs_format, rhs_k_pack, True, compute)
    return _b.dot(a, b, acc, out_dtype=float32)
