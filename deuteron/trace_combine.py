"""``dt.reduce`` and ``dt.associative_scan`` with a user combine function (one tensor or a tuple of them), and
``dt.split`` / ``dt.join`` (blocks to and from pairs along a last dimension of 2).

The combine function is traced once on scalar placeholders into a block of its own; the code generator turns
that block into a ``@newt.jit`` helper next to the kernel and calls ``nl.reduce`` / ``nl.associative_scan``
with it.  ``kernel.ref`` folds / scans eagerly with the same Python function (``deuteron.language``).
"""

from __future__ import annotations

from . import language as L
from .errors import CombineFunction, SplitJoin, Subscript
from .program import Block, Node, RInfo
from .trace_common import _broadcast_dims, _describe, _dims_text, _norm_axis, result_type
from .trace_ops import DT_HOOKS, _check_scan_dim, dt_hook, torch_hook


def _inputs(tr, e, input_tensor, op):
    xs = tuple(input_tensor) if isinstance(input_tensor, (tuple, list)) else (input_tensor,)
    if not xs or not all(isinstance(x, Node) and x.dims for x in xs):
        raise CombineFunction(e, op=op, problem=f"the input must be a block or a tuple of blocks, not "
                                                 f"{_describe(input_tensor)}")
    if any(tuple(x.dims) != tuple(xs[0].dims) for x in xs):
        raise CombineFunction(e, op=op, problem="the blocks of a tuple input must have the same dimensions")
    return xs


def _trace_combine(tr, e, fn, xs, op):
    """Trace ``fn(a0, .., b0, ..)`` on scalar placeholders: (block, params, results)."""
    if not callable(fn):
        raise CombineFunction(e, op=op, problem=f"combine_fn must be a function, not {_describe(fn)}")
    k = len(xs)
    params = [Node("combine_arg", dims=(), dtype=xs[j % k].dtype, attrs={"index": j}) for j in range(2 * k)]
    sub = Block()
    saved_block, saved_cse = tr.block, tr._cse
    tr.block, tr._cse = sub, {}
    try:
        out = tr.inline(fn, params, {}, e)
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(outs) != k:
            raise CombineFunction(e, op=op, problem=f"combine_fn returns {len(outs)} value(s) for {k} input(s)")
        results = []
        for x, r in zip(xs, outs):
            if isinstance(r, (int, float, bool)) and not isinstance(r, Node):
                r = tr.full([], r, x.dtype, e)
            if not isinstance(r, Node) or r.dims:
                raise CombineFunction(e, op=op, problem="combine_fn must combine elements: it returned "
                                                         f"{_describe(r)}")
            results.append(tr.cast(r, x.dtype) if r.dtype != x.dtype else r)
    finally:
        tr.block, tr._cse = saved_block, saved_cse
    return sub, params, results


def _emit(tr, e, kind, xs, dims, sub, params, results, attrs):
    main = tr.emit(Node("combine", list(xs), dims=tuple(dims), dtype=xs[0].dtype,
                        attrs={"kind": kind, "block": sub, "params": params, "results": results,
                               "arity": len(xs), **attrs}))
    if len(xs) == 1:
        return main
    return tuple(tr.emit(Node("tuple_get", [main], dims=tuple(dims), dtype=x.dtype, attrs={"index": i}))
                 for i, x in enumerate(xs))


@dt_hook(L.reduce)
def _dt_reduce(tr, e, combine_fn, input_tensor, dim=None, other=0, keep_dims=False):
    xs = _inputs(tr, e, input_tensor, "dt.reduce")
    if dim is None:
        if len(xs[0].dims) != 1:
            raise CombineFunction(e, op="dt.reduce", problem="dim=None needs a 1-D block (give the dim)")
        dim = 0
    ax = _norm_axis(tr.static_int(dim, e, "a dimension"), len(xs[0].dims), tr, e)
    d = xs[0].dims[ax]
    if isinstance(d, RInfo):
        d.not_rollable("used by dt.reduce")
    others = tuple(other) if isinstance(other, (tuple, list)) else (other,) * len(xs)
    if len(others) != len(xs) or not all(isinstance(o, (int, float)) for o in others):
        raise CombineFunction(e, op="dt.reduce", problem=f"other must be a number (or one per input), not {other!r}")
    sub, params, results = _trace_combine(tr, e, combine_fn, xs, "dt.reduce")
    dims = list(xs[0].dims)
    if keep_dims:
        from .program import ONE
        dims[ax] = ONE
    else:
        del dims[ax]
    if not dims:
        raise CombineFunction(e, op="dt.reduce", problem="reducing a 1-D block to a scalar: keep_dims=True")
    tr.prog.dims_used.add(tuple(xs[0].dims))
    return _emit(tr, e, "reduce", xs, dims, sub, params, results,
                 {"axis": ax, "dim": d, "keep": bool(keep_dims), "others": others})


@dt_hook(L.associative_scan)
def _dt_associative_scan(tr, e, combine_fn, input_tensor, dim, reverse=False):
    xs = _inputs(tr, e, input_tensor, "dt.associative_scan")
    if reverse:
        raise CombineFunction(e, op="dt.associative_scan", problem="reverse=True is not supported yet")
    ax = _norm_axis(tr.static_int(dim, e, "a dimension"), len(xs[0].dims), tr, e)
    d = xs[0].dims[ax]
    if isinstance(d, RInfo):
        d.not_rollable("used by dt.associative_scan")
    _check_scan_dim(tr, e, d, "dt.associative_scan")
    sub, params, results = _trace_combine(tr, e, combine_fn, xs, "dt.associative_scan")
    return _emit(tr, e, "scan", xs, xs[0].dims, sub, params, results, {"axis": ax, "dim": d})


@dt_hook(L.split)
def _dt_split(tr, e, x):
    if not isinstance(x, Node) or not x.dims or not isinstance(x.dims[-1], RInfo) or x.dims[-1].size != 2:
        raise SplitJoin(e, op="dt.split", problem=f"the last dimension must be a whole one of 2 elements, not "
                                                   f"{_dims_text(x.dims) if isinstance(x, Node) else _describe(x)}")
    x.dims[-1].not_rollable("split by dt.split")
    x.dims[-1].exact_block = True
    dims = tuple(x.dims[:-1])
    pair = tr.emit(Node("split", [x], dims=dims, dtype=x.dtype))
    return tuple(tr.emit(Node("tuple_get", [pair], dims=dims, dtype=x.dtype, attrs={"index": i})) for i in (0, 1))


@dt_hook(L.subscript)
def _dt_subscript(tr, e, tensor, index):
    if not isinstance(tensor, Node) or not tensor.dims:
        raise Subscript(e, problem=f"it indexes a block inside a tile loop, not {_describe(tensor)} (index a host "
                                   "tensor with x[tile, ...])")
    if not isinstance(index, (list, tuple)):
        raise Subscript(e, problem=f"the index is a list of slice(None), None and ..., not {_describe(index)}")
    return tr.block_index_items(tensor, list(index), e)


@dt_hook(L.join)
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


@torch_hook("stack")
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
    a = tr.cast(a, dtype) if a.dtype != dtype else a
    b = tr.cast(b, dtype) if b.dtype != dtype else b
    j = DT_HOOKS["join"](tr, e, "torch.stack", [a, b], {})
    nd = len(j.dims)
    d = _norm_axis(tr.static_int(dim, e, "a dimension"), nd, tr, e)
    if d == nd - 1:
        return j
    order = list(range(nd - 1))
    order.insert(d, nd - 1)
    return tr.permute(j, order, e)
