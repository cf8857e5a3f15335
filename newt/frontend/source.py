"""Reading a Python file as text: parsing with recovery, spans, and the module's
static facts (import aliases, jit functions, constants, launches, configs).

Nothing here imports or executes the user's module.
"""

from __future__ import annotations

import ast
import bisect
import inspect
import itertools
import linecache
import operator
import re
import sys
import types
import weakref
from dataclasses import dataclass, field

from newt.diagnostics import Span

from . import launchscan
from .astwalk import fast_walk
from .kinds import kind_of_decorator, module_aliases
from .launchscan import LaunchSite, _PendingValues, _ScanFacts
from .namedtuples import namedtuple_call, namedtuple_class
from .parsing import ParsedChunk, parse_with_recovery
from .staticcall import NotStatic, call_function

__all__ = ["SourceFile", "ParsedChunk", "parse_with_recovery", "ModuleScan", "KernelDef", "LaunchSite",
           "ConfigLit", "StaticEval", "NotStatic", "qualname_of", "function_source", "register_source",
           "recover_source", "NoSourceError"]


_NEWLINE = re.compile(r"\r\n|\r|\n")


class SourceFile:
    """The text of one file with helpers to turn AST positions into ``Span`` values."""

    def __init__(self, text: str, path: str = "<string>"):
        self.text = text
        self.path = path
        # Python's tokenizer ends lines at \r\n, \r and \n only (str.splitlines also splits at \x0b, \x0c,
        # \x1c-\x1e, \x85, \u2028 and \u2029, which would shift every line number after them)
        # (a text without \r: str.split, several times faster than the pattern's split of a big file)
        self.lines = _NEWLINE.split(text) if "\r" in text else text.split("\n")
        if self.lines and self.lines[-1] == "" and text.endswith(("\n", "\r")):
            self.lines.pop()
        self._ascii = text.isascii()

    def char_col(self, lineno: int, byte_col: int) -> int:
        """AST columns are UTF-8 byte offsets; spans use characters."""
        if self._ascii or not (1 <= lineno <= len(self.lines)):
            return byte_col
        line = self.lines[lineno - 1]
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node, col_shift: int = 0) -> Span:
        """``Span.from_ast`` over this file's lines (kept on the node: spans are asked for many times)."""
        if col_shift:
            return Span.from_ast(node, () if self._ascii else self.lines, col_shift)
        sp = getattr(node, "_newt_span", None)
        if sp is not None and sp[0] is self:
            return sp[1]
        out = Span.from_ast(node, () if self._ascii else self.lines)
        try:
            node._newt_span = (self, out)
        except AttributeError:
            pass
        return out

    def line_text(self, lineno: int) -> str:
        return self.lines[lineno - 1] if 1 <= lineno <= len(self.lines) else ""


# ---------------------------------------------------------------------------
# static evaluation of module-level expressions (configs, launch arguments)
# ---------------------------------------------------------------------------


@dataclass
class ConfigLit:
    """A ``newt.Config(...)`` found in the source."""

    kwargs: dict
    num_warps: int | None = None
    num_stages: int | None = None
    node: ast.AST | None = None
    key_nodes: dict = field(default_factory=dict)
    #: listed on a path the text cannot decide (``if is_cuda(): ... else: ...``): used for specializations,
    #: but a key that is no parameter of the kernel is not an error (it may be another backend's option)
    speculative: bool = False


_SAFE_BUILTINS = {
    "range": range, "len": len, "min": min, "max": max, "int": int, "float": float, "bool": bool,
    "list": list, "tuple": tuple, "dict": dict, "zip": zip, "enumerate": enumerate, "sorted": sorted,
    "abs": abs, "reversed": reversed, "set": set, "str": str, "sum": sum, "any": any, "all": all,
}


