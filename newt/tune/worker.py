"""``python -m newt.tune.worker FD [HANDLER]``: one tuning worker process.

Reads ``(task id, payload)`` frames on stdin (``None`` ends it) and answers
``(task id, result dict)`` on file descriptor ``FD``.  A payload is
``(function reference, argument)`` -- ``"module:function"`` -- unless a
``HANDLER`` reference is given, which then receives every payload.  An
exception is a result (``newt.tune.classify``); a fatal one (a faulted CUDA
context) ends the process after answering, and the pool replaces it.

``NEWT_TUNE_PRELOAD`` (``"module:function,module"``) names what the worker
calls or imports before it reads its first task -- the compiler and NVRTC for
a compile worker, torch and the CUDA context for a timing worker -- so that a
pool started at the beginning of a tune is warm when the first configs arrive.
"""

from __future__ import annotations

import importlib
import os
import sys
import time

from .classify import classify

_RESOLVED: dict = {}


def resolve(ref: str):
    """``"package.module:function"`` (or ``"module:Class.method"``) -> the object."""
    fn = _RESOLVED.get(ref)
    if fn is None:
        mod, _, attr = ref.partition(":")
        obj = importlib.import_module(mod)
        for part in attr.split("."):
            obj = getattr(obj, part)
        fn = _RESOLVED[ref] = obj
    return fn


def run_call(ref: str, arg) -> dict:
    """Run one task in this process; every failure is a result."""
    t0 = time.perf_counter()
    try:
        res = resolve(ref)(arg)
        if not isinstance(res, dict):
            res = {"status": "ok", "value": res}
        res.setdefault("status", "ok")
    except BaseException as e:  # noqa: BLE001 - every failure is a result
        res = classify(e)
    res["seconds"] = time.perf_counter() - t0
    res.setdefault("pid", os.getpid())
    return res


def preload(spec: str | None) -> None:
    """Import / call every reference of ``spec`` (comma-separated); a failure only goes to the log (the
    first task then meets the same problem and reports it)."""
    for ref in (spec or "").split(","):
        ref = ref.strip()
        if not ref:
            continue
        try:
            if ":" in ref:
                resolve(ref)()
            else:
                importlib.import_module(ref)
        except Exception as e:  # noqa: BLE001
            sys.stderr.write(f"newt tuning worker: preloading {ref} failed: {type(e).__name__}: {e}\n")


def main(argv=None) -> int:
    from .workers import _HDR, write_frame
    import pickle
    argv = sys.argv[1:] if argv is None else argv
    preload(os.environ.get("NEWT_TUNE_PRELOAD"))
    out = os.fdopen(int(argv[0]), "wb", buffering=0)
    handler = resolve(argv[1]) if len(argv) > 1 else None
    inp = sys.stdin.buffer
    while True:
        head = inp.read(_HDR.size)
        if len(head) < _HDR.size:
            return 0
        (n,) = _HDR.unpack(head)
        msg = pickle.loads(inp.read(n))
        if msg is None:
            return 0
        tid, payload = msg
        if handler is not None:
            t0 = time.perf_counter()
            try:
                res = handler(payload)
            except BaseException as e:  # noqa: BLE001
                res = classify(e)
            res["seconds"] = time.perf_counter() - t0
        else:
            ref, arg = payload
            res = run_call(ref, arg)
        write_frame(out, (tid, res))
        if res.get("fatal"):
            return 3


if __name__ == "__main__":
    sys.exit(main())
