"""``newt.set_allocator``: where kernels get global scratch memory (Triton's ``triton.set_allocator``).

``allocator(size: int, alignment: int, stream: int | None)`` returns an object with ``data_ptr()``
(a torch tensor of ``size`` bytes, usually) that stays alive for the launch.  The setting is per
context (``contextvars``), like Triton's.  The kernels newt compiles today declare no global scratch
(descriptor loads on sm_80 are plain loads), so this is read only by kernels whose metadata asks for
scratch; code written for Triton's TMA tutorials runs unchanged.
"""

from __future__ import annotations

import contextvars

_ALLOCATOR: contextvars.ContextVar = contextvars.ContextVar("newt_allocator", default=None)


def set_allocator(allocator) -> None:
    """Set the global-scratch allocator (``None`` removes it)."""
    if allocator is not None and not callable(allocator):
        raise TypeError(f"newt.set_allocator expects a callable (size, alignment, stream) -> buffer or None, "
                        f"got {type(allocator).__name__}")
    _ALLOCATOR.set(allocator)


def get_allocator():
    """The allocator set by ``newt.set_allocator`` in this context (None when unset)."""
    return _ALLOCATOR.get()


def allocate_scratch(kernel: str, size: int, alignment: int, stream=None):
    """``size`` bytes of global scratch for one launch of ``kernel``, from the allocator.

    Raises ``RuntimeError`` naming the kernel when no allocator is set, ``TypeError`` when the
    allocator's result has no ``data_ptr()``, ``ValueError`` when it is not ``alignment``-aligned.
    """
    alloc = _ALLOCATOR.get()
    if alloc is None:
        raise RuntimeError(f"{kernel}: this kernel needs {size} bytes of global scratch memory, but no allocator is "
                           "set: call newt.set_allocator(lambda size, alignment, stream: "
                           "torch.empty(size, dtype=torch.int8, device='cuda')) first")
    buf = alloc(size, alignment, stream)
    if not hasattr(buf, "data_ptr"):
        raise TypeError(f"{kernel}: the allocator returned a {type(buf).__name__}, which has no data_ptr()")
    if alignment and buf.data_ptr() % alignment:
        raise ValueError(f"{kernel}: the allocator returned memory at {buf.data_ptr():#x}, not {alignment}-byte "
                         "aligned")
    return buf
