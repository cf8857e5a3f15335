"""Typing rules shared by all ops: literal types, promotion, broadcasting.

Pure functions over types.  A rule that fails raises ``SemError`` carrying a
diagnostic code; the builder attaches the user's span.
"""

from __future__ import annotations

import ast
import operator

from newt.diagnostics import LocatedError
from newt.ir.core import Loc
from newt.ir.types import ANY_DTYPE, SymDim, SymDType, block_of, dims_equal, is_pow2, shape_of
from newt.language import core as lc

from .values import AV, Const, Opaque, Sym, TensorV, TupleV, Undef

MAX_NUMEL = 1 << 20


class SemError(LocatedError):
    """A type rule failed: ``SemError(code, message, hint=None, data=None, node=None)``.  ``node`` is the AST
    node to point at (None: the expression being built); the builder turns it into a ``Diagnostic`` at that
    node's span.  A family of failures with one shape has a subclass per cause (below) with its templates."""

    def __init__(self, code: str, message: str, hint: str | None = None, data: dict | None = None, node=None,
                 *, location: Loc | None = None):
        super().__init__(code, message, hint=hint, location=location, data=data)
        self.node = node


class SemCause(SemError):
    """One cause of a ``SemError`` with its message templates: ``raise AxisOutOfRange(what="axis", axis=3,
    rank=2)``; the fields become the diagnostic's ``data``."""

    def __init__(self, node=None, **fields):
        message, hint = self.render_template(fields)
        super().__init__(self.code, message, hint=hint, data=fields, node=node)


class NotPowerOfTwo(SemCause):
    code = "N011"
    template = "{where} dimension {value} is not a power of two"
    # ``value`` / ``replace``: the quick fix replaces the literal with ``replace``
    hint_template = "round {value} up to {replace} and mask the extra elements"


class TooManyElements(SemCause):
    code = "N012"
    template = "{where} of shape {shape} has {numel} elements; the limit is {limit}"


class ShapesDoNotBroadcast(SemCause):
    code = "N030"
    template = "shapes {a} and {b} of the {what} do not broadcast (dimension {dim}: {x} vs {y})"
    hint_template = "index with [:, None] or [None, :] to add the missing dimension"


class AxisOutOfRange(SemCause):
    code = "N032"
    template = "{what} {axis} is out of range for a block of rank {rank}"

    @classmethod
    def render_template(cls, fields):
        message, _ = super().render_template(fields)
        rank = fields["rank"]
        return message, (f"use an axis in 0..{rank - 1}" if rank else "reduce a block, not a scalar")


class DifferentSignedness(SemCause):
    code = "N020"
    template = "Cannot use {op} with {a!r} and {b!r} because they have different signedness"
    hint_template = "cast one operand so both are signed or both unsigned, e.g. x.to(nl.int32)"


class OperatorUndefined(SemCause):
    code = "N023"
    template = "operator {op} is not defined for {a!r} and {b!r}"


def literal_type(v, *, argument: bool = False) -> lc.dtype:
    """The type a Python literal takes when it becomes a value (Triton's rules): ``bool`` is ``int1``, an
    ``int`` the first of ``int32``, ``uint32``, ``int64``, ``uint64`` that holds it, a ``float`` ``float32``
    unless ``float32`` cannot hold it (then ``float64``).  ``argument``: the type of a Python scalar passed
    as a launch argument instead, where every ``float`` is ``float32`` (as the runtime specializes it).
    Raises ``SemError`` (N023) for a value of no such type."""
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
        if argument:
            return lc.float32
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
        raise OperatorUndefined(op=opname, a=a, b=b)
    if div_or_mod and not (a.is_bool() or b.is_bool()) and a.is_int_signed() != b.is_int_signed():
        raise DifferentSignedness(op=opname, a=a, b=b)
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
                raise ShapesDoNotBroadcast(a=fmt_shape(s1), b=fmt_shape(s2), what=what, dim=i, x=x, y=y)
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
            raise NotPowerOfTwo(where=where, value=d, replace=str(up))
        n *= d
    if n > MAX_NUMEL:
        raise TooManyElements(where=where, shape=fmt_shape(shape), numel=n, limit=MAX_NUMEL)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not isinstance(axis, int):
        raise SemError("N010", f"{what} must be a constexpr int")
    if not -rank <= axis < max(rank, 1) or rank == 0:
        raise AxisOutOfRange(what=what, axis=axis, rank=rank)
    return axis % rank


