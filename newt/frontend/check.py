"""The front end's results and its compile path.

* ``FileAnalysis`` / ``KernelAnalysis`` / ``SpecResult``: what ``Analyzer.analyze`` (``newt/frontend/analyzer.py``,
  the editor and ``newt check`` path) returns, and the pieces it is made of (spec discovery, pointer inference).
* ``build_ir(fn, arg_types, constexprs, ...)``: the compile and interpreter
  path, for one concrete specialization; raises ``CompilationError``.
* ``build_specialization(js, ...)``: one concrete specialization as a ``SpecResult`` (diagnostics and notes,
  never raises on a bad kernel): what an editor shows for a specialization the user picked.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import logging
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field

from newt.diagnostics import CompilationError, Diagnostic, Severity, Span
from newt.ir.core import Loc
from newt.language import core as lc

from .builder import Builder, Spec
from .kinds import module_aliases, trusted_roots
from .parsing import no_gc
from .semantic import SemError
from .source import _Q, NOT_STATIC, ConfigLit, JitName, KernelDef, ModuleScan, SourceFile, fast_walk
from .values import Const, GlobalEnv, JitRef, JitSource, Opaque, PyFunc, from_python

__all__ = ["build_ir", "build_specialization", "FileAnalysis", "KernelAnalysis", "SpecResult", "StaticEnv",
           "infer_pointer_params"]

log = logging.getLogger("newt.frontend")

MAX_SPECS = 64
_LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "stream", "warmup", "grid",
                   "enable_fp_fusion", "debug", "launch_cooperative_grid"}


# ---------------------------------------------------------------------------
# static globals
# ---------------------------------------------------------------------------

_TRUSTED_ROOTS = ("newt", "math")
#: packages whose functions are host code, never kernel code: calling one of their names in a kernel is an error
_HOST_ONLY_ROOTS = ("torch", "numpy")


def resolve_qualname(q: str):
    """Import one of our own modules (never the user's) and walk attributes."""
    parts = q.split(".")
    if parts[0] not in _TRUSTED_ROOTS and parts[0] not in trusted_roots():
        raise LookupError(q)
    for i in range(len(parts), 0, -1):
        modname = ".".join(parts[:i])
        try:
            obj = importlib.import_module(modname)
        except ImportError:
            continue
        if modname == "newt.language.core" and len(parts) > i and not hasattr(obj, parts[i]):
            obj = importlib.import_module("newt.language")  # Triton's core module is the whole language
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(q)


class StaticEnv(GlobalEnv):
    """Module globals as far as they can be known from the text alone."""

    def __init__(self, scan: ModuleScan, src: SourceFile):
        self.scan = scan
        self.src = src
        # weak: a JitSource points back at its env, and a strong cycle would keep every analysis (AST, scan,
        # text) alive until a full garbage collection
        self._jit: weakref.WeakValueDictionary[str, JitSource] = weakref.WeakValueDictionary()

    def jit_source(self, name: str) -> JitSource:
        js = self._jit.get(name)
        if js is None:
            kd = self.scan.kernels[name]
            js = JitSource(name, kd.node, self.src, self)
            self._jit[name] = js
        return js

    def lookup(self, name):
        scan = self.scan
        kd = scan.kernels.get(name)
        if kd is not None:
            if kd.kind == "jit":
                return JitRef(self.jit_source(name))
            return Opaque(f"{kd.kind} kernel")
        nt = scan.namedtuples.get(name)
        if nt is not None:
            return PyFunc(name, nt)  # called in a kernel: a named tuple of the values (calls.make_namedtuple)
        if name in scan.constants:
            return self._convert(scan.constants[name])
        if name in scan.aliases:
            q = scan.aliases[name]
            try:
                return from_python(resolve_qualname(q))
            except (LookupError, AttributeError, ImportError):
                # a name of our own modules that does not exist is an object we cannot use; another package's
                # (the user's, torch's) may be anything, a jit function included: unknown, and silent.  So is a
                # name of another project read as a kind's own (``helion.runtime.triton.helpers.triton_wait_signal``,
                # a Triton jit function of Helion's that deuteron does not provide): the file is that project's
                written = scan.imports.get(name, q).split(".")[0]
                known = _TRUSTED_ROOTS + trusted_roots() + _HOST_ONLY_ROOTS
                ours = q.split(".")[0] in known and written not in module_aliases()
                return Opaque(q) if ours else Opaque()
        if name in scan.relative_imports or name in scan.conditional:
            return Opaque()  # exists, value unknown to a file-at-a-time analysis (a relative import, an if/else alias)
        if name in scan.plain_functions:
            return PyFunc(name)
        if name in scan.other_names:
            return PyFunc(name)
        if name in scan.assigned:
            return Opaque()
        return None

    def _convert(self, v):
        if isinstance(v, _Q):
            try:
                return from_python(resolve_qualname(v.q))
            except (LookupError, AttributeError, ImportError):
                # as for an imported name: another package's object (``_tanh = shim.tanh``) may be a jit function
                known = _TRUSTED_ROOTS + trusted_roots() + _HOST_ONLY_ROOTS
                return Opaque(v.q) if v.q.split(".")[0] in known else Opaque()
        if isinstance(v, (list, tuple)):
            from .values import TupleV
            return TupleV([self._convert(x) for x in v])
        if isinstance(v, ConfigLit):
            return Opaque("config")
        return from_python(v)


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------


@dataclass
class SpecResult:
    """The front end's result for one specialization of one kernel.

    ``spec``: what was known (``Spec``: label, constexprs, argument types, ...); ``fn``: the ``ir.Function``
    (None when the kernel has errors, or for a helper checked on its own); ``diagnostics``; ``notes``: the
    abstract value (``TensorV`` with its dtype and shape, ``Const``, ``Opaque`` ...) of every expression,
    by its ``Span`` — what hover, completion and inlay hints show; ``static_prints``: ``nl.static_print``
    output."""

    spec: Spec
    fn: object  # ir.Function or None
    diagnostics: list
    notes: Mapping
    static_prints: list
    _by_line: dict | None = field(default=None, init=False, repr=False, compare=False)

    def note_at(self, line: int, col: int):
        """``(span, value)`` of the smallest noted expression that contains the 1-based position (a column in
        characters, end inclusive so that a cursor just after a name finds it), or None."""
        by_line = self._by_line
        if by_line is None:
            by_line = {}
            for span, av in (self.notes or {}).items():
                for ln in range(span.line, span.end_line + 1):
                    by_line.setdefault(ln, []).append((span, av))
            for lst in by_line.values():
                lst.sort(key=_span_size)
            self._by_line = by_line
        for span, av in by_line.get(line, ()):
            if (span.line, span.col) <= (line, col) <= (span.end_line, span.end_col):
                return span, av
        return None


def _span_size(item) -> tuple:
    s = item[0]
    return (s.end_line - s.line, (s.end_col - s.col) if s.end_line == s.line else 10 ** 6)


@dataclass
class KernelAnalysis:
    """One kernel (or jit helper) of a file: ``results`` holds the generic check first, then one ``SpecResult``
    per specialization the file reveals; ``diagnostics`` merges them (once each)."""

    name: str
    kind: str  # "jit" or a registered kernel kind (newt.frontend.kinds)
    node: ast.AST
    span: Span  # the function name
    def_span: Span  # the whole definition
    results: list = field(default_factory=list)  # SpecResult, generic first
    diagnostics: list = field(default_factory=list)
    launched: bool = False
    helper: bool = False
    kernel_def: KernelDef | None = None
    jit_source: JitSource | None = None
    #: what the kernel's results depend on (its text, its callees' texts, the module names they read, the
    #: dtypes its launches pass); equal keys mean equal results, so callers may key their own caches of
    #: derived data on it (jit kernels only)
    content_key: str | None = None
    #: unannotated pointer parameter -> (dtype name, how the host code says it) where every launch (and
    #: ``newt.harness`` example) that says agrees: the generic check and every specialization use them
    host_types: dict = field(default_factory=dict)

    @property
    def generic(self) -> SpecResult | None:
        return self.results[0] if self.results else None


@dataclass
class FileAnalysis:
    """The analysis of one file (``Analyzer.analyze`` / ``analyze_source``): ``kernels`` in file order,
    every ``diagnostics`` of the file sorted by position, the parsed ``source`` and its module ``scan``
    (imports, constants, launches); ``reused``: how many (kernel, specialization) results came from the
    analyzer's cache."""

    path: str
    source: SourceFile
    kernels: list
    diagnostics: list
    scan: ModuleScan | None = None
    reused: int = 0
    _spec_of: dict | None = field(default=None, init=False, repr=False, compare=False)

    def kernel_at(self, line: int) -> KernelAnalysis | None:
        """The innermost kernel whose definition (decorators included) contains the 1-based line."""
        best = None
        for k in self.kernels:
            if k.def_span.line <= line <= k.def_span.end_line:
                if best is None or k.def_span.line >= best.def_span.line:
                    best = k
        return best

    def kernel_named(self, name: str) -> KernelAnalysis | None:
        return next((k for k in self.kernels if k.name == name), None)

    def spec_of(self, diag: Diagnostic) -> tuple[KernelAnalysis, int] | None:
        """(kernel, index in ``kernel.results``) of the specialization that produced a diagnostic."""
        if self._spec_of is None:
            m: dict = {}
            for k in self.kernels:
                for i, r in enumerate(k.results):
                    for d in r.diagnostics:
                        m.setdefault(id(d), (k, i))
            self._spec_of = m
        return self._spec_of.get(id(diag))


# ---------------------------------------------------------------------------
# generic pointer inference
# ---------------------------------------------------------------------------

def _pointer_builtins() -> frozenset:
    """The builtins whose stub declares ``pointer`` as its first parameter (load, store, atomics)."""
    out = set()
    for name, stub in lc.BUILTINS.items():
        try:
            first = next(iter(inspect.signature(stub).parameters), None)
        except (TypeError, ValueError):
            continue
        if first == "pointer":
            out.add(name)
    return frozenset(out)


_PTR_FUNCS = _pointer_builtins()


def _additive_names(node, out: set):
    """Names that appear as bare terms of a +/- chain (candidates for the pointer)."""
    if isinstance(node, ast.Name):
        out.add(node.id)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        _additive_names(node.left, out)
        _additive_names(node.right, out)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        _additive_names(node.left, out)  # ptr - offset: what is subtracted is never the pointer
    elif isinstance(node, ast.Subscript):
        _additive_names(node.value, out)
    elif isinstance(node, ast.IfExp):
        _additive_names(node.body, out)
        _additive_names(node.orelse, out)


def infer_pointer_params(fdef: ast.FunctionDef, scan: ModuleScan | None = None, _seen=None) -> set:
    """Parameters that flow into the pointer argument of a load/store/atomic."""
    _seen = _seen if _seen is not None else set()
    if fdef.name in _seen:
        return set()
    _seen.add(fdef.name)
    aliases = scan.aliases if scan else {}
    params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
    candidates: set = set()
    assigns: dict[str, list] = {}
    calls = []
    for node in fast_walk(fdef):
        if isinstance(node, ast.Call):
            fname = None
            if isinstance(node.func, ast.Attribute):
                fname = node.func.attr
            elif isinstance(node.func, ast.Name):
                fname = node.func.id
                q = aliases.get(fname, "")
                if q.startswith("newt.language."):
                    fname = q.rsplit(".", 1)[1]
                elif scan is not None and fname in scan.kernels:
                    calls.append((node, scan.kernels[fname].node))
                    fname = None
            if fname in _PTR_FUNCS:
                arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "pointer"),
                                                          None)
                if arg is not None:
                    _additive_names(arg, candidates)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigns.setdefault(t.id, []).append(node.value)
                elif isinstance(t, ast.Tuple):
                    for e in t.elts:
                        if isinstance(e, ast.Name):
                            assigns.setdefault(e.id, []).append(None)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            assigns.setdefault(node.target.id, []).append(
                ast.BinOp(left=ast.Name(id=node.target.id, ctx=ast.Load()), op=node.op, right=node.value))
    # helpers in the same file: a param passed where the callee expects a pointer
    for call, callee in calls:
        inner = infer_pointer_params(callee, scan, _seen)
        cparams = [a.arg for a in callee.args.posonlyargs + callee.args.args]
        for i, a in enumerate(call.args):
            if i < len(cparams) and cparams[i] in inner:
                _additive_names(a, candidates)
        for k in call.keywords:
            if k.arg in inner:
                _additive_names(k.value, candidates)
    work = list(candidates)
    while work:
        n = work.pop()
        for v in assigns.get(n, []):
            if v is None:
                continue
            found: set = set()
            _additive_names(v, found)
            for f in found - candidates:
                candidates.add(f)
                work.append(f)
    return {p for p in params if p in candidates}


