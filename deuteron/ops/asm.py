"""``dt.inline_asm_elementwise`` (Helion's ``hl.inline_asm_elementwise``, Triton's signature): traced to one
``inline_asm`` node that the code generator writes as ``nl.inline_asm_elementwise``; ``kernel.ref`` runs the
same PTX eagerly with newt's PTX-subset evaluator (``newt.interpreter.inline_asm_torch``, called by
``deuteron.language.inline_asm_elementwise``).

The asm, the constraints, ``is_pure`` and ``pack`` must be known when compiling (D004 otherwise); the arguments
broadcast like any elementwise op.  Constraint counts, register widths and ``pack`` are checked by newt's front
end on the generated call (N070, reported at the generated line) and, first, here for the plain mistakes.
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..codegen_expr import _dt
from ..errors import Cause
from ..optable import NAMED, node, op
from ..program import Node
from ..trace_common import _broadcast_dims, _describe, _dims_text


class InlineAsmArguments(Cause):
    code = "D004"
    template = "dt.inline_asm_elementwise: {problem}"


def _dtypes(dtype):
    many = isinstance(dtype, (tuple, list))
    dts = list(dtype) if many else [dtype]
    return dts, many


@op("dt.inline_asm_elementwise", family="asm", stub=L.inline_asm_elementwise, nodes=("inline_asm", "tuple_get"))
def _dt_inline_asm(tr, e, asm, constraints, args, dtype, is_pure, pack):
    for what, v, kind in (("the asm", asm, str), ("the constraints", constraints, str), ("is_pure", is_pure, bool),
                          ("pack", pack, int)):
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise InlineAsmArguments(e, problem=f"{what} must be a {kind.__name__} known when compiling, not "
                                                f"{_describe(v)}")
    if pack < 1 or pack & (pack - 1):
        raise InlineAsmArguments(e, problem=f"pack must be a power of two, not {pack}")
    dts, many = _dtypes(dtype)
    if not dts or not all(isinstance(d, torch.dtype) for d in dts):
        raise InlineAsmArguments(e, problem=f"dtype must be a torch dtype or a tuple of them, not {_describe(dtype)}")
    xs = list(args) if isinstance(args, (tuple, list)) else [args]
    nodes = [tr.as_node(x, e) for x in xs]
    dims: tuple = ()
    for n in nodes:
        d = _broadcast_dims(dims, n.dims)
        if d is None:
            raise InlineAsmArguments(e, problem=f"the arguments' dimensions {_dims_text(dims)} and "
                                                f"{_dims_text(n.dims)} do not broadcast")
        dims = tuple(d)
    if pack > 1 and not dims:
        raise InlineAsmArguments(e, problem=f"pack={pack} needs block arguments (all of them are scalars)")
    _check_registers(e, constraints, [n.dtype for n in nodes], dts, pack)
    attrs = {"asm": asm, "constraints": constraints, "pure": is_pure, "pack": pack, "dtypes": tuple(dts)}
    node = tr.emit(Node("inline_asm", nodes, dims=dims, dtype=dts[0], attrs=attrs))
    if not many:
        return node
    return tuple(tr.emit(Node("tuple_get", [node], dims=dims, dtype=d, attrs={"index": i}))
                 for i, d in enumerate(dts))


_REG_BITS = {"h": 16, "r": 32, "l": 64, "f": 32, "d": 64}


def _bits(e, d, what) -> int:
    if d == torch.bool or d.is_complex:
        raise InlineAsmArguments(e, problem=f"{what} of dtype {d}: asm operands are integers or floats")
    return torch.finfo(d).bits if d.is_floating_point else torch.iinfo(d).bits


def _check_registers(e, constraints, in_dts, out_dts, pack):
    """Triton's register count (values under 32 bits share one, at most ``pack``) against the constraints, at the
    user's call (newt's front end checks the generated call again)."""
    cons = [c.strip() for c in constraints.split(",")]
    for k, c in enumerate(cons):
        if c.lstrip("=") not in _REG_BITS or c.startswith("=="):
            raise InlineAsmArguments(e, problem=f"unknown constraint {c!r} (one of h, r, l, f, d; '=' before an "
                                                f"output)")
        if c.startswith("=") and k and not cons[k - 1].startswith("="):
            raise InlineAsmArguments(e, problem=f"output constraint {c!r} after an input one: outputs come first")

    def regs(dts, what):
        out = []
        for d in dts:
            b = _bits(e, d, what)
            per = max(1, min(4 if b <= 8 else 2 if b <= 16 else 1, pack))
            out.append((pack // per, b * per))
        return out
    outs, ins = regs(out_dts, "a result"), regs(in_dts, "an argument")
    n_out = sum(1 for c in cons if c.startswith("="))
    want_out, want_in = sum(n for n, _ in outs), sum(n for n, _ in ins)
    if n_out != want_out or len(cons) - n_out != want_in:
        raise InlineAsmArguments(
            e, problem=f"{n_out} output and {len(cons) - n_out} input constraints, but {len(out_dts)} result"
                       f"{'s' if len(out_dts) != 1 else ''} and {len(in_dts)} argument"
                       f"{'s' if len(in_dts) != 1 else ''} with pack={pack} need {want_out} output and {want_in} "
                       f"input registers",
            hint="one constraint per register: pack elements of 32 bits or more take one register each; narrower "
                 "ones share a 32-bit register (two 16-bit, four 8-bit values)")
    k = 0
    for n, bits in outs + ins:
        for _ in range(n):
            if _REG_BITS[cons[k].lstrip("=")] < bits:
                raise InlineAsmArguments(e, problem=f"{bits} bits do not fit constraint {cons[k]!r} "
                                                    f"({_REG_BITS[cons[k].lstrip('=')]} bits)")
            k += 1


def render_inline_asm(r, n) -> str:
    """The generated newt call (``r``: the code generator's expression renderer)."""
    rank = len(r.rd(n.dims))
    args = ", ".join(r.aligned(a, rank, n.dims) for a in n.args)
    dts = n.attrs["dtypes"]
    dtype = _dt(dts[0]) if len(dts) == 1 else "(" + ", ".join(_dt(d) for d in dts) + ",)"
    return (f"nl.inline_asm_elementwise({n.attrs['asm']!r}, {n.attrs['constraints']!r}, [{args}], {dtype}, "
            f"{n.attrs['pure']!r}, {n.attrs['pack']!r})")


node("inline_asm", NAMED, render=render_inline_asm, family="asm",
     doc="dt.inline_asm_elementwise (attrs: asm, constraints, pure, pack, dtypes)")
