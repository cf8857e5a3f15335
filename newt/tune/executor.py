"""The tuning executor: where compile and timing tasks run.

One interface, four implementations:

* :class:`SerialExecutor` -- in this process, one task at a time (the
  reference path; no timeouts);
* :class:`ThreadExecutor` -- in this process, compile tasks in threads,
  timing tasks one at a time (small tunes: no start-up cost);
* :class:`LocalExecutor` -- worker processes on this machine: compile workers
  (one per core by default, ``NEWT_TUNE_WORKERS``; they never touch the GPU)
  and one timing worker per visible GPU, pinned with ``CUDA_VISIBLE_DEVICES``;
* :class:`newt.tune.cluster.DaskExecutor` -- a ``distributed.Client`` (an
  existing cluster, ``NEWT_TUNE_CLUSTER=tcp://host:8786``, or a local one):
  compile tasks on workers with the ``compile`` resource, timing tasks on
  workers with the ``GPU`` resource.

A task is ``(function reference, argument)``: ``"module:function"`` and a
picklable argument; its result is a dict with a ``status`` (see
:mod:`newt.tune.classify`).  ``submit`` returns a task id, ``poll`` returns
``[(task id, result)]`` as tasks finish, ``cancel`` stops every worker.
Another engine (Ray: ``ray.remote(num_gpus=1)`` for timing tasks) plugs in by
subclassing :class:`Executor` and registering a factory with
:func:`register_executor`.
"""

from __future__ import annotations

import os
import time

from .classify import classify

