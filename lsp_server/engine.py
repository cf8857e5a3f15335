"""The analysis engine: a process that holds the analyses of the open documents and answers requests from them.

The language server (the protocol process) starts one engine, ``python -m lsp_server.engine SOCKET``, with the
workers' safe start (a neutral working directory, ``PYTHONSAFEPATH``), and talks to it over a Unix socket in
frames of a 4-byte length and a JSON body.  The server forwards every document change; it asks the engine
for hovers, completions and the other answers that read an analysis.

Work that costs CPU never runs in the engine that answers.  To analyze a document the engine *forks*: the
fork analyzes (the incremental cache and every other document's analysis come with it, copy-on-write),
sends the diagnostics, collects its garbage and then says it is ready; the server routes requests to it from
then on and tells its parent to exit.  Until then the parent keeps answering from the last finished analysis,
mapping positions through the edits since.  A fork that is no longer wanted (its version was typed over and
nobody waits for it) is simply killed: superseded work stops at once and costs the answering engine nothing.
Hover layouts (the backend's code generation) are warmed the same way, in a fork, while the user pauses.
A fork's job runs in a thread at the background priority (``lsp_server/priority.py``): on a busy machine the
answering engine and the protocol process get the CPU first; the fork's main thread, which answers once it
serves, keeps the engine's priority.

The engine never imports the user's file, torch or CUDA: it runs the front end on text, like the server did.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import socket
import struct
import sys
import time

__all__ = ["main", "send_frame", "read_frame"]

log = logging.getLogger("newt-lsp.engine")

_HEADER = struct.Struct(">I")
#: a document changed this recently is being typed in: hovers show only layouts that were warmed already
TYPING_S = 1.0
#: an analysis fork collects garbage before it serves when the heap grew this much since the last collection
GC_GROWTH_MB = float(os.environ.get("NEWT_LSP_GC_GROWTH_MB", "48"))


def send_frame(sock: socket.socket, msg: dict):
    data = json.dumps(msg, separators=(",", ":")).encode("utf-8")
    sock.sendall(_HEADER.pack(len(data)) + data)


def read_frame(reader) -> dict | None:
    head = reader.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (n,) = _HEADER.unpack(head)
    body = reader.read(n)
    if len(body) < n:
        return None
    return json.loads(body)


def _rss_mb() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


class Engine:
    """One engine process: the documents, their last finished analyses, the incremental cache."""

    def __init__(self, path: str):
        from .analysis import KernelCache
        from .documents import Documents

        self.path = path
        self.docs = Documents()
        self.analyses: dict = {}  # uri -> Analysis (the last finished one; of some version)
        self.cache = KernelCache(max_entries=4096)
        self.cfg = {"markdown": True, "snippets": False, "vscode": False}
        self.changed_at: dict = {}  # uri -> when its last change arrived
        self.sock: socket.socket | None = None
        self.reader = None
        self.job: int | None = None  # the job this engine was forked for (None: the first engine)
        from pygls.protocol import default_converter
        self.conv = default_converter()

    # -- the connection ------------------------------------------------------------------------------
    def connect(self, job: int | None = None, cmd: int | None = None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.path)
        self.sock, self.reader, self.job = s, s.makefile("rb"), job
        self.send({"op": "hello", "pid": os.getpid(), "job": job, **({"cmd": cmd} if cmd is not None else {})})

    def _reconnect(self, job: int | None = None, cmd: int | None = None) -> bool:
        """A fork's own connection; False when the server has shut down (its socket is gone) meanwhile."""
        try:
            self.connect(job=job, cmd=cmd)
        except (FileNotFoundError, ConnectionRefusedError):
            return False
        return True

    def send(self, msg: dict):
        send_frame(self.sock, msg)

    def loop(self):
        while True:
            msg = read_frame(self.reader)
            if msg is None or msg.get("op") == "exit":
                os._exit(0)  # the server went away or a newer engine took over: nothing to clean up
            try:
                self.handle(msg)
            except Exception as e:  # the engine answers every query
                log.exception("engine: %s failed", msg.get("op"))
                if msg.get("op") == "query":
                    self.send({"op": "reply", "id": msg.get("id"), "error": f"{type(e).__name__}: {e}"})

    def handle(self, msg: dict):
        op = msg.get("op")
        if op == "change":
            self.docs.change(msg["uri"], msg.get("version"), msg.get("changes") or [])
            self.changed_at[msg["uri"]] = time.monotonic()
        elif op == "query":
            t = time.perf_counter()
            t_in = time.monotonic()  # the clock the server's is (CLOCK_MONOTONIC): how long the query waited
            reply = self.query(msg)
            reply["ms"] = (time.perf_counter() - t) * 1e3
            if isinstance(msg.get("t"), float):
                reply["in_ms"] = (t_in - msg["t"]) * 1e3
            reply["t_out"] = time.monotonic()
            self.send(reply)
        elif op == "open":
            self.docs.open(msg["uri"], msg.get("text", ""), msg.get("version"))
            self.analyses.pop(msg["uri"], None)
        elif op == "close":
            self.docs.close(msg["uri"])
            self.analyses.pop(msg["uri"], None)
        elif op == "config":
            self.cfg.update({k: v for k, v in msg.items() if k != "op"})
            if "encoding" in msg:
                self.docs.encoding = msg["encoding"]
        elif op == "job":
            self.fork_job(msg)
        elif op == "command":
            self.fork_command(msg)
        elif op == "gc":
            gc.collect()

    # -- jobs: analysis and warming, each in a fork that then takes over ----------------------------------
    def fork_job(self, msg: dict):
        try:
            pid = os.fork()
        except OSError as e:
            self.send({"op": "job_failed", "job": msg.get("job"), "error": str(e)})
            return
        if pid:
            return  # the parent keeps answering
        try:
            self.sock.close()  # the parent's connection stays the parent's
            if not self._reconnect(job=msg.get("job")):
                os._exit(0)
            # the work runs at the background priority, in a thread of its own: this (main) thread answers once
            # the job is done and forks the next one, at the engine's own priority (lsp_server/priority.py)
            if msg.get("kind") == "warm":
                self.warm(msg)
            else:
                self.analyze(msg)
        except BaseException:
            log.exception("engine job %s failed", msg.get("job"))
            os._exit(1)

    # -- commands (Compile, Show, Verify, Autotune, the generated documents): in a fork that answers and exits ------
    def fork_command(self, msg: dict):
        try:
            pid = os.fork()
        except OSError as e:
            self.send({"op": "reply", "id": msg.get("id"), "error": f"cannot fork: {e}"})
            return
        if pid:
            return
        try:
            self.sock.close()
            if not self._reconnect(cmd=msg.get("id")):
                os._exit(0)
            from .priority import lower_current_thread
            lower_current_thread()  # this fork only answers the command, then exits
            try:
                reply = {"op": "reply", "id": msg.get("id"), "result": self.command(msg)}
            except Exception as e:  # the command gets an error, not silence
                log.exception("engine command failed")
                reply = {"op": "reply", "id": msg.get("id"), "error": f"{type(e).__name__}: {e}"}
            self.send(reply)
        except BaseException:
            log.exception("engine command %s failed", msg.get("id"))
        finally:
            os._exit(0)

    def command(self, msg: dict) -> dict:
        """What a command needs of the analysis of ``msg["text"]``: the kernel at ``position`` (or ``kernel``), its
        concrete specialization (``want`` "concrete"), the text of a generated document (``want`` "ir"/"cuda")."""
        from .commandinfo import command_info
        uri, text = msg["uri"], msg.get("text")
        a = self.analyses.get(uri)
        if a is None or a.text != text:
            from .analysis import analyze
            a = analyze(text, uri, msg.get("version"), self.docs.encoding, self.cache)
        return command_info(a, msg)

    def analyze(self, msg: dict):
        """Analyze (at the background priority), send the diagnostics, collect garbage (background), say ready.
        The messages go from this thread: "ready" only once the background thread is done, so the engine that
        then answers never waits for a thread that the machine's load keeps from running."""
        from .analysis import lsp_diagnostics
        from .priority import run_in_background
        uri = msg["uri"]
        got = self.docs.get(uri)
        if got is None:
            self.send({"op": "job_failed", "job": self.job, "error": f"{uri} is not open"})
            os._exit(0)
        text, version = got
        a, diags = run_in_background(self._analyze_text, text, uri, version, lsp_diagnostics)
        self.analyses[uri] = a
        self.send({"op": "analyzed", "job": self.job, "uri": uri, "version": version, "length": len(text),
                   "diagnostics": diags, "elapsed_ms": a.elapsed_ms, "reused": a.reused,
                   "kernels": len(a.kernels)})
        # the analysis it replaced is cyclic garbage and the answering engine never collects: collect here when
        # the heap grew (a collection touches every page: 15-60 ms), and in every warm-up (when the user pauses)
        t = time.perf_counter()
        rss = _rss_mb() or 0.0
        collected = rss > GC_GROWTH_MB + float(self.cfg.get("_gc_rss", 0.0))
        if collected:
            run_in_background(gc.collect)
            rss = _rss_mb() or 0.0
            self.cfg["_gc_rss"] = rss
        self.send({"op": "ready", "job": self.job, "rss_mb": rss,
                   "gc_ms": (time.perf_counter() - t) * 1e3 if collected else None})

    def _analyze_text(self, text: str, uri: str, version, lsp_diagnostics):
        from .analysis import analyze
        a = analyze(text, uri, version, self.docs.encoding, self.cache)
        return a, self.conv.unstructure(lsp_diagnostics(a))

    def warm(self, msg: dict):
        from .priority import run_in_background
        a = self.analyses.get(msg["uri"])
        finished, remaining = run_in_background(self._warm_layouts, a, msg) if a is not None else ([], False)
        self.send({"op": "ready", "job": self.job, "rss_mb": _rss_mb(), "warmed": finished,
                   "remaining": remaining})

    def _warm_layouts(self, a, msg: dict):
        from .hover import warm_layouts
        budget = float(msg.get("budget_s", 0.3))
        remaining = False
        t0 = time.perf_counter()
        todo = [ka for ka in a.kernels if ka.kind == "jit" and not ka.helper]
        done = set(msg.get("done") or ())
        todo = [ka for ka in todo if ka.name not in done]
        finished = []
        for ka in todo:
            if time.perf_counter() - t0 > budget:
                remaining = True
                break
            warm_layouts(a, msg.get("target") or "sm_90a", [ka])
            finished.append(ka.name)
        gc.collect()
        self.cfg["_gc_rss"] = _rss_mb() or 0.0
        return finished, remaining

    def _changed_here(self, a, uri: str, pos, mpos) -> bool:
        """Whether a fresher analysis could answer better at ``pos``: its line was edited since ``a``, or ``a``
        has no kernel there (an earlier version that did not parse)."""
        return self.docs.stale_position(a, uri, pos) is None or a.kernel_at(mpos.line + 1) is None

    def _range_in(self, a, uri: str, rng):
        """The lines of ``a``'s text that ``rng`` (of the current text) covers, widened to whole lines."""
        from lsprotocol import types as lsp
        lo = self.docs.map_through_edits(a, uri, rng.start.line)
        hi = self.docs.map_through_edits(a, uri, rng.end.line)
        if lo is None or hi is None:
            return None
        return lsp.Range(lsp.Position(lo[0], 0), lsp.Position(max(lo[0], hi[0]) + 1, 0))

    # -- queries -----------------------------------------------------------------------------------------
    def query(self, msg: dict) -> dict:
        """Answer from the last finished analysis; ``miss`` when only a fresher one can answer (unless
        ``final``: then answer from what there is)."""
        from lsprotocol import types as lsp

        from . import features
        from .hover import hover as hover_fn
        from .positions import LineIndex

        rid, method, uri = msg.get("id"), msg.get("method"), msg.get("uri")
        p = msg.get("params") or {}
        final = bool(msg.get("final"))
        if method == "info":
            return {"op": "reply", "id": rid, "result": {
                "pid": os.getpid(), "rss_mb": _rss_mb(), "analyses": len(self.analyses),
                "kernel_cache": {"entries": len(self.cache._entries), "hits": self.cache.hits,
                                 "misses": self.cache.misses}}}
        a = self.analyses.get(uri)
        cur = self.docs.get(uri)
        if a is None or cur is None:
            return {"op": "reply", "id": rid, "miss": not final and cur is not None, "result": None}
        text = cur[0]
        same = a.text == text
        md = bool(self.cfg.get("markdown", True))
        result = None
        miss = False
        if method in ("hover", "completion", "signatureHelp"):
            pos = lsp.Position(int(p["line"]), int(p["character"]))
            if method == "hover":
                mapped = self.docs.stale_position(a, uri, pos) or self.docs.same_token_position(a, uri, pos)
                if mapped is None and not final:
                    miss = True
                else:
                    mpos, shift = mapped if mapped is not None else (pos, 0)
                    # while edits stream in, layouts only if warmed already: generating one takes 50-500 ms
                    typing = time.monotonic() - self.changed_at.get(uri, 0.0) < TYPING_S
                    result = hover_fn(a, mpos, md, p.get("target") or "sm_90a", bool(self.cfg.get("vscode")),
                                      cached_layouts=typing)
                    if result is not None and shift and result.range is not None:
                        r = result.range
                        result.range = lsp.Range(lsp.Position(r.start.line + shift, r.start.character),
                                                 lsp.Position(r.end.line + shift, r.end.character))
            elif method == "completion":
                mpos = self.docs.completion_position(a, uri, pos) if not same else pos
                idx = LineIndex(text, self.docs.encoding) if not same else a.index
                line = idx.line(pos.line)
                result = features.completion(a, mpos, line, md, bool(self.cfg.get("snippets")))
                # None from the text alone (no ``x.`` before the cursor) needs no fresher analysis
                miss = result is None and not same and not final and _completes_here(idx, pos, line) \
                    and self._changed_here(a, uri, pos, mpos)
            else:
                result = features.signature_help(a, text, pos, md)
                # the callee is resolved through the module's imports and kernels, not the edited line: only an
                # earlier version that did not parse needs a fresher analysis
                miss = result is None and not same and not final and _in_call(text, self.docs.encoding, pos) \
                    and not a.kernels
        elif method in ("inlayHint", "codeLens"):
            # they only place things on lines: while a new analysis runs, the last one's are moved through the
            # edits since (those on edited lines left out) instead of waiting; the server asks the client to
            # refresh once the text's own analysis is out
            fwd = None if same else self.docs.forward_lines(a, uri)
            if not same and fwd is None and not final:
                miss = True
            elif method == "inlayHint":
                rng = self.conv.structure(p["range"], lsp.Range) if p.get("range") else None
                arng = rng if fwd is None or rng is None else self._range_in(a, uri, rng)
                result = features.inlay_hints(a, arng, bool(p.get("shapes", True)), bool(p.get("dtypes", True)))
                result = _with_deuteron_hints(result, a, arng, p)
                if fwd is not None:
                    result = _moved_hints(result, fwd, rng)
            else:
                result = features.code_lenses(a)
                if fwd is not None:
                    result = _moved_lenses(result, fwd)
        elif not same and not final:
            miss = True  # the rest needs the analysis of the text as it is
        elif method == "codeAction":
            rng = self.conv.structure(p["range"], lsp.Range)
            result = features.code_actions(a, rng, p.get("only"))
        elif method == "documentSymbol":
            result = features.document_symbols(a)
        else:
            return {"op": "reply", "id": rid, "error": f"unknown query {method!r}"}
        if miss:
            return {"op": "reply", "id": rid, "miss": True}
        return {"op": "reply", "id": rid, "result": self.conv.unstructure(result) if result is not None else None,
                "version": a.version, "same": same}


