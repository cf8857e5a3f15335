"""Elementwise ops: unary math, binary arithmetic and comparisons with torch's promotion, ``where``, casts.

Node kinds ``binary``, ``unary``, ``cast``, ``where``; the tensor semantics every other family builds on
(``binop``, ``unary``, ``cast``, ``where``: each builds ``Node``s with torch's dims and dtype rules).
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..codegen_expr import _BINOP_SYM, _atom, _dt, binary, call, invert, neg
from ..errors import (
    Broadcast,
    HostCall,
    OperandDtype,
    OperandKind,
    TileArithmetic,
    TileAsNumber,
    UnknownOption,
    UnsupportedExpression,
    WholeTensor,
)
from ..optable import ELEMENTWISE, FOLDS, OPS, PURE, TILE_ATTR, has, node, op
from ..program import Node, TileInfo
from ..trace_common import (
    _LOW_PRECISION,
    _PYOPS,
    HostTensor,
    _all_weak,
    _broadcast_dims,
    _describe,
    _dims,
    _dims_text,
    _fold_pad,
    _fold_unary,
    _is_py_number,
    result_type,
)

#: elementwise unary math: name -> (its newt expression of the operand's, floating point only?).  Each is an op
#: (``torch.<name>``, ``Tensor.<name>``, ``F.<name>`` where torch has them) of the ``unary`` node kind.
UNARY_MATH = {
    "exp": (lambda x: call("nl.exp", x), True),
    "exp2": (lambda x: call("nl.exp2", x), True),
    "log": (lambda x: call("nl.log", x), True),
    "log2": (lambda x: call("nl.log2", x), True),
    "sqrt": (lambda x: call("nl.sqrt_rn", x), True),
    "rsqrt": (lambda x: call("nl.rsqrt", x), True),
    "sin": (lambda x: call("nl.sin", x), True),
    "cos": (lambda x: call("nl.cos", x), True),
    "tanh": (lambda x: call("nl.tanh", x), True),
    "erf": (lambda x: call("nl.erf", x), True),
    "floor": (lambda x: call("nl.floor", x), False),
    "ceil": (lambda x: call("nl.ceil", x), False),
    "abs": (lambda x: call("nl.abs", x), False),
    "neg": (neg, False),
    "sigmoid": (lambda x: call("nl.sigmoid", x), True),
    "relu": (lambda x: call("nl.maximum", x, "0"), False),
    "reciprocal": (lambda x: binary("1.0", "/", x), True),
    "square": (lambda x: binary(x, "*", x), False),
    "silu": (lambda x: binary(x, "*", call("nl.sigmoid", x)), True),
    "log1p": (lambda x: call("nl.log", binary("1.0", "+", x)), True),
    "expm1": (lambda x: binary(call("nl.exp", _atom(x)), "-", "1.0"), True),
    "logical_not": (lambda x: binary(x, "==", "0"), False),
}
#: unary functions of the ``unary`` node kind
UNARY = tuple(UNARY_MATH)
#: unary ops that only make sense on floating point (ints are converted like torch does)
FLOAT_UNARY = {n for n, (_, fl) in UNARY_MATH.items() if fl} | {"gelu"}
#: the ``unary`` node's renderers: the math above and ``~x``
UNARY_RENDER = {**{n: r for n, (r, _) in UNARY_MATH.items()}, "invert": invert}

#: the argument of newt's minimum / maximum that makes a NaN operand give NaN (PyTorch's semantics)
NAN_ALL = ", propagate_nan=nl.PropagateNan.ALL"

#: operators where a tile operand stands for its indices (``tile + start``)
_TILE_ARITH = ("add", "sub", "mul", "floordiv", "mod")


# ---------------------------------------------------------------------------- node kinds


def render_binary(g, n) -> str:
    a, b = n.args
    o = n.attrs["op"]
    rank = len(g.rd(n.dims))
    if o in ("minimum", "maximum"):  # floats: NaN propagates, as torch.maximum / clamp / relu do (issue 22)
        nan = NAN_ALL if n.dtype.is_floating_point else ""
        return f"nl.{o}({g.aligned(a, rank, n.dims)}, {g.aligned(b, rank, n.dims)}{nan})"
    if o == "pow":
        return f"nl.pow({g.aligned(a, rank, n.dims)}, {g.aligned(b, rank, n.dims)})"
    return binary(g.aligned(a, rank, n.dims), _BINOP_SYM[o], g.aligned(b, rank, n.dims))


def render_unary(g, n) -> str:
    (a,) = n.args
    if n.attrs["fn"] == "relu" and n.dtype.is_floating_point:  # torch.relu(nan) is nan
        return call("nl.maximum", g.expr(a), "0" + NAN_ALL)
    return UNARY_RENDER[n.attrs["fn"]](g.expr(a))


def render_cast(g, n) -> str:
    (a,) = n.args
    if isinstance(a, Node) and g.is_constexpr(a):
        return f"nl.full((), {g.expr(a)}, {_dt(n.dtype)})"  # a compile-time constant
    return f"{_atom(g.expr(a))}.to({_dt(n.dtype)})"


def render_where(g, n) -> str:
    c, a, b = n.args
    rank = len(g.rd(n.dims))
    parts = [g.aligned(x, rank, n.dims) for x in (c, a, b)]
    return f"nl.where({', '.join(parts)})"


node("binary", PURE, ELEMENTWISE, FOLDS, render=render_binary, family="elementwise",
     doc="a binary operator or comparison (attrs: op)")
node("unary", PURE, ELEMENTWISE, FOLDS, render=render_unary, family="elementwise",
     doc="unary math or ~x (attrs: fn)")
node("cast", PURE, ELEMENTWISE, render=render_cast, family="elementwise", doc="a dtype conversion")
node("where", PURE, ELEMENTWISE, render=render_where, family="elementwise", doc="torch.where(c, a, b)")


# ---------------------------------------------------------------------------- tensor semantics

def binop(tr, op, a, b, src, trunc: bool = False):
    """``a <op> b`` with torch's broadcasting and promotion (``trunc``: integer ``//`` / ``%`` truncating like C,
    as ``torch.fmod`` does, where torch's operators floor)."""
    if op is None:
        raise UnsupportedExpression(src, what="this operator")
    if isinstance(a, TileInfo) or isinstance(b, TileInfo):
        # a tile in arithmetic is its indices (Helion's `k[tile_n + start, :]`): a block along the tile
        if op in _TILE_ARITH and not (isinstance(a, TileInfo) and isinstance(b, TileInfo)):
            a = tr.tile_attr(a, "index", src) if isinstance(a, TileInfo) else a
            b = tr.tile_attr(b, "index", src) if isinstance(b, TileInfo) else b
        else:
            t = a if isinstance(a, TileInfo) else b
            what = "two tiles" if isinstance(a, TileInfo) and isinstance(b, TileInfo) else f"tile {t.name!r}"
            raise TileArithmetic(src, what=f"{what} with {op!r}",
                             hint="a tile in + - * // % stands for tile.index; otherwise use tile.index "
                                  "(a tensor) or tile.begin / tile.end")
    for v in (a, b):
        if isinstance(v, HostTensor):
            raise WholeTensor(src, name=v.name, what="")
    if not isinstance(a, Node) and not isinstance(b, Node):
        try:
            return _PYOPS[op](a, b)
        except Exception as ex:
            raise HostCall(src, problem=f"{op} of host values failed: {type(ex).__name__}: {ex}") from None
    if op == "matmul":
        return OPS["matmul"].trace.fn(tr, src, "matmul", a, b)
    if op in ("minimum", "maximum"):
        return minmax(tr, op, a, b, src)
    for v in (a, b):
        if not isinstance(v, (Node, bool, int, float)):
            raise OperandKind(src, op=f"{op} with a value of the kernel", got=_describe(v))
    dims = _broadcast_dims(_dims(a), _dims(b))
    if dims is None:
        raise Broadcast(src, shapes=f"{_dims_text(_dims(a))} and {_dims_text(_dims(b))}")
    weak = _all_weak(a, b)
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        ct = result_type(a, b)
        a2, b2 = coerce(tr, a, ct), coerce(tr, b, ct)
        n = Node("binary", [a2, b2], dims=dims, dtype=torch.bool, attrs={"op": op}, weak=weak)
        n.pad = _fold_pad(op, a2, b2)
        return tr.emit(n)
    if op in ("and", "or", "xor"):
        rt = result_type(a, b)
        if rt.is_floating_point:
            raise OperandDtype(src, op="bitwise operators", dtype="floating-point", why="")
        a2, b2 = coerce(tr, a, rt), coerce(tr, b, rt)
        n = Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": op}, weak=weak)
        return tr.emit(n)
    if op in ("shl", "shr"):
        rt = result_type(a, b)
        if rt.is_floating_point:
            raise OperandDtype(src, op="shifts", dtype="floating-point", why="")
        n = Node("binary", [coerce(tr, a, rt), coerce(tr, b, rt)], dims=dims, dtype=rt, attrs={"op": op},
                 weak=weak)
        return tr.emit(n)
    rt = result_type(a, b)
    if rt == torch.bool and op in ("add", "sub"):  # torch: bool + bool is a logical or, bool - bool an error
        if op == "sub":
            raise OperandDtype(src, op="-", dtype="bool", why=" (torch refuses to subtract bool tensors)",
                               hint="use ^ or logical_xor, or convert first (.to(torch.int32))")
        return binop(tr, "or", a, b, src)
    if weak and isinstance(a, Node) and isinstance(b, Node) or weak and (isinstance(a, Node) or
                                                                     isinstance(b, Node)):
        # scalars on both sides (tile.begin, parameters, literals): newt's scalar promotion, no casts
        nodes = [v for v in (a, b) if isinstance(v, Node)]
        floating = any(v.dtype.is_floating_point for v in nodes) or any(isinstance(v, float) for v in (a, b))
        wide = any(v.dtype == torch.int64 for v in nodes)
        rt = torch.float32 if floating or op == "truediv" else (torch.int64 if wide else torch.int32)
        if op == "pow":
            rt = torch.float32
    elif op == "truediv" and not rt.is_floating_point:
        rt = torch.get_default_dtype()
    if op == "pow":
        if isinstance(b, (int, float)) and not isinstance(b, bool) and float(b) == 2.0 and isinstance(a, Node):
            a2 = coerce(tr, a, rt)
            return tr.emit(Node("binary", [a2, a2], dims=dims, dtype=rt, attrs={"op": "mul"}, weak=weak))
        if isinstance(b, (int, float)) and float(b) == 0.5 and isinstance(a, Node):
            return unary(tr, "sqrt", coerce(tr, a, rt if rt.is_floating_point else torch.float32), src)
        if not rt.is_floating_point:
            raise OperandDtype(src, op="**", dtype="integer", why=" inside the kernel", hint="use a float exponent")
    a2, b2 = coerce(tr, a, rt), coerce(tr, b, rt)
    if op in ("floordiv", "mod") and not trunc and not rt.is_floating_point and not (_nonneg(a2) and _nonneg(b2)):
        return _floor_divmod(tr, op, a2, b2, dims, rt, src)
    if op in ("floordiv", "mod") and rt.is_floating_point:
        q = unary(tr, "floor", tr.emit(Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": "truediv"},
                                               weak=weak)), src)
        if op == "floordiv":
            return q
        prod = tr.emit(Node("binary", [q, b2], dims=dims, dtype=rt, attrs={"op": "mul"}, weak=weak))
        return tr.emit(Node("binary", [a2, prod], dims=dims, dtype=rt, attrs={"op": "sub"}, weak=weak))
    n = Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": op}, weak=weak)
    n.pad = _fold_pad(op, a2, b2)
    if isinstance(a2, Node) and isinstance(b2, Node) and a2.host_value is not None and \
            b2.host_value is not None and op in ("add", "sub", "mul", "floordiv", "mod"):
        try:
            n.host_value = _PYOPS[op](a2.host_value, b2.host_value)
            n.guards = tuple(a2.guards) + tuple(b2.guards)
        except Exception:
            pass
    elif isinstance(a2, Node) and a2.host_value is not None and _is_py_number(b2) and \
            op in ("add", "sub", "mul", "floordiv", "mod"):
        try:
            n.host_value = _PYOPS[op](a2.host_value, b2)
            n.guards = tuple(a2.guards)
        except Exception:
            pass
    elif isinstance(b2, Node) and b2.host_value is not None and _is_py_number(a2) and \
            op in ("add", "sub", "mul", "floordiv", "mod"):
        try:
            n.host_value = _PYOPS[op](a2, b2.host_value)
            n.guards = tuple(b2.guards)
        except Exception:
            pass
    if n.host_value is not None and n.dims == ():
        return n  # a run-time scalar computed from parameters: rendered inline
    return tr.emit(n)


