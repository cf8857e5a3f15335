"""Ping-pong between consumer warpgroups (FlashAttention-3's "warp scheduler" barriers; issue 24), on top of a
warp-specialized loop (``warpspec.py``), sm_90a.  Opt-in: ``NEWT_WS_PINGPONG=1`` (Triton 3.6 has no such knob;
Meta's fork gates its pass with ``ENABLE_PINGPONG``).

**Eligible** (:func:`pp_plan`): the warp-specialized loop is at the kernel's top level (no tile loop around it),
``num_warps`` = 4 * G with G >= 2 consumer warpgroups, and its body holds exactly two dots, both at the body's top
level and on wgmma, each laid out with the G warpgroups along M only (``warpgroups(M, N, num_warps) == (G, 1,
False)``: M >= 64 G).  Attention at BLOCK_M = 128 and 8 warps: QK, then the softmax, then P.V.  The loop's bounds
are scalars, the same for every thread of the block, so every warpgroup runs the same number of iterations (a
causal kernel's diagonal is a mask inside the iteration, not a shorter loop); a body whose generated code holds a
block-wide barrier (a conversion through shared memory, a staged operand) is not eligible either: the code is
generated again without the ping-pong (:class:`PingPongUnfit`).  Anything else keeps the plain warp-specialized
loop, silently.

**Rows.** wgmma is a warpgroup instruction: with G warpgroups along M each one already issues its own
``m64nNk16`` instructions for its own 64-row blocks (``dot/wgmma.py``: ``wg_m = wg``, A's descriptor starts at
row ``64 wg``, P.V's A fragments are the warpgroup's own accumulator rows), and the softmax's row reductions stay
inside a warp.  No instruction couples two warpgroups except the ring's ``empty`` barriers (every consumer thread
releases a slot) and block-wide barriers (excluded above), so the ping-pong needs no new layout: it only orders
when each warpgroup issues.

**Protocol.**  Named barrier ``PP_BARRIER0 + k`` (2, 3, ...: 0 is ``__syncthreads``, 1 the consumers' barrier of
``warpspec.CONSUMER_BARRIER``) belongs to warpgroup k, 256 threads: warpgroup k ``bar.sync``-s on it, warpgroup
``k - 1`` (mod G) ``bar.arrive``-s on it.  A *turn* is the stretch of one warpgroup between its ``bar.sync`` and its
``bar.arrive``; it holds the second dot of iteration ``j - 1`` (P.V) and the first of iteration ``j`` (QK)::

    warpgroup k:  [k > 0: sync(k)]
                  for j:  wait full[j];  QK(j) issue, commit;  arrive(k + 1);  wait QK(j)
                          softmax(j)                                   <- outside the turn
                          sync(k);  P.V(j) issue, commit (in flight)
                  [k < G - 1: arrive(k + 1)];  drain;  epilogue

Turns go round robin, warpgroup 0 first without waiting, so the softmax of one warpgroup runs while the next
issues its GEMMs (FA3's schedule without intra-warpgroup overlap; ``mainloop_fwd_sm90_tma_gmma_ws.hpp``'s
``warp_scheduler_barrier_sync/arrive``).  Each barrier phase completes with exactly one ``arrive`` and one
``sync``; the last warpgroup does not pass the token after its last turn, so no arrival is left pending when the
block exits.  :func:`simulate` replays this, with the ring of ``warpspec.simulate``, on a model of named
barriers and mbarriers over every schedule the tests give it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from newt.ir.types import shape_of

__all__ = ["PingPong", "PingPongUnfit", "pp_forced", "pp_plan", "simulate", "PP_BARRIER0"]

#: the first warpgroup's turn barrier; warpgroup k uses PP_BARRIER0 + k (16 named barriers per block): 0 is
#: ``__syncthreads``, 1 ``warpspec.CONSUMER_BARRIER`` (no import: warpspec and dot/wgmma import this module)
PP_BARRIER0 = 2


def pp_forced() -> bool:
    """``NEWT_WS_PINGPONG=1``: every eligible warp-specialized loop takes the ping-pong."""
    return os.environ.get("NEWT_WS_PINGPONG", "") == "1"


class PingPongUnfit(Exception):
    """The loop body's generated code has a block-wide barrier: generate the kernel again without ping-pong."""