def _moved_hints(hints, fwd, rng):
    """Inlay hints of an earlier analysis on the lines they moved to (those on edited lines, or outside ``rng`` once
    moved, left out)."""
    from lsprotocol import types as lsp
    out = []
    for h in hints or ():
        line = fwd(h.position.line)
        if line is None or (rng is not None and not rng.start.line <= line <= rng.end.line):
            continue
        h.position = lsp.Position(line, h.position.character)
        out.append(h)
    return out


def _moved_lenses(lenses, fwd):
    """Code lenses of an earlier analysis on the lines their kernels moved to (a kernel whose line was edited is
    left out); the commands' positions move with them."""
    from lsprotocol import types as lsp
    out = []
    for lens in lenses or ():
        r = lens.range
        start, end = fwd(r.start.line), fwd(r.end.line)
        if start is None or end is None:
            continue
        lens.range = lsp.Range(lsp.Position(start, r.start.character), lsp.Position(end, r.end.character))
        cmd = lens.command
        if cmd is not None and cmd.arguments and len(cmd.arguments) > 1 and isinstance(cmd.arguments[1], dict):
            arg = dict(cmd.arguments[1])
            if isinstance(arg.get("line"), int):
                arg["line"] = fwd(arg["line"]) if fwd(arg["line"]) is not None else start
            cmd.arguments = [cmd.arguments[0], arg, *cmd.arguments[2:]]
        out.append(lens)
    return out


