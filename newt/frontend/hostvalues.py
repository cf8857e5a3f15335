"""What the host code that launches a kernel says, read statically: constexpr values (issue 15, item 1) and
the dtypes of the tensors passed to unannotated pointers (issue 23).

The front end's analysis (``Analyzer``: the editor and ``newt check`` alike) gives every kernel the pointer
dtypes its launches pass (``launch_types``), wherever the launch is: module level, under ``if __name__ ==
"__main__":``, in a function or a lambda given to a helper, in a ``newt.harness`` example; ``torch.empty(...,
dtype=)``, ``.to(dtype)``, ``x.half()``, ``torch.empty_like(x)`` are followed through the assignments
(``HostIndex``: one pass over the module's statements).  Nothing of the workspace runs here.

Constexprs (Compile): for each launch of a kernel (``kernel[grid](..., BLOCK=expr)``) the
expression is evaluated over what the enclosing host function says: literals, its parameters' defaults or
the literal arguments of a call of that function in the file, earlier straight-line assignments (``block =
newt.next_power_of_2(n_cols)``), module constants, and a few pure functions (``next_power_of_2``, ``cdiv``,
``min``, ``max``, ``int``, ``abs``). What depends on run-time values (a tensor's shape) stays unknown and the
reason says which name.
"""

from __future__ import annotations

import ast
import bisect
import operator
import re
from typing import Any

__all__ = ["host_constexprs", "host_pointer_dtypes", "example_launches", "Unknown", "HostIndex", "host_index",
           "launch_dtypes", "launch_types", "LaunchTypes"]


class Unknown(Exception):
    """The value depends on something only known at run time (``str(e)`` names it)."""


def _next_power_of_2(n):
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


_FUNCS: dict[str, Any] = {"next_power_of_2": _next_power_of_2, "cdiv": lambda a, b: -(-int(a) // int(b)), "min": min,
          "max": max, "int": int, "abs": abs, "bool": bool}
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.Pow: operator.pow,
        ast.Div: operator.truediv, ast.BitOr: operator.or_, ast.BitAnd: operator.and_}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Eq: operator.eq,
        ast.NotEq: operator.ne}


def _ev(node, env: dict):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)) or (
            isinstance(node, ast.Constant) and node.value is None):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            v = env[node.id]
            if isinstance(v, Unknown):
                raise Unknown(str(v))  # a fresh one: a raised exception keeps its frames (and env) alive
            return v
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        raise Unknown(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return _BIN[type(node.op)](_ev(node.left, env), _ev(node.right, env))
    if isinstance(node, ast.UnaryOp):
        v = _ev(node.operand, env)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.Not):
            return not v
        if isinstance(node.op, ast.UAdd):
            return +v
    if isinstance(node, ast.BoolOp):
        vals = [_ev(v, env) for v in node.values]
        out = vals[0]
        for v in vals[1:]:
            out = (out and v) if isinstance(node.op, ast.And) else (out or v)
        return out
    if isinstance(node, ast.Compare) and all(type(o) in _CMP for o in node.ops):
        left = _ev(node.left, env)
        for op, right_node in zip(node.ops, node.comparators):
            right = _ev(right_node, env)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _ev(node.body, env) if _ev(node.test, env) else _ev(node.orelse, env)
    if isinstance(node, ast.Tuple):
        return tuple(_ev(e, env) for e in node.elts)
    if isinstance(node, ast.Call) and not node.keywords:
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name in _FUNCS:
            return _FUNCS[name](*[_ev(a, env) for a in node.args])
    raise Unknown(ast.unparse(node))


