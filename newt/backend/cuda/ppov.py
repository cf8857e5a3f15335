"""Ping-pong and intra-warpgroup overlap together on a warp-specialized loop (issue 24), sm_90a.  Opt-in: both
``NEWT_WS_PINGPONG=1`` and ``NEWT_WS_OVERLAP=1``; off by default.

Taken when the loop has both plans: the ping-pong's (``pingpong.pp_plan``: two consumer warpgroups or more along
M, two top-level wgmma dots) and the overlap's (``overlap.ov_plan``: the first dot's slice re-renderable for the
next iteration, the second in flight, a ring of 3 slots or more).  Anything else keeps whichever of the two
applies alone.

**Schedule** of warpgroup k (``G`` warpgroups, ``n`` iterations; a *turn* is the stretch between the
warpgroup's ``bar.sync`` on its own barrier and its ``bar.arrive`` on the next one's, as in ``pingpong.py``)::

    before:  if (0 < n) wait full[0];  [k > 0: sync(k)]
             QK(0) issue, commit;  arrive(k + 1) unless last;  wait_group 0       # turn 0
    for j:   softmax(j) on S: max, exp2, row sums          # outside every turn, while P.V(j - 1) runs
             pin what follows reads of it (one shared store)
             wait_group 0  -- P.V(j - 1) retired
             the rest: the accumulator's rescale, P to 16 bits
             if (j + 1 < n) wait full[j + 1];  sync(k)
             QK(j + 1) issue, commit, wait_group 1 (nothing older is pending: no wait)
             P.V(j) issue, commit                                            # turn j + 1
             arrive(k + 1) unless last;  wait_group 1  -- retires QK(j + 1), P.V(j) stays in flight
             release the slot of j - 1;  S = QK(j + 1)
    after:   wait_group 0;  release the slot of n - 1

so within a turn a warpgroup issues the next QK and this P.V back to back and hands the tensor cores over, and
the softmax of the next iteration runs while its own P.V and the other warpgroups' GEMMs execute.  The body's
ops are emitted in two parts (:func:`_split`, a valid order of the same ops): first those that read neither the
carried accumulator nor P's conversion, then the rest after the ``wait_group 0``.  ptxas moves register
arithmetic across ``wgmma.wait_group`` and ``bar.sync`` freely: left alone it hoisted the wait above every
``MUFU.EX2`` (no overlap with the own P.V), so the values the rest reads (P in 32 bits, the row max, the
rescale factor, the row sums) are XOR-ed into one ``st.shared`` before the wait (``ws_pp_pin``), which needs
every exp2 first.  P is converted after the wait: its 16-bit registers are the A operand of the P.V in flight
(written before the wait, ptxas made every P.V HGMMA its own group with a ``WARPGROUP.ARRIVE`` before it).
"last" is the last warpgroup's last turn (``j + 1 >= n``; before the loop, ``n == 0``): one predicated
``bar.arrive`` with no branch (``ws_pp_arrive_last``), so every named-barrier phase completes with one arrive
and one sync and nothing is pending at exit.  The last turn's QK(n) reads a slot nobody fills any more (the
producer has issued every copy by then), its result is never read, and the last P.V's ``wait_group 1`` retires
it (``overlap.py``'s argument).  The ring's slot of iteration j is read by QK(j) and P.V(j) and released at the
end of iteration j + 1, after the ``wait_group 0`` that retires P.V(j): three slots held at once, as in
``overlap.py``.

:func:`simulate` replays this on a model of named barriers, of each warpgroup's wgmma groups (``commit``,
``wait_group N`` retiring all but the N newest) and of the ring's mbarriers, over the schedules the tests give:
no deadlock, one warpgroup in a turn at a time and turns round robin, tensor-core work only inside the issuing
warpgroup's turn, every arrive matched by one sync, nothing pending at exit, S read only once its QK retired,
the accumulator read only once the previous P.V retired, every filled slot released exactly once by every
warpgroup, no slot refilled while a wgmma reads it, every real read seeing its own iteration's data.
"""

from __future__ import annotations

