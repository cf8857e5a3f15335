"""The tracer's calls: ``dt.*`` functions, ``torch.*`` functions and tensor methods.

Each op is one hook, bound with its signature (never by argument position):

- a ``dt.*`` op's hook is registered with ``@dt_hook(L.<stub>)`` and its arguments are bound with the
  stub's own signature in ``deuteron/language.py`` (the eager behaviour ``kernel.ref`` runs);
- a torch op's hook is registered with ``@torch_hook("<canonical>", ...)``; its parameters after
  ``(tr, e, op)`` are the op's signature (``input`` first: ``x.sum(1)`` and ``torch.sum(x, 1)`` bind alike).

A call that does not bind is a D004 at the user's line, naming the op and what is wrong.
"""

from __future__ import annotations

import inspect

import torch

from . import language as L
from . import ops
from .errors import (
    BadArguments, Broadcast, DimensionArgument, ExtraMask, ExtraMaskShape, MatmulDtypes, MemoryTarget, NotCompileTime,
    NotInTileLoop, OperandDtype, OperandKind, RandomShape, RangeLoop, ReshapeDims, TileAsNumber, TileNotIterated,
    TileScan, TraceError, UnknownOption, UnsupportedExpression, WholeTensor,
)
from .program import (
    ONE, Node, RInfo, TileInfo,
)
from .trace_common import (
    HostTensor, _LOW_PRECISION, _MaxResult, _broadcast_dims, _describe, _dims_text, _is_int_dtype,
    _norm_axis, result_type,
)

__all__ = ["OpsTracer", "DT_HOOKS", "TORCH_HOOKS", "dt_hook", "torch_hook"]


class Hook:
    """One op's trace rule: ``fn(tracer, node, **bound_arguments)`` and the signature it binds with."""

    __slots__ = ("name", "signature", "fn", "lead")

    def __init__(self, name, signature: inspect.Signature, fn, lead: tuple):
        self.name = name
        self.signature = signature
        self.fn = fn
        self.lead = lead  # leading arguments of fn before the bound ones: () or (op,)

    def __call__(self, tr, e, what: str, args, kwargs):
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as err:
            raise BadArguments(e, op=what, problem=str(err), signature=str(self.signature)) from None
        bound.apply_defaults()
        try:
            return self.fn(tr, e, *self.lead, *bound.args, **bound.kwargs)
        except TraceError as err:
            if err.node is None:  # raised where the node was not known (result_type): the op's call
                err.node = e
            raise


#: ``dt.<name>`` -> Hook (bound with the stub's signature)
DT_HOOKS: dict = {}
#: canonical torch op -> Hook (bound with the hook's own signature after ``(tr, e, op)``)
TORCH_HOOKS: dict = {}


def dt_hook(*stubs):
    """Register the trace rule of ``dt.<stub>`` (several stubs may share one rule: it gets ``op`` first)."""
    def deco(fn):
        for stub in stubs:
            lead = (stub.__name__,) if len(stubs) > 1 else ()
            DT_HOOKS[stub.__name__] = Hook(stub.__name__, inspect.signature(stub), fn, lead)
        return fn
    return deco


def torch_hook(*names):
    """Register the trace rule of the canonical torch ops ``names`` (``fn(tr, e, op, input, ...)``)."""
    def deco(fn):
        sig = inspect.signature(fn)
        sig = sig.replace(parameters=list(sig.parameters.values())[3:])
        for n in names:
            TORCH_HOOKS[n] = Hook(n, sig, fn, (n,))
        return fn
    return deco


