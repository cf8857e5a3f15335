"""Structural checks of the tile IR.

``verify(fn)`` raises ``IRVerificationError`` listing every problem found:
values used before definition or outside their region, terminators that do not
match their parent op, elementwise ops whose operand types disagree, and (for
concrete functions) block dimensions that are not powers of two.
"""

from __future__ import annotations

from newt.language.core import block_type

from .types import is_pow2, scalar_of, shape_of, type_str

ELEMENTWISE_SAME_TYPE = {
    "add", "sub", "mul", "truediv", "floordiv", "mod", "and", "or", "xor", "shl", "shr",
    "minimum", "maximum", "umulhi", "div_rn", "pow", "fma",
}
COMPARE = {"lt", "le", "gt", "ge", "eq", "ne"}


class IRVerificationError(Exception):
    pass


def verify(fn, concrete: bool = True) -> None:
    errors: list[str] = []
    defined: set[int] = set()

    def where(op):
        return f"{op.name} at {op.loc.line}:{op.loc.col}" if op.loc else op.name

    def check_region(region, parent):
        for a in region.args:
            defined.add(id(a))
        for i, op in enumerate(region.ops):
            for o in op.operands:
                if id(o) not in defined:
                    errors.append(f"{where(op)}: operand {o!r} is not defined before use")
            if op.name in ELEMENTWISE_SAME_TYPE:
                t0 = op.operands[0].type
                for o in op.operands[1:]:
                    if o.type != t0:
                        errors.append(f"{where(op)}: operand types differ ({type_str(t0)} vs {type_str(o.type)})")
                if op.results and op.results[0].type != t0:
                    errors.append(f"{where(op)}: result type {type_str(op.results[0].type)} != operand type")
            if op.name in COMPARE:
                a, b = op.operands
                if a.type != b.type:
                    errors.append(f"{where(op)}: compared types differ ({type_str(a.type)} vs {type_str(b.type)})")
                if shape_of(op.results[0].type) != shape_of(a.type):
                    errors.append(f"{where(op)}: comparison changes the shape")
            if op.name in ("yield", "condition") and i != len(region.ops) - 1:
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
        raise IRVerificationError(f"IR of {fn.name} is invalid:\n  " + "\n  ".join(errors))