def is_float(t) -> bool:
    return t.is_floating()


# ---------------------------------------------------------------------------
# operators: ``a + b``, ``-x``, ``a < b``, ``a is None`` ... typed and emitted through the builder ``bld``
# ---------------------------------------------------------------------------

BINOP_NAMES = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl",
    ast.RShift: "shr", ast.Pow: "pow_", ast.MatMult: "matmul",
}
CMP_NAMES = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
CMP_SET = set(CMP_NAMES.values())
OPSYM = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "and": "&",
          "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "pow_": "**", "matmul": "@", "lt": "<", "le": "<=",
          "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
PYOPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "and": operator.and_, "or": operator.or_,
    "xor": operator.xor, "shl": operator.lshift, "shr": operator.rshift, "pow_": operator.pow,
    "matmul": operator.matmul, "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "eq": operator.eq, "ne": operator.ne,
}
UNOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}


def sym_text(av) -> str:
    if isinstance(av, Sym):
        return av.expr
    if isinstance(av, Const):
        return repr(av.value)
    return "?"


def is_number(av) -> bool:
    return isinstance(av, Const) and isinstance(av.value, (bool, int, float))


def const_eq(a, b) -> bool:
    try:
        return type(a) is type(b) and a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                                  and not isinstance(a, bool) and a == b)
    except Exception:
        return False


def same_type(a, b) -> bool:
    if isinstance(a, TensorV) and isinstance(b, TensorV):
        return a.type == b.type
    if isinstance(a, Const) and isinstance(b, Const):
        return type(a.value) is type(b.value)
    return False


def shapes_maybe_equal(a, b) -> bool:
    if len(a) != len(b):
        return False
    return all(dims_equal(x, y) is not False for x, y in zip(a, b))


def int_literal_overflows(av, ty) -> bool:
    if not (isinstance(av, Const) and isinstance(av.value, int) and not isinstance(av.value, bool)):
        return False
    if not ty.is_int() or ty.is_bool() or ty.is_symbolic():
        return False
    bits = ty.int_bitwidth
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if ty.is_int_signed() else (0, (1 << bits) - 1)
    return not lo <= av.value <= hi


def check_literal_range(a, la: bool, b, lb: bool, ct) -> None:
    """A Python int meeting a block converts to the block's computation type ``ct``: it must fit (Triton's rule)."""
    for av, lit in ((a, la), (b, lb)):
        if lit and int_literal_overflows(av, ct):
            if av.value < 0 and ct.is_int_unsigned():
                raise SemError("N023", f"cannot combine the negative scalar {av.value} with an unsigned {ct!r} "
                               "block", hint="cast one of them explicitly")
            raise SemError("N023", f"scalar {av.value} is out of range for type {ct!r}",
                           hint=f"cast the block first, e.g. x.to(nl.int64), or write the constant as "
                                f"nl.full((), {av.value}, nl.int64)")


