"""deuteron's op table: every node kind and every op, declared once (the entries live in ``deuteron/ops/``).

A **node kind** (``NodeKind``) is what the tracer builds and the generator renders: its traits replace the name
lists the passes used to keep (``PURE`` values are shared by equal nodes, ``EFFECT`` ones are statements, ...),
and its renderer turns a node into newt source.

An **op** (``Op``) is what a user calls inside a tile loop: ``torch.sum``, ``x.sum()``, ``dt.load``.  Its entry
holds its spellings, its trace hook (bound with its own signature, or the ``dt.*`` stub's), the node kinds it
builds, its eager reference (what ``kernel.ref`` runs: the torch function, or the ``dt.*`` stub) and its static
check (what the editor reports before anything runs).  ``deuteron/ops/<family>.py`` declare them with ``@op`` and
``node``; ``deuteron.ops`` derives the editor's and the tracer's name tables from them.

Torch-free and importing nothing of deuteron: everything above it may read the table.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

__all__ = ["NodeKind", "Op", "NODE_KINDS", "OPS", "node", "op", "traits_of", "has", "Hook", "static_binding_check",
           "PURE", "ELEMENTWISE", "MEMORY", "EFFECT", "NAMED", "BOUND", "TILE_ATTR", "INDEX", "ALONG", "CREATES",
           "FOLDS", "VARIABLE", "PRODUCED_BY_EFFECT"]

# ---------------------------------------------------------------------------- traits of node kinds
PURE = "pure"  # no effect: equal nodes in one block or its parents are one value (the tracer's CSE)
ELEMENTWISE = "elementwise"  # lane by lane over its (broadcast) operands
MEMORY = "memory"  # reads or writes a tensor argument (a jagged tile's parents must be among its dims)
EFFECT = "effect"  # a statement of its own (store, atomic): emitted where it stands, never rendered inline
NAMED = "named"  # always bound to a name in the generated code, however often it is used
BOUND = "bound"  # a value with a name of its own (parameter, constant, loop variable): never named after a target
TILE_ATTR = "tile_attr"  # a tile's index / begin / end / id / count / block size (rendered from the tile's names)
INDEX = "index"  # a loop's or a grid's index variable
ALONG = "along"  # combines the lanes of a dimension (reduce, scan, dot, combine): a jagged one needs its parents
CREATES = "creates"  # builds a block of its dims (full, expand): a whole dimension of it cannot be rolled
FOLDS = "folds"  # a compile-time constant when all its operands are
VARIABLE = "variable"  # a variable of the generated code (loop-carried, assigned by an if)
PRODUCED_BY_EFFECT = "produced_by_effect"  # the value an effect returns (an atomic's old value): named by it

TRAITS = (PURE, ELEMENTWISE, MEMORY, EFFECT, NAMED, BOUND, TILE_ATTR, INDEX, ALONG, CREATES, FOLDS, VARIABLE,
          PRODUCED_BY_EFFECT)


@dataclass(frozen=True)
class NodeKind:
    """One kind of ``deuteron.program.Node``: its traits and how the generator writes it.

    ``render(gen, node) -> str`` gives the node's newt expression; an ``EFFECT`` kind has ``emit(gen, node,
    indent)`` instead (it writes its statements); ``name_hint(node)`` is the base of the variable the generator
    binds it to (``load_x``, ``sum``)."""

    name: str
    traits: frozenset
    render: object = None
    emit: object = None
    name_hint: object = None
    family: str = ""
    doc: str = ""


NODE_KINDS: dict[str, NodeKind] = {}


def node(name: str, *traits: str, render=None, emit=None, name_hint=None, family: str = "", doc: str = "") -> NodeKind:
    """Declare node kind ``name`` (once: a second declaration is an error)."""
    if name in NODE_KINDS:
        raise ValueError(f"node kind {name!r} is declared twice")
    bad = [t for t in traits if t not in TRAITS]
    if bad:
        raise ValueError(f"node kind {name!r}: unknown traits {bad}")
    k = NodeKind(name, frozenset(traits), render, emit, name_hint, family, doc)
    NODE_KINDS[name] = k
    return k


def traits_of(kind: str) -> frozenset:
    return NODE_KINDS[kind].traits


def has(n, trait: str) -> bool:
    """Does node ``n`` (a ``Node``) have ``trait``?"""
    return trait in NODE_KINDS[n.op].traits


# ---------------------------------------------------------------------------- ops


class Hook:
    """One op's trace rule: ``fn(tracer, call_node, *lead, **bound_arguments)`` and the signature it binds with."""

    __slots__ = ("name", "signature", "fn", "lead")

    def __init__(self, name, signature: inspect.Signature, fn, lead: tuple):
        self.name = name
        self.signature = signature
        self.fn = fn
        self.lead = lead  # leading arguments of fn before the bound ones: () or (op,)

    def __call__(self, tr, e, what: str, args, kwargs):
        from .errors import BadArguments, TraceError
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as err:
            raise BadArguments(e, op=what, problem=str(err), signature=str(self.signature)) from None
        bound.apply_defaults()
        try:
            return self.fn(tr, e, *self.lead, *bound.args, **bound.kwargs)
        except TraceError as err:
            if err.node is None:  # raised where the node was not known (result_type): the op's call
                err.node = e
            raise


