"""Type rules of ``nl.reshape``, ``permute``, ``trans``, ``expand_dims``, ``broadcast``, ``split``/``join``, ``cat``."""

from __future__ import annotations

from newt.ir.types import SymDim, block_of, dims_equal, numel, scalar_of, shape_of, type_str
from newt.language import core as lc

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
    shape = _shape_args(b, a.tuple("shape"), a.node("shape"))
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
    dims = a.tuple("dims")
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
            raise SemError("N032", f"nl.expand_dims: invalid axis {v}: out of range for the result of rank "
                           f"{new_rank}", node=a.node("axis"))
        norm.append(v % new_rank)
    if len(set(norm)) != len(norm):
        raise SemError("N032", f"nl.expand_dims: duplicate axes, normalized axes = {sorted(norm)}",
                       node=a.node("axis"))
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
    shape = _shape_args(b, a.tuple("shape"), a.node("shape"))
    return TensorV(b.broadcast_value(x.v, shape, node))


@rule("split")
def _split(b, a: Bound, node):
    x = need_block(a["a"], "nl.split input", a.node("a"))
    if dims_equal(x.shape[-1], 2) is False:
        raise SemError("N030", f"nl.split needs a last dimension of 2, got shape {fmt_shape(x.shape)}")
    if len(x.shape) == 1:  # [2] -> two scalars: split a [1, 2] block, then take each one-element half
        v = b.emit("reshape", [x.v], [block_of(x.dtype, (1, 2))], {"shape": [1, 2], "can_reorder": False},
                   node=node).result
        rt = block_of(x.dtype, (1,))
        op = b.emit("split", [v], [rt, rt], node=node)
        return TupleV([b.unsplat(TensorV(r), node) for r in op.results])
    rt = block_of(x.dtype, x.shape[:-1])
    op = b.emit("split", [x.v], [rt, rt], node=node)
    return TupleV([TensorV(op.results[0]), TensorV(op.results[1])])


@rule("join")
def _join(b, a: Bound, node):
    x, y = a["a"], a["b"]
    _poison(x, y)
    t, shape = _promote(b, [x, y], "join", [a.node("a"), a.node("b")])
    if not shape:  # two scalars -> [2]: join one-element blocks, then drop the leading 1
        xv, yv = b.as_tensor(x, t, (1,), node), b.as_tensor(y, t, (1,), node)
        j = b.emit("join", [xv, yv], [block_of(t, (1, 2))], node=node).result
        return TensorV(b.emit("reshape", [j], [block_of(t, (2,))], {"shape": [2], "can_reorder": False},
                              node=node).result)
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


def _dim(b, a: Bound, key, rank, what):
    d = const_int(a[key], what, a.node(key), allow_sym=False)
    if not -rank <= d < max(rank, 1) or rank == 0:
        raise SemError("N032", f"{what} {d} is out of range for a block of rank {rank}", node=a.node(key),
                       hint=f"use a dimension in {-rank}..{rank - 1}" if rank else None)
    return d % rank


@rule("squeeze")
def _squeeze(b, a: Bound, node):
    x = need_block(a["x"], "nl.squeeze input", a.node("x"))
    d = _dim(b, a, "dim", len(x.shape), "nl.squeeze dim")
    if x.shape[d] != 1:
        raise SemError("N033", f"nl.squeeze: dimension {d} has size {x.shape[d]}, not 1", node=a.node("dim"))
    shape = tuple(x.shape[:d]) + tuple(x.shape[d + 1:])
    if not shape:
        return b.unsplat(x, node)
    return TensorV(b.emit("reshape", [x.v], [block_of(x.dtype, shape)], {"shape": list(shape), "can_reorder": False},
                          node=node).result)


@rule("unsqueeze")
def _unsqueeze(b, a: Bound, node):
    x = need_tensor(b, a["x"], "nl.unsqueeze input", a.node("x"))
    d = _dim(b, a, "dim", len(x.shape) + 1, "nl.unsqueeze dim")
    return TensorV(b._expand_dims(x.v, d, node))


