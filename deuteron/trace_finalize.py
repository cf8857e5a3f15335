"""The pass after tracing: the facts about a finished ``Program`` the code generator needs (users, which
whole dimensions can be rolled into loops) and the checks only a whole program allows (jagged tiles)."""

from __future__ import annotations

from .errors import JaggedTile
from .optable import ALONG, BOUND, CREATES, ELEMENTWISE, MEMORY, PURE, has
from .program import IfStmt, LoopStmt, Node, Program, RInfo
from .trace_common import _all_nodes, _all_structured, _dims_text

__all__ = ["finalize"]


def finalize(prog: Program, rdim_slots) -> None:
    """After tracing: users of each node, which whole dimensions can be looped over (and their config slots),
    the jagged tiles' rule, tiles without a block size fixed to 1."""
    _hoist_invariants(prog.body)
    for n, _blk in _all_nodes(prog.body):
        for o in n.operands():
            o.users.append(n)
    _fold_transposed_loads(prog)
    # whole dimensions that can be looped over (reduction_loops)
    for n, _blk in _all_nodes(prog.body):
        rd = [d for d in n.dims if isinstance(d, RInfo)]
        seen = set()
        for r in rd:
            if r.id in seen:
                r.not_rollable("appears twice in one value")
            seen.add(r.id)
        if len(seen) > 1:
            for r in rd:
                r.not_rollable("appears together with another whole dimension")
        if has(n, CREATES) and rd:
            for r in rd:
                r.not_rollable("a block is created with it (dt.zeros / expand)")
    for stmt, _blk in _all_structured(prog.body):
        vals = []
        if isinstance(stmt, LoopStmt):
            vals = [c.init for c in stmt.carried] + [c.result for c in stmt.carried]
        elif isinstance(stmt, IfStmt):
            vals = [stmt.cond] + [m.then_val[0] for m in stmt.merged] + [m.else_val[0] for m in stmt.merged]
        for v in vals:
            if isinstance(v, Node):
                for d in v.dims:
                    if isinstance(d, RInfo):
                        d.not_rollable("carried through a loop or an if")
    seg_of = {}

    def number(block):
        seg = 0
        for st in block.stmts:
            if isinstance(st, Node):
                seg_of[st.id] = seg
            else:
                seg += 1
                for sub in ([st.body] if isinstance(st, LoopStmt) else [st.then_block, st.else_block]):
                    number(sub)
    number(prog.body)
    for n, blk in _all_nodes(prog.body):
        for o in n.operands():
            if o.block is blk and seg_of.get(o.id) != seg_of.get(n.id):
                for d in o.dims:
                    if isinstance(d, RInfo):
                        d.not_rollable("used after a nested loop or if")
            if o.block is not None and o.block is not blk:
                for d in o.dims:
                    if isinstance(d, RInfo):
                        d.not_rollable("used inside a nested loop or if")
        if n.op == "reduce" and n.attrs["kind"] in ("argmax", "argmin") and isinstance(n.attrs["dim"], RInfo):
            n.attrs["dim"].not_rollable("argmax/argmin over it")
    _check_jagged(prog)
    if rdim_slots is not None:
        for r in prog.rdims:
            if r.rollable:
                r.slot = rdim_slots.get(r.id)
    for t in prog.tiles:
        if t.kind == "tile" and t.slot is None and t.fixed is None:
            t.fixed = 1


def _blocks(block):
    yield block
    for st in block.stmts:
        if isinstance(st, LoopStmt):
            yield from _blocks(st.body)
        elif isinstance(st, IfStmt):
            yield from _blocks(st.then_block)
            yield from _blocks(st.else_block)


def _hoist_invariants(block):
    """Loop-invariant code motion, as Triton's LICM does: an elementwise value computed in a tile / range loop's
    body from values all defined before the loop (``q_scaled = q * qk_scale`` in Helion's attention example)
    is computed once, right before the loop.  Pure and lane by lane, so only where it is computed changes (and
    in the generated newt the dot no longer restages its operand in every iteration).  Inner loops first."""
    out = []
    for st in block.stmts:
        if isinstance(st, LoopStmt):
            _hoist_invariants(st.body)
        elif isinstance(st, IfStmt):
            _hoist_invariants(st.then_block)
            _hoist_invariants(st.else_block)
        if isinstance(st, LoopStmt) and st.kind in ("tile", "range"):
            inside = {id(b) for b in _blocks(st.body)}
            loop_tiles = {id(t) for t in st.tiles}
            # the loop's carried variables (``v = v + 1`` in a range loop) change every iteration: not invariant
            carried = {id(c.arg) for c in getattr(st, "carried", ())}
            kept = []
            for n in st.body.stmts:
                if (isinstance(n, Node) and has(n, PURE) and has(n, ELEMENTWISE)
                        and not any(id(d) in loop_tiles for d in n.dims)
                        and not any(id(o) in carried or o.op == "carried" for o in n.operands())
                        and all(_defined_before(o, inside) for o in n.operands())):
                    n.block = block
                    out.append(n)
                else:
                    kept.append(n)
            st.body.stmts = kept
        out.append(st)
    block.stmts = out


def _defined_before(o: Node, inside) -> bool:
    if o.block is None:  # a kernel parameter or a constant; not a loop variable or index
        return has(o, BOUND)
    return id(o.block) not in inside


def _fold_transposed_loads(prog):
    """``k = x[tile_b, tile_n, :]`` read only through ``k.transpose(1, 2)`` (or ``.t()`` / ``.permute``): load the
    block transposed by its pointers instead (the items of the access in the permuted order), so the generated
    newt has no ``nl.trans`` of a loaded block.  The same values; a dot then reads its operand straight from
    the staged tile (newt stages an ``nl.trans`` of a dot operand through registers and shared memory: Helion's
    attention example, ``torch.bmm(q, k.transpose(1, 2))``, ran at 0.68x Helion with it)."""
    for n, _blk in _all_nodes(prog.body):
        if n.op != "permute":
            continue
        a = n.args[0]
        if not isinstance(a, Node) or a.op != "load" or a.args or len(a.users) != 1:
            continue
        items = a.attrs["items"]
        dim_items = [it for it in items if it[0] in ("tile", "red", "none")]
        if any(it[0] not in ("tile", "red", "none", "scalar") for it in items) or len(dim_items) != len(a.dims):
            continue
        order = n.attrs["order"]
        a.attrs = dict(a.attrs, items=[it for it in items if it[0] == "scalar"] + [dim_items[i] for i in order])
        a.dims = tuple(n.dims)
        prog.dims_used.add(a.dims)
        n.attrs = dict(n.attrs, order=list(range(len(order))))


def _check_jagged(prog):
    """Every masked access or reduction along a jagged tile also spans the tiles its lengths are over (the
    mask ``index < lengths`` needs them): Helion's rule, and what makes the masked lanes well defined."""
    jagged = [t for t in prog.tiles if t.jagged_parent is not None]
    if not jagged:
        return
    for n, _blk in _all_nodes(prog.body):
        if has(n, MEMORY):
            spans = [n.attrs.get("dims", n.dims)]
        elif has(n, ALONG):
            spans = [a.dims for a in n.args if isinstance(a, Node)]
        else:
            continue
        for dims in spans:
            for t in jagged:
                if any(d is t for d in dims):
                    missing = [p.name for p in t.jagged_parent.dims if not any(d is p for d in dims)]
                    if missing:
                        raise JaggedTile(n.src, problem=f"a value along the jagged tile {t.name!r} without "
                                                        f"its parent tile(s) {', '.join(missing)} (dims "
                                                        f"{_dims_text(dims)})")
