"""Type rules of ``nl.sum``, ``max``/``min``, ``argmax``, ``reduce``, ``associative_scan``, ``cumsum``,
``histogram``."""

from __future__ import annotations

from newt.ir.types import SymDim, block_of, numel, scalar_of, shape_of, type_str
from newt.language import core as lc

from ..ops import Bound, _poison, const_dtype, const_int, need_block, need_tensor, rule
from ..semantic import SemError, check_block_shape, fmt_shape, normalize_axis
from ..values import Const, JitRef, Opaque, TensorV, TupleV


def _reduce_setup(b, a: Bound, node, key="input"):
    x = need_tensor(b, a[key], f"nl.{a.name} input", a.node(key))
    axis_av = a["axis"]
    _poison(axis_av)
    if not x.shape:
        raise SemError("N032", f"nl.{a.name} needs a block; it got a scalar", node=a.node(key))
    if isinstance(axis_av, Const) and axis_av.value is None:
        n = numel(x.shape)
        flat = (n if n is not None else SymDim("numel"),)
        v = x.v
        if len(x.shape) > 1:
            v = b.emit("reshape", [v], [block_of(x.dtype, flat)], {"shape": list(flat), "can_reorder": True},
                       node=node).result
        return TensorV(v), 0, True
    ax = const_int(axis_av, f"nl.{a.name} axis", a.node("axis"), allow_sym=False)
    try:
        ax = normalize_axis(ax, len(x.shape), f"nl.{a.name} axis")
    except SemError as e:
        e.node = a.node("axis")
        raise
    return x, ax, False


def _reduced_shape(shape, axis):
    return tuple(d for i, d in enumerate(shape) if i != axis)


def _keep(b, v, axis, keep, node):
    if keep:
        return TensorV(b._expand_dims(v, axis, node))
    return TensorV(v)


def _sum_dtype(t, explicit):
    if explicit is not None:
        return explicit
    if t.is_int() and not t.is_symbolic():
        if t.is_bool():
            return lc.int32
        if t.int_bitwidth < 32:
            return lc.int32 if t.is_int_signed() else lc.uint32
    return t


@rule("sum", "xor_sum")
def _sum(b, a: Bound, node):
    x, ax, flat = _reduce_setup(b, a, node)
    keep = bool(getattr(a["keep_dims"], "value", False))
    v = x.v
    t = x.dtype
    if a.name == "sum":
        dt_av = a["dtype"]
        explicit = None if (isinstance(dt_av, Const) and dt_av.value is None) else const_dtype(dt_av, "dtype")
        rt = _sum_dtype(t, explicit)
        if t.is_ptr():
            raise SemError("N023", "cannot sum pointers")
        if rt != t:
            v = b.cast_value(v, rt, node)
        combine = "add"
    else:
        if t.is_floating():
            raise SemError("N021", f"nl.xor_sum needs integers, got {t!r}")
        rt = t
        combine = "xor"
    out_shape = _reduced_shape(shape_of(v.type), ax)
    r = b.emit("reduce", [v], [block_of(rt, out_shape)], {"axis": ax, "combine": combine}, node=node).result
    return _keep(b, r, ax, keep and not flat, node)


@rule("max", "min")
def _max(b, a: Bound, node):
    x, ax, flat = _reduce_setup(b, a, node)
    keep = bool(getattr(a["keep_dims"], "value", False))
    if x.dtype.is_ptr():
        raise SemError("N023", f"nl.{a.name} is not defined for pointers")
    ri = a["return_indices"]
    if isinstance(ri, Const) and ri.value:
        tie = bool(getattr(a["return_indices_tie_break_left"], "value", True))
        v, i = _arg_reduce(b, x, ax, "arg" + a.name, tie, node)
        return TupleV([_keep(b, v, ax, keep and not flat, node), _keep(b, i, ax, keep and not flat, node)])
    out_shape = _reduced_shape(x.shape, ax)
    attrs = {"axis": ax, "combine": a.name}
    r = b.emit("reduce", [x.v], [block_of(x.dtype, out_shape)], attrs, node=node).result
    return _keep(b, r, ax, keep and not flat, node)


