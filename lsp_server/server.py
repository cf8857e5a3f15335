"""The pygls wiring: LSP messages in, plain analysis functions, LSP messages out.

Everything the editor sees is computed by the plain functions of
``analysis``, ``hover``, ``features`` and ``commands``; this module keeps the
documents' state (debounced analysis, version checks), turns settings into
arguments and makes sure no handler can take the server down: an internal
error is logged and the request gets an empty answer.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import gc
import hashlib
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from . import __version__, features
from .analysis import Analysis, KernelCache, analyze, lsp_diagnostics, uri_to_path
from .deuteron_newt import GeneratedNewt
from .documents import Documents, change_json
from .engine_host import EngineHost, EngineUnavailable, engines_supported
from .files import UnreadableDocument, read_document
from .hover import hover as hover_fn
from .settings import Settings, _apply_log_level, _convert_args

__all__ = ["NewtLanguageServer", "create_server", "SERVER_COMMANDS", "CLIENT_COMMAND_ALIASES"]

log = logging.getLogger("newt-lsp")

SERVER_COMMANDS = ("newt.compile", "newt.verify", "newt.autotune", "newt.show")
#: the code lens commands of docs/lsp-protocol.md: accepted, not advertised (a VS Code client registers them)
CLIENT_COMMAND_ALIASES = {"newt.compileKernel": "newt.compile", "newt.verifyKernel": "newt.verify",
                          "newt.autotuneKernel": "newt.autotune", "newt.showCuda": "newt.show",
                          "newt.showPtx": "newt.show", "newt.showSass": "newt.show", "newt.showIr": "newt.show"}
_SHOW_KIND = {"newt.showCuda": "cuda", "newt.showPtx": "ptx", "newt.showSass": "sass", "newt.showIr": "ir"}

#: engines: analyze while the user types (each analysis covers the keystrokes since the last), not only once the
#: debounce is half over (``NEWT_LSP_EAGER=0``)
EAGER = os.environ.get("NEWT_LSP_EAGER", "1") not in ("0", "off", "false")
#: the settings that may differ per workspace folder (resource-scoped in the VS Code extension)
FOLDER_KEYS = ("target", "diagnosticsOn", "inlayHints")
VIRTUAL_DOCUMENT = "newt/virtualDocument"
SERVER_INFO = "newt/serverInfo"
SOURCE_MAP = "newt/sourceMap"  # generated view -> source lines (lsp_server/sourcemap.py, docs/lsp-protocol.md)
STATUS = "newt/status"


#: what ``structure_message`` returns for a message it answered itself (malformed params)
_ANSWERED = object()
#: the base protocol's lifecycle errors
SERVER_NOT_INITIALIZED = -32002
INVALID_REQUEST = -32600


def _validation_detail(exc: BaseException) -> str:
    """The leaf errors of a cattrs validation error, as one line."""
    out: list[str] = []

    def walk(e, path):
        subs = getattr(e, "exceptions", None)
        if subs:
            notes = getattr(e, "__notes__", None) or []
            for i, sub in enumerate(subs):
                note = str(notes[i]) if i < len(notes) else ""
                walk(sub, path + ([note.replace("Structuring class ", "").strip()] if note else []))
        else:
            where = " / ".join(p for p in path if p)
            out.append(f"{where + ': ' if where else ''}{type(e).__name__}: {e}")

    walk(exc, [])
    return "; ".join(out)[:500] or type(exc).__name__


class NewtProtocol(LanguageServerProtocol):
    """Runs ``workspace/executeCommand`` as one coroutine, so ``$/cancelRequest`` cancels the command itself;
    advertises the code lens commands to clients other than VS Code (Neovim runs a lens only when the server
    lists its command; the VS Code extension registers them itself, so they must not be listed there)."""

    def structure_message(self, data):
        """A request whose params do not match the method's type (``hover`` with ``{}``, ``line: -1``,
        ``line: "a"``) is answered InvalidParams naming the method; pygls 2 would drop it unanswered."""
        try:
            return super().structure_message(data)
        except Exception as exc:
            if not (isinstance(data, dict) and "jsonrpc" in data and "method" in data):
                raise
            method = data.get("method")
            cause = exc.__cause__ or exc
            detail = _validation_detail(cause)
            if "id" in data and not isinstance(data.get("id"), (dict, list)):
                from pygls.exceptions import JsonRpcInvalidParams
                err = JsonRpcInvalidParams(f"invalid params for {method}: {detail}")
                self._send_response(data["id"], None, err.to_response_error())
            log.warning("invalid params for %s: %s", method, detail)
            return _ANSWERED

    def handle_message(self, message):
        """The lifecycle of the base protocol: before ``initialize`` a request is answered ``-32002``
        (ServerNotInitialized) at once and a notification other than ``exit`` is dropped; after ``shutdown``
        a request is answered ``-32600`` (InvalidRequest) and a notification other than ``exit`` is dropped
        (pygls 2 left both unanswered)."""
        if message is _ANSWERED:
            return None
        method = getattr(message, "method", None)
        is_request = method is not None and hasattr(message, "id")
        if not getattr(self, "_newt_initialize_seen", False):
            if method == lsp.INITIALIZE and is_request:
                self._newt_initialize_seen = True
            elif is_request:
                self._lifecycle_error(message.id, SERVER_NOT_INITIALIZED,
                                      f"the server is not initialized: {method} before initialize")
                return None
            elif method != lsp.EXIT:
                log.warning("dropped %s: it came before initialize", method or "a response")
                return None
        elif self._shutdown and method != lsp.EXIT:
            if is_request:
                self._lifecycle_error(message.id, INVALID_REQUEST,
                                      f"the server is shutting down: {method} after shutdown (only exit is "
                                      "accepted)")
            return None
        got = super().handle_message(message)
        if method == lsp.SHUTDOWN and is_request:
            # shut down from now on (pygls sets this only once the async shutdown handler is done): later
            # requests are refused, and an ``exit`` sent without waiting for the answer still exits with 0
            self._shutdown = True
        return got

    def _lifecycle_error(self, msg_id, code: int, message: str):
        log.warning("%s", message)
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams):
        result = yield from super().lsp_initialize(params)
        try:
            if not self._server.vscode_client:
                caps = result.capabilities
                cmds = list(caps.execute_command_provider.commands) if caps.execute_command_provider else []
                cmds += [c for c in CLIENT_COMMAND_ALIASES if c not in cmds]
                caps.execute_command_provider = lsp.ExecuteCommandOptions(commands=cmds)
        except Exception:
            log.exception("cannot adjust the advertised commands")
        return result

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams):
        # The server keeps its own copy of open documents.  pygls's copy is not updated: pygls 2.1 splits lines
        # with str.splitlines (\x85, \x0c, \u2028 ... end a line there, not in LSP) and, on a position past the
        # end of such a line, rewrites the client's Position in place, which would corrupt our copy too.
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(self, params: lsp.ExecuteCommandParams):
        return await self._server.execute_command(params)


class _Job:
    """One analysis on the analysis thread; ``text``/``version`` are set when it starts."""
    __slots__ = ("task", "started", "text", "version")

    def __init__(self):
        self.task = None
        self.started = False
        self.text = None
        self.version = None


class _Doc:
    __slots__ = ("uri", "analysis", "inflight", "timer", "published", "saved_analysis", "pull_version", "warm",
                 "saved_diags", "publisher")

    def __init__(self, uri: str):
        self.uri = uri
        self.analysis: Analysis | None = None  # the latest finished analysis (of some version)
        self.inflight: list = []  # the _Jobs of this document queued or running on the analysis thread
        self.timer: asyncio.Task | None = None
        self.published: int | None = None
        self.saved_analysis: Analysis | None = None
        self.pull_version = None
        self.warm: asyncio.Task | None = None
        self.saved_diags: dict | None = None  # engines: the "analyzed" message of the last save (diagnosticsOn=save)
        self.publisher: asyncio.Task | None = None  # engines: waits for the analysis of a version paused on


class NewtLanguageServer(LanguageServer):
    def __init__(self):
        super().__init__("newt-lsp", __version__, protocol_cls=NewtProtocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.folder_settings: dict[str, Settings] = {}  # workspace folder URI -> its settings (resource scope)
        self.docs: dict[str, _Doc] = {}
        self.documents = Documents()  # the open documents' texts and the line map of their edits
        #: the analysis engines (a process that answers, forks that analyze); None: analysis on a thread here
        self.engine: EngineHost | None = None
        self.analysis_times: collections.deque = collections.deque(maxlen=2000)  # ms of each analysis
        self.kernel_cache = KernelCache(max_entries=4096)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="newt-analysis")
        self._query_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="newt-query")
        self._warm_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="newt-warm")
        self.client_name = ""
        self.markdown = True
        self.pull_diagnostics = False
        self.snippets = False
        self.vscode_client = False
        self.progress_supported = False
        self.config_pull = False
        self.refresh_inlay = False
        self.refresh_code_lens = False
        self.refresh_diagnostics = False
        self.gpu = None  # {"name", "arch"} after detection
        self.initialized_at = None
        self._last_activity = time.monotonic()
        self._gc_task = None
        self._monitor_task = None
        #: (ms late, ms of CPU the loop thread used meanwhile) of each timer of ``_loop_monitor`` late > 20 ms
        self.loop_stalls: collections.deque = collections.deque(maxlen=2000)
        self.commands = None  # set in create_server (commands.Commands)
        self.generated_newt = GeneratedNewt()  # deuteron hovers' generated newt lines (lsp_server.deuteron_newt)

    # -- transport (the base protocol: transport.py) ------------------------------------
    def start_io(self, stdin=None, stdout=None) -> int:
        """Serve LSP over stdin/stdout with ``transport.run_async`` (case-insensitive headers, LF-only lines,
        ``-32700``...) and return the process's exit code: 0 after ``shutdown`` and ``exit`` or at the end of
        the input, 1 for an ``exit`` without ``shutdown`` (pygls 2 swallowed that ``SystemExit``)."""
        import sys

        from pygls.io_ import StdoutWriter

        from .transport import StdinReader, run_async
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        reader = StdinReader(stdin or sys.stdin.buffer, self.thread_pool)
        return self._serve(lambda: run_async(self._stop_event, reader, self.protocol, log, self.report_server_error))

    def start_tcp(self, host: str, port: int) -> int:
        """Serve one LSP connection at a time on ``host:port`` (the same reader as ``start_io``)."""
        from .transport import run_async
        self._stop_event = stop = threading.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
            self.protocol.set_writer(writer)  # type: ignore[arg-type]
            await run_async(stop, reader, self.protocol, log, self.report_server_error)
            self.shutdown()

        async def serve():
            self._server = await asyncio.start_server(connection, host, port)
            log.info("serving on %s", ", ".join(str(s.getsockname()) for s in self._server.sockets))
            async with self._server:
                await self._server.serve_forever()

        return self._serve(serve)

    def _serve(self, main) -> int:
        code = 0
        try:
            asyncio.run(main())
        except SystemExit as e:  # the ``exit`` notification
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BrokenPipeError:
            log.error("the connection to the client is lost; shutting down")
        except (KeyboardInterrupt, asyncio.CancelledError):
            pass
        finally:
            self.kill_children()
            self.shutdown()
        return code

    def child_pids(self) -> list[int]:
        """The processes this server started that may still run: the analysis engine (and a job's), the compile,
        run and performance workers."""
        pids: list[int] = []
        eng = getattr(self, "engine", None)
        if eng is not None:
            proc = eng.proc
            if proc is not None and proc.returncode is None:
                pids.append(proc.pid)
            for c in (eng.current, eng.job.conn if eng.job else None):
                if c is not None and c.pid and not c.closed:  # (a closed one's process is gone: its pid may be reused)
                    pids.append(c.pid)
        cmds = getattr(self, "commands", None)
        if cmds is not None:
            for w in (cmds.compile_worker, cmds.run_worker, *cmds.perf.workers):
                if w is not None and w.alive and w.proc is not None:
                    pids.append(w.proc.pid)
        return sorted(set(pids))

    def kill_children(self):
        """The event loop has ended (``exit``, with or without ``shutdown``, or the client went away): whatever
        child still runs goes now, rather than when it notices its pipes close (an ``exit`` without ``shutdown``
        skips the workers' orderly stop)."""
        import signal
        for pid in self.child_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    # -- helpers -------------------------------------------------------------------
    def touch(self):
        self._last_activity = time.monotonic()

    @property
    def encoding(self) -> str:
        try:
            return str(getattr(self.workspace.position_encoding, "value", self.workspace.position_encoding))
        except RuntimeError:
            return "utf-16"

    async def run_sync(self, fn, *args, **kwargs):
        """Run ``fn`` on the query thread: hovers, completion, code generation for hovers and commands (they read
        finished analyses), one at a time, never queued behind an analysis."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._query_executor, functools.partial(fn, *args, **kwargs))

    async def run_analysis(self, fn, *args, **kwargs):
        """Run ``fn`` on the analysis thread (the front end's analyses, one at a time)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def with_generated_newt(self, uri: str, position: lsp.Position, h):
        """A hover on a line of a deuteron / Helion kernel with the newt lines it became: traced in the background
        in the run worker, only in a trusted workspace, once per content (``lsp_server.deuteron_newt``)."""
        try:
            text, _version = self.doc_text(uri)
            gen = self.generated_newt
            if h is not None and gen.wanted(text) and self.commands is not None:
                gen.ensure(uri, text, uri_to_path(uri), self.settings_for(uri).trusted, self.commands.worker_request)
            return gen.decorate(h, uri, text, position.line + 1, self.markdown)
        except Exception:  # the hover itself is never lost to this
            log.debug("generated newt lines of %s failed", uri, exc_info=True)
            return h

    def settings_for(self, uri: str | None) -> Settings:
        """The settings of the workspace folder holding ``uri`` (``target``, ``diagnosticsOn`` and ``inlayHints``
        may differ per folder); the global settings outside every folder."""
        if uri and self.folder_settings:
            best = None
            for folder in self.folder_settings:
                base = folder.rstrip("/") + "/"
                if (uri == folder or uri.startswith(base)) and (best is None or len(folder) > len(best)):
                    best = folder
            if best is not None:
                return self.folder_settings[best]
        return self.settings

    async def pull_folder_settings(self) -> list[str]:
        """Ask the client for the ``newt`` section of each workspace folder (``workspace/configuration`` with a
        ``scopeUri``); returns the names of the resource-scoped settings that changed in any folder."""
        if not self.config_pull:
            return []
        try:
            folders = [f.uri for f in self.workspace.folders.values()]
        except RuntimeError:
            return []
        if not folders:
            return []
        got = await self.workspace_configuration_async(lsp.ConfigurationParams(
            items=[lsp.ConfigurationItem(scope_uri=f, section="newt") for f in folders]))
        changed: set[str] = set()
        fresh: dict[str, Settings] = {}
        for folder, obj in zip(folders, got or []):
            obj = _convert_args(obj)
            prev = self.folder_settings.get(folder)
            st = Settings(**{k: getattr(self.settings, k) for k in ("trusted", "target", "diagnostics_on",
                                                                      "inlay_shapes", "inlay_dtypes",
                                                                      "debounce_ms")})
            if isinstance(obj, dict):
                st.update({k: v for k, v in obj.items() if k in FOLDER_KEYS})
            for attr, key in (("target", "target"), ("diagnostics_on", "diagnosticsOn"),
                              ("inlay_shapes", "inlayHints.shapes"), ("inlay_dtypes", "inlayHints.dtypes")):
                if prev is None or getattr(prev, attr) != getattr(st, attr):
                    changed.add(key)
            fresh[folder] = st
        self.folder_settings = fresh
        return sorted(changed)

    def doc_text(self, uri: str, strict: bool = False) -> tuple[str, int | None]:
        """The document's current text and version (open documents), else the file on disk (version None):
        a regular file only, under a size cap (``files.read_document``: a FIFO, ``/dev/stdin`` or
        ``/dev/zero`` would hang the server or fill its memory).  A file that cannot be read gives ``""``;
        with ``strict`` one that must not be read (not a regular file, too large, not UTF-8) raises
        ``files.UnreadableDocument`` (commands say why)."""
        got = self.texts.get(uri)
        if got is not None:
            return got
        try:
            return read_document(uri_to_path(uri)), None
        except UnreadableDocument:
            if strict:
                raise
            return "", None
        except (OSError, ValueError):
            return "", None

    @property
    def texts(self) -> dict:
        return self.documents.texts

    @property
    def edits(self) -> dict:
        return self.documents.edits

    def open_document(self, uri: str, text: str, version: int | None):
        self.documents.encoding = self.encoding
        self.documents.open(uri, text, version)
        if self.engine is not None:
            self.engine.opened(uri, text, version)

    def change_document(self, uri: str, version: int | None, changes):
        """Apply LSP content changes with LSP's own line rules (\\n, \\r\\n, \\r only) and position encoding."""
        self.documents.encoding = self.encoding
        self.documents.change(uri, version, changes)
        if self.engine is not None:
            self.engine.changed(uri, version, change_json(changes))

    def close_document(self, uri: str):
        self.documents.close(uri)
        if self.engine is not None:
            self.engine.closed(uri)

    def _state(self, uri: str) -> _Doc:
        st = self.docs.get(uri)
        if st is None:
            st = self.docs[uri] = _Doc(uri)
        return st

    async def analysis_for(self, uri: str, allow_stale: bool = False, exact: bool = True) -> Analysis | None:
        """The analysis of the document's current text (computed now if needed).

        With ``allow_stale`` the last finished analysis is returned at once when the current text's is not
        ready (hover, completion and signature help answer from it while a new one runs; ``stale_position``
        maps positions) and nothing new is started (the debounce does that). The analysis itself runs as a
        task of its own: a caller that goes away (a debounce timer replaced by the next keystroke, a cancelled
        request) never cancels what others wait for. ``exact``: analyze again until the result is of the text
        as it is when it arrives (code actions, commands); else the first result not older than the call.
        """
        st = self._state(uri)
        result = None
        for _ in range(4):
            text, version = self.doc_text(uri)
            a = st.analysis
            if a is not None and a.version == version and a.text == text:
                return a
            if allow_stale and a is not None:
                return a
            job = st.inflight[-1] if st.inflight else None
            # a queued job reads the text when it starts, so it serves this request too; a running one only
            # if it is analyzing this very text
            if job is None or (job.started and (job.version != version or job.text != text)):
                job = _Job()
                job.task = asyncio.ensure_future(self._run_job(st, job, uri))
                st.inflight.append(job)
            result = await asyncio.shield(job.task)
            if not exact or result.text == self.doc_text(uri)[0]:
                return result
        return result

    async def _run_job(self, st: _Doc, job: _Job, uri: str) -> Analysis:
        def work():
            # the newest text when the thread gets to it: work for versions typed over meanwhile is never done
            job.text, job.version = self.doc_text(uri)
            job.started = True
            return analyze(job.text, uri, job.version, self.encoding, self.kernel_cache)
        try:
            result = await self.run_analysis(work)
        finally:
            if job in st.inflight:
                st.inflight.remove(job)
        self.analysis_times.append(result.elapsed_ms)
        if result.elapsed_ms > 2000:
            _report_slow(uri, result.text, result.elapsed_ms)
        cur = st.analysis
        if cur is None or cur.version is None or result.version is None or result.version >= (cur.version or 0):
            st.analysis = result
        return result

    def stale_position(self, a: Analysis, uri: str, pos: lsp.Position) -> tuple[lsp.Position, int] | None:
        """``pos`` of the current text as a position of ``a``'s text, and the line shift back (None: in lines
        changed since ``a``); see ``Documents.stale_position``."""
        return self.documents.stale_position(a, uri, pos)

    def completion_position(self, a: Analysis, uri: str, pos: lsp.Position) -> lsp.Position:
        return self.documents.completion_position(a, uri, pos)

    async def analysis_near(self, uri: str, pos: lsp.Position):
        """(analysis, position in its text, line shift) for a request at ``pos``: the last finished analysis when
        the lines around ``pos`` are unchanged in it (answers at once while a new analysis runs), else the
        current text's."""
        a = await self.analysis_for(uri, allow_stale=True)
        if a is None:
            return None, pos, 0
        mapped = self.stale_position(a, uri, pos)
        if mapped is not None:
            return a, mapped[0], mapped[1]
        a = await self.analysis_for(uri, exact=False)
        mapped = self.stale_position(a, uri, pos) if a is not None else None
        if mapped is not None:
            return a, mapped[0], mapped[1]
        return a, pos, 0

    # -- diagnostics ---------------------------------------------------------------
    def schedule(self, uri: str, delay_ms: int | None = None):
        st = self._state(uri)
        if st.timer is not None and not st.timer.done():
            st.timer.cancel()
        if st.warm is not None and not st.warm.done():
            st.warm.cancel()
        delay = (self.settings.debounce_ms if delay_ms is None else delay_ms) / 1000.0
        st.timer = asyncio.ensure_future(self._analyze_and_publish(uri, delay))

    async def _analyze_and_publish(self, uri: str, delay: float):
        if self.engine is not None:
            return await self._engine_publish(uri, delay)
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            a = await self.analysis_for(uri, exact=False)
            if a is None or uri not in self.docs:
                return
            _text, version = self.doc_text(uri)
            if version is not None and a.version != version:
                return  # stale: a newer edit is queued and will publish
            if self.settings_for(uri).diagnostics_on == "save":
                self._state(uri).saved_analysis = a
            self.publish(a)
            st = self._state(uri)
            st.warm = asyncio.ensure_future(self._warm(uri, a))
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("analysis of %s failed", uri)

    async def _engine_publish(self, uri: str, delay: float):
        """Engines: once the text stayed as it is for the debounce, its diagnostics as soon as a fork has them
        (the analysis is already running: typing starts one, see ``EngineHost.eager``); then warm the hovers.

        Only the debounce is cancelled by the next keystroke: a version the user paused on gets its diagnostics
        even when typing resumed before its analysis ended (unless a newer version's are out already)."""
        try:
            if delay > 0:
                if uri not in self.engine.eager:
                    # not analyzed as typed: start half way through the debounce (the job is let finish)
                    await asyncio.sleep(delay / 2)
                    self.engine.start_analysis(uri)
                    await asyncio.sleep(delay / 2)
                else:
                    await asyncio.sleep(delay)
        except asyncio.CancelledError:
            return
        st = self._state(uri)
        st.publisher = asyncio.ensure_future(self._engine_publish_now(uri))

    async def _engine_publish_now(self, uri: str):
        try:
            msg = await self.engine.fresh(uri, weak=True, need_ready=False)
            if msg is None or uri not in self.docs:
                return
            st = self._state(uri)
            got, version = msg.get("version"), self.doc_text(uri)[1]
            if got is not None and st.published is not None and st.published > got:
                return  # a newer version's diagnostics are out already
            if self.settings_for(uri).diagnostics_on == "save":
                st.saved_diags = msg
            self.publish_json(uri, msg)
            if got == version:
                self._refresh_stale(uri)
                st.warm = asyncio.ensure_future(self._engine_warm(uri, version))
        except asyncio.CancelledError:
            pass
        except EngineUnavailable as e:
            log.warning("no diagnostics for %s: %s", uri, e)
        except Exception:
            log.exception("analysis of %s failed", uri)

    def _refresh_stale(self, uri: str):
        """Inlay hints and code lenses answered from an earlier analysis while this one ran (moved through the
        edits, those on edited lines left out): ask the client to ask again, where it can be asked."""
        stale = self.engine.stale_answers.pop(uri, set())
        for method, can, send in (("inlayHint", self.refresh_inlay, self.workspace_inlay_hint_refresh),
                                  ("codeLens", self.refresh_code_lens, self.workspace_code_lens_refresh)):
            if method in stale and can:
                try:
                    send(None)
                except Exception:
                    log.debug("%s refresh failed", method, exc_info=True)

    async def _engine_warm(self, uri: str, version, idle: float = 0.3):
        try:
            await asyncio.sleep(idle)
            if await self.engine.fresh(uri, weak=True) is None:
                return
            await self.engine.warm(uri, self.commands.target_for(uri), version)
        except (asyncio.CancelledError, EngineUnavailable):
            pass
        except Exception:
            log.debug("warming layouts failed", exc_info=True)

    def publish_json(self, uri: str, msg: dict):
        if self.pull_diagnostics:
            return
        perf = self.commands.perf
        diags = [self.protocol._converter.structure(d, lsp.Diagnostic) for d in
                 (msg.get("diagnostics") or []) + perf.diagnostics(uri, msg.get("version"))]
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diags,
                                                                            version=msg.get("version")))
        self._state(uri).published = msg.get("version")
        perf.published(uri, msg.get("version"), lambda: self.publish_json(uri, msg))

    async def engine_answer(self, method: str, uri: str, params: dict):
        """An answer computed by the serving engine (JSON, as the client receives it)."""
        try:
            return await self.engine.answer(method, uri, params)
        except EngineUnavailable as e:
            log.warning("%s of %s: %s", method, uri, e)
            return None

    def engine_config(self) -> dict:
        return {"markdown": self.markdown, "snippets": self.snippets, "vscode": self.vscode_client}

    async def _warm(self, uri: str, a: Analysis, idle: float = 0.3):
        """When the user pauses, prepare what hovers need (layouts from the backend), one kernel at a time."""
        from .hover import warm_layouts
        try:
            await asyncio.sleep(idle)
            target = self.commands.target_for(uri)
            for ka in list(a.kernels):
                if uri not in self.docs or self.doc_text(uri)[1] != a.version:
                    return
                loop = asyncio.get_running_loop()  # a thread of its own: hovers never wait behind it
                await loop.run_in_executor(self._warm_executor, warm_layouts, a, target, [ka])
        except asyncio.CancelledError:
            pass
        except Exception:
            log.debug("warming layouts failed", exc_info=True)

    def publish(self, a: Analysis):
        if self.pull_diagnostics:
            return
        perf = self.commands.perf
        diags = lsp_diagnostics(a) + [self.protocol._converter.structure(d, lsp.Diagnostic)
                                      for d in perf.diagnostics(a.uri, a.version)]
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=a.uri, diagnostics=diags,
                                                                            version=a.version))
        self._state(a.uri).published = a.version
        perf.published(a.uri, a.version, lambda: self.publish(a))
        log.debug("published %d diagnostics for %s v%s (analysis %.1f ms, %d reused)", len(diags), a.uri,
                  a.version, a.elapsed_ms, a.reused)

    # -- event loop stalls ----------------------------------------------------------------------
    async def _loop_monitor(self, tick: float = 0.05):
        """How late this loop's timers fire (``serverInfo``'s ``loop``): a stall with the loop thread's CPU time
        mostly spent is work done on the loop; one without is the process waiting for a CPU."""
        while True:
            t0, c0 = time.monotonic(), time.thread_time()
            await asyncio.sleep(tick)
            late = (time.monotonic() - t0 - tick) * 1e3
            if late > 20.0:
                self.loop_stalls.append((round(late, 1), round((time.thread_time() - c0) * 1e3, 1)))

    # -- garbage collection when idle ------------------------------------------------
    async def _idle_gc(self):
        """Automatic GC is off (a full collection mid-keystroke costs more than an analysis); collect when idle."""
        while True:
            await asyncio.sleep(0.5)
            idle = time.monotonic() - self._last_activity
            count = gc.get_count()[0]
            if (idle > 1.0 and count > 1000) or count > 2_000_000:
                gc.collect()

    # -- commands --------------------------------------------------------------------
    async def execute_command(self, params: lsp.ExecuteCommandParams):
        self.touch()
        name = params.command
        args = list(params.arguments or [])
        token = getattr(params, "work_done_token", None)
        if name in CLIENT_COMMAND_ALIASES:
            uri = args[0] if args else None
            pos = args[1] if len(args) > 1 else None
            arg = {"uri": uri, "position": pos}
            if name in _SHOW_KIND:
                arg["kind"] = _SHOW_KIND[name]
            if len(args) > 2 and isinstance(args[2], dict):
                arg.update(args[2])
            args = [arg]
            name = CLIENT_COMMAND_ALIASES[name]
        if name not in SERVER_COMMANDS:
            from pygls.exceptions import JsonRpcInvalidParams
            raise JsonRpcInvalidParams(f"unknown command {params.command!r}")
        return await self.commands.run(name, args, token)




