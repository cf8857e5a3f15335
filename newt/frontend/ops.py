"""Type rules of the ``nl.*`` builtins: one function per op.

Each rule receives the builder, the call's bound arguments (abstract values
and their AST nodes) and the call node; it checks the arguments, emits IR and
returns the result as an abstract value.  Errors are ``SemError`` values with
a code; the builder turns them into diagnostics at the right span.
"""

from __future__ import annotations

import inspect

from newt.ir.types import ANY_DTYPE, SymDim, block_of, dims_equal, numel, scalar_of, shape_of, type_str
from newt.language import BUILTINS
from newt.language import core as lc

from .diagnostics import Severity
from .semantic import (
    SemError, broadcast_shapes, check_block_shape, computation_type, fmt_shape, literal_type, normalize_axis,
)
from .values import AV, Const, JitRef, Opaque, Sym, TensorV, TupleV

RULES: dict = {}
_SIGS: dict = {}


def rule(*names):
    def deco(f):
        for n in names:
            RULES[n] = f
        return f
    return deco


class Bound:
    """Arguments of one call, by parameter name."""

    __slots__ = ("name", "values", "nodes", "explicit")

    def __init__(self, name, values, nodes, explicit):
        self.name = name
        self.values = values
        self.nodes = nodes
        self.explicit = explicit

    def __getitem__(self, k) -> AV:
        return self.values[k]

    def node(self, k, default=None):
        return self.nodes.get(k, default)

    def given(self, k) -> bool:
        return k in self.explicit


class _FastSig:
    """A precomputed signature: binding is the hot path of every nl.* call."""

    __slots__ = ("sig", "positional", "varargs", "names", "defaults", "kwonly")

    def __init__(self, sig: inspect.Signature):
        self.sig = sig
        self.positional = []
        self.varargs = None
        self.kwonly = []
        self.defaults = {}
        for p in sig.parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                self.positional.append(p.name)
            elif p.kind is p.VAR_POSITIONAL:
                self.varargs = p.name
            elif p.kind is p.KEYWORD_ONLY:
                self.kwonly.append(p.name)
            if p.default is not p.empty:
                self.defaults[p.name] = p.default
        self.names = self.positional + ([self.varargs] if self.varargs else []) + self.kwonly


def _signature(name) -> _FastSig:
    sig = _SIGS.get(name)
    if sig is None:
        fn = BUILTINS[name]
        sig = _FastSig(inspect.signature(getattr(fn, "__wrapped__", fn)))
        _SIGS[name] = sig
    return sig


def bind(name, args, kwargs, arg_nodes, kw_nodes, call_node) -> Bound:
    fs = _signature(name)
    values, nodes = {}, {}
    npos = len(fs.positional)
    if len(args) > npos and fs.varargs is None:
        raise SemError("N005", f"nl.{name}() takes {npos} positional argument{'s' if npos != 1 else ''} but "
                       f"{len(args)} were given")
    for i, a in enumerate(args[:npos]):
        pname = fs.positional[i]
        values[pname] = a
        nodes[pname] = arg_nodes[i] if i < len(arg_nodes) else call_node
    if fs.varargs is not None:
        extra = list(args[npos:])
        values[fs.varargs] = TupleV(extra)
        nodes[fs.varargs] = arg_nodes[npos] if len(arg_nodes) > npos else call_node
    explicit = set(values)
    if fs.varargs is not None and not args[npos:]:
        explicit.discard(fs.varargs)
    for k, v in kwargs.items():
        if k not in fs.names or k == fs.varargs:
            import difflib
            sugg = difflib.get_close_matches(k, fs.names, n=1)
            kw_node = next((kn for kn in getattr(call_node, "keywords", []) if kn.arg == k), None)
            raise SemError("N005", f"nl.{name}() got an unexpected keyword argument {k!r}",
                           hint=f"did you mean {sugg[0]!r}?" if sugg else None, node=kw_node)
        if k in values:
            raise SemError("N005", f"nl.{name}() got multiple values for argument {k!r}")
        values[k] = v
        nodes[k] = kw_nodes.get(k, call_node)
        explicit.add(k)
    missing = []
    for pname in fs.names:
        if pname in values:
            continue
        if pname == fs.varargs:
            values[pname] = TupleV([])
            nodes[pname] = call_node
        elif pname in fs.defaults:
            values[pname] = Const(fs.defaults[pname])
            nodes[pname] = call_node
        else:
            missing.append(pname)
    if missing:
        raise SemError("N005", f"nl.{name}() missing required argument{'s' if len(missing) > 1 else ''}: "
                       + ", ".join(repr(m) for m in missing))
    return Bound(name, values, nodes, explicit)


# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------


def _poison(*avs):
    for a in avs:
        if isinstance(a, Opaque):
            from .builder import _Poison
            raise _Poison()


def const_int(av: AV, what: str, node=None, allow_sym=True):
    _poison(av)
    if isinstance(av, Const) and isinstance(av.value, int) and not isinstance(av.value, bool):
        return av.value
    if isinstance(av, Sym) and allow_sym:
        return av
    hint = None
    data = {}
    if isinstance(av, TensorV):
        name = getattr(node, "id", None)
        if name:
            hint = f"declare {name} as `{name}: nl.constexpr`"
            data = {"param": name}
        raise SemError("N010", f"{what} must be a compile-time constant (nl.constexpr), but it is a run-time value",
                       hint=hint, data=data, node=node)
    raise SemError("N010", f"{what} must be a constexpr int, got {getattr(av, 'value', av)!r}", node=node)


def const_dtype(av: AV, what="dtype", node=None):
    _poison(av)
    if isinstance(av, Const) and isinstance(av.value, lc.dtype):
        return av.value
    if isinstance(av, Sym):
        return ANY_DTYPE
    raise SemError("N010" if isinstance(av, TensorV) else "N023",
                   f"{what} must be a dtype such as nl.float32", node=node)


def const_str(av: AV, what, allowed, node=None):
    _poison(av)
    if isinstance(av, Const) and (av.value is None or isinstance(av.value, str)):
        v = av.value or ""
        if allowed is not None and v not in allowed:
            raise SemError("N023", f"{what} must be one of {', '.join(repr(a) for a in allowed if a)}; got {v!r}",
                           node=node)
        return v
    raise SemError("N010", f"{what} must be a constexpr string", node=node)


