"""Typing rules shared by all ops: literal types, promotion, broadcasting.

Pure functions over types.  A rule that fails raises ``SemError`` carrying a
diagnostic code; the builder attaches the user's span.
"""

from __future__ import annotations

from newt.ir.types import ANY_DTYPE, SymDim, dims_equal, is_pow2
from newt.language import core as lc

MAX_NUMEL = 1 << 20


class SemError(Exception):
    def __init__(self, code: str, message: str, hint: str | None = None, data: dict | None = None, node=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.data = data or {}
        self.node = node


def literal_type(v) -> lc.dtype:
    """The type a Python literal takes when it becomes a value (Triton's rules)."""
    if isinstance(v, bool):
        return lc.int1
    if isinstance(v, int):
        if -(2 ** 31) <= v < 2 ** 31:
            return lc.int32
        if 2 ** 31 <= v < 2 ** 32:
            return lc.uint32
        if -(2 ** 63) <= v < 2 ** 63:
            return lc.int64
        if 2 ** 63 <= v < 2 ** 64:
            return lc.uint64
        raise SemError("N023", f"integer literal {v} does not fit in 64 bits")
    if isinstance(v, float):
        a = abs(v)
        if a == 0 or a != a or a == float("inf") or 1.1754943508222875e-38 <= a <= 3.4028234663852886e38:
            return lc.float32
        return lc.float64
    raise SemError("N023", f"{type(v).__name__} value {v!r} cannot be used as a block value")


def _is_sym(t) -> bool:
    return t.is_symbolic()


def integer_promote(a: lc.dtype, b: lc.dtype) -> lc.dtype:
    if a.is_bool() and b.is_bool():
        return lc.int1
    if a.is_bool():
        return b
    if b.is_bool():
        return a
    ar, br = a.int_bitwidth, b.int_bitwidth
    asg, bsg = a.is_int_signed(), b.is_int_signed()
    if asg == bsg:
        return a if ar > br else b
    if not asg:  # a unsigned
        return a if ar >= br else b
    return b if br >= ar else a


def computation_type(a: lc.dtype, a_lit: bool, b: lc.dtype, b_lit: bool, div_or_mod: bool, opname: str) -> lc.dtype:
    """The type both operands of an arithmetic op are converted to."""
    if _is_sym(a) or _is_sym(b):
        if a == b:
            return a
        if a_lit and not b_lit:
            return b
        if b_lit and not a_lit:
            return a
        return ANY_DTYPE
    # A Python literal of a lower or equal kind does not take part in promotion.
    if a_lit != b_lit:
        lit, ten = (a, b) if a_lit else (b, a)
        if lit.kind_rank() <= ten.kind_rank():
            if div_or_mod and (ten.is_fp16() or ten.is_bf16()):
                return lc.float32
            return ten
    if a.is_fp64() or b.is_fp64():
        return lc.float64
    if a.is_fp32() or b.is_fp32():
        return lc.float32
    if a.is_fp16() or b.is_fp16():
        if div_or_mod or a.is_bf16() or b.is_bf16():
            return lc.float32
        return lc.float16
    if a.is_bf16() or b.is_bf16():
        if div_or_mod:
            return lc.float32
        return lc.bfloat16 if (a.is_bf16() and b.is_bf16()) or a.is_int() or b.is_int() else lc.float32
    if a.is_fp8() or b.is_fp8():
        if a == b:
            return a
        return lc.float16
    if not (a.is_int() and b.is_int()):
        raise SemError("N023", f"operator {opname} is not defined for {a!r} and {b!r}")
    if div_or_mod and not (a.is_bool() or b.is_bool()) and a.is_int_signed() != b.is_int_signed():
        raise SemError(
            "N020",
            f"cannot use {opname} with {a!r} and {b!r}: they have different signedness",
            hint="cast one operand so both are signed or both unsigned, e.g. x.to(nl.int32)",
        )
    return integer_promote(a, b)


def broadcast_shapes(s1: tuple, s2: tuple, what: str = "operands") -> tuple:
    """NumPy-style broadcast of two shapes (ranks aligned on the right)."""
    if s1 == s2:
        return s1
    r = max(len(s1), len(s2))
    a = (1,) * (r - len(s1)) + tuple(s1)
    b = (1,) * (r - len(s2)) + tuple(s2)
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            eq = dims_equal(x, y)
            if eq is False:
                raise SemError(
                    "N030",
                    f"shapes {fmt_shape(s1)} and {fmt_shape(s2)} of the {what} do not broadcast "
                    f"(dimension {i}: {x} vs {y})",
                    hint="index with [:, None] or [None, :] to add the missing dimension",
                )
            out.append(x if isinstance(x, int) else y)
    return tuple(out)


def fmt_shape(s) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def check_block_shape(shape, where: str = "block") -> None:
    n = 1
    for d in shape:
        if isinstance(d, SymDim):
            return
        if not isinstance(d, int):
            return
        if d <= 0 or not is_pow2(d):
            up = 1 if d <= 1 else 1 << (d - 1).bit_length()
            raise SemError(
                "N011",
                f"{where} dimension {d} is not a power of two",
                hint=f"round {d} up to {up} and mask the extra elements",
                data={"value": d, "replace": str(up)},
            )
        n *= d
    if n > MAX_NUMEL:
        raise SemError("N012", f"{where} of shape {fmt_shape(shape)} has {n} elements; the limit is {MAX_NUMEL}")


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not isinstance(axis, int):
        raise SemError("N010", f"{what} must be a constexpr int")
    if not -rank <= axis < max(rank, 1) or rank == 0:
        raise SemError("N032", f"{what} {axis} is out of range for a block of rank {rank}",
                       hint=f"use an axis in 0..{rank - 1}" if rank else "reduce a block, not a scalar")
    return axis % rank


def is_float(t) -> bool:
    return t.is_floating()