@dataclass(frozen=True, eq=False)
class PingPong:
    loop: object      # the warp-specialized scf.for
    first: object     # the dot that ends a turn (arrive after its commit): QK
    second: object    # the dot that starts a turn (sync before it): P.V
    groups: int       # consumer warpgroups

    def barrier(self, wg: int) -> int:
        return PP_BARRIER0 + wg

    @property
    def threads(self) -> int:  # one warpgroup syncs, one arrives
        return 256


def pp_plan(op, outer, layouts, num_warps: int):
    """The ping-pong of the warp-specialized loop ``op`` (module doc), or None."""
    if op is None or outer is not None or not pp_forced():
        return None
    groups = num_warps // 4
    if num_warps % 4 or groups < 2 or groups & (groups - 1) or PP_BARRIER0 + groups > 16:
        return None
    body = op.regions[0]
    dots = [o for o in body.walk() if o.name == "dot"]
    top = [o for o in body.ops if o.name == "dot"]
    if len(dots) != 2 or len(top) != 2:
        return None
    for d in top:
        if getattr(layouts.dot.get(d), "name", None) != "wgmma":
            return None
        M, N = shape_of(d.result.type)
        if M < 64 * groups:  # (= dot/wgmma.warpgroups(M, N, num_warps) == (groups, 1, False): every warpgroup
            return None      # along M, each its own 64-row blocks; tested against it)
    if _bounds_use_asm(op):
        return None
    return PingPong(op, top[0], top[1], groups)


def _bounds_use_asm(op) -> bool:
    """Whether a loop bound comes from inline asm (it could differ between warps: then the warpgroups'
    trip counts could differ, and the turns would deadlock)."""
    seen, stack = set(), list(op.operands[:3])
    while stack:
        o: Any = getattr(stack.pop(), "owner", None)
        if not hasattr(o, "operands") or id(o) in seen:
            continue  # a parameter or a block argument
        seen.add(id(o))
        if o.name == "inline_asm":
            return True
        stack.extend(o.operands)
    return False


# ---------------------------------------------------------------------------
# emission (called from warpspec.emit_ws_for and dot/wgmma.py)
# ---------------------------------------------------------------------------


def helpers(em, pp: PingPong):
    """``ws_pp_sync(wg)`` / ``ws_pp_arrive(wg)``: one asm each, the barrier picked by predicates on the
    warpgroup index so the ids stay immediates (the SASS names each barrier) and no branch splits the wgmma
    pipeline stage (a C-level ``if`` around ``bar.arrive`` between a commit and its wait made ptxas serialize
    every wgmma of the loop: C7515, "non wgmma instructions defining accumulator registers")."""
    g, n = pp.groups, pp.threads
    lines = ["// ---- ping-pong between consumer warpgroups: named barrier PP_BARRIER0 + k is warpgroup k's turn"]
    for fn, verb, who, ks in (("ws_pp_sync", "sync", lambda k: k, range(g)),
                              ("ws_pp_arrive", "arrive", lambda k: (k + 1) % g, range(g)),
                              ("ws_pp_pass", "arrive", lambda k: k + 1, range(g - 1))):  # (all but the last)
        body = "".join(f"setp.eq.s32 p{k}, %0, {k}; @p{k} bar.{verb} {pp.barrier(who(k))}, {n}; " for k in ks)
        preds = ", ".join(f"p{k}" for k in ks)
        lines.append(f"__device__ __forceinline__ void {fn}(int wg) {{")
        lines.append(f'  asm volatile("{{ .reg .pred {preds}; {body}}}" :: "r"(wg) : "memory"); }}')
    lines.append("__device__ __forceinline__ void ws_pp_pin(unsigned addr, unsigned x) {")
    lines.append('  asm volatile("st.shared.u32 [%0], %1;" :: "r"(addr), "r"(x) : "memory"); }')
    em.helpers.setdefault("ws_pingpong", "\n".join(lines))