def _assignments(body, upto_line: int, env: dict):
    """Straight-line assignments before ``upto_line`` (into if/with/for/try bodies; the last one wins)."""
    for st in body:
        if st.lineno >= upto_line:
            break
        if isinstance(st, ast.Assign):
            for t in st.targets:
                _bind(t, st.value, env)
        elif isinstance(st, ast.AnnAssign) and st.value is not None:
            _bind(st.target, st.value, env)
        elif isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name) and type(st.op) in _BIN:
            try:
                env[st.target.id] = _BIN[type(st.op)](_ev(st.target, env), _ev(st.value, env))
            except Exception as e:
                env[st.target.id] = Unknown(str(e)) if isinstance(e, Unknown) else Unknown(st.target.id)
        elif isinstance(st, (ast.If, ast.With, ast.For, ast.While, ast.Try)):
            # a branch may not run: names it assigns become unknown unless the test is static
            if isinstance(st, ast.For) and st.lineno < upto_line <= (st.end_lineno or st.lineno):
                # the launch is in a loop over literals (`for causal in (False, True):`): its first
                # iteration is one of the launch's specializations
                try:
                    first = next(iter(_ev(st.iter, env)))
                    _bind(st.target, ast.Constant(value=first), env)
                    _assignments(st.body, upto_line, env)
                    continue
                except Exception:  # not static: as any other branch
                    pass
            if isinstance(st, ast.If):
                try:
                    taken = st.body if _ev(st.test, env) else st.orelse
                    _assignments(taken, upto_line, env)
                    continue
                except Exception:
                    pass
            inner: dict = {}
            for sub in ("body", "orelse", "finalbody"):
                _assignments(getattr(st, sub, []) or [], upto_line, inner)
            for k in inner:
                contains = st.lineno < upto_line <= (st.end_lineno or st.lineno)
                env[k] = inner[k] if contains else Unknown(f"{k} (assigned in a branch at line {st.lineno})")


def _bind(target, value, env):
    if isinstance(target, ast.Name):
        try:
            env[target.id] = _ev(value, env)
        except Unknown as e:
            env[target.id] = Unknown(str(e))  # without the traceback (no reference cycle through env)
        except Exception:
            env[target.id] = Unknown(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        vals = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
        for i, t in enumerate(target.elts):
            if vals is not None:
                _bind(t, vals[i], env)
            elif isinstance(t, ast.Name):
                env[t.id] = Unknown(f"{t.id} (= {ast.unparse(value)})")


def _module_env(tree) -> dict:
    env: dict = {}
    for st in tree.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and getattr(st, "value", None) is not None:
            for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                _bind(t, st.value, env)
    return {k: v for k, v in env.items() if not isinstance(v, Unknown)}


def _functions(tree) -> list:
    """The function definitions of ``tree`` (statements only: a 1,000-line file has ~10,000 nodes, ~1,500
    statements), found once per tree instead of one walk per launch."""
    got = getattr(tree, "_newt_functions", None)
    if got is None:
        got = []
        todo = list(getattr(tree, "body", ()))
        while todo:
            st = todo.pop()
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                got.append(st)
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                sub = getattr(st, field, None)
                if isinstance(sub, list):
                    todo.extend(x for x in sub if isinstance(x, (ast.stmt, ast.excepthandler, ast.match_case)))
        tree._newt_functions = got
    return got


def _calls(tree, name: str) -> list:
    """The calls ``name(...)`` in ``tree``, in ``ast.walk`` order (one walk per tree, and none when the text
    names ``name`` only where it defines it)."""
    text = getattr(tree, "_newt_text", None)
    if text is not None and text.isascii() and name.isidentifier():
        uses = len(re.findall(rf"\b{re.escape(name)}\b", text))
        if uses <= len(re.findall(rf"\bdef\s+{re.escape(name)}\b", text)):
            return []
    got = getattr(tree, "_newt_calls", None)
    if got is None:
        got = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                got.setdefault(node.func.id, []).append(node)
        tree._newt_calls = got
    return got.get(name, [])


def _enclosing(tree, line: int):
    best = None
    for node in _functions(tree):
        if node.lineno <= line <= (node.end_lineno or 0):
            if best is None or node.lineno > best.lineno:
                best = node
    return best


def _param_env(tree, fn, menv) -> tuple[dict, dict]:
    """Parameters of a host function: the literal arguments of its first evaluable call in the file, else
    their defaults; (env, where each came from)."""
    params = list(fn.args.posonlyargs) + list(fn.args.args)
    names = [p.arg for p in params]
    defaults = dict(zip(names[len(names) - len(fn.args.defaults):], fn.args.defaults))
    for p, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
        names.append(p.arg)
        if d is not None:
            defaults[p.arg] = d
    env, where = {}, {}
    for n in names:
        if n in defaults:
            try:
                env[n] = _ev(defaults[n], menv)
                where[n] = f"the default of {fn.name}()"
                continue
            except Exception:
                pass
        env[n] = Unknown(f"{n} (a parameter of {fn.name}())")
    for node in _calls(tree, fn.name):
        for i, a in enumerate(node.args[:len(names)]):
            try:
                if isinstance(env[names[i]], Unknown):
                    env[names[i]] = _ev(a, menv)
                    where[names[i]] = f"the call {fn.name}(...) at line {node.lineno}"
            except Exception:
                pass
        for kw in node.keywords:
            if kw.arg in env and isinstance(env[kw.arg], Unknown):
                try:
                    env[kw.arg] = _ev(kw.value, menv)
                    where[kw.arg] = f"the call {fn.name}(...) at line {node.lineno}"
                except Exception:
                    pass
    return env, where


_TREES: dict = {}


def remember_tree(text: str, tree) -> None:
    """Use ``tree`` (the front end's parse of the whole ``text``) instead of parsing ``text`` again."""
    if len(_TREES) > 4:
        _TREES.clear()
    tree._newt_text = text
    _TREES[hash(text)] = (text, tree)


def _parse(text: str):
    """ast.parse, memoized for the last few texts (every kernel of a file asks for the same one)."""
    key = hash(text)
    t = _TREES.get(key)
    if t is None or t[0] != text:
        if len(_TREES) > 4:
            _TREES.clear()
        tree: Any
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError) as e:
            e.__traceback__ = e.__context__ = None  # (its frames would keep this analysis alive)
            tree = e  # remembered too: a text being typed in does not parse, and every kernel asks
        else:
            tree._newt_text = text
        t = _TREES[key] = (text, tree)
    if isinstance(t[1], Exception):
        raise type(t[1])(*t[1].args)
    return t[1]


