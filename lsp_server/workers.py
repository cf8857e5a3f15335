"""The server's side of the worker processes (see ``lsp_server/worker.py``).

A :class:`Worker` is a one-process ``newt.tune.workers.ProcessPool`` -- the
same worker stack as the tuners' -- driven from the server's event loop, and
runs one request at a time.  Its process runs the ``python`` it is given,
starts in an empty folder with ``PYTHONSAFEPATH=1`` (nothing of the workspace
is imported at start-up) and then changes to ``cwd``.  Events of a running
request (per autotune config, per verify case) go to ``on_event``; a cancel
asks the request to stop between configs and ends the process only if it has
not answered 10 s later.  A request that exceeds its timeout (measured since
the last sign of life: its start or its last event), a process that dies (the
error quotes its last output) or a fatal error reported by the worker (a
faulted CUDA context) ends the process; the error is raised as
:class:`WorkerError` and the next request starts a fresh process.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from newt.tune.workers import ProcessPool, exit_description, neutral_dir

__all__ = ["Worker", "WorkerError", "neutral_dir", "worker_env"]

log = logging.getLogger("newt-lsp")

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds lsp_server/ and newt/

CANCEL_GRACE = 10.0  # seconds a cancelled request gets to stop before its process is ended
_HANDLER = "lsp_server.worker:handle"


class WorkerError(Exception):
    """The worker failed: ``kind`` is "timeout", "crash", "fatal", "cancelled", "start", or what the worker
    reported ("user", "import", "compile", "spec", "backend", "environment", "internal")."""

    def __init__(self, message: str, kind: str = "internal", traceback: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.traceback = traceback


def worker_env(cache_dir: str | None = None, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    pp = env.get("PYTHONPATH", "")
    parts = [p for p in pp.split(os.pathsep) if p]
    if _ROOT not in parts:
        parts.insert(0, _ROOT)  # the worker uses the same newt and lsp_server as the server
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONSAFEPATH"] = "1"  # Python 3.11+: the working directory is not put on sys.path
    env.pop("NEWT_INTERPRET", None)
    if cache_dir:
        env["NEWT_CACHE_DIR"] = cache_dir
    if extra:
        env.update(extra)
    return env


class _Proc:
    """The worker's process as the server sees it: ``pid``, ``returncode`` and an awaitable ``wait()``."""

    def __init__(self, popen):
        self._popen = popen

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self):
        return self._popen.poll()

    async def wait(self):
        while self._popen.poll() is None:
            await asyncio.sleep(0.05)
        return self._popen.returncode


