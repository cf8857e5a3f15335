"""Static facts about a kernel's IR that decide how the interpreter runs it.

* ``used``: values that some op reads (an atomic whose result is unused can be
  applied with one scatter).
* ``needs_sequential``: why programs must run one after another (see
  :func:`execution_mode`), or None.
* ``provenance``: for each memory op, the pointer parameter its addresses
  derive from, so an out-of-bounds error can say "element 1030 of x_ptr".
* ``max_numel``: the largest block in the kernel (sizes the batches of
  programs that run together).
"""

from __future__ import annotations

from newt.ir.ops import ATOMIC, FORWARDS_POINTER, MEMORY
from newt.ir.types import is_block, scalar_of

MEMORY_OPS = MEMORY


def walk_regions(region):
    for op in region.ops:
        yield op
        for r in op.regions:
            yield from walk_regions(r)


class Analysis:
    def __init__(self, fn):
        self.fn = fn
        ops = list(walk_regions(fn.body))
        self.used: set[int] = set()
        for op in ops:
            for v in op.operands:
                self.used.add(id(v))
        self.max_numel = 1
        for op in ops:
            for r in op.results:
                if is_block(r.type):
                    n = 1
                    for d in r.type.shape:
                        n *= d
                    self.max_numel = max(self.max_numel, n)
            if op.name == "dot":
                a, b = op.operands[0].type.shape, op.operands[1].type.shape
                # the product is formed as (M, K) x (K, N) -> (M, N); room for the casts of a and b
                self.max_numel = max(self.max_numel, a[-2] * a[-1], b[-2] * b[-1])
        self.sequential_reason = self._sequential_reason(ops)
        self.check_alignment = any(self._may_misalign(op) for op in ops)
        self.provenance = self._provenance(ops)

    # ------------------------------------------------------------------ mode
    def _sequential_reason(self, ops):
        for op in ops:
            if op.name in ATOMIC and id(op.results[0]) in self.used:
                return ("the result of an atomic is used", op)
            if op.name == "load" and op.attr("volatile"):
                return ("a volatile load reads memory other programs may write", op)
        return None

    @staticmethod
    def _may_misalign(op) -> bool:
        if op.name == "bitcast":
            src, dst = scalar_of(op.operands[0].type), scalar_of(op.results[0].type)
            if src.is_ptr() and dst.is_ptr():
                from .dtypes import itemsize
                return itemsize(dst.element_ty) > itemsize(src.element_ty)
        if op.name == "cast":
            src, dst = scalar_of(op.operands[0].type), scalar_of(op.results[0].type)
            return dst.is_ptr() and not src.is_ptr()
        return False

    # ------------------------------------------------------------------ provenance
    def _provenance(self, ops):
        prov: dict[int, frozenset] = {}
        for p in self.fn.params:
            if p.value is not None and scalar_of(p.type).is_ptr():
                prov[id(p.value)] = frozenset([p.name])

        def get(v):
            return prov.get(id(v), frozenset())

        def join(v, s):
            if not s:
                return False
            old = prov.get(id(v), frozenset())
            new = old | s
            if new != old:
                prov[id(v)] = new
                return True
            return False

        changed = True
        rounds = 0
        while changed and rounds < 50:
            changed = False
            rounds += 1
            for op in ops:
                n = op.name
                if n in FORWARDS_POINTER:
                    data = op.opdef.data
                    srcs = op.operands if data is None else [op.operand(k) for k in data]
                    s = frozenset().union(*(get(v) for v in srcs)) if srcs else frozenset()
                    for r in op.results:
                        if scalar_of(r.type).is_ptr():
                            changed |= join(r, s)
                elif n == "scf.for":
                    body = op.regions[0]
                    y = body.terminator
                    for i, init in enumerate(op.operands[3:]):
                        s = get(init) | (get(y.operands[i]) if y is not None else frozenset())
                        changed |= join(body.args[i + 1], s)
                        changed |= join(op.results[i], s)
                elif n == "scf.while":
                    before, after = op.regions
                    cond = before.terminator
                    y = after.terminator
                    for i, init in enumerate(op.operands):
                        changed |= join(before.args[i], get(init) | get(y.operands[i]))
                        s = get(cond.operands[i + 1])
                        changed |= join(after.args[i], s)
                        changed |= join(op.results[i], s)
                elif n == "scf.if":
                    for reg in op.regions:
                        t = reg.terminator
                        for i, r in enumerate(op.results):
                            changed |= join(r, get(t.operands[i]))
        out = {}
        for op in ops:
            if op.name in MEMORY_OPS:
                s = get(op.operands[0])
                out[id(op)] = next(iter(s)) if len(s) == 1 else None
        return out
