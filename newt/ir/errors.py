"""One located error type for every layer.

``LocatedError(code, message, hint=, location=, data=)``: a diagnostic code (documented in
docs/diagnostics.md), a message, an optional hint, where in the user's source it happened (an
``ir.Loc``, or None when unknown) and structured data for programs (the runtime, quick fixes) so
nobody parses the message.  The front end's ``SemError`` (with its causes), the IR verifier's
``IRVerificationError``, the backend's ``BackendError``, the interpreter's ``InterpreterError`` and
deuteron's ``TraceError`` derive from it; the front end and deuteron turn theirs into ``Diagnostic``
values carrying the same fields.
"""

from __future__ import annotations

from typing import Any

from .core import Loc

__all__ = ["LocatedError", "caret_excerpt"]


class LocatedError(Exception):
    """An error with a diagnostic ``code``, a ``message``, an optional ``hint``, where it happened
    (``location``: an ``ir.Loc``, or None until a caller that knows the place fills it in) and ``data``.

    **Causes.**  A family of errors with one shape gets a subclass per cause that sets ``code``, ``template``
    and ``hint_template`` (``str.format`` templates over named fields) and builds its message with
    :meth:`from_fields`; the fields travel as ``data``, so programs (quick fixes, the runtime) read them
    instead of parsing the message::

        class AxisOutOfRange(SemError):
            code = "N032"
            template = "{what} {axis} is out of range for a block of rank {rank}"
    """

    code: str
    template: str = ""
    hint_template: str | None = None

    def __init__(self, code: str, message: str, *, hint: str | None = None, location: Loc | None = None,
                 data: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.location = location
        self.data: dict[str, Any] = dict(data or {})

    @classmethod
    def render_template(cls, fields: dict[str, Any]) -> tuple[str, str | None]:
        """(message, hint) of this cause for ``fields`` (a subclass may override it for a hint that depends
        on the fields)."""
        hint = cls.hint_template.format(**fields) if cls.hint_template is not None else None
        return cls.template.format(**fields), hint

    def __str__(self) -> str:
        return self.message


def caret_excerpt(text: str, col: int, end_col: int | None = None, *, line: int | None = None) -> str:
    """A source line and a caret line under its columns ``col`` to ``end_col`` (1-based characters, exclusive
    end; None: one character), the one renderer of every error that shows the user's line::

            offs = nl.arange(0, 1000)
                                ^~~~

    ``line``: also show the line number in a gutter (``   12 | ...``), as the interpreter's errors do."""
    text = text.rstrip("\r\n")
    start = max(col - 1, 0)
    width = max(1, end_col - col) if end_col is not None else 1
    if line is None:
        head = caret = "    "
    else:
        head = f"{line:>5} | "
        caret = " " * (len(head) - 2) + "| "
    return f"{head}{text}\n{caret}{' ' * start}^{'~' * (width - 1)}"
