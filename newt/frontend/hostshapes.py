"""The shapes and dtypes of the tensors a host call passes to a kernel called like a function (deuteron / Helion
kernels: ``kernel(x, y)``, Helion's ``run_example(kernel, ref, (x, y))``), followed through the host code to their
constructors; read from the text, nothing runs.  Split from :mod:`newt.frontend.hostvalues`, whose index and dtype
rules it uses.
"""

from __future__ import annotations

import ast

from .hostvalues import _BIN, _FUNCS, HostIndex, _calls, _dtype_of

__all__ = ["TensorFact", "HostEval", "CallLaunch", "call_launches"]

# ---------------------------------------------------------------------------
# the shapes and dtypes of the tensors a call passes (deuteron / Helion kernels, which are called like functions:
# `kernel(x, y)`, Helion's `run_example(kernel, ref, (x, y))`); read from the text, nothing runs
# ---------------------------------------------------------------------------


class TensorFact:
    """A tensor the host code builds: ``shape`` a tuple of sizes (an int, or None where the text does not say) or
    None (rank unknown too); ``dtype`` newt's name of its element type (``fp16``) or None; ``text`` how it was
    built (``torch.randn([m, k], dtype=torch.float16)``), for messages."""

    __slots__ = ("shape", "dtype", "text")

    def __init__(self, shape, dtype, text: str = ""):
        self.shape = None if shape is None else tuple(shape)
        self.dtype = dtype
        self.text = text

    def describe(self) -> str:
        dims = "?" if self.shape is None else "[" + ", ".join("?" if s is None else str(s) for s in self.shape) + "]"
        return f"{self.dtype or ''}{dims}"

    def __repr__(self):
        return f"TensorFact({self.describe()})"


_NEW_TENSOR = {"randn", "rand", "empty", "zeros", "ones", "full", "randint", "empty_strided", "normal"}
_SAME_SHAPE = {"to", "type", "half", "float", "bfloat16", "double", "int", "long", "bool", "cuda", "cpu", "contiguous",
               "clone", "detach", "requires_grad_", "abs", "neg", "exp", "sigmoid", "relu", "tanh", "normal_",
               "uniform_", "fill_", "zero_", "mul", "add", "sub", "div"}
_LIKE = {"empty_like", "zeros_like", "ones_like", "randn_like", "rand_like", "full_like", "clone"}