_LITERAL_NAMES = {"True": True, "False": False, "None": None}
#: the imported functions ``StaticEval`` calls (besides ``newt.language``'s): any other is not static
_STATIC_CALLS = frozenset({"newt.Config", "newt.tune.autotuner.Config", "newt.next_power_of_2",
                           "newt.runtime.next_power_of_2", "newt.cdiv", "newt.language.cdiv", "itertools.product",
                           "newt.language.constexpr"})
#: the expressions whose evaluation has no effect and raises nothing but NotStatic
_PURE_ARGS = frozenset({ast.Name, ast.Constant, ast.Attribute})
_NO_VALUE = object()  # StaticEval.name_value: the name has no static value


def qualname_of(node, aliases: dict[str, str]) -> str | None:
    """``nl.load`` -> ``newt.language.load`` using the file's import aliases."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call):
        return None
    if not isinstance(node, ast.Name):
        return None
    base = aliases.get(node.id)
    if base is None:
        return None
    return ".".join([base] + parts[::-1])


class StaticEval:
    """Evaluate a small, side-effect-free subset of Python over literals.

    Used for autotune configs, launch arguments and module constants.  It calls
    no user code: only a few pure builtins, ``newt.Config``,
    ``newt.next_power_of_2``/``cdiv``, ``itertools.product`` and module-level
    functions whose body is a single ``return``.
    """

    MAX_ITEMS = 20000
    MAX_STEPS = 5000

    def __init__(self, scan: "ModuleScan", local_env: dict | None = None, all_paths: bool = False):
        self.scan = scan
        self.env = dict(local_env or {})
        self.items = 0
        self.depth = 0
        self.steps = 0
        #: autotune configs: a function of the file whose ``if`` test the text cannot decide gives the
        #: configs of both paths (marked ``speculative``), where a plain evaluation gives up
        self.all_paths = all_paths

    def name_value(self, name: str):
        """What ``name`` is here (the environment, then the module's constants, literals, builtins, simple
        functions, jit functions, imports), or ``_NO_VALUE``."""
        if name in self.env:
            return self.env[name]
        scan = self.scan
        if name in scan.constants:
            return scan.constants[name]
        if name in _LITERAL_NAMES:
            return _LITERAL_NAMES[name]
        if name in _SAFE_BUILTINS and name not in scan.assigned:
            return _SAFE_BUILTINS[name]
        if name in scan.simple_functions:
            return scan.simple_functions[name]
        kd = scan.kernels.get(name)
        if kd is not None and kd.kind == "jit":
            return JitName(name)
        q = scan.aliases.get(name)
        if q is not None:
            return _Q(q)
        return _NO_VALUE

    def never_static(self, node) -> bool:
        """Whether ``eval(node)`` surely raises ``NotStatic`` and changes nothing on its way: a call of a method
        of something that is no import (``x.half()``), or of an imported function ``eval`` does not know
        (``torch.randn(n, dtype=torch.float16)``) with names, literals and attributes for arguments.  Host code
        is mostly such calls: deciding it here costs no evaluation and no raised exception."""
        if node.__class__ is not ast.Call:
            return False
        f = node.func
        if f.__class__ is not ast.Attribute:
            return False
        q = qualname_of(f, self.scan.aliases)
        if q is None:
            return True  # (eval raises at the callee, before any argument)
        if q in _STATIC_CALLS or q.startswith("newt.language."):
            return False
        pure = _PURE_ARGS
        for a in node.args:
            if a.__class__ not in pure:
                return False
        for k in node.keywords:
            if k.arg is None or k.value.__class__ not in pure:
                return False
        return True

    def eval(self, node):
        self.depth += 1
        try:
            if self.depth > 60:
                raise NotStatic("too deep")
            return self._eval(node)
        finally:
            self.depth -= 1

    def _eval(self, node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            v = self.name_value(node.id)
            if v is _NO_VALUE:
                raise NotStatic(node.id)
            return v
        if isinstance(node, ast.Attribute):
            q = qualname_of(node, self.scan.aliases)
            if q is not None:
                return _Q(q)
            raise NotStatic("attribute")
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            vals = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    vals.extend(self.eval(e.value))
                else:
                    vals.append(self.eval(e))
            self._count(len(vals))
            return tuple(vals) if isinstance(node, ast.Tuple) else (set(vals) if isinstance(node, ast.Set) else vals)
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    out.update(self.eval(v))
                else:
                    out[self.eval(k)] = self.eval(v)
            return out
        if isinstance(node, ast.BinOp):
            a, b = self.eval(node.left), self.eval(node.right)
            if isinstance(node.op, ast.Pow) and isinstance(b, int) and b > 4096:
                raise NotStatic("huge power")
            if isinstance(node.op, ast.Mult) and isinstance(a, (list, tuple, str)) and isinstance(b, int):
                self._count(len(a) * max(b, 0))
            return _BINOPS[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp):
            return _UNOPS[type(node.op)](self.eval(node.operand))
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                v = True
                for e in node.values:
                    v = self.eval(e)
                    if not v:
                        return v
                return v
            v = False
            for e in node.values:
                v = self.eval(e)
                if v:
                    return v
            return v
        if isinstance(node, ast.Compare):
            left = self.eval(node.left)
            for op, rnode in zip(node.ops, node.comparators):
                right = self.eval(rnode)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value)
            if isinstance(node.slice, ast.Slice):
                sl = slice(*(self.eval(x) if x is not None else None
                             for x in (node.slice.lower, node.slice.upper, node.slice.step)))
                return base[sl]
            return base[self.eval(node.slice)]
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            out = []
            self._comp(node.generators, 0, lambda: out.append(self.eval(node.elt)))
            return out
        if isinstance(node, ast.DictComp):
            out = {}

            def add():
                out[self.eval(node.key)] = self.eval(node.value)
            self._comp(node.generators, 0, add)
            return out
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    parts.append(format(self.eval(v.value)))
            return "".join(parts)
        raise NotStatic(type(node).__name__)

    def _count(self, n):
        self.items += n
        if self.items > self.MAX_ITEMS:
            raise NotStatic("too many items")

    def _comp(self, gens, i, emit):
        if i == len(gens):
            emit()
            return
        g = gens[i]
        it = self.eval(g.iter)
        saved = dict(self.env)
        try:
            for v in it:
                self._count(1)
                self._bind(g.target, v)
                if all(self.eval(c) for c in g.ifs):
                    self._comp(gens, i + 1, emit)
        finally:
            self.env = saved

    def _bind(self, target, v):
        if isinstance(target, ast.Name):
            self.env[target.id] = v
        elif isinstance(target, (ast.Tuple, ast.List)):
            vals = list(v)
            if len(vals) != len(target.elts):
                raise NotStatic("unpack")
            for t, x in zip(target.elts, vals):
                self._bind(t, x)
        else:
            raise NotStatic("target")

    def _call(self, node):
        fn = self.eval(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.eval(a.value))
            else:
                args.append(self.eval(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                kwargs.update(self.eval(k.value))
            else:
                kwargs[k.arg] = self.eval(k.value)
        if isinstance(fn, _Q):  # (the imported functions handled here are _STATIC_CALLS: never_static knows them)
            q = fn.q
            if q in ("newt.Config", "newt.tune.autotuner.Config"):
                kw = args[0] if args else kwargs.pop("kwargs", {})
                if not isinstance(kw, dict):
                    raise NotStatic("config kwargs")
                key_nodes = {}
                if node.args and isinstance(node.args[0], ast.Dict):
                    for kn in node.args[0].keys:
                        if isinstance(kn, ast.Constant):
                            key_nodes[kn.value] = kn
                return ConfigLit(dict(kw), kwargs.get("num_warps", args[1] if len(args) > 1 else None),
                                 kwargs.get("num_stages", args[2] if len(args) > 2 else None), node, key_nodes)
            if q in ("newt.next_power_of_2", "newt.runtime.next_power_of_2"):
                n = int(args[0])
                return 1 if n <= 1 else 1 << (n - 1).bit_length()
            if q in ("newt.cdiv", "newt.language.cdiv"):
                return -(-args[0] // args[1])
            if q in ("itertools.product",):
                import itertools
                pools = [list(a) for a in args]
                total = 1
                for p in pools:
                    total *= len(p)
                self._count(total)
                return list(itertools.product(*pools, **kwargs))
            if q in ("newt.language.constexpr",):
                return args[0] if args else None
            if q.startswith("newt.language."):
                from newt import language as nl
                obj = getattr(nl, q.split(".", 2)[2], None)
                if obj is nl.pointer_type:
                    return nl.pointer_type(*args)
            raise NotStatic(q)
        if isinstance(fn, ast.FunctionDef):
            return self._call_simple(fn, args, kwargs)
        if fn in _SAFE_BUILTINS.values():
            if fn is range:
                r = range(*args)
                self._count(len(r))
                return r
            return fn(*args, **kwargs)
        raise NotStatic("call")

    def _call_simple(self, fdef: ast.FunctionDef, args, kwargs):
        """Call a function of the file that only builds values from literals (``staticcall``)."""
        return call_function(self, fdef, args, kwargs)


class JitName:
    """A ``@newt.jit`` function of this file named in a launch (``ACTIVATION=leaky_relu``)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, JitName) and other.name == self.name

    def __hash__(self):
        return hash(("jitname", self.name))


