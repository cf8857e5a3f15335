"""Transposing an 8-bit operand tile in shared memory, for wgmma operands that must be K-major.

``wgmma`` reads fp8 (and tf32/int8) operands from shared memory only K-major (the transpose bits of
the instruction exist for 16-bit types alone).  The ordinary matmul's B (K, N) is N-contiguous in
memory, so the cp.async pipeline lands it N-major; before the dot the CTA rewrites that tile into a
K-major ``GmmaShared`` tile.

Each thread moves 4 x 4-byte blocks: it reads four 32-bit words (four source rows, four bytes along the
inner dim each), transposes them in registers with eight ``prmt`` (``__byte_perm``), and writes four
words (four destination rows).  The 32 lanes of a warp take 8 blocks along the source's rows and 4
along its inner dim; each lane reads its four rows and writes its four columns in an order rotated by
two of its lane bits (``rot_r``, ``rot_w``, chosen per tile pair by ``plan_transpose`` so that every
shared access of the warp hits 32 different banks: the swizzle of both tiles XORs the row into the
16-byte chunk, and without the rotation all lanes of one instruction would share the row's low bits).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

from ..layout import log2

__all__ = ["TransposePlan", "plan_transpose", "emit_transpose", "bank_wavefronts"]

#: lane bit k -> (which block coordinate, which bit): 3 bits along the source's rows, 2 along its inner dim
LANE_BITS = ((0, 0), (0, 1), (0, 2), (1, 0), (1, 1))


@dataclass(frozen=True)
class TransposePlan:
    rot_r: tuple  # two lane-bit indices (or None): bit q of the read rotation is lane bit rot_r[q]
    rot_w: tuple


def _coords(lane: int) -> tuple[int, int]:
    r4 = c4 = 0
    for k, (d, b) in enumerate(LANE_BITS):
        if lane >> k & 1:
            if d == 0:
                r4 |= 1 << b
            else:
                c4 |= 1 << b
    return r4, c4


def _rot(lane: int, rot) -> int:
    return sum(1 << q for q, lb in enumerate(rot) if lb is not None and lane >> lb & 1)


def bank_wavefronts(src, dst, plan: TransposePlan, r4_hi: int = 0, c4_hi: int = 0) -> tuple[int, int]:
    """Shared-memory wavefronts of one warp's four reads and four writes (8 and 8 when conflict-free):
    for each instruction, the most distinct 4-byte words any one bank is asked for."""
    reads = writes = 0
    for i in range(4):
        br: dict = {}
        bw: dict = {}
        for lane in range(32):
            r4, c4 = _coords(lane)
            r4 += r4_hi
            c4 += c4_hi
            a = src.offset(4 * r4 + (i ^ _rot(lane, plan.rot_r)), 4 * c4)
            br.setdefault(a // 4 % 32, set()).add(a // 4)
            a = dst.offset(4 * c4 + (i ^ _rot(lane, plan.rot_w)), 4 * r4)
            bw.setdefault(a // 4 % 32, set()).add(a // 4)
        reads += max(len(v) for v in br.values())
        writes += max(len(v) for v in bw.values())
    return reads, writes


@cache
def _plan(src, dst) -> TransposePlan:
    opts = [None] + list(range(len(LANE_BITS)))
    best_r = min(itertools.product(opts, opts),
                 key=lambda rr: bank_wavefronts(src, dst, TransposePlan(rr, (None, None)))[0])
    best_w = min(itertools.product(opts, opts),
                 key=lambda rw: bank_wavefronts(src, dst, TransposePlan((None, None), rw))[1])
    return TransposePlan(best_r, best_w)


def plan_transpose(src, dst) -> TransposePlan:
    """The rotations for moving ``src`` (rows x inner, 1-byte elements) into ``dst`` (inner x rows)."""
    if src.elem_bytes != 1 or dst.elem_bytes != 1 or src.rows != dst.inner or src.inner != dst.rows:
        raise ValueError(f"transpose needs 1-byte tiles of transposed shapes, got {src} -> {dst}")
    if src.rows < 32 or src.inner < 16:
        raise ValueError(f"transpose needs at least 32 x 16 bytes, got {src.rows} x {src.inner}")
    return _plan(src, dst)


def can_transpose(src_rows: int, src_inner: int, elem_bytes: int) -> bool:
    return elem_bytes == 1 and src_rows >= 32 and src_inner >= 16


def _rot_expr(rot) -> str:
    parts = [f"(((lane_id >> {lb}) & 1) << {q})" for q, lb in enumerate(rot) if lb is not None]
    return " | ".join(parts) if parts else "0"


def emit_transpose(em, c, src, src_base: str, dst, dst_base: str):
    """Code moving the tile at ``src_base`` (layout ``src``) into ``dst_base`` (layout ``dst``), every
    thread of the CTA taking part; the caller fences and syncs around it."""
    plan = plan_transpose(src, dst)
    nw = em.nw
    rh = src.rows // 32            # 8-block groups along the source's rows
    groups = src.rows * src.inner // 512
    iters = -(-groups // nw)
    c.line(f"// transpose the {src.rows}x{src.inner} byte tile into a {dst.rows}x{dst.inner} one (4x4-byte "
           f"blocks through prmt; lane-rotated rows: no bank conflicts)")
    c.line("{")
    b = c.sub(1)
    b.line("const int tr_r = lane_id & 7, tr_c = lane_id >> 3;")
    b.line(f"const int rot_r = {_rot_expr(plan.rot_r)}, rot_w = {_rot_expr(plan.rot_w)};")
    b.line("#pragma unroll")
    b.line(f"for (int it = 0; it < {iters}; ++it) {{")
    lp = b.sub(1)
    lp.line(f"const int grp = warp_id + {nw} * it;")
    body = lp
    if groups % nw:
        lp.line(f"if (grp < {groups}) {{")
        body = lp.sub(1)
    sh = log2(rh)
    r4 = f"((grp & {rh - 1}) << 3 | tr_r)" if rh > 1 else "tr_r"
    c4 = f"((grp >> {sh}) << 2 | tr_c)" if sh else "(grp << 2 | tr_c)"
    body.line(f"const int r4 = {r4}, c4 = {c4};")
    for i in range(4):
        off = src.offset_expr(f"(4 * r4 + ({i} ^ rot_r))", "(4 * c4)")
        body.line(f"unsigned q{i} = *reinterpret_cast<const unsigned*>({src_base} + {off});")
    # q_i holds source row i ^ rot_r: undo the rotation, transpose, rotate for the writes
    body.line("if (rot_r & 1) { unsigned t = q0; q0 = q1; q1 = t; t = q2; q2 = q3; q3 = t; }")
    body.line("if (rot_r & 2) { unsigned t = q0; q0 = q2; q2 = t; t = q1; q1 = q3; q3 = t; }")
    body.line("const unsigned t0 = __byte_perm(q0, q1, 0x5140), t1 = __byte_perm(q0, q1, 0x7362);")
    body.line("const unsigned t2 = __byte_perm(q2, q3, 0x5140), t3 = __byte_perm(q2, q3, 0x7362);")
    body.line("unsigned o0 = __byte_perm(t0, t2, 0x5410), o1 = __byte_perm(t0, t2, 0x7632);")
    body.line("unsigned o2 = __byte_perm(t1, t3, 0x5410), o3 = __byte_perm(t1, t3, 0x7632);")
    body.line("if (rot_w & 1) { unsigned t = o0; o0 = o1; o1 = t; t = o2; o2 = o3; o3 = t; }")
    body.line("if (rot_w & 2) { unsigned t = o0; o0 = o2; o2 = t; t = o1; o1 = o3; o3 = t; }")
    for j in range(4):
        off = dst.offset_expr(f"(4 * c4 + ({j} ^ rot_w))", "(4 * r4)")
        body.line(f"*reinterpret_cast<unsigned*>({dst_base} + {off}) = o{j};")
    if groups % nw:
        lp.line("}")
    b.line("}")
    c.line("}")