class HostEval:
    """Sizes (ints) and tensor shapes of host expressions, followed through the host code's assignments
    (``look(name, line)``: the value node last assigned before ``line``, as ``HostIndex.lookup``), through a
    function's parameters to the literal arguments of its calls in the file (``tree``: the parsed module) and,
    last, ``leaf(name)``: a value the caller knows (an int or a ``TensorFact``), else None."""

    def __init__(self, look, tree=None, leaf=None, owner=None):
        self.look, self.tree, self.leaf, self.owner = look, tree, leaf, owner

    def _name(self, name: str, line: int, depth: int):
        node = self.look(name, line)
        if node is not None:
            return node
        if self.tree is not None and self.owner is not None:
            got = self._from_callers(name, line, depth)
            if got is not None:
                return got
        return self.leaf(name) if self.leaf is not None else None

    def _from_callers(self, name: str, line: int, depth: int):
        """A parameter of the function around ``line``: the argument its first call in the file passes."""
        fn = self.owner(line)
        if fn is None:
            return None
        params = [p.arg for p in list(fn.args.posonlyargs) + list(fn.args.args)]
        kwonly = [p.arg for p in fn.args.kwonlyargs]
        if name not in params and name not in kwonly:
            return None
        for call in _calls(self.tree, fn.name):
            if any(isinstance(a, ast.Starred) for a in call.args):
                continue
            arg = next((k.value for k in call.keywords if k.arg == name), None)
            if arg is None and name in params and params.index(name) < len(call.args):
                arg = call.args[params.index(name)]
            if arg is not None:
                return arg
        return None

    def int_of(self, node, depth: int = 0):
        """The int ``node`` denotes, or None."""
        if depth > 24 or node is None:
            return None
        if isinstance(node, int) and not isinstance(node, bool):
            return node
        if isinstance(node, ast.Constant):
            v = node.value
            return v if isinstance(v, int) and not isinstance(v, bool) else None
        if isinstance(node, ast.Name):
            got = self._name(node.id, node.lineno, depth)
            return self.int_of(got, depth + 1) if isinstance(got, (ast.AST, int)) else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.int_of(node.operand, depth + 1)
            return None if v is None else -v
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN and not isinstance(node.op, ast.Div):
            a, b = self.int_of(node.left, depth + 1), self.int_of(node.right, depth + 1)
            if a is None or b is None:
                return None
            try:
                v = _BIN[type(node.op)](a, b)
            except (ArithmeticError, ValueError):
                return None
            return v if isinstance(v, int) and abs(v) < 1 << 40 else None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            shape = self.shape_of(node.value.value, depth + 1)
            i = self.int_of(node.slice, depth + 1)
            return shape[i] if shape is not None and i is not None and -len(shape) <= i < len(shape) else None
        if isinstance(node, ast.Call) and not node.keywords:
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if fname == "size" and isinstance(f, ast.Attribute) and len(node.args) == 1:
                shape = self.shape_of(f.value, depth + 1)
                i = self.int_of(node.args[0], depth + 1)
                return shape[i] if shape is not None and i is not None and -len(shape) <= i < len(shape) else None
            if fname in _FUNCS and fname != "bool" and node.args:
                vals = [self.int_of(a, depth + 1) for a in node.args]
                if None in vals:
                    return None
                try:
                    v = _FUNCS[fname](*vals)
                except (ArithmeticError, ValueError, TypeError):
                    return None
                return v if isinstance(v, int) else None
        return None

    def _sizes(self, node, depth: int):
        """``[m, k]`` / ``(m, k)`` / ``x.shape`` / a name bound to one: a tuple of ints-or-None, or None."""
        if isinstance(node, ast.Name):
            got = self._name(node.id, node.lineno, depth)
            return self._sizes(got, depth + 1) if isinstance(got, ast.AST) and depth < 24 else None
        if isinstance(node, (ast.List, ast.Tuple)):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return None
            return tuple(self.int_of(e, depth + 1) for e in node.elts)
        if isinstance(node, ast.Attribute) and node.attr == "shape":
            return self.shape_of(node.value, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and not node.args:
            return self.shape_of(node.func.value, depth + 1)
        return None

    def shape_of(self, node, depth: int = 0):
        """The shape of the tensor ``node`` denotes (a tuple of ints-or-None), or None."""
        if depth > 24 or node is None:
            return None
        if isinstance(node, TensorFact):
            return node.shape
        if isinstance(node, ast.Name):
            got = self._name(node.id, node.lineno, depth)
            return self.shape_of(got, depth + 1) if isinstance(got, (ast.AST, TensorFact)) else None
        if isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "data"):
            s = self.shape_of(node.value, depth + 1)
            if node.attr == "data" or s is None:
                return s
            return tuple(reversed(s)) if node.attr == "T" or len(s) < 2 else s[:-2] + (s[-1], s[-2])
        if not isinstance(node, ast.Call):
            return None
        f = node.func
        if not isinstance(f, ast.Attribute):
            return None
        is_torch = isinstance(f.value, ast.Name) and f.value.id == "torch"
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        args = node.args
        if is_torch and f.attr in _NEW_TENSOR:
            if "size" in kw:
                return self._sizes(kw["size"], depth + 1)
            if f.attr == "randint":
                seq = [a for a in args if isinstance(a, (ast.List, ast.Tuple))]
                return self._sizes(seq[0], depth + 1) if len(seq) == 1 else None
            if f.attr in ("full", "empty_strided", "normal"):
                return self._sizes(args[0], depth + 1) if args and f.attr != "normal" else None
            if len(args) == 1:
                got = self._sizes(args[0], depth + 1)
                if got is not None:
                    return got
                v = self.int_of(args[0], depth + 1)
                return (v,) if v is not None or isinstance(args[0], ast.Constant) else None
            if args and not any(isinstance(a, (ast.Starred, ast.List, ast.Tuple)) for a in args):
                return tuple(self.int_of(a, depth + 1) for a in args)
            return None
        if is_torch and f.attr in _LIKE and args:
            return self.shape_of(args[0], depth + 1)
        if is_torch:
            return None
        recv = f.value
        if f.attr in _SAME_SHAPE or f.attr in ("empty_like",):
            return self.shape_of(recv, depth + 1)
        s = self.shape_of(recv, depth + 1)
        if s is None:
            return None
        if f.attr == "t" and not args:
            return tuple(reversed(s)) if len(s) <= 2 else None
        if f.attr in ("transpose", "swapaxes") and len(args) == 2:
            i, j = self.int_of(args[0], depth + 1), self.int_of(args[1], depth + 1)
            if i is None or j is None or not (-len(s) <= i < len(s) and -len(s) <= j < len(s)):
                return None
            out = list(s)
            out[i], out[j] = out[j], out[i]
            return tuple(out)
        if f.attr == "permute":
            perm = args[0].elts if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)) else args
            idx = [self.int_of(a, depth + 1) for a in perm]
            if None in idx or sorted(i % max(len(s), 1) for i in idx) != list(range(len(s))):
                return None
            return tuple(s[i] for i in idx)
        if f.attr == "unsqueeze" and len(args) == 1:
            i = self.int_of(args[0], depth + 1)
            if i is None or not -len(s) - 1 <= i <= len(s):
                return None
            out = list(s)
            out.insert(i % (len(s) + 1), 1)
            return tuple(out)
        if f.attr in ("view", "reshape") and args:
            sizes = self._sizes(args[0], depth + 1) if len(args) == 1 else tuple(self.int_of(a, depth + 1)
                                                                                  for a in args)
            if sizes is None or sizes.count(-1) > 1:
                return None
            if -1 in sizes:
                known = [x for x in sizes if x != -1]
                total: int | None = 1
                for x in s:
                    total = None if x is None or total is None else total * x
                part: int | None = 1
                for x in known:
                    part = None if x is None or part is None else part * x
                fill = total // part if total is not None and part and total % part == 0 else None
                sizes = tuple(fill if x == -1 else x for x in sizes)
            return sizes
        return None

    def dtype_of(self, node):
        """The dtype (newt's name) of the tensor ``node`` denotes, or None (``_dtype_of`` over this lookup)."""
        if isinstance(node, TensorFact):
            return node.dtype

        def look(name, line):
            got = self._name(name, line, 0)
            return got if isinstance(got, ast.AST) else None
        try:
            got = _dtype_of(node, look)
        except RecursionError:
            return None
        if got is None and isinstance(node, ast.Name):
            leaf = self._name(node.id, node.lineno, 0)
            if isinstance(leaf, TensorFact):
                return leaf.dtype
        return got

    def fact(self, node):
        """A ``TensorFact`` of the tensor ``node`` denotes (None where neither its shape nor its dtype is known)."""
        if isinstance(node, TensorFact):
            return node
        shape, dtype = self.shape_of(node), self.dtype_of(node)
        if shape is None and dtype is None:
            return None
        return TensorFact(shape, dtype, ast.unparse(node))