class _Q:
    """A qualified name of something imported (``newt.Config``)."""

    __slots__ = ("q",)

    def __init__(self, q):
        self.q = q

    def __repr__(self):
        return self.q

    def __bool__(self):
        raise NotStatic(f"the truth of {self.q}")  # an imported flag (IS_INTEL): its value is not in the text


def _safe_pow(a, b):
    return a ** b


_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: _safe_pow, ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
    ast.BitOr: lambda a, b: a | b, ast.BitAnd: lambda a, b: a & b, ast.BitXor: lambda a, b: a ^ b,
}
_UNOPS = {ast.USub: lambda a: -a, ast.UAdd: lambda a: +a, ast.Not: lambda a: not a, ast.Invert: lambda a: ~a}
_CMPOPS = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
}


# ---------------------------------------------------------------------------
# module scan
# ---------------------------------------------------------------------------


@dataclass
class KernelDef:
    name: str
    node: ast.FunctionDef
    kind: str  # "jit" or a registered kernel kind (newt.frontend.kinds)
    jit_options: dict = field(default_factory=dict)
    autotune: ast.Call | None = None
    heuristics: ast.Call | None = None
    configs: list = field(default_factory=list)  # ConfigLit
    configs_static: bool = True
    heuristic_keys: list = field(default_factory=list)
    decorator_nodes: list = field(default_factory=list)


