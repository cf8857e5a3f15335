"""Type rules of ``nl.load``, ``store`` and the atomics."""

from __future__ import annotations

from newt.diagnostics import Severity
from newt.ir.types import block_of, dims_equal, shape_of
from newt.language import core as lc

from ..ops import Bound, _poison, const_int, const_str, need_tensor, rule
from ..semantic import SemError, broadcast_shapes, check_block_shape, fmt_shape
from ..values import Const, DescV, Opaque, TensorV, TupleV
from .addressing import _pointer, _scalar_list, block_address


def _mask(b, av, node):
    _poison(av)
    if isinstance(av, Const) and av.value is None:
        return None
    if isinstance(av, Const) and isinstance(av.value, bool):
        return b.constant(av.value, lc.int1, node)
    t = need_tensor(b, av, "the mask", node)
    if t.dtype.is_symbolic():
        return t.v
    return b.to_bool(t, node)


@rule("load")
def _load(b, a: Bound, node):
    from .blockptr import BlockPtrV, load_block, possibly_block_pointer
    if isinstance(a["pointer"], BlockPtrV):
        return load_block(b, a, node)
    if possibly_block_pointer(a):  # a helper's parameter of unknown kind: may be a block pointer
        return Opaque()
    p = _pointer(b, a["pointer"], "load", a.node("pointer"))
    cache = const_str(a["cache_modifier"], "cache_modifier", ("", ".ca", ".cg", ".cv", ".cs", ".lu"),
                      a.node("cache_modifier"))
    evict = const_str(a["eviction_policy"], "eviction_policy", ("", "evict_first", "evict_last", "evict_normal"),
                      a.node("eviction_policy"))
    vol = a["volatile"]
    if a.given("boundary_check") and not (isinstance(a["boundary_check"], TupleV) and not a["boundary_check"].items):
        raise SemError("N023", "boundary_check applies to block pointers (nl.make_block_ptr), not to a pointer or "
                       "a block of pointers: the bounds are not known here", hint="use mask= instead",
                       node=a.node("boundary_check"))
    if a.given("padding_option") and not (isinstance(a["padding_option"], Const) and not a["padding_option"].value):
        raise SemError("N023", "padding_option applies to block pointers (nl.make_block_ptr) only",
                       hint="use other= with mask=", node=a.node("padding_option"))
    mask = _mask(b, a["mask"], a.node("mask"))
    other = a["other"]
    _poison(other)
    if p is None:
        ptr = a["pointer"]
        assert isinstance(ptr, TensorV)  # _pointer returns None for a pointer of unknown kind only
        return TensorV(b.emit("load", [ptr.v], [ptr.type], {}, node=node).result)
    elem = p.dtype.element_ty
    shape = p.shape
    if mask is not None:
        shape = broadcast_shapes(shape, shape_of(mask.type), "pointer and mask")
    has_other = not (isinstance(other, Const) and other.value is None)
    if has_other:
        if mask is None:
            b.report("N023", "nl.load: 'other' has no effect without a mask", a.node("other"),
                     severity=Severity.WARNING)
        if isinstance(other, TensorV):
            shape = broadcast_shapes(shape, other.shape, "pointer and other")
    pv = b.broadcast_value(p.v, shape, node)
    ops = [pv]
    if mask is not None:
        ops.append(b.broadcast_value(mask, shape, node))
    if has_other and mask is not None:
        ops.append(b.as_tensor(other, elem, shape, node))
    attrs = {"cache": cache, "evict": evict, "volatile": bool(getattr(vol, "value", False))}
    return TensorV(b.emit("load", ops, [block_of(elem, shape)], attrs, node=node).result)


