"""Type rules of ``nl.where``, ``minimum``/``maximum``, ``clamp``, ``abs``, ``fma`` and the math functions."""

from __future__ import annotations

from newt.ir.types import block_of, shape_of
from newt.language import core as lc

from ..ops import Bound, _poison, float_ok, need_tensor, rule
from ..semantic import (
    SemError,
    broadcast_shapes,
    check_literal_range,
    computation_type,
)
from ..values import Const, TensorV


def _promote(b, avs, opname, nodes, div_or_mod=False, allow_ptr=False):
    """Common dtype and shape of several operands (binary promotion, pairwise)."""
    infos = [b.operand_info(v) for v in avs]
    shape = ()
    for _, s, _ in infos:
        shape = broadcast_shapes(shape, s)
    t, lit = infos[0][0], infos[0][2]
    for (t2, _, l2) in infos[1:]:
        if t.is_ptr() or t2.is_ptr():
            if not allow_ptr or (t.is_ptr() and t2.is_ptr() and t != t2):
                raise SemError("N022", f"nl.{opname} cannot combine {t!r} and {t2!r}")
            t = t if t.is_ptr() else t2
            lit = False
            continue
        t = computation_type(t, lit, t2, l2, div_or_mod, f"nl.{opname}")
        lit = lit and l2
    if not t.is_ptr():
        for v, (_, _, is_lit) in zip(avs, infos):  # a Python int must fit the type it converts to (Triton)
            check_literal_range(v, is_lit, None, False, t)
    return t, shape


@rule("where")
def _where(b, a: Bound, node):
    c, x, y = a["condition"], a["x"], a["y"]
    _poison(c, x, y)
    if isinstance(c, Const) and isinstance(x, (Const,)) and isinstance(y, Const):
        return x if c.value else y
    ct = need_tensor(b, c, "the condition", a.node("condition"))
    cond = b.to_bool(ct, node) if not ct.dtype.is_symbolic() else ct.v
    t, shape = _promote(b, [x, y], "where", [a.node("x"), a.node("y")], allow_ptr=True)
    shape = broadcast_shapes(shape, shape_of(cond.type), "condition and values")
    cv = b.broadcast_value(cond, shape, node)
    xv = b.as_tensor(x, t, shape, node)
    yv = b.as_tensor(y, t, shape, node)
    return TensorV(b.emit("where", [cv, xv, yv], [block_of(t, shape)], node=node).result)


def _nan_flag(av):
    if isinstance(av, Const) and isinstance(av.value, lc.PropagateNan):
        return av.value is lc.PropagateNan.ALL
    if isinstance(av, Const) and isinstance(av.value, bool):
        return av.value
    return False


@rule("minimum", "maximum")
def _minmax(b, a: Bound, node):
    x, y = a["x"], a["y"]
    _poison(x, y)
    t, shape = _promote(b, [x, y], a.name, [a.node("x"), a.node("y")])
    xv, yv = b.as_tensor(x, t, shape, node), b.as_tensor(y, t, shape, node)
    attrs = {"propagate_nan": _nan_flag(a["propagate_nan"])} if t.is_floating() else {}
    return TensorV(b.emit(a.name, [xv, yv], [block_of(t, shape)], attrs, node=node).result)


@rule("clamp")
def _clamp(b, a: Bound, node):
    x, lo, hi = a["x"], a["min"], a["max"]
    _poison(x, lo, hi)
    t, shape = _promote(b, [x, lo, hi], "clamp", [a.node("x"), a.node("min"), a.node("max")])
    xv, lv, hv = (b.as_tensor(v, t, shape, node) for v in (x, lo, hi))
    attrs = {"propagate_nan": _nan_flag(a["propagate_nan"])} if t.is_floating() else {}
    ty = block_of(t, shape)
    m = b.emit("maximum", [xv, lv], [ty], attrs, node=node).result
    return TensorV(b.emit("minimum", [m, hv], [ty], attrs, node=node).result)


@rule("abs")
def _abs(b, a: Bound, node):
    x = need_tensor(b, a["x"], "nl.abs input", a.node("x"))
    if x.dtype.is_ptr():
        raise SemError("N023", "nl.abs is not defined for pointers")
    if x.dtype.is_int_unsigned():
        return x
    return TensorV(b.emit("abs", [x.v], [x.type], node=node).result)


