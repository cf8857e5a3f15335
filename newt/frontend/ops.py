"""Type rules of the ``nl.*`` builtins: binding, shared helpers and the registry (the rules are in ``rules/``).

Each rule receives the builder, the call's bound arguments (abstract values
and their AST nodes) and the call node; it checks the arguments, emits IR and
returns the result as an abstract value.  Errors are ``SemError`` values with
a code; the builder turns them into diagnostics at the right span.
"""

from __future__ import annotations

import inspect

from newt.ir.types import ANY_DTYPE, SymDim, type_str
from newt.language import BUILTINS
from newt.language import core as lc
from newt.language.core import public_signature

from .semantic import (
    SemError,
    check_block_shape,
    literal_type,
)
from .values import AV, Const, Opaque, Sym, TensorV, TupleV

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

    def tuple(self, k) -> TupleV:
        """The values of the variadic parameter ``k`` (``*args`` of the stub), packed in a ``TupleV``."""
        v = self.values[k]
        assert isinstance(v, TupleV), f"{self.name}: {k} is not a variadic parameter"
        return v


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
        sig = _FastSig(public_signature(BUILTINS[name]))
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


class Semantic:
    """What a stub sees as ``_semantic``: ``_semantic.<op>(...)`` runs the type rule of ``<op>``.

    Every ``@builtin`` stub of ``newt.language`` ends in ``return _semantic.<op>(args...)`` (Triton's
    ``_semantic.add(...)``); the front end calls the stub with the bound abstract values and this object.
    The rule receives exactly what the stub passes, with each argument's source node found again by
    identity, so a stub may forward to another op's rule or change an argument.
    """

    __slots__ = ("builder", "bound", "node")

    def __init__(self, builder, bound: Bound, node):
        self.builder = builder
        self.bound = bound
        self.node = node

    def __getattr__(self, opname):
        rule = RULES.get(opname)
        if rule is None:
            raise SemError("N004", f"nl.{opname} is not supported yet")

        def call(*args, **kwargs):
            return rule(self.builder, self._rebind(opname, args, kwargs), self.node)
        return call

    def _rebind(self, opname, args, kwargs) -> Bound:
        orig = self.bound
        fs = _signature(opname)
        values = {}
        for pname, v in zip(fs.positional, args):
            values[pname] = v
        if fs.varargs is not None:
            extra = list(args[len(fs.positional):])
            prev = orig.values.get(fs.varargs)
            same = isinstance(prev, TupleV) and len(prev.items) == len(extra) and all(
                x is y for x, y in zip(prev.items, extra))
            values[fs.varargs] = prev if same else TupleV(extra)
        values.update(kwargs)
        if opname == orig.name and all(values.get(k) is v for k, v in orig.values.items()):
            return orig  # the stub forwarded its arguments unchanged (the common case)
        by_id = {id(v): orig.nodes.get(k) for k, v in orig.values.items()}
        nodes, explicit = {}, set()
        for k, v in values.items():
            if orig.values.get(k) is v:
                nodes[k] = orig.nodes.get(k, self.node)
                if k in orig.explicit:
                    explicit.add(k)
            else:
                nodes[k] = by_id.get(id(v)) or self.node
                explicit.add(k)
        for pname in fs.names:
            if pname not in values:
                values[pname] = TupleV([]) if pname == fs.varargs else Const(fs.defaults.get(pname))
                nodes[pname] = self.node
        return Bound(opname, values, nodes, explicit)


def call_stub(builder, name: str, bound: Bound, node) -> AV:
    """Run the ``@builtin`` stub of ``name`` on the bound arguments: its body calls the op's rule."""
    fs = _signature(name)
    stub = inspect.unwrap(BUILTINS[name])
    pos = [bound.values[p] for p in fs.positional]
    if fs.varargs is not None:
        pos += list(bound.values[fs.varargs].items)
    kw = {k: bound.values[k] for k in fs.kwonly}
    return stub(*pos, _semantic=Semantic(builder, bound, node), **kw)

# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------


def _poison(*avs):
    for a in avs:
        if isinstance(a, Opaque):
            from .values import Poison as _Poison
            raise _Poison()


def const_int(av: AV, what: str, node=None, allow_sym=True):
    _poison(av)
    if isinstance(av, Const) and isinstance(av.value, int) and not isinstance(av.value, bool):
        return av.value
    if isinstance(av, Sym):
        if allow_sym:
            return av
        # a constexpr whose value the generic check does not know: each specialization checks the real int
        from .values import Poison as _Poison
        raise _Poison()
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
    items: list[AV]
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
    dims: list[int | SymDim] = []
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
    if isinstance(av, TensorV) and av.type == ANY_DTYPE:
        # a parameter whose kind the generic check does not know (a helper's unannotated ``do`` that its caller
        # passes a block): each specialization knows; here nothing is said
        from .values import Poison as _Poison
        raise _Poison()
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


# the rules themselves live in rules/, one module per family; newt/frontend/__init__.py imports that
# package, which fills RULES (this registry never imports its families: no import cycle)

__all__ = ["RULES", "bind", "literal_type"]
