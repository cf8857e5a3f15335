"""deuteron's static checker, plugged into ``newt.frontend.analyze_source``.

``import deuteron`` imports this module; it registers ``@dt.kernel`` as a kernel
kind with :func:`newt.frontend.register_kernel_kind` (:func:`register`).  It reads
the kernel's source only: no torch import, no user code run.  Diagnostics are
``newt.diagnostics.Diagnostic`` values with the ``D0xx`` codes, so the
editor, ``python -m newt check`` and ``kernel(...)`` report the same problems.
"""

from __future__ import annotations

import ast

from newt.diagnostics import Diagnostic, Severity, Span
from newt.frontend import KernelAnalysis, SpecResult, register_kernel_kind, register_module_alias

from .structure import KernelStructure, StaticResolver

__all__ = ["analyze_kernel", "check_function_source", "GenericSpec"]


class GenericSpec:
    """What a ``SpecResult`` of a deuteron kernel is about (the editor shows ``label``)."""

    def __init__(self, label: str = "generic"):
        self.label = label
        self.constexprs = {}
        self.context = None
        self.launched = False

    def __repr__(self):
        return f"GenericSpec({self.label})"


_SEV = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}


def _shadowed(fdef: ast.FunctionDef) -> set:
    """Names that are local to the kernel function (a parameter named ``dt`` hides the module)."""
    return {a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs}


def structure_diagnostics(st: KernelStructure, src, kernel: str, decorators=()) -> list:
    for dec in decorators:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if st.resolver.dt_name(target) == "kernel":
            st.check_decorator(dec)
    out = []
    for p in st.problems:
        out.append(Diagnostic(p.code, _SEV[p.severity], src.span(p.node), p.message, hint=p.hint, file=src.path,
                              kernel=kernel))
    return out


def analyze_kernel(scan, src, kd) -> KernelAnalysis:
    """deuteron's kernel-kind analyzer (``register_kernel_kind``): check one ``@dt.kernel`` from the file's text."""
    node = kd.node
    resolver = StaticResolver(scan.aliases, _shadowed(node))
    st = KernelStructure(node, resolver, getattr(scan, "plain_functions", None))
    diags = structure_diagnostics(st, src, kd.name, node.decorator_list)
    diags += launch_diagnostics(scan, src, kd, st, diags)
    if _is_helion(scan, node):
        diags = [_helion_note(d) for d in diags]
    notes = {}
    for n, note in st.notes:
        try:
            span = src.span(n)
        except Exception:  # a node without a position
            continue
        notes[span] = _merged_note(notes.get(span), note)
    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
    def_span = Span(first, 1, node.end_lineno or node.lineno, 1)
    ka = KernelAnalysis(kd.name, "deuteron", node, Span.of_def_name(node, src.lines), def_span, kernel_def=kd)
    ka.results = [SpecResult(GenericSpec(), None, list(diags), notes, [])]
    ka.diagnostics = _dedupe(diags)
    ka.launched = True
    ka.structure = st
    return ka


def _is_helion(scan, node) -> bool:
    """A ``@helion.kernel`` (Helion's names read as deuteron's: ``newt.frontend.source.triton_as_newt``)."""
    imports = getattr(scan, "imports", None) or {}
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        while isinstance(target, ast.Attribute):
            target = target.value
        if isinstance(target, ast.Name) and str(imports.get(target.id, "")).split(".")[0] == "helion":
            return True
    return False


def _helion_note(d: Diagnostic) -> Diagnostic:
    """In a Helion kernel, what deuteron does not cover (D004) is a note, not an error: Helion may support it."""
    if d.code != "D004":
        return d
    d.severity = Severity.INFO
    d.message = f"not checked: deuteron, which checks Helion kernels here, does not cover this ({d.message})"
    d.hint = "Helion itself may accept it; the editor's checks of this kernel skip it"
    return d


def _dedupe(diags):
    seen, out = set(), []
    for d in diags:
        k = (d.code, d.span, d.message)
        if k in seen:
            continue
        seen.add(k)
        out.append(d)
    out.sort(key=lambda d: (d.span.line, d.span.col, d.code))
    return out