def _nonneg(v) -> bool:
    """Is ``v`` known to be >= 0 (a tile's indices, begin, end, block size; a tensor's size; a non-negative
    constant; sums, products and quotients of those)?  There integer ``//`` and ``%`` truncate and floor alike."""
    if isinstance(v, (bool, int)):
        return v >= 0
    if not isinstance(v, Node):
        return False
    if v.op == "const":
        return isinstance(v.attrs["value"], (bool, int)) and v.attrs["value"] >= 0
    if v.op == "param":
        return bool(v.attrs.get("nonneg"))  # a tensor's size or stride (static_shapes=False)
    if has(v, TILE_ATTR) or v.op == "grid_index" or (v.op == "arange" and v.attrs["start"] >= 0):
        return True
    if v.op == "binary" and v.attrs["op"] in ("add", "mul", "floordiv", "mod", "and", "shr"):
        return all(_nonneg(x) for x in v.args)
    if v.op == "cast" and not v.dtype.is_floating_point and v.dtype != torch.bool:
        return all(_nonneg(x) for x in v.args) and v.args[0].dtype.itemsize <= v.dtype.itemsize
    return False


def _floor_divmod(tr, op, a, b, dims, rt, src):
    """Integer ``a // b`` / ``a % b`` with PyTorch's (Python's) floor semantics from newt's, which truncate like C:
    where the remainder is not 0 and its sign differs from the divisor's, the quotient is one less and the
    remainder one divisor more (issue 22: the kernel and ``kernel.ref`` agree on negative operands)."""
    q = tr.emit(Node("binary", [a, b], dims=dims, dtype=rt, attrs={"op": "floordiv"}))
    r = tr.emit(Node("binary", [a, b], dims=dims, dtype=rt, attrs={"op": "mod"}))
    if isinstance(b, int):  # the divisor's sign is known: the remainder's sign alone decides
        fix = binop(tr, "lt", r, 0, src) if b > 0 else binop(tr, "gt", r, 0, src)
    else:
        fix = binop(tr, "and", binop(tr, "ne", r, 0, src),
                    binop(tr, "ne", binop(tr, "lt", r, 0, src), binop(tr, "lt", b, 0, src), src), src)
    if op == "floordiv":
        return binop(tr, "sub", q, cast(tr, fix, rt), src)
    return where(tr, fix, binop(tr, "add", r, b, src), r, src)


