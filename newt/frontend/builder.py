"""From the AST of a ``@newt.jit`` function to the typed tile IR.

One ``Builder`` reads one kernel for one specialization.  It folds constexpr
values, prunes dead branches, inlines jit helpers, types every value and
records (for the language server) the abstract value of every expression.
Control flow that Triton lacks (``break``, ``continue``, early ``return``) is
lowered to flags carried by structured ``scf`` ops, so backends only ever see
``scf.for``, ``scf.if`` and ``scf.while``.

Errors never escape: each becomes a ``Diagnostic`` and the offending
expression evaluates to ``Opaque``, which silences follow-on errors.

The work is shared by collaborating objects over one explicit :class:`BuildContext` (``context.py``: spec,
frames and scopes, diagnostics, notes, the IR insertion point):

* ``ExpressionBuilder`` (``exprs.py``): an expression to an abstract value, conversions to IR values;
* ``StatementBuilder`` (``stmts.py``): statements, ``if`` and the control-flow flags;
* ``LoopBuilder`` (``loops.py``): ``for`` / ``while`` loops to ``scf`` ops, static unrolling;
* ``CallBinder`` (``calls.py``): calls, bound to op rules, Python builtins or inlined ``@jit`` helpers.

``Builder`` creates and links them, binds a kernel's parameters (:meth:`Builder.build_function`) and is the
object op rules and ``semantic.py`` receive as ``b``: the surface ``builder_api.BuilderAPI`` declares, each
member forwarded to the part that owns it.
"""

from __future__ import annotations

import ast
import types as pytypes

from newt import ir
from newt.diagnostics import Diagnostic, Severity, Span
from newt.ir.types import ANY_DTYPE, SymDType
from newt.language import core as lc

from .calls import CallBinder
from .context import BuildContext
from .exprs import ExpressionBuilder
from .frame import FLAG_RET, STRUCTURAL_CODES, Frame, LoopCtx, Spec  # noqa: F401  (re-exported)
from .loops import LoopBuilder
from .semantic import SemError
from .stmts import StatementBuilder
from .values import AV, Const, JitSource, Method, Opaque, Poison, Sym, TensorV, Undef

__all__ = ["Builder", "BuildContext", "Frame", "LoopCtx", "Spec", "Undef", "Method", "Poison"]