def check_function_source(text: str, path: str = "<string>") -> list:
    """All deuteron diagnostics of a file's text (a convenience over ``analyze_source``)."""
    from newt.frontend import analyze_source
    fa = analyze_source(text, path)
    return [d for d in fa.diagnostics if d.code.startswith("D")]


#: deuteron's diagnostic codes (documented in docs/diagnostics.md)
CODES = {
    "D001": ("dt-outside-tile", "tensor work outside any dt.tile loop runs on the host, not in the kernel"),
    "D002": ("dt-index-rank", "indexing a tensor with the wrong number of indices"),
    "D003": ("dt-tile-misuse", "a tile used where it is not allowed"),
    "D004": ("dt-unsupported", "a statement or call deuteron cannot compile"),
    "D005": ("dt-config", "a config that does not fit the kernel"),
    "D006": ("dt-shape-mismatch", "blocks whose dimensions do not broadcast (tile_m vs tile_n), or a value stored "
             "into a region of another shape"),
    "D007": ("dt-dtype-mismatch", "operands whose dtypes eager PyTorch rejects together (a float16 @ float32 matmul)"),
    "D008": ("dt-generated-kernel", "newt rejected a generated kernel: reported at the user's line it comes from"),
}


def register() -> None:
    """Register ``@dt.kernel`` with newt's front end (also the ``newt.kernel_kinds`` entry point)."""
    register_kernel_kind("deuteron.kernel", analyze_kernel, name="deuteron", codes=CODES)
    register_module_alias("helion", "deuteron")  # Helion's files as they are: deuteron checks what it covers


register()


def _merged_note(old, new):
    """One hover for a place two analyses describe: the value's block shape and dtype (the shape inference's
    ``ValueNote``, which inlay hints read) first, then what the structure says of it ("load of x[tile_m, :]",
    "a tile of the launch grid")."""
    from .shape_check import ValueNote
    if old is None or old.describe() == new.describe():
        return new
    if isinstance(new, ValueNote):
        value, other = new, old
    elif isinstance(old, ValueNote):
        value, other = old, new
    else:
        return new
    merged = ValueNote(value.dims, value.dtype)
    merged.text = f"{value.describe()} — {other.describe()}"
    return merged



# ---------------------------------------------------------------------------
# the shapes the file gives: a launch's tensors, read from the text (nothing of the workspace runs)
# ---------------------------------------------------------------------------

_MAX_LAUNCHES = 8