def coerce(tr, v, dtype):
    """Cast a node operand to ``dtype`` (Python numbers stay weak literals)."""
    if isinstance(v, Node):
        if v.dtype == dtype:
            return v
        if v.weak and dtype in (torch.int32, torch.int64) and v.dtype in (torch.int32, torch.int64) and \
                not v.dims:
            return v  # newt widens int scalars by itself
        if v.weak and v.op == "const":
            return v.attrs["value"] if not dtype.is_floating_point else float(v.attrs["value"])
        return cast(tr, v, dtype)
    if isinstance(v, bool) and dtype != torch.bool:
        return int(v)
    if dtype.is_floating_point and isinstance(v, int):
        return float(v)
    return v


def cast(tr, v, dtype) -> Node:
    if not isinstance(v, Node):
        return tr.const_node(v, dtype)
    if v.dtype == dtype:
        return v
    n = Node("cast", [v], dims=v.dims, dtype=dtype, weak=False)
    if v.pad is not None:
        n.pad = v.pad
    if v.host_value is not None:
        n.host_value = v.host_value
        n.guards = v.guards
    if v.op == "const":
        return tr.const_node(v.attrs["value"], dtype)
    return tr.emit(n)


def minmax(tr, op, a, b, src):
    dims = _broadcast_dims(_dims(a), _dims(b))
    if dims is None:
        raise Broadcast(src, shapes=f"{_dims_text(_dims(a))} and {_dims_text(_dims(b))}")
    rt = result_type(a, b)
    a2, b2 = coerce(tr, a, rt), coerce(tr, b, rt)
    n = Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": op}, weak=_all_weak(a, b))
    n.pad = _fold_pad(op, a2, b2)
    return tr.emit(n)


