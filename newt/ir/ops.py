"""The op table: one ``OpDef`` per IR op.

Every op of the tile IR is defined here once: its operands (optional ones and
variadic groups named), its attributes with their defaults, its traits and its
type rule.  Everything else asks this table:

* ``op.operand("mask")`` / ``op.attr("sem")`` (``newt.ir.core.Op``) resolve
  names and defaults through the op's ``OpDef``, so a default is written once;
* passes derive their op sets from traits (``names_with(Trait.ELEMENTWISE)``,
  or the ready-made sets ``ELEMENTWISE``, ``VIEW``, ``MEMORY``, ...) instead of
  listing names by hand (tinygrad's ``GroupOp`` sets are the model);
* ``newt.ir.verify`` checks operand counts, attribute names and each op's type
  rule (``OpDef.verify``);
* ``tests/ir/test_op_table.py`` checks that every op has an interpreter handler
  and a CUDA lowering, and that no pass or handler names an op missing here.

Operands are positional.  A signature is a tuple of names: ``"ptr"`` is
required, ``"mask?"`` optional, ``"*init"`` a variadic group (at most one,
after the required ones).  Optional operands fill in order: ``other`` can only
be present when ``mask`` is.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .types import scalar_of, shape_of, type_str

__all__ = ["Trait", "OpDef", "OPS", "REQUIRED", "opdef", "names_with", "ELEMENTWISE", "SAME_TYPE", "COMPARISON",
           "BINARY", "VIEW", "SOURCE", "MEMORY", "ATOMIC", "PURE", "TERMINATORS", "FORWARDS_POINTER", "COMBINE_OPS",
           "is_commutative_combine", "asm_elems_per_reg"]


class Trait(enum.Enum):
    """What a pass may assume about an op."""

    #: no effect besides its results: dead when nothing reads them
    PURE = "pure"
    #: computes each element of its result from the same element of its operands (any shape)
    ELEMENTWISE = "elementwise"
    #: all operands and the result have one type
    SAME_TYPE = "same_type"
    #: a comparison: operands of one type, an int1 result of their shape
    COMPARISON = "comparison"
    #: ``f(a, b) == f(b, a)``
    COMMUTATIVE = "commutative"
    #: reads or writes global memory through its first operand (a pointer or block of pointers)
    MEMORY = "memory"
    #: the result is a rearrangement of its operand's elements that moves no data (a basis change of
    #: the operand's layout)
    VIEW = "view"
    #: makes a block from scalars only (constants, indices, splat): free to produce in any layout
    SOURCE = "source"
    #: an atomic read-modify-write: its result is what memory held before
    ATOMIC = "atomic"
    #: a pointer result points into the same allocation as its data operands (``OpDef.data``)
    FORWARDS_POINTER = "forwards_pointer"
    #: ends a region
    TERMINATOR = "terminator"
    #: carries regions (structured control flow)
    CONTROL_FLOW = "control_flow"


#: marks an attribute that has no default (the op must carry it)
REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()

Verify = Callable[[Any], Iterable[str]]


@dataclass(frozen=True)
class OpDef:
    name: str
    #: operand names in order: ``"x"`` required, ``"mask?"`` optional, ``"*init"`` variadic
    operands: tuple[str, ...] = ()
    #: attribute name -> default (``REQUIRED`` when it has none)
    attrs: dict[str, Any] = field(default_factory=dict)
    traits: frozenset[Trait] = frozenset()
    #: the type rule: yields one message per problem of ``op``'s operand/result types
    verify: Verify | None = None
    #: number of results (None: any)
    results: int | None = 1
    #: operands whose elements the result carries (pointer provenance); default: all
    data: tuple[str, ...] | None = None
    doc: str = ""

    def __post_init__(self):
        index: dict[str, int] = {}
        variadic = None
        n_req = 0
        for i, raw in enumerate(self.operands):
            if raw.startswith("*"):
                if variadic is not None:
                    raise ValueError(f"{self.name}: more than one variadic operand group")
                variadic = (raw[1:], i)
                index[raw[1:]] = i
            elif raw.endswith("?"):
                index[raw[:-1]] = i
            else:
                if any(r.endswith("?") for r in self.operands[:i]):
                    raise ValueError(f"{self.name}: required operand {raw!r} after an optional one")
                index[raw] = i
                n_req += 1
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_variadic", variadic)
        n_opt = sum(1 for r in self.operands if r.endswith("?"))
        object.__setattr__(self, "min_operands", n_req)
        object.__setattr__(self, "max_operands", None if variadic else n_req + n_opt)

    # -- traits ------------------------------------------------------------
    def has(self, trait: Trait) -> bool:
        return trait in self.traits

    # -- operands ----------------------------------------------------------
    @property
    def operand_names(self) -> tuple[str, ...]:
        return tuple(r.strip("*?") for r in self.operands)

    def operand_index(self, name: str) -> int:
        try:
            return self._index[name]  # type: ignore[attr-defined]
        except KeyError:
            raise KeyError(f"op {self.name} has no operand {name!r} (operands: {', '.join(self.operands)})") \
                from None

    def has_operand(self, name: str) -> bool:
        return name in self._index  # type: ignore[attr-defined]

    def is_variadic(self, name: str) -> bool:
        v = self._variadic  # type: ignore[attr-defined]
        return v is not None and v[0] == name

    # -- attributes --------------------------------------------------------
    def default(self, name: str) -> Any:
        try:
            d = self.attrs[name]
        except KeyError:
            raise KeyError(f"op {self.name} has no attribute {name!r}") from None
        if d is REQUIRED:
            raise KeyError(f"op {self.name}: attribute {name!r} is required and has no default")
        return d


# ---------------------------------------------------------------------------
# type rules
# ---------------------------------------------------------------------------

def _shape_eq(a, b) -> bool:
    sa, sb = shape_of(a), shape_of(b)
    return len(sa) == len(sb) and all(x == y or not (isinstance(x, int) and isinstance(y, int))
                                      for x, y in zip(sa, sb))


def _same_type(op):
    t0 = op.operands[0].type
    for o in op.operands[1:]:
        if o.type != t0:
            yield f"operand types differ ({type_str(t0)} vs {type_str(o.type)})"
    if op.results and op.results[0].type != t0:
        yield f"result type {type_str(op.results[0].type)} != operand type"


def _compare(op):
    a, b = op.operands
    if a.type != b.type:
        yield f"compared types differ ({type_str(a.type)} vs {type_str(b.type)})"
    r = op.results[0].type
    if shape_of(r) != shape_of(a.type):
        yield "comparison changes the shape"
    if not scalar_of(r).is_bool():
        yield f"comparison result {type_str(r)} is not int1"


def _same_shape(op):
    """Result shape equals every operand's shape (casts, where, addptr)."""
    r = op.results[0].type
    for o in op.operands:
        if not _shape_eq(o.type, r):
            yield f"operand {type_str(o.type)} and result {type_str(r)} differ in shape"


