"""The pygls wiring: LSP messages in, plain analysis functions, LSP messages out.

Everything the editor sees is computed by the plain functions of
``analysis``, ``hover``, ``features`` and ``commands``; this module keeps the
documents' state (debounced analysis, version checks), turns settings into
arguments and makes sure no handler can take the server down: an internal
error is logged and the request gets an empty answer.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from . import __version__, features
from .analysis import Analysis, KernelCache, analyze, lsp_diagnostics, uri_to_path
from .hover import hover as hover_fn
from .settings import Settings

__all__ = ["NewtLanguageServer", "create_server", "SERVER_COMMANDS", "CLIENT_COMMAND_ALIASES"]

log = logging.getLogger("newt-lsp")

SERVER_COMMANDS = ("newt.compile", "newt.verify", "newt.autotune", "newt.show")
#: the code lens commands of docs/lsp-protocol.md: accepted, not advertised (a VS Code client registers them)
CLIENT_COMMAND_ALIASES = {"newt.compileKernel": "newt.compile", "newt.verifyKernel": "newt.verify",
                          "newt.autotuneKernel": "newt.autotune", "newt.showCuda": "newt.show",
                          "newt.showPtx": "newt.show", "newt.showSass": "newt.show", "newt.showIr": "newt.show"}
_SHOW_KIND = {"newt.showCuda": "cuda", "newt.showPtx": "ptx", "newt.showSass": "sass", "newt.showIr": "ir"}

_TRACE_SYNC = os.environ.get("NEWT_LSP_TRACE_SYNC") == "1"
VIRTUAL_DOCUMENT = "newt/virtualDocument"
SERVER_INFO = "newt/serverInfo"
STATUS = "newt/status"


class NewtProtocol(LanguageServerProtocol):
    """Runs ``workspace/executeCommand`` as one coroutine, so ``$/cancelRequest`` cancels the command itself;
    advertises the code lens commands to clients other than VS Code (Neovim runs a lens only when the server
    lists its command; the VS Code extension registers them itself, so they must not be listed there)."""

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams):
        result = yield from super().lsp_initialize(params)
        try:
            if not self._server.vscode_client:
                caps = result.capabilities
                cmds = list(caps.execute_command_provider.commands) if caps.execute_command_provider else []
                cmds += [c for c in CLIENT_COMMAND_ALIASES if c not in cmds]
                caps.execute_command_provider = lsp.ExecuteCommandOptions(commands=cmds)
        except Exception:  # noqa: BLE001
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


class _Doc:
    __slots__ = ("uri", "analysis", "inflight", "timer", "published", "saved_analysis", "pull_version", "warm")

    def __init__(self, uri: str):
        self.uri = uri
        self.analysis: Analysis | None = None  # the latest finished analysis (of some version)
        self.inflight: dict = {}  # (version, text hash) -> asyncio.Future[Analysis]
        self.timer: asyncio.Task | None = None
        self.published: int | None = None
        self.saved_analysis: Analysis | None = None
        self.pull_version = None
        self.warm: asyncio.Task | None = None


class NewtLanguageServer(LanguageServer):
    def __init__(self):
        super().__init__("newt-lsp", __version__, protocol_cls=NewtProtocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.docs: dict[str, _Doc] = {}
        self.texts: dict[str, tuple] = {}  # uri -> (text, version) of open documents
        import collections
        self.analysis_times: collections.deque = collections.deque(maxlen=2000)  # ms of each analysis
        self.kernel_cache = KernelCache(max_entries=4096)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="newt-analysis")
        self.client_name = ""
        self.markdown = True
        self.pull_diagnostics = False
        self.snippets = False
        self.vscode_client = False
        self.progress_supported = False
        self.config_pull = False
        self.refresh_inlay = False
        self.refresh_diagnostics = False
        self.gpu = None  # {"name", "arch"} after detection
        self.initialized_at = None
        self._last_activity = time.monotonic()
        self._gc_task = None
        self.commands = None  # set in create_server (commands.Commands)

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
        """Run ``fn`` on the analysis thread (everything that touches the front end runs there, one at a time)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def doc_text(self, uri: str) -> tuple[str, int | None]:
        """The document's current text and version (open documents), else the file on disk (version None)."""
        got = self.texts.get(uri)
        if got is not None:
            return got
        path = uri_to_path(uri)
        try:
            with open(path, encoding="utf-8", newline="") as f:
                return f.read(), None
        except (OSError, UnicodeDecodeError, ValueError):
            return "", None

    def open_document(self, uri: str, text: str, version: int | None):
        self.texts[uri] = (text, version)

    def change_document(self, uri: str, version: int | None, changes):
        """Apply LSP content changes with LSP's own line rules (\\n, \\r\\n, \\r only) and position encoding."""
        from .positions import LineIndex
        text, _ = self.texts.get(uri, ("", None))
        for ch in changes:
            rng = getattr(ch, "range", None)
            if rng is None:
                text = ch.text
                continue
            idx = LineIndex(text, self.encoding)
            start, end = idx.offset(rng.start), idx.offset(rng.end)
            if _TRACE_SYNC:
                log.warning("sync %s v%s: %s -> chars %d..%d of %d (%s), %r", uri, version, rng, start, end,
                            len(text), self.encoding, ch.text)
            if end < start:
                start, end = end, start
            text = text[:start] + ch.text + text[end:]
        self.texts[uri] = (text, version)

    def close_document(self, uri: str):
        self.texts.pop(uri, None)

    def _state(self, uri: str) -> _Doc:
        st = self.docs.get(uri)
        if st is None:
            st = self.docs[uri] = _Doc(uri)
        return st

    async def analysis_for(self, uri: str, allow_stale: bool = False) -> Analysis | None:
        """The analysis of the document's current text (computed now if needed)."""
        st = self._state(uri)
        text, version = self.doc_text(uri)
        a = st.analysis
        if a is not None and a.version == version and a.text == text:
            return a
        if allow_stale and a is not None and st.inflight:
            return a
        key = (version, hash(text))
        fut = st.inflight.get(key)
        if fut is None:
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            st.inflight[key] = fut
            try:
                result = await self.run_sync(analyze, text, uri, version, self.encoding, self.kernel_cache)
                self.analysis_times.append(result.elapsed_ms)
                if result.elapsed_ms > 2000:
                    _report_slow(uri, text, result.elapsed_ms)
                fut.set_result(result)
            except BaseException as e:  # noqa: BLE001
                fut.set_exception(e)
                fut.exception()  # mark retrieved
                st.inflight.pop(key, None)
                raise
            st.inflight.pop(key, None)
            cur = st.analysis
            if cur is None or cur.version is None or version is None or version >= (cur.version or 0):
                st.analysis = result
            return result
        return await asyncio.shield(fut)

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
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            a = await self.analysis_for(uri)
            if a is None or uri not in self.docs:
                return
            _text, version = self.doc_text(uri)
            if version is not None and a.version != version:
                return  # stale: a newer edit is queued and will publish
            if self.settings.diagnostics_on == "save":
                self._state(uri).saved_analysis = a
            self.publish(a)
            st = self._state(uri)
            st.warm = asyncio.ensure_future(self._warm(uri, a))
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001
            log.exception("analysis of %s failed", uri)

    async def _warm(self, uri: str, a: Analysis, idle: float = 0.3):
        """When the user pauses, prepare what hovers need (layouts from the backend), one kernel at a time."""
        from .hover import warm_layouts
        try:
            await asyncio.sleep(idle)
            target = self.commands.target()
            for ka in list(a.kernels):
                if uri not in self.docs or self.doc_text(uri)[1] != a.version:
                    return
                await self.run_sync(warm_layouts, a, target, [ka])
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001
            log.debug("warming layouts failed", exc_info=True)

    def publish(self, a: Analysis):
        if self.pull_diagnostics:
            return
        diags = lsp_diagnostics(a)
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=a.uri, diagnostics=diags,
                                                                            version=a.version))
        self._state(a.uri).published = a.version
        log.debug("published %d diagnostics for %s v%s (analysis %.1f ms, %d reused)", len(diags), a.uri,
                  a.version, a.elapsed_ms, a.reused)

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


