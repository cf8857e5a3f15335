"""Values and helpers shared by the tracer's parts (``trace*.py``)."""

from __future__ import annotations

import ast
import math
import operator
import types

from ._torch import torch
from .errors import DimensionArgument, HostValueOperand
from .program import (
    ONE,
    BlockDim,
    IfStmt,
    LoopStmt,
    Node,
    RInfo,
    TileInfo,
)

#: the code of shape errors (blocks that do not broadcast, a value stored into a differently shaped index)
SHAPE_CODE = "D006"



class _Dtypes:
    """A tuple of torch dtypes named here, made on first use (torch is imported then)."""

    def __init__(self, *names):
        self.names = names
        self._t = None

    def _tuple(self):
        if self._t is None:
            self._t = tuple(getattr(torch, n) for n in self.names)
        return self._t

    def __contains__(self, x):
        return x in self._tuple()

    def __iter__(self):
        return iter(self._tuple())


_FLOAT_DTYPES = _Dtypes("float16", "bfloat16", "float32", "float64")
_LOW_PRECISION = _Dtypes("float16", "bfloat16")


class BlockSizeInt(int):
    """The value of a ``dt.register_block_size`` (an int that remembers its config slot)."""

    slot: int

    def __new__(cls, value, slot):
        o = int.__new__(cls, value)
        o.slot = slot
        return o


class SpecializedInt(int):
    """An int passed through ``dt.specialize``: always a compile-time constant."""


class TunableValue:
    """Marker base for user tunables (their values are plain Python values)."""


class HostTensor:
    """A tensor of the host code, seen from inside the kernel (a pointer parameter)."""

    __slots__ = ("name", "t", "arg")

    def __init__(self, name, t, arg):
        self.name = name
        self.t = t
        self.arg = arg

    def __repr__(self):
        return f"HostTensor({self.name}: {tuple(self.t.shape)} {self.t.dtype})"


