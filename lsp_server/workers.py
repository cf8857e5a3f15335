"""The server's side of the worker process (see ``lsp_server/worker.py``).

A :class:`Worker` owns one child process and runs one request at a time.  A
request that exceeds its timeout (measured since the last sign of life: its
start or its last progress event), a process that dies, or a fatal error
reported by the worker (a faulted CUDA context) ends the process; the error is
raised as :class:`WorkerError` and the next request starts a fresh process.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import logging
import os
import signal
import sys

__all__ = ["Worker", "WorkerError", "worker_env"]

log = logging.getLogger("newt-lsp")

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds lsp_server/ and newt/


class WorkerError(Exception):
    """The worker failed: ``kind`` is "timeout", "crash", "fatal", "cancelled", "start", or what the worker
    reported ("user", "import", "compile", "spec", "backend", "environment", "internal")."""

    def __init__(self, message: str, kind: str = "internal", traceback: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.traceback = traceback


_NEUTRAL_DIR: str | None = None


def neutral_dir() -> str:
    """An empty private folder, the working directory every worker starts in: Python puts the working
    directory first on ``sys.path`` for ``-m`` (before 3.11's ``PYTHONSAFEPATH``), so starting in the
    workspace would import a workspace ``json.py`` or ``newt/`` instead of the real one."""
    global _NEUTRAL_DIR
    if _NEUTRAL_DIR is None or not os.path.isdir(_NEUTRAL_DIR):
        import tempfile
        _NEUTRAL_DIR = tempfile.mkdtemp(prefix="newt-lsp-")
    return _NEUTRAL_DIR


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


class Worker:
    def __init__(self, name: str, python: str | None = None, env: dict | None = None, cwd: str | None = None):
        self.name = name
        self.python = python or sys.executable
        self.env = env or worker_env()
        self.cwd = cwd  # the directory the worker changes to once it runs (it starts in neutral_dir())
        self.proc: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._pending: dict = {}  # id -> (future, on_event, activity-callback)
        self._lock = asyncio.Lock()
        self._reader: asyncio.Task | None = None
        self._stderr_task: asyncio.Task | None = None
        self.stderr_tail: collections.deque = collections.deque(maxlen=60)
        self.starts = 0

    # -- process ------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self):
        if self.alive:
            return
        self.stderr_tail.clear()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                self.python, "-m", "lsp_server.worker", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env=dict(self.env, NEWT_WORKER_CWD=self.cwd or ""), cwd=neutral_dir(),
                limit=64 * 1024 * 1024)
        except (OSError, ValueError) as e:
            raise WorkerError(f"cannot start the worker with {self.python}: {e}", "start") from None
        self.starts += 1
        log.info("worker %s started (pid %s, %s)", self.name, self.proc.pid, self.python)
        self._reader = asyncio.ensure_future(self._read_stdout(self.proc))
        self._stderr_task = asyncio.ensure_future(self._read_stderr(self.proc))

    async def _read_stdout(self, proc):
        try:
            while True:
                line = await proc.stdout.readline()
                if not line:
                    break
                try:
                    msg = json.loads(line)
                except json.JSONDecodeError:
                    log.debug("worker %s: bad line %r", self.name, line[:200])
                    continue
                rid = msg.get("id")
                entry = self._pending.get(rid)
                if entry is None:
                    continue
                fut, on_event, touch = entry
                touch()
                if "event" in msg:
                    if on_event is not None:
                        try:
                            on_event(msg["event"], msg.get("data"))
                        except Exception:  # noqa: BLE001
                            log.exception("worker event handler failed")
                    continue
                if not fut.done():
                    fut.set_result(msg)
        except Exception:  # noqa: BLE001
            log.exception("worker %s reader failed", self.name)
        finally:
            code = await proc.wait()
            for fut, _, _ in list(self._pending.values()):
                if not fut.done():
                    fut.set_exception(self._crash_error(code))

    def _crash_error(self, code) -> WorkerError:
        if code is not None and code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = str(-code)
            how = f"was killed by {sig}"
        else:
            how = f"exited with code {code}"
        tail = "\n".join(list(self.stderr_tail)[-15:])
        msg = f"the worker process {how}"
        if tail:
            msg += f"; its last output:\n{tail}"
        return WorkerError(msg, "crash")

    async def _read_stderr(self, proc):
        try:
            while True:
                line = await proc.stderr.readline()
                if not line:
                    break
                text = line.decode("utf-8", "replace").rstrip()
                self.stderr_tail.append(text)
                log.debug("worker %s: %s", self.name, text)
        except Exception:  # noqa: BLE001
            pass

    def kill(self):
        p = self.proc
        if p is not None and p.returncode is None:
            try:
                p.kill()
            except ProcessLookupError:
                pass
            log.info("worker %s (pid %s) stopped", self.name, p.pid)

    async def stop(self):
        self.kill()
        if self.proc is not None:
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except (asyncio.TimeoutError, ProcessLookupError):
                pass

    # -- requests -----------------------------------------------------------------
    async def request(self, method: str, params: dict, timeout: float, on_event=None, cancel: asyncio.Event | None
                      = None) -> dict:
        """Run one request; raises ``WorkerError``.  ``timeout`` counts from the last sign of life."""
        async with self._lock:
            await self.start()
            proc = self.proc
            rid = next(self._ids)
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            last = {"t": loop.time()}

            def touch():
                last["t"] = loop.time()

            self._pending[rid] = (fut, on_event, touch)
            keep_pending = False
            try:
                data = json.dumps({"id": rid, "method": method, "params": params}) + "\n"
                try:
                    proc.stdin.write(data.encode("utf-8"))
                    await proc.stdin.drain()
                except (BrokenPipeError, ConnectionResetError, RuntimeError):
                    raise self._crash_error(proc.returncode) from None
                cancel_sent_at = None
                while True:
                    waiters = [fut]
                    if cancel is not None and cancel_sent_at is None:
                        cw = asyncio.ensure_future(cancel.wait())
                        waiters.append(cw)
                    remaining = timeout - (loop.time() - last["t"])
                    if cancel_sent_at is not None:
                        remaining = min(remaining, 10.0 - (loop.time() - cancel_sent_at))
                    if remaining <= 0:
                        _kill(proc)
                        for w in waiters[1:]:
                            w.cancel()
                        if cancel_sent_at is not None:
                            raise WorkerError("cancelled (the worker did not stop in time and was ended)", "cancelled")
                        raise WorkerError(f"{method} timed out after {timeout:g} s without progress; the worker "
                                          "was stopped (the next command starts a fresh one)", "timeout")
                    done, _ = await asyncio.wait(waiters, timeout=min(remaining, 1.0),
                                                 return_when=asyncio.FIRST_COMPLETED)
                    for w in waiters[1:]:
                        if not w.done():
                            w.cancel()
                    if fut in done:
                        break
                    if cancel is not None and cancel.is_set() and cancel_sent_at is None:
                        cancel_sent_at = loop.time()
                        try:
                            proc.stdin.write((json.dumps({"cancel": rid}) + "\n").encode("utf-8"))
                            await proc.stdin.drain()
                        except (BrokenPipeError, ConnectionResetError, RuntimeError):
                            pass
                msg = fut.result()
            except asyncio.CancelledError:
                # the LSP request was cancelled: ask the worker to stop, end it if it does not
                try:
                    proc.stdin.write((json.dumps({"cancel": rid}) + "\n").encode("utf-8"))
                except (BrokenPipeError, ConnectionResetError, RuntimeError):
                    pass
                keep_pending = True
                asyncio.ensure_future(self._reap_after(proc, fut, 10.0, rid))
                raise
            finally:
                if not keep_pending:
                    self._pending.pop(rid, None)
            if msg.get("fatal"):
                # the worker exits by itself after a fatal error; wait for it (the next request starts afresh)
                try:
                    await asyncio.wait_for(proc.wait(), 10.0)
                except asyncio.TimeoutError:
                    _kill(proc)
            if "error" in msg:
                err = msg["error"] or {}
                kind = err.get("kind", "internal")
                if msg.get("fatal"):
                    kind = "fatal"
                raise WorkerError(err.get("message", "worker error"), kind, err.get("traceback"))
            result = msg.get("result")
            if isinstance(result, dict) and msg.get("fatal"):
                result.setdefault("worker_restarted", True)
            return result

    async def _reap_after(self, proc, fut, delay: float, rid=None):
        """End ``proc`` unless ``fut`` (a cancelled request) finishes within ``delay`` seconds."""
        try:
            await asyncio.wait_for(asyncio.shield(fut), delay)
        except Exception:  # noqa: BLE001 - timed out, or the request failed: start afresh next time
            _kill(proc)
        finally:
            if rid is not None:
                self._pending.pop(rid, None)


def _kill(proc):
    if proc is not None and proc.returncode is None:
        try:
            proc.kill()
        except ProcessLookupError:
            pass