# ---------------------------------------------------------------------------
# specializations found in the file
# ---------------------------------------------------------------------------


def _wrapped_by_unknown(kd: KernelDef, scan: ModuleScan) -> bool:
    """Whether a decorator of the kernel other than jit/autotune/heuristics may supply arguments to its launches:
    one the file does not define as something known (``@libtuner(...)``, ``@fla_cache_autotune(...)``), or a
    ``heuristics`` whose values are not a dict literal the file spells out."""
    for dec in kd.decorator_nodes:
        if dec is kd.autotune:
            continue
        h = kd.heuristics
        if h is not None and dec is h:
            arg = h.args[0] if h.args else next((k.value for k in h.keywords if k.arg == "values"), None)
            if not isinstance(arg, ast.Dict) or any(k is None for k in arg.keys):
                return True
            continue
        q = scan.resolve(dec.func if isinstance(dec, ast.Call) else dec)
        if q is None or not q.startswith("newt."):
            return True
    return False


def _is_constexpr_ann(ann, scan: ModuleScan) -> bool:
    if ann is None:
        return False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        return ann.value.strip() in ("constexpr", "nl.constexpr", "tl.constexpr")
    q = scan.resolve(ann)
    return q in ("newt.language.constexpr", "newt.language.core.constexpr")


