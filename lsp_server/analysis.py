"""The analysis of one document, as plain functions the server and tests call.

``analyze(text, uri)`` returns an :class:`Analysis`: the front end's
``FileAnalysis`` plus what the editor features need (a position index,
per-line lookup of the front end's notes, LSP diagnostics).  Nothing here
imports or runs the user's file.

Analysis is incremental: :class:`KernelCache` keeps the front end's result for
each (kernel, specialization) keyed by the text of the kernel and of every jit
function it inlines, the module-level names it reads and the specialization,
so a keystroke in one kernel re-checks only that kernel.  Results are moved
when the kernel only moved (lines inserted above it).  The result is the same
as ``newt.frontend.analyze_source`` (a test checks it on random edits).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import gc
import hashlib
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Mapping
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

import deuteron.frontend  # noqa: F401  (registers @dt.kernel with newt's front end)
from newt.frontend import analyze_source
from newt.frontend.check import FileAnalysis, KernelAnalysis, SpecResult
from newt.frontend.diagnostics import Diagnostic, Severity, Span

from .positions import UTF16, LineIndex

__all__ = ["Analysis", "analyze", "KernelCache", "uri_to_path", "lsp_diagnostics", "docs_href"]

log = logging.getLogger("newt-lsp")


def uri_to_path(uri: str) -> str:
    """``file:///a/b.py`` -> ``/a/b.py``; other schemes keep the URI as the path."""
    if uri.startswith("file:"):
        p = urlparse(uri)
        path = unquote(p.path)
        if os.name == "nt" and len(path) > 2 and path[0] == "/" and path[2] == ":":
            path = path[1:]
        return path
    return uri


# ---------------------------------------------------------------------------
# the analysis of one document
# ---------------------------------------------------------------------------


class Analysis:
    """One version of one document, analyzed."""

    def __init__(self, uri: str, text: str, version: int | None, file: FileAnalysis, index: LineIndex,
                 elapsed_ms: float, reused: int = 0):
        self.uri = uri
        self.text = text
        self.version = version
        self.file = file
        self.index = index
        self.elapsed_ms = elapsed_ms
        self.reused = reused  # how many (kernel, spec) results came from the cache
        self._notes_by_line: dict = {}
        self._spec_of_diag: dict | None = None
        self.extra: dict = {}  # per-analysis caches of other modules (concrete builds, CUDA, ...)

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def kernels(self) -> list[KernelAnalysis]:
        return self.file.kernels

    @property
    def aliases(self) -> dict:
        return self.file.scan.aliases if self.file.scan is not None else {}

    def kernel_at(self, line1: int) -> KernelAnalysis | None:
        best = None
        for k in self.file.kernels:
            if k.def_span.line <= line1 <= k.def_span.end_line:
                if best is None or k.def_span.line >= best.def_span.line:
                    best = k
        return best

    def kernel_named(self, name: str) -> KernelAnalysis | None:
        return next((k for k in self.file.kernels if k.name == name), None)

    # --- notes (Span -> abstract value) by position -----------------------
    def notes_at(self, result: SpecResult, line1: int, col1: int):
        """(span, value) of the smallest noted expression of ``result`` that contains the position."""
        key = id(result)
        by_line = self._notes_by_line.get(key)
        if by_line is None:
            by_line = {}
            for span, av in (result.notes or {}).items():
                for ln in range(span.line, span.end_line + 1):
                    by_line.setdefault(ln, []).append((span, av))
            for lst in by_line.values():
                lst.sort(key=_span_size)
            self._notes_by_line[key] = by_line
        for span, av in by_line.get(line1, ()):
            if _contains(span, line1, col1):
                return span, av
        return None

    def note_for_span(self, result: SpecResult, span: Span):
        return (result.notes or {}).get(span)

    def spec_of(self, diag: Diagnostic):
        """(kernel, index in kernel.results) of the specialization that produced a diagnostic."""
        if self._spec_of_diag is None:
            m = {}
            for k in self.file.kernels:
                for i, r in enumerate(k.results):
                    for d in r.diagnostics:
                        m.setdefault(id(d), (k, i))
            self._spec_of_diag = m
        return self._spec_of_diag.get(id(diag))


