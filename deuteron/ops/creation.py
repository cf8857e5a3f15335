"""Creation ops: blocks of one value (``torch.zeros``/``full``/``*_like``, ``x.new_*``, ``dt.zeros``/
``dt.full``) and index ranges (``torch.arange``, ``dt.arange``).

Node kinds ``full`` and ``arange``.
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..codegen_expr import _dt, _lit
from ..errors import BadArguments, HostValueOperand, ShapeArgument, UnsupportedExpression
from ..optable import CREATES, NAMED, PURE, node, op
from ..program import ONE, Node
from ..trace_common import (
    BlockSizeInt,
    _describe,
)
from .elementwise import binop, cast
from .shape import shape_dims

# ---------------------------------------------------------------------------- node kinds


def render_full(g, n) -> str:
    v = n.attrs["value"]
    if not g.rd(n.dims):
        return f"nl.full((), {_lit(v)}, {_dt(n.dtype)})"
    if v == 0 and not isinstance(v, bool):
        return f"nl.zeros({g.shape_tuple(n.dims)}, dtype={_dt(n.dtype)})"
    return f"nl.full({g.shape_tuple(n.dims)}, {_lit(v)}, {_dt(n.dtype)})"


def render_arange(g, n) -> str:
    r = n.attrs["rdim"]
    start = n.attrs["start"]
    if r is None:
        return f"nl.full((1,), {start}, nl.int32)"
    base = g.rd_names[r.id]["offs"]
    return base if start == 0 else f"({base} + {start})"


node("full", PURE, CREATES, NAMED, render=render_full, family="creation", doc="a block of one value (attrs: value)")
node("arange", PURE, render=render_arange, family="creation", doc="the lanes of a whole dimension (attrs: start, rdim)")

# ---------------------------------------------------------------------------- semantics


def full(tr, shape, value, dtype, src) -> Node:
    dims = shape_dims(tr, shape, src)
    if isinstance(value, Node):
        if value.dims:
            raise ShapeArgument(src, problem="the fill value must be a scalar")
        dt = dtype or value.dtype
        v = cast(tr, value, dt) if value.dtype != dt else value
        n = Node("expand", [v], dims=dims, dtype=dt)
        return tr.emit(n)
    if not isinstance(value, (bool, int, float)):
        raise HostValueOperand(src, use="the fill value", got=_describe(value))
    dt = dtype or torch.float32
    n = Node("full", dims=dims, dtype=dt, attrs={"value": value}, pad=value)
    tr.prog.dims_used.add(dims)
    return tr.emit(n)


def arange(tr, args, kwargs, src) -> Node:
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("device", None)
    if kwargs:
        raise ShapeArgument(src, problem=f"arange: unsupported arguments {sorted(kwargs)}")
    if len(args) == 1 and isinstance(args[0], BlockSizeInt) and int(args[0]) > 1:
        # dt.arange(BLOCK_M) of a registered block size: the lanes of that block
        r = tr.block_dim(args[0], src)
        n = tr.emit(Node("arange", dims=(r,), dtype=torch.int32, attrs={"start": 0, "rdim": r}))
        return cast(tr, n, dtype) if dtype is not None and dtype != torch.int32 else n
    vals = [tr.static_int(a, src, "an arange bound") for a in args]
    if len(vals) == 1:
        lo, hi = 0, vals[0]
    elif len(vals) == 2:
        lo, hi = vals
    else:
        raise UnsupportedExpression(src, what="arange with a step")
    r = tr.rdim(hi - lo, hi - lo, src) if hi - lo != 1 else None
    dims = (r,) if r is not None else (ONE,)
    n = tr.emit(Node("arange", dims=dims, dtype=torch.int32, attrs={"start": lo, "rdim": r}))
    if dtype is not None and dtype != torch.int32:
        return cast(tr, n, dtype)
    return n


# ---------------------------------------------------------------------------- ops


@op("dt.zeros", family="creation", stub=L.zeros, nodes=("full", "expand"), tile_args=True)
def _dt_zeros(tr, e, shape, dtype=None, device=None):
    return full(tr, shape, 0, dtype, e)


@op("dt.full", family="creation", stub=L.full, nodes=("full", "expand", "cast"), tile_args=True)
def _dt_full(tr, e, shape, value, dtype=None, device=None):
    return full(tr, shape, value, dtype, e)


@op("dt.arange", family="creation", stub=L.arange, nodes=("arange", "binary", "cast"))
def _dt_arange(tr, e, begin_or_end, end=None, step=1, dtype=None):
    if end is None and step == 1 and isinstance(begin_or_end, Node) and begin_or_end.op == "tile_block_size":
        # dt.arange(tile.block_size): 0 .. block_size-1 along that tile (tile.index - tile.begin)
        t = begin_or_end.attrs["tile"]
        v = binop(tr, "sub", tr.tile_attr(t, "index", e), tr.tile_attr(t, "begin", e), e)
        return cast(tr, v, dtype) if dtype is not None and dtype != v.dtype else v
    args = [begin_or_end] if end is None else [begin_or_end, end]
    if step != 1:
        args.append(step)
    return arange(tr, args, {"dtype": dtype} if dtype is not None else {}, e)


@op("zeros", family="creation", nodes=("full",), torch=("zeros", "empty"), first="any", host_args=True)
@op("ones", family="creation", nodes=("full",), torch=("ones",), first="any", host_args=True)
def _t_zeros(tr, e, op, *size, out=None, dtype=None, layout=None, device=None, pin_memory=False,
             requires_grad=False):
    shape = size[0] if len(size) == 1 else list(size)
    return full(tr, shape, 0 if op == "zeros" else 1, dtype, e)


@op("full", family="creation", nodes=("full", "expand"), torch=("full",), first="any", host_args=True)
def _t_full(tr, e, op, size, fill_value, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
            requires_grad=False):
    return full(tr, size, fill_value, dtype, e)


@op("zeros_like", family="creation", nodes=("full", "cast"), torch=("zeros_like", "empty_like"), first="any")
@op("ones_like", family="creation", nodes=("full", "cast"), torch=("ones_like",), first="any")
def _t_zeros_like(tr, e, op, input, *, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False, memory_format=None):
    return _full_like(tr, e, input, 0 if op == "zeros_like" else 1, dtype)


@op("full_like", family="creation", nodes=("full", "expand", "cast"), torch=("full_like",), first="any")
def _t_full_like(tr, e, op, input, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False,
                 requires_grad=False, memory_format=None):
    return _full_like(tr, e, input, fill_value, dtype)


def _full_like(tr, e, x, value, dtype):
    dtype = dtype or x.dtype
    return full(tr, list(tr.ev.dim_value(d) for d in x.dims), value, dtype, e) if x.dims else cast(tr, value, dtype)


@op("arange", family="creation", nodes=("arange", "cast"), torch=("arange",), first="any", host_args=True)
def _t_arange(tr, e, op, *bounds, out=None, dtype=None, layout=None, device=None, pin_memory=False,
              requires_grad=False):
    return arange(tr, list(bounds), {"dtype": dtype} if dtype is not None else {}, e)


@op("new_zeros", family="creation", nodes=("full",), methods=("new_zeros", "new_empty"), tile_args=True)
@op("new_ones", family="creation", nodes=("full",), methods=("new_ones",), tile_args=True)
def _t_new_zeros(tr, e, op, input, *sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None,
                 pin_memory=False):
    if size is not None and sizes:
        raise BadArguments(e, op=op, problem="the size is given twice", signature="(size, *, dtype=None)")
    shape = size if size is not None else (sizes[0] if len(sizes) == 1 else list(sizes))
    return full(tr, shape, 0 if op == "new_zeros" else 1, dtype or input.dtype, e)


@op("new_full", family="creation", nodes=("full", "expand"), methods=("new_full",), tile_args=True)
def _t_new_full(tr, e, op, input, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None,
                pin_memory=False):
    return full(tr, size, fill_value, dtype or input.dtype, e)
