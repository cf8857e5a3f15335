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
import builtins as pybuiltins
import difflib
import math
import operator
import types as pytypes
from dataclasses import dataclass, field

from newt import ir
from newt.ir.types import ANY_DTYPE, SymDim, SymDType, block_of, dims_equal, scalar_of, shape_of, type_str
from newt.language import core as lc

from .diagnostics import Diagnostic, Severity, Span
from .source import fast_walk
from .semantic import SemError, broadcast_shapes, computation_type, fmt_shape, integer_promote, literal_type
from .values import AV, Const, JitRef, JitSource, Opaque, PyFunc, Sym, TensorV, TupleV

FLAG_RET, FLAG_BRK, FLAG_CNT, RETVAL, LOOPIV = "$ret", "$brk", "$cnt", "$rv", "$iv"

#: codes that do not depend on the specialization (kept inside speculative branches)
STRUCTURAL_CODES = {"N001", "N002", "N003", "N004", "N005", "N006", "N044", "N045"}

MAX_INLINE_DEPTH = 32
MAX_UNROLL = 4096


class Undef(AV):
    """A variable defined on some paths only."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class Method(AV):
    """A bound tensor method (``x.to``, ``x.sum``)."""

    __slots__ = ("name", "self_av")

    def __init__(self, name, self_av):
        self.name = name
        self.self_av = self_av


class _Poison(Exception):
    """Raised when an operation meets an Opaque operand: the result is Opaque, silently."""


@dataclass
class Spec:
    """What is known about one specialization of a kernel."""

    label: str = "generic"
    constexprs: dict = field(default_factory=dict)  # name -> python value
    arg_types: dict = field(default_factory=dict)  # name -> dtype (pointer_type / scalar)
    pointer_params: set = field(default_factory=set)  # generic: params inferred to be pointers
    divisibility: dict = field(default_factory=dict)  # name -> 16 (alignment hints)
    num_warps: int | None = None
    num_stages: int | None = None
    origins: dict = field(default_factory=dict)  # constexpr name -> Span of where its value came from
    context: str | None = None  # shown with diagnostics of this specialization
    launched: bool = False  # known to be launched (returning a value is an error)
    concrete: bool = False  # every parameter type and constexpr is known (compile path)


@dataclass
class LoopCtx:
    has_break: bool


class Frame:
    def __init__(self, fn: JitSource, call_span: Span | None, is_kernel: bool):
        self.fn = fn
        self.call_span = call_span
        self.is_kernel = is_kernel
        self.scope: dict[str, AV] = {}
        self.loops: list[LoopCtx] = []


class Builder:
    def __init__(self, spec: Spec, diagnostics: list | None = None, notes: dict | None = None,
                 user_file: str | None = None):
        self.spec = spec
        self.diags: list[Diagnostic] = diagnostics if diagnostics is not None else []
        self.notes = notes  # Span -> AV (None: do not record)
        self.frames: list[Frame] = []
        self.region: ir.Region | None = None
        self.speculative = 0
        self.user_file = user_file
        self.static_prints: list[str] = []

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
                if not self.frames[i - 1].fn.lib:
                    return self.frames[i].call_span
            return Span(1, 1, 1, 2)
        sp = f.fn.src.span(node)
        if f.fn.col_shift:
            sp = Span(sp.line, sp.col + f.fn.col_shift, sp.end_line, sp.end_col + f.fn.col_shift)
        return sp

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
        self.diags.append(d)

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
    def build_function(self, fn: JitSource, is_kernel: bool = True) -> ir.Function | None:
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
                tv = bind_tuple_param(self, name, ty, body, params)
                frame.scope[name] = tv
                self.note(p, tv)
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
    def flow_state(self) -> str:
        """'none', 'static' (this path has definitely returned/broken/continued) or 'dynamic'."""
        names = [FLAG_RET]
        if self.frame.loops:
            names += [FLAG_BRK, FLAG_CNT]
        state = "none"
        for n in names:
            v = self.scope.get(n)
            if isinstance(v, Const) and v.value is True:
                return "static"
            if isinstance(v, TensorV):
                state = "dynamic"
        return state

    def not_exited(self, node) -> ir.Value:
        """int1 scalar: none of the active flags is set."""
        names = [FLAG_RET] + ([FLAG_BRK, FLAG_CNT] if self.frame.loops else [])
        cond = None
        for n in names:
            v = self.scope.get(n)
            if isinstance(v, TensorV):
                nv = self.emit("xor", [v.v, self.constant(True, lc.int1)], [lc.int1], node=node).result
                cond = nv if cond is None else self.emit("and", [cond, nv], [lc.int1], node=node).result
        return cond

    def stmts(self, body: list):
        for i, s in enumerate(body):
            self.stmt(s)
            st = self.flow_state()
            if st == "static":
                return
            if st == "dynamic" and i + 1 < len(body):
                rest = body[i + 1:]
                cond = self.not_exited(rest[0])
                self.runtime_if(cond, lambda rest=rest: self.stmts(rest), None, rest[0], clear_flags=True)
                return

    def stmt(self, node):
        meth = _STMT_DISPATCH.get(node.__class__)
        if meth is None:
            meth = getattr(type(self), "stmt_" + type(node).__name__, None)
        if meth is not None:
            meth = meth.__get__(self)
        if meth is None:
            self.unsupported(node)
            return
        try:
            meth(node)
        except SemError as e:
            self.report_sem(e, node)
        except _Poison:
            pass
        except RecursionError:
            self.report("N002", "the kernel is nested too deeply to analyze", node)

    def unsupported(self, node):
        what = {
            "With": "'with' statements", "AsyncWith": "'with' statements", "Try": "'try' statements",
            "TryStar": "'try' statements", "Raise": "'raise'", "Global": "'global'", "Nonlocal": "'nonlocal'",
            "ClassDef": "class definitions", "FunctionDef": "nested functions", "AsyncFunctionDef": "nested functions",
            "Import": "imports", "ImportFrom": "imports", "Delete": "'del'", "Match": "'match' statements",
            "AsyncFor": "'async for'", "Lambda": "lambda", "ListComp": "list comprehensions",
            "SetComp": "set comprehensions", "DictComp": "dict comprehensions", "GeneratorExp": "generator expressions",
            "Yield": "'yield'", "YieldFrom": "'yield'", "Await": "'await'", "NamedExpr": "':=' expressions",
            "Starred": "starred expressions", "Dict": "dict literals", "Set": "set literals",
        }.get(type(node).__name__, f"{type(node).__name__} nodes")
        verb = "are" if what.endswith("s") and not what.startswith("'") else "is"
        self.report("N002", f"{what} {verb} not supported inside a kernel", node)

    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node):
        if isinstance(node.value, ast.Constant):
            return  # docstring / bare literal
        self.expr(node.value)

    def stmt_Assign(self, node):
        value = self.expr(node.value)
        for t in node.targets:
            self.assign(t, value, node)

    def stmt_AnnAssign(self, node):
        if node.value is None:
            return
        value = self.expr(node.value)
        ann = self.expr(node.annotation, record=False)
        if isinstance(ann, Const) and ann.value is lc.constexpr:
            if not isinstance(value, (Const, Sym, Opaque)):
                self.report("N010", "a value annotated nl.constexpr must be known at compile time", node.value)
        elif isinstance(ann, Const) and isinstance(ann.value, lc.dtype) and isinstance(value, (TensorV, Const, Sym)):
            value = TensorV(self.cast_to(value, ann.value, node))
        self.assign(node.target, value, node)

    def stmt_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            self.report("N002", "augmented assignment to a subscript or attribute is not supported; use nl.store",
                        node.target)
            return
        cur = self.load_name(node.target.id, node.target)
        rhs = self.expr(node.value)
        res = self.binop(_BINOP_NAMES[type(node.op)], cur, rhs, node)
        self.assign(node.target, res, node)

    def assign(self, target, value: AV, node):
        if isinstance(target, ast.Name):
            if isinstance(value, Undef):
                value = Opaque()
            self.scope[target.id] = value
            self.note(target, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, Opaque):
                for t in target.elts:
                    self.assign(t, Opaque(), node)
                return
            if isinstance(value, TensorV):
                self.report("N023", "cannot unpack a block into several names", target,
                            hint="use nl.split for a block whose last dimension is 2")
                for t in target.elts:
                    self.assign(t, Opaque(), node)
                return
            items = value.items if isinstance(value, TupleV) else None
            if items is None and isinstance(value, Const) and isinstance(value.value, (tuple, list)):
                items = [Const(v) for v in value.value]
            if items is None or len(items) != len(target.elts) or any(isinstance(t, ast.Starred)
                                                                         for t in target.elts):
                n = len(items) if items is not None else "a non-tuple"
                self.report("N023", f"cannot unpack {n} value(s) into {len(target.elts)} names", target)
                for t in target.elts:
                    if isinstance(t, ast.Name):
                        self.assign(t, Opaque(), node)
                return
            for t, v in zip(target.elts, items):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            self.report("N002", "assigning into a block element is not supported; blocks are values",
                        target, hint="build the new block with nl.where, or write to memory with nl.store")
        else:
            self.report("N002", "this assignment target is not supported inside a kernel", target)

    # -- control flow --------------------------------------------------------
    def stmt_If(self, node):
        cond = self.expr(node.test)
        self.branch(cond, lambda: self.stmts(node.body), (lambda: self.stmts(node.orelse)) if node.orelse else None,
                    node, node.test)

    def branch(self, cond: AV, then_fn, else_fn, node, test_node):
        if isinstance(cond, Const) or (isinstance(cond, TupleV)):
            truth = bool(cond.value) if isinstance(cond, Const) else bool(cond.items)
            if truth:
                then_fn()
            elif else_fn is not None:
                else_fn()
            return
        if isinstance(cond, (Sym, Opaque, Undef)):
            self.speculative_if(then_fn, else_fn, node)
            return
        if isinstance(cond, TensorV):
            if shape_of(cond.type):
                self.report("N040", f"an if condition must be a scalar, not a block of shape "
                            f"{fmt_shape(shape_of(cond.type))}", test_node,
                            hint="reduce it (nl.max / nl.sum) or select elementwise with nl.where")
                self.speculative_if(then_fn, else_fn, node)
                return
            c = self.to_bool(cond, test_node)
            self.runtime_if(c, then_fn, else_fn, node)
            return
        self.report("N023", "this value cannot be used as a condition", test_node)

    def to_bool(self, av: AV, node) -> ir.Value:
        v = self.as_value(av, node)
        if scalar_of(v.type) == lc.int1:
            return v
        if scalar_of(v.type).is_ptr():
            raise SemError("N023", "a pointer cannot be used as a condition")
        zero = self.zero_like(v, node)
        return self.emit("ne", [v, zero], [block_of(lc.int1, shape_of(v.type))], node=node).result

    def zero_like(self, v, node):
        return self.constant(0.0 if scalar_of(v.type).is_floating() else 0, v.type, node)

    def speculative_if(self, then_fn, else_fn, node):
        """Both branches under an unknown constexpr (generic check): type-check both,
        report only spec-independent errors, merge what agrees."""
        cond = self.constant(Sym("?", True), lc.int1, node)
        self.runtime_if(cond, then_fn, else_fn, node, speculative=True)

    def runtime_if(self, cond: ir.Value, then_fn, else_fn, node, clear_flags: bool = False,
                   speculative: bool = False):
        pre = dict(self.scope)
        if speculative:
            self.speculative += 1
        saved = self.region
        regions = []
        scopes = []
        exited = []
        returned = []
        for fn_ in (then_fn, else_fn):
            r = ir.Region()
            self.region = r
            self.scope = dict(pre)
            if clear_flags and fn_ is then_fn:
                for f in (FLAG_RET, FLAG_BRK, FLAG_CNT):
                    if isinstance(self.scope.get(f), TensorV):
                        self.scope[f] = Const(False)
            if fn_ is not None:
                fn_()
            regions.append(r)
            scopes.append(self.scope)
            exited.append(self.flow_state() == "static")
            rv = self.scope.get(FLAG_RET)
            returned.append(isinstance(rv, Const) and rv.value is True)
        self.region = saved
        if speculative:
            self.speculative -= 1
        then_s, else_s = scopes
        names = []
        for name in list(then_s) + [n for n in else_s if n not in then_s]:
            a, b = then_s.get(name), else_s.get(name)
            if a is b:
                continue
            names.append(name)
        merged = dict(pre)
        plan = []  # (name, type, a, b)
        for name in names:
            a, b = then_s.get(name), else_s.get(name)
            if a is None or isinstance(a, Undef) or b is None or isinstance(b, Undef):
                present = b if (a is None or isinstance(a, Undef)) else a
                if present is None or isinstance(present, Undef):
                    merged[name] = Undef(name)
                    continue
                if name.startswith("$") or exited[0] or exited[1]:
                    if isinstance(present, (Const, JitRef, PyFunc)) and not _is_number(present):
                        merged[name] = present
                        continue
                    plan.append((name, None, a if not isinstance(a, Undef) else None,
                                 b if not isinstance(b, Undef) else None))
                else:
                    merged[name] = Undef(name)
                continue
            if isinstance(a, Opaque) or isinstance(b, Opaque):
                merged[name] = Opaque()
                continue
            if isinstance(a, Const) and isinstance(b, Const) and type(a.value) is type(b.value) and a.value == b.value:
                merged[name] = a
                continue
            plan.append((name, None, a, b))
        # decide a type for each merged value
        final = []
        for name, _, a, b in plan:
            try:
                try:
                    ty = self.merge_type(name, a, b, node)
                except SemError:
                    # after a `return` a variable's value no longer matters: keep the other branch's
                    if returned[0] != returned[1] and not name.startswith("$"):
                        if returned[0]:
                            a = None
                        else:
                            b = None
                        ty = self.merge_type(name, a, b, node)
                    else:
                        raise
            except SemError as e:
                if not speculative:
                    where = node
                    if isinstance(node, ast.If):
                        where = _last_assign(node.orelse, name) or _last_assign(node.body, name) or node
                    self.report_sem(e, where)
                merged[name] = Opaque()
                continue
            if ty is None:
                merged[name] = Opaque()
                continue
            final.append((name, ty, a, b))
        # materialize and yield in each region
        for idx, r in enumerate(regions):
            self.region = r
            vals = []
            for _name, ty, a, b in final:
                av = a if idx == 0 else b
                vals.append(self.materialize_as(av, ty, node))
            self.emit("yield", vals, [], node=None)
        self.region = saved
        op = self.emit("scf.if", [cond], [t for _, t, _, _ in final], regions=regions, node=node)
        for (name, _, _, _), res in zip(final, op.results):
            merged[name] = TensorV(res)
        if exited[0] and exited[1]:
            for f in (FLAG_RET, FLAG_BRK, FLAG_CNT):
                if f in then_s and isinstance(then_s[f], Const) and then_s[f].value is True and \
                        isinstance(else_s.get(f), Const) and else_s[f].value is True:
                    merged[f] = Const(True)
        self.scope = merged

    def merge_type(self, name, a: AV | None, b: AV | None, node):
        """The type a variable takes after two branches (or None when it cannot be a run-time value)."""
        def ty_of(v):
            if v is None:
                return None
            if isinstance(v, TensorV):
                return v.type
            if isinstance(v, Const) and _is_number(v):
                return ("lit", literal_type(v.value))
            if isinstance(v, Sym):
                return ("lit", lc.int1 if v.is_bool else lc.int32)
            return "bad"
        ta, tb = ty_of(a), ty_of(b)
        if ta == "bad" or tb == "bad":
            if name.startswith("$"):
                return None
            raise SemError("N042", f"{name!r} holds a compile-time value on one branch and a different one on the "
                           "other; it cannot become a run-time value", node=None)
        if ta is None or tb is None:
            t = ta if tb is None else tb
            return t[1] if isinstance(t, tuple) else t
        if isinstance(ta, tuple) and isinstance(tb, tuple):
            return computation_type(ta[1], True, tb[1], True, False, "merge") if ta[1] != tb[1] else ta[1]
        if isinstance(ta, tuple):
            return tb
        if isinstance(tb, tuple):
            return ta
        if ta == tb:
            return ta
        if scalar_of(ta).is_symbolic() or scalar_of(tb).is_symbolic():
            if _shapes_maybe_equal(shape_of(ta), shape_of(tb)):
                return None
        raise SemError("N042", f"{name!r} is {type_str(ta)} on one branch and {type_str(tb)} on the other",
                       hint="give the variable the same dtype and shape on every branch (cast with .to)")

    def materialize_as(self, av: AV | None, ty, node) -> ir.Value:
        if av is None or isinstance(av, Undef):
            return self.undef_value(ty, node)
        if isinstance(av, TensorV):
            if av.type == ty:
                return av.v
            return self.convert(av.v, scalar_of(ty), shape_of(ty), node)
        return self.as_tensor(av, scalar_of(ty), shape_of(ty), node)

    def undef_value(self, ty, node) -> ir.Value:
        el = scalar_of(ty)
        if el.is_ptr():
            return self.constant(0, ty, node)
        return self.constant(0.0 if el.is_floating() else 0, ty, node)

    # -- loops -------------------------------------------------------------
    def stmt_For(self, node):
        if node.orelse:
            self.report("N002", "'for ... else' is not supported inside a kernel", node.orelse[0])
        it = node.iter
        if not isinstance(it, ast.Call):
            self.report("N045", "a kernel loop must iterate over range(...), nl.range(...) or nl.static_range(...)",
                        it)
            return
        fav = self.expr(it.func)
        kind = None
        if isinstance(fav, Const):
            if fav.value is pybuiltins.range:
                kind = "range"
            elif getattr(fav.value, "__newt_builtin__", None) == "range":
                kind = "nl.range"
            elif getattr(fav.value, "__newt_builtin__", None) == "static_range":
                kind = "static"
        if kind is None:
            if isinstance(fav, Opaque):
                return
            self.report("N045", "a kernel loop must iterate over range(...), nl.range(...) or nl.static_range(...)",
                        it)
            return
        args = [self.expr(a) for a in it.args]
        kwargs = {k.arg: self.expr(k.value) for k in it.keywords if k.arg}
        if len(args) == 0 or len(args) > 3:
            self.report("N005", f"range expects 1 to 3 arguments, got {len(args)}", it)
            return
        allowed = {"nl.range": {"num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer", "flatten",
                                "warp_specialize", "step"},
                   "static": {"step"}, "range": set()}[kind]
        for k in kwargs:
            if k not in allowed:
                self.report("N005", f"unknown keyword argument {k!r} for {'nl.' if kind != 'range' else ''}"
                            f"{'static_range' if kind == 'static' else 'range'}", it)
        if len(args) == 1:
            start, end, step = Const(0), args[0], kwargs.get("step", Const(1))
        else:
            start, end = args[0], args[1]
            step = args[2] if len(args) > 2 else kwargs.get("step", Const(1))
        target = node.target
        if not isinstance(target, ast.Name):
            self.report("N002", "the loop variable must be a single name", target)
            return
        if kind == "static":
            self.static_loop(node, start, end, step, it)
            return
        attrs = {}
        for k in ("num_stages", "loop_unroll_factor"):
            v = kwargs.get(k)
            if v is not None:
                if isinstance(v, Const) and (v.value is None or isinstance(v.value, int)):
                    if v.value is not None:
                        attrs[k] = v.value
                elif isinstance(v, Sym):
                    pass
                elif not isinstance(v, Opaque):
                    self.report("N010", f"{k} must be a constexpr int", it)
        if isinstance(step, Const) and step.value == 0:
            self.report("N023", "range step must not be zero", it)
            return
        if any(isinstance(x, Opaque) for x in (start, end, step)):
            self.speculative_loop(node)
            return
        try:
            lb, ub, st = self.loop_bounds(start, end, step, it)
        except SemError as e:
            self.report_sem(e, it)
            self.speculative_loop(node)
            return
        if _has_jump(node.body, ast.Break) or _has_return(node.body):
            self.for_as_while(node, lb, ub, st, step, attrs)
        else:
            self.scf_for(node, lb, ub, st, attrs)

    def loop_bounds(self, start, end, step, node):
        vals = []
        tys = []
        for x in (start, end, step):
            if isinstance(x, TensorV):
                if shape_of(x.type):
                    raise SemError("N023", "range bounds must be scalars, not blocks")
                if not (x.dtype.is_int() or x.dtype.is_symbolic()):
                    raise SemError("N023", f"range bounds must be integers, got {x.dtype!r}")
                tys.append(x.dtype if not x.dtype.is_symbolic() else lc.int32)
            elif isinstance(x, Const):
                if not isinstance(x.value, int):
                    raise SemError("N023", f"range bounds must be integers, got {x.value!r}")
                tys.append(literal_type(x.value))
            elif isinstance(x, Sym):
                tys.append(lc.int32)
            else:
                raise SemError("N023", "range bounds must be integers")
            vals.append(x)
        ity = lc.int64 if any(t.int_bitwidth == 64 for t in tys if not t.is_bool()) else lc.int32
        return tuple(self.as_tensor(v, ity, (), node) for v in vals)

    def loop_carried(self, body, exclude=()) -> list[str]:
        names = []
        for n in _assigned_names(body):
            if n in exclude or n in names:
                continue
            if n in self.scope and not isinstance(self.scope[n], Undef):
                names.append(n)
        return names

    def _carried_init(self, name, node) -> ir.Value | None:
        av = self.scope[name]
        if isinstance(av, TensorV):
            return av.v
        if isinstance(av, (Const, Sym)) and (_is_number(av) or isinstance(av, Sym)):
            ty = literal_type(av.value) if isinstance(av, Const) else (lc.int1 if av.is_bool else lc.int32)
            return self.as_tensor(av, ty, (), node)
        return None

    def scf_for(self, node, lb, ub, st, attrs):
        target = node.target.id
        carried = self.loop_carried(node.body, exclude=(target,))
        inits, keep = [], []
        for n in carried:
            v = self._carried_init(n, node)
            if v is None:
                continue  # compile-time values (dtypes, functions) re-assigned in loops stay as they are
            inits.append(v)
            keep.append(n)
        pre = dict(self.scope)
        body = ir.Region([ir.Value(lb.type, name=None)] + [ir.Value(v.type) for v in inits])
        saved = self.region
        self.region = body
        self.scope = dict(pre)
        self.scope[target] = TensorV(body.args[0])
        self.note(node.target, self.scope[target])
        for n, arg in zip(keep, body.args[1:]):
            self.scope[n] = TensorV(arg)
        self.scope[FLAG_CNT] = Const(False)
        self.frame.loops.append(LoopCtx(False))
        self.stmts(node.body)
        self.frame.loops.pop()
        yields, bad = self._loop_yields(keep, inits, node)
        self.emit("yield", yields, [], node=None)
        body_scope = self.scope
        self.region = saved
        op = self.emit("scf.for", [lb, ub, st] + inits, [v.type for v in inits], attrs, [body], node=node)
        self.scope = pre
        for n, r in zip(keep, op.results):
            self.scope[n] = Opaque() if n in bad else TensorV(r)
        self._loop_locals(body_scope, pre, target)

    def _loop_locals(self, body_scope, pre, target):
        for n in body_scope:
            if n not in pre and not n.startswith("$"):
                self.scope[n] = Undef(n)
        if target not in pre:
            self.scope[target] = Undef(target)

    def _loop_yields(self, names, inits, node):
        yields, bad = [], set()
        for n, init in zip(names, inits):
            av = self.scope.get(n)
            if isinstance(av, TensorV) and av.type == init.type:
                yields.append(av.v)
                continue
            if isinstance(av, (Opaque, Undef)) or av is None:
                yields.append(init)
                bad.add(n)
                continue
            if isinstance(av, (Const, Sym)) and (_is_number(av) or isinstance(av, Sym)):
                yields.append(self.as_tensor(av, scalar_of(init.type), shape_of(init.type), node))
                continue
            if isinstance(av, TensorV) and scalar_of(av.type).is_symbolic() or scalar_of(init.type).is_symbolic():
                if isinstance(av, TensorV) and _shapes_maybe_equal(shape_of(av.type), shape_of(init.type)):
                    yields.append(init)
                    bad.add(n)
                    continue
            got = type_str(av.type) if isinstance(av, TensorV) else repr(getattr(av, "value", av))
            self.report("N042", f"loop-carried variable {n!r} enters the loop as {type_str(init.type)} but is "
                        f"re-assigned to {got} inside it", _last_assign(node.body, n) or node,
                        hint="keep the same dtype and shape across iterations "
                             "(initialize it with the right dtype, or cast with .to)")
            yields.append(init)
            bad.add(n)
        return yields, bad

    def for_as_while(self, node, lb, ub, st, step_av, attrs):
        """A for loop with break or return becomes a while loop on a hidden counter."""
        target = node.target.id
        self.scope[LOOPIV] = TensorV(lb)
        self.scope[FLAG_BRK] = Const(False)
        neg = isinstance(step_av, Const) and step_av.value < 0

        def cond_fn():
            iv = self.scope[LOOPIV].v
            ubv = ub
            if isinstance(step_av, Const):
                c = self.emit("gt" if neg else "lt", [iv, ubv], [lc.int1], node=node).result
            else:
                zero = self.constant(0, st.type)
                pos = self.emit("gt", [st, zero], [lc.int1], node=node).result
                lt = self.emit("lt", [iv, ubv], [lc.int1], node=node).result
                gt = self.emit("gt", [iv, ubv], [lc.int1], node=node).result
                c = self.emit("where", [pos, lt, gt], [lc.int1], node=node).result
            return TensorV(c)

        def pre_body():
            iv = self.scope[LOOPIV]
            self.scope[target] = iv
            self.note(node.target, iv)
            nxt = self.emit("add", [iv.v, st], [iv.v.type], node=node).result
            self.scope[LOOPIV] = TensorV(nxt)

        self.while_loop(node, cond_fn, pre_body, node.body, extra_carried=[LOOPIV, FLAG_BRK], exclude=(target,),
                        attrs=attrs)
        self.scope.pop(LOOPIV, None)
        self.scope.pop(FLAG_BRK, None)
        if target in self.scope and not isinstance(self.scope[target], Undef):
            self.scope[target] = Undef(target)

    def stmt_While(self, node):
        if node.orelse:
            self.report("N002", "'while ... else' is not supported inside a kernel", node.orelse[0])
        has_break = _has_jump(node.body, ast.Break)
        if has_break:
            self.scope[FLAG_BRK] = Const(False)

        def cond_fn():
            c = self.expr(node.test)
            if isinstance(c, TensorV) and shape_of(c.type):
                self.report("N040", f"a while condition must be a scalar, not a block of shape "
                            f"{fmt_shape(shape_of(c.type))}", node.test,
                            hint="reduce it first, e.g. nl.max(mask, 0) > 0")
                return Opaque()
            return c

        self.while_loop(node, cond_fn, None, node.body, extra_carried=[FLAG_BRK] if has_break else [],
                        exclude=())
        if has_break:
            self.scope.pop(FLAG_BRK, None)

    def while_loop(self, node, cond_fn, pre_body, body_stmts, extra_carried, exclude, attrs=None):
        carried = self.loop_carried(body_stmts, exclude=exclude)
        for n in extra_carried:
            if n not in carried:
                carried.append(n)
        if _has_return(body_stmts) and FLAG_RET not in carried:
            carried.append(FLAG_RET)
        keep, inits = [], []
        for n in carried:
            v = self._carried_init(n, node)
            if v is None:
                continue
            keep.append(n)
            inits.append(v)
        pre = dict(self.scope)
        saved = self.region
        # before region: the condition
        before = ir.Region([ir.Value(v.type) for v in inits])
        self.region = before
        self.scope = dict(pre)
        for n, a in zip(keep, before.args):
            self.scope[n] = TensorV(a)
        c = cond_fn()
        if isinstance(c, (Opaque, Sym, Undef)):
            self.region = saved
            self.scope = pre
            self.speculative_loop(node)
            return
        if isinstance(c, Const):
            if not c.value:
                self.region = saved
                self.scope = pre
                return  # `while False:` never runs
            cond = self.constant(True, lc.int1, node)
        else:
            cond = self.to_bool(c, node)
        for f in (FLAG_BRK, FLAG_RET):
            if f in keep:
                fv = self.scope[f].v
                nf = self.emit("xor", [fv, self.constant(True, lc.int1)], [lc.int1], node=node).result
                cond = self.emit("and", [cond, nf], [lc.int1], node=node).result
        self.emit("condition", [cond] + list(before.args), [], node=None)
        # after region: the body
        after = ir.Region([ir.Value(v.type) for v in inits])
        self.region = after
        self.scope = dict(pre)
        for n, a in zip(keep, after.args):
            self.scope[n] = TensorV(a)
        self.scope[FLAG_CNT] = Const(False)
        if pre_body is not None:
            pre_body()
        self.frame.loops.append(LoopCtx(FLAG_BRK in keep))
        self.stmts(body_stmts)
        self.frame.loops.pop()
        yields, bad = self._loop_yields(keep, inits, node)
        self.emit("yield", yields, [], node=None)
        body_scope = self.scope
        self.region = saved
        op = self.emit("scf.while", inits, [v.type for v in inits], dict(attrs or {}), [before, after], node=node)
        self.scope = pre
        for n, r in zip(keep, op.results):
            self.scope[n] = Opaque() if n in bad else TensorV(r)
        self._loop_locals(body_scope, pre, "$none")

    def speculative_loop(self, node):
        """Type-check a loop body whose bounds are unknown, without emitting a loop."""
        pre = dict(self.scope)
        saved = self.region
        self.region = ir.Region()
        self.speculative += 1
        try:
            carried = self.loop_carried(node.body)
            for n in carried:
                self.scope[n] = Opaque()
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                self.scope[node.target.id] = Opaque()
            self.frame.loops.append(LoopCtx(False))
            self.scope[FLAG_CNT] = Const(False)
            self.stmts(node.body)
            self.frame.loops.pop()
        finally:
            self.speculative -= 1
            self.region = saved
        self.scope = pre
        for n in _assigned_names(node.body):
            if n in pre:
                self.scope[n] = Opaque()

    def static_loop(self, node, start, end, step, it):
        vals = []
        for x, what in ((start, "start"), (end, "end"), (step, "step")):
            if isinstance(x, Const) and isinstance(x.value, int) and not isinstance(x.value, bool):
                vals.append(x.value)
            elif isinstance(x, (Sym, Opaque)):
                self.speculative_loop(node)
                return
            else:
                self.report("N010", f"nl.static_range {what} must be a constexpr int", it,
                            hint="declare the bound as a nl.constexpr parameter")
                self.speculative_loop(node)
                return
        if vals[2] == 0:
            self.report("N023", "static_range step must not be zero", it)
            return
        rng = range(vals[0], vals[1], vals[2])
        if len(rng) > MAX_UNROLL:
            self.report("N023", f"nl.static_range would unroll {len(rng)} iterations (limit {MAX_UNROLL})", it)
            return
        target = node.target.id
        has_break = _has_jump(node.body, ast.Break)
        outer_brk = self.scope.get(FLAG_BRK)
        self.scope[FLAG_BRK] = Const(False)
        self.frame.loops.append(LoopCtx(has_break))
        self._unrolled(node, list(rng), target)
        self.frame.loops.pop()
        if outer_brk is None:
            self.scope.pop(FLAG_BRK, None)
        else:
            self.scope[FLAG_BRK] = outer_brk
        self.scope.pop(FLAG_CNT, None)

    def _unrolled(self, node, values, target):
        for k, v in enumerate(values):
            self.scope[FLAG_CNT] = Const(False)
            self.scope[target] = Const(v)
            self.note(node.target, self.scope[target])
            self.stmts(node.body)
            # a continue only ends this iteration
            self.scope[FLAG_CNT] = Const(False)
            st = self.flow_state()
            if st == "static":
                return
            if st == "dynamic" and k + 1 < len(values):
                rest = values[k + 1:]
                cond = self.not_exited(node)
                self.runtime_if(cond, lambda rest=rest: self._unrolled(node, rest, target), None, node,
                                clear_flags=True)
                return

    def stmt_Break(self, node):
        if not self.frame.loops:
            self.report("N002", "'break' outside a loop", node)
            return
        self.scope[FLAG_BRK] = Const(True)

    def stmt_Continue(self, node):
        if not self.frame.loops:
            self.report("N002", "'continue' outside a loop", node)
            return
        self.scope[FLAG_CNT] = Const(True)

    def stmt_Return(self, node):
        if node.value is not None:
            val = self.expr(node.value)
            if self.frame.is_kernel:
                if self.spec.launched and not (isinstance(val, Const) and val.value is None):
                    self.report("N041", "a launched kernel cannot return a value", node.value,
                                hint="write results to memory with nl.store")
            else:
                self.scope[RETVAL] = val
        self.scope[FLAG_RET] = Const(True)

    def stmt_Assert(self, node):
        cond = self.expr(node.test)
        msg = ""
        if node.msg is not None:
            m = self.expr(node.msg)
            msg = str(m.value) if isinstance(m, Const) else ""
        if isinstance(cond, Const):
            if not cond.value:
                self.report("N050", f"assertion failed: {msg or ast.unparse(node.test)}", node)
            return
        if isinstance(cond, TensorV):
            c = self.to_bool(cond, node)
            self.emit("assert", [c], [], {"msg": msg or ast.unparse(node.test), "has_mask": False}, node=node)

    # ------------------------------------------------------------------
    # expressions
    # ------------------------------------------------------------------
    def expr(self, node, record: bool = True) -> AV:
        try:
            meth = _EXPR_DISPATCH.get(node.__class__)
            if meth is None:
                meth = getattr(type(self), "expr_" + type(node).__name__, None)
                if meth is not None:
                    _EXPR_DISPATCH[node.__class__] = meth
            if meth is not None:
                meth = meth.__get__(self)
            if meth is None:
                self.unsupported(node)
                v = Opaque()
            else:
                v = meth(node)
        except SemError as e:
            self.report_sem(e, node)
            v = Opaque()
        except _Poison:
            v = Opaque()
        except RecursionError:
            self.report("N002", "the expression is nested too deeply to analyze", node)
            v = Opaque()
        if record:
            self.note(node, v)
        return v

    def expr_Constant(self, node):
        if node.value is Ellipsis:
            raise SemError("N002", "'...' is not supported inside a kernel")
        if isinstance(node.value, bytes):
            raise SemError("N002", "bytes literals are not supported inside a kernel")
        if isinstance(node.value, complex):
            raise SemError("N002", "complex numbers are not supported inside a kernel")
        return Const(node.value)

    def expr_Name(self, node):
        return self.load_name(node.id, node)

    def load_name(self, name, node) -> AV:
        v = self.scope.get(name)
        if v is not None:
            if isinstance(v, Undef):
                self.report("N007", f"{name!r} may be undefined here: it is only assigned on some paths "
                            "(or only inside a loop)", node,
                            hint=f"assign {name} before the if/loop as well")
                return Opaque()
            return v
        g = self.frame.fn.env.lookup(name)
        if g is not None:
            return g
        if name in _PY_BUILTINS:
            return Const(_PY_BUILTINS[name])
        cands = list(self.scope) + list(_PY_BUILTINS)
        sugg = difflib.get_close_matches(name, [c for c in cands if not c.startswith("$")], n=1)
        self.report("N003", f"name {name!r} is not defined", node,
                    hint=f"did you mean {sugg[0]!r}?" if sugg else None)
        return Opaque()

    def expr_Attribute(self, node):
        base = self.expr(node.value)
        return self.getattr(base, node.attr, node)

    def getattr(self, base: AV, attr: str, node) -> AV:
        if isinstance(base, (Opaque, Undef)):
            return Opaque()
        if isinstance(base, Const):
            obj = base.value
            if isinstance(obj, pytypes.ModuleType):
                if not hasattr(obj, attr) or attr.startswith("_"):
                    names = [n for n in dir(obj) if not n.startswith("_")]
                    sugg = difflib.get_close_matches(attr, names, n=1)
                    modname = obj.__name__.replace("newt.language", "nl")
                    self.report("N004", f"{modname} has no attribute {attr!r}", node,
                                hint=f"did you mean {modname}.{sugg[0]}?" if sugg else None)
                    return Opaque()
                key = (obj.__name__, attr)
                hit = _MODULE_ATTR_CACHE.get(key)
                if hit is None:
                    from .values import from_python
                    hit = from_python(getattr(obj, attr), lib=False)
                    if isinstance(hit, (Const, JitRef, PyFunc)):
                        _MODULE_ATTR_CACHE[key] = hit
                return hit
            if isinstance(obj, lc.dtype):
                if isinstance(obj, lc.pointer_type) and attr == "element_ty":
                    return Const(obj.element_ty)
                if attr in ("primitive_bitwidth", "int_bitwidth", "fp_mantissa_width", "name", "itemsize"):
                    if obj.is_symbolic():
                        return Sym(f"{obj}.{attr}")
                    return Const(getattr(obj, attr))
                if attr.startswith("is_") and hasattr(obj, attr):
                    return PyFunc(attr, getattr(obj, attr), trusted=True)
                if attr == "scalar":
                    return Const(obj)
                self.report("N004", f"dtype {obj!r} has no attribute {attr!r}", node)
                return Opaque()
            if obj is lc.PropagateNan and attr in ("NONE", "ALL"):
                return Const(getattr(lc.PropagateNan, attr))
            if isinstance(obj, (int, float, bool, str)) or obj is None:
                self.report("N004", f"{type(obj).__name__} value has no attribute {attr!r}", node)
                return Opaque()
            self.report("N004", f"{obj!r} has no attribute {attr!r}", node)
            return Opaque()
        if isinstance(base, Sym):
            return Opaque()
        if isinstance(base, TensorV):
            if attr == "dtype":
                return Const(base.dtype)
            if attr == "type":
                return Const(base.type)
            if attr == "shape":
                return TupleV([Const(d) if isinstance(d, int) else Sym(d.expr) for d in base.shape])
            if attr == "numel":
                n = 1
                for d in base.shape:
                    if not isinstance(d, int):
                        return Sym("numel")
                    n *= d
                return Const(n)
            if attr == "T":
                return self.call_builtin("trans", [base], {}, node, [node.value], {})
            if attr == "to" or attr in lc.TENSOR_METHODS or attr in _EXTRA_METHODS:
                return Method(attr, base)
            names = sorted(set(lc.TENSOR_METHODS) | set(_EXTRA_METHODS) | {"to", "dtype", "shape", "T", "numel"})
            sugg = difflib.get_close_matches(attr, names, n=1)
            self.report("N004", f"block values have no attribute {attr!r}", node,
                        hint=f"did you mean .{sugg[0]}?" if sugg else None)
            return Opaque()
        if isinstance(base, TupleV):
            self.report("N004", f"tuples have no attribute {attr!r}", node)
            return Opaque()
        self.report("N004", f"this value has no attribute {attr!r}", node)
        return Opaque()

    def expr_Tuple(self, node):
        return TupleV([self.expr(e) for e in node.elts])

    expr_List = expr_Tuple

    def expr_JoinedStr(self, node):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                av = self.expr(v.value)
                if isinstance(av, Const):
                    spec = ""
                    if v.format_spec is not None:
                        fs = self.expr(v.format_spec)
                        spec = fs.value if isinstance(fs, Const) else ""
                    parts.append(format(av.value, spec))
                elif isinstance(av, TensorV):
                    parts.append(type_str(av.type))
                else:
                    parts.append("?")
        return Const("".join(parts))

    def expr_Subscript(self, node):
        base = self.expr(node.value)
        sl = node.slice
        if isinstance(base, (Opaque, Undef)):
            return Opaque()
        if isinstance(base, TupleV) or (isinstance(base, Const) and isinstance(base.value, (tuple, list, str))):
            items = base.items if isinstance(base, TupleV) else [Const(x) for x in base.value]
            if isinstance(sl, ast.Slice):
                parts = []
                for x in (sl.lower, sl.upper, sl.step):
                    if x is None:
                        parts.append(None)
                        continue
                    xv = self.expr(x)
                    if not isinstance(xv, Const):
                        raise SemError("N010", "tuple slices must use constexpr bounds")
                    parts.append(xv.value)
                r = items[slice(*parts)]
                return TupleV(r) if isinstance(base, TupleV) else Const(base.value[slice(*parts)])
            idx = self.expr(sl)
            if not isinstance(idx, Const) or not isinstance(idx.value, int):
                if isinstance(idx, Opaque):
                    return Opaque()
                raise SemError("N010", "tuples can only be indexed with a constexpr int")
            try:
                return items[idx.value]
            except IndexError:
                raise SemError("N032", f"index {idx.value} is out of range for a tuple of {len(items)}") from None
        if isinstance(base, TensorV):
            return self.index_block(base, sl, node)
        if isinstance(base, Sym):
            return Opaque()
        raise SemError("N023", "this value cannot be indexed")

    def index_block(self, base: TensorV, sl, node) -> AV:
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        shape = list(base.shape)
        rank = len(shape)
        n_colon = 0
        new_dims = []  # positions of None in the output
        out_pos = 0
        for e in elts:
            if isinstance(e, ast.Constant) and e.value is None:
                new_dims.append(out_pos)
                out_pos += 1
            elif isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None:
                n_colon += 1
                out_pos += 1
            else:
                raise SemError("N002", "blocks can only be indexed with ':' and None (e.g. x[:, None])",
                               hint="to pick elements, compute pointers and use nl.load, or use nl.where")
        if n_colon != rank:
            raise SemError("N032", f"indexing a block of rank {rank} with {n_colon} ':'"
                           + (" (a scalar has rank 0)" if rank == 0 else ""),
                           hint=f"use exactly {rank} ':' plus any number of None")
        v = base.v
        for pos in new_dims:
            v = self._expand_dims(v, pos, node)
        return TensorV(v)

    def _expand_dims(self, v, axis, node):
        shape = list(shape_of(v.type))
        shape.insert(axis, 1)
        return self.emit("expand_dims", [v], [block_of(scalar_of(v.type), shape)], {"axis": axis}, node=node).result

    def expr_IfExp(self, node):
        cond = self.expr(node.test)
        if isinstance(cond, Const):
            return self.expr(node.body) if cond.value else self.expr(node.orelse)
        if isinstance(cond, (Sym, Opaque, Undef)):
            self.speculative += 1
            try:
                a = self.expr(node.body)
                b = self.expr(node.orelse)
            finally:
                self.speculative -= 1
            if isinstance(a, TensorV) and isinstance(b, TensorV) and a.type == b.type:
                return a
            if isinstance(a, Const) and isinstance(b, Const) and a.value == b.value:
                return a
            return Opaque()
        if isinstance(cond, TensorV):
            if shape_of(cond.type):
                raise SemError("N040", "a conditional expression needs a scalar condition; "
                               "for blocks use nl.where(cond, a, b)")
            a = self.expr(node.body)
            b = self.expr(node.orelse)
            return self.call_builtin("where", [cond, a, b], {}, node, [node.test, node.body, node.orelse], {})
        raise SemError("N023", "this value cannot be used as a condition")

    def expr_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        cur = self.expr(node.values[0])
        for vnode in node.values[1:]:
            if isinstance(cur, Const):
                if bool(cur.value) != is_and:  # short-circuit
                    return cur
                cur = self.expr(vnode)
                continue
            nxt = self.expr(vnode)
            if isinstance(cur, (Opaque, Undef)) or isinstance(nxt, (Opaque, Undef)):
                return Opaque()
            if isinstance(cur, Sym) and isinstance(nxt, (Sym, Const)):
                cur = Sym(f"({cur.expr} {'and' if is_and else 'or'} {_sym_text(nxt)})", True)
                continue
            a = self.to_bool(cur, node)
            b = self.to_bool(nxt, node) if not isinstance(nxt, Const) else self.constant(bool(nxt.value), lc.int1)
            shape = broadcast_shapes(shape_of(a.type), shape_of(b.type))
            a = self.convert(a, lc.int1, shape, node)
            b = self.convert(b, lc.int1, shape, node)
            cur = TensorV(self.emit("and" if is_and else "or", [a, b], [a.type], node=node).result)
        return cur

    def expr_UnaryOp(self, node):
        v = self.expr(node.operand)
        return self.unop(type(node.op), v, node)

    def unop(self, opty, v, node):
        if isinstance(v, (Opaque, Undef)):
            return Opaque()
        if isinstance(v, Const):
            try:
                return Const(_UNOPS[opty](v.value))
            except Exception as e:  # noqa: BLE001
                raise SemError("N023", f"cannot apply this operator to {v.value!r}: {e}") from None
        if isinstance(v, Sym):
            sym = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not ", ast.Invert: "~"}[opty]
            return Sym(f"{sym}{v.expr}", opty is ast.Not)
        if not isinstance(v, TensorV):
            raise SemError("N023", "this operator cannot be applied here")
        t = v.dtype
        if opty is ast.UAdd:
            return v
        if opty is ast.USub:
            if t.is_ptr():
                raise SemError("N022", "a pointer cannot be negated")
            return TensorV(self.emit("neg", [v.v], [v.type], node=node).result)
        if opty is ast.Invert:
            if t.is_floating():
                raise SemError("N021", f"'~' is a bitwise operator and cannot be applied to {t!r}",
                               hint="use .to(nl.int32, bitcast=True) to operate on the bits")
            if t.is_ptr():
                raise SemError("N023", "'~' cannot be applied to a pointer")
            return TensorV(self.emit("invert", [v.v], [v.type], node=node).result)
        if opty is ast.Not:
            b = self.to_bool(v, node)
            return TensorV(self.emit("xor", [b, self.constant(True, b.type)], [b.type], node=node).result)
        raise SemError("N023", "unsupported unary operator")

    def expr_BinOp(self, node):
        a = self.expr(node.left)
        b = self.expr(node.right)
        return self.binop(_BINOP_NAMES[type(node.op)], a, b, node)

    def expr_Compare(self, node):
        left = self.expr(node.left)
        result = None
        for op, rnode in zip(node.ops, node.comparators):
            right = self.expr(rnode)
            if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                r = self.compare_identity(op, left, right)
            else:
                r = self.binop(_CMP_NAMES[type(op)], left, right, node)
            result = r if result is None else self._and(result, r, node)
            left = right
        return result

    def _and(self, a, b, node):
        if isinstance(a, Const):
            return b if a.value else a
        if isinstance(a, (Opaque, Undef)) or isinstance(b, (Opaque, Undef)):
            return Opaque()
        if isinstance(a, Sym) or isinstance(b, Sym):
            return Sym("and", True)
        x, y = self.to_bool(a, node), self.to_bool(b, node)
        shape = broadcast_shapes(shape_of(x.type), shape_of(y.type))
        x, y = self.convert(x, lc.int1, shape, node), self.convert(y, lc.int1, shape, node)
        return TensorV(self.emit("and", [x, y], [x.type], node=node).result)

    def compare_identity(self, op, a, b):
        if isinstance(a, (Opaque, Undef)) or isinstance(b, (Opaque, Undef)):
            return Opaque()
        if isinstance(op, (ast.In, ast.NotIn)):
            if isinstance(b, TupleV) and isinstance(a, Const) and all(isinstance(x, Const) for x in b.items):
                r = any(_const_eq(a.value, x.value) for x in b.items)
                return Const(r if isinstance(op, ast.In) else not r)
            if isinstance(b, Const) and isinstance(a, Const):
                r = a.value in b.value
                return Const(r if isinstance(op, ast.In) else not r)
            if isinstance(a, Sym) or isinstance(b, Sym):
                return Sym("in", True)
            raise SemError("N023", "'in' needs compile-time values")
        if isinstance(a, Const) and isinstance(b, Const):
            r = a.value is b.value or (a.value is None) == (b.value is None) and a.value is None
            if not (a.value is None or b.value is None):
                r = a.value is b.value or a.value == b.value
            return Const(r if isinstance(op, ast.Is) else not r)
        if isinstance(a, Sym) or isinstance(b, Sym):
            return Sym("is", True)
        # a run-time value is never None
        none_side = (isinstance(b, Const) and b.value is None) or (isinstance(a, Const) and a.value is None)
        if none_side:
            return Const(not isinstance(op, ast.Is))
        raise SemError("N023", "'is' compares compile-time values only; use == for blocks")

    # ------------------------------------------------------------------
    # arithmetic
    # ------------------------------------------------------------------
    def binop(self, opname: str, a: AV, b: AV, node) -> AV:
        if isinstance(a, (Opaque, Undef)) or isinstance(b, (Opaque, Undef)):
            return Opaque()
        if isinstance(a, Const) and isinstance(b, Const):
            if isinstance(a.value, lc.dtype) and a.value.is_symbolic() or \
                    isinstance(b.value, lc.dtype) and b.value.is_symbolic():
                if opname in ("eq", "ne"):
                    return Sym(f"{a.value} {opname} {b.value}", True)
            try:
                return Const(_PYOPS[opname](a.value, b.value))
            except ZeroDivisionError:
                raise SemError("N023", "division by zero in a compile-time expression") from None
            except Exception:  # noqa: BLE001
                raise SemError("N023", f"operator {_OPSYM[opname]} is not defined for {a.value!r} and {b.value!r}") \
                    from None
        if isinstance(a, (Const, Sym)) and isinstance(b, (Const, Sym)):
            is_bool = opname in _CMP_SET
            return Sym(f"{_sym_text(a)}{_OPSYM[opname]}{_sym_text(b)}", is_bool)
        if isinstance(a, TupleV) or isinstance(b, TupleV):
            if opname == "add" and isinstance(a, TupleV) and isinstance(b, TupleV):
                return TupleV(a.items + b.items)
            if opname in ("eq", "ne") and isinstance(a, TupleV) and isinstance(b, TupleV):
                if all(isinstance(x, Const) for x in a.items + b.items):
                    eq = [x.value for x in a.items] == [x.value for x in b.items]
                    return Const(eq if opname == "eq" else not eq)
                return Sym("tuple-eq", True)
            raise SemError("N023", f"operator {_OPSYM[opname]} is not defined for tuples")
        return self.tensor_binop(opname, a, b, node)

    def operand_info(self, av: AV):
        """(dtype, shape, is_literal)."""
        if isinstance(av, TensorV):
            return av.dtype, av.shape, False
        if isinstance(av, Const):
            if isinstance(av.value, (bool, int, float)):
                return literal_type(av.value), (), True
            if av.value is None:
                raise SemError("N023", "None cannot be used as a value here")
            raise SemError("N023", f"{av.value!r} cannot be used as a value here")
        if isinstance(av, Sym):
            return (lc.int1 if av.is_bool else lc.int32), (), True
        raise SemError("N023", "this value cannot be used in arithmetic")

    def tensor_binop(self, opname, a, b, node) -> AV:
        if opname == "matmul":
            return self.call_builtin("dot", [a, b], {}, node, [node, node], {})
        if opname == "pow_":
            ta = self.operand_info(a)[0]
            if not (ta.is_floating() or ta.is_symbolic()):
                raise SemError("N023", f"'**' needs a floating-point base inside a kernel, got {ta!r}",
                               hint="multiply explicitly (x * x) or convert with .to(nl.float32)")
            return self.call_builtin("pow", [a, b], {}, node, [node, node], {})
        ta, sa, la = self.operand_info(a)
        tb, sb, lb = self.operand_info(b)
        shape = broadcast_shapes(sa, sb)
        # an integer literal that does not fit the other operand's type takes part in promotion
        if la and not lb and _int_literal_overflows(a, tb):
            la = False
        elif lb and not la and _int_literal_overflows(b, ta):
            lb = False
        if ta.is_ptr() or tb.is_ptr():
            return self.pointer_binop(opname, a, b, ta, tb, shape, node)
        if opname in ("and", "or", "xor", "shl", "shr"):
            for t in (ta, tb):
                if t.is_floating():
                    raise SemError("N021", f"bitwise operator {_OPSYM[opname]} is not defined for floating-point "
                                   f"values ({t!r})", hint="use .to(nl.int32, bitcast=True) to operate on the bits")
            if ta.is_symbolic() or tb.is_symbolic():
                ct = computation_type(ta, la, tb, lb, False, _OPSYM[opname])
            elif la != lb:
                ct = tb if la else ta
            else:
                ct = integer_promote(ta, tb)
        else:
            div_or_mod = opname in ("truediv", "floordiv", "mod")
            ct = computation_type(ta, la, tb, lb, div_or_mod, _OPSYM[opname])
            if opname == "truediv":
                if ct.is_int():
                    ct = lc.float32
                elif ct.is_floating() and not (la or lb):
                    # float / float: the operand with the wider mantissa wins
                    ct = ta if ta.fp_mantissa_width >= tb.fp_mantissa_width else tb
                    if ct.primitive_bitwidth < 32:
                        ct = lc.float32
            if opname == "floordiv" and ct.is_floating():
                raise SemError("N023", "'//' is not defined for floating-point values",
                               hint="use nl.floor(x / y)")
        av_ = self.as_tensor(a, ct, shape, node)
        bv_ = self.as_tensor(b, ct, shape, node)
        if opname in _CMP_SET:
            rt = block_of(lc.int1, shape)
        else:
            rt = block_of(ct, shape)
        return TensorV(self.emit(opname, [av_, bv_], [rt], node=node).result)

    def pointer_binop(self, opname, a, b, ta, tb, shape, node):
        if opname in _CMP_SET:
            if ta.is_ptr() and tb.is_ptr():
                av_ = self.as_tensor(a, ta, shape, node)
                bv_ = self.as_tensor(b, ta, shape, node)
                return TensorV(self.emit(opname, [av_, bv_], [block_of(lc.int1, shape)], node=node).result)
            raise SemError("N022", "a pointer can only be compared with another pointer")
        if opname not in ("add", "sub"):
            raise SemError("N022", f"operator {_OPSYM[opname]} is not defined for pointers",
                           hint="pointer arithmetic is ptr + int offset (in elements)")
        if ta.is_ptr() and tb.is_ptr():
            raise SemError("N022", f"cannot {'add' if opname == 'add' else 'subtract'} two pointers",
                           hint="add an integer offset to one pointer instead")
        if tb.is_ptr() and opname == "sub":
            raise SemError("N022", "cannot subtract a pointer from a number")
        ptr, off, pty, oty = (a, b, ta, tb) if ta.is_ptr() else (b, a, tb, ta)
        if oty.is_floating():
            raise SemError("N022", f"pointer offsets must be integers, not {oty!r}",
                           hint="cast the offset with .to(nl.int32)")
        if not (oty.is_int() or oty.is_symbolic()):
            raise SemError("N022", f"pointer offsets must be integers, not {oty!r}")
        pv = self.as_tensor(ptr, pty, shape, node)
        oty2 = oty if (oty.is_int() and not oty.is_bool()) else lc.int32
        ov = self.as_tensor(off, oty2, shape, node)
        if opname == "sub":
            ov = self.emit("neg", [ov], [ov.type], node=node).result
        return TensorV(self.emit("addptr", [pv, ov], [pv.type], node=node).result)

    # ------------------------------------------------------------------
    # conversions
    # ------------------------------------------------------------------
    def as_value(self, av: AV, node) -> ir.Value:
        """A run-time value for ``av`` with its natural type."""
        if isinstance(av, TensorV):
            return av.v
        if isinstance(av, (Opaque, Undef)):
            raise _Poison()
        t, s, _ = self.operand_info(av)
        return self.as_tensor(av, t, s, node)

    def as_tensor(self, av: AV, dtype, shape, node) -> ir.Value:
        """``av`` converted to ``dtype`` and broadcast to ``shape``."""
        if isinstance(av, (Opaque, Undef)):
            raise _Poison()
        if isinstance(av, Const):
            val = av.value
            if isinstance(val, bool):
                val = bool(val)
            elif not isinstance(val, (int, float)):
                self.operand_info(av)  # raises a clear error
            if dtype.is_floating() or dtype.is_symbolic():
                val = float(val) if dtype.is_floating() else val
            elif dtype.is_bool():
                val = bool(val)
            elif dtype.is_int():
                if isinstance(val, float):
                    val = int(val)
                val = _wrap_int(val, dtype)
            return self.constant(val, block_of(dtype, shape), node)
        if isinstance(av, Sym):
            return self.constant(av, block_of(dtype, shape), node)
        if isinstance(av, TensorV):
            return self.convert(av.v, dtype, shape, node)
        raise SemError("N023", "this value cannot be used as a block value")

    def convert(self, v: ir.Value, dtype, shape, node) -> ir.Value:
        if scalar_of(v.type) != dtype:
            v = self.cast_value(v, dtype, node)
        return self.broadcast_value(v, shape, node)

    def broadcast_value(self, v: ir.Value, shape, node) -> ir.Value:
        shape = tuple(shape)
        cur = shape_of(v.type)
        if cur == shape:
            return v
        el = scalar_of(v.type)
        if not cur:
            return self.emit("splat", [v], [block_of(el, shape)], node=node).result
        if len(cur) < len(shape):
            for _ in range(len(shape) - len(cur)):
                v = self._expand_dims(v, 0, node)
            cur = shape_of(v.type)
            if cur == shape:
                return v
        if len(cur) > len(shape):
            raise SemError("N030", f"cannot broadcast shape {fmt_shape(cur)} to {fmt_shape(shape)}")
        for c, s in zip(cur, shape):
            if c != 1 and dims_equal(c, s) is False:
                raise SemError("N030", f"cannot broadcast shape {fmt_shape(cur)} to {fmt_shape(shape)}")
        return self.emit("broadcast", [v], [block_of(el, shape)], node=node).result

    def cast_value(self, v: ir.Value, dst, node, bitcast: bool = False, rounding: str | None = None) -> ir.Value:
        src = scalar_of(v.type)
        shape = shape_of(v.type)
        if src == dst:
            return v
        rt = block_of(dst, shape)
        if src.is_symbolic() or dst.is_symbolic():
            return self.emit("cast", [v], [rt], node=node).result
        if bitcast:
            if src.primitive_bitwidth != dst.primitive_bitwidth:
                raise SemError("N024", f"cannot bitcast {src!r} ({src.primitive_bitwidth} bits) to {dst!r} "
                               f"({dst.primitive_bitwidth} bits)", hint="bitcast needs types of the same width")
            return self.emit("bitcast", [v], [rt], node=node).result
        if src.is_ptr() and dst.is_ptr():
            return self.emit("bitcast", [v], [rt], node=node).result
        if src.is_ptr() or dst.is_ptr():
            other = dst if src.is_ptr() else src
            if not (other.is_int() and other.primitive_bitwidth == 64):
                raise SemError("N024", f"cannot cast between {src!r} and {dst!r}",
                               hint="pointers convert only to and from 64-bit integers")
            return self.emit("cast", [v], [rt], node=node).result
        if dst.is_bool():
            zero = self.constant(0.0 if src.is_floating() else 0, v.type, node)
            return self.emit("ne", [v, zero], [rt], node=node).result
        attrs = {}
        if rounding:
            attrs["rounding"] = rounding
        return self.emit("cast", [v], [rt], attrs, node=node).result

    def cast_to(self, av: AV, dst, node, bitcast=False, rounding=None) -> ir.Value:
        if isinstance(av, TensorV):
            return self.cast_value(av.v, dst, node, bitcast=bitcast, rounding=rounding)
        if bitcast and isinstance(av, Const):
            v = self.as_value(av, node)
            return self.cast_value(v, dst, node, bitcast=True)
        t, s, _ = self.operand_info(av)
        return self.as_tensor(av, dst, s, node)

    # ------------------------------------------------------------------
    # calls
    # ------------------------------------------------------------------
    def expr_Call(self, node):
        func = self.expr(node.func)
        args, arg_nodes = [], []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.expr(a.value)
                if isinstance(v, TupleV):
                    args.extend(v.items)
                    arg_nodes.extend([a] * len(v.items))
                    continue
                if isinstance(v, Const) and isinstance(v.value, (tuple, list)):
                    args.extend(Const(x) for x in v.value)
                    arg_nodes.extend([a] * len(v.value))
                    continue
                if isinstance(v, Opaque):
                    return Opaque()
                raise SemError("N002", "only tuples can be unpacked with * in a call")
            args.append(self.expr(a))
            arg_nodes.append(a)
        kwargs, kw_nodes = {}, {}
        for k in node.keywords:
            if k.arg is None:
                raise SemError("N002", "'**' arguments are not supported inside a kernel")
            kwargs[k.arg] = self.expr(k.value)
            kw_nodes[k.arg] = k.value
        return self.call(func, args, kwargs, node, arg_nodes, kw_nodes)

    def call(self, func: AV, args, kwargs, node, arg_nodes, kw_nodes) -> AV:
        if isinstance(func, (Opaque, Undef)):
            return Opaque()
        if isinstance(func, Method):
            if func.name == "to":
                return self.call_builtin("cast", [func.self_av] + args, kwargs, node, [node] + arg_nodes, kw_nodes)
            name = lc.TENSOR_METHODS.get(func.name) or _EXTRA_METHODS[func.name]
            return self.call_any(name, [func.self_av] + args, kwargs, node, [node] + arg_nodes, kw_nodes)
        if isinstance(func, JitRef):
            return self.inline(func.fn, args, kwargs, node, arg_nodes, kw_nodes)
        if isinstance(func, Const):
            obj = func.value
            bname = getattr(obj, "__newt_builtin__", None)
            if bname in ("range", "static_range"):
                raise SemError("N045", f"nl.{bname} can only be used as the iterable of a for loop")
            if bname is not None:
                return self.call_builtin(bname, args, kwargs, node, arg_nodes, kw_nodes)
            if obj is lc.constexpr:
                if len(args) != 1:
                    raise SemError("N005", "nl.constexpr takes one argument")
                if not isinstance(args[0], (Const, Sym, Opaque)):
                    raise SemError("N010", "nl.constexpr(...) needs a compile-time value", node=arg_nodes[0])
                return args[0]
            if getattr(obj, "__newt_tuple__", False) and isinstance(obj, type):  # nl.tuple(iterable)
                if kwargs or len(args) > 1:
                    raise SemError("N005", "nl.tuple takes one iterable")
                if not args:
                    return TupleV([])
                if isinstance(args[0], TupleV):
                    return TupleV(list(args[0].items))
                if isinstance(args[0], Const) and isinstance(args[0].value, (tuple, list)):
                    return TupleV([Const(x) for x in args[0].value])
                raise SemError("N023", "nl.tuple expects a tuple or list of values", node=arg_nodes[0])
            if obj is lc.pointer_type:
                if args and isinstance(args[0], Const) and isinstance(args[0].value, lc.dtype):
                    return Const(lc.pointer_type(args[0].value))
                raise SemError("N023", "nl.pointer_type expects a dtype")
            if obj in _PY_BUILTIN_FUNCS:
                return self.call_pybuiltin(obj, args, kwargs, node, arg_nodes)
            if isinstance(obj, pytypes.BuiltinFunctionType) and getattr(obj, "__module__", "") == "math":
                if all(isinstance(a, Const) for a in args) and not kwargs:
                    return Const(obj(*[a.value for a in args]))
                raise SemError("N006", f"math.{obj.__name__} runs only on compile-time values in a kernel",
                               hint="use nl.math functions on blocks")
            raise SemError("N006", f"{obj!r} cannot be called inside a kernel")
        if isinstance(func, PyFunc):
            if func.trusted or isinstance(func.obj, pytypes.MethodType):
                vals = []
                for a in args:
                    py = _to_python(a)
                    if py is _NO:
                        break
                    vals.append(py)
                else:
                    kv = {k: _to_python(v) for k, v in kwargs.items()}
                    if _NO not in kv.values():
                        try:
                            return _from_py_result(func.obj(*vals, **kv))
                        except Exception as e:  # noqa: BLE001
                            raise SemError("N023", f"{func.name}: {e}") from None
                if any(isinstance(a, (Sym, Opaque)) for a in args):
                    return Opaque()
            has_block = any(isinstance(a, TensorV) for a in list(args) + list(kwargs.values()))
            raise SemError("N006", f"{func.name!r} is a plain Python function and cannot be called inside a kernel"
                           + (" on block values" if has_block else ""),
                           hint=f"decorate {func.name} with @newt.jit to call it from a kernel")
        if isinstance(func, TensorV):
            raise SemError("N023", "a block value is not callable")
        raise SemError("N023", "this value is not callable")

    def call_any(self, name, args, kwargs, node, arg_nodes, kw_nodes):
        from newt.language import BUILTINS
        fn = BUILTINS.get(name)
        if getattr(fn, "__newt_inline__", False):
            from .values import jit_source_from_function
            return self.inline(jit_source_from_function(fn, lib=True), args, kwargs, node, arg_nodes, kw_nodes)
        return self.call_builtin(name, args, kwargs, node, arg_nodes, kw_nodes)

    def call_builtin(self, name, args, kwargs, node, arg_nodes, kw_nodes) -> AV:
        from .ops import RULES, bind
        rule = RULES.get(name)
        if rule is None:
            raise SemError("N004", f"nl.{name} is not supported yet")
        bound = bind(name, args, kwargs, arg_nodes, kw_nodes, node)
        return rule(self, bound, node)

    def call_pybuiltin(self, fn, args, kwargs, node, arg_nodes):
        name = fn.__name__
        if fn is pybuiltins.range:
            raise SemError("N045", "range(...) can only be used as the iterable of a for loop")
        if fn is pybuiltins.print:
            prefix = ""
            rest = list(args)
            if rest and isinstance(rest[0], Const) and isinstance(rest[0].value, str):
                prefix = rest.pop(0).value
            return self.call_builtin("device_print", [Const(prefix)] + rest, {}, node,
                                     [node] * (len(rest) + 1), {})
        if any(isinstance(a, (Opaque, Undef)) for a in args):
            return Opaque()
        if all(isinstance(a, Const) for a in args) and all(isinstance(v, Const) for v in kwargs.values()):
            try:
                return _from_py_result(fn(*[a.value for a in args], **{k: v.value for k, v in kwargs.items()}))
            except Exception as e:  # noqa: BLE001
                raise SemError("N023", f"{name}(): {e}") from None
        if fn is pybuiltins.len:
            a = args[0] if args else None
            if isinstance(a, TupleV):
                return Const(len(a.items))
            if isinstance(a, TensorV) and a.shape:
                d = a.shape[0]
                return Const(d) if isinstance(d, int) else Sym(d.expr)
        if fn in (pybuiltins.tuple, pybuiltins.list) and len(args) == 1 and isinstance(args[0], TupleV):
            return args[0]
        if fn in (pybuiltins.min, pybuiltins.max) and all(isinstance(a, (Const, Sym)) for a in args):
            return Sym(f"{name}(...)")
        if fn is pybuiltins.abs and len(args) == 1 and isinstance(args[0], TensorV):
            return self.call_builtin("abs", args, {}, node, arg_nodes, {})
        if fn in (pybuiltins.int, pybuiltins.float, pybuiltins.bool) and args and isinstance(args[0], Sym):
            return args[0]
        hint = None
        if fn in (pybuiltins.min, pybuiltins.max):
            hint = f"use nl.{'minimum' if fn is pybuiltins.min else 'maximum'}(a, b) for elementwise, " \
                   f"or nl.{name}(x, axis) to reduce"
        elif fn in (pybuiltins.int, pybuiltins.float, pybuiltins.bool):
            hint = f"use x.to(nl.{ {'int': 'int32', 'float': 'float32', 'bool': 'int1'}[name] })"
        raise SemError("N006", f"Python's {name}() only works on compile-time values inside a kernel", hint=hint)

    # -- inlining --------------------------------------------------------
    def inline(self, fn: JitSource, args, kwargs, node, arg_nodes, kw_nodes) -> AV:
        if len(self.frames) >= MAX_INLINE_DEPTH:
            raise SemError("N002", f"calls nest more than {MAX_INLINE_DEPTH} deep (recursion is not supported)")
        if any(fr.fn.node is fn.node for fr in self.frames):
            raise SemError("N002", f"{fn.name} calls itself; recursion is not supported inside kernels")
        params = fn.params
        fnode = fn.node
        defaults = list(fnode.args.defaults)
        n_nodef = len(params) - len(defaults)
        if len(args) > len(params):
            raise SemError("N005", f"{fn.name}() takes {len(params)} arguments but {len(args)} were given")
        bound: dict[str, AV] = {}
        for p, v in zip(params, args):
            bound[p.arg] = v
        pnames = [p.arg for p in params]
        for k, v in kwargs.items():
            if k not in pnames:
                sugg = difflib.get_close_matches(k, pnames, n=1)
                raise SemError("N005", f"{fn.name}() got an unexpected keyword argument {k!r}",
                               hint=f"did you mean {sugg[0]!r}?" if sugg else None, node=kw_nodes.get(k))
            if k in bound:
                raise SemError("N005", f"{fn.name}() got multiple values for argument {k!r}")
            bound[k] = v
        call_span = self.span(node)
        frame = Frame(fn, call_span, is_kernel=False)
        self.frames.append(frame)
        try:
            for i, p in enumerate(params):
                if p.arg not in bound:
                    if i >= n_nodef:
                        bound[p.arg] = self.expr(defaults[i - n_nodef], record=False)
                    else:
                        self.frames.pop()
                        try:
                            raise SemError("N005", f"{fn.name}() missing required argument {p.arg!r}")
                        finally:
                            self.frames.append(frame)
                is_cx, _ = self._param_annotation(p)
                v = bound[p.arg]
                if is_cx and isinstance(v, TensorV):
                    self.frames.pop()
                    try:
                        idx = pnames.index(p.arg)
                        n = arg_nodes[idx] if idx < len(arg_nodes) else kw_nodes.get(p.arg, node)
                        self.report("N010", f"argument {p.arg!r} of {fn.name} is nl.constexpr but the value is only "
                                    "known at run time", n)
                    finally:
                        self.frames.append(frame)
                    v = Opaque()
                frame.scope[p.arg] = v
                self.note(p, v)
            frame.scope[FLAG_RET] = Const(False)
            self.stmts(fnode.body)
            rv = frame.scope.get(RETVAL)
        finally:
            self.frames.pop()
        if rv is None or isinstance(rv, Undef):
            return Const(None)
        return rv


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

_MODULE_ATTR_CACHE: dict = {}
_EXPR_DISPATCH: dict = {}
_STMT_DISPATCH: dict = {}

_BINOP_NAMES = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl",
    ast.RShift: "shr", ast.Pow: "pow_", ast.MatMult: "matmul",
}
_CMP_NAMES = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_CMP_SET = set(_CMP_NAMES.values())
_OPSYM = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "and": "&",
          "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "pow_": "**", "matmul": "@", "lt": "<", "le": "<=",
          "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_PYOPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "and": operator.and_, "or": operator.or_,
    "xor": operator.xor, "shl": operator.lshift, "shr": operator.rshift, "pow_": operator.pow,
    "matmul": operator.matmul, "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "eq": operator.eq, "ne": operator.ne,
}
_UNOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}

_PY_BUILTIN_FUNCS = {pybuiltins.range, pybuiltins.min, pybuiltins.max, pybuiltins.len, pybuiltins.int,
                     pybuiltins.float, pybuiltins.bool, pybuiltins.print, pybuiltins.abs, pybuiltins.tuple,
                     pybuiltins.list, pybuiltins.isinstance, pybuiltins.round, pybuiltins.str}
_PY_BUILTINS = {f.__name__: f for f in _PY_BUILTIN_FUNCS}
_PY_BUILTINS.update({"True": True, "False": False, "None": None, "math": math})

#: extra tensor methods beyond the registered ones (name -> builtin / inline function)
_EXTRA_METHODS = {"ravel": "ravel", "sigmoid": "sigmoid", "softmax": "softmax", "cast": "cast",
                  "interleave": "interleave", "where": "where"}


def _sym_text(av) -> str:
    if isinstance(av, Sym):
        return av.expr
    if isinstance(av, Const):
        return repr(av.value)
    return "?"


def _is_number(av) -> bool:
    return isinstance(av, Const) and isinstance(av.value, (bool, int, float))


def _const_eq(a, b) -> bool:
    try:
        return type(a) is type(b) and a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                                  and not isinstance(a, bool) and a == b)
    except Exception:  # noqa: BLE001
        return False


def _same_type(a, b) -> bool:
    if isinstance(a, TensorV) and isinstance(b, TensorV):
        return a.type == b.type
    if isinstance(a, Const) and isinstance(b, Const):
        return type(a.value) is type(b.value)
    return False


def _shapes_maybe_equal(a, b) -> bool:
    if len(a) != len(b):
        return False
    return all(dims_equal(x, y) is not False for x, y in zip(a, b))


def _int_literal_overflows(av, ty) -> bool:
    if not (isinstance(av, Const) and isinstance(av.value, int) and not isinstance(av.value, bool)):
        return False
    if not ty.is_int() or ty.is_bool() or ty.is_symbolic():
        return False
    bits = ty.int_bitwidth
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if ty.is_int_signed() else (0, (1 << bits) - 1)
    return not lo <= av.value <= hi


def _wrap_int(v: int, t) -> int:
    bits = t.int_bitwidth
    mask = (1 << bits) - 1
    v &= mask
    if t.is_int_signed() and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


class _NoValue:
    pass


_NO = _NoValue()


def _to_python(av):
    if isinstance(av, Const):
        return av.value
    if isinstance(av, TupleV):
        items = [_to_python(x) for x in av.items]
        return _NO if any(i is _NO for i in items) else tuple(items)
    return _NO


def _from_py_result(v):
    if isinstance(v, tuple):
        return TupleV([_from_py_result(x) for x in v])
    if isinstance(v, SymDim):
        return Sym(v.expr)
    return Const(v)


def _memo(key):
    """Cache a pure function of a statement list on its first node (ASTs are not mutated)."""
    def deco(f):
        def wrapper(stmts, *args):
            if not stmts:
                return f(stmts, *args)
            holder = stmts[0]
            cache = getattr(holder, "_newt_memo", None)
            if cache is None:
                cache = {}
                holder._newt_memo = cache
            k = (key, len(stmts)) + args
            if k not in cache:
                cache[k] = f(stmts, *args)
            return cache[k]
        return wrapper
    return deco


@_memo("assigned")
def _assigned_names(stmts) -> list[str]:
    out = []

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            if node.id not in out:
                out.append(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for s in stmts:
        visit(s)
    return out


@_memo("jump")
def _has_jump(stmts, kind) -> bool:
    """A break/continue that belongs to this loop (not to a nested one)."""
    def visit(node):
        if isinstance(node, kind):
            return True
        if isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            # the else clauses are not supported anyway; nested loop bodies own their jumps
            return False
        return any(visit(c) for c in ast.iter_child_nodes(node))
    return any(visit(s) for s in stmts)


@_memo("return")
def _has_return(stmts) -> bool:
    def visit(node):
        if isinstance(node, ast.Return):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return False
        return any(visit(c) for c in ast.iter_child_nodes(node))
    return any(visit(s) for s in stmts)


def _last_assign(stmts, name):
    found = None
    for s in stmts:
        for n in fast_walk(s):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    for x in fast_walk(t):
                        if isinstance(x, ast.Name) and x.id == name:
                            found = n
    return found
