"""Axis information: what the compiler can prove about the integers and pointers of a block.

For every value and every dimension (like Triton's AxisInfo):

* ``contiguity[d]`` -- the values come in runs of this many consecutive
  integers (or consecutive elements, for pointers) along ``d``;
* ``divisibility[d]`` -- the first value of each run is a multiple of this
  (a power of two; in bytes for pointers, in units for integers);
* ``constancy[d]`` -- the values come in runs of this many equal values.

Loads and stores use it to pick 16-byte vector accesses: a run of ``v``
contiguous elements whose first address is 16-byte aligned (and whose mask is
constant over the run) becomes one ``ld.global.v4``.  Scalars have rank 0 and
carry only ``divisibility`` in ``scalar_div``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from newt.ir.types import scalar_of, shape_of

__all__ = ["AxisInfo", "analyze_axis_info", "MAX_DIV"]

MAX_DIV = 1 << 30


def _pow2_div(v: int) -> int:
    if v == 0:
        return MAX_DIV
    v = abs(int(v))
    return min(v & -v, MAX_DIV)


@dataclass(frozen=True)
class AxisInfo:
    contiguity: tuple
    divisibility: tuple
    constancy: tuple
    scalar_div: int = 1          # for scalars (rank 0)
    const_value: object = None   # a known integer value (splat constants)

    @staticmethod
    def unknown(shape) -> "AxisInfo":
        n = len(shape)
        return AxisInfo((1,) * n, (1,) * n, (1,) * n, 1)

    def div(self, d: int | None = None) -> int:
        if d is None or not self.divisibility:
            return self.scalar_div
        return self.divisibility[d]


def _elem_bytes(ty) -> int:
    e = scalar_of(ty)
    if e.is_ptr():
        return max(1, e.element_ty.primitive_bitwidth // 8)
    return 1


def _splat(shape, div, value=None) -> AxisInfo:
    n = len(shape)
    return AxisInfo((1,) * n, (div,) * n, tuple(shape), div, value)


class _Analysis:
    def __init__(self, fn):
        self.fn = fn
        self.info: dict = {}

    def get(self, v) -> AxisInfo:
        i = self.info.get(v)
        if i is None:
            i = AxisInfo.unknown(shape_of(v.type))
            self.info[v] = i
        return i

    def run(self):
        fn = self.fn
        hints = getattr(fn, "hints", {}) or {}
        for p in fn.params:
            if p.constexpr or p.value is None:
                continue
            d = int(hints.get(p.name, 1) or 1)
            if scalar_of(p.type).is_ptr():  # tensors are at least element-aligned
                d = max(d, _elem_bytes(p.type))
            self.info[p.value] = AxisInfo((), (), (), _pow2_div(d) if d > 1 else 1)
        self.region(fn.body)
        return self.info

    def region(self, region):
        for op in region.ops:
            self.op(op)

    def op(self, op):
        name = op.name
        if name == "scf.for":
            self.loop_for(op)
            return
        if name == "scf.while":
            for r in op.regions:
                for a in r.args:
                    self.info[a] = AxisInfo.unknown(shape_of(a.type))
                self.region(r)
            for r in op.results:
                self.info[r] = AxisInfo.unknown(shape_of(r.type))
            return
        if name == "scf.if":
            for r in op.regions:
                self.region(r)
            for i, res in enumerate(op.results):
                ys = [r.terminator.operands[i] for r in op.regions if r.terminator is not None
                      and r.terminator.name == "yield" and i < len(r.terminator.operands)]
                if len(ys) == 2:
                    self.info[res] = self.meet(self.get(ys[0]), self.get(ys[1]))
            return
        if op.regions:  # reduce/scan combine regions: scalars, nothing to learn
            for r in op.regions:
                for a in r.args:
                    self.info[a] = AxisInfo.unknown(())
                self.region(r)
        for res in op.results:
            self.info[res] = self.rule(op, res)

    def meet(self, a: AxisInfo, b: AxisInfo) -> AxisInfo:
        return AxisInfo(tuple(gcd(x, y) for x, y in zip(a.contiguity, b.contiguity)),
                        tuple(gcd(x, y) for x, y in zip(a.divisibility, b.divisibility)),
                        tuple(gcd(x, y) for x, y in zip(a.constancy, b.constancy)),
                        gcd(a.scalar_div, b.scalar_div),
                        a.const_value if a.const_value == b.const_value else None)

    def loop_for(self, op):
        lb, ub, step = op.operands[:3]
        init = op.operands[3:]
        body = op.regions[0]
        iv = body.args[0]
        li, si = self.get(lb), self.get(step)
        self.info[iv] = AxisInfo((), (), (), gcd(li.scalar_div, si.scalar_div))
        cur = [self.get(v) for v in init]
        for _ in range(4):
            for a, inf in zip(body.args[1:], cur):
                self.info[a] = inf
            self.region(body)
            term = body.terminator
            ys = [self.get(v) for v in term.operands] if term is not None and term.name == "yield" else cur
            new = [self.meet(c, y) for c, y in zip(cur, ys)]
            if new == cur:
                break
            cur = new
        for a, inf in zip(body.args[1:], cur):
            self.info[a] = inf
        self.region(body)
        for r, inf in zip(op.results, cur):
            self.info[r] = inf

    # ------------------------------------------------------------------------
    def rule(self, op, res) -> AxisInfo:  # one table of rules
        name = op.name
        shape = shape_of(res.type)
        n = len(shape)
        ops = [self.get(v) for v in op.operands]
        if name == "constant":
            v = op.attrs.get("value")
            if isinstance(v, bool) or not isinstance(v, int):
                return _splat(shape, 1)
            return _splat(shape, _pow2_div(v), v)
        if name == "arange":
            start = op.attr("start")
            return AxisInfo((shape[0],), (_pow2_div(start),), (1,), _pow2_div(start))
        if name == "program_id" or name == "num_programs":
            return AxisInfo((), (), (), 1)
        if name == "splat":
            s = ops[0]
            return _splat(shape, s.scalar_div, s.const_value)
        if name == "broadcast":
            s = ops[0]
            src_shape = shape_of(op.operands[0].type)
            cont, div, const = [], [], []
            for d in range(n):
                if src_shape[d] == 1 and shape[d] != 1:
                    cont.append(1)
                    div.append(s.divisibility[d])
                    const.append(shape[d])
                else:
                    cont.append(s.contiguity[d])
                    div.append(s.divisibility[d])
                    const.append(s.constancy[d])
            return AxisInfo(tuple(cont), tuple(div), tuple(const), s.scalar_div, s.const_value)
        if name == "expand_dims":
            s = ops[0]
            ax = op.attrs["axis"]
            if not s.contiguity:  # scalar -> 1-block
                return _splat(shape, s.scalar_div, s.const_value)
            c, dv, k = list(s.contiguity), list(s.divisibility), list(s.constancy)
            c.insert(ax, 1)
            dv.insert(ax, s.scalar_div if not s.divisibility else max(s.divisibility))
            k.insert(ax, 1)
            return AxisInfo(tuple(c), tuple(dv), tuple(k), s.scalar_div, s.const_value)
        if name in ("reshape", "permute", "join", "split", "cat"):
            if name == "permute":
                s = ops[0]
                order = op.attrs["order"]
                return AxisInfo(tuple(s.contiguity[o] for o in order), tuple(s.divisibility[o] for o in order),
                                tuple(s.constancy[o] for o in order), s.scalar_div)
            return AxisInfo.unknown(shape)
        if name == "hint":
            s = ops[0]
            c, dv, k = list(s.contiguity), list(s.divisibility), list(s.constancy)
            sd = s.scalar_div
            eb = _elem_bytes(op.operands[0].type)
            if "multiple_of" in op.attrs:
                vals = list(op.attrs["multiple_of"])
                if n == 0:
                    sd = _pow2_div(vals[0]) * eb
                else:
                    dv = [_pow2_div(x) * eb for x in (vals + [vals[-1]] * n)[:n]]
            if "max_contiguous" in op.attrs:
                vals = list(op.attrs["max_contiguous"])
                c = [_pow2_div(x) for x in (vals + [vals[-1]] * n)[:n]]
            if "max_constancy" in op.attrs:
                vals = list(op.attrs["max_constancy"])
                k = [_pow2_div(x) for x in (vals + [vals[-1]] * n)[:n]]
            return AxisInfo(tuple(c), tuple(dv), tuple(k), sd)
        if name in ("add", "sub", "addptr"):
            a, b = ops
            scale = _elem_bytes(op.operands[0].type) if name == "addptr" else 1
            if n == 0:
                return AxisInfo((), (), (), gcd(a.scalar_div, b.scalar_div * scale),
                                self._fold(name, a.const_value, b.const_value) if name != "addptr" else None)
            cont = []
            for d in range(n):
                c1 = gcd(a.contiguity[d], b.constancy[d])
                c2 = gcd(b.contiguity[d], a.constancy[d]) if name != "sub" else 1
                cont.append(max(c1, c2))
            div = tuple(gcd(a.divisibility[d], b.divisibility[d] * scale) for d in range(n))
            const = tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(n))
            cv = self._fold(name, a.const_value, b.const_value) if name != "addptr" else None
            return AxisInfo(tuple(cont), div, const, gcd(a.scalar_div, b.scalar_div * scale), cv)
        if name == "mul":
            a, b = ops
            sd = min(a.scalar_div * b.scalar_div, MAX_DIV)
            cv = self._fold(name, a.const_value, b.const_value)
            if n == 0:
                return AxisInfo((), (), (), sd, cv)
            cont = []
            for d in range(n):
                c = 1
                if b.const_value == 1:
                    c = a.contiguity[d]
                elif a.const_value == 1:
                    c = b.contiguity[d]
                cont.append(c)
            div = tuple(min(a.divisibility[d] * b.divisibility[d], MAX_DIV) for d in range(n))
            const = tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(n))
            return AxisInfo(tuple(cont), div, const, sd, cv)
        if name == "shl":
            a, b = ops
            if isinstance(b.const_value, int) and 0 <= b.const_value < 31:
                k = 1 << b.const_value
                if n == 0:
                    return AxisInfo((), (), (), min(a.scalar_div * k, MAX_DIV))
                return AxisInfo((1,) * n, tuple(min(x * k, MAX_DIV) for x in a.divisibility),
                                a.constancy, min(a.scalar_div * k, MAX_DIV))
        if name in ("floordiv", "shr", "mod", "and"):
            a, b = ops
            if n == 0:
                return AxisInfo((), (), (), 1)
            const = [gcd(a.constancy[d], b.constancy[d]) for d in range(n)]
            cont = [1] * n
            div = [1] * n
            for d in range(n):
                if b.constancy[d] == shape[d]:  # divide / modulo by a value constant along d
                    if name == "mod":
                        cont[d] = gcd(a.contiguity[d], b.divisibility[d])
                        div[d] = gcd(a.divisibility[d], b.divisibility[d])
                    elif name in ("floordiv", "shr"):
                        k = b.divisibility[d] if name == "floordiv" else (
                            1 << b.const_value if isinstance(b.const_value, int) and 0 <= b.const_value < 31 else 1)
                        const[d] = max(const[d], gcd(a.contiguity[d], gcd(k, a.divisibility[d])))
            return AxisInfo(tuple(cont), tuple(div), tuple(const), 1)
        if name in ("lt", "le", "gt", "ge", "eq", "ne"):
            a, b = ops
            if n == 0:
                return AxisInfo((), (), (), 1)
            const = []
            for d in range(n):
                k = gcd(a.constancy[d], b.constancy[d])
                if name in ("lt", "ge", "le", "gt"):
                    # x < c with x contiguous in runs aligned to g and c a multiple of g:
                    # constant over each aligned group of g
                    if b.constancy[d] == shape[d]:
                        g = gcd(a.contiguity[d], gcd(a.divisibility[d], b.divisibility[d]))
                        k = max(k, g)
                    if a.constancy[d] == shape[d]:
                        g = gcd(b.contiguity[d], gcd(b.divisibility[d], a.divisibility[d]))
                        k = max(k, g)
                const.append(k)
            return AxisInfo((1,) * n, (1,) * n, tuple(const), 1)
        if name in ("or", "xor", "where", "maximum", "minimum"):
            if n == 0:
                return AxisInfo((), (), (), 1)
            const = tuple(_gcd_all([o.constancy[d] for o in ops]) for d in range(n))
            if name == "where":
                # where(c, x, y) keeps x's and y's facts when c is constant over runs
                x, y = ops[1], ops[2]
                cont = tuple(gcd(gcd(x.contiguity[d], y.contiguity[d]), ops[0].constancy[d]) for d in range(n))
                div = tuple(gcd(x.divisibility[d], y.divisibility[d]) for d in range(n))
                return AxisInfo(cont, div, const, 1)
            return AxisInfo((1,) * n, (1,) * n, const, 1)
        if name == "cast":
            s = ops[0]
            src = scalar_of(op.operands[0].type)
            dst = scalar_of(res.type)
            if (src.is_int() and dst.is_int() and not src.is_bool()) or (src.is_ptr() and dst.is_ptr()):
                return s
            if n == 0:
                return AxisInfo((), (), (), 1)
            return AxisInfo((1,) * n, (1,) * n, s.constancy, 1)
        if name == "bitcast":
            return ops[0] if ops else AxisInfo.unknown(shape)
        if name in ("neg", "invert", "abs", "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos",
                    "tanh", "erf", "floor", "ceil", "truediv", "div_rn", "pow", "fma", "umulhi"):
            if n == 0:
                return AxisInfo((), (), (), 1)
            return AxisInfo((1,) * n, (1,) * n, _tuple_gcd([o.constancy for o in ops], n), 1)
        return AxisInfo.unknown(shape)

    @staticmethod
    def _fold(name, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return {"add": a + b, "sub": a - b, "mul": a * b}.get(name)
        return None


def _gcd_all(xs):
    g = 0
    for x in xs:
        g = gcd(g, x)
    return g or 1


def _tuple_gcd(tuples, n):
    return tuple(_gcd_all([t[d] for t in tuples]) for d in range(n))


def analyze_axis_info(fn) -> dict:
    """Value -> AxisInfo for every value of ``fn``."""
    return _Analysis(fn).run()