__all__ = ["Executor", "SerialExecutor", "ThreadExecutor", "LocalExecutor", "visible_gpus",
           "cpu_count"]


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def visible_gpus() -> list[str]:
    """The device ids a timing worker can be pinned to (entries of ``CUDA_VISIBLE_DEVICES``)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = [x.strip() for x in env.split(",") if x.strip()]
        if ids and ids[0].startswith("-"):
            return []
    else:
        ids = None
    try:
        from newt.runtime import driver
        if not driver.has_gpu():
            return []
        import torch
        n = torch.cuda.device_count()
    except Exception:  # no torch / no driver: no GPU
        return []
    if ids is None:
        return [str(i) for i in range(n)]
    return ids[:n]


class Executor:
    """Where tuning tasks run.  Subclasses implement ``submit``, ``poll``, ``pending``, ``cancel``, ``close``."""

    name = "executor"
    #: how many compile / timing tasks run at once
    compile_slots = 1
    time_slots = 1
    #: whether workers see this process's disk cache (else compile results must be installed from bytes)
    shared_cache = True

    def submit(self, ref: str, arg, kind: str = "compile", timeout: float | None = None) -> int:
        raise NotImplementedError

    def poll(self, timeout: float = 0.1) -> list:
        raise NotImplementedError

    def pending(self) -> int:
        raise NotImplementedError

    def cancel(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.name}: {self.compile_slots} compile, {self.time_slots} timing"

    def map(self, ref: str, args, kind: str = "compile", timeout=None, on_result=None, should_stop=None) -> list:
        """Run ``ref(arg)`` for every argument; results in order.  ``timeout``: seconds, or an object with
        ``current()`` and ``observe(seconds)`` (:class:`newt.tune.timeouts.AdaptiveTimeout`), read when each
        task is submitted.  ``on_result(index, result)`` as they finish; ``should_stop()`` cancels the rest
        (their results say ``cancelled``).  Keeps at most twice the slots in flight, so that an adapted
        timeout applies to the tasks that follow."""
        args = list(args)
        out: list = [None] * len(args)
        ids: dict = {}
        slots = max(1, self.compile_slots if kind == "compile" else self.time_slots)
        nxt = 0
        try:
            while nxt < len(args) or ids:
                if should_stop is not None and should_stop():
                    self.cancel()
                    for i in list(ids.values()) + list(range(nxt, len(args))):
                        out[i] = {"status": "cancelled", "message": "cancelled"}
                    return out
                while nxt < len(args) and len(ids) < 2 * slots:
                    to = timeout.current() if hasattr(timeout, "current") else timeout
                    ids[self.submit(ref, args[nxt], kind, to)] = nxt
                    nxt += 1
                for tid, res in self.poll(0.05):
                    i = ids.pop(tid, None)
                    if i is None:
                        continue
                    out[i] = res
                    if hasattr(timeout, "observe") and res.get("status") == "ok":
                        timeout.observe(res.get("seconds"))
                    if on_result is not None:
                        on_result(i, res)
        except BaseException:
            self.cancel()
            raise
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:
            self.cancel()
        self.close()


class SerialExecutor(Executor):
    """Every task in this process, in order (the reference path: results must match the parallel ones)."""

    name = "serial"

    def __init__(self):
        self._queue: list = []
        self._next = 0

    def submit(self, ref, arg, kind="compile", timeout=None) -> int:
        tid = self._next
        self._next += 1
        self._queue.append((tid, ref, arg))
        return tid

    def poll(self, timeout: float = 0.1) -> list:
        from .worker import run_call
        if not self._queue:
            return []
        tid, ref, arg = self._queue.pop(0)
        res = run_call(ref, arg)
        res["worker"] = "main"
        return [(tid, res)]

    def pending(self) -> int:
        return len(self._queue)

    def cancel(self):
        self._queue.clear()

    def close(self):
        self._queue.clear()


class ThreadExecutor(Executor):
    """In this process: compile tasks in ``compile_threads`` threads (NVRTC runs outside the GIL), timing tasks
    one at a time in the thread that polls.  For small tunes, where starting worker processes (imports, the
    CUDA context) costs more than it saves; no fault isolation (like ``@newt.autotune``'s own timing)."""

    name = "threads"

    def __init__(self, compile_threads: int | None = None):
        from concurrent.futures import ThreadPoolExecutor
        self.compile_slots = max(1, compile_threads or min(8, cpu_count()))
        self._pool = ThreadPoolExecutor(self.compile_slots, thread_name_prefix="newt-tune-compile")
        self._futures: dict = {}
        self._timing: list = []
        self._next = 0

    def submit(self, ref, arg, kind="compile", timeout=None) -> int:
        from .worker import run_call
        tid = self._next
        self._next += 1
        if kind == "compile":
            self._futures[tid] = self._pool.submit(run_call, ref, arg)
        else:
            self._timing.append((tid, ref, arg))
        return tid

    def poll(self, timeout: float = 0.1) -> list:
        import concurrent.futures as cf

        from .worker import run_call
        out = []
        done = [t for t, f in self._futures.items() if f.done()]
        if not done and self._futures and not self._timing and timeout:
            cf.wait(list(self._futures.values()), timeout=timeout, return_when=cf.FIRST_COMPLETED)
            done = [t for t, f in self._futures.items() if f.done()]
        for t in done:
            res = self._futures.pop(t).result()
            res["worker"] = "thread"
            out.append((t, res))
        if self._timing and not out:
            tid, ref, arg = self._timing.pop(0)
            res = run_call(ref, arg)
            res["worker"] = "main"
            out.append((tid, res))
        return out

    def pending(self) -> int:
        return len(self._futures) + len(self._timing)

    def cancel(self):
        for f in self._futures.values():
            f.cancel()
        self._futures.clear()
        self._timing.clear()

    def close(self):
        self.cancel()
        self._pool.shutdown(wait=True)
        from .tasks import forget_made_args
        forget_made_args()


_PREBUILT: list = []


def prebuild_launcher() -> None:
    """Build newt's compiled launcher (``newt.runtime.clauncher``: a C extension built once per cache
    directory, 0.7-1.6 s) in a thread of this process while the workers start, so that neither the timing
    worker's first launch nor this process's first check builds it (a tune from an empty cache paid it on its
    critical path).  Once per process; a failed build only means the Python launcher is used, as before."""
    if _PREBUILT:
        return
    _PREBUILT.append(True)
    import threading

    def build():
        try:
            from newt.runtime import clauncher
            if clauncher.enabled():
                clauncher.module()
        except Exception:  # optional: the launch builds it (or falls back) itself
            pass

    threading.Thread(target=build, name="newt-tune-launcher", daemon=True).start()


class LocalExecutor(Executor):
    """Worker processes on this machine (started on first use, kept until ``close``)."""

    name = "local"

    def __init__(self, compile_workers: int | None = None, gpus=None, log_path=None, compile_env: dict | None = None,
                 time_env: dict | None = None):
        n = compile_workers or int(os.environ.get("NEWT_TUNE_WORKERS", "0") or 0) or cpu_count()
        self.compile_slots = max(1, n)
        self.gpus = visible_gpus() if gpus is None else [str(g) for g in gpus]
        self.time_slots = max(1, len(self.gpus))
        self.log_path = log_path or os.environ.get("NEWT_TUNE_LOG") or None  # the workers' output (else dropped)
        # compile workers never take a GPU (nor its memory); they compile for the target they are given
        self.compile_env = {"CUDA_VISIBLE_DEVICES": "", "NEWT_TUNE_PRELOAD": "newt.tune.tasks:warm_compile",
                            **(compile_env or {})}
        self.time_env = {"NEWT_TUNE_PRELOAD": "newt.tune.tasks:warm_time", **(time_env or {})}
        self._pools: dict = {}
        self._owner: dict = {}  # our task id -> (pool kind, pool task id)
        self._back: dict = {}  # (pool kind, pool task id) -> our task id
        self._next = 0
        self._done: list = []

    def _pool(self, kind: str):
        from .workers import ProcessPool
        p = self._pools.get(kind)
        if p is None:
            if kind == "compile":
                p = ProcessPool(self.compile_slots, self.log_path, None, envs=[self.compile_env] * self.compile_slots,
                                name="compile")
            else:
                if not self.gpus:
                    p = ProcessPool(1, self.log_path, None, envs=[self.time_env], name="time")
                else:
                    p = ProcessPool(len(self.gpus), self.log_path, None,
                                    envs=[{**self.time_env, "CUDA_VISIBLE_DEVICES": g} for g in self.gpus], name="gpu")
            p.start()
            self._pools[kind] = p
        return p

    def start(self, kinds=("time", "compile")) -> "LocalExecutor":
        """Start the worker processes now (they import and warm up in the background, see
        ``NEWT_TUNE_PRELOAD``) instead of at the first task: call it before generating the first configs.  The
        timing workers start first: importing torch and creating the CUDA context is the longest start (about
        5 s for the first result on the H200 host when they started after 16 compile workers, against about 1 s
        for a compile worker)."""
        for kind in kinds:
            self._pool("compile" if kind == "compile" else "time")
        if self.gpus and "time" in kinds:
            prebuild_launcher()
        return self

    def started(self, kind: str = "compile") -> bool:
        return ("compile" if kind == "compile" else "time") in self._pools

    def submit(self, ref, arg, kind="compile", timeout=None) -> int:
        kind = "compile" if kind == "compile" else "time"
        p = self._pool(kind)
        ptid = p.submit((ref, arg), timeout=timeout)
        tid = self._next
        self._next += 1
        self._owner[tid] = (kind, ptid)
        self._back[(kind, ptid)] = tid
        return tid

    def poll(self, timeout: float = 0.1) -> list:
        out, self._done = self._done, []
        pools = list(self._pools.items())
        busy = [(k, p) for k, p in pools if p.pending()]
        for i, (kind, p) in enumerate(busy):
            for ptid, _task, res in p.poll(timeout if i == 0 and not out else 0):
                tid = self._back.pop((kind, ptid), None)
                if tid is not None:
                    self._owner.pop(tid, None)
                    out.append((tid, res))
        if not busy and not out and timeout:
            time.sleep(min(timeout, 0.01))
        return out

    def pending(self) -> int:
        return len(self._owner)

    def running(self) -> list:
        return [r for p in self._pools.values() for r in p.running()]

    def cancel(self):
        for kind, p in self._pools.items():
            for ptid in p.cancel():
                tid = self._back.pop((kind, ptid), None)
                if tid is not None:
                    self._owner.pop(tid, None)
                    self._done.append((tid, {"status": "cancelled", "message": "cancelled"}))
        self._pools.clear()

    def close(self):
        for p in self._pools.values():
            p.close()
        self._pools.clear()


def _failed(e) -> dict:
    return classify(e)
