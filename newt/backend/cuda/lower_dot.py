"""``dot``: hand the op to the lowering the planner chose for it (see ``dot/``)."""

from __future__ import annotations

from .dot.base import load_of
from .emitter import lowers


def _tile(em, v):
    """The shared-memory tile holding operand ``v``: its own, or the transposed view of the tile of the value
    it transposes (a pipelined ``load(...).T``)."""
    t = em.smem_tiles.get(v)
    if t is None and load_of(v)[1]:
        src = em.smem_tiles.get(v.owner.operands[0])
        t = src.transposed() if src is not None else None
    return t


@lowers("dot")
def _dot(em, op):
    low = em.plan.dot[op]
    tiles = [_tile(em, op.operands[0]), _tile(em, op.operands[1])]
    low.emit(em, op, tiles)
