"""The tracer's expressions: names, attributes, indexing, loads and stores, calls and inlining."""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
import types

import torch

from . import ops
from .errors import (
    BadAttribute, BadIndex, BlockDecision, CapturedTensor, HelperFunction, HostCall, IndexRank, NotInTileLoop,
    MovingSlice, OperandDtype, OperandKind, PerTileDecision, SliceBound, StoreShape, TileArithmetic, TileAsNumber,
    TileBoundDecision, TileIndexing, TilePastEnd, TraceError, UnknownName, Unpack, UnsupportedConstruct,
    UnsupportedExpression, WholeTensor,
)
from .program import (
    ONE, Node, RInfo, TileInfo, same_dim,
)
from .trace_common import (
    _per_tile_source,
    HostTensor, _BINOPS, _CMPOPS, _DT_FUNCS, _HostMethod, _MaxResult, _Method, _Return, _describe,
    _dims_text, _index_text, _is_int_dtype, _is_library, _torch_name,
)


_NO_VALUE = object()


def _is_library_module(m) -> bool:
    return (getattr(m, "__name__", "") or "").split(".")[0] in (
        "torch", "deuteron", "newt", "math", "builtins", "numpy", "triton", "functools", "operator", "helion")


class ExprTracer:
    """Mixin of ``Tracer``: evaluating expressions of a tile loop body."""

    # ------------------------------------------------------------------ expressions
    def eval(self, e):
        m = getattr(self, "ex_" + type(e).__name__, None)
        if m is None:
            kind = {ast.Lambda: "lambda", ast.ListComp: "a list comprehension", ast.GeneratorExp:
                    "a generator expression", ast.DictComp: "a dict comprehension", ast.SetComp:
                    "a set comprehension", ast.NamedExpr: "the walrus operator", ast.Await: "await",
                    ast.Yield: "yield", ast.JoinedStr: "an f-string"}.get(type(e), type(e).__name__)
            raise UnsupportedExpression(e, what=kind)
        return m(e)

    def ex_Constant(self, e):
        return e.value

    def lookup(self, name, node):
        if name in self.env:
            return self.env[name]
        if name in self.host:
            return self.host_value(name, self.host[name], node)
        if name in self.globals:
            v = self.globals[name]
            src = self._captured.get(name)
            if src is not None:  # captured by a callable argument: tensors become kernel arguments
                if isinstance(v, torch.Tensor):
                    key = ("captured",) + src
                    if key not in self._host_cache:
                        self._host_cache[key] = self.tensor_arg(f"{src[1]}_{name}", v, src)
                    return self._host_cache[key]
                return self.global_value(src, name, v, node)
            if isinstance(v, torch.Tensor):
                raise CapturedTensor(node, name=name)
            # the kernel's own global (fetched by name from its module at each launch), or one of a module-level
            # helper's globals / closure cells: a value baked into the code is guarded, a float is passed
            src = ("local", name) if self._inline_depth == 0 else self._gcaptured.get(name)
            if src is None:
                return v
            return self.global_value(src, name, v, node)
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise UnknownName(node, name=name)

    def global_value(self, src, name, v, node):
        """A value read from a global, a closure cell or a module attribute (``src`` says where it is fetched
        from at each launch): numbers, strings, None, dtypes and tuples of them that the code depends on are
        guarded (a changed value traces again), a float is a run-time scalar argument (a changed value is passed),
        a user function is guarded by its code and what it reads is guarded through it; modules, classes and
        library functions are taken as they are."""
        hit = self._global_cache.get(src, _NO_VALUE)
        if hit is not _NO_VALUE:
            return hit
        if isinstance(v, float):
            out = self.scalar_param(name, v, src)
        elif isinstance(v, (bool, int, str, torch.dtype, type(None))):
            self.guard(src, v)
            out = v
        elif isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
            if all(isinstance(x, (int, float, bool, str, type(None), torch.dtype)) for x in v):
                self.guard(src, tuple(v))
            out = v
        elif isinstance(v, types.FunctionType) and not _is_library(v):
            self.guard(src, v)
            if id(v) not in self._fn_origin:
                self._fn_gorigin[id(v)] = (v, src)
            out = v
        else:
            out = v
        self._global_cache[src] = out
        return out

    def value_source(self, e):
        """Where the value of expression ``e`` (a name, a module attribute of one) is fetched from at a launch
        when it is a global of the kernel or of a module-level helper; None otherwise."""
        if isinstance(e, ast.Name):
            nm = e.id
            if nm in self.env or nm in self.host or nm not in self.globals:
                return None
            if nm in self._captured:
                return self._captured[nm]
            return ("local", nm) if self._inline_depth == 0 else self._gcaptured.get(nm)
        if isinstance(e, ast.Attribute):
            base = self.value_source(e.value)
            return None if base is None else ("attr", base, e.attr)
        return None

    def ex_Name(self, e):
        return self.lookup(e.id, e)

    def ex_Tuple(self, e):
        out = []
        for x in e.elts:
            if isinstance(x, ast.Starred):
                out.extend(self.eval(x.value))
            else:
                out.append(self.eval(x))
        return tuple(out)

    def ex_List(self, e):
        return list(self.ex_Tuple(e))

    def ex_Slice(self, e):
        lo = self.eval(e.lower) if e.lower is not None else None
        hi = self.eval(e.upper) if e.upper is not None else None
        st = self.eval(e.step) if e.step is not None else None
        return slice(lo, hi, st)

    def ex_Attribute(self, e):
        base = self.eval(e.value)
        a = e.attr
        if isinstance(base, TileInfo):
            return self.tile_attr(base, a, e)
        if isinstance(base, HostTensor):
            return self.host_tensor_attr(base, a, e)
        if isinstance(base, Node):
            if a == "dtype":
                return base.dtype
            if a == "shape":
                return tuple(self.dim_value(d) for d in base.dims)
            if a == "ndim":
                return len(base.dims)
            if a == "device":  # where the kernel runs (what `device=x.device` in a creation op means)
                return next((ta.tensor.device for ta in self.prog.tensors.values()), torch.device("cpu"))
            if a in ("T", "mT"):
                return self.permute(base, list(range(len(base.dims)))[::-1] if a == "T" else
                                    list(range(len(base.dims) - 2)) + [len(base.dims) - 1, len(base.dims) - 2], e)
            if a in ops.TENSOR_METHODS:
                return _Method(base, a)
            raise NotInTileLoop(e, op=f".{a}()", why="", hint="see docs/deuteron.md for the supported ops")
        if isinstance(base, _MaxResult) and a in ("values", "indices"):
            return getattr(base, a)
        try:
            v = getattr(base, a)
        except AttributeError:
            if isinstance(base, types.ModuleType) and base.__name__.split(".")[0] == "deuteron" and \
                    a in ops.HELION_UNSUPPORTED:
                raise UnsupportedConstruct(e, name=a, why=ops.HELION_UNSUPPORTED[a]) from None
            raise BadAttribute(e, what=_describe(base), attr=a) from None
        if isinstance(base, types.ModuleType) and not _is_library_module(base):
            # a value read off a user module (``cfg.SCALE``): guarded like a global, through the module's source
            src = self.value_source(e)
            if src is not None:
                if isinstance(v, torch.Tensor):
                    raise CapturedTensor(e, name=f"{_describe(base).split()[-1]}.{a}")
                return self.global_value(src, a, v, e)
        return v

    def dim_value(self, d):
        if isinstance(d, TileInfo):
            return d
        if isinstance(d, RInfo):
            return d.size
        return 1

    def host_tensor_attr(self, ht: HostTensor, a, e):
        t = ht.t
        if a == "shape":
            return tuple(self.size_of(ht, d) for d in range(t.dim()))
        if a == "dtype":
            return t.dtype
        if a == "device":
            return t.device
        if a == "ndim":
            return t.dim()
        if a in ("size", "stride", "dim", "numel", "new_zeros", "new_empty", "new_ones", "new_full"):
            return _HostMethod(ht, a)
        raise WholeTensor(e, name=f"{ht.name}.{a}", what=": index the tensor with tiles first",
                          hint=f"e.g. {ht.name}[tile].{a}" if a in ops.TENSOR_METHODS else None)

    def ex_Subscript(self, e):
        base = self.eval(e.value)
        if isinstance(base, HostTensor):
            items = self.index_items(base, e.slice, e)
            return self.load(base, items, e)
        if isinstance(base, Node):
            return self.block_index(base, e.slice, e)
        if isinstance(base, TileInfo):
            raise TileIndexing(e, problem="a tile cannot be indexed", hint="index a tensor with the tile: x[tile]")
        idx = self.eval(e.slice)
        if isinstance(idx, Node):
            idx = self.static_int(idx, e.slice, "an index into a Python sequence")
        try:
            return base[idx]
        except Exception as ex:  # noqa: BLE001
            raise BadIndex(e, problem=f"cannot index {_describe(base)}: {ex}") from None

    def ex_BinOp(self, e):
        op = _BINOPS.get(type(e.op))
        a = self.eval(e.left)
        b = self.eval(e.right)
        return self.binop(op, a, b, e)

    def ex_UnaryOp(self, e):
        v = self.eval(e.operand)
        if isinstance(v, TileInfo):
            if not isinstance(e.op, (ast.USub, ast.UAdd)):
                raise TileArithmetic(e, what="a tile")
            v = self.tile_attr(v, "index", e)  # -tile: its indices negated, like tile + start
        if not isinstance(v, Node):
            if isinstance(e.op, ast.Not):
                return not v
            if isinstance(e.op, ast.USub):
                return -v
            if isinstance(e.op, ast.UAdd):
                return +v
            return ~v
        if isinstance(e.op, ast.UAdd):
            return v
        if isinstance(e.op, ast.USub):
            return self.unary("neg", v, e)
        if isinstance(e.op, ast.Not):
            if v.dims:
                raise BlockDecision(e, what="`not`", dims=_dims_text(v.dims), hint="use ~mask or torch.logical_not")
            return self.binop("eq", v, 0 if v.dtype != torch.bool else False, e)
        if v.dtype == torch.bool:
            return self.binop("eq", v, False, e)
        if v.dtype.is_floating_point:
            raise OperandDtype(e, op="~", dtype="floating-point", why="")
        n = Node("unary", [v], dims=v.dims, dtype=v.dtype, attrs={"fn": "invert"}, weak=v.weak)
        return self.emit(n)

    def ex_Compare(self, e):
        left = self.eval(e.left)
        result = None
        for op, right_node in zip(e.ops, e.comparators):
            right = self.eval(right_node)
            if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                if isinstance(left, Node) or isinstance(right, Node):
                    raise UnsupportedExpression(e, what="is / in on values of the kernel")
                r = {ast.Is: operator.is_, ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
                     ast.NotIn: lambda a, b: a not in b}[type(op)](left, right)
            else:
                r = self.binop(_CMPOPS[type(op)], left, right, e)
            result = r if result is None else self.logical("and", result, r, e)
            left = right
        return result

    def ex_BoolOp(self, e):
        is_and = isinstance(e.op, ast.And)
        vals = []
        for x in e.values:
            v = self.eval(x)
            if not isinstance(v, Node):
                if is_and and not v:
                    return v
                if not is_and and v:
                    return v
                if not vals:
                    vals.append(v)
                continue
            vals.append(v)
        nodes = [v for v in vals if isinstance(v, Node)]
        if not nodes:
            return vals[-1] if vals else (True if is_and else False)
        out = nodes[0]
        for v in nodes[1:]:
            out = self.logical("and" if is_and else "or", out, v, e)
        return out

    def logical(self, kind, a, b, src):
        if not isinstance(a, Node) and not isinstance(b, Node):
            return (a and b) if kind == "and" else (a or b)
        a = self.to_bool(a, src)
        b = self.to_bool(b, src)
        return self.binop(kind, a, b, src)

    def to_bool(self, v, src):
        if isinstance(v, Node):
            return v if v.dtype == torch.bool else self.binop("ne", v, 0, src)
        return bool(v)

    def ex_IfExp(self, e):
        c = self.eval(e.test)
        if isinstance(c, Node) and c.host_value is not None:
            for g in c.guards:
                self.guard(*g)
            c = c.host_value
        if not isinstance(c, Node):
            return self.eval(e.body) if c else self.eval(e.orelse)
        if not c.dims:
            self.check_not_per_tile(c, e.test, "a conditional expression (`a if cond else b`)")
        return self.where(c, self.eval(e.body), self.eval(e.orelse), e)

    def ex_Call(self, e):
        func = self.eval(e.func)
        args = []
        for a in e.args:
            if isinstance(a, ast.Starred):
                v = self.eval(a.value)
                if isinstance(v, (Node, TileInfo)):
                    raise Unpack(a, what=_describe(v))
                args.extend(v)
            else:
                args.append(self.eval(a))
        kwargs = {}
        for k in e.keywords:
            if k.arg is None:
                raise UnsupportedExpression(k, what="**kwargs")
            kwargs[k.arg] = self.eval(k.value)
        return self.call(func, args, kwargs, e)

    # ------------------------------------------------------------------ calls
    def call(self, func, args, kwargs, e):
        if isinstance(func, _Method):
            return self.method(func.recv, func.name, args, kwargs, e)
        if isinstance(func, _HostMethod):
            return self.host_method(func.recv, func.name, args, kwargs, e)
        dt_name = _DT_FUNCS.get(id(func))
        if dt_name is not None:
            return self.dt_call(dt_name, args, kwargs, e)
        tname = _torch_name(func)
        if tname is not None and isinstance(func, types.FunctionType) and not _is_op_name(tname) and \
                _function_body(func) is not None:
            # a Python function of a library that is no op deuteron knows (torch's flex-attention `_identity`
            # score modifier, `noop_mask`): traced from its source like a helper; a problem inside it is reported
            # at this call (the library's file is not the kernel's)
            try:
                return self.inline(func, args, kwargs, e)
            except TraceError as ex:
                # the same cause (its class and data), moved to the call and naming the function
                where = getattr(ex.node, "lineno", None)
                ex.message = f"in {func.__module__}.{func.__qualname__}{f' (its line {where})' if where else ''}: " \
                             f"{ex.message}"
                ex.node = e
                raise
        if tname is not None:
            return self.torch_call(tname, args, kwargs, e)
        if func in (min, max) and any(isinstance(a, Node) for a in args):
            vals = list(args[0]) if len(args) == 1 else list(args)
            out = vals[0]
            for v in vals[1:]:
                out = self.binop("minimum" if func is min else "maximum", out, v, e)
            return out
        if func is abs and args and isinstance(args[0], Node):
            return self.unary("abs", args[0], e)
        if func in (float, int, bool) and args and isinstance(args[0], Node):
            self.check_not_per_tile(args[0], e, f"{func.__name__}()")
            return self.cast(args[0], {float: torch.float32, int: torch.int32, bool: torch.bool}[func])
        if func is len and args and isinstance(args[0], TileInfo):
            raise TileAsNumber(e, what="len()'s argument", hint="use tile.end - tile.begin or tile.block_size")
        if isinstance(func, type) and issubclass(func, BaseException):
            return func(*args, **kwargs)
        if any(isinstance(a, TileInfo) for a in args) and func in (int, float, range, len, bool, str):
            raise TileAsNumber(e, what="a Python number", hint="use tile.begin / tile.end")
        if isinstance(func, types.FunctionType) and not _is_library(func):
            return self.inline(func, args, kwargs, e)
        allv = list(args) + list(kwargs.values())
        if any(isinstance(a, Node) for a in allv) and \
                all(not isinstance(a, Node) or (a.op == "param" and not a.dims and a.host_value is not None)
                    for a in allv) and not any(isinstance(a, (TileInfo, HostTensor)) for a in allv):
            # a host function of run-time scalars that came from the host (math.sqrt(scale)): called on their
            # values, which the program then depends on (guarded: a changed value traces again)
            for a in allv:
                if isinstance(a, Node):
                    for gd in a.guards:
                        self.guard(*gd)
            args = [a.host_value if isinstance(a, Node) else a for a in args]
            kwargs = {k: a.host_value if isinstance(a, Node) else a for k, a in kwargs.items()}
            allv = []
        if any(isinstance(a, (Node, TileInfo, HostTensor)) for a in allv):
            name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
            raise HostCall(e, problem=f"{name}() cannot be called on values inside a tile loop")
        try:
            return func(*args, **kwargs)
        except TraceError:
            raise
        except Exception as ex:  # noqa: BLE001
            raise HostCall(e, problem=f"calling {getattr(func, '__name__', func)!r} while compiling the kernel failed: "
                                       f"{type(ex).__name__}: {ex}") from None

    def inline(self, fn, args, kwargs, e):
        """A user helper: its body is traced at the call site."""
        if self._inline_depth > 16:
            raise HelperFunction(e, name=getattr(fn, "__name__", "?"),
                                 problem="helper functions nest too deeply (recursion?)")
        body = _function_body(fn)
        if body is None:
            raise HelperFunction(e, name=fn.__name__, problem="cannot read its source to compile it")
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as ex:
            raise HelperFunction(e, name=fn.__name__, problem=str(ex)) from None
        bound.apply_defaults()
        saved_env, saved_host, saved_globals, saved_cache = self.env, self.host, self.globals, self._host_cache
        saved_captured = self._captured
        self.env = dict(bound.arguments)
        self.host = {}
        self.globals = dict(fn.__globals__)
        origin = self._fn_origin.get(id(fn))
        gorigin = self._fn_gorigin.get(id(fn))
        gorigin = gorigin[1] if gorigin is not None and gorigin[0] is fn else None
        saved_gcaptured = self._gcaptured
        self._captured = {}
        self._gcaptured = {}
        if origin is not None:
            self._captured = {nm: ("fnglobal", origin, nm) for nm in fn.__code__.co_names}
        elif gorigin is not None:  # a helper reached through a global: what it reads is fetched through it
            self._gcaptured = {nm: ("fnglobal", gorigin, nm) for nm in fn.__code__.co_names}
        if fn.__closure__:
            for nm, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.globals[nm] = cell.cell_contents
                except ValueError:
                    continue
                if origin is not None:
                    self._captured[nm] = ("cell", origin, nm)
                elif gorigin is not None:
                    self._gcaptured[nm] = ("cell", gorigin, nm)
        self._host_cache = {}
        self._inline_depth += 1
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        result = None
        # a helper of another file: its statements' line numbers are not the kernel file's, so what it emits is
        # placed at the call (the generated code's `# line N:` comments) and its errors move there, naming it
        foreign = self._foreign_call is None and not _same_file(fn, self.src)
        if foreign:
            self._foreign_call = e
        try:
            self.stmts(body)
        except _Return as r:
            result = r.value
        except TraceError as err:
            if foreign:
                line = getattr(err.node, "lineno", None)
                err.message += f" (in {fn.__qualname__}, {_source_path(fn)}" + (f":{line})" if line else ")")
                err.node = e
            raise
        finally:
            if foreign:
                self._foreign_call = None
            self._inline_depth -= 1
            self.env, self.host, self.globals, self._host_cache = saved_env, saved_host, saved_globals, saved_cache
            self._captured = saved_captured
            self._gcaptured = saved_gcaptured
        return result

    def host_method(self, ht: HostTensor, name, args, kwargs, e):
        t = ht.t
        if name == "size":
            if not args:
                return tuple(self.size_of(ht, d) for d in range(t.dim()))
            d = self.static_int(args[0], e, "a dimension")
            return self.size_of(ht, d % t.dim())
        if name == "stride":
            if not args:
                return tuple(self.size_of(ht, d, "stride") for d in range(t.dim()))
            d = self.static_int(args[0], e, "a dimension")
            return self.size_of(ht, d % t.dim(), "stride")
        if name == "dim":
            return t.dim()
        if name == "numel":
            return t.numel()
        if name in ("new_zeros", "new_empty", "new_ones", "new_full"):
            # a block shaped by tiles, with the tensor's dtype (LayerNorm / RMSNorm backward kernels)
            hook = _NEW_BLOCK.get(name)
            fake = Node("const", dims=(), dtype=t.dtype, attrs={"value": 0})
            return self.method(fake, hook, args, kwargs, e, canonical=True)
        raise WholeTensor(e, name=f"{ht.name}.{name}()", what="", hint=f"index it with tiles first: {ht.name}[tile]")

    # ------------------------------------------------------------------ indexing
    def index_items(self, ht: HostTensor, slice_node, e):
        raw = self.eval(slice_node)
        idx = list(raw) if isinstance(raw, tuple) else [raw]
        flat = []
        for it in idx:
            if isinstance(it, (tuple, list)) and all(isinstance(x, (TileInfo, Node, int, slice, type(None)))
                                                     for x in it):
                flat.extend(it)
            else:
                flat.append(it)
        return self.items_for(ht, flat, e)

    def items_for(self, ht: HostTensor, flat: list, e, clip: bool = False):
        """The index items of ``ht[flat]``; ``clip``: a tile may run past the end (``dt.load``: read as 0 there,
        an item ``("tile", t, d, size)``)."""
        self._clip = clip
        try:
            return self._items_for(ht, flat, e)
        finally:
            self._clip = False

    def _items_for(self, ht: HostTensor, flat: list, e):
        rank = ht.t.dim()
        n_real = sum(1 for it in flat if it is not None and it is not Ellipsis)
        if any(it is Ellipsis for it in flat):
            pos = flat.index(Ellipsis)
            flat = flat[:pos] + [slice(None)] * (rank - n_real) + flat[pos + 1:]
            n_real = rank
        if n_real != rank:
            parts = []
            for it in flat:
                parts.append(_index_text(it))
            raise IndexRank(e, what=ht.name, rank=rank, shape=f" (shape {tuple(ht.t.shape)})", count=n_real,
                            plural="ex" if n_real == 1 else "ices", items=f" [{', '.join(parts)}]")
        items = []
        d = 0
        for it in flat:
            if it is None:
                items.append(("none",))
                continue
            size = ht.t.shape[d]
            if isinstance(it, TileInfo):
                items.append(self._tile_item(ht, it, d, size, e))
            elif isinstance(it, slice):
                if it.start is None and it.stop is None and it.step is None:
                    sz = self.size_of(ht, d)
                    r = self.rdim(int(ht.t.shape[d]), sz, e)
                    items.append(("red", r, d))
                else:
                    items.append(self._bounded_slice(ht, it, d, e))
            elif isinstance(it, bool):
                raise BadIndex(e, problem="indexing with a bool")
            elif isinstance(it, int):
                if not -size <= it < max(size, 1):
                    raise BadIndex(e, problem=f"index {it} is out of range for dimension {d} of {ht.name} "
                                              f"(size {size})")
                items.append(("scalar", it % size if size else it, d))
            elif isinstance(it, Node):
                if not _is_int_dtype(it.dtype):
                    raise BadIndex(e, problem=f"indexing {ht.name} with a {it.dtype} value (indices must be ints)")
                if it.op == "tile_index":
                    items.append(self._tile_item(ht, it.attrs["tile"], d, size, e))
                elif it.dims:
                    items.append(("vec", it, d))
                else:
                    items.append(("scalar", it, d))
            elif isinstance(it, HostTensor):
                raise BadIndex(e, problem=f"indexing with the tensor {it.name}: load it with tiles first")
            else:
                raise BadIndex(e, problem=f"cannot index {ht.name} with {_describe(it)}")
            d += 1
        return items

    def _bounded_slice(self, ht: HostTensor, it: slice, d: int, e):
        """``x[tile, a:b]``: a whole dimension of ``b - a`` elements starting at ``a`` (bounds known when compiling:
        ints, sizes with static shapes); ``("red", rdim, d, a)``.  ``x[tile, s:s + C]`` with a scalar ``s`` of the
        kernel (``tile.begin * 2``) and ``C`` known when compiling: ``("red", rdim, d, s, size)``, masked by the
        dimension's ``size`` (lanes past the end read 0 and are not written)."""
        moving = self._moving_slice(ht, it, d, e)
        if moving is not None:
            return moving
        bounds = []
        for what, v in (("start", it.start), ("stop", it.stop), ("step", it.step)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise SliceBound(e, tensor=ht.name, what=what, value=_describe(v))
            bounds.append(v)
        if not self.static:
            raise SliceBound(e, tensor=ht.name, what="bounds", value="sizes passed at run time (static_shapes=False)")
        size = int(ht.t.shape[d])
        start, stop, step = slice(*bounds).indices(size)
        if step != 1:
            raise SliceBound(e, tensor=ht.name, what="step", value=str(step))
        n = stop - start
        if n < 1:
            raise SliceBound(e, tensor=ht.name, what="range", value=f"{start}:{stop} (empty)")
        r = self.rdim(n, n, e)
        return ("red", r, d, start) if start else ("red", r, d)

    def _moving_slice(self, ht: HostTensor, it: slice, d: int, e):
        """``x[..., s + c0 : s + c1]`` with the same scalar ``s`` of the kernel in both bounds and ints ``c0 < c1``:
        ``c1 - c0`` elements from ``s + c0`` (None when neither bound is a kernel value)."""
        if not isinstance(it.start, Node) and not isinstance(it.stop, Node):
            return None
        if it.step not in (None, 1):
            raise SliceBound(e, tensor=ht.name, what="step", value=_describe(it.step))
        for what, v in (("start", it.start), ("stop", it.stop)):
            if isinstance(v, Node) and (v.dims or not _is_int_dtype(v.dtype)):
                raise SliceBound(e, tensor=ht.name, what=what,
                                 value=f"a {'block' if v.dims else v.dtype} value of the kernel")
        if it.start is None or it.stop is None:  # x[t, s:] / x[t, :s]: a length that moves too
            what = "start" if isinstance(it.start, Node) else "stop"
            raise SliceBound(e, tensor=ht.name, what=what, value=f"{_describe(getattr(it, what))} with an open "
                                                                  f"{'stop' if what == 'start' else 'start'} (a "
                                                                  f"moving slice is s : s + C)")
        b0, c0 = _linear(it.start)
        b1, c1 = _linear(it.stop)
        if b0 is None or b1 is not b0:
            raise MovingSlice(e, tensor=ht.name, problem=f"start {_describe(it.start)} and stop "
                                                         f"{_describe(it.stop)} do not differ by an int known "
                                                         f"when compiling")
        n = c1 - c0
        if n < 1:
            raise SliceBound(e, tensor=ht.name, what="range", value=f"of {n} elements (empty)")
        start = it.start if isinstance(it.start, Node) else self.binop("add", b0, c0, e)
        r = self.rdim(n, n, e)
        return ("red", r, d, start, self.size_of(ht, d))

    def _tile_item(self, ht: HostTensor, t: TileInfo, d: int, size: int, e):
        if getattr(self, "_clip", False):
            end = t.end if isinstance(t.end, int) else getattr(t.end, "host_value", None)
            if not (isinstance(end, int) and not isinstance(end, bool) and end <= size):
                return ("tile", t, d, self.size_of(ht, d))  # masked by the tensor's own bound too
            return ("tile", t, d)
        self._check_tile_fits(ht, t, d, size, e)
        return ("tile", t, d)

    def _check_tile_fits(self, ht: HostTensor, t: TileInfo, d: int, size: int, e):
        """A tile running past the end of the dimension it indexes: eager PyTorch would get a shorter slice
        (and fail to broadcast it), the kernel would read past the tensor."""
        end = t.end if isinstance(t.end, int) else getattr(t.end, "host_value", None)
        if isinstance(end, int) and not isinstance(end, bool) and end > size:
            raise TilePastEnd(e, tensor=ht.name, size=size, dim=d, tile=t.name, end=end)

    def check_not_per_tile(self, v, src, what: str):
        """``what`` decides in Python on a value computed from tiles: the kernel would decide per tile, PyTorch
        on the whole tensor -- a D004 (use torch.where)."""
        if not isinstance(v, Node):
            return
        if v.dims:
            raise BlockDecision(src, what=what, dims=_dims_text(v.dims))
        if _per_tile_source(v) is not None:
            raise PerTileDecision(src, what=what)
        t = _tunable_tile_bound(v)
        if t is not None:
            raise TileBoundDecision(src, what=what, tile=t.name)

    def _strides(self, ht: HostTensor, items):
        """Dynamic shapes: the strides the access uses are run-time parameters."""
        if self.static:
            return
        for it in items:
            if it[0] != "none":
                self.size_of(ht, it[2], "stride")

    def _items_dims(self, items):
        dims = []
        for it in items:
            k = it[0]
            if k == "none":
                dims.append(ONE)
            elif k in ("tile", "red"):
                dims.append(it[1])
            elif k == "vec":
                dims.extend(it[1].dims)
        return tuple(dims)

    def load(self, ht: HostTensor, items, e, extra_mask=None, eviction=None) -> Node:
        dims = self._items_dims(items)
        self._check_unique_dims(dims, e)
        ht.arg.loaded = True
        self._strides(ht, items)
        attrs = {"tensor": ht.arg, "items": items}
        if eviction:
            attrs["eviction"] = eviction
        n = Node("load", [extra_mask] if extra_mask is not None else [], dims=dims, dtype=ht.t.dtype, attrs=attrs,
                 pad=0)
        self.prog.dims_used.add(dims)
        return self.emit(n)

    def _check_unique_dims(self, dims, e):
        seen = set()
        for d in dims:
            if isinstance(d, TileInfo):
                if d.id in seen:
                    raise TileIndexing(e, problem=f"tile {d.name!r} indexes two dimensions of the same access")
                seen.add(d.id)

    def store(self, ht: HostTensor, items, v, e, extra_mask=None):
        dims = self._items_dims(items)
        if isinstance(v, TileInfo):
            raise TileIndexing(e, problem="storing a tile", hint="store tile.index")
        if isinstance(v, HostTensor):
            raise WholeTensor(e, name=v.name, what=" (stored as a value)")
        if not isinstance(v, (Node, bool, int, float)):
            raise OperandKind(e, op="a store", got=_describe(v))
        if isinstance(v, Node):
            self._check_store_dims(v.dims, dims, ht, e)
        ht.arg.stored = True
        self._strides(ht, items)
        n = Node("store", [v] if extra_mask is None else [v, extra_mask], dims=(), dtype=None,
                 attrs={"tensor": ht.arg, "items": items, "dims": dims})
        self.prog.dims_used.add(dims)
        self.emit(n)

    def _check_store_dims(self, vdims, dims, ht, e):
        if len(vdims) > len(dims):
            raise StoreShape(e, value=_dims_text(vdims), target=f"{ht.name}[{_dims_text(dims)[1:-1]}]",
                             hint="the value has more dimensions than the indexed region")
        for a, b in zip(reversed(vdims), reversed(dims)):
            if a is ONE or same_dim(a, b):
                continue
            raise StoreShape(e, value=_dims_text(vdims), target=f"{ht.name}[{_dims_text(dims)[1:-1]}]")

    def block_index(self, v: Node, slice_node, e):
        raw = self.eval(slice_node)
        return self.block_index_items(v, list(raw) if isinstance(raw, tuple) else [raw], e)

    def block_index_items(self, v: Node, idx: list, e):
        """``v[idx]`` for a block: ``:`` keeps a dimension, None adds one of 1, ``...`` the ones not named."""
        real = [it for it in idx if it is not None and it is not Ellipsis]
        if any(not (isinstance(it, slice) and it == slice(None)) for it in real):
            raise BadIndex(e, problem="indexing a block inside the kernel: only `:` and None are supported",
                             hint="e.g. v[:, None]")
        if Ellipsis in idx:
            pos = idx.index(Ellipsis)
            idx = idx[:pos] + [slice(None)] * (len(v.dims) - len(real)) + idx[pos + 1:]
            real = [it for it in idx if it is not None]
        if len(real) > len(v.dims):
            raise IndexRank(e, what="a block", rank=len(v.dims), shape="", count=len(real),
                            plural="ex" if len(real) == 1 else "ices", items="")
        idx = idx + [slice(None)] * (len(v.dims) - len(real))
        out = v
        pos = 0
        for it in idx:
            if it is None:
                out = self.expand_dims(out, pos, e)
            pos += 1
        return out

    # ------------------------------------------------------------------ elementwise


def _linear(v):
    """``v`` as ``(base, c)``: ``base + c`` with ``base`` a scalar Node (or None) and ``c`` an int, through the
    additions and subtractions of ints the tracer keeps as nodes."""
    if isinstance(v, bool):
        return None, None
    if isinstance(v, int):
        return None, int(v)
    if not isinstance(v, Node):
        return None, None
    if v.op == "binary" and v.attrs.get("op") in ("add", "sub") and len(v.args) == 2:
        a, b = v.args
        if isinstance(b, int) and not isinstance(b, bool):
            base, c = _linear(a)
            if base is not None:
                return base, c + (b if v.attrs["op"] == "add" else -b)
        if isinstance(a, int) and not isinstance(a, bool) and v.attrs["op"] == "add":
            base, c = _linear(b)
            if base is not None:
                return base, c + a
    return v, 0


def _is_op_name(tname) -> bool:
    """A torch / functional name in deuteron's op tables (supported or known unsupported, like torch.cat)."""
    kind, name = tname
    table = ops.FUNCTIONAL if kind == "F" else ops.TORCH_FUNCTIONS
    return name in table or name in ops.TENSOR_METHODS


def _source_path(fn) -> str:
    try:
        return inspect.getsourcefile(fn) or fn.__code__.co_filename
    except TypeError:
        return fn.__code__.co_filename


def _same_file(fn, src) -> bool:
    """Whether helper ``fn`` is defined in the kernel's file (``src``: its SourceInfo)."""
    import os
    if src is None:
        return True
    try:
        return os.path.realpath(_source_path(fn)) == os.path.realpath(src.path)
    except (TypeError, ValueError):
        return True


def _function_body(fn):
    """The statements of a helper's body with the line numbers of its file: a ``def`` (its body) or a
    lambda, also one spread over several lines or one of several on a line (``[Return(its expression)]``).
    None when the source cannot be read."""
    import linecache
    code = fn.__code__
    try:
        path = inspect.getsourcefile(fn) or code.co_filename
    except TypeError:
        return None
    text = "".join(linecache.getlines(path))
    if not text:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    line = code.co_firstlineno
    if fn.__name__ == "<lambda>":
        params = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        cands = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == line]
        exact = [n for n in cands if [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs]
                 == params]
        cands = exact or cands
        if not cands:
            return None
        if len(cands) > 1:
            pos = next(iter(code.co_positions()), None) if hasattr(code, "co_positions") else None
            col = pos[2] if pos and pos[2] is not None else None
            if col is not None:
                inside = [n for n in cands if n.body.col_offset <= col and (n.end_lineno, n.end_col_offset) >= (
                    pos[1] or line, col)]
                cands = inside or cands
        lam = cands[0]
        ret = ast.Return(value=lam.body)
        ast.copy_location(ret, lam.body)
        return [ret]
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn.__name__ and (
                n.lineno == line or (n.decorator_list and n.decorator_list[0].lineno == line)):
            return n.body
    return None


#: host tensor methods that make a new block inside a tile loop -> their torch hook
_NEW_BLOCK = {"new_zeros": "new_zeros", "new_empty": "new_zeros", "new_ones": "new_ones", "new_full": "new_full"}


def _tunable_tile_bound(v: Node):
    """The tile whose ``begin`` / ``end`` / ``id`` / ``count`` / ``block_size`` ``v`` is computed from, where that
    tile's block size is tunable (the kernel's tiles then depend on the config while ``kernel.ref`` runs the
    whole loop as one tile), or None."""
    seen, stack = set(), [v]
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if n.op in ("tile_begin", "tile_end", "tile_id", "tile_count", "tile_block_size"):
            t = n.attrs["tile"]
            if t.kind == "tile" and t.slot is not None:
                return t
        stack.extend(n.operands())
    return None
