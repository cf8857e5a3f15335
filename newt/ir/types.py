"""Types of the tile IR.

A value is either a scalar of some ``dtype`` (including pointers) or a block
(``BlockType``: an element dtype and a shape).  In the generic check (no
specialization known) shapes may hold symbolic dimensions and element types
may be symbolic; the backends only ever see concrete types.
"""

from __future__ import annotations

from newt.language.core import block_type, dtype, pointer_type

__all__ = ["SymDim", "SymDType", "ANY_DTYPE", "BlockType", "block_of", "pointee", "scalar_of", "shape_of",
           "is_block", "type_str", "is_concrete_shape", "dims_equal", "numel", "is_pow2"]


class SymDim:
    """A block dimension whose value is an unknown constexpr (``BLOCK_M``, ``2*BLOCK``)."""

    __slots__ = ("expr",)

    def __init__(self, expr: str):
        self.expr = expr

    def __eq__(self, other) -> bool:
        return isinstance(other, SymDim) and other.expr == self.expr

    def __hash__(self) -> int:
        return hash(("symdim", self.expr))

    def __repr__(self) -> str:
        return self.expr

    __str__ = __repr__


class SymDType(dtype):
    """An element type known only by name: the element type of a pointer argument
    in the generic check (``T[x_ptr]``), or ``?`` when nothing is known."""

    def __init__(self, label: str):
        self.name = f"T[{label}]" if label != "?" else "?"
        self.label = label
        self._kind = "symbolic"
        self.primitive_bitwidth = 0
        self.fp_mantissa_width = 0
        self.lang_name = self.name
        self.short_name = self.name

    def is_symbolic(self) -> bool:
        return True

    def __eq__(self, other) -> bool:
        return isinstance(other, SymDType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("symdtype", self.name))

    def __repr__(self) -> str:
        return self.name


ANY_DTYPE = SymDType("?")

BlockType = block_type


def is_block(ty) -> bool:
    return isinstance(ty, block_type)


def pointee(ty) -> dtype:
    """The element type a pointer (or block of pointers) points to."""
    t = scalar_of(ty)
    if not isinstance(t, pointer_type):
        raise TypeError(f"{type_str(ty)} is not a pointer")
    return t.element_ty


def scalar_of(ty) -> dtype:
    return ty.element_ty if isinstance(ty, block_type) else ty


def shape_of(ty) -> tuple:
    return ty.shape if isinstance(ty, block_type) else ()


def block_of(elem: dtype, shape) -> object:
    """A block type of ``shape``; a scalar type when ``shape`` is empty."""
    shape = tuple(shape)
    return block_type(elem, shape) if shape else elem


def is_concrete_shape(shape) -> bool:
    return all(isinstance(d, int) for d in shape)


def numel(shape):
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def dims_equal(a, b) -> bool | None:
    """True/False when known; None when one side is symbolic and they might differ."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if a == b:
        return True
    return None


def type_str(ty) -> str:
    """``fp32``, ``*fp16``, ``<128x64xfp32>``, ``<BLOCKxi32>``."""
    if isinstance(ty, block_type):
        return "<" + "x".join(str(d) for d in ty.shape) + f"x{ty.element_ty}>"
    if isinstance(ty, pointer_type):
        return f"*{ty.element_ty}"
    return str(ty)
