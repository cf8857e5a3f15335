"""The front end's public analyzer: every caller (``newt check``, the language server, tests) reads a file here.

::

    from newt.frontend import Analyzer, AnalysisCache

    analyzer = Analyzer(cache=AnalysisCache())     # cache=None: analyze from scratch every time
    fa = analyzer.analyze(text, "kernels.py")     # -> FileAnalysis; never raises on bad input
    fa.diagnostics                                # every Diagnostic of the file, sorted by position
    for ka in fa.kernels:                         # KernelAnalysis, in file order (jit and registered kinds)
        r = ka.generic                            # SpecResult of the generic check (then one per specialization)
        r.note_at(line, col)                      # (Span, abstract value) of the smallest expression there

The result is the same with or without a cache (a test checks it on random edits).

**Incremental reuse.**  With an :class:`AnalysisCache`, the result of each (jit kernel, specialization) is kept,
keyed by the source text of the kernel and of every jit function of the file it may inline (transitively), the
module-level names those functions read (their kind, constant value or import target) and the specialization.
Analyzing the file again after an edit rebuilds only the kernels whose key changed; a kernel that only moved
(lines inserted above it) is reused with its spans moved.  ``FileAnalysis.reused`` counts the reused results and
``KernelAnalysis.content_key`` is the kernel's key, for the caller's own caches of derived data (layouts, CUDA).

**Kernel kinds.**  Functions decorated with a registered kind (:func:`newt.frontend.register_kernel_kind`) are
dispatched to that kind's analyzer here, in file order with the jit kernels; an analyzer that raises yields one
``N001`` warning for its kernel, never a failed file.  Their results are not cached (a kind's analyzer may read
anything of the module scan).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from newt.diagnostics import Diagnostic, Severity, Span
from newt.language import core as lc

from .builder import Builder, Spec
from .check import (
    FileAnalysis,
    KernelAnalysis,
    SpecResult,
    StaticEnv,
    build_generic,
    dedupe_diagnostics,
    discover_specs,
    failed_kind_analysis,
    infer_pointer_params,
    merge_spec_diagnostics,
    no_gc,
)
from .hostvalues import launch_types
from .kinds import analyzer_for, load_installed_kinds
from .source import _Q, ConfigLit, KernelDef, ModuleScan, SourceFile, parse_with_recovery

__all__ = ["Analyzer", "AnalysisCache", "analyze_source"]

log = logging.getLogger("newt.frontend")


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
    if isinstance(v, _Q):
        return ("q", v.q)
    if isinstance(v, ConfigLit):
        return ("config", _fp_value(v.kwargs, depth + 1), v.num_warps, v.num_stages)
    if isinstance(v, lc.dtype):
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


def _spec_key(spec: Spec) -> tuple:
    return (
        _fp_value(spec.constexprs), spec.num_warps, spec.num_stages, tuple(sorted(spec.pointer_params or ())),
        spec.launched, spec.concrete, _fp_value({k: repr(v) for k, v in (spec.arg_types or {}).items()}),
        _fp_value(spec.divisibility),
        # the generic check's diagnostics carry no context and a specialization's do: a config with no
        # constexprs has the generic's values but must not reuse its context-less diagnostics
        bool(spec.context),
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
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name):
                called.add(n.func.id)
            for a in n.args:
                if isinstance(a, ast.Name):
                    called.add(a.id)
        elif isinstance(n, ast.keyword):
            if isinstance(n.value, ast.Name):
                called.add(n.value.id)
        elif isinstance(n, ast.Return):
            if n.value is not None and not (isinstance(n.value, ast.Constant) and n.value.value is None):
                returns_value = True
    return _Facts(frozenset(names), frozenset(called), returns_value)


class AnalysisCache:
    """Front-end results per (kernel, specialization), reusable across analyses of a file.

    An entry stays while the file it belongs to uses it; once ``keep_versions`` analyses of that file have not
    used it (the kernel was edited since), it is dropped.  ``max_entries`` bounds the whole cache (LRU).
    ``hits`` / ``misses`` count the (kernel, specialization) results reused / built; ``len(cache)`` is the
    number of entries.
    """

    def __init__(self, max_entries: int = 1024, keep_versions: int = 4):
        self.max_entries = max_entries
        self.keep_versions = keep_versions
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._owner: dict[str, tuple[str, int]] = {}  # key -> (path, analysis number of that path when last used)
        self._runs: dict[str, int] = {}  # path -> number of analyses
        self._facts: OrderedDict[str, _Facts] = OrderedDict()
        self._ptrs: OrderedDict[str, frozenset] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def facts(self, text_key: str, node) -> _Facts:
        f = self._facts.get(text_key)
        if f is None:
            f = _facts(node)
            self._facts[text_key] = f
            while len(self._facts) > self.max_entries:
                self._facts.popitem(last=False)
        return f

    def ptrs(self, key: str, compute: Callable[[], set]) -> frozenset:
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

    def put(self, key: str, entry: _Entry, path: str | None = None) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        if path is not None:
            self._owner[key] = (path, self._runs.get(path, 0) + 1)
        while len(self._entries) > self.max_entries:
            k, _ = self._entries.popitem(last=False)
            self._owner.pop(k, None)

    def end_analysis(self, path: str, used: set) -> None:
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

    def clear(self) -> None:
        self._entries.clear()
        self._owner.clear()
        self._facts.clear()
        self._ptrs.clear()


class Analyzer:
    """Analyzes files with the front end, reusing unchanged kernels' results from ``cache`` (see the module)."""

    def __init__(self, cache: AnalysisCache | None = None, *, record_notes: bool = True):
        self.cache = cache
        self.record_notes = record_notes
        # the kernel kinds installed packages advertise (entry points; once per process): every caller -- the
        # editor, ``newt check``, a test -- sees the same kernels, whatever it happened to import before
        load_installed_kinds()

    def analyze(self, text: str, path: str = "<string>") -> FileAnalysis:
        """Check every kernel of a file from its text.  Never raises on bad input: an internal error becomes
        one ``N001`` warning (and empties the cache, which may hold what led to it)."""
        try:
            with no_gc():
                return _Run(self.cache, self.record_notes, text, path).run()
        except Exception as e:  # an internal error becomes a diagnostic, never a dead caller
            log.exception("analysis of %s failed", path)
            if self.cache is not None:
                self.cache.clear()
            d = Diagnostic("N001", Severity.WARNING, Span(1, 1, 1, 2),
                           f"internal error in the newt analyzer: {type(e).__name__}: {e}", file=path)
            return FileAnalysis(path, SourceFile(text, path), [], [d])


