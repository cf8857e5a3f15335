"""deuteron's static checker, plugged into ``newt.frontend.analyze_source``.

``newt.frontend`` imports this module when a file has a ``@dt.kernel``; it
registers :func:`analyze_kernel` in ``KERNEL_ANALYZERS["deuteron"]``.  It reads
the kernel's source only: no torch import, no user code run.  Diagnostics are
``newt.frontend.diagnostics.Diagnostic`` values with the ``D0xx`` codes, so the
editor, ``python -m newt check`` and ``kernel(...)`` report the same problems.
"""

from __future__ import annotations

import ast

from newt.frontend.check import KERNEL_ANALYZERS, KernelAnalysis, SpecResult
from newt.frontend.diagnostics import Diagnostic, Severity, Span

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
    """The ``KERNEL_ANALYZERS["deuteron"]`` hook: check one ``@dt.kernel`` from the file's text."""
    node = kd.node
    resolver = StaticResolver(scan.aliases, _shadowed(node))
    st = KernelStructure(node, resolver, getattr(scan, "plain_functions", None))
    diags = structure_diagnostics(st, src, kd.name, node.decorator_list)
    notes = {}
    for n, note in st.notes:
        try:
            notes[src.span(n)] = note
        except Exception:  # noqa: BLE001 - a node without a position
            continue
    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
    def_span = Span(first, 1, node.end_lineno or node.lineno, 1)
    ka = KernelAnalysis(kd.name, "deuteron", node, _name_span(node, src), def_span, kernel_def=kd)
    ka.results = [SpecResult(GenericSpec(), None, list(diags), notes, [])]
    ka.diagnostics = _dedupe(diags)
    ka.launched = True
    ka.structure = st
    return ka


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


def _name_span(node, src) -> Span:
    line = node.lineno
    text = src.line_text(line)
    idx = text.find(node.name, max(0, node.col_offset))
    if idx < 0:
        idx = node.col_offset
    col = src.char_col(line, len(text[:idx].encode("utf-8"))) if not text.isascii() else idx
    return Span(line, col + 1, line, col + 1 + len(node.name))


def check_function_source(text: str, path: str = "<string>") -> list:
    """All deuteron diagnostics of a file's text (a convenience over ``analyze_source``)."""
    from newt.frontend import analyze_source
    fa = analyze_source(text, path)
    return [d for d in fa.diagnostics if d.code.startswith("D")]


KERNEL_ANALYZERS["deuteron"] = analyze_kernel