from typing import Any

__all__ = ["both", "helpers", "before_loop", "in_loop", "program", "simulate"]


def both(em) -> bool:
    """Whether the warp-specialized loop being emitted takes the combined schedule."""
    pipes = getattr(em, "pipes", None)
    return getattr(pipes, "pingpong", None) is not None and getattr(pipes, "overlap", None) is not None


def helpers(em, pp):
    """``ws_pp_sync``/... (``pingpong.helpers``) and ``ws_pp_arrive_last(wg, last)``: warpgroup ``wg`` passes
    the turn on, except the last warpgroup when ``last`` is nonzero (one asm, predicates, no branch)."""
    from .pingpong import helpers as pp_helpers
    pp_helpers(em, pp)
    g, n = pp.groups, pp.threads
    body = "setp.ne.s32 q, %1, 0; "
    for k in range(g):
        cmp = f"setp.eq.s32 p{k}, %0, {k}; " if k < g - 1 else f"setp.eq.and.s32 p{k}, %0, {k}, !q; "
        body += f"{cmp}@p{k} bar.arrive {pp.barrier((k + 1) % g)}, {n}; "
    preds = ", ".join(f"p{k}" for k in range(g))
    em.helpers.setdefault("ws_ppov", "\n".join([
        "// ---- ping-pong, the next QK issued in the turn (ppov.py): no token after the last warpgroup's last turn",
        "__device__ __forceinline__ void ws_pp_arrive_last(int wg, int last) {",
        f'  asm volatile("{{ .reg .pred {preds}, q; {body}}}" :: "r"(wg), "r"(last) : "memory"); }}']))


def _arrive(cond: str) -> str:
    return f"ws_pp_arrive_last(wg, !({cond}));  // ppov: issued; the next warpgroup's turn (none after the last)"


def before_loop(em, pp, ov, pipe, st, c, rerender) -> str:
    """Turn 0 (QK of the first iteration) before the loop; returns the name of the array that carries S."""
    from .loops import loop_condition
    from .overlap import _issue_next
    from .plan import compact
    op = ov.loop
    helpers(em, pp)
    lb = em.scalar(op.operands[0])
    cond = loop_condition(em, op, lb)
    c.line(f"// ppov: {pp.groups} consumer warpgroups take turns (named barriers {pp.barrier(0)}.."
           f"{pp.barrier(pp.groups - 1)}); a turn issues the next QK and this P.V (ppov.py)")
    c.line(f"if ({cond}) mbar_wait({st.full(st.rd)}, {st.phase});  // the first slot")
    c.line("if ((warp_id >> 2) != 0) ws_pp_sync(warp_id >> 2);  // ppov: warpgroup 0 takes the first turn")
    em.__dict__["_ppov_out"] = {ov.first: _arrive(cond)}
    try:
        s0 = _issue_next(em, ov, pipe, c, lb, st.rd, rerender, in_flight=False)
    finally:
        em.__dict__["_ppov_out"] = {}
    lay = compact(em.layout_of(ov.first.result))
    cur = em.tmp("qk_cur")
    c.line(f"float {cur}[{lay.nregs}];  // S of the iteration the body computes")
    em.for_regs(lay.nregs, f"{cur}[i] = {s0}[i];", c)
    return cur


def _carried_acc(body, pipe) -> list[int]:
    """Indices (into the loop's carried values) of the in-flight dots' accumulators."""
    term = body.terminator
    yields = list(term.operands) if term is not None and term.name == "yield" else []
    return [yields.index(d.result) for d in pipe.async_dots if d.result in yields]


def _pins(em, values, made) -> list[str]:
    """XORs of the registers of ``values`` (of ``made``: results of the ops emitted so far), a value not in
    registers (produced on demand: a broadcast) through its operands."""
    out, seen, stack = [], set(), list(reversed(values))
    while stack:
        v = stack.pop()
        if v in seen or v not in made:
            continue
        seen.add(v)
        p = _pin(em, v)
        if p:
            out.append(p)
        elif v in em.plan.poly and hasattr(v, "owner"):
            stack.extend(reversed(v.owner.operands))
    return out