@rule("store")
def _store(b, a: Bound, node):
    from .blockptr import BlockPtrV, possibly_block_pointer, store_block
    if isinstance(a["pointer"], BlockPtrV):
        return store_block(b, a, node)
    if possibly_block_pointer(a):
        return Const(None)
    p = _pointer(b, a["pointer"], "store", a.node("pointer"))
    if p is not None and a.given("boundary_check") and \
            not (isinstance(a["boundary_check"], TupleV) and not a["boundary_check"].items):
        raise SemError("N023", "boundary_check applies to block pointers (nl.make_block_ptr), not to a pointer or "
                       "a block of pointers: the bounds are not known here", hint="use mask= instead",
                       node=a.node("boundary_check"))
    cache = const_str(a["cache_modifier"], "cache_modifier", ("", ".wb", ".cg", ".cs", ".wt"),
                      a.node("cache_modifier"))
    evict = const_str(a["eviction_policy"], "eviction_policy", ("", "evict_first", "evict_last", "evict_normal"),
                      a.node("eviction_policy"))
    val = a["value"]
    _poison(val)
    mask = _mask(b, a["mask"], a.node("mask"))
    if p is None:
        return Const(None)
    elem = p.dtype.element_ty
    shape = p.shape
    if isinstance(val, TensorV):
        if val.dtype.is_ptr() and not elem.is_ptr() and not (elem.is_int() and elem.primitive_bitwidth == 64):
            raise SemError("N023", f"cannot store a pointer into memory of {elem!r}", node=a.node("value"),
                           hint="pointers are stored as 64-bit integers (nl.int64 / nl.uint64 memory)")
        vs = val.shape
        if len(vs) > len(shape) or any(dims_equal(x, y) is False and x != 1 for x, y in
                                       zip(vs[::-1], shape[::-1])):
            if not shape:
                raise SemError("N030", f"cannot store a block of shape {fmt_shape(vs)} through a scalar pointer",
                               node=a.node("value"), hint="build a block of pointers: ptr + nl.arange(0, N)")
            raise SemError("N030", f"the value's shape {fmt_shape(vs)} does not broadcast to the pointer's shape "
                           f"{fmt_shape(shape)}", node=a.node("value"))
    if mask is not None:
        shape = broadcast_shapes(shape, shape_of(mask.type), "pointer and mask")
    pv = b.broadcast_value(p.v, shape, node)
    vv = b.as_tensor(val, elem, shape, node)
    ops = [pv, vv]
    if mask is not None:
        ops.append(b.broadcast_value(mask, shape, node))
    b.emit("store", ops, [], {"cache": cache, "evict": evict}, node=node)
    return Const(None)


_SEMS = (None, "", "acq_rel", "acquire", "release", "relaxed")
_SCOPES = (None, "", "gpu", "cta", "sys")


def _sem_scope(a: Bound) -> dict:
    """The memory order and scope the call gives (the op table, newt.ir.ops, has the defaults)."""
    s1 = const_str(a["sem"], "sem", _SEMS, a.node("sem"))
    s2 = const_str(a["scope"], "scope", _SCOPES, a.node("scope"))
    return {k: v for k, v in (("sem", s1), ("scope", s2)) if v}


