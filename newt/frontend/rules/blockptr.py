"""Block pointers (``nl.make_block_ptr``, ``nl.advance``, ``nl.load/store(bp, boundary_check=...)``).

Triton 3.7 deprecated them and 3.9 removed them, but published kernels use them; newt accepts them with an
N080 warning at ``make_block_ptr`` (the editor's quick fix rewrites the common forms to tensor descriptors)
and lowers them like descriptors: a load or store is a pointer block ``base + sum((offset_d + i_d) *
stride_d)`` with a mask over the ``boundary_check`` dimensions (``rules/memory.py``'s ``block_address``).
The interpreter and the CUDA backend see ordinary loads and stores.

A block pointer is a compile-time record of run-time scalars (:class:`BlockPtrV`); loops carry its
run-time parts (:func:`split_carried` / :func:`join_carried`, called by the loop statements).
"""

from __future__ import annotations

from newt.diagnostics import Severity
from newt.ir.types import dims_equal

from ..ops import Bound, _poison, const_int, const_str, parse_shape, rule
from ..semantic import SemError, fmt_shape
from ..values import AV, Const, Opaque, Sym, TensorV, TupleV
from .addressing import _pointer, _scalar_list, block_address

DEPRECATED = "N080"


class BlockPtrV(AV):
    """A block pointer: the base pointer (a scalar), the tensor's shape and strides and the block's
    offsets (scalars), the constexpr block shape and order."""

    __slots__ = ("base", "shape", "strides", "offsets", "block_shape", "order")

    def __init__(self, base, shape, strides, offsets, block_shape, order):
        self.base = base
        self.shape = list(shape)
        self.strides = list(strides)
        self.offsets = list(offsets)
        self.block_shape = tuple(block_shape)
        self.order = tuple(order)

    @property
    def dtype(self):
        return self.base.dtype.element_ty

    def parts(self) -> list:
        return [self.base] + self.shape + self.strides + self.offsets

    def with_parts(self, parts) -> BlockPtrV:
        r = len(self.block_shape)
        return BlockPtrV(parts[0], parts[1:1 + r], parts[1 + r:1 + 2 * r], parts[1 + 2 * r:], self.block_shape,
                         self.order)

    def __repr__(self):
        return f"BlockPtrV({self.dtype!r}, block {list(self.block_shape)})"


def _ints(b, av, what, node) -> list[AV]:
    items = _scalar_list(b, av, what, node)
    out = []
    for x in items:
        _poison(x)
        if isinstance(x, TensorV) and not (x.dtype.is_int() or x.dtype.is_symbolic()):
            raise SemError("N023", f"{what} must be integers, got {x.dtype!r}", node=node)
        if isinstance(x, Const) and not (isinstance(x.value, int) and not isinstance(x.value, bool)):
            raise SemError("N023", f"{what} must be integers, got {x.value!r}", node=node)
        out.append(x)
    return out


@rule("make_block_ptr")
def _make_block_ptr(b, a: Bound, node):
    b.report(DEPRECATED, "nl.make_block_ptr is deprecated (Triton 3.7 deprecated block pointers and 3.9 removed "
             "them); newt still lowers it, like a tensor descriptor", node,
             hint="use nl.make_tensor_descriptor(base, shape, strides, block_shape) and desc.load([offsets])",
             data={"construct": "make_block_ptr"}, severity=Severity.WARNING)
    base = _pointer(b, a["base"], "make_block_ptr", a.node("base"))
    if base is None:
        return Opaque()
    if base.shape:
        raise SemError("N043", "nl.make_block_ptr needs a scalar base pointer, not a block of pointers",
                       node=a.node("base"))
    shape = _ints(b, a["shape"], "nl.make_block_ptr shape", a.node("shape"))
    strides = _ints(b, a["strides"], "nl.make_block_ptr strides", a.node("strides"))
    offsets = _ints(b, a["offsets"], "nl.make_block_ptr offsets", a.node("offsets"))
    block = list(parse_shape(b, a["block_shape"], a.node("block_shape"), "nl.make_block_ptr block_shape"))
    order_av = a["order"]
    if not isinstance(order_av, TupleV):
        raise SemError("N010", "nl.make_block_ptr order must be a tuple of constexpr ints", node=a.node("order"))
    order = [const_int(x, "nl.make_block_ptr order", a.node("order")) for x in order_av.items]
    rank = len(block)
    if not (len(shape) == len(strides) == len(offsets) == rank == len(order)):
        raise SemError("N030", f"nl.make_block_ptr: shape, strides, offsets, block_shape and order have different "
                       f"lengths ({len(shape)}, {len(strides)}, {len(offsets)}, {rank}, {len(order)})", node=node)
    if all(isinstance(o, int) for o in order) and sorted(order) != list(range(rank)):
        raise SemError("N023", f"nl.make_block_ptr order must be a permutation of the dimensions 0..{rank - 1}, "
                       f"got {tuple(order)}", node=a.node("order"))
    offsets = [b.as_tensor(o, _offset_type(o), (), node) if isinstance(o, (Const, Sym)) else o for o in offsets]
    return BlockPtrV(base, shape, strides, [TensorV(o) if not isinstance(o, AV) else o for o in offsets], block,
                     tuple(o if isinstance(o, int) else None for o in order))