def _span_size(item):
    s = item[0]
    return (s.end_line - s.line, (s.end_col - s.col) if s.end_line == s.line else 10 ** 6)


def _contains(span: Span, line1: int, col1: int) -> bool:
    if (line1, col1) < (span.line, span.col):
        return False
    return (line1, col1) <= (span.end_line, span.end_col)


# ---------------------------------------------------------------------------
# incremental analysis
# ---------------------------------------------------------------------------


def _h(*parts) -> str:
    m = hashlib.blake2b(digest_size=16)
    for p in parts:
        m.update(repr(p).encode("utf-8", "surrogatepass"))
        m.update(b"\x00")
    return m.hexdigest()


def _fp_value(v, depth=0):
    """A stable fingerprint of a module-level constant (no object addresses)."""
    if depth > 6:
        return "..."
    if v is None or isinstance(v, (bool, int, float, str, bytes)):
        return (type(v).__name__, v)
    if isinstance(v, (list, tuple, set, frozenset)):
        items = sorted(v, key=repr) if isinstance(v, (set, frozenset)) else v
        return (type(v).__name__, tuple(_fp_value(x, depth + 1) for x in items))
    if isinstance(v, dict):
        return ("dict", tuple((_fp_value(k, depth + 1), _fp_value(x, depth + 1)) for k, x in v.items()))
    if isinstance(v, range):
        return ("range", v.start, v.stop, v.step)
    q = getattr(v, "q", None)
    if isinstance(q, str):
        return ("q", q)
    if type(v).__name__ == "ConfigLit":
        return ("config", _fp_value(v.kwargs, depth + 1), v.num_warps, v.num_stages)
    if hasattr(v, "short_name") and hasattr(v, "name"):  # dtype
        return ("dtype", repr(v))
    if isinstance(v, ast.AST):
        return ("ast", ast.dump(v))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (type(v).__name__, tuple((f.name, _fp_value(getattr(v, f.name), depth + 1))
                                        for f in dataclasses.fields(v)))
    slots = getattr(type(v), "__slots__", None)
    if isinstance(slots, tuple) and slots and all(isinstance(getattr(v, a, None), (str, int, float, bool))
                                                   for a in slots):
        return (type(v).__name__, tuple(getattr(v, a) for a in slots))
    return ("obj", type(v).__name__, id(v))  # never equal across analyses: a cache miss, never a wrong hit


def _spec_key(spec) -> tuple:
    return (
        _fp_value(spec.constexprs), spec.num_warps, spec.num_stages, tuple(sorted(spec.pointer_params or ())),
        spec.launched, spec.concrete, _fp_value({k: repr(v) for k, v in (spec.arg_types or {}).items()}),
        _fp_value(spec.divisibility),
    )


@dataclasses.dataclass
class _Entry:
    fn: object
    diagnostics: list
    notes: dict
    static_prints: list
    segments: dict  # kernel name -> (first line, last line) when built


@dataclasses.dataclass(frozen=True)
class _Facts:
    """What one function's text says, independent of where it sits in the file."""

    names: frozenset  # every Name it reads or writes
    called: frozenset  # names it calls or passes as call arguments / keyword values
    returns_value: bool


def _facts(node) -> _Facts:
    names, called = set(), set()
    returns_value = False
    for n in ast.walk(node):
        t = type(n)
        if t is ast.Name:
            names.add(n.id)
        elif t is ast.Call:
            if type(n.func) is ast.Name:
                called.add(n.func.id)
            for a in n.args:
                if type(a) is ast.Name:
                    called.add(a.id)
        elif t is ast.keyword:
            if type(n.value) is ast.Name:
                called.add(n.value.id)
        elif t is ast.Return:
            if n.value is not None and not (type(n.value) is ast.Constant and n.value.value is None):
                returns_value = True
    return _Facts(frozenset(names), frozenset(called), returns_value)