class LaunchShapes:
    """The sizes and dtypes one launch of the file gives a kernel's parameters (``facts``: parameter ->
    ``TensorFact`` or int), and through them the kernel's host code's tensors and sizes (``m, n = x.shape``,
    ``out = torch.empty_like(x)``, module constants): what ``deuteron.shape_check`` asks in its concrete mode."""

    def __init__(self, what: str, facts: dict, st: KernelStructure, index, static_shapes: bool = True):
        from newt.frontend import HostEval
        self.what, self.facts, self.st, self.static = what, facts, st, static_shapes
        self._unpacked = {}  # m -> (x, 0) for `m, n = x.shape` in the kernel's host code
        for stmt in st._host_stmts(st.fdef.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                    isinstance(stmt.targets[0], (ast.Tuple, ast.List)):
                tensor = st._shape_source(stmt.value)
                if tensor is not None:
                    for i, e in enumerate(stmt.targets[0].elts):
                        if isinstance(e, ast.Name):
                            self._unpacked.setdefault(e.id, (tensor, i))
        self._line = st.loops[0].node.lineno if st.loops else st.fdef.lineno
        self._unstable = _reassigned(st.fdef)
        self._index = index
        self._ev = HostEval(self._look, leaf=self._leaf)
        self._shapes: dict = {}

    def _look(self, name: str, line: int):
        """The host code's assignment of ``name`` before ``line``; a name the kernel assigns in a branch or a
        loop, or more than once, is unknown (which assignment holds depends on the run)."""
        if name in self._unstable:
            return _UNKNOWN
        return self._index.lookup(name, line)

    def _leaf(self, name: str):
        if name in self.facts:
            return self.facts[name]
        if name in self._unpacked:
            tensor, i = self._unpacked[name]
            shape = self.shape(tensor)
            return shape[i] if shape is not None and i < len(shape) else None
        return None

    def _name(self, name: str) -> ast.Name:
        n = ast.Name(id=name, ctx=ast.Load())
        n.lineno = self._line
        return n

    def shape(self, name: str):
        if name not in self._shapes:
            self._shapes[name] = None  # (a cycle through the host code reads as unknown)
            self._shapes[name] = self._ev.shape_of(self._name(name))
        return self._shapes[name]

    def rank(self, name: str):
        s = self.shape(name)
        return None if s is None else len(s)

    def dtype(self, name: str):
        return self._ev.dtype_of(self._name(name))

    def int_value(self, node):
        """An int size of the kernel: a literal, or (with static shapes) a host size the launch fixes."""
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, int) and not isinstance(node.value, bool) else None
        if not self.static:
            return None
        return self._ev.int_of(node)

    def describe(self) -> str:
        parts = []
        for p in self.st.params:
            f = self.facts.get(p)
            if f is None:
                continue
            parts.append(f"{p}: {f.describe()}" if hasattr(f, "describe") else f"{p}={f}")
        return f"with the shapes of {self.what} ({', '.join(parts)})"

    def key(self) -> tuple:
        return tuple(sorted((p, (f.shape, f.dtype) if hasattr(f, "shape") else f) for p, f in self.facts.items()))


_UNKNOWN = ast.Constant(value=None)  # what an unstable name reads as (no shape, no int, no dtype)


def _reassigned(fdef: ast.FunctionDef) -> set:
    """Names the kernel assigns more than once, or anywhere but its body's top level (a branch, a loop)."""
    counts: dict = {}
    top = {id(s) for s in fdef.body}
    nested = set()
    for node in ast.walk(fdef):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [i.optional_vars for i in node.items if i.optional_vars is not None] if isinstance(node, ast.With) \
                else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):  # (not x in x[i] = v)
                        counts[n.id] = counts.get(n.id, 0) + 1
                        if id(node) not in top or isinstance(node, (ast.For, ast.AugAssign)):
                            nested.add(n.id)
    return nested | {k for k, c in counts.items() if c > 1}


def launch_shapes(scan, fdef: ast.FunctionDef, st: KernelStructure) -> list:
    """The distinct ``LaunchShapes`` of the kernel's launches in the file: its calls (``kernel(x, y)``), Helion's
    ``run_example(kernel, ref, (x, y))`` and ``newt.harness`` examples, each tensor followed through the host
    code's assignments to its constructor (``torch.randn([m, k], dtype=torch.float16)``) and each size to a
    literal (a module constant, the argument of ``check(1024, 1024)``)."""
    from newt.frontend import HostEval, TensorFact, call_launches, example_launches, host_index
    text = scan.src.text
    tree = scan.__dict__.get("_dt_tree")
    if tree is None:
        tree = scan.tree if getattr(scan, "tree", None) is not None else ast.Module(body=list(scan.body),
                                                                                    type_ignores=[])
        scan.__dict__["_dt_tree"] = tree
    index = host_index(scan)
    launches = call_launches(tree, index, fdef.name)
    if "example" in text:
        launches += [_as_call_launch(ex) for ex in example_launches(text, fdef.name, scan.resolve, index)]
    ev = HostEval(_BranchAware(index, tree).lookup, tree=tree, owner=index.owner)
    a = fdef.args
    pnames = [p.arg for p in a.posonlyargs + a.args]
    known = set(pnames) | {p.arg for p in a.kwonlyargs}
    ann = {p.arg: p.annotation for p in a.posonlyargs + a.args + a.kwonlyargs}
    static = _static_shapes(fdef)
    out, seen = [], set()
    for ls in launches:
        facts = {}
        pairs = list(zip(pnames, ls.args)) + [(k, v) for k, v in ls.keywords.items() if k in known]
        for p, arg in pairs:
            text_ann = ast.unparse(ann[p]) if ann.get(p) is not None else ""
            if text_ann in ("int", "float", "bool"):
                v = ev.int_of(arg)
                if v is not None:
                    facts[p] = v
                continue
            f = ev.fact(arg)
            if isinstance(f, TensorFact):
                facts[p] = f
        if not any(isinstance(f, TensorFact) and f.shape is not None for f in facts.values()):
            continue
        run = LaunchShapes(ls.what, facts, st, index, static)
        if run.key() in seen:
            continue
        seen.add(run.key())
        out.append(run)
        if len(out) >= _MAX_LAUNCHES:
            break
    return out


