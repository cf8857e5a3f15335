"""Abstract values the front end computes with while it reads a kernel.

* ``Const``   a compile-time Python value (int, float, bool, str, None, dtype, a module ...); a number
  assigned to a name carries the dtype Triton gives it there (``Const.typed``, see ``typedconst.py``)
* ``Sym``     a constexpr whose value is unknown (generic check): ``BLOCK``, ``BLOCK*2``
* ``TensorV`` a run-time value: an IR value (scalar or block) with its type
* ``TupleV``  a tuple of abstract values
* ``JitRef``  a ``@newt.jit`` function (or a language function written in newt)
* ``PyFunc``  a plain Python function (calling it in a kernel is an error)
* ``Opaque``  unknown (an error was already reported, or nothing can be known);
  every operation on it yields ``Opaque`` without new diagnostics.
"""

from __future__ import annotations

import ast
import linecache
import textwrap
import types as pytypes

from newt.ir.types import SymDim, scalar_of, shape_of, type_str
from newt.language import core as lc

from .source import SourceFile


class AV:
    __slots__ = ()


class Const(AV):
    __slots__ = ("value", "origin", "typed")

    def __init__(self, value, origin: str | None = None, typed=None):
        self.value = value
        self.origin = origin  # name of the constexpr parameter it came from
        # the dtype of the 0-d tensor Triton makes of a number assigned to a name inside a kernel
        # (``MASK = 1 << 31`` is a uint32 tensor): set by ``typedconst.assigned``; None for a literal
        self.typed = typed

    def __repr__(self):
        return f"Const({self.value!r}: {self.typed!r})" if self.typed is not None else f"Const({self.value!r})"


class Sym(AV):
    __slots__ = ("expr", "is_bool")

    def __init__(self, expr: str, is_bool: bool = False):
        self.expr = expr
        self.is_bool = is_bool

    def __repr__(self):
        return f"Sym({self.expr})"

    def dim(self) -> SymDim:
        return SymDim(self.expr)


class TensorV(AV):
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    @property
    def type(self):
        return self.v.type

    @property
    def dtype(self):
        return scalar_of(self.v.type)

    @property
    def shape(self):
        return shape_of(self.v.type)

    def __repr__(self):
        return f"TensorV({type_str(self.v.type)})"


class TupleV(AV):
    """A tuple; a named tuple also has its ``fields`` (and its Python class ``ntype`` when one is known)."""

    __slots__ = ("items", "fields", "ntype")

    def __init__(self, items, fields=None, ntype=None):
        self.items = list(items)
        self.fields = tuple(fields) if fields is not None else (tuple(ntype._fields) if ntype is not None else None)
        self.ntype = ntype

    def field(self, name: str):
        """The element named ``name``, or None."""
        if self.fields and name in self.fields:
            return self.items[self.fields.index(name)]
        return None

    def __repr__(self):
        return f"TupleV({self.items})"


def is_namedtuple_class(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, tuple) and isinstance(getattr(obj, "_fields", None), tuple)


class DescV(AV):
    """A tensor descriptor (``nl.make_tensor_descriptor``): a base pointer, the tensor's shape and strides
    (scalars) and the constexpr block shape its ``load``/``store`` move."""

    __slots__ = ("base", "shape", "strides", "block_shape", "padding")

    def __init__(self, base, shape, strides, block_shape, padding="zero"):
        self.base = base
        self.shape = list(shape)
        self.strides = list(strides)
        self.block_shape = tuple(block_shape)
        self.padding = padding

    @property
    def dtype(self):
        return self.base.dtype.element_ty

    def __repr__(self):
        return f"DescV({self.dtype!r}, block {list(self.block_shape)})"


class Opaque(AV):
    __slots__ = ("reason",)

    def __init__(self, reason: str = ""):
        self.reason = reason

    def __repr__(self):
        return "Opaque"


class PyFunc(AV):
    __slots__ = ("name", "obj", "trusted")

    def __init__(self, name: str, obj=None, trusted: bool = False):
        self.name = name
        self.obj = obj
        self.trusted = trusted  # our own language helpers may run at compile time


