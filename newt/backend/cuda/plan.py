"""Layout planning: which layout every block value lives in.

Values split in two kinds:

* **polymorphic** values take whatever layout their user asks for, because
  producing them in any layout costs no data movement: constants, ``arange``,
  ``splat``, the views ``expand_dims`` / ``broadcast`` / ``reshape`` /
  ``permute`` (a view is a basis manipulation of its source's layout), and
  elementwise ops of polymorphic values (index arithmetic, masks, pointers).
  The emitter materializes them per requested layout, once, where they are
  defined (Triton calls this rematerialization).
* **anchored** values have one layout, fixed here: loads, stores and atomics
  use a coalesced layout from the axis analysis (16-byte vectors where the
  data allows), ``dot`` results use the dot lowering's accumulator layout,
  reductions produce the slice of their input's layout, elementwise ops of
  anchored values follow their first anchored operand, and loop-carried
  values take the layout of what the loop yields (a fixed point).

A conversion happens only where an anchored value is used in another layout:
in registers when every thread already holds what it needs, through shared
memory otherwise.
"""

from __future__ import annotations

from newt.ir.ops import ELEMENTWISE, MEMORY, SOURCE, VIEW
from newt.ir.types import is_block, scalar_of, shape_of

from .axisinfo import AxisInfo
from .layout import Layout, blocked_for

__all__ = ["LayoutPlan", "plan_layouts", "mem_layout", "default_layout", "VIEW_OPS", "compact"]

VIEW_OPS = VIEW


def compact(lay: Layout) -> Layout:
    """The layout without duplicated (zero-basis) registers."""
    if all(lay.reg):
        return lay
    return Layout(lay.shape, tuple(b for b in lay.reg if b), lay.lane, lay.warp, lay.kind)


