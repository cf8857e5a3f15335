"""``kernel.ref(*args)``: the same function run eagerly in PyTorch -- the oracle.

Tiles are slices of the dimension they cover (by default one tile spans the
whole loop, so the reference is a handful of vectorized torch ops); tensors
indexed with tiles are views; ``dt.zeros`` allocates on the kernel's device.
Matmuls of fp16/bf16 operands accumulate in fp32, like the tensor cores.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from . import language as L
from .language import ref_index

__all__ = ["RefContext", "ref_index", "run_ref"]



def _sizes(args):
    out = []
    for a in args:
        if isinstance(a, L.Tile):
            out.append(a.end - a.begin)
        elif isinstance(a, (list, tuple, torch.Size)):
            out.append(type(a)(_sizes(a)) if not isinstance(a, torch.Size) else a)
        else:
            out.append(a)
    return out


_LOW = (torch.float16, torch.bfloat16)


def _mm_dtype(*ts):
    return torch.result_type(*ts[:2]) if len(ts) >= 2 else ts[0].dtype


class _RefMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.__getitem__ or func is torch.Tensor.__setitem__:
            args = (args[0], ref_index(args[1])) + tuple(args[2:])
            return func(*args, **kwargs)
        if func in _CREATORS:
            args = tuple(_sizes(args))
            if "size" in kwargs:
                kwargs["size"] = _sizes([kwargs["size"]])[0]
            return func(*args, **kwargs)
        if func in _MATMULS:
            a, b = args[0], args[1]
            out_dtype = args[2] if len(args) > 2 else kwargs.get("out_dtype")
            if out_dtype is not None and func is not torch.matmul and isinstance(a, torch.Tensor) and \
                    isinstance(b, torch.Tensor) and a.dtype == b.dtype:
                # torch.mm/bmm(a, b, out_dtype): accumulate in fp32 and round once (CUDA's kernel; the CPU lacks it)
                acc = torch.matmul(a.float(), b.float()) if a.dtype.is_floating_point else torch.matmul(a, b)
                return acc.to(out_dtype)
            # mixed dtypes (fp16 @ fp32) fall through to torch, which rejects them like eager PyTorch does
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.dtype in _LOW:
                out_dtype = torch.promote_types(a.dtype, b.dtype)
                return torch.matmul(a.float(), b.float()).to(out_dtype)
            return func(*args, **kwargs)
        if func in _ADDMMS:
            acc, a, b = args[0], args[1], args[2]
            beta = kwargs.get("beta", 1)
            alpha = kwargs.get("alpha", 1)
            if isinstance(acc, torch.Tensor) and (a.dtype in _LOW or b.dtype in _LOW or acc.dtype != a.dtype):
                prod = torch.matmul(a.float(), b.float())
                return (acc.float() * beta + prod * alpha).to(acc.dtype)
            return func(*args, **kwargs)
        return func(*args, **kwargs)


_CREATORS = {torch.zeros, torch.ones, torch.empty, torch.full, torch.Tensor.new_zeros, torch.Tensor.new_ones,
             torch.Tensor.new_empty, torch.Tensor.new_full, torch.Tensor.view, torch.Tensor.reshape,
             torch.Tensor.expand, torch.reshape}
_MATMULS = {torch.matmul, torch.Tensor.__matmul__, torch.Tensor.matmul, torch.mm, torch.Tensor.mm, torch.bmm,
            torch.Tensor.bmm}
_ADDMMS = {torch.addmm, torch.baddbmm, torch.Tensor.addmm, torch.Tensor.baddbmm}


class RefContext:
    """The host context of ``kernel.ref``: tiles are slices."""

    mode = "ref"

    def __init__(self, device, config=None, block_sizes: str = "whole", unit_tile_lines=frozenset()):
        self.device = device
        self.config = config
        self.block_sizes = block_sizes  # "whole": one tile per loop; "config": the config's sizes
        self._registered = 0
        self.unit_tile_lines = unit_tile_lines  # (file, line) of dt.tile calls run one lane at a time

    def ref_tiles(self, ranges, bss, as_list):
        import itertools
        axes = []
        for (b, e), bs in zip(ranges, bss):
            ext = max(0, e - b)
            if bs is None:
                size = max(1, ext)
            else:
                size = int(bs)
                if size < 1:
                    raise L.DeuteronUsageError(f"dt.tile: block size {size} must be positive")
            count = -(-ext // size) if ext else 0
            axes.append([L.Tile(s, min(s + size, e), size, i, count, self.device, loop_end=e)
                         for i, s in enumerate(range(b, e, size))])
        if not as_list:
            return iter(axes[0])
        return iter(itertools.product(*axes))

    def register_block_size(self, lo, hi):
        """The register's upper bound, as given (not rounded): a loop ``dt.tile(n, block_size=bs)`` with
        ``bs = dt.register_block_size(n)`` is then one tile, and ``dt.zeros([tile_m, bs])`` has the width of
        that tile (the kernel's block of ``bs`` lanes past ``n`` holds what the masked loads left: zeros)."""
        self._registered += 1
        return max(1, int(hi), int(lo))

    def register_tunable(self, name, fragment):
        if self.config is not None and name in self.config.tunables:
            return self.config.tunables[name]
        return fragment.default

    def specialize(self, value):
        return value


def _device_of(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a.device
        if isinstance(a, (list, tuple)):
            for x in a:
                if isinstance(x, torch.Tensor):
                    return x.device
    return torch.device("cpu")


def jagged_parent_lines(fn, structure) -> frozenset:
    """(file, line) of every ``dt.tile`` loop that encloses a ``dt.jagged_tile``: kernel.ref runs those one lane
    at a time, so each lane's jagged loop covers exactly its length (the kernel masks the lanes instead)."""
    import ast
    jagged = [s.loop for s in structure.sites if s.jagged]
    if not jagged:
        return frozenset()
    path = fn.__code__.co_filename
    out = set()
    for s in structure.sites:
        if s.jagged or s.kind != "tile":
            continue
        inner = {id(n) for n in ast.walk(s.loop)}
        if any(id(j) in inner and j is not s.loop for j in jagged):
            for line in range(s.loop.lineno, s.node.end_lineno + 1):
                out.add((path, line))
    return frozenset(out)


def run_ref(fn, args, kwargs, config=None, structure=None):
    lines = jagged_parent_lines(fn, structure) if structure is not None else frozenset()
    ctx = RefContext(_device_of(args, kwargs), config, unit_tile_lines=lines)
    token = L._CONTEXT.set(ctx)
    try:
        with _RefMode():
            return fn(*args, **kwargs)
    finally:
        L._CONTEXT.reset(token)