def _offset_type(av):
    from newt.language import core as lc
    if isinstance(av, Const) and not -(2 ** 31) <= av.value < 2 ** 31:
        return lc.int64
    return lc.int32


@rule("advance")
def _advance(b, a: Bound, node):
    bp = a["base"]
    _poison(bp)
    if not isinstance(bp, BlockPtrV):
        if isinstance(bp, TensorV) and bp.dtype.is_symbolic():
            return Opaque()  # a helper's parameter of unknown kind
        raise SemError("N023", "nl.advance needs a block pointer (from nl.make_block_ptr)", node=a.node("base"))
    deltas = _ints(b, a["offsets"], "nl.advance offsets", a.node("offsets"))
    if len(deltas) != len(bp.offsets):
        raise SemError("N030", f"nl.advance: a block pointer of rank {len(bp.offsets)} needs {len(bp.offsets)} "
                       f"offsets, got {len(deltas)}", node=a.node("offsets"))
    offs = [o if isinstance(d, Const) and d.value == 0 else b.binop("add", o, d, node)
            for o, d in zip(bp.offsets, deltas)]
    return BlockPtrV(bp.base, bp.shape, bp.strides, offs, bp.block_shape, bp.order)


def _checked(a: Bound, rank: int, fname: str) -> set:
    bc = a["boundary_check"]
    _poison(bc)
    items = bc.items if isinstance(bc, TupleV) else [bc] if isinstance(bc, Const) and bc.value is not None else []
    if isinstance(bc, Const) and isinstance(bc.value, (tuple, list)):
        items = [Const(x) for x in bc.value]
    out = set()
    for it in items:
        d = const_int(it, f"nl.{fname} boundary_check", a.node("boundary_check"), allow_sym=False)
        if not 0 <= d < rank:
            raise SemError("N032", f"nl.{fname} boundary_check dimension {d} is out of range for a block pointer "
                           f"of rank {rank}", node=a.node("boundary_check"))
        out.add(d)
    return out


def _no_mask(a: Bound, fname: str, names):
    for k in names:
        v = a[k]
        if a.given(k) and not (isinstance(v, Const) and v.value is None):
            raise SemError("N023", f"nl.{fname}: {k}= cannot be used with a block pointer",
                           hint="boundary_check= masks a block pointer's out-of-bounds elements", node=a.node(k))


def load_block(b, a: Bound, node):
    """``nl.load(block_ptr, boundary_check=..., padding_option=...)``."""
    bp = a["pointer"]
    assert isinstance(bp, BlockPtrV)
    _no_mask(a, "load", ("mask", "other"))
    checked = _checked(a, len(bp.block_shape), "load")
    pad = const_str(a["padding_option"], "padding_option", ("", "zero", "nan"), a.node("padding_option"))
    if pad == "nan" and not (bp.dtype.is_floating() or bp.dtype.is_symbolic()):
        raise SemError("N023", f"padding_option='nan' needs floating-point elements, not {bp.dtype!r}",
                       node=a.node("padding_option"))
    ptr, mask = block_address(b, bp.base, bp.shape, bp.strides, bp.block_shape, bp.offsets, checked, node)
    kw = {k: a[k] for k in ("cache_modifier", "eviction_policy", "volatile") if a.given(k)}
    kw_nodes = {k: a.node(k) for k in kw}
    if mask is None:
        return b.call_builtin("load", [ptr], kw, node, [node], kw_nodes)
    other = Const(float("nan")) if pad == "nan" else Const(0) if pad == "zero" else Const(None)
    return b.call_builtin("load", [ptr, mask, other], kw, node, [node] * 3, kw_nodes)


