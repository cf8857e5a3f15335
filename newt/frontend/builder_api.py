"""The surface of a ``Builder`` that op rules, ``semantic.py`` and the checker use, for the type checker.

``Builder`` (``builder.py``) links collaborating parts over one ``BuildContext`` (``context.py``):
``ExpressionBuilder`` (``exprs.py``), ``StatementBuilder`` (``stmts.py``), ``LoopBuilder`` (``loops.py``) and
``CallBinder`` (``calls.py``).  The rules (``rules/``), ``semantic.py``, ``ops.py``, ``tuple_params.py`` and
``check.py`` receive the ``Builder`` itself as ``b`` and use only what :class:`BuilderAPI` declares; ``Builder``
forwards each member to the part that owns it.  The parts reach one another through their own attributes
(``self.ctx``, ``self.exprs``, ``self.statements``, ``self.loops``, ``self.calls``), never through this surface.
"""

from __future__ import annotations

import ast
from typing import Protocol

from newt import ir
from newt.diagnostics import Diagnostic, Severity, Span

from .frame import Frame, Spec
from .semantic import SemError
from .values import AV, JitSource, TensorV

__all__ = ["BuilderAPI"]


class BuilderAPI(Protocol):
    region: ir.Region  # where emit() appends
    speculative: int  # > 0 while checking a branch whose condition is unknown (diagnostics muted)

    @property
    def spec(self) -> Spec: ...

    @property
    def diags(self) -> list[Diagnostic]: ...

    @property
    def notes(self) -> dict | None: ...  # Span -> AV, None when not recording

    @property
    def frames(self) -> list[Frame]: ...

    @property
    def static_prints(self) -> list[str]: ...

    @property
    def sources(self) -> dict[str, str]: ...  # path -> text of every user file read (kernel, helpers elsewhere)

    @property
    def frame(self) -> Frame: ...

    @property
    def scope(self) -> dict: ...

    @scope.setter
    def scope(self, value) -> None: ...

    # the context (context.py)
    def span(self, node) -> Span: ...

    def report(self, code, message, node, hint=None, data=None, severity=Severity.ERROR, span=None): ...

    def report_sem(self, e: SemError, node): ...

    def note(self, node, av): ...

    def emit(self, name, operands, result_types, attrs=None, regions=None, node=None) -> ir.Op: ...

    def constant(self, value, ty, node=None) -> ir.Value: ...

    # the entry point (builder.py)
    def build_function(self, fn: JitSource, is_kernel: bool = True) -> ir.Function: ...

    def _param_annotation(self, p: ast.arg): ...

    def _constexpr_value(self, val, name) -> AV: ...

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

    def broadcast_value(self, v: ir.Value, shape, node) -> ir.Value: ...

    def cast_value(self, v: ir.Value, dst, node, bitcast: bool = False, rounding: str | None = None) -> ir.Value: ...

    def binop(self, opname: str, a: AV, b: AV, node) -> AV: ...

    def operand_info(self, av: AV): ...

    def _expand_dims(self, v, axis, node): ...

    # calls.py
    def call_builtin(self, name, args, kwargs, node, arg_nodes, kw_nodes) -> AV: ...

    def inline(self, fn: JitSource, args, kwargs, node, arg_nodes, kw_nodes) -> AV: ...
