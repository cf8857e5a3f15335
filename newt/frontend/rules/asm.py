"""Type rule of ``nl.inline_asm_elementwise`` (Triton's ``tl.inline_asm_elementwise``).

Every check names the argument it is about (N010 for a value that must be constexpr, N070
``inline-asm`` for an asm call whose constraints, operands, dtypes or pack do not agree).
"""

from __future__ import annotations

import ast
import re

from newt.ir.ops import asm_elems_per_reg
from newt.ir.types import block_of

from ..ops import Bound, _poison, const_dtype, rule
from ..semantic import SemError, broadcast_shapes
from ..values import Const, Sym, TensorV, TupleV

#: constraint letter -> register bits
REG_BITS = {"h": 16, "r": 32, "l": 64, "f": 32, "d": 64}


def _err(msg, node, hint=None):
    return SemError("N070", msg, hint=hint, node=node)


def _const_text(av, what, node) -> str:
    _poison(av)
    if isinstance(av, Const) and isinstance(av.value, str):
        return av.value
    raise SemError("N010", f"nl.inline_asm_elementwise: {what} must be a constexpr string", node=node,
                   hint="pass a string literal (or a constexpr global string)")


def parse_constraints(text: str, node) -> list[tuple[bool, str]]:
    """``"=r,=r,r,h"`` -> [(is_output, letter), ...]; outputs must come first."""
    out: list[tuple[bool, str]] = []
    for raw in text.split(","):
        c = raw.strip()
        is_out = c.startswith("=")
        letter = c[1:] if is_out else c
        if letter not in REG_BITS:
            raise _err(f"nl.inline_asm_elementwise: unknown constraint {c!r} (expected one of "
                       f"{', '.join(REG_BITS)}, '=' before an output)", node)
        if is_out and out and not out[-1][0]:
            raise _err(f"nl.inline_asm_elementwise: output constraint {c!r} after an input one: outputs come "
                       f"first ($0, $1, ... are the outputs)", node)
        out.append((is_out, letter))
    return out


def _items(av, node):
    if isinstance(av, TupleV):
        return list(av.items)
    if isinstance(av, Const) and isinstance(av.value, (list, tuple)):
        return [Const(v) for v in av.value]
    if isinstance(av, (TensorV, Sym)) or (isinstance(av, Const) and isinstance(av.value, (int, float))):
        return [av]
    raise SemError("N023", "nl.inline_asm_elementwise: args must be a list of blocks or scalars", node=node)


def _dtypes(av, node):
    if isinstance(av, TupleV):
        return [const_dtype(x, "dtype", node) for x in av.items], True
    if isinstance(av, Const) and isinstance(av.value, (list, tuple)):
        return [const_dtype(Const(x), "dtype", node) for x in av.value], True
    return [const_dtype(av, "dtype", node)], False


def _check_value(dt, what, node):
    if dt.is_symbolic():  # the generic analysis: checked again per specialization
        return
    if dt.is_ptr() or dt.is_bool() or not (dt.is_int() or dt.is_floating()):
        raise _err(f"nl.inline_asm_elementwise: {what} has dtype {dt!r}; asm operands are integers or floats "
                   f"(not pointers or int1)", node)


