"""Type rules of ``nl.reshape``, ``permute``, ``trans``, ``expand_dims``, ``broadcast``, ``split``/``join``, ``cat``."""

from __future__ import annotations

from newt.ir.types import SymDim, block_of, dims_equal, numel, type_str

from ..ops import Bound, _poison, const_int, need_block, need_tensor, parse_shape, rule
from ..semantic import SemError, broadcast_shapes, fmt_shape
from ..values import Const, TensorV, TupleV
from .elementwise import _promote


def _shape_args(b, av: TupleV, node):
    items = av.items
    if len(items) == 1 and (isinstance(items[0], TupleV) or (isinstance(items[0], Const) and
                                                             isinstance(items[0].value, (tuple, list)))):
        return parse_shape(b, items[0], node)
    return parse_shape(b, TupleV(items), node)


@rule("reshape", "view")
def _reshape(b, a: Bound, node):
    x = need_tensor(b, a["input"], f"nl.{a.name} input", a.node("input"))
    shape = _shape_args(b, a["shape"], a.node("shape"))
    n0, n1 = numel(x.shape), numel(shape)
    if n0 is not None and n1 is not None and n0 != n1:
        raise SemError("N033", f"cannot reshape a block of {n0} elements ({fmt_shape(x.shape)}) into "
                       f"{fmt_shape(shape)} ({n1} elements)")
    if not x.shape:
        return TensorV(b.broadcast_value(x.v, shape, node))
    if tuple(shape) == tuple(x.shape):
        return x
    cr = a.name == "view" or bool(getattr(a.values.get("can_reorder"), "value", False))
    return TensorV(b.emit("reshape", [x.v], [block_of(x.dtype, shape)], {"shape": list(shape), "can_reorder": cr},
                          node=node).result)


def _perm(b, x, dims_av, node, what):
    items = dims_av.items
    if len(items) == 1 and isinstance(items[0], TupleV):
        items = items[0].items
    order = []
    for it in items:
        order.append(const_int(it, f"{what} dims", node, allow_sym=False))
    rank = len(x.shape)
    if sorted(order) != list(range(rank)):
        raise SemError("N032", f"{what} dims {tuple(order)} are not a permutation of the {rank} axes")
    if order == list(range(rank)):
        return x
    shape = tuple(x.shape[i] for i in order)
    return TensorV(b.emit("permute", [x.v], [block_of(x.dtype, shape)], {"order": order}, node=node).result)


@rule("permute")
def _permute(b, a: Bound, node):
    x = need_block(a["input"], "nl.permute input", a.node("input"))
    return _perm(b, x, a["dims"], node, "nl.permute")


@rule("trans")
def _trans(b, a: Bound, node):
    x = need_block(a["input"], "nl.trans input", a.node("input"))
    dims = a["dims"]
    if not dims.items:
        if len(x.shape) == 1:
            return x
        if len(x.shape) != 2:
            raise SemError("N032", f"nl.trans without dims needs a 2-D block, got rank {len(x.shape)}",
                           hint="pass the permutation, e.g. nl.trans(x, (0, 2, 1))")
        dims = TupleV([Const(1), Const(0)])
    return _perm(b, x, dims, node, "nl.trans")


@rule("expand_dims")
def _expand_dims(b, a: Bound, node):
    x = need_tensor(b, a["input"], "nl.expand_dims input", a.node("input"))
    ax = a["axis"]
    axes = [ax] if not isinstance(ax, TupleV) else ax.items
    vals = [const_int(v, "nl.expand_dims axis", a.node("axis"), allow_sym=False) for v in axes]
    new_rank = len(x.shape) + len(vals)
    norm = []
    for v in vals:
        if not -new_rank <= v < new_rank:
            raise SemError("N032", f"nl.expand_dims axis {v} is out of range for the result of rank {new_rank}",
                           node=a.node("axis"))
        norm.append(v % new_rank)
    cur = x.v
    for v in sorted(norm):
        cur = b._expand_dims(cur, v, node)
    return TensorV(cur)


@rule("broadcast")
def _broadcast(b, a: Bound, node):
    x, y = a["input"], a["other"]
    tx = need_tensor(b, x, "nl.broadcast input", a.node("input"))
    ty = need_tensor(b, y, "nl.broadcast other", a.node("other"))
    shape = broadcast_shapes(tx.shape, ty.shape)
    return TupleV([TensorV(b.broadcast_value(tx.v, shape, node)), TensorV(b.broadcast_value(ty.v, shape, node))])


@rule("broadcast_to")
def _broadcast_to(b, a: Bound, node):
    x = need_tensor(b, a["input"], "nl.broadcast_to input", a.node("input"))
    shape = _shape_args(b, a["shape"], a.node("shape"))
    return TensorV(b.broadcast_value(x.v, shape, node))


@rule("split")
def _split(b, a: Bound, node):
    x = need_block(a["a"], "nl.split input", a.node("a"))
    if dims_equal(x.shape[-1], 2) is False:
        raise SemError("N030", f"nl.split needs a last dimension of 2, got shape {fmt_shape(x.shape)}")
    rt = block_of(x.dtype, x.shape[:-1])
    op = b.emit("split", [x.v], [rt, rt], node=node)
    return TupleV([TensorV(op.results[0]), TensorV(op.results[1])])


@rule("join")
def _join(b, a: Bound, node):
    x, y = a["a"], a["b"]
    _poison(x, y)
    t, shape = _promote(b, [x, y], "join", [a.node("a"), a.node("b")])
    xv, yv = b.as_tensor(x, t, shape, node), b.as_tensor(y, t, shape, node)
    return TensorV(b.emit("join", [xv, yv], [block_of(t, tuple(shape) + (2,))], node=node).result)


@rule("cat")
def _cat(b, a: Bound, node):
    x = need_block(a["input"], "nl.cat input", a.node("input"))
    y = need_block(a["other"], "nl.cat other", a.node("other"))
    if x.type != y.type:
        raise SemError("N030", f"nl.cat needs blocks of the same shape and dtype, got {type_str(x.type)} and "
                       f"{type_str(y.type)}")
    d0 = x.shape[0]
    shape = ((2 * d0) if isinstance(d0, int) else SymDim(f"2*{d0}"),) + tuple(x.shape[1:])
    return TensorV(b.emit("cat", [x.v, y.v], [block_of(x.dtype, shape)], node=node).result)
