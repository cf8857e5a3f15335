"""``gather``: the source block goes to shared memory at its row-major index; each thread reads the
elements its part of the index block names."""

from __future__ import annotations

from newt.ir.types import scalar_of, shape_of

from .ctypes import ctype
from .emitter import lowers
from .plan import compact


def _input_layout(em, v):
    lay = em.layout_of(v)
    if lay is None:
        lay = em.plan.access.get(("input", v))
    return compact(lay)


@lowers("gather")
def _gather(em, op):
    src, index = op.operands
    axis = op.attr("axis")
    sshape = tuple(shape_of(src.type))
    ishape = tuple(shape_of(index.type))
    slay = _input_layout(em, src)
    ss = em.get(src, slay)
    name, out = em.result_block(op.result)
    xs = em.get(index, out)  # each thread reads the elements of its part of the result
    ct = ctype(src.type)
    n = 1
    for d in sshape:
        n *= d
    c = em.cur
    off = em.smem_scratch(n * max(1, _bytes(src.type)), c)
    ish, ssh = _shifts(ishape), _shifts(sshape)
    terms = []
    for d in range(len(ishape)):
        if d == axis:
            continue
        coord = f"((f >> {ish[d]}) & {ishape[d] - 1})"
        terms.append(f"({coord} << {ssh[d]})")
    terms.append(f"((int)({xs}[i]) << {ssh[axis]})")
    c.line(f"{{  // gather along axis {axis}")
    b = c.sub(1)
    b.line(f"{ct}* gsrc = reinterpret_cast<{ct}*>(smem + {off});")
    b.line("__syncthreads();")
    em.for_regs(slay.nregs, f"gsrc[{em.flat_expr(slay)}] = {ss}[i];", chunk=b)
    b.line("__syncthreads();")
    em.for_regs(out.nregs, f"{{ const int f = {em.flat_expr(out)}; {name}[i] = gsrc[{' | '.join(terms)}]; }}",
                chunk=b)
    c.line("}")


def _shifts(shape) -> list[int]:
    """Row-major strides of a shape of powers of two, as shifts."""
    out, acc = [], 0
    for d in reversed(shape):
        out.append(acc)
        acc += d.bit_length() - 1
    return list(reversed(out))


def _bytes(ty) -> int:
    t = scalar_of(ty)
    return max(1, t.primitive_bitwidth // 8)
