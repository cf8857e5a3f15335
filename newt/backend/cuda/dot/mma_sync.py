"""Tensor cores through ``mma.sync`` (sm_80+): m16n8k16 fp16/bf16, m16n8k8 tf32, m16n8k32 int8.

Both operands are read from swizzled shared memory: by ``ldmatrix`` (``.trans``
for 16-bit operands stored the other way round), or by plain shared loads for
the 32/8-bit cases ldmatrix cannot transpose.  Operands that are not already in
shared memory (not fed by the cp.async pipeline) are staged there first.  One
m16 x k A fragment is 16 rows x 32 bytes for every dtype, so the addressing is
shared; the accumulator layout is ``layout.mma_accumulator``.
"""

from __future__ import annotations

from newt.ir.types import scalar_of, shape_of

from ..ctypes import from_compute, to_compute
from ..layout import SwizzledShared, in_thread_map, log2, mma_a_fragment, mma_accumulator
from .base import DotLowering, OperandTile, stage_to_smem, stage_where_loaded, staging_layout

#: most A-fragment elements per thread kept in registers for a loop-invariant A
_A_REGS_MAX = 32
_KSTEP = {"fp16": 16, "bf16": 16, "fp32": 8, "int8": 32}
_MMA_FN = {"fp16": "mma_f16_16816", "bf16": "mma_bf16_16816", "fp32": "mma_tf32_1688", "int8": "mma_s8_16832"}


