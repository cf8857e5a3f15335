"""Transposing an operand tile in shared memory, for wgmma operands that must be K-major.

``wgmma`` reads fp8, int8 and tf32 operands from shared memory only K-major (the transpose bits of
the instruction exist for 16-bit types alone).  The ordinary matmul's B (K, N) is N-contiguous in
memory, so the cp.async pipeline lands it N-major; before the dot the CTA rewrites that tile into a
K-major ``GmmaShared`` tile.

Each thread moves 4 x 4-element blocks: it reads four words of four elements (four source rows, four
elements along the inner dim each: 32 bits for 1-byte elements, 128 bits for 4-byte ones), transposes
them in registers (eight ``prmt`` / ``__byte_perm`` for bytes, a renaming of the 32-bit parts for
4-byte elements), and writes four words (four destination rows).  The 32 lanes of a warp take
``2**rb`` blocks along the source's rows and ``2**(5 - rb)`` along its inner dim; each lane reads its
four rows and writes its four columns in an order rotated by two of its lane bits (``rot_r``,
``rot_w``).  ``plan_transpose`` chooses ``rb`` and the rotations per tile pair so that every shared
access of the warp is conflict-free (the swizzle of both tiles XORs the row into the 16-byte chunk,
and without the rotation the lanes of one instruction would share the row's low bits): 32 different
banks for the 32-bit accesses, 8 different 16-byte chunks of a 128-byte line in each quarter-warp for
the 128-bit ones.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

from ..layout import log2

__all__ = ["TransposePlan", "plan_transpose", "emit_transpose", "bank_wavefronts", "min_wavefronts",
           "can_transpose"]

#: element sizes the transposition handles (bytes)
ELEM_BYTES = (1, 4)


@dataclass(frozen=True)
class TransposePlan:
    rot_r: tuple  # two lane-bit indices (or None): bit q of the read rotation is lane bit rot_r[q]
    rot_w: tuple
    rb: int = 3   # lane bits 0..rb-1 pick the block along the source's rows, the others along its inner dim


def _coords(lane: int, rb: int = 3) -> tuple[int, int]:
    return lane & ((1 << rb) - 1), lane >> rb


def _rot(lane: int, rot) -> int:
    return sum(1 << q for q, lb in enumerate(rot) if lb is not None and lane >> lb & 1)


def _wavefronts(addrs, eb: int) -> int:
    """Shared-memory wavefronts of one warp instruction given each lane's byte address: 32-bit
    accesses, the most distinct words one bank is asked for; 128-bit accesses, per quarter-warp the
    most distinct 16-byte chunks that fall in one of the line's eight chunk positions."""
    if eb == 1:
        banks: dict = {}
        for a in addrs:
            banks.setdefault(a // 4 % 32, set()).add(a // 4)
        return max(len(v) for v in banks.values())
    total = 0
    for q in range(4):
        pos: dict = {}
        for a in addrs[8 * q:8 * q + 8]:
            pos.setdefault(a // 16 % 8, set()).add(a // 16)
        total += max(len(v) for v in pos.values())
    return total


def min_wavefronts(eb: int) -> int:
    """Wavefronts of a warp's four conflict-free reads (or writes) of ``eb``-byte elements."""
    return 4 if eb == 1 else 16


def bank_wavefronts(src, dst, plan: TransposePlan, r4_hi: int = 0, c4_hi: int = 0) -> tuple[int, int]:
    """Shared-memory wavefronts of one warp's four reads and four writes (``min_wavefronts`` each when
    conflict-free) for the block group whose first blocks are ``r4_hi`` (rows) and ``c4_hi`` (inner)."""
    eb = src.elem_bytes
    reads = writes = 0
    for i in range(4):
        ra, wa = [], []
        for lane in range(32):
            r4, c4 = _coords(lane, plan.rb)
            r4 += r4_hi
            c4 += c4_hi
            ra.append(src.offset(4 * r4 + (i ^ _rot(lane, plan.rot_r)), 4 * c4))
            wa.append(dst.offset(4 * c4 + (i ^ _rot(lane, plan.rot_w)), 4 * r4))
        reads += _wavefronts(ra, eb)
        writes += _wavefronts(wa, eb)
    return reads, writes


def _fits(src, rb: int) -> bool:
    return src.rows % (4 << rb) == 0 and src.inner % (4 << (5 - rb)) == 0


def _groups(src, rb: int):
    """(r4_hi, c4_hi) of every block group of the tile."""
    return itertools.product(range(0, src.rows // 4, 1 << rb), range(0, src.inner // 4, 1 << (5 - rb)))


@cache
def _plan(src, dst) -> TransposePlan:
    opts = [None] + list(range(5))
    best = None
    for rb in (3, 2, 4, 1, 5, 0):  # the first of equally good splits: 8 x 4 blocks where it fits
        if not _fits(src, rb):
            continue
        groups = list(_groups(src, rb))
        rots = list(itertools.product(opts, opts))

        def cost(side, rot, groups=groups, rb=rb):
            p = TransposePlan(rot, (None, None), rb) if side == 0 else TransposePlan((None, None), rot, rb)
            return max(bank_wavefronts(src, dst, p, *g)[side] for g in groups[:1])

        # the best rotations on the first group, then checked over every group
        rr = min(rots, key=lambda r: cost(0, r))
        rw = min(rots, key=lambda r: cost(1, r))
        p = TransposePlan(rr, rw, rb)
        score = tuple(max(bank_wavefronts(src, dst, p, *g)[s] for g in groups) for s in (0, 1))
        if best is None or sum(score) < sum(best[0]):
            best = (score, p)
        if sum(score) == 2 * min_wavefronts(src.elem_bytes):
            break
    assert best is not None
    return best[1]


def plan_transpose(src, dst) -> TransposePlan:
    """The lane split and rotations for moving ``src`` (rows x inner) into ``dst`` (inner x rows)."""
    if src.elem_bytes != dst.elem_bytes or src.rows != dst.inner or src.inner != dst.rows:
        raise ValueError(f"transpose needs tiles of transposed shapes, got {src} -> {dst}")
    if not can_transpose(src.rows, src.inner, src.elem_bytes):
        raise ValueError(f"cannot transpose a {src.rows} x {src.inner} tile of {src.elem_bytes}-byte elements "
                         f"(1- or 4-byte elements, power-of-two extents, at least 512 elements)")
    return _plan(src, dst)


def can_transpose(src_rows: int, src_inner: int, elem_bytes: int) -> bool:
    """Whether a ``src_rows`` x ``src_inner`` tile can be transposed: one block group of 32 4x4 blocks
    fits (some lane split whose group divides the tile)."""
    if elem_bytes not in ELEM_BYTES or src_rows & (src_rows - 1) or src_inner & (src_inner - 1):
        return False
    return any(src_rows % (4 << rb) == 0 and src_inner % (4 << (5 - rb)) == 0 for rb in range(6))


def _rot_expr(rot) -> str:
    parts = [f"(((lane_id >> {lb}) & 1) << {q})" for q, lb in enumerate(rot) if lb is not None]
    return " | ".join(parts) if parts else "0"


def emit_transpose(em, c, src, src_base: str, dst, dst_base: str):
    """Code moving the tile at ``src_base`` (layout ``src``) into ``dst_base`` (layout ``dst``), every
    thread of the CTA taking part; the caller fences and syncs around it."""
    plan = plan_transpose(src, dst)
    eb = src.elem_bytes
    nw = em.nw
    rb, cb = plan.rb, 5 - plan.rb
    rh = src.rows // (4 << rb)     # block groups along the source's rows
    groups = src.rows * src.inner // 512
    iters = -(-groups // nw)
    word = "unsigned" if eb == 1 else "uint4"
    c.line(f"// transpose the {src.rows}x{src.inner} tile of {eb}-byte elements into a {dst.rows}x{dst.inner} one "
           f"(4x4-element blocks{' through prmt' if eb == 1 else ''}; lane-rotated rows: no bank conflicts)")
    c.line("{")
    b = c.sub(1)
    b.line(f"const int tr_r = lane_id & {(1 << rb) - 1}, tr_c = lane_id >> {rb};")
    b.line(f"const int rot_r = {_rot_expr(plan.rot_r)}, rot_w = {_rot_expr(plan.rot_w)};")
    # two block groups at a time: all of them unrolled keeps 4 words a group live at once and, with the
    # accumulators of an in-flight wgmma, spilled (fp8 128x256x128 8 warps: 176 bytes; 128x128x128 at 4
    # warps: 208); two still overlap one group's loads with the other's writes
    b.line("#pragma unroll 2")
    b.line(f"for (int it = 0; it < {iters}; ++it) {{")
    lp = b.sub(1)
    lp.line(f"const int grp = warp_id + {nw} * it;")
    body = lp
    if groups % nw:
        lp.line(f"if (grp < {groups}) {{")
        body = lp.sub(1)
    sh = log2(rh)
    r4 = f"((grp & {rh - 1}) << {rb} | tr_r)" if rh > 1 else "tr_r"
    c4 = f"((grp >> {sh}) << {cb} | tr_c)" if sh else f"(grp << {cb} | tr_c)"
    body.line(f"const int r4 = {r4}, c4 = {c4};")
    for i in range(4):
        off = src.offset_expr(f"(4 * r4 + ({i} ^ rot_r))", "(4 * c4)")
        body.line(f"{word} q{i} = *reinterpret_cast<const {word}*>({src_base} + {off});")
    # q_i holds source row i ^ rot_r: undo the rotation, transpose, rotate for the writes
    body.line(f"if (rot_r & 1) {{ {word} t = q0; q0 = q1; q1 = t; t = q2; q2 = q3; q3 = t; }}")
    body.line(f"if (rot_r & 2) {{ {word} t = q0; q0 = q2; q2 = t; t = q1; q1 = q3; q3 = t; }}")
    if eb == 1:
        body.line("const unsigned t0 = __byte_perm(q0, q1, 0x5140), t1 = __byte_perm(q0, q1, 0x7362);")
        body.line("const unsigned t2 = __byte_perm(q2, q3, 0x5140), t3 = __byte_perm(q2, q3, 0x7362);")
        body.line("unsigned o0 = __byte_perm(t0, t2, 0x5410), o1 = __byte_perm(t0, t2, 0x7632);")
        body.line("unsigned o2 = __byte_perm(t1, t3, 0x5410), o3 = __byte_perm(t1, t3, 0x7632);")
    else:  # destination row j (source column j) is part j of each source word
        for j, f in enumerate("xyzw"):
            body.line(f"uint4 o{j} = make_uint4(q0.{f}, q1.{f}, q2.{f}, q3.{f});")
    body.line(f"if (rot_w & 1) {{ {word} t = o0; o0 = o1; o1 = t; t = o2; o2 = o3; o3 = t; }}")
    body.line(f"if (rot_w & 2) {{ {word} t = o0; o0 = o2; o2 = t; t = o1; o1 = o3; o3 = t; }}")
    for j in range(4):
        off = dst.offset_expr(f"(4 * c4 + ({j} ^ rot_w))", "(4 * r4)")
        body.line(f"*reinterpret_cast<{word}*>({dst_base} + {off}) = o{j};")
    if groups % nw:
        lp.line("}")
    b.line("}")
    c.line("}")
