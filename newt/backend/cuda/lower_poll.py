"""``atomic_poll``: each thread spins on its elements with relaxed loads of the given scope, then (for
``sem="acquire"``) a fence; the whole program waits for all polls (a barrier).  With a timeout the
budget is shared: the global timer is read once before the polls."""

from __future__ import annotations

from newt.ir.types import is_block, scalar_of

from .emitter import lowers

_CONSTRAINT = {16: ("h", "unsigned short"), 32: ("r", "unsigned int"), 64: ("l", "unsigned long long")}


@lowers("atomic_poll")
def _atomic_poll(em, op):
    ptr, expected = op.operands[:2]
    timeout = op.operand("timeout")
    res = op.result
    t = scalar_of(ptr.type).element_ty
    bits = t.primitive_bitwidth
    c, ut = _CONSTRAINT[bits]
    scope = op.attr("scope")
    sem = op.attr("sem")
    c0 = em.cur
    if is_block(res.type):
        name, lay = em.result_block(res)
        n = lay.nregs
        p = em.get(ptr, lay) + "[i]"
        e = em.get(expected, lay) + "[i]" if is_block(expected.type) else em.scalar(expected)
    else:
        name = em.vname(res)
        c0.line(f"bool {name}[1];")
        n = 1
        p = em.scalar(ptr)
        e = em.scalar(expected)
    c0.line("{  // atomic_poll")
    b = c0.sub(1)
    if timeout is not None:
        b.line('unsigned long long poll_t0; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(poll_t0));')
        b.line(f"const unsigned long long poll_budget = (unsigned long long)({em.scalar(timeout)});")
        give_up = ('unsigned long long now; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); '
                   'if (now - poll_t0 >= poll_budget) break;')
    else:
        give_up = ""
    body = (f"{{ bool ok; while (true) {{ {ut} v; asm volatile(\"ld.relaxed.{scope}.global.b{bits} %0, [%1];\" : "
            f"\"={c}\"(v) : \"l\"({p}) : \"memory\"); ok = v == ({ut})({e}); if (ok) break; {give_up} }} "
            f"{name}[i] = ok; }}")
    em.for_regs(n, body, chunk=b)
    if sem == "acquire":
        b.line(f'asm volatile("fence.acq_rel.{scope};" ::: "memory");')
    b.line("__syncthreads();")
    c0.line("}")
    if not is_block(res.type):
        em.scalars[res] = f"{name}[0]"
