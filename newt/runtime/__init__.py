"""The newt runtime: ``@newt.jit``, launching, caches, autotuning.

Importing this package is light; torch and the CUDA bindings are imported
when a kernel is first compiled or launched.
"""

from .jit import JITFunction, jit  # noqa: F401
