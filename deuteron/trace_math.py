"""The tracer's tensor semantics: binary ops and promotion, casts, unary math, shapes, reductions,
matmuls (each a method building ``Node``s with torch's dims and dtype rules)."""

from __future__ import annotations


import torch

from . import ops
from .errors import (
    Broadcast, DimensionArgument, HostCall, HostValueOperand, MatmulDtypes, MatmulOperands, MatmulShapes, OperandDtype,
    OperandKind,
    ShapeArgument, SizeOneMatmul, TileArithmetic, TileAsNumber, UnsupportedExpression, WholeTensor,
)
from .program import (
    ONE, Node, RInfo, TileInfo,
)
from .trace_common import (
    BlockSizeInt, HostTensor, _LOW_PRECISION, _PYOPS, _all_weak, _broadcast_dims, _describe, _dims,
    _dims_text, _fold_pad, _fold_unary, _is_py_number, _norm_axis, result_type,
)


#: operators where a tile operand stands for its indices (``tile + start``)
_TILE_ARITH = ("add", "sub", "mul", "floordiv", "mod")


class MathTracer:
    """Mixin of ``Tracer``: the rules of tensor operations."""

    def binop(self, op, a, b, src):
        if op is None:
            raise UnsupportedExpression(src, what="this operator")
        if isinstance(a, TileInfo) or isinstance(b, TileInfo):
            # a tile in arithmetic is its indices (Helion's `k[tile_n + start, :]`): a block along the tile
            if op in _TILE_ARITH and not (isinstance(a, TileInfo) and isinstance(b, TileInfo)):
                a = self.tile_attr(a, "index", src) if isinstance(a, TileInfo) else a
                b = self.tile_attr(b, "index", src) if isinstance(b, TileInfo) else b
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
            except Exception as ex:  # noqa: BLE001
                raise HostCall(src, problem=f"{op} of host values failed: {type(ex).__name__}: {ex}") from None
        if op == "matmul":
            return self.matmul(a, b, None, src)
        if op in ("minimum", "maximum"):
            return self.minmax(op, a, b, src)
        for v in (a, b):
            if not isinstance(v, (Node, bool, int, float)):
                raise OperandKind(src, op=f"{op} with a value of the kernel", got=_describe(v))
        dims = _broadcast_dims(_dims(a), _dims(b))
        if dims is None:
            raise Broadcast(src, shapes=f"{_dims_text(_dims(a))} and {_dims_text(_dims(b))}")
        weak = _all_weak(a, b)
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            ct = result_type(a, b)
            a2, b2 = self.coerce(a, ct), self.coerce(b, ct)
            n = Node("binary", [a2, b2], dims=dims, dtype=torch.bool, attrs={"op": op}, weak=weak)
            n.pad = _fold_pad(op, a2, b2)
            return self.emit(n)
        if op in ("and", "or", "xor"):
            rt = result_type(a, b)
            if rt.is_floating_point:
                raise OperandDtype(src, op="bitwise operators", dtype="floating-point", why="")
            a2, b2 = self.coerce(a, rt), self.coerce(b, rt)
            n = Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": op}, weak=weak)
            return self.emit(n)
        if op in ("shl", "shr"):
            rt = result_type(a, b)
            if rt.is_floating_point:
                raise OperandDtype(src, op="shifts", dtype="floating-point", why="")
            n = Node("binary", [self.coerce(a, rt), self.coerce(b, rt)], dims=dims, dtype=rt, attrs={"op": op},
                     weak=weak)
            return self.emit(n)
        rt = result_type(a, b)
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
                a2 = self.coerce(a, rt)
                return self.emit(Node("binary", [a2, a2], dims=dims, dtype=rt, attrs={"op": "mul"}, weak=weak))
            if isinstance(b, (int, float)) and float(b) == 0.5 and isinstance(a, Node):
                return self.unary("sqrt", self.coerce(a, rt if rt.is_floating_point else torch.float32), src)
            if not rt.is_floating_point:
                raise OperandDtype(src, op="**", dtype="integer", why=" inside the kernel", hint="use a float exponent")
        a2, b2 = self.coerce(a, rt), self.coerce(b, rt)
        if op in ("floordiv", "mod") and rt.is_floating_point:
            q = self.unary("floor", self.emit(Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": "truediv"},
                                                   weak=weak)), src)
            if op == "floordiv":
                return q
            prod = self.emit(Node("binary", [q, b2], dims=dims, dtype=rt, attrs={"op": "mul"}, weak=weak))
            return self.emit(Node("binary", [a2, prod], dims=dims, dtype=rt, attrs={"op": "sub"}, weak=weak))
        n = Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": op}, weak=weak)
        n.pad = _fold_pad(op, a2, b2)
        if isinstance(a2, Node) and isinstance(b2, Node) and a2.host_value is not None and \
                b2.host_value is not None and op in ("add", "sub", "mul", "floordiv", "mod"):
            try:
                n.host_value = _PYOPS[op](a2.host_value, b2.host_value)
                n.guards = tuple(a2.guards) + tuple(b2.guards)
            except Exception:  # noqa: BLE001
                pass
        elif isinstance(a2, Node) and a2.host_value is not None and _is_py_number(b2) and \
                op in ("add", "sub", "mul", "floordiv", "mod"):
            try:
                n.host_value = _PYOPS[op](a2.host_value, b2)
                n.guards = tuple(a2.guards)
            except Exception:  # noqa: BLE001
                pass
        elif isinstance(b2, Node) and b2.host_value is not None and _is_py_number(a2) and \
                op in ("add", "sub", "mul", "floordiv", "mod"):
            try:
                n.host_value = _PYOPS[op](a2, b2.host_value)
                n.guards = tuple(b2.guards)
            except Exception:  # noqa: BLE001
                pass
        if n.host_value is not None and n.dims == ():
            return n  # a run-time scalar computed from parameters: rendered inline
        return self.emit(n)

    def coerce(self, v, dtype):
        """Cast a node operand to ``dtype`` (Python numbers stay weak literals)."""
        if isinstance(v, Node):
            if v.dtype == dtype:
                return v
            if v.weak and dtype in (torch.int32, torch.int64) and v.dtype in (torch.int32, torch.int64) and \
                    not v.dims:
                return v  # newt widens int scalars by itself
            if v.weak and v.op == "const":
                return v.attrs["value"] if not dtype.is_floating_point else float(v.attrs["value"])
            return self.cast(v, dtype)
        if isinstance(v, bool) and dtype != torch.bool:
            return int(v)
        if dtype.is_floating_point and isinstance(v, int):
            return float(v)
        return v

    def cast(self, v, dtype) -> Node:
        if not isinstance(v, Node):
            return self.const_node(v, dtype)
        if v.dtype == dtype:
            return v
        n = Node("cast", [v], dims=v.dims, dtype=dtype, weak=False)
        if v.pad is not None:
            n.pad = v.pad
        if v.host_value is not None:
            n.host_value = v.host_value
            n.guards = v.guards
        if v.op == "const":
            return self.const_node(v.attrs["value"], dtype)
        return self.emit(n)

    def minmax(self, op, a, b, src):
        dims = _broadcast_dims(_dims(a), _dims(b))
        if dims is None:
            raise Broadcast(src, shapes=f"{_dims_text(_dims(a))} and {_dims_text(_dims(b))}")
        rt = result_type(a, b)
        a2, b2 = self.coerce(a, rt), self.coerce(b, rt)
        n = Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": op}, weak=_all_weak(a, b))
        n.pad = _fold_pad(op, a2, b2)
        return self.emit(n)

    def unary(self, fn, v, src, **kw):
        if isinstance(v, TileInfo):
            raise TileAsNumber(src, what="a value", hint="use tile.index")
        if not isinstance(v, Node):
            if isinstance(v, (int, float)):
                v = self.const_node(v)
            else:
                raise OperandKind(src, op=f"{fn}()", got=_describe(v))
        dtype = v.dtype
        if fn in ("floor", "ceil") and not dtype.is_floating_point:
            return v  # torch: identity on integers
        if fn in ops.FLOAT_UNARY and not dtype.is_floating_point:
            v = self.cast(v, torch.get_default_dtype())
            dtype = v.dtype
        compute = dtype
        if dtype in _LOW_PRECISION and fn in ops.FLOAT_UNARY:
            compute = torch.float32
            v = self.cast(v, compute)
        if fn == "gelu":
            out = self._gelu(v, kw.get("approximate", "none"), src)
        elif fn == "softplus":
            beta = kw.get("beta", 1.0)
            threshold = kw.get("threshold", 20.0)
            bx = self.binop("mul", v, beta, src) if beta != 1.0 else v
            soft = self.binop("truediv", self.unary("log1p", self.unary("exp", bx, src), src), beta, src)
            out = self.where(self.binop("gt", bx, threshold, src), v, soft, src)
        elif fn == "elu":
            alpha = kw.get("alpha", 1.0)
            out = self.where(self.binop("gt", v, 0, src), v,
                             self.binop("mul", alpha, self.unary("expm1", v, src), src), src)
        elif fn == "sign":
            pos = self.cast(self.binop("gt", v, 0, src), v.dtype)
            neg = self.cast(self.binop("lt", v, 0, src), v.dtype)
            out = self.binop("sub", pos, neg, src)
        elif fn == "isnan":
            out = self.binop("ne", v, v, src)
        elif fn == "isinf":
            out = self.binop("eq", self.unary("abs", v, src), float("inf"), src)
        else:
            if fn not in ops.UNARY:
                raise UnsupportedExpression(src, what=fn)
            n = Node("unary", [v], dims=v.dims, dtype=torch.bool if fn == "logical_not" else compute,
                     attrs={"fn": fn}, weak=v.weak)
            if v.pad is not None and not isinstance(v.pad, bool):
                n.pad = _fold_unary(fn, v.pad)
            out = self.emit(n)
        if compute != dtype and isinstance(out, Node) and out.dtype == compute:
            out = self.cast(out, dtype)
        return out

    def _gelu(self, v, approximate, src):
        if approximate == "tanh":
            x3 = self.binop("mul", self.binop("mul", v, v, src), v, src)
            inner = self.binop("mul", 0.7978845608028654, self.binop("add", v, self.binop("mul", 0.044715, x3, src),
                                                                     src), src)
            return self.binop("mul", self.binop("mul", 0.5, v, src),
                              self.binop("add", 1.0, self.unary("tanh", inner, src), src), src)
        return self.binop("mul", self.binop("mul", 0.5, v, src),
                          self.binop("add", 1.0, self.unary("erf", self.binop("mul", v, 0.7071067811865476, src),
                                                            src), src), src)

    def where(self, c, a, b, src):
        if isinstance(c, (bool, int)) and not isinstance(c, Node):
            return a if c else b
        c = self.to_bool(c, src)
        dims = _broadcast_dims(_dims(c), _broadcast_dims(_dims(a), _dims(b)) or ())
        if dims is None or _broadcast_dims(_dims(a), _dims(b)) is None:
            raise Broadcast(src, shapes=f"of torch.where {_dims_text(_dims(c))}, {_dims_text(_dims(a))}, "
                                  f"{_dims_text(_dims(b))}")
        rt = result_type(a, b)
        a2, b2 = self.coerce(a, rt), self.coerce(b, rt)
        n = Node("where", [c, a2, b2], dims=dims, dtype=rt, weak=_all_weak(a, b))
        if isinstance(c, Node) and c.pad is False and isinstance(b2, Node) and b2.pad is not None:
            n.pad = b2.pad
        elif isinstance(c, Node) and c.pad is False and _is_py_number(b2):
            n.pad = b2
        return self.emit(n)

    # ------------------------------------------------------------------ shapes
    def expand_dims(self, v: Node, axis: int, src) -> Node:
        dims = list(v.dims)
        if axis < 0:
            axis += len(dims) + 1
        if not 0 <= axis <= len(dims):
            raise DimensionArgument(src, op="unsqueeze", problem=f"axis {axis} out of range for rank {len(dims)}")
        dims.insert(axis, ONE)
        n = Node("expand_dims", [v], dims=dims, dtype=v.dtype, attrs={"axis": axis}, weak=v.weak, pad=v.pad)
        return self.emit(n)

    def squeeze(self, v: Node, axis, src) -> Node:
        dims = list(v.dims)
        if axis is None:
            new = [d for d in dims if d is not ONE]
        else:
            axis = _norm_axis(axis, len(dims), self, src)
            if dims[axis] is not ONE:
                return v
            new = dims[:axis] + dims[axis + 1:]
        if len(new) == len(dims):
            return v
        return self.emit(Node("reshape", [v], dims=new, dtype=v.dtype, weak=v.weak, pad=v.pad))

    def permute(self, v: Node, order, src) -> Node:
        if sorted(order) != list(range(len(v.dims))):
            raise DimensionArgument(src, op="permute",
                                    problem=f"order {order} does not fit a block of rank {len(v.dims)}")
        if list(order) == list(range(len(v.dims))):
            return v
        dims = [v.dims[i] for i in order]
        return self.emit(Node("permute", [v], dims=dims, dtype=v.dtype, attrs={"order": list(order)},
                              weak=v.weak, pad=v.pad))

    def shape_dims(self, shape, src, what="a shape") -> tuple:
        """Dims from a list of tiles / block sizes / ints (dt.zeros([tile_m, tile_n]))."""
        if isinstance(shape, (TileInfo, int, Node)):
            shape = [shape]
        if not isinstance(shape, (list, tuple, torch.Size)):
            raise ShapeArgument(src, problem=f"{what} must be a list of tiles and ints, got {_describe(shape)}")
        dims = []
        for s in shape:
            if isinstance(s, (list, tuple)):
                dims.extend(self.shape_dims(s, src, what))
                continue
            if isinstance(s, TileInfo):
                dims.append(s)
            elif isinstance(s, Node) and s.op == "tile_block_size":
                dims.append(s.attrs["tile"])
            elif isinstance(s, BlockSizeInt):
                t = next((t for t in self.prog.tiles if t.slot == s.slot), None)
                # a block size of 1 is a broadcast dim (a tile of size 1 is a scalar in the generated code)
                dims.append(t if t is not None else (ONE if int(s) == 1 else self.block_dim(s, src)))
            else:
                n = self.static_int(s, src, "a dimension size")
                if n == 1:
                    dims.append(ONE)
                elif n < 1:
                    raise ShapeArgument(src, problem=f"a dimension of size {n}")
                else:
                    dims.append(self.rdim(n, n, src))
        return tuple(dims)

    def full(self, shape, value, dtype, src) -> Node:
        dims = self.shape_dims(shape, src)
        if isinstance(value, Node):
            if value.dims:
                raise ShapeArgument(src, problem="the fill value must be a scalar")
            dt = dtype or value.dtype
            v = self.cast(value, dt) if value.dtype != dt else value
            n = Node("expand", [v], dims=dims, dtype=dt)
            return self.emit(n)
        if not isinstance(value, (bool, int, float)):
            raise HostValueOperand(src, use="the fill value", got=_describe(value))
        dt = dtype or torch.float32
        n = Node("full", dims=dims, dtype=dt, attrs={"value": value}, pad=value)
        self.prog.dims_used.add(dims)
        return self.emit(n)

    def arange(self, args, kwargs, src) -> Node:
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("device", None)
        if kwargs:
            raise ShapeArgument(src, problem=f"arange: unsupported arguments {sorted(kwargs)}")
        if len(args) == 1 and isinstance(args[0], BlockSizeInt) and int(args[0]) > 1:
            # dt.arange(BLOCK_M) of a registered block size: the lanes of that block
            r = self.block_dim(args[0], src)
            n = self.emit(Node("arange", dims=(r,), dtype=torch.int32, attrs={"start": 0, "rdim": r}))
            return self.cast(n, dtype) if dtype is not None and dtype != torch.int32 else n
        vals = [self.static_int(a, src, "an arange bound") for a in args]
        if len(vals) == 1:
            lo, hi = 0, vals[0]
        elif len(vals) == 2:
            lo, hi = vals
        else:
            raise UnsupportedExpression(src, what="arange with a step")
        r = self.rdim(hi - lo, hi - lo, src) if hi - lo != 1 else None
        dims = (r,) if r is not None else (ONE,)
        n = self.emit(Node("arange", dims=dims, dtype=torch.int32, attrs={"start": lo, "rdim": r}))
        if dtype is not None and dtype != torch.int32:
            return self.cast(n, dtype)
        return n

    # ------------------------------------------------------------------ reductions
    def reduce(self, kind, v, dim, keepdim, src, dtype=None):
        if not isinstance(v, Node):
            raise OperandKind(src, op=f"{kind}()", got=_describe(v))
        nd = len(v.dims)
        if dim is None:
            axes = list(range(nd))
        elif isinstance(dim, (list, tuple)):
            axes = [_norm_axis(self.static_int(d, src, "a dimension"), nd, self, src) for d in dim]
        else:
            axes = [_norm_axis(self.static_int(dim, src, "a dimension"), nd, self, src)]
        axes = sorted(set(axes), reverse=True)
        if kind in ("mean", "var", "std"):
            if not v.dtype.is_floating_point:
                raise OperandDtype(src, op=f"{kind}()", dtype="integer", why=" (torch requires a float tensor)")
        if kind == "mean":
            s = self.reduce("sum", v, axes, keepdim, src, dtype=torch.float32 if v.dtype in _LOW_PRECISION else None)
            cnt = self.count(v, axes, src)
            out = self.binop("truediv", s, cnt, src)
            return self.cast(out, dtype or v.dtype) if out.dtype != (dtype or v.dtype) else out
        out = v
        if kind in ("sum", "prod") and dtype is None:
            if v.dtype in _LOW_PRECISION:
                acc_dtype, res_dtype = torch.float32, v.dtype
            elif not v.dtype.is_floating_point:
                acc_dtype = res_dtype = torch.int64
            else:
                acc_dtype = res_dtype = v.dtype
        elif kind in ("sum", "prod"):
            acc_dtype = res_dtype = dtype
        else:
            acc_dtype = res_dtype = v.dtype
        if out.dtype != acc_dtype:
            out = self.cast(out, acc_dtype)
        for ax in axes:
            d = out.dims[ax]
            if keepdim:
                dims = out.dims[:ax] + (ONE,) + out.dims[ax + 1:]
            else:
                dims = out.dims[:ax] + out.dims[ax + 1:]
            if d is ONE:
                out = self.emit(Node("reshape", [out], dims=dims, dtype=out.dtype, pad=out.pad)) \
                    if not keepdim else out
                continue
            rk = {"sum": "sum", "prod": "prod", "amax": "max", "amin": "min", "max": "max", "min": "min",
                  "argmax": "argmax", "argmin": "argmin"}[kind]
            rdt = torch.int64 if rk in ("argmax", "argmin") else out.dtype
            out = self.emit(Node("reduce", [out], dims=dims, dtype=rdt,
                                 attrs={"kind": rk, "axis": ax, "dim": d, "keepdim": keepdim}))
            if rk in ("argmax", "argmin"):
                break
        if out.dtype != res_dtype and kind not in ("argmax", "argmin"):
            out = self.cast(out, res_dtype)
        return out

    def count(self, v: Node, axes, src):
        total = 1
        for ax in axes:
            d = v.dims[ax]
            if isinstance(d, RInfo):
                total = self.binop("mul", total, d.size_expr if isinstance(d.size_expr, int) else d.size_expr, src)
            elif isinstance(d, TileInfo):
                ext = self.binop("sub", self.tile_attr(d, "end", src), self.tile_attr(d, "begin", src), src)
                if d.kind == "grid":
                    ext = 1
                total = self.binop("mul", total, ext, src)
        return total

    def var(self, v, dim, correction, keepdim, src, std=False):
        if not v.dtype.is_floating_point:
            raise OperandDtype(src, op="var()", dtype="integer", why=" (torch requires a float tensor)")
        x = self.cast(v, torch.float32) if v.dtype in _LOW_PRECISION else v
        nd = len(v.dims)
        axes = list(range(nd)) if dim is None else (
            [_norm_axis(self.static_int(d, src, "a dimension"), nd, self, src) for d in dim]
            if isinstance(dim, (list, tuple)) else [_norm_axis(self.static_int(dim, src, "a dimension"), nd, self,
                                                               src)])
        mean = self.reduce("mean", x, axes, True, src)
        d = self.binop("sub", x, mean, src)
        ssq = self.reduce("sum", self.binop("mul", d, d, src), axes, keepdim, src)
        n = self.count(v, axes, src)
        denom = self.binop("sub", n, correction, src) if correction else n
        out = self.binop("truediv", ssq, denom, src)
        if std:
            out = self.unary("sqrt", out, src)
        return self.cast(out, v.dtype) if out.dtype != v.dtype else out

    def softmax(self, v, dim, src, log=False, dtype=None):
        if dim is None:
            raise DimensionArgument(src, op="softmax", problem="dim= is needed")
        x = v
        if dtype is not None:
            x = self.cast(x, dtype)
        out_dtype = x.dtype
        if not x.dtype.is_floating_point:
            x = self.cast(x, torch.float32)
            out_dtype = torch.float32
        if x.dtype in _LOW_PRECISION:
            x = self.cast(x, torch.float32)
        m = self.reduce("amax", x, dim, True, src)
        z = self.binop("sub", x, m, src)
        e = self.unary("exp", z, src)
        s = self.reduce("sum", e, dim, True, src)
        if log:
            out = self.binop("sub", z, self.unary("log", s, src), src)
        else:
            out = self.binop("truediv", e, s, src)
        return self.cast(out, out_dtype) if out.dtype != out_dtype else out

    def logsumexp(self, v, dim, keepdim, src):
        x = self.cast(v, torch.float32) if v.dtype in _LOW_PRECISION or not v.dtype.is_floating_point else v
        m = self.reduce("amax", x, dim, True, src)
        mz = self.where(self.unary("isinf", m, src), 0.0, m, src)
        s = self.reduce("sum", self.unary("exp", self.binop("sub", x, mz, src), src), dim, True, src)
        out = self.binop("add", self.unary("log", s, src), mz, src)
        if not keepdim:
            out = self.squeeze(out, dim if not isinstance(dim, (list, tuple)) else dim[0], src)
        return self.cast(out, v.dtype) if v.dtype.is_floating_point and out.dtype != v.dtype else out

    # ------------------------------------------------------------------ matmul
    def matmul(self, a, b, acc, src, out_dtype=None):
        for v in (a, b):
            if not isinstance(v, Node):
                raise MatmulOperands(src, problem=f"of {_describe(v)}")
        if len(a.dims) not in (2, 3) or len(b.dims) not in (2, 3) or len(a.dims) != len(b.dims):
            raise MatmulOperands(src, problem=f"of blocks of rank {len(a.dims)} and {len(b.dims)}: 2-D (or batched "
                                              "3-D) operands are supported")
        ka, kb = a.dims[-1], b.dims[-2]
        if ka is not kb:
            raise MatmulShapes(src, problem=f"inner dimensions differ: {_dims_text(a.dims)} @ {_dims_text(b.dims)}")
        if len(a.dims) == 3 and a.dims[0] is not b.dims[0] and ONE not in (a.dims[0], b.dims[0]):
            raise MatmulShapes(src, problem="batches differ (a batched matmul with different batch dimensions)")
        dims = tuple(a.dims[:-2]) + (a.dims[-2], b.dims[-1]) if len(a.dims) == 2 else \
            (a.dims[0] if a.dims[0] is not ONE else b.dims[0], a.dims[-2], b.dims[-1])
        for d in (a.dims[-2], ka, b.dims[-1]):
            if isinstance(d, RInfo) and d.broadcast_as_one:
                raise SizeOneMatmul(src)
            if isinstance(d, RInfo) and d.exact_block and d.size < 16:
                raise MatmulOperands(src, problem=f"over a dimension of {d.size} elements that a reshape or dt.join "
                                                  "made (a matmul would pad it to 16)")
            if isinstance(d, (TileInfo, RInfo)):
                d.used_in_dot = True
                if isinstance(d, TileInfo):
                    d.dot_role = "k" if d is ka else (d.dot_role or "mn")
                for t in getattr(d, "merged_tiles", ()):  # a tile merged into d: its block makes d's size
                    t.used_in_dot = True
                    t.dot_role = "k" if d is ka else (t.dot_role or "mn")
            if d is ONE:
                raise MatmulOperands(src, problem="over a dimension of size 1 (tensor cores need at least 16)")
        if isinstance(ka, RInfo):
            ka.not_rollable("used as the inner dimension of a matmul")
        if out_dtype is None and acc is None and a.dtype != b.dtype and not (a.weak or b.weak):
            raise MatmulDtypes(src, a=a.dtype, b=b.dtype)
        in_dtype = result_type(a, b)
        if in_dtype == torch.float64:
            raise MatmulOperands(src, problem="of fp64 values: not supported on the tensor cores")
        if a.dtype != in_dtype:
            a = self.cast(a, in_dtype)
        if b.dtype != in_dtype:
            b = self.cast(b, in_dtype)
        if in_dtype.is_floating_point:
            acc_dtype = torch.float32
        elif in_dtype in (torch.int8, torch.uint8):
            acc_dtype = torch.int32
        else:
            raise MatmulOperands(src, problem=f"of {in_dtype} values")
        self.prog.has_dot = True
        acc_node = None
        if acc is not None:
            if not isinstance(acc, Node):
                acc = self.full(list(dims), acc, acc_dtype, src)
            if _broadcast_dims(acc.dims, dims) != dims:
                raise MatmulShapes(src, problem=f"accumulator of shape {_dims_text(acc.dims)} for a product of "
                                                   f"{_dims_text(dims)}")
            acc_node = acc if acc.dtype == acc_dtype and acc.dims == dims else \
                self.materialize(self.cast(acc, acc_dtype) if acc.dtype != acc_dtype else acc, dims, acc_dtype, src)
            if acc_node.block is None and acc_node.op == "expand":
                self.emit(acc_node)
        n = self.emit(Node("dot", [a, b] + ([acc_node] if acc_node is not None else []), dims=dims,
                           dtype=acc_dtype, attrs={"precision": self.prog.dot_precision if in_dtype == torch.float32
                                                   else None}))
        self.prog.dims_used.add(dims)
        if acc is not None:
            target = acc.dtype
        elif out_dtype == "acc":
            target = acc_dtype
        else:
            target = out_dtype or in_dtype
        return self.cast(n, target) if target != n.dtype else n