@rule("item")
def _item(b, a: Bound, node):
    x = need_tensor(b, a["input"], "item() input", a.node("input"))
    return b.unsplat(x, node)


@rule("flip")
def _flip(b, a: Bound, node):
    """Reverse along one dimension: split it into log2(n) dimensions of 2 and swap each pair with xor."""
    x = need_block(a["x"], "nl.flip input", a.node("x"))
    rank = len(x.shape)
    if isinstance(a["dim"], Const) and a["dim"].value is None:
        d = rank - 1
    else:
        d = _dim(b, a, "dim", rank, "nl.flip dim")
    n = x.shape[d]
    src = x.dtype
    if not isinstance(n, int) or src.is_symbolic():
        # the generic check of a kernel: a dimension of an unknown constexpr (``BLOCK``) or the element type
        # of an unannotated pointer -- known at every launch, so nothing to report; the result has x's type
        # (an identity reshape stands for the permutation: code is generated only from launches)
        return TensorV(b.emit("reshape", [x.v], [x.v.type], {"shape": list(x.shape), "can_reorder": False},
                              node=node).result)
    steps = n.bit_length() - 1
    if steps == 0:
        return x
    if src.is_bool():
        bits = b.cast_value(x.v, lc.int8, node)
    elif src.is_int():
        bits = x.v
    else:
        bits = b.cast_value(x.v, lc.dtype_from_name(f"i{src.primitive_bitwidth}"), node, bitcast=True)
    it = scalar_of(bits.type)
    split = tuple(x.shape[:d]) + (2,) * steps + tuple(x.shape[d + 1:])
    y = b.emit("reshape", [bits], [block_of(it, split)], {"shape": list(split), "can_reorder": False},
               node=node).result
    for i in range(steps):
        red_shape = tuple(1 if j == d + i else s for j, s in enumerate(split))
        r = b.emit("reduce", [y], [block_of(it, split[:d + i] + split[d + i + 1:])], {"axis": d + i, "combine": "xor"},
                   node=node).result
        r = b._expand_dims(r, d + i, node)
        assert shape_of(r.type) == red_shape
        r = b.broadcast_value(r, split, node)
        y = b.emit("xor", [y, r], [y.type], node=node).result
    y = b.emit("reshape", [y], [block_of(it, x.shape)], {"shape": list(x.shape), "can_reorder": False},
               node=node).result
    if src.is_bool():
        return TensorV(b.cast_value(y, lc.int1, node))
    if src.is_int():
        return TensorV(y)
    return TensorV(b.cast_value(y, src, node, bitcast=True))


@rule("gather")
def _gather(b, a: Bound, node):
    src = need_block(a["src"], "nl.gather src", a.node("src"))
    idx = need_block(a["index"], "nl.gather index", a.node("index"))
    if not (idx.dtype.is_int() or idx.dtype.is_symbolic()):
        raise SemError("N023", f"nl.gather index must be an integer block, not {idx.dtype!r}", node=a.node("index"))
    if len(src.shape) != len(idx.shape):
        raise SemError("N030", f"nl.gather src and index must have the same rank, got {fmt_shape(src.shape)} and "
                       f"{fmt_shape(idx.shape)}", node=a.node("index"))
    ax = _dim(b, a, "axis", len(src.shape), "nl.gather axis")
    for d, (s, i) in enumerate(zip(src.shape, idx.shape)):
        if d != ax and dims_equal(s, i) is False:
            raise SemError("N030", f"nl.gather index dimension {d} is {i} but src's is {s}; only the axis "
                           f"({ax}) may differ", node=a.node("index"))
    return TensorV(b.emit("gather", [src.v, idx.v], [block_of(src.dtype, idx.shape)], {"axis": ax},
                          node=node).result)