def _where(op):
    yield from _same_shape(op)
    c, x, y = op.operands
    if not scalar_of(c.type).is_bool():
        yield f"condition {type_str(c.type)} is not int1"
    if x.type != y.type:
        yield f"branch types differ ({type_str(x.type)} vs {type_str(y.type)})"
    if op.results[0].type != x.type:
        yield f"result type {type_str(op.results[0].type)} != branch type {type_str(x.type)}"


def _addptr(op):
    yield from _same_shape(op)
    p, off = op.operands
    if not scalar_of(p.type).is_ptr():
        yield f"addptr base {type_str(p.type)} is not a pointer"
    if op.results[0].type != p.type:
        yield "addptr changes the pointer type"
    if not scalar_of(off.type).is_int():
        yield f"addptr offset {type_str(off.type)} is not an integer"


def _no_check(op):
    return ()


def _libdevice(op):
    """Same shapes; the operand dtypes are one variant of the function's in the libdevice table, the result
    its result dtype (symbolic dtypes of the generic analysis match any)."""
    from newt.language.extra.cuda.libdevice import LIBDEVICE
    yield from _same_shape(op)
    fn = op.attrs.get("fn")
    if fn not in LIBDEVICE:
        yield f"no libdevice function {fn!r}"
        return
    ts = [scalar_of(o.type) for o in op.operands] + [scalar_of(op.results[0].type)]
    if len(ts) - 1 != len(LIBDEVICE[fn][0][0]):
        yield f"libdevice.{fn} takes {len(LIBDEVICE[fn][0][0])} operands, got {len(ts) - 1}"
        return
    names = [getattr(t, "name", "?") for t in ts]
    if not any(all(t.is_symbolic() or n == w for t, n, w in zip(ts, names, list(v[0]) + [v[1]]))
               for v in LIBDEVICE[fn]):
        yield f"libdevice.{fn} has no variant ({', '.join(names[:-1])}) -> {names[-1]}"


