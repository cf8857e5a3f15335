"""newt: a Triton-compatible kernel language compiled to CUDA through NVRTC.

``import newt.language as nl`` for the kernel language; ``@newt.jit`` to define
kernels; ``kernel[grid](...)`` to launch them.  Importing ``newt`` is light:
torch and the CUDA bindings load only when a kernel is compiled or launched.
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import language  # noqa: F401
from .diagnostics import CompilationError  # noqa: F401


def cdiv(x: int, y: int) -> int:
    """Ceiling division of two Python ints."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


_LAZY = {
    "jit": ("newt.runtime", "jit"),
    "JITFunction": ("newt.runtime", "JITFunction"),
    "autotune": ("newt.tune.autotuner", "autotune"),
    "heuristics": ("newt.tune.autotuner", "heuristics"),
    "Config": ("newt.tune.autotuner", "Config"),
    "compile": ("newt.runtime", "compile"),
    "Autotuner": ("newt.tune.autotuner", "Autotuner"),
    "Heuristics": ("newt.tune.autotuner", "Heuristics"),
    "reinterpret": ("newt.runtime.wrappers", "reinterpret"),
    "TensorWrapper": ("newt.runtime.wrappers", "TensorWrapper"),
    "constexpr_function": ("newt.runtime.jit", "constexpr_function"),
    "set_allocator": ("newt.runtime.allocator", "set_allocator"),
    "testing": ("newt.testing", None),
    "interpreter": ("newt.interpreter", None),
    "library": ("newt.library", None),
}


def __getattr__(name):
    """Runtime pieces load on first use so ``import newt`` stays light."""
    if name in _LAZY:
        import importlib
        mod, attr = _LAZY[name]
        m = importlib.import_module(mod)
        val = m if attr is None else getattr(m, attr)
        globals()[name] = val
        return val
    raise AttributeError(f"module 'newt' has no attribute {name!r}")
