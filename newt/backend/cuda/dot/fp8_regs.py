"""fp8 A operands of wgmma from registers (issue 28: tutorial 06's fp8 forward).

Attention's ``P·V`` in fp8 takes P (``p.to(fp8)``) in the layout of the QK accumulator.  wgmma's 8-bit A fragment
(m64nNk32, PTX ISA "Register fragment for matrix A") wants, in lane ``l`` of warp ``w`` (rows
``16 * (w % 4) + l / 4`` and ``+ 8``), the four consecutive columns ``4 * (l % 4) .. + 3`` and ``16 + 4 * (l % 4)
.. + 3`` of each 32-column K block, four to a 32-bit register; the accumulator layout gives that lane the column
pairs ``8 * j + 2 * (l % 4), + 1``.  The rows agree, the columns are spread over the four lanes of the row's quad.
So each lane packs its pairs of column groups (0, 2) and (1, 3) into two words and reads two words from its quad
(one ``shfl`` per fragment register: 4 per 64 rows and 32 columns, as many as Triton 3.9), then two ``prmt``
pick the halves: no shared memory, no barrier (before: P staged through shared memory, two ``__syncthreads``
and a proxy fence per iteration).

``fp8_a_fragments`` checks the value's layout against that map for every lane and warp and answers None
(the operand is staged in shared memory as before) where it does not hold.
"""

from __future__ import annotations

import os

from newt.ir.types import scalar_of, shape_of

__all__ = ["fp8_a_fragments", "fp8_regs_enabled", "fp8_regs_mode"]


def fp8_regs_mode() -> str:
    """``NEWT_FP8_A_REGS``: ``0`` stages fp8 A operands in shared memory (the default until the H100 run of
    2026-12-07, session 12: with the register path tutorial 06's fp8 forward went from 1.59x / 1.58x Triton's time
    to 0.80x / 0.98x at d=64 / 128, and the GPU suite passed, benchmarks/results_session12_2026-12-07.md);
    unset or ``1`` (``packed``) the register path below; ``bytes`` shuffles
    the cast's bytes and leaves the dot in flight as the pipeline planned; ``1`` (``packed``) converts
    the fp32 source four elements to a word (F2FP pairs) and waits for the dot at once: ptxas serialized every
    wgmma of tutorial 06's fp8 forward at d=64 when that dot stayed in flight with converted registers ("insufficient
    register resources"), and the byte path spends ~300 more instructions an iteration on the cast's NaN rule
    and byte packing (benchmarks/tut06_bwd_offline.md)."""
    v = os.environ.get("NEWT_FP8_A_REGS", "1")
    return {"0": "off", "bytes": "bytes"}.get(v, "packed")


def fp8_regs_enabled() -> bool:
    return fp8_regs_mode() != "off"


