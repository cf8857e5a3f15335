"""Trace rules of torch functions that regroup blocks: ``torch.cat`` of two blocks, ``repeat_interleave`` and
``torch.einsum``.  Each is spelled with the tracer's own ops (``torch.stack`` = ``dt.join`` moved, reshapes that
merge dimensions, permutes, broadcasts, ``sum`` and ``matmul``), so they inherit those ops' checks and codegen."""

from __future__ import annotations

from .errors import Einsum, SplitJoin
from .program import ONE, Node, RInfo, TileInfo
from .trace_common import _describe, _norm_axis, result_type
from .trace_ops import TORCH_HOOKS, torch_hook


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
    return tr.reshape(x, shape, e)


@torch_hook("cat")
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
    st = TORCH_HOOKS["stack"](tr, e, "torch.cat", [[tr.cast(a, dtype) if a.dtype != dtype else a,
                                                   tr.cast(b, dtype) if b.dtype != dtype else b], d], {})
    return _merge_pair(tr, e, st, d, 2 * da.size)


@torch_hook("repeat_interleave")
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
    ex = tr.expand_dims(x, d + 1, e)
    dims = list(ex.dims)
    dims[d + 1] = tr.rdim(r, r, e)
    ex = tr.emit(Node("expand", [ex], dims=tuple(dims), dtype=x.dtype, pad=x.pad))
    return _merge_pair(tr, e, ex, d, size * r if size else r)


def _expand_one(tr, e, x, d, r):
    """A size-1 dimension repeated: a broadcast to ``r`` elements."""
    dims = list(x.dims)
    dims[d] = tr.rdim(r, r, e)
    return tr.emit(Node("expand", [x], dims=tuple(dims), dtype=x.dtype, pad=x.pad))


def _parse(eq: str, n: int, e):
    eq = eq.replace(" ", "")
    if "..." in eq:
        raise Einsum(e, problem="an ellipsis (...)")
    lhs, arrow, rhs = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != n:
        raise Einsum(e, problem=f"the equation names {len(ins)} operands, {n} given")
    for s in ins + ([rhs] if arrow else []):
        if not s.isalpha() and s:
            raise Einsum(e, problem=f"{s!r}: subscripts are letters")
        if len(set(s)) != len(s):
            raise Einsum(e, problem=f"{s!r} repeats a letter (diagonals)")
    if not arrow:  # torch's implicit output: the letters used once, in alphabetical order
        rhs = "".join(sorted(c for c in set("".join(ins)) if "".join(ins).count(c) == 1))
    for c in rhs:
        if not any(c in s for s in ins):
            raise Einsum(e, problem=f"the output letter {c!r} is in no operand")
    return ins, rhs


def _align(tr, e, x: Node, letters: str, order: str) -> Node:
    """``x`` (dims named by ``letters``) permuted to ``order`` with ONE where a letter is missing."""
    have = sorted(letters, key=order.index)
    x = tr.permute(x, [letters.index(c) for c in have], e)
    for i, c in enumerate(order):
        if c not in letters:
            x = tr.expand_dims(x, i, e)
    return x


@torch_hook("einsum")
def _t_einsum(tr, e, op, equation, *operands):
    """``torch.einsum`` of one or two blocks: a matmul where the equation is one (``mk,kn->mn``, batched
    ``bmk,bkn->bmn``), else a broadcast product summed over the contracted letters."""
    ops_ = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)
    if not isinstance(equation, str):
        raise Einsum(e, problem=f"the equation must be a string, not {_describe(equation)}")
    if len(ops_) not in (1, 2):
        raise Einsum(e, problem=f"{len(ops_)} operands (one or two are supported)")
    xs = [tr.as_node(x, e) for x in ops_]
    ins, out = _parse(equation, len(xs), e)
    for x, s in zip(xs, ins):
        if len(x.dims) != len(s):
            raise Einsum(e, problem=f"{s!r} names {len(s)} dimensions of a block of rank {len(x.dims)}")
    for c in set("".join(ins)):
        ds = [x.dims[s.index(c)] for x, s in zip(xs, ins) if c in s]
        real = [d for d in ds if d is not ONE]
        if any(d is not real[0] for d in real):
            raise Einsum(e, problem=f"the letter {c!r} stands for different dimensions")
    if len(xs) == 2:
        a, b = xs
        sa, sb = ins
        batch = [c for c in out if c in sa and c in sb]
        k = [c for c in sa if c in sb and c not in out]
        m = [c for c in out if c in sa and c not in sb]
        n = [c for c in out if c in sb and c not in sa]
        if len(k) == 1 and len(m) == 1 and len(n) == 1 and len(batch) <= 1 and \
                set(sa) == set(batch + m + k) and set(sb) == set(batch + k + n):
            a2 = _align(tr, e, a, sa, "".join(batch + m + k))
            b2 = _align(tr, e, b, sb, "".join(batch + k + n))
            r = tr.matmul(a2, b2, None, e)
            have = "".join(batch + m + n)
            return tr.permute(r, [have.index(c) for c in out], e)
    summed = "".join(sorted({c for s in ins for c in s if c not in out}))
    order = out + summed
    prod = None
    for x, s in zip(xs, ins):
        al = _align(tr, e, x, s, order)
        prod = al if prod is None else tr.binop("mul", prod, al, e)
    for i in range(len(order) - 1, len(out) - 1, -1):
        prod = tr.reduce("sum", prod, i, False, e)
    return prod
