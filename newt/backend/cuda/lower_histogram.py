"""``histogram``: counts in shared memory.

The bins are zeroed in shared memory, each element is counted once (by the one thread, and the one
register, that owns it in the input's layout) with a shared-memory ``atomicAdd``, and every thread
reads its part of the result back in the result's layout.
"""

from __future__ import annotations

from newt.ir.types import scalar_of

from .emitter import lowers
from .plan import compact


@lowers("histogram")
def _histogram(em, op):
    x = op.operands[0]
    mask = op.operand("mask")
    nb = op.attr("num_bins")
    lay = em.layout_of(x)
    if lay is None:
        lay = em.plan.access.get(("input", x))
    lay = compact(lay)
    xs = em.get(x, lay)
    ms = em.get(mask, lay) if mask is not None else None
    name, out = em.result_block(op.result)
    c = em.cur
    off = em.smem_scratch(nb * 4, c)
    unsigned = scalar_of(x.type).is_int_unsigned()
    conds = []
    own = em.owner_pred(lay)
    if own:
        conds.append(own)
    dup = lay.dup_reg_mask()
    if dup:
        conds.append(f"(i & {dup}) == 0")
    if ms is not None:
        conds.append(f"{ms}[i]")
    guard = " && ".join(conds) if conds else "true"
    v = "(unsigned long long)" if unsigned else "(long long)"
    c.line(f"{{  // histogram of {nb} bins")
    b = c.sub(1)
    b.line(f"int* hist = reinterpret_cast<int*>(smem + {off});")
    b.line("__syncthreads();")
    b.line(f"for (int k = threadIdx.x; k < {nb}; k += blockDim.x) hist[k] = 0;")
    b.line("__syncthreads();")
    lo = "" if unsigned else "v >= 0 && "
    em.for_regs(lay.nregs, f"{{ if ({guard}) {{ const auto v = {v}({xs}[i]); if ({lo}v < {nb}) "
                           f"atomicAdd(&hist[v], 1); }} }}", chunk=b)
    b.line("__syncthreads();")
    em.for_regs(out.nregs, f"{name}[i] = hist[{em.flat_expr(out)}];", chunk=b)
    c.line("}")
