"""The worker-process layer: a pool of ``python -m newt.tune.worker`` processes.

Every tuning task that runs out of the main process goes through here: the
local executor's compile workers (one per core, no GPU) and timing workers
(one per GPU, pinned with ``CUDA_VISIBLE_DEVICES``), and deuteron's screening
workers.  A task is ``(function reference, payload)`` -- ``"module:function"``
resolved in the worker -- or a payload for the pool's ``handler``.

The protocol is length-prefixed pickles: requests on the worker's stdin,
answers and events on a dedicated pipe (whatever the task prints goes to the
log and to a tail of the worker's last output lines, never into the protocol).
While a task runs it can send events (``newt.tune.worker.emit``: per-config
progress) to the ``on_event`` of its ``submit``; its timeout counts from its
start or its last event.  A task past its timeout, a worker that dies (the
result quotes the tail of its output) and a fatal result (a dead CUDA context)
each end that worker; it is replaced and the task's result says why.
:meth:`ProcessPool.cancel_task` asks one task to stop (it polls
``newt.tune.worker.cancelled()`` between steps) and ends its worker only after
a grace period; :meth:`ProcessPool.cancel` kills every worker at once.

``python``, ``env``, ``cwd`` and ``isolated`` choose the interpreter, the
environment and the folder of the workers (the language server runs its
worker with the user's interpreter, in an empty folder, so that nothing of the
workspace is imported at start-up).
"""

from __future__ import annotations

import collections
import os
import pickle
import select
import selectors
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["ProcessPool", "neutral_dir", "read_frame", "write_frame", "worker_env"]

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


_NEUTRAL_DIR: str | None = None


def neutral_dir() -> str:
    """An empty private folder where isolated workers start: ``python -m`` puts the working directory first
    on ``sys.path`` (before 3.11's ``PYTHONSAFEPATH``), so starting in a user's folder would import a
    ``json.py`` or ``newt/`` of theirs instead of the real one."""
    global _NEUTRAL_DIR
    if _NEUTRAL_DIR is None or not os.path.isdir(_NEUTRAL_DIR):
        _NEUTRAL_DIR = tempfile.mkdtemp(prefix="newt-worker-")
    return _NEUTRAL_DIR


def exit_description(code) -> str:
    """``"exited with code 7"`` / ``"was killed by SIGKILL"`` for a process's return code."""
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class _Worker:
    def __init__(self, pool, slot: int):
        self.pool = pool
        self.slot = slot
        self.name = f"{pool.name}{slot}"
        r, w = os.pipe()
        env = dict(pool.env) if pool.env is not None else worker_env()
        for k, v in ((pool.envs[slot] if pool.envs else None) or {}).items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
        start_dir = pool.cwd
        if pool.isolated:
            env["PYTHONSAFEPATH"] = "1"  # 3.11+: the working directory is not put on sys.path
            env["NEWT_TUNE_CWD"] = pool.cwd or ""
            start_dir = neutral_dir()
        cmd = [pool.python, "-m", "newt.tune.worker", str(w)]
        if pool.handler:
            cmd.append(pool.handler)
        self.log: Any = None
        if pool.log_path is not None:
            self.log = open(pool.log_path, "ab")  # closed by the output pump
        self.tail: collections.deque = collections.deque(maxlen=pool.tail_lines)
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         pass_fds=(w,), env=env, cwd=start_dir, close_fds=True,
                                         start_new_session=True)
        except BaseException:
            os.close(r)
            os.close(w)
            if self.log is not None:
                self.log.close()
            raise
        os.close(w)
        self.rfd = r
        self.task: Any = None
        self.on_event: Any = None
        self.deadline: float = float("inf")
        self.started_task: float = 0.0
        self.cancel_at: float | None = None  # when a cooperative cancel was sent
        self.pump = threading.Thread(target=self._pump, name=f"newt-tune-output-{self.name}", daemon=True)
        self.pump.start()

    def _pump(self):
        """The worker's stdout and stderr, line by line: into the log, the tail and ``on_output``."""
        out, log, hook = self.proc.stdout, self.log, self.pool.on_output
        try:
            for line in iter(out.readline, b""):
                if log is not None:
                    try:
                        log.write(line)
                        log.flush()
                    except (OSError, ValueError):
                        log = None
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                self.tail.append(text)
                if hook is not None:
                    try:
                        hook(self.name, text)
                    except Exception:  # a logging hook never stops the pump
                        pass
        except (OSError, ValueError):
            pass
        finally:
            for f in (out, self.log):
                try:
                    if f is not None:
                        f.close()
                except OSError:
                    pass

    @property
    def pid(self) -> int:
        return self.proc.pid

    def touch(self, now: float | None = None):
        now = time.monotonic() if now is None else now
        to = self.task[2] if self.task is not None else None
        self.deadline = now + to if to else float("inf")
        if self.cancel_at is not None:
            self.deadline = min(self.deadline, self.cancel_at + self.pool.cancel_grace_of(self))

    def send(self, tid, task, timeout, on_event=None):
        self.task = (tid, task, timeout)
        self.on_event = on_event
        self.cancel_at = None
        self.started_task = time.monotonic()
        self.touch(self.started_task)
        write_frame(self.proc.stdin, (tid, task))

    def output(self, lines: int = 15) -> str:
        """The last ``lines`` lines the worker printed (after waiting briefly for the pump to drain)."""
        self.pump.join(timeout=1.0)
        return "\n".join(list(self.tail)[-lines:])

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