class _Run:
    """One analysis of one file."""

    def __init__(self, cache: AnalysisCache | None, record_notes: bool, text: str, path: str):
        self.cache = cache
        self.record_notes = record_notes
        self.text = text
        self.path = path
        self.reused = 0
        self.used: set[str] = set()

    def run(self) -> FileAnalysis:
        path = self.path
        src = SourceFile(self.text, path)
        try:
            chunks, diags = parse_with_recovery(src)
            scan = ModuleScan(src, chunks)
        except (RecursionError, MemoryError) as e:
            d = Diagnostic("N001", Severity.ERROR, Span(1, 1, 1, 2), f"cannot analyze file: {type(e).__name__}",
                           file=path)
            return FileAnalysis(path, src, [], [d])
        self.src, self.scan = src, scan
        env = StaticEnv(scan, src)
        self.segs: dict[str, tuple[int, int]] = {}
        self.texts: dict[str, str] = {}
        self.facts: dict[str, _Facts] = {}
        for name, kd in scan.kernels.items():
            first, last = _segment(kd)
            key = _h("\n".join(src.lines[first - 1:last]))
            self.segs[name] = (first, last)
            self.texts[name] = key
            self.facts[name] = self.cache.facts(key, kd.node) if self.cache is not None else _facts(kd.node)
        called: set[str] = set()
        for f in self.facts.values():
            called |= f.called
        called &= set(scan.kernels)
        kernels: list[KernelAnalysis] = []
        for name in scan.kernel_order:
            kd = scan.kernels[name]
            if kd.kind != "jit":
                analyzer = analyzer_for(kd.kind)
                if analyzer is None:
                    continue
                try:
                    ka = analyzer(scan, src, kd)
                except Exception as e:  # a kind's analyzer must not take the file down
                    ka = failed_kind_analysis(kd, src, e)
            else:
                ka = self.analyze_jit(kd, env, called)
            kernels.append(ka)
            diags.extend(ka.diagnostics)
        # drop semantic diagnostics inside statements we repaired (they are guesses)
        if scan.repaired_lines:
            diags = [d for d in diags if d.code == "N001" or d.span.line not in scan.repaired_lines]
        diags.sort(key=lambda d: (d.span.line, d.span.col, d.code))
        if self.cache is not None:
            self.cache.end_analysis(path, self.used)
        respell(scan.spelling, diags, kernels)
        return FileAnalysis(path, src, kernels, dedupe_diagnostics(diags), scan, reused=self.reused)

    def launches_of(self, name: str) -> list:
        """The launch sites of kernel ``name`` (grouped once per analysis: not one scan of them per kernel)."""
        by = self.__dict__.get("_launches_by")
        if by is None:
            by = self.__dict__["_launches_by"] = {}
            for ls in self.scan.launches:
                by.setdefault(ls.kernel, []).append(ls)
        return by.get(name, [])

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
        used: set[str] = set()
        for n in names:
            used |= self.facts[n].names
        items: list[tuple] = []
        for u in sorted(used):
            if u in scan.kernels:
                items.append((u, "k", scan.kernels[u].kind))
            elif u in scan.namedtuples:
                nt: Any = scan.namedtuples[u]
                items.append((u, "nt", tuple(nt._fields), _fp_value(tuple(nt._field_defaults.items()))))
            elif u in scan.constants:
                items.append((u, "c", _fp_value(scan.constants[u])))
            elif u in scan.aliases:
                items.append((u, "a", scan.aliases[u]))
            elif u in scan.relative_imports or u in scan.conditional:
                items.append((u, "r"))
            elif u in scan.plain_functions:
                items.append((u, "f"))
            elif u in scan.other_names:
                items.append((u, "o"))
            elif u in scan.assigned:
                items.append((u, "v"))
        return _h(items)

    def analyze_jit(self, kd: KernelDef, env: StaticEnv, called: set[str]) -> KernelAnalysis:
        scan, src, cache = self.scan, self.src, self.cache
        node = kd.node
        first, last = self.segs[kd.name]
        ka = KernelAnalysis(kd.name, "jit", node, Span.of_def_name(node, src.lines), Span(first, 1, last, 1),
                            kernel_def=kd)
        launched = bool(self.launches_of(kd.name))
        ka.launched = launched
        ka.helper = (kd.name in called or self.facts[kd.name].returns_value) and not launched
        js = env.jit_source(kd.name)
        ka.jit_source = js
        diags: list[Diagnostic] = []
        dep_names = self.deps(kd.name)
        segs = {n: self.segs[n] for n in dep_names}
        base_key = _h(src.path, self.record_notes, [(n, self.texts[n]) for n in dep_names],
                      self.env_fingerprint(dep_names))
        if ka.helper:
            ptrs: set[str] = set()
        elif cache is not None:
            ptrs = set(cache.ptrs(base_key, lambda: infer_pointer_params(node, scan)))
        else:
            ptrs = infer_pointer_params(node, scan)
        # the dtypes of the tensors the host code passes to unannotated pointers (every launch form: module
        # level, __main__, functions, lambdas; newt.harness examples): the dtype rules then fire in the
        # editor and in `newt check` alike
        host = launch_types(scan, kd, ptrs, self.launches_of(kd.name)) if ptrs else None
        ka.host_types = dict(host.agreed) if host is not None else {}
        specs = discover_specs(kd, scan, src, diags, host, self.launches_of(kd.name))
        # what the results depend on: the kernel's code and the launches' dtypes
        ka.content_key = base_key if host is None or not host.per_launch else _h(base_key, host.key())
        generic = Spec(label="generic", launched=launched, pointer_params=ptrs)
        if host is not None and host.agreed:
            generic.arg_types = host.arg_types(host.agreed)
            generic.context = host.describe(host.agreed)
        for s in specs:
            s.pointer_params = ptrs
        results = []
        for i, spec in enumerate([generic] + specs):
            opaque = ka.helper and i == 0
            key = _h(base_key, opaque, _spec_key(spec))
            entry = None
            if cache is not None:
                self.used.add(key)
                entry = cache.get(key)
                if entry is not None:
                    cache.hits += 1
                    self.reused += 1
                    results.append(_reuse(entry, segs, spec))
                    continue
                cache.misses += 1
            notes: dict | None = {} if self.record_notes else None
            sdiags: list[Diagnostic] = []
            b = Builder(spec, sdiags, notes)
            try:
                fn = build_generic(b, js, opaque)
            except Exception as e:  # an internal error must not hide the rest of the file
                sdiags.append(Diagnostic("N001", Severity.WARNING, ka.span,
                                         f"internal error while checking {kd.name}"
                                         f"{' (' + spec.label + ')' if i else ''}: {type(e).__name__}: {e}",
                                         file=src.path, kernel=kd.name))
                fn = None
            if cache is not None:
                # copies: merge_spec_diagnostics below may add a context to the ones in the result
                cache.put(key, _Entry(fn, [dataclasses.replace(d, data=dict(d.data)) for d in sdiags],
                                      notes or {}, list(b.static_prints), dict(segs)), src.path)
            results.append(SpecResult(spec, fn, sdiags, notes or {}, b.static_prints))
        ka.results = results
        ka.diagnostics = merge_spec_diagnostics(diags, results)
        return ka


