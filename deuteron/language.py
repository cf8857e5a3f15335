"""The deuteron language: ``dt.tile``, ``dt.grid``, ``dt.zeros`` ... (``import deuteron as dt``).

Inside a ``@dt.kernel`` these calls are never executed: the tile loops are read
from the function's source and turned into a newt kernel.  They run as Python
only in two places:

* the host code of a kernel (before and after its tile loops):
  ``dt.register_block_size``, ``dt.register_tunable`` and ``dt.specialize``;
* ``kernel.ref(*args)``, the eager PyTorch reference (the oracle), where a tile
  behaves like a slice of the dimension it covers.

This module imports torch only when one of those actually runs.
"""

from __future__ import annotations

import contextvars
import math as _math

__all__ = [
    "tile", "grid", "jagged_tile", "Tile", "barrier", "tile_begin", "tile_end", "tile_index", "tile_id",
    "tile_block_size", "cumsum", "cumprod", "rand", "randint", "reduce", "associative_scan", "split", "join",
    "subscript",
    "zeros", "full", "arange", "dot", "atomic_add", "atomic_cas", "signal", "wait",
    "register_block_size",
    "register_tunable", "specialize", "relu", "sigmoid", "silu", "gelu", "tanh", "exp", "cdiv",
    "next_power_of_2", "PowerOfTwo", "IntRange", "Choice", "Bool", "PowerOfTwoFragment", "IntegerFragment",
    "EnumFragment", "BooleanFragment", "DeuteronUsageError",
]


class DeuteronUsageError(RuntimeError):
    """A deuteron language function used where it cannot run."""


#: the host-side context of a running kernel (set by deuteron.kernel / deuteron.ref).
_CONTEXT: contextvars.ContextVar = contextvars.ContextVar("deuteron_context", default=None)


def _context(what: str):
    ctx = _CONTEXT.get()
    if ctx is None:
        raise DeuteronUsageError(f"dt.{what} can only be used inside a @dt.kernel function "
                                 "(or while running kernel.ref(...))")
    return ctx


