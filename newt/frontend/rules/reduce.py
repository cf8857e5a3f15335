"""Type rules of ``nl.sum``, ``max``/``min``, ``argmax``, ``reduce``, ``associative_scan``, ``cumsum``,
``histogram``."""

from __future__ import annotations

from newt.ir.types import SymDim, block_of, numel, scalar_of, shape_of, type_str
from newt.language import core as lc

from ..ops import Bound, _poison, const_dtype, const_int, need_block, need_tensor, rule
from ..semantic import SemError, check_block_shape, fmt_shape, normalize_axis
from ..values import Const, JitRef, Opaque, Poison, TensorV, TupleV


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
        if t.is_ptr():
            raise SemError("N023", "nl.xor_sum is not defined for pointers")
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
    if x.dtype.is_ptr():
        raise SemError("N023", f"nl.{a.name} is not defined for pointers")
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
            from ..values import Poison as _Poison
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
    if x.dtype.is_ptr():  # (as nl.sum: a sum or product of addresses is no address)
        raise SemError("N023", f"nl.{a.name} is not defined for pointers", node=a.node("input"))
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


# ---------------------------------------------------------------------------
# sort and topk: a bitonic network over the sorted dimension split into log2(n) dimensions of 2
# ---------------------------------------------------------------------------


def _sort_dim(b, a: Bound, x, what):
    rank = len(x.shape)
    d = a["dim"]
    if not (isinstance(d, Const) and d.value is None):
        dv = const_int(d, f"nl.{what} dim", a.node("dim"), allow_sym=False)
        if not -rank <= dv < rank:
            raise SemError("N032", f"nl.{what} dim {dv} is out of range for a block of rank {rank}",
                           node=a.node("dim"))
        if dv % rank != rank - 1:
            raise SemError("N032", f"nl.{what} sorts along the last dimension only (dim={dv})", node=a.node("dim"),
                           hint="permute the block so the dimension to sort is the last one")
    n = x.shape[-1]
    if not isinstance(n, int) and not b.spec.concrete:
        raise Poison()  # a size from a constexpr the generic check does not know: each specialization knows it
    if not isinstance(n, int):
        raise SemError("N010", f"nl.{what} needs a last dimension of known size", node=a.node("x"))
    return n


class _Cube:
    """A block reshaped so that bit ``k`` of the sorted index is its own dimension of size 2."""

    def __init__(self, b, x: TensorV, node):
        self.b, self.node = b, node
        self.outer = tuple(x.shape[:-1])
        self.bits = x.shape[-1].bit_length() - 1
        self.shape = self.outer + (2,) * self.bits
        self.dtype = x.dtype
        self.v = self.reshape(x.v, self.shape)

    def reshape(self, v, shape):
        return self.b.emit("reshape", [v], [block_of(scalar_of(v.type), shape)],
                           {"shape": list(shape), "can_reorder": False}, node=self.node).result

    def axis(self, k):
        """The dimension of index bit ``k`` (bit 0 is the last dimension)."""
        return len(self.outer) + self.bits - 1 - k

    def indicator(self, k):
        """int1, true where index bit ``k`` is set."""
        b, node = self.b, self.node
        i = b.emit("arange", [], [block_of(lc.int32, (2,))], {"start": 0, "end": 2}, node=node).result
        for d in range(len(self.shape)):
            if d != self.axis(k):
                i = b._expand_dims(i, d, node)
        one = b.constant(1, block_of(lc.int32, shape_of(i.type)), node)
        return b.broadcast_value(b.emit("eq", [i, one], [block_of(lc.int1, shape_of(i.type))], node=node).result,
                                 self.shape, node)

    def partner(self, v, k):
        """Each element's partner across bit ``k``: ``x ^ xor_sum(pair)`` on the bits."""
        b, node = self.b, self.node
        t = scalar_of(v.type)
        if t.is_bool():
            bits = b.cast_value(v, lc.int8, node)
        elif t.is_int():
            bits = v
        else:
            bits = b.cast_value(v, lc.dtype_from_name(f"i{t.primitive_bitwidth}"), node, bitcast=True)
        it = scalar_of(bits.type)
        ax = self.axis(k)
        r = b.emit("reduce", [bits], [block_of(it, self.shape[:ax] + self.shape[ax + 1:])],
                   {"axis": ax, "combine": "xor"}, node=node).result
        r = b.broadcast_value(b._expand_dims(r, ax, node), self.shape, node)
        p = b.emit("xor", [bits, r], [bits.type], node=node).result
        if t.is_bool():
            return b.cast_value(p, lc.int1, node)
        if t.is_int():
            return p
        return b.cast_value(p, t, node, bitcast=True)

    def compare_swap(self, v, flip, k):
        b, node = self.b, self.node
        y = self.partner(v, k)
        bt = block_of(lc.int1, self.shape)
        gt = b.emit("gt", [v, y], [bt], node=node).result
        right = self.indicator(k)
        # swap where "x > partner" disagrees with "this is the right position of an ascending pair"
        if flip is False:
            want = right
        else:
            other = b.constant(True, bt, node) if flip is True else flip
            want = b.emit("xor", [right, other], [bt], node=node).result
        swap = b.emit("ne", [gt, want], [bt], node=node).result
        return b.emit("where", [swap, y, v], [v.type], node=node).result

    def sort(self, descending: bool):
        v = self.v
        for stage in range(1, self.bits + 1):
            flip = self.indicator(stage) if stage < self.bits else bool(descending)
            for i in range(stage):
                v = self.compare_swap(v, flip, stage - 1 - i)
        return v


@rule("sort")
def _sort(b, a: Bound, node):
    x = need_block(a["x"], "nl.sort input", a.node("x"))
    n = _sort_dim(b, a, x, "sort")
    desc = a["descending"]
    if not isinstance(desc, Const):
        raise SemError("N010", "nl.sort descending must be a constexpr bool", node=a.node("descending"))
    if n == 1:
        return x
    cube = _Cube(b, x, node)
    return TensorV(cube.reshape(cube.sort(bool(desc.value)), x.shape))


@rule("topk")
def _topk(b, a: Bound, node):
    x = need_block(a["x"], "nl.topk input", a.node("x"))
    n = _sort_dim(b, a, x, "topk")
    k = const_int(a["k"], "nl.topk k", a.node("k"), allow_sym=False)
    if k < 1 or k > n or k & (k - 1):
        raise SemError("N011", f"nl.topk k must be a power of two in 1..{n}, got {k}", node=a.node("k"))
    desc = a["descending"]
    if not isinstance(desc, Const):
        raise SemError("N010", "nl.topk descending must be a constexpr bool", node=a.node("descending"))
    if n == 1:
        return x
    cube = _Cube(b, x, node)
    v = cube.reshape(cube.sort(bool(desc.value)), tuple(x.shape[:-1]) + (n // k, k))
    if n == k:
        return TensorV(cube.reshape(v, x.shape))
    # sorted rows of k: every element of the first row is beyond every element of the later ones, so the
    # column-wise max (min) is the first row
    ax = len(x.shape) - 1
    out = tuple(x.shape[:-1]) + (k,)
    return TensorV(b.emit("reduce", [v], [block_of(x.dtype, out)],
                          {"axis": ax, "combine": "max" if desc.value else "min"}, node=node).result)
