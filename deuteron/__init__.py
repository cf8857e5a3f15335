"""deuteron: a Helion-like tile language on top of newt (``import deuteron as dt``).

Write PyTorch-like code over tiles; deuteron turns the tile loops into one
readable newt kernel, checks every config against the eager PyTorch version
of the same function and autotunes::

    @dt.kernel
    def add(x, y):
        out = torch.empty_like(x)
        for tile in dt.tile(out.size()):
            out[tile] = x[tile] + y[tile]
        return out

Importing deuteron does not import torch (the language server loads it).
"""

from __future__ import annotations

from . import frontend as _frontend  # noqa: F401  (registers @dt.kernel with newt's front end)
from ._version import __version__  # noqa: F401
from .config import Config, ConfigError  # noqa: F401
from .kernel import Kernel, kernel  # noqa: F401
from .language import (  # noqa: F401
    Bool,
    BooleanFragment,
    Choice,
    DeuteronUsageError,
    EnumFragment,
    IntegerFragment,
    IntRange,
    PowerOfTwo,
    PowerOfTwoFragment,
    Tile,
    arange,
    associative_scan,
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_xchg,
    atomic_xor,
    barrier,
    cdiv,
    constexpr,
    cumprod,
    cumsum,
    dot,
    exp,
    full,
    gelu,
    grid,
    inline_asm_elementwise,
    jagged_tile,
    join,
    load,
    next_power_of_2,
    rand,
    randint,
    reduce,
    register_block_size,
    register_tunable,
    relu,
    sigmoid,
    signal,
    silu,
    specialize,
    split,
    static_range,
    store,
    subscript,
    tanh,
    tile,
    tile_begin,
    tile_block_size,
    tile_end,
    tile_id,
    tile_index,
    wait,
    zeros,
)
from .ops import dt_stubs as _dt_stubs

# every dt.* op of the op table (deuteron/ops/) is public: an op added there needs no line here
for _name, _stub in _dt_stubs().items():
    globals().setdefault(_name, _stub)
del _name, _stub

_LAZY = {
    "autotune": ("deuteron.autotune", None),
    "errors": ("deuteron.errors", None),
    "exc": ("deuteron.exc", None),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        mod, attr = _LAZY[name]
        m = importlib.import_module(mod)
        val = m if attr is None else getattr(m, attr)
        globals()[name] = val
        return val
    raise AttributeError(f"module 'deuteron' has no attribute {name!r}")
