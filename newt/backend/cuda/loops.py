"""Loop-carried variables: declaring, binding and assigning the C++ variables of a region's values, and
the ``scf.for`` header and condition (shared by the plain loop lowering and the pipeliner)."""

from __future__ import annotations

from newt.ir.types import is_block

from .ctypes import ctype
from .plan import compact

__all__ = ["declare_var", "bind_var", "assign", "loop_header", "loop_condition"]


def declare_var(em, v, chunk, init=None, name=None, offsets=False):
    name = name or em.vname(v)
    em.used_names.add(name)
    if is_block(v.type):
        lay = compact(em.layout_of(v))
        ct = ctype(v.type)
        if offsets and init is not None and ct.endswith("*") and lay.nregs >= 8 and _one_tensor(init):
            src = em.get(init, lay)
            chunk.line(f"{ct} {name}_b = {src}[0];  // loop-carried pointer block as base + 32-bit offsets")
            chunk.line(f"int {name}_o[{lay.nregs}];")
            em.for_regs(lay.nregs, f"{name}_o[i] = (int)({src}[i] - {name}_b);", chunk)
            _offset_vars(em)[name] = ct
            return name, lay
        chunk.line(f"{ct} {name}[{lay.nregs}];")
        if init is not None:
            src = em.get(init, lay)
            em.for_regs(lay.nregs, f"{name}[i] = {src}[i];", chunk)
        return name, lay
    if init is not None:
        chunk.line(f"{ctype(v.type)} {name} = {em.scalar(init)};")
    else:
        chunk.line(f"{ctype(v.type)} {name};")
    return name, None


def _one_tensor(v) -> bool:
    """Whether pointer block ``v`` is one scalar pointer plus offsets (``p + offs``, through views): its
    elements are then within one tensor, and their differences fit the 32-bit offsets of ``declare_var``."""
    for _ in range(64):
        o = v.owner
        nm = getattr(o, "name", None)
        if nm == "splat":
            return True
        if nm in ("addptr", "broadcast", "expand_dims", "reshape", "permute", "hint"):
            v = o.operands[0]
            continue
        return False
    return False


def _offset_vars(em) -> dict:
    d = getattr(em, "_offset_vars", None)
    if d is None:
        d = em._offset_vars = {}
    return d


def bind_var(em, v, name, lay, chunk):
    if lay is None:
        em.scalars[v] = name
    else:
        ct = _offset_vars(em).get(name)
        if ct is not None:  # base + offsets: the pointers re-formed where the region uses them
            p = em.tmp(name + "_p")
            chunk.line(f"{ct} {p}[{lay.nregs}];")
            em.for_regs(lay.nregs, f"{p}[i] = {name}_b + {name}_o[i];", chunk)
            name = p
        em.blocks[(v, lay)] = name
    # conversions of ``v`` to other layouts go where it is bound (a loop-carried block: at the top of each
    # iteration, before the body's uses), not at the end of ``chunk``: a body's uses are emitted into ``chunk``'s
    # later sub-chunks, and a conversion appended after them was read before it was written (issue 22, item 13)
    em.def_chunk[v] = chunk.sub(0)


def assign(em, targets, values, chunk):
    """targets[k] = values[k] for all k, safely when values refer to targets."""
    temps = []
    for (_name, lay, ty), v in zip(targets, values):
        if lay is None:
            t = em.tmp("y")
            ct = ctype(ty)
            chunk.line(f"{ct + ' const' if ct.endswith('*') else 'const ' + ct} {t} = {em.scalar(v)};")
            temps.append(t)
        else:
            temps.append(em.get(v, lay))
    offs = _offset_vars(em)
    for (name, lay, _ty), t in zip(targets, temps):
        if lay is None:
            chunk.line(f"{name} = {t};")
        elif name in offs:
            chunk.line(f"{name}_b = {t}[0];")
            em.for_regs(lay.nregs, f"{name}_o[i] = (int)({t}[i] - {name}_b);", chunk)
        elif t != name:
            em.for_regs(lay.nregs, f"{name}[i] = {t}[i];", chunk)


def loop_header(em, op, offsets=False):
    """Declare the loop-carried variables of an scf.for; returns (targets, iv type, cond, step expr)."""
    body = op.regions[0]
    lb, ub, step = op.operands[:3]
    init = op.operands[3:]
    targets = []
    for a, v in zip(body.args[1:], init):
        name, lay = declare_var(em, a, em.cur, init=v, offsets=offsets)
        targets.append((name, lay, a.type))
    return targets


def loop_condition(em, op, iv: str, ub_expr: str | None = None) -> str:
    """The C condition of an scf.for over ``iv`` (``ub_expr``: the upper bound as already declared)."""
    ub, step = op.operands[1], op.operands[2]
    s_op = step.owner
    ubs, ss = ub_expr or em.scalar(ub), em.scalar(step)
    if getattr(s_op, "name", None) == "constant":
        sv = s_op.attrs["value"]
        return f"{iv} < {ubs}" if sv > 0 else f"{iv} > {ubs}"
    return f"({ss} > 0 ? {iv} < {ubs} : {iv} > {ubs})"