class Worker:
    def __init__(self, name: str, python: str | None = None, env: dict | None = None, cwd: str | None = None):
        self.name = name
        self.python = python or sys.executable
        self.env = env or worker_env()
        self.cwd = cwd  # the directory the worker changes to once it runs (it starts in neutral_dir())
        self._pool: ProcessPool | None = None
        self._last = None  # the newt.tune pool worker that ran last (its process, its output tail)
        self._lock = asyncio.Lock()
        self._reaper: asyncio.Future | None = None
        self._starts_before = 0  # processes of pools that were stopped
        #: ``ProcessPool.poll`` runs here, not on the event loop: when the process dies it waits for its exit
        #: and for the last of its output (up to 3 s, longer when a child of it keeps the output pipe open)
        self._poller = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"newt-worker-{name}")

    # -- process ------------------------------------------------------------------
    def _current(self):
        if self._pool is not None and self._pool.workers:
            self._last = self._pool.workers[0]
        return self._last

    @property
    def proc(self) -> _Proc | None:
        w = self._current()
        return _Proc(w.proc) if w is not None else None

    @property
    def alive(self) -> bool:
        w = self._current()
        return w is not None and w.proc.poll() is None

    @property
    def starts(self) -> int:
        return self._starts_before + (self._pool.starts if self._pool is not None else 0)

    @property
    def stderr_tail(self) -> collections.deque:
        """The last lines the worker process printed (the user's prints, warnings, tracebacks)."""
        w = self._current()
        return w.tail if w is not None else collections.deque()

    def _output(self, name: str, line: str):
        log.debug("worker %s: %s", name, line)

    async def start(self):
        if self._pool is None:
            self._pool = ProcessPool(1, timeout=None, handler=_HANDLER, name=self.name, python=self.python,
                                     env=self.env, cwd=self.cwd, isolated=True, on_output=self._output,
                                     cancel_grace=CANCEL_GRACE, respawn=False)
        if self.alive or self._pool.workers:
            return
        try:
            self._pool.start()
        except (OSError, ValueError) as e:
            raise WorkerError(f"cannot start the worker with {self.python}: {e}", "start") from None
        w = self._current()
        log.info("worker %s started (pid %s, %s)", self.name, w.pid if w is not None else None, self.python)

    def kill(self):
        pool, self._pool = self._pool, None
        if pool is not None:
            self._current_of(pool)
            self._starts_before += pool.starts
            pids = [w.pid for w in pool.workers]
            pool.cancel()
            for pid in pids:
                log.info("worker %s (pid %s) stopped", self.name, pid)

    def _current_of(self, pool):
        if pool.workers:
            self._last = pool.workers[0]

    async def stop(self):
        if self._reaper is not None and not self._reaper.done():
            self._reaper.cancel()
        proc = self.proc
        self.kill()
        if proc is not None:
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except asyncio.TimeoutError:
                pass

    # -- requests -----------------------------------------------------------------
    async def _poll(self, pool: ProcessPool) -> list:
        """``pool.poll(0)`` on the poller thread (the loop keeps answering while a dead worker is collected)."""
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.shield(loop.run_in_executor(self._poller, pool.poll, 0))
        except Exception as e:
            if self._pool is not pool:  # stopped (a restart, new settings) while it was polled
                raise WorkerError("the worker was stopped", "cancelled") from None
            raise WorkerError(f"the worker pool failed: {type(e).__name__}: {e}", "internal") from None

    async def _wait_readable(self, pool: ProcessPool, limit: float):
        """Sleep until a busy worker of ``pool`` has something to read, or ``limit`` seconds."""
        fds = [w.rfd for w in pool.workers if w.task is not None]
        if not fds:
            await asyncio.sleep(min(limit, 0.01))
            return
        loop = asyncio.get_running_loop()
        ready = loop.create_future()

        def wake():
            if not ready.done():
                ready.set_result(None)

        for fd in fds:
            loop.add_reader(fd, wake)
        try:
            await asyncio.wait_for(ready, limit)
        except asyncio.TimeoutError:
            pass
        finally:
            for fd in fds:
                loop.remove_reader(fd)

    async def request(self, method: str, params: dict, timeout: float, on_event=None, cancel: asyncio.Event | None
                      = None) -> dict:
        """Run one request; raises ``WorkerError``.  ``timeout`` counts from the last sign of life."""
        async with self._lock:
            await self.start()
            pool = self._pool
            assert pool is not None
            events: list = []
            try:
                tid = pool.submit({"method": method, "params": params}, timeout=timeout,
                                  on_event=lambda k, d: events.append((k, d)))
            except (OSError, ValueError) as e:
                raise WorkerError(f"cannot start the worker with {self.python}: {e}", "start") from None
            self._current()
            cancel_sent = False
            try:
                while True:
                    await self._wait_readable(pool, 0.25 if cancel is not None and not cancel_sent else 1.0)
                    done = [r for t, _, r in await self._poll(pool) if t == tid]
                    self._current()
                    for kind, data in events:
                        if on_event is not None:
                            try:
                                on_event(kind, data)
                            except Exception:
                                log.exception("worker event handler failed")
                    events.clear()
                    if done:
                        res = done[0]
                        break
                    if cancel is not None and cancel.is_set() and not cancel_sent:
                        cancel_sent = True
                        pool.cancel_task(tid, grace=CANCEL_GRACE)
            except asyncio.CancelledError:
                # the LSP request was cancelled: ask the worker to stop, end it if it does not
                pool.cancel_task(tid, grace=CANCEL_GRACE)
                self._reaper = asyncio.ensure_future(self._reap(pool))
                raise
            return self._answer(method, timeout, res)

    async def _reap(self, pool: ProcessPool):
        """Poll ``pool`` until a cancelled request has answered or been ended (the pool kills it after the
        grace period), so that its process does not run on unseen."""
        async with self._lock:
            while self._pool is pool and pool.pending():
                await self._wait_readable(pool, 1.0)
                try:
                    await self._poll(pool)
                except WorkerError:
                    return
                self._current()

    def _answer(self, method: str, timeout: float, res: dict):
        status = res.get("status")
        if status == "timeout":
            raise WorkerError(f"{method} timed out after {timeout:g} s without progress; the worker "
                              "was stopped (the next command starts a fresh one)", "timeout")
        if status == "cancelled" and "result" not in res and "error" not in res:
            raise WorkerError("cancelled (the worker did not stop in time and was ended)", "cancelled")
        if status == "crashed":
            msg = f"the worker process {exit_description(res.get('exit_code'))}"
            if res.get("output"):
                msg += f"; its last output:\n{res['output']}"
            raise WorkerError(msg, "crash")
        if "result" not in res and "error" not in res:  # the handler itself failed
            raise WorkerError(res.get("message") or f"the worker failed ({status})", "internal")
        if res.get("fatal"):
            log.info("worker %s ended after a fatal error (the next request starts a fresh one)", self.name)
        if "error" in res:
            err = res["error"] or {}
            kind = "fatal" if res.get("fatal") else err.get("kind", "internal")
            raise WorkerError(err.get("message", "worker error"), kind, err.get("traceback"))
        result = res.get("result")
        if isinstance(result, dict) and res.get("fatal"):
            result.setdefault("worker_restarted", True)
        return result
