"""Type rules of ``nl.static_print``/``static_assert``, ``device_print``/``device_assert``, barriers and hints."""

from __future__ import annotations

from newt.diagnostics import Severity
from newt.ir.types import shape_of, type_str
from newt.language import core as lc

from ..ops import Bound, _poison, const_int, need_tensor, rule
from ..semantic import (
    SemError,
    broadcast_shapes,
)
from ..values import Const, Sym, TensorV, TupleV
from .memory import _mask


def _fmt(av):
    if isinstance(av, Const):
        return str(av.value)
    if isinstance(av, TensorV):
        return type_str(av.type)
    if isinstance(av, Sym):
        return av.expr
    if isinstance(av, TupleV):
        return "(" + ", ".join(_fmt(x) for x in av.items) + ")"
    return "?"


@rule("static_print")
def _static_print(b, a: Bound, node):
    sep = a["sep"].value if isinstance(a["sep"], Const) else " "
    text = sep.join(_fmt(v) for v in a.tuple("values").items)
    b.static_prints.append(text)
    if not b.speculative:
        b.report("N051", f"static_print: {text}", node, severity=Severity.INFO)
    return Const(None)


@rule("static_assert")
def _static_assert(b, a: Bound, node):
    c = a["cond"]
    msg = a["msg"].value if isinstance(a["msg"], Const) else ""
    _poison(c)
    if isinstance(c, Const):
        if not c.value:
            raise SemError("N050", f"static_assert failed{': ' + str(msg) if msg else ''}")
        return Const(None)
    if isinstance(c, TensorV):
        raise SemError("N010", "nl.static_assert needs a compile-time condition", hint="use nl.device_assert for "
                       "run-time checks")
    return Const(None)


@rule("device_print")
def _device_print(b, a: Bound, node):
    prefix = a["prefix"]
    if not (isinstance(prefix, Const) and isinstance(prefix.value, str)):
        raise SemError("N010", "nl.device_print prefix must be a constexpr string", node=a.node("prefix"))
    vals = []
    for v in a.tuple("args").items:
        _poison(v)
        vals.append(need_tensor(b, v, "a printed value", node).v)
    hexa = bool(getattr(a["hex"], "value", False))
    b.emit("print", vals, [], {"prefix": prefix.value, "hex": hexa}, node=node)
    return Const(None)


@rule("device_assert")
def _device_assert(b, a: Bound, node):
    c = a["cond"]
    msg = a["msg"].value if isinstance(a["msg"], Const) else ""
    _poison(c)
    if isinstance(c, Const):
        if not c.value:
            b.report("N050", f"device_assert always fails{': ' + str(msg) if msg else ''}", node,
                     severity=Severity.WARNING)
        cv = b.constant(bool(c.value), lc.int1, node)
    else:
        cv = b.to_bool(need_tensor(b, c, "the condition", a.node("cond")), node)
    ops = [cv]
    mask = _mask(b, a["mask"], a.node("mask"))
    if mask is not None:
        shape = broadcast_shapes(shape_of(cv.type), shape_of(mask.type))
        ops = [b.broadcast_value(cv, shape, node), b.broadcast_value(mask, shape, node)]
    b.emit("assert", ops, [], {"msg": str(msg)}, node=node)
    return Const(None)


@rule("debug_barrier")
def _barrier(b, a: Bound, node):
    b.emit("barrier", [], [], node=node)
    return Const(None)


@rule("multiple_of", "max_contiguous", "max_constancy")
def _hint(b, a: Bound, node):
    x = need_tensor(b, a["input"], f"nl.{a.name} input", a.node("input"))
    vals = a["values"]
    items = vals.items if isinstance(vals, TupleV) else [vals]
    ints = [const_int(v, f"nl.{a.name} values", a.node("values"), allow_sym=False) for v in items]
    if len(ints) == 1 and len(x.shape) > 1:
        ints = ints * len(x.shape)
    if x.shape and len(ints) != len(x.shape):
        raise SemError("N032", f"nl.{a.name} needs one value per dimension ({len(x.shape)}), got {len(ints)}")
    return TensorV(b.emit("hint", [x.v], [x.type], {a.name: ints}, node=node).result)


@rule("assume")
def _assume(b, a: Bound, node):
    c = a["cond"]
    _poison(c)
    if isinstance(c, Const):
        return Const(None)
    t = need_tensor(b, c, "the condition", a.node("cond"))
    b.emit("assume", [b.to_bool(t, node)], [], node=node)
    return Const(None)