def _convert_args(obj):
    """pygls hands custom params over as namedtuples: back to plain dicts."""
    if hasattr(obj, "_asdict"):
        return {k: _convert_args(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {k: _convert_args(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_convert_args(v) for v in obj]
    return obj


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
                except Exception:  # noqa: BLE001 - the server never dies
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
                except Exception:  # noqa: BLE001
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
    ls.refresh_diagnostics = bool(ws and ws.diagnostics and ws.diagnostics.refresh_support)
    name = ls.client_name.lower()
    vscode = "visual studio code" in name or "vscode" in name or "code-server" in name or "vscodium" in name \
        or name.startswith("code")
    ls.vscode_client = vscode


def create_server() -> NewtLanguageServer:
    from .commands import Commands

    ls = NewtLanguageServer()
    ls.commands = Commands(ls)

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
        gc.disable()
        if ls._gc_task is None:
            ls._gc_task = asyncio.ensure_future(ls._idle_gc())
        await ls.commands.detect_gpu()
        ls.commands.send_status()

    @ls.feature(lsp.SHUTDOWN)
    @_safe()
    async def shutdown(ls: NewtLanguageServer, params):
        await ls.commands.shutdown()
        gc.enable()

    # -- documents -------------------------------------------------------------------
    @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    @_safe()
    def did_open(ls: NewtLanguageServer, params: lsp.DidOpenTextDocumentParams):
        td = params.text_document
        ls.open_document(td.uri, td.text, td.version)
        ls._state(td.uri)
        ls.schedule(params.text_document.uri, 0)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    @_safe()
    def did_change(ls: NewtLanguageServer, params: lsp.DidChangeTextDocumentParams):
        ls.change_document(params.text_document.uri, params.text_document.version, params.content_changes)
        if ls.settings.diagnostics_on == "type":
            ls.schedule(params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))
    @_safe()
    def did_save(ls: NewtLanguageServer, params: lsp.DidSaveTextDocumentParams):
        ls.schedule(params.text_document.uri, 0)
        if ls.pull_diagnostics and ls.settings.diagnostics_on == "save" and ls.refresh_diagnostics:
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
        if ls.settings.diagnostics_on == "save" and st.saved_analysis is not None:
            a = st.saved_analysis
        else:
            a = await ls.analysis_for(uri)
        result_id = f"{a.version}:{hash(a.text) & 0xFFFFFFFF:x}"
        if params.previous_result_id == result_id:
            return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
        return lsp.RelatedFullDocumentDiagnosticReport(items=lsp_diagnostics(a), result_id=result_id)

    # -- language features -------------------------------------------------------------
    @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
    @_safe()
    async def hover(ls: NewtLanguageServer, params: lsp.HoverParams):
        a = await ls.analysis_for(params.text_document.uri)
        target = ls.commands.target()
        return await ls.run_sync(hover_fn, a, params.position, ls.markdown, target)

    @ls.feature(lsp.TEXT_DOCUMENT_INLAY_HINT, lsp.InlayHintOptions(resolve_provider=False))
    @_safe(list)
    async def inlay_hint(ls: NewtLanguageServer, params: lsp.InlayHintParams):
        s = ls.settings
        if not (s.inlay_shapes or s.inlay_dtypes):
            return []
        a = await ls.analysis_for(params.text_document.uri)
        return await ls.run_sync(features.inlay_hints, a, params.range, s.inlay_shapes, s.inlay_dtypes)

    @ls.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["."],
                                                                     resolve_provider=False))
    @_safe()
    async def completion(ls: NewtLanguageServer, params: lsp.CompletionParams):
        uri = params.text_document.uri
        text, _ = ls.doc_text(uri)
        a = await ls.analysis_for(uri)
        from .positions import LineIndex
        idx = a.index if a.text == text else LineIndex(text, ls.encoding)
        line = idx.line(params.position.line)
        return await ls.run_sync(features.completion, a, params.position, line, ls.markdown, ls.snippets)

    @ls.feature(lsp.TEXT_DOCUMENT_SIGNATURE_HELP,
                lsp.SignatureHelpOptions(trigger_characters=["(", ","], retrigger_characters=[","]))
    @_safe()
    async def signature_help(ls: NewtLanguageServer, params: lsp.SignatureHelpParams):
        uri = params.text_document.uri
        text, _ = ls.doc_text(uri)
        a = await ls.analysis_for(uri)
        return await ls.run_sync(features.signature_help, a, text, params.position, ls.markdown)

    @ls.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))
    @_safe(list)
    async def code_lens(ls: NewtLanguageServer, params: lsp.CodeLensParams):
        a = await ls.analysis_for(params.text_document.uri)
        return await ls.run_sync(features.code_lenses, a)

    @ls.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix], resolve_provider=False))
    @_safe(list)
    async def code_action(ls: NewtLanguageServer, params: lsp.CodeActionParams):
        a = await ls.analysis_for(params.text_document.uri)
        only = [str(getattr(k, "value", k)) for k in (params.context.only or [])] if params.context else None
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
        await ls.commands.settings_changed(changed)

    # -- custom requests ---------------------------------------------------------------------
    @ls.feature(VIRTUAL_DOCUMENT)
    @_safe()
    async def virtual_document(ls: NewtLanguageServer, params):
        p = _convert_args(params)
        uri = p.get("uri") if isinstance(p, dict) else None
        return await ls.commands.virtual_document(uri)

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
            "analyses": {"count": len(ls.analysis_times), "ms": list(ls.analysis_times)[-500:]},
            "kernel_cache": {"entries": len(ls.kernel_cache._entries), "hits": ls.kernel_cache.hits,
                             "misses": ls.kernel_cache.misses},
            "settings": {"trusted": ls.settings.trusted, "target": ls.settings.target,
                         "diagnosticsOn": ls.settings.diagnostics_on, "debounceMs": ls.settings.debounce_ms},
            "pull_diagnostics": ls.pull_diagnostics,
            "workers": {name: (w.proc.pid if w is not None and w.alive else None, w.starts if w is not None else 0)
                        for name, w in (("compile", ls.commands.compile_worker), ("run", ls.commands.run_worker))},
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
    except Exception:  # noqa: BLE001
        return None


def _command_stub(name):
    # registered so the commands are advertised; NewtProtocol routes execution to Commands.run
    async def stub(ls: NewtLanguageServer, *args):
        return await ls.commands.run(name, list(args), None)
    stub.__name__ = name.replace(".", "_")
    return stub


def _apply_log_level(settings: Settings):
    level = settings.python_level()
    log.setLevel(level)
    # pygls logs every message body at INFO: keep it quiet unless debugging
    logging.getLogger("pygls").setLevel(logging.DEBUG if level <= logging.DEBUG else logging.WARNING)


def data_path(*parts) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), *parts)


_ = uri_to_path  # re-exported for tests
