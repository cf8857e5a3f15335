"""Reductions: ``sum`` / ``amax`` / ``max`` / ``argmax`` / ``mean`` / ``var`` / ``softmax`` / ``logsumexp`` ... and
``dt.reduce`` with a user combine function.

Node kinds ``reduce`` (a built-in reduction along one dim), ``combine`` (``nl.reduce`` / ``nl.associative_scan``
with a combine function traced into a block of its own, written as a ``@newt.jit`` helper) and ``combine_arg``
(the combine function's parameters).
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..codegen_expr import _atom, _identity
from ..errors import CombineFunction, DimensionArgument, OperandDtype, OperandKind
from ..optable import ALONG, NAMED, PURE, node, op
from ..program import ONE, Block, Node, RInfo, TileInfo
from ..trace_common import _LOW_PRECISION, _describe, _is_int_dtype, _MaxResult, _norm_axis
from .creation import full
from .elementwise import binop, cast, minmax, unary, where
from .shape import squeeze

# ---------------------------------------------------------------------------- node kinds


def render_reduce(g, n) -> str:
    (a,) = n.args
    kind = n.attrs["kind"]
    ax = n.attrs["axis"]
    d = n.attrs["dim"]
    keep = n.attrs["keepdim"]
    if g.is_unit(d):
        # a block-size-1 tile: nothing to reduce (a jagged one still leaves out its parents' missing lanes)
        x = g.masked(a, ax, _identity(kind, a.dtype), d) if d.jagged_mask is not None else g.expr(a)
        if kind in ("argmax", "argmin"):
            x = f"nl.zeros({g.shape_tuple(n.dims)}, dtype=nl.int64)" if g.rd(n.dims) else \
                "nl.full((), 0, nl.int64)"
        return x
    x = g.masked(a, ax, _identity(kind, a.dtype), d)
    kd = ", keep_dims=True" if keep else ""
    ax = g.rpos(a.dims, ax)
    if kind == "sum":
        return f"nl.sum({x}, axis={ax}{kd})"
    floating = a.dtype.is_floating_point
    if kind in ("max", "min"):  # floats: a NaN lane makes the result NaN, as in torch.amax / .max()
        return f"nl.reduce({x}, {ax}, {NAN_COMBINE[kind]}{kd})" if floating else f"nl.{kind}({x}, axis={ax}{kd})"
    if kind == "prod":
        return f"nl.reduce({x}, {ax}, _dt_mul{kd})"
    if kind in ("argmax", "argmin"):
        if not floating:
            return f"nl.{kind}({x}, axis={ax}{kd}).to(nl.int64)"
        # torch: the index of the first NaN where there is one
        nan = f"({_atom(x)} != {_atom(x)}).to(nl.int32)"
        return (f"nl.where(nl.max({nan}, axis={ax}{kd}) > 0, nl.argmax({nan}, axis={ax}{kd}), "
                f"nl.{kind}({x}, axis={ax}{kd})).to(nl.int64)")
    raise AssertionError(kind)


def render_combine(g, n: Node) -> str:
    """``nl.reduce`` / ``nl.associative_scan`` with the combine function traced into ``n.attrs["block"]``,
    written as a ``@newt.jit`` helper of its own."""
    a = n.attrs
    fname = g.names.fresh("_dt_combine")
    args = [g.names.fresh(f"{'ab'[j // a['arity']]}{j % a['arity']}") for j in range(2 * a["arity"])]
    saved = (g.lines, g.var, g.last_line)
    g.lines, g.var, g.last_line = [], {p.id: nm for p, nm in zip(a["params"], args)}, None
    try:
        g.emit_block(a["block"], 1) if a["block"].stmts else None
        rets = [g.expr(r) for r in a["results"]]
        g.w(1, "return " + ", ".join(rets))
        body = g.lines
    finally:
        g.lines, g.var, g.last_line = saved
    g.helpers += ["@newt.jit", f"def {fname}({', '.join(args)}):"] + body + ["", ""]
    rank = len(g.rd(n.args[0].dims))
    ax = g.rpos(n.args[0].dims, a["axis"])
    if a["kind"] == "reduce":
        xs = [g.masked(x, a["axis"], o, a["dim"]) for x, o in zip(n.args, a["others"])]
    else:
        xs = [g.aligned(x, rank, x.dims) for x in n.args]
    x = xs[0] if len(xs) == 1 else "(" + ", ".join(xs) + ")"
    if a["kind"] == "reduce":
        kd = ", keep_dims=True" if a["keep"] else ""
        return f"nl.reduce({x}, {ax}, {fname}{kd})"
    return f"nl.associative_scan({x}, {ax}, {fname})"


#: the combine helpers of NaN-propagating float max / min reductions -> their source (the generator writes a
#: helper the kernel uses next to it, like ``_dt_mul``)
NAN_COMBINE = {"max": "_dt_max_nan", "min": "_dt_min_nan"}
COMBINE_HELPERS = {
    "_dt_mul": ["@newt.jit", "def _dt_mul(a, b):", "    return a * b"],
    "_dt_max_nan": ["@newt.jit", "def _dt_max_nan(a, b):",
                    "    return nl.maximum(a, b, propagate_nan=nl.PropagateNan.ALL)"],
    "_dt_min_nan": ["@newt.jit", "def _dt_min_nan(a, b):",
                    "    return nl.minimum(a, b, propagate_nan=nl.PropagateNan.ALL)"],
}


def render_combine_arg(g, n) -> str:
    raise AssertionError(f"{n}: a combine function's parameter outside its helper")


node("reduce", PURE, NAMED, ALONG, render=render_reduce, name_hint=lambda n: n.attrs["kind"], family="reduce",
     doc="a reduction along one dim (attrs: kind, axis, dim, keepdim)")
node("combine", NAMED, ALONG, render=render_combine, family="reduce",
     doc="dt.reduce / dt.associative_scan with a combine function (attrs: kind, block, params, results, ...)")
node("combine_arg", render=render_combine_arg, family="reduce", doc="a combine function's parameter")

# ---------------------------------------------------------------------------- semantics


def reduce(tr, kind, v, dim, keepdim, src, dtype=None):
    if not isinstance(v, Node):
        raise OperandKind(src, op=f"{kind}()", got=_describe(v))
    nd = len(v.dims)
    if dim is None:
        axes = list(range(nd))
    elif isinstance(dim, (list, tuple)):
        axes = [_norm_axis(tr.static_int(d, src, "a dimension"), nd, tr, src) for d in dim]
    else:
        axes = [_norm_axis(tr.static_int(dim, src, "a dimension"), nd, tr, src)]
    axes = sorted(set(axes), reverse=True)
    if kind in ("mean", "var", "std"):
        if not v.dtype.is_floating_point:
            raise OperandDtype(src, op=f"{kind}()", dtype="integer", why=" (torch requires a float tensor)")
    if kind == "mean":
        s = reduce(tr, "sum", v, axes, keepdim, src, dtype=torch.float32 if v.dtype in _LOW_PRECISION else None)
        cnt = count(tr, v, axes, src)
        out = binop(tr, "truediv", s, cnt, src)
        return cast(tr, out, dtype or v.dtype) if out.dtype != (dtype or v.dtype) else out
    out = v
    if kind in ("sum", "prod") and dtype is None:
        if v.dtype in _LOW_PRECISION:
            acc_dtype, res_dtype = torch.float32, v.dtype
        elif not v.dtype.is_floating_point:
            acc_dtype = res_dtype = torch.int64
        else:
            acc_dtype = res_dtype = v.dtype
    elif kind in ("sum", "prod"):
        acc_dtype = res_dtype = dtype
    else:
        acc_dtype = res_dtype = v.dtype
    if out.dtype != acc_dtype:
        out = cast(tr, out, acc_dtype)
    for ax in axes:
        d = out.dims[ax]
        if keepdim:
            dims = out.dims[:ax] + (ONE,) + out.dims[ax + 1:]
        else:
            dims = out.dims[:ax] + out.dims[ax + 1:]
        if d is ONE:
            out = tr.emit(Node("reshape", [out], dims=dims, dtype=out.dtype, pad=out.pad)) \
                if not keepdim else out
            continue
        rk = {"sum": "sum", "prod": "prod", "amax": "max", "amin": "min", "max": "max", "min": "min",
              "argmax": "argmax", "argmin": "argmin"}[kind]
        rdt = torch.int64 if rk in ("argmax", "argmin") else out.dtype
        out = tr.emit(Node("reduce", [out], dims=dims, dtype=rdt,
                             attrs={"kind": rk, "axis": ax, "dim": d, "keepdim": keepdim}))
        if rk in ("argmax", "argmin"):
            break
    if out.dtype != res_dtype and kind not in ("argmax", "argmin"):
        out = cast(tr, out, res_dtype)
    return out


def count(tr, v: Node, axes, src):
    total = 1
    for ax in axes:
        d = v.dims[ax]
        if isinstance(d, RInfo):
            total = binop(tr, "mul", total, d.size_expr if isinstance(d.size_expr, int) else d.size_expr, src)
        elif isinstance(d, TileInfo):
            ext = binop(tr, "sub", tr.tile_attr(d, "end", src), tr.tile_attr(d, "begin", src), src)
            if d.kind == "grid":
                ext = 1
            total = binop(tr, "mul", total, ext, src)
    return total


def var(tr, v, dim, correction, keepdim, src, std=False):
    if not v.dtype.is_floating_point:
        raise OperandDtype(src, op="var()", dtype="integer", why=" (torch requires a float tensor)")
    x = cast(tr, v, torch.float32) if v.dtype in _LOW_PRECISION else v
    nd = len(v.dims)
    axes = list(range(nd)) if dim is None else (
        [_norm_axis(tr.static_int(d, src, "a dimension"), nd, tr, src) for d in dim]
        if isinstance(dim, (list, tuple)) else [_norm_axis(tr.static_int(dim, src, "a dimension"), nd, tr,
                                                           src)])
    mean = reduce(tr, "mean", x, axes, True, src)
    d = binop(tr, "sub", x, mean, src)
    ssq = reduce(tr, "sum", binop(tr, "mul", d, d, src), axes, keepdim, src)
    n = count(tr, v, axes, src)
    denom = binop(tr, "sub", n, correction, src) if correction else n
    out = binop(tr, "truediv", ssq, denom, src)
    if std:
        out = unary(tr, "sqrt", out, src)
    return cast(tr, out, v.dtype) if out.dtype != v.dtype else out


def softmax(tr, v, dim, src, log=False, dtype=None):
    if dim is None:
        raise DimensionArgument(src, op="softmax", problem="dim= is needed")
    x = v
    if dtype is not None:
        x = cast(tr, x, dtype)
    out_dtype = x.dtype
    if not x.dtype.is_floating_point:
        x = cast(tr, x, torch.float32)
        out_dtype = torch.float32
    if x.dtype in _LOW_PRECISION:
        x = cast(tr, x, torch.float32)
    m = reduce(tr, "amax", x, dim, True, src)
    z = binop(tr, "sub", x, m, src)
    e = unary(tr, "exp", z, src)
    s = reduce(tr, "sum", e, dim, True, src)
    if log:
        out = binop(tr, "sub", z, unary(tr, "log", s, src), src)
    else:
        out = binop(tr, "truediv", e, s, src)
    return cast(tr, out, out_dtype) if out.dtype != out_dtype else out


def logsumexp(tr, v, dim, keepdim, src):
    x = cast(tr, v, torch.float32) if v.dtype in _LOW_PRECISION or not v.dtype.is_floating_point else v
    m = reduce(tr, "amax", x, dim, True, src)
    mz = where(tr, unary(tr, "isinf", m, src), 0.0, m, src)
    s = reduce(tr, "sum", unary(tr, "exp", binop(tr, "sub", x, mz, src), src), dim, True, src)
    out = binop(tr, "add", unary(tr, "log", s, src), mz, src)
    if not keepdim:
        out = squeeze(tr, out, dim if not isinstance(dim, (list, tuple)) else dim[0], src)
    return cast(tr, out, v.dtype) if v.dtype.is_floating_point and out.dtype != v.dtype else out


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
        out = tr.ev.inline(fn, params, {}, e)
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(outs) != k:
            raise CombineFunction(e, op=op, problem=f"combine_fn returns {len(outs)} value(s) for {k} input(s)")
        results = []
        for x, r in zip(xs, outs):
            if isinstance(r, (int, float, bool)) and not isinstance(r, Node):
                r = full(tr, [], r, x.dtype, e)
            if not isinstance(r, Node) or r.dims:
                raise CombineFunction(e, op=op, problem="combine_fn must combine elements: it returned "
                                                         f"{_describe(r)}")
            results.append(cast(tr, r, x.dtype) if r.dtype != x.dtype else r)
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


# ---------------------------------------------------------------------------- ops


@op("sum", family="reduce", nodes=("reduce", "cast"), torch=("sum",), methods=("sum",))
@op("amax", family="reduce", nodes=("reduce", "cast"), torch=("amax",), methods=("amax",))
@op("amin", family="reduce", nodes=("reduce", "cast"), torch=("amin",), methods=("amin",))
@op("mean", family="reduce", nodes=("reduce", "cast", "binary"), torch=("mean",), methods=("mean",))
@op("prod", family="reduce", nodes=("reduce", "cast"), torch=("prod",), methods=("prod",))
def _t_reduce(tr, e, op, input, dim=None, keepdim=False, *, dtype=None):
    return reduce(tr, op, input, dim, keepdim, e, dtype=dtype)


@op("max", family="reduce", nodes=("reduce", "binary"), torch=("max",), methods=("max",))
@op("min", family="reduce", nodes=("reduce", "binary"), torch=("min",), methods=("min",))
def _t_max(tr, e, op, input, dim=None, keepdim=False, *, other=None):
    x = input
    if other is not None or (isinstance(dim, Node) and (dim.dims or not _is_int_dtype(dim.dtype))):
        return minmax(tr, "maximum" if op == "max" else "minimum", x, dim if other is None else other, e)
    if dim is None:
        return reduce(tr, op, x, None, False, e)
    vals = reduce(tr, op, x, dim, keepdim, e)
    idx = reduce(tr, "argmax" if op == "max" else "argmin", x, dim, keepdim, e)
    return _MaxResult((vals, idx))


@op("argmax", family="reduce", nodes=("reduce",), torch=("argmax",), methods=("argmax",))
@op("argmin", family="reduce", nodes=("reduce",), torch=("argmin",), methods=("argmin",))
def _t_argmax(tr, e, op, input, dim=None, keepdim=False):
    if dim is None:
        raise DimensionArgument(e, op=f"{op}()", problem="dim= is needed inside a tile loop")
    return reduce(tr, op, input, dim, keepdim, e)


@op("var", family="reduce", nodes=("reduce", "binary", "cast"), torch=("var",), methods=("var",))
@op("std", family="reduce", nodes=("reduce", "binary", "unary", "cast"), torch=("std",), methods=("std",))
def _t_var(tr, e, op, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):  # x.var(False): unbiased positional
        unbiased, dim = dim, None
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return var(tr, input, dim, correction, keepdim, e, std=op == "std")


@op("softmax", family="reduce", nodes=("reduce", "binary", "unary", "cast"), torch=("softmax",),
    functional=("softmax",), methods=("softmax",))
@op("log_softmax", family="reduce", nodes=("reduce", "binary", "unary", "cast"), torch=("log_softmax",),
    functional=("log_softmax",), methods=("log_softmax",))
def _t_softmax(tr, e, op, input, dim=None, _stacklevel=3, dtype=None):
    return softmax(tr, input, dim, e, log=op == "log_softmax", dtype=dtype)


@op("logsumexp", family="reduce", nodes=("reduce", "binary", "unary", "where", "cast"), torch=("logsumexp",),
    methods=("logsumexp",))
def _t_logsumexp(tr, e, op, input, dim=None, keepdim=False):
    return logsumexp(tr, input, dim, keepdim, e)


@op("dt.reduce", family="reduce", stub=L.reduce, nodes=("combine", "tuple_get"))
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
        dims[ax] = ONE
    else:
        del dims[ax]
    if not dims:
        raise CombineFunction(e, op="dt.reduce", problem="reducing a 1-D block to a scalar: keep_dims=True")
    tr.prog.dims_used.add(tuple(xs[0].dims))
    return _emit(tr, e, "reduce", xs, dims, sub, params, results,
                 {"axis": ax, "dim": d, "keep": bool(keep_dims), "others": others})