def _scalar_i32(op):
    if shape_of(op.results[0].type) != () or scalar_of(op.results[0].type).name != "int32":
        yield f"result {type_str(op.results[0].type)} is not an i32 scalar"


def _arange(op):
    r = op.results[0].type
    if len(shape_of(r)) != 1 or scalar_of(r).name != "int32":
        yield f"arange result {type_str(r)} is not a 1-D i32 block"


def _splat(op):
    (x,) = op.operands
    r = op.results[0].type
    if shape_of(x.type) != ():
        yield f"splat of a block {type_str(x.type)}"
    if scalar_of(r) != scalar_of(x.type):
        yield "splat changes the element type"


def _same_elem(op):
    e = scalar_of(op.operands[0].type)
    for v in list(op.operands[1:]) + list(op.results):
        if scalar_of(v.type) != e:
            yield f"element types differ ({type_str(op.operands[0].type)} vs {type_str(v.type)})"


def _broadcast(op):
    yield from _same_elem(op)
    if len(shape_of(op.operands[0].type)) != len(shape_of(op.results[0].type)):
        yield "broadcast changes the rank"


def _expand_dims(op):
    yield from _same_elem(op)
    if len(shape_of(op.results[0].type)) != len(shape_of(op.operands[0].type)) + 1:
        yield "expand_dims must add exactly one dimension"


def _permute(op):
    yield from _same_elem(op)
    order = list(op.attr("order"))
    s, r = shape_of(op.operands[0].type), shape_of(op.results[0].type)
    if sorted(order) != list(range(len(s))):
        yield f"permute order {order} is not a permutation of {len(s)} dims"
    elif tuple(s[i] for i in order) != tuple(r):
        yield "permute result shape does not match the order"


def _hint(op):
    if op.results[0].type != op.operands[0].type:
        yield "hint changes the type"
    given = [k for k in ("multiple_of", "max_contiguous", "max_constancy") if op.attrs.get(k) is not None]
    if len(given) != 1:
        yield f"hint needs exactly one of multiple_of, max_contiguous, max_constancy (got {given})"


def _mem_pointer(op):
    p = op.operands[0]
    if not scalar_of(p.type).is_ptr() and not scalar_of(p.type).is_symbolic():
        yield f"{op.name} through a non-pointer {type_str(p.type)}"
    for name in ("mask", "other", "val", "value", "cmp"):
        i = op.opdef.operand_index(name) if op.opdef.has_operand(name) else None
        if i is not None and i < len(op.operands) and not _shape_eq(op.operands[i].type, p.type):
            yield f"{name} {type_str(op.operands[i].type)} and pointer {type_str(p.type)} differ in shape"
    m = op.operand("mask") if op.opdef.has_operand("mask") else None
    if m is not None and not scalar_of(m.type).is_bool():
        yield f"mask {type_str(m.type)} is not int1"


def _loaded(op):
    yield from _mem_pointer(op)
    p = scalar_of(op.operands[0].type)
    r = op.results[0].type
    if p.is_ptr() and scalar_of(r) != p.element_ty:
        yield f"{op.name} result {type_str(r)} is not the pointee type of {type_str(op.operands[0].type)}"
    if not _shape_eq(r, op.operands[0].type):
        yield f"{op.name} result and pointer differ in shape"


