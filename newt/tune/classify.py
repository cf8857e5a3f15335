"""One status per failed tuning task, the same for every executor and every caller.

``ok``, ``compile_error``, ``out_of_resources``, ``timeout``, ``crashed`` (the
worker process died), ``fault`` (the CUDA context is dead: the worker is
replaced), ``launch_error``, ``wrong`` (set by the caller's check),
``hopeless`` (stopped early: far slower than the best so far), ``cancelled``
and ``error`` (anything else, with a traceback).
"""

from __future__ import annotations

import traceback

__all__ = ["classify", "STATUSES", "FAILED"]

STATUSES = ("ok", "compile_error", "out_of_resources", "timeout", "crashed", "fault", "launch_error", "wrong",
            "hopeless", "cancelled", "error", "invalid")
FAILED = frozenset(STATUSES) - {"ok"}


def classify(e: BaseException) -> dict:
    """A result dict ``{"status", "message"[, "fatal", "traceback"]}`` for an exception raised by a task."""
    name = type(e).__name__
    msg = str(e).strip().splitlines()
    first = msg[0] if msg else name
    from newt.diagnostics import CompilationError
    from newt.runtime.errors import KernelFaultError, LaunchError, OutOfResources
    if isinstance(e, KeyboardInterrupt):
        return {"status": "cancelled", "message": "interrupted"}
    if isinstance(e, OutOfResources):
        return {"status": "out_of_resources", "message": first}
    if isinstance(e, KernelFaultError):
        return {"status": "fault", "message": first, "fatal": True}
    if isinstance(e, LaunchError):
        sticky = bool(getattr(e, "sticky", False))
        code = getattr(e, "code", None) or ""
        if "OUT_OF_RESOURCES" in code or "out of resources" in first.lower():
            return {"status": "out_of_resources", "message": first}
        return {"status": "fault" if sticky else "launch_error", "message": first, "fatal": sticky}
    if isinstance(e, CompilationError):
        return {"status": "compile_error", "message": "\n".join(msg[:12])}
    if name == "KilledWorker":  # distributed: the task's worker died (as often as the scheduler allows)
        return {"status": "crashed", "message": f"the worker process died: {first}"}
    low = first.lower()
    if "illegal" in low or "misaligned" in low or "unspecified launch failure" in low:
        return {"status": "fault", "message": first, "fatal": True}
    if "out of memory" in low or "too many resources" in low or "shared memory" in low:
        return {"status": "out_of_resources", "message": first}
    return {"status": "error", "message": f"{name}: {first}",
            "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]}
