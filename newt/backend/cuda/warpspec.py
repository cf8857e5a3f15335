"""Warp specialization on sm_90a (issue 24): a software-pipelined loop whose copies are all TMA is split
between a **producer warpgroup** that only issues the copies and the **consumer warps** that run the rest.

Selected by ``nl.range(..., warp_specialize=True)`` (Triton's knob) or, for every eligible loop,
``NEWT_WARP_SPECIALIZE=1``.  Eligible (:func:`ws_loop`): the kernel's only pipelined loop, at the top
level of the kernel or directly inside a top-level loop (a persistent kernel's tile loop, which the
producer then walks too: :func:`outer_slice`), every pipelined load a TMA box (``tma.py``), every dot in it
on wgmma, ``num_warps`` a multiple of 4, and no store, atomic, print or assert before the split (the
producer runs that code too).  Anything else keeps the ordinary pipeline, silently.

``num_warps`` counts the consumer warps, as in Triton (``ttg.num-warps`` is the default partition; the
partitions' warps are added on top, ``ttg.total-num-warps``): the block has ``32 * num_warps + 128``
threads, the producer warpgroup last (``CudaModule.producer_warps``, ``metadata["producer_warps"]``).

The protocol, one ring of ``NB`` slots (the pipeline's buffers), two mbarriers per slot:

* ``full[s]`` (arrival count 1): the producer's ``arrive.expect_tx`` with the slot's bytes; the TMA copies
  complete the transaction.  The consumers wait for it with parity ``(i / NB) & 1`` in iteration ``i``.
* ``empty[s]`` (arrival count ``32 * num_warps``): every consumer thread arrives once it has finished
  reading the slot -- after the body when every wgmma waits for itself, or one iteration later when the
  accumulation stays in flight (``wgmma.wait_group 1`` in iteration ``i + 1`` retires the wgmma of ``i``).
  The producer waits for it with parity ``((j / NB) & 1) ^ 1`` before it refills the slot for iteration
  ``j``: a fresh barrier counts its phase "-1" (parity 1) as complete, so the first pass does not wait.

Each side keeps a slot index and one phase bit flipped when its index wraps, across the runs of the loop
in a tile loop (after each run the consumers drain the in-flight wgmma and release its slot);
:func:`simulate` replays the same arithmetic in Python for the tests.  Before the split every thread runs
the kernel's prologue (the producer's warp index is folded onto the consumers' so its layouts stay in range), then a
``__syncthreads`` and the branch: the producer gives registers back (``setmaxnreg.dec``), one elected
thread runs the copy loop, and the warpgroup returns; the consumers take the registers
(``setmaxnreg.inc``), run the loop and everything after it.  Past the split ``__syncthreads()`` is a
named barrier over the consumer threads only (``bar.sync 1, 32 * num_warps``).
"""

from __future__ import annotations

import os

from newt.ir.ops import ATOMIC
from newt.ir.types import is_block

from .issue import _PURE, _issue
from .loops import bind_var, declare_var, loop_condition, loop_header
from .ringmodel import RingModel

__all__ = ["ws_forced", "ws_loop", "emit_ws_for", "register_split", "simulate", "PRODUCER_WARPS"]

#: the producer: one warpgroup (setmaxnreg acts per warpgroup)
PRODUCER_WARPS = 4
#: registers the producer keeps (CUTLASS's load warpgroup: 40)
PRODUCER_REGS = 40
#: registers the producer keeps under the ping-pong with the overlap (``ppov.py``: its consumers hold two S tiles, the
#: accumulator and P; the producer of a top-level loop needs few): 24, so two consumer warpgroups get 240
PPOV_PRODUCER_REGS = 24
#: the named barrier the consumers use for ``__syncthreads`` past the split (0 is __syncthreads itself)
CONSUMER_BARRIER = 1

#: ops the producer warps must not run a second time before the split (writes, atomics, output);
#: ``histogram`` counts with shared-memory atomics, an impure ``inline_asm`` may do anything
_EFFECTS = {"store", "print", "assert", "atomic_rmw", "atomic_cas", "atomic_poll", "histogram"}


def ws_forced() -> bool:
    """``NEWT_WARP_SPECIALIZE=1``: every eligible pipelined loop as if it said ``warp_specialize=True``."""
    return os.environ.get("NEWT_WARP_SPECIALIZE", "") == "1"


