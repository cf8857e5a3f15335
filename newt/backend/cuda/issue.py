"""Issuing one lookahead iteration's copies of a software-pipelined loop (``pipeline.py``), shared with the
warp-specialized producer (``warpspec.py``): the load slice re-rendered for iteration ``it + S - 1``, its copies
(cp.async, or TMA on an mbarrier) into the stage's buffers, and the lookahead's carried values advanced."""

from __future__ import annotations

from newt.ir.ops import ELEMENTWISE, SOURCE, VIEW

from .layout import log2
from .loops import assign, bind_var, loop_condition
from .tma import bar_addr, issue_copies

#: ops the lookahead may re-render: free of effects and cheap to compute again
_PURE = ELEMENTWISE | VIEW | SOURCE


def _issue(em, op, pipe, chunk, stage, ahead_iv, ahead, yields, carried, b0=-1, bar=None, who="threadIdx.x == 0"):
    """Render the load slice for the lookahead iteration, issue its copies (cp.async; TMA by thread ``who``
    on the stage's mbarrier ``b0 + stage``, or ``bar``), advance."""
    body = op.regions[0]
    saved = (em.scalars, em.blocks, em.def_chunk, em.cur, em.last_line)
    em.scalars = dict(em.scalars)
    em.blocks = dict(em.blocks)
    em.def_chunk = dict(em.def_chunk)
    fresh = set()
    for o in pipe.slice_ops:
        fresh.update(o.results)
    for k in [k for k in em.blocks if k[0] in fresh]:
        del em.blocks[k]
    for v in fresh:
        em.scalars.pop(v, None)
    em.scalars[body.args[0]] = ahead_iv
    for a, (name, lay) in ahead.items():
        bind_var(em, a, name, lay, chunk)
    em.cur = chunk
    em.last_line = None
    try:
        for o in pipe.slice_ops:
            em.emit_op(o)
        cond = loop_condition(em, op, ahead_iv)
        chunk.line(f"const bool live = {cond};")
        tmas = [pl for pl in pipe.loads if pl.tma is not None]
        if tmas:
            nbytes = sum(pl.tile.size_bytes for pl in tmas)
            bar = bar or bar_addr(em, f"{b0} + {stage}")
            chunk.line(f"if (live && {who}) {{" if who else "if (live) {")
            t = chunk.sub(1)
            t.line(f"mbar_expect_tx({bar}, {nbytes});")
            for pl in tmas:
                issue_copies(em, t, pl.tma, pl.tplan,
                             f"smem_u32(smem + {pl.buf} + ({stage}) * {pl.tile.size_bytes})", bar)
            chunk.line("}")
        for pl in pipe.loads:
            if pl.tma is not None:
                continue
            lop = pl.op
            mask = lop.operand("mask")
            lay = pl.lay
            p = em.get(lop.operands[0], lay)
            m = em.get(mask, lay) if mask is not None else None
            eb = pl.tile.elem_bytes
            total = pl.vec * eb
            shape = lay.shape
            lc = log2(shape[1])
            fe = em.flat_expr(lay)
            r, cc = ("r", "cc") if pl.inner == 1 else ("cc", "r")
            del r, cc
            row, col = f"(f >> {lc})", f"(f & {shape[1] - 1})"
            off = pl.tile.offset_expr(row, col) if pl.inner == 1 else pl.tile.offset_expr(col, row)
            pred = "live" + (f" && {m}[i]" if m else "")
            chunk.line("#pragma unroll")
            chunk.line(f"for (int i = 0; i < {lay.nregs}; i += {pl.vec}) {{ const int f = {fe}; "
                       f"cp_async_{total}(smem_u32(smem + {pl.buf} + ({stage}) * {pl.tile.size_bytes} + {off}), "
                       f"{p}[i], {pred}); }}")
        for rw in getattr(pipe, "rows", ()):  # 1-D rings (pipeline.RingRow, NEWT_RING_1D=1)
            lop = rw.op
            mask = lop.operand("mask")
            p = em.get(lop.operand("ptr"), rw.lay)
            m = em.get(mask, rw.lay) if mask is not None else None
            fe = em.flat_expr(rw.lay)
            own = em.owner_pred(rw.lay)  # threads holding duplicates copy nothing (a zero-fill would race)
            pred = "live" + (f" && {m}[i]" if m else "")
            nb = rw.vec * rw.elem_bytes
            dst = f"smem_u32(smem + {rw.buf} + ({stage}) * {rw.slot} + ({fe}) * {rw.elem_bytes})"
            # the owner test predicates the instruction (a C branch in a wgmma loop made ptxas serialize them)
            copy = f"{_cp_async_own(em, nb)}({dst}, {p}[i], {pred}, {own});" if own else \
                f"cp_async_{nb}({dst}, {p}[i], {pred});"
            chunk.line("#pragma unroll")
            chunk.line(f"for (int i = 0; i < {rw.lay.nregs}; i += {rw.vec}) {{ {copy} }}")
        if len(tmas) < len(pipe.loads) or getattr(pipe, "rows", ()):
            chunk.line("cp_async_commit();")
        # advance the lookahead's loop-carried values and induction variable
        targets = [(ahead[carried[i]][0], ahead[carried[i]][1], carried[i].type) for i in pipe.carried]
        assign(em, targets, [yields[i] for i in pipe.carried], chunk)
        chunk.line(f"{ahead_iv} += {em.scalar(op.operands[2])};")
    finally:
        em.scalars, em.blocks, em.def_chunk, em.cur, em.last_line = saved


def _cp_async_own(em, nbytes: int) -> str:
    """``cp_async_N`` issued only where ``own`` holds (a predicated instruction, no branch)."""
    name = f"cp_async_{nbytes}_own"
    cache = ".cg" if nbytes == 16 else ".ca"
    return em.helper(name, (
        f"__device__ __forceinline__ void {name}(unsigned dst, const void* src, bool pred, bool own) {{\n"
        f'  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %3, 0;\\n'
        f' @p cp.async{cache}.shared.global [%0], [%1], {nbytes}, %2;\\n}}"\n'
        f'               :: "r"(dst), "l"(src), "r"(pred ? {nbytes} : 0), "r"((int)own) : "memory");\n}}\n'))
