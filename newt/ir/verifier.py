"""Structural checks of the tile IR.

``verify(fn)`` raises ``IRVerificationError`` listing every problem found:
values used before definition or outside their region, terminators that do not
match their parent op, ops missing from the op table (``newt.ir.ops``), operand
counts and attribute names that do not match the op's signature, each op's type
rule (``OpDef.verify``), and (for concrete functions) block dimensions that are
not powers of two.
"""

from __future__ import annotations

from newt.diagnostics import LocatedError
from newt.language.core import block_type

from .core import Loc
from .ops import OPS, REQUIRED, Trait
from .types import is_pow2, scalar_of, type_str


class IRVerificationError(LocatedError):
    """The IR breaks the op table's rules (an internal error of the pass that built it): code ``N090``,
    ``location`` the first offending op's, ``data["errors"]`` every problem found."""

    def __init__(self, message: str, *, errors: list[str] | None = None, location: Loc | None = None):
        super().__init__("N090", message, location=location, data={"errors": list(errors or [])})


def verify(fn, concrete: bool = True) -> None:
    errors: list[str] = []
    defined: set[int] = set()

    first_loc: list[Loc] = []

    def where(op):
        if op.loc is not None and not first_loc:
            first_loc.append(op.loc)
        return f"{op.name} at {op.loc.line}:{op.loc.col}" if op.loc else op.name

    def check_region(region, parent):
        for a in region.args:
            defined.add(id(a))
        for i, op in enumerate(region.ops):
            for o in op.operands:
                if id(o) not in defined:
                    errors.append(f"{where(op)}: operand {o!r} is not defined before use")
            d = OPS.get(op.name)
            if d is None:
                errors.append(f"{where(op)}: no op {op.name!r} in the op table")
            elif check_signature(op, d):
                if d.verify is not None:
                    errors.extend(f"{where(op)}: {m}" for m in d.verify(op))
                if Trait.TERMINATOR in d.traits and i != len(region.ops) - 1:
                    errors.append(f"{where(op)}: terminator in the middle of a region")
            if concrete:
                for r in op.results:
                    if isinstance(r.type, block_type):
                        for d in r.type.shape:
                            if not isinstance(d, int) or not is_pow2(d):
                                errors.append(f"{where(op)}: block dimension {d} is not a power of two")
                    if scalar_of(r.type).is_symbolic():
                        errors.append(f"{where(op)}: symbolic type {type_str(r.type)} in a concrete function")
            check_op_regions(op)
            for r in op.results:
                defined.add(id(r))

    def check_signature(op, d) -> bool:
        n = len(op.operands)
        ok = True
        if n < d.min_operands or (d.max_operands is not None and n > d.max_operands):
            want = (f"{d.min_operands}" if d.max_operands == d.min_operands else
                    f"{d.min_operands}..{d.max_operands if d.max_operands is not None else ''}")
            errors.append(f"{where(op)}: {n} operands, expected {want} ({', '.join(d.operands)})")
            ok = False
        if d.results is not None and len(op.results) != d.results:
            errors.append(f"{where(op)}: {len(op.results)} results, expected {d.results}")
            ok = False
        for k in op.attrs:
            if k not in d.attrs:
                errors.append(f"{where(op)}: unknown attribute {k!r} (the op table lists "
                              f"{', '.join(d.attrs) or 'none'})")
        for k, v in d.attrs.items():
            if v is REQUIRED and k not in op.attrs:
                errors.append(f"{where(op)}: missing attribute {k!r}")
                ok = False
        return ok

    def expect_term(region, name, n, op):
        t = region.terminator
        if t is None or t.name != name:
            errors.append(f"{where(op)}: region must end in {name}")
            return None
        if n is not None and len(t.operands) != n:
            errors.append(f"{where(op)}: {name} has {len(t.operands)} values, expected {n}")
        return t

    def check_op_regions(op):
        for r in op.regions:
            check_region(r, op)
        if op.name == "scf.for":
            (body,) = op.regions
            ncar = len(op.operands) - 3
            if len(body.args) != ncar + 1:
                errors.append(f"{where(op)}: loop body takes {len(body.args)} args, expected {ncar + 1}")
            t = expect_term(body, "yield", ncar, op)
            if t is not None:
                for init, y, res in zip(op.operands[3:], t.operands, op.results):
                    if not (init.type == y.type == res.type):
                        errors.append(f"{where(op)}: loop-carried value changes type "
                                      f"({type_str(init.type)} -> {type_str(y.type)})")
        elif op.name == "scf.if":
            then, els = op.regions
            for reg in (then, els):
                t = expect_term(reg, "yield", len(op.results), op)
                if t is not None:
                    for y, res in zip(t.operands, op.results):
                        if y.type != res.type:
                            errors.append(f"{where(op)}: branch yields {type_str(y.type)}, "
                                          f"if returns {type_str(res.type)}")
        elif op.name == "scf.while":
            before, after = op.regions
            expect_term(before, "condition", len(op.operands) + 1, op)
            expect_term(after, "yield", len(op.operands), op)

    check_region(fn.body, None)
    if errors:
        raise IRVerificationError(f"IR of {fn.name} is invalid:\n  " + "\n  ".join(errors), errors=errors,
                                  location=first_loc[0] if first_loc else None)
