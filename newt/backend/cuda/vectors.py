"""Vectors of elements in registers: element bits, 32-bit words, and how many registers one access moves.

Leaf helpers shared by the memory lowerings, the emitter's layout conversions, the dot lowerings and
the pipeliner (they import nothing else of the backend but C types)."""

from __future__ import annotations

from newt.ir.types import pointee, scalar_of

from .ctypes import ctype

__all__ = ["to_bits", "from_bits", "pack_words", "unpack_words", "vector_width", "vector_width_of", "nbytes"]


# ---------------------------------------------------------------------------
# bits <-> values
# ---------------------------------------------------------------------------


def nbytes(t) -> int:
    t = scalar_of(t)
    return 8 if t.is_ptr() else max(1, t.primitive_bitwidth // 8)


def to_bits(e: str, t) -> str:
    """An unsigned integer of the element's width holding its bits."""
    t = scalar_of(t)
    n = t.name if not t.is_ptr() else "ptr"
    if n == "fp32":
        return f"__float_as_uint({e})"
    if n == "fp64":
        return f"(unsigned long long)__double_as_longlong({e})"
    if n in ("fp16", "bf16") or t.is_fp8():
        return f"({e}).x"
    if n == "ptr":
        return f"(unsigned long long)({e})"
    if n == "int1":
        return f"(unsigned char)({e} ? 1 : 0)"
    return {1: "(unsigned char)", 2: "(unsigned short)", 4: "(unsigned int)", 8: "(unsigned long long)"}[
        nbytes(t)] + f"({e})"


def from_bits(e: str, t) -> str:
    t = scalar_of(t)
    n = t.name if not t.is_ptr() else "ptr"
    if n == "fp32":
        return f"__uint_as_float({e})"
    if n == "fp64":
        return f"__longlong_as_double((long long)({e}))"
    if n in ("fp16", "bf16"):
        return f"{ctype(t)}{{(unsigned short)({e})}}"
    if t.is_fp8():
        return f"{ctype(t)}{{(unsigned char)({e})}}"
    if n == "ptr":
        return f"({ctype(t)})(unsigned long long)({e})"
    if n == "int1":
        return f"((({e}) & 0xff) != 0)"
    return f"({ctype(t)})({e})"


def pack_words(elems: list, t, total: int) -> list:
    """C++ expressions of the 32-bit (16-bit when total < 4) words holding the elements, little-endian."""
    eb = nbytes(t)
    bits = [to_bits(e, t) for e in elems]
    if eb == 8:
        words = []
        for b in bits:
            words += [f"(unsigned)({b})", f"(unsigned)(({b}) >> 32)"]
        return words
    wbytes = 4 if total >= 4 else 2
    per = min(wbytes // eb, len(bits))
    words = []
    for w in range(max(1, total // wbytes)):
        parts = []
        for k in range(per):
            b = bits[w * per + k]
            sh = 8 * eb * k
            parts.append(f"((unsigned)({b}) << {sh})" if sh else f"(unsigned)({b})")
        e = " | ".join(parts)
        words.append(f"(unsigned short)({e})" if wbytes == 2 else e)
    return words


def unpack_words(words: list, t, count: int) -> list:
    eb = nbytes(t)
    if eb == 8:
        return [from_bits(f"(((unsigned long long){words[2 * k + 1]} << 32) | {words[2 * k]})", t)
                for k in range(count)]
    if eb == 4:
        return [from_bits(w, t) for w in words[:count]]
    wbytes = 4 if eb * count >= 4 else 2
    per = min(wbytes // eb, count)
    mask = (1 << (8 * eb)) - 1
    out = []
    for k in range(count):
        w = words[k // per]
        sh = 8 * eb * (k % per)
        out.append(from_bits(f"(({w} >> {sh}) & {mask}u)" if sh else f"({w} & {mask}u)", t))
    return out


# ---------------------------------------------------------------------------
# vector width
# ---------------------------------------------------------------------------


def vector_width(em, lay, ptr, mask) -> int:
    return vector_width_of(em.axis, lay, ptr, mask)


def vector_width_of(axis, lay, ptr, mask) -> int:
    """Registers per access: a run of low register bits along one dim, limited by what the
    axis analysis proves (contiguity, alignment, mask constancy) and by 16 bytes."""
    if not lay.reg:
        return 1
    eb = nbytes(pointee(ptr.type))
    d, k0 = lay.dim_of_bit(lay.reg[0])
    if k0 != 0:
        return 1
    run = 1
    for j, b in enumerate(lay.reg):
        if b == 0 or lay.dim_of_bit(b) != (d, j):
            break
        run = 1 << (j + 1)
    info = axis.get(ptr)
    if info is None or not info.contiguity:
        return 1
    v = min(run, info.contiguity[d], max(1, 16 // eb))
    align = info.divisibility[d]
    while v > 1 and align < v * eb:
        v //= 2
    if mask is not None:
        mi = axis.get(mask)
        mc = mi.constancy[d] if mi is not None and mi.constancy else 1
        while v > 1 and mc < v:
            v //= 2
    return max(1, v)