class OpsTracer:
    """Mixin of ``Tracer``: calls by name, dispatched to the registered hooks."""

    def dt_call(self, name, args, kwargs, e):
        hook = DT_HOOKS.get(name)
        if hook is not None:
            return hook(self, e, f"dt.{name}", args, kwargs)
        if name in ("tile", "grid"):
            raise TileNotIterated(e, op=name)
        if name in ops.DT_HOST_ONLY:
            raise NotInTileLoop(e, op=f"dt.{name}", why=": it belongs in the host code, before the tile loops",
                                hint="call it before the outermost `for ... in dt.tile(...)` and use the result")
        raise NotInTileLoop(e, op=f"dt.{name}", why="", hint="see docs/deuteron.md for the supported ops")

    def torch_call(self, tname, args, kwargs, e):
        kind, name = tname
        table = ops.FUNCTIONAL if kind == "F" else ops.TORCH_FUNCTIONS
        op = table.get(name)
        prefix = "torch.nn.functional." if kind == "F" else "torch."
        if op is None or op not in TORCH_HOOKS:
            raise NotInTileLoop(e, op=f"{prefix}{name}", why="", hint="see docs/deuteron.md for the supported ops")
        if any(isinstance(a, HostTensor) for a in list(args) + list(kwargs.values())) and op not in (
                "zeros", "ones", "full", "arange"):
            ht = next(a for a in list(args) + list(kwargs.values()) if isinstance(a, HostTensor))
            raise WholeTensor(e, name=ht.name, what="")
        if op not in _CREATION:
            if args:
                args = [self._check_operand(args[0], name, op, e), *args[1:]]
            elif "input" in kwargs:
                kwargs = {**kwargs, "input": self._check_operand(kwargs["input"], name, op, e)}
        return TORCH_HOOKS[op](self, e, f"{prefix}{name}", args, kwargs)

    def method(self, x, name, args, kwargs, e, canonical=False):
        """A tensor op on ``x`` (a Node) by canonical name or method name."""
        op = name if canonical else ops.TENSOR_METHODS.get(name)
        if op == "where" and not canonical:
            op = "where_method"
        if op is None or op not in TORCH_HOOKS:
            raise NotInTileLoop(e, op=f".{name}()", why="", hint="see docs/deuteron.md for the supported ops")
        x = self._check_operand(x, name, op, e)
        return TORCH_HOOKS[op](self, e, f".{name}()", [x, *args], kwargs)

    def _check_operand(self, x, name, op, e):
        if isinstance(x, TileInfo):
            raise TileAsNumber(e, what=f"the operand of {name}()", hint="use tile.index")
        if not isinstance(x, Node) and op not in ("where", "maximum", "minimum", "add", "sub", "mul", "truediv"):
            if isinstance(x, (int, float)):
                return self.const_node(x)
            raise OperandKind(e, op=f"{name}()", got=_describe(x))
        return x

    def clamp(self, x, lo, hi, e):
        out = x
        if lo is not None:
            out = self.minmax("maximum", out, lo, e)
        if hi is not None:
            out = self.minmax("minimum", out, hi, e)
        return out

    def reshape(self, x: Node, shape, e):
        """Reshapes that only add or remove size-1 dimensions (tile shapes cannot be merged)."""
        real_in = [d for d in x.dims if d is not ONE]
        out = []
        infer = None
        for s in shape:
            if isinstance(s, TileInfo) or (isinstance(s, Node) and s.op == "tile_block_size"):
                out.append(s if isinstance(s, TileInfo) else s.attrs["tile"])
            elif isinstance(s, int) and s == -1:
                if infer is not None:
                    raise DimensionArgument(e, op="reshape", problem="two -1 dimensions")
                infer = len(out)
                out.append(None)
            else:
                t = _scaled_tile_block(s)
                if t is not None and t.known_block is None:
                    raise ReshapeDims(e, src=_dims_text(x.dims), dst="a shape with " + t.name + ".block_size * ...",
                                      why=f"the tile {t.name} has a tunable block size (merging or splitting a tile "
                                          f"needs one known when compiling: block_size= an int or a "
                                          f"dt.register_block_size value)")
                n = self.static_int(s, e, "a reshape size")
                out.append(ONE if n == 1 else self.rdim(n, n, e))
        if infer is not None:
            known = [d for d in out if d is not None and d is not ONE]
            rest = [d for d in real_in if d not in known]
            if len(rest) != 1:
                raise DimensionArgument(e, op="reshape", problem="cannot infer the -1 dimension")
            out[infer] = rest[0]
        if [d for d in out if d is not ONE] != real_in:
            for t in _check_whole_dims_regroup(self, e, x, real_in, [d for d in out if d is not ONE], out):
                x = self._zero_ragged(x, t, e)
        if tuple(out) == x.dims:
            return x
        return self.emit(Node("reshape", [x], dims=out, dtype=x.dtype, pad=x.pad, weak=x.weak))

    def _zero_ragged(self, x: Node, t: TileInfo, e) -> Node:
        """``x`` with the lanes of tile ``t`` past its end set to 0 (they become ordinary lanes of a merged
        dimension); nothing to do where they already hold 0."""
        if x.pad == 0 or (isinstance(t.end, int) and isinstance(t.begin, int) and t.known_block and
                          (t.end - t.begin) % t.known_block == 0):
            return x
        keep = self.binop("lt", self.tile_attr(t, "index", e), self.tile_attr(t, "end", e), e)
        pos = next(i for i, d in enumerate(x.dims) if d is t)
        for _ in range(pos):
            keep = self.expand_dims(keep, 0, e)
        for _ in range(len(x.dims) - pos - 1):
            keep = self.expand_dims(keep, -1, e)
        return self.where(keep, x, 0, e)


def _scaled_tile_block(v):
    """The tile of ``tile.block_size * c`` (or ``c * tile.block_size``), else None."""
    if isinstance(v, Node) and v.op == "binary" and v.attrs.get("op") == "mul":
        for a, b in (v.args, v.args[::-1]):
            if isinstance(a, Node) and a.op == "tile_block_size" and isinstance(b, int):
                return a.attrs["tile"]
    return None