class KernelCache:
    """Front-end results per (kernel, specialization), reusable across edits.

    An entry stays while the file it belongs to uses it; once ``keep_versions`` analyses of that file have not
    used it (the kernel was edited since), it is dropped.  ``max_entries`` bounds the whole cache (LRU).
    """

    def __init__(self, max_entries: int = 1024, keep_versions: int = 4):
        self.max_entries = max_entries
        self.keep_versions = keep_versions
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._owner: dict = {}  # key -> (path, analysis number of that path when last used)
        self._runs: dict = {}  # path -> number of analyses
        self._facts: OrderedDict[str, _Facts] = OrderedDict()
        self._ptrs: OrderedDict[str, frozenset] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def facts(self, text_key: str, node) -> _Facts:
        f = self._facts.get(text_key)
        if f is None:
            f = _facts(node)
            self._facts[text_key] = f
            while len(self._facts) > self.max_entries:
                self._facts.popitem(last=False)
        return f

    def ptrs(self, key: str, compute) -> frozenset:
        p = self._ptrs.get(key)
        if p is None:
            p = frozenset(compute())
            self._ptrs[key] = p
            while len(self._ptrs) > self.max_entries:
                self._ptrs.popitem(last=False)
        return p

    def get(self, key: str) -> _Entry | None:
        e = self._entries.get(key)
        if e is not None:
            self._entries.move_to_end(key)
        return e

    def put(self, key: str, entry: _Entry, path: str | None = None):
        self._entries[key] = entry
        self._entries.move_to_end(key)
        if path is not None:
            self._owner[key] = (path, self._runs.get(path, 0) + 1)
        while len(self._entries) > self.max_entries:
            k, _ = self._entries.popitem(last=False)
            self._owner.pop(k, None)

    def end_analysis(self, path: str, used: set):
        """One more analysis of ``path`` used ``used``: drop that file's entries unused for a while."""
        n = self._runs.get(path, 0) + 1
        self._runs[path] = n
        for k in used:
            if k in self._entries:
                self._owner[k] = (path, n)
        if n % 2:  # look for stale entries every other analysis (the scan is over the whole cache)
            return
        stale = [k for k, (p, last) in self._owner.items() if p == path and n - last >= self.keep_versions]
        for k in stale:
            self._entries.pop(k, None)
            self._owner.pop(k, None)

    def clear(self):
        self._entries.clear()
        self._owner.clear()
        self._facts.clear()
        self._ptrs.clear()


def _front_end_internals():
    """The front end's building blocks, or None when they changed shape (then: no cache)."""
    try:
        from newt.frontend import check as C
        from newt.frontend.builder import Builder, Spec
        from newt.frontend.source import ModuleScan, SourceFile, parse_with_recovery
        needed = (C.StaticEnv, C.discover_specs, C.infer_pointer_params, C._called_jit_functions,
                  C._build_with_opaque, C._name_span, C._failed_analysis, C._dedupe, C.KERNEL_ANALYZERS)
        del needed
        return C, Builder, Spec, ModuleScan, SourceFile, parse_with_recovery
    except (ImportError, AttributeError):  # pragma: no cover - depends on the front end's layout
        return None


def release_env(env):
    """Break the StaticEnv <-> JitSource reference cycle (each holds the other) so that an analysis is freed by
    reference counting as soon as it is dropped, without waiting for the cyclic GC.  The env rebuilds its jit
    sources on demand if it is used again."""
    jit = getattr(env, "_jit", None)
    if isinstance(jit, dict):
        jit.clear()