def unary(tr, fn, v, src, **kw):
    if isinstance(v, TileInfo):
        raise TileAsNumber(src, what="a value", hint="use tile.index")
    if not isinstance(v, Node):
        if isinstance(v, (int, float)):
            v = tr.const_node(v)
        else:
            raise OperandKind(src, op=f"{fn}()", got=_describe(v))
    dtype = v.dtype
    if fn in ("floor", "ceil") and not dtype.is_floating_point:
        return v  # torch: identity on integers
    if fn in FLOAT_UNARY and not dtype.is_floating_point:
        v = cast(tr, v, torch.get_default_dtype())
        dtype = v.dtype
    compute = dtype
    if dtype in _LOW_PRECISION and fn in FLOAT_UNARY:
        compute = torch.float32
        v = cast(tr, v, compute)
    if fn == "gelu":
        out = _gelu(tr, v, kw.get("approximate", "none"), src)
    elif fn == "softplus":
        beta = kw.get("beta", 1.0)
        threshold = kw.get("threshold", 20.0)
        bx = binop(tr, "mul", v, beta, src) if beta != 1.0 else v
        soft = binop(tr, "truediv", unary(tr, "log1p", unary(tr, "exp", bx, src), src), beta, src)
        out = where(tr, binop(tr, "gt", bx, threshold, src), v, soft, src)
    elif fn == "elu":
        alpha = kw.get("alpha", 1.0)
        out = where(tr, binop(tr, "gt", v, 0, src), v,
                         binop(tr, "mul", alpha, unary(tr, "expm1", v, src), src), src)
    elif fn == "sign":
        pos = cast(tr, binop(tr, "gt", v, 0, src), v.dtype)
        neg = cast(tr, binop(tr, "lt", v, 0, src), v.dtype)
        out = binop(tr, "sub", pos, neg, src)
    elif fn == "isnan":
        out = binop(tr, "ne", v, v, src)
    elif fn == "isinf":
        out = binop(tr, "eq", unary(tr, "abs", v, src), float("inf"), src)
    else:
        if fn not in UNARY:
            raise UnsupportedExpression(src, what=fn)
        n = Node("unary", [v], dims=v.dims, dtype=torch.bool if fn == "logical_not" else compute,
                 attrs={"fn": fn}, weak=v.weak)
        if v.pad is not None and not isinstance(v.pad, bool):
            n.pad = _fold_unary(fn, v.pad)
        out = tr.emit(n)
    if compute != dtype and isinstance(out, Node) and out.dtype == compute:
        out = cast(tr, out, dtype)
    return out