def wrap_int(v: int, t) -> int:
    bits = t.int_bitwidth
    mask = (1 << bits) - 1
    v &= mask
    if t.is_int_signed() and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def unary(bld, opty, v, node):
    if isinstance(v, (Opaque, Undef)):
        return Opaque()
    if isinstance(v, Const):
        try:
            return Const(UNOPS[opty](v.value))
        except Exception as e:
            raise SemError("N023", f"cannot apply this operator to {v.value!r}: {e}") from None
    if isinstance(v, Sym):
        sym = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not ", ast.Invert: "~"}[opty]
        return Sym(f"{sym}{v.expr}", opty is ast.Not)
    if not isinstance(v, TensorV):
        raise SemError("N023", "this operator cannot be applied here")
    t = v.dtype
    if opty is ast.UAdd:
        return v
    if opty is ast.USub:
        if t.is_ptr():
            raise SemError("N022", "a pointer cannot be negated")
        return TensorV(bld.emit("neg", [v.v], [v.type], node=node).result)
    if opty is ast.Invert:
        if t.is_floating():
            raise SemError("N021", f"'~' is a bitwise operator and cannot be applied to {t!r}",
                           hint="use .to(nl.int32, bitcast=True) to operate on the bits")
        if t.is_ptr():
            raise SemError("N023", "'~' cannot be applied to a pointer")
        return TensorV(bld.emit("invert", [v.v], [v.type], node=node).result)
    if opty is ast.Not:
        b = bld.to_bool(v, node)
        return TensorV(bld.emit("xor", [b, bld.constant(True, b.type)], [b.type], node=node).result)
    raise SemError("N023", "unsupported unary operator")


def logical_and(bld, a, b, node):
    if isinstance(a, Const):
        return b if a.value else a
    if isinstance(a, (Opaque, Undef)) or isinstance(b, (Opaque, Undef)):
        return Opaque()
    if isinstance(a, Sym) or isinstance(b, Sym):
        return Sym("and", True)
    x, y = bld.to_bool(a, node), bld.to_bool(b, node)
    shape = broadcast_shapes(shape_of(x.type), shape_of(y.type))
    x, y = bld.convert(x, lc.int1, shape, node), bld.convert(y, lc.int1, shape, node)
    return TensorV(bld.emit("and", [x, y], [x.type], node=node).result)


def compare_identity(op, a, b):
    if isinstance(a, (Opaque, Undef)) or isinstance(b, (Opaque, Undef)):
        return Opaque()
    if isinstance(op, (ast.In, ast.NotIn)):
        if isinstance(b, TupleV) and isinstance(a, Const) and all(isinstance(x, Const) for x in b.items):
            r = any(const_eq(a.value, x.value) for x in b.items)
            return Const(r if isinstance(op, ast.In) else not r)
        if isinstance(b, Const) and isinstance(a, Const):
            r = a.value in b.value
            return Const(r if isinstance(op, ast.In) else not r)
        if isinstance(a, Sym) or isinstance(b, Sym):
            return Sym("in", True)
        raise SemError("N023", "'in' needs compile-time values")
    if isinstance(a, Const) and isinstance(b, Const):
        if any(isinstance(v.value, lc.dtype) and v.value.is_symbolic() for v in (a, b)) and a.value is not b.value:
            return Sym("is", True)  # a dtype the generic check does not know (``x.dtype is tl.int64``)
        r = a.value is b.value or (a.value is None) == (b.value is None) and a.value is None
        if not (a.value is None or b.value is None):
            r = a.value is b.value or a.value == b.value
        return Const(r if isinstance(op, ast.Is) else not r)
    if isinstance(a, Sym) or isinstance(b, Sym):
        return Sym("is", True)
    if any(isinstance(v, TensorV) and v.dtype == SymDType("?") for v in (a, b)):
        # a parameter the generic check knows nothing about: a launch may pass a dtype, None or an object
        # (``if dtype is tl.int64:`` in a helper checked on its own), so the answer is not known
        return Sym("is", True)
    # a run-time value is never None
    none_side = (isinstance(b, Const) and b.value is None) or (isinstance(a, Const) and a.value is None)
    if none_side:
        return Const(not isinstance(op, ast.Is))
    raise SemError("N023", "'is' compares compile-time values only; use == for blocks")