def _check_whole_dims_regroup(tr, e, x, src_dims, dst_dims, out):
    """A reshape that splits or merges dimensions (``[t, 64] -> [t, 2, 32]``, and back; ``[t, 2, n] ->
    [2 * t.block_size, n]``, and back).  Whole dimensions involved must be powers of two (their blocks are then
    exactly their size: no padding to move around) and stay one block (never looped, never padded for a matmul).
    A tile merged or split needs a block size known when tracing (fixed, or a ``dt.register_block_size`` value);
    lanes past a ragged tile's end hold 0 in the merged dimension.  Returns the dims of ``x`` whose ragged lanes
    must be zeroed first (tiles merged away)."""
    def fail(why):
        raise ReshapeDims(e, src=_dims_text(x.dims), dst=_dims_text(tuple(out)), why=why)

    def size(d):
        if isinstance(d, RInfo):
            return d.size
        if d.known_block is None:
            fail(f"the tile {d.name} has a tunable block size (merging or splitting a tile needs one known when "
                 f"compiling: block_size= an int or a dt.register_block_size value)")
        return d.known_block

    # pair up runs of equal products, left to right (a tile that stays in place is a run of its own)
    groups = []
    i = j = 0
    while i < len(src_dims) or j < len(dst_dims):
        if i < len(src_dims) and j < len(dst_dims) and src_dims[i] is dst_dims[j]:
            groups.append(([src_dims[i]], [dst_dims[j]]))
            i += 1
            j += 1
            continue
        if i >= len(src_dims) or j >= len(dst_dims):
            fail("the element counts differ")
        a, b = [src_dims[i]], [dst_dims[j]]
        pa, pb = size(src_dims[i]), size(dst_dims[j])
        i += 1
        j += 1
        while pa != pb:
            if pa < pb and i < len(src_dims):
                a.append(src_dims[i])
                pa *= size(src_dims[i])
                i += 1
            elif pb < pa and j < len(dst_dims):
                b.append(dst_dims[j])
                pb *= size(dst_dims[j])
                j += 1
            else:
                fail(f"{pa} elements cannot become {pb}")
        groups.append((a, b))
    zero = []
    for a, b in groups:
        if a == b:
            continue
        for d in a + b:
            if isinstance(d, TileInfo):
                if d.kind == "grid":
                    fail("a dt.grid index cannot be merged or split")
                if d in a and d in b:
                    fail(f"the tile {d.name} must stay in place or be merged or split, not moved")
                continue
            if d.size & (d.size - 1):
                fail(f"a whole dimension of {d.size} elements (split or merged ones must be powers of two)")
            if d.used_in_dot and d.size < 16:
                fail("a dimension a matmul pads to 16")
            d.not_rollable("split or merged by a reshape")
            d.exact_block = True
        merged = [d for d in a if isinstance(d, TileInfo)]
        for d in b:
            if isinstance(d, RInfo):
                d.merged_tiles.extend(t for t in merged if t not in d.merged_tiles)
        zero.extend(merged)
    return zero


# ---------------------------------------------------------------------------
# dt.* ops (bound with the stubs of deuteron/language.py)
# ---------------------------------------------------------------------------


@dt_hook(L.zeros)
def _dt_zeros(tr, e, shape, dtype=None, device=None):
    return tr.full(shape, 0, dtype, e)


@dt_hook(L.full)
def _dt_full(tr, e, shape, value, dtype=None, device=None):
    return tr.full(shape, value, dtype, e)


def _rng_offsets(tr, e, dims, what):
    """The row-major offsets of a ``dt.rand`` block (a tile counts as its whole loop, ``[0, end)``)."""
    off, stride = None, 1
    nd = len(dims)
    for pos in range(nd - 1, -1, -1):
        d = dims[pos]
        if d is ONE:
            continue
        if isinstance(d, TileInfo):
            if not isinstance(d.end, (int, Node)) or isinstance(d.end, bool):
                raise RandomShape(e, op=what, problem=f"the tile {d.name} has no end")
            ext, idx = d.end, tr.tile_attr(d, "index", e)  # an int, or a run-time size (static_shapes=False)
        elif isinstance(d, RInfo):
            ext, idx = d.size, tr.arange([d.size], {}, e)
        else:
            raise RandomShape(e, op=what, problem=f"a dimension {d!r}")
        v = idx
        for _ in range(pos):
            v = tr.expand_dims(v, 0, e)
        for _ in range(nd - pos - 1):
            v = tr.expand_dims(v, -1, e)
        term = tr.binop("mul", v, stride, e) if not (isinstance(stride, int) and stride == 1) else v
        off = term if off is None else tr.binop("add", off, term, e)
        stride = stride * ext if isinstance(stride, int) and isinstance(ext, int) else tr.binop("mul", ext, stride, e)
    if isinstance(stride, int) and stride > 2**31 - 1:
        raise RandomShape(e, op=what, problem=f"{stride} elements (offsets must fit in int32)")
    if off is None:
        off = tr.full([], 0, torch.int32, e)
    if tuple(off.dims) != tuple(dims):
        off = tr.materialize(off, dims, torch.int32, e)
    return off


def _rng_seed(tr, e, seed, what):
    if isinstance(seed, bool) or not isinstance(seed, (int, Node)) or (
            isinstance(seed, Node) and (seed.dims or not _is_int_dtype(seed.dtype))):
        raise RandomShape(e, op=what, problem=f"the seed must be an int (or an int argument), not {_describe(seed)}")
    return seed


@dt_hook(L.rand)
def _dt_rand(tr, e, shape, seed, device=None):
    dims = tr.shape_dims(shape, e)
    off = _rng_offsets(tr, e, dims, "dt.rand")
    seed = _rng_seed(tr, e, seed, "dt.rand")
    args = [off] + ([seed] if isinstance(seed, Node) else [])
    return tr.emit(Node("rand", args, dims=tuple(dims), dtype=torch.float32,
                        attrs={"seed": None if isinstance(seed, Node) else int(seed)}))


