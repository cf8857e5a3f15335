"""Hopper warpgroup MMA (sm_90a): ``wgmma.mma_async`` m64nNk16 for fp16/bf16, m64nNk32 for fp8
(e4m3/e5m2, mixed too), m64nNk8 for tf32 (fp32 operands, input_precision "tf32"; the tensor cores
read the top 19 bits), all with fp32 accumulators, and m64nNk32 for int8 (.s8) with s32 ones.

A warpgroup (4 consecutive warps, the first one's index divisible by 4) issues one
instruction for a 64 x N x 16 step; A and B are read straight from shared memory
through 64-bit *matrix descriptors* (start address, leading/stride byte offsets,
swizzle mode), so there are no ldmatrix fragments and no per-warp B copies.

Shared-memory tiles (``GmmaShared``) are the tensor cores' canonical swizzled
layouts: rows of ``W = min(128, inner bytes)`` bytes (W = 128/64/32: the 128/64/32-byte
swizzle modes), the 16-byte chunks of row ``r`` XOR-ed with ``(r / (128 / W)) % (W / 16)``
-- for an inner extent of at most 128 bytes that is exactly ``SwizzledShared``, so the
cp.async pipeline writes them as before -- and, for wider rows, *atoms* of W bytes along
the inner dim stored one after another (``[inner / (W/eb)][rows][W]``).  An operand is
K-major (K contiguous: ``tnsp`` 0) or M/N-major (``tnsp`` 1, 16-bit types only):

* K-major: rows are M (or N), stride-byte-offset = 8 rows = ``8 W`` (the 8-row core-matrix
  groups), leading-byte-offset unused (1); the k step ``kk`` starts ``kk * eb`` bytes into its
  atom (atoms along K are ``rows * W`` apart).
* M/N-major: rows are K; stride-byte-offset = ``8 W`` (the 8-k-row groups), leading-byte-offset
  = ``rows * W`` (the next atom along M/N); the k step starts ``kk * W`` bytes in.

Accumulators (``wgmma_accumulator``): per warp the m16n8 C fragment of mma.sync repeated
over the instruction's N (register ``4 j + c`` = columns ``8 j + 2 (lane % 4) + c % 2``, row
``16 warp + lane / 4 + 8 (c / 2)``), warpgroups split M (64 rows each) and then N.  It is an
ordinary linear layout, so reductions, broadcasts, chained dots and the epilogue (stores,
bias, activation, casts) work on it like on the mma.sync layout.

fp8 (and int8, tf32) operands have no transpose bit: both must be K-major.  A (M, K) normally is; the ordinary B
(K, N) lands N-major from the cp.async pipeline and is rewritten K-major in shared memory just before
the dot (``transpose.py``: conflict-free 4x4-byte blocks), into two alternating copies when the dot
stays in flight (the previous iteration's wgmma may still read the other); a B stored K-major in
memory is read where it landed.

Each dot: ``wgmma.fence``; for every k step and 64 x N_inst sub-tile one ``wgmma.mma_async``;
``wgmma.commit_group``; ``wgmma.wait_group 0``; then an empty ``asm`` on every accumulator
register so no use of it is scheduled before the wait.  In a software-pipelined loop the
cp.async copies of the next ``num_stages - 1`` tiles are already in flight while the tensor
cores run (the pipeline issues them before the dot); shared memory written by cp.async or
by plain stores is made visible to the tensor cores' (async) proxy with
``fence.proxy.async.shared::cta`` before the barrier that precedes the dot.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from newt.ir.types import scalar_of, shape_of

from ..ctypes import from_compute, to_compute
from ..layout import Layout, SwizzledShared, dim_bits, in_thread_map, log2, mma_a_fragment
from .base import DotLowering, OperandTile, load_of, stage_to_smem, stage_where_loaded, staging_layout

__all__ = ["WgmmaLowering", "GmmaShared", "wgmma_accumulator", "wgmma_selected", "gmma_desc_fields"]

_TYPES = {"fp16": "f16", "bf16": "bf16", "fp8e4nv": "e4m3", "fp8e5": "e5m2", "fp32": "tf32", "int8": "s8"}
#: elements of K per instruction: 32 bytes of each operand row
_KSTEP = {"fp16": 16, "bf16": 16, "fp8e4nv": 32, "fp8e5": 32, "fp32": 8, "int8": 32}


def k_major_only(t) -> bool:
    """wgmma reads operands of this type from shared memory K-major only (no transpose immediates:
    every type but fp16/bf16); such an operand stored the other way round is transposed first."""
    return scalar_of(t).primitive_bitwidth != 16
#: swizzle mode field (descriptor bits 62-63) by swizzle width in bytes
_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


def wgmma_selected() -> bool:
    """``NEWT_DOT_LOWERING`` picks the Hopper lowering: ``wgmma`` (the default on sm_90a) or
    ``mma_sync`` (mma.sync + ldmatrix, as on sm_80)."""
    v = os.environ.get("NEWT_DOT_LOWERING", "").strip().lower().replace(".", "_")
    if v in ("", "auto", "wgmma"):
        return v == "wgmma" or _DEFAULT_ON
    if v in ("mma_sync", "mma", "mmasync"):
        return False
    raise ValueError(f"NEWT_DOT_LOWERING={v!r}: expected 'wgmma' or 'mma_sync'")


#: whether sm_90a uses wgmma when NEWT_DOT_LOWERING is unset
_DEFAULT_ON = True
#: tf32 and int8 dots take wgmma by default too (NEWT_DOT_LOWERING=mma_sync keeps mma.sync): on since the
#: H200 run of 2026-12-02 09:15-09:24 (tests/ops/test_dot_wgmma_dtypes.py -m gpu passed; the GPU suite under
#: NEWT_DOT_LOWERING=wgmma had no dot failure; tf32 4096^3 0.555 ms vs 0.972 on mma.sync, Triton 0.991)
_TF32_INT8_DEFAULT = True


def wgmma_forced() -> bool:
    """``NEWT_DOT_LOWERING=wgmma`` set explicitly (also the dtypes not yet wgmma by default)."""
    return os.environ.get("NEWT_DOT_LOWERING", "").strip().lower() == "wgmma"
#: tiles with fewer 64-row blocks than warpgroups (N split across warpgroups, or duplicated): only with
#: NEWT_WGMMA_SPLIT_N=1 until a GPU run has checked them
_SPLIT_N = os.environ.get("NEWT_WGMMA_SPLIT_N", "0") not in ("", "0")


@dataclass(frozen=True)
class GmmaShared(SwizzledShared):
    """A swizzled shared tile in the wgmma canonical layout (see the module docstring)."""

    @property
    def swizzle_bytes(self) -> int:
        return min(128, self.row_bytes)

    @property
    def atom_cols(self) -> int:
        return self.swizzle_bytes // self.elem_bytes

    @property
    def per_phase(self) -> int:
        return 128 // self.swizzle_bytes

    @property
    def max_phase(self) -> int:
        return self.swizzle_bytes // 16

    @property
    def mode(self) -> int:
        return _SWIZZLE_MODE[self.swizzle_bytes]

    @property
    def align(self) -> int:
        """The swizzle pattern repeats every 8 rows: the tile must start on that boundary."""
        return 8 * self.swizzle_bytes

    def offset(self, row: int, col: int) -> int:
        W = self.swizzle_bytes
        atom, c = divmod(col, self.atom_cols)
        byte = c * self.elem_bytes
        phase = (row // self.per_phase) % self.max_phase
        return atom * self.rows * W + row * W + (((byte // 16) ^ phase) * 16) + byte % 16

    def offset_expr(self, row: str, col: str) -> str:
        W = self.swizzle_bytes
        ac = self.atom_cols
        eb = self.elem_bytes
        c = f"(({col}) & {ac - 1})" if ac < self.inner else f"({col})"
        byte = f"({c} * {eb})" if eb != 1 else c
        phase = f"((({row}) / {self.per_phase}) % {self.max_phase})" if self.per_phase > 1 else \
            f"(({row}) % {self.max_phase})"
        atom = f"(({col}) / {ac}) * {self.rows * W} + " if ac < self.inner else ""
        return f"({atom}({row}) * {W} + ((({byte} >> 4) ^ {phase}) << 4) + ({byte} & 15))"


def gmma_desc_fields(tile: GmmaShared, k_major: bool) -> tuple[int, int, int]:
    """(leading byte offset, stride byte offset, swizzle mode) of a descriptor over ``tile``."""
    W = tile.swizzle_bytes
    if k_major:
        return 16, 8 * W, tile.mode
    return tile.rows * W, 8 * W, tile.mode


def gmma_address(tile: GmmaShared, k_major: bool, mn0: int, k0: int) -> int:
    """Byte offset in ``tile`` where the descriptor of the sub-matrix at (mn0, k0) starts."""
    W = tile.swizzle_bytes
    ac = tile.atom_cols
    eb = tile.elem_bytes
    if k_major:  # rows = M/N, inner = K
        return (k0 // ac) * tile.rows * W + mn0 * W + (k0 % ac) * eb
    assert mn0 % ac == 0, (mn0, ac)
    return (mn0 // ac) * tile.rows * W + k0 * W


def warpgroups(M: int, N: int, num_warps: int) -> tuple[int, int, bool]:
    """Warpgroups along M and N; the third value says the N split is a duplication (too narrow)."""
    wg = max(1, num_warps // 4)
    wgm = 1
    while wgm * 2 <= wg and M // (64 * wgm * 2) >= 1:
        wgm *= 2
    wgn = wg // wgm
    dup = wgn > 1 and N // wgn < 64
    return wgm, wgn, dup


def wgmma_accumulator(shape, num_warps: int, kind="wgmma") -> Layout:
    M, N = shape
    bits = dim_bits(shape)
    moff, mn = bits[0]
    noff, nn = bits[1]
    wgm, wgn, dup = warpgroups(M, N, num_warps)
    Nw = N if dup else N // wgn
    n_inst = min(256, Nw)

    def mb(k):
        return 1 << (moff + k) if k < mn else 0

    def nb(k):
        return 1 << (noff + k) if k < nn else 0

    lane = [nb(1), nb(2), mb(0), mb(1), mb(2)]
    warp = [mb(4), mb(5)] + [mb(6 + j) for j in range(log2(wgm))]
    warp += [0 if dup else nb(log2(Nw) + j) for j in range(log2(wgn))]
    warp += [0] * (log2(num_warps) - len(warp))
    reg = [nb(0), mb(3)] + [nb(k) for k in range(3, log2(n_inst))] + [nb(k) for k in range(log2(n_inst), log2(Nw))]
    reg += [mb(k) for k in range(6 + log2(wgm), mn)]
    return Layout(tuple(shape), tuple(reg), tuple(lane), tuple(warp), kind)


def async_dots(layouts, body, kept, stages: int, total: int, budget: int) -> frozenset:
    """wgmma dots of a software-pipelined loop body that may stay in flight into the next iteration
    (``wgmma.wait_group 1`` instead of 0): a pure accumulation ``acc = dot(a, b, acc)`` whose result
    only feeds the loop's yield, at the position of its accumulator argument, with both operands read
    from the pipeline's buffers.  The ring then gets one more buffer, so the cp.async copies issued in
    iteration ``it`` never land in the buffer the still-running wgmma of iteration ``it - 1`` reads (the
    barrier at the top of ``it`` follows every warpgroup's wait for the wgmma of ``it - 2``)."""
    if stages < 2 or total * (stages + 1) > budget:
        return frozenset()
    term = body.terminator
    yields = list(term.operands) if term is not None and term.name == "yield" else []
    loads = {c.op for c in kept}
    users: dict = {}
    for o in body.walk():
        for v in o.operands:
            users.setdefault(v, []).append(o)
    out = set()
    for d in body.ops:
        low = layouts.dot.get(d) if d.name == "dot" else None
        if low is None or low.name != "wgmma":
            continue
        r = d.result
        ru = users.get(r, [])
        if len(ru) != 1 or ru[0] is not term:
            continue
        idx = [i for i, y in enumerate(yields) if y is r]
        acc = d.operands[2]
        if len(idx) != 1 or acc is not body.args[1 + idx[0]] or len(users.get(acc, [])) != 1:
            continue
        if scalar_of(r.type).name not in ("fp32", "int32") or scalar_of(acc.type) != scalar_of(r.type) or promotion(d):
            continue
        from_ring = [getattr(load_of(v)[0], "name", None) == "load" and load_of(v)[0] in loads for v in d.operands[:2]]
        if not all(from_ring) and not (from_ring[1] and _ra_in_flight(layouts, body, d)):
            continue
        out.add(d)
    for d in body.ops:  # then dots whose accumulator is read only behind another dot's full wait
        if d in out or _behind(layouts, body, d, out, loads, users, yields, (stages, total, budget)) is None:
            continue
        out.add(d)
    return frozenset(out)


def _turn_hooks(em, op, pin) -> tuple[str, str]:
    """The lines a warp-specialized loop's schedule puts around dot ``op`` (before its first fence, after its
    commit): the ping-pong's turns (``pingpong.dot_hooks``), or, with the intra-warpgroup overlap planned too,
    the combined schedule's (``ppov.dot_hook``); empty otherwise."""
    if getattr(em.pipes, "pingpong", None) is not None and getattr(em.pipes, "overlap", None) is not None:
        from ..ppov import dot_hook
        return "", dot_hook(em, op)
    from ..pingpong import dot_hooks
    return dot_hooks(em, op, pin)


def _ra_in_flight(layouts, body, d) -> bool:
    """A pure accumulation whose A comes from registers (tutorial 06's ``dv += tl.dot(p, do)``, ``dk += tl.dot(ds,
    tl.trans(qT))`` once folded): it may stay in flight, as Triton leaves it, when A is a 16-bit value already in
    wgmma's A-fragment registers (``_a_registers``: never a staged tile the next iteration would overwrite) and
    the body's dot accumulators fit ``_RA_IN_FLIGHT_ACC_REGS`` registers a thread (their fragments stay live into
    the next iteration beside them).  On by default since the H100 run of 2026-12-07 (session 12: tutorial 06's
    backward at d=64 1.07x -> 1.02x Triton's time with it and the fp8 register path, the GPU suite passed);
    ``NEWT_ASYNC_RA=0`` waits for it at once."""
    if os.environ.get("NEWT_ASYNC_RA", "1") == "0":
        return False
    from ..plan import compact
    a = d.operands[0]
    t = scalar_of(a.type)
    have = layouts.layout.get(a)
    if t.primitive_bitwidth != 16 or have is None or a in layouts.poly:
        return False
    have = compact(have)
    nw = have.num_warps
    M, K = shape_of(a.type)
    wgm, _, _ = warpgroups(M, shape_of(d.operands[1].type)[1], nw)
    afl = mma_a_fragment((M, K), 4 * wgm, max(1, nw // (4 * wgm)), num_warps=nw)
    if in_thread_map(have, afl.reg, afl.lane, afl.warp) is None:
        return False
    regs = sum(_regs_per_thread(layouts, o.result) for o in body.ops if o.name == "dot")
    return regs <= _RA_IN_FLIGHT_ACC_REGS and _regs_per_thread(layouts, d.result) <= _RA_IN_FLIGHT_ONE


#: accumulator registers per thread of a loop body's dots, and of the dot itself, up to which an accumulation with
#: a register A stays in flight: tutorial 06's dK/dV loop at d=64 (64 + 64 + 32 + 32) and its dQ loop (64 + 32 +
#: 32); not at d=128 (the dK/dV loop's 256 + 64 already spill, and the dQ loop's 128-register dQ in flight took
#: one more ring buffer, 229 KB of shared memory, for a kernel ptxas serializes anyway)
_RA_IN_FLIGHT_ACC_REGS = 192
_RA_IN_FLIGHT_ONE = 64


def _behind(layouts, body, d, in_flight, loads, users, yields, ring=None):
    """For attention's ``acc = dot(p, v, acc * alpha)``: the index of ``d``'s result in the yield when ``d``
    may stay in flight because every read of its loop-carried accumulator comes after an earlier wgmma
    dot of the same body that waits for all groups (``wait_group 0``: the previous iteration's ``d``
    included); B must come from the pipeline (its buffer is kept by the extra ring buffer).  Else None."""
    low = layouts.dot.get(d) if d.name == "dot" else None
    if low is None or low.name != "wgmma" or promotion(d):
        return None
    term = body.terminator
    r = d.result
    ru = users.get(r, [])
    if len(ru) != 1 or ru[0] is not term:
        return None
    idx = [i for i, y in enumerate(yields) if y is r]
    if len(idx) != 1 or scalar_of(r.type).name != "fp32":
        return None
    if d.operands[2] is body.args[1 + idx[0]]:
        return None  # the plain accumulation: handled above
    b = d.operands[1]
    if getattr(load_of(b)[0], "name", None) != "load" or load_of(b)[0] not in loads:
        return None
    ops = list(body.ops)
    pos = {o: k for k, o in enumerate(ops)}
    waiters = [o for o in ops[:pos[d]] if o.name == "dot" and o not in in_flight
               and getattr(layouts.dot.get(o), "name", None) == "wgmma" and not promotion(o)]
    if not waiters:
        return None
    carried = body.args[1 + idx[0]]
    first = waiters[0]
    if any(u not in pos or pos[u] <= pos[first] for u in users.get(carried, [])):
        return None
    # in flight, its A fragments (registers) stay live into the next iteration next to both accumulators:
    # only where those leave room (attention 128x64 d=128 at 4 warps: 128 + 64 accumulator registers per
    # thread, 1528 bytes spilled in flight (NVRTC 13.5), none waiting; 8 warps: 64 + 32)
    acc_regs = sum(_regs_per_thread(layouts, o.result) for o in (d, first))
    if acc_regs > _IN_FLIGHT_ACC_REGS:
        return None
    if ring is not None and _fewer_blocks_per_sm(layouts.layout.get(d.result), acc_regs, *ring):
        return None
    return idx[0]


def _fewer_blocks_per_sm(lay, acc_regs: int, stages: int, total: int, budget: int) -> bool:
    """Whether the extra ring buffer of an in-flight dot would cost a resident block per SM: blocks by
    the rings' shared memory (with and without it) against blocks by registers, estimated as the two
    accumulators plus 64 per thread.  Attention 64x64 at 4 warps, d=128: 96 KB of ring hold 2 blocks,
    128 KB one (Triton, waiting: 2), so P.V waits there; 128x64 at 8 warps, d=64: registers allow 2
    either way, so it stays in flight (measured 0.94x -> 0.97x of Triton on the H200)."""
    if lay is None:
        return True
    threads = 32 << len(lay.warp)
    per_sm = budget + 17 * 1024  # the planner's budget is the block limit less 16 KB; the SM has 1 KB more
    by_regs = 65536 // (threads * min(255, acc_regs + 64))

    def by_smem(nbuf):
        return per_sm // (total * nbuf + 1024)
    return min(by_regs, by_smem(stages + 1)) < min(by_regs, by_smem(stages))


#: accumulator registers per thread (the in-flight dot's and the waiting one's) up to which a dot with a
#: register A is left in flight
_IN_FLIGHT_ACC_REGS = 160


def _regs_per_thread(layouts, v) -> int:
    from ..plan import compact
    lay = layouts.layout.get(v)
    return compact(lay).nregs if lay is not None else 1 << 20


def behind_indices(body, pipe, op) -> list:
    """Yield indices of the in-flight dots of ``pipe`` that ``op`` (a dot waiting for all groups) waits for
    before their accumulators are read: their registers get fenced after ``op``'s wait."""
    ops = list(body.ops)
    if op not in ops:
        return []
    term = body.terminator
    yields = list(term.operands) if term is not None and term.name == "yield" else []
    out = []
    for d in pipe.async_dots:
        if d.result not in yields:
            continue
        i = yields.index(d.result)
        if d.operands[2] is body.args[1 + i]:
            continue
        first = next((o for o in ops if o.name == "dot" and o not in pipe.async_dots), None)
        if first is op and ops.index(op) < ops.index(d):
            out.append(i)
    return out


def drain_async_dots(em, op, pipe, targets, c):
    """After a loop with in-flight wgmma: wait for them and fence the accumulators (their last values)."""
    body = op.regions[0]
    term = body.terminator
    yields = list(term.operands)
    c.line("wgmma_wait<0>();  // the last iteration's wgmma")
    for d in pipe.async_dots:
        i = yields.index(d.result)
        name, lay, _ = targets[i]
        em.for_regs(lay.nregs, f"wgmma_keep({name}[i]);", c)


def _helpers_ra(em, n: int, ty: str, tb: int | None, k: int = 16, tyb: str | None = None) -> str:
    """wgmma with A from registers (four 32-bit fragment registers, the mma.sync A fragment per warp) and B from
    shared memory: 16-bit types at k16 with ``tb`` B's transpose immediate; fp8 (``dot/fp8_regs.py``) at k32 with
    ``tb`` None (K-major only) and ``tyb`` the B type."""
    em.helper("wgmma_common", _COMMON)
    tyb = tyb or ty
    name = f"wgmma_m64n{n}k{k}_{ty}_r{tb}" if tb is not None else f"wgmma_m64n{n}k{k}_{ty}_{tyb}_ra"
    nreg = n // 2
    regs = ", ".join(f"%{i}" for i in range(nreg))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nreg))
    a = ", ".join(f"%{nreg + q}" for q in range(4))
    trans = f", {tb}" if tb is not None else ""
    em.helper(name, (
        f"__device__ __forceinline__ void {name}(float* d, const unsigned* a, unsigned long long db) {{\n"
        f"  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{nreg + 5}, 0;\\n"
        f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ty}.{tyb} {{{regs}}}, {{{a}}}, %{nreg + 4}, p, 1, 1{trans};"
        f"\\n}}\\n\"\n    : {outs}\n"
        f"    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(1));\n}}\n"))
    return name