def _arg_reduce(b, x, ax, combine, tie_left, node):
    n = x.shape[ax]
    idx = b.emit("arange", [], [block_of(lc.int32, (n,))], {"start": 0, "end": n if isinstance(n, int) else 0},
                 node=node).result
    rank = len(x.shape)
    for k in range(rank):
        if k != ax:
            idx = b._expand_dims(idx, k, node) if k < ax else b._expand_dims(idx, len(shape_of(idx.type)), node)
    idx = b.broadcast_value(idx, x.shape, node)
    out_shape = _reduced_shape(x.shape, ax)
    op = b.emit("reduce", [x.v, idx], [block_of(x.dtype, out_shape), block_of(lc.int32, out_shape)],
                {"axis": ax, "combine": combine, "tie_break_left": tie_left}, node=node)
    return op.results[0], op.results[1]


@rule("argmax", "argmin")
def _argmax(b, a: Bound, node):
    x, ax, flat = _reduce_setup(b, a, node)
    keep = bool(getattr(a["keep_dims"], "value", False))
    tie = bool(getattr(a["tie_break_left"], "value", True))
    v, i = _arg_reduce(b, x, ax, a.name, tie, node)
    return _keep(b, i, ax, keep and not flat, node)


def _combine_region(b, fn_av, elem_types, node, what):
    from newt import ir
    _poison(fn_av)
    if not isinstance(fn_av, JitRef):
        raise SemError("N023", f"{what} combine_fn must be a @newt.jit function")
    region = ir.Region([ir.Value(t) for t in elem_types] * 1 + [ir.Value(t) for t in elem_types])
    saved = b.region
    b.region = region
    try:
        args = [TensorV(v) for v in region.args]
        res = b.inline(fn_av.fn, args, {}, node, [node] * len(args), {})
        items = res.items if isinstance(res, TupleV) else [res]
        if any(isinstance(r, Opaque) for r in items):
            from .values import Poison as _Poison
            raise _Poison()
        if len(items) != len(elem_types):
            raise SemError("N042", f"{what} combine_fn returns {len(items)} value(s), expected {len(elem_types)}")
        vals = []
        for r, t in zip(items, elem_types):
            v = b.as_tensor(r, t, (), node) if not isinstance(r, TensorV) else r.v
            if v.type != t:
                if shape_of(v.type):
                    raise SemError("N042", f"{what} combine_fn must return scalars, got {type_str(v.type)}")
                v = b.cast_value(v, t, node)
            vals.append(v)
        b.emit("yield", vals, [], node=None)
    finally:
        b.region = saved
    return region


def _inputs(b, av, what, node):
    _poison(av)
    items = av.items if isinstance(av, TupleV) else [av]
    ts = [need_tensor(b, x, what, node) for x in items]
    shape = ts[0].shape
    for t in ts[1:]:
        if t.shape != shape:
            raise SemError("N030", f"all inputs of {what} must have the same shape")
    return ts, isinstance(av, TupleV)


@rule("reduce")
def _reduce(b, a: Bound, node):
    ts, is_tuple = _inputs(b, a["input"], "nl.reduce", a.node("input"))
    keep = bool(getattr(a["keep_dims"], "value", False))
    if not ts[0].shape:
        raise SemError("N032", "nl.reduce needs blocks, got a scalar")
    axis_av = a["axis"]
    vals = [t.v for t in ts]
    if isinstance(axis_av, Const) and axis_av.value is None:
        n = numel(ts[0].shape)
        flat = (n if n is not None else SymDim("numel"),)
        vals = [b.emit("reshape", [v], [block_of(scalar_of(v.type), flat)], {"shape": list(flat),
                       "can_reorder": True}, node=node).result if len(ts[0].shape) > 1 else v for v in vals]
        ax, keep = 0, False
    else:
        ax = normalize_axis(const_int(axis_av, "nl.reduce axis", a.node("axis"), allow_sym=False),
                            len(ts[0].shape), "nl.reduce axis")
    elem_types = [scalar_of(v.type) for v in vals]
    region = _combine_region(b, a["combine_fn"], elem_types, node, "nl.reduce")
    out_shape = _reduced_shape(shape_of(vals[0].type), ax)
    op = b.emit("reduce", vals, [block_of(t, out_shape) for t in elem_types], {"axis": ax, "combine": "region"},
                [region], node=node)
    outs = [_keep(b, r, ax, keep, node) for r in op.results]
    return TupleV(outs) if is_tuple else outs[0]