@dt_hook(L.randint)
def _dt_randint(tr, e, shape, low, high, seed, device=None):
    lo, hi = (tr.static_int(v, e, "a dt.randint bound") for v in (low, high))
    if hi <= lo:
        raise RandomShape(e, op="dt.randint", problem=f"high ({hi}) must be greater than low ({lo})")
    dims = tr.shape_dims(shape, e)
    off = _rng_offsets(tr, e, dims, "dt.randint")
    seed = _rng_seed(tr, e, seed, "dt.randint")
    args = [off] + ([seed] if isinstance(seed, Node) else [])
    return tr.emit(Node("randint", args, dims=tuple(dims), dtype=torch.int32,
                        attrs={"seed": None if isinstance(seed, Node) else int(seed), "low": lo, "high": hi}))


@dt_hook(L.arange)
def _dt_arange(tr, e, begin_or_end, end=None, step=1, dtype=None):
    if end is None and step == 1 and isinstance(begin_or_end, Node) and begin_or_end.op == "tile_block_size":
        # dt.arange(tile.block_size): 0 .. block_size-1 along that tile (tile.index - tile.begin)
        t = begin_or_end.attrs["tile"]
        v = tr.binop("sub", tr.tile_attr(t, "index", e), tr.tile_attr(t, "begin", e), e)
        return tr.cast(v, dtype) if dtype is not None and dtype != v.dtype else v
    args = [begin_or_end] if end is None else [begin_or_end, end]
    if step != 1:
        args.append(step)
    return tr.arange(args, {"dtype": dtype} if dtype is not None else {}, e)


@dt_hook(L.dot)
def _dt_dot(tr, e, a, b, acc=None, out_dtype=None):
    return tr.matmul(a, b, acc, e, out_dtype=out_dtype or "acc")


@dt_hook(L.tile_begin, L.tile_end, L.tile_index, L.tile_id, L.tile_block_size)
def _dt_tile_fn(tr, e, op, tile):
    if not isinstance(tile, TileInfo):
        raise BadArguments(e, op=f"dt.{op}", problem=f"expects a tile, got {_describe(tile)}", signature="(tile)")
    return tr.tile_attr(tile, op[len("tile_"):], e)


@dt_hook(L.cumsum, L.cumprod)
def _dt_cumulative(tr, e, op, input, dim, reverse=False):
    if reverse:
        raise BadArguments(e, op=f"dt.{op}", problem="reverse=True is not supported",
                           signature="(input, dim, reverse=False)")
    if not isinstance(input, Node):
        raise BadArguments(e, op=f"dt.{op}", problem=f"expects a value of the kernel, got {_describe(input)}",
                           signature="(input, dim, reverse=False)")
    return TORCH_HOOKS[op](tr, e, f"dt.{op}", [input, dim], {})


@dt_hook(L.static_range)
def _dt_static_range(tr, e, begin_or_end, end=None, step=1):
    vals = [tr.static_int(v, e, "a dt.static_range bound") for v in (begin_or_end, end, step) if v is not None]
    if len(vals) == 1 or (end is None):
        vals = [0] + vals
    if len(vals) == 2:
        vals.append(1)
    if vals[2] == 0:
        raise RangeLoop(e, problem="dt.static_range with step 0")
    return list(range(*vals))


_EVICTION = ("evict_first", "evict_last", "evict_normal")


def _extra_mask(tr, e, op, mask, dims):
    if mask is None:
        return None
    if not isinstance(mask, Node) or mask.dtype != torch.bool:
        raise ExtraMask(e, op=op, got=_describe(mask))
    if _broadcast_dims(mask.dims, dims) != tuple(dims):
        raise ExtraMaskShape(e, op=op, mask=_dims_text(mask.dims), dims=_dims_text(dims))
    return mask


@dt_hook(L.load)
def _dt_load(tr, e, tensor, index, extra_mask=None, eviction_policy=None):
    if not isinstance(tensor, HostTensor):
        raise MemoryTarget(e, op="load", what="")
    if eviction_policy not in (None, "", *_EVICTION):
        raise UnknownOption(e, op="dt.load", option="eviction_policy", value=eviction_policy,
                            choices=", ".join(_EVICTION))
    idx = list(index) if isinstance(index, (list, tuple)) else [index]
    items = tr.items_for(tensor, idx, e, clip=True)  # a tile past the tensor's end reads 0 there
    dims = tr._items_dims(items)
    mask = _extra_mask(tr, e, "load", extra_mask, dims)
    return tr.load(tensor, items, e, extra_mask=mask, eviction=eviction_policy or None)


@dt_hook(L.store)
def _dt_store(tr, e, tensor, index, value, extra_mask=None):
    if not isinstance(tensor, HostTensor):
        raise MemoryTarget(e, op="store", what="")
    idx = list(index) if isinstance(index, (list, tuple)) else [index]
    items = tr.items_for(tensor, idx, e)
    mask = _extra_mask(tr, e, "store", extra_mask, tr._items_dims(items))
    tr.store(tensor, items, value, e, extra_mask=mask)
    return None


_SEMS = ("relaxed", "acquire", "release", "acq_rel")
_SCOPES = ("gpu", "cta", "sys")