def host_constexprs(text: str, launches, names) -> tuple[dict, dict]:
    """({constexpr: value}, {constexpr: how it was found, or why not}) for ``names`` over the kernel's
    ``launches`` (LaunchSite: ``.node`` the call, ``.kw_nodes`` the keyword argument nodes)."""
    values: dict = {}
    why: dict = {}
    if not launches:
        return values, why
    try:
        tree = _parse(text)
    except (SyntaxError, ValueError):
        return values, {n: "the file does not parse" for n in names}
    menv = _module_env(tree)
    for ls in launches:
        pending = [n for n in names if n not in values and n in (ls.kw_nodes or {})]
        if not pending:
            continue
        line = ls.node.lineno
        fn = _enclosing(tree, line)
        env = dict(menv)
        where: dict = {}
        if fn is not None:
            penv, where = _param_env(tree, fn, menv)
            env.update(penv)
            _assignments(fn.body, line, env)
        for n in pending:
            expr = ls.kw_nodes[n]
            if isinstance(expr, ast.keyword):
                expr = expr.value
            src = ast.unparse(expr)
            try:
                v = _ev(expr, env)
            except Unknown as e:
                why.setdefault(n, f"{n}={src} at line {line}: {e} is only known at run time")
                continue
            except Exception as e:
                why.setdefault(n, f"{n}={src} at line {line}: {type(e).__name__}: {e}")
                continue
            if not isinstance(v, (bool, int, float, str)) and v is not None:  # (a bool flag is a constexpr too)
                why.setdefault(n, f"{n}={src} at line {line} is not a constant")
                continue
            values[n] = v
            names_used = [x.id for x in ast.walk(expr) if isinstance(x, ast.Name)]
            src_note = "; ".join(f"{x} from {where[x]}" for x in names_used if x in where)
            why[n] = f"{n}={src} at line {line}" + (f" ({src_note})" if src_note else "") + f" = {v!r}"
    return values, why


_TORCH_DTYPES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
                 "float64": "fp64", "double": "fp64", "int8": "i8", "int16": "i16", "int32": "i32", "int": "i32",
                 "int64": "i64", "long": "i64", "uint8": "u8", "bool": "i1", "float8_e4m3fn": "fp8e4nv",
                 "float8_e5m2": "fp8e5"}
_METHOD_DTYPES = {"half": "fp16", "bfloat16": "bf16", "float": "fp32", "double": "fp64", "int": "i32",
                  "long": "i64", "bool": "i1"}
_KEEPS_DTYPE = {"empty_like", "zeros_like", "ones_like", "randn_like", "rand_like", "clone", "contiguous",
                "t", "transpose", "view", "reshape", "permute", "flatten", "squeeze", "unsqueeze", "expand",
                "detach", "cuda", "cpu", "abs", "neg"}


