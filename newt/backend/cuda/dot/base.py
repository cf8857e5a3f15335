"""The interface every dot lowering implements, and staging of operands into shared memory."""

from __future__ import annotations

from dataclasses import dataclass

from newt.ir.types import scalar_of, shape_of

from ..ctypes import ctype
from ..layout import Layout, SwizzledShared, log2

__all__ = ["DotLowering", "OperandTile", "stage_to_smem", "stage_where_loaded", "load_of", "transposed"]


@dataclass
class OperandTile:
    """A 2-D operand in shared memory: byte address expression of the tile's start,
    its swizzled layout, and which logical dim (0 or 1) is contiguous."""

    base: str          # C++ expression: unsigned char* to the tile
    smem: SwizzledShared
    inner: int         # logical dim stored contiguously

    def offset(self, r: str, c: str) -> str:
        """Byte offset of logical element (r, c)."""
        if self.inner == 1:
            return self.smem.offset_expr(r, c)
        return self.smem.offset_expr(c, r)

    def transposed(self) -> "OperandTile":
        """The same bytes read as the transposed matrix: logical (r, c) is this tile's (c, r)."""
        return OperandTile(self.base, self.smem, 1 - self.inner)


def load_of(v):
    """``(op, transposed)`` for a dot operand: the op defining ``v``, or for a 2-D transpose of a value
    (``x.T``, ``tl.trans(x)``, ``permute(x, (1, 0))``) the op defining ``x`` and True.  Tutorial-06-style
    ``desc_k.load([...]).T`` feeds the dot a transpose of a load: the pipeline copies the load's tile and
    the dot reads the same bytes with the roles of rows and columns swapped (:meth:`OperandTile.transposed`)."""
    o = getattr(v, "owner", None)
    if getattr(o, "name", None) == "permute" and tuple(o.attrs.get("order", ())) == (1, 0):
        return getattr(o.operands[0], "owner", None), True
    return o, False


def transposed(v) -> bool:
    """Whether ``v`` is a 2-D transpose (see :func:`load_of`)."""
    return load_of(v)[1]


class DotLowering:
    """One way of lowering ``dot``.  ``acc_layout`` fixes the result's register layout;
    ``emit`` writes the code given each operand as an ``OperandTile`` or a register value."""

    name = "abstract"

    #: lines emitted after a loop-invariant operand is staged once, before the barrier (wgmma: the proxy fence)
    AFTER_STAGING: tuple = ()

    def _stage_once(self, em, op, i) -> OperandTile:
        """Stage a loop-invariant operand into its own shared-memory tile right where it is defined
        (cached per value), so the loop reads it from there and stages nothing."""
        from ..plan import compact
        v = op.operands[i]
        inner = self.preferred_inner(op, i)
        sw = self.tile_for(op, i, inner)
        key = (v, sw, inner)
        tile = em.staged_once.get(key)
        if tile is not None:
            return tile
        name = em.smem_reserved(sw.size_bytes)
        tile = OperandTile(f"(smem + {name})", sw, inner)
        chunk = em.def_chunk.get(v, em.cur)
        lay = compact(em.layout_of(v) or staging_layout(em, v))
        saved = em.cur
        em.cur = chunk
        try:
            chunk.line(f"// {em.vname(v)} is loop-invariant where the dot uses it: staged in shared memory once")
            chunk.line("__syncthreads();")
            stage_to_smem(em, v, lay, tile, chunk)
            for line in self.AFTER_STAGING:
                chunk.line(line)
            chunk.line("__syncthreads();")
        finally:
            em.cur = saved
        em.staged_once[key] = tile
        return tile

    def supports(self, op, target) -> bool:
        raise NotImplementedError

    def acc_layout(self, op, num_warps: int, chained: bool = False) -> Layout:
        raise NotImplementedError

    def tile_for(self, op, index: int, inner: int) -> SwizzledShared:
        """The shared-memory tile operand ``index`` is staged into (row length ``inner``)."""
        raise NotImplementedError

    def preferred_inner(self, op, index: int) -> int:
        """Which dim of operand ``index`` (0 = a, 1 = b) this lowering reads fastest when contiguous."""
        return 1 if index == 0 else 1

    def emit(self, em, op, tiles: list):
        raise NotImplementedError