def store_block(b, a: Bound, node):
    """``nl.store(block_ptr, value, boundary_check=...)``: the value broadcast to the block's shape."""
    bp = a["pointer"]
    assert isinstance(bp, BlockPtrV)
    _no_mask(a, "store", ("mask",))
    checked = _checked(a, len(bp.block_shape), "store")
    val = a["value"]
    _poison(val)
    if isinstance(val, TensorV) and val.shape:
        vs, bs = tuple(val.shape), bp.block_shape
        if len(vs) > len(bs) or any(x != 1 and dims_equal(x, y) is False for x, y in zip(vs[::-1], bs[::-1])):
            raise SemError("N030", f"the value stored through a block pointer has shape {fmt_shape(vs)}, which does "
                           f"not broadcast to the block shape {fmt_shape(bs)}", node=a.node("value"))
    ptr, mask = block_address(b, bp.base, bp.shape, bp.strides, bp.block_shape, bp.offsets, checked, node)
    kw = {k: a[k] for k in ("cache_modifier", "eviction_policy") if a.given(k)}
    kw_nodes = {k: a.node(k) for k in kw}
    args = [ptr, val] + ([mask] if mask is not None else [])
    return b.call_builtin("store", args, kw, node, [node, a.node("value")] + [node] * (len(args) - 2), kw_nodes)


def possibly_block_pointer(a: Bound) -> bool:
    """A load/store with ``boundary_check`` through a value of unknown kind (a helper's parameter in the
    generic analysis): it may be a block pointer, so nothing is reported."""
    p = a["pointer"]
    return isinstance(p, TensorV) and p.dtype.is_symbolic() and a.given("boundary_check")


# ---------------------------------------------------------------------------
# loops: a block pointer's run-time parts are carried as hidden scalars
# ---------------------------------------------------------------------------


def split_carried(bld, carried: list) -> dict:
    """For each carried name holding a block pointer, hidden scope names for its run-time parts (added to
    ``carried`` and bound in the scope; compile-time parts such as a stride of 1 stay in the record, so the
    backend still sees them); returns ``{name: (hidden names, part indices, record)}`` for
    :func:`join_carried`."""
    out = {}
    for n in list(carried):
        v = bld.scope.get(n)
        if not isinstance(v, BlockPtrV):
            continue
        idx = [i for i, p in enumerate(v.parts()) if not isinstance(p, Const)]
        hidden = [f"$bp:{n}:{i}" for i in idx]
        for h, i in zip(hidden, idx):
            bld.scope[h] = v.parts()[i]
            carried.append(h)
        out[n] = (hidden, idx, v)
    return out


def resplit_carried(bld, parts: dict, node) -> None:
    """At the end of a loop body: the block pointers' current run-time parts into their hidden names."""
    for n, (hidden, idx, proto) in parts.items():
        v = bld.scope.get(n)
        if isinstance(v, Opaque):
            continue
        same = isinstance(v, BlockPtrV) and v.block_shape == proto.block_shape
        if same:
            for i, (p, q) in enumerate(zip(v.parts(), proto.parts())):
                if i not in idx and not (isinstance(p, Const) and p.value == q.value):
                    same = False  # a compile-time part changed inside the loop
        if not same:
            what = "one of another shape, strides or block shape" if isinstance(v, BlockPtrV) else "another value"
            bld.report("N042", f"{n!r} holds a block pointer before the loop and {what} inside it", node,
                       hint="move it with nl.advance(ptr, offsets)")
            continue
        for h, i in zip(hidden, idx):
            bld.scope[h] = v.parts()[i]


def join_carried(bld, parts: dict) -> None:
    """Rebuild each block pointer from its hidden names (the loop's region arguments or results)."""
    for n, (hidden, idx, proto) in parts.items():
        vals = list(proto.parts())
        for h, i in zip(hidden, idx):
            vals[i] = bld.scope.get(h)
        if any(v is None or isinstance(v, Opaque) for v in vals):
            bld.scope[n] = Opaque()
        else:
            bld.scope[n] = proto.with_parts(vals)
        for h in hidden:
            bld.scope.pop(h, None)


def split_branches(then_s: dict, else_s: dict) -> dict:
    """After the two branches of a run-time ``if``: a name holding block pointers of one block shape on both
    becomes hidden names for their parts (merged like scalars; :func:`join_carried` rebuilds it)."""
    out = {}
    for n in [k for k in then_s if not k.startswith("$")]:
        a, b = then_s.get(n), else_s.get(n)
        if a is b or not (isinstance(a, BlockPtrV) and isinstance(b, BlockPtrV)) or a.block_shape != b.block_shape:
            continue
        pa, pb = a.parts(), b.parts()
        idx = [i for i, (x, y) in enumerate(zip(pa, pb)) if x is not y]  # the others are the same value
        hidden = [f"$bp:{n}:{i}" for i in idx]
        for h, i in zip(hidden, idx):
            then_s[h], else_s[h] = pa[i], pb[i]
        del then_s[n], else_s[n]
        out[n] = (hidden, idx, a)
    return out