def parse_shape(b, av: AV, node, what="shape"):
    _poison(av)
    if isinstance(av, Const) and isinstance(av.value, int):
        items = [av]
    elif isinstance(av, Sym):
        items = [av]
    elif isinstance(av, TupleV):
        items = av.items
        if len(items) == 1 and isinstance(items[0], TupleV):
            items = items[0].items
    elif isinstance(av, Const) and isinstance(av.value, (tuple, list)):
        items = [Const(x) for x in av.value]
    else:
        raise SemError("N010" if isinstance(av, TensorV) else "N023",
                       f"{what} must be a tuple of constexpr ints", node=node)
    dims = []
    for it in items:
        _poison(it)
        if isinstance(it, Const) and isinstance(it.value, int) and not isinstance(it.value, bool):
            dims.append(it.value)
        elif isinstance(it, Sym):
            dims.append(SymDim(it.expr))
        elif isinstance(it, TensorV):
            raise SemError("N010", f"every dimension of {what} must be a compile-time constant (nl.constexpr)",
                           node=node)
        else:
            raise SemError("N023", f"{what} dimensions must be ints, got {getattr(it, 'value', it)!r}", node=node)
    try:
        check_block_shape(dims, what)
    except SemError as e:
        if e.code == "N011":
            origin = next((it.origin for it in items if isinstance(it, Const) and it.value == e.data.get("value")),
                          None)
            if origin:
                e.data["param"] = origin
        e.node = e.node or node
        raise
    return tuple(dims)


def need_tensor(b, av: AV, what: str, node=None) -> TensorV:
    _poison(av)
    if isinstance(av, TensorV):
        return av
    if isinstance(av, (Const, Sym)) and (isinstance(getattr(av, "value", 0), (int, float, bool)) or
                                         isinstance(av, Sym)):
        return TensorV(b.as_value(av, node))
    raise SemError("N023", f"{what} must be a block or scalar value", node=node)


def need_block(av: AV, what: str, node=None) -> TensorV:
    _poison(av)
    if isinstance(av, TensorV) and av.shape:
        return av
    raise SemError("N023", f"{what} must be a block (got {_describe(av)})", node=node)


def _describe(av):
    if isinstance(av, TensorV):
        return type_str(av.type)
    if isinstance(av, Const):
        return repr(av.value)
    if isinstance(av, TupleV):
        return "a tuple"
    return "an unknown value"


def float_ok(t) -> bool:
    return t.is_floating() or t.is_symbolic()


# ---------------------------------------------------------------------------
# indexing and creation
# ---------------------------------------------------------------------------


@rule("program_id", "num_programs")
def _program_id(b, a: Bound, node):
    axis = a["axis"]
    _poison(axis)
    if isinstance(axis, Sym):
        return TensorV(b.emit(a.name, [], [lc.int32], {"axis": 0}, node=node).result)
    if not (isinstance(axis, Const) and isinstance(axis.value, int)):
        raise SemError("N010", f"nl.{a.name} axis must be a constexpr int (0, 1 or 2)", node=a.node("axis"))
    if axis.value not in (0, 1, 2):
        raise SemError("N044", f"nl.{a.name} axis must be 0, 1 or 2, got {axis.value}", node=a.node("axis"),
                       hint="the launch grid has at most 3 dimensions")
    return TensorV(b.emit(a.name, [], [lc.int32], {"axis": axis.value}, node=node).result)


@rule("arange")
def _arange(b, a: Bound, node):
    start = const_int(a["start"], "nl.arange start", a.node("start"))
    end = const_int(a["end"], "nl.arange end", a.node("end"))
    if isinstance(start, Sym) or isinstance(end, Sym):
        n = SymDim(end.expr if start == 0 or (isinstance(start, Const) and start.value == 0) else
                   f"{_txt(end)}-{_txt(start)}")
        if isinstance(start, int) and start == 0 and isinstance(end, Sym):
            n = SymDim(end.expr)
        return TensorV(b.emit("arange", [], [block_of(lc.int32, (n,))], {"start": start if isinstance(start, int)
                                                                           else 0, "end": end if isinstance(end, int)
                                                                           else 0}, node=node).result)
    if end <= start:
        raise SemError("N023", f"nl.arange end ({end}) must be greater than start ({start})")
    n = end - start
    if n & (n - 1):
        up = 1 << (n - 1).bit_length()
        data = {"value": end, "replace": str(start + up)}
        origin = getattr(a["end"], "origin", None)
        if origin:
            data["param"] = origin
        raise SemError("N011", f"nl.arange length {n} is not a power of two"
                       + (f" ({origin}={end})" if origin else ""),
                       hint=f"round {n} up to {up} and mask the extra elements", data=data, node=a.node("end"))
    check_block_shape((n,), "nl.arange")
    if start < -(2 ** 31) or end > 2 ** 31:
        raise SemError("N023", "nl.arange bounds must fit in int32")
    return TensorV(b.emit("arange", [], [block_of(lc.int32, (n,))], {"start": start, "end": end}, node=node).result)


def _txt(x):
    return x.expr if isinstance(x, Sym) else str(x)


@rule("full")
def _full(b, a: Bound, node):
    shape = parse_shape(b, a["shape"], a.node("shape"))
    dt = const_dtype(a["dtype"], "nl.full dtype", a.node("dtype"))
    return _fill(b, shape, a["value"], dt, node, a.node("value"))


@rule("zeros")
def _zeros(b, a: Bound, node):
    shape = parse_shape(b, a["shape"], a.node("shape"))
    dt = const_dtype(a["dtype"], "nl.zeros dtype", a.node("dtype"))
    return _fill(b, shape, Const(0), dt, node, node)


def _fill(b, shape, value, dt, node, vnode):
    _poison(value)
    if isinstance(value, TensorV):
        if value.shape:
            raise SemError("N023", "the fill value must be a scalar", node=vnode)
        return TensorV(b.convert(value.v, dt, shape, node))
    if isinstance(value, Const) and isinstance(value.value, (int, float, bool)):
        return TensorV(b.as_tensor(value, dt, shape, node))
    if isinstance(value, Sym):
        return TensorV(b.as_tensor(value, dt, shape, node))
    raise SemError("N023", f"the fill value must be a number, got {_describe(value)}", node=vnode)


@rule("cast")
def _cast(b, a: Bound, node):
    x = a["input"]
    _poison(x)
    dt = const_dtype(a["dtype"], "the target dtype", a.node("dtype"))
    bc = a["bitcast"]
    bitcast = bool(bc.value) if isinstance(bc, Const) else False
    rnd = a["fp_downcast_rounding"]
    rounding = None
    if isinstance(rnd, Const) and rnd.value is not None:
        rounding = const_str(rnd, "fp_downcast_rounding", ("rtne", "rtz"), a.node("fp_downcast_rounding"))
    if isinstance(x, (Const, Sym)) and not bitcast:
        return TensorV(b.as_tensor(x, dt, (), node))
    t = need_tensor(b, x, "the value to cast", a.node("input"))
    return TensorV(b.cast_value(t.v, dt, node, bitcast=bitcast, rounding=rounding))


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------