class JitSource:
    """The source of a jit function: its AST, the file it lives in and how to resolve its globals."""

    def __init__(self, name: str, node: ast.FunctionDef | ast.AsyncFunctionDef, src: SourceFile, env, lib: bool = False,
                 col_shift: int = 0, obj=None):
        self.name = name
        self.node = node
        self.src = src
        self.env = env
        self.lib = lib
        self.col_shift = col_shift
        self.obj = obj  # the Python function, when known (runtime)
        self._params = None

    @property
    def params(self) -> list[ast.arg]:
        a = self.node.args
        return list(a.posonlyargs) + list(a.args)

    def __repr__(self):
        return f"<jit {self.name}>"


class JitRef(AV):
    __slots__ = ("fn",)

    def __init__(self, fn: JitSource):
        self.fn = fn


# ---------------------------------------------------------------------------
# global environments
# ---------------------------------------------------------------------------


class GlobalEnv:
    def lookup(self, name: str) -> AV | None:  # pragma: no cover - interface
        raise NotImplementedError


_LIB_CACHE: dict = {}


def jit_source_from_function(fn, lib: bool = False) -> JitSource:
    """Build a ``JitSource`` from a Python function object (reads its file, runs nothing)."""
    key = (fn, lib)
    hit = _LIB_CACHE.get(key)
    if hit is not None:
        return hit
    from .source import function_source
    filename, lines, start = function_source(fn)
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    shift = 0
    if dedented != text:
        first = next((ln for ln in lines if ln.strip()), "")
        shift = len(first) - len(first.lstrip())
    tree = ast.parse("\n" * (start - 1) + dedented)
    node = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    full = "".join(linecache.getlines(filename)) if filename else text
    src = SourceFile(full or text, filename or "<unknown>")
    js = JitSource(fn.__name__, node, src, RuntimeEnv(fn.__globals__, lib=lib), lib=lib, col_shift=shift, obj=fn)
    _LIB_CACHE[key] = js
    return js


def from_python(obj, lib: bool = False) -> AV:
    """Turn a Python object found in a kernel's globals into an abstract value."""
    if isinstance(obj, lc.constexpr):
        return from_python(obj.value, lib)
    if getattr(obj, "__newt_jit__", False):
        return JitRef(obj.jit_source())
    if getattr(obj, "__newt_inline__", False):
        return JitRef(jit_source_from_function(obj, lib=True))
    if getattr(obj, "__newt_constexpr_function__", False):  # newt.constexpr_function: runs at compile time
        return PyFunc(getattr(obj, "__name__", "constexpr_function"), obj, trusted=True)
    if isinstance(obj, (bool, int, float, str, type(None), lc.dtype, lc.PropagateNan)):
        return Const(obj)
    if isinstance(obj, tuple):
        return TupleV([from_python(x, lib) for x in obj], ntype=type(obj) if is_namedtuple_class(type(obj)) else None)
    if isinstance(obj, pytypes.ModuleType):
        # any module: its attributes resolve at compile time (``fake.language.store`` where
        # ``fake.language = nl``), and what a module lacks is an error, never silently nothing
        return Const(obj)
    if getattr(obj, "__newt_builtin__", None):
        return Const(obj)
    if obj in (lc.constexpr, lc.pointer_type, lc.tensor, lc.dtype, lc.block_type, lc.PropagateNan,
               lc.tensor_descriptor, lc.tensor_descriptor_base):
        return Const(obj)
    if isinstance(obj, (pytypes.FunctionType, pytypes.BuiltinFunctionType)):
        mod = getattr(obj, "__module__", "") or ""
        # newt's own helpers run at compile time (``nl.*`` functions, ``newt.cdiv`` / ``newt.next_power_of_2``)
        trusted = mod.startswith("newt.language") or mod == "newt"
        return PyFunc(getattr(obj, "__name__", "function"), obj, trusted=trusted)
    if isinstance(obj, type) and getattr(obj, "__newt_tuple__", False):  # nl.tuple
        return Const(obj)
    if isinstance(obj, type):
        return PyFunc(obj.__name__, obj)
    return Opaque(type(obj).__name__)


class RuntimeEnv(GlobalEnv):
    """Globals of a real Python function (the compile path, and our language modules)."""

    def __init__(self, globals_dict: dict, lib: bool = False):
        self.g = globals_dict
        self.lib = lib

    def lookup(self, name):
        if name in self.g:
            return from_python(self.g[name], self.lib)
        return None


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


class Poison(Exception):
    """Raised when an operation meets an Opaque operand: the result is Opaque, silently."""