def _reduce(op):
    n = len(op.operands)
    if len(op.results) != n:
        yield f"reduce of {n} operands gives {len(op.results)} results"
    if op.attr("combine") == "region" and op.regions and len(op.regions[0].args) != 2 * n:
        yield f"combine region takes {len(op.regions[0].args)} args, expected {2 * n}"


def _scan(op):
    for o, r in zip(op.operands, op.results):
        if o.type != r.type:
            yield "scan changes the type"
    if len(op.results) != len(op.operands):
        yield "scan must give one result per operand"


def _dot(op):
    a, b, acc = op.operands
    sa, sb, sc = shape_of(a.type), shape_of(b.type), shape_of(acc.type)
    if not (len(sa) == len(sb) == len(sc) and len(sa) in (2, 3)):
        yield "dot operands must all be 2-D (or all 3-D)"
    if op.results[0].type != acc.type:
        yield "dot result type differs from the accumulator's"


def _cond_int1(op):
    c = op.operands[0]
    if shape_of(c.type) != () or not scalar_of(c.type).is_bool():
        yield f"condition {type_str(c.type)} is not an int1 scalar"


def _gather(op):
    src, index = op.operands
    if tuple(shape_of(op.results[0].type)) != tuple(shape_of(index.type)):
        yield "gather result does not have the shape of its index"
    if scalar_of(op.results[0].type) != scalar_of(src.type):
        yield "gather result does not have the element type of its source"
    if not scalar_of(index.type).is_int():
        yield "gather index is not an integer block"


def _polled(op):
    if tuple(shape_of(op.results[0].type)) != tuple(shape_of(op.operands[0].type)) or \
            not scalar_of(op.results[0].type).is_bool():
        yield "atomic_poll result is not an int1 block of the pointer's shape"


def _histogram(op):
    n = op.attr("num_bins")
    if not scalar_of(op.operands[0].type).is_int():
        yield "histogram input is not an integer block"
    if tuple(shape_of(op.results[0].type)) != (n,) or not scalar_of(op.results[0].type).is_int():
        yield f"histogram result is not an integer block of shape [{n}]"


def _inline_asm(op):
    cons = [c.strip() for c in str(op.attr("constraints")).split(",")]
    pack = op.attr("pack")
    if not isinstance(pack, int) or pack < 1 or pack & (pack - 1):
        yield f"inline_asm pack {pack!r} is not a power of two"
        return
    if any(scalar_of(v.type).is_symbolic() for v in list(op.operands) + list(op.results)):
        return
    want = _asm_regs(op.results, pack) + _asm_regs(op.operands, pack)
    if len(cons) != want:
        yield (f"inline_asm has {len(cons)} constraints for {len(op.results)} results and {len(op.operands)} "
               f"operands ({want} registers)")
    shapes = {tuple(shape_of(v.type)) for v in list(op.operands) + list(op.results)}
    if len(shapes) > 1:
        yield "inline_asm operands and results differ in shape"


