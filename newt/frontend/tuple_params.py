"""Kernel parameters that receive a tuple (plain or named, nested) at launch.

The runtime specializes each element like an argument of its own (``newt.runtime.specialize.TupleArg``):
run-time elements become kernel parameters named ``name.i.j`` in the IR, constexpr elements are
compile-time values, and the parameter itself is bound to a tuple of those values in the kernel body.
"""

from __future__ import annotations

from newt import ir

from .values import DescV, TensorV, TupleV


def bind_tuple_param(builder, name: str, ta, body, params: list, path: tuple = ()):
    """Add the IR parameters of tuple parameter ``name`` (its ``TupleArg`` ``ta``); return its value: a
    ``TupleV``, or for a host-side ``TensorDescriptor`` (a ``DescArg``: the tuple ``(base, *shape,
    *strides)`` plus a compile-time block shape) the ``DescV`` that ``nl.make_tensor_descriptor`` makes."""
    items: list = []
    for i, leaf in enumerate(ta.leaves):
        pth = path + (i,)
        if getattr(leaf, "__newt_tuple_arg__", False):
            items.append(bind_tuple_param(builder, name, leaf, body, params, pth))
            continue
        if leaf[0] == "cx":
            items.append(builder._constexpr_value(leaf[1], name))
            continue
        ty = leaf[1]
        leaf_name = name + "".join(f".{k}" for k in pth)
        v = ir.Value(ty, name=leaf_name)
        body.args.append(v)
        v.owner = body
        v.index = len(body.args) - 1
        params.append(ir.Param(leaf_name, ty, v))
        items.append(TensorV(v))
    if getattr(ta, "__newt_desc_arg__", False):
        rank = len(ta.block_shape)
        return DescV(items[0], items[1:1 + rank], items[1 + rank:], ta.block_shape, ta.padding)
    return TupleV(items, fields=getattr(ta, "fields", None))
