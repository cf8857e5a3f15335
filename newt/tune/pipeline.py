"""Compiling many candidates through an executor, as they finish.

:func:`compile_stream` submits every :class:`~newt.tune.tasks.CompileTask`,
keeps at most twice the executor's compile slots in flight (so an adapted
timeout applies to the rest), installs each compiled entry into this
process's caches under the main process's key, and yields ``(index,
result)`` in completion order -- the caller times one candidate while the
workers compile the next ones (compile and timing overlap).
"""

from __future__ import annotations

import atexit
import os
import threading

from .tasks import COMPILE, install

__all__ = ["compile_stream", "compile_all", "shared_executor", "close_shared"]

_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()
#: the environment an executor's choice depends on (a change gives another shared executor)
_ENV = ("NEWT_TUNE_CLUSTER", "NEWT_TUNE_EXECUTOR", "NEWT_TUNE_WORKERS", "CUDA_VISIBLE_DEVICES")


def _frozen(v):
    if isinstance(v, dict):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x) for x in v)
    return v if isinstance(v, (str, int, float, bool, type(None))) else repr(v)


def shared_executor(kind=None, create: bool = True, **options):
    """The process's executor for these options (``get_executor(kind, **options)``): made on first use and
    reused by every later tune of this process -- its workers stay started and warm, so a second tune pays
    no start-up -- and closed at exit.  ``@newt.autotune`` and deuteron's searches share it.
    ``create=False``: the existing one, or None."""
    key = (_frozen(kind), _frozen(options), tuple(os.environ.get(k) for k in _ENV))
    with _SHARED_LOCK:
        ex = _SHARED.get(key)
        if ex is None and not create:
            return None
        if ex is None:
            from .select import get_executor
            if not _SHARED:
                atexit.register(close_shared)
            ex = _SHARED[key] = get_executor(kind, **options)
        return ex


def close_shared():
    """Close every shared executor (at exit; tests call it to start from nothing)."""
    with _SHARED_LOCK:
        exs = list(_SHARED.values())
        _SHARED.clear()
    for ex in exs:
        try:
            ex.close()
        except Exception:
            pass


def compile_stream(tasks, executor, timeout=None, should_stop=None):
    """Yield ``(index, result)`` for every task as it finishes (a None task yields ``{"status": "local"}``:
    the caller compiles it itself).  ``timeout``: seconds or an :class:`~newt.tune.timeouts.AdaptiveTimeout`.
    ``should_stop()`` cancels what is left (``cancelled`` results).  KeyboardInterrupt cancels every task."""
    tasks = list(tasks)
    todo = []
    for i, t in enumerate(tasks):
        if t is None:
            yield i, {"status": "local"}
        else:
            todo.append(i)
    ids: dict = {}
    slots = max(1, executor.compile_slots)
    nxt = 0
    try:
        while nxt < len(todo) or ids:
            if should_stop is not None and should_stop():
                executor.cancel()
                left = list(ids.values()) + todo[nxt:]
                ids.clear()
                nxt = len(todo)
                for i in left:
                    yield i, {"status": "cancelled", "message": "cancelled"}
                return
            while nxt < len(todo) and len(ids) < 2 * slots:
                i = todo[nxt]
                to = timeout.current() if hasattr(timeout, "current") else timeout
                ids[executor.submit(COMPILE, tasks[i], "compile", to)] = i
                nxt += 1
            for tid, res in executor.poll(0.05):
                i = ids.pop(tid, None)
                if i is None:
                    continue
                if res.get("status") == "ok":
                    if hasattr(timeout, "observe"):
                        timeout.observe(res.get("seconds"))
                    key = tasks[i].key
                    if key is not None and res.get("key") not in (None, key):
                        res["key_mismatch"] = res.get("key")  # e.g. the file's path differs on that machine
                    res["installed"] = install(res, key)
                    res.pop("entry", None)
                yield i, res
    except BaseException:
        executor.cancel()
        raise


def compile_all(tasks, executor, timeout=None, should_stop=None, on_result=None) -> list:
    """Every task's result, in order (see :func:`compile_stream`)."""
    tasks = list(tasks)
    out: list = [None] * len(tasks)
    for i, res in compile_stream(tasks, executor, timeout, should_stop):
        out[i] = res
        if on_result is not None:
            on_result(i, res)
    return out
