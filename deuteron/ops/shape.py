"""Shape ops: views and regroupings of blocks (``unsqueeze``, ``reshape``, ``permute``, ``expand``, ``cat``,
``stack``, ``einsum``, ``repeat_interleave``, ``dt.split`` / ``dt.join`` / ``dt.subscript``) and the metadata of a
block (``size``, ``dim``).

Node kinds ``expand_dims``, ``reshape``, ``permute``, ``expand``, ``split``, ``join``, ``tuple_get``.
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..codegen_expr import _atom, _dt
from ..errors import (
    BadIndex,
    Broadcast,
    DimensionArgument,
    IndexRank,
    ReshapeDims,
    ShapeArgument,
    SplitJoin,
    Subscript,
    UnsupportedExpression,
)
from ..optable import CREATES, NAMED, OPS, PURE, node, op
from ..program import ONE, Node, RInfo, TileInfo
from ..trace_common import (
    BlockSizeInt,
    _broadcast_dims,
    _describe,
    _dims_text,
    _norm_axis,
    result_type,
)
from .elementwise import binop, cast, where

# ---------------------------------------------------------------------------- node kinds


def render_expand_dims(g, n) -> str:
    (a,) = n.args
    ax = g.rpos(n.dims, n.attrs["axis"])
    k = len(g.rd(a.dims))
    idx = [":"] * k
    idx.insert(ax, "None")
    return f"{_atom(g.expr(a))}[{', '.join(idx)}]"


def render_reshape(g, n) -> str:
    (a,) = n.args
    if g.rd(n.dims) == g.rd(a.dims):
        return g.expr(a)
    if not g.rd(n.dims):
        return f"nl.reshape({g.expr(a)}, ())" if g.rd(a.dims) else g.expr(a)
    return f"nl.reshape({g.expr(a)}, {g.shape_tuple(n.dims)})"


def render_permute(g, n) -> str:
    (a,) = n.args
    kept = [i for i, d in enumerate(a.dims) if not g.is_unit(d)]
    order = [kept.index(i) for i in n.attrs["order"] if i in kept]
    if order == list(range(len(order))):
        return g.expr(a)
    if order == [1, 0]:
        return f"nl.trans({g.expr(a)})"
    return f"nl.permute({g.expr(a)}, {tuple(order)})"


def render_expand(g, n) -> str:
    (a,) = n.args
    rank = len(g.rd(n.dims))
    if isinstance(a, Node) and g.rd(a.dims):
        if g.rd(a.dims) == g.rd(n.dims):
            return g.expr(a)
        return f"nl.broadcast_to({g.aligned(a, rank, n.dims)}, {g.shape_tuple(n.dims)})"
    if not g.rd(n.dims):
        return g.expr(a)
    return f"nl.full({g.shape_tuple(n.dims)}, {g.expr(a)}, {_dt(n.dtype)})"


def render_split(g, n) -> str:
    return f"nl.split({g.expr(n.args[0])})"


def render_join(g, n) -> str:
    a, b = n.args
    r = len(g.rd(n.dims)) - 1
    return f"nl.join({g.aligned(a, r, n.dims[:-1])}, {g.aligned(b, r, n.dims[:-1])})"


def render_tuple_get(g, n) -> str:
    return f"{g.expr(n.args[0])}[{n.attrs['index']}]"


node("expand_dims", PURE, render=render_expand_dims, family="shape", doc="a new dimension of 1 (attrs: axis)")
node("reshape", PURE, render=render_reshape, family="shape", doc="the same elements with other dims")
node("permute", PURE, render=render_permute, family="shape", doc="dims reordered (attrs: order)")
node("expand", PURE, CREATES, render=render_expand, family="shape", doc="broadcast to dims")
node("split", NAMED, render=render_split, family="shape", doc="dt.split: a pair along a last dim of 2")
node("join", render=render_join, family="shape", doc="dt.join: a new last dim of 2")
node("tuple_get", render=render_tuple_get, family="shape", doc="one value of a split, combine or inline asm")


# ---------------------------------------------------------------------------- shape semantics

def expand_dims(tr, v: Node, axis: int, src) -> Node:
    dims = list(v.dims)
    if axis < 0:
        axis += len(dims) + 1
    if not 0 <= axis <= len(dims):
        raise DimensionArgument(src, op="unsqueeze", problem=f"axis {axis} out of range for rank {len(dims)}")
    dims.insert(axis, ONE)
    n = Node("expand_dims", [v], dims=dims, dtype=v.dtype, attrs={"axis": axis}, weak=v.weak, pad=v.pad)
    return tr.emit(n)


def squeeze(tr, v: Node, axis, src) -> Node:
    dims = list(v.dims)
    if axis is None:
        new = [d for d in dims if d is not ONE]
    else:
        axis = _norm_axis(axis, len(dims), tr, src)
        if dims[axis] is not ONE:
            return v
        new = dims[:axis] + dims[axis + 1:]
    if len(new) == len(dims):
        return v
    return tr.emit(Node("reshape", [v], dims=new, dtype=v.dtype, weak=v.weak, pad=v.pad))


def permute(tr, v: Node, order, src) -> Node:
    if sorted(order) != list(range(len(v.dims))):
        raise DimensionArgument(src, op="permute",
                                problem=f"order {order} does not fit a block of rank {len(v.dims)}")
    if list(order) == list(range(len(v.dims))):
        return v
    dims = [v.dims[i] for i in order]
    return tr.emit(Node("permute", [v], dims=dims, dtype=v.dtype, attrs={"order": list(order)},
                          weak=v.weak, pad=v.pad))


def shape_dims(tr, shape, src, what="a shape") -> tuple:
    """Dims from a list of tiles / block sizes / ints (dt.zeros([tile_m, tile_n]))."""
    if isinstance(shape, (TileInfo, int, Node)):
        shape = [shape]
    if not isinstance(shape, (list, tuple, torch.Size)):
        raise ShapeArgument(src, problem=f"{what} must be a list of tiles and ints, got {_describe(shape)}")
    dims = []
    for s in shape:
        if isinstance(s, (list, tuple)):
            dims.extend(shape_dims(tr, s, src, what))
            continue
        if isinstance(s, TileInfo):
            dims.append(s)
        elif isinstance(s, Node) and s.op == "tile_block_size":
            dims.append(s.attrs["tile"])
        elif isinstance(s, BlockSizeInt):
            t = next((t for t in tr.prog.tiles if t.slot == s.slot), None)
            # a block size of 1 is a broadcast dim (a tile of size 1 is a scalar in the generated code)
            dims.append(t if t is not None else (ONE if int(s) == 1 else tr.block_dim(s, src)))
        else:
            n = tr.static_int(s, src, "a dimension size")
            if n == 1:
                dims.append(ONE)
            elif n < 1:
                raise ShapeArgument(src, problem=f"a dimension of size {n}")
            else:
                dims.append(tr.rdim(n, n, src))
    return tuple(dims)


def reshape(tr, x: Node, shape, e):
    """Reshapes that only add or remove size-1 dimensions (tile shapes cannot be merged)."""
    real_in = [d for d in x.dims if d is not ONE]
    out = []
    infer = None
    for s in shape:
        if isinstance(s, TileInfo) or (isinstance(s, Node) and s.op == "tile_block_size"):
            out.append(s if isinstance(s, TileInfo) else s.attrs["tile"])
        elif isinstance(s, int) and s == -1:
            if infer is not None:
                raise DimensionArgument(e, op="reshape", problem="two -1 dimensions")
            infer = len(out)
            out.append(None)
        else:
            t = _scaled_tile_block(s)
            if t is not None and t.known_block is None:
                raise ReshapeDims(e, src=_dims_text(x.dims), dst="a shape with " + t.name + ".block_size * ...",
                                  why=f"the tile {t.name} has a tunable block size (merging or splitting a tile "
                                      f"needs one known when compiling: block_size= an int or a "
                                      f"dt.register_block_size value)")
            n = tr.static_int(s, e, "a reshape size")
            out.append(ONE if n == 1 else tr.rdim(n, n, e))
    if infer is not None:
        known = [d for d in out if d is not None and d is not ONE]
        rest = [d for d in real_in if d not in known]
        if len(rest) != 1:
            raise DimensionArgument(e, op="reshape", problem="cannot infer the -1 dimension")
        out[infer] = rest[0]
    if [d for d in out if d is not ONE] != real_in:
        for t in _check_whole_dims_regroup(tr, e, x, real_in, [d for d in out if d is not ONE], out):
            x = _zero_ragged(tr, x, t, e)
    if tuple(out) == x.dims:
        return x
    return tr.emit(Node("reshape", [x], dims=out, dtype=x.dtype, pad=x.pad, weak=x.weak))


def _zero_ragged(tr, x: Node, t: TileInfo, e) -> Node:
    """``x`` with the lanes of tile ``t`` past its end set to 0 (they become ordinary lanes of a merged
    dimension); nothing to do where they already hold 0."""
    if x.pad == 0 or (isinstance(t.end, int) and isinstance(t.begin, int) and t.known_block and
                      (t.end - t.begin) % t.known_block == 0):
        return x
    keep = binop(tr, "lt", tr.tile_attr(t, "index", e), tr.tile_attr(t, "end", e), e)
    pos = next(i for i, d in enumerate(x.dims) if d is t)
    for _ in range(pos):
        keep = expand_dims(tr, keep, 0, e)
    for _ in range(len(x.dims) - pos - 1):
        keep = expand_dims(tr, keep, -1, e)
    return where(tr, keep, x, 0, e)


def _scaled_tile_block(v):
    """The tile of ``tile.block_size * c`` (or ``c * tile.block_size``), else None."""
    if isinstance(v, Node) and v.op == "binary" and v.attrs.get("op") == "mul":
        for a, b in (v.args, v.args[::-1]):
            if isinstance(a, Node) and a.op == "tile_block_size" and isinstance(b, int):
                return a.attrs["tile"]
    return None


def _check_whole_dims_regroup(tr, e, x, src_dims, dst_dims, out):
    """A reshape that splits or merges dimensions (``[t, 64] -> [t, 2, 32]``, and back; ``[t, 2, n] ->
    [2 * t.block_size, n]``, and back).  Whole dimensions involved must be powers of two (their blocks are then
    exactly their size: no padding to move around) and stay one block (never looped, never padded for a matmul).
    A tile merged or split needs a block size known when tracing (fixed, or a ``dt.register_block_size`` value);
    lanes past a ragged tile's end hold 0 in the merged dimension.  Returns the dims of ``x`` whose ragged lanes
    must be zeroed first (tiles merged away)."""
    def fail(why):
        raise ReshapeDims(e, src=_dims_text(x.dims), dst=_dims_text(tuple(out)), why=why)

    def size(d):
        if isinstance(d, RInfo):
            return d.size
        if d.known_block is None:
            fail(f"the tile {d.name} has a tunable block size (merging or splitting a tile needs one known when "
                 f"compiling: block_size= an int or a dt.register_block_size value)")
        return d.known_block

    # pair up runs of equal products, left to right (a tile that stays in place is a run of its own)
    groups = []
    i = j = 0
    while i < len(src_dims) or j < len(dst_dims):
        if i < len(src_dims) and j < len(dst_dims) and src_dims[i] is dst_dims[j]:
            groups.append(([src_dims[i]], [dst_dims[j]]))
            i += 1
            j += 1
            continue
        if i >= len(src_dims) or j >= len(dst_dims):
            fail("the element counts differ")
        a, b = [src_dims[i]], [dst_dims[j]]
        pa, pb = size(src_dims[i]), size(dst_dims[j])
        i += 1
        j += 1
        while pa != pb:
            if pa < pb and i < len(src_dims):
                a.append(src_dims[i])
                pa *= size(src_dims[i])
                i += 1
            elif pb < pa and j < len(dst_dims):
                b.append(dst_dims[j])
                pb *= size(dst_dims[j])
                j += 1
            else:
                fail(f"{pa} elements cannot become {pb}")
        groups.append((a, b))
    zero = []
    for a, b in groups:
        if a == b:
            continue
        for d in a + b:
            if isinstance(d, TileInfo):
                if d.kind == "grid":
                    fail("a dt.grid index cannot be merged or split")
                if d in a and d in b:
                    fail(f"the tile {d.name} must stay in place or be merged or split, not moved")
                continue
            if d.size & (d.size - 1):
                fail(f"a whole dimension of {d.size} elements (split or merged ones must be powers of two)")
            if d.used_in_dot and d.size < 16:
                fail("a dimension a matmul pads to 16")
            d.not_rollable("split or merged by a reshape")
            d.exact_block = True
        merged = [d for d in a if isinstance(d, TileInfo)]
        for d in b:
            if isinstance(d, RInfo):
                d.merged_tiles.extend(t for t in merged if t not in d.merged_tiles)
        zero.extend(merged)
    return zero


def block_index(tr, v: Node, slice_node, e):
    raw = tr.ev.eval(slice_node)
    return block_index_items(tr, v, list(raw) if isinstance(raw, tuple) else [raw], e)


def block_index_items(tr, v: Node, idx: list, e):
    """``v[idx]`` for a block: ``:`` keeps a dimension, None adds one of 1, ``...`` the ones not named."""
    real = [it for it in idx if it is not None and it is not Ellipsis]
    if any(not (isinstance(it, slice) and it == slice(None)) for it in real):
        raise BadIndex(e, problem="indexing a block inside the kernel: only `:` and None are supported",
                         hint="e.g. v[:, None]")
    if Ellipsis in idx:
        pos = idx.index(Ellipsis)
        idx = idx[:pos] + [slice(None)] * (len(v.dims) - len(real)) + idx[pos + 1:]
        real = [it for it in idx if it is not None]
    if len(real) > len(v.dims):
        raise IndexRank(e, what="a block", rank=len(v.dims), shape="", count=len(real),
                        plural="ex" if len(real) == 1 else "ices", items="")
    idx = idx + [slice(None)] * (len(v.dims) - len(real))
    out = v
    pos = 0
    for it in idx:
        if it is None:
            out = expand_dims(tr, out, pos, e)
        pos += 1
    return out


# ---------------------------------------------------------------------------- ops


@op("t", family="shape", nodes=("permute",), methods=("t",))
def _t_t(tr, e, op, input):
    if len(input.dims) != 2:
        raise DimensionArgument(e, op=".t()",
                                problem=f"a block of rank {len(input.dims)} (torch's .t() takes rank <= 2)")
    return permute(tr, input, [1, 0], e)


@op("transpose", family="shape", nodes=("permute",), methods=("transpose",))
def _t_transpose(tr, e, op, input, dim0, dim1):
    x = input
    d0 = _norm_axis(tr.static_int(dim0, e, "a dimension"), len(x.dims), tr, e)
    d1 = _norm_axis(tr.static_int(dim1, e, "a dimension"), len(x.dims), tr, e)
    order = list(range(len(x.dims)))
    order[d0], order[d1] = order[d1], order[d0]
    return permute(tr, x, order, e)


@op("permute", family="shape", nodes=("permute",), methods=("permute",))
def _t_permute(tr, e, op, input, *dims):
    order = list(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else list(dims)
    order = [_norm_axis(tr.static_int(o, e, "a dimension"), len(input.dims), tr, e) for o in order]
    return permute(tr, input, order, e)


@op("unsqueeze", family="shape", nodes=("expand_dims",), methods=("unsqueeze",))
def _t_unsqueeze(tr, e, op, input, dim):
    return expand_dims(tr, input, tr.static_int(dim, e, "a dimension"), e)


@op("squeeze", family="shape", nodes=("reshape",), methods=("squeeze",))
def _t_squeeze(tr, e, op, input, dim=None):
    return squeeze(tr, input, None if dim is None else tr.static_int(dim, e, "a dimension"), e)


@op("reshape", family="shape", nodes=("reshape", "where"), methods=("reshape", "view"), tile_args=True)
def _t_reshape(tr, e, op, input, *shape):
    shape = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)) else list(shape)
    return reshape(tr, input, shape, e)


@op("expand", family="shape", nodes=("expand",), methods=("expand", "broadcast_to"), tile_args=True)
def _t_expand(tr, e, op, input, *sizes):
    x = input
    shape = list(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) else list(sizes)
    shape = [x.dims[i - (len(shape) - len(x.dims))] if (isinstance(s, int) and s == -1) else s
             for i, s in enumerate(shape)]
    dims = shape_dims(tr, [tr.ev.dim_value(s) if not isinstance(s, (int, Node, TileInfo)) else s for s in shape], e)
    return _expand_to(tr, e, x, dims)


@op("expand_as", family="shape", nodes=("expand",), methods=("expand_as",))
def _t_expand_as(tr, e, op, input, other):
    return _expand_to(tr, e, input, other.dims)


def _expand_to(tr, e, x, dims):
    if _broadcast_dims(x.dims, dims) != tuple(dims):
        raise Broadcast(e, shapes=f"{_dims_text(x.dims)} and the expanded {_dims_text(dims)}")
    return tr.emit(Node("expand", [x], dims=dims, dtype=x.dtype, pad=x.pad))


@op("identity", family="shape", methods=("contiguous", "clone", "detach"))
def _t_identity(tr, e, op, input, *, memory_format=None):
    return input


@op("size", family="shape", methods=("size",))
def _t_size(tr, e, op, input, dim=None):
    shape = tuple(tr.ev.dim_value(dd) for dd in input.dims)
    return shape if dim is None else shape[_norm_axis(tr.static_int(dim, e, "a dimension"), len(input.dims), tr, e)]


@op("dim", family="shape", methods=("dim",))
def _t_dim(tr, e, op, input):
    return len(input.dims)


@op("numel", family="shape", methods=("numel",))
def _t_numel(tr, e, op, input):
    raise UnsupportedExpression(e, what=".numel() of a block")


@op("dt.split", family="shape", stub=L.split, nodes=("split", "tuple_get"))
def _dt_split(tr, e, x):
    if not isinstance(x, Node) or not x.dims or not isinstance(x.dims[-1], RInfo) or x.dims[-1].size != 2:
        raise SplitJoin(e, op="dt.split", problem=f"the last dimension must be a whole one of 2 elements, not "
                                                   f"{_dims_text(x.dims) if isinstance(x, Node) else _describe(x)}")
    x.dims[-1].not_rollable("split by dt.split")
    x.dims[-1].exact_block = True
    dims = tuple(x.dims[:-1])
    pair = tr.emit(Node("split", [x], dims=dims, dtype=x.dtype))
    return tuple(tr.emit(Node("tuple_get", [pair], dims=dims, dtype=x.dtype, attrs={"index": i})) for i in (0, 1))


@op("dt.subscript", family="shape", stub=L.subscript, nodes=("expand_dims",))
def _dt_subscript(tr, e, tensor, index):
    if not isinstance(tensor, Node) or not tensor.dims:
        raise Subscript(e, problem=f"it indexes a block inside a tile loop, not {_describe(tensor)} (index a host "
                                   "tensor with x[tile, ...])")
    if not isinstance(index, (list, tuple)):
        raise Subscript(e, problem=f"the index is a list of slice(None), None and ..., not {_describe(index)}")
    return block_index_items(tr, tensor, list(index), e)


@op("dt.join", family="shape", stub=L.join, nodes=("join",))
def _dt_join(tr, e, a, b):
    if not (isinstance(a, Node) and isinstance(b, Node)):
        raise SplitJoin(e, op="dt.join", problem="both operands must be blocks")
    dims = _broadcast_dims(a.dims, b.dims)
    if dims is None:
        raise SplitJoin(e, op="dt.join", problem=f"{_dims_text(a.dims)} and {_dims_text(b.dims)} do not broadcast")
    dt = a.dtype if a.dtype == b.dtype else None
    if dt is None:
        raise SplitJoin(e, op="dt.join", problem=f"operands of {a.dtype} and {b.dtype}")
    r = tr.rdim(2, 2, e)
    r.not_rollable("made by dt.join")
    r.exact_block = True
    tr.prog.dims_used.add(tuple(dims) + (r,))
    return tr.emit(Node("join", [a, b], dims=tuple(dims) + (r,), dtype=dt))


@op("stack", family="shape", nodes=("join", "permute", "cast"), torch=("stack",), first="any")
def _t_stack(tr, e, op, tensors, dim=0, *, out=None):
    """``torch.stack([a, b], dim)``: dt.join (a new last dimension of 2) moved to ``dim``; pairs only (newt joins
    two blocks)."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) != 2:
        n = len(tensors) if isinstance(tensors, (list, tuple)) else None
        raise SplitJoin(e, op="torch.stack", problem=f"{n} blocks: inside a tile loop only two can be stacked"
                                                     if n is not None else "expects a list of two blocks")
    a, b = (tr.as_node(t, e) for t in tensors)
    if out is not None:
        raise SplitJoin(e, op="torch.stack", problem="out= is not supported")
    dtype = result_type(a, b)
    a = cast(tr, a, dtype) if a.dtype != dtype else a
    b = cast(tr, b, dtype) if b.dtype != dtype else b
    j = OPS["dt.join"].trace(tr, e, "torch.stack", [a, b], {})
    nd = len(j.dims)
    d = _norm_axis(tr.static_int(dim, e, "a dimension"), nd, tr, e)
    if d == nd - 1:
        return j
    order = list(range(nd - 1))
    order.insert(d, nd - 1)
    return permute(tr, j, order, e)


