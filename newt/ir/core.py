"""The tile IR: values, ops with nested regions (structured control flow), functions.

The IR is small and printable.  Every op has a name (``add``, ``load``,
``scf.for`` ...), operands, results, attributes, optional regions and the
source location it came from.  Region-carrying ops:

* ``scf.for``  operands ``[lb, ub, step, *init]``; one region whose args are
  ``[iv, *carried]`` and which ends in ``yield``; results are the final carried values.
* ``scf.if``   operands ``[cond]``; regions ``then`` and ``else``, each ending in
  ``yield``; results are the yielded values.
* ``scf.while`` operands ``[*init]``; region ``before(args)`` ends in
  ``condition(cond, *args)``; region ``after(args)`` ends in ``yield``.
* ``reduce`` / ``scan`` with ``attrs["combine"] == "region"``: one region with
  ``2n`` scalar args that ends in ``yield`` of ``n`` values.

``str(function)`` gives the text form used by tests; ``verify(function)``
checks it (see ``newt.ir.verifier``).
"""

from __future__ import annotations

from dataclasses import dataclass
from weakref import ref as _wref

from newt.diagnostics import Loc

from .ops import OpDef, opdef
from .types import type_str

_MISSING = object()

__all__ = ["Loc", "Value", "Op", "Region", "Function", "Param"]




class Value:
    __slots__ = ("id", "type", "_owner", "name", "index")

    def __init__(self, type, owner=None, name: str | None = None, index: int = 0):
        self.id = -1
        self.type = type
        self._owner = _wref(owner) if owner is not None else None
        self.name = name
        self.index = index

    @property
    def owner(self):
        """The Op that defines it, or the Region for block arguments.

        Held weakly: ops and regions own their values, so the IR has no reference cycles and is freed by
        reference counting as soon as its function is dropped (no cyclic-GC pauses in the editor)."""
        o = self._owner
        return o() if o is not None else None

    @owner.setter
    def owner(self, op):
        self._owner = _wref(op) if op is not None else None

    def __repr__(self) -> str:
        return f"%{self.name or self.id}: {type_str(self.type)}"


class Region:
    __slots__ = ("args", "ops", "__weakref__")

    def __init__(self, args=None, ops=None):
        self.args: list[Value] = list(args or [])
        self.ops: list[Op] = list(ops or [])
        for i, a in enumerate(self.args):
            a.owner = self
            a.index = i

    @property
    def terminator(self):
        return self.ops[-1] if self.ops else None

    def walk(self):
        for op in self.ops:
            yield from op.walk()


class Op:
    __slots__ = ("name", "operands", "results", "attrs", "regions", "loc", "__weakref__")

    def __init__(self, name: str, operands, result_types, attrs=None, regions=None, loc: Loc | None = None):
        self.name = name
        self.operands: list[Value] = operands if type(operands) is list else list(operands)
        self.results: list[Value] = [Value(t, self, None, i) for i, t in enumerate(result_types)]
        self.attrs: dict = attrs if attrs is not None else {}
        self.regions: list[Region] = regions if regions is not None else []
        self.loc = loc

    @property
    def result(self) -> Value:
        return self.results[0]

    @property
    def opdef(self) -> OpDef:
        """This op's entry in the op table (``newt.ir.ops``)."""
        return opdef(self.name)

    def operand(self, name: str) -> Value | None:
        """The operand called ``name`` in the op table's signature; None for an absent optional one
        (``load.operand("mask")``).  Variadic groups: ``variadic(name)``."""
        d = opdef(self.name)
        i = d.operand_index(name)
        if d.is_variadic(name):
            raise TypeError(f"operand {name!r} of {self.name} is variadic: use op.variadic({name!r})")
        return self.operands[i] if i < len(self.operands) else None

    def variadic(self, name: str) -> list[Value]:
        """The operands of the variadic group ``name`` (``scf.for.variadic("init")``)."""
        d = opdef(self.name)
        i = d.operand_index(name)
        if not d.is_variadic(name):
            raise TypeError(f"operand {name!r} of {self.name} is not variadic: use op.operand({name!r})")
        return self.operands[i:]

    def attr(self, name: str):
        """The attribute ``name``, or its default from the op table when the op does not carry it."""
        v = self.attrs.get(name, _MISSING)
        if v is _MISSING:
            return opdef(self.name).default(name)
        return v

    def walk(self):
        yield self
        for r in self.regions:
            yield from r.walk()

    def __repr__(self) -> str:
        return f"<Op {self.name} at {self.loc}>"


@dataclass
class Param:
    name: str
    type: object
    value: Value | None  # None for constexpr parameters
    constexpr: bool = False
    const_value: object = None


class Function:
    """A kernel after the front end: parameters, constexpr values and a body region."""

    def __init__(self, name: str, params: list[Param], body: Region, file: str = "<unknown>",
                 constexprs: dict | None = None, loc: Loc | None = None):
        self.name = name
        self.params = params
        self.body = body
        self.file = file
        self.constexprs = dict(constexprs or {})
        self.loc = loc
        #: set by the front end for one specialization: divisibility hints (parameter -> 16), launch options,
        #: nl.static_print output and the front end's warnings (Diagnostic values)
        self.hints: dict[str, int] = {}
        self.num_warps: int | None = None
        self.num_stages: int | None = None
        self.static_prints: list[str] = []
        self.warnings: list = []

    @property
    def args(self) -> list[Value]:
        return self.body.args

    def walk(self):
        return self.body.walk()

    def number(self):
        """Give every value a stable number in definition order (used by printing and backends)."""
        counter = 0

        def visit(region):
            nonlocal counter
            for a in region.args:
                a.id = counter
                counter += 1
            for op in region.ops:
                for r in op.results:
                    r.id = counter
                    counter += 1
                for sub in op.regions:
                    visit(sub)

        visit(self.body)
        return counter

    def format(self, locs: bool = False) -> str:
        from .printer import format_function
        return format_function(self, locs=locs)

    def __str__(self) -> str:
        return self.format()
