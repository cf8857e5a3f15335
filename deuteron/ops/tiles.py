"""Tile ops and the kernel's leaf values: ``dt.tile_begin`` / ``tile_end`` / ``tile_index`` / ``tile_id`` /
``tile_block_size`` (``tile.begin`` ...), ``dt.cdiv``-like helpers known when compiling (``dt.next_power_of_2``,
``dt.static_range``); parameters, constants and loop variables.

Node kinds ``tile_index`` / ``tile_begin`` / ``tile_end`` / ``tile_id`` / ``tile_count`` / ``tile_block_size``,
``grid_index``, ``loop_index``, ``const``, ``param``, ``carried``, ``loopout``, ``phi``.
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..codegen_expr import _dt, _lit
from ..errors import BadArguments, NotCompileTime, RangeLoop
from ..optable import BOUND, INDEX, TILE_ATTR, VARIABLE, node, op
from ..program import Node, TileInfo
from ..trace_common import _describe

# ---------------------------------------------------------------------------- node kinds


def render_tile_attr(g, n) -> str:
    return g.tile_attr_expr(n)


def render_const(g, n) -> str:
    v = n.attrs["value"]
    if n.weak or (n.dtype == torch.float32 and isinstance(v, float)) or \
            (n.dtype == torch.int32 and isinstance(v, int) and not isinstance(v, bool)):
        return _lit(float(v) if n.dtype == torch.float32 else v)
    return f"nl.full((), {_lit(v)}, {_dt(n.dtype)})"


def render_param(g, n) -> str:
    return n.attrs["name"]


def render_carried(g, n) -> str:
    return g.var.get(n.id) or g.carried_name(n)


for _k, _doc in (("tile_index", "the indices a tile covers"), ("tile_begin", "a tile's first index"),
                 ("tile_end", "one past a tile's last index"), ("tile_id", "a tile's number along its loop"),
                 ("tile_count", "the number of tiles along a loop"), ("tile_block_size", "a tile's block size")):
    node(_k, TILE_ATTR, render=render_tile_attr, family="tiles", doc=_doc + " (attrs: tile)")
node("grid_index", INDEX, render=render_tile_attr, family="tiles", doc="a dt.grid index (attrs: tile)")
node("loop_index", INDEX, render=render_tile_attr, family="tiles", doc="a range loop's variable")
node("const", BOUND, render=render_const, family="tiles", doc="a constant (attrs: value)")
node("param", BOUND, render=render_param, family="tiles", doc="a scalar parameter of the kernel (attrs: name)")
for _k, _doc in (("carried", "a loop-carried variable inside its loop"), ("loopout", "a loop-carried variable after "
                 "its loop"), ("phi", "a variable an if assigns")):
    node(_k, BOUND, VARIABLE, render=render_carried, family="tiles", doc=_doc)


# ---------------------------------------------------------------------------- ops


@op("dt.tile_begin", family="tiles", stub=L.tile_begin, nodes=("tile_begin",), share_op=True)
@op("dt.tile_end", family="tiles", stub=L.tile_end, nodes=("tile_end",), share_op=True)
@op("dt.tile_index", family="tiles", stub=L.tile_index, nodes=("tile_index",), share_op=True)
@op("dt.tile_id", family="tiles", stub=L.tile_id, nodes=("tile_id",), share_op=True)
@op("dt.tile_block_size", family="tiles", stub=L.tile_block_size, nodes=("tile_block_size",), share_op=True)
def _dt_tile_fn(tr, e, op, tile):
    if not isinstance(tile, TileInfo):
        raise BadArguments(e, op=f"dt.{op}", problem=f"expects a tile, got {_describe(tile)}", signature="(tile)")
    return tr.tile_attr(tile, op[len("tile_"):], e)


@op("dt.next_power_of_2", family="tiles", stub=L.next_power_of_2)
def _dt_next_power_of_2(tr, e, n):
    if isinstance(n, Node):
        raise NotCompileTime(e, what="dt.next_power_of_2's argument", got=_describe(n))
    return L.next_power_of_2(n)


@op("dt.static_range", family="tiles", stub=L.static_range)
def _dt_static_range(tr, e, begin_or_end, end=None, step=1):
    vals = [tr.static_int(v, e, "a dt.static_range bound") for v in (begin_or_end, end, step) if v is not None]
    if len(vals) == 1 or (end is None):
        vals = [0] + vals
    if len(vals) == 2:
        vals.append(1)
    if vals[2] == 0:
        raise RangeLoop(e, problem="dt.static_range with step 0")
    return list(range(*vals))