def _pointer(b, av, fname, node):
    _poison(av)
    if isinstance(av, TensorV) and av.dtype.is_ptr():
        return av
    if isinstance(av, TensorV) and av.dtype.is_symbolic():
        return None  # unknown parameter kind in the generic check
    got = _describe(av)
    raise SemError("N043", f"nl.{fname} needs a pointer (or a block of pointers), got {got}", node=node,
                   hint="pass a pointer parameter plus offsets, e.g. x_ptr + offsets")


def _mask(b, av, node):
    _poison(av)
    if isinstance(av, Const) and av.value is None:
        return None
    if isinstance(av, Const) and isinstance(av.value, bool):
        return b.constant(av.value, lc.int1, node)
    t = need_tensor(b, av, "the mask", node)
    if t.dtype.is_symbolic():
        return t.v
    return b.to_bool(t, node)


@rule("load")
def _load(b, a: Bound, node):
    p = _pointer(b, a["pointer"], "load", a.node("pointer"))
    cache = const_str(a["cache_modifier"], "cache_modifier", ("", ".ca", ".cg", ".cv", ".cs", ".lu"),
                      a.node("cache_modifier"))
    evict = const_str(a["eviction_policy"], "eviction_policy", ("", "evict_first", "evict_last", "evict_normal"),
                      a.node("eviction_policy"))
    vol = a["volatile"]
    if a.given("boundary_check") and not (isinstance(a["boundary_check"], TupleV) and not a["boundary_check"].items):
        raise SemError("N023", "boundary_check applies to block pointers, which newt does not support; use mask=",
                       node=a.node("boundary_check"))
    mask = _mask(b, a["mask"], a.node("mask"))
    other = a["other"]
    _poison(other)
    if p is None:
        if mask is not None or not (isinstance(other, Const) and other.value is None):
            pass
        return TensorV(b.emit("load", [a["pointer"].v], [a["pointer"].type], {}, node=node).result)
    elem = p.dtype.element_ty
    shape = p.shape
    if mask is not None:
        shape = broadcast_shapes(shape, shape_of(mask.type), "pointer and mask")
    has_other = not (isinstance(other, Const) and other.value is None)
    if has_other:
        if mask is None:
            b.report("N023", "nl.load: 'other' has no effect without a mask", a.node("other"),
                     severity=Severity.WARNING)
        if isinstance(other, TensorV):
            shape = broadcast_shapes(shape, other.shape, "pointer and other")
    pv = b.broadcast_value(p.v, shape, node)
    ops = [pv]
    if mask is not None:
        ops.append(b.broadcast_value(mask, shape, node))
    if has_other and mask is not None:
        ops.append(b.as_tensor(other, elem, shape, node))
    attrs = {"cache": cache, "evict": evict, "volatile": bool(getattr(vol, "value", False))}
    return TensorV(b.emit("load", ops, [block_of(elem, shape)], attrs, node=node).result)


@rule("store")
def _store(b, a: Bound, node):
    p = _pointer(b, a["pointer"], "store", a.node("pointer"))
    cache = const_str(a["cache_modifier"], "cache_modifier", ("", ".wb", ".cg", ".cs", ".wt"),
                      a.node("cache_modifier"))
    evict = const_str(a["eviction_policy"], "eviction_policy", ("", "evict_first", "evict_last", "evict_normal"),
                      a.node("eviction_policy"))
    val = a["value"]
    _poison(val)
    mask = _mask(b, a["mask"], a.node("mask"))
    if p is None:
        return Const(None)
    elem = p.dtype.element_ty
    shape = p.shape
    if isinstance(val, TensorV):
        if val.dtype.is_ptr() and not elem.is_ptr():
            raise SemError("N023", f"cannot store a pointer into memory of {elem!r}", node=a.node("value"))
        vs = val.shape
        if len(vs) > len(shape) or any(dims_equal(x, y) is False and x != 1 for x, y in
                                       zip(vs[::-1], shape[::-1])):
            if not shape:
                raise SemError("N030", f"cannot store a block of shape {fmt_shape(vs)} through a scalar pointer",
                               node=a.node("value"), hint="build a block of pointers: ptr + nl.arange(0, N)")
            raise SemError("N030", f"the value's shape {fmt_shape(vs)} does not broadcast to the pointer's shape "
                           f"{fmt_shape(shape)}", node=a.node("value"))
    if mask is not None:
        shape = broadcast_shapes(shape, shape_of(mask.type), "pointer and mask")
    pv = b.broadcast_value(p.v, shape, node)
    vv = b.as_tensor(val, elem, shape, node)
    ops = [pv, vv]
    if mask is not None:
        ops.append(b.broadcast_value(mask, shape, node))
    b.emit("store", ops, [], {"cache": cache, "evict": evict}, node=node)
    return Const(None)


_SEMS = (None, "", "acq_rel", "acquire", "release", "relaxed")
_SCOPES = (None, "", "gpu", "cta", "sys")


def _sem_scope(a: Bound) -> dict:
    """The memory order and scope the call gives (the op table, newt.ir.ops, has the defaults)."""
    s1 = const_str(a["sem"], "sem", _SEMS, a.node("sem"))
    s2 = const_str(a["scope"], "scope", _SCOPES, a.node("scope"))
    return {k: v for k, v in (("sem", s1), ("scope", s2)) if v}


@rule("atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg")
def _atomic(b, a: Bound, node):
    kind = a.name.split("_", 1)[1]
    p = _pointer(b, a["pointer"], a.name, a.node("pointer"))
    order = _sem_scope(a)
    val = a["val"]
    _poison(val)
    mask = _mask(b, a["mask"], a.node("mask"))
    if p is None:
        return Opaque()
    elem = p.dtype.element_ty
    if not elem.is_symbolic():
        if kind in ("and", "or", "xor") and not elem.is_int():
            raise SemError("N021", f"nl.{a.name} needs integer memory, got {elem!r}", node=a.node("pointer"))
        if kind == "add" and elem.name not in ("int32", "uint32", "int64", "uint64", "fp16", "bf16", "fp32", "fp64"):
            raise SemError("N023", f"nl.atomic_add does not support {elem!r}", node=a.node("pointer"),
                           hint="use 32/64-bit integers or fp16/bf16/fp32/fp64")
        if kind in ("max", "min") and elem.name not in ("int32", "uint32", "int64", "uint64", "fp32", "fp64",
                                                        "fp16", "bf16"):
            raise SemError("N023", f"nl.{a.name} does not support {elem!r}", node=a.node("pointer"))
        if kind == "xchg" and elem.primitive_bitwidth not in (16, 32, 64):
            raise SemError("N023", f"nl.atomic_xchg does not support {elem!r}", node=a.node("pointer"))
    shape = p.shape
    if isinstance(val, TensorV):
        shape = broadcast_shapes(shape, val.shape, "pointer and value")
    if mask is not None:
        shape = broadcast_shapes(shape, shape_of(mask.type), "pointer and mask")
    ops = [b.broadcast_value(p.v, shape, node), b.as_tensor(val, elem, shape, node)]
    if mask is not None:
        ops.append(b.broadcast_value(mask, shape, node))
    attrs = {"kind": kind, **order}
    return TensorV(b.emit("atomic_rmw", ops, [block_of(elem, shape)], attrs, node=node).result)


