"""Host-side argument wrappers: ``newt.reinterpret`` / ``TensorWrapper`` (Triton's protocol).

A kernel argument is *tensor-like* when it has ``data_ptr()`` and ``dtype``; a wrapper adds
``base`` (the torch tensor that owns the memory) and a ``dtype`` that may differ from the base's
— a newt dtype (``nl.uint32``, ``nl.float8e5`` ...), a ``torch.dtype``, or any dtype object whose
``name`` is a newt dtype name (Triton's ``tl.uint8``).  The kernel then sees a pointer to that
dtype over the base's memory: ``newt.reinterpret(x_int8, nl.uint8)`` passes the same bytes as
``*u8``.  Nothing here imports torch.
"""

from __future__ import annotations

from newt.language import core as lc


class TensorWrapper:
    """A tensor's memory seen as another element type (``newt.reinterpret`` builds these)."""

    def __init__(self, base, dtype):
        self.dtype = dtype
        self.base = base
        self.data = getattr(base, "data", base)
        self.device = base.device
        self.shape = base.shape

    def data_ptr(self):
        return self.base.data_ptr()

    @property
    def is_cuda(self):
        return getattr(self.base, "is_cuda", False)

    def stride(self, *args):
        return self.base.stride(*args)

    def numel(self):
        return self.base.numel()

    def element_size(self):
        return self.base.element_size()

    def size(self, *args):
        return self.base.size(*args)

    def dim(self):
        return self.base.dim()

    def cpu(self):
        return TensorWrapper(self.base.cpu(), self.dtype)

    def copy_(self, other):
        self.base.copy_(other.base if isinstance(other, TensorWrapper) else other)
        return self

    def clone(self):
        return TensorWrapper(self.base.clone(), self.dtype)

    def to(self, device):
        return TensorWrapper(self.base.to(device), self.dtype)

    def new_empty(self, sizes):
        return TensorWrapper(self.base.new_empty(sizes), self.dtype)

    def __str__(self) -> str:
        return f"TensorWrapper[{self.dtype}]({self.base})"

    __repr__ = __str__


def reinterpret(tensor, dtype):
    """``tensor``'s memory as ``dtype`` elements for a kernel launch (no copy).

    Reinterpreting a wrapper back to its base's own dtype returns the base tensor.
    """
    if isinstance(tensor, TensorWrapper):
        if dtype == tensor.base.dtype or _same_dtype(dtype, tensor.base.dtype):
            return tensor.base
        return TensorWrapper(tensor.base, dtype)
    if hasattr(tensor, "data_ptr"):
        return TensorWrapper(tensor, dtype)
    raise TypeError(f"cannot reinterpret a {type(tensor).__name__} (expected a torch tensor or a TensorWrapper)")


def _same_dtype(a, b) -> bool:
    try:
        na, nb = wrapped_dtype(a), wrapped_dtype(b)
    except TypeError:
        return False
    return na == nb


def wrapped_dtype(dt) -> lc.dtype:
    """The newt dtype of a wrapper's ``dtype`` (a newt dtype, a torch dtype or a dtype named like one)."""
    if isinstance(dt, lc.dtype):
        return dt
    t = type(dt)
    if t.__name__ == "dtype" and t.__module__ == "torch":
        from .dtypes import torch_dtype_map
        m = torch_dtype_map()
        if dt in m:
            return m[dt]
        raise TypeError(f"dtype {dt} is not supported by newt")
    name = getattr(dt, "name", None)
    if isinstance(name, str):
        nd = getattr(lc, name, None)
        if isinstance(nd, lc.dtype):
            return nd
    raise TypeError(f"{dt!r} is not a newt dtype")