def _gelu(tr, v, approximate, src):
    if approximate == "tanh":
        x3 = binop(tr, "mul", binop(tr, "mul", v, v, src), v, src)
        inner = binop(tr, "mul", 0.7978845608028654, binop(tr, "add", v, binop(tr, "mul", 0.044715, x3, src),
                                                                 src), src)
        return binop(tr, "mul", binop(tr, "mul", 0.5, v, src),
                          binop(tr, "add", 1.0, unary(tr, "tanh", inner, src), src), src)
    return binop(tr, "mul", binop(tr, "mul", 0.5, v, src),
                      binop(tr, "add", 1.0, unary(tr, "erf", binop(tr, "mul", v, 0.7071067811865476, src),
                                                        src), src), src)


def where(tr, c, a, b, src):
    if isinstance(c, (bool, int)) and not isinstance(c, Node):
        return a if c else b
    c = to_bool(tr, c, src)
    dims = _broadcast_dims(_dims(c), _broadcast_dims(_dims(a), _dims(b)) or ())
    if dims is None or _broadcast_dims(_dims(a), _dims(b)) is None:
        raise Broadcast(src, shapes=f"of torch.where {_dims_text(_dims(c))}, {_dims_text(_dims(a))}, "
                              f"{_dims_text(_dims(b))}")
    rt = result_type(a, b)
    a2, b2 = coerce(tr, a, rt), coerce(tr, b, rt)
    n = Node("where", [c, a2, b2], dims=dims, dtype=rt, weak=_all_weak(a, b))
    if isinstance(c, Node) and c.pad is False and isinstance(b2, Node) and b2.pad is not None:
        n.pad = b2.pad
    elif isinstance(c, Node) and c.pad is False and _is_py_number(b2):
        n.pad = b2
    return tr.emit(n)