def _asm_regs(values, pack):
    """Registers of one asm invocation: values under 32 bits share a register, as many as fit (pack)."""
    return sum(pack // asm_elems_per_reg(scalar_of(v.type).primitive_bitwidth, pack) for v in values)


def asm_elems_per_reg(bits: int, pack: int) -> int:
    """How many elements of ``bits`` bits one register of an inline asm carries (Triton: 4 of 8 bits, 2 of 16)."""
    per = 4 if bits <= 8 else 2 if bits <= 16 else 1
    return max(1, min(per, pack))


def _assert(op):
    if not scalar_of(op.operands[0].type).is_bool():
        yield "assert condition is not int1"


# ---------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------

P, E, ST, CMP, C = Trait.PURE, Trait.ELEMENTWISE, Trait.SAME_TYPE, Trait.COMPARISON, Trait.COMMUTATIVE
MEM, AT, VW, SRC, FW, TERM, CF = (Trait.MEMORY, Trait.ATOMIC, Trait.VIEW, Trait.SOURCE, Trait.FORWARDS_POINTER,
                                  Trait.TERMINATOR, Trait.CONTROL_FLOW)

_DEFS: list[OpDef] = []


def _def(name, operands=(), attrs=None, traits=(), verify=None, **kw) -> OpDef:
    d = OpDef(name, tuple(operands), dict(attrs or {}), frozenset(traits), verify, **kw)
    _DEFS.append(d)
    return d


# constants and indices
_def("constant", (), {"value": REQUIRED}, (P, SRC), _no_check, doc="a scalar or a splat block constant")
_def("program_id", (), {"axis": REQUIRED}, (P, SRC), _scalar_i32)
_def("num_programs", (), {"axis": REQUIRED}, (P, SRC), _scalar_i32)
_def("arange", (), {"start": 0, "end": REQUIRED}, (P, SRC), _arange)

# shape
_def("splat", ("x",), {}, (P, SRC, FW), _splat)
_def("broadcast", ("x",), {}, (P, VW, FW), _broadcast)
_def("expand_dims", ("x",), {"axis": REQUIRED}, (P, VW, FW), _expand_dims)
_def("reshape", ("x",), {"shape": REQUIRED, "can_reorder": False}, (P, VW, FW), _same_elem)
_def("permute", ("x",), {"order": REQUIRED}, (P, VW, FW), _permute)
_def("join", ("a", "b"), {}, (P, FW), _same_elem)
_def("split", ("x",), {}, (P, FW), _same_elem, results=2)
_def("cat", ("a", "b"), {}, (P, FW), _same_elem)

# elementwise: binary, one type in and out
for _n, _t in (("add", (C,)), ("sub", ()), ("mul", (C,)), ("truediv", ()), ("floordiv", ()), ("mod", ()),
               ("and", (C,)), ("or", (C,)), ("xor", (C,)), ("shl", ()), ("shr", ()), ("umulhi", (C,)),
               ("div_rn", ()), ("pow", ())):
    _def(_n, ("x", "y"), {}, (P, E, ST) + _t, _same_type)
for _n in ("minimum", "maximum"):
    _def(_n, ("x", "y"), {"propagate_nan": False}, (P, E, ST, C), _same_type)
_def("fma", ("x", "y", "z"), {}, (P, E, ST), _same_type)
for _n, _t in (("lt", ()), ("le", ()), ("gt", ()), ("ge", ()), ("eq", (C,)), ("ne", (C,))):
    _def(_n, ("x", "y"), {}, (P, E, CMP) + _t, _compare)
# elementwise: unary
for _n in ("neg", "invert", "abs", "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "tanh",
           "erf", "floor", "ceil"):
    _def(_n, ("x",), {}, (P, E, ST), _same_type)
_def("where", ("cond", "x", "y"), {}, (P, E, FW), _where, data=("x", "y"))
_def("cast", ("x",), {"rounding": "rtne"}, (P, E), _same_shape)
_def("bitcast", ("x",), {}, (P, E, FW), _same_shape)
_def("libdevice", ("*args",), {"fn": REQUIRED}, (P, E), _libdevice,
     doc="a libdevice function (newt.language.extra.libdevice) of the table's variant for its operand dtypes")
_def("addptr", ("ptr", "offset"), {}, (P, E, FW), _addptr, data=("ptr",))

# memory
_def("load", ("ptr", "mask?", "other?"), {"cache": "", "evict": "", "volatile": False, "descriptor": False}, (MEM,),
     _loaded, doc="descriptor: the tile of a tensor descriptor (its TMA policy: newt/backend/cuda/tma.py)")
_def("store", ("ptr", "value", "mask?"), {"cache": "", "evict": "", "descriptor": False}, (MEM,), _mem_pointer,
     results=0)
_def("atomic_rmw", ("ptr", "val", "mask?"), {"kind": REQUIRED, "sem": "acq_rel", "scope": "gpu"}, (MEM, AT),
     _loaded)
_def("atomic_cas", ("ptr", "cmp", "val", "mask?"), {"sem": "acq_rel", "scope": "gpu"}, (MEM, AT), _loaded)
_def("atomic_poll", ("ptr", "expected", "timeout?"), {"sem": "acquire", "scope": "gpu"}, (), _polled)

# reductions, scans, dot
_def("reduce", ("*inputs",), {"axis": REQUIRED, "combine": REQUIRED, "tie_break_left": True}, (P,), _reduce,
     results=None)
_def("scan", ("*inputs",), {"axis": REQUIRED, "combine": REQUIRED, "reverse": False}, (P,), _scan, results=None)
_def("gather", ("src", "index"), {"axis": REQUIRED}, (P,), _gather)
_def("histogram", ("x", "mask?"), {"num_bins": REQUIRED}, (P,), _histogram)
_def("dot", ("a", "b", "acc"), {"input_precision": "", "max_num_imprecise_acc": 0}, (P,), _dot)

# debugging and hints
_def("print", ("*values",), {"prefix": "", "hex": False}, (), _no_check, results=0)
_def("assert", ("cond", "mask?"), {"msg": ""}, (), _assert, results=0)
_def("barrier", (), {}, (), _no_check, results=0)
_def("hint", ("x",), {"multiple_of": None, "max_contiguous": None, "max_constancy": None}, (P, VW, FW), _hint)
_def("assume", ("cond",), {}, (), _cond_int1, results=0)

# inline assembly (PTX): one op per call; pure ones may be removed when unused
_def("inline_asm", ("*args",), {"asm": REQUIRED, "constraints": REQUIRED, "pack": 1, "pure": True}, (),
     _inline_asm, results=None, doc="nl.inline_asm_elementwise: PTX per element or per pack of elements")

# control flow (region structure is checked by the verifier)
_LOOP_ATTRS = {"num_stages": None, "loop_unroll_factor": None, "warp_specialize": None}
_def("scf.for", ("lb", "ub", "step", "*init"), _LOOP_ATTRS, (CF,), _no_check, results=None)
_def("scf.if", ("cond",), {}, (CF,), _cond_int1, results=None)
_def("scf.while", ("*init",), _LOOP_ATTRS, (CF,), _no_check, results=None)
_def("yield", ("*values",), {}, (TERM,), _no_check, results=0)
_def("condition", ("cond", "*args"), {}, (TERM,), _cond_int1, results=0)
_def("return", (), {}, (TERM,), _no_check, results=0)

OPS: dict[str, OpDef] = {d.name: d for d in _DEFS}
del _n, _t


def opdef(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"no op {name!r} in the op table (newt/ir/ops.py)") from None


def names_with(*traits: Trait, without: Iterable[Trait] = ()) -> frozenset[str]:
    """Names of the ops that have every one of ``traits`` and none of ``without``."""
    wo = frozenset(without)
    return frozenset(d.name for d in _DEFS if all(t in d.traits for t in traits) and not (wo & d.traits))


ELEMENTWISE = names_with(Trait.ELEMENTWISE)
SAME_TYPE = names_with(Trait.SAME_TYPE)
COMPARISON = names_with(Trait.COMPARISON)
#: elementwise ops of two operands of one type (arithmetic and comparisons)
BINARY = frozenset(d.name for d in _DEFS if d.operands == ("x", "y") and d.traits & {Trait.SAME_TYPE,
                                                                                     Trait.COMPARISON})
VIEW = names_with(Trait.VIEW)
SOURCE = names_with(Trait.SOURCE)
MEMORY = names_with(Trait.MEMORY)
ATOMIC = names_with(Trait.ATOMIC)
PURE = names_with(Trait.PURE)
TERMINATORS = names_with(Trait.TERMINATOR)
FORWARDS_POINTER = names_with(Trait.FORWARDS_POINTER)

#: reduce/scan ``combine`` kinds that are elementwise ops of the table
COMBINE_OPS = {"add": "add", "mul": "mul", "max": "maximum", "min": "minimum", "xor": "xor"}


def is_commutative_combine(kind: str) -> bool:
    """Whether a reduce/scan combine kind gives the same result with its operands swapped."""
    name = COMBINE_OPS.get(kind)
    return name is not None and Trait.COMMUTATIVE in OPS[name].traits

