"""The worker-process layer: a pool of ``python -m newt.tune.worker`` processes.

Every tuning task that runs out of the main process goes through here: the
local executor's compile workers (one per core, no GPU) and timing workers
(one per GPU, pinned with ``CUDA_VISIBLE_DEVICES``), and deuteron's screening
workers.  A task is ``(function reference, payload)`` -- ``"module:function"``
resolved in the worker -- or a payload for the pool's ``handler``.

The protocol is length-prefixed pickles: requests on the worker's stdin,
answers on a dedicated pipe (whatever the task prints goes to the log, never
into the protocol).  A task past its timeout, a worker that dies and a fatal
result (a dead CUDA context) each end that worker; it is replaced and the
task's result says why.  :meth:`ProcessPool.cancel` kills every worker at once.
"""

from __future__ import annotations

import os
import pickle
import selectors
import struct
import subprocess
import sys
import time
from typing import Any
from pathlib import Path

__all__ = ["ProcessPool", "read_frame", "write_frame", "worker_env"]

_HDR = struct.Struct("<Q")


def write_frame(f, obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_HDR.pack(len(data)))
    f.write(data)
    f.flush()


def _read_exact(fd, n) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf.extend(chunk)
    return bytes(buf)


def read_frame(fd):
    (n,) = _HDR.unpack(_read_exact(fd, _HDR.size))
    return pickle.loads(_read_exact(fd, n))


def worker_env(extra: dict | None = None) -> dict:
    """The environment of a worker: this process's, with ``sys.path`` on ``PYTHONPATH`` (same code)."""
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    old = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(old + paths))
    env["NEWT_TUNE_WORKER"] = "1"
    env.pop("NEWT_TUNE_CLUSTER", None)  # a worker never starts executors of its own
    if extra:
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
    return env


class _Worker:
    def __init__(self, pool, slot: int):
        self.pool = pool
        self.slot = slot
        r, w = os.pipe()
        env = worker_env(pool.envs[slot] if pool.envs else None)
        cmd = [sys.executable, "-m", "newt.tune.worker", str(w)]
        if pool.handler:
            cmd.append(pool.handler)
        if pool.log_path is not None:
            self.log: Any = open(pool.log_path, "ab")  # noqa: SIM115 - closed in close()
        else:
            self.log = subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self.log, stderr=self.log, pass_fds=(w,),
                                     env=env, close_fds=True, start_new_session=True)
        os.close(w)
        self.rfd = r
        self.task: Any = None
        self.deadline: float = float("inf")
        self.started_task: float = 0.0
        self.name = f"{pool.name}{slot}"

    def send(self, tid, task, timeout):
        self.task = (tid, task, timeout)
        self.started_task = time.monotonic()
        self.deadline = self.started_task + timeout if timeout else float("inf")
        write_frame(self.proc.stdin, (tid, task))

    def kill(self):
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.close()

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            os.close(self.rfd)
        except OSError:
            pass
        if self.log is not subprocess.DEVNULL:
            try:
                self.log.close()
            except OSError:
                pass