class ProcessPool:
    """``n`` worker processes; ``submit`` queues a task, ``poll`` returns ``[(task id, task, result)]``.

    ``envs``: one dict of environment changes per worker slot (e.g. ``CUDA_VISIBLE_DEVICES``), kept when a
    slot's worker is replaced.  ``handler``: ``"module:function"`` called with each payload (else a payload
    is ``(function reference, argument)``).  Results are dicts with a ``status`` (see ``newt.tune.classify``)
    and ``seconds``; ``worker`` names the slot that ran it; a crash also has ``exit_code`` and ``output`` (the
    tail of what the worker printed).

    ``python``: the interpreter of the workers (default this one).  ``env``: their whole environment (default
    :func:`worker_env`; the slot's ``envs`` go on top).  ``cwd``: the folder they run in (default this
    process's).  ``isolated``: start them in an empty folder with ``PYTHONSAFEPATH=1`` and change to ``cwd``
    only once started.  ``on_output(worker name, line)``: every line a worker prints (called from a thread).
    ``cancel_grace``: seconds a cancelled task gets to stop before its worker is killed.  ``respawn``: replace
    an ended worker at once (warm for the next task); False: only when the next task comes.
    """

    def __init__(self, n: int, log_path: "Path | str | None" = None, timeout: float | None = 120.0, envs=None,
                 handler: str | None = None, name: str = "w", *, python: str | None = None,
                 env: dict | None = None, cwd: str | None = None, isolated: bool = False,
                 on_output=None, tail_lines: int = 60, cancel_grace: float = 10.0, respawn: bool = True):
        self.n = max(1, int(n))
        self.log_path = log_path
        self.timeout = timeout
        self.envs = list(envs) if envs else None
        if self.envs is not None and len(self.envs) != self.n:
            raise ValueError("ProcessPool: one env per worker slot")
        self.handler = handler
        self.name = name
        self.python = python or sys.executable
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.isolated = isolated
        self.on_output = on_output
        self.tail_lines = tail_lines
        self.cancel_grace = cancel_grace
        self.respawn = respawn
        self.workers: list[_Worker] = []
        self.queue: list = []
        self.sel = selectors.DefaultSelector()
        self._next = 0
        self._grace: dict = {}  # task id -> grace seconds of a cooperative cancel
        self._ready: list = []  # results known without a worker (a queued task cancelled)
        self.restarts = 0
        self.starts = 0
        self.closed = False

    def start(self):
        used = {w.slot for w in self.workers}
        for slot in range(self.n):
            if slot not in used:
                self._spawn(slot)
        return self

    def _spawn(self, slot):
        w = _Worker(self, slot)
        self.starts += 1
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
        if not self.closed and self.respawn:
            self._spawn(w.slot)

    def submit(self, task, timeout: float | None = None, on_event=None) -> int:
        """Queue ``task``; ``on_event(kind, data)`` receives its events (called from :meth:`poll`)."""
        tid = self._next
        self._next += 1
        self.queue.append((tid, task, timeout if timeout is not None else self.timeout, on_event))
        self._dispatch()
        return tid

    def cancel_task(self, tid, grace: float | None = None) -> bool:
        """Ask task ``tid`` to stop: a queued one is dropped (its result, status ``cancelled``, comes from the
        next :meth:`poll`); a running one gets a cancel message (``newt.tune.worker.cancelled()`` turns true)
        and its worker is killed if it has not answered ``grace`` seconds later.  False: no such task."""
        for i, q in enumerate(self.queue):
            if q[0] == tid:
                del self.queue[i]
                self._ready.append((tid, q[1], {"status": "cancelled", "seconds": 0.0,
                                                "message": "cancelled before it started"}))
                return True
        for w in self.workers:
            if w.task is not None and w.task[0] == tid:
                if w.cancel_at is None:
                    self._grace[tid] = self.cancel_grace if grace is None else grace
                    w.cancel_at = time.monotonic()
                    w.touch()
                    try:
                        write_frame(w.proc.stdin, {"cancel": tid})
                    except (BrokenPipeError, OSError):
                        pass  # it is dying: poll reports it
                return True
        return False

    def cancel_grace_of(self, w) -> float:
        return self._grace.get(w.task[0], self.cancel_grace) if w.task is not None else self.cancel_grace

    def idle(self) -> int:
        return sum(1 for w in self.workers if w.task is None) - len(self.queue)

    def _dispatch(self):
        if self.queue and not self.closed and len(self.workers) < self.n:
            self.start()  # slots left empty (respawn=False) fill when there is work
        for w in list(self.workers):
            if not self.queue:
                return
            if w.task is None:
                tid, task, to, on_event = self.queue.pop(0)
                try:
                    w.send(tid, task, to, on_event)
                except (BrokenPipeError, OSError):
                    self.queue.insert(0, (tid, task, to, on_event))
                    w.task = None
                    self._replace(w)
                    return self._dispatch()

    def pending(self) -> int:
        return len(self.queue) + sum(1 for w in self.workers if w.task is not None) + len(self._ready)

    def running(self) -> list:
        """``[(worker name, task id, seconds running)]``."""
        now = time.monotonic()
        return [(w.name, w.task[0], now - w.started_task) for w in self.workers if w.task is not None]

    def worker_of(self, tid):
        """The worker running task ``tid`` (None when it is queued or done)."""
        return next((w for w in self.workers if w.task is not None and w.task[0] == tid), None)

    def _finish(self, w, res) -> tuple:
        tid, task, _to = w.task
        w.task = None
        w.on_event = None
        if w.cancel_at is not None:
            res.setdefault("cancelled", True)
        self._grace.pop(tid, None)
        res["worker"] = w.name
        return (tid, task, res)

    def poll(self, timeout: float = 0.1) -> list:
        out: list = self._ready
        self._ready = []
        busy = [w for w in self.workers if w.task is not None]
        if not busy:
            self._dispatch()
            if self.queue:
                busy = [w for w in self.workers if w.task is not None]
            if not busy:
                if timeout and not out:
                    time.sleep(min(timeout, 0.01))
                return out
        now = time.monotonic()
        wait = 0.0 if out else max(0.0, min([w.deadline for w in busy] + [now + timeout]) - now)
        for key, _ in self.sel.select(timeout=wait):
            w = key.data
            while w.task is not None:
                try:
                    msg = read_frame(w.rfd)
                except (EOFError, OSError, pickle.UnpicklingError):
                    try:
                        code = w.proc.wait(timeout=2)
                    except subprocess.TimeoutExpired:
                        code = None
                    tail = w.output()
                    message = f"the worker process died (exit code {code}): it {exit_description(code)}"
                    if tail:
                        message += f"; its last output:\n{tail}"
                    out.append(self._finish(w, {"status": "crashed", "message": message, "exit_code": code,
                                                "output": tail, "seconds": time.monotonic() - w.started_task}))
                    self._replace(w)
                    break
                if len(msg) == 3:  # an event of the running task
                    w.touch()
                    if w.on_event is not None:
                        w.on_event(msg[1], msg[2])
                    if not self._more(w):
                        break
                    continue
                rtid, res = msg
                item = self._finish(w, res)
                out.append((rtid, item[1], res))
                if res.get("fatal"):
                    self._replace(w)
                break
        now = time.monotonic()
        for w in list(self.workers):
            if w.task is not None and now > w.deadline:
                tid, task, to = w.task
                if w.cancel_at is not None:
                    res = {"status": "cancelled", "seconds": now - w.started_task,
                           "message": f"cancelled; the task did not stop within {self.cancel_grace_of(w):.3g} s "
                                      "and its worker was ended"}
                else:
                    res = {"status": "timeout", "seconds": now - w.started_task,
                           "message": f"no answer after {to:.3g} s (the task hung or was too slow)"}
                out.append(self._finish(w, res))
                self._replace(w)
        self._dispatch()
        return out

    def _more(self, w) -> bool:
        """Whether another frame of ``w`` is readable right now (events come in bursts)."""
        try:
            return bool(select.select([w.rfd], [], [], 0)[0])
        except (OSError, ValueError):
            return False

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
