"""Whole-dimension reductions looped over chunks (a config's ``reduction_loops``): the computation feeding each
reduction is re-materialized inside the chunk loop, one loop per dependency level, and stores of such values go
in a final loop.  Functions of the generator ``g`` (``deuteron.codegen._Gen``); ``count_uses`` decides which
values get names (read more than once, across blocks or chunk loops)."""

from __future__ import annotations

from .codegen_expr import _dt, _identity, _lit, _paren
from .ops.elementwise import NAN_ALL
from .ops.reduce import NAN_COMBINE
from .optable import BOUND, EFFECT, INDEX, NODE_KINDS, TILE_ATTR, has
from .program import IfStmt, LoopStmt, Node, RInfo

__all__ = ["emit_segment", "count_uses"]


def _rolled(g, n: Node):
    for d in n.dims:
        if isinstance(d, RInfo) and d.id in g.looped:
            return d
    if has(n, EFFECT):
        for d in n.attrs["dims"]:
            if isinstance(d, RInfo) and d.id in g.looped:
                return d
    return None


def emit_segment(g, nodes, indent):
    if not nodes:
        return
    if not g.looped or not any(_rolled(g, n) is not None or _sink(g, n) is not None for n in nodes):
        for n in nodes:
            g.emit_node(n, indent)
        return
    done = set()
    deferred_stores = []
    for i, n in enumerate(nodes):
        if n.id in done:
            continue
        r = _sink(g, n)
        if r is not None:
            group = [n]
            for m in nodes[i + 1:]:
                if m.id in done or _sink(g, m) is not r:
                    continue
                if _ready(g, m, r, set(g.var) | {x.id for x in group}, group):
                    group.append(m)
            for x in group:
                done.add(x.id)
            emit_chunk_loop(g, r, group, [], indent)
            continue
        if _rolled(g, n) is not None:
            if has(n, EFFECT):
                deferred_stores.append(n)
            continue
        g.emit_node(n, indent)
    by_r: dict = {}
    for s in deferred_stores:
        by_r.setdefault(_rolled(g, s).id, []).append(s)
    for rid, stores in by_r.items():
        r = next(x for x in g.prog.rdims if x.id == rid)
        emit_chunk_loop(g, r, [], stores, indent)


def _sink(g, n: Node):
    if n.op == "reduce":
        d = n.attrs["dim"]
        if isinstance(d, RInfo) and d.id in g.looped:
            return d
    return None


def _closure(g, roots, r) -> list:
    """The nodes with dim ``r`` that ``roots`` need, in program order."""
    out = {}
    stack = list(roots)
    while stack:
        n = stack.pop()
        for o in n.operands():
            if o.id in out:
                continue
            if any(d is r for d in o.dims) and o.op not in ("param", "const"):
                out[o.id] = o
                stack.append(o)
    return sorted(out.values(), key=lambda x: x.id)


def _ready(g, m, r, emitted, group) -> bool:
    group_ids = {x.id for x in group}
    for c in _closure(g, [m], r) + [m]:
        for o in c.operands():
            if any(d is r for d in o.dims):
                continue
            if o.id in group_ids:
                return False
            if _is_leaf(o):
                continue
            if o.id not in emitted and g.needs_name(o):
                return False
            if o.id not in emitted and not _inline_ready(g, o, emitted):
                return False
    return True


def _inline_ready(g, o, emitted) -> bool:
    for x in o.operands():
        if x.id in emitted or _is_leaf(x):
            continue
        if g.needs_name(x) or not _inline_ready(g, x, emitted):
            return False
    return True


