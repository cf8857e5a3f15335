"""Scale-out through Dask distributed (``pip install "newt[cluster]"``).

``DaskExecutor(address="tcp://scheduler:8786")`` (or ``NEWT_TUNE_CLUSTER``)
sends compile tasks to workers that advertise the ``compile`` resource and
timing tasks to workers with ``GPU`` (``dask worker tcp://... --resources
"compile=16"`` on a CPU machine, ``--resources "GPU=1"`` with
``CUDA_VISIBLE_DEVICES`` set, one per GPU); with no worker advertising a
resource, any worker takes those tasks.  Results come back as bytes (compiled
cubins are installed into this process's caches), so the workers need the
same newt and the kernel's source (shipped in the task) but no shared
directory.  ``DaskExecutor()`` with no address starts a local cluster on
127.0.0.1 (``n_workers`` processes, one thread each).

Dask starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (its
``distributed.nanny.pre-spawn-environ``): glibc then hands memory back after
nearly every free, and with two workers on two cores NVRTC compiled 1.5x to
3x slower than in the local pool's workers (2026-12-02; one worker alone was
not slowed).  The local cluster spawns its workers without it -- start the
workers of your own cluster with ``MALLOC_TRIM_THRESHOLD_`` unset too (for
example ``dask.config.set({"distributed.nanny.pre-spawn-environ": {}})``, or
a ``dask worker`` outside a nanny).

A task past its timeout is reported ``timeout`` and the worker running it is
restarted (Dask cannot interrupt a running task otherwise); a worker that
dies makes its task ``crashed``.  ``cancel`` releases every queued and running
task; one already running finishes on its worker (its result is dropped) --
a local cluster of this executor is shut down by ``close``.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid

from .classify import classify
from .executor import Executor, cpu_count

__all__ = ["DaskExecutor", "require_distributed"]

MISSING = ("newt.tune: the cluster executor needs Dask distributed, which is not installed here: "
           'pip install "newt[cluster]" (or pip install distributed), or tune with the local worker pool '
           "(unset NEWT_TUNE_CLUSTER)")


def require_distributed():
    try:
        import distributed
    except ImportError as e:
        raise ImportError(MISSING) from e
    return distributed


def _run(ref, arg):
    from newt.tune.worker import run_call
    res = run_call(ref, arg)
    try:
        from distributed import get_worker
        res["worker"] = get_worker().address
    except Exception:
        pass
    return res


class DaskExecutor(Executor):
    name = "dask"
    shared_cache = False

    def __init__(self, address: str | None = None, client=None, n_workers: int | None = None,
                 resources: dict | None = None, timeout: float = 60.0):
        distributed = require_distributed()
        self._cluster = None
        self._own_client = client is None
        if client is not None:
            self.client = client
        elif address and address not in ("local", "dask"):
            self.client = distributed.Client(address, timeout=timeout)
        else:
            import sys
            n = n_workers or int(os.environ.get("NEWT_TUNE_WORKERS", "0") or 0) or cpu_count()
            pp = os.pathsep.join(dict.fromkeys([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
                                               + [p for p in sys.path if p and os.path.isdir(p)]))
            import dask
            # Dask's variables set before each worker process is spawned (env= is applied after the spawn, too
            # late for glibc's malloc), without its MALLOC_TRIM_THRESHOLD_ (see the module's doc)
            pre = {k: v for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ", None) or {}).items()
                   if k != "MALLOC_TRIM_THRESHOLD_"}
            env = {"PYTHONPATH": pp, "NEWT_TUNE_WORKER": "1", "CUDA_VISIBLE_DEVICES": ""}
            with dask.config.set({"distributed.nanny.pre-spawn-environ": pre}):  # (Dask puts these into this
                # process's os.environ too: ours go through env=, applied in the worker)
                self._cluster = distributed.LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                    resources=resources or {"compile": 1}, silence_logs=40, env=env)
            self.client = distributed.Client(self._cluster, timeout=timeout)
        self._futures: dict = {}  # task id -> (future, timeout, started)
        self._ids = itertools.count()
        self._done: list = []
        self._tag = uuid.uuid4().hex[:8]
        self._refresh_resources()

    def _refresh_resources(self):
        info = self.client.scheduler_info()
        workers = info.get("workers", {})
        res = [w.get("resources", {}) or {} for w in workers.values()]
        self.compile_slots = max(1, int(sum(r.get("compile", 0) for r in res)) or
                                 sum(w.get("nthreads", 1) for w in workers.values()) or 1)
        self.time_slots = max(1, int(sum(r.get("GPU", 0) for r in res)) or 1)
        self._has = {k for r in res for k, v in r.items() if v}

    def describe(self) -> str:
        return f"dask {self.client.scheduler.address}: {self.compile_slots} compile, {self.time_slots} timing"

    def submit(self, ref, arg, kind="compile", timeout=None) -> int:
        need = "compile" if kind == "compile" else "GPU"
        tid = next(self._ids)
        fut = self.client.submit(_run, ref, arg, key=f"newt-{kind}-{self._tag}-{tid}", pure=False, retries=0,
                                 resources={need: 1} if need in self._has else None)
        self._futures[tid] = [fut, timeout, None]
        return tid

    def poll(self, timeout: float = 0.1) -> list:
        out, self._done = self._done, []
        deadline = time.monotonic() + timeout
        while True:
            for tid, (fut, _to, _st) in list(self._futures.items()):
                if fut.done():
                    del self._futures[tid]
                    try:
                        res = fut.result()
                    except BaseException as e:  # the task's worker died, or Dask failed it
                        res = classify(e)
                    out.append((tid, res))
            self._check_deadlines(out)
            if out or time.monotonic() >= deadline or not self._futures:
                return out
            time.sleep(0.01)

    def _check_deadlines(self, out):
        timed = [(tid, f) for tid, f in self._futures.items() if f[1]]
        if not timed:
            return
        now = time.monotonic()
        processing = None
        for tid, entry in timed:
            fut, to, started = entry
            if started is None:
                if processing is None:
                    processing = self.client.processing()
                    running = {k: w for w, keys in processing.items() for k in keys}
                if fut.key in running:
                    entry[2] = now
                continue
            if now - started > to:
                del self._futures[tid]
                if processing is None:
                    processing = self.client.processing()
                    running = {k: w for w, keys in processing.items() for k in keys}
                w = running.get(fut.key)
                fut.cancel()
                if w is not None:
                    try:
                        self.client.restart_workers([w])
                    except Exception:  # the worker is gone already
                        pass
                out.append((tid, {"status": "timeout", "worker": w, "seconds": now - started,
                                  "message": f"no answer after {to:.3g} s (the task hung or was too slow)"}))

    def pending(self) -> int:
        return len(self._futures)

    def cancel(self):
        futs = [f[0] for f in self._futures.values()]
        if futs:
            try:
                self.client.cancel(futs, force=True)
            except Exception:
                pass
        for tid in list(self._futures):
            self._done.append((tid, {"status": "cancelled", "message": "cancelled"}))
        self._futures.clear()

    def close(self):
        if self._futures:
            self.cancel()
        if self._own_client:
            try:
                self.client.close()
            except Exception:
                pass
        if self._cluster is not None:
            try:
                self._cluster.close()
            except Exception:
                pass
