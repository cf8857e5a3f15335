"""Errors raised while a kernel runs in the interpreter.

Each names the kernel, the source position of the op (``file:line:col``), the
program id and, where it applies, the offending element; the message ends
with the source line and a caret, like a ``CompilationError``.
"""

from __future__ import annotations

import linecache

from newt.diagnostics import LocatedError, caret_excerpt

__all__ = ["InterpreterError", "OutOfBoundsError", "MisalignedAddressError", "DeviceAssertionError",
           "DeadlockError", "source_excerpt"]


def source_excerpt(loc) -> str:
    """The source line of ``loc`` with a caret under the span ("" when the file cannot be read)."""
    if loc is None:
        return ""
    try:
        text = linecache.getline(loc.file, loc.line)
    except Exception:
        text = ""
    if not text:
        return ""
    end_col = loc.end_col if loc.end_line == loc.line and loc.end_col > loc.col else len(text.rstrip("\r\n")) + 1
    return caret_excerpt(text, loc.col, end_col, line=loc.line)


class InterpreterError(LocatedError, RuntimeError):
    """A run-time error in an interpreted kernel (a ``LocatedError``: ``code``, ``message``, ``hint``,
    ``location`` = ``loc``, ``data``; the codes ``I001``-``I005`` are in docs/diagnostics.md).

    Attributes: ``kernel`` (name), ``loc`` (``newt.ir.Loc`` or None), ``pid``
    (``(x, y, z)`` program id or None), ``detail`` (the message without the
    location header); ``data`` holds ``kernel``, ``pid`` and ``detail`` too.
    """

    code = "I001"
    what = "error"

    def __init__(self, detail: str, *, kernel: str = "?", loc=None, pid=None, hint: str | None = None):
        self.kernel = kernel
        self.loc = loc
        self.pid = pid
        self.detail = detail
        self.hint = hint
        where = str(loc) if loc is not None else "<unknown location>"
        head = f"{where}: {self.what} in kernel '{kernel}'"
        if pid is not None:
            head += f", program id {tuple(pid)}"
        msg = f"{head}: {detail}"
        excerpt = source_excerpt(loc)
        if excerpt:
            msg += "\n" + excerpt
        if hint:
            msg += f"\nhint: {hint}"
        super().__init__(self.code, msg, hint=hint, location=loc,
                         data={"kernel": kernel, "pid": tuple(pid) if pid is not None else None, "detail": detail})


class OutOfBoundsError(InterpreterError, IndexError):
    """An unmasked (or mask-true) load, store or atomic outside every argument tensor.

    Extra attributes: ``access`` (``"load"``, ``"store"``, ``"atomic"``),
    ``address`` (byte address), ``index`` (the element's index in its block,
    a tuple), ``arg`` (the pointer argument the address is measured from, or
    None), ``offset`` (the element offset from that argument), ``numel`` (the
    argument's number of elements).
    """

    code = "I002"
    what = "out-of-bounds access"

    def __init__(self, detail, *, access, address, index, arg=None, offset=None, numel=None, **kw):
        self.access = access
        self.address = address
        self.index = index
        self.arg = arg
        self.offset = offset
        self.numel = numel
        super().__init__(detail, **kw)
        self.data.update(access=access, address=address, index=index, arg=arg, offset=offset, numel=numel)


class MisalignedAddressError(InterpreterError):
    """An access whose address is not a multiple of the element size."""

    code = "I003"
    what = "misaligned address"


class DeviceAssertionError(InterpreterError, AssertionError):
    """``nl.device_assert`` (or a Python ``assert`` in the kernel) failed."""

    code = "I004"
    what = "device assertion failed"


class DeadlockError(InterpreterError):
    """A loop can make no further progress (its state and memory no longer change)."""

    code = "I005"
    what = "deadlock"
