"""The server's side of the analysis engines (see ``lsp_server/engine.py``).

:class:`EngineHost` listens on a private Unix socket, starts the first engine, forwards document changes to
every live engine, routes queries to the engine that serves (the newest with a finished analysis) and runs
one job at a time (an analysis or a warm-up, each in a fork of the serving engine).  The protocol process
itself never analyzes while editing: its CPU goes to the protocol and to mapping answers, so a hover is
answered at once however busy the analysis is.  An engine that dies is replaced by a fresh one (the open
documents are sent to it again); a job that dies fails its waiters, who answer from the last analysis.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import logging
import os
import signal
import struct
import sys
import tempfile
import threading
import time

__all__ = ["EngineHost", "EngineUnavailable", "engines_supported"]

log = logging.getLogger("newt-lsp")

_HEADER = struct.Struct(">I")
QUERY_TIMEOUT_S = 20.0
COMMAND_TIMEOUT_S = 300.0  # a command's analysis and code generation (a large kernel, a loaded machine)
#: how long a hover, completion or signature help at a position typed since the last finished analysis waits for
#: a fresh one once the document has changed again, before it answers nothing (on a busy machine an analysis can
#: take seconds, and the client is typing on)
MISS_WAIT_S = float(os.environ.get("NEWT_LSP_MISS_WAIT_MS", "400")) / 1e3
#: (inlay hints and code lenses miss only where the edit log cannot move the last analysis's answers; when they give
#: up, the client is asked to refresh them once the text's own analysis is out)
BOUNDED_WAIT = ("hover", "completion", "signatureHelp", "inlayHint", "codeLens")


class EngineUnavailable(Exception):
    """No engine could answer (it died, or could not start)."""


def engines_supported() -> bool:
    """Engines need ``fork`` and Unix sockets; ``NEWT_LSP_ENGINE=thread`` keeps the analysis in-process."""
    if os.environ.get("NEWT_LSP_ENGINE", "").lower() in ("thread", "inprocess", "off", "0"):
        return False
    return hasattr(os, "fork") and hasattr(asyncio, "start_unix_server") and sys.platform != "win32"


def _pss_mb(pid: int) -> float | None:
    """Proportional set size (shared pages counted once across the engines), else the resident set."""
    for name, field in (("smaps_rollup", "Pss:"), ("status", "VmRSS:")):
        try:
            with open(f"/proc/{pid}/{name}") as f:
                for line in f:
                    if line.startswith(field):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            continue
    return None


class _Conn:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.pid: int | None = None
        self.job: int | None = None
        self.exiting = False
        self.closed = False

    def send(self, msg: dict):
        if self.closed:
            return
        data = json.dumps(msg, separators=(",", ":")).encode("utf-8")
        try:
            self.writer.write(_HEADER.pack(len(data)) + data)
        except (ConnectionError, RuntimeError):
            self.closed = True


class _Job:
    def __init__(self, jid: int, kind: str, uri: str, version, target: str | None):
        self.id, self.kind, self.uri, self.version, self.target = jid, kind, uri, version, target
        loop = asyncio.get_running_loop()
        self.analyzed: asyncio.Future = loop.create_future()  # the "analyzed" message, or None when it failed
        self.ready: asyncio.Future = loop.create_future()  # True once the fork serves, False when it failed
        self.conn: _Conn | None = None
        self.buffer: list = []  # document changes sent after the job was asked for, until the fork connects
        self.strong = 0  # requests waiting for this job's analysis (a debounce timer does not count)
        self.killed = False
        self.msg: dict | None = None
        self.t0 = loop.time()


class EngineHost:
    def __init__(self, docs, encoding=lambda: "utf-16", config=lambda: {}):
        self.docs = docs  # the server's Documents: what a fresh engine is sent
        self._encoding = encoding
        self._config = config
        self.dir = tempfile.mkdtemp(prefix="newt-lsp-engine-")
        self.path = os.path.join(self.dir, "engine.sock")
        self.server = None
        self.proc = None
        self.current: _Conn | None = None
        self.job: _Job | None = None
        self.served: dict[str, dict] = {}  # uri -> the "analyzed" message of the serving engine's analysis
        self.failed_versions: set = set()  # (uri, version) whose analysis killed its fork: not retried
        self._ids = itertools.count(1)
        self._jobs = itertools.count(1)
        self._pending: dict[int, tuple] = {}  # query id -> (future, conn)
        self._current_ready = asyncio.Event()
        self._starting: asyncio.Task | None = None
        self.starts = 0
        self.analysis_times: list = []
        self.gc_times: list = []
        #: answers from the serving engine's last analysis, and those that waited for a fresh one
        self.answers = {"from_last": 0, "waited": 0, "wait_expired": 0}
        #: (method, ms the answer took here, ms the engine computed, ms waited for a fresh analysis, ms from the
        #: query's send to the engine reading it, ms from the engine's reply to this loop reading it)
        self.query_times: collections.deque = collections.deque(maxlen=4000)
        #: uri -> the methods answered from an earlier analysis (moved through the edits) since its last
        #: publication: the server asks the client to refresh them once the text's own analysis is out
        self.stale_answers: dict[str, set] = {}
        self.peak_total_mb = 0.0
        self._memory_read_at = 0.0
        self.stopped = False
        self.token = os.urandom(6).hex()  # names this server process in diagnostic result ids
        self.on_published = None  # callback(analyzed message) for every finished analysis
        #: documents analyzed as they are typed in: when an analysis ends and the text moved on, the next one
        #: starts at once (each covers the few keystrokes since the last, so the one of a burst's final text is
        #: small: one statement to parse, the kernels typed in since)
        self.eager: set[str] = set()
        self._pumping: set[str] = set()

    # -- life cycle -------------------------------------------------------------------------------------
    async def start(self):
        try:
            self.server = await asyncio.start_unix_server(self._on_connect, path=self.path)
            os.chmod(self.path, 0o600)
        except OSError:
            if self.stopped:  # a shutdown came while starting (it removed the socket's folder): nothing to start
                return
            raise
        if self.stopped:
            self.server.close()
            return
        await self._spawn()

    async def _spawn(self):
        from .workers import neutral_dir, worker_env
        self._current_ready.clear()
        self.starts += 1
        # the engine's stderr goes through a plain pipe read by a thread, not an asyncio pipe transport: the
        # engine's forked analyses inherit that pipe, so it can still be open when the server's loop closes, and a
        # transport collected after that raises "Event loop is closed" from its __del__ at the server's exit
        rfd, wfd = os.pipe()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "lsp_server.engine", self.path, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=wfd, env=worker_env(), cwd=neutral_dir())
        except BaseException:
            os.close(rfd)
            raise
        finally:
            os.close(wfd)
        threading.Thread(target=self._stderr, args=(rfd, self.proc.pid), name="engine-stderr", daemon=True).start()
        log.info("analysis engine started (pid %s)", self.proc.pid)

    @staticmethod
    def _stderr(fd: int, pid: int):
        """Log the engine's stderr line by line until every process holding the pipe has exited."""
        with open(fd, "rb", closefd=True) as f:
            for line in f:
                log.warning("engine %s: %s", pid, line.decode("utf-8", "replace").rstrip())

    async def stop(self):
        self.stopped = True
        for c in (self.current, self.job.conn if self.job else None):
            if c is not None:
                c.send({"op": "exit"})
        if self.job is not None and self.job.conn is not None and self.job.conn.pid:
            self._kill(self.job.conn.pid)
        if self.server is not None:
            self.server.close()
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass
        # the first engine's process: wait for it (it exits on "exit" or EOF), so that its transport is closed while
        # the event loop still runs (else asyncio reports "Event loop is closed" from its __del__ at exit)
        proc = self.proc
        if proc is not None and proc.returncode is None:
            try:
                await asyncio.wait_for(proc.wait(), 2.0)
            except (asyncio.TimeoutError, ProcessLookupError):
                try:
                    proc.kill()
                    await asyncio.wait_for(proc.wait(), 5.0)
                except (ProcessLookupError, asyncio.TimeoutError):
                    pass

    async def serving(self, timeout: float = 60.0) -> _Conn:
        """The engine that answers (waits while a fresh one starts)."""
        if self.current is not None and not self.current.closed:
            return self.current
        try:
            await asyncio.wait_for(self._current_ready.wait(), timeout)
        except asyncio.TimeoutError:
            raise EngineUnavailable("the analysis engine did not start") from None
        if self.current is None:
            raise EngineUnavailable("no analysis engine")
        return self.current

    # -- connections ---------------------------------------------------------------------------------------
    async def _on_connect(self, reader, writer):
        conn = _Conn(reader, writer)
        try:
            while True:
                head = await reader.readexactly(_HEADER.size)
                (n,) = _HEADER.unpack(head)
                msg = json.loads(await reader.readexactly(n))
                self._dispatch(conn, msg)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the engine exited, or the server is shutting down
        except Exception:
            log.exception("engine connection failed")
        finally:
            conn.closed = True
            writer.close()
            self._closed(conn)

    def _dispatch(self, conn: _Conn, msg: dict):
        op = msg.get("op")
        if op == "reply":
            got = self._pending.pop(msg.get("id"), None)
            if got is not None and not got[0].done():
                got[0].set_result(msg)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("engine %s answered %s in %.1f ms", conn.pid, msg.get("id"), msg.get("ms", 0.0))
        elif op == "hello":
            conn.pid, conn.job = msg.get("pid"), msg.get("job")
            if msg.get("cmd") is not None:  # a fork answering a command: its answer comes on this connection
                conn.exiting = True
                got = self._pending.get(msg["cmd"])
                if got is not None:
                    self._pending[msg["cmd"]] = (got[0], conn)  # fails when the fork dies without answering
                return
            if conn.job is None:
                self._adopt_root(conn)
            else:
                job = self.job
                if job is None or job.id != conn.job or job.killed:
                    conn.send({"op": "exit"})
                    if conn.pid:
                        self._kill(conn.pid)
                    return
                job.conn = conn
                for m in job.buffer:
                    conn.send(m)
                job.buffer = []
        elif op == "analyzed":
            job = self.job
            if job is not None and job.id == msg.get("job"):
                job.msg = msg
                log.debug("job %s (%s v%s) analyzed in %.1f ms", job.id, job.uri, job.version, msg.get("elapsed_ms"))
                self.analysis_times.append(msg.get("elapsed_ms", 0.0))
                del self.analysis_times[:-2000]
                if not job.analyzed.done():
                    job.analyzed.set_result(msg)
        elif op == "ready":
            job = self.job
            if job is not None and job.id == msg.get("job") and job.conn is conn:
                self._promote(job, conn, msg)
        elif op == "job_failed":
            job = self.job
            if job is not None and job.id == msg.get("job"):
                log.warning("analysis job failed: %s", msg.get("error"))
                self._end_job(job, ok=False)

    def _adopt_root(self, conn: _Conn):
        old = self.current
        self.current = conn
        self.served.clear()
        conn.send(dict(self._config(), op="config", encoding=self._encoding()))
        for uri, (text, version) in list(self.docs.texts.items()):
            conn.send({"op": "open", "uri": uri, "text": text, "version": version})
        if old is not None and not old.closed:
            old.exiting = True
            old.send({"op": "exit"})
        self._current_ready.set()

    def _promote(self, job: _Job, conn: _Conn, msg: dict):
        log.debug("job %s: %s of v%s serves (gc %s ms)", job.id, job.kind, job.version, msg.get("gc_ms"))
        old = self.current
        self.current = conn
        if job.kind == "analyze" and job.msg is not None:
            self.served[job.uri] = job.msg
        if old is not None and old is not conn:
            old.exiting = True
            old.send({"op": "exit"})  # it answers what it was asked before, then exits
        self._track_memory(msg)
        if msg.get("gc_ms") is not None:
            self.gc_times.append(msg["gc_ms"])
            del self.gc_times[:-2000]
        self._end_job(job, ok=True, ready_msg=msg)

    def _end_job(self, job: _Job, ok: bool, ready_msg: dict | None = None):
        if self.job is job:
            self.job = None
        if not job.analyzed.done():
            job.analyzed.set_result(None)
        if not job.ready.done():
            job.ready.set_result(ready_msg if ok else None)
        if self.job is None and not self.stopped:
            for uri in list(self.eager):
                self.pump(uri)

    def start_analysis(self, uri: str):
        """Start an analysis of ``uri``'s text now unless one of it runs (else when the running job ends)."""
        job = self.job
        if job is not None and job.kind == "analyze" and job.uri == uri and not job.killed and \
                job.version == (self.docs.get(uri) or (None, None))[1]:
            return
        self.pump(uri, force=True)

    def pump(self, uri: str, force: bool = False):
        """Analyze ``uri`` now if it is eager, its text is newer than the served analysis and no job runs (else
        the end of the running job calls this again)."""
        if not (force or uri in self.eager) or uri in self._pumping or self.stopped:
            return
        if self.job is not None and not force:
            return
        got = self.docs.get(uri)
        s = self.served.get(uri)
        if got is None or (s is not None and s.get("version") == got[1] and got[1] is not None):
            return
        if (uri, got[1]) in self.failed_versions:
            return
        self._pumping.add(uri)

        async def go():
            try:
                await self._start_job("analyze", uri)
            except EngineUnavailable:
                pass
            finally:
                self._pumping.discard(uri)
        asyncio.ensure_future(go())

    def _closed(self, conn: _Conn):
        for rid, (fut, c) in list(self._pending.items()):
            if c is conn and not fut.done():
                self._pending.pop(rid, None)
                fut.set_exception(EngineUnavailable("the analysis engine exited"))
        job = self.job
        if job is not None and job.conn is conn:
            if not job.killed:
                log.warning("an analysis of %s v%s ended without a result", job.uri, job.version)
                if job.kind == "analyze" and job.analyzed.done() is False:
                    self.failed_versions.add((job.uri, job.version))
            self._end_job(job, ok=False)
        if conn is self.current and not conn.exiting:
            self.current = None
            if job is not None:
                job.killed = True
                if job.conn is not None and job.conn.pid:
                    self._kill(job.conn.pid)
                self._end_job(job, ok=False)
            if not self.stopped:
                log.warning("the analysis engine exited; starting a new one")
                asyncio.ensure_future(self._spawn())

    @staticmethod
    def _kill(pid: int):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

    def _track_memory(self, msg: dict | None = None):
        # reading a process's smaps_rollup walks its page tables (milliseconds for a few hundred MB, more on a busy
        # machine), on this event loop: at most once a second, not on every analysis
        now = time.monotonic()
        if now - self._memory_read_at < 1.0:
            return None
        self._memory_read_at = now
        total = _pss_mb(os.getpid()) or 0.0
        for c in (self.current, self.job.conn if self.job else None):
            if c is not None and c.pid:
                total += _pss_mb(c.pid) or 0.0
        self.peak_total_mb = max(self.peak_total_mb, total)
        return total

    def memory(self) -> dict:
        pids = [c.pid for c in (self.current, self.job.conn if self.job else None) if c is not None and c.pid]
        engines = sum((_pss_mb(p) or 0.0) for p in pids)
        total = (_pss_mb(os.getpid()) or 0.0) + engines
        self.peak_total_mb = max(self.peak_total_mb, total)
        return {"engines_pss_mb": engines, "total_pss_mb": total, "peak_total_pss_mb": self.peak_total_mb,
                "engine_pids": pids, "engine_starts": self.starts, "answers": dict(self.answers),
                "serving_pid": self.current.pid if self.current is not None else None,
                "job": {"kind": self.job.kind, "version": self.job.version,
                        "pid": self.job.conn.pid if self.job.conn is not None else None} if self.job else None,
                "gc_ms": self.gc_times[-200:], "queries": list(self.query_times)}

    # -- documents --------------------------------------------------------------------------------------------
    def _broadcast(self, msg: dict):
        if self.current is not None:
            self.current.send(msg)
        job = self.job
        if job is not None and not job.killed:
            if job.conn is not None:
                job.conn.send(msg)
            else:
                job.buffer.append(msg)

    def opened(self, uri: str, text: str, version):
        self.served.pop(uri, None)
        self._broadcast({"op": "open", "uri": uri, "text": text, "version": version})

    def changed(self, uri: str, version, changes: list):
        self._broadcast({"op": "change", "uri": uri, "version": version, "changes": changes})
        job = self.job
        # a warm-up is superseded at once; an analysis is let finish: its caches (statements parsed, kernels
        # checked) make the next one small, and killing each one on a loaded machine left bursts with none
        if job is not None and job.uri == uri and job.strong == 0 and job.kind == "warm":
            self.cancel_job()
        self.pump(uri)

    def closed(self, uri: str):
        self.served.pop(uri, None)
        self.eager.discard(uri)
        self._broadcast({"op": "close", "uri": uri})
        if self.job is not None and self.job.uri == uri:
            self.cancel_job()

    def configure(self, **cfg):
        self._broadcast(dict(cfg, op="config"))

    def cancel_job(self):
        job = self.job
        if job is None:
            return
        log.debug("job %s: %s of v%s killed", job.id, job.kind, job.version)
        job.killed = True
        if job.conn is not None and job.conn.pid:
            self._kill(job.conn.pid)
        self._end_job(job, ok=False)

    # -- jobs ------------------------------------------------------------------------------------------------------
    async def _start_job(self, kind: str, uri: str, **extra) -> _Job:
        conn = await self.serving()
        while self.job is not None:  # one job at a time
            other = self.job
            if other.kind == "warm":
                self.cancel_job()
            elif kind == "analyze" and other.kind == "analyze" and other.uri == uri and not other.killed and \
                    other.version == (self.docs.get(uri) or (None, None))[1]:
                return other  # already analyzing this very text
            else:
                await asyncio.shield(other.ready)
        got = self.docs.get(uri)
        job = _Job(next(self._jobs), kind, uri, got[1] if got else None, extra.get("target"))
        self.job = job
        conn = self.current or conn
        conn.send(dict(extra, op="job", job=job.id, kind=kind, uri=uri))
        log.debug("job %s: %s of v%s started", job.id, kind, job.version)
        return job

    async def fresh(self, uri: str, weak: bool = False, need_ready: bool = True) -> dict | None:
        """The "analyzed" message of an analysis of ``uri`` at least as new as its text now (started if none
        runs), once the serving engine holds it (``need_ready``) or as soon as its diagnostics are known.
        None when the document is closed or its analysis failed."""
        got = self.docs.get(uri)
        if got is None:
            return None
        want = got[1]
        for _ in range(6):
            s = self.served.get(uri)
            if s is not None and (want is None or s.get("version") is None or s["version"] >= want):
                return s
            if (uri, want) in self.failed_versions:
                return None
            job = self.job
            if job is None or job.kind != "analyze" or job.uri != uri or job.killed or (
                    want is not None and job.version is not None and job.version < want):
                job = await self._start_job("analyze", uri)
            if not weak:
                job.strong += 1
            try:
                if not need_ready:
                    msg = await asyncio.shield(job.analyzed)
                    if msg is not None and (want is None or msg.get("version") is None or msg["version"] >= want):
                        return msg
                await asyncio.shield(job.ready)
            finally:
                if not weak:
                    job.strong -= 1
            if job.killed and not job.ready.result():
                if weak:
                    return None
                continue
            if not job.ready.result() and (uri, job.version) in self.failed_versions:
                return None
        return self.served.get(uri)

    async def warm(self, uri: str, target: str, version) -> None:
        """Warm hover layouts of ``uri``'s kernels, a slice at a time, while its text stays at ``version``."""
        done: list = []
        for _ in range(200):
            got = self.docs.get(uri)
            if got is None or got[1] != version or self.job is not None:
                return
            s = self.served.get(uri)
            if s is None or s.get("version") != version:
                return
            job = await self._start_job("warm", uri, target=target, done=done, budget_s=0.25)
            msg = await asyncio.shield(job.ready)
            if not msg:
                return
            done += msg.get("warmed") or []
            if not msg.get("remaining"):
                return
            await asyncio.sleep(0.05)

    # -- queries -------------------------------------------------------------------------------------------------
    async def query(self, method: str, uri: str, params: dict, final: bool = False) -> dict:
        for attempt in range(2):
            conn = await self.serving()
            rid = next(self._ids)
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            self._pending[rid] = (fut, conn)
            t0 = loop.time()
            conn.send({"op": "query", "id": rid, "method": method, "uri": uri, "params": params, "final": final,
                       "t": time.monotonic()})
            try:
                r = await asyncio.wait_for(asyncio.shield(fut), QUERY_TIMEOUT_S)
                r["rtt_ms"] = (loop.time() - t0) * 1e3
                if r.get("t_out") is not None:  # the reply's wait to be read here (this loop was busy or waited)
                    r["back_ms"] = (time.monotonic() - r["t_out"]) * 1e3
                return r
            except EngineUnavailable:
                if attempt:
                    raise
            except asyncio.TimeoutError:
                self._pending.pop(rid, None)
                raise EngineUnavailable(f"the analysis engine did not answer {method} in {QUERY_TIMEOUT_S:.0f} s") \
                    from None
            finally:
                self._pending.pop(rid, None)
        raise EngineUnavailable("no analysis engine")

    async def command(self, msg: dict, timeout: float = COMMAND_TIMEOUT_S) -> dict:
        """``commandinfo.command_info`` of ``msg`` (its ``text``), answered by a fork of the serving engine that
        then exits: the serving engine keeps answering, and the server never runs the front end for a command."""
        conn = await self.serving()
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = (fut, None)  # not the serving engine's: it may be replaced before the fork answers
        conn.send(dict(msg, op="command", id=rid))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            raise EngineUnavailable(f"the analysis engine did not answer a command in {timeout:.0f} s") from None
        finally:
            self._pending.pop(rid, None)

    async def _wait_unless_typed_on(self, fut, uri: str, asked) -> bool:
        """Wait for ``fut``; give up (False) once ``MISS_WAIT_S`` has passed and the document has changed since the
        request (version ``asked``) was made: its answer would be of a text the user has typed over."""
        loop = asyncio.get_running_loop()
        end = loop.time() + MISS_WAIT_S
        while True:
            done, _ = await asyncio.wait({fut}, timeout=max(0.0, end - loop.time()) or 0.05)
            if done:
                return True
            got = self.docs.get(uri)
            if got is None or got[1] != asked:
                return False

    async def answer(self, method: str, uri: str, params: dict):
        """The engine's answer from its last finished analysis, or, when that cannot answer (the position is in
        lines typed since), from a fresh one: a hover, completion or signature help waits for it at most
        ``MISS_WAIT_S`` once the user has typed on (an answer about an older text is of no use, and the client
        asks again), then answers nothing."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        asked = (self.docs.get(uri) or (None, None))[1]
        r = await self.query(method, uri, params)
        waited = 0.0
        if r.get("miss"):
            self.answers["waited"] += 1
            t1 = loop.time()
            fresh = asyncio.ensure_future(self.fresh(uri))
            try:
                if method in BOUNDED_WAIT and not await self._wait_unless_typed_on(fresh, uri, asked):
                    self.answers["wait_expired"] += 1
                    if method in ("inlayHint", "codeLens"):
                        self.stale_answers.setdefault(uri, set()).add(method)
                    self.query_times.append((method, (loop.time() - t0) * 1e3, r.get("ms"),
                                             (loop.time() - t1) * 1e3, r.get("in_ms"), r.get("back_ms")))
                    return None
                await fresh
            finally:
                if not fresh.done():
                    fresh.cancel()  # it only waits: the analysis it waits for goes on (the editor wants it)
            waited = (loop.time() - t1) * 1e3
            r = await self.query(method, uri, params, final=True)
        else:
            self.answers["from_last"] += 1
            if r.get("same") is False and method in ("inlayHint", "codeLens"):
                self.stale_answers.setdefault(uri, set()).add(method)
        self.query_times.append((method, (loop.time() - t0) * 1e3, r.get("ms"), waited, r.get("in_ms"),
                                 r.get("back_ms")))
        if "error" in r:
            log.warning("engine: %s failed: %s", method, r["error"])
            return None
        return r.get("result")