@dt_hook(L.atomic_add, L.atomic_and, L.atomic_or, L.atomic_xor, L.atomic_max, L.atomic_min, L.atomic_xchg)
def _dt_atomic(tr, e, op, target, index, value, sem="relaxed", scope="gpu"):
    kind = op.split("_", 1)[1]

    def check(dt):
        if kind in ("and", "or", "xor") and (dt.is_floating_point or dt == torch.bool):
            raise OperandDtype(e, op=f"dt.{op}", dtype=str(dt), why=" (bitwise atomics need an integer tensor)")
    return _atomic(tr, e, op, kind, target, index, [value], sem, scope, check)


@dt_hook(L.atomic_cas)
def _dt_atomic_cas(tr, e, target, index, expected, value, sem="relaxed", scope="gpu"):
    def check(dt):
        if dt.itemsize not in (2, 4, 8):
            raise OperandDtype(e, op="dt.atomic_cas", dtype=str(dt),
                               why=" (compare-and-swap works on 16-, 32- or 64-bit elements)")
    # args: the new value first (as every atomic), then the expected one (deuteron.codegen_expr.emit_store)
    return _atomic(tr, e, "atomic_cas", "cas", target, index, [value, expected], sem, scope, check)


def _atomic(tr, e, op, kind, target, index, values, sem, scope, check):
    """The atomic node of ``dt.<op>`` on ``target[index]`` and the values before the update (exact where
    positions do not repeat; assigned only where the kernel uses them); ``check(dtype)``: the op's own rule on the
    target's dtype."""
    if not isinstance(target, HostTensor):
        raise MemoryTarget(e, op=op, what=" as its target")
    idx = list(index) if isinstance(index, (list, tuple)) else [index]
    items = tr.items_for(target, idx, e)
    dims = tr._items_dims(items)
    for v in values:
        if isinstance(v, Node):
            tr._check_store_dims(v.dims, dims, target, e)
    if sem not in _SEMS:
        raise UnknownOption(e, op=f"dt.{op}", option="sem", value=sem, choices=", ".join(_SEMS))
    if scope not in _SCOPES:
        raise UnknownOption(e, op=f"dt.{op}", option="scope", value=scope, choices=", ".join(_SCOPES))
    check(target.t.dtype)
    target.arg.atomic = True
    tr._strides(target, items)
    tr.prog.has_atomic = True
    at = tr.emit(Node("atomic", list(values), dims=(), attrs={"tensor": target.arg, "items": items, "dims": dims,
                                                              "sem": sem, "scope": scope, "kind": kind}))
    old = tr.emit(Node("atomic_old", [at], dims=tuple(dims), dtype=target.t.dtype))
    at.attrs["old"] = old
    return old


def _sync_target(tr, e, op, signal_pad, index, scope, ints):
    if not isinstance(signal_pad, HostTensor):
        raise MemoryTarget(e, op=op, what=" as its signal pad")
    if signal_pad.t.dtype not in (torch.int32, torch.uint32):
        raise OperandDtype(e, op=f"dt.{op}", dtype=str(signal_pad.t.dtype), why=" (signal pads are int32 or uint32)")
    if scope not in ("gpu", "sys"):
        raise UnknownOption(e, op=f"dt.{op}", option="scope", value=scope, choices="gpu, sys")
    vals = {k: None if v is None else tr.static_int(v, e, f"the {k} of dt.{op}") for k, v in ints.items()}
    idx = [] if index is None else (list(index) if isinstance(index, (list, tuple)) else [index])
    items = tr.items_for(signal_pad, idx, e)
    dims = tr._items_dims(items)
    signal_pad.arg.atomic = True
    tr._strides(signal_pad, items)
    tr.prog.has_atomic = True
    return items, dims, vals


@dt_hook(L.wait)
def _dt_wait(tr, e, signal_pad, index=None, signal=1, update=None, scope="gpu", hasSubsequentMemAccess=True):  # noqa: N803
    items, dims, v = _sync_target(tr, e, "wait", signal_pad, index, scope, {"signal": signal, "update": update})
    sync = bool(tr.static_int(hasSubsequentMemAccess, e, "hasSubsequentMemAccess"))
    tr.emit(Node("atomic", [], dims=(), attrs={"tensor": signal_pad.arg, "items": items, "dims": dims,
                                               "kind": "wait", "sem": "acquire" if sync else "relaxed",
                                               "scope": scope, "expect": v["signal"],
                                               "new": v["signal"] if v["update"] is None else v["update"],
                                               "sync": sync}))
    return None


@dt_hook(L.signal)
def _dt_signal(tr, e, signal_pad, index=None, signal=1, wait_for=None, scope="gpu", hasPreviousMemAccess=True):  # noqa: N803
    items, dims, v = _sync_target(tr, e, "signal", signal_pad, index, scope, {"signal": signal, "wait_for": wait_for})
    sync = bool(tr.static_int(hasPreviousMemAccess, e, "hasPreviousMemAccess"))
    at = tr.emit(Node("atomic", [], dims=(), attrs={"tensor": signal_pad.arg, "items": items, "dims": dims,
                                                    "kind": "signal", "sem": "release" if sync else "relaxed",
                                                    "scope": scope, "expect": v["wait_for"], "new": v["signal"],
                                                    "sync": sync}))
    old = tr.emit(Node("atomic_old", [at], dims=tuple(dims), dtype=signal_pad.t.dtype))
    at.attrs["old"] = old
    return old


@dt_hook(L.relu, L.sigmoid, L.silu, L.tanh, L.exp)
def _dt_unary(tr, e, op, x):
    return tr.unary(op, x, e)