def _helpers(em, n: int, ty: str, ta: int, tb: int, tyb: str | None = None, kstep: int = 16) -> str:
    """wgmma with both operands from shared memory.  16-bit types: ``ta``/``tb`` are the transpose
    immediates; the K-major-only types (``tyb`` the B type): no transpose operands, K = ``kstep``
    (fp8 and int8 32, tf32 8); int8 (s8) accumulates in s32 (no scale immediates for integers)."""
    em.helper("wgmma_common", _COMMON)
    acc, ct, cons, scale = "f32", "float", "f", ", 1, 1"
    if tyb is None:
        name = f"wgmma_m64n{n}k16_{ty}_{ta}{tb}"
        shape, types, tail = f"m64n{n}k16", f"{ty}.{ty}", f"{scale}, {ta}, {tb}"
    else:
        name = f"wgmma_m64n{n}k{kstep}_{ty}_{tyb}"
        if ty in ("s8", "u8"):
            acc, ct, cons, scale = "s32", "int", "r", ""
        shape, types, tail = f"m64n{n}k{kstep}", f"{ty}.{tyb}", scale
    nreg = n // 2
    regs = ", ".join(f"%{i}" for i in range(nreg))
    outs = ", ".join(f'"+{cons}"(d[{i}])' for i in range(nreg))
    sd, sdv = ("", "1") if tyb is None else (", int sd", "sd")  # scale-d 0 starts from zero
    em.helper(name, (
        f"__device__ __forceinline__ void {name}({ct}* d, unsigned long long da, unsigned long long db{sd}) {{\n"
        f"  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{nreg + 2}, 0;\\n"
        f"wgmma.mma_async.sync.aligned.{shape}.{acc}.{types} {{{regs}}}, %{nreg}, %{nreg + 1}, p{tail};"
        f"\\n}}\\n\"\n    : {outs}\n    : \"l\"(da), \"l\"(db), \"r\"({sdv}));\n}}\n"))
    return name


