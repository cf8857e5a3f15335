"""``dot``: hand the op to the lowering the planner chose for it (see ``dot/``)."""

from __future__ import annotations

from .emitter import lowers


@lowers("dot")
def _dot(em, op):
    low = em.plan.dot[op]
    tiles = [em.smem_tiles.get(op.operands[0]), em.smem_tiles.get(op.operands[1])]
    low.emit(em, op, tiles)