@dt_hook(L.gelu)
def _dt_gelu(tr, e, x, approximate="none"):
    return tr.unary("gelu", x, e, approximate=approximate)


@dt_hook(L.cdiv)
def _dt_cdiv(tr, e, a, b):
    if isinstance(a, Node) or isinstance(b, Node):
        return tr.binop("floordiv", tr.binop("sub", tr.binop("add", a, b, e), 1, e), b, e)
    return L.cdiv(a, b)


@dt_hook(L.next_power_of_2)
def _dt_next_power_of_2(tr, e, n):
    if isinstance(n, Node):
        raise NotCompileTime(e, what="dt.next_power_of_2's argument", got=_describe(n))
    return L.next_power_of_2(n)


# ---------------------------------------------------------------------------
# torch functions and tensor methods (canonical names of deuteron/ops.py)
# ---------------------------------------------------------------------------

_CREATION = ("zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange", "stack", "cat", "einsum")


@torch_hook("zeros", "ones")
def _t_zeros(tr, e, op, *size, out=None, dtype=None, layout=None, device=None, pin_memory=False,
             requires_grad=False):
    shape = size[0] if len(size) == 1 else list(size)
    return tr.full(shape, 0 if op == "zeros" else 1, dtype, e)


@torch_hook("full")
def _t_full(tr, e, op, size, fill_value, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
            requires_grad=False):
    return tr.full(size, fill_value, dtype, e)


@torch_hook("zeros_like", "ones_like")
def _t_zeros_like(tr, e, op, input, *, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False, memory_format=None):
    return _full_like(tr, e, input, 0 if op == "zeros_like" else 1, dtype)


@torch_hook("full_like")
def _t_full_like(tr, e, op, input, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False,
                 requires_grad=False, memory_format=None):
    return _full_like(tr, e, input, fill_value, dtype)


def _full_like(tr, e, x, value, dtype):
    dtype = dtype or x.dtype
    return tr.full(list(tr.dim_value(d) for d in x.dims), value, dtype, e) if x.dims else tr.cast(value, dtype)


@torch_hook("arange")
def _t_arange(tr, e, op, *bounds, out=None, dtype=None, layout=None, device=None, pin_memory=False,
              requires_grad=False):
    return tr.arange(list(bounds), {"dtype": dtype} if dtype is not None else {}, e)


@torch_hook(*[n for n in ops.UNARY if n not in ("gelu",)])
def _t_unary(tr, e, op, input, inplace=False):
    return tr.unary(op, input, e)


@torch_hook("gelu")
def _t_gelu(tr, e, op, input, approximate="none"):
    return tr.unary("gelu", input, e, approximate=approximate)


@torch_hook("softplus")
def _t_softplus(tr, e, op, input, beta=1.0, threshold=20.0):
    return tr.unary("softplus", input, e, beta=beta, threshold=threshold)


@torch_hook("elu")
def _t_elu(tr, e, op, input, alpha=1.0, inplace=False):
    return tr.unary("elu", input, e, alpha=alpha)


@torch_hook("sign", "isnan", "isinf")
def _t_predicate(tr, e, op, input):
    return tr.unary(op, input, e)


@torch_hook("leaky_relu")
def _t_leaky_relu(tr, e, op, input, negative_slope=0.01, inplace=False):
    return tr.where(tr.binop("ge", input, 0, e), input, tr.binop("mul", input, negative_slope, e), e)


@torch_hook("relu6")
def _t_relu6(tr, e, op, input, inplace=False):
    return tr.clamp(input, 0, 6, e)


@torch_hook("add", "sub")
def _t_add(tr, e, op, input, other, *, alpha=None, out=None):
    if alpha is not None:
        other = tr.binop("mul", other, alpha, e)
    return tr.binop(op, input, other, e)


@torch_hook("mul", "mod", "floordiv", "eq", "ne", "lt", "le", "gt", "ge")
def _t_binary(tr, e, op, input, other, *, out=None):
    return tr.binop(op, input, other, e)


@torch_hook("logical_and", "logical_or")
def _t_logical(tr, e, op, input, other, *, out=None):
    return tr.logical(op.split("_")[1], input, other, e)


@torch_hook("truediv", "div")
def _t_div(tr, e, op, input, other, *, rounding_mode=None, out=None):
    x = input
    if rounding_mode == "floor":
        return tr.binop("floordiv", x, other, e)
    if rounding_mode == "trunc":
        q = tr.binop("truediv", x, other, e)
        if not result_type(x, other).is_floating_point:
            return tr.cast(tr.cast(q, torch.int64), result_type(x, other))
        return tr.where(tr.binop("lt", q, 0, e), tr.unary("ceil", q, e), tr.unary("floor", q, e), e)
    if rounding_mode is not None:
        raise UnknownOption(e, op="div", option="rounding_mode", value=rounding_mode, choices="None, 'trunc', 'floor'")
    return tr.binop("truediv", x, other, e)


@torch_hook("fmod")
def _t_fmod(tr, e, op, input, other, *, out=None):
    x = input
    if result_type(x, other).is_floating_point:
        q = tr.binop("truediv", x, other, e)
        tq = tr.where(tr.binop("lt", q, 0, e), tr.unary("ceil", q, e), tr.unary("floor", q, e), e)
        return tr.binop("sub", x, tr.binop("mul", tq, other, e), e)
    return tr.binop("mod", x, other, e)