def _safe(default=None):
    """Wrap a handler: an internal error is logged and the client gets ``default``."""
    def deco(fn):
        if asyncio.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def wrapper(ls, *args, **kwargs):
                ls.touch()
                try:
                    return await fn(ls, *args, **kwargs)
                except (asyncio.CancelledError, JsonRpcException):
                    raise  # a cancelled request, or an error meant for the client
                except Exception:  # the server never dies
                    log.exception("%s failed", fn.__name__)
                    return default() if callable(default) else default
        else:
            @functools.wraps(fn)
            def wrapper(ls, *args, **kwargs):
                ls.touch()
                try:
                    return fn(ls, *args, **kwargs)
                except JsonRpcException:
                    raise
                except Exception:
                    log.exception("%s failed", fn.__name__)
                    return default() if callable(default) else default
        return wrapper
    return deco


def _client_flags(ls: NewtLanguageServer, params: lsp.InitializeParams):
    caps = params.capabilities
    td = caps.text_document
    ls.client_name = (params.client_info.name if params.client_info else "") or ""
    hover_formats = td.hover.content_format if td and td.hover else None
    ls.markdown = not hover_formats or lsp.MarkupKind.Markdown in hover_formats
    ls.pull_diagnostics = bool(td and td.diagnostic is not None)
    comp = td.completion if td else None
    ls.snippets = bool(comp and comp.completion_item and comp.completion_item.snippet_support)
    ls.progress_supported = bool(caps.window and caps.window.work_done_progress)
    ls.config_pull = bool(caps.workspace and caps.workspace.configuration)
    ws = caps.workspace
    ls.refresh_inlay = bool(ws and ws.inlay_hint and ws.inlay_hint.refresh_support)
    ls.refresh_code_lens = bool(ws and ws.code_lens and ws.code_lens.refresh_support)
    ls.refresh_diagnostics = bool(ws and ws.diagnostics and ws.diagnostics.refresh_support)
    name = ls.client_name.lower()
    vscode = "visual studio code" in name or "vscode" in name or "code-server" in name or "vscodium" in name \
        or name.startswith("code")
    ls.vscode_client = vscode


