"""Intra-warpgroup overlap on a warp-specialized loop (FlashAttention-3's ``IntraWGOverlap``; issue 24), sm_90a.
Opt-in: ``NEWT_WS_OVERLAP=1``; with the ping-pong (``pingpong.py``, ``NEWT_WS_PINGPONG=1`` too) the two are
combined (``ppov.py``: the loop then has both plans).

The loop body's first dot (QK) of iteration ``j + 1`` is issued before the rest of iteration ``j`` (the softmax,
P.V) and waited for with P.V(j), so the tensor cores run it while the warps compute the softmax::

    before:   if (lb < ub) wait full[rd];  S = QK(lb), waited for at once
    for j:    if (j + step < ub) wait full[rd + 1];
              S' = QK(j + 1) issue, commit                         <- runs during the softmax
              softmax(j) on S;  P.V(j) issue, commit;  wait_group 0   <- retires QK(j + 1) and P.V(j)
              release slot of j - 1;  S = S'
    after:    release the last slot (the last QK was issued on a slot nobody fills any more)

P.V waits for itself here (it stays in flight into the next iteration in the plain loop): reading its accumulator
after a ``wait_group 1`` that retires it one iteration later, behind the next QK, made ptxas serialize every
wgmma (C7514), as did a QK left in flight across the loop's entry (so the first QK is waited for at once) and a
copy of the in-flight QK's registers (they are read only after the wait that retires them).

**Eligible** (:func:`ov_plan`): a warp-specialized loop at the kernel's top level, exactly two top-level wgmma
dots, the second planned in flight (``Pipeline.async_dots``: the ring has ``num_stages + 1`` slots, at least 3),
the first not, with a loop-invariant A, a B from the ring (through views) and a constant accumulator; the ops
the first dot needs inside the body only that load, its views and the dot, used by nothing else.  Anything else
keeps the plain loop, silently (``metadata["ws_overlap"]`` = 1 when taken).

**Ring.** The release stays one iteration behind (as for the plain loop's in-flight P.V): iteration ``j`` waits
for slot ``j + 1`` before it releases slot ``j - 1``, three slots held at once, so the producer, which refills
slot ``j + 1`` once slot ``j + 1 - NB`` is free, never waits for the consumers while they wait for it when
``NB >= 3``, and with two slots it would deadlock (:func:`simulate`).  The last iteration's
QK(j + 1) reads a slot for an iteration that does not exist: the producer has issued all its copies by then,
nothing writes that slot, its (stale) result is never read, and it is retired before the epilogue.  Its issue is
not under a branch: a C branch between a wgmma's commit and its wait made ptxas serialize (``pingpong.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = ["Overlap", "ov_forced", "ov_plan", "program", "simulate"]


def ov_forced() -> bool:
    """``NEWT_WS_OVERLAP=1``: every eligible warp-specialized loop issues its QK one iteration ahead."""
    return os.environ.get("NEWT_WS_OVERLAP", "") == "1"


@dataclass(frozen=True, eq=False)
class Overlap:
    loop: Any
    first: Any          # the dot issued one iteration ahead (QK)
    second: Any         # the other dot (P.V): waited for in its own iteration (wait_group 0)
    slice_ops: tuple       # the body ops it needs, in body order (its ring load, views, the dot)


_VIEWS = {"permute", "trans", "reshape", "expand_dims", "broadcast", "splat", "convert_layout"}


def ov_plan(op, outer, pipe, layouts, pingpong) -> Overlap | None:
    if op is None or outer is not None or not ov_forced():
        return None
    body = op.regions[0]
    dots = [o for o in body.walk() if o.name == "dot"]
    top = [o for o in body.ops if o.name == "dot"]
    if len(dots) != 2 or len(top) != 2 or not all(getattr(layouts.dot.get(d), "name", None) == "wgmma" for d in top):
        return None
    first, second = top
    if second not in pipe.async_dots or first in pipe.async_dots or (pipe.buffers or pipe.stages) < 3:
        return None
    inside = set(body.ops)
    loads = {pl.op for pl in pipe.loads}
    a, b, acc = first.operands
    if getattr(a.owner, "name", None) is None or a.owner in inside:
        return None  # A must be loop-invariant (defined before the loop)
    if acc.owner in inside and not (acc.owner.name in ("constant", "splat") and not acc.owner.operands) \
            and not (acc.owner.name == "splat" and getattr(acc.owner.operands[0].owner, "name", None) == "constant"):
        return None
    need, stack = [], [b]
    while stack:
        v = stack.pop()
        o: Any = getattr(v, "owner", None)
        if o not in inside:
            continue
        if o in loads:
            need.append(o)
            continue
        if o.name not in _VIEWS:
            return None
        need.append(o)
        stack.extend(o.operands)
    if not any(o in loads for o in need):
        return None
    if acc.owner in inside:
        need.append(acc.owner)
        need.extend(x.owner for x in acc.owner.operands if getattr(x, "owner", None) in inside)
    need.append(first)
    keep = set(need)
    results = {r for o in keep if o is not first for r in o.results}
    if any(v in results for o in body.walk() if o not in keep for v in o.operands):
        return None  # the slice is skipped in the body: nothing else may use it
    return Overlap(op, first, second, tuple(o for o in body.ops if o in keep))


def program(iterations: int) -> list:
    """The consumers' steps as the emission orders them (module doc)."""
    prog = [("wait", 0), ("issue_qk", 0), ("wait_all", 0)] if iterations else []
    for j in range(iterations):
        if j + 1 < iterations:
            prog.append(("wait", j + 1))
        prog += [("issue_qk", j + 1), ("issue_pv", j), ("wait_all", j), ("release", j - 1)]
    return prog + [("release", iterations - 1)] if iterations else prog