def binary(bld, opname: str, a: AV, b: AV, node) -> AV:
    if isinstance(a, (Opaque, Undef)) or isinstance(b, (Opaque, Undef)):
        return Opaque()
    if isinstance(a, Const) and isinstance(b, Const):
        if isinstance(a.value, lc.dtype) and a.value.is_symbolic() or \
                isinstance(b.value, lc.dtype) and b.value.is_symbolic():
            if opname in ("eq", "ne"):
                return Sym(f"{a.value} {opname} {b.value}", True)
        try:
            return Const(PYOPS[opname](a.value, b.value))
        except ZeroDivisionError:
            raise SemError("N023", "division by zero in a compile-time expression") from None
        except Exception:
            raise OperatorUndefined(op=OPSYM[opname], a=a.value, b=b.value) from None
    if isinstance(a, (Const, Sym)) and isinstance(b, (Const, Sym)):
        is_bool = opname in CMP_SET
        return Sym(f"{sym_text(a)}{OPSYM[opname]}{sym_text(b)}", is_bool)
    if isinstance(a, TupleV) or isinstance(b, TupleV):
        if opname == "add" and isinstance(a, TupleV) and isinstance(b, TupleV):
            return TupleV(a.items + b.items)
        if opname in ("eq", "ne") and isinstance(a, TupleV) and isinstance(b, TupleV):
            if all(isinstance(x, Const) for x in a.items + b.items):
                eq = [x.value for x in a.items] == [x.value for x in b.items]
                return Const(eq if opname == "eq" else not eq)
            return Sym("tuple-eq", True)
        raise SemError("N023", f"operator {OPSYM[opname]} is not defined for tuples")
    return tensor_binary(bld, opname, a, b, node)


def operand_info(av: AV):
    """(dtype, shape, is_literal)."""
    if isinstance(av, TensorV):
        return av.dtype, av.shape, False
    if isinstance(av, Const):
        if av.typed is not None:
            return av.typed, (), False  # a number assigned to a name: a 0-d tensor of its dtype (typedconst.py)
        if isinstance(av.value, (bool, int, float)):
            return literal_type(av.value), (), True
        if av.value is None:
            raise SemError("N023", "None cannot be used as a value here")
        raise SemError("N023", f"{av.value!r} cannot be used as a value here")
    if isinstance(av, Sym):
        return (lc.int1 if av.is_bool else lc.int32), (), True
    raise SemError("N023", "this value cannot be used in arithmetic")


def tensor_binary(bld, opname, a, b, node) -> AV:
    if opname == "matmul":
        return bld.call_builtin("dot", [a, b], {}, node, [node, node], {})
    if opname == "pow_":
        ta = operand_info(a)[0]
        if not (ta.is_floating() or ta.is_symbolic()):
            raise SemError("N023", f"'**' needs a floating-point base inside a kernel, got {ta!r}",
                           hint="multiply explicitly (x * x) or convert with .to(nl.float32)")
        return bld.call_builtin("pow", [a, b], {}, node, [node, node], {})
    ta, sa, la = operand_info(a)
    tb, sb, lb = operand_info(b)
    shape = broadcast_shapes(sa, sb)
    if ta.is_ptr() or tb.is_ptr():
        return pointer_binary(bld, opname, a, b, ta, tb, shape, node)
    if opname in ("and", "or", "xor", "shl", "shr"):
        for t in (ta, tb):
            if t.is_floating():
                raise SemError("N021", f"invalid operands of type {ta!r} and {tb!r}: bitwise operator {OPSYM[opname]} "
                               "is not defined for floating-point values",
                               hint="use .to(nl.int32, bitcast=True) to operate on the bits")
        if ta.is_symbolic() or tb.is_symbolic():
            ct = computation_type(ta, la, tb, lb, False, OPSYM[opname])
        elif la != lb:
            ct = tb if la else ta
        else:
            ct = integer_promote(ta, tb)
        check_literal_range(a, la, b, lb, ct)
    else:
        div_or_mod = opname in ("truediv", "floordiv", "mod")
        ct = computation_type(ta, la, tb, lb, div_or_mod, OPSYM[opname])
        check_literal_range(a, la, b, lb, ct)
        if opname == "truediv":
            if ct.is_int():
                ct = lc.float32
            elif ct.is_floating() and not (la or lb):
                # float / float: the operand with the wider mantissa wins
                ct = ta if ta.fp_mantissa_width >= tb.fp_mantissa_width else tb
                if ct.primitive_bitwidth < 32:
                    ct = lc.float32
        if opname == "floordiv" and ct.is_floating():
            raise SemError("N023", "'//' is not defined for floating-point values",
                           hint="use nl.floor(x / y)")
    av_ = bld.as_tensor(a, ct, shape, node)
    bv_ = bld.as_tensor(b, ct, shape, node)
    if opname == "shr" and ta.is_int_signed() and ct.is_int_unsigned() and not ct.is_bool():
        # Triton picks the shift by the left operand: arithmetic for a signed one, on the promoted unsigned bits
        st = lc.dtype(f"int{ct.int_bitwidth}")
        sh = bld.emit("shr", [bld.cast_value(av_, st, node, bitcast=True), bld.cast_value(bv_, st, node, bitcast=True)],
                      [block_of(st, shape)], node=node).result
        return TensorV(bld.cast_value(sh, ct, node, bitcast=True))
    if opname in CMP_SET:
        rt = block_of(lc.int1, shape)
    else:
        rt = block_of(ct, shape)
    return TensorV(bld.emit(opname, [av_, bv_], [rt], node=node).result)