class _Incremental:
    def __init__(self, cache: KernelCache, record_notes: bool = True):
        self.cache = cache
        self.record_notes = record_notes
        self.reused = 0
        self.used: set = set()

    def run(self, text: str, path: str) -> FileAnalysis:
        parts = _front_end_internals()
        if parts is None:
            return analyze_source(text, path)
        C, Builder, Spec, ModuleScan, SourceFile, parse_with_recovery = parts
        self.C, self.Builder, self.Spec = C, Builder, Spec
        src = SourceFile(text, path)
        try:
            chunks, diags = parse_with_recovery(src)
            scan = ModuleScan(src, chunks)
        except (RecursionError, MemoryError) as e:
            d = Diagnostic("N001", Severity.ERROR, Span(1, 1, 1, 2), f"cannot analyze file: {type(e).__name__}",
                           file=path)
            return FileAnalysis(path, src, [], [d])
        self.src, self.scan = src, scan
        env = C.StaticEnv(scan, src)
        self.segs, self.texts, self.facts = {}, {}, {}
        for name, kd in scan.kernels.items():
            first, last = self.segment(name)
            text = "\n".join(src.lines[first - 1:last])
            self.segs[name] = (first, last)
            self.texts[name] = _h(text)
            self.facts[name] = self.cache.facts(self.texts[name], kd.node)
        called = set()
        for f in self.facts.values():
            called |= f.called
        called &= set(scan.kernels)
        kernels = []
        for name in scan.kernel_order:
            kd = scan.kernels[name]
            if kd.kind != "jit":
                analyzer = C.KERNEL_ANALYZERS.get(kd.kind)
                if analyzer is not None:
                    try:
                        ka = analyzer(scan, src, kd)
                    except Exception as e:  # noqa: BLE001
                        ka = C._failed_analysis(kd, src, e)
                    kernels.append(ka)
                    diags.extend(ka.diagnostics)
                continue
            ka = self.analyze_jit(kd, scan, src, env, called)
            kernels.append(ka)
            diags.extend(ka.diagnostics)
        if scan.repaired_lines:
            diags = [d for d in diags if d.code == "N001" or d.span.line not in scan.repaired_lines]
        diags.sort(key=lambda d: (d.span.line, d.span.col, d.code))
        release_env(env)
        self.cache.end_analysis(path, self.used)
        return FileAnalysis(path, src, kernels, C._dedupe(diags), scan)

    # -- one jit kernel -------------------------------------------------------
    def segment(self, name: str):
        kd = self.scan.kernels[name]
        node = kd.node
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        last = node.end_lineno or node.lineno
        return first, last

    def deps(self, name: str) -> list[str]:
        """The kernel and every jit function of the file it may inline (transitively), sorted."""
        seen = {name}
        work = [name]
        kernels = self.scan.kernels
        while work:
            n = work.pop()
            for u in self.facts[n].names:
                if u in kernels and u not in seen:
                    seen.add(u)
                    work.append(u)
        return sorted(seen)

    def env_fingerprint(self, names: list[str]) -> str:
        scan = self.scan
        used: set = set()
        for n in names:
            used |= self.facts[n].names
        items = []
        for u in sorted(used):
            if u in scan.kernels:
                items.append((u, "k", scan.kernels[u].kind))
            elif u in scan.constants:
                items.append((u, "c", _fp_value(scan.constants[u])))
            elif u in scan.aliases:
                items.append((u, "a", scan.aliases[u]))
            elif u in scan.plain_functions:
                items.append((u, "f"))
            elif u in scan.other_names:
                items.append((u, "o"))
            elif u in scan.assigned:
                items.append((u, "v"))
        return _h(items)

    def analyze_jit(self, kd, scan, src, env, called) -> KernelAnalysis:
        C, Spec = self.C, self.Spec
        node = kd.node
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        def_span = Span(first, 1, node.end_lineno or node.lineno, 1)
        ka = KernelAnalysis(kd.name, "jit", node, C._name_span(node, src), def_span, kernel_def=kd)
        launched = any(ls.kernel == kd.name for ls in scan.launches)
        returns_value = self.facts[kd.name].returns_value
        ka.launched = launched
        ka.helper = (kd.name in called or returns_value) and not launched
        js = env.jit_source(kd.name)
        ka.jit_source = js
        diags: list[Diagnostic] = []
        specs = C.discover_specs(kd, scan, src, diags)
        dep_names = self.deps(kd.name)
        segs = {n: self.segs[n] for n in dep_names}
        base_key = _h(src.path, self.record_notes, [(n, self.texts[n]) for n in dep_names],
                      self.env_fingerprint(dep_names))
        ka.content_key = base_key  # what the kernel's results depend on (other caches key on it too)
        if ka.helper:
            ptrs = set()
        else:
            ptrs = set(self.cache.ptrs(base_key, lambda: C.infer_pointer_params(node, scan)))
        generic = Spec(label="generic", launched=launched, pointer_params=ptrs)
        for s in specs:
            s.pointer_params = ptrs
        results = []
        for i, spec in enumerate([generic] + specs):
            opaque = ka.helper and i == 0
            key = _h(base_key, opaque, _spec_key(spec))
            self.used.add(key)
            entry = self.cache.get(key)
            if entry is not None:
                self.cache.hits += 1
                self.reused += 1
                results.append(self._reuse(entry, segs, spec))
                continue
            self.cache.misses += 1
            notes = {} if self.record_notes else None
            sdiags: list[Diagnostic] = []
            b = self.Builder(spec, sdiags, notes)
            if opaque:
                b._opaque_params = True
            try:
                fn = C._build_with_opaque(b, js, opaque)
            except Exception as e:  # noqa: BLE001 - an internal error must not hide the rest of the file
                sdiags.append(Diagnostic("N001", Severity.WARNING, ka.span,
                                         f"internal error while checking {kd.name}"
                                         f"{' (' + spec.label + ')' if i else ''}: {type(e).__name__}: {e}",
                                         file=src.path, kernel=kd.name))
                fn = None
            self.cache.put(key, _Entry(fn, [dataclasses.replace(d, data=dict(d.data)) for d in sdiags],
                                       notes or {}, list(b.static_prints), dict(segs)), src.path)
            results.append(SpecResult(spec, fn, sdiags, notes or {}, b.static_prints))
        ka.results = results
        ka.diagnostics = C.merge_spec_diagnostics(diags, results)
        return ka

    def _reuse(self, entry: _Entry, segs: dict, spec) -> SpecResult:
        shifts = []
        for name, (old_first, old_last) in entry.segments.items():
            new_first = segs.get(name, (old_first,))[0]
            shifts.append((old_first, old_last, new_first - old_first))
        moved = any(d for _, _, d in shifts)

        def mv(span: Span) -> Span:
            if not moved:
                return span
            for a, b, d in shifts:
                if a <= span.line <= b:
                    return Span(span.line + d, span.col, span.end_line + d, span.end_col) if d else span
            return span

        def mv_line(line: int) -> int:
            for a, b, d in shifts:
                if a <= line <= b:
                    return line + d
            return line

        diags = []
        for d in entry.diagnostics:
            data = dict(d.data)
            if moved and isinstance(data.get("called_from"), int):
                data["called_from"] = mv_line(data["called_from"])
            diags.append(dataclasses.replace(d, span=mv(d.span), data=data,
                                             context=spec.context if d.context is not None else None))
        notes = entry.notes if not moved else _MovedNotes(entry.notes, mv)
        return SpecResult(spec, entry.fn, diags, notes, list(entry.static_prints))