def clamp(tr, x, lo, hi, e):
    out = x
    if lo is not None:
        out = minmax(tr, "maximum", out, lo, e)
    if hi is not None:
        out = minmax(tr, "minimum", out, hi, e)
    return out


def logical(tr, kind, a, b, src):
    if not isinstance(a, Node) and not isinstance(b, Node):
        return (a and b) if kind == "and" else (a or b)
    a = to_bool(tr, a, src)
    b = to_bool(tr, b, src)
    return binop(tr, kind, a, b, src)


def to_bool(tr, v, src):
    if isinstance(v, Node):
        return v if v.dtype == torch.bool else binop(tr, "ne", v, 0, src)
    return bool(v)


# ---------------------------------------------------------------------------- ops


def _t_unary(tr, e, op, input, inplace=False):
    return unary(tr, op, input, e)


#: the torch spellings of each unary op (``Tensor.<name>`` too, and ``F.<name>`` where torch has it)
_UNARY_SPELLINGS = {"neg": ("neg", "negative"), "silu": ()}
_UNARY_FUNCTIONAL = ("tanh", "sigmoid", "relu", "silu")
for _n in UNARY:
    _sp = _UNARY_SPELLINGS.get(_n, (_n,))
    op(_n, family="elementwise", nodes=("unary", "cast"), torch=_sp, methods=_sp,
       functional=(_n,) if _n in _UNARY_FUNCTIONAL else (), doc=f"torch.{_n}" if _sp else f"F.{_n}")(_t_unary)


@op("dt.relu", family="elementwise", stub=L.relu, nodes=("unary",), share_op=True)
@op("dt.sigmoid", family="elementwise", stub=L.sigmoid, nodes=("unary",), share_op=True)
@op("dt.silu", family="elementwise", stub=L.silu, nodes=("unary",), share_op=True)
@op("dt.tanh", family="elementwise", stub=L.tanh, nodes=("unary",), share_op=True)
@op("dt.exp", family="elementwise", stub=L.exp, nodes=("unary",), share_op=True)
def _dt_unary(tr, e, op, x):
    return unary(tr, op, x, e)


@op("dt.gelu", family="elementwise", stub=L.gelu, nodes=("binary", "unary"))
def _dt_gelu(tr, e, x, approximate="none"):
    return unary(tr, "gelu", x, e, approximate=approximate)


@op("gelu", family="elementwise", nodes=("binary", "unary"), functional=("gelu",))
def _t_gelu(tr, e, op, input, approximate="none"):
    return unary(tr, "gelu", input, e, approximate=approximate)


@op("softplus", family="elementwise", nodes=("binary", "unary", "where"), functional=("softplus",))
def _t_softplus(tr, e, op, input, beta=1.0, threshold=20.0):
    return unary(tr, "softplus", input, e, beta=beta, threshold=threshold)


@op("elu", family="elementwise", nodes=("binary", "unary", "where"), functional=("elu",))
def _t_elu(tr, e, op, input, alpha=1.0, inplace=False):
    return unary(tr, "elu", input, e, alpha=alpha)


