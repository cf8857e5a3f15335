"""``inline_asm`` (``nl.inline_asm_elementwise``): the user's PTX in a CUDA ``asm()`` statement per element,
or per ``pack`` consecutive elements of a thread's registers.

Operands are numbered as in Triton (``$0`` ... the outputs, then the inputs); the template is rewritten to
CUDA's ``%0`` (a literal ``%`` doubled).  Values under 32 bits share a register, the lower element in the
lower bits (two fp16 in an ``r``, four int8 in an ``r``, two int8 in an ``h``); a narrower value alone in a
wider register is extended as C converts it (signed integers sign-extend).  ``is_pure=False`` gives
``asm volatile`` (never removed or merged); a pure asm may be dropped by the compiler when unused.
"""

from __future__ import annotations

from newt.ir.ops import asm_elems_per_reg
from newt.ir.types import is_block, scalar_of, shape_of

from .ctypes import ctype
from .emitter import BackendError, lowers

#: marks the CUDA line of an inline asm statement (asm_errors maps ptxas errors back through it)
MARKER = "/* nl.inline_asm_elementwise */"

#: constraint letter -> (C type of the register, bits)
REG = {"h": ("unsigned short", 16), "r": ("unsigned int", 32), "l": ("unsigned long long", 64),
       "f": ("float", 32), "d": ("double", 64)}
_UNS = {8: "unsigned char", 16: "unsigned short", 32: "unsigned int", 64: "unsigned long long"}


def asm_template(asm: str) -> str:
    """Triton's ``$N`` operands -> CUDA's ``%N``; a literal ``%`` (PTX register names) doubled."""
    out, i = [], 0
    while i < len(asm):
        ch = asm[i]
        if ch == "%":
            out.append("%%")
        elif ch == "$" and i + 1 < len(asm) and asm[i + 1].isdigit():
            j = i + 1
            while j < len(asm) and asm[j].isdigit():
                j += 1
            out.append("%" + asm[i + 1:j])
            i = j
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def c_string(text: str) -> str:
    lines = text.split("\n")
    parts = []
    for k, ln in enumerate(lines):
        esc = ln.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
        parts.append(f'"{esc}{chr(92) + "n" if k < len(lines) - 1 else ""}"')
    return " ".join(parts)


def _bits(x: str, dt) -> str:
    """The bit pattern of element ``x`` (dtype dt) as an unsigned integer of its width."""
    w = dt.primitive_bitwidth
    u = _UNS[w]
    if dt.is_floating():
        return f"bit_cast<{u}>({x})"
    return f"(({u})({x}))"


def _in_reg(xs: list, dt, letter: str) -> str:
    """C++ for one input register holding elements ``xs``."""
    rt, rbits = REG[letter]
    w = dt.primitive_bitwidth
    if len(xs) == 1:
        x = xs[0]
        if letter == "f" and dt.name == "fp32" or letter == "d" and dt.name == "fp64":
            return x
        if dt.is_int() and not dt.is_bool():
            v = f"(({ 'long long' if dt.is_int_signed() else 'unsigned long long'})({x}))"  # C's extension
        else:
            v = _bits(x, dt)
        if letter == "f":
            return f"__uint_as_float((unsigned int)({v}))"
        if letter == "d":
            return f"__longlong_as_double((long long)({v}))"
        return f"(({rt})({v}))"
    ut = _UNS[rbits] if letter in "hrl" else ("unsigned int" if letter == "f" else "unsigned long long")
    terms = [f"(({ut}){_bits(x, dt)} << {k * w})" if k else f"(({ut}){_bits(x, dt)})" for k, x in enumerate(xs)]
    v = "(" + " | ".join(terms) + ")"
    if letter == "f":
        return f"__uint_as_float({v})"
    if letter == "d":
        return f"__longlong_as_double((long long){v})"
    return f"(({rt}){v})"