def cdiv(a: int, b: int) -> int:
    """Ceiling division of two ints."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


# ---------------------------------------------------------------------------
# tiles
# ---------------------------------------------------------------------------


class Tile:
    """One tile of a ``dt.tile`` loop.

    Index a tensor with it (``x[tile_m, :]``) to take the rows it covers.
    ``tile.index`` is the 1-D tensor of indices it covers, ``tile.begin`` and
    ``tile.end`` its bounds (``end`` exclusive, clipped to the loop's end),
    ``tile.block_size`` its nominal size, ``tile.id`` its number along the
    loop and ``tile.count`` the number of tiles.  In the generated kernel a
    tile is a block dimension of ``block_size`` elements with a mask for the
    ragged last tile; in ``kernel.ref`` it is a slice.
    """

    __slots__ = ("begin", "end", "block_size", "id", "count", "_device", "loop_end")

    def __init__(self, begin: int, end: int, block_size: int, id: int, count: int, device=None, loop_end=None):
        self.loop_end = end if loop_end is None else loop_end  # the end of the whole loop (dt.rand's offsets)
        self.begin = begin
        self.end = end
        self.block_size = block_size
        self.id = id
        self.count = count
        self._device = device

    @property
    def index(self):
        import torch
        return torch.arange(self.begin, self.end, device=self._device)

    def slice(self) -> slice:
        return slice(self.begin, self.end)

    def __len__(self) -> int:
        return self.end - self.begin

    def __repr__(self) -> str:
        return f"Tile({self.begin}:{self.end}, block_size={self.block_size})"

    # in a shape (``x.reshape([tile_m, 2, half])``) a tile stands for its length: torch reads shapes through
    # __index__ before any TorchFunctionMode sees them.  Arithmetic on a tile stays an error (below), and the
    # kernel's static checker reports a tile used as a Python number (D003).
    def __index__(self):
        return self.end - self.begin

    # in + - * // % a tile is its indices (Helion's `k[tile_n + start, :]`), as in the generated kernel
    def __add__(self, o):
        return self.index + _tile_operand(o)

    def __radd__(self, o):
        return _tile_operand(o) + self.index

    def __sub__(self, o):
        return self.index - _tile_operand(o)

    def __rsub__(self, o):
        return _tile_operand(o) - self.index

    def __mul__(self, o):
        return self.index * _tile_operand(o)

    def __rmul__(self, o):
        return _tile_operand(o) * self.index

    def __floordiv__(self, o):
        return self.index // _tile_operand(o)

    def __mod__(self, o):
        return self.index % _tile_operand(o)

    def __neg__(self):
        return -self.index

    def __truediv__(self, o):
        raise DeuteronUsageError("tile / x: use tile.index (a tensor) or tile.begin / tile.end")


def _tile_operand(o):
    if isinstance(o, Tile):
        raise DeuteronUsageError("arithmetic on two tiles: use tile.index (a tensor)")
    return o


def _sizes_arg(begin_or_sizes, end):
    """Normalize dt.tile/dt.grid arguments to a list of (begin, end) and whether the caller gave a list."""
    if isinstance(begin_or_sizes, (list, tuple)) or type(begin_or_sizes).__name__ == "Size":
        if end is not None:
            ends = list(end)
            begins = list(begin_or_sizes)
            if len(ends) != len(begins):
                raise DeuteronUsageError("dt.tile(begins, ends): the two lists differ in length")
            return [(int(b), int(e)) for b, e in zip(begins, ends)], True
        return [(0, int(s)) for s in begin_or_sizes], True
    if end is None:
        return [(0, int(begin_or_sizes))], False
    return [(int(begin_or_sizes), int(end))], False


def tile(begin_or_sizes, end=None, block_size=None):
    """Iterate over tiles: ``for tile_m in dt.tile(m)``, ``dt.tile(begin, end)``, ``dt.tile([m, n])``.

    The outermost tile loop of a kernel is its launch grid (up to 3 dimensions);
    nested tile loops are loops inside the kernel.  ``block_size`` fixes the
    tile size (an int, or a list with one entry per dimension, ``None`` =
    tunable); by default the autotuner chooses it (``config.block_sizes``).
    """
    ctx = _context("tile")
    ranges, as_list = _sizes_arg(begin_or_sizes, end)
    if isinstance(block_size, (list, tuple)):
        bss = list(block_size)
        if len(bss) != len(ranges):
            raise DeuteronUsageError(f"dt.tile: {len(ranges)} dimensions but {len(bss)} block sizes")
    else:
        bss = [block_size] * len(ranges)
    unit = getattr(ctx, "unit_tile_lines", None)
    if unit:
        import sys
        f = sys._getframe(1)
        if (f.f_code.co_filename, f.f_lineno) in unit:
            # kernel.ref: a loop enclosing a dt.jagged_tile runs one lane at a time (that lane's loop is exact)
            bss = [1] * len(ranges)
    return ctx.ref_tiles(ranges, bss, as_list)


def jagged_tile(parent):
    """Tiles of a jagged dimension: ``for tile_k in dt.jagged_tile(lengths)`` inside ``for tile_b in dt.tile(b)``.

    ``lengths`` is an int block whose every dimension is an enclosing tile (``ends - starts`` of the rows of
    ``tile_b``).  The loop covers ``[0, max(lengths))``; lane ``k`` of parent lane ``b`` exists only where
    ``k < lengths[b]``: loads there read 0, stores skip it and reductions along ``tile_k`` leave it out (Helion's
    ``hl.jagged_tile``).  Index with ``tile_k`` together with its parent tiles (``x[tile_b, tile_k]``, or a
    gather index built from ``starts[:, None] + tile_k.index[None, :]``).  In ``kernel.ref`` the enclosing loops
    run one lane at a time and this loop covers exactly that lane's length.
    """
    import torch
    ctx = _context("jagged_tile")
    if not isinstance(parent, torch.Tensor):
        raise DeuteronUsageError("dt.jagged_tile(lengths): lengths must be a tensor over enclosing tiles")
    if parent.numel() != 1:
        raise DeuteronUsageError("dt.jagged_tile: kernel.ref needs one parent lane at a time (the loops enclosing "
                                 f"it run with tiles of one element), got lengths of shape {tuple(parent.shape)}")
    n = max(0, int(parent.reshape(()).item()))
    return ctx.ref_tiles([(0, n)], [None], False)


def grid(begin_or_sizes, end=None, step=None):
    """Iterate over single indices: ``for i in dt.grid(n)``, ``dt.grid(begin, end, step)``, ``dt.grid([m, n])``.

    At the top level each index is one program of the launch grid; nested, a
    loop inside the kernel.  The loop variable is a scalar int.
    """
    _context("grid")
    import itertools
    ranges, as_list = _sizes_arg(begin_or_sizes, end)
    st = 1 if step is None else int(step)
    axes = [range(b, e, st) for b, e in ranges]
    if not as_list:
        return iter(axes[0])
    return iter(itertools.product(*axes))


def _resolve_shape(shape):
    if isinstance(shape, (list, tuple)) or type(shape).__name__ == "Size":
        out = []
        for s in shape:
            if isinstance(s, Tile):
                out.append(s.end - s.begin)
            elif isinstance(s, (list, tuple)):
                out.extend(_resolve_shape(s))
            else:
                out.append(int(s))
        return out
    if isinstance(shape, Tile):
        return [shape.end - shape.begin]
    return [int(shape)]


# ---------------------------------------------------------------------------
# tensor creation and math inside tile loops
# ---------------------------------------------------------------------------


def zeros(shape, dtype=None, device=None):
    """A block of zeros: ``acc = dt.zeros([tile_m, tile_n], dtype=torch.float32)`` (fp32 by default).

    ``shape`` holds tiles, ints and ``tile.block_size`` values.  ``device`` (Helion's spelling,
    ``device=x.device``) is accepted: a block always lives where the kernel runs.
    """
    return full(shape, 0, dtype, device)


def full(shape, value, dtype=None, device=None):
    """A block of ``shape`` filled with ``value`` (fp32 by default); ``device`` as for ``dt.zeros``."""
    import torch
    ctx = _context("full")
    return torch.full(_resolve_shape(shape), value, dtype=dtype or torch.float32, device=ctx.device)


def arange(begin_or_end, end=None, step=1, dtype=None):
    """``dt.arange(n)`` / ``dt.arange(begin, end)``: a 1-D tensor of consecutive ints (int32 in the kernel)."""
    import torch
    ctx = _context("arange")
    if end is None:
        begin_or_end, end = 0, begin_or_end
    if isinstance(begin_or_end, Tile) or isinstance(end, Tile):
        raise DeuteronUsageError("dt.arange takes ints; use tile.index for the indices of a tile")
    return torch.arange(int(begin_or_end), int(end), int(step), device=ctx.device, dtype=dtype or torch.int64)


def dot(a, b, acc=None, out_dtype=None):
    """Matrix product on the tensor cores: ``acc = dt.dot(x[tile_m, tile_k], y[tile_k, tile_n], acc=acc)``.

    Accumulates in fp32 (int32 for int8); ``acc`` is added to the product and
    its dtype is the result's; without ``acc`` the result is ``out_dtype``
    (default: fp32 for floating inputs).
    """
    import torch
    if a.dtype.is_floating_point:
        prod = torch.matmul(a.float(), b.float())
        default = torch.float32
    else:
        prod = torch.matmul(a.to(torch.int64), b.to(torch.int64))
        default = torch.int32
    if acc is not None:
        return (acc.to(prod.dtype) + prod).to(acc.dtype)
    return prod.to(out_dtype or default)


class constexpr:  # spelled like Helion's hl.constexpr
    """An annotation: ``def f(x, eps: dt.constexpr)`` makes ``eps`` a compile-time constant of the kernel (one
    program per value) instead of a run-time parameter."""


def static_range(begin_or_end, end=None, step=1):
    """``for i in dt.static_range(4)`` inside a tile loop: a loop unrolled when compiling (the bounds are
    known then); in ``kernel.ref`` a plain ``range``."""
    if end is None:
        begin_or_end, end = 0, begin_or_end
    return range(int(begin_or_end), int(end), int(step))


def load(tensor, index, extra_mask=None, eviction_policy=None):
    """``dt.load(x, [tile_m, tile_n], extra_mask=keep)``: ``x[index]`` with the lanes where ``extra_mask`` is
    False read as 0 (on top of the masks of ragged tiles); ``eviction_policy`` (``"evict_first"`` /
    ``"evict_last"``) is a cache hint for the load.
    """
    import torch

    v = _padded(tensor, ref_index(tuple(index) if isinstance(index, (list, tuple)) else (index,)))
    if extra_mask is not None:
        v = torch.where(extra_mask, v, torch.zeros((), dtype=v.dtype, device=v.device))
    return v


def _padded(tensor, idx):
    """``tensor[idx]`` where slices running past the end read 0 and gathered indices outside the tensor read
    anything (the kernel masks those lanes: its tiles and ``extra_mask``), like the kernel's masked load."""
    import torch

    idx = idx if isinstance(idx, tuple) else (idx,)
    shape = list(tensor.shape)
    grow, fixed, d = False, [], 0
    for it in idx:
        if it is None or it is Ellipsis:
            fixed.append(it)
            continue
        if d < len(shape) and isinstance(it, slice) and it.stop is not None and it.stop > shape[d] and \
                it.step in (None, 1):
            grow = True
            shape[d] = it.stop
        elif d < len(shape) and isinstance(it, torch.Tensor) and not it.dtype.is_floating_point and \
                it.dtype != torch.bool:
            it = it.clamp(0, max(tensor.shape[d] - 1, 0))
        fixed.append(it)
        d += 1
    if not grow:
        return tensor[tuple(fixed)]
    big = torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)
    big[tuple(slice(0, n) for n in tensor.shape)] = tensor
    return big[tuple(fixed)]