def _fmt_cx(d: dict) -> str:
    return ", ".join(f"{k}={v!r}" if not isinstance(v, lc.dtype) else f"{k}={v!r}" for k, v in d.items())


def discover_specs(kd: KernelDef, scan: ModuleScan, src: SourceFile, diags: list, host=None,
                   launches: list | None = None) -> list[Spec]:
    """The specializations the file reveals (autotune configs, launches with constexpr values, defaults), with
    N060 for launches and configs that do not fit the signature.  ``host``: the launches' pointer dtypes
    (``hostvalues.LaunchTypes``): every spec gets the agreed ones, a launch's spec its own, and a launch that
    passes dtypes the others do not gets a spec of its own even without constexpr values.  ``launches``: the
    kernel's launch sites, when the caller has them grouped (else read from ``scan``)."""
    fdef = kd.node
    agreed_types = host.arg_types(host.agreed) if host is not None else {}
    plist = [a for a in fdef.args.posonlyargs + fdef.args.args]
    pnames = [a.arg for a in plist]
    cx = [a.arg for a in plist if _is_constexpr_ann(a.annotation, scan)]
    defaults = dict(zip(pnames[len(pnames) - len(fdef.args.defaults):], fdef.args.defaults))
    provided_by_decorators = set()
    specs: list[Spec] = []
    if launches is None:
        launches = [ls for ls in scan.launches if ls.kernel == kd.name]
    launched = bool(launches)

    for i, cfg in enumerate(kd.configs):
        vals = {}
        origins = {}
        for k, v in cfg.kwargs.items():
            provided_by_decorators.add(k)
            v = _resolve_value(v)
            if k not in pnames:
                if cfg.speculative:
                    continue  # another path's config (a HIP option, say): not known to apply here
                node = cfg.key_nodes.get(k, cfg.node)
                diags.append(Diagnostic("N060", Severity.ERROR, src.span(node),
                                        f"autotune config sets {k!r}, which is not a parameter of {kd.name}",
                                        file=src.path, kernel=kd.name))
                continue
            if v is NOT_STATIC:
                continue
            vals[k] = v
            kn = cfg.key_nodes.get(k)
            if kn is not None:
                # the value node follows the key in the dict literal
                d = cfg.node.args[0] if cfg.node.args else None
                if isinstance(d, ast.Dict):
                    idx = d.keys.index(kn)
                    origins[k] = src.span(d.values[idx])
        ctx = f"autotune config #{i + 1} at line {cfg.node.lineno}: {_fmt_cx(vals)}"
        specs.append(Spec(label=f"config #{i + 1} ({_fmt_cx(vals)})", constexprs=vals, num_warps=cfg.num_warps,
                          num_stages=cfg.num_stages, origins=origins, context=ctx, launched=launched,
                          arg_types=dict(agreed_types)))
    if kd.autotune is not None:
        for k in kd.autotune.keywords:
            if k.arg == "key" and isinstance(k.value, (ast.List, ast.Tuple)):
                for e in k.value.elts:
                    if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value not in pnames:
                        diags.append(Diagnostic("N060", Severity.ERROR, src.span(e),
                                                f"autotune key {e.value!r} is not a parameter of {kd.name}",
                                                file=src.path, kernel=kd.name))
    for k in kd.heuristic_keys:
        provided_by_decorators.add(k)
        if k not in pnames:
            node = kd.heuristics
            diags.append(Diagnostic("N060", Severity.ERROR, src.span(node),
                                    f"heuristics set {k!r}, which is not a parameter of {kd.name}",
                                    file=src.path, kernel=kd.name))

    # a launch whose specialization is one already found (most launches of a big file pass the same constexprs)
    # is not built: the de-duplication below would drop it (its diagnostics are still made)
    found = {_spec_key(s.constexprs, s.arg_types) for s in specs}
    agreed_key = _spec_key({}, agreed_types)[1]
    in_decorators = {c for cfg in kd.configs for c in cfg.kwargs} if kd.autotune is not None else set()
    # (per kernel, not per launch: a big file launches each kernel thousands of times)
    pset, cxset = set(pnames), set(cx)
    cx_at = [(i, p) for i, p in enumerate(pnames) if p in cxset]
    required = [p for p in pnames if p not in defaults and p not in provided_by_decorators]
    if kd.autotune is not None and not kd.configs_static:
        required = []  # the configs come from code we do not run: they may provide any parameter
    if required and _wrapped_by_unknown(kd, scan):
        required = []  # a decorator we do not know (a library's own autotuner) may provide any parameter
    for ls in launches:
        vals, origins = {}, {}  # origins: the nodes, made spans for a specialization that is kept
        nargs = ls.nargs
        given = set(pnames[:nargs])
        if nargs > len(pnames):
            diags.append(Diagnostic("N060", Severity.ERROR, src.span(ls.node),
                                    f"{kd.name} takes {len(pnames)} arguments but the launch passes {ls.nargs}",
                                    file=src.path, kernel=kd.name))
        # (the values are read only where a constexpr is passed: ``ls.arg``/``ls.kwarg`` evaluate no launch for a
        # literal, and most launches pass tensors whose values are never asked for)
        for idx, p in cx_at:
            if idx >= nargs:
                break
            v = ls.arg(idx)
            if v is not NOT_STATIC and _literal_ok(v):
                vals[p] = v
                origins[p] = ls.node.args[idx]
        for k in ls.kw_nodes:
            if k not in pset:
                if k in _LAUNCH_OPTIONS:
                    continue
                import difflib
                sugg = difflib.get_close_matches(k, pnames, n=1)
                diags.append(Diagnostic("N060", Severity.ERROR, src.span(ls.kw_nodes[k]),
                                        f"{kd.name} has no parameter {k!r}", file=src.path, kernel=kd.name,
                                        hint=f"did you mean {sugg[0]!r}?" if sugg else None))
                continue
            if k in given:
                diags.append(Diagnostic("N060", Severity.ERROR, src.span(ls.kw_nodes[k]),
                                        f"{k!r} is passed both by position and by keyword", file=src.path,
                                        kernel=kd.name))
            given.add(k)
            if k in provided_by_decorators and k in in_decorators:
                diags.append(Diagnostic("N060", Severity.ERROR, src.span(ls.kw_nodes[k]),
                                        f"{k!r} is set by the autotune configs and must not be passed at launch",
                                        file=src.path, kernel=kd.name))
                continue
            if k in cxset:
                v = ls.kwarg(k)
                if v is not NOT_STATIC and _literal_ok(v):
                    vals[k] = v
                    origins[k] = ls.kw_nodes[k].value
        missing = [p for p in required if p not in given]
        if missing and not (any(isinstance(a, ast.Starred) for a in ls.node.args)
                            or any(k.arg is None for k in ls.node.keywords)):
            diags.append(Diagnostic("N060", Severity.ERROR, src.span(ls.node),
                                    f"the launch of {kd.name} is missing argument(s): {', '.join(missing)}",
                                    file=src.path, kernel=kd.name))
        nw = ls.kwarg("num_warps") if "num_warps" in ls.kw_nodes else None
        own = host.own(ls) if host is not None else {}  # this launch's dtypes where they differ from the agreed
        if vals or own:
            arg_types = {**agreed_types, **host.arg_types(own)} if own else None
            key = _spec_key(vals, arg_types or {}) if own else (_spec_key(vals, {})[0], agreed_key)
            if key in found:
                continue
            found.add(key)
            what = ", ".join(x for x in (_fmt_cx(vals), host.describe_types(own) if own else "") if x)
            ctx = f"launch at line {ls.node.lineno}: {what}"
            specs.append(Spec(label=f"launch at line {ls.node.lineno} ({what})", constexprs=vals,
                              num_warps=nw if isinstance(nw, int) else None,
                              origins={p: src.span(n) for p, n in origins.items()}, context=ctx,
                              launched=True, arg_types=(arg_types or {}) if own else dict(agreed_types)))
    if not specs and cx:
        dvals = {}
        for p in cx:
            d = defaults.get(p)
            if d is not None:
                try:
                    from .source import StaticEval
                    v = StaticEval(scan).eval(d)
                except Exception:
                    continue
                if _literal_ok(v):
                    dvals[p] = v
        if dvals and all(p in dvals for p in cx):
            specs.append(Spec(label=f"defaults ({_fmt_cx(dvals)})", constexprs=dvals,
                              context=f"default values: {_fmt_cx(dvals)}", launched=launched,
                              origins={p: src.span(defaults[p]) for p in dvals}, arg_types=dict(agreed_types)))
    # de-duplicate
    seen = set()
    out = []
    for s in specs:
        key = _spec_key(s.constexprs, s.arg_types)
        if key in seen:
            continue
        seen.add(key)
        out.append(s)
    return out[:MAX_SPECS]


