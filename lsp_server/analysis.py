"""The analysis of one document, as plain functions the server and tests call.

``analyze(text, uri)`` returns an :class:`Analysis`: the front end's
``FileAnalysis`` plus what the editor features need (a position index,
per-line lookup of the front end's notes, LSP diagnostics).  Nothing here
imports or runs the user's file.

Analysis is incremental: it goes through the front end's public analyzer
(``newt.frontend.Analyzer``) with a :class:`KernelCache` (the front end's
``AnalysisCache``), which keeps the result of each (kernel, specialization)
keyed by the text of the kernel and of every jit function it inlines, the
module-level names it reads and the specialization, so a keystroke in one
kernel re-checks only that kernel.  The result is the same as
``newt.frontend.analyze_source`` (a test checks it on random edits).
"""

from __future__ import annotations

import logging
import os
import time
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

import deuteron.frontend  # noqa: F401  (registers @dt.kernel with newt's front end)
from newt.diagnostics import Diagnostic, Severity, Span
from newt.frontend import AnalysisCache, Analyzer, FileAnalysis, KernelAnalysis, SpecResult

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
        return self.file.kernel_at(line1)

    def kernel_named(self, name: str) -> KernelAnalysis | None:
        return self.file.kernel_named(name)

    # --- notes (Span -> abstract value) by position -----------------------
    def notes_at(self, result: SpecResult, line1: int, col1: int):
        """(span, value) of the smallest noted expression of ``result`` that contains the position."""
        return result.note_at(line1, col1)

    def note_for_span(self, result: SpecResult, span: Span):
        return (result.notes or {}).get(span)

    def spec_of(self, diag: Diagnostic):
        """(kernel, index in kernel.results) of the specialization that produced a diagnostic."""
        return self.file.spec_of(diag)


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------

#: the front end's result cache (``newt.frontend.AnalysisCache``): a server keeps one across edits
KernelCache = AnalysisCache


def analyze(text: str, uri: str, version: int | None = None, encoding: str = UTF16,
            cache: KernelCache | None = None) -> Analysis:
    """Analyze one document.  Never raises on bad input (the front end's promise)."""
    t0 = time.perf_counter()
    path = uri_to_path(uri)
    fa = Analyzer(cache=cache).analyze(text, path)
    tree = getattr(fa.scan, "tree", None)
    if tree is not None:  # the launches' host code is read from the same tree (hostvalues): one parse per text
        from newt.frontend.hostvalues import remember_tree
        remember_tree(text, tree)
    elapsed = (time.perf_counter() - t0) * 1000
    return Analysis(uri, text, version, fa, LineIndex(text, encoding), elapsed, fa.reused)


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


_SECTION_LINES: dict | None = None


def _section_line(code: str) -> int | None:
    """The 1-based line of ``## N011 ...`` in the installed docs/diagnostics.md."""
    global _SECTION_LINES
    if _SECTION_LINES is None:
        _SECTION_LINES = {}
        try:
            with open(_DOCS, encoding="utf-8") as f:
                for i, ln in enumerate(f, start=1):
                    if ln.startswith("## "):
                        word = ln[3:].split(" ", 1)[0].strip()
                        _SECTION_LINES.setdefault(word.upper(), i)
        except (OSError, TypeError):
            pass
    return _SECTION_LINES.get(code.upper())


def docs_href(code: str, base: str | None = None) -> str | None:
    """Link to the code's section of docs/diagnostics.md: ``base#n011`` for published docs; for the installed
    file a ``file:`` URI with ``#L<line>`` of the section's heading, which editors open at that line (an
    HTML anchor means nothing to a text editor)."""
    if base:
        return f"{base}#{code.lower()}"
    if _DOCS is None:
        return None
    from pathlib import Path
    line = _section_line(code)
    return f"{Path(_DOCS).as_uri()}#{f'L{line}' if line else code.lower()}"


def lsp_diagnostics(a: Analysis, docs_base: str | None = None, related: bool = True) -> list[lsp.Diagnostic]:
    out = []
    for d in a.file.diagnostics:
        try:
            out.append(_lsp_diagnostic(a, d, docs_base, related))
        except Exception:  # one odd diagnostic must not hide the others
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