def _guessed_pointer(bld, t) -> bool:
    """A pointer the generic check assumed (an unannotated parameter that flows into a load or store), whose
    element type it does not know: the file does not say it is one, so misuse is not certain."""
    return not bld.spec.concrete and t.is_ptr() and isinstance(t.element_ty, SymDType)


def pointer_binary(bld, opname, a, b, ta, tb, shape, node):
    if _guessed_pointer(bld, ta) or _guessed_pointer(bld, tb):
        offset = tb if ta.is_ptr() else ta
        valid = (opname == "add" or (opname == "sub" and ta.is_ptr())) and not offset.is_ptr() and \
            not offset.is_floating()
        if not valid:  # an error only if the guess were right: say nothing
            return Opaque()
    if opname in CMP_SET:
        if ta.is_ptr() and tb.is_ptr():
            av_ = bld.as_tensor(a, ta, shape, node)
            bv_ = bld.as_tensor(b, ta, shape, node)
            return TensorV(bld.emit(opname, [av_, bv_], [block_of(lc.int1, shape)], node=node).result)
        raise SemError("N022", "a pointer can only be compared with another pointer")
    if opname not in ("add", "sub"):
        raise SemError("N022", f"operator {OPSYM[opname]} is not defined for pointers",
                       hint="pointer arithmetic is ptr + int offset (in elements)")
    if ta.is_ptr() and tb.is_ptr():
        raise SemError("N022", f"cannot {'add' if opname == 'add' else 'subtract'} two pointers",
                       hint="add an integer offset to one pointer instead")
    if tb.is_ptr() and opname == "sub":
        raise SemError("N022", "cannot subtract a pointer from a number")
    ptr, off, pty, oty = (a, b, ta, tb) if ta.is_ptr() else (b, a, tb, ta)
    if oty.is_floating():
        raise SemError("N022", f"pointer offsets must be integers, not {oty!r}",
                       hint="cast the offset with .to(nl.int32)")
    if not (oty.is_int() or oty.is_symbolic()):
        raise SemError("N022", f"pointer offsets must be integers, not {oty!r}")
    pv = bld.as_tensor(ptr, pty, shape, node)
    oty2 = oty if (oty.is_int() and not oty.is_bool()) else lc.int32
    ov = bld.as_tensor(off, oty2, shape, node)
    if opname == "sub":
        ov = bld.emit("neg", [ov], [ov.type], node=node).result
    return TensorV(bld.emit("addptr", [pv, ov], [pv.type], node=node).result)