def stage_to_smem(em, value, lay: Layout, tile: OperandTile, chunk=None, fresh=False):
    """Write a register block (layout ``lay``) into a shared-memory tile, vectorized along the inner dim."""
    c = chunk or em.cur
    t = scalar_of(value.type)
    ct = ctype(t)
    eb = max(1, t.primitive_bitwidth // 8)
    shape = shape_of(value.type)
    src = em.get(value, lay)
    nb_inner = log2(shape[tile.inner])
    # vector run along the inner dim in the low register bits
    run = 1
    inner_off = 0 if tile.inner == 1 else log2(shape[1])
    for j, b in enumerate(lay.reg):
        if b != 1 << (inner_off + j):
            break
        run = 1 << (j + 1)
    v = min(run, max(1, 16 // eb), shape[tile.inner])
    while v * eb > 16:
        v //= 2
    fe = em.flat_expr(lay)
    if fresh and getattr(c, "indent", 1) > 1:
        # inside a loop (a K loop staging its operands every iteration): the swizzled addresses are
        # loop-invariant, and hoisted they keep one register per store live through the loop (64 for
        # a 128x128x64 tile over 256 threads: the masked K loop spilled); recomputing them from an
        # opaque copy of the thread's offset costs a few integer ops per store instead
        import re
        tfv = em.thread_flat(lay)
        em.helper("fresh_int", "__device__ __forceinline__ int fresh_int(int x) { asm volatile(\"\" : \"+r\"(x)); "
                               "return x; }  // a value the compiler may not hoist out of a loop\n")
        tl = em.tmp(tfv + "_l")
        c.line(f"const int {tl} = fresh_int({tfv});")
        fe = re.sub(rf"\b{tfv}\b", tl, fe)
    ncols = shape[1]
    lc = log2(ncols)
    del nb_inner
    from ..vectors import pack_words
    total = v * eb
    vt = {16: "uint4", 8: "uint2", 4: "unsigned", 2: "unsigned short", 1: "unsigned char"}[total]
    c.line("#pragma unroll")
    c.line(f"for (int i = 0; i < {lay.nregs}; i += {v}) {{")
    b = c.sub(1)
    b.line(f"const int f = {fe};")
    b.line(f"const int r = f >> {lc}, cc = f & {ncols - 1};")
    words = pack_words([f"{src}[i + {j}]" for j in range(v)], t, total)
    if total == 16:
        val = f"make_uint4({', '.join(words)})"
    elif total == 8:
        val = f"make_uint2({', '.join(words)})"
    elif total == 4:
        val = words[0]
    elif total == 2:
        val = f"(unsigned short)({words[0]})"
    else:
        val = f"(unsigned char)({src}[i].x)" if t.is_fp8() else f"(unsigned char)({src}[i])"
    b.line(f"*reinterpret_cast<{vt}*>({tile.base} + {tile.offset('r', 'cc')}) = {val};")
    c.line("}")
    del ct


def stage_where_loaded(em, op, todo) -> list:
    """The operands (``todo`` in program order) to stage right after their loads instead of at the
    dot, or [] to stage at the dot.  Only inside a loop body, for plain loads of the dot's own region
    kept in their load layout, when nothing emitted since the first of them used scratch shared
    memory (which the staging tiles overlap).  ``NEWT_STAGE_AT_LOAD=0`` stages at the dot (as before)."""
    import os
    if os.environ.get("NEWT_STAGE_AT_LOAD", "1") == "0":
        return []
    if not todo or getattr(em.cur, "indent", 1) <= 1:
        return []
    body = em.parent_op.get(op)
    if body is None:
        return []
    vals = [op.operands[i] for i in todo]
    for v in vals:
        d = em.defining_op.get(v)
        if d is None or d.name != "load" or em.parent_op.get(d) is not body or v not in em.def_chunk \
                or v in em.plan.poly or em.layout_of(v) is None or len(em.users.get(v, ())) != 1:
            return []
    region = next(r for r in body.regions if op in r.ops)
    pos = {o: k for k, o in enumerate(region.ops)}
    if any(em.defining_op[v] not in pos for v in vals):
        return []
    order = sorted(todo, key=lambda i: pos[em.defining_op[op.operands[i]]])
    if em.def_smem.get(op.operands[order[0]], -1) != len(em.smem_uses):
        return []
    return order


def staging_layout(em, v):
    """The layout an operand without one of its own is staged from (the default for its shape)."""
    from ..plan import default_layout
    return default_layout(shape_of(v.type), em.nw)
