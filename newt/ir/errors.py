"""One located error type for every layer.

``LocatedError(code, message, hint=, location=, data=)``: a diagnostic code (documented in
docs/diagnostics.md), a message, an optional hint, where in the user's source it happened (an
``ir.Loc``, or None when unknown) and structured data for programs (the runtime, quick fixes) so
nobody parses the message.  The backend's ``BackendError`` derives from it; the front end and
deuteron turn theirs into ``Diagnostic`` values carrying the same fields.
"""

from __future__ import annotations

from typing import Any

from .core import Loc

__all__ = ["LocatedError"]


class LocatedError(Exception):
    def __init__(self, code: str, message: str, *, hint: str | None = None, location: Loc | None = None,
                 data: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.location = location
        self.data: dict[str, Any] = dict(data or {})

    def __str__(self) -> str:
        return self.message