def _shape_entry(d):
    """A dimension as a reshape argument (the tracer maps it back to the same dimension)."""
    if d is ONE:
        return 1
    if isinstance(d, TileInfo):
        return d
    return d.size


def _merge_pair(tr, e, x: Node, d: int, size: int) -> Node:
    """``x`` with its dimensions ``d`` and ``d + 1`` merged into one of ``size`` elements."""
    shape = [_shape_entry(q) for q in x.dims]
    shape[d:d + 2] = [size]
    return reshape(tr, x, shape, e)


@op("cat", family="shape", nodes=("join", "permute", "reshape", "cast"), torch=("cat",), first="any")
def _t_cat(tr, e, op, tensors, dim=0, *, out=None):
    """``torch.cat([a, b], dim)`` of two blocks with the same whole dimension of a power-of-two size at ``dim``:
    the pair stacked before ``dim`` and merged into it."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) != 2:
        n = len(tensors) if isinstance(tensors, (list, tuple)) else None
        raise SplitJoin(e, op="torch.cat", problem=f"{n} blocks: inside a tile loop two can be concatenated"
                                                   if n is not None else "expects a list of two blocks")
    if out is not None:
        raise SplitJoin(e, op="torch.cat", problem="out= is not supported")
    a, b = (tr.as_node(t, e) for t in tensors)
    if len(a.dims) != len(b.dims) or not a.dims:
        raise SplitJoin(e, op="torch.cat", problem=f"blocks of rank {len(a.dims)} and {len(b.dims)}")
    d = _norm_axis(tr.static_int(dim, e, "a dimension"), len(a.dims), tr, e)
    da, db = a.dims[d], b.dims[d]
    if not (isinstance(da, RInfo) and da is db) or da.size & (da.size - 1):
        what = "a tile" if isinstance(da, TileInfo) or isinstance(db, TileInfo) else (
            f"{da.label} and {db.label}" if da is not db else f"{da.size} elements (not a power of two)")
        raise SplitJoin(e, op="torch.cat", problem=f"along {what}: inside a tile loop both blocks need the same "
                                                   f"whole dimension of a power-of-two size there")
    dtype = result_type(a, b)
    st = OPS["stack"].trace(tr, e, "torch.cat", [[cast(tr, a, dtype) if a.dtype != dtype else a,
                                                   cast(tr, b, dtype) if b.dtype != dtype else b], d], {})
    return _merge_pair(tr, e, st, d, 2 * da.size)


@op("repeat_interleave", family="shape", nodes=("expand", "reshape"), torch=("repeat_interleave",),
    methods=("repeat_interleave",))
def _t_repeat_interleave(tr, e, op, input, repeats, dim=None, *, output_size=None):
    """``x.repeat_interleave(r, dim)`` with ``r`` an int known when compiling: ``x`` expanded along a new
    dimension of ``r`` after ``dim`` and merged into it (powers of two; a tile needs a known block size)."""
    x = tr.as_node(input, e)
    if isinstance(repeats, Node) or not isinstance(repeats, int) or isinstance(repeats, bool):
        raise SplitJoin(e, op=op, problem=f"repeats must be an int known when compiling, not {_describe(repeats)}")
    if dim is None:
        raise SplitJoin(e, op=op, problem="without dim= it flattens the block: pass dim=")
    r = int(repeats)
    d = _norm_axis(tr.static_int(dim, e, "a dimension"), len(x.dims), tr, e)
    if r == 1:
        return x
    if r < 1 or r & (r - 1):
        raise SplitJoin(e, op=op, problem=f"repeats={r}: inside a tile loop a power of two")
    src = x.dims[d]
    if src is ONE:
        return _expand_one(tr, e, x, d, r)
    size = src.size if isinstance(src, RInfo) else (src.known_block or 0)
    ex = expand_dims(tr, x, d + 1, e)
    dims = list(ex.dims)
    dims[d + 1] = tr.rdim(r, r, e)
    ex = tr.emit(Node("expand", [ex], dims=tuple(dims), dtype=x.dtype, pad=x.pad))
    return _merge_pair(tr, e, ex, d, size * r if size else r)


def _expand_one(tr, e, x, d, r):
    """A size-1 dimension repeated: a broadcast to ``r`` elements."""
    dims = list(x.dims)
    dims[d] = tr.rdim(r, r, e)
    return tr.emit(Node("expand", [x], dims=tuple(dims), dtype=x.dtype, pad=x.pad))