class ProcessPool:
    """``n`` worker processes; ``submit`` queues a task, ``poll`` returns ``[(task id, task, result)]``.

    ``envs``: one dict of environment changes per worker slot (e.g. ``CUDA_VISIBLE_DEVICES``), kept when a
    slot's worker is replaced.  ``handler``: ``"module:function"`` called with each payload (else a payload
    is ``(function reference, argument)``).  Results are dicts with a ``status`` (see ``newt.tune.classify``)
    and ``seconds``; ``worker`` names the slot that ran it.
    """

    def __init__(self, n: int, log_path: "Path | str | None" = None, timeout: float | None = 120.0, envs=None,
                 handler: str | None = None, name: str = "w"):
        self.n = max(1, int(n))
        self.log_path = log_path
        self.timeout = timeout
        self.envs = list(envs) if envs else None
        if self.envs is not None and len(self.envs) != self.n:
            raise ValueError("ProcessPool: one env per worker slot")
        self.handler = handler
        self.name = name
        self.workers: list[_Worker] = []
        self.queue: list = []
        self.sel = selectors.DefaultSelector()
        self._next = 0
        self.restarts = 0
        self.closed = False

    def start(self):
        used = {w.slot for w in self.workers}
        for slot in range(self.n):
            if slot not in used:
                self._spawn(slot)
        return self

    def _spawn(self, slot):
        w = _Worker(self, slot)
        self.workers.append(w)
        self.sel.register(w.rfd, selectors.EVENT_READ, w)
        return w

    def _replace(self, w):
        try:
            self.sel.unregister(w.rfd)
        except (KeyError, ValueError):
            pass
        w.kill()
        if w in self.workers:
            self.workers.remove(w)
        self.restarts += 1
        if not self.closed:
            self._spawn(w.slot)

    def submit(self, task, timeout: float | None = None) -> int:
        tid = self._next
        self._next += 1
        self.queue.append((tid, task, timeout if timeout is not None else self.timeout))
        self._dispatch()
        return tid

    def idle(self) -> int:
        return sum(1 for w in self.workers if w.task is None) - len(self.queue)

    def _dispatch(self):
        for w in list(self.workers):
            if not self.queue:
                return
            if w.task is None:
                tid, task, to = self.queue.pop(0)
                try:
                    w.send(tid, task, to)
                except (BrokenPipeError, OSError):
                    self.queue.insert(0, (tid, task, to))
                    w.task = None
                    self._replace(w)
                    return self._dispatch()

    def pending(self) -> int:
        return len(self.queue) + sum(1 for w in self.workers if w.task is not None)

    def running(self) -> list:
        """``[(worker name, task id, seconds running)]``."""
        now = time.monotonic()
        return [(w.name, w.task[0], now - w.started_task) for w in self.workers if w.task is not None]

    def poll(self, timeout: float = 0.1) -> list:
        out: list = []
        busy = [w for w in self.workers if w.task is not None]
        if not busy:
            self._dispatch()
            if self.queue:
                busy = [w for w in self.workers if w.task is not None]
            if not busy:
                if timeout:
                    time.sleep(min(timeout, 0.01))
                return out
        now = time.monotonic()
        wait = max(0.0, min([w.deadline for w in busy] + [now + timeout]) - now)
        for key, _ in self.sel.select(timeout=wait):
            w = key.data
            if w.task is None:
                continue
            tid, task, _to = w.task
            try:
                rtid, res = read_frame(w.rfd)
            except (EOFError, OSError, pickle.UnpicklingError):
                try:
                    code = w.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    code = None
                res = {"status": "crashed", "message": f"the worker process died (exit code {code})",
                       "seconds": time.monotonic() - w.started_task}
                rtid = tid
                w.task = None
                res["worker"] = w.name
                out.append((rtid, task, res))
                self._replace(w)
                continue
            w.task = None
            res["worker"] = w.name
            out.append((rtid, task, res))
            if res.get("fatal"):
                self._replace(w)
        now = time.monotonic()
        for w in list(self.workers):
            if w.task is not None and now > w.deadline:
                tid, task, to = w.task
                w.task = None
                out.append((tid, task, {"status": "timeout", "worker": w.name, "seconds": now - w.started_task,
                                        "message": f"no answer after {to:.3g} s (the task hung or was too slow)"}))
                self._replace(w)
        self._dispatch()
        return out

    def cancel(self) -> list:
        """Kill every worker now; returns the ids of the tasks that were queued or running."""
        ids = [t[0] for t in self.queue] + [w.task[0] for w in self.workers if w.task is not None]
        self.queue.clear()
        self.closed = True
        for w in self.workers:
            try:
                self.sel.unregister(w.rfd)
            except (KeyError, ValueError):
                pass
            w.kill()
        self.workers = []
        return ids

    def close(self):
        self.closed = True
        for w in self.workers:
            try:
                write_frame(w.proc.stdin, None)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for w in self.workers:
            try:
                w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.proc.kill()
                try:
                    w.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            try:
                self.sel.unregister(w.rfd)
            except (KeyError, ValueError):
                pass
            w.close()
        self.workers = []
        try:
            self.sel.close()
        except (OSError, ValueError):
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if exc[0] is not None:
            self.cancel()
        else:
            self.close()