def store(tensor, index, value, extra_mask=None):
    """``dt.store(out, [tile_m, tile_n], value, extra_mask=keep)``: ``out[index] = value`` only where
    ``extra_mask`` is True (and inside the tensor)."""
    import torch

    idx = ref_index(tuple(index) if isinstance(index, (list, tuple)) else (index,))
    if extra_mask is None:
        tensor[idx] = value
        return None
    old = tensor[idx]
    val = value if isinstance(value, torch.Tensor) else torch.tensor(value, device=tensor.device)
    tensor[idx] = torch.where(extra_mask, val.to(tensor.dtype), old)
    return None


def _ref_positions(target, index):
    """The index of a dt.atomic_* call as a tuple of broadcast int64 index tensors (tiles are slices in
    kernel.ref; ``tile.index`` and int blocks are gathers), or the plain index when nothing repeats."""
    import torch

    idx = ref_index(tuple(index) if isinstance(index, (list, tuple)) else (index,))
    if not any(isinstance(i, torch.Tensor) for i in idx):
        return idx, None
    parts = []
    for d, it in enumerate(i for i in idx if i is not None):
        if isinstance(it, slice):
            start, stop, step = it.indices(target.shape[d])
            parts.append(torch.arange(start, stop, step, device=target.device))
        elif isinstance(it, torch.Tensor):
            parts.append(it.to(device=target.device, dtype=torch.int64))
        else:
            parts.append(torch.tensor(int(it), device=target.device))
    rank = sum(p.dim() for p in parts)
    pos = 0
    shaped = []
    for p in parts:
        shape = [1] * pos + list(p.shape) + [1] * (rank - pos - p.dim())
        shaped.append(p.reshape(shape) if p.dim() else p)
        pos += p.dim()
    out_shape = torch.broadcast_shapes(*[s.shape for s in shaped])
    return tuple(s.expand(out_shape) for s in shaped), out_shape