def _out_elems(reg: str, letter: str, n: int, dt) -> list[str]:
    """C++ for the ``n`` elements (dtype dt) of output register ``reg``."""
    w = dt.primitive_bitwidth
    if letter == "f":
        if n == 1 and dt.name == "fp32":
            return [reg]
        ireg = f"__float_as_uint({reg})"
    elif letter == "d":
        if n == 1 and dt.name == "fp64":
            return [reg]
        ireg = f"((unsigned long long)__double_as_longlong({reg}))"
    else:
        ireg = reg
    out = []
    for k in range(n):
        b = f"(({_UNS[w]})({ireg} >> {k * w}))" if k else f"(({_UNS[w]})({ireg}))"
        out.append(f"bit_cast<{ctype(dt)}>({b})" if dt.is_floating() else f"(({ctype(dt)}){b})")
    return out


def _letters(op) -> list[tuple[bool, str]]:
    out = []
    for c in op.attrs["constraints"].split(","):
        c = c.strip()
        out.append((c.startswith("="), c.lstrip("=")))
    return out


def asm_statement(op, in_elems: list[list[str]], out_names: list[str]) -> tuple[list[str], list[list[str]]]:
    """The declarations + ``asm(...)`` statement of one invocation, and the C++ of each result's elements.

    ``in_elems[j]``: C++ of operand j's ``pack`` elements; ``out_names``: one fresh name per output register.
    """
    pack = op.attr("pack")
    cons = _letters(op)
    outs = [c for c in cons if c[0]]
    ins = [c for c in cons if not c[0]]
    lines, in_exprs = [], []
    k = 0
    for v, xs in zip(op.operands, in_elems):
        dt = scalar_of(v.type)
        per = asm_elems_per_reg(dt.primitive_bitwidth, pack)
        for j in range(pack // per):
            in_exprs.append((ins[k][1], _in_reg(xs[j * per:(j + 1) * per], dt, ins[k][1])))
            k += 1
    results, r = [], 0
    for res in op.results:
        dt = scalar_of(res.type)
        per = asm_elems_per_reg(dt.primitive_bitwidth, pack)
        elems = []
        for _ in range(pack // per):
            letter = outs[r][1]
            lines.append(f"{REG[letter][0]} {out_names[r]};")
            elems += _out_elems(out_names[r], letter, per, dt)
            r += 1
        results.append(elems)
    kw = "asm" if op.attr("pure") else "asm volatile"
    o_list = ", ".join(f'"={c}"({n})' for (_, c), n in zip(outs, out_names))
    i_list = ", ".join(f'"{c}"({e})' for c, e in in_exprs)
    lines.append(f"{MARKER} {kw}({c_string(asm_template(op.attrs['asm']))} : {o_list} : {i_list});")
    return lines, results


@lowers("inline_asm")
def _inline_asm(em, op):
    pack = op.attr("pack")
    n_out = sum(1 for c in _letters(op) if c[0])
    names = [em.tmp("asm") for _ in range(n_out)]
    if not is_block(op.results[0].type):
        lines, results = asm_statement(op, [[em.scalar(o)] for o in op.operands], names)
        for ln in lines:
            em.line(ln)
        for res, elems in zip(op.results, results):
            em.bind_scalar(res, elems[0])
        return
    blocks = [em.result_block(r) for r in op.results]
    lay = blocks[0][1]
    k = pack.bit_length() - 1
    if tuple(lay.reg[:k]) != tuple(1 << j for j in range(k)):
        raise BackendError(f"internal: inline_asm pack={pack} needs {pack} consecutive elements per thread, "
                           f"the layout holds {lay}", op)
    srcs = [em.get(o, lay.with_shape(shape_of(o.type))) for o in op.operands]
    in_elems = [[f"{s}[g * {pack} + {e}]" for e in range(pack)] for s in srcs]
    lines, results = asm_statement(op, in_elems, names)
    body = " ".join(lines)
    for (name, _), elems in zip(blocks, results):
        body += " " + " ".join(f"{name}[g * {pack} + {e}] = {x};" for e, x in enumerate(elems))
    em.for_regs(lay.nregs // pack, "{ " + body + " }", var="g")