def _spec_key(constexprs: dict, arg_types: dict) -> tuple:
    """What makes two specializations the same (``discover_specs`` keeps the first)."""
    if len(constexprs) == 1 and not arg_types:  # (what most launches give: without sorting or generators)
        for k, v in constexprs.items():
            return (((k, repr(v)),), ())
    return (tuple(sorted((k, repr(v)) for k, v in constexprs.items())),
            tuple(sorted((k, str(t)) for k, t in arg_types.items())))


def _literal_ok(v) -> bool:
    if isinstance(v, (bool, int, float, str, JitName)) or v is None:
        return True
    if isinstance(v, lc.dtype):
        return True
    if isinstance(v, _Q):
        return False
    return False


def _resolve_value(v):
    """Config values may name our own objects (``nl.float16``); resolve them, or give up."""
    if isinstance(v, _Q):
        try:
            obj = resolve_qualname(v.q)
        except (LookupError, AttributeError, ImportError):
            return NOT_STATIC
        if isinstance(obj, lc.constexpr):
            obj = obj.value
        return obj if _literal_ok(obj) else NOT_STATIC
    return v


# ---------------------------------------------------------------------------
# analysis of a whole file
# ---------------------------------------------------------------------------

def failed_kind_analysis(kd: KernelDef, src: SourceFile, e: Exception) -> KernelAnalysis:
    """The result for a kernel whose kind's analyzer raised: one ``N001`` warning."""
    sp = src.span(kd.node)
    d = Diagnostic("N001", Severity.WARNING, Span(sp.line, sp.col, sp.line, sp.col + 3),
                   f"internal error while analyzing {kd.name}: {type(e).__name__}: {e}", file=src.path)
    return KernelAnalysis(kd.name, kd.kind, kd.node, Span.of_def_name(kd.node, src.lines), sp, diagnostics=[d],
                          kernel_def=kd)


