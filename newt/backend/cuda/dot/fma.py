"""``dot`` by fused multiply-adds: fp32 with ``input_precision="ieee"``, fp64, fp8, batched dots, and shapes
below the tensor-core tiles (M, N or K under 16; fp32 "tf32" inputs are then rounded to tf32 as the MMA would).

Both operands are staged k-major in shared memory (``A[b][k][m]``, ``B[b][k][n]``)
and every thread accumulates its elements of the result in a blocked layout.
"""

from __future__ import annotations

from newt.ir.types import scalar_of, shape_of

from ..ctypes import ctype, from_compute, is_lowp_float, to_compute
from ..layout import blocked, log2
from .base import DotLowering


class FmaLowering(DotLowering):
    name = "fma"

    def supports(self, op, target) -> bool:
        return True

    def acc_layout(self, op, num_warps, chained=False):
        shape = shape_of(op.result.type)
        M, N = shape[-2], shape[-1]
        sm, sn = min(4, M), min(4, N)
        tn = min(32, max(1, N // sn))
        tm = 32 // tn
        rank = len(shape)
        spt = [1] * (rank - 2) + [sm, sn]
        tpw = [1] * (rank - 2) + [tm, tn]
        wpc = [1] * (rank - 2) + [num_warps, 1]
        return blocked(shape, spt, tpw, wpc, list(range(rank - 1, -1, -1)), kind="fma")

    def emit(self, em, op, tiles):
        a, b, accv = op.operands
        res = op.result
        shape = shape_of(res.type)
        rank = len(shape)
        B = shape[0] if rank == 3 else 1
        M, N = shape[-2], shape[-1]
        K = shape_of(a.type)[-1]
        ta = scalar_of(a.type)
        rt = scalar_of(res.type)
        work = "double" if rt.name == "fp64" or ta.name == "fp64" else ("int" if rt.is_int() else "float")
        from ..plan import compact, default_layout
        lay = compact(em.layout_of(res))
        c = em.cur
        c.line(f"// dot {'x'.join(map(str, shape))}x{K} by FMA ({ta} inputs, {work} accumulate)")
        wb = 8 if work == "double" else 4
        off = em.smem_scratch(B * K * (M + N) * wb, c)
        sa, sb = em.tmp("sa"), em.tmp("sb")
        c.line(f"{work}* {sa} = reinterpret_cast<{work}*>(smem + {off});")
        c.line(f"{work}* {sb} = {sa} + {B * K * M};")
        c.line("__syncthreads();")
        for v, s, rows, cols, kdim in ((a, sa, M, K, 1), (b, sb, K, N, 0)):
            vl = compact(em.layout_of(v) or default_layout(shape_of(v.type), em.nw))
            src = em.get(v, vl)
            fe = em.flat_expr(vl)
            lc, lr = log2(cols), log2(rows)
            conv = to_compute(f"{src}[i]", v.type) if is_lowp_float(v.type) else f"({work})({src}[i])"
            if ta.name == "fp32" and op.attrs.get("input_precision", "") == "tf32":
                conv = f"__uint_as_float(f32_to_tf32({src}[i]))"  # what a tf32 tensor core would read
            if kdim == 1:  # A (m, k) -> [b][k][m]
                idx = f"((f >> {lr + lc}) * {K * M} + (f & {cols - 1}) * {M} + ((f >> {lc}) & {rows - 1}))"
            else:  # B (k, n) -> [b][k][n]: same order
                idx = "f"
            em.for_regs(vl.nregs, f"{{ const int f = {fe}; {s}[{idx}] = {conv}; }}", c)
        c.line("__syncthreads();")
        acc = em.get(accv, lay)
        name = em.declare_block(res, lay)
        w = em.tmp("acc")
        c.line(f"{work} {w}[{lay.nregs}];")
        em.for_regs(lay.nregs, f"{w}[i] = ({work})({to_compute(f'{acc}[i]', accv.type)});", c)
        fe = em.flat_expr(lay)
        lm, ln = log2(M), log2(N)
        c.line(f"for (int k = 0; k < {K}; ++k) {{")
        k = c.sub(1)
        fma = "fma" if work == "double" else ("" if work == "int" else "fmaf")
        body = (f"{{ const int f = {fe}; const int bb = f >> {lm + ln}, m = (f >> {ln}) & {M - 1}, n = f & {N - 1}; "
                + (f"{w}[i] = {fma}({sa}[bb * {K * M} + k * {M} + m], {sb}[bb * {K * N} + k * {N} + n], {w}[i]); }}"
                   if fma else
                   f"{w}[i] += {sa}[bb * {K * M} + k * {M} + m] * {sb}[bb * {K * N} + k * {N} + n]; }}"))
        em.for_regs(lay.nregs, body, k)
        c.line("}")
        out = (lambda e: from_compute(f"(float)({e})", rt)) if is_lowp_float(rt) else (lambda e: f"({ctype(rt)})({e})")
        em.for_regs(lay.nregs, f"{name}[i] = {out(f'{w}[i]')};", c)
        del B
