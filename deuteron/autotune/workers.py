"""Worker processes for the autotuner.

Each candidate kernel is compiled -- and, on a GPU, launched once on copies of
its arguments -- in a separate process (``python -m deuteron.autotune.worker``)
with a timeout.  Compiling in parallel fills newt's disk cache, so the main
process then only loads the cubin; a kernel that faults (illegal address)
poisons only its worker's CUDA context, is reported and the worker replaced.

The protocol is length-prefixed pickles: requests on the worker's stdin,
responses on a dedicated pipe (so whatever the worker prints cannot corrupt it).
"""

from __future__ import annotations

import os
import pickle
import selectors
import struct
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["WorkerPool", "save_args", "load_args", "read_frame", "write_frame"]

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


# ---------------------------------------------------------------------------
# arguments for trial launches
# ---------------------------------------------------------------------------


def save_args(path: Path, args: list):
    """Save launch arguments with their exact strides and storage offsets."""
    import torch
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            st = a.untyped_storage()
            raw = torch.empty(0, dtype=torch.uint8).set_(st.cpu() if st.device.type != "cpu" else st)
            out.append(("tensor", raw.clone(), str(a.dtype).replace("torch.", ""), tuple(a.shape), tuple(a.stride()),
                        a.storage_offset()))
        else:
            out.append(("value", a))
    from ..runtime import atomic_write
    import io
    buf = io.BytesIO()
    torch.save(out, buf)
    atomic_write(path, buf.getvalue())


def load_args(path: str, device: str):
    import torch
    items = torch.load(path, weights_only=False)
    out = []
    for it in items:
        if it[0] == "tensor":
            _, raw, dtype, shape, stride, offset = it
            raw = raw.to(device)
            t = torch.empty(0, dtype=getattr(torch, dtype), device=device)
            t.set_(raw.untyped_storage(), offset, shape, stride)
            out.append(t)
        else:
            out.append(it[1])
    return out


# ---------------------------------------------------------------------------
# the pool
# ---------------------------------------------------------------------------


class _Worker:
    def __init__(self, pool, index):
        self.pool = pool
        self.index = index
        r, w = os.pipe()
        env = dict(os.environ)
        paths = [p for p in sys.path if p and os.path.isdir(p)]
        env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
        env["DEUTERON_WORKER"] = "1"
        self.log = open(pool.log_path, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "deuteron.autotune.worker", str(w), pool.device],
            stdin=subprocess.PIPE, stdout=self.log, stderr=self.log, pass_fds=(w,), env=env, close_fds=True)
        os.close(w)
        self.rfd = r
        self.task = None
        self.deadline = None
        self.started = time.monotonic()

    def send(self, tid, task, timeout):
        self.task = (tid, task)
        self.deadline = time.monotonic() + timeout
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
        for f in (self.proc.stdin,):
            try:
                f.close()
            except OSError:
                pass
        try:
            os.close(self.rfd)
        except OSError:
            pass
        try:
            self.log.close()
        except OSError:
            pass


class WorkerPool:
    """A fixed number of worker processes; tasks are dicts, results come back with their task ids."""

    def __init__(self, n: int, device: str, log_path: Path, timeout: float = 120.0):
        self.n = max(1, n)
        self.device = device
        self.log_path = log_path
        self.timeout = timeout
        self.workers: list[_Worker] = []
        self.queue: list = []
        self.sel = selectors.DefaultSelector()
        self._next = 0
        self.restarts = 0

    def start(self):
        while len(self.workers) < self.n:
            self._spawn()

    def _spawn(self):
        w = _Worker(self, len(self.workers))
        self.workers.append(w)
        self.sel.register(w.rfd, selectors.EVENT_READ, w)
        return w

    def _replace(self, w):
        try:
            self.sel.unregister(w.rfd)
        except (KeyError, ValueError):
            pass
        w.kill()
        self.workers.remove(w)
        self.restarts += 1
        self._spawn()

    def submit(self, task: dict, timeout: float | None = None) -> int:
        tid = self._next
        self._next += 1
        self.queue.append((tid, task, timeout or self.timeout))
        self._dispatch()
        return tid

    def _dispatch(self):
        for w in self.workers:
            if not self.queue:
                return
            if w.task is None:
                tid, task, to = self.queue.pop(0)
                try:
                    w.send(tid, task, to)
                except (BrokenPipeError, OSError):
                    self.queue.insert(0, (tid, task, to))
                    self._replace(w)
                    return self._dispatch()

    def pending(self) -> int:
        return len(self.queue) + sum(1 for w in self.workers if w.task is not None)

    def poll(self, timeout: float = 0.1) -> list:
        """Results that are ready: [(task id, task, result dict)]."""
        out = []
        now = time.monotonic()
        busy = [w for w in self.workers if w.task is not None]
        if not busy:
            self._dispatch()
            return out
        wait = max(0.0, min([w.deadline for w in busy] + [now + timeout]) - now)
        for key, _ in self.sel.select(timeout=wait):
            w = key.data
            if w.task is None:
                continue
            tid, task = w.task
            try:
                rtid, res = read_frame(w.rfd)
            except (EOFError, OSError, pickle.UnpicklingError):
                code = w.proc.poll()
                res = {"status": "crashed", "message": f"the worker process died (exit code {code})"}
                rtid = tid
                w.task = None
                out.append((rtid, task, res))
                self._replace(w)
                continue
            w.task = None
            out.append((rtid, task, res))
            if res.get("fatal"):
                self._replace(w)
        now = time.monotonic()
        for w in list(self.workers):
            if w.task is not None and now > w.deadline:
                tid, task = w.task
                w.task = None
                out.append((tid, task, {"status": "timeout",
                                        "message": f"no answer after {self.timeout:.0f} s (compile or run hung)"}))
                self._replace(w)
        self._dispatch()
        return out

    def close(self):
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
                self.sel.unregister(w.rfd)
            except (KeyError, ValueError):
                pass
            w.close()
        self.workers = []
        self.sel.close()