def ws_loop(fn, target, loops, layouts, num_warps: int):
    """(the loop of ``loops`` (scf.for -> pipeline.Pipeline) to warp-specialize, the top-level loop around
    it the producer walks too or None), or (None, None) (module doc)."""
    none = (None, None)
    if not getattr(target, "tma", False) or num_warps % 4 or len(loops) != 1:
        return none
    (op, pipe), = loops.items()
    if not (op.attrs.get("warp_specialize") or ws_forced()):
        return none
    if not pipe.loads or any(pl.tma is None for pl in pipe.loads) or pipe.rows:  # (1-D rings: cp.async)
        return none
    outer = None
    if op not in fn.body.ops:
        outer = next((o for o in fn.body.ops if o.name == "scf.for" and op in o.regions[0].ops), None)
        if outer is None or outer_slice(outer, op, pipe) is None:
            return none
    body = op.regions[0]
    for o in body.walk():
        if o.name == "dot" and getattr(layouts.dot.get(o), "name", None) != "wgmma":
            return none
    if any(o.name == "histogram" for o in fn.walk()):  # (its loops stride by blockDim.x: the consumers are fewer)
        return none
    split = outer or op
    for o in fn.body.ops[:fn.body.ops.index(split)]:
        for x in [o, *(y for r in o.regions for y in r.walk())]:
            if x.name in _EFFECTS or x.name in ATOMIC or (x.name == "inline_asm" and not x.attrs.get("pure", True)):
                return none
    return op, outer


def outer_slice(outer, op, pipe):
    """The ops of ``outer``'s body the producer re-renders to run ``op``'s copies in every iteration of
    ``outer`` (the inner loop's bounds, the initial values its lookahead advances, the copies' coordinates),
    in body order; None when one is not a pure scalar computation of ``outer``'s induction variable and of
    values defined before ``outer``, or comes after ``op``."""
    body = outer.regions[0]
    pos = {o: k for k, o in enumerate(body.ops)}
    defs = {r: o for o in body.ops for r in o.results}
    inner = set(op.regions[0].walk())
    inner_vals = set(op.regions[0].args) | {r for o in inner for r in o.results}
    vals = list(op.operands[:3]) + [op.operands[3 + i] for i in pipe.carried]
    for o in pipe.slice_ops:
        vals += o.operands
    for pl in pipe.loads:
        vals += list(pl.tma.coord_values())
    need: set = set()
    stack = list(vals)
    while stack:
        v = stack.pop()
        if v in inner_vals or v is body.args[0]:
            continue
        if v in body.args:
            return None  # a value the tile loop carries
        o = defs.get(v)
        if o is None:
            continue  # defined before the tile loop
        if o in need:
            continue
        if o.name not in _PURE or o.regions or pos[o] > pos[op] or any(is_block(r.type) for r in o.results):
            return None  # (one producer thread computes scalars only)
        need.add(o)
        stack.extend(o.operands)
    return [o for o in body.ops if o in need]