_ATOMIC_COMBINE = {
    "add": lambda a, b: a + b, "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
    "max": lambda a, b: __import__("torch").maximum(a, b), "min": lambda a, b: __import__("torch").minimum(a, b),
    "xchg": lambda a, b: b,
}


def _atomic(kind, target, index, value):
    import torch
    pos, shape = _ref_positions(target, index)
    val = value if isinstance(value, torch.Tensor) else torch.tensor(value, device=target.device)
    if shape is None:
        old = target[pos].clone()
        target[pos] = _ATOMIC_COMBINE[kind](target[pos], val.to(target.dtype))
        return old
    val = val.to(target.dtype).expand(shape)
    old = target[pos].clone()  # the old values (exact where the positions do not repeat within the call)
    if kind == "add":
        target.index_put_(pos, val, accumulate=True)
        return old
    # repeated positions combine in order (the result of any order for these commutative ops; xchg: the last)
    flat = [p.reshape(-1) for p in pos]
    for i, v in enumerate(val.reshape(-1)):
        at = tuple(int(f[i]) for f in flat)
        target[at] = _ATOMIC_COMBINE[kind](target[at], v)
    return old


def atomic_add(target, index, value, sem: str = "relaxed", scope: str = "gpu"):
    """``dt.atomic_add(out, [tile_n], partial)``: add ``value`` to ``target[index]`` atomically.

    ``index`` is a list with one entry per dimension of ``target`` (tiles, ints, ``tile.index`` ...);
    ``sem`` is ``"relaxed"`` (default), ``"acquire"``, ``"release"`` or ``"acq_rel"``; ``scope`` is
    ``"gpu"`` (default), ``"cta"`` or ``"sys"``.
    """
    return _atomic("add", target, index, value)


def atomic_and(target, index, value, sem: str = "relaxed", scope: str = "gpu"):
    """``target[index] &= value`` atomically (integer tensors)."""
    return _atomic("and", target, index, value)


def atomic_or(target, index, value, sem: str = "relaxed", scope: str = "gpu"):
    """``target[index] |= value`` atomically (integer tensors)."""
    return _atomic("or", target, index, value)


def atomic_xor(target, index, value, sem: str = "relaxed", scope: str = "gpu"):
    """``target[index] ^= value`` atomically (integer tensors)."""
    return _atomic("xor", target, index, value)


