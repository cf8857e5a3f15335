"""Statements of a kernel body: assignment, ``if``, loops, ``break``/``continue``/``return``, ``assert``.

``StatementBuilder`` runs a statement list; loops are ``LoopBuilder``'s (``loops.py``).  Control flow
Triton lacks is lowered to flags carried by structured ``scf`` ops.
"""

from __future__ import annotations

import ast

from newt import ir
from newt.ir.types import block_of, numel, scalar_of, shape_of, type_str
from newt.language import core as lc

from .context import BuilderPart
from .frame import FLAG_BRK, FLAG_CNT, FLAG_RET, RETVAL
from .semantic import BINOP_NAMES, SemError, computation_type, fmt_shape, is_number, literal_type, shapes_maybe_equal
from .source import fast_walk
from .typedconst import assigned
from .values import AV, Const, JitRef, Opaque, Poison, PyFunc, Sym, TensorV, TupleV, Undef

_STMT_DISPATCH: dict = {}


class StatementBuilder(BuilderPart):
    """Runs statements: assignment, ``if`` (folded, at run time or speculative), ``break``/``continue``/
    ``return`` as flags, ``assert``; hands loops to ``LoopBuilder``."""

    def flow_state(self) -> str:
        """'none', 'static' (this path has definitely returned/broken/continued) or 'dynamic'."""
        names = [FLAG_RET]
        if self.ctx.frame.loops:
            names += [FLAG_BRK, FLAG_CNT]
        state = "none"
        for n in names:
            v = self.ctx.scope.get(n)
            if isinstance(v, Const) and v.value is True:
                return "static"
            if isinstance(v, TensorV):
                state = "dynamic"
        return state

    def not_exited(self, node) -> ir.Value:
        """int1 scalar: none of the active flags is set (asked only when one is a run-time value)."""
        names = [FLAG_RET] + ([FLAG_BRK, FLAG_CNT] if self.ctx.frame.loops else [])
        cond = None
        for n in names:
            v = self.ctx.scope.get(n)
            if isinstance(v, TensorV):
                nv = self.ctx.emit("xor", [v.v, self.ctx.constant(True, lc.int1)], [lc.int1], node=node).result
                cond = nv if cond is None else self.ctx.emit("and", [cond, nv], [lc.int1], node=node).result
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
            self.ctx.report_sem(e, node)
        except Poison:
            pass
        except RecursionError:
            self.ctx.report("N002", "the kernel is nested too deeply to analyze", node)

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
        self.ctx.report("N002", f"{what} {verb} not supported inside a kernel", node)

    def stmt_Pass(self, node):
        pass

    def stmt_Raise(self, node):
        # Triton rejects a ``raise`` only where its code generator reaches it: the ``else: raise ValueError(...)``
        # of an if/elif chain over constexprs is fine for the specializations that take another branch.  Under a
        # branch the generic check cannot decide, no specialization is known to reach it: silent
        if self.ctx.speculative:
            return
        self.unsupported(node)

    def stmt_Expr(self, node):
        if isinstance(node.value, ast.Constant):
            return  # docstring / bare literal
        self.exprs.expr(node.value)

    def stmt_Assign(self, node):
        value = assigned(self.exprs.expr(node.value))
        for t in node.targets:
            self.assign(t, value, node)

    def stmt_AnnAssign(self, node):
        if node.value is None:
            return
        value = self.exprs.expr(node.value)
        ann = self.exprs.expr(node.annotation, record=False)
        if isinstance(ann, Const) and ann.value is lc.constexpr:
            # Triton 3.9 binds the value as it is (``CTA_N: tl.constexpr = TILE_N * tiles_per_cta`` with a run-time
            # ``tiles_per_cta`` holds a run-time value): an error only where it is used as a compile-time value
            pass
        elif isinstance(ann, Const) and isinstance(ann.value, lc.dtype) and isinstance(value, (TensorV, Const, Sym)):
            value = TensorV(self.exprs.cast_to(value, ann.value, node))
        else:
            value = assigned(value)
        self.assign(node.target, value, node)

    def stmt_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            self.ctx.report("N002", "augmented assignment to a subscript or attribute is not supported; use nl.store",
                            node.target)
            return
        cur = self.exprs.load_name(node.target.id, node.target)
        rhs = self.exprs.expr(node.value)
        res = self.exprs.binop(BINOP_NAMES[type(node.op)], cur, rhs, node)
        self.assign(node.target, assigned(res), node)

    def assign(self, target, value: AV, node):
        if isinstance(target, ast.Name):
            if isinstance(value, Undef):
                value = Opaque()
            self.ctx.scope[target.id] = value
            self.ctx.note(target, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, Opaque):
                for t in target.elts:
                    self.assign(t, Opaque(), node)
                return
            if isinstance(value, TensorV):
                self.ctx.report("N023", "cannot unpack a block into several names", target,
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
                self.ctx.report("N023", f"cannot unpack {n} value(s) into {len(target.elts)} names", target)
                for t in target.elts:
                    if isinstance(t, ast.Name):
                        self.assign(t, Opaque(), node)
                return
            for t, v in zip(target.elts, items):
                self.assign(t, assigned(v), node)
        elif isinstance(target, ast.Subscript):
            self.ctx.report("N002", "assigning into a block element is not supported; blocks are values",
                            target, hint="build the new block with nl.where, or write to memory with nl.store")
        else:
            self.ctx.report("N002", "this assignment target is not supported inside a kernel", target)

    # -- control flow --------------------------------------------------------
    def stmt_If(self, node):
        cond = self.exprs.expr(node.test)
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
            tv: TensorV = cond
            if shape_of(tv.type) and numel(shape_of(tv.type)) == 1:
                tv = self.exprs.unsplat(tv, test_node)  # Triton: a one-element block is a condition
            if shape_of(tv.type):
                self.ctx.report("N040", f"an if condition must be a scalar, not a block of shape "
                                f"{fmt_shape(shape_of(tv.type))}", test_node,
                                hint="reduce it (nl.max / nl.sum) or select elementwise with nl.where")
                self.speculative_if(then_fn, else_fn, node)
                return
            c = self.to_bool(tv, test_node)
            self.runtime_if(c, then_fn, else_fn, node)
            return
        self.ctx.report("N023", "this value cannot be used as a condition", test_node)

    def to_bool(self, av: AV, node) -> ir.Value:
        v = self.exprs.as_value(av, node)
        if scalar_of(v.type) == lc.int1:
            return v
        if scalar_of(v.type).is_ptr():
            # Triton's rule: a pointer is true when it is not null (``if bias_ptr:``), its address != 0
            v = self.exprs.cast_value(v, lc.int64, node)
        zero = self.zero_like(v, node)
        return self.ctx.emit("ne", [v, zero], [block_of(lc.int1, shape_of(v.type))], node=node).result

    def zero_like(self, v, node):
        return self.ctx.constant(0.0 if scalar_of(v.type).is_floating() else 0, v.type, node)

    def speculative_if(self, then_fn, else_fn, node):
        """Both branches under an unknown constexpr (generic check): type-check both,
        report only spec-independent errors, merge what agrees."""
        cond = self.ctx.constant(Sym("?", True), lc.int1, node)
        self.runtime_if(cond, then_fn, else_fn, node, speculative=True)

    def runtime_if(self, cond: ir.Value, then_fn, else_fn, node, clear_flags: bool = False,
                   speculative: bool = False):
        pre = dict(self.ctx.scope)
        if speculative:
            self.ctx.speculative += 1
        saved = self.ctx.region
        regions = []
        scopes = []
        exited = []
        returned = []
        for fn_ in (then_fn, else_fn):
            r = ir.Region()
            self.ctx.region = r
            self.ctx.scope = dict(pre)
            if clear_flags and fn_ is then_fn:
                for f in (FLAG_RET, FLAG_BRK, FLAG_CNT):
                    if isinstance(self.ctx.scope.get(f), TensorV):
                        self.ctx.scope[f] = Const(False)
            if fn_ is not None:
                fn_()
            regions.append(r)
            scopes.append(self.ctx.scope)
            exited.append(self.flow_state() == "static")
            rv = self.ctx.scope.get(FLAG_RET)
            returned.append(isinstance(rv, Const) and rv.value is True)
        self.ctx.region = saved
        if speculative:
            self.ctx.speculative -= 1
        if clear_flags and else_fn is None and self._exited_by_return_only(pre):
            # the rest of a body after a run-time `return`: its other path is the one that returned, whose
            # values no longer matter (Triton's early return leaves that path out of the join)
            returned[1] = True
        then_s, else_s = scopes
        from .rules.blockptr import join_carried, split_branches
        bps = split_branches(then_s, else_s)  # block pointers on both branches: merged part by part
        names = []
        same = {}  # new names both paths bind to the one value (``i_tg = task_id`` on each side)
        for name in list(then_s) + [n for n in else_s if n not in then_s]:
            a, b = then_s.get(name), else_s.get(name)
            if a is b:
                if a is not None and name not in pre:
                    same[name] = a
                continue
            names.append(name)
        merged = dict(pre)
        merged.update(same)
        plan = []  # (name, type, a, b)
        for name in names:
            a, b = then_s.get(name), else_s.get(name)
            if a is None or isinstance(a, Undef) or b is None or isinstance(b, Undef):
                present = b if (a is None or isinstance(a, Undef)) else a
                if present is None or isinstance(present, Undef):
                    merged[name] = Undef(name)
                    continue
                # a guard over the rest of a block after a run-time ``return`` (``if i_s >= T: return`` then
                # ``i_t = ...``): its other path has returned, where the value no longer matters
                ret_guard = clear_flags and not self.ctx.frame.loops and b is None
                if name.startswith("$") or exited[0] or exited[1] or ret_guard:
                    if isinstance(present, Opaque) or (isinstance(present, (Const, JitRef, PyFunc)) and
                                                       not is_number(present)):
                        merged[name] = present  # (an unknown value stays unknown: nothing to materialize)
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
                    self.ctx.report_sem(e, where)
                merged[name] = Opaque()
                continue
            if ty is None:
                merged[name] = Opaque()
                continue
            final.append((name, ty, a, b))
        # materialize and yield in each region
        for idx, r in enumerate(regions):
            self.ctx.region = r
            vals = []
            for _name, ty, a, b in final:
                av = a if idx == 0 else b
                vals.append(self.materialize_as(av, ty, node))
            self.ctx.emit("yield", vals, [], node=None)
        self.ctx.region = saved
        op = self.ctx.emit("scf.if", [cond], [t for _, t, _, _ in final], regions=regions, node=node)
        for (name, _, _, _), res in zip(final, op.results):
            merged[name] = TensorV(res)
        if exited[0] and exited[1]:
            for f in (FLAG_RET, FLAG_BRK, FLAG_CNT):
                if f in then_s and isinstance(then_s[f], Const) and then_s[f].value is True and \
                        isinstance(else_s.get(f), Const) and else_s[f].value is True:
                    merged[f] = Const(True)
        self.ctx.scope = merged
        join_carried(self.api, bps)

    def _exited_by_return_only(self, scope) -> bool:
        """The dynamic exit flags of ``scope`` are a ``return``'s alone (no ``break``/``continue`` is pending,
        whose path's values the loop still carries)."""
        if not isinstance(scope.get(FLAG_RET), TensorV):
            return False
        return not any(isinstance(scope.get(f), TensorV) or (isinstance(scope.get(f), Const) and scope[f].value)
                       for f in (FLAG_BRK, FLAG_CNT))

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
            return self.exprs.convert(av.v, scalar_of(ty), shape_of(ty), node)
        return self.exprs.as_tensor(av, scalar_of(ty), shape_of(ty), node)

    def undef_value(self, ty, node) -> ir.Value:
        el = scalar_of(ty)
        if el.is_ptr():
            return self.ctx.constant(0, ty, node)
        return self.ctx.constant(0.0 if el.is_floating() else 0, ty, node)

    def stmt_Break(self, node):
        if not self.ctx.frame.loops:
            self.ctx.report("N002", "'break' outside a loop", node)
            return
        self.ctx.scope[FLAG_BRK] = Const(True)

    def stmt_Continue(self, node):
        if not self.ctx.frame.loops:
            self.ctx.report("N002", "'continue' outside a loop", node)
            return
        self.ctx.scope[FLAG_CNT] = Const(True)

    def stmt_Return(self, node):
        if node.value is not None:
            val = self.exprs.expr(node.value)
            if self.ctx.frame.is_kernel:
                if self.ctx.spec.launched and not (isinstance(val, Const) and val.value is None):
                    self.ctx.report("N041", "a launched kernel cannot return a value", node.value,
                                    hint="write results to memory with nl.store")
            else:
                self.ctx.scope[RETVAL] = val
        self.ctx.scope[FLAG_RET] = Const(True)

    def stmt_Assert(self, node):
        cond = self.exprs.expr(node.test)
        msg = ""
        if node.msg is not None:
            m = self.exprs.expr(node.msg)
            msg = str(m.value) if isinstance(m, Const) else ""
        if isinstance(cond, Const):
            if not cond.value:
                self.ctx.report("N050", f"assertion failed: {msg or ast.unparse(node.test)}", node)
            return
        if isinstance(cond, TensorV):
            c = self.to_bool(cond, node)
            self.ctx.emit("assert", [c], [], {"msg": msg or ast.unparse(node.test)}, node=node)

    # -- loops: LoopBuilder (loops.py) ----------------------------------------
    def stmt_For(self, node):
        return self.loops.stmt_For(node)

    def stmt_While(self, node):
        return self.loops.stmt_While(node)


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