def default_layout(shape, num_warps: int) -> Layout:
    numel = 1
    for d in shape:
        numel *= d
    per_thread = max(1, numel // (32 * num_warps))
    vec = min(4, per_thread, shape[-1])
    return blocked_for(shape, num_warps, vec=vec)


def mem_layout(shape, ptr_info: AxisInfo, elem_bytes: int, num_warps: int) -> Layout:
    """The coalesced layout for a global access: threads along the most contiguous
    dim with as many consecutive elements as contiguity and alignment allow (<= 16 bytes)."""
    rank = len(shape)
    order = sorted(range(rank), key=lambda d: (-ptr_info.contiguity[d], -d))
    d0 = order[0]
    contig = ptr_info.contiguity[d0]
    align = max(1, ptr_info.divisibility[d0] // elem_bytes) if ptr_info.divisibility[d0] >= elem_bytes else 1
    numel = 1
    for d in shape:
        numel *= d
    vec = min(contig, align, max(1, 16 // elem_bytes), max(1, numel // (32 * num_warps)), shape[d0])
    vec = 1 << (max(1, vec).bit_length() - 1)
    return blocked_for(shape, num_warps, vec=vec, order=order, kind="blocked")


class LayoutPlan:
    def __init__(self):
        self.layout: dict = {}      # anchored block value -> Layout
        self.poly: set = set()      # polymorphic block values
        self.access: dict = {}      # load/store/atomic op -> Layout of the access
        self.dot: dict = {}         # dot op -> DotLowering
        self.demand: dict = {}      # value -> Layout wanted by a memory access (for loop args)

    def describe(self, value) -> str | None:
        lay = self.layout.get(value)
        if lay is not None:
            return lay.describe()
        if value in self.poly:
            return "any (materialized in the layout each use needs)"
        return None


class _Planner:
    def __init__(self, fn, num_warps, axis_info, select_dot):
        self.fn = fn
        self.nw = num_warps
        self.axis = axis_info
        self.select_dot = select_dot
        self.plan = LayoutPlan()
        self.unknown: set = set()

    def info(self, v) -> AxisInfo:
        i = self.axis.get(v)
        return i if i is not None else AxisInfo.unknown(shape_of(v.type))

    def run(self) -> LayoutPlan:
        self.chained = _chained_dots(self.fn)
        self.hints = _slice_hints(self.fn, self.nw, self.select_dot, self.chained)
        self.region(self.fn.body)
        return self.plan

    # ------------------------------------------------------------------
    def lay(self, v):
        """The anchored layout of v, None if polymorphic/unknown/scalar."""
        return self.plan.layout.get(v)

    def set(self, v, lay):
        if is_block(v.type):
            self.plan.layout[v] = lay
            self.plan.poly.discard(v)
            self.unknown.discard(v)

    def region(self, region):
        for op in region.ops:
            self.op(op)

    def op(self, op):
        name = op.name
        P = self.plan
        if name == "scf.for":
            self.loop(op, op.operands[3:], op.regions[0].args[1:], op.regions[0])
            return
        if name == "scf.while":
            self.while_loop(op)
            return
        if name == "scf.if":
            for r in op.regions:
                self.region(r)
            for i, res in enumerate(op.results):
                if not is_block(res.type):
                    continue
                cands = [r.terminator.operands[i] for r in op.regions if r.terminator is not None and
                         r.terminator.name == "yield"]
                lay = next((self.lay(c) for c in cands if self.lay(c) is not None), None)
                self.set(res, lay or default_layout(shape_of(res.type), self.nw))
            return
        if name in ("reduce", "scan"):
            for r in op.regions:
                self.region(r)
        res_blocks = [r for r in op.results if is_block(r.type)]
        block_ops = [o for o in op.operands if is_block(o.type)]
        if name in SOURCE or name in VIEW:
            for r in res_blocks:
                P.poly.add(r)
            return
        if name in ELEMENTWISE:
            anchored = [o for o in block_ops if o not in P.poly]
            if not anchored:
                for r in res_blocks:
                    P.poly.add(r)
                return
            lay = next((self.lay(o) for o in anchored if self.lay(o) is not None), None)
            for r in res_blocks:
                if lay is None:
                    self.unknown.add(r)
                else:
                    self.set(r, lay.with_shape(shape_of(r.type)))
            return
        if name in MEMORY:
            ptr = op.operands[0]
            if not is_block(ptr.type):
                return
            elem = scalar_of(ptr.type).element_ty
            eb = max(1, elem.primitive_bitwidth // 8)
            lay = self.hints.get(op)
            if lay is None or any(is_block(o.type) and o not in P.poly for o in op.operands):
                lay = mem_layout(shape_of(ptr.type), self.info(ptr), eb, self.nw)  # (an anchored pointer: kept)
            P.access[op] = lay
            for o in op.operands:
                if o in self.unknown or (o in P.layout and o not in P.poly and _is_arg(o)):
                    P.demand.setdefault(o, lay)
            for r in res_blocks:
                self.set(r, lay)
            return
        if name == "dot":
            low = self.select_dot(op)
            P.dot[op] = low
            self.set(op.result, low.acc_layout(op, self.nw, chained=op in self.chained))
            return
        if name == "reduce":
            src = op.operands[0]
            lay = self.input_layout(src)
            for o in op.operands:
                self.set_input(o, lay)
            axis = op.attrs["axis"]
            out = compact(lay.drop_dims([axis]))
            for r in op.results:
                if is_block(r.type):
                    self.set(r, out)
            return
        if name == "scan":
            src = op.operands[0]
            lay = _scan_layout(self.input_layout(src), op.attrs["axis"], self.nw)
            for o in op.operands:
                self.set_input(o, lay)
            for r in op.results:
                self.set(r, lay)
            return
        if name == "join":
            a = op.operands[0]
            lay = self.input_layout(a)
            self.set(op.result, lay.join())
            return
        if name == "cat":
            lay = self.input_layout(op.operands[0])
            self.set(op.result, lay.cat())
            return
        if name == "split":
            lay = self.input_layout(op.operands[0])
            if 1 not in lay.reg:
                lay = _with_bit0_in_regs(lay, self.nw)
            P.access[op] = lay
            inner = Layout(lay.shape[:-1], tuple(b >> 1 for b in lay.reg if b != 1), tuple(b >> 1 for b in lay.lane),
                           tuple(b >> 1 for b in lay.warp), lay.kind)
            for r in op.results:
                self.set(r, inner)
            return
        if name == "inline_asm" and res_blocks:  # `pack` consecutive elements in a thread's registers (lower_asm)
            k = op.attr("pack").bit_length() - 1
            lay = next((self.lay(o) for o in block_ops if self.lay(o) is not None), None)
            if lay is None or tuple(lay.reg[:k]) != tuple(1 << j for j in range(k)):
                s = shape_of(res_blocks[0].type)
                lay = blocked_for(s, self.nw, vec=op.attr("pack"), order=list(range(len(s) - 1, -1, -1)))
            for r in res_blocks:
                self.set(r, lay.with_shape(shape_of(r.type)))
            return
        for r in res_blocks:  # anything else: a plain blocked layout
            self.set(r, default_layout(shape_of(r.type), self.nw))

    def input_layout(self, v) -> Layout:
        lay = self.lay(v)
        if lay is None:
            lay = self.plan.demand.get(v) or default_layout(shape_of(v.type), self.nw)
        return lay

    def set_input(self, v, lay):
        """Record the layout an op reads a polymorphic/unknown operand in."""
        self.plan.access.setdefault(("input", v), lay)

    def loop(self, op, init, args, body, before=None):
        P = self.plan
        # pass 1: block args with anchored inits start there; the others are unknown
        for a, v in zip(args, init):
            if not is_block(a.type):
                continue
            lay = self.lay(v)
            if lay is not None:
                self.set(a, lay)
            else:
                P.layout.pop(a, None)
                self.unknown.add(a)
        self.region(body)
        term = body.terminator
        yields = term.operands if term is not None and term.name == "yield" else []
        changed = False
        for a, v, y in zip(args, init, yields):
            if not is_block(a.type):
                continue
            want = self.lay(y) or self.lay(v) or P.demand.get(a) or default_layout(shape_of(a.type), self.nw)
            if self.lay(a) != want:
                changed = True
            self.set(a, want)
        if changed:  # pass 2 with the loop-carried layouts fixed
            self.region(body)
        for r, a in zip(op.results, args):
            if is_block(r.type):
                self.set(r, self.lay(a))

    def while_loop(self, op):
        before, after = op.regions
        init = op.operands
        for a, v in zip(before.args, init):
            if is_block(a.type):
                self.set(a, self.lay(v) or default_layout(shape_of(a.type), self.nw))
        for _ in range(2):
            self.region(before)
            cond = before.terminator
            for a, v in zip(after.args, cond.operands[1:]):
                if is_block(a.type):
                    self.set(a, self.lay(v) or default_layout(shape_of(a.type), self.nw))
            self.region(after)
            term = after.terminator
            changed = False
            for a, y in zip(before.args, term.operands):
                if is_block(a.type) and self.lay(y) is not None and self.lay(y) != self.lay(a):
                    self.set(a, self.lay(y))
                    changed = True
            if not changed:
                break
        cond = before.terminator
        for r, v in zip(op.results, cond.operands[1:]):
            if is_block(r.type):
                self.set(r, self.lay(v) or default_layout(shape_of(r.type), self.nw))


def _is_arg(v) -> bool:
    from newt.ir.core import Region
    return isinstance(v.owner, Region)


def _scan_layout(lay: Layout, axis: int, nw: int) -> Layout:
    """A layout where the scanned dim's bits go registers < lanes < warps in significance."""
    seq = []
    for kind, bases in (("reg", lay.reg), ("lane", lay.lane), ("warp", lay.warp)):
        for b in bases:
            if b and lay.dim_of_bit(b)[0] == axis:
                seq.append((lay.dim_of_bit(b)[1], kind))
    seq.sort()
    rank = {"reg": 0, "lane": 1, "warp": 2}
    ok = all(rank[seq[i][1]] <= rank[seq[i + 1][1]] for i in range(len(seq) - 1))
    if ok:
        return lay
    return scan_layout(lay.shape, axis, nw)


def scan_layout(shape, axis: int, nw: int) -> Layout:
    """Registers hold the low bits of the scanned dim, then lanes, then warps."""
    from .layout import blocked
    rank = len(shape)
    n = shape[axis]
    threads = min(n, 32 * nw)
    spt = [1] * rank
    spt[axis] = n // threads
    tpw = [1] * rank
    tpw[axis] = min(32, n // spt[axis])
    wpc = [1] * rank
    wpc[axis] = min(nw, n // (spt[axis] * tpw[axis]))
    order = [axis] + [d for d in range(rank - 1, -1, -1) if d != axis]
    left_t, left_w = 32 // tpw[axis], nw // wpc[axis]
    for d in order[1:]:
        t = min(left_t, shape[d])
        tpw[d] = t
        left_t //= t
        w = min(left_w, max(1, shape[d] // t))
        wpc[d] = w
        left_w //= w
    tpw[order[-1]] *= left_t
    wpc[order[-1]] *= left_w
    return blocked(shape, spt, tpw, wpc, order, kind="blocked")


def _with_bit0_in_regs(lay: Layout, nw: int) -> Layout:
    shape = lay.shape
    return blocked_for(shape, nw, vec=2, order=list(range(len(shape) - 1, -1, -1)))


def _chained_dots(fn) -> set:
    """Dots whose result flows (through elementwise ops and reductions) into another dot's first operand:
    attention-like chains want all warps along M so row reductions stay inside a warp."""
    dots = [op for op in fn.walk() if op.name == "dot"]
    if len(dots) < 2:
        return set()
    users: dict = {}
    for op in fn.walk():
        for o in op.operands:
            users.setdefault(o, []).append(op)
    out = set()
    for d in dots:
        seen = set()
        stack = [d.result]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            for u in users.get(v, []):
                if u.name == "dot" and u is not d and u.operands[0] is v:
                    out.add(d)
                    out.add(u)
                elif u.name in ELEMENTWISE or u.name in VIEW or u.name == "reduce":
                    stack.extend(u.results)
    return out


def _slice_hints(fn, nw, select_dot, chained) -> dict:
    """{load op: layout} for a 1-D load whose only use is ``x[None, :]`` / ``x[:, None]`` (then broadcast) in an
    elementwise op with a dot's result: loaded in the slice of that dot's accumulator layout (where its pointer
    and mask are polymorphic: computed in any layout), the broadcast is in-thread.  Tutorial 06's backward loads
    ``m`` and ``Di`` in its dK/dV loop so; in the coalesced layout each went through shared memory (a store, two
    barriers, a load) every iteration and the loop waited for the global load right there.  Off with
    ``NEWT_SLICE_LOADS=0``."""
    import os
    if os.environ.get("NEWT_SLICE_LOADS", "1") == "0":
        return {}
    from newt.ir.core import Op
    users: dict = {}
    for op in fn.walk():
        for o in op.operands:
            users.setdefault(o, []).append(op)
    out = {}
    for op in fn.walk():
        if op.name != "load" or not is_block(op.result.type) or len(shape_of(op.result.type)) != 1:
            continue
        us = users.get(op.result, [])
        if len(us) != 1 or us[0].name != "expand_dims":
            continue
        axis = us[0].attrs["axis"]
        v = us[0].result
        nxt = users.get(v, [])
        if len(nxt) == 1 and nxt[0].name == "broadcast":
            v = nxt[0].result
            nxt = users.get(v, [])
        for u in nxt:
            if u.name not in ELEMENTWISE:
                continue
            d = next((o.owner for o in u.operands if o is not v and isinstance(o.owner, Op) and o.owner.name == "dot"
                      and tuple(shape_of(o.type)) == tuple(shape_of(v.type))), None)
            if d is not None:
                acc = select_dot(d).acc_layout(d, nw, chained=d in chained)
                out[op] = compact(acc.drop_dims([axis]))
                break
    return out


def plan_layouts(fn, num_warps, axis_info, select_dot) -> LayoutPlan:
    return _Planner(fn, num_warps, axis_info, select_dot).run()