@rule("fma")
def _fma(b, a: Bound, node):
    xs = [a["x"], a["y"], a["z"]]
    _poison(*xs)
    t, shape = _promote(b, xs, "fma", [a.node(k) for k in "xyz"])
    if not float_ok(t):
        raise SemError("N023", f"nl.fma needs floating-point operands, got {t!r}")
    vs = [b.as_tensor(v, t, shape, node) for v in xs]
    return TensorV(b.emit("fma", vs, [block_of(t, shape)], node=node).result)


@rule("umulhi")
def _umulhi(b, a: Bound, node):
    x, y = a["x"], a["y"]
    _poison(x, y)
    t, shape = _promote(b, [x, y], "umulhi", [a.node("x"), a.node("y")])
    if not t.is_symbolic() and (not t.is_int() or t.int_bitwidth not in (32, 64)):
        raise SemError("N023", f"nl.umulhi needs 32- or 64-bit integers, got {t!r}")
    xv, yv = b.as_tensor(x, t, shape, node), b.as_tensor(y, t, shape, node)
    return TensorV(b.emit("umulhi", [xv, yv], [block_of(t, shape)], node=node).result)


_FP32_ONLY = {"sqrt_rn", "div_rn"}


@rule("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "tanh", "erf", "floor", "ceil")
def _unary_math(b, a: Bound, node):
    x = a["x"]
    _poison(x)
    if isinstance(x, Const) and isinstance(x.value, (int, float)) and not isinstance(x.value, bool):
        xv = b.as_tensor(x, lc.float32, (), node)
        return TensorV(b.emit(a.name, [xv], [xv.type], node=node).result)
    t = need_tensor(b, x, f"nl.{a.name} input", a.node("x"))
    if not float_ok(t.dtype):
        raise SemError("N023", f"nl.{a.name} needs a floating-point input, got {t.dtype!r}", node=a.node("x"),
                       hint="convert first, e.g. x.to(nl.float32)")
    if a.name in _FP32_ONLY and t.dtype.name not in ("fp32", "fp64") and not t.dtype.is_symbolic():
        raise SemError("N023", f"nl.{a.name} supports fp32 and fp64 only, got {t.dtype!r}", node=a.node("x"))
    return TensorV(b.emit(a.name, [t.v], [t.type], node=node).result)


@rule("div_rn", "pow")
def _binary_float(b, a: Bound, node):
    x, y = a["x"], a["y"]
    _poison(x, y)
    t, shape = _promote(b, [x, y], a.name, [a.node("x"), a.node("y")])
    if t.is_int():
        t = lc.float32
    if not float_ok(t):
        raise SemError("N023", f"nl.{a.name} needs floating-point operands, got {t!r}")
    if a.name == "div_rn" and t.name not in ("fp32", "fp64") and not t.is_symbolic():
        raise SemError("N023", f"nl.div_rn supports fp32 and fp64 only, got {t!r}")
    xv, yv = b.as_tensor(x, t, shape, node), b.as_tensor(y, t, shape, node)
    return TensorV(b.emit(a.name, [xv, yv], [block_of(t, shape)], node=node).result)


@rule("fdiv")
def _fdiv(b, a: Bound, node):
    x, y = a["x"], a["y"]
    _poison(x, y)
    ieee = a["ieee_rounding"]
    if not isinstance(ieee, Const):
        raise SemError("N010", "nl.math.fdiv ieee_rounding must be a constexpr bool", node=a.node("ieee_rounding"))
    t, shape = _promote(b, [x, y], "fdiv", [a.node("x"), a.node("y")])
    if not float_ok(t):
        raise SemError("N023", f"nl.math.fdiv needs floating-point operands, got {t!r}",
                       hint="convert with .to(nl.float32)")
    xv, yv = b.as_tensor(x, t, shape, node), b.as_tensor(y, t, shape, node)
    op = "div_rn" if ieee.value else "truediv"
    if ieee.value and t.name not in ("fp32", "fp64") and not t.is_symbolic():
        raise SemError("N023", f"nl.math.fdiv(ieee_rounding=True) supports fp32 and fp64 only, got {t!r}")
    return TensorV(b.emit(op, [xv, yv], [block_of(t, shape)], node=node).result)