@rule("atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg")
def _atomic(b, a: Bound, node):
    kind = a.name.split("_", 1)[1]
    p = _pointer(b, a["pointer"], a.name, a.node("pointer"))
    order = _sem_scope(a)
    val = a["val"]
    _poison(val)
    mask = _mask(b, a["mask"], a.node("mask"))
    if p is None:
        return Opaque()
    elem = p.dtype.element_ty
    if not elem.is_symbolic():
        if kind in ("and", "or", "xor") and not elem.is_int():
            raise SemError("N021", f"nl.{a.name} needs integer memory, got {elem!r}", node=a.node("pointer"))
        if kind == "add" and elem.name not in ("int32", "uint32", "int64", "uint64", "fp16", "bf16", "fp32", "fp64"):
            raise SemError("N023", f"nl.atomic_add does not support {elem!r}", node=a.node("pointer"),
                           hint="use 32/64-bit integers or fp16/bf16/fp32/fp64")
        if kind in ("max", "min") and elem.name not in ("int32", "uint32", "int64", "uint64", "fp32", "fp64",
                                                        "fp16", "bf16"):
            raise SemError("N023", f"nl.{a.name} does not support {elem!r}", node=a.node("pointer"))
        if kind == "xchg" and elem.primitive_bitwidth not in (16, 32, 64):
            raise SemError("N023", f"nl.atomic_xchg does not support {elem!r}", node=a.node("pointer"))
    shape = p.shape
    if isinstance(val, TensorV):
        shape = broadcast_shapes(shape, val.shape, "pointer and value")
    if mask is not None:
        shape = broadcast_shapes(shape, shape_of(mask.type), "pointer and mask")
    ops = [b.broadcast_value(p.v, shape, node), b.as_tensor(val, elem, shape, node)]
    if mask is not None:
        ops.append(b.broadcast_value(mask, shape, node))
    attrs = {"kind": kind, **order}
    return TensorV(b.emit("atomic_rmw", ops, [block_of(elem, shape)], attrs, node=node).result)


@rule("atomic_cas")
def _atomic_cas(b, a: Bound, node):
    p = _pointer(b, a["pointer"], "atomic_cas", a.node("pointer"))
    order = _sem_scope(a)
    cmp, val = a["cmp"], a["val"]
    _poison(cmp, val)
    mask = _mask(b, a["mask"], a.node("mask"))
    if p is None:
        return Opaque()
    elem = p.dtype.element_ty
    if not elem.is_symbolic() and elem.primitive_bitwidth not in (16, 32, 64):
        raise SemError("N023", f"nl.atomic_cas does not support {elem!r}", node=a.node("pointer"))
    shape = p.shape
    for v in (cmp, val):
        if isinstance(v, TensorV):
            shape = broadcast_shapes(shape, v.shape, "pointer and value")
    if mask is not None:
        shape = broadcast_shapes(shape, shape_of(mask.type), "pointer and mask")
    ops = [b.broadcast_value(p.v, shape, node), b.as_tensor(cmp, elem, shape, node),
           b.as_tensor(val, elem, shape, node)]
    if mask is not None:
        ops.append(b.broadcast_value(mask, shape, node))
    return TensorV(b.emit("atomic_cas", ops, [block_of(elem, shape)], order,
                          node=node).result)


@rule("atomic_poll")
def _atomic_poll(b, a: Bound, node):
    p = _pointer(b, a["pointer"], "atomic_poll", a.node("pointer"))
    exp = a["expected_value"]
    _poison(exp)
    sem = const_str(a["sem"], "sem", (None, "", "acquire", "relaxed"), a.node("sem"))
    scope = const_str(a["scope"], "scope", _SCOPES, a.node("scope"))
    if p is None:
        return Opaque()
    elem = p.dtype.element_ty
    if not elem.is_symbolic() and not (elem.is_int() and elem.primitive_bitwidth in (16, 32, 64)):
        raise SemError("N023", f"nl.atomic_poll polls 16-, 32- or 64-bit integers, not {elem!r}",
                       node=a.node("pointer"))
    shape = p.shape
    ops = [p.v, b.as_tensor(exp, elem, shape, node)]
    t = a["timeout_ns"]
    if not (isinstance(t, Const) and t.value is None):
        ops.append(b.as_tensor(t, lc.int64, (), node))
    attrs = {k: v for k, v in (("sem", sem), ("scope", scope)) if v}
    return TensorV(b.emit("atomic_poll", ops, [block_of(lc.int1, shape)], attrs, node=node).result)


# ---------------------------------------------------------------------------
# tensor descriptors: masked block loads and stores (the Hopper backend may lower them to TMA)
# ---------------------------------------------------------------------------