def warps_per_tile(M: int, N: int, nw: int, chained: bool) -> tuple[int, int]:
    """Split num_warps over the (M, N) tile like Triton's mma v2 heuristic; chained dots
    (attention) keep every warp along M so row-wise softmax stays inside a warp."""
    if chained and M // 16 >= nw:
        return nw, 1
    wm, wn = 1, 1
    while wm * wn < nw:
        grow_m = wm < M // 16
        grow_n = wn < N // 8
        if grow_m and (M // (16 * wm) >= N // (16 * wn) or not grow_n):
            wm *= 2
        elif grow_n:
            wn *= 2
        else:
            break  # more warps than 16x8 tiles: the rest duplicate
    return wm, wn


class MmaSyncLowering(DotLowering):
    name = "mma.sync"

    def supports(self, op, target) -> bool:
        if not target.mma_sync:
            return False
        a, b, acc = op.operands
        if len(shape_of(a.type)) != 2:
            return False
        ta, tb = scalar_of(a.type), scalar_of(b.type)
        if ta != tb or ta.name not in _KSTEP:
            return False
        if ta.name == "fp32" and op.attrs.get("input_precision", "") in ("ieee",):
            return False
        M, K = shape_of(a.type)
        N = shape_of(b.type)[1]
        return M % 16 == 0 and N % 8 == 0 and K % _KSTEP[ta.name] == 0 and M >= 16 and N >= 16

    def acc_layout(self, op, num_warps, chained=False):
        M, N = shape_of(op.result.type)
        wm, wn = warps_per_tile(M, N, num_warps, chained)
        return mma_accumulator((M, N), wm, wn, num_warps=num_warps)

    def preferred_inner(self, op, index):
        t = scalar_of(op.operands[0].type)
        if index == 0:
            return 1  # A: K contiguous
        return 1 if t.primitive_bitwidth == 16 else 0  # B: N for 16-bit (ldmatrix.trans), else K

    def tile_for(self, op, index, inner) -> SwizzledShared:
        shape = shape_of(op.operands[index].type)
        t = scalar_of(op.operands[index].type)
        eb = max(1, t.primitive_bitwidth // 8)
        return SwizzledShared(shape[1 - inner], shape[inner], eb)

    def emit(self, em, op, tiles):
        a, b, accv = op.operands
        res = op.result
        t = scalar_of(a.type)
        tn = t.name
        M, K = shape_of(a.type)
        N = shape_of(b.type)[1]
        lay = em.layout_of(res)
        from ..plan import compact
        lay = compact(lay)
        wm, wn, wm_e, wn_e = _warps_of(lay)
        mrep = max(1, M // (16 * wm))
        nrep = max(1, N // (8 * wn))
        ks = _KSTEP[tn]
        eb = max(1, t.primitive_bitwidth // 8)
        a_regs = self._a_registers(em, op, tiles, lay, wm, wn)
        tiles = list(tiles)
        for i in (0, 1):  # loop-invariant operands: into shared memory once, where they are defined
            if i == 0 and a_regs:
                continue
            v = op.operands[i]
            if not isinstance(tiles[i], OperandTile) and v not in em.plan.poly and em.loop_invariant(v, op):
                tiles[i] = self._stage_once(em, op, i)
        ta, tb = self._tiles(em, op, tiles, skip={0} if a_regs else ())
        c = em.cur
        # accumulator
        acc_src = em.get(accv, lay)
        rt = scalar_of(res.type)
        work = "int" if tn == "int8" else "float"
        name = em.declare_block(res, lay)
        w = em.tmp("acc")
        c.line(f"// dot {M}x{N}x{K} {tn} on tensor cores: mma.sync, {wm}x{wn} warps, "
               f"{mrep}x{nrep} tiles of 16x8 per warp")
        c.line(f"{work} {w}[{lay.nregs}];")
        em.for_regs(lay.nregs, f"{w}[i] = {to_compute(f'{acc_src}[i]', accv.type)};", c)
        c.line("{")
        d = c.sub(1)
        d.line(f"const int wm = {wm_e}, wn = {wn_e};  // this warp's tile")
        d.line("#pragma unroll")
        d.line(f"for (int kk = 0; kk < {K}; kk += {ks}) {{")
        k = d.sub(1)
        # B fragments for every n tile of this warp
        x3 = tn == "fp32" and op.attrs.get("input_precision", "") == "tf32x3"
        if x3:  # 3xTF32: x = big + small, both tf32; a.b ~ big.small + small.big + big.big (fp32 accuracy)
            c.line("// tf32x3: each fp32 operand split into tf32 big + small parts, three mma per tile")
        # fp32 fragments are read rounded to tf32, or as fp32 bits that tf32x3 splits itself
        cvt = "__float_as_uint" if x3 else "f32_to_tf32"
        k.line(f"unsigned bf[{nrep}][2];")
        self._load_b(em, k, tb, tn, eb, nrep, wn, cvt)
        if x3:
            k.line(f"unsigned bs[{nrep}][2];")
            k.line("#pragma unroll")
            k.line(f"for (int ni = 0; ni < {nrep}; ++ni) {{")
            k.line("  #pragma unroll")
            k.line("  for (int q = 0; q < 2; ++q) { const float x = __uint_as_float(bf[ni][q]); "
                   "bf[ni][q] = f32_to_tf32(x) & 0xffffe000u; "
                   "bs[ni][q] = f32_to_tf32(x - __uint_as_float(bf[ni][q])); }")
            k.line("}")
        k.line("#pragma unroll")
        k.line(f"for (int mi = 0; mi < {mrep}; ++mi) {{")
        mm = k.sub(1)
        mm.line("unsigned af[4];")
        if a_regs:
            self._pack_a(mm, a_regs, t, K)
        else:
            self._load_a(em, mm, ta, tn, eb, wm, cvt)
        if x3:
            mm.line("unsigned asl[4];")
            mm.line("#pragma unroll")
            mm.line("for (int q = 0; q < 4; ++q) { const float x = __uint_as_float(af[q]); "
                    "af[q] = f32_to_tf32(x) & 0xffffe000u; asl[q] = f32_to_tf32(x - __uint_as_float(af[q])); }")
            mm.line("#pragma unroll")
            mm.line(f"for (int ni = 0; ni < {nrep}; ++ni) {{ float* d = &{w}[(mi * {nrep} + ni) * 4]; "
                    f"{_MMA_FN[tn]}(d, asl, bf[ni]); {_MMA_FN[tn]}(d, af, bs[ni]); {_MMA_FN[tn]}(d, af, bf[ni]); }}")
        else:
            mm.line("#pragma unroll")
            mm.line(f"for (int ni = 0; ni < {nrep}; ++ni) {_MMA_FN[tn]}(&{w}[(mi * {nrep} + ni) * 4], af, bf[ni]);")
        k.line("}")
        d.line("}")
        c.line("}")
        conv = (lambda e: from_compute(e, rt)) if work == "float" else (lambda e: e)
        em.for_regs(lay.nregs, f"{name}[i] = {conv(f'{w}[i]')};", c)

    # ------------------------------------------------------------------
    def _a_registers(self, em, op, given, acc_lay, wm, wn):
        """The array holding operand A in A-fragment order (``mma_a_fragment``), or None to read A from
        shared memory.  A 16-bit A comes from registers when it already sits in the fragment threads
        (a chained dot's P: a register permutation), when it is polymorphic (computed in place), or when
        it is loop-invariant around the dot (attention's Q: converted once, where it is defined, and
        kept in registers through the loop) instead of being staged in shared memory every iteration."""
        from ..plan import compact
        if isinstance(given[0], OperandTile):
            return None
        a = op.operands[0]
        t = scalar_of(a.type)
        if t.primitive_bitwidth != 16 or t.name not in ("fp16", "bf16"):
            return None
        M, K = shape_of(a.type)
        if M % 16 or K % 16:
            return None
        afl = mma_a_fragment((M, K), wm, wn, num_warps=em.nw)
        if a not in em.plan.poly:
            have = em.layout_of(a)
            if have is None:
                return None
            have = compact(have)
            free = in_thread_map(have, afl.reg, afl.lane, afl.warp) is not None
            if not free:
                # loop-invariant: worth registers when the fragments are few (16 per thread at most,
                # e.g. attention's 128x64 Q over 8 warps); bigger ones are staged once instead
                if not em.loop_invariant(a, op) or afl.nregs > _A_REGS_MAX:
                    return None
        return em.get(a, afl)


    @staticmethod
    def _pack_a(c, arr, t, K):
        """af[0..3] of step kk, repetition mi from the A-fragment registers."""
        from ..vectors import pack_words
        c.line(f"const int ab = ((kk) / 16) * 8 + mi * {8 * (K // 16)};")
        for q in range(4):
            w = pack_words([f"{arr}[ab + {2 * q}]", f"{arr}[ab + {2 * q + 1}]"], t, 4)[0]
            c.line(f"af[{q}] = {w};")

    def _tiles(self, em, op, given, skip=()):
        """Operand tiles: the pipeline's buffers, or both operands staged into one scratch area."""
        from ..plan import compact
        out = list(given)
        todo = [i for i in (0, 1) if not isinstance(given[i], OperandTile) and i not in skip]
        if not todo:
            return out
        sws = {i: self.tile_for(op, i, self.preferred_inner(op, i)) for i in todo}
        early = stage_where_loaded(em, op, todo)
        off = em.smem_scratch(sum(sw.size_bytes for sw in sws.values()), em.cur)
        if early:
            em.def_chunk[op.operands[early[0]]].items.insert(0, "__syncthreads();  // the previous iteration's "
                                                             "reads of the staging tiles are done")
        else:
            em.cur.line("__syncthreads();")
        base = 0
        for i in todo:
            v = op.operands[i]
            sw = sws[i]
            tile = OperandTile(f"(smem + {off} + {base})", sw, self.preferred_inner(op, i))
            base += sw.size_bytes
            lay = compact(em.layout_of(v) or staging_layout(em, v))
            c = em.def_chunk[v] if early else em.cur
            where = " where it is loaded" if early else ""
            c.line(f"// stage operand {'ab'[i]} ({em.vname(v)}) in shared memory{where}")
            stage_to_smem(em, v, lay, tile, chunk=c)
            out[i] = tile
        em.cur.line("__syncthreads();")
        return out

    def _load_a(self, em, c, tile: OperandTile, tn, eb, wm, cvt="f32_to_tf32"):
        row0 = f"((mi * {wm} + wm) * 16)"
        kb = "(kk)"  # first k of this step (elements)
        if tile.inner == 1:  # K contiguous: ldmatrix.x4, rows 0-15, two 16-byte column chunks
            kel = 16 // eb
            c.line(f"ldmatrix_x4(af, smem_u32({tile.base} + "
                   f"{tile.offset(f'{row0} + (lane_id & 15)', f'{kb} + (lane_id >> 4) * {kel}')}));")
            if tn == "fp32":
                c.line("#pragma unroll")
                c.line(f"for (int q = 0; q < 4; ++q) af[q] = {cvt}(__uint_as_float(af[q]));")
            return
        if eb == 2:  # M contiguous, 16-bit: ldmatrix.x4.trans
            c.line(f"ldmatrix_x4_trans(af, smem_u32({tile.base} + "
                   f"{tile.offset(f'{row0} + ((lane_id >> 3) & 1) * 8', f'{kb} + (lane_id & 7) + (lane_id >> 4) * 8')}"
                   f"));")
            return
        # M contiguous, 32/8-bit: element loads
        g, tq = "(lane_id >> 2)", "(lane_id & 3)"
        if tn == "fp32":
            for q, (dr, dk) in enumerate(((0, 0), (8, 0), (0, 4), (8, 4))):
                off = tile.offset(f"{row0} + {g} + {dr}", f"{kb} + {tq} + {dk}")
                c.line(f"af[{q}] = {cvt}(*reinterpret_cast<const float*>({tile.base} + {off}));")
            return
        for q, (dr, dk) in enumerate(((0, 0), (8, 0), (0, 16), (8, 16))):
            parts = []
            for j in range(4):
                off = tile.offset(f"{row0} + {g} + {dr}", f"{kb} + {tq} * 4 + {dk} + {j}")
                parts.append(f"((unsigned)*({tile.base} + {off}) << {8 * j})")
            c.line(f"af[{q}] = {' | '.join(parts)};")

    def _load_b(self, em, c, tile: OperandTile, tn, eb, nrep, wn, cvt="f32_to_tf32"):
        kb = "(kk)"

        def ncol(ni):
            return f"(({ni}) * {wn} + wn) * 8"
        if tile.inner == 0:  # K contiguous (rows are n): ldmatrix.x4 covers two n tiles
            kel = 16 // eb
            if nrep >= 2:
                c.line("#pragma unroll")
                c.line(f"for (int ni = 0; ni < {nrep}; ni += 2) {{")
                b = c.sub(1)
                b.line("unsigned r[4];")
                n_expr = f"{ncol('ni + ((lane_id >> 4) & 1)')} + (lane_id & 7)"
                b.line(f"ldmatrix_x4(r, smem_u32({tile.base} + "
                       f"{tile.offset(f'{kb} + ((lane_id >> 3) & 1) * {kel}', n_expr)}));")
                b.line("bf[ni][0] = r[0]; bf[ni][1] = r[1]; bf[ni + 1][0] = r[2]; bf[ni + 1][1] = r[3];")
                c.line("}")
            else:
                c.line("{ unsigned r[2];")
                n_expr = f"{ncol('0')} + (lane_id & 7)"
                c.line(f"  ldmatrix_x2(r, smem_u32({tile.base} + "
                       f"{tile.offset(f'{kb} + ((lane_id >> 3) & 1) * {kel}', n_expr)}));")
                c.line("  bf[0][0] = r[0]; bf[0][1] = r[1]; }")
            if tn == "fp32":
                c.line("#pragma unroll")
                c.line(f"for (int ni = 0; ni < {nrep}; ++ni) {{ bf[ni][0] = {cvt}(__uint_as_float(bf[ni][0])); "
                       f"bf[ni][1] = {cvt}(__uint_as_float(bf[ni][1])); }}")
            return
        if eb == 2:  # N contiguous, 16-bit: ldmatrix.x4.trans
            if nrep >= 2:
                c.line("#pragma unroll")
                c.line(f"for (int ni = 0; ni < {nrep}; ni += 2) {{")
                b = c.sub(1)
                b.line("unsigned r[4];")
                b.line(f"ldmatrix_x4_trans(r, smem_u32({tile.base} + "
                       f"{tile.offset(f'{kb} + ((lane_id >> 3) & 1) * 8 + (lane_id & 7)', ncol('ni + (lane_id >> 4)'))}"
                       f"));")
                b.line("bf[ni][0] = r[0]; bf[ni][1] = r[1]; bf[ni + 1][0] = r[2]; bf[ni + 1][1] = r[3];")
                c.line("}")
            else:
                c.line("{ unsigned r[2];")
                c.line(f"  ldmatrix_x2_trans(r, smem_u32({tile.base} + "
                       f"{tile.offset(f'{kb} + ((lane_id >> 3) & 1) * 8 + (lane_id & 7)', ncol('0'))}));")
                c.line("  bf[0][0] = r[0]; bf[0][1] = r[1]; }")
            return
        g, tq = "(lane_id >> 2)", "(lane_id & 3)"
        c.line("#pragma unroll")
        c.line(f"for (int ni = 0; ni < {nrep}; ++ni) {{")
        b = c.sub(1)
        n_expr = f"{ncol('ni')} + {g}"
        if tn == "fp32":
            for q, dk in enumerate((0, 4)):
                off = tile.offset(f"{kb} + {tq} + {dk}", n_expr)
                b.line(f"bf[ni][{q}] = {cvt}(*reinterpret_cast<const float*>({tile.base} + {off}));")
        else:
            for q, dk in enumerate((0, 16)):
                parts = []
                for j in range(4):
                    off = tile.offset(f"{kb} + {tq} * 4 + {dk} + {j}", n_expr)
                    parts.append(f"((unsigned)*({tile.base} + {off}) << {8 * j})")
                b.line(f"bf[ni][{q}] = {' | '.join(parts)};")
        c.line("}")


def _warps_of(lay):
    """Warps along M and N, and C++ for this warp's (m, n) tile index; duplicated warps
    (a tile smaller than the warps) recompute a tile."""
    from ..layout import bit_index_expr
    mb = [k for k, b in enumerate(lay.warp) if b and lay.dim_of_bit(b)[0] == 0]
    nb = [k for k, b in enumerate(lay.warp) if b and lay.dim_of_bit(b)[0] == 1]
    nwb = len(lay.warp)
    me = bit_index_expr("warp_id", [(1 << mb.index(k)) if k in mb else 0 for k in range(nwb)]) if mb else "0"
    ne = bit_index_expr("warp_id", [(1 << nb.index(k)) if k in nb else 0 for k in range(nwb)]) if nb else "0"
    return 1 << len(mb), 1 << len(nb), me, ne



del log2