def merge_spec_diagnostics(diags: list, results: list) -> list:
    """A kernel's diagnostics: ``diags`` (about its launches and configs), then the generic check's, then
    those only some specializations reveal (once each, with how many more specializations share them)."""
    seen = set()
    merged = list(diags)
    for d in results[0].diagnostics:
        key = (d.code, d.span, d.message)
        if key not in seen:
            seen.add(key)
            merged.append(d)
    extra: dict = {}
    for r in results[1:]:
        for d in r.diagnostics:
            if d.code == "N051":
                continue
            key = (d.code, d.span, d.message)
            if key in seen:
                continue
            if key in extra:
                extra[key][1] += 1
                continue
            extra[key] = [d, 0]
    for d, more in extra.values():
        if more:
            d.context = f"{d.context} (and {more} more specialization{'s' if more > 1 else ''})"
        merged.append(d)
    return merged


def build_generic(b: Builder, js: JitSource, opaque_params: bool):
    """Run ``b`` over ``js``: as a kernel, or (``opaque_params``) as a helper checked on its own, whose
    parameters are unknown values (then no IR: returns None)."""
    if not opaque_params:
        return b.build_function(js, is_kernel=True)
    # helper checked on its own: parameters are unknown values
    from newt import ir

    from .builder import FLAG_RET, Frame
    frame = Frame(js, None, is_kernel=False)
    b.frames.append(frame)
    b.region = ir.Region()
    node = js.node
    for p in list(node.args.posonlyargs) + list(node.args.args):
        is_cx, ty = b._param_annotation(p)
        if ty is not None and not is_cx:
            from .values import TensorV
            v = ir.Value(ty, name=p.arg)
            b.region.args.append(v)
            frame.scope[p.arg] = TensorV(v)
        else:
            frame.scope[p.arg] = Opaque()
    frame.scope[FLAG_RET] = Const(False)
    b.stmts(node.body)
    b.frames.pop()
    return None


