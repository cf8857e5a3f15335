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