@rule("atomic_cas")
def _atomic_cas(b, a: Bound, node):
    p = _pointer(b, a["pointer"], "atomic_cas", a.node("pointer"))
    order = _sem_scope(a)
    cmp, val = a["cmp"], a["val"]
    _poison(cmp, val)
    if p is None:
        return Opaque()
    elem = p.dtype.element_ty
    if not elem.is_symbolic() and elem.primitive_bitwidth not in (16, 32, 64):
        raise SemError("N023", f"nl.atomic_cas does not support {elem!r}", node=a.node("pointer"))
    shape = p.shape
    for v in (cmp, val):
        if isinstance(v, TensorV):
            shape = broadcast_shapes(shape, v.shape, "pointer and value")
    ops = [b.broadcast_value(p.v, shape, node), b.as_tensor(cmp, elem, shape, node),
           b.as_tensor(val, elem, shape, node)]
    return TensorV(b.emit("atomic_cas", ops, [block_of(elem, shape)], order,
                          node=node).result)


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------


def _promote(b, avs, opname, nodes, div_or_mod=False, allow_ptr=False):
    """Common dtype and shape of several operands (binary promotion, pairwise)."""
    infos = [b.operand_info(v) for v in avs]
    shape = ()
    for _, s, _ in infos:
        shape = broadcast_shapes(shape, s)
    t, lit = infos[0][0], infos[0][2]
    for (t2, _, l2) in infos[1:]:
        if t.is_ptr() or t2.is_ptr():
            if not allow_ptr or (t.is_ptr() and t2.is_ptr() and t != t2):
                raise SemError("N022", f"nl.{opname} cannot combine {t!r} and {t2!r}")
            t = t if t.is_ptr() else t2
            lit = False
            continue
        t = computation_type(t, lit, t2, l2, div_or_mod, f"nl.{opname}")
        lit = lit and l2
    return t, shape


@rule("where")
def _where(b, a: Bound, node):
    c, x, y = a["condition"], a["x"], a["y"]
    _poison(c, x, y)
    if isinstance(c, Const) and isinstance(x, (Const,)) and isinstance(y, Const):
        return x if c.value else y
    ct = need_tensor(b, c, "the condition", a.node("condition"))
    cond = b.to_bool(ct, node) if not ct.dtype.is_symbolic() else ct.v
    t, shape = _promote(b, [x, y], "where", [a.node("x"), a.node("y")], allow_ptr=True)
    shape = broadcast_shapes(shape, shape_of(cond.type), "condition and values")
    cv = b.broadcast_value(cond, shape, node)
    xv = b.as_tensor(x, t, shape, node)
    yv = b.as_tensor(y, t, shape, node)
    return TensorV(b.emit("where", [cv, xv, yv], [block_of(t, shape)], node=node).result)


def _nan_flag(av):
    if isinstance(av, Const) and isinstance(av.value, lc.PropagateNan):
        return av.value is lc.PropagateNan.ALL
    if isinstance(av, Const) and isinstance(av.value, bool):
        return av.value
    return False


@rule("minimum", "maximum")
def _minmax(b, a: Bound, node):
    x, y = a["x"], a["y"]
    _poison(x, y)
    t, shape = _promote(b, [x, y], a.name, [a.node("x"), a.node("y")])
    xv, yv = b.as_tensor(x, t, shape, node), b.as_tensor(y, t, shape, node)
    attrs = {"propagate_nan": _nan_flag(a["propagate_nan"])} if t.is_floating() else {}
    return TensorV(b.emit(a.name, [xv, yv], [block_of(t, shape)], attrs, node=node).result)


@rule("clamp")
def _clamp(b, a: Bound, node):
    x, lo, hi = a["x"], a["min"], a["max"]
    _poison(x, lo, hi)
    t, shape = _promote(b, [x, lo, hi], "clamp", [a.node("x"), a.node("min"), a.node("max")])
    xv, lv, hv = (b.as_tensor(v, t, shape, node) for v in (x, lo, hi))
    attrs = {"propagate_nan": _nan_flag(a["propagate_nan"])} if t.is_floating() else {}
    ty = block_of(t, shape)
    m = b.emit("maximum", [xv, lv], [ty], attrs, node=node).result
    return TensorV(b.emit("minimum", [m, hv], [ty], attrs, node=node).result)


@rule("abs")
def _abs(b, a: Bound, node):
    x = need_tensor(b, a["x"], "nl.abs input", a.node("x"))
    if x.dtype.is_ptr():
        raise SemError("N023", "nl.abs is not defined for pointers")
    if x.dtype.is_int_unsigned():
        return x
    return TensorV(b.emit("abs", [x.v], [x.type], node=node).result)


@rule("fma")
def _fma(b, a: Bound, node):
    xs = [a["x"], a["y"], a["z"]]
    _poison(*xs)
    t, shape = _promote(b, xs, "fma", [a.node(k) for k in "xyz"])
    if not float_ok(t):
        raise SemError("N023", f"nl.fma needs floating-point operands, got {t!r}")
    vs = [b.as_tensor(v, t, shape, node) for v in xs]
    return TensorV(b.emit("fma", vs, [block_of(t, shape)], node=node).result)


@rule("umulhi")
def _umulhi(b, a: Bound, node):
    x, y = a["x"], a["y"]
    _poison(x, y)
    t, shape = _promote(b, [x, y], "umulhi", [a.node("x"), a.node("y")])
    if not t.is_symbolic() and (not t.is_int() or t.int_bitwidth not in (32, 64)):
        raise SemError("N023", f"nl.umulhi needs 32- or 64-bit integers, got {t!r}")
    xv, yv = b.as_tensor(x, t, shape, node), b.as_tensor(y, t, shape, node)
    return TensorV(b.emit("umulhi", [xv, yv], [block_of(t, shape)], node=node).result)


_FP32_ONLY = {"sqrt_rn", "div_rn"}


