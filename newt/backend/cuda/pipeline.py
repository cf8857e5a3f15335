"""Software pipelining: loads in a loop that feed a dot become ``cp.async`` copies into
``num_stages`` shared-memory buffers, issued ``num_stages - 1`` iterations ahead.

::

    prologue:   for s in 0 .. S-2: issue the loads of iteration s into buffer s; commit
    loop body:  cp.async.wait_group(S-2); __syncthreads()      // buffer it % S has landed
                issue the loads of iteration it + S-1 into buffer (it + S-1) % S; commit
                ... the dot reads buffer it % S straight from shared memory (ldmatrix) ...
    epilogue:   cp.async.wait_group(0); __syncthreads()

A load qualifies when its pointer, mask and ``other`` (absent or 0) are pure
functions of the induction variable, of loop-invariant values and of
loop-carried values that the loop advances by pure functions (``p += BLOCK *
stride``).  The lookahead keeps its own copies of those loop-carried values and
re-renders that slice of the body for iteration ``it + S - 1``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType, SimpleNamespace
from typing import Any

from newt.ir.core import Op, Region
from newt.ir.types import is_block, scalar_of, shape_of

from .ctypes import ctype
from .dot.base import OperandTile, load_of
from .issue import _PURE, _issue
from .layout import Layout, SwizzledShared, blocked_for, log2
from .loops import bind_var, declare_var, loop_condition, loop_header
from .plan import compact
from .tma import bar_addr, barriers, match_access, same_layout, standalone_loads, tile_plan, tma_enabled
from .vectors import unpack_words, vector_width_of


def cpasync_fence_on() -> bool:
    """``NEWT_CPASYNC_FENCE=0``: no ``fence.proxy.async`` at the top of a pipelined loop whose cp.async tiles
    wgmma reads (SASS ``MEMBAR.ALL.CTA`` + ``FENCE.VIEW.ASYNC.S`` every iteration).  Triton 3.6 and CUTLASS's
    cp.async GMMA mainloop issue none there.  Unset: the fence stays (the PTX memory model's rule for
    generic-proxy writes read through the async proxy)."""
    return os.environ.get("NEWT_CPASYNC_FENCE", "") != "0"


def late_issue_on() -> bool:
    """``NEWT_PIPE_ISSUE=late``: a pipelined loop issues its lookahead copies right after the last dot of the
    body (Triton's order: the tensor cores get their instructions first, the copies overlap them) instead of
    right after the loop-top barrier."""
    return os.environ.get("NEWT_PIPE_ISSUE", "") == "late"


def ring1d_on() -> bool:
    """``NEWT_RING_1D=1``: a 1-D block load of a pipelined loop whose address advances with the loop (tutorial
    06's ``m = tl.load(M + offs_m)`` / ``Di`` in its dK/dV loop) is copied by cp.async into a ring of its own,
    ``num_stages - 1`` iterations ahead in the 2-D tiles' commit groups, and read back from shared memory in
    the layout its users want (``RingRow``).  Unset: such loads stay plain global loads in the body."""
    return os.environ.get("NEWT_RING_1D", "") == "1"


def rows_only_on() -> bool:
    """``NEWT_PIPE_ROWS=1``: a loop with no dot whose ``nl.range(..., num_stages=n)`` asks for a pipeline (Triton's
    knob; tutorial 02's softmax loop over rows) copies its 1-D block loads that advance with the loop into
    cp.async rings ``n - 1`` iterations ahead (``RingRow``, as ``NEWT_RING_1D`` does beside a dot's tiles), the
    way Triton pipelines such loads through shared memory.  Unset: only loops whose loads feed a dot are
    pipelined.  Off until a device run times it (tutorial 02 sizes its grid from the kernel's registers and shared
    memory: 1,716 programs for newt's 19 registers and 64 bytes against Triton's 1,056 at 4096x512)."""
    return os.environ.get("NEWT_PIPE_ROWS", "") == "1"


def _last_dot(body) -> int:
    """Index of the body's last top-level dot; -1 when there is none or a later op nests one."""
    tops = [i for i, o in enumerate(body.ops) if o.name == "dot"]
    if not tops:
        return -1
    later = body.ops[tops[-1] + 1:]
    if any(x.name == "dot" for o in later for r in o.regions for x in _walk(r)):
        return -1
    return tops[-1]


def _walk(region):
    for o in region.ops:
        yield o
        for r in o.regions:
            yield from _walk(r)


@dataclass(frozen=True, eq=False)
class PipeLoad:
    """One load of a pipelined loop, copied into ``stages`` shared-memory buffers named ``buf``."""
    op: Op
    lay: Layout
    vec: int
    inner: int
    tile: SwizzledShared
    buf: str = ""
    tma: object = None           # tma.TmaAccess: copied by TMA (completing on the stage's mbarrier), not cp.async
    tplan: object = None         # its tma.TilePlan (the same bytes as ``tile``)


@dataclass(frozen=True, eq=False)
class RingRow:
    """A 1-D load of a pipelined loop copied into its own ring (``NEWT_RING_1D=1``): ``lay`` is the copy's
    layout (``vec`` consecutive elements a thread, duplicates skipped), ``slot`` the bytes of one buffer (the
    block's bytes rounded up to 16), ``buf`` the ring's name.  The ring has the pipeline's buffer count and
    follows its read / write indices; the body reads the current buffer in the value's own layout."""
    op: Op
    lay: Layout
    vec: int
    elem_bytes: int
    slot: int
    buf: str = ""


@dataclass(frozen=True, eq=False)
class Pipeline:
    loop: Op
    stages: int
    loads: tuple[PipeLoad, ...]
    slice_ops: tuple[Op, ...]    # body ops re-rendered for the lookahead, in body order
    carried: tuple[int, ...]     # indices (into the loop-carried args) the lookahead advances
    async_proxy: bool = False    # wgmma reads the buffers: fence the cp.async writes for the async proxy
    async_dots: frozenset = frozenset()  # wgmma dots left in flight into the next iteration (dot/wgmma.py)
    buffers: int = 0             # buffers in the ring (stages, or stages + 1 with async dots)
    rows: tuple = ()             # RingRow: 1-D loads copied into rings of their own (NEWT_RING_1D=1)


@dataclass(frozen=True)
class PipelinePlan:
    """Which loops are software-pipelined (like ``plan.LayoutPlan`` for layouts): computed once before
    emission, read by the loop and load lowerings."""
    loops: Mapping[Op, Pipeline] = field(default_factory=lambda: MappingProxyType({}))
    loads: Mapping[Op, tuple[Pipeline, PipeLoad]] = field(default_factory=lambda: MappingProxyType({}))
    #: persistent shared-memory buffers (name, bytes), in the order the emitter reserves them
    buffers: tuple[tuple[str, int], ...] = ()
    #: mbarriers the TMA copies need (one per ring buffer of each pipeline with TMA loads)
    tma_barriers: int = 0
    #: the loop split into a producer warpgroup and consumer warps (``warpspec.py``), or None
    ws: Op | None = None
    #: the top-level loop around ``ws`` (a persistent kernel's tile loop) the producer walks too, or None
    ws_outer: Op | None = None
    #: ``ws``'s consumer warpgroups taking turns on the tensor cores (``pingpong.PingPong``), or None
    pingpong: Any = None
    #: ``ws``'s first dot issued one iteration ahead (``overlap.Overlap``), or None
    overlap: Any = None
    #: 1-D loads read from a ring of their own (``RingRow``, NEWT_RING_1D=1)
    rows: Mapping[Op, tuple[Pipeline, RingRow]] = field(default_factory=lambda: MappingProxyType({}))


def plan_pipelines(fn, target, num_stages: int, layouts, axis, num_warps: int = 0,
                   pingpong: bool = True) -> PipelinePlan:
    """The pipelines of ``fn``: loops whose dot operands are loaded in the loop (see the module doc).
    ``num_warps`` (0: none) lets a loop be warp-specialized (``warpspec.ws_loop``), ``pingpong`` its consumer
    warpgroups take turns (``pingpong.pp_plan``)."""
    # ``nl.range(..., num_stages=n)`` overrides the kernel's ``num_stages`` for its loop (Triton's per-loop
    # knob); n < 2 leaves that loop unpipelined
    asked = [loop_stages(op, num_stages) for op in fn.walk() if op.name == "scf.for"]
    if max(asked, default=num_stages) < 2 or not target.mma_sync:
        n = standalone_loads(fn, axis, {}) if tma_enabled(target) else 0
        return PipelinePlan(tma_barriers=n if n <= 32 else -1)
    budget = target.max_shared - 16 * 1024
    loops: dict = {}
    loads: dict = {}
    buffers: list = []
    tma_fn = fn if tma_enabled(target) else None
    bars = 0
    for op in fn.walk():
        if op.name != "scf.for" or _inside_pipeline(loops, op):
            continue
        stages = loop_stages(op, num_stages)
        p = _plan_loop(layouts, axis, stages, op, budget, buffers, tma_fn) if stages >= 2 else None
        if p is not None:
            loops[op] = p
            if any(pl.tma is not None for pl in p.loads):
                bars += p.buffers or p.stages
            for pl in p.loads:
                loads[pl.op] = (p, pl)
    if tma_fn is not None:
        bars += standalone_loads(fn, axis, loads)
    if bars > 32:  # one 32-bit phase word: keep the pointer path (cp.async) beyond that
        loops = {lp: _without_tma(p) for lp, p in loops.items()}
        loads = {pl.op: (p, pl) for p in loops.values() for pl in p.loads}
        bars = -1  # (nor TMA for the other loads)
    if len(loops) > 1:
        # One shared-memory region for all the rings, each loop's buffers from its start: pipelined loops
        # never nest (a loop inside a pipelined one is not pipelined; fn.walk sees the outer loop first),
        # so no two rings are live at once -- a loop drains its copies (cp_async_wait<0>, its async wgmma)
        # and syncs after its last iteration, the next syncs again before its prologue.  The region is the
        # largest ring, not their sum (attention's causal kernel: two loops over K and V, as in Triton).
        sizes = dict(buffers)
        top = 0
        for lp, p in list(loops.items()):
            off = 0
            named = []
            for pl in p.loads:
                al = max(128, getattr(pl.tile, "align", 0) or 0)  # wgmma's swizzled tiles: their period
                off = (off + al - 1) // al * al
                named.append(replace(pl, buf=f"(SMEM_PIPE0 + {off})" if off else "SMEM_PIPE0"))
                off += sizes[pl.buf]
            placed = []
            for rw in p.rows:  # 1-D rings after the tiles (16-byte cp.async destinations)
                off = (off + 15) // 16 * 16
                placed.append(replace(rw, buf=f"(SMEM_PIPE0 + {off})" if off else "SMEM_PIPE0"))
                off += sizes[rw.buf]
            top = max(top, off)
            loops[lp] = replace(p, loads=tuple(named), rows=tuple(placed))
        loads = {pl.op: (p, pl) for p in loops.values() for pl in p.loads}
        buffers = [("SMEM_PIPE0", top)]
    from .warpspec import ws_loop
    ws, ws_outer = ws_loop(fn, target, loops, layouts, num_warps) if num_warps and bars >= 0 else (None, None)
    if ws is not None:  # its full/empty mbarriers are the producer's own (warpspec.py), not tma.py's
        bars -= loops[ws].buffers or loops[ws].stages
    from .pingpong import pp_plan
    pp = pp_plan(ws, ws_outer, layouts, num_warps) if pingpong else None
    from .overlap import ov_plan
    ov = ov_plan(ws, ws_outer, loops.get(ws), layouts, pp)
    row_map = {rw.op: (p, rw) for p in loops.values() for rw in p.rows}
    return PipelinePlan(MappingProxyType(loops), MappingProxyType(loads), tuple(buffers), tma_barriers=bars,
                        ws=ws, ws_outer=ws_outer, pingpong=pp, overlap=ov, rows=MappingProxyType(row_map))


def loop_stages(loop, num_stages: int) -> int:
    """The pipeline depth of ``loop``: its own ``num_stages`` (``nl.range(..., num_stages=)``) if given,
    else the kernel's."""
    n = loop.attrs.get("num_stages")
    return int(n) if n is not None else num_stages


def _without_tma(p: Pipeline) -> Pipeline:
    loads = tuple(replace(pl, tma=None, tplan=None) for pl in p.loads)
    return replace(p, loads=loads, async_proxy=any(getattr(pl.tile, "align", None) for pl in loads))


def _inside_pipeline(pipelines, op) -> bool:
    for lp in pipelines:
        for inner in lp.walk():
            if inner is op and inner is not lp:
                return True
    return False


def _plan_loop(layouts, axis, num_stages, loop, budget, buffers, tma_fn=None):
    body = loop.regions[0]
    top_ops = set(body.ops)
    iv = body.args[0]
    carried = body.args[1:]
    term = body.terminator
    yields = list(term.operands) if term is not None and term.name == "yield" else []
    cands = []
    transposed: dict = {}
    for d in body.ops:
        low = layouts.dot.get(d) if d.name == "dot" else None
        if low is None or low.name not in ("mma.sync", "wgmma"):
            continue
        for idx in (0, 1):
            lop, tr = load_of(d.operands[idx])  # a load, or a transpose of one (``desc.load(...).T``)
            if getattr(lop, "name", None) != "load":
                continue
            v = lop.result
            if not (lop in top_ops and is_block(v.type) and len(shape_of(v.type)) == 2
                    and not lop.attrs.get("volatile")):
                continue
            if any(c.op is lop for c in cands):
                continue
            mask, other = lop.operand("mask"), lop.operand("other")
            if other is not None and not _is_zero(other):
                continue
            lay = compact(layouts.access[lop])
            ptr = lop.operands[0]
            vec = vector_width_of(axis, lay, ptr, mask)
            eb = max(1, scalar_of(v.type).primitive_bitwidth // 8)
            if vec * eb < 4 or not lay.reg:
                continue
            inner = lay.dim_of_bit(lay.reg[0])[0]
            shape = shape_of(v.type)
            shared_tile = getattr(low, "shared_tile", SwizzledShared)  # wgmma: its canonical layout
            tile = shared_tile(shape[1 - inner], shape[inner], eb)
            if low.name == "wgmma" and tile.row_bytes < 32:
                continue
            acc = tplan = None
            if tma_fn is not None and low.name == "wgmma" and inner == 1:
                # a tensor-descriptor tile: TMA writes the wgmma layout itself (tma.py)
                acc = match_access(tma_fn, lop, axis)
                tplan = tile_plan(shape, eb) if acc is not None else None
                if tplan is None or not same_layout(tplan, tile):
                    acc = tplan = None
            cands.append(PipeLoad(lop, lay, vec, inner, tile, tma=acc, tplan=tplan))
            if getattr(low, "needs_transpose", None) and low.needs_transpose(d, idx, 1 - inner if tr else inner):
                transposed[lop] = tile.size_bytes * 2  # its K-major copies (dot/wgmma.py: _k_major)
    if not cands and not (rows_only_on() and loop.attrs.get("num_stages") is not None):
        return None
    # the slice of the body the lookahead re-renders
    defs = {r: o for o in body.ops for r in o.results}
    need_ops: set = set()
    need_args: set = set()

    def visit(vals):
        stack = list(vals)
        ok = True
        while stack:
            v = stack.pop()
            if v is iv:
                continue
            if isinstance(v.owner, Region):
                if v.owner is body:
                    need_args.add(v)
                    continue
                if _defined_inside(v, body):
                    ok = False
                continue
            o = defs.get(v)
            if o is None:
                if _defined_inside(v, body):
                    ok = False  # defined in a nested region
                continue
            if o in need_ops:
                continue
            if o.name not in _PURE or o.regions:
                return False
            need_ops.add(o)
            stack.extend(o.operands)
        return ok

    kept = []
    for c in cands:
        # a TMA copy needs only its coordinates (scalars); a cp.async copy its pointers and mask
        operands = c.tma.coord_values() if c.tma is not None else c.op.operands
        if visit(operands):
            kept.append(c)
    rows_only = not cands  # (rows_only_on: a loop without dots whose num_stages asks for a pipeline)
    if not kept and not rows_only:
        return None
    done: set = set()

    def closure() -> bool:
        """Add what the needed loop-carried values advance by (their yields' slices)."""
        while True:
            todo = [a for a in need_args if a not in done]
            if not todo:
                return True
            for a in todo:
                done.add(a)
                i = carried.index(a)
                if i >= len(yields) or not visit([yields[i]]):
                    return False

    if not closure():
        return None
    rows = []
    for lop, lay, vec, eb in (_row_candidates(body, layouts, axis, kept, tma_fn) if ring1d_on() or rows_only
                              else ()):
        saved = (set(need_ops), set(need_args), set(done))
        operands = [x for x in (lop.operand("ptr"), lop.operand("mask")) if x is not None]
        if visit(operands) and closure():
            n = shape_of(lop.result.type)[0]
            rows.append(RingRow(lop, lay, vec, eb, (n * eb + 15) // 16 * 16))
        else:  # its address is not a pure function of the loop's values: it stays a load in the body
            need_ops, need_args, done = saved
    if rows_only and not rows:
        return None
    stages = num_stages
    total = sum(c.tile.size_bytes for c in kept)
    budget -= sum(transposed.get(c.op, 0) for c in kept)
    while stages > 2 and total * stages > budget:
        stages -= 1
    if total * stages > budget:
        return None
    from .dot.wgmma import async_dots
    asyncs = async_dots(layouts, body, kept, stages, total, budget)
    if not asyncs and transposed and stages > 2 and total * stages <= budget:
        # fp8 with a transposed operand (its K-major copies take shared memory too): one stage less
        # rather than a dot that waits for its wgmma every iteration
        fewer = async_dots(layouts, body, kept, stages - 1, total, budget)
        if fewer:
            stages, asyncs = stages - 1, fewer
    nbuf = stages + 1 if asyncs else stages  # a wgmma still reading the previous buffer: one more buffer
    if rows_only:  # S - 1 buffers, as Triton: the copies of iteration it + S - 1 go into the buffer the body
        nbuf = stages - 1  # has just read, after a barrier at its end (emit_pipelined_for)
        while nbuf > 1 and sum(rw.slot for rw in rows) * nbuf > budget:
            nbuf -= 1
        stages = nbuf + 1
        if sum(rw.slot for rw in rows) * nbuf > budget:
            return None
    elif rows and (total + sum(rw.slot for rw in rows)) * nbuf > budget:
        rows = []  # (the tiles' ring first; the slice ops the rows added are re-rendered for nothing)
    named = []
    for c in kept:
        name = f"SMEM_PIPE{len(buffers)}"
        buffers.append((name, c.tile.size_bytes * nbuf))
        named.append(replace(c, buf=name))
    named_rows = []
    for rw in rows:  # the rows' rings follow the tiles' buffer indices (nbuf buffers each)
        name = f"SMEM_PIPE{len(buffers)}"
        buffers.append((name, rw.slot * nbuf))
        named_rows.append(replace(rw, buf=name))
    slice_ops = tuple(o for o in body.ops if o in need_ops)
    idx = tuple(sorted(carried.index(a) for a in need_args))
    return Pipeline(loop, stages, tuple(named), slice_ops, idx,
                    async_proxy=any(getattr(c.tile, "align", None) and c.tma is None for c in kept),
                    async_dots=asyncs, buffers=nbuf, rows=tuple(named_rows))


def _row_candidates(body, layouts, axis, kept, tma_fn):
    """(load, copy layout, vector width, element bytes) of each 1-D block load at the top of ``body`` whose
    address advances with the loop (it depends on the induction variable or a loop-carried value) and whose
    copy is a 4-, 8- or 16-byte cp.async (``NEWT_RING_1D=1``).  The copy's layout: ``vec`` consecutive
    elements a thread, as wide as the axis analysis allows (contiguity, alignment, the mask's constancy), over
    as many threads as that takes (the others hold duplicates and copy nothing); where the pointer or mask is
    an anchored value (a loop-carried pointer block) the load's own access layout, so that nothing converts."""
    taken = {c.op for c in kept}
    out = []
    for lop in body.ops:
        if lop.name != "load" or lop in taken or lop.attrs.get("volatile"):
            continue
        v = lop.result
        if not is_block(v.type) or len(shape_of(v.type)) != 1 or lop not in layouts.access:
            continue
        if tma_fn is not None and match_access(tma_fn, lop, axis) is not None:
            continue  # a descriptor's 1-D tile: TMA's (tma.py)
        ptr, mask = lop.operand("ptr"), lop.operand("mask")
        if not _advances(ptr, body):
            continue
        n = shape_of(v.type)[0]
        eb = max(1, scalar_of(v.type).primitive_bitwidth // 8)
        acc = compact(layouts.access[lop])
        if all(x is None or not is_block(x.type) or x in layouts.poly for x in (ptr, mask)):
            nw = 1 << len(acc.warp)
            want = max(1, min(16 // eb, n))
            lay = blocked_for((n,), nw, vec=want)
            vec = vector_width_of(axis, lay, ptr, mask)
            if vec < want:  # narrower copies over more threads
                lay = blocked_for((n,), nw, vec=vec)
        else:
            lay = acc
        vec = vector_width_of(axis, lay, ptr, mask)
        if vec * eb not in (4, 8, 16):
            continue
        out.append((lop, lay, vec, eb))
    return out


def _advances(v, body) -> bool:
    """Whether ``v`` (defined at the top of ``body`` or outside) depends on the induction variable or a
    loop-carried value of ``body``'s loop."""
    stack, seen, tops = [v], set(), set(body.ops)
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        if isinstance(x.owner, Region):
            if x.owner is body:
                return True
            continue
        o = x.owner
        if o is not None and o in tops:
            stack.extend(o.operands)
    return False


def _defined_inside(v, region) -> bool:
    for o in region.walk():
        if o.regions:
            for r in o.regions:
                if v in r.args:
                    return True
        if v in o.results:
            return True
    return False


def _is_zero(v) -> bool:
    o = v.owner
    while getattr(o, "name", None) in ("splat", "broadcast", "expand_dims"):
        o = o.operands[0].owner
    return getattr(o, "name", None) == "constant" and o.attrs.get("value") in (0, 0.0, False)


# ---------------------------------------------------------------------------
# emission
# ---------------------------------------------------------------------------


def opaque_trip_count(em) -> bool:
    """Whether this kernel's pipelined loops of a constant trip count get their bound as an opaque value
    (``opaque_int``) rather than the constant: ``NEWT_OPAQUE_TRIP=1`` always, ``0`` never (the CUDA of before),
    unset or ``trial`` where the compiler asks for it (``compiler._opaque_trip_retry`` compiles such a kernel a
    second time so and keeps the version with no more spill bytes and less SASS).

    Why: with the constant in view, ptxas can take such a loop -- and the loops after it -- off the uniform
    datapath: on sm_90a their counters, ring slots and wgmma descriptors then live in vector registers and are
    copied to uniform ones (R2UR) at each use.  Tutorial 06's causal backward at d=128 (its masked loops run a
    constant 8 steps) lost it in all four of its loops: 4,180 spill bytes and 1,069 instructions in its main
    dK/dV loop, against 3,916 and 825 with the bound opaque.  It is not always a gain (an attention forward at
    d=128 over 4 warps whose diagonal loop runs 2 steps spills more with it), hence the trial."""
    mode = os.environ.get("NEWT_OPAQUE_TRIP", "trial")
    return mode == "1" or (mode != "0" and bool(em.__dict__.get("opaque_trip")))


def emit_pipelined_for(em, op, pipe: Pipeline):
    if getattr(em.pipes, "ws", None) is op:
        from .warpspec import emit_ws_for
        emit_ws_for(em, op, pipe)
        return
    body = op.regions[0]
    lb, ub, step = op.operands[:3]
    S = pipe.stages
    NB = pipe.buffers or S
    targets = loop_header(em, op)
    carried = body.args[1:]
    term = body.terminator
    yields = list(term.operands)
    ivv = body.args[0]
    ivt = ctype(ivv.type)
    c = em.cur
    c.line(f"// software pipeline, {S} stages: loads of iteration it + {S - 1} are in flight (cp.async) "
           f"while iteration it computes")
    ahead_iv = em.tmp("ahead_iv")
    c.line(f"{ivt} {ahead_iv} = {em.scalar(lb)};")
    ahead = {}
    for i in pipe.carried:
        a = carried[i]
        name = em.tmp("ahead")
        nm, lay = declare_var(em, a, c, init=op.operands[3 + i], name=name)
        ahead[a] = (nm, lay)
    has_tma = any(pl.tma is not None for pl in pipe.loads)
    has_cp = any(pl.tma is None for pl in pipe.loads) or bool(pipe.rows)
    b0 = barriers(em, NB) if has_tma else -1
    # scratch outside pipelined loops overlaps the pipeline buffers: whatever read it before the loop
    # (a conversion, a reduction, operands converted once where they are defined) is done first
    if has_tma:
        c.line(f"// TMA copies complete on mbarriers {b0} .. {b0 + NB - 1} (one per buffer)")
        c.line("tma_fence_proxy_async();  // plain accesses to the buffers' memory before the async-proxy copies")
    c.line("__syncthreads();")
    # the copies' own code (the prologue's and each iteration's issue) runs while earlier copies are in flight
    # into the ring: scratch it needs (an index converted to the copy's layout, a gather's rows) must not
    # share the ring's bytes (pipelined=True: after the buffers).  At offset 0 a layout conversion of the
    # gathered rows' indices wrote over stage 0 while its copies landed (Helion's gather_gemv through
    # deuteron on the H100 and the H200: tile rows 0-4, the conversion's 524 bytes, came out wrong)
    for s in range(S - 1):
        c.line(f"{{  // prologue: iteration {s}")
        _issue(em, op, pipe, c.sub(1, pipelined=True), str(s), ahead_iv, ahead, yields, carried, b0)
        c.line("}")
    rd, wr = em.tmp("rd"), em.tmp("wr")
    c.line(f"int {rd} = 0, {wr} = {(S - 1) % NB};")
    iv = em.vname(ivv)
    unroll = op.attrs.get("loop_unroll_factor")
    if unroll:  # nl.range(..., loop_unroll_factor=n)
        c.line(f"#pragma unroll {int(unroll)}")
    ub_expr = None
    if getattr(ub.owner, "name", None) == "constant":
        em.__dict__["const_trip_loops"] = em.__dict__.get("const_trip_loops", 0) + 1
        if opaque_trip_count(em):
            em.__dict__["opaque_trip_applied"] = True
            ub_expr = em.tmp("trip_ub")  # (see opaque_trip_count)
            c.line(f"const {ivt} {ub_expr} = opaque_int(({ivt})({em.scalar(ub)}));  // the bound, not folded")
    c.line(f"for ({ivt} {iv} = {em.scalar(lb)}; {loop_condition(em, op, iv, ub_expr)}; {iv} += {em.scalar(step)}) {{")
    inner = c.sub(1)
    em.scalars[ivv] = iv
    if has_tma:
        inner.line(f"mbar_wait({bar_addr(em, f'{b0} + {rd}')}, (tma_phase >> ({b0} + {rd})) & 1u);  "
                   "// this buffer's TMA copies have landed")
        inner.line(f"tma_phase ^= 1u << ({b0} + {rd});")
    if has_cp:
        inner.line(f"cp_async_wait<{S - 2}>();")
    if pipe.async_proxy and (cpasync_fence_on() or has_tma):
        inner.line("fence_proxy_async();  // the landed tiles are read by wgmma (async proxy)")
    elif pipe.async_proxy:
        inner.line("// NEWT_CPASYNC_FENCE=0: no proxy fence for the landed cp.async tiles")
    inner.line("__syncthreads();")
    # NEWT_PIPE_ISSUE=late: the copies go after the body's last dot (the buffer they fill was last read by
    # a dot every warpgroup finished before this iteration's barrier, wherever they are issued in between)
    # a 1-D ring's value is read where it is first used, not where it was loaded (read before the loop's first
    # dot, tutorial 06's m was live across it: ptxas moved the dots' zero accumulators through registers)
    region = SimpleNamespace(ops=_rows_late(body, pipe.rows)) if pipe.rows else body
    split = _last_dot(region) if late_issue_on() and has_cp and not has_tma else -1
    rows_only = not pipe.loads and NB < S  # (S - 1 buffers: the copies refill the buffer the body has read)
    if rows_only:
        split = len(region.ops) - 1

    def issue(chunk):
        if rows_only:
            chunk.line("__syncthreads();  // every thread has read this iteration's buffer, which the copies refill")
        chunk.line(f"{{  // issue the loads of iteration it + {S - 1}")
        _issue(em, op, pipe, chunk.sub(1, pipelined=True), wr, ahead_iv, ahead, yields, carried, b0)
        chunk.line("}")
    if split < 0:
        issue(inner)
    for a, (name, lay, _) in zip(carried, targets):
        bind_var(em, a, name, lay, inner)
    for pl in pipe.loads:
        em.pipe_read_base[pl.op] = f"(smem + {pl.buf} + {rd} * {pl.tile.size_bytes})"
    for rw in pipe.rows:
        em.pipe_read_base[rw.op] = f"(smem + {rw.buf} + {rd} * {rw.slot})"
    bodyc = inner.sub(0, pipelined=True)
    em.yield_stack.append(targets)
    try:
        if split < 0:
            em.emit_region(region, bodyc)
        else:
            em.emit_region(SimpleNamespace(ops=region.ops[:split + 1]), bodyc)
            issue(bodyc)
            em.emit_region(SimpleNamespace(ops=region.ops[split + 1:]), bodyc)
    finally:
        em.yield_stack.pop()
    inner.line(f"{rd} = {rd} + 1 == {NB} ? 0 : {rd} + 1;")
    inner.line(f"{wr} = {wr} + 1 == {NB} ? 0 : {wr} + 1;")
    c.line("}")
    if pipe.async_dots:
        from .dot.wgmma import drain_async_dots
        drain_async_dots(em, op, pipe, targets, c)
    if has_cp:
        c.line("cp_async_wait<0>();")
    c.line("__syncthreads();")
    for r, (name, lay, _) in zip(op.results, targets):
        bind_var(em, r, name, lay, c)
    del ub, step


def _rows_late(body, rows) -> list:
    """``body``'s ops with each ring row's load moved to just before the first op that uses its value (itself
    or inside its regions): its operands are defined before it still, and its data was copied iterations
    earlier whatever the body does in between."""
    ops = list(body.ops)
    for rw in rows:
        res = rw.op.result
        ops.remove(rw.op)
        at = next((k for k, o in enumerate(ops) if any(x is res for x in o.operands) or
                   any(x is res for r in o.regions for y in r.walk() for x in y.operands)), len(ops))
        ops.insert(at, rw.op)
    return ops


def emit_pipelined_load_value(em, op):
    """In the loop body: the load's value lives in the current stage's buffer."""
    pipe, pl = em.pipelined_loads[op]
    res = op.result
    tile = OperandTile(em.pipe_read_base[op], pl.tile, pl.inner)
    em.smem_tiles[res] = tile
    users = em.users.get(res, [])
    if all(u.name == "dot" or (load_of(u.result)[1] and all(x.name == "dot" for x in em.users.get(u.result, [])))
           for u in users):
        return  # read from the buffer by the dots (through a transposed view: lower_dot.py)
    # other uses need it in registers too
    lay = compact(em.layout_of(res))
    name = em.declare_block(res, lay)
    t = scalar_of(res.type)
    shape = shape_of(res.type)
    lc = log2(shape[1])
    fe = em.flat_expr(lay)
    off = tile.offset(f"(f >> {lc})", f"(f & {shape[1] - 1})")
    em.for_regs(lay.nregs, f"{{ const int f = {fe}; {name}[i] = *reinterpret_cast<const {ctype(t)}*>("
                           f"{tile.base} + {off}); }}")


def emit_ring_row_value(em, op):
    """In the loop body: a ``RingRow``'s value, read from this iteration's buffer of its ring in the value's
    own layout (the dot accumulator's slice for tutorial 06's ``m`` and ``Di``), as wide as a thread's run of
    consecutive elements allows (up to 16 bytes); where the mask is off, ``other`` (the copy wrote zeros)."""
    _pipe, rw = em.pipes.rows[op]
    res = op.result
    t = scalar_of(res.type)
    ct = ctype(t)
    lay = compact(em.layout_of(res))
    name = em.declare_block(res, lay)
    base = em.pipe_read_base[op]
    eb = rw.elem_bytes
    run = 1
    for j, b in enumerate(lay.reg):
        if b != 1 << j:
            break
        run = 1 << (j + 1)
    v = min(run, max(1, 16 // eb))
    if any(b and b < v for b in lay.lane + lay.warp):
        v = 1
    fe = em.flat_expr(lay)
    n = lay.nregs
    if v * eb < 4:
        em.for_regs(n, f"{name}[i] = *reinterpret_cast<const {ct}*>({base} + ({fe}) * {eb});")
    else:
        nwd = v * eb // 4
        vt = {1: "unsigned", 2: "uint2", 4: "uint4"}[nwd]
        words = ["q"] if nwd == 1 else [f"q.{c}" for c in "xyzw"[:nwd]]
        sets = " ".join(f"{name}[i + {j}] = {e};" for j, e in enumerate(unpack_words(words, t, v)))
        stmt = f"{{ const {vt} q = *reinterpret_cast<const {vt}*>({base} + ({fe}) * {eb}); {sets} }}"
        if n == v:
            em.line(f"{{ const int i = 0; {stmt} }}")
        else:
            em.line("#pragma unroll")
            em.line(f"for (int i = 0; i < {n}; i += {v}) {stmt}")
    mask, other = op.operand("mask"), op.operand("other")
    if mask is not None and other is not None and not _is_plus_zero(other):
        m = em.get(mask, lay)
        o = f"{em.get(other, lay)}[i]" if is_block(other.type) else em.scalar(other)
        em.for_regs(n, f"if (!{m}[i]) {name}[i] = {o};")


def _is_plus_zero(v) -> bool:
    """``other`` is +0 (the bits the masked-off copy writes)."""
    if not _is_zero(v):
        return False
    o = v.owner
    while getattr(o, "name", None) in ("splat", "broadcast", "expand_dims"):
        o = o.operands[0].owner
    x = o.attrs.get("value")
    return not (isinstance(x, float) and math.copysign(1.0, x) < 0)
