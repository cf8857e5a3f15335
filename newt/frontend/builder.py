"""From the AST of a ``@newt.jit`` function to the typed tile IR.

One ``Builder`` reads one kernel for one specialization.  It folds constexpr
values, prunes dead branches, inlines jit helpers, types every value and
records (for the language server) the abstract value of every expression.
Control flow that Triton lacks (``break``, ``continue``, early ``return``) is
lowered to flags carried by structured ``scf`` ops, so backends only ever see
``scf.for``, ``scf.if`` and ``scf.while``.

Errors never escape: each becomes a ``Diagnostic`` and the offending
expression evaluates to ``Opaque``, which silences follow-on errors.
"""

from __future__ import annotations

import ast
import types as pytypes

from newt import ir
from newt.ir.types import ANY_DTYPE, SymDType
from newt.language import core as lc

from .calls import CallsMixin
from .diagnostics import Diagnostic, Severity, Span
from .exprs import ExpressionsMixin
from .frame import FLAG_RET, STRUCTURAL_CODES, Frame, LoopCtx, Spec  # noqa: F401  (re-exported)
from .semantic import SemError
from .stmts import StatementsMixin
from .values import AV, Const, JitSource, Method, Opaque, Poison, Sym, TensorV, Undef

__all__ = ["Builder", "Frame", "LoopCtx", "Spec", "Undef", "Method", "Poison"]


class Builder(StatementsMixin, ExpressionsMixin, CallsMixin):
    def __init__(self, spec: Spec, diagnostics: list | None = None, notes: dict | None = None,
                 user_file: str | None = None):
        self.spec = spec
        self.diags: list[Diagnostic] = diagnostics if diagnostics is not None else []
        self.notes = notes  # Span -> AV (None: do not record)
        self.frames: list[Frame] = []
        self.region = ir.Region()  # build_function and the statement builders set the current one
        self.speculative = 0
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

    # ------------------------------------------------------------------
    # entry point
    # ------------------------------------------------------------------
    def build_function(self, fn: JitSource, is_kernel: bool = True) -> ir.Function:
        self.sources.setdefault(fn.src.path, fn.src.text)
        frame = Frame(fn, None, is_kernel=is_kernel)
        self.frames.append(frame)
        body = ir.Region()
        self.region = body
        params: list[ir.Param] = []
        node = fn.node
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs:
            self.report("N002", "kernels take plain positional parameters only (no *args, **kwargs or keyword-only)",
                        node)
        plist = list(a.posonlyargs) + list(a.args)
        defaults = [None] * (len(plist) - len(a.defaults)) + list(a.defaults)
        constexprs = {}
        for p, dflt in zip(plist, defaults):
            name = p.arg
            is_cx, ann_ty = self._param_annotation(p)
            if name in self.spec.constexprs and not is_cx:
                is_cx = True  # ints equal to 1, or values the caller declared constexpr
            if is_cx:
                if name in self.spec.constexprs:
                    val = self.spec.constexprs[name]
                    av = val if isinstance(val, AV) else self._constexpr_value(val, name)
                elif dflt is not None and self.spec.concrete:
                    av = self.expr(dflt)
                elif dflt is not None and isinstance(dflt, ast.Constant) and not self._value_overridable(name):
                    av = Const(dflt.value, origin=name)
                else:
                    if self.spec.concrete:
                        self.report("N060", f"no value given for constexpr parameter {name!r}", p)
                        av = Opaque()
                    else:
                        av = Sym(name)
                constexprs[name] = av.value if isinstance(av, Const) else av
                params.append(ir.Param(name, None, None, constexpr=True,
                                       const_value=av.value if isinstance(av, Const) else repr(av)))
                frame.scope[name] = av
                self.note(p, av)
                continue
            ty = ann_ty or self.spec.arg_types.get(name)
            if getattr(ty, "__newt_tuple_arg__", False):  # a tuple argument (newt/frontend/tuple_params.py)
                from .tuple_params import bind_tuple_param
                tup = bind_tuple_param(self, name, ty, body, params)
                frame.scope[name] = tup
                self.note(p, tup)
                continue
            if ty is None:
                if self.spec.concrete:
                    self.report("N060", f"no type known for parameter {name!r}", p)
                    ty = ANY_DTYPE
                elif name in self.spec.pointer_params:
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
            self.note(p, tv)
        frame.scope[FLAG_RET] = Const(False)
        self.stmts(node.body)
        self.emit("return", [], [], node=None)
        self.frames.pop()
        irfn = ir.Function(fn.name, params, body, file=fn.src.path, constexprs=constexprs,
                           loc=ir.Loc(fn.src.path, node.lineno, node.col_offset + 1, node.lineno,
                                      node.col_offset + 4 + len(fn.name)))
        irfn.hints = dict(self.spec.divisibility)
        irfn.num_warps = self.spec.num_warps
        irfn.num_stages = self.spec.num_stages
        return irfn

    def _constexpr_value(self, val, name) -> AV:
        """A constexpr argument: a plain value, a dtype, or a jit function passed as a parameter."""
        from .source import JitName
        if isinstance(val, JitName):
            av = self.frame.fn.env.lookup(val.name)
            return av if av is not None else Opaque()
        if getattr(val, "__newt_jit__", False) or getattr(val, "__newt_inline__", False) or \
                isinstance(val, (tuple, pytypes.FunctionType)):
            from .values import from_python
            return from_python(val)
        return Const(val, origin=name)

    def _value_overridable(self, name) -> bool:
        return not self.spec.concrete

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
                self.report("N060", f"unknown type annotation {s!r}", ann,
                            hint='use a signature type such as "*fp16", "i32" or "fp32"')
                return False, None
        self.speculative += 1  # annotation lookups never produce type errors
        try:
            av = self.expr(ann, record=False)
        finally:
            self.speculative -= 1
        if isinstance(av, Const):
            if av.value is lc.constexpr:
                return True, None
            if isinstance(av.value, lc.dtype):
                return False, av.value
        return False, None

    # ------------------------------------------------------------------
    # statements
    # ------------------------------------------------------------------