@torch_hook("pow")
def _t_pow(tr, e, op, input, exponent):
    return tr.binop("pow", input, exponent, e)


@torch_hook("maximum", "minimum")
def _t_minmax(tr, e, op, input, other, *, out=None):
    return tr.minmax(op, input, other, e)


@torch_hook("where")
def _t_where(tr, e, op, condition, input, other):
    return tr.where(condition, input, other, e)


@torch_hook("where_method")
def _t_where_method(tr, e, op, input, condition, other):
    return tr.where(condition, input, other, e)


@torch_hook("masked_fill")
def _t_masked_fill(tr, e, op, input, mask, value):
    return tr.where(mask, value, input, e)


@torch_hook("clamp")
def _t_clamp(tr, e, op, input, min=None, max=None):  # noqa: A002
    return tr.clamp(input, min, max, e)


@torch_hook("lerp")
def _t_lerp(tr, e, op, input, end, weight):
    return tr.binop("add", input, tr.binop("mul", weight, tr.binop("sub", end, input, e), e), e)


@torch_hook("addcmul")
def _t_addcmul(tr, e, op, input, tensor1, tensor2, *, value=1):
    return tr.binop("add", input, tr.binop("mul", value, tr.binop("mul", tensor1, tensor2, e), e), e)


@torch_hook("fma")
def _t_fma(tr, e, op, input, b, c):
    return tr.binop("add", tr.binop("mul", input, b, e), c, e)


@torch_hook("sum", "amax", "amin", "mean", "prod")
def _t_reduce(tr, e, op, input, dim=None, keepdim=False, *, dtype=None):
    return tr.reduce(op, input, dim, keepdim, e, dtype=dtype)


@torch_hook("max", "min")
def _t_max(tr, e, op, input, dim=None, keepdim=False, *, other=None):
    x = input
    if other is not None or (isinstance(dim, Node) and (dim.dims or not _is_int_dtype(dim.dtype))):
        return tr.minmax("maximum" if op == "max" else "minimum", x, dim if other is None else other, e)
    if dim is None:
        return tr.reduce(op, x, None, False, e)
    vals = tr.reduce(op, x, dim, keepdim, e)
    idx = tr.reduce("argmax" if op == "max" else "argmin", x, dim, keepdim, e)
    return _MaxResult((vals, idx))


@torch_hook("argmax", "argmin")
def _t_argmax(tr, e, op, input, dim=None, keepdim=False):
    if dim is None:
        raise DimensionArgument(e, op=f"{op}()", problem="dim= is needed inside a tile loop")
    return tr.reduce(op, input, dim, keepdim, e)


@torch_hook("var", "std")
def _t_var(tr, e, op, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):  # x.var(False): unbiased positional
        unbiased, dim = dim, None
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return tr.var(input, dim, correction, keepdim, e, std=op == "std")


@torch_hook("softmax", "log_softmax")
def _t_softmax(tr, e, op, input, dim=None, _stacklevel=3, dtype=None):
    return tr.softmax(input, dim, e, log=op == "log_softmax", dtype=dtype)


@torch_hook("logsumexp")
def _t_logsumexp(tr, e, op, input, dim=None, keepdim=False):
    return tr.logsumexp(input, dim, keepdim, e)


def _check_scan_dim(tr, e, d, what):
    """A scan along a tile of tunable size restarts at every tile in the kernel but runs over the whole loop in
    kernel.ref (one tile): they would disagree."""
    if isinstance(d, TileInfo) and d.kind == "tile" and d.slot is not None:
        raise TileScan(e, op=what, tile=d.name)


@torch_hook("cumsum", "cumprod")
def _t_scan(tr, e, op, input, dim, *, dtype=None):
    x = input
    dim = _norm_axis(tr.static_int(dim, e, "a dimension"), len(x.dims), tr, e)
    d = x.dims[dim]
    if isinstance(d, RInfo):
        d.not_rollable(f"used by {op}")
    _check_scan_dim(tr, e, d, f"torch.{op}")
    dtype = dtype or (torch.int64 if not x.dtype.is_floating_point else x.dtype)
    xx = tr.cast(x, torch.float32) if x.dtype in _LOW_PRECISION else tr.cast(x, dtype)
    n = tr.emit(Node("scan", [xx], dims=x.dims, dtype=xx.dtype, attrs={"kind": op, "axis": dim}))
    return tr.cast(n, dtype) if n.dtype != dtype else n


@torch_hook("matmul")
def _t_matmul(tr, e, op, input, other):
    return tr.matmul(input, other, None, e)


@torch_hook("mm")
def _t_mm(tr, e, op, input, mat2, out_dtype=None):
    """``torch.mm`` / ``torch.bmm``, with torch's ``out_dtype`` overload (fp16 inputs, an fp32 result)."""
    if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
        raise BadArguments(e, op="torch.mm/bmm", problem=f"out_dtype must be a torch.dtype, not {out_dtype!r}",
                           signature="(input, mat2, out_dtype=None)")
    if out_dtype is not None and isinstance(input, Node) and isinstance(mat2, Node) and input.dtype != mat2.dtype:
        raise MatmulDtypes(e, a=input.dtype, b=mat2.dtype)
    return tr.matmul(input, mat2, None, e, out_dtype=out_dtype)


