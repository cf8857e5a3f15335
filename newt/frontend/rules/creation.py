"""Type rules of ``nl.program_id``, ``arange``, ``full``, ``zeros``, ``cast``."""

from __future__ import annotations

from newt.ir.types import SymDim, block_of
from newt.language import core as lc

from ..ops import Bound, _describe, _poison, const_dtype, const_int, const_str, need_tensor, parse_shape, rule
from ..semantic import (
    SemError,
    check_block_shape,
)
from ..values import Const, Sym, TensorV


@rule("program_id", "num_programs")
def _program_id(b, a: Bound, node):
    axis = a["axis"]
    _poison(axis)
    if isinstance(axis, Sym):
        return TensorV(b.emit(a.name, [], [lc.int32], {"axis": 0}, node=node).result)
    if not (isinstance(axis, Const) and isinstance(axis.value, int)):
        raise SemError("N010", f"nl.{a.name} axis must be a constexpr int (0, 1 or 2)", node=a.node("axis"))
    if axis.value not in (0, 1, 2):
        raise SemError("N044", f"nl.{a.name} axis must be 0, 1, or 2 but got {axis.value}", node=a.node("axis"),
                       hint="the launch grid has at most 3 dimensions")
    return TensorV(b.emit(a.name, [], [lc.int32], {"axis": axis.value}, node=node).result)


@rule("arange")
def _arange(b, a: Bound, node):
    start = const_int(a["start"], "nl.arange start", a.node("start"))
    end = const_int(a["end"], "nl.arange end", a.node("end"))
    if isinstance(start, Sym) or isinstance(end, Sym):
        n = SymDim(end.expr if start == 0 or (isinstance(start, Const) and start.value == 0) else
                   f"{_txt(end)}-{_txt(start)}")
        if isinstance(start, int) and start == 0 and isinstance(end, Sym):
            n = SymDim(end.expr)
        return TensorV(b.emit("arange", [], [block_of(lc.int32, (n,))], {"start": start if isinstance(start, int)
                                                                           else 0, "end": end if isinstance(end, int)
                                                                           else 0}, node=node).result)
    if end <= start:
        raise SemError("N023", f"nl.arange end ({end}) must be greater than start ({start})")
    n = end - start
    if n & (n - 1):
        up = 1 << (n - 1).bit_length()
        data = {"value": end, "replace": str(start + up)}
        origin = getattr(a["end"], "origin", None)
        if origin:
            data["param"] = origin
        raise SemError("N011", f"nl.arange length {n} is not a power of two"
                       + (f" ({origin}={end})" if origin else ""),
                       hint=f"round {n} up to {up} and mask the extra elements", data=data, node=a.node("end"))
    check_block_shape((n,), "nl.arange")
    if start < -(2 ** 31) or end > 2 ** 31:
        raise SemError("N023", "nl.arange bounds must fit in int32")
    return TensorV(b.emit("arange", [], [block_of(lc.int32, (n,))], {"start": start, "end": end}, node=node).result)


def _txt(x):
    return x.expr if isinstance(x, Sym) else str(x)


@rule("full")
def _full(b, a: Bound, node):
    shape = parse_shape(b, a["shape"], a.node("shape"))
    dt = const_dtype(a["dtype"], "nl.full dtype", a.node("dtype"))
    return _fill(b, shape, a["value"], dt, node, a.node("value"))


@rule("zeros")
def _zeros(b, a: Bound, node):
    shape = parse_shape(b, a["shape"], a.node("shape"))
    dt = const_dtype(a["dtype"], "nl.zeros dtype", a.node("dtype"))
    return _fill(b, shape, Const(0), dt, node, node)


def _fill(b, shape, value, dt, node, vnode):
    _poison(value)
    if isinstance(value, TensorV):
        if value.shape:
            raise SemError("N023", "the fill value must be a scalar", node=vnode)
        return TensorV(b.convert(value.v, dt, shape, node))
    if isinstance(value, Const) and isinstance(value.value, (int, float, bool)):
        return TensorV(b.as_tensor(value, dt, shape, node))
    if isinstance(value, Sym):
        return TensorV(b.as_tensor(value, dt, shape, node))
    raise SemError("N023", f"the fill value must be a number, got {_describe(value)}", node=vnode)


@rule("cast")
def _cast(b, a: Bound, node):
    x = a["input"]
    _poison(x)
    dt = const_dtype(a["dtype"], "the target dtype", a.node("dtype"))
    bc = a["bitcast"]
    bitcast = bool(bc.value) if isinstance(bc, Const) else False
    rnd = a["fp_downcast_rounding"]
    rounding = None
    if isinstance(rnd, Const) and rnd.value is not None:
        rounding = const_str(rnd, "fp_downcast_rounding", ("rtne", "rtz"), a.node("fp_downcast_rounding"))
    if isinstance(x, (Const, Sym)) and not bitcast:
        return TensorV(b.as_tensor(x, dt, (), node))
    t = need_tensor(b, x, "the value to cast", a.node("input"))
    return TensorV(b.cast_value(t.v, dt, node, bitcast=bitcast, rounding=rounding))