def before_loop(em, pp: PingPong, c):
    helpers(em, pp)
    c.line(f"// ping-pong: {pp.groups} consumer warpgroups take turns on the tensor cores (named barriers "
           f"{pp.barrier(0)}..{pp.barrier(pp.groups - 1)}); warpgroup 0 starts, the others wait for their first turn")
    c.line("if ((warp_id >> 2) != 0) ws_pp_sync(warp_id >> 2);")


def after_loop(em, pp: PingPong, c):
    c.line("ws_pp_pass(warp_id >> 2);  // ping-pong: the last turn (P.V) is issued; the last warpgroup passes no "
           "token (no branch: P.V is still in flight)")


def dot_hooks(em, op, pin=()) -> tuple[str, str]:
    """(lines before the dot's first ``wgmma.fence``, line after its ``commit_group``), empty when ``op`` has
    no part in a ping-pong.  Inside the dot's block ``wg`` is the warp's warpgroup.

    ``pin``: the registers holding the second dot's A fragments (P).  ptxas schedules register arithmetic
    across ``bar.sync`` freely, and in causal attention it sank the whole softmax (every ``MUFU.EX2``) below
    the turn's ``bar.sync``, into the turn; so before the sync each thread stores the XOR of those registers to
    one shared word (``st.shared``: a memory access, which stays before the barrier, and which needs every P
    value, hence every exp2, computed first)."""
    pp = getattr(em.pipes, "pingpong", None)
    if pp is None:
        return "", ""
    if op is pp.second:
        st = em.__dict__["_ws_state"]
        lines = []
        if pin:
            x = " ^ ".join(pin)
            lines.append(f"ws_pp_pin(smem_u32(smem + {st.bars}) + {16 * st.nb}, {x});  // P complete before the turn")
        lines.append("ws_pp_sync(wg);  // ping-pong: this warpgroup's turn (this P.V, then the next QK)")
        return "\n".join(lines), ""
    if op is pp.first:
        return "", "ws_pp_arrive(wg);  // ping-pong: issued; the next warpgroup's turn while this one waits"
    return "", ""


def check_body(chunk):
    """Raise :class:`PingPongUnfit` when the rendered loop body synchronizes the block (module doc)."""
    out: list = []
    chunk.render(out, [])
    text = "\n".join(out)
    if "__syncthreads" in text or "bar.sync" in text or "barrier.sync" in text:
        raise PingPongUnfit


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------


def _program(k: int, groups: int, n: int, behind: bool, skip_first: bool, last_arrive: bool, barrier_at):
    """Warpgroup k's steps, as the emission orders them (module doc)."""
    steps: list[tuple[str, Any]] = []
    if k != 0 or not skip_first:
        steps.append(("sync", k))
    for i in range(n):
        if barrier_at == "turn":
            steps.append(("block_sync", i))
        steps += [("wait_full", i), ("mma", ("qk", i)), ("arrive", (k + 1) % groups), ("retire", i)]
        if barrier_at == "softmax":
            steps.append(("block_sync", i))
        steps += [("softmax", i), ("sync", k), ("mma", ("pv", i)), ("release", i)]
    if k != groups - 1 or last_arrive:
        steps.append(("arrive", (k + 1) % groups))
    steps += [("drain", n), ("block_sync", -1)]
    return steps