def atomic_max(target, index, value, sem: str = "relaxed", scope: str = "gpu"):
    """``target[index] = max(target[index], value)`` atomically."""
    return _atomic("max", target, index, value)


def atomic_min(target, index, value, sem: str = "relaxed", scope: str = "gpu"):
    """``target[index] = min(target[index], value)`` atomically."""
    return _atomic("min", target, index, value)


def atomic_xchg(target, index, value, sem: str = "relaxed", scope: str = "gpu"):
    """``target[index] = value`` atomically (of several writers to one element, one wins)."""
    return _atomic("xchg", target, index, value)


def atomic_cas(target, index, expected, value, sem: str = "relaxed", scope: str = "gpu"):
    """Compare-and-swap: where ``target[index]`` equals ``expected``, write ``value``; returns the old values.

    ``expected`` and ``value`` broadcast to the indexed shape; ``sem`` and ``scope`` as for ``atomic_add``.
    The lanes of a ragged tile past the tensor's end touch no memory (newt's masked ``atomic_cas``).  Where
    positions repeat within one call, they are compared and swapped one after another in row-major order.
    """
    import torch
    pos, shape = _ref_positions(target, index)
    exp = expected if isinstance(expected, torch.Tensor) else torch.tensor(expected, device=target.device)
    val = value if isinstance(value, torch.Tensor) else torch.tensor(value, device=target.device)
    cur = target[pos]
    exp = exp.to(target.dtype).expand(cur.shape)
    val = val.to(target.dtype).expand(cur.shape)
    old = cur.clone()
    if shape is None:
        target[pos] = torch.where(cur == exp, val, cur)
        return old
    flat = [p.reshape(-1) for p in pos]
    of = old.view(-1)
    for i, (c, v) in enumerate(zip(exp.reshape(-1), val.reshape(-1))):
        at = tuple(int(f[i]) for f in flat)
        now = target[at].clone()
        of[i] = now
        if bool(now == c):
            target[at] = v
    return old


def _pad_positions(signal_pad, index):
    import torch
    if not isinstance(signal_pad, torch.Tensor) or signal_pad.dtype not in (torch.int32, torch.uint32):
        raise DeuteronUsageError("dt.signal / dt.wait take an int32 (or uint32) tensor of flags as the signal pad")
    pos, _ = _ref_positions(signal_pad, [] if index is None else index)
    return pos


def wait(signal_pad, index=None, signal: int = 1, update=None, scope: str = "gpu",
         hasSubsequentMemAccess: bool = True):  # (Helion's spelling)
    """Spin until every flag ``signal_pad[index]`` equals ``signal``; with ``update``, then set it to ``update``
    (one compare-and-swap a flag, so of several waiters on one flag exactly one takes it).

    ``scope`` is ``"gpu"`` (default) or ``"sys"``; ``hasSubsequentMemAccess`` (default True): the wait has
    acquire order and the block's threads meet after it, so what the signalling program wrote before its signal
    is visible to everything after the wait.  In ``kernel.ref`` (tiles run one after another) a flag that is
    not set yet could never become set: an error.
    """
    pos = _pad_positions(signal_pad, index)
    cur = signal_pad[pos]
    if not bool((cur == signal).all()):
        raise DeuteronUsageError(f"dt.wait in kernel.ref: a flag is not {signal} and nothing can set it while "
                                 "the tiles run one after another (the kernel would wait forever if no other "
                                 "program sets it)")
    if update is not None:
        signal_pad[pos] = update
    return None


def signal(signal_pad, index=None, signal: int = 1, wait_for=None, scope: str = "gpu",
           hasPreviousMemAccess: bool = True):
    """Set the flags ``signal_pad[index]`` to ``signal`` and return their old values; with ``wait_for``, first
    wait until each flag equals ``wait_for`` (a compare-and-swap loop).

    ``hasPreviousMemAccess`` (default True): the block's threads meet before the signal and it has release
    order, so what the program wrote before is visible to a program that waits for the signal.
    """
    pos = _pad_positions(signal_pad, index)
    old = signal_pad[pos].clone()
    if wait_for is not None and not bool((old == wait_for).all()):
        raise DeuteronUsageError(f"dt.signal(wait_for={wait_for}) in kernel.ref: a flag is not {wait_for} and "
                                 "nothing can set it while the tiles run one after another")
    signal_pad[pos] = signal
    return old


# ---------------------------------------------------------------------------
# activations (each maps onto one newt expression)
# ---------------------------------------------------------------------------