class CallLaunch:
    """A call of a function-like kernel found in the file: ``args`` / ``keywords`` its argument nodes, ``what``
    where it is (``the call at line 40``, ``run_example at line 12``)."""

    __slots__ = ("node", "args", "keywords", "what")

    def __init__(self, node, args, keywords, what):
        self.node, self.args, self.keywords, self.what = node, args, keywords, what


def call_launches(tree, index: HostIndex, kernel: str) -> list:
    """The calls of ``kernel`` in the module (``kernel(x, y)`` anywhere, Helion's ``run_example(kernel, ref, (x,
    y))`` and ``run_example({"name": kernel, ...}, ref, (x, y))``), as ``CallLaunch`` values."""
    out = []
    for call in _calls(tree, kernel):
        if any(isinstance(a, ast.Starred) for a in call.args):
            continue
        out.append(CallLaunch(call, list(call.args), {k.arg: k.value for k in call.keywords if k.arg},
                              f"the call at line {call.lineno}"))
    for call in _calls(tree, "run_example"):
        if not call.args:
            continue
        first = call.args[0]
        if isinstance(first, ast.Name) and first.id != kernel:
            first = index.lookup(first.id, call.lineno) or first
        names = [first] if isinstance(first, ast.Name) else list(first.values) if isinstance(first, ast.Dict) else []
        if not any(isinstance(n, ast.Name) and n.id == kernel for n in names):
            continue
        args = call.args[2] if len(call.args) > 2 else next((k.value for k in call.keywords if k.arg == "args"), None)
        if isinstance(args, ast.Name):
            args = index.lookup(args.id, call.lineno)
        if not isinstance(args, (ast.Tuple, ast.List)) or any(isinstance(a, ast.Starred) for a in args.elts):
            continue
        out.append(CallLaunch(call, list(args.elts), {}, f"run_example at line {call.lineno}"))
    return out