@rule("make_tensor_descriptor")
def _make_desc(b, a: Bound, node):
    base = _pointer(b, a["base"], "make_tensor_descriptor", a.node("base"))
    if base is None:
        return Opaque()
    if base.shape:
        raise SemError("N043", "nl.make_tensor_descriptor needs a scalar base pointer", node=a.node("base"))
    shape = _scalar_list(b, a["shape"], "nl.make_tensor_descriptor shape", a.node("shape"))
    strides = _scalar_list(b, a["strides"], "nl.make_tensor_descriptor strides", a.node("strides"))
    bs_av = a["block_shape"]
    bs_items = bs_av.items if isinstance(bs_av, TupleV) else None
    if bs_items is None:
        raise SemError("N010", "nl.make_tensor_descriptor block_shape must be a list of constexpr ints",
                       node=a.node("block_shape"))
    block = [const_int(x, "nl.make_tensor_descriptor block_shape", a.node("block_shape"), allow_sym=False)
             for x in bs_items]
    if not (len(shape) == len(strides) == len(block)):
        raise SemError("N030", f"nl.make_tensor_descriptor: shape, strides and block_shape have different lengths "
                       f"({len(shape)}, {len(strides)}, {len(block)})", node=node)
    try:
        check_block_shape(tuple(block), "descriptor block")
    except SemError as e:
        e.node = a.node("block_shape")
        raise
    last = strides[-1]
    if isinstance(last, Const) and last.value != 1:
        raise SemError("N023", f"nl.make_tensor_descriptor: the last stride must be 1, got {last.value}",
                       node=a.node("strides"))
    elem = base.dtype.element_ty
    if not elem.is_symbolic() and block[-1] * max(1, elem.primitive_bitwidth // 8) < 16:
        raise SemError("N023", f"nl.make_tensor_descriptor: the block's last dimension is "
                       f"{block[-1] * max(1, elem.primitive_bitwidth // 8)} bytes. Descriptor block shape must have "
                       "at least 16 bytes in the last dimension", node=a.node("block_shape"))
    pad = const_str(a["padding_option"], "padding_option", ("zero", "nan"), a.node("padding_option"))
    return DescV(base, shape, strides, block, pad or "zero")


def desc_address(b, desc, offsets_av, node):
    """(pointers, in-bounds mask) of the descriptor's block at ``offsets``."""
    offs = _scalar_list(b, offsets_av, "descriptor offsets", node)
    rank = len(desc.block_shape)
    if len(offs) != rank:
        raise SemError("N030", f"a descriptor of rank {rank} needs {rank} offsets, got {len(offs)}", node=node)
    return block_address(b, desc.base, desc.shape, desc.strides, desc.block_shape, offs, range(rank), node)


def desc_load(b, desc, offsets_av, node):
    ptr, mask = desc_address(b, desc, offsets_av, node)
    other = Const(float("nan")) if desc.padding == "nan" else Const(0)
    n = len(b.ctx.region.ops)
    return _mark_descriptor(b, n, b.call_builtin("load", [ptr, mask, other], {}, node, [node] * 3, {}))


def _mark_descriptor(b, n: int, result):
    """Tag the load/store just emitted (the region's ops from index ``n`` on) as a tensor descriptor's tile:
    the backend's TMA policy (``newt/backend/cuda/tma.py``) may send descriptor tiles through TMA while
    leaving the pointer form on its own switch."""
    for op in b.ctx.region.ops[n:]:
        if op.name in ("load", "store"):
            op.attrs["descriptor"] = True
    return result


def desc_store(b, desc, offsets_av, value, node):
    ptr, mask = desc_address(b, desc, offsets_av, node)
    if isinstance(value, TensorV) and value.shape and tuple(value.shape) != tuple(desc.block_shape):
        raise SemError("N030", f"the value stored through a descriptor has shape {fmt_shape(value.shape)}, "
                       f"not the block shape {fmt_shape(desc.block_shape)}", node=node)
    n = len(b.ctx.region.ops)
    return _mark_descriptor(b, n, b.call_builtin("store", [ptr, value, mask], {}, node, [node] * 3, {}))
