"""``python -m newt.tune.worker FD [HANDLER]``: one tuning worker process.

Reads ``(task id, payload)`` frames on stdin (``None`` ends it, ``{"cancel":
task id}`` asks a running task to stop) and answers ``(task id, result
dict)`` on file descriptor ``FD``; while a task runs it may send events
``(task id, kind, data)`` with :func:`emit` and poll :func:`cancelled` (the
pool's cooperative cancel: stop between steps).  A payload is ``(function
reference, argument)`` -- ``"module:function"`` -- unless a ``HANDLER``
reference is given, which then receives every payload.  An exception is a
result (``newt.tune.classify``); a fatal one (a faulted CUDA context) ends the
process after answering, and the pool replaces it.

The protocol uses a private copy of stdin (a reader thread takes frames as they
come, so a cancel reaches a running task); the task's own stdin is
``/dev/null``.  ``NEWT_TUNE_CWD``: the folder to change to once the worker has
started (the pool starts isolated workers in an empty folder, so nothing there
shadows an import at start-up).  The worker exits when its parent dies.

``NEWT_TUNE_PRELOAD`` (``"module:function,module"``) names what the worker
calls or imports before it reads its first task -- the compiler and NVRTC for
a compile worker, torch and the CUDA context for a timing worker -- so that a
pool started at the beginning of a tune is warm when the first configs arrive.
"""

from __future__ import annotations

import importlib
import os
import queue
import sys
import threading
import time

from .classify import classify

__all__ = ["cancelled", "emit", "main", "resolve", "run_call"]

_RESOLVED: dict = {}


class _Channel:
    """The worker's end of the protocol: a reader thread, the answer pipe, the task running now."""

    def __init__(self, out_fd: int):
        self.inp = os.fdopen(os.dup(0), "rb", buffering=0)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # the task's stdin: nothing (the protocol has its own copy)
        os.close(devnull)
        self.out = os.fdopen(out_fd, "wb", buffering=0)
        self.lock = threading.Lock()
        self.tasks: queue.Queue = queue.Queue()
        self.cancelled: set = set()
        self.current = None
        threading.Thread(target=self._read, name="newt-tune-reader", daemon=True).start()

    def _read(self):
        import pickle

        from .workers import _HDR
        while True:
            head = _read_all(self.inp, _HDR.size)
            if head is None:
                break
            (n,) = _HDR.unpack(head)
            body = _read_all(self.inp, n)
            if body is None:
                break
            msg = pickle.loads(body)
            if msg is None:
                break
            if isinstance(msg, dict) and "cancel" in msg:
                self.cancelled.add(msg["cancel"])
                continue
            self.tasks.put(msg)
        self.tasks.put(None)  # the pool closed us or went away

    def send(self, obj):
        from .workers import write_frame
        with self.lock:
            write_frame(self.out, obj)


def _read_all(f, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            return None
        buf.extend(chunk)
    return bytes(buf)


_CHANNEL: _Channel | None = None


def emit(kind: str, data=None) -> None:
    """Send an event about the running task to the pool (its ``on_event``); it also resets the task's
    timeout.  Outside a worker (a task run in-process) it does nothing."""
    ch = _CHANNEL
    if ch is not None and ch.current is not None:
        ch.send((ch.current, kind, data))


def cancelled() -> bool:
    """Whether the pool asked the running task to stop (``ProcessPool.cancel_task``)."""
    ch = _CHANNEL
    return ch is not None and ch.current is not None and ch.current in ch.cancelled


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
    except BaseException as e:  # every failure is a result
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
        except Exception as e:
            sys.stderr.write(f"newt tuning worker: preloading {ref} failed: {type(e).__name__}: {e}\n")


def _watch_parent():
    """Exit when the pool's process dies (closing stdin ends us too, but not while a task runs)."""
    ppid = os.getppid()

    def watch():
        while True:
            time.sleep(2.0)
            if os.getppid() != ppid:
                os._exit(4)

    threading.Thread(target=watch, name="newt-tune-parent", daemon=True).start()


def main(argv=None) -> int:
    global _CHANNEL
    argv = sys.argv[1:] if argv is None else argv
    ch = _CHANNEL = _Channel(int(argv[0]))
    _watch_parent()
    preload(os.environ.get("NEWT_TUNE_PRELOAD"))
    handler = resolve(argv[1]) if len(argv) > 1 else None
    cwd = os.environ.pop("NEWT_TUNE_CWD", "")
    if cwd and os.path.isdir(cwd):
        os.chdir(cwd)  # after start-up: imports above never saw this folder
    while True:
        msg = ch.tasks.get()
        if msg is None:
            return 0
        tid, payload = msg
        ch.current = tid
        if handler is not None:
            t0 = time.perf_counter()
            try:
                res = handler(payload)
            except BaseException as e:
                res = classify(e)
            res["seconds"] = time.perf_counter() - t0
        else:
            ref, arg = payload
            res = run_call(ref, arg)
        ch.current = None
        ch.send((tid, res))
        ch.cancelled.discard(tid)
        if res.get("fatal"):
            sys.stderr.flush()
            return 3


if __name__ == "__main__":
    # run the module's importable copy: tasks that import newt.tune.worker (emit, cancelled) must see this channel
    from newt.tune import worker as _worker
    sys.exit(_worker.main())