def relu(x):
    """``max(x, 0)`` elementwise."""
    import torch
    return torch.relu(x)


def sigmoid(x):
    """``1 / (1 + exp(-x))`` elementwise."""
    import torch
    return torch.sigmoid(x)


def silu(x):
    """``x * sigmoid(x)`` elementwise."""
    import torch
    return x * torch.sigmoid(x)


def gelu(x, approximate: str = "none"):
    """GELU elementwise: ``x * Phi(x)`` (``approximate="tanh"`` for the tanh form)."""
    import torch
    return torch.nn.functional.gelu(x, approximate=approximate)


def tanh(x):
    """Hyperbolic tangent elementwise."""
    import torch
    return torch.tanh(x)


def exp(x):
    """``e**x`` elementwise."""
    import torch
    return torch.exp(x)


def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack):
    """Run PTX on every element (or every ``pack`` consecutive elements) of ``args`` (Helion's and Triton's
    ``inline_asm_elementwise``): ``$0..`` are the outputs, then the inputs; ``dtype`` one torch dtype or a tuple
    (then a tuple of results).  The kernel calls ``nl.inline_asm_elementwise``; ``kernel.ref`` runs the PTX with
    newt's evaluator of a PTX subset (docs/interpreter.md)."""
    import torch

    from newt.interpreter import PtxError, inline_asm_torch
    many = isinstance(dtype, (tuple, list))
    xs = list(args) if isinstance(args, (tuple, list)) else [args]
    try:
        with torch._C.DisableTorchFunction():  # plain tensor arithmetic, outside kernel.ref's torch-function mode
            out = inline_asm_torch(asm, constraints, xs, list(dtype) if many else [dtype], int(pack))
    except PtxError as e:
        raise DeuteronUsageError(f"dt.inline_asm_elementwise in kernel.ref: {e} (the eager reference runs a subset "
                                 f"of PTX: docs/interpreter.md)") from None
    return tuple(out) if many else out[0]


# ---------------------------------------------------------------------------
# host-side configuration hooks
# ---------------------------------------------------------------------------


def register_block_size(min_or_max, max=None):
    """A tunable block size (an entry of ``config.block_sizes``) to use with ``dt.tile(n, block_size=bs)``.

    ``dt.register_block_size(n)`` bounds it by ``n`` (rounded up to a power of
    two); ``dt.register_block_size(lo, hi)`` by both.  Call it in the host
    code before the tile loops; it returns the config's value.
    """
    ctx = _context("register_block_size")
    lo, hi = (1, min_or_max) if max is None else (min_or_max, max)
    return ctx.register_block_size(int(lo), int(hi))


def register_tunable(name: str, fragment):
    """A user tunable: ``unroll = dt.register_tunable("unroll", dt.PowerOfTwo(1, 8))``.

    The autotuner searches it like the built-in knobs; ``config`` holds its
    value under ``name`` (``dt.Config(..., unroll=4)``).  Inside tile loops the
    value is a compile-time constant.
    """
    ctx = _context("register_tunable")
    if not isinstance(name, str) or not name.isidentifier():
        raise DeuteronUsageError(f"dt.register_tunable: the name must be an identifier, not {name!r}")
    if not isinstance(fragment, _Fragment):
        raise DeuteronUsageError("dt.register_tunable needs a fragment: dt.PowerOfTwo, dt.IntRange, dt.Choice, dt.Bool")
    return ctx.register_tunable(name, fragment)


def _rng_parts(shape, device):
    import torch
    parts = []
    for d in (shape if isinstance(shape, (list, tuple)) else [shape]):
        if isinstance(d, Tile):
            parts.append((d.index.to(device), d.loop_end))
        else:
            n = int(d)
            parts.append((torch.arange(n, device=device), n))
    return parts


def rand(shape, seed, device=None):
    """``dt.rand([tile_m, tile_n], seed=s)``: uniform float32 in [0, 1), Philox keyed by ``seed`` (an int or an int
    argument), independent of torch's generator.  Element offsets are row-major positions in the full logical
    shape (a tile counts as its whole loop), so every config and ``kernel.ref`` draw the same numbers."""
    from .rng import offsets_for, philox_uint32, uniform
    ctx = _context("rand")
    return uniform(philox_uint32(int(seed), offsets_for(_rng_parts(shape, ctx.device), ctx.device)))


