"""newt's CPU interpreter: run the tile IR of a kernel with torch, no GPU needed.

* ``launch(fn, grid, args, *, num_warps=4)`` runs an ``ir.Function`` (what
  ``newt.frontend.build_ir`` returns) over ``grid`` (up to 3-D); ``args`` are
  the run-time arguments in parameter order: torch tensors for pointers
  (CPU tensors are used in place, CUDA tensors are copied in and out), Python
  numbers for scalars.
* ``launch_jit(kernel, grid, args, kwargs)`` does what ``kernel[grid](*args,
  **kwargs)`` does on the GPU: specialize on the arguments, build the IR, run
  it.  ``grid`` may be a tuple or a callable taking the arguments by name.
* ``is_enabled(kernel)``: whether a launch should be interpreted
  (``@newt.jit(interpret=True)``, or ``NEWT_INTERPRET=1`` unless the kernel
  says ``interpret=False``).

Errors: :class:`OutOfBoundsError` (with the kernel, ``file:line:col``, the
program id and the offending offset), :class:`DeviceAssertionError`,
:class:`DeadlockError`, :class:`MisalignedAddressError`, all
:class:`InterpreterError`.  docs/interpreter.md explains the design.
"""

from __future__ import annotations

import inspect
import os
import sys
import weakref

from .errors import (  # noqa: F401
    DeadlockError, DeviceAssertionError, InterpreterError, MisalignedAddressError, OutOfBoundsError,
)
from .executor import choose_mode, get_plan, launch  # noqa: F401

__all__ = ["launch", "launch_jit", "is_enabled", "build", "InterpreterError", "OutOfBoundsError",
           "DeviceAssertionError", "DeadlockError", "MisalignedAddressError", "execution_mode"]

_TRUE = ("1", "true", "yes", "on")
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "stream", "warmup", "enable_fp_fusion",
                   "debug", "launch_cooperative_grid")

_IR_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def is_enabled(kernel=None) -> bool:
    """True when launches of ``kernel`` go to the interpreter.

    ``@newt.jit(interpret=True/False)`` decides when given; otherwise the
    ``NEWT_INTERPRET`` environment variable (``1``, ``true``, ``yes``, ``on``).
    """
    flag = getattr(kernel, "interpret", None) if kernel is not None else None
    if flag is not None:
        return bool(flag)
    return os.environ.get("NEWT_INTERPRET", "").strip().lower() in _TRUE


def execution_mode(fn, mode: str | None = None) -> str:
    """``"vectorized"`` or ``"sequential"``: how ``launch`` would run ``fn`` (an ``ir.Function``)."""
    return choose_mode(get_plan(fn), mode)


def build(kernel, args=(), kwargs=None):
    """Specialize ``kernel`` on launch arguments and build its IR (cached per specialization).

    Returns ``(ir.Function, Specialization)``.  Launch options (``num_warps``,
    ``num_stages`` ...) in ``kwargs`` are taken out first.
    """
    from newt.frontend import build_ir
    from newt.runtime.specialize import specialize

    kwargs = dict(kwargs or {})
    opts = {k: kwargs.pop(k) for k in list(kwargs) if k in _LAUNCH_OPTIONS}
    spec = specialize(kernel, tuple(args), kwargs)
    num_warps = opts.get("num_warps")
    num_stages = opts.get("num_stages")
    key = (spec.key, num_warps, num_stages)
    try:
        per_kernel = _IR_CACHE.setdefault(kernel, {})
    except TypeError:  # not weak-referenceable
        per_kernel = {}
    fn = per_kernel.get(key)
    if fn is None:
        fn = build_ir(kernel, spec.arg_types, spec.constexprs, spec.divisibility, num_warps=num_warps,
                      num_stages=num_stages)
        for line in getattr(fn, "static_prints", ()) or ():
            print(line, file=sys.stdout)
        per_kernel[key] = fn
    return fn, spec


def _meta(kernel, args, kwargs):
    sig = getattr(kernel, "signature", None)
    if sig is None:
        sig = inspect.signature(kernel.fn)
    kw = {k: v for k, v in kwargs.items() if k not in _LAUNCH_OPTIONS}
    ba = sig.bind_partial(*args, **kw)
    ba.apply_defaults()
    meta = dict(ba.arguments)
    for k in _LAUNCH_OPTIONS:
        if k in kwargs:
            meta[k] = kwargs[k]
    return meta


def launch_jit(kernel, grid, args=(), kwargs=None, *, mode: str | None = None, stdout=None):
    """Interpret ``kernel[grid](*args, **kwargs)``: specialize, build the IR, run it on the CPU."""
    kwargs = dict(kwargs or {})
    args = tuple(args)
    if callable(grid):
        grid = grid(_meta(kernel, args, kwargs))
    fn, spec = build(kernel, args, kwargs)
    launch(fn, grid, spec.runtime_args, num_warps=kwargs.get("num_warps") or 4, mode=mode, stdout=stdout)
    return fn
