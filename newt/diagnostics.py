"""Diagnostics and located errors: the one module below every layer.

Every layer -- the IR, the front end, the interpreter, the CUDA backend, the runtime, tuning, deuteron and the
language server -- reports a problem in the user's source through what is defined here, and imports it from here:

* ``Loc``: a source span (file, 1-based line and column, exclusive end column).
* ``LocatedError(code, message, hint=, location=, data=)``: the one located error type. The front end's
  ``SemError``, the IR verifier's, the backend's, the interpreter's and deuteron's errors derive from it; ``data``
  carries structured fields (a resource failure's registers and limit, say) so nobody parses a message.
* ``Diagnostic`` / ``Severity`` / ``Span``: errors and warnings as values with a place, collected by passes
  (nothing is printed from inside a pass), each code documented in docs/diagnostics.md.
* ``CompilationError``: what the compile path raises for a kernel's errors, rendered as ``file:line:col``, the
  source line and a caret (``render`` / ``caret_excerpt``).

It imports nothing of newt (only the standard library), so no layer reaches up to report an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

__all__ = ["Loc", "LocatedError", "caret_excerpt", "Severity", "Span", "Diagnostic", "CODES", "CompilationError",
           "render", "register_codes", "call_notes"]


class Loc(NamedTuple):
    """A source span: 1-based line and column, end column exclusive."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class LocatedError(Exception):
    """An error with a diagnostic ``code``, a ``message``, an optional ``hint``, where it happened
    (``location``: a ``Loc``, or None until a caller that knows the place fills it in) and ``data``.

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


class Severity(IntEnum):
    ERROR = 1
    WARNING = 2
    INFO = 3
    HINT = 4

    def __str__(self) -> str:
        return self.name.lower()


def _char_col(lines: Sequence[str], lineno: int, byte_col: int) -> int:
    """A UTF-8 byte offset into line ``lineno`` (1-based) as a character offset."""
    if not (1 <= lineno <= len(lines)):
        return byte_col
    line = lines[lineno - 1]
    if line.isascii():
        return byte_col
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


class Span(NamedTuple):
    """1-based line and column; ``end_col`` is exclusive.

    **Columns count characters** (Unicode code points, what a Python ``str`` indexes), start and end alike:
    ``"é😀x"[2]`` is column 3.  Python's AST gives UTF-8 byte offsets; :meth:`from_ast` converts them.  The
    language server converts characters to the client's unit (UTF-16 by default) at the protocol edge
    (``lsp_server/positions.py``), never before.
    """

    line: int
    col: int
    end_line: int
    end_col: int

    @staticmethod
    def point(line: int, col: int) -> "Span":
        return Span(line, col, line, col + 1)

    @classmethod
    def from_ast(cls, node: Any, lines: Sequence[str] = (), col_shift: int = 0) -> "Span":
        """The span of an AST node (the one conversion every package uses).

        ``lines``: the lines of the text the node's line numbers refer to (needed only where a line is not
        ASCII).  ``col_shift``: leading whitespace removed before parsing (a nested function dedented by
        ``textwrap.dedent``), added to the node's byte offsets before they are converted, so they index
        ``lines``.  An empty or inverted single-line range becomes one character wide."""
        line = getattr(node, "lineno", 1) or 1
        col = _char_col(lines, line, (getattr(node, "col_offset", 0) or 0) + col_shift)
        end_line = getattr(node, "end_lineno", None) or line
        end_b = getattr(node, "end_col_offset", None)
        end_col = _char_col(lines, end_line, end_b + col_shift) if end_b is not None else col + 1
        if end_line == line and end_col <= col:
            end_col = col + 1
        return cls(line, col + 1, end_line, end_col + 1)

    @classmethod
    def of_def_name(cls, node: Any, lines: Sequence[str] = (), col_shift: int = 0) -> "Span":
        """The span of the name of a ``def`` / ``class`` statement (where an editor puts its symbol)."""
        line = node.lineno
        text = lines[line - 1] if 1 <= line <= len(lines) else ""
        start = node.col_offset + col_shift
        idx = text.encode("utf-8").find(node.name.encode("utf-8"), max(0, start))
        col = _char_col(lines, line, idx if idx >= 0 else start)
        return cls(line, col + 1, line, col + 1 + len(node.name))


#: Every diagnostic code, its short name and a one-line description.
#: docs/diagnostics.md documents each at length; a test keeps the two in sync.
CODES: dict[str, tuple[str, str]] = {
    # syntax and structure
    "N001": ("syntax-error", "the kernel is not valid Python"),
    "N002": ("unsupported-construct", "a Python construct kernels do not support (with, try, lambda, ...)"),
    "N003": ("undefined-name", "a name that is not defined in the kernel or its module"),
    "N004": ("unknown-attribute", "an attribute that the language (nl.*) or a value does not have"),
    "N005": ("bad-call", "wrong number of arguments or an unknown keyword in a call"),
    "N006": ("non-jit-call", "a plain Python function called inside a kernel"),
    "N007": ("possibly-undefined", "a variable defined on only some paths"),
    "N008": ("deprecated", "a construct Triton still accepts but deprecates (Python's min/max on blocks)"),
    # constexpr and shapes
    "N010": ("constexpr-required", "a value that must be known at compile time is not"),
    "N011": ("not-power-of-two", "a block dimension is not a power of two"),
    "N012": ("block-too-large", "a block has more than 2**20 elements"),
    # types
    "N020": ("incompatible-types", "operand types that cannot be combined (e.g. mixed signedness in / or %)"),
    "N021": ("bitwise-on-float", "a bitwise operator applied to floating-point values"),
    "N022": ("invalid-pointer-arithmetic", "pointer arithmetic with a float, or two pointers"),
    "N023": ("invalid-operand", "an operand of the wrong kind for this operation"),
    "N024": ("invalid-cast", "a cast that is not allowed (e.g. bitcast between different widths)"),
    # shapes
    "N030": ("shape-mismatch", "block shapes that do not broadcast together"),
    "N031": ("dot-operands", "nl.dot operands of the wrong rank, inner dimension, size or dtype"),
    "N032": ("axis-out-of-range", "a reduction, scan or shape axis outside the block's rank"),
    "N033": ("reshape-size", "a reshape that changes the number of elements"),
    # control flow and kernels
    "N040": ("non-scalar-condition", "an if/while condition that is a block, not a scalar"),
    "N041": ("return-from-kernel", "a launched kernel returns a value"),
    "N042": ("type-changes", "a variable has different types on two branches or across loop iterations"),
    "N043": ("not-a-pointer", "load, store or atomic through a value that is not a pointer"),
    "N044": ("program-id-axis", "program_id / num_programs axis not in 0..2"),
    "N045": ("loop-construct", "a for loop over something other than range / nl.range / nl.static_range"),
    # compile-time assertions
    "N050": ("static-assert", "nl.static_assert failed"),
    "N051": ("static-print", "output of nl.static_print"),
    # specialization
    "N080": ("deprecated", "a construct Triton deprecated or removed that newt still accepts (block pointers)"),
    "N070": ("inline-asm", "an nl.inline_asm_elementwise call whose constraints, operands, dtypes or pack disagree"),
    "N060": ("bad-specialization", "a launch, config or annotation that does not fit the kernel's parameters"),
    # internal
    "N090": ("invalid-ir", "the IR built for a kernel breaks the op table's rules (an internal error)"),
    # backend
    "B001": ("cuda-compile-error", "NVRTC rejected the generated CUDA (an internal error: please report it)"),
    "B002": ("backend-limit", "the kernel needs something the CUDA backend or the target cannot do"),
    "B003": ("inline-asm-ptx", "ptxas rejected the PTX of an nl.inline_asm_elementwise call"),
    # the editor's performance diagnostics (lsp_server/perf.py): warnings
    "N100": ("register-spill", "an autotune config or launch whose compiled kernel spills registers"),
    "N101": ("cannot-launch", "a config whose registers x threads or shared memory exceed the SM's limits"),
    # other kernel kinds add theirs with register_codes (newt.frontend.register_kernel_kind(codes=...))
}


def register_codes(codes: dict) -> None:
    """Add the codes of another kernel kind: ``{"M001": (name, meaning)}``.  Registering a code again
    with the same entry is a no-op; taking a code that means something else is an error."""
    for code, entry in codes.items():
        old = CODES.get(code)
        if old is not None and tuple(old) != tuple(entry):
            raise ValueError(f"diagnostic code {code} is already {old[0]!r}")
        CODES[code] = tuple(entry)


@dataclass
class Diagnostic:
    code: str
    severity: Severity
    span: Span
    message: str
    hint: str | None = None
    file: str = "<unknown>"
    kernel: str | None = None
    #: extra machine-readable data for quick fixes (e.g. {"replace": "1024"}).
    data: dict = field(default_factory=dict)
    #: where the specialization that produced it came from ("BLOCK=1000 (launch at line 40)").
    context: str | None = None

    @property
    def name(self) -> str:
        return CODES.get(self.code, ("", ""))[0]

    def key(self):
        return (self.file, self.span, self.code, self.message)

    def format(self, source_lines: list[str] | None = None, path: str | None = None) -> str:
        """One line like ruff/mypy: ``path:line:col: error[N011] message``."""
        p = path or self.file
        msg = self.message
        if self.context:
            msg += f" [{self.context}]"
        return f"{p}:{self.span.line}:{self.span.col}: {self.severity}[{self.code}] {msg}"

    def to_json(self, path: str | None = None) -> dict:
        d = {
            "path": path or self.file,
            "line": self.span.line,
            "column": self.span.col,
            "end_line": self.span.end_line,
            "end_column": self.span.end_col,
            "severity": str(self.severity),
            "code": self.code,
            "name": self.name,
            "message": self.message,
        }
        if self.hint:
            d["hint"] = self.hint
        if self.context:
            d["context"] = self.context
        if self.kernel:
            d["kernel"] = self.kernel
        notes = call_notes(self)
        if notes:
            d["notes"] = notes
        return d


def render(diag: Diagnostic, source: str | None) -> str:
    """``file:line:col: error[CODE] message``, the source line, a caret and the hint."""
    out = [diag.format()]
    if source is not None:
        lines = source.splitlines()
        sp = diag.span
        if 1 <= sp.line <= len(lines):
            out.append(caret_excerpt(lines[sp.line - 1], sp.col, sp.end_col if sp.end_line == sp.line else None))
    if diag.hint:
        out.append(f"  hint: {diag.hint}")
    out.extend(f"  note: {n}" for n in call_notes(diag))
    return "\n".join(out)


def call_notes(diag: Diagnostic) -> list[str]:
    """``data["call_chain"]`` (the ``@jit`` helper calls that led to the diagnostic, innermost first) as
    lines: ``helper() was called from kernel() at file.py:12:9``."""
    out = []
    for c in diag.data.get("call_chain") or ():
        try:
            out.append(f"{c['callee']}() was called from {c['caller']}() at {c['file']}:{c['line']}:{c['col']}")
        except (KeyError, TypeError):
            continue
    return out


class CompilationError(Exception):
    """A kernel could not be compiled.  ``str(e)`` points at the user's line.

    ``e.diagnostics`` holds the ``Diagnostic`` values (errors first).
    """

    def __init__(self, diagnostics: list[Diagnostic], source: str | None = None, kernel: str | None = None,
                 extra: str | None = None, sources: dict[str, str] | None = None):
        self.diagnostics = list(diagnostics)
        self.source = source
        #: the text of every file the diagnostics may name (a helper defined in another module), by path
        self.sources = dict(sources or {})
        self.kernel = kernel
        self.extra = extra
        super().__init__(self._message())

    def _source_of(self, d: Diagnostic) -> str | None:
        """The text of the file ``d`` names: a helper in another file quotes its own line, never the kernel's."""
        if d.file in self.sources:
            return self.sources[d.file]
        if not self.sources or d.file in ("<unknown>", None):
            return self.source
        return None

    def _message(self) -> str:
        parts = []
        if self.kernel:
            parts.append(f"in kernel {self.kernel!r}:")
        for d in self.diagnostics:
            parts.append(render(d, self._source_of(d)))
        if self.extra:
            parts.append(self.extra)
        return "\n".join(parts)

    @property
    def span(self) -> Span | None:
        return self.diagnostics[0].span if self.diagnostics else None