def _starts_from_zero(em, op, acc: str) -> bool:
    """A dot on a zero accumulator (``tl.dot(a, b)``) without fp8 promotion whose first k step uses wgmma's
    scale-d = 0 instead of zeroed registers: every such dot with ``NEWT_WGMMA_ZERO_START=1``; with ``=trial``
    only the dots that ``compile_cuda`` names in ``zero_start`` after its second compile won
    (``compiler._zero_start_retry``; ptxas info C7519 names them where it is printed).  Unset or ``=0``: none.

    Every candidate is recorded in ``em.zero_dots`` (accumulator array -> the dot's result id), which is how
    the retry maps ptxas' PTX line back to a dot.  Not for all dots by default: it shortens tutorial 06's causal
    backward loops (d=64: 393 -> 350 and 348 -> 302 SASS instructions) but moves ptxas's allocation at the
    255-register edge where ptxas folded the zeros already (causal d=128: 4,180 -> 4,248 spill bytes; the
    attention forward 128x64, d=128, 4 warps once 0 -> 112)."""
    from .fold import _is_zero
    if promotion(op) or not _is_zero(op.operands[2]):
        return False
    rid = op.result.id
    if op in _loop_ops(em):  # run once outside loops, a zeroed accumulator costs nothing worth a second compile
        em.__dict__.setdefault("zero_dots", {})[acc] = rid
    mode = os.environ.get("NEWT_WGMMA_ZERO_START", "")
    if mode == "1":
        return True
    if mode == "0":
        return False
    return rid in (em.__dict__.get("zero_start") or ())


