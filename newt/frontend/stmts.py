"""Statements of a kernel body: assignment, ``if``, loops, ``break``/``continue``/``return``, ``assert``.

A mixin of ``Builder``: control flow Triton lacks is lowered to flags carried by
structured ``scf`` ops.
"""

from __future__ import annotations

import ast
import builtins as pybuiltins
from typing import TYPE_CHECKING

from newt import ir
from newt.ir.types import numel, block_of, scalar_of, shape_of, type_str
from newt.language import core as lc

from .diagnostics import Severity
from .frame import FLAG_BRK, FLAG_CNT, FLAG_RET, LOOPIV, MAX_UNROLL, RETVAL, LoopCtx
from .semantic import BINOP_NAMES, SemError, computation_type, fmt_shape, is_number, literal_type, shapes_maybe_equal
from .source import fast_walk
from .values import AV, Const, JitRef, Opaque, Poison, PyFunc, Sym, TensorV, TupleV, Undef

_STMT_DISPATCH: dict = {}


def _compile_time(v) -> bool:
    """A constexpr value: a constant, a symbol of the specialization, or a tuple of them."""
    if isinstance(v, TupleV):
        return all(_compile_time(x) for x in v.items)
    return isinstance(v, (Const, Sym, Opaque))


if TYPE_CHECKING:
    from .builder_api import BuilderAPI as _Base
else:
    _Base = object


class StatementsMixin(_Base):
    region: ir.Region  # the statements below switch it while building nested regions

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
        """int1 scalar: none of the active flags is set (asked only when one is a run-time value)."""
        names = [FLAG_RET] + ([FLAG_BRK, FLAG_CNT] if self.frame.loops else [])
        cond = None
        for n in names:
            v = self.scope.get(n)
            if isinstance(v, TensorV):
                nv = self.emit("xor", [v.v, self.constant(True, lc.int1)], [lc.int1], node=node).result
                cond = nv if cond is None else self.emit("and", [cond, nv], [lc.int1], node=node).result
        assert cond is not None, "not_exited() outside a dynamic flow state"
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
        except Poison:
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
            if not _compile_time(value):
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
        res = self.binop(BINOP_NAMES[type(node.op)], cur, rhs, node)
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
            if shape_of(cond.type) and numel(shape_of(cond.type)) == 1:
                cond = self.unsplat(cond, test_node)  # Triton: a one-element block is a condition
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
        from .rules.blockptr import join_carried, split_branches
        bps = split_branches(then_s, else_s)  # block pointers on both branches: merged part by part
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
                    if isinstance(present, (Const, JitRef, PyFunc)) and not is_number(present):
                        merged[name] = present
                        continue
                    plan.append((name, None, a if not isinstance(a, Undef) else None,
                                 b if not isinstance(b, Undef) else None))
                elif speculative:
                    # a branch on a constexpr whose value the generic check does not know: the path that misses
                    # the assignment may be one no specialization takes (an if/elif chain over the values a
                    # kernel accepts), so the name is unknown here, not "maybe undefined"
                    merged[name] = Opaque()
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
        join_carried(self, bps)

    def merge_type(self, name, a: AV | None, b: AV | None, node):
        """The type a variable takes after two branches (or None when it cannot be a run-time value)."""
        def ty_of(v):
            if v is None:
                return None
            if isinstance(v, TensorV):
                return v.type
            if isinstance(v, Const) and is_number(v):
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
        if scalar_of(ta).is_symbolic() or scalar_of(tb).is_symbolic() or scalar_of(ta) == scalar_of(tb):
            if shapes_maybe_equal(shape_of(ta), shape_of(tb)):  # (differing only in unknown constexprs)
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
                                "warp_specialize", "disable_licm", "step"},
                   "static": {"step"}, "range": set()}[kind]
        if kind == "range" and kwargs:
            # Triton's code generator reads Python's range(...) by its positional arguments and drops every
            # keyword: the code compiles, but what the keyword asks for does not happen
            for k in kwargs:
                self.report("N005", f"range() ignores the keyword {k!r} (as Triton does)", it,
                            hint=f"use nl.range(..., {k}=...) for a loop option", severity=Severity.WARNING)
            kwargs = {}
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
        if isinstance(av, (Const, Sym)) and (is_number(av) or isinstance(av, Sym)):
            ty = literal_type(av.value) if isinstance(av, Const) else (lc.int1 if av.is_bool else lc.int32)
            return self.as_tensor(av, ty, (), node)
        return None

    def scf_for(self, node, lb, ub, st, attrs):
        target = node.target.id
        carried = self.loop_carried(node.body, exclude=(target,))
        from .rules.blockptr import join_carried, resplit_carried, split_carried
        bps = split_carried(self, carried)  # block pointers: their run-time parts are carried
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
        join_carried(self, bps)
        self.scope[FLAG_CNT] = Const(False)
        self.frame.loops.append(LoopCtx(False))
        self.stmts(node.body)
        self.frame.loops.pop()
        resplit_carried(self, bps, node)
        yields, bad = self._loop_yields(keep, inits, node)
        self.emit("yield", yields, [], node=None)
        body_scope = self.scope
        self.region = saved
        op = self.emit("scf.for", [lb, ub, st] + inits, [v.type for v in inits], attrs, [body], node=node)
        self.scope = pre
        for n, r in zip(keep, op.results):
            self.scope[n] = Opaque() if n in bad else TensorV(r)
        join_carried(self, bps)
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
            if isinstance(av, (Const, Sym)) and (is_number(av) or isinstance(av, Sym)):
                yields.append(self.as_tensor(av, scalar_of(init.type), shape_of(init.type), node))
                continue
            if isinstance(av, TensorV) and (scalar_of(av.type).is_symbolic() or scalar_of(init.type).is_symbolic()
                                            or scalar_of(av.type) == scalar_of(init.type)):
                # an unknown element type, or shapes that differ only in unknown constexprs ([M, N] and [K, K]
                # agree when the launches make M = N = K): the generic check cannot know, so it stays silent
                if shapes_maybe_equal(shape_of(av.type), shape_of(init.type)):
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
            if isinstance(c, TensorV) and shape_of(c.type) and numel(shape_of(c.type)) == 1:
                c = self.unsplat(c, node.test)
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
        from .rules.blockptr import join_carried, resplit_carried, split_carried
        bps = split_carried(self, carried)  # block pointers: their run-time parts are carried
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
        join_carried(self, bps)
        self.scope[FLAG_CNT] = Const(False)
        if pre_body is not None:
            pre_body()
        self.frame.loops.append(LoopCtx(FLAG_BRK in keep))
        self.stmts(body_stmts)
        self.frame.loops.pop()
        resplit_carried(self, bps, node)
        yields, bad = self._loop_yields(keep, inits, node)
        self.emit("yield", yields, [], node=None)
        body_scope = self.scope
        self.region = saved
        op = self.emit("scf.while", inits, [v.type for v in inits], dict(attrs or {}), [before, after], node=node)
        self.scope = pre
        for n, r in zip(keep, op.results):
            self.scope[n] = Opaque() if n in bad else TensorV(r)
        join_carried(self, bps)
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
            self.emit("assert", [c], [], {"msg": msg or ast.unparse(node.test)}, node=node)

    # ------------------------------------------------------------------
    # expressions
    # ------------------------------------------------------------------


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