def register_split(num_warps: int, producer: int = PRODUCER_REGS) -> tuple[int, int, int]:
    """(producer, consumer, at launch) registers per thread: the producer keeps ``producer`` (``PRODUCER_REGS``)
    after ``setmaxnreg.dec``, the consumers share the rest of the 64K register file (multiples of 8, at most 256)
    after ``setmaxnreg.inc``; at launch every thread has the file's share under ``__launch_bounds__(T, 1)``."""
    cons = (65536 - 32 * PRODUCER_WARPS * producer) // (32 * num_warps) // 8 * 8
    entry = min(256, 65536 // (32 * (num_warps + PRODUCER_WARPS)) // 8 * 8)
    return producer, min(256, cons), entry


def _helpers(em, cons_threads: int):
    em.helpers.setdefault("ws_setmaxnreg", "\n".join([
        "// ---- warp specialization (sm_90a): registers per warpgroup, ring mbarriers, the consumers' barrier",
        "template <int N> __device__ __forceinline__ void ws_setmaxnreg_dec() {",
        '  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N)); }',
        "template <int N> __device__ __forceinline__ void ws_setmaxnreg_inc() {",
        '  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N)); }',
        "__device__ __forceinline__ void ws_arrive(unsigned bar) {",
        '  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory"); }',
        "template <int N> __device__ __forceinline__ void ws_consumer_sync() {",
        f'  asm volatile("bar.sync {CONSUMER_BARRIER}, %0;" :: "n"(N) : "memory"); }}',
    ]))
    del cons_threads


def _ring_barriers(em, nb: int, cons_threads: int, extra: int = 0) -> str:
    """Shared-memory offset name of ``2 * nb`` mbarriers: ``full`` 0..nb-1, then ``empty`` (then ``extra``
    bytes: the ping-pong's pin word, ``pingpong.py``)."""
    name = em.smem_reserved(16 * nb + extra)
    t = em.top
    t.line(f"// warp specialization: mbarriers full[0..{nb - 1}] (count 1: the producer's expect_tx) and "
           f"empty[0..{nb - 1}] (count {cons_threads}: every consumer thread)")
    t.line("if (threadIdx.x == 0) {")
    t.line(f"  for (int b = 0; b < {nb}; ++b) {{ mbar_init(smem_u32(smem + {name}) + 8 * b, 1); "
           f"mbar_init(smem_u32(smem + {name}) + 8 * ({nb} + b), {cons_threads}); }}")
    t.line("  mbar_fence_init();")
    t.line("}")
    t.line("__syncthreads();")
    return name


class _State:
    """What both halves share: the ring's barriers and the consumers' slot, phase and pending release."""

    def __init__(self, bars: str, nb: int, rd: str, phase: str, prev: str):
        self.bars, self.nb, self.rd, self.phase, self.prev = bars, nb, rd, phase, prev

    def full(self, i) -> str:
        return f"(smem_u32(smem + {self.bars}) + 8 * ({i}))"

    def empty(self, i) -> str:
        return f"(smem_u32(smem + {self.bars}) + 8 * ({self.nb} + {i}))"


def emit_ws_split(em, outer=None):
    """The split (module doc), emitted before the warp-specialized loop or before ``outer``, the top-level
    loop around it that the producer walks too (a persistent kernel's tile loop)."""
    op = em.pipes.ws
    pipe = em.pipelines[op]
    NB = pipe.buffers or pipe.stages
    nw = em.nw
    cons = 32 * nw
    both = getattr(em.pipes, "pingpong", None) is not None and getattr(em.pipes, "overlap", None) is not None
    preg, creg, entry = register_split(nw, PPOV_PRODUCER_REGS if both else PRODUCER_REGS)  # (ppov.py)
    _helpers(em, cons)
    extra = 16 if getattr(em.pipes, "pingpong", None) is not None else 0
    st = _State(_ring_barriers(em, NB, cons, extra), NB, em.tmp("rd"), em.tmp("phase"), em.tmp("prev"))
    em.__dict__["_ws_state"] = st
    c = em.cur
    c.line(f"// warp specialization: {pipe.stages}-stage ring of {NB} slots; the producer warpgroup (threads "
           f"{cons}..{cons + 127}) issues the TMA copies, warps 0..{nw - 1} consume")
    c.line("tma_fence_proxy_async();  // plain accesses to the ring's memory before the async-proxy copies")
    c.line("__syncthreads();")
    c.line(f"if (threadIdx.x >= {cons}) {{  // producer warpgroup")
    p = c.sub(1)
    p.line(f"ws_setmaxnreg_dec<{preg}>();")
    p.line(f"if (threadIdx.x == {cons}) {{  // one thread issues every copy")
    q = p.sub(1)
    slot, ph = em.tmp("slot"), em.tmp("phase")
    q.line(f"int {slot} = 0;")
    q.line(f"unsigned {ph} = 0;")
    if outer is None:
        _producer_loop(em, q, op, pipe, st, slot, ph)
    else:
        _producer_outer(em, q, outer, op, pipe, st, slot, ph)
    p.line("}")
    p.line("return;  // the producer skips the rest of the kernel")
    c.line("}")
    if creg > entry:
        c.line(f"ws_setmaxnreg_inc<{creg}>();")
    else:  # (4 consumer warps: 256 threads already have all the registers a thread can address)
        c.line(f"// no setmaxnreg.inc: the consumers already hold {entry} registers per thread")
    c.line(f"#define __syncthreads() ws_consumer_sync<{cons}>()  // consumers only from here on (#undef at the end)")
    c.line(f"int {st.rd} = 0;")
    c.line(f"unsigned {st.phase} = 0;")
    if pipe.async_dots:  # the slot whose wgmma is still in flight: released one iteration later
        c.line(f"int {st.prev} = -1;")
    return st


def _saved(em):
    return (em.scalars, em.blocks, em.def_chunk, em.cur, em.last_line)


def _restore(em, saved):
    em.scalars, em.blocks, em.def_chunk, em.cur, em.last_line = saved


def _fresh(em, ops):
    """Let ``ops`` be rendered again (their results get new names in the current chunk)."""
    em.scalars = dict(em.scalars)
    em.blocks = dict(em.blocks)
    em.def_chunk = dict(em.def_chunk)
    fresh = {r for o in ops for r in o.results}
    for k in [k for k in em.blocks if k[0] in fresh]:
        del em.blocks[k]
    for v in fresh:
        em.scalars.pop(v, None)


def _producer_outer(em, q, outer, op, pipe, st, slot, ph):
    """The producer's walk of the tile loop: its slice (``outer_slice``), then the copy loop of the tile."""
    from .ctypes import ctype
    body = outer.regions[0]
    ivv = body.args[0]
    iv = em.tmp("tile")
    q.line(f"for ({ctype(ivv.type)} {iv} = {em.scalar(outer.operands[0])}; {loop_condition(em, outer, iv)}; "
           f"{iv} += {em.scalar(outer.operands[2])}) {{")
    r = q.sub(1)
    saved = _saved(em)
    try:
        ops = outer_slice(outer, op, pipe)
        _fresh(em, ops)
        em.scalars[ivv] = iv
        em.cur = r
        em.last_line = None
        for o in ops:
            em.emit_op(o)
        _producer_loop(em, r, op, pipe, st, slot, ph)
    finally:
        _restore(em, saved)
    q.line("}")


def _producer_loop(em, q, op, pipe, st, slot, ph):
    """The producer's copy loop of one run of ``op``: wait empty[slot], expect_tx + copies, next slot."""
    from .ctypes import ctype
    body = op.regions[0]
    carried = body.args[1:]
    yields = list(body.terminator.operands)
    q.line("{")
    q2 = q.sub(1)
    ahead_iv = em.tmp("ahead_iv")
    q2.line(f"{ctype(body.args[0].type)} {ahead_iv} = {em.scalar(op.operands[0])};")
    ahead = {}
    for i in pipe.carried:
        a = carried[i]
        nm, lay = declare_var(em, a, q2, init=op.operands[3 + i], name=em.tmp("ahead"))
        ahead[a] = (nm, lay)
    q2.line(f"while ({loop_condition(em, op, ahead_iv)}) {{")
    r = q2.sub(1)
    r.line(f"mbar_wait({st.empty(slot)}, {ph} ^ 1u);  // the consumers have released this slot (first pass: at once)")
    _issue(em, op, pipe, r.sub(0), slot, ahead_iv, ahead, yields, carried, bar=st.full(slot), who="")
    r.line(f"if (++{slot} == {st.nb}) {{ {slot} = 0; {ph} ^= 1u; }}")
    q2.line("}")
    q.line("}")


def emit_ws_for(em, op, pipe):
    """The consumers' loop (after the split, made here unless a tile loop around it made it)."""
    st = em.__dict__.get("_ws_state") or emit_ws_split(em)
    body = op.regions[0]
    lb, step = op.operands[0], op.operands[2]
    targets = loop_header(em, op)
    carried = body.args[1:]
    ivv = body.args[0]
    from .ctypes import ctype
    ivt = ctype(ivv.type)
    c = em.cur
    behind = bool(pipe.async_dots)
    iv = em.vname(ivv)
    pp = getattr(em.pipes, "pingpong", None)
    ov = getattr(em.pipes, "overlap", None)
    if pp is not None and ov is not None:  # both: the next QK and this P.V in one turn (ppov.py)
        from . import pingpong, ppov
        cur = ppov.before_loop(em, pp, ov, pipe, st, c, (_saved, _restore, _fresh))
    elif pp is not None:  # consumer warpgroups taking turns on the tensor cores (pingpong.py)
        from . import pingpong
        pingpong.before_loop(em, pp, c)
    if ov is not None and pp is None:  # QK one iteration ahead (overlap.py)
        from . import overlap
        cur = overlap.before_loop(em, ov, pipe, st, c, (_saved, _restore, _fresh))
    unroll = op.attrs.get("loop_unroll_factor")
    if unroll:
        c.line(f"#pragma unroll {int(unroll)}")
    c.line(f"for ({ivt} {iv} = {em.scalar(lb)}; {loop_condition(em, op, iv)}; {iv} += {em.scalar(step)}) {{")
    inner = c.sub(1)
    em.scalars[ivv] = iv
    rd, cph, prev = st.rd, st.phase, st.prev
    if ov is None:
        inner.line(f"mbar_wait({st.full(rd)}, {cph});  // this slot's TMA copies have landed")
    for a, (name, lay, _) in zip(carried, targets):
        bind_var(em, a, name, lay, inner)
    for pl in pipe.loads:
        em.pipe_read_base[pl.op] = f"(smem + {pl.buf} + {rd} * {pl.tile.size_bytes})"
    bodyc = inner.sub(0, pipelined=True)
    em.yield_stack.append(targets)
    try:
        if ov is None:
            em.emit_region(body, bodyc)
        elif pp is not None:
            ppov.in_loop(em, pp, ov, pipe, st, bodyc, iv, cur, (_saved, _restore, _fresh))
        else:
            overlap.in_loop(em, ov, pipe, st, bodyc, iv, cur, (_saved, _restore, _fresh))
    finally:
        em.yield_stack.pop()
    if pp is not None:
        pingpong.check_body(bodyc)
    if behind:
        inner.line(f"if ({prev} >= 0) ws_arrive({st.empty(prev)});  // the previous slot's wgmma has retired")
        inner.line(f"{prev} = {rd};")
    else:
        inner.line(f"ws_arrive({st.empty(rd)});  // every read of this slot is done")
    inner.line(f"if (++{rd} == {st.nb}) {{ {rd} = 0; {cph} ^= 1u; }}")
    c.line("}")
    if pp is not None and ov is None:
        pingpong.after_loop(em, pp, c)
    if pipe.async_dots:
        from .dot.wgmma import drain_async_dots
        drain_async_dots(em, op, pipe, targets, c)
        c.line(f"if ({prev} >= 0) {{ ws_arrive({st.empty(prev)}); {prev} = -1; }}  // the last slot, now retired")
    c.line("__syncthreads();")
    for res, (name, lay, _) in zip(op.results, targets):
        bind_var(em, res, name, lay, c)


def simulate(iterations, nb: int, behind: bool, order, producer_xor: int = 1,
             release_lag: int | None = None, drain_release: bool = True) -> list[tuple[str, int, int]]:
    """Replay the protocol's phase arithmetic (as :func:`emit_ws_for` writes it) on a model of mbarriers.

    ``iterations``: the loop's trip count, or a list of them (a tile loop around it: the ring, its slots and
    phases carry over from one run of the loop to the next; after each run the consumers drain the wgmma in
    flight and release its slot, ``drain_release``).

    ``order`` picks which side moves next while both can (a string of "p"/"c", cycled): the producer
    waits ``empty[slot]`` for parity ``phase ^ producer_xor`` and fills the slot, the consumer waits
    ``full[rd]`` for parity ``phase``, reads, and releases the slot ``release_lag`` iterations later (the
    protocol: 1 with a wgmma in flight, ``behind``, else 0).  The slot stays read until the wgmma of its
    iteration retires (one iteration later when ``behind``).  Returns the trace [(side, iteration, slot)];
    raises AssertionError on a deadlock, a fill of a slot still being read, or a read of a slot not
    (re)filled for that iteration.  (The parity test is the hardware's: a phase counts as complete when
    the barrier's current phase has the other parity.)"""
    lag = (1 if behind else 0) if release_lag is None else release_lag
    import itertools
    runs = [iterations] if isinstance(iterations, int) else list(iterations)
    ends = set(itertools.accumulate(runs))   # global iteration counts at which a run of the loop ends
    iterations = sum(runs)
    # an mbarrier: its current phase number and the arrivals pending in it
    trace: list = []
    ring = RingModel(nb, iterations, trace, producer_xor, slot_in_trace=True)
    full_phase, empty_phase, content, done = ring.full_phase, ring.empty_phase, ring.content, ring.done
    reading: list[set[int]] = [set() for _ in range(nb)]
    ci = rd = cph = 0
    prev = -1
    released: list[int] = []      # slots read, in order, not yet released

    moves = itertools.cycle(order)

    def produce() -> bool:
        return ring.produce(lambda slot: reading[slot])

    def consume() -> bool:
        nonlocal ci, rd, cph, prev
        if not done(full_phase[rd], cph):
            return False
        assert content[rd] == ci, f"iteration {ci} reads slot {rd} holding iteration {content[rd]}"
        reading[rd].add(ci)
        trace.append(("c", ci, rd))
        if behind:       # this iteration's wait retires the wgmma of ci - 1
            if prev >= 0:
                reading[prev].discard(ci - 1)
            prev = rd
        else:
            reading[rd].discard(ci)
        released.append(rd)
        if len(released) > lag:
            empty_phase[released.pop(0)] += 1
        ci += 1
        rd += 1
        if rd == nb:
            rd, cph = 0, cph ^ 1
        if ci in ends and behind and prev >= 0:   # the drain after the loop: wgmma_wait<0>
            reading[prev].discard(ci - 1)
            last = released.pop(0)
            if drain_release:
                empty_phase[last] += 1
            prev = -1
        return True

    while ci < iterations:
        first, second = (produce, consume) if next(moves) == "p" else (consume, produce)
        assert first() or second(), f"deadlock: producer at iteration {ring.j}, consumer at {ci}"
    return trace
