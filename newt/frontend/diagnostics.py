"""Diagnostics live in :mod:`newt.diagnostics` (below every layer); this module keeps the front end's old import
path for code written against it."""

from __future__ import annotations

from newt.diagnostics import (
    CODES,
    CompilationError,
    Diagnostic,
    Severity,
    Span,
    _char_col,
    call_notes,
    register_codes,
    render,
)

__all__ = ["Severity", "Span", "Diagnostic", "CODES", "CompilationError", "render", "register_codes", "call_notes",
           "_char_col"]
