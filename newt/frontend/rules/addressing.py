"""Addresses of blocks, shared by the memory rules: the pointer check of load/store/atomics and the
pointer block (with its bounds mask) of tensor descriptors and block pointers."""

from __future__ import annotations

from ..ops import _describe, _poison
from ..semantic import SemError
from ..values import Const, Sym, TensorV, TupleV


def _pointer(b, av, fname, node):
    _poison(av)
    if isinstance(av, TensorV) and av.dtype.is_ptr():
        return av
    if isinstance(av, TensorV) and av.dtype.is_symbolic():
        return None  # unknown parameter kind in the generic check
    got = _describe(av)
    raise SemError("N043", f"nl.{fname} needs a pointer (or a block of pointers), got {got}", node=node,
                   hint="pass a pointer parameter plus offsets, e.g. x_ptr + offsets")


def _scalar_list(b, av, what, node):
    items = av.items if isinstance(av, TupleV) else None
    if items is None:
        raise SemError("N023", f"{what} must be a list of scalars", node=node)
    for x in items:
        if isinstance(x, TensorV) and x.shape:
            raise SemError("N023", f"{what} must be scalars, not blocks", node=node)
    return items


def block_address(b, base, shape, strides, block_shape, offs, checked, node):
    """(pointers, mask) of the block of ``block_shape`` at ``offs`` of the tensor at ``base`` with ``shape``
    and ``strides``; the mask (None when no dimension is checked) keeps the elements whose index along each
    dimension of ``checked`` lies in ``[0, shape)``.  Descriptors check every dimension, block pointers the
    ``boundary_check`` ones."""
    call = b.call_builtin
    rank = len(block_shape)
    ptr, mask = base, None
    for d, (off, n, size, stride) in enumerate(zip(offs, block_shape, shape, strides)):
        end = Const(n) if isinstance(n, int) else Sym(n.expr)  # a block dimension the generic analysis lacks
        idx = call("arange", [Const(0), end], {}, node, [node, node], {})
        for e in range(rank):
            if e != d:
                idx = call("expand_dims", [idx, Const(e)], {}, node, [node, node], {})
        idx = b.binop("add", idx, off, node)
        ptr = b.binop("add", ptr, b.binop("mul", idx, stride, node), node)
        if d in checked:
            inb = b.binop("and", b.binop("ge", idx, Const(0), node), b.binop("lt", idx, size, node), node)
            mask = inb if mask is None else b.binop("and", mask, inb, node)
    return ptr, mask