def _completes_here(idx, pos, line: str) -> bool:
    """Whether the text around ``pos`` asks for a completion (``x.`` before the cursor, not in a string)."""
    from .textutil import dotted_before, in_string_or_comment
    _line1, col1 = idx.char_col(pos)
    col0 = min(col1 - 1, len(line))
    if in_string_or_comment(line, col0):
        return False
    got = dotted_before(line, col0)
    return bool(got and got[0])


def _in_call(text: str, encoding: str, pos) -> bool:
    from .positions import LineIndex
    from .textutil import call_context
    return call_context(text, LineIndex(text, encoding).offset(pos)) is not None


_WARMUP = """import newt
import newt.language as nl


@newt.jit
def warmup_kernel(x_ptr, y_ptr, n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    nl.store(y_ptr + offs, x * 2, mask=mask)


def run(x, y):
    n = x.numel()
    warmup_kernel[(1,)](x, y, n, BLOCK=128)
"""


def _preload():
    """Import what answers and analyses import lazily (the backend's code generation for hover layouts: ~0.2-0.7 s)
    by answering once on a small kernel, before the first fork: every engine forked later has it already, instead
    of each promoted fork importing it again on its first hover."""
    t = time.perf_counter()
    try:
        from lsprotocol import types as lsp

        from . import features
        from .analysis import KernelCache, analyze, lsp_diagnostics
        from .hover import hover, warm_layouts
        a = analyze(_WARMUP, "untitled:newt-engine-warmup.py", 0, cache=KernelCache(max_entries=16))
        lsp_diagnostics(a)
        line = next(i for i, ln in enumerate(_WARMUP.split("\n")) if ln.strip().startswith("x = "))
        pos = lsp.Position(line, 4)
        hover(a, pos, True, "sm_90a", False)
        features.completion(a, pos, a.index.line(line), True, False)
        warm_layouts(a, "sm_90a")
    except Exception:  # a warm-up that fails only costs the first hover its imports
        log.debug("engine warm-up failed", exc_info=True)
    log.info("engine warm-up: %.0f ms", (time.perf_counter() - t) * 1e3)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m lsp_server.engine SOCKET", file=sys.stderr)
        return 2
    level = os.environ.get("NEWT_LSP_ENGINE_LOG", "warning").upper()
    logging.basicConfig(level=getattr(logging, level, logging.WARNING), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forks that exit are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server ends the engines (EOF on their socket)
    # everything an analysis or a hover imports, before the first fork (the forks share it)
    from . import analysis, features, hover  # noqa: F401
    _preload()
    eng = Engine(argv[0])
    gc.disable()
    gc.collect()
    gc.freeze()  # modules and the front end's tables: never scanned again, in no fork
    try:
        eng.connect()
    except (FileNotFoundError, ConnectionRefusedError):
        return 0  # the server shut down (its socket is gone) while this engine was starting: nothing to serve
    eng.loop()
    return 0


def _with_deuteron_hints(result, a, rng, p):
    """newt's inlay hints plus deuteron kernels' (``lsp_server.deuteron_hints``), in position order."""
    from .deuteron_hints import deuteron_inlay_hints
    extra = deuteron_inlay_hints(a, rng, bool(p.get("shapes", True)), bool(p.get("dtypes", True)))
    if not extra:
        return result
    return sorted(list(result or []) + extra, key=lambda h: (h.position.line, h.position.character))


if __name__ == "__main__":
    sys.exit(main())
