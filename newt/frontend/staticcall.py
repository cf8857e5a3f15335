"""Calling a function of the file statically: the configs and constants a pure, literal-building function
returns (``configs=get_autotune_config()``), run by ``StaticEval`` over its statements (assignments, ``if``
on what is static, ``for`` with ``continue``/``break``, ``list.append``/``extend``, ``return``).  No code of
the workspace runs: any other statement or call makes the value not static.  With ``all_paths`` (autotune
configs) an ``if`` the text cannot decide gives both paths' configs, marked ``speculative``."""

from __future__ import annotations

import ast
import dataclasses
import operator
from typing import Any, cast

__all__ = ["call_function", "NotStatic"]


class NotStatic(Exception):
    """The value depends on something the text alone does not give (``source.StaticEval`` raises it)."""


def _pow(a, b):
    if isinstance(b, int) and b > 4096:
        raise NotStatic("huge power")
    return a ** b


_AUG = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: _pow, ast.LShift: operator.lshift,
        ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.BitXor: operator.xor}


def call_function(self, fdef: ast.FunctionDef, args, kwargs):
    """Call a function of the file that only builds values from literals: assignments, ``if`` on what is
    static, ``for`` over what is static, ``list.append``/``extend``, ``return`` (``get_autotune_config()``).
    Nothing else runs: any other statement or call makes the value not static."""
    params = [a.arg for a in fdef.args.args]
    defaults = fdef.args.defaults
    env = {}
    for i, p in enumerate(params):
        if i < len(args):
            env[p] = args[i]
        elif p in kwargs:
            env[p] = kwargs[p]
        else:
            di = i - (len(params) - len(defaults))
            if di < 0:
                raise NotStatic("missing arg")
            env[p] = self.eval(defaults[di])
    sub = type(self)(self.scan, env, self.all_paths)
    sub.items = self.items
    sub.depth = self.depth + 1
    sub.steps = self.steps
    if sub.depth > 60:
        raise NotStatic("too deep")
    outs = _run(sub, list(fdef.body))
    self.items, self.steps = sub.items, sub.steps
    if len(outs) == 1:
        return outs[0][0]
    # several paths the text cannot decide: lists (of configs) are joined, their configs speculative
    if not all(isinstance(v, list) for v, _ in outs):
        raise NotStatic("several return values")
    joined: list = []
    for v, _ in outs:
        for c in v:
            if dataclasses.is_dataclass(c) and hasattr(c, "speculative"):  # a ConfigLit
                c = dataclasses.replace(cast(Any, c), speculative=True)
            joined.append(c)
    return joined


def _run(self, stmts: list) -> list:
    """Execute ``stmts`` of a literal-building function; the list of (value, True) its paths return."""
    for i, st in enumerate(stmts):
        self.steps += 1
        if self.steps > self.MAX_STEPS:
            raise NotStatic("too many steps")
        if isinstance(st, ast.Pass) or (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)):
            continue
        if isinstance(st, ast.Return):
            return [(self.eval(st.value) if st.value is not None else None, True)]
        if isinstance(st, ast.Assign):
            v = self.eval(st.value)
            for t in st.targets:
                self._bind(t, v)
            continue
        if isinstance(st, ast.AnnAssign) and st.value is not None and isinstance(st.target, ast.Name):
            self._bind(st.target, self.eval(st.value))
            continue
        if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name) and type(st.op) in _AUG:
            if st.target.id not in self.env:
                raise NotStatic(st.target.id)
            self.env[st.target.id] = _AUG[type(st.op)](self.env[st.target.id], self.eval(st.value))
            continue
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            _method_call(self, st.value)
            continue
        if isinstance(st, ast.If):
            try:
                taken = st.body if self.eval(st.test) else st.orelse
            except NotStatic:
                if not self.all_paths:
                    raise
                outs = []
                for branch in (st.body, st.orelse):
                    saved = {k: (list(v) if isinstance(v, list) else v) for k, v in self.env.items()}
                    try:
                        outs += _run(self, list(branch) + stmts[i + 1:])
                    except NotStatic:
                        pass  # a path that is not literal-building: the other one still lists configs
                    self.env = saved
                if not outs:
                    raise
                return outs
            return _run(self, list(taken) + stmts[i + 1:])
        if isinstance(st, ast.For) and not st.orelse:
            _loop(self, st)
            continue
        raise NotStatic(type(st).__name__)
    raise NotStatic("no return")

def _run_block(self, stmts: list) -> str:
    """A loop body: ``""`` when it ran to its end, ``"continue"`` or ``"break"`` (a ``return`` inside a
    loop, or a branch the text cannot decide, makes the value not static)."""
    for st in stmts:
        if isinstance(st, ast.Continue):
            return "continue"
        if isinstance(st, ast.Break):
            return "break"
        if isinstance(st, ast.If):
            sig = _run_block(self, list(st.body if self.eval(st.test) else st.orelse))
            if sig:
                return sig
            continue
        if isinstance(st, ast.For) and not st.orelse:
            _loop(self, st)
            continue
        if isinstance(st, (ast.Return, ast.While, ast.For, ast.Try, ast.With)):
            raise NotStatic(type(st).__name__)
        _run(self, [st, ast.Return(value=None)])
    return ""

def _loop(self, st: ast.For) -> None:
    for v in self.eval(st.iter):
        self._count(1)
        self._bind(st.target, v)
        if _run_block(self, st.body) == "break":
            break

def _method_call(self, call: ast.Call) -> None:
    """``configs.append(x)`` / ``configs.extend(xs)`` on a list of this evaluation."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in ("append", "extend")
            and not call.keywords and len(call.args) == 1):
        raise NotStatic("call statement")
    target = self.env.get(f.value.id)
    if not isinstance(target, list):
        raise NotStatic(f.value.id)
    v = self.eval(call.args[0])
    if f.attr == "append":
        self._count(1)
        target.append(v)
    else:
        v = list(v)
        self._count(len(v))
        target.extend(v)