def simulate(iterations: int, nb: int, order: str) -> list:
    """The ring with QK one iteration ahead (module doc, :func:`program`) on a model of mbarriers: the consumers
    wait ``full`` of iteration ``j + 1`` in iteration ``j`` and issue its QK, issue P.V(j), wait for both
    (``wait_group 0``), and release slot ``j - 1`` at the end of iteration ``j`` (the last slot after the
    loop; the last QK reads a slot nobody fills any more).  ``order``: "p"/"c" cycled, as in
    ``warpspec.simulate``.  Raises AssertionError on a deadlock, a refill of a slot being read, a read of a slot
    not filled for its iteration, or a release of a slot still read."""
    from .ringmodel import RingModel
    trace: list = []
    ring = RingModel(nb, iterations, trace)
    full_phase, empty_phase, content, done = ring.full_phase, ring.empty_phase, ring.content, ring.done
    reading: set = set()          # (slot, what, iteration) of the wgmmas in flight
    prog = program(iterations)
    pc = 0

    def produce() -> bool:
        return ring.produce(lambda slot: {r for r in reading if r[0] == slot})

    def consume() -> bool:
        nonlocal pc
        if pc >= len(prog):
            return False
        kind, i = prog[pc]
        s = i % nb
        if kind == "wait":
            if not done(full_phase[s], (i // nb) & 1):
                return False
        elif kind in ("issue_qk", "issue_pv"):
            if i < iterations:
                assert content[s] == i, f"{kind}({i}) reads slot {s} holding {content[s]}"
            reading.add((s, kind, i))
        elif kind == "wait_all":
            reading.clear()
        elif kind == "release" and i >= 0:
            assert not {r for r in reading if r[0] == s}, f"slot {s} released while read"
            empty_phase[s] += 1
        trace.append(("c", prog[pc]))
        pc += 1
        return True

    import itertools
    moves = itertools.cycle(order)
    while pc < len(prog):
        first, second = (produce, consume) if next(moves) == "p" else (consume, produce)
        assert first() or second(), f"deadlock: producer at iteration {ring.j}, consumer at {prog[pc]}"
    return trace


# ---------------------------------------------------------------------------
# emission (called from warpspec.emit_ws_for; dot/wgmma.py leaves ``em._ov_issue`` in flight)
# ---------------------------------------------------------------------------


def _issue_next(em, ov: Overlap, pipe, chunk, iv_expr: str, slot: str, rerender, in_flight: bool = True) -> str:
    """Render the first dot's slice for the iteration whose induction variable is ``iv_expr`` reading ring slot
    ``slot`` (issued, committed, ``wait_group 1``: left in flight, unless ``in_flight`` is False); return its
    result's C array.  ``rerender``: warpspec's (_saved, _restore, _fresh), passed in (warpspec imports this
    module)."""
    _saved, _restore, _fresh = rerender
    body = ov.loop.regions[0]
    saved = _saved(em)
    bases = dict(em.pipe_read_base)
    try:
        _fresh(em, ov.slice_ops)
        em.scalars[body.args[0]] = iv_expr
        for pl in pipe.loads:
            em.pipe_read_base[pl.op] = f"(smem + {pl.buf} + ({slot}) * {pl.tile.size_bytes})"
        em.cur = chunk
        em.last_line = None
        em.__dict__["_ov_issue"] = ov.first if in_flight else None
        for o in ov.slice_ops:
            em.emit_op(o)
        if in_flight:  # the accumulator array itself: nothing reads it before the wait that retires it
            return em.__dict__.pop("_ov_acc")
        return next(n for (v, _), n in em.blocks.items() if v is ov.first.result)
    finally:
        em.__dict__["_ov_issue"] = None
        em.pipe_read_base.clear()
        em.pipe_read_base.update(bases)
        _restore(em, saved)


def before_loop(em, ov: Overlap, pipe, st, c, rerender) -> str:
    """The first QK, issued before the loop; returns the name of the array that carries S."""
    from .plan import compact
    op = ov.loop
    lb = em.scalar(op.operands[0])
    from .loops import loop_condition
    c.line("// intra-warpgroup overlap: QK of iteration j + 1 is issued before the softmax of j (overlap.py)")
    c.line(f"if ({loop_condition(em, op, lb)}) mbar_wait({st.full(st.rd)}, {st.phase});  // the first slot")
    # (waited for here: a wgmma left in flight across the loop's entry made ptxas serialize them all, C7515)
    s0 = _issue_next(em, ov, pipe, c, lb, st.rd, rerender, in_flight=False)
    lay = compact(em.layout_of(ov.first.result))
    cur = em.tmp("qk_cur")
    c.line(f"float {cur}[{lay.nregs}];  // S of the iteration the body computes")
    em.for_regs(lay.nregs, f"{cur}[i] = {s0}[i];", c)
    return cur


def in_loop(em, ov: Overlap, pipe, st, bodyc, iv: str, cur: str, rerender):
    """The body of the consumers' loop: wait for the next slot, issue the next QK, fence what its wait retired,
    then the body without the first dot (S bound to ``cur``), then the next S into ``cur``."""
    from .loops import loop_condition
    from .plan import compact
    op = ov.loop
    body = op.regions[0]
    step = em.scalar(op.operands[2])
    nx, nph = em.tmp("nx"), em.tmp("nph")
    bodyc.line(f"const int {nx} = {st.rd} + 1 == {st.nb} ? 0 : {st.rd} + 1;")
    bodyc.line(f"const unsigned {nph} = {st.rd} + 1 == {st.nb} ? {st.phase} ^ 1u : {st.phase};")
    bodyc.line(f"if ({loop_condition(em, op, f'({iv} + {step})')}) mbar_wait({st.full(nx)}, {nph});  "
               "// the next slot (the last iteration issues on a slot nobody fills: never read)")
    nxt = _issue_next(em, ov, pipe, bodyc, f"({iv} + {step})", nx, rerender)
    lay = compact(em.layout_of(ov.first.result))
    em.blocks[(ov.first.result, lay)] = cur
    skip = set(ov.slice_ops)
    saved = em.cur
    em.cur = bodyc
    em.__dict__["_ov_wait_all"] = ov.second
    try:
        for o in body.ops:
            if o in skip:
                continue
            em.emit_op(o)
            if o is ov.second:  # its wait_group 0 retired the next QK
                bodyc.line(f"// {nxt}: the next iteration's QK is complete (the wait above)")
                em.for_regs(lay.nregs, f"wgmma_keep({nxt}[i]);", bodyc)
    finally:
        em.cur = saved
        em.__dict__["_ov_wait_all"] = None
    em.for_regs(lay.nregs, f"{cur}[i] = {nxt}[i];  // S of the next iteration", bodyc)