class _MovedNotes(Mapping):
    """A cached notes dict whose spans move by a few lines; moved on first use (most are never read)."""

    def __init__(self, notes: dict, mv):
        self._src = notes
        self._mv = mv
        self._d = None

    def _get(self) -> dict:
        if self._d is None:
            mv = self._mv
            self._d = {mv(s): av for s, av in self._src.items()}
            self._src = self._mv = None
        return self._d

    def __getitem__(self, k):
        return self._get()[k]

    def __iter__(self):
        return iter(self._get())

    def __len__(self):
        return len(self._d if self._d is not None else self._src)

    def items(self):
        return self._get().items()


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def _no_gc():
    """The front end allocates many small cyclic objects; a GC pass mid-analysis costs more than it saves."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def analyze(text: str, uri: str, version: int | None = None, encoding: str = UTF16,
            cache: KernelCache | None = None) -> Analysis:
    """Analyze one document.  Never raises on bad input (the front end's promise, kept here too)."""
    t0 = time.perf_counter()
    path = uri_to_path(uri)
    reused = 0
    try:
        if cache is not None:
            inc = _Incremental(cache)
            with _no_gc():
                fa = inc.run(text, path)
            reused = inc.reused
        else:
            fa = analyze_source(text, path)
    except Exception as e:  # noqa: BLE001 - an internal error becomes a diagnostic, never a dead server
        log.exception("analysis of %s failed", uri)
        from newt.frontend.source import SourceFile
        d = Diagnostic("N001", Severity.WARNING, Span(1, 1, 1, 2),
                       f"internal error in the newt analyzer: {type(e).__name__}: {e}", file=path)
        fa = FileAnalysis(path, SourceFile(text, path), [], [d])
        if cache is not None:
            cache.clear()
    elapsed = (time.perf_counter() - t0) * 1000
    return Analysis(uri, text, version, fa, LineIndex(text, encoding), elapsed, reused)


# ---------------------------------------------------------------------------
# diagnostics -> LSP
# ---------------------------------------------------------------------------

_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFO: lsp.DiagnosticSeverity.Information,
    Severity.HINT: lsp.DiagnosticSeverity.Hint,
}


