"""Numbers assigned to names inside a kernel, typed as Triton types them.

Triton's code generator turns every Python number bound by an assignment inside a kernel into a 0-d tensor
(``CodeGenerator._sanitize_target_value`` calls ``to_tensor``): ``MASK = 1 << 31`` is a ``uint32`` value,
``bs = BLOCK_SIZE`` an ``int32`` value with ``.to()``, ``m = -float("inf")`` a ``float32`` value.  Such a
value takes part in type promotion as a tensor does (``int8_block + n`` with ``n = 2`` is ``int32``), where a
literal adapts to the other operand and must fit it.

newt keeps the number a compile-time constant (so ``tl.arange(0, N)`` with ``N = 64`` still works, which
Triton refuses) and records the tensor dtype in ``Const.typed``.  Arithmetic between such constants is folded
with the tensor's semantics (wrapped to the promoted integer type, ``float32`` rounding, C division); what this
module cannot fold exactly is left to the run-time path, which has those semantics by construction.
"""

from __future__ import annotations

import ast
import math
import operator
import struct

from newt.language import core as lc

from .semantic import (
    CMP_SET,
    SemError,
    computation_type,
    int_literal_overflows,
    integer_promote,
    literal_type,
    wrap_int,
)
from .values import AV, Const

__all__ = ["assigned", "fold_binary", "fold_unary", "is_typed"]


def is_typed(av: AV) -> bool:
    return isinstance(av, Const) and av.typed is not None


def assigned(value: AV) -> AV:
    """The value a name holds after ``name = value`` inside a kernel: a number becomes typed."""
    if not isinstance(value, Const) or value.typed is not None:
        return value
    v = value.value
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        # a bool stays a compile-time flag (``is_desc = isinstance(x, tl.tensor_descriptor)`` feeding a
        # ``static_assert`` or an ``if``): as an int1 tensor it would promote like the literal anyway
        return value
    try:
        t = literal_type(v)
    except SemError:
        return value  # no tensor type holds it: Triton's to_tensor raises where it is used; keep the number
    return Const(v, value.origin, t)


def _fit(v, t: lc.dtype):
    """``v`` as a value of dtype ``t`` (wrapped integer, rounded float, bool)."""
    if t.is_bool():
        return bool(v)
    if t.is_int():
            return wrap_int(int(v), t)
    if t.is_fp32():
        v = float(v)
        if math.isfinite(v):
            try:
                return struct.unpack("f", struct.pack("f", v))[0]
            except OverflowError:
                return math.copysign(math.inf, v)
        return v
    if t.is_fp64():
        return float(v)
    return None  # fp16/bf16/fp8: not folded here


def _operand(av: Const):
    if av.typed is not None:
        return av.typed, False
    return literal_type(av.value), True


def fold_binary(opname: str, a: Const, b: Const):
    """``a <op> b`` for two constants at least one of which is typed, as Triton computes it on 0-d tensors:
    a typed ``Const``, or None where the exact result needs the run-time path."""
    if not all(isinstance(x.value, (bool, int, float)) for x in (a, b)):
        return None
    ta, la = _operand(a)
    tb, lb = _operand(b)
    try:
        if opname in ("and", "or", "xor", "shl", "shr"):
            if ta.is_floating() or tb.is_floating():
                return None
            ct = (tb if la else ta) if la != lb else integer_promote(ta, tb)
        elif opname in ("add", "sub", "mul", "floordiv", "mod", "truediv") or opname in CMP_SET:
            ct = computation_type(ta, la, tb, lb, opname in ("truediv", "floordiv", "mod"), opname)
        else:
            return None
    except Exception:
        return None  # the run-time path reports the operator error with its own message
    if opname == "truediv" and ct.is_int():
        ct = lc.float32
    x, y = _fit(a.value, ct), _fit(b.value, ct)
    if x is None or y is None:
        return None
    if literal_overflows(a, la, ct) or literal_overflows(b, lb, ct):
        return None  # a literal that does not fit the typed operand: the run-time path reports it
    if opname in CMP_SET:
        r = {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}[opname]
        return Const(r)  # a compile-time flag, as an assigned bool stays (see assigned)
    if ct.is_int() and not ct.is_bool():
        r = _int_op(opname, x, y, ct, ta)
    elif ct.is_floating():
        r = _float_op(opname, x, y)
    else:
        r = None
    if r is None:
        return None
    return Const(_fit(r, ct), None, ct)


def literal_overflows(av: Const, lit: bool, ct: lc.dtype) -> bool:
    return lit and int_literal_overflows(av, ct)


#: the operators whose exact result both integer (then wrapped) and float (then rounded) folding take as Python's
_RING = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}


def _int_op(opname, x: int, y: int, ct, left_type):
    bits = ct.int_bitwidth
    if opname in _RING:
        return _RING[opname](x, y)
    if opname in ("floordiv", "mod"):
        if y == 0 or x < 0 or y < 0:
            return None  # C division differs from Python's for negatives; by zero it is undefined
        return x // y if opname == "floordiv" else x % y
    if opname in ("and", "or", "xor"):
        return {"and": x & y, "or": x | y, "xor": x ^ y}[opname]
    if not 0 <= y < bits:
        return None  # an out-of-range shift has no defined value
    if opname == "shl":
        return x << y
    if ct.is_int_unsigned() and left_type.is_int_signed():
        return None  # Triton shifts by the left operand's signedness on the promoted bits
    return x >> y  # x is already wrapped to ct: arithmetic for signed, logical for unsigned


def _float_op(opname, x: float, y: float):
    try:
        if opname in _RING:
            return _RING[opname](x, y)
        if opname == "truediv":
            return x / y
    except (ZeroDivisionError, OverflowError):
        return None
    return None  # % and // on floats: fmod / floor rules, left to the run-time path


def fold_unary(opty, v: Const):
    """``-v``, ``+v``, ``~v`` of a typed constant as on a 0-d tensor of its dtype, or None."""
    t = v.typed
    if opty is ast.UAdd:
        return v
    if opty is ast.Not:
        return Const(not v.value)  # a comparison of typed constants: a compile-time flag, as above
    if opty is ast.USub and (t.is_int() and not t.is_bool() or t.is_fp32() or t.is_fp64()):
        return Const(_fit(-v.value, t), None, t)
    if opty is ast.Invert and t.is_int() and not t.is_bool():
        return Const(_fit(~int(v.value), t), None, t)
    return None
