"""Loops of a kernel body: ``for`` over ``range``/``nl.range``/``nl.static_range`` and ``while``.

``LoopBuilder`` lowers them to ``scf.for`` / ``scf.while`` with their loop-carried values (or unrolls a
static loop); ``break``/``continue`` inside are flags the statement builder sets.
"""

from __future__ import annotations

import ast
import builtins as pybuiltins

from newt import ir
from newt.diagnostics import Severity
from newt.ir.types import numel, scalar_of, shape_of, type_str
from newt.language import core as lc

from .context import BuilderPart
from .frame import FLAG_BRK, FLAG_CNT, FLAG_RET, LOOPIV, MAX_UNROLL, LoopCtx
from .semantic import SemError, fmt_shape, is_number, literal_type, shapes_maybe_equal
from .stmts import _last_assign
from .values import Const, Opaque, Sym, TensorV, Undef


class LoopBuilder(BuilderPart):
    """Lowers ``for`` and ``while`` loops: bounds, loop-carried values, flags, static unrolling."""

    def stmt_For(self, node):
        if node.orelse:
            self.ctx.report("N002", "'for ... else' is not supported inside a kernel", node.orelse[0])
        it = node.iter
        if not isinstance(it, ast.Call):
            self.ctx.report("N045", "a kernel loop must iterate over range(...), nl.range(...) or nl.static_range(...)",
                            it)
            return
        fav = self.exprs.expr(it.func)
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
            self.ctx.report("N045", "a kernel loop must iterate over range(...), nl.range(...) or nl.static_range(...)",
                            it)
            return
        args = [self.exprs.expr(a) for a in it.args]
        kwargs = {k.arg: self.exprs.expr(k.value) for k in it.keywords if k.arg}
        if len(args) == 0 or len(args) > 3:
            self.ctx.report("N005", f"range expects 1 to 3 arguments, got {len(args)}", it)
            return
        allowed = {"nl.range": {"num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer", "flatten",
                                "warp_specialize", "disable_licm", "step"},
                   "static": {"step"}, "range": set()}[kind]
        if kind == "range" and kwargs:
            # Triton's code generator reads Python's range(...) by its positional arguments and drops every
            # keyword: the code compiles, but what the keyword asks for does not happen
            for k in kwargs:
                self.ctx.report("N005", f"range() ignores the keyword {k!r} (as Triton does)", it,
                                hint=f"use nl.range(..., {k}=...) for a loop option", severity=Severity.WARNING)
            kwargs = {}
        for k in kwargs:
            if k not in allowed:
                self.ctx.report("N005", f"unknown keyword argument {k!r} for {'nl.' if kind != 'range' else ''}"
                                f"{'static_range' if kind == 'static' else 'range'}", it)
        if len(args) == 1:
            start, end, step = Const(0), args[0], kwargs.get("step", Const(1))
        else:
            start, end = args[0], args[1]
            step = args[2] if len(args) > 2 else kwargs.get("step", Const(1))
        target = node.target
        if not isinstance(target, ast.Name):
            self.ctx.report("N002", "the loop variable must be a single name", target)
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
                    self.ctx.report("N010", f"{k} must be a constexpr int", it)
        ws = kwargs.get("warp_specialize")
        if isinstance(ws, Const) and ws.value is True:
            # a producer warpgroup for the loop's TMA copies where the backend can (warpspec.py); else no effect
            attrs["warp_specialize"] = True
        if isinstance(step, Const) and step.value == 0:
            self.ctx.report("N023", "range step must not be zero", it)
            return
        if any(isinstance(x, Opaque) for x in (start, end, step)):
            self.speculative_loop(node)
            return
        try:
            lb, ub, st = self.loop_bounds(start, end, step, it)
        except SemError as e:
            self.ctx.report_sem(e, it)
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
        return tuple(self.exprs.as_tensor(v, ity, (), node) for v in vals)

    def loop_carried(self, body, exclude=()) -> list[str]:
        names = []
        for n in _assigned_names(body):
            if n in exclude or n in names:
                continue
            if n in self.ctx.scope and not isinstance(self.ctx.scope[n], Undef):
                names.append(n)
        return names

    def _carried_init(self, name, node) -> ir.Value | None:
        av = self.ctx.scope[name]
        if isinstance(av, TensorV):
            return av.v
        if isinstance(av, (Const, Sym)) and (is_number(av) or isinstance(av, Sym)):
            ty = literal_type(av.value) if isinstance(av, Const) else (lc.int1 if av.is_bool else lc.int32)
            return self.exprs.as_tensor(av, ty, (), node)
        return None

    def scf_for(self, node, lb, ub, st, attrs):
        target = node.target.id
        carried = self.loop_carried(node.body, exclude=(target,))
        from .rules.blockptr import join_carried, resplit_carried, split_carried
        bps = split_carried(self.api, carried)  # block pointers: their run-time parts are carried
        inits, keep = [], []
        for n in carried:
            v = self._carried_init(n, node)
            if v is None:
                continue  # compile-time values (dtypes, functions) re-assigned in loops stay as they are
            inits.append(v)
            keep.append(n)
        pre = dict(self.ctx.scope)
        body = ir.Region([ir.Value(lb.type, name=None)] + [ir.Value(v.type) for v in inits])
        saved = self.ctx.region
        self.ctx.region = body
        self.ctx.scope = dict(pre)
        self.ctx.scope[target] = TensorV(body.args[0])
        self.ctx.note(node.target, self.ctx.scope[target])
        for n, arg in zip(keep, body.args[1:]):
            self.ctx.scope[n] = TensorV(arg)
        join_carried(self.api, bps)
        self.ctx.scope[FLAG_CNT] = Const(False)
        self.ctx.frame.loops.append(LoopCtx(False))
        self.statements.stmts(node.body)
        self.ctx.frame.loops.pop()
        resplit_carried(self.api, bps, node)
        yields, bad = self._loop_yields(keep, inits, node)
        self.ctx.emit("yield", yields, [], node=None)
        body_scope = self.ctx.scope
        self.ctx.region = saved
        op = self.ctx.emit("scf.for", [lb, ub, st] + inits, [v.type for v in inits], attrs, [body], node=node)
        self.ctx.scope = pre
        for n, r in zip(keep, op.results):
            self.ctx.scope[n] = Opaque() if n in bad else TensorV(r)
        join_carried(self.api, bps)
        self._loop_locals(body_scope, pre, target)

    def _loop_locals(self, body_scope, pre, target):
        for n in body_scope:
            if n not in pre and not n.startswith("$"):
                self.ctx.scope[n] = Undef(n)
        if target not in pre:
            self.ctx.scope[target] = Undef(target)

    def _loop_yields(self, names, inits, node):
        yields, bad = [], set()
        for n, init in zip(names, inits):
            av = self.ctx.scope.get(n)
            if isinstance(av, TensorV) and av.type == init.type:
                yields.append(av.v)
                continue
            if isinstance(av, (Opaque, Undef)) or av is None:
                yields.append(init)
                bad.add(n)
                continue
            if isinstance(av, (Const, Sym)) and (is_number(av) or isinstance(av, Sym)):
                yields.append(self.exprs.as_tensor(av, scalar_of(init.type), shape_of(init.type), node))
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
            self.ctx.report("N042", f"loop-carried variable {n!r} enters the loop as {type_str(init.type)} but is "
                            f"re-assigned to {got} inside it", _last_assign(node.body, n) or node,
                            hint="keep the same dtype and shape across iterations "
                             "(initialize it with the right dtype, or cast with .to)")
            yields.append(init)
            bad.add(n)
        return yields, bad

    def for_as_while(self, node, lb, ub, st, step_av, attrs):
        """A for loop with break or return becomes a while loop on a hidden counter."""
        target = node.target.id
        self.ctx.scope[LOOPIV] = TensorV(lb)
        self.ctx.scope[FLAG_BRK] = Const(False)
        neg = isinstance(step_av, Const) and step_av.value < 0

        def cond_fn():
            iv = self.ctx.scope[LOOPIV].v
            ubv = ub
            if isinstance(step_av, Const):
                c = self.ctx.emit("gt" if neg else "lt", [iv, ubv], [lc.int1], node=node).result
            else:
                zero = self.ctx.constant(0, st.type)
                pos = self.ctx.emit("gt", [st, zero], [lc.int1], node=node).result
                lt = self.ctx.emit("lt", [iv, ubv], [lc.int1], node=node).result
                gt = self.ctx.emit("gt", [iv, ubv], [lc.int1], node=node).result
                c = self.ctx.emit("where", [pos, lt, gt], [lc.int1], node=node).result
            return TensorV(c)

        def pre_body():
            iv = self.ctx.scope[LOOPIV]
            self.ctx.scope[target] = iv
            self.ctx.note(node.target, iv)
            nxt = self.ctx.emit("add", [iv.v, st], [iv.v.type], node=node).result
            self.ctx.scope[LOOPIV] = TensorV(nxt)

        self.while_loop(node, cond_fn, pre_body, node.body, extra_carried=[LOOPIV, FLAG_BRK], exclude=(target,),
                        attrs=attrs)
        self.ctx.scope.pop(LOOPIV, None)
        self.ctx.scope.pop(FLAG_BRK, None)
        if target in self.ctx.scope and not isinstance(self.ctx.scope[target], Undef):
            self.ctx.scope[target] = Undef(target)

    def stmt_While(self, node):
        if node.orelse:
            self.ctx.report("N002", "'while ... else' is not supported inside a kernel", node.orelse[0])
        has_break = _has_jump(node.body, ast.Break)
        if has_break:
            self.ctx.scope[FLAG_BRK] = Const(False)

        def cond_fn():
            c = self.exprs.expr(node.test)
            if isinstance(c, TensorV) and shape_of(c.type) and numel(shape_of(c.type)) == 1:
                c = self.exprs.unsplat(c, node.test)
            if isinstance(c, TensorV) and shape_of(c.type):
                self.ctx.report("N040", f"a while condition must be a scalar, not a block of shape "
                                f"{fmt_shape(shape_of(c.type))}", node.test,
                                hint="reduce it first, e.g. nl.max(mask, 0) > 0")
                return Opaque()
            return c

        self.while_loop(node, cond_fn, None, node.body, extra_carried=[FLAG_BRK] if has_break else [],
                        exclude=())
        if has_break:
            self.ctx.scope.pop(FLAG_BRK, None)

    def while_loop(self, node, cond_fn, pre_body, body_stmts, extra_carried, exclude, attrs=None):
        carried = self.loop_carried(body_stmts, exclude=exclude)
        for n in extra_carried:
            if n not in carried:
                carried.append(n)
        if _has_return(body_stmts) and FLAG_RET not in carried:
            carried.append(FLAG_RET)
        from .rules.blockptr import join_carried, resplit_carried, split_carried
        bps = split_carried(self.api, carried)  # block pointers: their run-time parts are carried
        keep, inits = [], []
        for n in carried:
            v = self._carried_init(n, node)
            if v is None:
                continue
            keep.append(n)
            inits.append(v)
        pre = dict(self.ctx.scope)
        saved = self.ctx.region
        # before region: the condition
        before = ir.Region([ir.Value(v.type) for v in inits])
        self.ctx.region = before
        self.ctx.scope = dict(pre)
        for n, a in zip(keep, before.args):
            self.ctx.scope[n] = TensorV(a)
        c = cond_fn()
        if isinstance(c, (Opaque, Sym, Undef)):
            self.ctx.region = saved
            self.ctx.scope = pre
            self.speculative_loop(node)
            return
        if isinstance(c, Const):
            if not c.value:
                self.ctx.region = saved
                self.ctx.scope = pre
                return  # `while False:` never runs
            cond = self.ctx.constant(True, lc.int1, node)
        else:
            cond = self.statements.to_bool(c, node)
        for f in (FLAG_BRK, FLAG_RET):
            if f in keep:
                fv = self.ctx.scope[f].v
                nf = self.ctx.emit("xor", [fv, self.ctx.constant(True, lc.int1)], [lc.int1], node=node).result
                cond = self.ctx.emit("and", [cond, nf], [lc.int1], node=node).result
        self.ctx.emit("condition", [cond] + list(before.args), [], node=None)
        # after region: the body
        after = ir.Region([ir.Value(v.type) for v in inits])
        self.ctx.region = after
        self.ctx.scope = dict(pre)
        for n, a in zip(keep, after.args):
            self.ctx.scope[n] = TensorV(a)
        join_carried(self.api, bps)
        self.ctx.scope[FLAG_CNT] = Const(False)
        if pre_body is not None:
            pre_body()
        self.ctx.frame.loops.append(LoopCtx(FLAG_BRK in keep))
        self.statements.stmts(body_stmts)
        self.ctx.frame.loops.pop()
        resplit_carried(self.api, bps, node)
        yields, bad = self._loop_yields(keep, inits, node)
        self.ctx.emit("yield", yields, [], node=None)
        body_scope = self.ctx.scope
        self.ctx.region = saved
        op = self.ctx.emit("scf.while", inits, [v.type for v in inits], dict(attrs or {}), [before, after], node=node)
        self.ctx.scope = pre
        for n, r in zip(keep, op.results):
            self.ctx.scope[n] = Opaque() if n in bad else TensorV(r)
        join_carried(self.api, bps)
        self._loop_locals(body_scope, pre, "$none")

    def speculative_loop(self, node):
        """Type-check a loop body whose bounds are unknown, without emitting a loop."""
        pre = dict(self.ctx.scope)
        saved = self.ctx.region
        self.ctx.region = ir.Region()
        self.ctx.speculative += 1
        try:
            carried = self.loop_carried(node.body)
            for n in carried:
                self.ctx.scope[n] = Opaque()
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                self.ctx.scope[node.target.id] = Opaque()
            self.ctx.frame.loops.append(LoopCtx(False))
            self.ctx.scope[FLAG_CNT] = Const(False)
            self.statements.stmts(node.body)
            self.ctx.frame.loops.pop()
        finally:
            self.ctx.speculative -= 1
            self.ctx.region = saved
        self.ctx.scope = pre
        for n in _assigned_names(node.body):
            if n in pre:
                self.ctx.scope[n] = Opaque()

    def static_loop(self, node, start, end, step, it):
        vals = []
        for x, what in ((start, "start"), (end, "end"), (step, "step")):
            if isinstance(x, Const) and isinstance(x.value, int) and not isinstance(x.value, bool):
                vals.append(x.value)
            elif isinstance(x, (Sym, Opaque)):
                self.speculative_loop(node)
                return
            else:
                self.ctx.report("N010", f"nl.static_range {what} must be a constexpr int", it,
                                hint="declare the bound as a nl.constexpr parameter")
                self.speculative_loop(node)
                return
        if vals[2] == 0:
            self.ctx.report("N023", "static_range step must not be zero", it)
            return
        rng = range(vals[0], vals[1], vals[2])
        if len(rng) > MAX_UNROLL:
            self.ctx.report("N023", f"nl.static_range would unroll {len(rng)} iterations (limit {MAX_UNROLL})", it)
            return
        target = node.target.id
        has_break = _has_jump(node.body, ast.Break)
        outer_brk = self.ctx.scope.get(FLAG_BRK)
        self.ctx.scope[FLAG_BRK] = Const(False)
        self.ctx.frame.loops.append(LoopCtx(has_break))
        self._unrolled(node, list(rng), target)
        self.ctx.frame.loops.pop()
        if outer_brk is None:
            self.ctx.scope.pop(FLAG_BRK, None)
        else:
            self.ctx.scope[FLAG_BRK] = outer_brk
        self.ctx.scope.pop(FLAG_CNT, None)

    def _unrolled(self, node, values, target):
        for k, v in enumerate(values):
            self.ctx.scope[FLAG_CNT] = Const(False)
            self.ctx.scope[target] = Const(v)
            self.ctx.note(node.target, self.ctx.scope[target])
            self.statements.stmts(node.body)
            # a continue only ends this iteration
            self.ctx.scope[FLAG_CNT] = Const(False)
            st = self.statements.flow_state()
            if st == "static":
                return
            if st == "dynamic" and k + 1 < len(values):
                rest = values[k + 1:]
                cond = self.statements.not_exited(node)
                self.statements.runtime_if(cond, lambda rest=rest: self._unrolled(node, rest, target), None, node,
                                           clear_flags=True)
                return


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
