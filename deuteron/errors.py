"""deuteron's errors: every one points at the user's file, line and column.

They are ``newt.CompilationError`` values (``except newt.CompilationError``
catches them), built from the same ``Diagnostic`` values the editor shows.
"""

from __future__ import annotations

import ast

from newt.frontend.diagnostics import CompilationError, Diagnostic, Severity, Span

__all__ = ["DeuteronError", "SourceInfo", "TraceError"]


class SourceInfo:
    """Where a kernel's source lives: file, full text, and the offsets of the parsed snippet."""

    def __init__(self, path: str, text: str, col_shift: int = 0):
        self.path = path
        self.text = text
        self.lines = text.splitlines()
        self.col_shift = col_shift

    def span(self, node) -> Span:
        line = getattr(node, "lineno", 1) or 1
        col = (getattr(node, "col_offset", 0) or 0) + self.col_shift
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        end_col = (end_col + self.col_shift) if end_col is not None else col + 1
        line_text = self.lines[line - 1] if 1 <= line <= len(self.lines) else ""
        if not line_text.isascii():
            col = len(line_text.encode("utf-8")[:col].decode("utf-8", errors="replace"))
            if end_line == line:
                end_col = len(line_text.encode("utf-8")[:end_col].decode("utf-8", errors="replace"))
        if end_line == line and end_col <= col:
            end_col = col + 1
        return Span(line, col + 1, end_line, end_col + 1)

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 1 <= line <= len(self.lines) else ""


class DeuteronError(CompilationError):
    """A deuteron kernel cannot be compiled (or a config does not fit it)."""

    @classmethod
    def at(cls, src: SourceInfo | None, node, code: str, message: str, hint: str | None = None,
           kernel: str | None = None, extra: str | None = None) -> "DeuteronError":
        span = src.span(node) if (src is not None and node is not None) else Span(1, 1, 1, 2)
        d = Diagnostic(code, Severity.ERROR, span, message, hint=hint, file=src.path if src else "<unknown>",
                       kernel=kernel)
        return cls([d], src.text if src else None, kernel=kernel, extra=extra)


class TraceError(Exception):
    """Raised inside the tracer; turned into a ``DeuteronError`` with the kernel's source."""

    def __init__(self, code: str, node: ast.AST | None, message: str, hint: str | None = None):
        super().__init__(message)
        self.code = code
        self.node = node
        self.message = message
        self.hint = hint
