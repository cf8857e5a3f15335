"""``x + dot(a, b)`` as ``dot(a, b, x)``: the accumulation folded into the dot's accumulator (issue 28).

``dv += tl.dot(p, do)`` (tutorial 06's backward, and most hand-written accumulation loops) builds a dot on a zero
accumulator and adds its result to the loop-carried ``dv``.  Lowered literally, the tensor cores fill a fresh
accumulator (as many registers per thread as ``dv`` itself) that the threads then add to ``dv``: twice the
accumulator registers live at once (792 bytes of spill in ``_attn_bwd`` at d=64) and one FADD per element.
Folded, the tensor cores accumulate into ``dv`` directly, as Triton's combine pass does (``add(d, dot(a, b, 0))
-> dot(a, b, d)``).

The rewrite is in place on the IR the backend lowers and applies where the dot's accumulator is a zero constant,
its result feeds only that one add, both ops are in the same block, the add's other operand has the dot's result
type, and the dot does not promote imprecise fp8 accumulations (``max_num_imprecise_acc``, which the fold would
change).  The add op becomes the dot (its result value, and so every use of the sum, stays); the zero dot goes.
The sum is the tensor cores' fp32 (int32) accumulation instead of a separate rounding of the product: the same
values Triton computes.  Being in place, it shows in the kernel's ``asm["ir"]`` (the IR after the backend, as
Triton's ``ttir`` is after its combine pass) and in the IR a compiled kernel interprets without a GPU (the same
sum, accumulated in fp32).  ``NEWT_DOT_FOLD_ADD=0`` turns it off.
"""

from __future__ import annotations

import os

from newt.ir.types import is_block

__all__ = ["fold_dot_adds", "fold_enabled"]


def fold_enabled() -> bool:
    return os.environ.get("NEWT_DOT_FOLD_ADD", "1") != "0"


def _is_zero(v) -> bool:
    op = v.owner
    if op is None or not hasattr(op, "name"):
        return False
    if op.name == "splat":
        return _is_zero(op.operands[0])
    if op.name == "constant":
        val = op.attrs.get("value")
        return isinstance(val, (int, float)) and not isinstance(val, bool) and val == 0
    return False


def _uses(fn) -> dict:
    n: dict = {}
    for op in fn.walk():
        for o in op.operands:
            n[id(o)] = n.get(id(o), 0) + 1
    return n


def _fold_region(region, uses) -> int:
    done = 0
    pos = {id(op): i for i, op in enumerate(region.ops)}
    dead = set()
    for op in region.ops:
        for r in op.regions:
            done += _fold_region(r, uses)
        if op.name != "add" or not is_block(op.result.type):
            continue
        for k in (0, 1):
            d = op.operands[k].owner
            x = op.operands[1 - k]
            if getattr(d, "name", None) != "dot" or id(d) not in pos or id(d) in dead:
                continue
            if uses.get(id(d.result), 0) != 1 or not _is_zero(d.operands[2]):
                continue
            if d.result.type != op.result.type or x.type != op.result.type or x is d.result:
                continue
            if d.attr("max_num_imprecise_acc"):
                continue
            op.name = "dot"
            op.operands = [d.operands[0], d.operands[1], x]
            op.attrs = dict(d.attrs)
            op.loc = d.loc or op.loc
            dead.add(id(d))
            done += 1
            break
    if dead:
        region.ops = [op for op in region.ops if id(op) not in dead]
    return done


def fold_dot_adds(fn) -> int:
    """Fold every ``x + dot(a, b, 0)`` of ``fn`` (in place); the number folded."""
    if not fold_enabled():
        return 0
    return _fold_region(fn.body, _uses(fn))