def dedupe_diagnostics(diags: list) -> list:
    """``diags`` without repeats (same code, span, message and context), in order."""
    out, seen = [], set()
    for d in diags:
        k = (d.code, d.span, d.message, d.context)
        if k in seen:
            continue
        seen.add(k)
        out.append(d)
    # the same error from a check with the launches' pointer dtypes and from one without (a jit helper
    # checked on its own, another kernel): once, without the dtypes' context, which it does not depend on
    plain = {(d.code, d.span, d.message) for d in out if not _dtype_context(d.context)}
    return [d for d in out if not (_dtype_context(d.context) and (d.code, d.span, d.message) in plain)]


def _dtype_context(ctx) -> bool:
    return bool(ctx) and ctx.startswith("pointer dtypes from the ")


# ---------------------------------------------------------------------------
# the compile path
# ---------------------------------------------------------------------------


def build_specialization(js: JitSource, *, constexprs: dict, arg_types: dict, divisibility: dict | None = None,
                         num_warps: int | None = None, num_stages: int | None = None, label: str = "concrete",
                         record_notes: bool = True) -> SpecResult:
    """Build one concrete specialization of ``js`` (a ``KernelAnalysis.jit_source``) as ``build_ir`` does, but
    return its diagnostics (and, with ``record_notes``, the abstract value of every expression) instead of
    raising; an internal error becomes an ``N001`` error at the kernel's name.  The IR is not verified
    (``newt.ir.verify(result.fn, concrete=True)`` does it)."""
    spec = Spec(label=label, constexprs=dict(constexprs), arg_types=dict(arg_types),
                divisibility=dict(divisibility or {}), num_warps=num_warps, num_stages=num_stages,
                launched=True, concrete=True)
    diags: list[Diagnostic] = []
    notes: dict | None = {} if record_notes else None
    b = Builder(spec, diags, notes)
    fn = None
    try:
        with no_gc():
            fn = b.build_function(js, is_kernel=True)
    except Exception as e:  # an internal error is reported with the kernel, not raised
        log.exception("concrete build of %s failed", js.name)
        diags.append(Diagnostic("N001", Severity.ERROR, Span.of_def_name(js.node, js.src.lines, js.col_shift),
                                f"internal error: {type(e).__name__}: {e}", file=js.src.path, kernel=js.name))
    return SpecResult(spec, fn, diags, notes or {}, b.static_prints)


