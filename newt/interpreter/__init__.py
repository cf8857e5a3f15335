"""newt's CPU interpreter: run the tile IR of a kernel with torch, no GPU needed.

* ``launch(fn, grid, args, *, num_warps=4)`` runs an ``ir.Function`` (what
  ``newt.frontend.build_ir`` returns) over ``grid`` (up to 3-D); ``args`` are
  the run-time arguments in parameter order: torch tensors for pointers
  (CPU tensors are used in place, CUDA tensors are copied in and out), Python
  numbers for scalars.
* ``newt.runtime.interpret.launch_jit(kernel, grid, args, kwargs)`` (in the
  runtime layer: it specializes like the JIT) does what ``kernel[grid](*args,
  **kwargs)`` does on the GPU, through this package.
* ``is_enabled(kernel)``: whether a launch should be interpreted
  (``@newt.jit(interpret=True)``, or ``NEWT_INTERPRET=1`` unless the kernel
  says ``interpret=False``).

Errors: :class:`OutOfBoundsError` (with the kernel, ``file:line:col``, the
program id and the offending offset), :class:`DeviceAssertionError`,
:class:`DeadlockError`, :class:`MisalignedAddressError`, all
:class:`InterpreterError`.  docs/interpreter.md explains the design.
"""

from __future__ import annotations

import os

from .errors import (
    DeadlockError,
    DeviceAssertionError,
    InterpreterError,
    MisalignedAddressError,
    OutOfBoundsError,
)
from .executor import choose_mode, get_plan, launch
from .ptx import PtxError, inline_asm_torch  # noqa: F401  (nl.inline_asm_elementwise on torch tensors)

__all__ = ["launch", "is_enabled", "InterpreterError", "OutOfBoundsError",
           "DeviceAssertionError", "DeadlockError", "MisalignedAddressError", "execution_mode"]

_TRUE = ("1", "true", "yes", "on")


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