@op("sign", family="elementwise", nodes=("binary", "cast"), torch=("sign",), methods=("sign",))
@op("isnan", family="elementwise", nodes=("binary",), torch=("isnan",), methods=("isnan",))
@op("isinf", family="elementwise", nodes=("binary", "unary"), torch=("isinf",), methods=("isinf",))
def _t_predicate(tr, e, op, input):
    return unary(tr, op, input, e)


@op("leaky_relu", family="elementwise", nodes=("binary", "where"), functional=("leaky_relu",))
def _t_leaky_relu(tr, e, op, input, negative_slope=0.01, inplace=False):
    return where(tr, binop(tr, "ge", input, 0, e), input, binop(tr, "mul", input, negative_slope, e), e)


@op("relu6", family="elementwise", nodes=("binary",), functional=("relu6",))
def _t_relu6(tr, e, op, input, inplace=False):
    return clamp(tr, input, 0, 6, e)


@op("hardtanh", family="elementwise", nodes=("binary",), functional=("hardtanh",))
def _t_hardtanh(tr, e, op, input, min_val=-1.0, max_val=1.0, inplace=False):
    return clamp(tr, input, min_val, max_val, e)


@op("add", family="elementwise", nodes=("binary",), torch=("add",), methods=("add",), first="number")
@op("sub", family="elementwise", nodes=("binary",), torch=("sub", "subtract"), methods=("sub",), first="number")
def _t_add(tr, e, op, input, other, *, alpha=None, out=None):
    if alpha is not None:
        other = binop(tr, "mul", other, alpha, e)
    return binop(tr, op, input, other, e)


@op("mul", family="elementwise", nodes=("binary",), torch=("mul", "multiply"), methods=("mul",), first="number")
@op("mod", family="elementwise", nodes=("binary", "unary"), torch=("remainder",), methods=("remainder",))
@op("floordiv", family="elementwise", nodes=("binary", "unary"), torch=("floor_divide",))
@op("eq", family="elementwise", nodes=("binary",), torch=("eq",))
@op("ne", family="elementwise", nodes=("binary",), torch=("ne",))
@op("lt", family="elementwise", nodes=("binary",), torch=("lt",))
@op("le", family="elementwise", nodes=("binary",), torch=("le",))
@op("gt", family="elementwise", nodes=("binary",), torch=("gt",))
@op("ge", family="elementwise", nodes=("binary",), torch=("ge",))
def _t_binary(tr, e, op, input, other, *, out=None):
    return binop(tr, op, input, other, e)


@op("logical_and", family="elementwise", nodes=("binary",), torch=("logical_and",))
@op("logical_or", family="elementwise", nodes=("binary",), torch=("logical_or",))
def _t_logical(tr, e, op, input, other, *, out=None):
    return logical(tr, op.split("_")[1], input, other, e)


@op("truediv", family="elementwise", nodes=("binary", "unary", "where", "cast"), torch=("div", "divide",
    "true_divide"), first="number")
@op("div", family="elementwise", nodes=("binary", "unary", "where", "cast"), methods=("div",))
def _t_div(tr, e, op, input, other, *, rounding_mode=None, out=None):
    x = input
    if rounding_mode == "floor":
        return binop(tr, "floordiv", x, other, e)
    if rounding_mode == "trunc":
        q = binop(tr, "truediv", x, other, e)
        if not result_type(x, other).is_floating_point:
            return cast(tr, cast(tr, q, torch.int64), result_type(x, other))
        return where(tr, binop(tr, "lt", q, 0, e), unary(tr, "ceil", q, e), unary(tr, "floor", q, e), e)
    if rounding_mode is not None:
        raise UnknownOption(e, op="div", option="rounding_mode", value=rounding_mode, choices="None, 'trunc', 'floor'")
    return binop(tr, "truediv", x, other, e)


@op("fmod", family="elementwise", nodes=("binary", "unary", "where"), torch=("fmod",), methods=("fmod",))
def _t_fmod(tr, e, op, input, other, *, out=None):
    x = input
    if result_type(x, other).is_floating_point:
        q = binop(tr, "truediv", x, other, e)
        tq = where(tr, binop(tr, "lt", q, 0, e), unary(tr, "ceil", q, e), unary(tr, "floor", q, e), e)
        return binop(tr, "sub", x, binop(tr, "mul", tq, other, e), e)
    return binop(tr, "mod", x, other, e, trunc=True)  # torch.fmod truncates