@dataclass
class Op:
    """One op of the tile language.

    - ``name``: its key (``"sum"``, ``"dt.load"``): torch ops by their canonical name, ``dt.*`` ops prefixed;
    - ``torch`` / ``functional`` / ``methods``: the ``torch.<n>``, ``torch.nn.functional.<n>`` and ``Tensor.<n>``
      spellings that reach it; ``stub``: the ``dt.*`` function (its signature and docstring are what users see;
      calling it eagerly is ``kernel.ref``'s behaviour);
    - ``trace``: the hook, bound with ``signature``; ``nodes``: the node kinds it builds;
    - ``ref``: the eager reference, a dotted name (``"torch.sum"``) or the stub;
    - ``check(op, call, spelling, problem)``: the static check the editor runs on a call's AST (by default: the
      arguments bind to the signature);
    - ``first``: what a torch op's first argument is -- ``"operand"`` (a value of the kernel; a number becomes a
      constant), ``"number"`` (a Python number stays one: ``torch.add(1, x)``) or ``"any"`` (a shape, a list of
      blocks); ``host_args``: host tensors may appear among its arguments (``torch.zeros(x.shape)``);
      ``tile_args``: its arguments may name tiles as a shape or an index (``dt.zeros([tm, tn])``, ``dt.load(x,
      [t])``): the static checker reads tiles there as dimensions, not as numbers.
    """

    name: str
    family: str
    trace: Hook
    nodes: tuple = ()
    torch: tuple = ()
    functional: tuple = ()
    methods: tuple = ()
    stub: object = None
    ref: object = None
    check: object = None
    doc: str = ""
    first: str = "operand"
    host_args: bool = False
    tile_args: bool = False

    @property
    def signature(self) -> inspect.Signature:
        return self.trace.signature

    @property
    def spellings(self) -> list[str]:
        out = [f"torch.{n}" for n in self.torch] + [f"torch.nn.functional.{n}" for n in self.functional]
        out += [f"Tensor.{n}" for n in self.methods]
        if self.stub is not None:
            out.append(f"dt.{self.stub.__name__}")
        return out

    def resolve_ref(self):
        """The eager reference as a callable (imports torch for a torch op's), or None where the installed torch
        lacks the function."""
        if callable(self.ref):
            return self.ref
        import importlib
        mod, _, attr = self.ref.rpartition(".")
        obj = importlib.import_module("torch")
        for part in mod.split(".")[1:]:
            obj = getattr(obj, part)
        return getattr(obj, attr, None)  # None: this torch lacks it (torch.fma)


OPS: dict[str, Op] = {}


def op(name: str, *, family: str, nodes=(), torch=(), functional=(), methods=(), stub=None, ref=None, check=None,
       share_op: bool = False, first: str = "operand", host_args: bool = False, tile_args: bool = False,
       doc: str = ""):
    """Declare the op ``name`` with the decorated trace hook (decorators stack: ops may share one hook).

    A torch op's hook is ``fn(tr, e, op, input, ...)``: its parameters after ``(tr, e, op)`` are the op's
    signature, and ``op`` is the op's name.  A ``dt.*`` op's hook (``stub=``) is bound with the stub's signature;
    it gets the stub's name first where ``share_op``.  ``ref`` defaults to the torch function of the first
    spelling, or the stub."""
    def deco(fn):
        if name in OPS:
            raise ValueError(f"op {name!r} is declared twice")
        if stub is not None:
            hook = Hook(name, inspect.signature(stub), fn, (stub.__name__,) if share_op else ())
            r = ref if ref is not None else stub
        else:
            sig = inspect.signature(fn)
            hook = Hook(name, sig.replace(parameters=list(sig.parameters.values())[3:]), fn, (name,))
            r = ref if ref is not None else (
                f"torch.{torch[0]}" if torch else f"torch.nn.functional.{functional[0]}" if functional else
                f"torch.Tensor.{methods[0]}" if methods else None)
        OPS[name] = Op(name=name, family=family, trace=hook, nodes=tuple(nodes), torch=tuple(torch),
                       functional=tuple(functional), methods=tuple(methods), stub=stub, ref=r,
                       check=check or static_binding_check, doc=doc or (fn.__doc__ or "").strip(), first=first,
                       host_args=host_args, tile_args=tile_args)
        return fn
    return deco


# ---------------------------------------------------------------------------- the default static check


def static_binding_check(o: Op, call: ast.Call, spelling: str, problem) -> None:
    """Report (``problem(node, message, hint)``) a call whose arguments cannot bind to the op's signature: what
    tracing would raise as a D004, found while editing.  Silent where the call spreads ``*args`` / ``**kw``."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return
    sig = o.signature
    n = len(call.args) + (1 if spelling.startswith("Tensor.") else 0)
    try:
        sig.bind(*range(n), **{k.arg: None for k in call.keywords})
    except TypeError as err:
        shown = spelling[len("Tensor"):] if spelling.startswith("Tensor.") else spelling
        problem(call, f"{shown}(): {err}", f"its signature: {sig}")