def randint(shape, low, high, seed, device=None):
    """``dt.randint([tile], low, high, seed=s)``: int32 in ``[low, high)`` from the same Philox stream as
    ``dt.rand`` (``low + bits % (high - low)``)."""
    import torch

    from .rng import offsets_for, philox_uint32
    ctx = _context("randint")
    if int(high) <= int(low):
        raise DeuteronUsageError(f"dt.randint: high ({high}) must be greater than low ({low})")
    bits = philox_uint32(int(seed), offsets_for(_rng_parts(shape, ctx.device), ctx.device))
    return (int(low) + bits % (int(high) - int(low))).to(torch.int32)


def _fold(combine_fn, xs, dim, scan):
    import torch
    k = len(xs)
    moved = [x.movedim(dim, 0) for x in xs]
    acc = [m[0] for m in moved]
    steps = [list(acc)] if scan else None
    for i in range(1, moved[0].shape[0]):
        r = combine_fn(*acc, *[m[i] for m in moved])
        r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
        acc = [torch.as_tensor(v, device=a.device).to(a.dtype).expand_as(a) for v, a in zip(r, acc)]
        if scan:
            steps.append(list(acc))
    if scan:
        return [torch.stack([s[j] for s in steps], 0).movedim(0, dim) for j in range(k)]
    return acc


def reduce(combine_fn, input_tensor, dim=None, other=0, keep_dims=False):
    """``dt.reduce(combine_fn, x, dim)``: reduce ``x`` (a block or a tuple of blocks) along ``dim`` with
    ``combine_fn(a0, .., b0, ..)``, which must be associative and commutative; ``other`` fills the masked lanes
    of ragged tiles in the kernel.  ``kernel.ref`` folds left to right with the same function."""
    xs = tuple(input_tensor) if isinstance(input_tensor, (tuple, list)) else (input_tensor,)
    if dim is None:
        dim = 0
    out = _fold(combine_fn, xs, dim, scan=False)
    if keep_dims:
        out = [o.unsqueeze(dim) for o in out]
    return tuple(out) if isinstance(input_tensor, (tuple, list)) else out[0]


def associative_scan(combine_fn, input_tensor, dim, reverse=False):
    """``dt.associative_scan(combine_fn, x, dim)``: the inclusive scan of ``x`` (a block or a tuple of blocks)
    along ``dim`` with an associative ``combine_fn(a0, .., b0, ..)``."""
    xs = tuple(input_tensor) if isinstance(input_tensor, (tuple, list)) else (input_tensor,)
    if reverse:
        xs = tuple(x.flip(dim) for x in xs)
    out = _fold(combine_fn, xs, dim, scan=True)
    if reverse:
        out = [o.flip(dim) for o in out]
    return tuple(out) if isinstance(input_tensor, (tuple, list)) else out[0]


def tile_begin(tile):
    """``dt.tile_begin(t)``: ``t.begin`` (Helion's function spelling; likewise tile_end, tile_index, tile_id,
    tile_block_size)."""
    return tile.begin


def tile_end(tile):
    """``dt.tile_end(t)``: ``t.end``."""
    return tile.end


def tile_index(tile):
    """``dt.tile_index(t)``: ``t.index``."""
    return tile.index


def tile_id(tile):
    """``dt.tile_id(t)``: ``t.id``."""
    return tile.id


def tile_block_size(tile):
    """``dt.tile_block_size(t)``: ``t.block_size``."""
    return tile.block_size


def cumsum(input, dim, reverse=False):
    """``dt.cumsum(x, dim)``: ``torch.cumsum(x, dim)`` (Helion's spelling; ``reverse=True`` is not supported)."""
    import torch
    if reverse:
        raise DeuteronUsageError("dt.cumsum(..., reverse=True) is not supported")
    return torch.cumsum(input, dim)


def cumprod(input, dim, reverse=False):
    """``dt.cumprod(x, dim)``: ``torch.cumprod(x, dim)`` (``reverse=True`` is not supported)."""
    import torch
    if reverse:
        raise DeuteronUsageError("dt.cumprod(..., reverse=True) is not supported")
    return torch.cumprod(input, dim)


def split(x):
    """``a, b = dt.split(x)``: the two halves of a block whose last dimension has 2 elements (``x[..., 0]``,
    ``x[..., 1]``)."""
    if x.shape[-1] != 2:
        raise DeuteronUsageError(f"dt.split needs a last dimension of 2 elements, not {x.shape[-1]}")
    return x[..., 0], x[..., 1]


def subscript(tensor, index):
    """``dt.subscript(v, [slice(None), None])``: Helion's spelling of ``v[:, None]`` for a block inside a tile loop
    (``None`` adds a dimension of 1, ``slice(None)`` keeps one; ``...`` stands for the dimensions not named)."""
    return tensor[tuple(index)]