def _loop_ops(em) -> set:
    """The ops inside ``scf.for`` / ``scf.while`` bodies of the emitter's function (computed once)."""
    got = em.__dict__.get("_loop_ops")
    if got is None:
        got = set()

        def walk(region, inside):
            for o in region.ops:
                if inside:
                    got.add(o)
                for r in o.regions:
                    walk(r, inside or o.name in ("scf.for", "scf.while"))
        walk(em.fn.body, False)
        em.__dict__["_loop_ops"] = got
    return got


def _zero_start(em, fn: str) -> str | None:
    """The variant of wgmma helper ``fn`` whose accumulator is write-only and scale-d 0 (D = A·B): the compiler
    need not materialize zeros in the accumulator registers first (tutorial 06's causal backward: 64 register
    moves an iteration zeroing QK's and dP's accumulators, Triton passes scale-d 0 there)."""
    src = em.helpers.get(fn)
    if src is None or '"+' not in src:
        return None
    z = fn + "_z"
    body = src.replace(f" {fn}(", f" {z}(", 1).replace('"+f"', '"=f"').replace('"+r"', '"=r"')
    body = body.replace('"r"(1));', '"r"(0));').replace('"r"(sd));', '"r"(0));')
    if '"r"(0));' not in body:
        return None
    em.helper(z, body)
    return z