_DEFAULT_FP32 = {"randn", "rand", "empty", "zeros", "ones", "randn_like", "empty_strided", "normal"}


def _torch_dtype(node, look, depth: int):
    """The dtype (newt's name) a ``dtype`` expression names: ``torch.float16``, ``dt`` bound to one, ``x.dtype``."""
    if depth > 8 or node is None:
        return None
    if isinstance(node, ast.Attribute):
        if node.attr == "dtype":
            return _dtype_of(node.value, look, depth + 1)
        return _TORCH_DTYPES.get(node.attr)
    if isinstance(node, ast.Name):
        got = look(node.id, node.lineno)
        return _torch_dtype(got, look, depth + 1) if got is not None else None
    return None


def _dtype_of(node, look, depth: int = 0):
    """The element type (newt's name: fp16, i32 ...) of a tensor expression of the host code, or None.

    ``look(name, line)`` is the expression last assigned to ``name`` before ``line`` in the scope of that line
    (``HostIndex.lookup``), or None."""
    Name = ast.Name
    while True:  # (a name: what it was assigned, without a call per name)
        if depth > 8 or node is None:
            return None
        if not isinstance(node, Name):
            break
        node = look(node.id, node.lineno)
        depth += 1
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "dtype":
                return _torch_dtype(kw.value, look, depth + 1)
        f = node.func
        if isinstance(f, ast.Attribute):
            is_torch = isinstance(f.value, ast.Name) and f.value.id == "torch"
            if f.attr in ("to", "type") and not is_torch and node.args:
                a0 = node.args[0]
                dt = _torch_dtype(a0, look, depth + 1)
                if dt is not None:
                    return dt
                if isinstance(a0, ast.Constant) or (isinstance(a0, ast.Attribute) and a0.attr == "device"):
                    return _dtype_of(f.value, look, depth + 1)  # x.to("cuda"), x.to(y.device): x's dtype
                if isinstance(a0, ast.Name) and isinstance(look(a0.id, a0.lineno), ast.Constant):
                    return _dtype_of(f.value, look, depth + 1)  # x.to(DEVICE)
                return _dtype_of(a0, look, depth + 1)  # x.to(other): other's dtype
            if f.attr in _METHOD_DTYPES and not node.args and not is_torch:
                return _METHOD_DTYPES[f.attr]
            if f.attr in _KEEPS_DTYPE:
                # torch.empty_like(x) / x.clone(): the dtype of x
                src = node.args[0] if is_torch and node.args else f.value
                return _dtype_of(src, look, depth + 1)
            if is_torch and f.attr in _DEFAULT_FP32:
                return "fp32"  # torch's default dtype (no dtype= given)
            if is_torch and f.attr in ("randint", "randperm"):
                return "i64"
            if is_torch and f.attr == "full" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                v = node.args[1].value
                return "i1" if isinstance(v, bool) else "i64" if isinstance(v, int) else "fp32" \
                    if isinstance(v, float) else None
    if isinstance(node, ast.Subscript):  # x[1:], x[:, 0]: a view keeps the dtype
        return _dtype_of(node.value, look, depth + 1)
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "data"):
        return _dtype_of(node.value, look, depth + 1)
    return None


_UNBOUND = ast.Constant(value=None)  # a parameter without a default: shadows the module's names, says nothing


_FIRST = operator.itemgetter(0)
#: statements that bind no name ``HostIndex`` records and hold no statement (an assignment is handled before)
_SIMPLE_STATEMENTS = frozenset({ast.Expr, ast.Return, ast.AugAssign, ast.Pass, ast.Break, ast.Continue, ast.Raise,
                                ast.Assert, ast.Delete, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal})