def create_server() -> NewtLanguageServer:
    from .commands import Commands

    ls = NewtLanguageServer()
    ls.commands = Commands(ls)
    if engines_supported():
        ls.engine = EngineHost(ls.documents, encoding=lambda: ls.encoding, config=ls.engine_config)
    import sys
    # the analysis thread is pure Python: hand the GIL over more often so the event loop and the query thread
    # (hovers, completions) wait at most ~2 ms for it instead of 5
    sys.setswitchinterval(0.002)

    @ls.feature(lsp.INITIALIZE)
    @_safe()
    def initialize(ls: NewtLanguageServer, params: lsp.InitializeParams):
        _client_flags(ls, params)
        opts = _convert_args(params.initialization_options) if params.initialization_options else None
        if isinstance(opts, dict):
            ls.settings.update(opts)
        _apply_log_level(ls.settings)
        log.info("newt-lsp %s for %s (pull diagnostics: %s, trusted: %s)", __version__, ls.client_name or "client",
                 ls.pull_diagnostics, ls.settings.trusted)

    @ls.feature(lsp.INITIALIZED)
    @_safe()
    async def initialized(ls: NewtLanguageServer, params: lsp.InitializedParams):
        ls.initialized_at = time.monotonic()
        if ls.engine is not None:
            try:
                await ls.engine.start()
            except Exception:  # no engines here: analyze on the thread instead
                log.exception("cannot start the analysis engine; analyzing in the server process")
                ls.engine = None
        gc.disable()
        if ls._gc_task is None:
            ls._gc_task = asyncio.ensure_future(ls._idle_gc())
            ls._monitor_task = asyncio.ensure_future(ls._loop_monitor())
        try:
            await ls.pull_folder_settings()
        except Exception:  # a client that cannot answer keeps the global settings
            log.debug("workspace/configuration per folder failed", exc_info=True)
        await ls.commands.detect_gpu()
        ls.commands.send_status()
        ls.commands.perf.prestart()

    @ls.feature(lsp.SHUTDOWN)
    @_safe()
    async def shutdown(ls: NewtLanguageServer, params):
        await ls.commands.shutdown()
        if ls.engine is not None:
            await ls.engine.stop()
        gc.enable()

    # -- documents -------------------------------------------------------------------
    @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    @_safe()
    def did_open(ls: NewtLanguageServer, params: lsp.DidOpenTextDocumentParams):
        td = params.text_document
        ls.open_document(td.uri, td.text, td.version)
        ls._state(td.uri)
        ls.schedule(params.text_document.uri, 0)
        ls.commands.perf.opened(td.uri, td.version)  # compiles alongside the first analysis, not after it

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    @_safe()
    def did_change(ls: NewtLanguageServer, params: lsp.DidChangeTextDocumentParams):
        uri = params.text_document.uri
        typing = ls.settings_for(uri).diagnostics_on == "type"
        if ls.engine is not None:
            (ls.engine.eager.add if typing and EAGER else ls.engine.eager.discard)(uri)
        ls.change_document(uri, params.text_document.version, params.content_changes)
        if typing:
            ls.schedule(uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))
    @_safe()
    def did_save(ls: NewtLanguageServer, params: lsp.DidSaveTextDocumentParams):
        ls.schedule(params.text_document.uri, 0)
        if ls.pull_diagnostics and ls.settings_for(params.text_document.uri).diagnostics_on == "save" \
                and ls.refresh_diagnostics:
            ls.workspace_diagnostic_refresh(None)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    @_safe()
    def did_close(ls: NewtLanguageServer, params: lsp.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        ls.close_document(uri)
        st = ls.docs.pop(uri, None)
        if st is not None and st.timer is not None:
            st.timer.cancel()
        if not ls.pull_diagnostics:
            ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        ls.commands.forget(uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DIAGNOSTIC,
                lsp.DiagnosticOptions(identifier="newt", inter_file_dependencies=False, workspace_diagnostics=False))
    @_safe(lambda: lsp.RelatedFullDocumentDiagnosticReport(items=[]))
    async def pull_diagnostics(ls: NewtLanguageServer, params: lsp.DocumentDiagnosticParams):
        uri = params.text_document.uri
        st = ls._state(uri)
        if ls.engine is not None:
            if ls.settings_for(uri).diagnostics_on == "save" and st.saved_diags is not None:
                msg = st.saved_diags
            else:
                msg = await ls.engine.fresh(uri, need_ready=False)  # the diagnostics are known before it serves
            if msg is None:
                return lsp.RelatedFullDocumentDiagnosticReport(items=[])
            # unique per analysis and per server process: a client keeps result ids across a server restart,
            # and an "unchanged" answer to a reopened document's old id would leave it with no diagnostics
            perf = ls.commands.perf
            perf.published(uri, msg.get("version"), None)
            result_id = f"{ls.engine.token}:{msg.get('job')}:{perf.generation(uri)}"
            if params.previous_result_id == result_id:
                return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
            conv = ls.protocol._converter
            return lsp.RelatedFullDocumentDiagnosticReport(
                items=[conv.structure(d, lsp.Diagnostic) for d in (msg.get("diagnostics") or [])
                       + perf.pulled(uri, msg.get("version"))], result_id=result_id)
        if ls.settings_for(uri).diagnostics_on == "save" and st.saved_analysis is not None:
            a = st.saved_analysis
        else:
            a = await ls.analysis_for(uri)
        perf = ls.commands.perf
        perf.published(uri, a.version, None)
        result_id = f"{a.version}:{hash(a.text) & 0xFFFFFFFF:x}:{perf.generation(uri)}"
        if params.previous_result_id == result_id:
            return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
        return lsp.RelatedFullDocumentDiagnosticReport(items=lsp_diagnostics(a) + [
            ls.protocol._converter.structure(d, lsp.Diagnostic) for d in perf.pulled(uri, a.version)],
            result_id=result_id)

    # -- language features -------------------------------------------------------------
    @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
    @_safe()
    async def hover(ls: NewtLanguageServer, params: lsp.HoverParams):
        uri = params.text_document.uri
        if ls.engine is not None:
            answer = await ls.engine_answer(
                "hover", uri, {"line": params.position.line, "character": params.position.character,
                               "target": ls.commands.target_for(uri)})
            return ls.with_generated_newt(uri, params.position,
                                          ls.commands.perf.augment_hover(uri, params.position, answer, ls.markdown))
        a, pos, shift = await ls.analysis_near(uri, params.position)
        if a is None:
            return None
        target = ls.commands.target_for(uri)
        h = await ls.run_sync(hover_fn, a, pos, ls.markdown, target, ls.vscode_client)
        if h is not None and shift and h.range is not None:
            h.range = lsp.Range(lsp.Position(h.range.start.line + shift, h.range.start.character),
                                lsp.Position(h.range.end.line + shift, h.range.end.character))
        return ls.with_generated_newt(uri, params.position,
                                      ls.commands.perf.augment_hover(uri, params.position, h, ls.markdown))

    @ls.feature(lsp.TEXT_DOCUMENT_INLAY_HINT, lsp.InlayHintOptions(resolve_provider=False))
    @_safe(list)
    async def inlay_hint(ls: NewtLanguageServer, params: lsp.InlayHintParams):
        s = ls.settings_for(params.text_document.uri)
        uri = params.text_document.uri
        rng = ls.protocol._converter.unstructure(params.range) if params.range is not None else None
        perf = ls.commands.perf.inlay_hints(uri, ls.doc_text(uri)[1], rng)  # figures at each config's line
        if not (s.inlay_shapes or s.inlay_dtypes):
            return perf
        if ls.engine is not None:
            return (await ls.engine_answer("inlayHint", uri, {
                "range": rng, "shapes": s.inlay_shapes, "dtypes": s.inlay_dtypes}) or []) + perf
        a = await ls.analysis_for(uri)
        return await ls.run_sync(features.inlay_hints, a, params.range, s.inlay_shapes, s.inlay_dtypes) + \
            [ls.protocol._converter.structure(h, lsp.InlayHint) for h in perf]

    @ls.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["."],
                                                                     resolve_provider=False))
    @_safe()
    async def completion(ls: NewtLanguageServer, params: lsp.CompletionParams):
        uri = params.text_document.uri
        if ls.engine is not None:
            return await ls.engine_answer("completion", uri, {"line": params.position.line,
                                                              "character": params.position.character})
        text, _ = ls.doc_text(uri)
        a = await ls.analysis_for(uri, allow_stale=True)  # the last good analysis while a new one runs
        if a is None:
            return None
        pos = ls.completion_position(a, uri, params.position) if a.text != text else params.position
        from .positions import LineIndex
        line = LineIndex(text, ls.encoding).line(params.position.line) if a.text != text else a.index.line(pos.line)
        got = await ls.run_sync(features.completion, a, pos, line, ls.markdown, ls.snippets)
        if got is None and a.text != text:
            # the earlier analysis cannot place the cursor (e.g. it was of a half-typed, unparsable text):
            # answer from the analysis of the current text instead of answering nothing
            fresh = await ls.analysis_for(uri)
            if fresh is not None and fresh is not a:
                fpos = ls.completion_position(fresh, uri, params.position) if fresh.text != text else params.position
                got = await ls.run_sync(features.completion, fresh, fpos, line, ls.markdown, ls.snippets)
        return got

    @ls.feature(lsp.TEXT_DOCUMENT_SIGNATURE_HELP,
                lsp.SignatureHelpOptions(trigger_characters=["(", ","], retrigger_characters=[","]))
    @_safe()
    async def signature_help(ls: NewtLanguageServer, params: lsp.SignatureHelpParams):
        uri = params.text_document.uri
        if ls.engine is not None:
            return await ls.engine_answer("signatureHelp", uri, {"line": params.position.line,
                                                                 "character": params.position.character})
        text, _ = ls.doc_text(uri)
        a = await ls.analysis_for(uri, allow_stale=True)  # the last good analysis while a new one runs
        if a is None:
            return None
        got = await ls.run_sync(features.signature_help, a, text, params.position, ls.markdown)
        if got is None and a.text != text:  # as for completion: fall back to the current text's analysis
            fresh = await ls.analysis_for(uri)
            if fresh is not None and fresh is not a:
                got = await ls.run_sync(features.signature_help, fresh, text, params.position, ls.markdown)
        return got

    @ls.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    @_safe(list)
    async def document_symbol(ls: NewtLanguageServer, params: lsp.DocumentSymbolParams):
        if ls.engine is not None:
            return await ls.engine_answer("documentSymbol", params.text_document.uri, {}) or []
        a = await ls.analysis_for(params.text_document.uri)
        return features.document_symbols(a) if a is not None else []

    @ls.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))
    @_safe(list)
    async def code_lens(ls: NewtLanguageServer, params: lsp.CodeLensParams):
        if ls.engine is not None:
            return await ls.engine_answer("codeLens", params.text_document.uri, {}) or []
        a = await ls.analysis_for(params.text_document.uri)
        return await ls.run_sync(features.code_lenses, a)

    @ls.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix], resolve_provider=False))
    @_safe(list)
    async def code_action(ls: NewtLanguageServer, params: lsp.CodeActionParams):
        only = [str(getattr(k, "value", k)) for k in (params.context.only or [])] if params.context else None
        if ls.engine is not None:
            return await ls.engine_answer("codeAction", params.text_document.uri, {
                "range": ls.protocol._converter.unstructure(params.range), "only": only}) or []
        a = await ls.analysis_for(params.text_document.uri)
        return await ls.run_sync(features.code_actions, a, params.range, only)

    # -- settings ------------------------------------------------------------------------
    @ls.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    @_safe()
    async def did_change_configuration(ls: NewtLanguageServer, params: lsp.DidChangeConfigurationParams):
        settings = _convert_args(params.settings)
        if isinstance(settings, dict) and settings:
            changed = ls.settings.update(settings)
        elif ls.config_pull:
            got = await ls.workspace_configuration_async(lsp.ConfigurationParams(
                items=[lsp.ConfigurationItem(section="newt")]))
            changed = ls.settings.update(_convert_args(got[0])) if got and isinstance(
                _convert_args(got[0]), dict) else []
        else:
            changed = []
        if ls.config_pull:
            changed = sorted(set(changed) | set(await ls.pull_folder_settings()))
        await ls.commands.settings_changed(changed)

    # -- custom requests ---------------------------------------------------------------------
    @ls.feature(VIRTUAL_DOCUMENT)
    @_safe()
    async def virtual_document(ls: NewtLanguageServer, params):
        p = _convert_args(params)
        uri = p.get("uri") if isinstance(p, dict) else None
        return await ls.commands.virtual_document(uri)

    @ls.feature(SOURCE_MAP)
    @_safe()
    async def source_map(ls: NewtLanguageServer, params):
        p = _convert_args(params)
        return await ls.commands.source_map(p.get("uri") if isinstance(p, dict) else None)

    @ls.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    @_safe()
    async def definition(ls: NewtLanguageServer, params: lsp.DefinitionParams):
        """In a generated view (a ``newt:`` document): the source line it comes from; nothing elsewhere."""
        return await ls.commands.definition(params.text_document.uri, params.position.line)

    @ls.feature(SERVER_INFO)
    @_safe()
    def server_info(ls: NewtLanguageServer, params):
        """What the server process holds (tests and the benchmark read it; users can too)."""
        import sys
        return {
            "version": __version__, "pid": os.getpid(), "python": sys.executable,
            "torch_imported": "torch" in sys.modules,
            "cuda_imported": any(m == "cuda" or m.startswith(("cuda.", "cupy")) for m in sys.modules),
            "rss_mb": _rss_mb(), "peak_rss_mb": _rss_mb("VmHWM:"), "documents": len(ls.docs),
            # what the server holds of each open document (clients can check that incremental sync agrees)
            "texts": [{"uri": uri, "version": v, "sha1": hashlib.sha1(t.encode("utf-8", "surrogatepass")).hexdigest(),
                       "length": len(t)} for uri, (t, v) in ls.texts.items()],
            "analyses": {"count": len(ls.analysis_times), "ms": list(ls.analysis_times)[-500:]} if ls.engine is None
            else {"count": len(ls.engine.analysis_times), "ms": list(ls.engine.analysis_times)[-500:]},
            "engine": "fork" if ls.engine is not None else "thread",
            "memory": ls.engine.memory() if ls.engine is not None else {},
            "loop_stalls": list(ls.loop_stalls),
            "kernel_cache": {"entries": len(ls.kernel_cache._entries), "hits": ls.kernel_cache.hits,
                             "misses": ls.kernel_cache.misses},
            "settings": {"trusted": ls.settings.trusted, "target": ls.settings.target,
                         "diagnosticsOn": ls.settings.diagnostics_on, "debounceMs": ls.settings.debounce_ms},
            "pull_diagnostics": ls.pull_diagnostics,
            "workers": {name: (w.proc.pid if w is not None and w.alive else None, w.starts if w is not None else 0)
                        for name, w in (("compile", ls.commands.compile_worker), ("run", ls.commands.run_worker))},
            "perf": ls.commands.perf.info(),
        }

    for name in SERVER_COMMANDS:
        ls.command(name)(_command_stub(name))
    return ls


def _report_slow(uri: str, text: str, ms: float):
    """A very slow analysis is a front-end problem worth a reproducer: log it (and keep the text if asked)."""
    log.warning("analysis of %s took %.0f ms", uri, ms)
    d = os.environ.get("NEWT_LSP_DUMP_SLOW")
    if d:
        import hashlib
        os.makedirs(d, exist_ok=True)
        name = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        with open(os.path.join(d, f"slow_{int(ms)}ms_{name}.py"), "w", encoding="utf-8", newline="") as f:
            f.write(text)


def _rss_mb(field: str = "VmRSS:") -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    try:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    except Exception:
        return None


def _command_stub(name):
    # registered so the commands are advertised; NewtProtocol routes execution to Commands.run
    async def stub(ls: NewtLanguageServer, *args):
        return await ls.commands.run(name, list(args), None)
    stub.__name__ = name.replace(".", "_")
    return stub




_ = uri_to_path  # re-exported for tests