@rule("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "tanh", "erf", "floor", "ceil")
def _unary_math(b, a: Bound, node):
    x = a["x"]
    _poison(x)
    if isinstance(x, Const) and isinstance(x.value, (int, float)) and not isinstance(x.value, bool):
        xv = b.as_tensor(x, lc.float32, (), node)
        return TensorV(b.emit(a.name, [xv], [xv.type], node=node).result)
    t = need_tensor(b, x, f"nl.{a.name} input", a.node("x"))
    if not float_ok(t.dtype):
        raise SemError("N023", f"nl.{a.name} needs a floating-point input, got {t.dtype!r}", node=a.node("x"),
                       hint="convert first, e.g. x.to(nl.float32)")
    if a.name in _FP32_ONLY and t.dtype.name not in ("fp32", "fp64") and not t.dtype.is_symbolic():
        raise SemError("N023", f"nl.{a.name} supports fp32 and fp64 only, got {t.dtype!r}", node=a.node("x"))
    return TensorV(b.emit(a.name, [t.v], [t.type], node=node).result)


@rule("div_rn", "pow")
def _binary_float(b, a: Bound, node):
    x, y = a["x"], a["y"]
    _poison(x, y)
    t, shape = _promote(b, [x, y], a.name, [a.node("x"), a.node("y")])
    if t.is_int():
        t = lc.float32
    if not float_ok(t):
        raise SemError("N023", f"nl.{a.name} needs floating-point operands, got {t!r}")
    if a.name == "div_rn" and t.name not in ("fp32", "fp64") and not t.is_symbolic():
        raise SemError("N023", f"nl.div_rn supports fp32 and fp64 only, got {t!r}")
    xv, yv = b.as_tensor(x, t, shape, node), b.as_tensor(y, t, shape, node)
    return TensorV(b.emit(a.name, [xv, yv], [block_of(t, shape)], node=node).result)


# ---------------------------------------------------------------------------
# reductions and scans
# ---------------------------------------------------------------------------


def _reduce_setup(b, a: Bound, node, key="input"):
    x = need_tensor(b, a[key], f"nl.{a.name} input", a.node(key))
    axis_av = a["axis"]
    _poison(axis_av)
    if not x.shape:
        raise SemError("N032", f"nl.{a.name} needs a block; it got a scalar", node=a.node(key))
    if isinstance(axis_av, Const) and axis_av.value is None:
        n = numel(x.shape)
        flat = (n if n is not None else SymDim("numel"),)
        v = x.v
        if len(x.shape) > 1:
            v = b.emit("reshape", [v], [block_of(x.dtype, flat)], {"shape": list(flat), "can_reorder": True},
                       node=node).result
        return TensorV(v), 0, True
    ax = const_int(axis_av, f"nl.{a.name} axis", a.node("axis"), allow_sym=False)
    try:
        ax = normalize_axis(ax, len(x.shape), f"nl.{a.name} axis")
    except SemError as e:
        e.node = a.node("axis")
        raise
    return x, ax, False


def _reduced_shape(shape, axis):
    return tuple(d for i, d in enumerate(shape) if i != axis)


def _keep(b, v, axis, keep, node):
    if keep:
        return TensorV(b._expand_dims(v, axis, node))
    return TensorV(v)


def _sum_dtype(t, explicit):
    if explicit is not None:
        return explicit
    if t.is_int() and not t.is_symbolic():
        if t.is_bool():
            return lc.int32
        if t.int_bitwidth < 32:
            return lc.int32 if t.is_int_signed() else lc.uint32
    return t


@rule("sum", "xor_sum")
def _sum(b, a: Bound, node):
    x, ax, flat = _reduce_setup(b, a, node)
    keep = bool(getattr(a["keep_dims"], "value", False))
    v = x.v
    t = x.dtype
    if a.name == "sum":
        dt_av = a["dtype"]
        explicit = None if (isinstance(dt_av, Const) and dt_av.value is None) else const_dtype(dt_av, "dtype")
        rt = _sum_dtype(t, explicit)
        if t.is_ptr():
            raise SemError("N023", "cannot sum pointers")
        if rt != t:
            v = b.cast_value(v, rt, node)
        combine = "add"
    else:
        if t.is_floating():
            raise SemError("N021", f"nl.xor_sum needs integers, got {t!r}")
        rt = t
        combine = "xor"
    out_shape = _reduced_shape(shape_of(v.type), ax)
    r = b.emit("reduce", [v], [block_of(rt, out_shape)], {"axis": ax, "combine": combine}, node=node).result
    return _keep(b, r, ax, keep and not flat, node)


@rule("max", "min")
def _max(b, a: Bound, node):
    x, ax, flat = _reduce_setup(b, a, node)
    keep = bool(getattr(a["keep_dims"], "value", False))
    if x.dtype.is_ptr():
        raise SemError("N023", f"nl.{a.name} is not defined for pointers")
    ri = a["return_indices"]
    if isinstance(ri, Const) and ri.value:
        tie = bool(getattr(a["return_indices_tie_break_left"], "value", True))
        v, i = _arg_reduce(b, x, ax, "arg" + a.name, tie, node)
        return TupleV([_keep(b, v, ax, keep and not flat, node), _keep(b, i, ax, keep and not flat, node)])
    out_shape = _reduced_shape(x.shape, ax)
    attrs = {"axis": ax, "combine": a.name}
    r = b.emit("reduce", [x.v], [block_of(x.dtype, out_shape)], attrs, node=node).result
    return _keep(b, r, ax, keep and not flat, node)


def _arg_reduce(b, x, ax, combine, tie_left, node):
    n = x.shape[ax]
    idx = b.emit("arange", [], [block_of(lc.int32, (n,))], {"start": 0, "end": n if isinstance(n, int) else 0},
                 node=node).result
    rank = len(x.shape)
    for k in range(rank):
        if k != ax:
            idx = b._expand_dims(idx, k, node) if k < ax else b._expand_dims(idx, len(shape_of(idx.type)), node)
    idx = b.broadcast_value(idx, x.shape, node)
    out_shape = _reduced_shape(x.shape, ax)
    op = b.emit("reduce", [x.v, idx], [block_of(x.dtype, out_shape), block_of(lc.int32, out_shape)],
                {"axis": ax, "combine": combine, "tie_break_left": tie_left}, node=node)
    return op.results[0], op.results[1]


@rule("argmax", "argmin")
def _argmax(b, a: Bound, node):
    x, ax, flat = _reduce_setup(b, a, node)
    keep = bool(getattr(a["keep_dims"], "value", False))
    tie = bool(getattr(a["tie_break_left"], "value", True))
    v, i = _arg_reduce(b, x, ax, a.name, tie, node)
    return _keep(b, i, ax, keep and not flat, node)


def _combine_region(b, fn_av, elem_types, node, what):
    from newt import ir
    _poison(fn_av)
    if not isinstance(fn_av, JitRef):
        raise SemError("N023", f"{what} combine_fn must be a @newt.jit function")
    region = ir.Region([ir.Value(t) for t in elem_types] * 1 + [ir.Value(t) for t in elem_types])
    saved = b.region
    b.region = region
    try:
        args = [TensorV(v) for v in region.args]
        res = b.inline(fn_av.fn, args, {}, node, [node] * len(args), {})
        items = res.items if isinstance(res, TupleV) else [res]
        if any(isinstance(r, Opaque) for r in items):
            from .builder import _Poison
            raise _Poison()
        if len(items) != len(elem_types):
            raise SemError("N042", f"{what} combine_fn returns {len(items)} value(s), expected {len(elem_types)}")
        vals = []
        for r, t in zip(items, elem_types):
            v = b.as_tensor(r, t, (), node) if not isinstance(r, TensorV) else r.v
            if v.type != t:
                if shape_of(v.type):
                    raise SemError("N042", f"{what} combine_fn must return scalars, got {type_str(v.type)}")
                v = b.cast_value(v, t, node)
            vals.append(v)
        b.emit("yield", vals, [], node=None)
    finally:
        b.region = saved
    return region


def _inputs(b, av, what, node):
    _poison(av)
    items = av.items if isinstance(av, TupleV) else [av]
    ts = [need_tensor(b, x, what, node) for x in items]
    shape = ts[0].shape
    for t in ts[1:]:
        if t.shape != shape:
            raise SemError("N030", f"all inputs of {what} must have the same shape")
    return ts, isinstance(av, TupleV)


@rule("reduce")
def _reduce(b, a: Bound, node):
    ts, is_tuple = _inputs(b, a["input"], "nl.reduce", a.node("input"))
    keep = bool(getattr(a["keep_dims"], "value", False))
    if not ts[0].shape:
        raise SemError("N032", "nl.reduce needs blocks, got a scalar")
    axis_av = a["axis"]
    vals = [t.v for t in ts]
    if isinstance(axis_av, Const) and axis_av.value is None:
        n = numel(ts[0].shape)
        flat = (n if n is not None else SymDim("numel"),)
        vals = [b.emit("reshape", [v], [block_of(scalar_of(v.type), flat)], {"shape": list(flat),
                       "can_reorder": True}, node=node).result if len(ts[0].shape) > 1 else v for v in vals]
        ax, keep = 0, False
    else:
        ax = normalize_axis(const_int(axis_av, "nl.reduce axis", a.node("axis"), allow_sym=False),
                            len(ts[0].shape), "nl.reduce axis")
    elem_types = [scalar_of(v.type) for v in vals]
    region = _combine_region(b, a["combine_fn"], elem_types, node, "nl.reduce")
    out_shape = _reduced_shape(shape_of(vals[0].type), ax)
    op = b.emit("reduce", vals, [block_of(t, out_shape) for t in elem_types], {"axis": ax, "combine": "region"},
                [region], node=node)
    outs = [_keep(b, r, ax, keep, node) for r in op.results]
    return TupleV(outs) if is_tuple else outs[0]


@rule("associative_scan")
def _assoc_scan(b, a: Bound, node):
    ts, is_tuple = _inputs(b, a["input"], "nl.associative_scan", a.node("input"))
    if not ts[0].shape:
        raise SemError("N032", "nl.associative_scan needs blocks, got a scalar")
    ax = normalize_axis(const_int(a["axis"], "nl.associative_scan axis", a.node("axis"), allow_sym=False),
                        len(ts[0].shape), "nl.associative_scan axis")
    rev = bool(getattr(a["reverse"], "value", False))
    elem_types = [t.dtype for t in ts]
    region = _combine_region(b, a["combine_fn"], elem_types, node, "nl.associative_scan")
    op = b.emit("scan", [t.v for t in ts], [t.type for t in ts], {"axis": ax, "reverse": rev,
                                                                     "combine": "region"}, [region], node=node)
    outs = [TensorV(r) for r in op.results]
    return TupleV(outs) if is_tuple else outs[0]


@rule("cumsum", "cumprod")
def _cum(b, a: Bound, node):
    x = need_tensor(b, a["input"], f"nl.{a.name} input", a.node("input"))
    if not x.shape:
        raise SemError("N032", f"nl.{a.name} needs a block, got a scalar")
    ax = normalize_axis(const_int(a["axis"], f"nl.{a.name} axis", a.node("axis"), allow_sym=False),
                        len(x.shape), f"nl.{a.name} axis")
    rev = bool(getattr(a["reverse"], "value", False))
    explicit = None
    if a.name == "cumsum":
        dt_av = a["dtype"]
        if not (isinstance(dt_av, Const) and dt_av.value is None):
            explicit = const_dtype(dt_av)
    rt = _sum_dtype(x.dtype, explicit)
    v = x.v if rt == x.dtype else b.cast_value(x.v, rt, node)
    combine = "add" if a.name == "cumsum" else "mul"
    return TensorV(b.emit("scan", [v], [v.type], {"axis": ax, "reverse": rev, "combine": combine},
                          node=node).result)


# ---------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------


def _shape_args(b, av: TupleV, node):
    items = av.items
    if len(items) == 1 and (isinstance(items[0], TupleV) or (isinstance(items[0], Const) and
                                                             isinstance(items[0].value, (tuple, list)))):
        return parse_shape(b, items[0], node)
    return parse_shape(b, TupleV(items), node)


@rule("reshape", "view")
def _reshape(b, a: Bound, node):
    x = need_tensor(b, a["input"], f"nl.{a.name} input", a.node("input"))
    shape = _shape_args(b, a["shape"], a.node("shape"))
    n0, n1 = numel(x.shape), numel(shape)
    if n0 is not None and n1 is not None and n0 != n1:
        raise SemError("N033", f"cannot reshape a block of {n0} elements ({fmt_shape(x.shape)}) into "
                       f"{fmt_shape(shape)} ({n1} elements)")
    if not x.shape:
        return TensorV(b.broadcast_value(x.v, shape, node))
    if tuple(shape) == tuple(x.shape):
        return x
    cr = a.name == "view" or bool(getattr(a.values.get("can_reorder"), "value", False))
    return TensorV(b.emit("reshape", [x.v], [block_of(x.dtype, shape)], {"shape": list(shape), "can_reorder": cr},
                          node=node).result)


def _perm(b, x, dims_av, node, what):
    items = dims_av.items
    if len(items) == 1 and isinstance(items[0], TupleV):
        items = items[0].items
    order = []
    for it in items:
        order.append(const_int(it, f"{what} dims", node, allow_sym=False))
    rank = len(x.shape)
    if sorted(order) != list(range(rank)):
        raise SemError("N032", f"{what} dims {tuple(order)} are not a permutation of the {rank} axes")
    if order == list(range(rank)):
        return x
    shape = tuple(x.shape[i] for i in order)
    return TensorV(b.emit("permute", [x.v], [block_of(x.dtype, shape)], {"order": order}, node=node).result)


@rule("permute")
def _permute(b, a: Bound, node):
    x = need_block(a["input"], "nl.permute input", a.node("input"))
    return _perm(b, x, a["dims"], node, "nl.permute")


@rule("trans")
def _trans(b, a: Bound, node):
    x = need_block(a["input"], "nl.trans input", a.node("input"))
    dims = a["dims"]
    if not dims.items:
        if len(x.shape) == 1:
            return x
        if len(x.shape) != 2:
            raise SemError("N032", f"nl.trans without dims needs a 2-D block, got rank {len(x.shape)}",
                           hint="pass the permutation, e.g. nl.trans(x, (0, 2, 1))")
        dims = TupleV([Const(1), Const(0)])
    return _perm(b, x, dims, node, "nl.trans")


@rule("expand_dims")
def _expand_dims(b, a: Bound, node):
    x = need_tensor(b, a["input"], "nl.expand_dims input", a.node("input"))
    ax = a["axis"]
    axes = [ax] if not isinstance(ax, TupleV) else ax.items
    vals = [const_int(v, "nl.expand_dims axis", a.node("axis"), allow_sym=False) for v in axes]
    new_rank = len(x.shape) + len(vals)
    norm = []
    for v in vals:
        if not -new_rank <= v < new_rank:
            raise SemError("N032", f"nl.expand_dims axis {v} is out of range for the result of rank {new_rank}",
                           node=a.node("axis"))
        norm.append(v % new_rank)
    cur = x.v
    for v in sorted(norm):
        cur = b._expand_dims(cur, v, node)
    return TensorV(cur)


@rule("broadcast")
def _broadcast(b, a: Bound, node):
    x, y = a["input"], a["other"]
    tx = need_tensor(b, x, "nl.broadcast input", a.node("input"))
    ty = need_tensor(b, y, "nl.broadcast other", a.node("other"))
    shape = broadcast_shapes(tx.shape, ty.shape)
    return TupleV([TensorV(b.broadcast_value(tx.v, shape, node)), TensorV(b.broadcast_value(ty.v, shape, node))])


@rule("broadcast_to")
def _broadcast_to(b, a: Bound, node):
    x = need_tensor(b, a["input"], "nl.broadcast_to input", a.node("input"))
    shape = _shape_args(b, a["shape"], a.node("shape"))
    return TensorV(b.broadcast_value(x.v, shape, node))


@rule("split")
def _split(b, a: Bound, node):
    x = need_block(a["a"], "nl.split input", a.node("a"))
    if dims_equal(x.shape[-1], 2) is False:
        raise SemError("N030", f"nl.split needs a last dimension of 2, got shape {fmt_shape(x.shape)}")
    rt = block_of(x.dtype, x.shape[:-1])
    op = b.emit("split", [x.v], [rt, rt], node=node)
    return TupleV([TensorV(op.results[0]), TensorV(op.results[1])])


@rule("join")
def _join(b, a: Bound, node):
    x, y = a["a"], a["b"]
    _poison(x, y)
    t, shape = _promote(b, [x, y], "join", [a.node("a"), a.node("b")])
    xv, yv = b.as_tensor(x, t, shape, node), b.as_tensor(y, t, shape, node)
    return TensorV(b.emit("join", [xv, yv], [block_of(t, tuple(shape) + (2,))], node=node).result)


@rule("cat")
def _cat(b, a: Bound, node):
    x = need_block(a["input"], "nl.cat input", a.node("input"))
    y = need_block(a["other"], "nl.cat other", a.node("other"))
    if x.type != y.type:
        raise SemError("N030", f"nl.cat needs blocks of the same shape and dtype, got {type_str(x.type)} and "
                       f"{type_str(y.type)}")
    d0 = x.shape[0]
    shape = ((2 * d0) if isinstance(d0, int) else SymDim(f"2*{d0}"),) + tuple(x.shape[1:])
    return TensorV(b.emit("cat", [x.v, y.v], [block_of(x.dtype, shape)], node=node).result)


# ---------------------------------------------------------------------------
# dot
# ---------------------------------------------------------------------------

_DOT_FLOATS = ("fp16", "bf16", "fp32", "fp8e4nv", "fp8e5", "fp64")


@rule("dot")
def _dot(b, a: Bound, node):
    x = need_block(a["input"], "nl.dot input", a.node("input"))
    y = need_block(a["other"], "nl.dot other", a.node("other"))
    rx, ry = len(x.shape), len(y.shape)
    if rx != ry or rx not in (2, 3):
        raise SemError("N031", f"nl.dot operands must both be 2-D (or both 3-D for a batched dot); got "
                       f"{fmt_shape(x.shape)} and {fmt_shape(y.shape)}",
                       hint="reshape or index with [:, None] to make 2-D blocks")
    k1, k2 = x.shape[-1], y.shape[-2]
    if dims_equal(k1, k2) is False:
        raise SemError("N031", f"nl.dot inner dimensions differ: {fmt_shape(x.shape)} @ {fmt_shape(y.shape)} "
                       f"(K = {k1} vs {k2})", hint="the last dimension of the first operand must equal the "
                                                   "first (non-batch) dimension of the second")
    if rx == 3 and dims_equal(x.shape[0], y.shape[0]) is False:
        raise SemError("N031", f"nl.dot batch dimensions differ: {x.shape[0]} vs {y.shape[0]}")
    m, n = x.shape[-2], y.shape[-1]
    for name, d in (("M", m), ("N", n), ("K", k1)):
        if isinstance(d, int) and d < 16:
            raise SemError("N031", f"nl.dot needs M, N and K of at least 16; {name} is {d}",
                           hint="use blocks of at least 16x16 (mask the extra rows), or compute with "
                                "broadcast multiply and nl.sum")
    tx, ty = x.dtype, y.dtype
    if not (tx.is_symbolic() or ty.is_symbolic()):
        for t, nd in ((tx, a.node("input")), (ty, a.node("other"))):
            if not (t.name in _DOT_FLOATS or t.name == "int8"):
                raise SemError("N031", f"nl.dot does not support {t!r} operands", node=nd,
                               hint="use fp16, bf16, fp32 (tf32), fp8 or int8 operands")
        if tx != ty and not (tx.is_fp8() and ty.is_fp8()):
            raise SemError("N031", f"nl.dot operands must have the same dtype, got {tx!r} and {ty!r}",
                           hint=f"cast one of them, e.g. b.to({tx!r})")
    od_av = a["out_dtype"]
    acc = a["acc"]
    _poison(acc)
    out_shape = (x.shape[0], m, n) if rx == 3 else (m, n)
    if isinstance(od_av, Const) and od_av.value is None:
        if isinstance(acc, TensorV):
            od = acc.dtype
        elif tx.is_symbolic():
            od = ANY_DTYPE
        else:
            od = lc.int32 if tx.is_int() else lc.float32
    else:
        od = const_dtype(od_av, "out_dtype", a.node("out_dtype"))
    if not tx.is_symbolic() and not od.is_symbolic():
        if tx.is_int() and od != lc.int32:
            raise SemError("N031", f"an int8 nl.dot accumulates in int32, not {od!r}")
        if tx.is_floating() and od.name not in ("fp32", "fp16", "fp64"):
            raise SemError("N031", f"nl.dot out_dtype must be fp32 (or fp16 for fp16 inputs), got {od!r}")
        if od.is_fp16() and not tx.is_fp16() and not tx.is_fp8():
            raise SemError("N031", f"an fp16 accumulator needs fp16 operands, got {tx!r}")
    if isinstance(acc, TensorV):
        if len(acc.shape) != len(out_shape) or any(dims_equal(p, q) is False for p, q in zip(acc.shape, out_shape)):
            raise SemError("N031", f"nl.dot acc has shape {fmt_shape(acc.shape)}, expected {fmt_shape(out_shape)}",
                           node=a.node("acc"))
        if acc.dtype != od and not (acc.dtype.is_symbolic() or od.is_symbolic()):
            raise SemError("N031", f"nl.dot acc is {acc.dtype!r} but the product accumulates in {od!r}",
                           node=a.node("acc"), hint="create the accumulator with nl.zeros(..., dtype=nl.float32)")
        accv = acc.v
    elif isinstance(acc, Const) and acc.value is None:
        accv = b.as_tensor(Const(0), od, out_shape, node)
    else:
        raise SemError("N031", "nl.dot acc must be a block", node=a.node("acc"))
    ip = a["input_precision"]
    prec = None
    if isinstance(ip, Const) and ip.value is not None:
        prec = const_str(ip, "input_precision", ("tf32", "tf32x3", "ieee", "bf16x3", "bf16x6"),
                         a.node("input_precision"))
    at = a["allow_tf32"]
    if prec is None and isinstance(at, Const) and at.value is not None:
        prec = "tf32" if at.value else "ieee"
    if tx.is_fp32() and prec is None:
        prec = "tf32"
    attrs = {"input_precision": prec or "", "max_num_imprecise_acc": getattr(a["max_num_imprecise_acc"], "value",
                                                                             None) or 0}
    return TensorV(b.emit("dot", [x.v, y.v, accv], [block_of(od, out_shape)], attrs, node=node).result)


# ---------------------------------------------------------------------------
# debugging and hints
# ---------------------------------------------------------------------------


def _fmt(av):
    if isinstance(av, Const):
        return str(av.value)
    if isinstance(av, TensorV):
        return type_str(av.type)
    if isinstance(av, Sym):
        return av.expr
    if isinstance(av, TupleV):
        return "(" + ", ".join(_fmt(x) for x in av.items) + ")"
    return "?"


@rule("static_print")
def _static_print(b, a: Bound, node):
    sep = a["sep"].value if isinstance(a["sep"], Const) else " "
    text = sep.join(_fmt(v) for v in a["values"].items)
    b.static_prints.append(text)
    if not b.speculative:
        b.report("N051", f"static_print: {text}", node, severity=Severity.INFO)
    return Const(None)


@rule("static_assert")
def _static_assert(b, a: Bound, node):
    c = a["cond"]
    msg = a["msg"].value if isinstance(a["msg"], Const) else ""
    _poison(c)
    if isinstance(c, Const):
        if not c.value:
            raise SemError("N050", f"static_assert failed{': ' + str(msg) if msg else ''}")
        return Const(None)
    if isinstance(c, TensorV):
        raise SemError("N010", "nl.static_assert needs a compile-time condition", hint="use nl.device_assert for "
                       "run-time checks")
    return Const(None)


@rule("device_print")
def _device_print(b, a: Bound, node):
    prefix = a["prefix"]
    if not (isinstance(prefix, Const) and isinstance(prefix.value, str)):
        raise SemError("N010", "nl.device_print prefix must be a constexpr string", node=a.node("prefix"))
    vals = []
    for v in a["args"].items:
        _poison(v)
        vals.append(need_tensor(b, v, "a printed value", node).v)
    hexa = bool(getattr(a["hex"], "value", False))
    b.emit("print", vals, [], {"prefix": prefix.value, "hex": hexa}, node=node)
    return Const(None)


@rule("device_assert")
def _device_assert(b, a: Bound, node):
    c = a["cond"]
    msg = a["msg"].value if isinstance(a["msg"], Const) else ""
    _poison(c)
    if isinstance(c, Const):
        if not c.value:
            b.report("N050", f"device_assert always fails{': ' + str(msg) if msg else ''}", node,
                     severity=Severity.WARNING)
        cv = b.constant(bool(c.value), lc.int1, node)
    else:
        cv = b.to_bool(need_tensor(b, c, "the condition", a.node("cond")), node)
    ops = [cv]
    mask = _mask(b, a["mask"], a.node("mask"))
    if mask is not None:
        shape = broadcast_shapes(shape_of(cv.type), shape_of(mask.type))
        ops = [b.broadcast_value(cv, shape, node), b.broadcast_value(mask, shape, node)]
    b.emit("assert", ops, [], {"msg": str(msg)}, node=node)
    return Const(None)


@rule("debug_barrier")
def _barrier(b, a: Bound, node):
    b.emit("barrier", [], [], node=node)
    return Const(None)


@rule("multiple_of", "max_contiguous", "max_constancy")
def _hint(b, a: Bound, node):
    x = need_tensor(b, a["input"], f"nl.{a.name} input", a.node("input"))
    vals = a["values"]
    items = vals.items if isinstance(vals, TupleV) else [vals]
    ints = [const_int(v, f"nl.{a.name} values", a.node("values"), allow_sym=False) for v in items]
    if len(ints) == 1 and len(x.shape) > 1:
        ints = ints * len(x.shape)
    if x.shape and len(ints) != len(x.shape):
        raise SemError("N032", f"nl.{a.name} needs one value per dimension ({len(x.shape)}), got {len(ints)}")
    return TensorV(b.emit("hint", [x.v], [x.type], {a.name: ints}, node=node).result)


@rule("assume")
def _assume(b, a: Bound, node):
    c = a["cond"]
    _poison(c)
    if isinstance(c, Const):
        return Const(None)
    t = need_tensor(b, c, "the condition", a.node("cond"))
    b.emit("assume", [b.to_bool(t, node)], [], node=node)
    return Const(None)


__all__ = ["RULES", "bind", "literal_type"]