class HostIndex:
    """Where the host code assigns what, read once per module (statements only, not every expression): a
    launch's arguments are looked up in its scope (the function, lambda's function or module it is in, then
    the enclosing functions, then the module), each at the last assignment before the line that uses it.
    Building it is linear in the file, and a lookup costs a bisection: the launch dtypes of every kernel of a
    5 MB file cost one pass, not one walk of the file per kernel (issue 22, item 6)."""

    def __init__(self, body: list):
        self.funcs: list = []  # function definitions, in the order they start
        self.parent: dict = {}  # id(function) -> the function it is nested in (or None)
        self.scopes: dict = {None: {}}  # id(function) or None (the module) -> {name: [(line, value node)]}
        #: id(function) -> {parameter: its default, or _UNBOUND}, read when first asked (``_params``): a lookup
        #: finds most names in the assignments, and a 5 MB file's 31,000 functions' parameters were a third of
        #: building the index
        self._param_cache: dict = {}
        self._visit(body, None)
        first = operator.itemgetter(0)
        self.funcs.sort(key=operator.attrgetter("lineno"))
        self._starts = [f.lineno for f in self.funcs]
        for sc in self.scopes.values():
            for lst in sc.values():
                if len(lst) > 1:
                    lst.sort(key=first)
        self._owner_cache: dict = {}

    def _visit(self, stmts, fn) -> None:
        scope = self.scopes[id(fn) if fn is not None else None]
        Assign, simple = ast.Assign, _SIMPLE_STATEMENTS
        for st in stmts:
            cls = st.__class__
            if cls is Assign:
                for t in st.targets:
                    if t.__class__ is ast.Name:  # (what _bind does with a name, without the call)
                        got = scope.get(t.id)
                        if got is None:
                            scope[t.id] = [(st.lineno, st.value)]
                        else:
                            got.append((st.lineno, st.value))
                    else:
                        self._bind(scope, t, st.value, st.lineno)
                continue
            if cls in simple:
                continue  # nothing bound, no statement inside
            if cls is ast.FunctionDef or cls is ast.AsyncFunctionDef:
                self.funcs.append(st)
                self.parent[id(st)] = fn
                self.scopes[id(st)] = {}  # (its parameters: ``_params``, bound at the definition's line)
                self._visit(st.body, st)
                continue
            if isinstance(st, ast.ClassDef):
                self._visit([b for b in st.body if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))], fn)
                continue
            if isinstance(st, ast.Assign):
                for t in st.targets:
                    self._bind(scope, t, st.value, st.lineno)
            elif isinstance(st, ast.AnnAssign) and st.value is not None:
                self._bind(scope, st.target, st.value, st.lineno)
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(st, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    self._visit(sub, fn)
            for h in getattr(st, "handlers", None) or ():
                self._visit(h.body, fn)
            for c in getattr(st, "cases", None) or ():
                self._visit(c.body, fn)

    def _params(self, fn) -> dict:
        """{parameter: its default node, or ``_UNBOUND``} of function ``fn`` (bound at its ``def`` line, before
        anything its body assigns)."""
        got = self._param_cache.get(id(fn))
        if got is None:
            a = fn.args
            params = list(a.posonlyargs) + list(a.args)
            dflt = dict(zip([p.arg for p in params][len(params) - len(a.defaults):], a.defaults))
            dflt.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
            got = self._param_cache[id(fn)] = {p.arg: dflt.get(p.arg, _UNBOUND) for p in params + list(a.kwonlyargs)}
        return got

    @staticmethod
    def _bind(scope, target, value, line) -> None:
        if isinstance(target, ast.Name):
            scope.setdefault(target.id, []).append((line, value))
        elif isinstance(target, (ast.Tuple, ast.List)):
            vals = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(
                target.elts) else None
            for i, t in enumerate(target.elts):
                HostIndex._bind(scope, t, vals[i] if vals is not None else _UNBOUND, line)

    def owner(self, line: int):
        """The innermost function definition containing ``line``, or None (module level)."""
        got = self._owner_cache.get(line, 0)
        if got != 0:
            return got
        i = bisect.bisect_right(self._starts, line) - 1
        best = None
        while i >= 0:  # the nearest definition above that contains the line; else its parent's chain
            f = self.funcs[i]
            if f.lineno <= line <= (f.end_lineno or f.lineno):
                best = f
                break
            # f ends above the line: a function containing the line starts before f and contains f, so walk
            # f's parents (nested definitions are skipped without visiting each)
            p = self.parent.get(id(f))
            while p is not None and not (p.lineno <= line <= (p.end_lineno or p.lineno)):
                p = self.parent.get(id(p))
            best = p
            break
        self._owner_cache[line] = best
        return best

    def lookup(self, name: str, line: int):
        """The value node last assigned to ``name`` before ``line`` in the scopes around that line, or None."""
        fn = self._owner_cache.get(line, 0)
        if fn == 0:
            fn = self.owner(line)
        scopes = self.scopes
        while True:
            if fn is None:
                lst = scopes[None].get(name)
                if not lst:
                    return None
            else:
                lst = scopes[id(fn)].get(name)
            if lst:
                if len(lst) < 8:  # (most names are assigned once or twice: no bisection, no key function)
                    i = len(lst) - 1
                    while i >= 0 and lst[i][0] >= line:
                        i -= 1
                else:
                    i = bisect.bisect_left(lst, line, key=_FIRST) - 1
                if i >= 0:
                    v = lst[i][1]
                    return None if v is _UNBOUND else v
                if fn is None:
                    return None if lst[0][1] is _UNBOUND else lst[0][1]  # a global assigned below its use
            if fn is not None and fn.lineno < line:  # a parameter (bound at the def line, before the body)
                v = self._params(fn).get(name, _NO_PARAM)
                if v is not _NO_PARAM:
                    return None if v is _UNBOUND else v
            if fn is None:
                return None
            fn = self.parent.get(id(fn))


_NO_PARAM = object()


def host_index(scan) -> HostIndex:
    """The module scan's ``HostIndex`` (built on first use, kept on the scan)."""
    got = scan.__dict__.get("_host_index")
    if got is None:
        got = scan.__dict__["_host_index"] = HostIndex(list(getattr(scan, "body", ()) or ()))
    return got


def launch_dtypes(index: HostIndex, launch, pnames: list, pointer_params) -> tuple[dict, dict]:
    """({pointer parameter: dtype name}, {parameter: how it was found}) of one launch (a ``LaunchSite`` or an
    ``ExampleLaunch``): the tensors it passes, traced through the host code's assignments."""
    at = [(i, p) for i, p in enumerate(pnames) if p in pointer_params]
    return _launch_dtypes(index.lookup, launch, at, pointer_params)


def _launch_dtypes(look, launch, at: list, pointer_params) -> tuple[dict, dict]:
    """``launch_dtypes`` with the positions of the pointers given: ``at`` [(position, parameter)]."""
    out: dict = {}
    why: dict = {}
    node = launch.node
    args = node.args
    n = len(args)
    for a in args:
        if a.__class__ is ast.Starred:
            n = 0  # *args: positions unknown
            break
    pairs = [(p, args[i]) for i, p in at if i < n]
    for k in node.keywords:
        if k.arg in pointer_params:
            pairs.append((k.arg, k.value))
    for name, arg in pairs:
        if name in out:
            continue
        try:
            dt = _dtype_of(arg, look)
        except RecursionError:
            dt = None
        if dt is not None:
            out[name] = dt
            why[name] = _Why(launch, arg)
    return out, why


class _Why:
    """How a launch gives a pointer its dtype, spelled out only when asked (``str``): most are never shown,
    and ``ast.unparse`` of every argument of every launch cost more than the rest of the lookup."""

    __slots__ = ("launch", "arg")

    def __init__(self, launch, arg):
        self.launch, self.arg = launch, arg

    def __str__(self) -> str:
        where = getattr(self.launch, "what", None) or f"the launch at line {self.launch.node.lineno}"
        return f"{where} passes {ast.unparse(self.arg)}"

    def __contains__(self, s) -> bool:
        return s in str(self)


def host_pointer_dtypes(text: str, launches, pnames: list, pointer_params, index: HostIndex | None = None
                        ) -> tuple[dict, dict]:
    """({pointer parameter: dtype name}, {parameter: how it was found}) from the tensors passed at the
    kernel's launches (``x = torch.randn(n, dtype=torch.float16)`` ... ``k[grid](x, ...)``), the first launch
    that says winning; ``index``: the module's ``HostIndex`` (else ``text`` is parsed)."""
    out: dict = {}
    why: dict = {}
    if not launches:
        return out, why
    if index is None:
        try:
            index = HostIndex(_parse(text).body)
        except (SyntaxError, ValueError):
            return out, why
    for ls in launches:
        got, w = launch_dtypes(index, ls, pnames, pointer_params)
        for k, v in got.items():
            if k not in out:
                out[k], why[k] = v, str(w[k])
    return out, why


class ExampleLaunch:
    """A ``newt.harness`` example's ``Case(args=(...), kwargs={...})`` read as a launch of its kernel."""

    __slots__ = ("kernel", "node", "what", "kw_nodes")

    def __init__(self, kernel: str, node: ast.Call, what: str):
        self.kernel, self.node, self.what = kernel, node, what
        self.kw_nodes = {k.arg: k.value for k in node.keywords if k.arg}  # as LaunchSite has them


def example_launches(text: str, kernel: str, resolve, index: HostIndex | None = None) -> list:
    """The cases of the ``@newt.harness.example(kernel)`` functions of the file, as launches (their
    ``args`` tuple and literal-keyed ``kwargs`` dict); ``resolve(node)`` is the module scan's qualname of a
    decorator; ``index``: the module's ``HostIndex`` (else ``text`` is parsed).  Nothing runs: the example's
    body is read like a host function's."""
    if index is not None:
        decorated = index.__dict__.get("_decorated_by")
        if decorated is None:
            decorated = index.__dict__["_decorated_by"] = _decorated_index(index.funcs)
    else:
        try:
            decorated = _decorated_by_call_of(_parse(text))
        except (SyntaxError, ValueError):
            return []
    out = []
    seen: set = set()
    for fn, dec in decorated.get(kernel, ()):
        if id(fn) in seen or resolve(dec.func) != "newt.harness.example":
            continue
        seen.add(id(fn))
        for call in ast.walk(fn):
            if not (isinstance(call, ast.Call) and resolve(call.func) == "newt.harness.Case"):
                continue
            kws = {k.arg: k.value for k in call.keywords if k.arg}
            pos = list(call.args)
            args = kws.get("args", pos[1] if len(pos) > 1 else None)
            kwargs = kws.get("kwargs", pos[2] if len(pos) > 2 else None)
            elts = list(args.elts) if isinstance(args, (ast.Tuple, ast.List)) else []
            keywords = []
            if isinstance(kwargs, ast.Dict):
                keywords = [ast.keyword(arg=k.value, value=v) for k, v in zip(kwargs.keys, kwargs.values)
                            if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if not elts and not keywords:
                continue
            node = ast.Call(func=ast.Name(kernel, ast.Load()), args=elts, keywords=keywords)
            node.lineno, node.col_offset = call.lineno, call.col_offset
            out.append(ExampleLaunch(kernel, node, f"the example {fn.name} (line {call.lineno})"))
    return out


def _decorated_by_call_of(tree) -> dict:
    """``{name: [(function, decorator), ...]}`` of the functions decorated by a call whose first argument is
    the plain name ``name`` (``@newt.harness.example(kernel)``), in ``ast.walk`` order; one walk per tree,
    kept on the tree (every kernel of a file asks)."""
    text = getattr(tree, "_newt_text", None)
    got = getattr(tree, "_newt_decorated_by", None)
    if got is not None and got[0] is text:  # (a tree given again for another text is walked again)
        return got[1]
    idx = _decorated_index(_functions(tree))
    tree._newt_decorated_by = (text, idx)
    return idx


def _decorated_index(funcs) -> dict:
    idx: dict = {}
    for fn in funcs:
        for dec in fn.decorator_list:
            if isinstance(dec, ast.Call) and dec.args and isinstance(dec.args[0], ast.Name):
                idx.setdefault(dec.args[0].id, []).append((fn, dec))
    return idx


# ---------------------------------------------------------------------------
# the launches' pointer dtypes, for the front end's analysis (the editor and `newt check`)
# ---------------------------------------------------------------------------


def _newt_dtype(name: str):
    from newt.language import core as lc
    try:
        return lc.dtype_from_name(name)  # fp16, i32, i1 ... (lc.dtype takes int32, not i32)
    except Exception:  # a name newt lacks: nothing is said about that pointer
        return None


class LaunchTypes:
    """The pointer dtypes of one kernel's launches: ``per_launch`` [(launch, {param: dtype}, {param: why})];
    ``agreed`` {param: (dtype, why)} where every launch that says agrees; ``conflict``: the parameters launches
    pass different dtypes for (each such launch gets a specialization of its own)."""

    def __init__(self, per_launch: list):
        self.per_launch = per_launch
        agreed: dict = {}
        conflict: set = set()
        for _ls, dts, whys in per_launch:
            for p, dt in dts.items():
                if p in conflict:
                    continue
                if p in agreed:
                    if agreed[p][0] != dt:
                        conflict.add(p)
                        del agreed[p]
                else:
                    agreed[p] = (dt, str(whys[p]))
        # (a number every launch passes says no pointer dtype: nothing to agree on)
        agreed = {p: v for p, v in agreed.items() if v[0] != SCALAR}
        self.agreed, self.conflict = agreed, conflict
        self._own = {id(ls.node): {p: (dt, str(whys[p])) for p, dt in dts.items() if p in conflict}
                     for ls, dts, whys in per_launch if conflict.intersection(dts)} if conflict else {}

    def own(self, launch) -> dict:
        """{param: (dtype, why)} of ``launch`` for the parameters the launches disagree on."""
        return self._own.get(id(launch.node), {})

    @staticmethod
    def arg_types(d: dict) -> dict:
        from newt.language import core as lc
        out = {}
        for p, (dt, _why) in d.items():
            ty = _newt_dtype(dt)
            if ty is not None:
                out[p] = lc.pointer_type(ty)
        return out

    @staticmethod
    def describe_types(d: dict) -> str:
        return ", ".join(f"{p}: *{dt}" if dt != SCALAR else f"{p}: a number" for p, (dt, _why) in sorted(d.items()))

    def describe(self, d: dict) -> str:
        """``pointer dtypes from the launches (x_ptr: *fp16, out_ptr: *fp16)``: a specialization's context."""
        srcs = {"examples" if "the example " in why else "launches" for _dt, why in d.values()}
        return "pointer dtypes from the " + " and ".join(sorted(srcs, reverse=True)) + f" ({self.describe_types(d)})"

    def key(self) -> tuple:
        """What the launches say (the lines that pass each set of dtypes), for the results' content key: the
        launches of a big file mostly pass the same dtypes, so each set is written once."""
        lines: dict = {}
        for ls, dts, _w in self.per_launch:
            t = tuple(sorted(dts.items())) if len(dts) > 1 else tuple(dts.items())
            got = lines.get(t)
            if got is None:
                lines[t] = [ls.node.lineno]
            else:
                got.append(ls.node.lineno)
        return tuple(sorted((t, tuple(sorted(ln))) for t, ln in lines.items()))


def launch_types(scan, kd, pointer_params, launches) -> LaunchTypes | None:
    """The pointer dtypes the host code passes to kernel ``kd``'s unannotated pointer parameters, at its
    ``launches`` (``LaunchSite``: module level, under ``__main__``, in functions and lambdas) and in its
    ``newt.harness`` examples; None when none says.  Read from the text alone (nothing runs)."""
    text = scan.src.text
    if not launches and "example" not in text:
        return None
    node = kd.node
    pnames = [a.arg for a in list(node.args.posonlyargs) + list(node.args.args)]
    ptrs = {p.arg for p in list(node.args.posonlyargs) + list(node.args.args)
            if p.arg in pointer_params and p.annotation is None}
    if not ptrs:
        return None
    index = host_index(scan)
    per = []
    look = index.lookup
    at = [(i, p) for i, p in enumerate(pnames) if p in ptrs]  # (the pointers' positions: once per kernel)
    # a parameter whose default is a number: a launch that leaves it out passes that number, not a pointer
    # (FlagGems' ``sum_and_scale(..., scale=1.0)``, given a tensor by one launch and nothing by another)
    plist = list(node.args.posonlyargs) + list(node.args.args)
    defaults = dict(zip([a.arg for a in plist[len(plist) - len(node.args.defaults):]], node.args.defaults))
    numeric = {p: d for p, d in defaults.items() if p in ptrs and isinstance(d, ast.Constant)
               and isinstance(d.value, (int, float)) and not isinstance(d.value, bool)}
    said = False
    for ls in list(launches) + example_launches(text, kd.name, scan.resolve, index):
        dts, whys = _launch_dtypes(look, ls, at, ptrs)
        said = said or bool(dts)
        if numeric and not _passes_unknown(ls.node):
            given = set(pnames[:len(ls.node.args)]) | {k.arg for k in ls.node.keywords}
            for p, d in numeric.items():
                if p not in given:
                    dts[p], whys[p] = SCALAR, _Why(ls, d)
        if dts:
            per.append((ls, dts, whys))
    return LaunchTypes(per) if said else None


#: what ``LaunchTypes`` records for a parameter a launch gives a number (its default): no pointer dtype
SCALAR = "<scalar>"


def _passes_unknown(call) -> bool:
    """The call spreads ``*args`` or ``**kwargs``: which parameters it passes is not known."""
    return any(a.__class__ is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords)
