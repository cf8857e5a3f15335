"""The state one ``Builder`` run shares between its parts, and the part they all build on.

:class:`BuildContext` holds what every part of the front end reads and writes while it builds one kernel for
one specialization: the specialization (``spec``), the diagnostics and the abstract values recorded for the
editor (``notes``), the stack of inlined frames with their scopes, the IR region being filled and the
speculation depth.  It also owns what depends only on that state: source spans and IR locations of AST nodes,
reporting a diagnostic (with the ``@jit`` call chain that led to it) and appending an op to the current region.

:class:`BuilderPart` is the base of the collaborators (``ExpressionBuilder``, ``StatementBuilder``,
``LoopBuilder``, ``CallBinder``): each holds the context, the ``Builder`` itself (``api``: what rules and
``semantic`` receive as ``b``) and its sibling parts, which ``Builder`` links once all exist.  The builder
owns its parts; their links back (to the builder and to one another) are weak, so no reference cycle forms.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from newt import ir
from newt.diagnostics import Diagnostic, Severity, Span

from .frame import STRUCTURAL_CODES, Frame, Spec
from .semantic import SemError

if TYPE_CHECKING:
    from .builder_api import BuilderAPI

__all__ = ["BuildContext", "BuilderPart"]


class BuildContext:
    """Scopes, diagnostics, notes and the IR insertion point of one build."""

    def __init__(self, spec: Spec, diagnostics: list | None = None, notes: dict | None = None,
                 user_file: str | None = None):
        self.spec = spec
        self.diags: list[Diagnostic] = diagnostics if diagnostics is not None else []
        self.notes = notes  # Span -> AV (None: do not record)
        self.frames: list[Frame] = []
        self.region = ir.Region()  # build_function and the statement builders set the current one
        self.speculative = 0  # > 0 while checking a branch whose condition is unknown (diagnostics muted)
        self.user_file = user_file
        self.static_prints: list[str] = []
        #: path -> text of every user file read (the kernel's, and those of jit helpers defined elsewhere)
        self.sources: dict[str, str] = {}

    # ------------------------------------------------------------------
    # frames, spans, diagnostics
    # ------------------------------------------------------------------
    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    @property
    def scope(self) -> dict:
        return self.frames[-1].scope

    @scope.setter
    def scope(self, value):
        self.frames[-1].scope = value

    def span(self, node) -> Span:
        f = self.frame
        if f.fn.lib:
            # inside a language function: point at the user's call site
            for i in range(len(self.frames) - 1, 0, -1):
                call_span = self.frames[i].call_span
                if not self.frames[i - 1].fn.lib and call_span is not None:
                    return call_span
            return Span(1, 1, 1, 2)
        return f.fn.src.span(node, f.fn.col_shift)

    def loc(self, node) -> ir.Loc | None:
        if node is None:
            return None
        sp = self.span(node)
        file = self.frame.fn.src.path
        if self.frame.fn.lib:
            for fr in self.frames:
                if not fr.fn.lib:
                    file = fr.fn.src.path
        return ir.Loc(file, sp.line, sp.col, sp.end_line, sp.end_col)

    def user_path(self) -> str:
        for fr in reversed(self.frames):
            if not fr.fn.lib:
                return fr.fn.src.path
        return self.frames[0].fn.src.path

    def report(self, code, message, node, hint=None, data=None, severity=Severity.ERROR, span=None):
        if self.speculative and code not in STRUCTURAL_CODES:
            return
        sp = span or (self.span(node) if node is not None else Span(1, 1, 1, 2))
        d = Diagnostic(code, severity, sp, message, hint, file=self.user_path(),
                       kernel=self.frames[0].fn.name, data=dict(data or {}), context=self.spec.context)
        # a diagnostic inside a helper defined in the same file: say where it was called from
        if len(self.frames) > 1 and not self.frame.fn.lib and self.frame.call_span is not None:
            d.data.setdefault("called_from", self.frame.call_span.line)
        chain = self.call_chain()
        if chain:
            d.data.setdefault("call_chain", chain)
        self.diags.append(d)

    def call_chain(self) -> list[dict]:
        """The calls of ``@jit`` helpers that led to the current point, innermost first: ``{"callee",
        "caller", "file", "line", "col"}`` per call (the call's place in the caller's file).  Calls made inside
        the language's own functions are left out (their diagnostics point at the user's call already)."""
        out = []
        for i in range(len(self.frames) - 1, 0, -1):
            fr, caller = self.frames[i], self.frames[i - 1]
            if fr.fn.lib or caller.fn.lib or fr.call_span is None:
                continue
            out.append({"callee": fr.fn.name, "caller": caller.fn.name, "file": caller.fn.src.path,
                        "line": fr.call_span.line, "col": fr.call_span.col})
        return out

    def report_sem(self, e: SemError, node):
        self.report(e.code, e.message, e.node if e.node is not None else node, hint=e.hint, data=e.data)

    def note(self, node, av):
        if self.notes is not None and not self.frame.fn.lib and not self.speculative_suppress_notes():
            self.notes[self.span(node)] = av

    def speculative_suppress_notes(self) -> bool:
        return False

    # ------------------------------------------------------------------
    # IR emission helpers
    # ------------------------------------------------------------------
    def emit(self, name, operands, result_types, attrs=None, regions=None, node=None) -> ir.Op:
        op = ir.Op(name, operands, result_types, attrs, regions, self.loc(node) if node is not None else None)
        self.region.ops.append(op)
        return op

    def constant(self, value, ty, node=None) -> ir.Value:
        return self.emit("constant", [], [ty], {"value": value}, node=node).result


class BuilderPart:
    """One collaborator of a ``Builder``: the shared context, the builder and the sibling parts."""

    # the siblings (typed loosely: their modules import this one)
    exprs: Any  # ExpressionBuilder (exprs.py)
    statements: Any  # StatementBuilder (stmts.py)
    loops: Any  # LoopBuilder (loops.py)
    calls: Any  # CallBinder (calls.py)

    def __init__(self, ctx: BuildContext, api: BuilderAPI):
        self.ctx = ctx
        # the Builder (what rules and semantic.py receive as ``b``) and, in link(), the siblings: weak
        # references, so that a Builder and its parts form no reference cycle (an analysis is freed at once,
        # without waiting for the cycle collector, which the front end pauses while it builds)
        self.api: BuilderAPI = weakref.proxy(api)

    def link(self, exprs, statements, loops, calls) -> None:
        self.exprs, self.statements, self.loops, self.calls = (
            weakref.proxy(exprs), weakref.proxy(statements), weakref.proxy(loops), weakref.proxy(calls))