@torch_hook("addmm")
def _t_addmm(tr, e, op, input, mat1, mat2, *, beta=1, alpha=1):
    x = input
    if beta != 1 or alpha != 1:
        prod = tr.matmul(mat1, mat2, None, e, out_dtype=torch.float32)
        return tr.cast(tr.binop("add", tr.binop("mul", x, beta, e), tr.binop("mul", prod, alpha, e), e), x.dtype)
    return tr.matmul(mat1, mat2, x, e)


@torch_hook("to")
def _t_to(tr, e, op, input, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    target = None
    for a in list(args) + [dtype]:
        if isinstance(a, torch.dtype):
            target = a
        elif isinstance(a, Node):
            target = a.dtype
    if target is None:
        return input  # a device move: nothing to do in the kernel
    return tr.cast(input, target)


@torch_hook("type_as")
def _t_type_as(tr, e, op, input, other):
    return tr.cast(input, other.dtype)


_CASTS = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16, "double": torch.float64,
          "int": torch.int32, "long": torch.int64, "bool": torch.bool}


@torch_hook(*_CASTS)
def _t_cast(tr, e, op, input, memory_format=None):
    return tr.cast(input, _CASTS[op])


@torch_hook("t")
def _t_t(tr, e, op, input):
    if len(input.dims) != 2:
        raise DimensionArgument(e, op=".t()",
                                problem=f"a block of rank {len(input.dims)} (torch's .t() takes rank <= 2)")
    return tr.permute(input, [1, 0], e)


@torch_hook("transpose")
def _t_transpose(tr, e, op, input, dim0, dim1):
    x = input
    d0 = _norm_axis(tr.static_int(dim0, e, "a dimension"), len(x.dims), tr, e)
    d1 = _norm_axis(tr.static_int(dim1, e, "a dimension"), len(x.dims), tr, e)
    order = list(range(len(x.dims)))
    order[d0], order[d1] = order[d1], order[d0]
    return tr.permute(x, order, e)


@torch_hook("permute")
def _t_permute(tr, e, op, input, *dims):
    order = list(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else list(dims)
    order = [_norm_axis(tr.static_int(o, e, "a dimension"), len(input.dims), tr, e) for o in order]
    return tr.permute(input, order, e)


@torch_hook("unsqueeze")
def _t_unsqueeze(tr, e, op, input, dim):
    return tr.expand_dims(input, tr.static_int(dim, e, "a dimension"), e)


@torch_hook("squeeze")
def _t_squeeze(tr, e, op, input, dim=None):
    return tr.squeeze(input, None if dim is None else tr.static_int(dim, e, "a dimension"), e)


@torch_hook("reshape")
def _t_reshape(tr, e, op, input, *shape):
    shape = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)) else list(shape)
    return tr.reshape(input, shape, e)


@torch_hook("expand")
def _t_expand(tr, e, op, input, *sizes):
    x = input
    shape = list(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) else list(sizes)
    shape = [x.dims[i - (len(shape) - len(x.dims))] if (isinstance(s, int) and s == -1) else s
             for i, s in enumerate(shape)]
    dims = tr.shape_dims([tr.dim_value(s) if not isinstance(s, (int, Node, TileInfo)) else s for s in shape], e)
    return _expand_to(tr, e, x, dims)


@torch_hook("expand_as")
def _t_expand_as(tr, e, op, input, other):
    return _expand_to(tr, e, input, other.dims)


def _expand_to(tr, e, x, dims):
    if _broadcast_dims(x.dims, dims) != tuple(dims):
        raise Broadcast(e, shapes=f"{_dims_text(x.dims)} and the expanded {_dims_text(dims)}")
    return tr.emit(Node("expand", [x], dims=dims, dtype=x.dtype, pad=x.pad))


@torch_hook("identity")
def _t_identity(tr, e, op, input, *, memory_format=None):
    return input


@torch_hook("size")
def _t_size(tr, e, op, input, dim=None):
    shape = tuple(tr.dim_value(dd) for dd in input.dims)
    return shape if dim is None else shape[_norm_axis(tr.static_int(dim, e, "a dimension"), len(input.dims), tr, e)]


@torch_hook("dim")
def _t_dim(tr, e, op, input):
    return len(input.dims)


@torch_hook("numel")
def _t_numel(tr, e, op, input):
    raise UnsupportedExpression(e, what=".numel() of a block")


@torch_hook("new_zeros", "new_ones")
def _t_new_zeros(tr, e, op, input, *sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None,
                 pin_memory=False):
    if size is not None and sizes:
        raise BadArguments(e, op=op, problem="the size is given twice", signature="(size, *, dtype=None)")
    shape = size if size is not None else (sizes[0] if len(sizes) == 1 else list(sizes))
    return tr.full(shape, 0 if op == "new_zeros" else 1, dtype or input.dtype, e)


@torch_hook("new_full")
def _t_new_full(tr, e, op, input, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None,
                pin_memory=False):
    return tr.full(size, fill_value, dtype or input.dtype, e)


@torch_hook("hardtanh")
def _t_hardtanh(tr, e, op, input, min_val=-1.0, max_val=1.0, inplace=False):
    return tr.clamp(input, min_val, max_val, e)