@rule("associative_scan")
def _assoc_scan(b, a: Bound, node):
    ts, is_tuple = _inputs(b, a["input"], "nl.associative_scan", a.node("input"))
    if not ts[0].shape:
        raise SemError("N032", "nl.associative_scan needs blocks, got a scalar")
    ax = normalize_axis(const_int(a["axis"], "nl.associative_scan axis", a.node("axis"), allow_sym=False),
                        len(ts[0].shape), "nl.associative_scan axis")
    rev = bool(getattr(a["reverse"], "value", False))
    elem_types = [t.dtype for t in ts]
    region = _combine_region(b, a["combine_fn"], elem_types, node, "nl.associative_scan")
    op = b.emit("scan", [t.v for t in ts], [t.type for t in ts], {"axis": ax, "reverse": rev,
                                                                     "combine": "region"}, [region], node=node)
    outs = [TensorV(r) for r in op.results]
    return TupleV(outs) if is_tuple else outs[0]


@rule("cumsum", "cumprod")
def _cum(b, a: Bound, node):
    x = need_tensor(b, a["input"], f"nl.{a.name} input", a.node("input"))
    if not x.shape:
        raise SemError("N032", f"nl.{a.name} needs a block, got a scalar")
    ax = normalize_axis(const_int(a["axis"], f"nl.{a.name} axis", a.node("axis"), allow_sym=False),
                        len(x.shape), f"nl.{a.name} axis")
    rev = bool(getattr(a["reverse"], "value", False))
    explicit = None
    if a.name == "cumsum":
        dt_av = a["dtype"]
        if not (isinstance(dt_av, Const) and dt_av.value is None):
            explicit = const_dtype(dt_av)
    rt = _sum_dtype(x.dtype, explicit)
    v = x.v if rt == x.dtype else b.cast_value(x.v, rt, node)
    combine = "add" if a.name == "cumsum" else "mul"
    return TensorV(b.emit("scan", [v], [v.type], {"axis": ax, "reverse": rev, "combine": combine},
                          node=node).result)


@rule("histogram")
def _histogram(b, a: Bound, node):
    x = need_block(a["input"], "nl.histogram input", a.node("input"))
    if len(x.shape) != 1:
        raise SemError("N032", f"nl.histogram needs a 1-D block, got shape {fmt_shape(x.shape)}",
                       node=a.node("input"))
    if not (x.dtype.is_int() or x.dtype.is_symbolic()):
        raise SemError("N023", f"nl.histogram counts integers, not {x.dtype!r}", node=a.node("input"),
                       hint="convert with .to(nl.int32)")
    nb = const_int(a["num_bins"], "nl.histogram num_bins", a.node("num_bins"), allow_sym=False)
    try:
        check_block_shape((nb,), "nl.histogram num_bins")
    except SemError as e:
        e.node = a.node("num_bins")
        raise
    ops = [x.v]
    mask = a["mask"]
    if not (isinstance(mask, Const) and mask.value is None):
        mv = b.to_bool(need_tensor(b, mask, "nl.histogram mask", a.node("mask")), node)
        ops.append(b.broadcast_value(mv, x.shape, node))
    return TensorV(b.emit("histogram", ops, [block_of(lc.int32, (nb,))], {"num_bins": nb}, node=node).result)
