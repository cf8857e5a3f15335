"""``TensorDescriptor``: a tensor and the block shape a kernel moves through it, passed as one argument.

Triton's host-side descriptor (``triton.tools.tensor_descriptor.TensorDescriptor``)::

    desc = TensorDescriptor.from_tensor(x, block_shape=[64, 32])   # or TensorDescriptor(x, shape, strides, [64, 32])
    kernel[grid](desc, ...)

    @newt.jit
    def kernel(desc, ...):
        tile = desc.load([m0, k0])          # a [64, 32] block at element offsets (m0, k0), zero outside
        desc.store([m0, k0], tile * 2)       # masked to the tensor's shape

The launch specializes it like a tuple ``(base, *shape, *strides)`` -- the base a pointer (16-byte
aligned), shape and strides ints (a stride of 1, like any int equal to 1, becomes a compile-time 1) --
with ``block_shape`` and ``padding`` as compile-time values; in the kernel it is the descriptor
``nl.make_tensor_descriptor(base, shape, strides, block_shape, padding)`` would make, so the two lower the
same way.  Any object with ``base``, ``shape``, ``strides`` and ``block_shape`` (Triton's own
``TensorDescriptor`` included) is accepted as one.  Nothing here imports torch.
"""

from __future__ import annotations

__all__ = ["TensorDescriptor", "is_descriptor", "descriptor_parts"]

PADDINGS = ("zero", "nan")


def _ints(what: str, xs) -> list[int]:
    if isinstance(xs, (list, tuple)) and all(type(x) is int for x in xs):
        return list(xs)  # the common case (a torch.Size, a list of ints): nothing to convert or check
    out = []
    for x in xs:
        if isinstance(x, bool) or not hasattr(x, "__index__"):
            raise TypeError(f"TensorDescriptor: {what} must be ints, got {x!r}")
        out.append(int(x.__index__()))
    return out


class TensorDescriptor:
    """``TensorDescriptor(base, shape, strides, block_shape, padding="zero")``: ``base`` a tensor (its
    memory and dtype), ``shape``/``strides`` in elements (the last stride 1), ``block_shape`` the block a
    ``load``/``store`` moves (powers of two, at least 16 bytes in the last dimension)."""

    def __init__(self, base, shape, strides, block_shape, padding: str = "zero"):
        self.base = base
        self.shape = _ints("shape", shape)
        self.strides = _ints("strides", strides)
        self.block_shape = _ints("block_shape", block_shape)
        self.padding = padding
        rank = len(self.shape)
        if not 1 <= rank <= 5:
            raise ValueError(f"TensorDescriptor: the rank must be 1 to 5, got {rank}")
        if len(self.strides) != rank or len(self.block_shape) != rank:
            raise ValueError(f"TensorDescriptor: shape, strides and block_shape have different lengths "
                             f"({rank}, {len(self.strides)}, {len(self.block_shape)})")
        if padding not in PADDINGS:
            raise ValueError(f"TensorDescriptor: padding must be 'zero' or 'nan', got {padding!r}")
        check_block(self.block_shape, None)
        if self.strides[-1] != 1:
            raise ValueError(f"TensorDescriptor: the last stride must be 1, got {self.strides[-1]} "
                             "(the innermost dimension must be contiguous)")
        elem = _element_size(base)
        if elem is not None:
            # the block's width in bytes is checked at the launch (``descriptor_parts``), not here: Triton's
            # programs build a placeholder block (``block_shape=[1, 1]``) that the autotuner's ``pre_hook`` sets
            # to the config's block before the launch (tutorial 06)
            for s in self.strides[:-1]:
                if (s * elem) % 16:
                    raise ValueError(f"TensorDescriptor: strides {self.strides} are not all multiples of 16 bytes "
                                     "(each stride but the last)")
        ptr = base.data_ptr() if hasattr(base, "data_ptr") else None
        if isinstance(ptr, int) and ptr % 16:
            raise ValueError("TensorDescriptor: the base must be 16-byte aligned")

    @staticmethod
    def from_tensor(tensor, block_shape, padding: str = "zero") -> "TensorDescriptor":
        """The descriptor of all of ``tensor`` (its shape and strides)."""
        return TensorDescriptor(tensor, list(tensor.shape), list(tensor.stride()), block_shape, padding)

    def __repr__(self):
        dt = getattr(self.base, "dtype", "?")
        return (f"TensorDescriptor({dt}, shape={self.shape}, strides={self.strides}, block_shape={self.block_shape}"
                + (f", padding={self.padding!r}" if self.padding != "zero" else "") + ")")


def _element_size(base) -> int | None:
    es = getattr(base, "element_size", None)
    if callable(es):
        try:
            return int(es())
        except Exception:  # a wrapper without it: the kernel's compile checks the block
            return None
    return None


def is_descriptor(v) -> bool:
    """A host-side descriptor: newt's, Triton's, or anything with ``base``/``shape``/``strides``/``block_shape``."""
    return (not isinstance(v, tuple) and hasattr(v, "block_shape") and hasattr(v, "strides")
            and hasattr(v, "base") and hasattr(v, "shape"))


def check_block(block_shape, elem: int | None) -> None:
    """A descriptor's block: powers of two, and (``elem``: the element size, when known) at least 16 bytes in
    the last dimension. Raises ValueError naming what is wrong."""
    block = list(block_shape)
    for d in block:
        if d <= 0 or d & (d - 1):
            raise ValueError(f"TensorDescriptor: block dimension {d} is not a power of two (block_shape {block})")
    if elem is not None and block and block[-1] * elem < 16:
        raise ValueError(f"TensorDescriptor: the block's last dimension is {block[-1] * elem} bytes; it must be "
                         f"at least 16 bytes (block_shape {block})")


def descriptor_parts(v):
    """``((base, *shape, *strides), block_shape, padding)`` of a descriptor at its launch; the block is checked
    here, after any ``pre_hook`` has set it."""
    shape = [int(x) for x in v.shape]
    strides = [int(x) for x in v.strides]
    block = tuple(int(x) for x in v.block_shape)
    check_block(block, _element_size(v.base))
    return (v.base, *shape, *strides), block, getattr(v, "padding", "zero") or "zero"