NEWT_JIT = {"newt.jit", "newt.runtime.jit", "newt.runtime.jit.jit"}
NEWT_AUTOTUNE = {"newt.autotune", "newt.tune.autotuner.autotune"}
NEWT_HEURISTICS = {"newt.heuristics", "newt.tune.autotuner.heuristics"}


def triton_as_newt(qualname: str) -> str:
    """Triton's modules read as newt's (``triton.language`` -> ``newt.language``), other projects' as the
    registered kinds' own (:func:`~newt.frontend.kinds.register_module_alias`): files analyzed as they are."""
    if qualname == "triton" or qualname.startswith("triton."):
        return "newt" + qualname[len("triton"):]
    for foreign, own in module_aliases().items():  # e.g. Helion's kernels, checked by the kind that reads them
        if qualname == foreign or qualname.startswith(foreign + "."):
            return own + qualname[len(foreign):]
    return qualname


class ModuleScan:
    """Static facts about one module: import aliases, kernels, constants, launches."""

    def __init__(self, src: SourceFile, chunks: list[ParsedChunk]):
        self.src = src
        self.aliases: dict[str, str] = {}
        self.imports: dict[str, str] = {}  # alias -> the module or name as written (triton.language ...)
        self.constants: dict[str, object] = {}
        self.constant_nodes: dict[str, ast.AST] = {}
        #: the value expression of each module-level ``name = ...`` (the last one), static or not
        self.module_values: dict[str, ast.expr] = {}
        self.simple_functions: dict[str, ast.FunctionDef] = {}
        self.plain_functions: dict[str, ast.FunctionDef] = {}
        self.kernels: dict[str, KernelDef] = {}
        self.kernel_order: list[str] = []
        self.assigned: set[str] = set()
        self.launches: list[LaunchSite] = []
        self.other_names: set[str] = set()  # classes and unknown imports
        #: names bound by relative imports (``from .utils import helper``): alias -> ``.utils.helper``
        self.relative_imports: dict[str, str] = {}
        #: module-level names assigned inside an ``if``/``try`` (``f = a if c else b`` counts too): their value
        #: depends on how the module ran, so the analysis knows they exist but not what they are
        self.conditional: set[str] = set()
        #: named tuple classes of the file (``class P(NamedTuple)``, ``P = namedtuple("P", [...])``), made here
        #: from their literal field names: kernels build and read them as the compile path does
        self.namedtuples: dict[str, type] = {}
        self.repaired_lines: set[int] = set()
        #: the module's tree when the whole file parsed as one (others reuse it instead of parsing again)
        self.tree = chunks[0].tree if len(chunks) == 1 and not chunks[0].repaired else None
        bodies = []
        for ch in chunks:
            if ch.tree is None:
                continue
            bodies.extend(ch.tree.body)
            if ch.repaired:
                self.repaired_lines.update(range(ch.first_line, ch.last_line + 1))
        #: the module's statements (of every chunk that parsed): the host code launches are traced through
        self.body = bodies
        self._imports(bodies)
        self._defs(bodies)
        self._launches(bodies)

    # -- imports -----------------------------------------------------------
    def _imports(self, body):
        for node in _walk_module_level(body):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.imports[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.imports[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    if a.name == "*":
                        continue
                    self.imports[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.ImportFrom):
                # a relative import (``from .utils import helper``): another module of the user's package, which a
                # file-at-a-time analysis does not read; its names are known to exist, their values are not
                for a in node.names:
                    if a.name != "*":
                        self.relative_imports[a.asname or a.name] = \
                            f"{'.' * node.level}{node.module + '.' if node.module else ''}{a.name}"
        self.aliases.update((k, triton_as_newt(q)) for k, q in self.imports.items())

    @property
    def spelling(self):
        """How the file spells newt's names (``tl.`` for ``import triton.language as tl``): messages use it."""
        sp = self.__dict__.get("_spelling")
        if sp is None:
            from .spelling import Spelling
            sp = self.__dict__["_spelling"] = Spelling.of_imports(self.imports)
        return sp

    def resolve(self, node) -> str | None:
        return qualname_of(node, self.aliases)

    # -- definitions ---------------------------------------------------------
    def _defs(self, body):
        for top in body:  # (the assignments inside a module-level if/try: not those of the statements themselves)
            if not isinstance(top, (ast.If, ast.Try)):
                continue
            for node in _walk_module_level([top]):
                if node is top:
                    continue
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        for n in fast_walk(t):
                            if isinstance(n, ast.Name):
                                self.assigned.add(n.id)
                                self.conditional.add(n.id)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    # ``if IS_BLACKWELL: @jit def safe_dot ... else: @jit def safe_dot ...``: defined, which one unknown
                    self.assigned.add(node.name)
                    self.conditional.add(node.name)
        # constants first (configs may use them)
        for node in body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in fast_walk(t):
                        if isinstance(n, ast.Name):
                            self.assigned.add(n.id)
                if node.value is None:
                    continue
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    name = targets[0].id
                    nt = namedtuple_call(self.resolve, StaticEval(self).eval, name, node.value)
                    if nt is not None:
                        self.namedtuples[name] = nt
                        self.constants.pop(name, None)
                        continue
                    self.module_values[name] = node.value
                    try:
                        self.constants[name] = StaticEval(self).eval(node.value)
                        self.constant_nodes[name] = node
                    except NotStatic:
                        self.constants.pop(name, None)
                    except Exception:  # any failure means "not static"
                        self.constants.pop(name, None)
            elif isinstance(node, ast.ClassDef):
                nt = namedtuple_class(self.resolve, StaticEval(self).eval, node)
                if nt is not None:
                    self.namedtuples[node.name] = nt
                else:
                    self.other_names.add(node.name)
        for name in self.conditional:  # also assigned under an if/try: its value is not the top-level one
            self.constants.pop(name, None)
            self.constant_nodes.pop(name, None)
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kd = self._kernel_def(node)
                if kd is not None:
                    self.kernels[node.name] = kd
                    self.kernel_order.append(node.name)
                else:
                    self.plain_functions[node.name] = node
                    if isinstance(node, ast.FunctionDef):
                        # callable by StaticEval, which runs only literal-building statements of it
                        self.simple_functions[node.name] = node
        for kd in self.kernels.values():
            self._configs(kd)

    def _kernel_def(self, node) -> KernelDef | None:
        if not node.decorator_list:
            return None  # (most functions of a file: no KernelDef made to be dropped)
        kind = None
        kd = KernelDef(node.name, node, "jit")
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            q = self.resolve(target)
            if q in NEWT_JIT:
                kind = "jit"
                if isinstance(dec, ast.Call):
                    for k in dec.keywords:
                        try:
                            kd.jit_options[k.arg] = StaticEval(self).eval(k.value)
                        except Exception:
                            pass
            elif q in NEWT_AUTOTUNE and isinstance(dec, ast.Call):
                kd.autotune = dec
            elif q in NEWT_HEURISTICS and isinstance(dec, ast.Call):
                kd.heuristics = dec
            elif q is not None and (other := kind_of_decorator(q)) is not None:
                kind = other
            kd.decorator_nodes.append(dec)
        if kind is None:
            return None
        kd.kind = kind
        return kd

    def _configs(self, kd: KernelDef):
        if kd.autotune is None:
            pass
        else:
            cfg_node = None
            if kd.autotune.args:
                cfg_node = kd.autotune.args[0]
            for k in kd.autotune.keywords:
                if k.arg == "configs":
                    cfg_node = k.value
            if cfg_node is not None:
                if (isinstance(cfg_node, ast.Name) and cfg_node.id not in self.constants
                        and cfg_node.id in self.module_values):
                    cfg_node = self.module_values[cfg_node.id]  # configs = get_configs() at module level
                try:
                    val = StaticEval(self, all_paths=True).eval(cfg_node)
                    kd.configs = [c for c in val if isinstance(c, ConfigLit)]
                except Exception:
                    kd.configs_static = False
        if kd.heuristics is not None:
            arg = kd.heuristics.args[0] if kd.heuristics.args else None
            for k in kd.heuristics.keywords:
                if k.arg == "values":
                    arg = k.value
            if isinstance(arg, ast.Dict):
                for key in arg.keys:
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        kd.heuristic_keys.append(key.value)

    # -- launches --------------------------------------------------------------
    def _launches(self, body):
        """Every ``kernel[grid](...)`` of the module (module level, ``__main__``, functions, lambdas), in source
        order.  Only the statements whose lines name a kernel followed by ``[`` are walked (the lines found by one
        search of the text), and the values of the launches' arguments are evaluated when first read
        (``LaunchSite``; a function's single assignments then, read from its statements): linear in the file,
        with a small constant (a 5 MB file of host code spent most of its analysis here).  A statement whose
        text names a kernel once, as ``kernel[``, is not walked at all when that name is the launch of a plain
        statement (``kernel[grid](...)``, ``y = kernel[grid](...)``): the walk could find no other launch
        there."""
        kernel_names = set(self.kernels)
        if not kernel_names:
            return
        text = self.src.text
        hits, at, words = launchscan._kernel_names_in(text, kernel_names)
        if not hits:
            return
        if not getattr(self.src, "_ascii", False):
            words = []  # (a name spelled in other characters may be a kernel's once normalized: walk every hit)
        nlines = len(self.src.lines)
        found: list = []
        facts = _ScanFacts(self, StaticEval, _NO_VALUE)
        left, right = bisect.bisect_left, bisect.bisect_right
        for top in body:
            first = getattr(top, "lineno", 1)
            lo = left(hits, first)
            if lo == len(hits):
                break  # no hit below: neither here nor in any later statement
            last = getattr(top, "end_lineno", first) or first
            hi = right(hits, min(last, nlines), lo)
            if lo == hi:
                continue  # no `kernel[` in this statement: skip the walk
            calls: list = []
            if words and hi - lo == 1:
                decorators = getattr(top, "decorator_list", None)
                start = min([d.lineno for d in decorators] + [first]) if decorators else first
                if right(words, last) - left(words, start) == 1:  # the statement names a kernel once: at the hit
                    direct = launchscan._plain_launch(top, hits[lo], at[lo], kernel_names)
                    if direct is not None:
                        calls.append(direct)
            if not calls:
                for part in launchscan._parts_with_lines(top, hits[lo:hi]):
                    launchscan._launch_calls(part, kernel_names, calls)
                if not calls:
                    continue
            # the values of the arguments are evaluated when first read (``LaunchSite``)
            sites = [LaunchSite(node.func.value.id, node, None, None,
                                {k.arg: k for k in node.keywords if k.arg is not None}, len(node.args))
                     for node in calls]
            _PendingValues(facts, top if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) else None, sites)
            found.extend(sites)
        found.sort(key=_POSITION)
        self.launches.extend(found)

    def _launch_site(self, node, local_env) -> LaunchSite:
        """The launch ``node`` with its values evaluated now, in ``local_env``."""
        args, kwargs = launchscan._launch_values(_ScanFacts(self, StaticEval, _NO_VALUE), node, local_env)
        return LaunchSite(node.func.value.id, node, args, kwargs,
                          {k.arg: k for k in node.keywords if k.arg is not None}, len(node.args))

    def _single_assignments(self, fdef):
        return launchscan._single_assignments(_ScanFacts(self, StaticEval, _NO_VALUE), fdef)


_NOT_STATIC = launchscan.NOT_STATIC
_POSITION = operator.attrgetter("node.lineno", "node.col_offset")  # (a launch's, for sorting)
NOT_STATIC = _NOT_STATIC


def _walk_module_level(body):
    """Module-level statements, descending into if/try blocks (guarded imports)."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            for attr in ("body", "orelse", "finalbody"):
                yield from _walk_module_level(getattr(node, attr, []) or [])
            for h in getattr(node, "handlers", []) or []:
                yield from _walk_module_level(h.body)


# ---------------------------------------------------------------------------
# the source text of a Python function object (the runtime's kernels)
# ---------------------------------------------------------------------------

class NoSourceError(OSError):
    """No source text exists for a function (``exec()`` of a string nobody kept, ``python -``)."""


# function object -> (linecache file name, first line of the function in that text)
_REGISTERED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_COUNTER = itertools.count(1)


def register_source(fn, text: str, filename: str | None = None, start: int | None = None) -> str:
    """Record ``text`` as the source of ``fn`` (a function object) and put it into ``linecache``.

    ``filename`` defaults to a unique ``<newt source #N of NAME>``; ``start`` (1-based line of
    ``fn``'s ``def`` or first decorator in ``text``) defaults to ``fn.__code__.co_firstlineno``.
    Error messages, the interpreter's traces and the CUDA backend's comments then read the text
    through ``linecache`` like any file's.  Returns the file name used.
    """
    if filename is None:
        filename = f"<newt source #{next(_COUNTER)} of {getattr(fn, '__qualname__', fn.__name__)}>"
    lines = text.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[filename] = (len(text), None, lines, filename)
    _REGISTERED[fn] = (filename, start if start is not None else fn.__code__.co_firstlineno)
    return filename


def _contains_code(code, target) -> bool:
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            if (c.co_name == target.co_name and c.co_firstlineno == target.co_firstlineno
                    and c.co_code == target.co_code and c.co_varnames == target.co_varnames):
                return True
            if _contains_code(c, target):
                return True
    return False


def _text_defines(text: str, code) -> bool:
    """Whether compiling ``text`` (as ``code``'s file) yields exactly ``code``'s bytecode."""
    try:
        top = compile(text, code.co_filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return _contains_code(top, code)


def recover_source(fn, frame=None, depth: int = 40) -> bool:
    """Find the text that defined ``fn`` when no file or ``linecache`` entry has it.

    A function made by ``exec(text)`` (or ``compile(text, "<string>", "exec")``) keeps no text,
    but while the string is alive in a caller's frame (the decorator runs inside ``exec``) or on
    the ``python -c`` command line, it can be found: every candidate string is compiled and only
    one whose bytecode for ``fn`` is identical is accepted.  Registers it (``register_source``)
    and returns True when found.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    needle = f"def {code.co_name}"
    seen: set = set()

    def try_text(v) -> bool:
        if type(v) is str and needle in v and id(v) not in seen:
            seen.add(id(v))
            if _text_defines(v, code):
                register_source(fn, v)
                return True
        return False

    f = frame if frame is not None else sys._getframe(1)
    n = 0
    while f is not None and n < depth:
        if f.f_code is not code:
            loc = f.f_locals
            for v in list(loc.values()):
                if try_text(v):
                    return True
        f = f.f_back
        n += 1
    argv = getattr(sys, "orig_argv", [])
    for i, a in enumerate(argv[:-1]):
        if a == "-c" and try_text(argv[i + 1]):
            return True
    return False


def function_source(fn) -> tuple[str, list[str], int]:
    """``(file name, lines of the function, first line number)`` for a function object.

    Reads, in order: text registered with ``register_source`` (recovered ``exec`` strings, sources
    replaced with ``JITFunction._unsafe_update_src``), the file or ``linecache`` entry Python
    knows (``.py`` files, notebook cells, ``exec`` of a string registered in ``linecache``), then a
    search of the live frames and the ``-c`` command line (``recover_source``).  Raises
    ``NoSourceError`` when no text exists.
    """
    hit = _REGISTERED.get(fn)
    if hit is None:
        try:
            lines, start = inspect.getsourcelines(fn)
            filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
            return filename, lines, max(start, 1)
        except (OSError, TypeError) as e:
            if not recover_source(fn, sys._getframe(1)):
                where = getattr(getattr(fn, "__code__", None), "co_filename", "?")
                raise NoSourceError(
                    f"no source text exists for {getattr(fn, '__qualname__', fn)!r} (defined in {where}: {e}); "
                    "newt compiles kernels from their text: define it in a .py file or a notebook cell, or exec() "
                    "a string registered in linecache (linecache.cache[name] = (len(text), None, "
                    "text.splitlines(True), name); exec(compile(text, name, 'exec')))") from None
        hit = _REGISTERED[fn]
    filename, start = hit
    all_lines = linecache.getlines(filename)
    block = inspect.getblock(all_lines[start - 1:])
    return filename, list(block), start
