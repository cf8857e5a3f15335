"""The newt runtime: ``@newt.jit``, launching, caches, ``newt.compile`` (autotuning is ``newt.tune.autotuner``,
one layer up: it drives the tuning executor, which compiles and launches through this package).

Importing this package is light; torch and the CUDA bindings are imported
when a kernel is first compiled or launched.  See docs/runtime.md.
"""

from .compiler import CompiledKernel, compile  # noqa: F401
from .errors import KernelFaultError, LaunchError, OutOfResources  # noqa: F401
from .jit import JITFunction, jit  # noqa: F401


def synchronize(device=None):
    """Wait for the GPU; a kernel fault raises ``KernelFaultError`` naming the last newt kernel launched."""
    from .driver import synchronize as _sync
    _sync(device)


def has_gpu() -> bool:
    """Whether a CUDA device can be used here (the driver loads and sees one)."""
    from .driver import has_gpu as _has_gpu
    return _has_gpu()


def nvrtc_version() -> str:
    """The NVRTC version kernels compile with (part of every cache key)."""
    from .compiler import nvrtc_version as _v
    return _v()


def cache_dir():
    """The disk cache directory in use (None when the disk cache is off)."""
    from .cache import get_cache
    return get_cache().root


def clear_cache(disk: bool = False):
    """Forget compiled kernels held in memory (and, with ``disk=True``, the disk cache)."""
    from . import compiler
    from .cache import get_cache
    compiler.clear_memory_cache()
    if disk:
        get_cache().clear()


#: names this package exported before the autotuner moved up to ``newt.tune.autotuner`` (issue 26); code written
#: against them (``newt.runtime.Config``, ``newt.runtime.Autotuner``) still finds them, through newt's public
#: facade, which loads them lazily -- the runtime itself never imports the tuning layer
_MOVED_TO_TUNE = ("Autotuner", "Config", "Heuristics", "autotune", "heuristics")


def __getattr__(name):
    if name in _MOVED_TO_TUNE:
        import newt
        return getattr(newt, name)
    raise AttributeError(f"module 'newt.runtime' has no attribute {name!r}")