def _index(lay, M: int, K: int, wgm: int, nw: int) -> dict | None:
    """{(mi, kb, h, jj, e): register} where register r of every thread holds row ``mi * 64 * wgm + (its 64-row
    block) + 16 * (warp % 4) + 8 * h + lane / 4`` and column ``32 * kb + 8 * jj + 2 * (lane % 4) + e``; None
    when the layout does not hold the value so."""
    at: dict = {}
    for r in range(lay.nregs):
        at.setdefault(lay.coords(r, 0, 0), r)
    out = {}
    for mi in range(M // (64 * wgm)):
        for kb in range(K // 32):
            for h in (0, 1):
                for jj in range(4):
                    for e in (0, 1):
                        reg = at.get((mi * 64 * wgm + 8 * h, 32 * kb + 8 * jj + e))
                        if reg is None:
                            return None
                        out[(mi, kb, h, jj, e)] = reg
    for w in range(nw):
        row_w = 64 * ((w >> 2) % wgm) + 16 * (w & 3)
        for ln in range(32):
            for (mi, kb, h, jj, e), r in out.items():
                want = (mi * 64 * wgm + row_w + 8 * h + (ln >> 2), 32 * kb + 8 * jj + 2 * (ln & 3) + e)
                if lay.coords(r, ln, w) != want:
                    return None
    return out


def fp8_a_fragments(em, op, wgm: int, c) -> tuple[str, int] | None:
    """Emit into ``c`` (None: emit nothing, only answer) the wgmma A fragments of the dot's fp8 A operand from
    its registers: (the array name
    ``af[m_reps * K / 32][4]``, the number of fragments); None when A is not in a layout this applies to."""
    from ..plan import compact
    a = op.operands[0]
    t = scalar_of(a.type)
    if not t.is_fp8() or not fp8_regs_enabled() or a in em.plan.poly:
        return None
    have = em.layout_of(a)
    if have is None:
        return None
    have = compact(have)
    M, K = shape_of(a.type)
    if K % 32 or M % (64 * wgm) or em.nw % 4:
        return None
    idx = _index(have, M, K, wgm, em.nw)
    if idx is None:
        return None
    n = (M // (64 * wgm)) * (K // 32)
    if c is None:  # only asked whether it applies
        return "", n
    from ..vectors import pack_words
    x = _fp32_source(em, a, have) if fp8_regs_mode() == "packed" else None
    if x is not None:  # p.to(fp8) of an fp32 block in this layout: two elements per conversion
        cvt = _helper_cvt2(em, t)
    else:
        src = em.get(a, have)
    af = em.tmp("af8")
    c.line(f"unsigned {af}[{n}][4];  // fp8 A fragments from the accumulator layout: quad shuffles (dot/fp8_regs.py)")
    c.line("{")
    d = c.sub(1)
    # lane t (t = lane % 4 of its quad, G = t >> 1) needs the pairs of column group G (and G + 2) of the quad's
    # lanes 2 * (t & 1) and + 1.  Each lane packs X0 = groups (0, 2) and X1 = groups (1, 3); read in two rounds
    # from lanes a(t) = 2 * (t & 1) + G and a(t) ^ 1, every lane read in a round is read by one lane only, so it
    # sends the X its reader wants (X_{s & 1} in round A, the other in round B): one shfl a fragment register
    d.line("const int qa = (lane_id & ~3) | ((lane_id & 1) << 1) | ((lane_id >> 1) & 1);  // round A's lane")
    d.line("const bool odd = lane_id & 1;")
    d.line("const unsigned s_lo = (lane_id & 2) ? 0x1054u : 0x5410u, s_hi = (lane_id & 2) ? 0x3276u : 0x7632u;")
    for mi in range(M // (64 * wgm)):
        for kb in range(K // 32):
            f = mi * (K // 32) + kb
            for h in (0, 1):
                xs = []
                for gs in ((0, 2), (1, 3)):
                    if x is not None:
                        xs.append(f"{cvt}(" + ", ".join(f"{x}[{idx[(mi, kb, h, jj, e)]}]" for jj in gs for e in (0, 1))
                                  + ")")
                    else:
                        regs = [f"{src}[{idx[(mi, kb, h, jj, e)]}]" for jj in gs for e in (0, 1)]
                        xs.append(pack_words(regs, t, 4)[0])
                d.line(f"{{ const unsigned x0 = {xs[0]}, x1 = {xs[1]};")
                d.line("  const unsigned ya = __shfl_sync(0xffffffffu, odd ? x1 : x0, qa), "
                       "yb = __shfl_sync(0xffffffffu, odd ? x0 : x1, qa ^ 1);")
                d.line(f"  {af}[{f}][{h}] = __byte_perm(ya, yb, s_lo);")
                d.line(f"  {af}[{f}][{2 + h}] = __byte_perm(ya, yb, s_hi); }}")
    c.line("}")
    return af, n


def _fp32_source(em, a, have) -> str | None:
    """The fp32 array ``a`` is the round-to-nearest fp8 conversion of, when it is held in ``have`` too."""
    from newt.ir.core import Op

    from ..plan import compact
    op = a.owner
    if not isinstance(op, Op) or op.name != "cast" or op.attr("rounding") != "rtne":
        return None
    x = op.operands[0]
    if scalar_of(x.type).name != "fp32" or x in em.plan.poly:
        return None
    lay = em.layout_of(x)
    if lay is None or compact(lay) != have:
        return None
    return em.get(x, have)


def _helper_cvt2(em, t) -> str:
    """Four fp32 -> one 32-bit word of four fp8, lowest first (two ``cvt.rn.satfinite.{e4m3,e5m2}x2.f32``, SASS
    two F2FP and a PRMT): the dot's operand bits equal the cast's for every non-NaN element (a NaN stays a NaN,
    in the hardware's encoding)."""
    ty = "e5m2" if t.name == "fp8e5" else "e4m3"
    name = f"f32x4_to_{ty}x4"
    em.helper(name, (
        f"__device__ __forceinline__ unsigned {name}(float a, float b, float c, float d) {{\n"
        f"  unsigned r; asm volatile(\"{{\\n.reg .b16 l, h;\\ncvt.rn.satfinite.{ty}x2.f32 l, %2, %1;\\n"
        f"cvt.rn.satfinite.{ty}x2.f32 h, %4, %3;\\nmov.b32 %0, {{l, h}};\\n}}\" : \"=r\"(r) : "
        f"\"f\"(a), \"f\"(b), \"f\"(c), \"f\"(d));\n"
        f"  return r;\n}}\n"))
    return name