def promotion(op) -> int:
    """For an fp8 dot with ``max_num_imprecise_acc = n`` (0 < n <= K): the K chunk (n rounded down to the
    instruction's 32, at least 32) the tensor cores accumulate in their reduced fp8-accumulation precision
    before the sum is added to the fp32 accumulator (Triton's rule); 0: the hardware accumulates all of K
    (Triton's default on sm_90, and newt's, which cannot tell an explicit 0 from None)."""
    a = op.operands[0]
    if not scalar_of(a.type).is_fp8():
        return 0
    n = int(op.attrs.get("max_num_imprecise_acc") or 0)
    K = shape_of(a.type)[1]
    if n <= 0 or n > K:
        return 0
    return max(32, n // 32 * 32)


def _desc_at(desc: str, off: int) -> str:
    """The descriptor ``desc`` moved ``off`` bytes on (a multiple of 16: the start field is in 16-byte units)."""
    assert off % 16 == 0, off
    return desc if off == 0 else f"{desc} + {off >> 4}ull"


_COMMON = """\
// ---- wgmma (sm_90a) ----------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void wgmma_keep(float& r) { asm volatile("" : "+f"(r) :: "memory"); }
__device__ __forceinline__ void wgmma_keep(int& r) { asm volatile("" : "+r"(r) :: "memory"); }
// matrix descriptor: start address >> 4 in bits 0-13, the rest (offsets, swizzle) constant
__device__ __forceinline__ unsigned long long gmma_desc(unsigned addr, unsigned long long rest) {
  return rest | (unsigned long long)((addr & 0x3FFFFu) >> 4);
}
"""


class WgmmaLowering(DotLowering):
    name = "wgmma"
    pipelined = True

    AFTER_STAGING = ("fence_proxy_async();  // plain stores, read by the tensor cores (async proxy)",)

    def supports(self, op, target, num_warps=None) -> bool:
        if not getattr(target, "wgmma", False) or not wgmma_selected():
            return False
        if num_warps is not None and num_warps % 4:
            return False
        a, b, acc = op.operands
        if len(shape_of(a.type)) != 2:
            return False
        ta, tb = scalar_of(a.type), scalar_of(b.type)
        if ta.name not in _TYPES or tb.name not in _TYPES or _KSTEP[ta.name] != _KSTEP[tb.name]:
            return False
        if ta != tb and not (ta.is_fp8() and tb.is_fp8()):
            return False  # fp16 x bf16, int8 x fp8: no such instruction (fp8: e4m3 and e5m2 mix)
        if ta.name == "fp32" and op.attrs.get("input_precision", "") != "tf32":
            return False  # ieee, tf32x3, bf16x3/x6: not one tf32 product
        if ta.name in ("fp32", "int8") and not (_TF32_INT8_DEFAULT or wgmma_forced()):
            return False
        want = ("int32",) if ta.name == "int8" else ("fp32",) if ta.name == "fp32" else ("fp32", "fp16", "bf16")
        if scalar_of(op.result.type).name not in want:
            return False
        M, K = shape_of(a.type)
        N = shape_of(b.type)[1]
        if k_major_only(ta):  # either operand may have to be transposed in shared memory first
            from .transpose import can_transpose
            eb = ta.primitive_bitwidth // 8
            if not (can_transpose(K, N, eb) and can_transpose(K, M, eb)):
                return False
        if num_warps is not None and M < 64 * (num_warps // 4) and not _SPLIT_N:
            # warpgroups beyond M's 64-row blocks would split N or duplicate: laid out and tested
            # offline, not yet run on a GPU, so such tiles stay on mma.sync
            return False
        return M % 64 == 0 and N % 16 == 0 and K % _KSTEP[ta.name] == 0 and N >= 16

    def acc_layout(self, op, num_warps, chained=False):
        return wgmma_accumulator(tuple(shape_of(op.result.type)), num_warps)

    def preferred_inner(self, op, index):
        # A: K contiguous (K-major); B: N contiguous (N-major, tnsp) for 16-bit types, K-major for fp8,
        # int8 and tf32 (wgmma transposes 16-bit operands only)
        if index == 1 and k_major_only(op.operands[1].type):
            return 0
        return 1

    def shared_tile(self, rows: int, inner: int, elem_bytes: int) -> GmmaShared:
        return GmmaShared(rows, inner, elem_bytes)

    def tile_for(self, op, index, inner) -> GmmaShared:
        shape = shape_of(op.operands[index].type)
        t = scalar_of(op.operands[index].type)
        return GmmaShared(shape[1 - inner], shape[inner], max(1, t.primitive_bitwidth // 8))

    # ------------------------------------------------------------------
    def emit(self, em, op, tiles):
        a, b, accv = op.operands
        res = op.result
        t = scalar_of(a.type)
        M, K = shape_of(a.type)
        N = shape_of(b.type)[1]
        nw = em.nw
        from ..plan import compact
        lay = compact(em.layout_of(res))
        wgm, wgn, dup = warpgroups(M, N, nw)
        Nw = N if dup else N // wgn
        n_inst = min(256, Nw)
        n_reps = Nw // n_inst
        m_reps = M // (64 * wgm)
        in_flight = any(op in p.async_dots for p in em.pipelines.values())
        if op is em.__dict__.get("_ov_wait_all") or op is em.__dict__.get("_ov_issue"):
            in_flight = op is em.__dict__.get("_ov_issue")  # QK one iteration ahead, P.V waited (overlap.py)
        tiles = list(tiles)
        for i in (0, 1):
            if tiles[i] is not None and not isinstance(tiles[i].smem, GmmaShared):
                tiles[i] = None  # a tile in another layout: stage it again (not expected from the pipeline)
        a_regs = self._a_registers(em, op, tiles, wgm)
        a8 = None  # fp8 A from registers: (fragment array, count), built by quad shuffles (fp8_regs.py)
        if a_regs is None and tiles[0] is None and t.is_fp8() and not promotion(op):
            from .fp8_regs import fp8_a_fragments, fp8_regs_mode
            a8 = fp8_a_fragments(em, op, wgm, None)  # built inside the dot's block, before its fence
            if a8 and fp8_regs_mode() == "packed":
                in_flight = False  # waited at once: in flight, ptxas may serialize every wgmma (fp8_regs.py)
        for i in (0, 1):  # loop-invariant operands: into shared memory once, where they are defined
            v = op.operands[i]
            if i == 0 and (a_regs or a8):
                continue
            if tiles[i] is None and v not in em.plan.poly and em.loop_invariant(v, op):
                tiles[i] = self._stage_once(em, op, i)
        if a_regs or a8:
            tiles[0] = OperandTile("", None, 1)  # placeholder: A comes from registers
        ta_t, tb_t = self._tiles(em, op, tiles)
        kstep = _KSTEP[t.name]
        if k_major_only(t):  # fp8/int8/tf32: both operands K-major; a pipeline buffer that is not gets transposed
            ta_t, tb_t = (self._k_major(em, op, i, tl, in_flight) for i, tl in ((0, ta_t), (1, tb_t)))
        c = em.cur
        acc_src = em.get(accv, lay)
        rt = scalar_of(res.type)
        name = em.declare_block(res, lay)
        w = em.tmp("acc")
        a_k = ta_t.inner == 1   # A (M, K): K contiguous
        b_k = tb_t.inner == 0   # B (K, N): K contiguous
        if a_regs:
            fn = _helpers_ra(em, n_inst, _TYPES[t.name], 0 if b_k else 1)
            a_desc = "A from registers (mma.sync A fragments)"
        elif a8:
            fn = _helpers_ra(em, n_inst, _TYPES[t.name], None, k=32, tyb=_TYPES[scalar_of(b.type).name])
            a_desc = "A from registers (fp8 fragments by quad shuffles)"
        elif k_major_only(t):
            fn = _helpers(em, n_inst, _TYPES[t.name], 0, 0, _TYPES[scalar_of(b.type).name], kstep)
            a_desc = f"A K-major {ta_t.smem.swizzle_bytes}B swizzle"
        else:
            fn = _helpers(em, n_inst, _TYPES[t.name], 0 if a_k else 1, 0 if b_k else 1)
            a_desc = f"A {'K' if a_k else 'M'}-major {ta_t.smem.swizzle_bytes}B swizzle"
        c.line(f"// dot {M}x{N}x{K} {t.name} on tensor cores: wgmma m64n{n_inst}k{kstep}, {wgm}x{wgn} warpgroups"
               f"{' (duplicated along N)' if dup and wgn > 1 else ''}, {a_desc}, "
               f"B {'K' if b_k else 'N'}-major {tb_t.smem.swizzle_bytes}B swizzle")
        c.line(f"{'int' if t.name == 'int8' else 'float'} {w}[{lay.nregs}];")
        fz = _zero_start(em, fn) if _starts_from_zero(em, op, w) else None  # the first k step ignores (writes) d
        if fz is None:
            em.for_regs(lay.nregs, f"{w}[i] = {to_compute(f'{acc_src}[i]', accv.type)};", c)
        c.line("{")
        d = c.sub(1)
        wgb = log2(wgm)
        d.line("const int wg = warp_id >> 2;  // this warp's warpgroup")
        d.line(f"const int wg_m = wg & {wgm - 1}, wg_n = {'0' if dup or wgn == 1 else f'wg >> {wgb}'};")
        if a_regs or a8:
            d.line(f"const unsigned sb = smem_u32({tb_t.base});")
        else:
            d.line(f"const unsigned sa = smem_u32({ta_t.base}), sb = smem_u32({tb_t.base});")
        descs = {"a": "0"}
        for key, tile, kmaj in ((("a", ta_t, a_k),) if not (a_regs or a8) else ()) + (("b", tb_t, b_k),):
            lbo, sbo, mode = gmma_desc_fields(tile.smem, kmaj)
            rest = ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | mode << 62
            descs[key] = f"0x{rest:016x}ull"
        if a_regs or a8:
            d.line(f"const unsigned long long rb = {descs['b']};  // offsets and swizzle")
        else:
            d.line(f"const unsigned long long ra = {descs['a']}, rb = {descs['b']};  // offsets and swizzle")
        sa, sb = ta_t.smem, tb_t.smem
        # byte offsets of this warpgroup's sub-tile start: M/N offsets are warpgroup multiples
        if a_regs or a8:
            a_wg = "0"
        elif a_k:
            a_wg = f"wg_m * {64 * sa.swizzle_bytes}"
        else:
            a_wg = f"(wg_m * 64 / {sa.atom_cols}) * {sa.rows * sa.swizzle_bytes}"
        if b_k:
            b_wg = f"wg_n * {Nw * sb.swizzle_bytes}"
        else:
            b_wg = f"(wg_n * {Nw} / {sb.atom_cols}) * {sb.rows * sb.swizzle_bytes}"
        # one descriptor per operand, then the k steps' and sub-tiles' start offsets added to it: a shared
        # address is below 2**18 and the tiles are 16-byte aligned, so the 14-bit start field (address >> 4)
        # never carries and ``desc(a + off) == desc(a) + off / 16``.  Rebuilding each descriptor (mask,
        # shift, or) put a chain of ~6 uniform-datapath ops before every HGMMA (Triton adds to one too)
        if a_regs:
            d.line(f"const unsigned sb_wg = sb + {b_wg};")
            d.line("const unsigned long long db = gmma_desc(sb_wg, rb);")
            from ..vectors import pack_words
            d.line(f"unsigned af[{m_reps * (K // 16)}][4];  // A fragments, packed before the first wgmma")
            for mi in range(m_reps):
                for kk in range(0, K, 16):
                    ab = (mi * (K // 16) + kk // 16) * 8
                    for q in range(4):
                        wd = pack_words([f"{a_regs}[{ab + 2 * q}]", f"{a_regs}[{ab + 2 * q + 1}]"], t, 4)[0]
                        d.line(f"af[{mi * (K // 16) + kk // 16}][{q}] = {wd};")
        elif a8:
            d.line(f"const unsigned sb_wg = sb + {b_wg};")
            d.line("const unsigned long long db = gmma_desc(sb_wg, rb);")
            a8 = fp8_a_fragments(em, op, wgm, d)
        else:
            d.line(f"const unsigned sa_wg = sa + {a_wg}, sb_wg = sb + {b_wg};")
            d.line("const unsigned long long da = gmma_desc(sa_wg, ra), db = gmma_desc(sb_wg, rb);")
        chunk = promotion(op) or K
        part = em.tmp("part") if promotion(op) else None
        pin = [f"af[{i}][{q}]" for i in range(m_reps * (K // 16)) for q in range(4)] if a_regs else []
        if a8:
            pin = [f"{a8[0]}[{i}][{q}]" for i in range(a8[1]) for q in range(4)]
        turn_in, turn_out = _turn_hooks(em, op, pin)
        for line in turn_in.split("\n") if turn_in else ():
            d.line(line)
        dst = part or w
        if part:  # fp8 with max_num_imprecise_acc: each chunk of K from zero, then added in fp32
            d.line(f"float {part}[{lay.nregs}];  // one chunk of {chunk} along K, in the tensor cores' fp8 precision")
        for k0 in range(0, K, chunk):
            d.line("wgmma_fence();")
            for kk in range(k0, k0 + chunk, kstep):
                for mi in range(m_reps):
                    m0 = mi * 64 * wgm
                    for ni in range(n_reps):
                        n0 = ni * n_inst
                        offb = gmma_address(sb, b_k, n0, kk)
                        reg0 = (mi * n_reps + ni) * (n_inst // 2)
                        f_ = fz if fz and kk == 0 else fn
                        if a_regs:
                            d.line(f"{f_}(&{w}[{reg0}], af[{mi * (K // 16) + kk // 16}], {_desc_at('db', offb)});")
                            continue
                        if a8:
                            d.line(f"{f_}(&{w}[{reg0}], {a8[0]}[{mi * (K // 32) + kk // 32}], {_desc_at('db', offb)});")
                            continue
                        offa = gmma_address(sa, a_k, m0, kk)
                        sd = "" if not k_major_only(t) else ", 0" if part and kk == k0 else ", 1"
                        d.line(f"{f_}(&{dst}[{reg0}], {_desc_at('da', offa)}, {_desc_at('db', offb)}{sd});")
            if part:
                d.line("wgmma_commit();")
                d.line("wgmma_wait<0>();")
                em.for_regs(lay.nregs, f"{{ wgmma_keep({part}[i]); {w}[i] += {part}[i]; }}", d)
        if part:
            pass  # committed and waited for chunk by chunk
        elif in_flight:  # the accumulation stays in flight; the loop's next dot or its exit waits
            d.line("wgmma_commit();")
            if turn_out:
                d.line(turn_out)
            d.line("wgmma_wait<1>();  // the previous iteration's wgmma is done: its buffer can be refilled")
        else:
            d.line("wgmma_commit();")
            if turn_out:
                d.line(turn_out)
            d.line("wgmma_wait<0>();")
        c.line("}")
        if not in_flight:
            em.for_regs(lay.nregs, f"wgmma_keep({w}[i]);", c)
            self._fence_behind(em, op, c)
        if op is em.__dict__.get("_ov_issue"):  # read only once a later wait retires it (overlap.py)
            em.__dict__["_ov_acc"] = w
            return
        em.for_regs(lay.nregs, f"{name}[i] = {from_compute(f'{w}[i]', rt)};", c)

    # ------------------------------------------------------------------
    def _a_registers(self, em, op, given, wgm):
        """The array holding A in mma.sync A-fragment order, when A is already in those registers
        (attention's P, the first dot's accumulator: a register permutation) or is polymorphic;
        else None (A is read from shared memory).  16-bit A only."""
        from ..plan import compact
        if given[0] is not None:
            return None
        a = op.operands[0]
        if scalar_of(a.type).primitive_bitwidth != 16:
            return None
        M, K = shape_of(a.type)
        afl = mma_a_fragment((M, K), 4 * wgm, max(1, em.nw // (4 * wgm)), num_warps=em.nw)
        if a not in em.plan.poly:
            have = em.layout_of(a)
            if have is None or in_thread_map(compact(have), afl.reg, afl.lane, afl.warp) is None:
                return None
        return em.get(a, afl)


    @staticmethod
    def _fence_behind(em, op, c):
        """After this dot's full wait: the accumulators of the loop's dots left in flight last iteration
        behind it (``_behind``) are complete; fence their registers so no read moves above the wait."""
        for pipe in em.pipelines.values():
            body = pipe.loop.regions[0]
            if not pipe.async_dots or op not in body.ops or not em.yield_stack:
                continue
            targets = em.yield_stack[-1]
            for i in behind_indices(body, pipe, op):
                name, lay, _ = targets[i]
                c.line(f"// {name}: the previous iteration's in-flight wgmma is complete (the wait above)")
                em.for_regs(lay.nregs, f"wgmma_keep({name}[i]);", c)

    def needs_transpose(self, op, index: int, inner: int) -> bool:
        """An 8-bit or tf32 operand stored with ``inner`` contiguous is not K-major: it is transposed in
        shared memory before the dot (``_k_major``)."""
        return k_major_only(op.operands[index].type) and inner != 1 - index

    def _k_major(self, em, op, index, tile, in_flight):
        """``tile``, or a K-major copy of it written just before the dot (two copies in turn when the
        dot stays in flight into the next iteration, which may still read the previous one)."""
        if not self.needs_transpose(op, index, tile.inner):
            return tile
        from .transpose import can_transpose, emit_transpose
        src = tile.smem
        if not can_transpose(src.rows, src.inner, src.elem_bytes):  # excluded by supports
            raise NotImplementedError(f"wgmma: cannot transpose a {src.rows}x{src.inner} tile of "
                                      f"{src.elem_bytes}-byte elements")
        dst = GmmaShared(src.inner, src.rows, src.elem_bytes)
        c = em.cur
        nbuf = 2 if in_flight else 1
        buf = em.smem_persistent(dst.size_bytes * nbuf)
        base = f"(smem + {buf})"
        if in_flight:
            tog = em.tmp("kmaj")
            em.top.line(f"int {tog} = 0;  // which of two K-major copies the next transposition writes")
            c.line(f"{tog} ^= 1;  // the other copy may still be read by the previous iteration's wgmma")
            base = f"(smem + {buf} + {tog} * {dst.size_bytes})"
        c.line(f"// operand {'ab'[index]} ({em.vname(op.operands[index])}) is {'MN'[index]}-major in shared memory; "
               f"wgmma reads {scalar_of(op.operands[index].type).name} operands K-major only")
        emit_transpose(em, c, src, tile.base, dst, base)
        c.line("fence_proxy_async();  // plain stores, read by the tensor cores (async proxy)")
        c.line("__syncthreads();")
        return OperandTile(base, dst, 1 - index)

    def _tiles(self, em, op, given):
        from ..plan import compact
        em.helper("wgmma_common", _COMMON)
        out = list(given)
        todo = [i for i in (0, 1) if given[i] is None]
        if not todo:
            return out
        sws = {i: self.tile_for(op, i, self.preferred_inner(op, i)) for i in todo}
        total = 0
        offs = {}
        for i in sorted(todo, key=lambda j: -sws[j].align):  # most-aligned first: both stay aligned
            offs[i] = total
            total += sws[i].size_bytes
        early = stage_where_loaded(em, op, todo)
        off = em.smem_scratch(total, em.cur, async_proxy=True)
        if early:
            # each operand is written to shared memory right after its load, so its registers are free
            # before the next load (the masked K loop that cannot use cp.async: both operands' 32 loaded
            # values a thread were live together at the barrier, and the kernel spilled); one barrier
            # before the first load orders the writes after the previous iteration's wgmma reads
            first = em.def_chunk[op.operands[early[0]]]
            first.items.insert(0, "__syncthreads();  // the previous iteration's wgmma has read the staging tiles")
        else:
            em.cur.line("__syncthreads();")
        for i in todo:
            v = op.operands[i]
            sw = sws[i]
            tile = OperandTile(f"(smem + {off} + {offs[i]})", sw, self.preferred_inner(op, i))
            lay = compact(em.layout_of(v) or staging_layout(em, v))
            c = em.def_chunk[v] if early else em.cur
            c.line(f"// stage operand {'ab'[i]} ({em.vname(v)}) in shared memory"
                   + (" where it is loaded" if early else ""))
            stage_to_smem(em, v, lay, tile, chunk=c, fresh=True)
            out[i] = tile
        em.cur.line("fence_proxy_async();  // plain stores, read by the tensor cores (async proxy)")
        em.cur.line("__syncthreads();")
        return out