class _BranchAware:
    """``HostIndex.lookup`` that reads a name as unknown at a line where an assignment before it sits in a branch
    or loop that does not hold that line too (``if transpose: x = x.t()`` before ``kernel(x)``: which one holds
    depends on the run)."""

    _COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.Match)

    def __init__(self, index, tree):
        self.index = index
        self.tree = tree
        self._scopes: dict = {}  # id(function) or None -> {name: [(line, [(first, last) of its compounds])]}

    def _scope(self, fn) -> dict:
        key = id(fn) if fn is not None else None
        got = self._scopes.get(key)
        if got is None:
            got = self._scopes[key] = {}
            self._visit(fn.body if fn is not None else getattr(self.tree, "body", []), [], got)
        return got

    def _visit(self, stmts, around: list, out: dict) -> None:
        for st in stmts:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                            out.setdefault(n.id, []).append((st.lineno, list(around)))
            if isinstance(st, self._COMPOUND):
                inner = around + [(st.lineno, st.end_lineno or st.lineno)]
                for field in ("body", "orelse", "finalbody"):
                    self._visit(getattr(st, field, None) or [], inner, out)
                for h in getattr(st, "handlers", None) or ():
                    self._visit(h.body, inner, out)
                for c in getattr(st, "cases", None) or ():
                    self._visit(c.body, inner, out)

    def lookup(self, name: str, line: int):
        fn = self.index.owner(line)
        for ln, around in self._scope(fn).get(name, ()):
            if ln < line and not all(a <= line <= b for a, b in around):
                return _UNKNOWN
        return self.index.lookup(name, line)


def _as_call_launch(ex):
    from newt.frontend import CallLaunch
    return CallLaunch(ex.node, list(ex.node.args), {k.arg: k.value for k in ex.node.keywords if k.arg}, ex.what)


def _static_shapes(fdef: ast.FunctionDef) -> bool:
    for dec in fdef.decorator_list:
        if isinstance(dec, ast.Call):
            for k in dec.keywords:
                if k.arg == "static_shapes" and not (isinstance(k.value, ast.Constant) and k.value.value is True):
                    return False
    return True


def launch_diagnostics(scan, src, kd, st: KernelStructure, have: list) -> list:
    """D006/D007/D002 that the sizes and dtypes of the file's launches reveal (``x[tm, :] @ w[:, tn]`` with x
    [M, 64] and w [128, N]), at the user's line with the tracer's message; what the symbolic check (``have``)
    already reports at a place is not repeated."""
    try:
        runs = launch_shapes(scan, kd.node, st)
    except Exception:  # host code this reading does not follow says nothing (never the kernel's N001)
        return []
    symbolic = {(d.code, d.span): d for d in have}
    seen: set = set()
    out = []
    for run in runs:
        for code, node, message, hint in st.launch_problems(run):
            span = src.span(node)
            if (code, span) in seen:
                continue
            seen.add((code, span))
            d = symbolic.get((code, span))
            if d is not None:  # reported without the shapes too: in the words the tracer uses with them (:64)
                d.message = message
                d.hint = f"{hint}; {run.describe()}" if hint else run.describe()
                continue
            out.append(Diagnostic(code, Severity.ERROR, span, message,
                                  hint=f"{hint}; {run.describe()}" if hint else run.describe(), file=src.path,
                                  kernel=kd.name))
    return out
