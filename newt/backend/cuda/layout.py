"""Layouts: how the elements of a block are spread over registers, lanes and warps.

A ``Layout`` is a *linear layout over GF(2)*.  Block dimensions are powers of
two, so an element's coordinates pack into one row-major **flat index** whose
bits are the bits of the coordinates (dim ``d`` occupies a fixed bit field).
A layout names, for every hardware bit, the flat-index bits it contributes:

* ``reg[j]``  -- register bit ``j`` of the thread's register array index,
* ``lane[k]`` -- bit ``k`` of the lane id (5 of them),
* ``warp[k]`` -- bit ``k`` of the warp id (log2(num_warps) of them),

and the element held by (register r, lane l, warp w) is the XOR of the bases
of the set bits.  A zero basis means *broadcast*: two hardware positions that
differ only in that bit hold the same element.

Operations on layouts are basis manipulations:

* ``expand_dims`` and ``reshape`` keep the flat index, so they keep the bases;
* ``permute`` permutes the flat-index bits;
* slicing a dimension away (reductions, the source of a ``broadcast``) drops
  register bases into that dimension and zeroes lane/warp bases into it;
* a conversion between two layouts is free (a register permutation) when
  their lane and warp bases agree, and goes through shared memory otherwise.

Distributed layouts (this module) use bases that are single bits or zero;
shared-memory layouts (``SwizzledShared``) use general XOR maps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Layout", "blocked", "mma_accumulator", "mma_a_fragment", "dim_bits", "flat_of", "coords_of", "log2",
           "bit_index_expr", "in_thread_map", "SwizzledShared"]


def log2(n: int) -> int:
    assert n > 0 and n & (n - 1) == 0, n
    return n.bit_length() - 1


def dim_bits(shape) -> list[tuple[int, int]]:
    """(first bit, number of bits) of each dimension inside the flat index (row-major)."""
    out = []
    off = 0
    for d in reversed(shape):
        n = log2(d)
        out.append((off, n))
        off += n
    return list(reversed(out))


def flat_of(coords, shape) -> int:
    f = 0
    for c, d in zip(coords, shape):
        f = f * d + c
    return f


def coords_of(flat: int, shape) -> tuple:
    out = []
    for d in reversed(shape):
        out.append(flat % d)
        flat //= d
    return tuple(reversed(out))


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@dataclass(frozen=True)
class Layout:
    shape: tuple
    reg: tuple
    lane: tuple
    warp: tuple
    kind: str = field(default="linear", compare=False)

    def __post_init__(self):
        assert len(self.lane) == 5, self.lane
        for b in self.reg + self.lane + self.warp:
            assert b == 0 or (b & (b - 1)) == 0, f"distributed layout bases must be single bits: {self}"
            assert b < _numel(self.shape) or b == 0, (b, self.shape)

    # --- sizes -------------------------------------------------------------------
    @property
    def nregs(self) -> int:
        return 1 << len(self.reg)

    @property
    def num_warps(self) -> int:
        return 1 << len(self.warp)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return _numel(self.shape)

    # --- evaluation -----------------------------------------------------------------
    @staticmethod
    def _apply(bases, x: int) -> int:
        f = 0
        j = 0
        while x:
            if x & 1:
                f ^= bases[j]
            x >>= 1
            j += 1
        return f

    def reg_flat(self, r: int) -> int:
        return self._apply(self.reg, r)

    def thread_flat(self, lane: int, warp: int) -> int:
        return self._apply(self.lane, lane) ^ self._apply(self.warp, warp)

    def flat(self, r: int, lane: int, warp: int) -> int:
        return self.reg_flat(r) ^ self.thread_flat(lane, warp)

    def coords(self, r: int, lane: int, warp: int) -> tuple:
        return coords_of(self.flat(r, lane, warp), self.shape)

    def covers_all(self) -> bool:
        """Every element is held by some thread (the bases span the flat index)."""
        got = 0
        for b in self.reg + self.lane + self.warp:
            got |= b
        return got == self.numel - 1

    def dup_reg_mask(self) -> int:
        """Register-index bits whose basis is zero (duplicated registers)."""
        m = 0
        for j, b in enumerate(self.reg):
            if b == 0:
                m |= 1 << j
        return m

    def dup_lane_mask(self) -> int:
        return sum(1 << k for k, b in enumerate(self.lane) if b == 0)

    def dup_warp_mask(self) -> int:
        return sum(1 << k for k, b in enumerate(self.warp) if b == 0)

    def has_thread_dups(self) -> bool:
        return bool(self.dup_lane_mask() or self.dup_warp_mask())

    # --- shape manipulations -----------------------------------------------------
    def with_shape(self, shape) -> "Layout":
        """The same flat index under another row-major shape (reshape, expand_dims)."""
        assert _numel(shape) == self.numel
        return Layout(tuple(shape), self.reg, self.lane, self.warp, self.kind)

    def map_bits(self, fn, shape, drop_regs=True, kind=None) -> "Layout":
        """Apply ``fn`` (flat bit -> new flat bit or 0) to every basis."""
        def m(b):
            return fn(b) if b else 0
        reg = [m(b) for b in self.reg]
        if drop_regs:
            reg = [b for b, ob in zip(reg, self.reg) if b or not ob]
        return Layout(tuple(shape), tuple(reg), tuple(m(b) for b in self.lane), tuple(m(b) for b in self.warp),
                      kind or self.kind)

    def drop_dims(self, dims, new_shape=None) -> "Layout":
        """Remove dimensions (of any size): registers holding them go away, lanes and warps broadcast.

        ``new_shape`` is the shape left (by default ``shape`` without ``dims``)."""
        dims = set(dims)
        bits = dim_bits(self.shape)
        keep = [i for i in range(self.rank) if i not in dims]
        shape = tuple(self.shape[i] for i in keep) if new_shape is None else tuple(new_shape)
        nbits = dim_bits(tuple(self.shape[i] for i in keep))
        table = {}
        for ni, i in enumerate(keep):
            off, n = bits[i]
            noff, _ = nbits[ni]
            for k in range(n):
                table[1 << (off + k)] = 1 << (noff + k)
        lay = self.map_bits(lambda b: table.get(b, 0), tuple(self.shape[i] for i in keep),
                            kind=f"slice({self.kind})")
        return lay.with_shape(shape) if shape != lay.shape else lay

    def project_to(self, src_shape) -> "Layout":
        """For ``broadcast``: this layout's bases seen in ``src_shape`` (same rank, some dims 1).
        Keeps every register (zero bases where the dim is broadcast)."""
        bits = dim_bits(self.shape)
        sbits = dim_bits(src_shape)
        table = {}
        for i, (s, d) in enumerate(zip(src_shape, self.shape)):
            if s == d:
                off, n = bits[i]
                soff, _ = sbits[i]
                for k in range(n):
                    table[1 << (off + k)] = 1 << (soff + k)
        return self.map_bits(lambda b: table.get(b, 0), tuple(src_shape), drop_regs=False)

    def permute(self, order) -> "Layout":
        """Layout of ``permute(x, order)`` when x has this layout (no data moves)."""
        bits = dim_bits(self.shape)
        new_shape = tuple(self.shape[o] for o in order)
        nbits = dim_bits(new_shape)
        table = {}
        for ni, o in enumerate(order):
            off, n = bits[o]
            noff, _ = nbits[ni]
            for k in range(n):
                table[1 << (off + k)] = 1 << (noff + k)
        return self.map_bits(lambda b: table[b], new_shape, drop_regs=False, kind=f"permute({self.kind})")

    def join(self) -> "Layout":
        """Layout of ``join(a, b)`` (new last dim of 2) as the last register bit: r = [a..., b...]."""
        sh = lambda b: b << 1
        return Layout(self.shape + (2,), tuple(sh(b) for b in self.reg) + (1,), tuple(sh(b) for b in self.lane),
                      tuple(sh(b) for b in self.warp), self.kind)

    def cat(self) -> "Layout":
        """Layout of ``cat(a, b)`` along dim 0: the new top bit is the last register bit."""
        top = self.numel
        return Layout((self.shape[0] * 2,) + self.shape[1:], self.reg + (top,), self.lane, self.warp, self.kind)

    # --- description ------------------------------------------------------------------
    def dim_of_bit(self, b: int):
        """(dim, bit within dim) of a single-bit flat basis."""
        pos = b.bit_length() - 1
        for i, (off, n) in enumerate(dim_bits(self.shape)):
            if off <= pos < off + n:
                return i, pos - off
        raise ValueError(b)

    def per_dim(self, bases) -> list[int]:
        """How many of ``bases`` fall in each dimension (as a size: 2**count)."""
        out = [1] * self.rank
        for b in bases:
            if b:
                d, _ = self.dim_of_bit(b)
                out[d] *= 2
        return out

    def describe(self) -> str:
        """A short human description (the language server shows it on hover)."""
        regs = self.per_dim(self.reg)
        lanes = self.per_dim(self.lane)
        warps = self.per_dim(self.warp)
        fmt = lambda v: "[" + ", ".join(map(str, v)) + "]"
        dup = ""
        if self.has_thread_dups():
            dup = ", broadcast over " + ", ".join(
                x for x, m in (("lanes", self.dup_lane_mask()), ("warps", self.dup_warp_mask())) if m)
        return (f"{self.kind}: {self.nregs} regs x 32 lanes x {self.num_warps} warps; per thread {fmt(regs)}, "
                f"lanes {fmt(lanes)}, warps {fmt(warps)}{dup}")

    def __str__(self) -> str:
        return self.describe()


# ---------------------------------------------------------------------------
# constructors
# ---------------------------------------------------------------------------


def blocked(shape, size_per_thread, threads_per_warp, warps_per_cta, order, kind="blocked") -> Layout:
    """Triton's blocked encoding as a linear layout.

    ``order`` lists dims fastest first.  Tiles repeat over registers when the
    block is larger than one CTA tile; lanes/warps broadcast when it is smaller.
    """
    shape = tuple(shape)
    rank = len(shape)
    bits = dim_bits(shape)
    used = [0] * rank

    def take(d, count):
        out = []
        off, n = bits[d]
        for _ in range(count):
            if used[d] < n:
                out.append(1 << (off + used[d]))
                used[d] += 1
            else:
                out.append(0)
        return out

    reg, lane, warp = [], [], []
    for d in order:
        reg += take(d, log2(size_per_thread[d]))
    for d in order:
        lane += take(d, log2(threads_per_warp[d]))
    for d in order:
        warp += take(d, log2(warps_per_cta[d]))
    for d in order:  # the rest of each dim repeats over registers
        off, n = bits[d]
        reg += take(d, n - used[d])
    reg = [b for b in reg if b]  # never duplicate registers
    assert len(lane) == 5, (threads_per_warp, lane)
    return Layout(shape, tuple(reg), tuple(lane), tuple(warp), kind)


def blocked_for(shape, num_warps: int, vec: int = 1, order=None, kind="blocked") -> Layout:
    """A coalesced blocked layout: ``vec`` consecutive elements per thread along ``order[0]``,
    then lanes along ``order[0]``, then the next dims; warps likewise."""
    shape = tuple(shape)
    rank = len(shape)
    if rank == 0:
        raise ValueError("blocked_for needs a block")
    if order is None:
        order = list(range(rank - 1, -1, -1))
    spt = [1] * rank
    spt[order[0]] = max(1, min(vec, shape[order[0]]))
    tpw = [1] * rank
    left = 32
    for d in order:
        room = max(1, shape[d] // spt[d])
        t = min(left, room)
        tpw[d] = t
        left //= t
    tpw[order[-1]] *= left  # leftover lanes broadcast along the slowest dim
    wpc = [1] * rank
    left = num_warps
    for d in order:
        room = max(1, shape[d] // (spt[d] * tpw[d]))
        w = min(left, room)
        wpc[d] = w
        left //= w
    wpc[order[-1]] *= left
    return blocked(shape, spt, tpw, wpc, order, kind=kind)


def mma_accumulator(shape, warps_m: int, warps_n: int, kind="mma", num_warps: int | None = None) -> Layout:
    """The mma.sync m16n8 accumulator layout over an (M, N) tile.

    Within one 16x8 tile: register bit 0 -> column bit 0, lane bits 0-1 ->
    column bits 1-2, lane bits 2-4 -> row bits 0-2, register bit 1 -> row bit 3.
    Warps tile the block (warps_m along M first); the rest repeats over
    registers, N repetitions inner: acc[(mrep * NREP + nrep) * 4 + c].
    """
    M, N = shape
    bits = dim_bits(shape)
    moff, mn = bits[0]
    noff, nn = bits[1]
    wmb, wnb = log2(warps_m), log2(warps_n)

    def mb(k):
        return 1 << (moff + k) if k < mn else 0

    def nb(k):
        return 1 << (noff + k) if k < nn else 0

    reg = [nb(0), mb(3)]
    lane = [nb(1), nb(2), mb(0), mb(1), mb(2)]
    warp = [mb(4 + k) for k in range(wmb)] + [nb(3 + k) for k in range(wnb)]
    if num_warps is not None:
        warp += [0] * (log2(num_warps) - len(warp))
    reg += [nb(k) for k in range(3 + wnb, nn)]
    reg += [mb(k) for k in range(4 + wmb, mn)]
    return Layout(tuple(shape), tuple(reg), tuple(lane), tuple(warp), kind)


def mma_a_fragment(shape, warps_m: int, warps_n: int, kind="mma_a", num_warps: int | None = None) -> Layout:
    """The registers of mma.sync m16n8k16 A fragments (16-bit operands) over an (M, K) tile.

    Within one 16x16 step: register bit 0 -> column bit 0 (the two halves of a 32-bit
    fragment register), register bit 1 -> row bit 3, register bit 2 -> column bit 3 (the
    four fragment registers a0..a3), lane bits 0-1 -> column bits 1-2, lane bits 2-4 ->
    row bits 0-2.  Then the k steps, then the m repetitions: element ``j`` of fragment
    register ``q`` for (k step ``s``, m repetition ``mi``) is register
    ``(mi * (K / 16) + s) * 8 + 2 * q + j``.  Warps tile M like the accumulator
    (``mma_accumulator``); the warps along N hold copies.  Per thread this is the
    accumulator layout of an (M, K) result with the registers reordered, which is why a
    chained dot (attention's P) feeds the next one without leaving registers.
    """
    M, K = shape
    bits = dim_bits(shape)
    moff, mn = bits[0]
    koff, kn = bits[1]
    wmb, wnb = log2(warps_m), log2(warps_n)

    def mb(k):
        return 1 << (moff + k) if k < mn else 0

    def kb(k):
        return 1 << (koff + k) if k < kn else 0

    reg = [kb(0), mb(3), kb(3)] + [kb(k) for k in range(4, kn)] + [mb(k) for k in range(4 + wmb, mn)]
    lane = [kb(1), kb(2), mb(0), mb(1), mb(2)]
    warp = [mb(4 + k) for k in range(wmb)] + [0] * wnb
    if num_warps is not None:
        warp += [0] * (log2(num_warps) - len(warp))
    return Layout(tuple(shape), tuple(reg), tuple(lane), tuple(warp), kind)


# ---------------------------------------------------------------------------
# conversions
# ---------------------------------------------------------------------------


def in_thread_map(src: Layout, dst_reg, dst_lane, dst_warp):
    """If every thread already holds, in ``src``, the elements that ``dst`` gives it,
    return for each dst register bit the src register index it moves to (0 for a
    broadcast bit); else None.  The dst bases are expressed in src's flat index."""
    if tuple(dst_lane) != tuple(src.lane) or tuple(dst_warp) != tuple(src.warp):
        return None
    pos = {b: 1 << j for j, b in enumerate(src.reg) if b}
    out = []
    for b in dst_reg:
        if b == 0:
            out.append(0)
        elif b in pos:
            out.append(pos[b])
        else:
            return None
    return out


def bit_index_expr(var: str, mapping) -> str:
    """C++ for the index whose bit ``mapping[j]`` (a power of two or 0) is set when bit j
    of ``var`` is.  Runs of consecutive bits become one shift-and-mask."""
    if all(m == 1 << j for j, m in enumerate(mapping)):
        return var
    terms = []
    j = 0
    n = len(mapping)
    while j < n:
        if mapping[j] == 0:
            j += 1
            continue
        start = j
        t0 = mapping[j].bit_length() - 1
        while j + 1 < n and mapping[j + 1] == 1 << (t0 + (j + 1 - start)):
            j += 1
        width = j - start + 1
        mask = (1 << width) - 1
        src = f"({var} >> {start})" if start else var
        part = f"({src} & {mask})" if (start or width < 64) else src
        if t0:
            part = f"({part} << {t0})"
        terms.append(part)
        j += 1
    if not terms:
        return "0"
    return terms[0] if len(terms) == 1 else "(" + " | ".join(terms) + ")"


# ---------------------------------------------------------------------------
# shared memory
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SwizzledShared:
    """A 2-D tile in shared memory, ``inner`` elements contiguous per row, 16-byte
    chunks XOR-swizzled by the row so that ldmatrix / cp.async hit distinct banks.

    As a linear map over GF(2): offset bits = row bits * row_bytes, chunk bits
    XOR (row / per_phase) % max_phase, byte-in-chunk bits unchanged.
    """

    rows: int
    inner: int
    elem_bytes: int

    @property
    def row_bytes(self) -> int:
        return self.inner * self.elem_bytes

    @property
    def chunks_per_row(self) -> int:
        return max(1, self.row_bytes // 16)

    @property
    def per_phase(self) -> int:
        return max(1, 128 // self.row_bytes)

    @property
    def max_phase(self) -> int:
        return min(8, self.chunks_per_row) if self.row_bytes >= 16 else 1

    @property
    def size_bytes(self) -> int:
        return self.rows * self.row_bytes

    def offset(self, row: int, col: int) -> int:
        """Byte offset of element (row, col) (Python model, used by tests)."""
        byte = col * self.elem_bytes
        chunk, within = divmod(byte, 16) if self.row_bytes >= 16 else (0, byte)
        phase = (row // self.per_phase) % self.max_phase
        return row * self.row_bytes + ((chunk ^ phase) * 16 if self.row_bytes >= 16 else 0) + within

    def offset_expr(self, row: str, col: str) -> str:
        """C++ byte offset of (row, col) given C++ int expressions."""
        if self.row_bytes < 16 or self.max_phase == 1:
            return f"(({row}) * {self.row_bytes} + ({col}) * {self.elem_bytes})"
        eb = self.elem_bytes
        byte = f"(({col}) * {eb})" if eb != 1 else f"({col})"
        phase = f"((({row}) / {self.per_phase}) % {self.max_phase})" if self.per_phase > 1 else \
            f"(({row}) % {self.max_phase})"
        return f"(({row}) * {self.row_bytes} + ((({byte} >> 4) ^ {phase}) << 4) + ({byte} & 15))"