def build_ir(fn, arg_types: dict, constexprs: dict, divisibility: dict | None = None,
             num_warps: int | None = None, num_stages: int | None = None, verify: bool = True):
    """Build the IR of one concrete specialization.

    ``fn`` is a ``JitSource`` or a Python function; ``arg_types`` maps every
    run-time parameter to a dtype (``pointer_type(float32)``, ``int32`` ...);
    ``constexprs`` maps constexpr parameters (and specialized ints) to values.
    Raises ``CompilationError`` pointing at the user's line.
    """
    from .values import jit_source_from_function
    if isinstance(fn, JitSource):
        js = fn
    elif getattr(fn, "__newt_jit__", False):
        js = fn.jit_source()
    else:
        js = jit_source_from_function(fn)
    spec = Spec(label="concrete", constexprs=dict(constexprs), arg_types=dict(arg_types),
                divisibility=dict(divisibility or {}), num_warps=num_warps, num_stages=num_stages,
                launched=True, concrete=True)
    diags: list[Diagnostic] = []
    b = Builder(spec, diags, None)
    with no_gc():
        irfn = b.build_function(js, is_kernel=True)
    errors = [d for d in diags if d.severity == Severity.ERROR]
    if errors:
        # the first error as the cause, as Triton's CompilationError carries the error that stopped it
        first = errors[0]
        cause = SemError(first.code, first.message, first.hint, first.data,
                         location=Loc(first.file if first.file != "<unknown>" else js.src.path, first.span.line,
                                      first.span.col, first.span.end_line, first.span.end_col))
        raise CompilationError(errors, js.src.text, kernel=js.name, sources=b.sources) from cause
    if verify:
        from newt.ir import verify as _verify
        _verify(irfn, concrete=True)
    irfn.static_prints = b.static_prints
    irfn.warnings = [d for d in diags if d.severity != Severity.ERROR]
    return irfn