def _docs_file() -> str | None:
    import newt
    root = os.path.dirname(os.path.dirname(os.path.abspath(newt.__file__)))
    p = os.path.join(root, "docs", "diagnostics.md")
    return p if os.path.isfile(p) else None


_DOCS = _docs_file()


def docs_href(code: str, base: str | None = None) -> str | None:
    """Link to the code's section of docs/diagnostics.md (a file URI of the installed docs, or ``base``)."""
    if base:
        return f"{base}#{code.lower()}"
    if _DOCS is None:
        return None
    from pathlib import Path
    return f"{Path(_DOCS).as_uri()}#{code.lower()}"


def lsp_diagnostics(a: Analysis, docs_base: str | None = None, related: bool = True) -> list[lsp.Diagnostic]:
    out = []
    for d in a.file.diagnostics:
        try:
            out.append(_lsp_diagnostic(a, d, docs_base, related))
        except Exception:  # noqa: BLE001 - one odd diagnostic must not hide the others
            log.exception("cannot convert diagnostic %r", d)
    return out


def _lsp_diagnostic(a: Analysis, d: Diagnostic, docs_base, related) -> lsp.Diagnostic:
    msg = d.message
    if d.context:
        msg += f" [{d.context}]"
    if d.hint:
        msg += f"\nhint: {d.hint}"
    href = docs_href(d.code, docs_base)
    data: dict = {"code": d.code}
    if d.kernel:
        data["kernel"] = d.kernel
    for k in ("replace", "param", "value"):
        if k in d.data and isinstance(d.data[k], (str, int, float, bool)):
            data[k] = d.data[k]
    info = []
    owner = a.spec_of(d)
    if owner is not None:
        ka, idx = owner
        data["spec"] = idx
        spec = ka.results[idx].spec
        param = d.data.get("param")
        if param and param in (spec.origins or {}):
            data["origin"] = _range_json(a.index.range(spec.origins[param]))
            if related:
                info.append(lsp.DiagnosticRelatedInformation(
                    lsp.Location(a.uri, a.index.range(spec.origins[param])),
                    f"{param} gets its value here ({spec.label})"))
        elif related and idx > 0 and spec.origins:
            for name, sp in list(spec.origins.items())[:3]:
                info.append(lsp.DiagnosticRelatedInformation(
                    lsp.Location(a.uri, a.index.range(sp)), f"{name} of this specialization comes from here"))
    called_from = d.data.get("called_from")
    if related and isinstance(called_from, int):
        line = a.index.line(called_from - 1)
        col = len(line) - len(line.lstrip()) + 1
        info.append(lsp.DiagnosticRelatedInformation(
            lsp.Location(a.uri, a.index.range(Span(called_from, col, called_from, len(line) + 1))),
            "called from here"))
    return lsp.Diagnostic(
        range=a.index.range(d.span),
        message=msg,
        severity=_SEVERITY.get(d.severity, lsp.DiagnosticSeverity.Error),
        code=d.code,
        code_description=lsp.CodeDescription(href=href) if href else None,
        source="newt",
        related_information=info or None,
        data=data,
    )


def _range_json(r: lsp.Range) -> dict:
    return {"start": {"line": r.start.line, "character": r.start.character},
            "end": {"line": r.end.line, "character": r.end.character}}