def join(a, b):
    """``dt.join(a, b)``: one block with a new last dimension of 2 elements (``torch.stack([a, b], -1)``)."""
    import torch
    a, b = torch.broadcast_tensors(a, b)
    return torch.stack([a, b], dim=-1)


def barrier():
    """``dt.barrier()`` between two tile loops of the host code: everything the loops before it wrote is visible
    to the loops after it (Helion's grid-wide barrier between the phases of one kernel).

    Each outermost tile loop is its own launch, and the launches of a call go in order on one stream, so the
    barrier holds by construction; the call marks the phase boundary for the reader.
    """
    return None


def specialize(value):
    """Make a host int (a size) a compile-time constant of the kernel: ``n = dt.specialize(x.size(1))``.

    Also accepts a tuple of ints (``dt.specialize(x.shape)``).
    """
    ctx = _CONTEXT.get()
    if ctx is None:
        return value
    return ctx.specialize(value)


# ---------------------------------------------------------------------------
# fragments of user tunables
# ---------------------------------------------------------------------------


class _Fragment:
    def choices(self) -> list:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def default(self):
        return self._default

    def to_json(self) -> dict:
        return {"kind": type(self).__name__, "choices": self.choices(), "default": self.default}


class PowerOfTwo(_Fragment):
    """Powers of two from ``low`` to ``high`` (inclusive)."""

    def __init__(self, low: int, high: int, default: int | None = None):
        if low < 1 or low & (low - 1) or high & (high - 1) or high < low:
            raise DeuteronUsageError(f"dt.PowerOfTwo({low}, {high}): bounds must be powers of two, low <= high")
        self.low, self.high = int(low), int(high)
        self._default = int(default) if default is not None else self.low
        if self._default not in self.choices():
            raise DeuteronUsageError(f"dt.PowerOfTwo: default {default} is not in {self.choices()}")

    def choices(self) -> list:
        return [1 << i for i in range(int(_math.log2(self.low)), int(_math.log2(self.high)) + 1)]

    def __repr__(self):
        return f"dt.PowerOfTwo({self.low}, {self.high}, default={self._default})"


class IntRange(_Fragment):
    """Ints from ``low`` to ``high`` (inclusive)."""

    def __init__(self, low: int, high: int, default: int | None = None):
        if high < low:
            raise DeuteronUsageError(f"dt.IntRange({low}, {high}): low > high")
        self.low, self.high = int(low), int(high)
        self._default = int(default) if default is not None else self.low

    def choices(self) -> list:
        return list(range(self.low, self.high + 1))

    def __repr__(self):
        return f"dt.IntRange({self.low}, {self.high}, default={self._default})"


class Choice(_Fragment):
    """One of ``values`` (ints, floats, strings, bools)."""

    def __init__(self, values=None, default=None, *, choices=None):
        if choices is not None:  # Helion's EnumFragment(choices=(...))
            if values is not None:
                raise DeuteronUsageError("dt.Choice: give the values once (values or choices=)")
            values = choices
        if values is None:
            raise DeuteronUsageError("dt.Choice needs its values: dt.Choice([...]) or EnumFragment(choices=(...))")
        self.values = list(values)
        if not self.values:
            raise DeuteronUsageError("dt.Choice needs at least one value")
        self._default = self.values[0] if default is None else default
        if self._default not in self.values:
            raise DeuteronUsageError(f"dt.Choice: default {default!r} is not one of {self.values!r}")

    def choices(self) -> list:
        return list(self.values)

    def __repr__(self):
        return f"dt.Choice({self.values!r}, default={self._default!r})"


class Bool(Choice):
    """``True`` or ``False``."""

    def __init__(self, default: bool = False):
        super().__init__([False, True], default=bool(default))

    def __repr__(self):
        return f"dt.Bool(default={self._default})"


# Helion's spellings
PowerOfTwoFragment = PowerOfTwo
IntegerFragment = IntRange
EnumFragment = Choice
BooleanFragment = Bool


def ref_index(idx):
    """Tiles -> slices inside an index (also nested tuples of tiles from ``dt.tile(x.size())``)."""
    if isinstance(idx, Tile):
        return slice(idx.begin, idx.end)
    if isinstance(idx, (tuple, list)):
        out = []
        for it in idx:
            if isinstance(it, Tile):
                out.append(slice(it.begin, it.end))
            elif isinstance(it, (tuple, list)) and it and all(isinstance(x, (Tile, slice, int, type(None)))
                                                              for x in it):
                out.extend(ref_index(tuple(it)))
            else:
                out.append(it)
        return tuple(out)
    return idx