class _MaxResult(tuple):
    """``torch.max(x, dim)``: (values, indices) with ``.values`` / ``.indices``."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


class _Method:
    __slots__ = ("recv", "name")

    def __init__(self, recv, name):
        self.recv = recv
        self.name = name


class _HostMethod:
    __slots__ = ("recv", "name")

    def __init__(self, recv, name):
        self.recv = recv
        self.name = name


class _Return(Exception):
    def __init__(self, value):
        self.value = value


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor",
           ast.LShift: "shl", ast.RShift: "shr", ast.MatMult: "matmul"}
_PYOPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
          "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow, "and": operator.and_,
          "or": operator.or_, "xor": operator.xor, "shl": operator.lshift, "shr": operator.rshift,
          "matmul": operator.matmul, "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
          "eq": operator.eq, "ne": operator.ne}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}

_IDENTITY = {"sum": 0, "max": float("-inf"), "min": float("inf"), "prod": 1}


def _is_pow2(v):
    return isinstance(v, int) and v > 0 and v & (v - 1) == 0


def _is_py_number(v) -> bool:
    return isinstance(v, (int, float, bool)) and not isinstance(v, Node)


def _dummy(v):
    """A stand-in for torch.result_type: 0-dim tensors for scalars, 1-element ones for blocks."""
    if isinstance(v, Node):
        if v.weak:
            if v.dtype == torch.bool:
                return True
            return 1.0 if v.dtype.is_floating_point else 1
        return torch.empty((1,) if v.dims else (), dtype=v.dtype)
    if not _is_py_number(v):
        # a string, None, a dtype, a list... reaching an op's operands: the op's call (Hook) or the statement
        # (Tracer.stmt) becomes the error's place
        raise HostValueOperand(None, use="an operand", got=_describe(v))
    return v


def result_type(*vals) -> torch.dtype:
    if len(vals) == 1:
        v = vals[0]
        return v.dtype if isinstance(v, Node) else torch.tensor(_dummy(v)).dtype
    d = _dummy(vals[0])
    for v in vals[1:]:
        d2 = _dummy(v)
        if not isinstance(d, torch.Tensor) and not isinstance(d2, torch.Tensor):
            # two Python numbers: Python promotion
            d = d + d2 if not isinstance(d, bool) or not isinstance(d2, bool) else d
            continue
        rt = torch.result_type(d, d2)
        is_dim = (isinstance(d, torch.Tensor) and d.dim() > 0) or (isinstance(d2, torch.Tensor) and d2.dim() > 0)
        d = torch.empty((1,) if is_dim else (), dtype=rt)
    if isinstance(d, torch.Tensor):
        return d.dtype
    return torch.tensor(d).dtype if not isinstance(d, float) else torch.get_default_dtype()


def _all_weak(*vals) -> bool:
    return all((isinstance(v, Node) and v.weak) or _is_py_number(v) for v in vals)



# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _cse_key(n: Node):
    def conv(v):
        if isinstance(v, Node):
            return ("n", v.id)
        if isinstance(v, (TileInfo, RInfo)):
            return ("d", type(v).__name__, v.id)
        if isinstance(v, (list, tuple)):
            return tuple(conv(x) for x in v)
        if isinstance(v, float) and v != v:
            return ("nan",)
        if isinstance(v, (bool, int, float, str, type(None))):
            return (type(v).__name__, v)
        if isinstance(v, torch.dtype):
            return ("dt", str(v))
        raise TypeError
    try:
        return (n.op, conv(n.args), tuple(sorted((k, conv(v)) for k, v in n.attrs.items())),
                tuple(("1",) if d is ONE else conv(d) for d in n.dims), str(n.dtype), n.weak)
    except TypeError:
        return None


def _all_nodes(block):
    for s in block.stmts:
        if isinstance(s, Node):
            yield s, block
        elif isinstance(s, LoopStmt):
            yield from _all_nodes(s.body)
            for c in s.carried:
                if isinstance(c.result, Node) and c.result.block is None:
                    pass
        elif isinstance(s, IfStmt):
            yield from _all_nodes(s.then_block)
            yield from _all_nodes(s.else_block)


def _all_structured(block):
    for s in block.stmts:
        if isinstance(s, LoopStmt):
            yield s, block
            yield from _all_structured(s.body)
        elif isinstance(s, IfStmt):
            yield s, block
            yield from _all_structured(s.then_block)
            yield from _all_structured(s.else_block)


def all_nodes(block):
    return _all_nodes(block)


def _is_int_dtype(dt) -> bool:
    return dt is not None and not dt.is_floating_point and not dt.is_complex and dt != torch.bool


def _dims(v):
    return v.dims if isinstance(v, Node) else ()


def _broadcast_dims(a, b):
    a, b = tuple(a), tuple(b)
    n = max(len(a), len(b))
    a = (ONE,) * (n - len(a)) + a
    b = (ONE,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x is y:
            out.append(x)
        elif isinstance(x, BlockDim) and x.same_as(y):
            out.append(x)
        elif isinstance(y, BlockDim) and y.same_as(x):
            out.append(y)
        elif x is ONE:
            out.append(y)
        elif y is ONE:
            out.append(x)
        elif _size_one(x):
            out.append(y)
        elif _size_one(y):
            out.append(x)
        else:
            return None
    return tuple(out)


def _size_one(d) -> bool:
    """A whole dimension of one element (``r[tile, :]`` of an ``[M, 1]`` tensor) broadcasts like torch's size-1
    dims: a block of one column in the generated code.  It stays one column (never padded for a matmul, never
    looped): the flag makes a later matmul on it a D004 rather than a [B, 16] block broadcast against [B, N]."""
    if isinstance(d, RInfo) and d.size == 1 and not d.used_in_dot:
        d.broadcast_as_one = True
        d.not_rollable("broadcast against a larger dimension")
        return True
    return False


def _dims_text(dims) -> str:
    return "[" + ", ".join(d.label for d in dims) + "]"


def _norm_axis(ax, nd, tracer, src):
    if not isinstance(ax, int):
        raise DimensionArgument(src, op="a dimension", problem=f"must be an int, got {_describe(ax)}")
    if not -nd <= ax < max(nd, 1):
        raise DimensionArgument(src, op=f"dimension {ax}", problem=f"out of range for a block of rank {nd}")
    return ax % nd if nd else 0


def _fold_pad(op, a, b):
    pa = a.pad if isinstance(a, Node) else (a if _is_py_number(a) else None)
    pb = b.pad if isinstance(b, Node) else (b if _is_py_number(b) else None)
    # only when both operands have the same masked dims (or one is a constant)
    if isinstance(a, Node) and isinstance(b, Node) and _masked(a) != _masked(b):
        return None
    if pa is None or pb is None:
        if op == "mul" and (pa == 0 or pb == 0) and False:
            return 0
        return None
    try:
        if op in ("minimum", "maximum"):
            return min(pa, pb) if op == "minimum" else max(pa, pb)
        if op == "truediv":
            return pa / pb if pb != 0 else None
        if op in ("floordiv", "mod") and pb == 0:
            return None
        return _PYOPS[op](pa, pb)
    except Exception:
        return None


def _masked(n: Node):
    return tuple(d.id for d in n.dims if isinstance(d, (TileInfo, RInfo)))


def _fold_unary(fn, p):
    try:
        if fn == "neg":
            return -p
        if fn == "abs":
            return abs(p)
        if fn == "relu":
            return max(p, 0)
        if fn == "exp":
            return math.exp(p)
        if fn == "square":
            return p * p
        if fn in ("sqrt",) and p >= 0:
            return math.sqrt(p)
        if fn == "sigmoid":
            return 1 / (1 + math.exp(-p))
        if fn == "silu":
            return p / (1 + math.exp(-p))
        if fn in ("tanh", "sin", "erf", "floor", "ceil"):
            return getattr(math, fn)(p)
    except (OverflowError, ValueError):
        return None
    return None


def _describe(v) -> str:
    if isinstance(v, Node):
        return f"a {'scalar' if not v.dims else 'block'} of {str(v.dtype).replace('torch.', '')}"
    if isinstance(v, TileInfo):
        return f"tile {v.name!r}"
    if isinstance(v, HostTensor):
        return f"the tensor {v.name}"
    if isinstance(v, types.ModuleType):
        return f"module {v.__name__}"
    return f"{type(v).__name__} {v!r}"[:80]


def _index_text(it) -> str:
    if it is None:
        return "None"
    if it is Ellipsis:
        return "..."
    if isinstance(it, slice):
        return ":"
    if isinstance(it, TileInfo):
        return it.name
    if isinstance(it, Node):
        return "<value>"
    return repr(it)


def _guard_value(v):
    if isinstance(v, types.FunctionType):
        return ("function", v.__code__)
    if isinstance(v, torch.dtype):
        return ("dtype", str(v))
    if isinstance(v, (list, tuple)):
        return tuple(_guard_value(x) for x in v)
    if isinstance(v, torch.Size):
        return tuple(v)
    if type(v).__name__ == "SpecializedInt":  # dt.specialize(...): traced as the int it is (else every call retraced)
        return ("int", int(v))
    return (type(v).__name__, v)


def _is_library(fn) -> bool:
    mod = getattr(fn, "__module__", "") or ""
    return mod.split(".")[0] in ("torch", "deuteron", "newt", "math", "builtins", "numpy", "triton", "functools")


def _per_tile_source(v: Node):
    """A value among ``v`` and what it is computed from that has a tile dimension (so ``v``, a scalar,
    reduced a tile away: it differs per tile), or None."""
    seen = set()
    stack = [v]
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if any(isinstance(d, TileInfo) and d.kind == "tile" for d in n.dims):
            return n
        stack.extend(n.operands())
    return None
