"""Performance diagnostics as you type, with no GPU: registers, spills, shared memory and occupancy of every
specialization the file reveals, on its config's (or launch's) line, in the kernel hover, and as a warning
where a config spills (N100) or cannot launch (N101).

The compiles run in a worker process of their own (``perf``; ``lsp_server/perfjob.py`` is its side): the
server's event loop only sends the text and receives events.  The worker runs at a lower CPU priority, one
request at a time; a new version of the document cancels the running request between specializations.
Figures are cached by content (a hash of the kernel's text and its callees', the specialization, the target
and the compiler), so an edit elsewhere in the file shows the figures again at once.

Runs in a trusted workspace only (NVRTC compiles code generated from the workspace, as Compile does) and
while the ``perfDiagnostics`` setting is on.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import os
import sys

from .analysis import docs_href

__all__ = ["Perf", "figures_text", "hottest_text"]

log = logging.getLogger("newt-lsp")

MAX_FIGURES = 1024
MAX_WORKERS = 4  # compile processes for one document at most (each one a core, when the machine has it idle)


def worker_count(n_entries: int | None = None) -> int:
    """How many compile processes the performance figures may use now: the cores this process may run on that
    the load average leaves idle, less one kept for the editor's requests (the server and its analysis), at
    least one and at most ``MAX_WORKERS`` (``NEWT_PERF_WORKERS`` sets it)."""
    forced = os.environ.get("NEWT_PERF_WORKERS")
    if forced and forced.isdigit() and int(forced) > 0:
        n = int(forced)
    else:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = float(cores)
        n = max(1, min(MAX_WORKERS, math.floor(cores - load) - 1))
    return max(1, min(n, n_entries)) if n_entries is not None else n


def _kb(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB".replace(".0 KB", " KB")


def figures_text(f: dict) -> str:
    """``255 regs · 7.5 KB spilled · 36 KB smem · 4 blocks/SM (8 warps/SM, 12%)``."""
    if f.get("error"):
        return "cannot compile: " + f["error"].splitlines()[0][:160]
    occ = f.get("occupancy") or {}
    parts = [f"{f['n_regs']} regs", f"{_kb(f['n_spills'])} spilled" if f.get("n_spills") else "no spill",
             f"{_kb(f['shared'])} smem"]
    if occ.get("launchable", True):
        parts.append(f"{occ.get('blocks_per_sm')} blocks/SM ({occ.get('warps_per_sm')} warps/SM, "
                     f"{round(100 * occ.get('occupancy', 0))}%)")
    else:
        parts.append("cannot launch")
    return " · ".join(parts)


def hottest_text(hot: list, lines: list[str], markdown: bool = True) -> list[str]:
    out = []
    for h in hot or ():
        src = lines[h["line"] - 1].strip() if 0 < h["line"] <= len(lines) else ""
        mix = ", ".join(f"{n} {k}" for k, n in h["mix"].items()) or "no memory or tensor-core instructions"
        code = f"`{src[:60]}`" if markdown else src[:60]
        out.append(f"line {h['line']} {code}: {h['total']} instructions — {mix}")
    return out


class _Doc:
    __slots__ = ("version", "text", "entries", "task", "cancel", "republish", "generation", "preempted", "timeline")

    def __init__(self):
        self.version = None
        self.text = None
        self.entries: list = []  # the plan of ``version``: where each specialization is, and its key
        self.task: asyncio.Task | None = None
        self.cancel: asyncio.Event | None = None
        self.republish = None  # publishes the document's last diagnostics again (with the new figures)
        self.generation = 0  # bumped whenever what this module shows for the document changes
        self.preempted = False  # its run was stopped for another document's: resumed when that one ends
        self.timeline: dict = {}  # the steps of the run of ``version`` (``Perf.info``: tests and the benchmark)


class Perf:
    def __init__(self, ls):
        self.ls = ls
        self.workers: list = []  # the compile processes ("perf", "perf2", ...); the first one is started early
        self.warm_at: list = []  # per worker, the loop time its imports were done (None: still warming)
        self.figures: collections.OrderedDict = collections.OrderedDict()  # key -> figures
        self.docs: dict[str, _Doc] = {}
        self.first_figures_at: dict = {}  # uri -> loop time of the first figures (tests, benchmarks)

    # -- settings ---------------------------------------------------------------------------
    def enabled(self, uri: str) -> bool:
        s = self.ls.settings_for(uri)
        return bool(s.trusted and s.perf_diagnostics)

    @property
    def worker(self):
        """The first compile process (the one a document's likeliest warning goes to)."""
        return self.workers[0] if self.workers else None

    @worker.setter
    def worker(self, w):
        self.workers[:1] = [w]
        self.warm_at[:1] = [None]

    def _worker(self, i: int = 0):
        from .workers import Worker, worker_env
        while len(self.workers) <= i:
            n = len(self.workers)
            self.workers.append(Worker("perf" if n == 0 else f"perf{n + 1}", sys.executable,
                                       worker_env(self.ls.settings.cache_dir), cwd=None))
            self.warm_at.append(None)
        return self.workers[i]

    def prestart(self, n: int | None = None):
        """At initialization, before any file opens: start the compile processes (as many as ``worker_count()``
        allows now) and import the analysis, the backend and NVRTC in them at a low priority, so the first
        figures wait for none of that."""
        if not self.ls.settings.trusted or not self.ls.settings.perf_diagnostics:
            return
        for i in range(n if n is not None else worker_count()):
            if i < len(self.workers):
                continue
            asyncio.ensure_future(self._warm(i))

    async def _warm(self, i: int):
        w = self._worker(i)
        try:
            await w.request("perf_warm", {}, timeout=self.ls.settings.worker_timeout)
            if i < len(self.warm_at) and self.workers[i] is w:
                self.warm_at[i] = asyncio.get_running_loop().time()
        except Exception as e:
            log.info("performance worker: %s", e)

    async def shutdown(self):
        for d in self.docs.values():
            if d.task is not None and not d.task.done():
                d.task.cancel()
        for w in list(self.workers):
            await w.stop()

    def info(self) -> dict:
        """``newt/serverInfo``'s ``perf``: the compile processes and each document's timeline (seconds since the
        document was opened or changed: ``sent`` to the workers, ``plan``, one ``figures`` row per
        specialization with the worker's own timing, ``warning``: the first N100/N101 sent to the client)."""
        return {"workers": [w.proc.pid if w.alive else None for w in self.workers],
                "warm": [t is not None for t in self.warm_at],
                "timeline": {uri: d.timeline for uri, d in self.docs.items() if d.timeline}}

    def forget(self, uri: str):
        d = self.docs.pop(uri, None)
        if d is not None and d.task is not None and not d.task.done():
            if d.cancel is not None:
                d.cancel.set()
            d.task.cancel()

    # -- life cycle of one document --------------------------------------------------------------
    def opened(self, uri: str, version):
        """A document was opened: measure it now, alongside its first analysis (not after its publication)."""
        self.start(uri, version)

    def published(self, uri: str, version, republish):
        """The diagnostics of ``version`` went out (``republish()`` sends them again): measure that text."""
        d = self.docs.setdefault(uri, _Doc())
        d.republish = republish
        self.start(uri, version)

    def start(self, uri: str, version):
        if not self.enabled(uri):
            return
        try:
            text, now = self.ls.doc_text(uri)
        except Exception:
            return
        if version is not None and now is not None and version != now:
            return  # a newer text is coming: its publish starts it
        d = self.docs.setdefault(uri, _Doc())
        if d.version == version and d.text == text and d.task is not None:
            return  # already measured (or measuring) this text
        if d.task is not None and not d.task.done() and d.cancel is not None:
            d.cancel.set()  # superseded: the worker stops before its next specialization
        # the document being edited comes first: other documents' runs stop between specializations and
        # resume when this one ends (one worker: a run queued behind a folder of opened files would wait minutes)
        for other, od in self.docs.items():
            if other != uri and od.task is not None and not od.task.done() and od.cancel is not None \
                    and not od.cancel.is_set():
                od.cancel.set()
                od.preempted = True
        d.version, d.text, d.entries, d.preempted = version, text, [], False
        d.timeline = {"version": version, "t0": asyncio.get_running_loop().time(), "steps": []}
        d.cancel = asyncio.Event()
        d.task = asyncio.ensure_future(self._run(uri, d, version, text, d.cancel))

    def _step(self, d: _Doc, name: str, **info):
        tl = d.timeline
        if tl:
            tl["steps"].append(dict(info, step=name, at=round(asyncio.get_running_loop().time() - tl["t0"], 3)))

    async def _run(self, uri: str, d: _Doc, version, text: str, cancel: asyncio.Event):
        target = self.ls.commands.target_for(uri)
        known = list(self.figures)
        n = worker_count()

        def on_event(kind, data):
            if d.version != version or cancel.is_set():
                return
            if kind == "plan":
                if d.entries:
                    return  # every shard sends the same plan: the first one counts
                d.entries = list(data.get("entries") or [])
                self._step(d, "plan", entries=len(d.entries), **(data.get("timing") or {}))
                if any(e["key"] in self.figures for e in d.entries):
                    self._changed(uri, d)
            elif kind == "perf" and isinstance(data, dict) and data.get("key"):
                timing = data.pop("timing", None) or {}
                self.figures[data["key"]] = data
                self.figures.move_to_end(data["key"])
                while len(self.figures) > MAX_FIGURES:
                    self.figures.popitem(last=False)
                self.first_figures_at.setdefault(uri, asyncio.get_running_loop().time())
                label = next((e["label"] for e in d.entries if e["key"] == data["key"]), None)
                self._step(d, "mix" if "hottest" in data else "figures", label=label,
                           spills=data.get("n_spills"), **timing)
                self._changed(uri, d)

        self._step(d, "sent", workers=n, warm=sum(1 for t in self.warm_at[:n] if t is not None))
        await asyncio.gather(*(self._shard(uri, i, n, text, target, known, on_event, cancel) for i in range(n)))
        self._step(d, "done")
        if not cancel.is_set():
            self._resume()

    async def _shard(self, uri: str, i: int, n: int, text: str, target: str, known: list, on_event, cancel):
        """Worker ``i`` of ``n`` compiles its share of the document's specializations (``perfjob.run``)."""
        from .workers import WorkerError
        try:
            await self._worker(i).request("perf", {"text": text, "uri": uri, "target": target, "known": known,
                                                   "shard": [i, n]},
                                          timeout=self.ls.settings.worker_timeout, on_event=on_event, cancel=cancel)
        except WorkerError as e:
            if e.kind != "cancelled":
                log.info("performance figures of %s: %s", uri, e)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("performance figures of %s failed", uri)

    def _resume(self):
        """Restart one document whose run another document's stopped (its text unchanged since)."""
        for uri, d in list(self.docs.items()):
            if d.preempted and (d.task is None or d.task.done()):
                d.preempted = False
                try:
                    now = self.ls.doc_text(uri)
                except Exception:
                    continue
                if now[1] == d.version and now[0] == d.text:
                    d.task = None
                    self.start(uri, d.version)
                    return

    def separate(self) -> bool:
        """A client that pulls diagnostics but cannot be asked to pull again (no ``workspace/diagnostic/refresh``,
        e.g. Neovim 0.11) would see the figures only at its next pull: they are pushed to it on their own
        (``publishDiagnostics`` with only N100/N101; the front end's diagnostics stay pulled, none twice)."""
        return bool(self.ls.pull_diagnostics and not self.ls.refresh_diagnostics)

    def pulled(self, uri: str, version) -> list[dict]:
        """What a pull report of ``version`` carries of this module's diagnostics."""
        return [] if self.separate() else self.diagnostics(uri, version)

    def _changed(self, uri: str, d: _Doc):
        d.generation += 1
        ls = self.ls
        if ls.pull_diagnostics:
            if ls.refresh_diagnostics:
                try:
                    ls.workspace_diagnostic_refresh(None)
                except Exception:
                    log.debug("diagnostic refresh failed", exc_info=True)
            else:
                from lsprotocol import types as lsp
                conv = ls.protocol._converter
                ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
                    uri=uri, diagnostics=[conv.structure(x, lsp.Diagnostic) for x in self.diagnostics(uri, d.version)],
                    version=d.version))
        elif d.republish is not None:
            try:
                d.republish()
            except Exception:
                log.exception("republishing diagnostics of %s failed", uri)
        elif d.version is not None and self.diagnostics(uri, d.version):
            # figures before the document's first analysis was published: its warnings now (that publication,
            # when it comes, carries them with the front end's own)
            from lsprotocol import types as lsp
            conv = ls.protocol._converter
            ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
                uri=uri, diagnostics=[conv.structure(x, lsp.Diagnostic) for x in self.diagnostics(uri, d.version)],
                version=d.version))
        if d.timeline and "warning" not in d.timeline and self.diagnostics(uri, d.version):
            d.timeline["warning"] = round(asyncio.get_running_loop().time() - d.timeline["t0"], 3)
        if ls.refresh_inlay:
            try:
                ls.workspace_inlay_hint_refresh(None)
            except Exception:
                log.debug("inlay hint refresh failed", exc_info=True)

    # -- what the editor shows --------------------------------------------------------------------------
    def _current(self, uri: str, version) -> list:
        """(plan entry, figures) of the document's ``version`` that have figures."""
        d = self.docs.get(uri)
        if d is None or not self.enabled(uri) or (version is not None and d.version != version):
            return []
        return [(e, self.figures[e["key"]]) for e in d.entries if e["key"] in self.figures]

    def generation(self, uri: str) -> int:
        d = self.docs.get(uri)
        return d.generation if d is not None else 0

    def _range(self, uri: str, e: dict) -> dict:
        from .positions import LineIndex
        d = self.docs[uri]
        idx = LineIndex(d.text, self.ls.encoding)
        s, t = idx.position(e["line"], e["col"]), idx.position(e["line"], e["end_col"])
        return {"start": {"line": s.line, "character": s.character}, "end": {"line": t.line, "character": t.character}}

    def diagnostics(self, uri: str, version) -> list[dict]:
        """N100 (spills) and N101 (cannot launch) warnings of ``version``, as LSP JSON."""
        out = []
        for e, f in self._current(uri, version):
            occ = f.get("occupancy") or {}
            res = f.get("resource")
            where = f"{e['kernel']} {e['label']}, {e['target']}"
            if res is not None or (occ and not occ.get("launchable", True)):
                code = "N101"
                why = occ.get("why") if occ and not occ.get("launchable", True) else \
                    f"{res.get('resource')}: needs {res.get('required') or res.get('needed')}, " \
                    f"the limit is {res.get('limit')}"
                msg = f"{where} cannot launch: {why}"
                data = {"figures": _data(f), "kernel": e["kernel"], "spec": e["spec"]}
            elif f.get("n_spills"):
                code = "N100"
                msg = (f"{where} spills registers: {f['n_spills']} bytes ({f['spill_stores']} B stored, "
                       f"{f['spill_loads']} B loaded) at {f['n_regs']} registers a thread x {f['threads']} threads; "
                       f"{figures_text(f)}")
                data = {"figures": _data(f), "kernel": e["kernel"], "spec": e["spec"]}
            else:
                continue
            diag = {"range": self._range(uri, e), "severity": 2, "code": code, "source": "newt",
                    "message": msg + "\nhint: fewer elements a thread (smaller BLOCK sizes, more num_warps) or "
                                     "fewer num_stages", "data": data}
            href = docs_href(code)
            if href:
                diag["codeDescription"] = {"href": href}
            out.append(diag)
        return out

    def inlay_hints(self, uri: str, version, rng: dict | None = None) -> list[dict]:
        """The figures at the end of each config's / launch's first line."""
        out = []
        d = self.docs.get(uri)
        for e, f in self._current(uri, version):
            line0 = e["line"] - 1
            if rng is not None and not (rng["start"]["line"] <= line0 <= rng["end"]["line"]):
                continue
            from .positions import LineIndex
            if d is None:
                break
            idx = LineIndex(d.text, self.ls.encoding)
            end = idx.position(e["line"], len(idx.line(line0)) + 1)
            out.append({"position": {"line": end.line, "character": end.character},
                        "label": f"  {figures_text(f)}", "kind": None, "paddingLeft": True,
                        "tooltip": f"{e['kernel']} {e['label']} on {e['target']} (NVRTC, no GPU): {figures_text(f)}"})
        for h in out:
            h.pop("kind")
        return out

    def hover_section(self, uri: str, kernel: str, markdown: bool = True) -> str | None:
        d = self.docs.get(uri)
        rows = [(e, f) for e, f in self._current(uri, None) if e["kernel"] == kernel] if d is not None else []
        if d is None or not rows or d.version != (self.ls.doc_text(uri)[1] if uri in self.ls.docs else d.version):
            return None
        target = rows[0][0]["target"]
        if markdown:
            out = [f"**Resources on {target}** (NVRTC, no GPU):", "",
                   "| specialization | regs | spilled | smem | blocks/SM | warps/SM |", "|---|---|---|---|---|---|"]
            for e, f in rows:
                occ = f.get("occupancy") or {}
                if f.get("error"):
                    out.append(f"| {e['label']} | cannot compile | | | | |")
                    continue
                out.append(f"| {e['label']} | {f['n_regs']} | {_kb(f['n_spills'])} | {_kb(f['shared'])} | "
                           f"{occ.get('blocks_per_sm')} | {occ.get('warps_per_sm')} |")
        else:
            out = [f"Resources on {target} (NVRTC, no GPU):"] + [f"  {e['label']}: {figures_text(f)}" for e, f in rows]
        # the mix of the specialization that spills most (the one to look at), else the first one's
        with_mix = sorted([(e, f) for e, f in rows if f.get("hottest")], key=lambda ef: -(ef[1].get("n_spills") or 0))
        if with_mix:
            label, hot = with_mix[0][0]["label"], with_mix[0][1]["hottest"]
            lines = d.text.splitlines()
            out += ["", f"**Hottest source lines** (SASS of {label}):" if markdown else
                    f"Hottest source lines (SASS of {label}):"]
            out += [("- " if markdown else "  ") + x for x in hottest_text(hot, lines, markdown)]
        return "\n".join(out)

    def augment_hover(self, uri: str, position, result, markdown: bool = True):
        """Add the kernel's figures to a hover of its name (``result``: the hover as JSON or an ``lsp.Hover``)."""
        if result is None or uri not in self.docs:
            return result
        try:
            text, _ = self.ls.doc_text(uri)
        except Exception:
            return result
        from .positions import LineIndex
        from .textutil import dotted_at
        idx = LineIndex(text, self.ls.encoding)
        line1, col1 = idx.char_col(position)
        at = dotted_at(idx.line(line1 - 1), col1 - 1)
        if at is None or len(at[2]) != 1:
            return result
        name = at[2][0]
        contents = result.get("contents") if isinstance(result, dict) else getattr(result, "contents", None)
        value = contents.get("value") if isinstance(contents, dict) else getattr(contents, "value", None)
        if not isinstance(value, str) or f"def {name}(" not in value:
            return result  # not the kernel hover
        extra = self.hover_section(uri, name, markdown)
        if not extra:
            return result
        sep = "\n\n"
        if isinstance(contents, dict):
            contents["value"] = value + sep + extra
        elif contents is not None:
            contents.value = value + sep + extra
        return result


def _data(f: dict) -> dict:
    keep = ("n_regs", "n_spills", "spill_stores", "spill_loads", "shared", "threads", "num_warps")
    out = {k: f.get(k) for k in keep}
    occ = f.get("occupancy") or {}
    out.update(blocks_per_sm=occ.get("blocks_per_sm"), warps_per_sm=occ.get("warps_per_sm"))
    return out
