"""Scans: ``torch.cumsum`` / ``cumprod`` (and ``dt.cumsum`` / ``dt.cumprod``), ``dt.associative_scan`` with a
user combine function (a ``combine`` node of kind ``scan``, see ``deuteron.ops.reduce``).

Node kind ``scan``.
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..errors import BadArguments, CombineFunction, TileScan
from ..optable import ALONG, NAMED, OPS, PURE, node, op
from ..program import Node, RInfo, TileInfo
from ..trace_common import _LOW_PRECISION, _describe, _norm_axis
from .elementwise import cast
from .reduce import _emit, _inputs, _trace_combine

# ---------------------------------------------------------------------------- node kinds


def render_scan(g, n) -> str:
    (a,) = n.args
    ax = n.attrs["axis"]
    d = a.dims[ax]
    if g.is_unit(d):
        return g.expr(a)
    x = g.masked(a, ax, 0 if n.attrs["kind"] == "cumsum" else 1, d)
    return f"nl.{n.attrs['kind']}({x}, axis={g.rpos(a.dims, ax)})"


node("scan", PURE, NAMED, ALONG, render=render_scan, family="scan",
     doc="cumsum / cumprod along one dim (attrs: kind, axis)")


# ---------------------------------------------------------------------------- ops


def _check_scan_dim(tr, e, d, what):
    """A scan along a tile of tunable size restarts at every tile in the kernel (Helion's semantics: the kernel
    compiles and runs so) but runs over the whole loop in kernel.ref (one tile): ref cannot be its oracle --
    recorded as the program's oracle gap (D004 ``TileScan`` from ``kernel.ref``; the autotuner and Verify compare
    with the default config's output, as for a decision on a tile's bounds)."""
    if isinstance(d, TileInfo) and d.kind == "tile" and d.slot is not None:
        tr.prog.oracle_gaps.append(TileScan(e, op=what, tile=d.name))


@op("cumsum", family="scan", nodes=("scan", "cast"), torch=("cumsum",), methods=("cumsum",))
@op("cumprod", family="scan", nodes=("scan", "cast"), torch=("cumprod",), methods=("cumprod",))
def _t_scan(tr, e, op, input, dim, *, dtype=None):
    x = input
    dim = _norm_axis(tr.static_int(dim, e, "a dimension"), len(x.dims), tr, e)
    d = x.dims[dim]
    if isinstance(d, RInfo):
        d.not_rollable(f"used by {op}")
    _check_scan_dim(tr, e, d, f"torch.{op}")
    dtype = dtype or (torch.int64 if not x.dtype.is_floating_point else x.dtype)
    xx = cast(tr, x, torch.float32) if x.dtype in _LOW_PRECISION else cast(tr, x, dtype)
    n = tr.emit(Node("scan", [xx], dims=x.dims, dtype=xx.dtype, attrs={"kind": op, "axis": dim}))
    return cast(tr, n, dtype) if n.dtype != dtype else n


@op("dt.cumsum", family="scan", stub=L.cumsum, nodes=("scan", "cast"), share_op=True)
@op("dt.cumprod", family="scan", stub=L.cumprod, nodes=("scan", "cast"), share_op=True)
def _dt_cumulative(tr, e, op, input, dim, reverse=False):
    if reverse:
        raise BadArguments(e, op=f"dt.{op}", problem="reverse=True is not supported",
                           signature="(input, dim, reverse=False)")
    if not isinstance(input, Node):
        raise BadArguments(e, op=f"dt.{op}", problem=f"expects a value of the kernel, got {_describe(input)}",
                           signature="(input, dim, reverse=False)")
    return OPS[op].trace(tr, e, f"dt.{op}", [input, dim], {})


@op("dt.associative_scan", family="scan", stub=L.associative_scan, nodes=("combine", "tuple_get"))
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