def respell(spelling, diags: list, kernels: list) -> None:
    """The messages in the file's spelling (``tl.arange`` in a Triton file: ``newt.frontend.spelling``), in
    place: the diagnostics of this analysis are its own objects (the cache keeps copies)."""
    if spelling.identity:
        return
    seen: set[int] = set()
    every = list(diags)
    for ka in kernels:
        every.extend(ka.diagnostics)
        for r in ka.results:
            every.extend(r.diagnostics)
    for d in every:
        if id(d) in seen:
            continue
        seen.add(id(d))
        d.message = spelling.respell(d.message)
        d.hint = spelling.respell(d.hint)
        d.context = spelling.respell(d.context)


def _segment(kd: KernelDef) -> tuple[int, int]:
    """The lines of a function, decorators included."""
    node = kd.node
    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return first, node.end_lineno or node.lineno


def _reuse(entry: _Entry, segs: dict, spec: Spec) -> SpecResult:
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
        if moved and data.get("call_chain"):
            data["call_chain"] = [dict(c, line=mv_line(c["line"])) if c.get("file") == d.file else c
                                  for c in data["call_chain"]]
        diags.append(dataclasses.replace(d, span=mv(d.span), data=data,
                                         context=spec.context if d.context is not None else None))
    notes: Mapping = entry.notes if not moved else _MovedNotes(entry.notes, mv)
    return SpecResult(spec, entry.fn, diags, notes, list(entry.static_prints))


class _MovedNotes(Mapping):
    """A cached notes dict whose spans move by a few lines; moved on first use (most are never read)."""

    def __init__(self, notes: dict, mv: Callable[[Span], Span]):
        self._src: dict | None = notes
        self._mv: Callable[[Span], Span] | None = mv
        self._d: dict | None = None

    def _get(self) -> dict:
        if self._d is None:
            mv, src = self._mv, self._src
            assert mv is not None and src is not None
            self._d = {mv(s): av for s, av in src.items()}
            self._src = self._mv = None
        return self._d

    def __getitem__(self, k: Any):
        return self._get()[k]

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._d if self._d is not None else (self._src or {}))

    def items(self):
        return self._get().items()


def analyze_source(text: str, path: str = "<string>", record_notes: bool = True) -> FileAnalysis:
    """Check every kernel of a file from its text: ``Analyzer(record_notes=...).analyze(text, path)`` with no
    cache.  Never raises on bad input."""
    return Analyzer(record_notes=record_notes).analyze(text, path)