@rule("inline_asm_elementwise")
def _inline_asm(b, a: Bound, node):
    asm = _const_text(a["asm"], "the asm", a.node("asm"))
    ctext = _const_text(a["constraints"], "the constraints", a.node("constraints"))
    pk = a["pack"]
    _poison(pk)
    if not (isinstance(pk, Const) and isinstance(pk.value, int) and not isinstance(pk.value, bool)):
        raise SemError("N010", "nl.inline_asm_elementwise: pack must be a constexpr int", node=a.node("pack"))
    pack = pk.value
    if pack < 1 or pack & (pack - 1):
        raise _err(f"nl.inline_asm_elementwise: pack must be a power of two >= 1, got {pack}", a.node("pack"))
    pure = a["is_pure"]
    _poison(pure)
    if not (isinstance(pure, Const) and isinstance(pure.value, bool)):
        raise SemError("N010", "nl.inline_asm_elementwise: is_pure must be a constexpr bool", node=a.node("is_pure"))
    dts, many = _dtypes(a["dtype"], a.node("dtype"))
    for dt in dts:
        _check_value(dt, "a result", a.node("dtype"))
    argn = a.node("args")
    items = _items(a["args"], argn)
    elt_nodes = argn.elts if isinstance(argn, (ast.List, ast.Tuple)) and len(argn.elts) == len(items) else \
        [argn] * len(items)
    for v in items:
        _poison(v)
    infos = [b.operand_info(v) for v in items]
    shape: tuple = ()
    for _, s, _ in infos:
        shape = broadcast_shapes(shape, s, "the asm arguments")
    for (t, _, _), n in zip(infos, elt_nodes):
        _check_value(t, "an argument", n)
    n = 1
    for d in shape:
        n *= d if isinstance(d, int) else 1
    if pack > 1 and (not shape or n % pack):
        raise _err(f"nl.inline_asm_elementwise: pack={pack} does not divide the {n} element"
                   f"{'s' if n != 1 else ''} of the arguments", a.node("pack"))
    cons = parse_constraints(ctext, a.node("constraints"))
    outs = [c for c in cons if c[0]]
    ins = [c for c in cons if not c[0]]
    symbolic = any(t.is_symbolic() for t in dts + [t for t, _, _ in infos])
    # registers per invocation: values under 32 bits share a register (as many as fit in pack)
    want_out = [pack // asm_elems_per_reg(dt.primitive_bitwidth, pack) for dt in dts]
    want_in = [pack // asm_elems_per_reg(t.primitive_bitwidth, pack) for t, _, _ in infos]
    if not symbolic and (len(outs) != sum(want_out) or len(ins) != sum(want_in)):
        raise _err(f"nl.inline_asm_elementwise: {len(outs)} output and {len(ins)} input constraints, but "
                   f"{len(dts)} result{'s' if len(dts) != 1 else ''} and {len(items)} argument"
                   f"{'s' if len(items) != 1 else ''} with pack={pack} need {sum(want_out)} output and "
                   f"{sum(want_in)} input registers", a.node("constraints"),
                   hint="one constraint per register: pack elements of 32 bits or more take one register each; "
                        "narrower ones share a 32-bit register (two 16-bit, four 8-bit values)")
    if not symbolic:
        _check_widths(outs, dts, want_out, pack, a.node("constraints"), "result")
        _check_widths(ins, [t for t, _, _ in infos], want_in, pack, a.node("constraints"), "argument")
    for m in re.finditer(r"\$(\d+)", asm):
        if int(m.group(1)) >= len(cons):
            raise _err(f"nl.inline_asm_elementwise: the asm names ${m.group(1)} but there are only {len(cons)} "
                       f"operands ($0 to ${len(cons) - 1})", a.node("asm"))
    vals = [b.as_tensor(v, t, shape, nd) for v, (t, _, _), nd in zip(items, infos, elt_nodes)]
    rtypes = [block_of(dt, shape) if shape else dt for dt in dts]
    op = b.emit("inline_asm", vals, rtypes, {"asm": asm, "constraints": ctext, "pack": pack, "pure": pure.value},
                node=node)
    res = [TensorV(r) for r in op.results]
    return TupleV(res) if many else res[0]


def _check_widths(cons, dts, regs, pack, node, what):
    k = 0
    for i, (dt, nr) in enumerate(zip(dts, regs)):
        bits = dt.primitive_bitwidth * (pack // nr)
        for _ in range(nr):
            letter = cons[k][1]
            if REG_BITS[letter] < bits:
                raise _err(f"nl.inline_asm_elementwise: {what} {i} ({dt!r}, {bits} bits per register) does not fit "
                           f"constraint {'=' if cons[k][0] else ''}{letter} ({REG_BITS[letter]} bits)", node)
            k += 1


__all__ = ["REG_BITS", "parse_constraints"]