@op("pow", family="elementwise", nodes=("binary", "unary"), torch=("pow",), methods=("pow",))
def _t_pow(tr, e, op, input, exponent):
    return binop(tr, "pow", input, exponent, e)


@op("maximum", family="elementwise", nodes=("binary",), torch=("maximum",), methods=("maximum",), first="number")
@op("minimum", family="elementwise", nodes=("binary",), torch=("minimum",), methods=("minimum",), first="number")
def _t_minmax(tr, e, op, input, other, *, out=None):
    return minmax(tr, op, input, other, e)


@op("where", family="elementwise", nodes=("where",), torch=("where",), first="number")
def _t_where(tr, e, op, condition, input, other):
    return where(tr, condition, input, other, e)


@op("where_method", family="elementwise", nodes=("where",), methods=("where",))
def _t_where_method(tr, e, op, input, condition, other):
    return where(tr, condition, input, other, e)


@op("masked_fill", family="elementwise", nodes=("where",), methods=("masked_fill",))
def _t_masked_fill(tr, e, op, input, mask, value):
    return where(tr, mask, value, input, e)


@op("clamp", family="elementwise", nodes=("binary",), torch=("clamp", "clip"), methods=("clamp", "clip"))
def _t_clamp(tr, e, op, input, min=None, max=None):
    return clamp(tr, input, min, max, e)


@op("lerp", family="elementwise", nodes=("binary",), torch=("lerp",), methods=("lerp",))
def _t_lerp(tr, e, op, input, end, weight):
    return binop(tr, "add", input, binop(tr, "mul", weight, binop(tr, "sub", end, input, e), e), e)


@op("addcmul", family="elementwise", nodes=("binary",), torch=("addcmul",))
def _t_addcmul(tr, e, op, input, tensor1, tensor2, *, value=1):
    return binop(tr, "add", input, binop(tr, "mul", value, binop(tr, "mul", tensor1, tensor2, e), e), e)


@op("fma", family="elementwise", nodes=("binary",), torch=("fma",))
def _t_fma(tr, e, op, input, b, c):
    return binop(tr, "add", binop(tr, "mul", input, b, e), c, e)


@op("dt.cdiv", family="elementwise", stub=L.cdiv, nodes=("binary",))
def _dt_cdiv(tr, e, a, b):
    if isinstance(a, Node) or isinstance(b, Node):
        return binop(tr, "floordiv", binop(tr, "sub", binop(tr, "add", a, b, e), 1, e), b, e)
    return L.cdiv(a, b)


@op("to", family="elementwise", nodes=("cast",), methods=("to",))
def _t_to(tr, e, op, input, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    target = None
    for a in list(args) + [dtype]:
        if isinstance(a, torch.dtype):
            target = a
        elif isinstance(a, Node):
            target = a.dtype
    if target is None:
        return input  # a device move: nothing to do in the kernel
    return cast(tr, input, target)


@op("type_as", family="elementwise", nodes=("cast",), methods=("type_as",))
def _t_type_as(tr, e, op, input, other):
    return cast(tr, input, other.dtype)


#: the cast methods -> the torch dtype they convert to (by name: torch is imported on first use)
_CASTS = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64", "int": "int32",
          "long": "int64", "bool": "bool"}


@op("float", family="elementwise", nodes=("cast",), methods=("float",))
@op("half", family="elementwise", nodes=("cast",), methods=("half",))
@op("bfloat16", family="elementwise", nodes=("cast",), methods=("bfloat16",))
@op("double", family="elementwise", nodes=("cast",), methods=("double",))
@op("int", family="elementwise", nodes=("cast",), methods=("int",))
@op("long", family="elementwise", nodes=("cast",), methods=("long",))
@op("bool", family="elementwise", nodes=("cast",), methods=("bool",))
def _t_cast(tr, e, op, input, memory_format=None):
    return cast(tr, input, getattr(torch, _CASTS[op]))