def emit_chunk_loop(g, r: RInfo, sinks, stores, indent):
    chunk = g.looped[r.id]
    rn = g.rd_names[r.id]
    accs = []
    for s in sinks:
        (a,) = s.args
        kind = s.attrs["kind"]
        acc = g.names.fresh(f"{g.node_name(s)}_acc")
        ident = _identity(kind, a.dtype)
        g.origin(indent, s.src)
        g.w(indent, f"{acc} = nl.full({g.shape_tuple(a.dims)}, {_lit(ident)}, {_dt(a.dtype)})")
        accs.append(acc)
    size = g.scalar_expr(r.size_expr)
    g.w(indent, f"for {rn['off']} in range(0, {size}, {g.block_expr(r)}):  # looped reduction "
                   f"over {r.size} elements, {chunk} at a time")
    inner = indent + 1
    g.w(inner, f"{rn['offs']} = {rn['off']} + nl.arange(0, {g.block_expr(r)})")
    if g.rdim_mask_needed(r):
        g.w(inner, f"{rn['mask']} = {rn['offs']} < {size}")
    saved_var = dict(g.var)
    body = _closure(g, sinks + stores, r)
    for n in body:
        g.emit_node(n, inner)
    for s, acc in zip(sinks, accs):
        (a,) = s.args
        kind = s.attrs["kind"]
        x = g.masked(a, s.attrs["axis"], _identity(kind, a.dtype), s.attrs["dim"])
        if kind == "sum":
            g.w(inner, f"{acc} = {acc} + {_paren(x)}")
        elif kind == "prod":
            g.w(inner, f"{acc} = {acc} * {_paren(x)}")
        else:
            nan = NAN_ALL if a.dtype.is_floating_point else ""
            g.w(inner, f"{acc} = nl.{'maximum' if kind == 'max' else 'minimum'}({acc}, {x}{nan})")
    for st in stores:
        g.origin(inner, st.src)
        NODE_KINDS[st.op].emit(g, st, inner)
    g.var = saved_var
    g.last_line = None
    for s, acc in zip(sinks, accs):
        kind = s.attrs["kind"]
        kd = ", keep_dims=True" if s.attrs["keepdim"] else ""
        fn = {"sum": "nl.sum", "max": "nl.max", "min": "nl.min"}.get(kind)
        nm = g.node_name(s)
        ax = g.rpos(s.args[0].dims, s.attrs["axis"])
        if kind in NAN_COMBINE and s.args[0].dtype.is_floating_point:
            g.w(indent, f"{nm} = nl.reduce({acc}, {ax}, {NAN_COMBINE[kind]}{kd})")
        elif fn is None:
            g.w(indent, f"{nm} = nl.reduce({acc}, {ax}, _dt_mul{kd})")
        else:
            g.w(indent, f"{nm} = {fn}({acc}, axis={ax}{kd})")
        g.var[s.id] = nm


def _is_leaf(n) -> bool:
    """A value every block can read without emitting it (a parameter, constant, loop variable, tile attribute)."""
    t = NODE_KINDS[n.op].traits
    return BOUND in t or TILE_ATTR in t or INDEX in t


def count_uses(g):
    """How often each value is read, and which are read across blocks or chunk loops (those get names)."""
    from .trace_common import all_nodes
    for n, blk in all_nodes(g.prog.body):
        for o in n.operands():
            g.use_count[o.id] = g.use_count.get(o.id, 0) + 1
            if o.block is not None and o.block is not blk:
                g.cross_block.add(o.id)
            if g.looped and _rolled(g, n) is not None and _rolled(g, o) is None:
                g.cross_block.add(o.id)
            if _sink(g, n) is not None:
                g.cross_block.add(o.id)
        for it in n.attrs.get("items", ()):
            if it[0] in ("vec", "scalar") and len(it) > 3 and isinstance(it[1], Node):
                # an index checked against its dimension's size is read by the mask too: a named value
                g.use_count[it[1].id] = g.use_count.get(it[1].id, 0) + 1

    def visit(block):
        for s in block.stmts:
            if isinstance(s, LoopStmt):
                for c in s.carried:
                    for v in (c.init, c.result):
                        if isinstance(v, Node):
                            g.use_count[v.id] = g.use_count.get(v.id, 0) + 1
                            g.cross_block.add(v.id)
                visit(s.body)
            elif isinstance(s, IfStmt):
                if isinstance(s.cond, Node):
                    g.use_count[s.cond.id] = g.use_count.get(s.cond.id, 0) + 1
                for m in s.merged:
                    for v in (m.then_val[0], m.else_val[0]):
                        if isinstance(v, Node):
                            g.use_count[v.id] = g.use_count.get(v.id, 0) + 1
                            g.cross_block.add(v.id)
                visit(s.then_block)
                visit(s.else_block)
    visit(g.prog.body)
    for t in g.prog.tiles:  # read by every masked access along a jagged tile: always a named variable
        if t.jagged_mask is not None:
            g.use_count[t.jagged_mask.id] = g.use_count.get(t.jagged_mask.id, 0) + 2
