"""The tracer's calls of ``dt.*``, ``torch.*`` functions and tensor methods."""

from __future__ import annotations


import torch

from . import language as L
from . import ops
from .program import (
    ONE, Node, RInfo, TileInfo,
)
from .trace_common import (
    HostTensor, SHAPE_CODE, _LOW_PRECISION, _MaxResult, _broadcast_dims, _describe, _dims_text, _is_int_dtype,
    _norm_axis, result_type,
)


class OpsTracer:
    """Mixin of ``Tracer``: calls by name."""

    # ------------------------------------------------------------------ dt.* calls
    def dt_call(self, name, args, kwargs, e):
        if name in ("zeros", "full"):
            if name == "zeros":
                shape = args[0] if args else kwargs.pop("shape")
                dtype = args[1] if len(args) > 1 else kwargs.pop("dtype", None)
                value = 0
            else:
                shape = args[0] if args else kwargs.pop("shape")
                value = args[1] if len(args) > 1 else kwargs.pop("value")
                dtype = args[2] if len(args) > 2 else kwargs.pop("dtype", None)
            return self.full(shape, value, dtype, e)
        if name == "arange":
            return self.arange(list(args), dict(kwargs), e)
        if name == "dot":
            a, b = args[0], args[1]
            acc = args[2] if len(args) > 2 else kwargs.get("acc")
            return self.matmul(a, b, acc, e, out_dtype=kwargs.get("out_dtype") or "acc")
        if name == "atomic_add":
            target = args[0] if args else kwargs.get("target")
            index = args[1] if len(args) > 1 else kwargs.get("index")
            value = args[2] if len(args) > 2 else kwargs.get("value")
            sem = args[3] if len(args) > 3 else kwargs.get("sem", "relaxed")
            if not isinstance(target, HostTensor):
                raise self.error("D004", e, "dt.atomic_add needs a tensor of the host code as its target")
            idx = list(index) if isinstance(index, (list, tuple)) else [index]
            items = self.items_for(target, idx, e)
            dims = self._items_dims(items)
            if isinstance(value, Node):
                self._check_store_dims(value.dims, dims, target, e)
            if sem not in ("relaxed", "acquire", "release", "acq_rel"):
                raise self.error("D004", e, f"dt.atomic_add: unknown sem {sem!r}")
            target.arg.atomic = True
            self._strides(target, items)
            self.prog.has_atomic = True
            self.emit(Node("atomic_add", [value], dims=(), attrs={"tensor": target.arg, "items": items,
                                                                   "dims": dims, "sem": sem}))
            return None
        if name in ("relu", "sigmoid", "silu", "tanh", "exp"):
            return self.unary(name, args[0], e)
        if name == "gelu":
            return self.unary("gelu", args[0], e, approximate=kwargs.get("approximate", "none"))
        if name in ("cdiv", "next_power_of_2"):
            if any(isinstance(a, Node) for a in args):
                if name == "cdiv":
                    a, b = args
                    return self.binop("floordiv", self.binop("sub", self.binop("add", a, b, e), 1, e), b, e)
                raise self.error("D004", e, "dt.next_power_of_2 needs a value known when compiling")
            return getattr(L, name)(*args)
        if name in ("tile", "grid"):
            raise self.error("D003", e, f"dt.{name}(...) must be the iterable of a for loop")
        if name in ops.DT_HOST_ONLY:
            raise self.error("D004", e, f"dt.{name} belongs in the host code, before the tile loops")
        raise self.error("D004", e, f"dt.{name} cannot be used inside a tile loop")

    # ------------------------------------------------------------------ torch functions and methods
    def torch_call(self, tname, args, kwargs, e):
        kind, name = tname
        table = ops.FUNCTIONAL if kind == "F" else ops.TORCH_FUNCTIONS
        op = table.get(name)
        if op is None:
            prefix = "torch.nn.functional." if kind == "F" else "torch."
            raise self.error("D004", e, f"{prefix}{name} is not supported inside a tile loop",
                             hint="see docs/deuteron.md for the supported ops")
        if any(isinstance(a, HostTensor) for a in list(args) + list(kwargs.values())) and op not in (
                "zeros", "ones", "full", "arange"):
            ht = next(a for a in list(args) + list(kwargs.values()) if isinstance(a, HostTensor))
            raise self.error("D004", e, f"{ht.name} used whole inside a tile loop",
                             hint=f"index it with tiles: {ht.name}[tile, ...]")
        if op in ("zeros", "ones", "full"):
            dtype = kwargs.pop("dtype", None)
            kwargs.pop("device", None)
            kwargs.pop("layout", None)
            if op == "full":
                shape = args[0] if args else kwargs.pop("size")
                value = args[1] if len(args) > 1 else kwargs.pop("fill_value")
            else:
                shape = args[0] if len(args) == 1 else list(args)
                value = 0 if op == "zeros" else 1
            return self.full(shape, value, dtype, e)
        if op in ("zeros_like", "ones_like", "full_like"):
            x = args[0]
            value = 0 if op == "zeros_like" else (1 if op == "ones_like" else (args[1] if len(args) > 1
                                                                               else kwargs.pop("fill_value")))
            dtype = kwargs.get("dtype") or x.dtype
            return self.full(list(self.dim_value(d) for d in x.dims), value, dtype, e) if x.dims else \
                self.cast(value, dtype)
        if op == "arange":
            return self.arange(list(args), dict(kwargs), e)
        x = args[0] if args else kwargs.pop("input", None)
        return self.method(x, op, list(args[1:]), kwargs, e, canonical=True)

    def method(self, x, name, args, kwargs, e, canonical=False):
        """A tensor op on ``x`` (a Node) by canonical name or method name."""
        op = name if canonical else ops.TENSOR_METHODS.get(name)
        if op is None:
            raise self.error("D004", e, f".{name}() is not supported inside a tile loop")
        if isinstance(x, TileInfo):
            raise self.error("D003", e, f"{name}() of a tile", hint="use tile.index")
        if not isinstance(x, Node) and op not in ("where", "maximum", "minimum", "add", "sub", "mul", "truediv"):
            if isinstance(x, (int, float)):
                x = self.const_node(x)
            else:
                raise self.error("D004", e, f"{name}() of {_describe(x)}")

        def kw(key, pos, default=None):
            if len(args) > pos:
                return args[pos]
            return kwargs.get(key, default)

        if op in ops.UNARY and op not in ("abs",) or op in ("abs",):
            return self.unary(op, x, e)
        if op in ("gelu", "softplus", "elu", "sign", "isnan", "isinf"):
            extra = {k: v for k, v in kwargs.items() if k in ("approximate", "beta", "threshold", "alpha")}
            return self.unary(op, x, e, **extra)
        if op == "leaky_relu":
            slope = kw("negative_slope", 0, 0.01)
            return self.where(self.binop("ge", x, 0, e), x, self.binop("mul", x, slope, e), e)
        if op == "relu6":
            return self.clamp(x, 0, 6, e)
        if op in ("add", "sub", "mul", "truediv", "fmod", "mod", "floordiv", "eq", "ne", "lt", "le", "gt", "ge",
                  "logical_and", "logical_or"):
            other = kw("other", 0)
            if op in ("add", "sub") and "alpha" in kwargs:
                other = self.binop("mul", other, kwargs["alpha"], e)
            if op == "div" or op == "truediv":
                rm = kwargs.get("rounding_mode")
                if rm == "floor":
                    return self.binop("floordiv", x, other, e)
                if rm == "trunc":
                    q = self.binop("truediv", x, other, e)
                    return self.cast(self.cast(q, torch.int64), result_type(x, other)) \
                        if not result_type(x, other).is_floating_point else self.where(
                            self.binop("lt", q, 0, e), self.unary("ceil", q, e), self.unary("floor", q, e), e)
            if op == "logical_and":
                return self.logical("and", x, other, e)
            if op == "logical_or":
                return self.logical("or", x, other, e)
            if op == "fmod":
                rt = result_type(x, other)
                if rt.is_floating_point:
                    q = self.binop("truediv", x, other, e)
                    tq = self.where(self.binop("lt", q, 0, e), self.unary("ceil", q, e), self.unary("floor", q, e), e)
                    return self.binop("sub", x, self.binop("mul", tq, other, e), e)
                return self.binop("mod", x, other, e)
            return self.binop(op, x, other, e)
        if op == "div":
            return self.method(x, "truediv", args, kwargs, e, canonical=True)
        if op == "pow":
            return self.binop("pow", x, kw("exponent", 0), e)
        if op in ("maximum", "minimum"):
            return self.minmax(op, x, kw("other", 0), e)
        if op == "where":
            if canonical:
                cond, a, b = x, kw("input", 0), kw("other", 1)
            else:
                cond, a, b = kw("condition", 0), x, kw("other", 1)
            return self.where(cond, a, b, e)
        if op == "masked_fill":
            return self.where(kw("mask", 0), kw("value", 1), x, e)
        if op == "clamp":
            return self.clamp(x, kw("min", 0), kw("max", 1), e)
        if op == "lerp":
            end, w = kw("end", 0), kw("weight", 1)
            return self.binop("add", x, self.binop("mul", w, self.binop("sub", end, x, e), e), e)
        if op in ("addcmul",):
            t1, t2 = kw("tensor1", 0), kw("tensor2", 1)
            val = kwargs.get("value", 1)
            return self.binop("add", x, self.binop("mul", val, self.binop("mul", t1, t2, e), e), e)
        if op == "fma":
            return self.binop("add", self.binop("mul", x, kw("b", 0), e), kw("c", 1), e)
        if op in ("sum", "amax", "amin", "mean", "prod"):
            dim = kw("dim", 0, None)
            keepdim = kw("keepdim", 1, False)
            dtype = kwargs.get("dtype")
            return self.reduce(op, x, dim, keepdim, e, dtype=dtype)
        if op in ("max", "min"):
            other = kw("dim", 0, None)
            if isinstance(other, Node) and (other.dims or "dim" not in kwargs and not _is_int_dtype(other.dtype)):
                return self.minmax("maximum" if op == "max" else "minimum", x, other, e)
            if other is None:
                return self.reduce(op, x, None, False, e)
            keepdim = kw("keepdim", 1, False)
            vals = self.reduce(op, x, other, keepdim, e)
            idx = self.reduce("argmax" if op == "max" else "argmin", x, other, keepdim, e)
            return _MaxResult((vals, idx))
        if op in ("argmax", "argmin"):
            dim = kw("dim", 0, None)
            keepdim = kw("keepdim", 1, False)
            if dim is None:
                raise self.error("D004", e, f"{op}() without dim= inside a tile loop")
            return self.reduce(op, x, dim, keepdim, e)
        if op in ("var", "std"):
            dim = kw("dim", 0, None)
            correction = kwargs.get("correction")
            unbiased = kwargs.get("unbiased")
            if correction is None:
                correction = 1 if unbiased is None or unbiased else 0
            keepdim = kw("keepdim", 1, False) if "unbiased" not in kwargs or len(args) < 2 else kwargs.get(
                "keepdim", False)
            if isinstance(dim, bool):  # x.var(False): unbiased positional
                correction, dim = (1 if dim else 0), None
            return self.var(x, dim, correction, keepdim, e, std=op == "std")
        if op in ("softmax", "log_softmax"):
            return self.softmax(x, kw("dim", 0, None), e, log=op == "log_softmax", dtype=kwargs.get("dtype"))
        if op == "logsumexp":
            return self.logsumexp(x, kw("dim", 0, None), kw("keepdim", 1, False), e)
        if op in ("cumsum", "cumprod"):
            dim = _norm_axis(self.static_int(kw("dim", 0), e, "a dimension"), len(x.dims), self, e)
            d = x.dims[dim]
            if isinstance(d, RInfo):
                d.not_rollable(f"used by {op}")
            dtype = kwargs.get("dtype") or (torch.int64 if not x.dtype.is_floating_point else x.dtype)
            xx = self.cast(x, torch.float32) if x.dtype in _LOW_PRECISION else self.cast(x, dtype)
            n = self.emit(Node("scan", [xx], dims=x.dims, dtype=xx.dtype, attrs={"kind": op, "axis": dim}))
            return self.cast(n, dtype) if n.dtype != dtype else n
        if op in ("matmul",):
            other = kw("other", 0)
            return self.matmul(x, other, None, e)
        if op == "addmm":
            m1, m2 = kw("mat1", 0), kw("mat2", 1)
            beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
            if beta != 1 or alpha != 1:
                prod = self.matmul(m1, m2, None, e, out_dtype=torch.float32)
                return self.cast(self.binop("add", self.binop("mul", x, beta, e), self.binop("mul", prod, alpha, e),
                                            e), x.dtype)
            return self.matmul(m1, m2, x, e)
        if op in ("to", "type_as"):
            target = None
            if op == "type_as":
                target = args[0].dtype
            else:
                for a in list(args) + [kwargs.get("dtype")]:
                    if isinstance(a, torch.dtype):
                        target = a
                    elif isinstance(a, Node):
                        target = a.dtype
            if target is None:
                return x  # a device move: nothing to do in the kernel
            return self.cast(x, target)
        if op in ("float", "half", "bfloat16", "double", "int", "long", "bool"):
            return self.cast(x, {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16,
                                 "double": torch.float64, "int": torch.int32, "long": torch.int64,
                                 "bool": torch.bool}[op])
        if op == "t":
            if len(x.dims) != 2:
                raise self.error("D004", e, f".t() of a block of rank {len(x.dims)}")
            return self.permute(x, [1, 0], e)
        if op == "transpose":
            d0 = _norm_axis(self.static_int(kw("dim0", 0), e, "a dimension"), len(x.dims), self, e)
            d1 = _norm_axis(self.static_int(kw("dim1", 1), e, "a dimension"), len(x.dims), self, e)
            order = list(range(len(x.dims)))
            order[d0], order[d1] = order[d1], order[d0]
            return self.permute(x, order, e)
        if op == "permute":
            order = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
            order = [_norm_axis(self.static_int(o, e, "a dimension"), len(x.dims), self, e) for o in order]
            return self.permute(x, order, e)
        if op == "unsqueeze":
            return self.expand_dims(x, self.static_int(kw("dim", 0), e, "a dimension"), e)
        if op == "squeeze":
            d = kw("dim", 0, None)
            return self.squeeze(x, None if d is None else self.static_int(d, e, "a dimension"), e)
        if op == "reshape":
            shape = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)) else list(args)
            return self.reshape(x, shape, e)
        if op in ("expand", "expand_as"):
            if op == "expand_as":
                dims = args[0].dims
            else:
                shape = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
                shape = [x.dims[i - (len(shape) - len(x.dims))] if (isinstance(s, int) and s == -1) else s
                         for i, s in enumerate(shape)]
                dims = self.shape_dims([self.dim_value(s) if not isinstance(s, (int, Node, TileInfo)) else s
                                        for s in shape], e)
            if _broadcast_dims(x.dims, dims) != tuple(dims):
                raise self.error(SHAPE_CODE, e, f"cannot expand {_dims_text(x.dims)} to {_dims_text(dims)}")
            return self.emit(Node("expand", [x], dims=dims, dtype=x.dtype, pad=x.pad))
        if op == "identity":
            return x
        if op == "size":
            d = kw("dim", 0, None)
            shape = tuple(self.dim_value(dd) for dd in x.dims)
            return shape if d is None else shape[_norm_axis(self.static_int(d, e, "a dimension"), len(x.dims), self,
                                                            e)]
        if op == "dim":
            return len(x.dims)
        if op == "numel":
            raise self.error("D004", e, ".numel() of a block inside a tile loop")
        if op in ("new_zeros", "new_ones", "new_full"):
            shape = args[0] if args else kwargs.get("size")
            value = 0 if op == "new_zeros" else (1 if op == "new_ones" else (args[1] if len(args) > 1
                                                                             else kwargs.get("fill_value")))
            return self.full(shape, value, kwargs.get("dtype") or x.dtype, e)
        raise self.error("D004", e, f"{name}() is not supported inside a tile loop")

    def clamp(self, x, lo, hi, e):
        out = x
        if lo is not None:
            out = self.minmax("maximum", out, lo, e)
        if hi is not None:
            out = self.minmax("minimum", out, hi, e)
        return out

    def reshape(self, x: Node, shape, e):
        """Reshapes that only add or remove size-1 dimensions (tile shapes cannot be merged)."""
        real_in = [d for d in x.dims if d is not ONE]
        out = []
        infer = None
        for s in shape:
            if isinstance(s, TileInfo) or (isinstance(s, Node) and s.op == "tile_block_size"):
                out.append(s if isinstance(s, TileInfo) else s.attrs["tile"])
            elif isinstance(s, int) and s == -1:
                if infer is not None:
                    raise self.error("D004", e, "reshape with two -1")
                infer = len(out)
                out.append(None)
            else:
                n = self.static_int(s, e, "a reshape size")
                out.append(ONE if n == 1 else self.rdim(n, n, e))
        if infer is not None:
            known = [d for d in out if d is not None and d is not ONE]
            rest = [d for d in real_in if d not in known]
            if len(rest) != 1:
                raise self.error("D004", e, "reshape: cannot infer the -1 dimension")
            out[infer] = rest[0]
        if [d for d in out if d is not ONE] != real_in:
            raise self.error("D004", e, f"reshape from {_dims_text(x.dims)} to {_dims_text(tuple(out))}: only size-1 "
                                        "dimensions can be added or removed inside a tile loop")
        if tuple(out) == x.dims:
            return x
        return self.emit(Node("reshape", [x], dims=out, dtype=x.dtype, pad=x.pad, weak=x.weak))