def _pin(em, v) -> str | None:
    """The XOR of the bits of every register of block ``v`` (P, the second dot's A), or None."""
    from newt.ir.types import scalar_of

    from .plan import compact
    from .vectors import pack_words, to_bits
    lay = em.layout_of(v)
    if lay is None or v in em.plan.poly or scalar_of(v.type).primitive_bitwidth not in (8, 16, 32):
        return None
    name = em.blocks.get((v, compact(lay)))
    if name is None:  # (not in registers: a tile in shared memory)
        return None
    n = compact(lay).nregs
    t = scalar_of(v.type)
    if t.primitive_bitwidth == 32 or n % (32 // t.primitive_bitwidth):
        return " ^ ".join(f"(unsigned)({to_bits(f'{name}[{i}]', t)})" for i in range(n))
    # 16/8-bit: the 32-bit words the second dot's A fragments pack (ptxas keeps its paired conversions)
    return " ^ ".join(pack_words([f"{name}[{i}]" for i in range(n)], t, n * t.primitive_bitwidth // 8))


_EFFECTS = {"store", "print", "assert", "atomic_rmw", "atomic_cas", "atomic_poll", "histogram", "inline_asm"}


def _split(body, skip, second, acc_args):
    """The body's ops less ``skip`` and ``second`` as (before, after): ``after`` those that read the carried
    accumulators, or make the second dot's A operand (P's conversion), directly or through other ops, ``before``
    the rest, each in body order (a valid order: nothing of ``before`` uses a result of ``after``).  A body with an
    effect (a store, an asm) keeps its order: all in ``after``."""
    ops = [o for o in body.ops if o not in skip and o is not second and o.name not in ("yield", "condition")]
    if any(x.name in _EFFECTS or x.name.startswith("atomic") for o in ops for x in [o, *(y for r in o.regions
                                                                                          for y in r.walk())]):
        return [], ops
    tainted = set(acc_args)
    a_op = getattr(second.operands[0], "owner", None)  # P's conversion: after the wait too (the A registers of
    after = []                                          # the P.V in flight are those it writes)
    for o in ops:
        inner = [o, *(y for r in o.regions for y in r.walk())]
        if o is a_op or any(v in tainted for x in inner for v in x.operands):
            after.append(o)
            tainted.update(o.results)
    return [o for o in ops if o not in after], after


def in_loop(em, pp, ov, pipe, st, bodyc, iv: str, cur: str, rerender):
    """The body of the consumers' loop (module doc): the body without the first dot's slice (S bound to
    ``cur``), the ops that do not read the previous P.V's accumulator first, P and what the rest reads of them
    pinned (ptxas would otherwise sink the exp2 below the wait, and into the turn), the wait for that P.V, the
    rest, the turn around the next QK and this P.V, then the next S into ``cur``."""
    from .loops import loop_condition
    from .overlap import _issue_next
    from .plan import compact
    op = ov.loop
    body = op.regions[0]
    step = em.scalar(op.operands[2])
    nx, nph = em.tmp("nx"), em.tmp("nph")
    nxt_cond = loop_condition(em, op, f"({iv} + {step})")
    lay = compact(em.layout_of(ov.first.result))
    em.blocks[(ov.first.result, lay)] = cur
    accs = _carried_acc(body, pipe)
    acc_args = {body.args[1 + i] for i in accs}
    before, after = _split(body, set(ov.slice_ops), ov.second, acc_args)
    targets = em.yield_stack[-1]
    saved = em.cur
    em.cur = bodyc
    try:
        for o in before:
            em.emit_op(o)
        made = {r for o in before for r in o.results}
        term = [body.terminator] if body.terminator is not None else []
        need = [v for o in [*after, *term] for x in [o, *(y for r in o.regions for y in r.walk())]
                for v in x.operands if v in made] + [v for v in ov.second.operands[:1] if v in made]
        pins = _pins(em, need, made)
        if pins:  # (pingpong.dot_hooks' pin: a shared store stays before the waits and barriers after it)
            bodyc.line(f"ws_pp_pin(smem_u32(smem + {st.bars}) + {16 * st.nb}, {' ^ '.join(pins)});  "
                       "// P (and what the rest reads of the softmax) complete before the wait and the turn")
        bodyc.line("wgmma_wait<0>();  // ppov: the previous P.V has retired (its accumulator is read below)")
        for i in accs:
            name, alay, _ = targets[i]
            em.for_regs(alay.nregs, f"wgmma_keep({name}[i]);", bodyc)
        for o in after:
            em.emit_op(o)
        bodyc.line(f"const int {nx} = {st.rd} + 1 == {st.nb} ? 0 : {st.rd} + 1;")
        bodyc.line(f"const unsigned {nph} = {st.rd} + 1 == {st.nb} ? {st.phase} ^ 1u : {st.phase};")
        bodyc.line(f"if ({nxt_cond}) mbar_wait({st.full(nx)}, {nph});  "
                   "// the next slot (the last turn's QK reads a slot nobody fills: never read)")
        bodyc.line("ws_pp_sync(warp_id >> 2);  // ppov: this warpgroup's turn (the next QK, then this P.V)")
        nxt = _issue_next(em, ov, pipe, bodyc, f"({iv} + {step})", nx, rerender)
        em.__dict__["_ppov_out"] = {ov.second: _arrive(nxt_cond)}
        try:
            em.emit_op(ov.second)  # commit, pass the turn, wait_group 1: the next QK retired, this P.V in flight
        finally:
            em.__dict__["_ppov_out"] = {}
        bodyc.line(f"// {nxt}: the next iteration's QK is complete (the wait above)")
        em.for_regs(lay.nregs, f"wgmma_keep({nxt}[i]);", bodyc)
        if body.terminator is not None:
            em.emit_op(body.terminator)
    finally:
        em.cur = saved
    em.for_regs(lay.nregs, f"{cur}[i] = {nxt}[i];  // S of the next iteration", bodyc)


def dot_hook(em, op) -> str:
    """The line after ``op``'s ``commit_group`` in the combined schedule (the turn passed on), or ""."""
    return em.__dict__.get("_ppov_out", {}).get(op, "")


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------


def program(k: int, groups: int, n: int, skip_first: bool = True, last_arrive: bool = False,
            qk_wait: int = 1, acc_wait: bool = True, release_lag: int = 1) -> list:
    """Warpgroup k's steps as the emission orders them (module doc).  The keywords give the variants the tests
    show wrong: warpgroup 0 waiting for a first token, the last warpgroup passing a token after its last turn,
    another ``wait_group`` after the turn, no wait for P.V before the accumulator is read, a release in the slot's
    own iteration (``release_lag=-1``; 0 releases the previous slot right after the ``wait_group 0``, also right)."""
    steps: list[tuple[str, Any]] = []
    if n:
        steps.append(("wait_full", 0))
    if k != 0 or not skip_first:
        steps.append(("sync", k))
    steps += [("commit", ("qk", 0)), ("arrive", n == 0 and k == groups - 1 and not last_arrive), ("wait", 0),
              ("read_s", 0)]
    for j in range(n):
        steps.append(("softmax", j))
        if acc_wait:
            steps.append(("wait", 0))
        steps.append(("read_acc", j))
        if release_lag == 0 and j > 0:
            steps.append(("release", j - 1))
        if j + 1 < n:
            steps.append(("wait_full", j + 1))
        steps += [("sync", k), ("commit", ("qk", j + 1)), ("wait", 1), ("commit", ("pv", j)),
                  ("arrive", j + 1 == n and k == groups - 1 and not last_arrive), ("wait", qk_wait),
                  ("read_s", j + 1)]
        if release_lag == 1 and j > 0:
            steps.append(("release", j - 1))
        if release_lag == -1:
            steps.append(("release", j))
    if n:
        steps += [("wait", 0)] + ([("release", n - 1)] if release_lag >= 0 else [])
    return steps


def simulate(iterations, groups: int, nb: int, order: str, **variant) -> list:
    """Replay the combined schedule (module doc) on a model of the named barriers, the warpgroups' wgmma
    groups and the ring.  ``iterations``: the trip count (or one per warpgroup, to show unequal counts
    deadlock); ``order``: which agent moves next while several can ("p" the producer, digits the warpgroups,
    cycled; a blocked pick falls to the next agent that can move); ``variant``: :func:`program`'s keywords.
    Returns the trace [(agent, step)]; raises AssertionError on any violation (module doc)."""
    runs = [iterations] * groups if isinstance(iterations, int) else list(iterations)
    assert len(runs) == groups
    total = max(runs, default=0)
    progs = [program(k, groups, runs[k], **variant) for k in range(groups)]
    pc = [0] * groups
    arrives = syncs = 0
    groups_q: list[list] = [[] for _ in range(groups)]     # committed, unretired wgmma groups: (what, j, slot)
    from .ringmodel import RingModel, TurnBarriers
    bars = TurnBarriers(groups, first_holds=variant.get("skip_first", True))
    in_turn = bars.in_turn
    trace: list[Any] = []
    ring = RingModel(nb, total, trace)
    full_phase, content, done = ring.full_phase, ring.content, ring.done
    released: dict = {}             # (warpgroup, iteration) -> times its slot was released

    def produce() -> bool:
        return ring.produce(lambda slot: [(k, g) for k in range(groups) for g in groups_q[k] if g[2] == slot])

    def step(k) -> bool:
        nonlocal arrives, syncs
        if pc[k] >= len(progs[k]):
            return False
        kind, arg = progs[k][pc[k]]
        n = runs[k]
        if kind == "wait_full":
            s = arg % nb
            if not done(full_phase[s], (arg // nb) & 1):
                return False
            assert content[s] == arg, f"warpgroup {k}: iteration {arg} finds slot {s} holding {content[s]}"
        elif kind == "sync":
            if not bars.take_turn(k):
                return False
            syncs += 1
        elif kind == "arrive":
            bars.leave_turn(k)
            if not arg:          # (arg: the last warpgroup's last turn, the predicate off)
                bars.arrive((k + 1) % groups)
                arrives += 1
        elif kind == "commit":
            what, j = arg
            assert in_turn[k], f"warpgroup {k} issues {arg} outside its turn"
            s = j % nb
            if j < n:
                assert content[s] == j, f"warpgroup {k}: {what}({j}) reads slot {s} holding {content[s]}"
            else:
                assert what == "qk" and j == n and ring.j == total, f"warpgroup {k}: {arg} past the loop"
            groups_q[k].append((what, j, s))
        elif kind == "wait":
            del groups_q[k][:max(0, len(groups_q[k]) - arg)]
        elif kind == "read_s":
            assert not any(g[:2] == ("qk", arg) for g in groups_q[k]), f"warpgroup {k}: S({arg}) read in flight"
        elif kind == "read_acc":
            assert not any(g[0] == "pv" for g in groups_q[k]), \
                f"warpgroup {k}: the accumulator read in iteration {arg} while P.V is in flight"
        elif kind == "release":
            s = arg % nb
            assert not any(g[2] == s and g[1] < n for g in groups_q[k]), f"warpgroup {k}: slot {s} released while read"
            assert content[s] == arg, f"warpgroup {k} releases slot {s} for iteration {arg}: it holds {content[s]}"
            released[(k, arg)] = released.get((k, arg), 0) + 1
            assert released[(k, arg)] == 1, f"warpgroup {k} releases the slot of iteration {arg} twice"
            ring.release(s, groups)
        trace.append((k, (kind, arg)))
        pc[k] += 1
        return True

    ring.run(produce, step, progs, pc, order)
    bars.check_exit()
    assert arrives == syncs, (arrives, syncs)
    assert not any(groups_q), "wgmma groups left in flight at exit"
    for k in range(groups):
        for i in range(runs[k]):
            assert released.get((k, i)) == 1, f"warpgroup {k} never released the slot of iteration {i}"
    return trace
