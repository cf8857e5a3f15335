"""The located error type of every layer lives in :mod:`newt.diagnostics` (below every layer); this module keeps
its old import path for code written against it."""

from __future__ import annotations

from newt.diagnostics import LocatedError, caret_excerpt

__all__ = ["LocatedError", "caret_excerpt"]