def simulate(iterations, groups: int, nb: int, behind: bool, order: str, skip_first: bool = True,
             last_arrive: bool = False, barrier_at: str | None = None) -> list:
    """Replay the ping-pong on a model of named barriers and of ``warpspec``'s ring.

    ``iterations``: the trip count, or one per warpgroup (they differ only to show what would happen);
    ``groups`` consumer warpgroups; ``nb`` ring slots; ``behind``: P.V stays in flight into the next iteration
    (its slot is read until the next QK's ``wait_group 0`` and released at the end of that iteration).
    ``order``: which agent moves next while several can (a string over "p" and the digits of the warpgroups,
    cycled; a blocked pick falls to the next agent that can move).  ``skip_first=False`` makes warpgroup 0
    wait for a first token too, ``last_arrive=True`` lets the last warpgroup pass a token after its last turn,
    ``barrier_at`` puts a block-wide barrier in the turn or in the softmax (the variants the tests show wrong).

    Checks: no deadlock; at most one warpgroup inside a turn; tensor-core work only inside the issuing
    warpgroup's turn and turns in round-robin order; a named-barrier phase completes with one arrive and one
    sync (never two arrivals); no arrival pending at exit; the ring's reads see their own iteration's data and
    no slot is refilled while a wgmma reads it.  Returns the trace [(agent, step)]."""
    runs = [iterations] * groups if isinstance(iterations, int) else list(iterations)
    assert len(runs) == groups
    total = max(runs, default=0)
    progs = [_program(k, groups, runs[k], behind, skip_first, last_arrive, barrier_at) for k in range(groups)]
    pc = [0] * groups
    # named barriers: units (warpgroups) counted in the current phase, and who is blocked in bar.sync
    block = {"count": 0, "phase": 0}
    block_seen = [-1] * groups     # the block barrier phase each warpgroup waits for
    # the ring: full[s] completes when the producer fills it; empty[s] needs every warpgroup's release
    from .ringmodel import RingModel, TurnBarriers
    bars = TurnBarriers(groups, PP_BARRIER0, first_holds=skip_first)
    in_turn = bars.in_turn
    trace: list[Any] = []
    ring = RingModel(nb, total, trace)
    full_phase, content, done = ring.full_phase, ring.content, ring.done
    reading: list[set] = [set() for _ in range(nb)]
    rd = [0] * groups
    cph = [0] * groups

    def release(s):
        ring.release(s, groups)

    def produce() -> bool:
        return ring.produce(lambda slot: reading[slot])

    def step(k) -> bool:
        if pc[k] >= len(progs[k]):
            return False
        kind, arg = progs[k][pc[k]]
        s: Any = (arg % nb) if isinstance(arg, int) and arg >= 0 else None
        if kind == "sync":
            if not bars.take_turn(k):
                return False      # blocked in bar.sync
        elif kind == "arrive":
            bars.leave_turn(k)
            bars.arrive(arg)
        elif kind == "wait_full":
            if not done(full_phase[rd[k]], cph[k]):
                return False
            assert content[rd[k]] == arg, f"warpgroup {k}: iteration {arg} reads slot {rd[k]} holding {content[rd[k]]}"
        elif kind == "mma":
            assert in_turn[k], f"warpgroup {k} issues {arg} outside its turn"
            reading[rd[k]].add((k, arg))
        elif kind == "retire":   # QK's wait_group 0: QK(i) and the P.V of i - 1 are complete
            reading[s].discard((k, ("qk", arg)))
            if arg > 0:
                reading[(arg - 1) % nb].discard((k, ("pv", arg - 1)))
        elif kind == "release":
            if not behind:       # P.V waited for itself: the slot of this iteration is free
                reading[s].discard((k, ("pv", arg)))
                release(s)
            elif arg > 0:        # in flight: the previous slot, retired by this iteration's QK wait
                release((arg - 1) % nb)
            rd[k] += 1
            if rd[k] == nb:
                rd[k], cph[k] = 0, cph[k] ^ 1
        elif kind == "drain":
            if behind and arg > 0:
                reading[(arg - 1) % nb].discard((k, ("pv", arg - 1)))
                release((arg - 1) % nb)
        elif kind == "block_sync":   # bar.sync 1 over every consumer warpgroup
            if block_seen[k] < 0:
                block_seen[k] = block["phase"]
                block["count"] += 1
                if block["count"] == groups:
                    block["count"] = 0
                    block["phase"] += 1
            if block["phase"] == block_seen[k]:
                return False
            block_seen[k] = -1
        trace.append((k, (kind, arg)))
        pc[k] += 1
        return True

    ring.run(produce, step, progs, pc, order)
    bars.check_exit()
    return trace