class Builder:
    """One kernel, one specialization: the parts, linked over one context, and the surface rules use."""

    def __init__(self, spec: Spec, diagnostics: list | None = None, notes: dict | None = None,
                 user_file: str | None = None):
        self.ctx = BuildContext(spec, diagnostics, notes, user_file)
        self.exprs = ExpressionBuilder(self.ctx, self)
        self.statements = StatementBuilder(self.ctx, self)
        self.loops = LoopBuilder(self.ctx, self)
        self.calls = CallBinder(self.ctx, self)
        parts = (self.exprs, self.statements, self.loops, self.calls)
        for part in parts:
            part.link(*parts)

    # ------------------------------------------------------------------
    # the context's state (check.py and the rules read it; some set region / speculative / scope)
    # ------------------------------------------------------------------
    @property
    def spec(self) -> Spec:
        return self.ctx.spec

    @property
    def diags(self) -> list[Diagnostic]:
        return self.ctx.diags

    @property
    def notes(self) -> dict | None:
        return self.ctx.notes

    @property
    def frames(self) -> list[Frame]:
        return self.ctx.frames

    @property
    def frame(self) -> Frame:
        return self.ctx.frame

    @property
    def scope(self) -> dict:
        return self.ctx.scope

    @scope.setter
    def scope(self, value) -> None:
        self.ctx.scope = value

    @property
    def region(self) -> ir.Region:
        return self.ctx.region

    @region.setter
    def region(self, value: ir.Region) -> None:
        self.ctx.region = value

    @property
    def speculative(self) -> int:
        return self.ctx.speculative

    @speculative.setter
    def speculative(self, value: int) -> None:
        self.ctx.speculative = value

    @property
    def static_prints(self) -> list[str]:
        return self.ctx.static_prints

    @property
    def sources(self) -> dict[str, str]:
        return self.ctx.sources

    # ------------------------------------------------------------------
    # forwarded to the part that owns each job
    # ------------------------------------------------------------------
    def span(self, node) -> Span:
        return self.ctx.span(node)

    def report(self, code, message, node, hint=None, data=None, severity=Severity.ERROR, span=None):
        self.ctx.report(code, message, node, hint, data, severity, span)

    def report_sem(self, e: SemError, node):
        self.ctx.report_sem(e, node)

    def note(self, node, av):
        self.ctx.note(node, av)

    def emit(self, name, operands, result_types, attrs=None, regions=None, node=None) -> ir.Op:
        return self.ctx.emit(name, operands, result_types, attrs, regions, node)

    def constant(self, value, ty, node=None) -> ir.Value:
        return self.ctx.constant(value, ty, node)

    def stmts(self, body: list):
        self.statements.stmts(body)

    def unsupported(self, node):
        self.statements.unsupported(node)

    def to_bool(self, av: AV, node) -> ir.Value:
        return self.statements.to_bool(av, node)

    def runtime_if(self, cond: ir.Value, then_fn, else_fn, node, clear_flags: bool = False,
                   speculative: bool = False):
        return self.statements.runtime_if(cond, then_fn, else_fn, node, clear_flags, speculative)

    def expr(self, node, record: bool = True) -> AV:
        return self.exprs.expr(node, record)

    def getattr(self, base: AV, attr: str, node) -> AV:
        return self.exprs.getattr(base, attr, node)

    def has_attr(self, base: AV, attr: str) -> bool | None:
        return self.exprs.has_attr(base, attr)

    def unsplat(self, v: TensorV, node) -> TensorV:
        return self.exprs.unsplat(v, node)

    def binop(self, opname: str, a: AV, b: AV, node) -> AV:
        return self.exprs.binop(opname, a, b, node)

    def operand_info(self, av: AV):
        return self.exprs.operand_info(av)

    def as_value(self, av: AV, node) -> ir.Value:
        return self.exprs.as_value(av, node)

    def as_tensor(self, av: AV, dtype, shape, node) -> ir.Value:
        return self.exprs.as_tensor(av, dtype, shape, node)

    def convert(self, v: ir.Value, dtype, shape, node) -> ir.Value:
        return self.exprs.convert(v, dtype, shape, node)

    def broadcast_value(self, v: ir.Value, shape, node) -> ir.Value:
        return self.exprs.broadcast_value(v, shape, node)

    def cast_value(self, v: ir.Value, dst, node, bitcast: bool = False, rounding: str | None = None) -> ir.Value:
        return self.exprs.cast_value(v, dst, node, bitcast, rounding)

    def _expand_dims(self, v, axis, node):
        return self.exprs._expand_dims(v, axis, node)

    def call_builtin(self, name, args, kwargs, node, arg_nodes, kw_nodes) -> AV:
        return self.calls.call_builtin(name, args, kwargs, node, arg_nodes, kw_nodes)

    def inline(self, fn: JitSource, args, kwargs, node, arg_nodes, kw_nodes) -> AV:
        return self.calls.inline(fn, args, kwargs, node, arg_nodes, kw_nodes)

    # ------------------------------------------------------------------
    # entry point: a kernel's parameters, then its body
    # ------------------------------------------------------------------
    def build_function(self, fn: JitSource, is_kernel: bool = True) -> ir.Function:
        self.ctx.sources.setdefault(fn.src.path, fn.src.text)
        frame = Frame(fn, None, is_kernel=is_kernel)
        self.ctx.frames.append(frame)
        body = ir.Region()
        self.ctx.region = body
        params: list[ir.Param] = []
        node = fn.node
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs:
            self.ctx.report("N002",
                            "kernels take plain positional parameters only (no *args, **kwargs or keyword-only)", node)
        plist = list(a.posonlyargs) + list(a.args)
        defaults = [None] * (len(plist) - len(a.defaults)) + list(a.defaults)
        constexprs = {}
        for p, dflt in zip(plist, defaults):
            name = p.arg
            is_cx, ann_ty = self._param_annotation(p)
            if name in self.ctx.spec.constexprs and not is_cx:
                is_cx = True  # ints equal to 1, or values the caller declared constexpr
            if is_cx:
                if name in self.ctx.spec.constexprs:
                    val = self.ctx.spec.constexprs[name]
                    av = val if isinstance(val, AV) else self._constexpr_value(val, name)
                elif dflt is not None and self.ctx.spec.concrete:
                    av = self.exprs.expr(dflt)
                elif dflt is not None and isinstance(dflt, ast.Constant) and not self._value_overridable(name):
                    av = Const(dflt.value, origin=name)
                else:
                    if self.ctx.spec.concrete:
                        self.ctx.report("N060", f"no value given for constexpr parameter {name!r}", p)
                        av = Opaque()
                    else:
                        av = Sym(name)
                constexprs[name] = av.value if isinstance(av, Const) else av
                params.append(ir.Param(name, None, None, constexpr=True,
                                       const_value=av.value if isinstance(av, Const) else repr(av)))
                frame.scope[name] = av
                self.ctx.note(p, av)
                continue
            ty = ann_ty or self.ctx.spec.arg_types.get(name)
            if getattr(ty, "__newt_tuple_arg__", False):  # a tuple argument (newt/frontend/tuple_params.py)
                from .tuple_params import bind_tuple_param
                tup = bind_tuple_param(self, name, ty, body, params)
                frame.scope[name] = tup
                self.ctx.note(p, tup)
                continue
            if ty is None:
                if self.ctx.spec.concrete:
                    self.ctx.report("N060", f"no type known for parameter {name!r}", p)
                    ty = ANY_DTYPE
                elif name in self.ctx.spec.pointer_params:
                    ty = lc.pointer_type(SymDType(name))
                else:
                    ty = SymDType("?")
            v = ir.Value(ty, name=name)
            body.args.append(v)
            v.owner = body
            v.index = len(body.args) - 1
            params.append(ir.Param(name, ty, v))
            tv = TensorV(v)
            frame.scope[name] = tv
            self.ctx.note(p, tv)
        frame.scope[FLAG_RET] = Const(False)
        self.statements.stmts(node.body)
        self.ctx.emit("return", [], [], node=None)
        self.ctx.frames.pop()
        irfn = ir.Function(fn.name, params, body, file=fn.src.path, constexprs=constexprs,
                           loc=ir.Loc(fn.src.path, node.lineno, node.col_offset + 1, node.lineno,
                                      node.col_offset + 4 + len(fn.name)))
        irfn.hints = dict(self.ctx.spec.divisibility)
        irfn.num_warps = self.ctx.spec.num_warps
        irfn.num_stages = self.ctx.spec.num_stages
        return irfn

    def _constexpr_value(self, val, name) -> AV:
        """A constexpr argument: a plain value, a dtype, or a jit function passed as a parameter."""
        from .source import JitName
        if isinstance(val, JitName):
            av = self.ctx.frame.fn.env.lookup(val.name)
            return av if av is not None else Opaque()
        if getattr(val, "__newt_jit__", False) or getattr(val, "__newt_inline__", False) or \
                isinstance(val, (tuple, pytypes.FunctionType)):
            from .values import from_python
            return from_python(val)
        return Const(val, origin=name)

    def _value_overridable(self, name) -> bool:
        return not self.ctx.spec.concrete

    def _param_annotation(self, p: ast.arg):
        """(is_constexpr, dtype or None) from ``x: nl.constexpr`` / ``x: "*fp16"`` / ``x: nl.int32``."""
        ann = p.annotation
        if ann is None:
            return False, None
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            s = ann.value.strip()
            if s in ("constexpr", "nl.constexpr", "tl.constexpr"):
                return True, None
            try:
                return False, lc.dtype_from_name(s)
            except ValueError:
                self.ctx.report("N060", f"unknown type annotation {s!r}", ann,
                                hint='use a signature type such as "*fp16", "i32" or "fp32"')
                return False, None
        self.ctx.speculative += 1  # annotation lookups never produce type errors
        try:
            av = self.exprs.expr(ann, record=False)
        finally:
            self.ctx.speculative -= 1
        if isinstance(av, Const):
            if av.value is lc.constexpr:
                return True, None
            if isinstance(av.value, lc.dtype):
                return False, av.value
        return False, None
