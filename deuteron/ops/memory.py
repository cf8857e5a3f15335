"""Memory ops: reads and writes of the kernel's tensors -- ``x[tile, :]`` (a load), ``out[tile] = v`` (a store),
``dt.load`` / ``dt.store`` -- and the index items of an access.

An access is a list of items, one per index: ``("tile", t, d[, clip])``, ``("red", rdim, d[, start[, size]])`` (a
whole dimension or a slice), ``("vec", node, d[, check])``, ``("scalar", v, d[, check])`` (``check``: the index is
not provably inside the dimension, ``(check_lower, size or None)``: see ``_index_item``), ``("none",)`` (a new dim
of 1).

Node kinds ``load`` and ``store``.
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..codegen_desc import emit_desc_store, plan_access, render_desc_load
from ..codegen_expr import _atom, _dt, _lit
from ..errors import (
    AliasedOutput,
    BadIndex,
    ExtraMask,
    ExtraMaskShape,
    IndexRank,
    MemoryTarget,
    MovingSlice,
    OperandKind,
    SliceBound,
    StoreShape,
    TileIndexing,
    TilePastEnd,
    UnknownOption,
    WholeTensor,
)
from ..index_range import bound_check
from ..optable import BOUND, EFFECT, MEMORY, NAMED, TILE_ATTR, has, node, op
from ..program import ONE, Node, TileInfo, same_dim
from ..trace_common import (
    HostTensor,
    _broadcast_dims,
    _describe,
    _dims_text,
    _index_text,
    _is_int_dtype,
)
from .elementwise import binop

# ---------------------------------------------------------------------------- node kinds


def render_load(g, n: Node) -> str:
    plan = plan_access(g, n, store=False)
    if plan is not None:  # the descriptor form (deuteron/codegen_desc.py)
        return render_desc_load(g, plan)
    ta = n.attrs["tensor"]
    ptr, mask = g.pointer(ta, n.attrs["items"], n.dims)
    if n.args:  # dt.load(..., extra_mask=)
        extra = g.aligned(n.args[0], len(g.rd(n.dims)), n.dims)
        mask = extra if mask is None else f"{mask} & {_atom(extra)}"
    ev = f", eviction_policy={n.attrs['eviction']!r}" if n.attrs.get("eviction") else ""
    if mask is None:
        return f"nl.load({ptr}{ev})"
    return f"nl.load({ptr}, mask={mask}, other=0{ev})"


def emit_store(g, n: Node, indent: int, atomic=False):
    if not atomic:
        plan = plan_access(g, n, store=True)
        if plan is not None:  # the descriptor form (deuteron/codegen_desc.py)
            emit_desc_store(g, n, plan, indent)
            return
    ta = n.attrs["tensor"]
    dims = n.attrs["dims"]
    ptr, mask = g.pointer(ta, n.attrs["items"], dims, keep_shape=True)
    if atomic and n.attrs.get("kind") in ("wait", "signal"):
        g.emit_sync(n, ptr, mask, indent)
        return
    v = n.args[0]
    cas = atomic and n.attrs.get("kind") == "cas"
    if len(n.args) > 1 and not cas:  # dt.store(..., extra_mask=)
        extra = g.aligned(n.args[1], len(g.rd(dims)), dims)
        mask = extra if mask is None else f"{mask} & {_atom(extra)}"

    def value_of(x):
        r = g.aligned(x, len(g.rd(dims)), dims) if isinstance(x, Node) else _lit(x)
        if isinstance(x, Node) and x.dtype != ta.dtype:
            r = f"{_atom(r)}.to({_dt(ta.dtype)})"
        return r
    val = value_of(v)
    if atomic:
        scope = n.attrs.get("scope", "gpu")
        order = f", sem={n.attrs['sem']!r}" + (f", scope={scope!r}" if scope != "gpu" else "")
        if cas:  # newt's atomic_cas: mask= is its extension over Triton's
            args = f"{ptr}, {value_of(n.args[1])}, {val}" + order + (f", mask={mask}" if mask else "")
        else:
            args = f"{ptr}, {val}" + (f", mask={mask}" if mask else "") + order
        old = n.attrs.get("old")
        call = f"nl.atomic_{n.attrs.get('kind', 'add')}({args})"
        if old is not None and g.use_count.get(old.id, 0) > 0:
            nm = g.names.fresh(f"old_{ta.name}")
            g.var[old.id] = nm
            g.w(indent, f"{nm} = {call}")
        else:
            g.w(indent, call)
    else:
        g.w(indent, f"nl.store({ptr}, {val}" + (f", mask={mask})" if mask else ")"))


node("load", MEMORY, NAMED, render=render_load,
     name_hint=lambda n: f"load_{n.attrs['tensor'].name}", family="memory", doc="a masked load (attrs: tensor, items)")
node("store", MEMORY, EFFECT, emit=emit_store, family="memory", doc="a masked store (attrs: tensor, items, dims)")

# ---------------------------------------------------------------------------- semantics


def index_items(tr, ht: HostTensor, slice_node, e):
    raw = tr.ev.eval(slice_node)
    idx = list(raw) if isinstance(raw, tuple) else [raw]
    flat = []
    for it in idx:
        if isinstance(it, (tuple, list)) and all(isinstance(x, (TileInfo, Node, int, slice, type(None)))
                                                 for x in it):
            flat.extend(it)
        else:
            flat.append(it)
    return items_for(tr, ht, flat, e)


def items_for(tr, ht: HostTensor, flat: list, e, clip: bool = False):
    """The index items of ``ht[flat]``; ``clip``: a tile may run past the end (``dt.load``: read as 0 there,
    an item ``("tile", t, d, size)``)."""
    tr._clip = clip
    try:
        return _items_for(tr, ht, flat, e)
    finally:
        tr._clip = False


def _items_for(tr, ht: HostTensor, flat: list, e):
    rank = ht.t.dim()
    n_real = sum(1 for it in flat if it is not None and it is not Ellipsis)
    if any(it is Ellipsis for it in flat):
        pos = flat.index(Ellipsis)
        flat = flat[:pos] + [slice(None)] * (rank - n_real) + flat[pos + 1:]
        n_real = rank
    if n_real != rank:
        parts = []
        for it in flat:
            parts.append(_index_text(it))
        raise IndexRank(e, what=ht.name, rank=rank, shape=f" (shape {tuple(ht.t.shape)})", count=n_real,
                        plural="ex" if n_real == 1 else "ices", items=f" [{', '.join(parts)}]")
    items = []
    d = 0
    for it in flat:
        if it is None:
            items.append(("none",))
            continue
        size = ht.t.shape[d]
        if isinstance(it, TileInfo):
            items.append(_tile_item(tr, ht, it, d, size, e))
        elif isinstance(it, slice):
            if it.start is None and it.stop is None and it.step is None:
                sz = tr.size_of(ht, d)
                r = tr.rdim(int(ht.t.shape[d]), sz, e)
                items.append(("red", r, d))
            else:
                items.append(_bounded_slice(tr, ht, it, d, e))
        elif isinstance(it, bool):
            raise BadIndex(e, problem="indexing with a bool")
        elif isinstance(it, int):
            if not -size <= it < max(size, 1):
                raise BadIndex(e, problem=f"index {it} is out of range for dimension {d} of {ht.name} "
                                          f"(size {size})")
            items.append(("scalar", it % size if size else it, d))
        elif isinstance(it, Node):
            if not _is_int_dtype(it.dtype):
                raise BadIndex(e, problem=f"indexing {ht.name} with a {it.dtype} value (indices must be ints)")
            if it.op == "tile_index":
                items.append(_tile_item(tr, ht, it.attrs["tile"], d, size, e))
            else:
                items.append(_index_item(tr, ht, "vec" if it.dims else "scalar", it, d))
        elif isinstance(it, HostTensor):
            raise BadIndex(e, problem=f"indexing with the tensor {it.name}: load it with tiles first")
        else:
            raise BadIndex(e, problem=f"cannot index {ht.name} with {_describe(it)}")
        d += 1
    return items


def _index_item(tr, ht: HostTensor, kind: str, v: Node, d: int):
    """``("vec", v, d)`` / ``("scalar", v, d)``: an index the kernel computes into dimension ``d``; where it is
    not provably inside the dimension (``deuteron.index_range``) the item carries the check, ``(kind, v, d,
    (check_lower, size or None))``: the access is masked with ``v >= 0`` / ``v < size`` too (issue 25)."""
    size = int(ht.t.shape[d]) if tr.static else f"{ht.name}_size_{d}"  # (the name tr.size_of gives it)
    check = bound_check(v, size)
    if check is None:
        return (kind, v, d)
    if v.name is None and not has(v, BOUND) and not has(v, TILE_ATTR):
        v.name = f"idx_{ht.name}"  # (read by the access and its check: a named value of the generated code)
    lower, upper = check
    return (kind, v, d, (lower, None if not upper else tr.size_of(ht, d)))


def _bounded_slice(tr, ht: HostTensor, it: slice, d: int, e):
    """``x[tile, a:b]``: a whole dimension of ``b - a`` elements starting at ``a`` (bounds known when compiling:
    ints, sizes with static shapes); ``("red", rdim, d, a)``.  ``x[tile, s:s + C]`` with a scalar ``s`` of the
    kernel (``tile.begin * 2``) and ``C`` known when compiling: ``("red", rdim, d, s, size)``, masked by the
    dimension's ``size`` (lanes past the end read 0 and are not written)."""
    moving = _moving_slice(tr, ht, it, d, e)
    if moving is not None:
        return moving
    bounds = []
    for what, v in (("start", it.start), ("stop", it.stop), ("step", it.step)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise SliceBound(e, tensor=ht.name, what=what, value=_describe(v))
        bounds.append(v)
    if not tr.static:
        raise SliceBound(e, tensor=ht.name, what="bounds", value="sizes passed at run time (static_shapes=False)")
    size = int(ht.t.shape[d])
    start, stop, step = slice(*bounds).indices(size)
    if step != 1:
        raise SliceBound(e, tensor=ht.name, what="step", value=str(step))
    n = stop - start
    if n < 1:
        raise SliceBound(e, tensor=ht.name, what="range", value=f"{start}:{stop} (empty)")
    r = tr.rdim(n, n, e)
    return ("red", r, d, start) if start else ("red", r, d)


def _moving_slice(tr, ht: HostTensor, it: slice, d: int, e):
    """``x[..., s + c0 : s + c1]`` with the same scalar ``s`` of the kernel in both bounds and ints ``c0 < c1``:
    ``c1 - c0`` elements from ``s + c0`` (None when neither bound is a kernel value)."""
    if not isinstance(it.start, Node) and not isinstance(it.stop, Node):
        return None
    if it.step not in (None, 1):
        raise SliceBound(e, tensor=ht.name, what="step", value=_describe(it.step))
    for what, v in (("start", it.start), ("stop", it.stop)):
        if isinstance(v, Node) and (v.dims or not _is_int_dtype(v.dtype)):
            raise SliceBound(e, tensor=ht.name, what=what,
                             value=f"a {'block' if v.dims else v.dtype} value of the kernel")
    if it.start is None or it.stop is None:  # x[t, s:] / x[t, :s]: a length that moves too
        what = "start" if isinstance(it.start, Node) else "stop"
        raise SliceBound(e, tensor=ht.name, what=what, value=f"{_describe(getattr(it, what))} with an open "
                                                              f"{'stop' if what == 'start' else 'start'} (a "
                                                              f"moving slice is s : s + C)")
    b0, c0 = _linear(it.start)
    b1, c1 = _linear(it.stop)
    if b0 is None or b1 is not b0:
        raise MovingSlice(e, tensor=ht.name, problem=f"start {_describe(it.start)} and stop "
                                                     f"{_describe(it.stop)} do not differ by an int known "
                                                     f"when compiling")
    n = c1 - c0
    if n < 1:
        raise SliceBound(e, tensor=ht.name, what="range", value=f"of {n} elements (empty)")
    start = it.start if isinstance(it.start, Node) else binop(tr, "add", b0, c0, e)
    r = tr.rdim(n, n, e)
    return ("red", r, d, start, tr.size_of(ht, d))


def _tile_item(tr, ht: HostTensor, t: TileInfo, d: int, size: int, e):
    if getattr(tr, "_clip", False):
        end = t.end if isinstance(t.end, int) else getattr(t.end, "host_value", None)
        if not (isinstance(end, int) and not isinstance(end, bool) and end <= size):
            return ("tile", t, d, tr.size_of(ht, d))  # masked by the tensor's own bound too
        return ("tile", t, d)
    _check_tile_fits(tr, ht, t, d, size, e)
    return ("tile", t, d)


def _check_tile_fits(tr, ht: HostTensor, t: TileInfo, d: int, size: int, e):
    """A tile running past the end of the dimension it indexes: eager PyTorch would get a shorter slice
    (and fail to broadcast it), the kernel would read past the tensor."""
    end = t.end if isinstance(t.end, int) else getattr(t.end, "host_value", None)
    if isinstance(end, int) and not isinstance(end, bool) and end > size:
        raise TilePastEnd(e, tensor=ht.name, size=size, dim=d, tile=t.name, end=end)


def _strides(tr, ht: HostTensor, items):
    """Dynamic shapes: the strides the access uses are run-time parameters."""
    if tr.static:
        return
    for it in items:
        if it[0] != "none":
            tr.size_of(ht, it[2], "stride")


def _items_dims(tr, items):
    dims = []
    for it in items:
        k = it[0]
        if k == "none":
            dims.append(ONE)
        elif k in ("tile", "red"):
            dims.append(it[1])
        elif k == "vec":
            dims.extend(it[1].dims)
    return tuple(dims)


def load(tr, ht: HostTensor, items, e, extra_mask=None, eviction=None) -> Node:
    dims = _items_dims(tr, items)
    _check_unique_dims(tr, dims, e)
    ht.arg.loaded = True
    _strides(tr, ht, items)
    attrs = {"tensor": ht.arg, "items": items}
    if eviction:
        attrs["eviction"] = eviction
    n = Node("load", [extra_mask] if extra_mask is not None else [], dims=dims, dtype=ht.t.dtype, attrs=attrs,
             pad=0)
    tr.prog.dims_used.add(dims)
    return tr.emit(n)


def _check_unique_dims(tr, dims, e):
    seen = set()
    for d in dims:
        if isinstance(d, TileInfo):
            if d.id in seen:
                raise TileIndexing(e, problem=f"tile {d.name!r} indexes two dimensions of the same access")
            seen.add(d.id)


def store(tr, ht: HostTensor, items, v, e, extra_mask=None):
    dims = _items_dims(tr, items)
    if isinstance(v, TileInfo):
        raise TileIndexing(e, problem="storing a tile", hint="store tile.index")
    if isinstance(v, HostTensor):
        raise WholeTensor(e, name=v.name, what=" (stored as a value)")
    if not isinstance(v, (Node, bool, int, float)):
        raise OperandKind(e, op="a store", got=_describe(v))
    if isinstance(v, Node):
        _check_store_dims(tr, v.dims, dims, ht, e)
    check_not_aliased(ht, e)
    ht.arg.stored = True
    _strides(tr, ht, items)
    n = Node("store", [v] if extra_mask is None else [v, extra_mask], dims=(), dtype=None,
             attrs={"tensor": ht.arg, "items": items, "dims": dims})
    tr.prog.dims_used.add(dims)
    tr.emit(n)


def check_not_aliased(ht: HostTensor, e):
    """A tensor the kernel writes must not have elements that share memory (a stride of 0 along a dimension of
    more than one element: ``x.expand(...)``): each program would write the same addresses (issue 22)."""
    t = ht.t
    if any(st == 0 and sz > 1 for st, sz in zip(t.stride(), t.shape)):
        raise AliasedOutput(e, name=ht.name, shape=tuple(t.shape), strides=tuple(t.stride()))


def _check_store_dims(tr, vdims, dims, ht, e):
    if len(vdims) > len(dims):
        raise StoreShape(e, value=_dims_text(vdims), target=f"{ht.name}[{_dims_text(dims)[1:-1]}]",
                         hint="the value has more dimensions than the indexed region")
    for a, b in zip(reversed(vdims), reversed(dims)):
        if a is ONE or same_dim(a, b):
            continue
        raise StoreShape(e, value=_dims_text(vdims), target=f"{ht.name}[{_dims_text(dims)[1:-1]}]")


def _linear(v):
    """``v`` as ``(base, c)``: ``base + c`` with ``base`` a scalar Node (or None) and ``c`` an int, through the
    additions and subtractions of ints the tracer keeps as nodes."""
    if isinstance(v, bool):
        return None, None
    if isinstance(v, int):
        return None, int(v)
    if not isinstance(v, Node):
        return None, None
    if v.op == "binary" and v.attrs.get("op") in ("add", "sub") and len(v.args) == 2:
        a, b = v.args
        if isinstance(b, int) and not isinstance(b, bool):
            base, c = _linear(a)
            if base is not None:
                return base, c + (b if v.attrs["op"] == "add" else -b)
        if isinstance(a, int) and not isinstance(a, bool) and v.attrs["op"] == "add":
            base, c = _linear(b)
            if base is not None:
                return base, c + a
    return v, 0


# ---------------------------------------------------------------------------- ops


_EVICTION = ("evict_first", "evict_last", "evict_normal")


def _extra_mask(tr, e, op, mask, dims):
    if mask is None:
        return None
    if not isinstance(mask, Node) or mask.dtype != torch.bool:
        raise ExtraMask(e, op=op, got=_describe(mask))
    if _broadcast_dims(mask.dims, dims) != tuple(dims):
        raise ExtraMaskShape(e, op=op, mask=_dims_text(mask.dims), dims=_dims_text(dims))
    return mask


@op("dt.load", family="memory", stub=L.load, nodes=("load",), tile_args=True)
def _dt_load(tr, e, tensor, index, extra_mask=None, eviction_policy=None):
    if not isinstance(tensor, HostTensor):
        raise MemoryTarget(e, op="load", what="")
    if eviction_policy not in (None, "", *_EVICTION):
        raise UnknownOption(e, op="dt.load", option="eviction_policy", value=eviction_policy,
                            choices=", ".join(_EVICTION))
    idx = list(index) if isinstance(index, (list, tuple)) else [index]
    items = items_for(tr, tensor, idx, e, clip=True)  # a tile past the tensor's end reads 0 there
    dims = _items_dims(tr, items)
    mask = _extra_mask(tr, e, "load", extra_mask, dims)
    return load(tr, tensor, items, e, extra_mask=mask, eviction=eviction_policy or None)


@op("dt.store", family="memory", stub=L.store, nodes=("store",), tile_args=True)
def _dt_store(tr, e, tensor, index, value, extra_mask=None):
    if not isinstance(tensor, HostTensor):
        raise MemoryTarget(e, op="store", what="")
    idx = list(index) if isinstance(index, (list, tuple)) else [index]
    items = items_for(tr, tensor, idx, e)
    mask = _extra_mask(tr, e, "store", extra_mask, _items_dims(tr, items))
    store(tr, tensor, items, value, e, extra_mask=mask)
    return None
