"""Random numbers: ``dt.rand`` / ``dt.randint`` / ``dt.rand4x`` (Philox, the same stream as ``kernel.ref``'s
``deuteron.rng``).
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..errors import RandomShape
from ..optable import NAMED, node, op
from ..program import ONE, Node, RInfo, TileInfo
from ..trace_common import _describe, _is_int_dtype
from .creation import arange, full
from .elementwise import binop
from .shape import expand_dims, shape_dims

# ---------------------------------------------------------------------------- node kinds


def render_rand(g, n) -> str:
    seed = g.expr(n.args[1]) if len(n.args) > 1 else str(n.attrs["seed"])
    off = g.expr(n.args[0])
    if n.op == "rand":
        return f"nl.rand({seed}, {off})"
    lo, span = n.attrs["low"], n.attrs["high"] - n.attrs["low"]
    bits = f"nl.randint({seed}, {off}).to(nl.int64) % {span}"  # uint32 bits, zero-extended
    return f"({bits} + {lo}).to(nl.int32)" if lo else f"({bits}).to(nl.int32)"


node("rand", render=render_rand, family="random", doc="uniform float32 of Philox (attrs: seed)")
node("randint", render=render_rand, family="random", doc="int32 in [low, high) of Philox (attrs: seed, low, high)")


# ---------------------------------------------------------------------------- ops


def _rng_offsets(tr, e, dims, what):
    """The row-major offsets of a ``dt.rand`` block (a tile counts as its whole loop, ``[0, end)``)."""
    off, stride = None, 1
    nd = len(dims)
    for pos in range(nd - 1, -1, -1):
        d = dims[pos]
        if d is ONE:
            continue
        if isinstance(d, TileInfo):
            if not isinstance(d.end, (int, Node)) or isinstance(d.end, bool):
                raise RandomShape(e, op=what, problem=f"the tile {d.name} has no end")
            ext, idx = d.end, tr.tile_attr(d, "index", e)  # an int, or a run-time size (static_shapes=False)
        elif isinstance(d, RInfo):
            ext, idx = d.size, arange(tr, [d.size], {}, e)
        else:
            raise RandomShape(e, op=what, problem=f"a dimension {d!r}")
        v = idx
        for _ in range(pos):
            v = expand_dims(tr, v, 0, e)
        for _ in range(nd - pos - 1):
            v = expand_dims(tr, v, -1, e)
        term = binop(tr, "mul", v, stride, e) if not (isinstance(stride, int) and stride == 1) else v
        off = term if off is None else binop(tr, "add", off, term, e)
        stride = stride * ext if isinstance(stride, int) and isinstance(ext, int) else binop(tr, "mul", ext, stride, e)
    if isinstance(stride, int) and stride > 2**31 - 1:
        raise RandomShape(e, op=what, problem=f"{stride} elements (offsets must fit in int32)")
    if off is None:
        off = full(tr, [], 0, torch.int32, e)
    if tuple(off.dims) != tuple(dims):
        off = tr.materialize(off, dims, torch.int32, e)
    return off


def _rng_seed(tr, e, seed, what):
    if isinstance(seed, bool) or not isinstance(seed, (int, Node)) or (
            isinstance(seed, Node) and (seed.dims or not _is_int_dtype(seed.dtype))):
        raise RandomShape(e, op=what, problem=f"the seed must be an int (or an int argument), not {_describe(seed)}")
    return seed


@op("dt.rand", family="random", stub=L.rand, nodes=("rand", "binary", "expand_dims", "arange"))
def _dt_rand(tr, e, shape, seed, device=None):
    dims = shape_dims(tr, shape, e)
    off = _rng_offsets(tr, e, dims, "dt.rand")
    seed = _rng_seed(tr, e, seed, "dt.rand")
    args = [off] + ([seed] if isinstance(seed, Node) else [])
    return tr.emit(Node("rand", args, dims=tuple(dims), dtype=torch.float32,
                        attrs={"seed": None if isinstance(seed, Node) else int(seed)}))


@op("dt.randint", family="random", stub=L.randint, nodes=("randint", "binary", "expand_dims", "arange"))
def _dt_randint(tr, e, shape, low, high, seed, device=None):
    lo, hi = (tr.static_int(v, e, "a dt.randint bound") for v in (low, high))
    if hi <= lo:
        raise RandomShape(e, op="dt.randint", problem=f"high ({hi}) must be greater than low ({lo})")
    dims = shape_dims(tr, shape, e)
    off = _rng_offsets(tr, e, dims, "dt.randint")
    seed = _rng_seed(tr, e, seed, "dt.randint")
    args = [off] + ([seed] if isinstance(seed, Node) else [])
    return tr.emit(Node("randint", args, dims=tuple(dims), dtype=torch.int32,
                        attrs={"seed": None if isinstance(seed, Node) else int(seed), "low": lo, "high": hi}))


# ---------------------------------------------------------------------------- dt.rand4x (Helion's hl.rand4x)


def rand4x(seed, offsets, device=None):
    """``r0, r1, r2, r3 = dt.rand4x(seed, offsets)``: four independent uniform float32 blocks in ``[0, 1)``, each
    of ``offsets``' shape, from one Philox round per element (about 4x cheaper than four ``dt.rand``); Helion's
    ``hl.rand4x``, Triton's ``tl.rand4x``.

    ``seed`` is an int (or an int argument), ``offsets`` an int32 or int64 block (an int64 offset is the counter's
    low and high halves, an int32 one its low half); ``kernel.ref`` draws the same numbers::

        for tile in dt.tile(n):
            r0, r1, r2, _ = dt.rand4x(42, tile.index.to(torch.int64))
            out[tile] = x[tile] * ((r0 > 0.1) & (r1 > 0.2) & (r2 > 0.3)).to(x.dtype)
    """
    import torch as _t

    from ..rng import _KEY_A, _KEY_B, _M32, _ROUND_A, _ROUND_B, _mul32, uniform
    L._context("rand4x")
    if not isinstance(offsets, _t.Tensor) or offsets.dtype not in (_t.int32, _t.int64):
        raise L.DeuteronUsageError(f"dt.rand4x: offsets must be an int32 or int64 tensor, not {offsets!r}")
    off = offsets.to(_t.int64)
    c0 = off & _M32
    c1 = (off >> 32) & _M32 if offsets.dtype == _t.int64 else _t.zeros_like(c0)
    c2, c3 = _t.zeros_like(c0), _t.zeros_like(c0)
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    k0, k1 = s & _M32, (s >> 32) & _M32
    for _ in range(10):
        hb, lb = _mul32(_ROUND_B, c2)
        ha, la = _mul32(_ROUND_A, c0)
        c0, c1, c2, c3 = hb ^ c1 ^ k0, lb, ha ^ c3 ^ k1, la
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    return tuple(uniform(c) for c in (c0, c1, c2, c3))


def render_rand4x(g, n) -> str:
    seed = g.expr(n.args[1]) if len(n.args) > 1 else str(n.attrs["seed"])
    return f"nl.rand4x({seed}, {g.expr(n.args[0])})"


node("rand4x", NAMED, render=render_rand4x, family="random",
     doc="dt.rand4x: a tuple of four uniform float32 blocks of Philox (attrs: seed)")


@op("dt.rand4x", family="random", stub=rand4x, nodes=("rand4x", "tuple_get"))
def _dt_rand4x(tr, e, seed, offsets, device=None):
    if not isinstance(offsets, Node) or not offsets.dims or offsets.dtype not in (torch.int32, torch.int64):
        raise RandomShape(e, op="dt.rand4x", problem=f"offsets must be an int32 or int64 block, not "
                                                     f"{_describe(offsets)}")
    seed = _rng_seed(tr, e, seed, "dt.rand4x")
    args = [offsets] + ([seed] if isinstance(seed, Node) else [])
    four = tr.emit(Node("rand4x", args, dims=offsets.dims, dtype=torch.float32,
                        attrs={"seed": None if isinstance(seed, Node) else int(seed)}))
    return tuple(tr.emit(Node("tuple_get", [four], dims=offsets.dims, dtype=torch.float32, attrs={"index": i}))
                 for i in range(4))
