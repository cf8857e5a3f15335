"""What the builder's mixins may use of one another, for the type checker.

``Builder`` (``builder.py``) is one class made of ``StatementsMixin`` (``stmts.py``), ``ExpressionsMixin``
(``exprs.py``) and ``CallsMixin`` (``calls.py``); each calls methods another one defines (a statement
evaluates expressions, a call runs statements) and reads the builder's state.  :class:`BuilderAPI` declares
that shared surface once.  The mixins derive from it only while type checking (``if TYPE_CHECKING``); at run
time they are plain classes and ``Builder`` provides every member.
"""

from __future__ import annotations

import ast
from typing import Protocol

from newt import ir

from .diagnostics import Diagnostic, Severity, Span
from .frame import Frame, Spec
from .semantic import SemError
from .values import AV, TensorV

__all__ = ["BuilderAPI"]


class BuilderAPI(Protocol):
    spec: Spec
    diags: list[Diagnostic]
    notes: dict | None  # Span -> AV, None when not recording
    frames: list[Frame]
    region: ir.Region  # where emit() appends
    speculative: int  # > 0 while checking a branch whose condition is unknown (diagnostics muted)
    static_prints: list[str]
    sources: dict[str, str]  # path -> text of every user file read (kernel, helpers in other files)

    @property
    def frame(self) -> Frame: ...

    @property
    def scope(self) -> dict: ...

    @scope.setter
    def scope(self, value) -> None: ...

    # builder.py
    def span(self, node) -> Span: ...

    def report(self, code, message, node, hint=None, data=None, severity=Severity.ERROR, span=None): ...

    def report_sem(self, e: SemError, node): ...

    def note(self, node, av): ...

    def emit(self, name, operands, result_types, attrs=None, regions=None, node=None) -> ir.Op: ...

    def constant(self, value, ty, node=None) -> ir.Value: ...

    def _param_annotation(self, p: ast.arg): ...

    # stmts.py
    def stmts(self, body: list): ...

    def unsupported(self, node): ...

    def to_bool(self, av: AV, node) -> ir.Value: ...

    def runtime_if(self, cond: ir.Value, then_fn, else_fn, node, clear_flags: bool = False,
                   speculative: bool = False): ...

    # exprs.py
    def expr(self, node, record: bool = True) -> AV: ...

    def getattr(self, base: AV, attr: str, node) -> AV: ...

    def has_attr(self, base: AV, attr: str) -> bool | None: ...

    def unsplat(self, v: TensorV, node) -> TensorV: ...

    def as_value(self, av: AV, node) -> ir.Value: ...

    def as_tensor(self, av: AV, dtype, shape, node) -> ir.Value: ...

    def convert(self, v: ir.Value, dtype, shape, node) -> ir.Value: ...

    # calls.py
    def call_builtin(self, name, args, kwargs, node, arg_nodes, kw_nodes) -> AV: ...
