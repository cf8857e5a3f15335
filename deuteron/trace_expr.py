"""The tracer's expressions: names, attributes, calls (dispatched to the op entries of ``deuteron/ops/``) and
inlining of helpers."""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
import types

import torch

from . import language as L
from . import ops
from .errors import (
    BadAttribute,
    BadIndex,
    BlockDecision,
    CapturedTensor,
    HelperFunction,
    HostCall,
    NotInTileLoop,
    OperandDtype,
    OperandKind,
    PerTileDecision,
    TileArithmetic,
    TileAsNumber,
    TileBoundDecision,
    TileIndexing,
    TileNotIterated,
    TraceError,
    UnknownName,
    Unpack,
    UnsupportedConstruct,
    UnsupportedExpression,
    WholeTensor,
)
from .ops.elementwise import binop, cast, logical, unary, where
from .ops.memory import index_items, load
from .ops.shape import block_index, permute
from .optable import OPS, TILE_ATTR, has
from .program import (
    Node,
    RInfo,
    TileInfo,
)
from .trace_common import (
    _BINOPS,
    _CMPOPS,
    HostTensor,
    _describe,
    _dims_text,
    _HostMethod,
    _is_library,
    _MaxResult,
    _Method,
    _per_tile_source,
    _Return,
)

_DT_FUNCS: dict = {}


def _init_dt_funcs():
    stubs = ops.dt_stubs()
    for name in sorted(ops.DT_DEVICE | ops.DT_HOST_ONLY):
        _DT_FUNCS[id(stubs[name] if name in stubs else getattr(L, name))] = name


_init_dt_funcs()

_TORCH_NAMES: dict = {}


def _init_torch_names():
    import torch.nn.functional as F
    for name in ops.TORCH_FUNCTIONS:
        f = getattr(torch, name, None)
        if f is not None:
            _TORCH_NAMES.setdefault(id(f), ("torch", name))
    for name in ops.FUNCTIONAL:
        f = getattr(F, name, None)
        if f is not None:
            _TORCH_NAMES.setdefault(id(f), ("F", name))
    for name in ops.TENSOR_METHODS:
        f = getattr(torch.Tensor, name, None)
        if f is not None and name in ops.TORCH_FUNCTIONS:
            _TORCH_NAMES.setdefault(id(f), ("torch", name))


_init_torch_names()


def _torch_name(func):
    r = _TORCH_NAMES.get(id(func))
    if r is not None:
        return r
    mod = getattr(func, "__module__", None) or ""
    name = getattr(func, "__name__", None)
    if name and (mod.startswith("torch") or mod == "torch._C._nn" or mod == "torch._C._VariableFunctions"):
        if mod.startswith("torch.nn.functional") or mod == "torch._C._nn":
            return ("F", name)
        if name in ops.TORCH_FUNCTIONS:
            return ("torch", name)
        return ("torch", name)
    return None



_NO_VALUE = object()


def _is_library_module(m) -> bool:
    return (getattr(m, "__name__", "") or "").split(".")[0] in (
        "torch", "deuteron", "newt", "math", "builtins", "numpy", "triton", "functools", "operator", "helion")


class Evaluator:
    """Evaluates the expressions of a tile loop body for its ``Tracer`` (``self.tr``, the shared state: the
    program being built, the environment, the host values): names, attributes, operators and calls, each call
    dispatched to its op entry (``deuteron/ops/``) with the tracer as the ops' context."""

    def __init__(self, tr):
        self.tr = tr

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
        if name in self.tr.env:
            return self.tr.env[name]
        if name in self.tr.host:
            return self.tr.host_value(name, self.tr.host[name], node)
        if name in self.tr.globals:
            v = self.tr.globals[name]
            src = self.tr._captured.get(name)
            if src is not None:  # captured by a callable argument: tensors become kernel arguments
                if isinstance(v, torch.Tensor):
                    key = ("captured",) + src
                    if key not in self.tr._host_cache:
                        self.tr._host_cache[key] = self.tr.tensor_arg(f"{src[1]}_{name}", v, src)
                    return self.tr._host_cache[key]
                return self.global_value(src, name, v, node)
            if isinstance(v, torch.Tensor):
                raise CapturedTensor(node, name=name)
            # the kernel's own global (fetched by name from its module at each launch), or one of a module-level
            # helper's globals / closure cells: a value baked into the code is guarded, a float is passed
            src = ("local", name) if self.tr._inline_depth == 0 else self.tr._gcaptured.get(name)
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
        hit = self.tr._global_cache.get(src, _NO_VALUE)
        if hit is not _NO_VALUE:
            return hit
        if isinstance(v, float):
            out = self.tr.scalar_param(name, v, src)
        elif isinstance(v, (bool, int, str, torch.dtype, type(None))):
            self.tr.guard(src, v)
            out = v
        elif isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
            if all(isinstance(x, (int, float, bool, str, type(None), torch.dtype)) for x in v):
                self.tr.guard(src, tuple(v))
            out = v
        elif isinstance(v, types.FunctionType) and not _is_library(v):
            self.tr.guard(src, v)
            if id(v) not in self.tr._fn_origin:
                self.tr._fn_gorigin[id(v)] = (v, src)
            out = v
        else:
            out = v
        self.tr._global_cache[src] = out
        return out

    def value_source(self, e):
        """Where the value of expression ``e`` (a name, a module attribute of one) is fetched from at a launch
        when it is a global of the kernel or of a module-level helper; None otherwise."""
        if isinstance(e, ast.Name):
            nm = e.id
            if nm in self.tr.env or nm in self.tr.host or nm not in self.tr.globals:
                return None
            if nm in self.tr._captured:
                return self.tr._captured[nm]
            return ("local", nm) if self.tr._inline_depth == 0 else self.tr._gcaptured.get(nm)
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
            return self.tr.tile_attr(base, a, e)
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
                return next((ta.tensor.device for ta in self.tr.prog.tensors.values()), torch.device("cpu"))
            if a in ("T", "mT"):
                return permute(self.tr, base, list(range(len(base.dims)))[::-1] if a == "T" else
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
            return tuple(self.tr.size_of(ht, d) for d in range(t.dim()))
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
            items = index_items(self.tr, base, e.slice, e)
            return load(self.tr, base, items, e)
        if isinstance(base, Node):
            return block_index(self.tr, base, e.slice, e)
        if isinstance(base, TileInfo):
            raise TileIndexing(e, problem="a tile cannot be indexed", hint="index a tensor with the tile: x[tile]")
        idx = self.eval(e.slice)
        if isinstance(idx, Node):
            idx = self.tr.static_int(idx, e.slice, "an index into a Python sequence")
        try:
            return base[idx]
        except Exception as ex:
            raise BadIndex(e, problem=f"cannot index {_describe(base)}: {ex}") from None

    def ex_BinOp(self, e):
        op = _BINOPS.get(type(e.op))
        a = self.eval(e.left)
        b = self.eval(e.right)
        return binop(self.tr, op, a, b, e)

    def ex_UnaryOp(self, e):
        v = self.eval(e.operand)
        if isinstance(v, TileInfo):
            if not isinstance(e.op, (ast.USub, ast.UAdd)):
                raise TileArithmetic(e, what="a tile")
            v = self.tr.tile_attr(v, "index", e)  # -tile: its indices negated, like tile + start
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
            return unary(self.tr, "neg", v, e)
        if isinstance(e.op, ast.Not):
            if v.dims:
                raise BlockDecision(e, what="`not`", dims=_dims_text(v.dims), hint="use ~mask or torch.logical_not")
            return binop(self.tr, "eq", v, 0 if v.dtype != torch.bool else False, e)
        if v.dtype == torch.bool:
            return binop(self.tr, "eq", v, False, e)
        if v.dtype.is_floating_point:
            raise OperandDtype(e, op="~", dtype="floating-point", why="")
        n = Node("unary", [v], dims=v.dims, dtype=v.dtype, attrs={"fn": "invert"}, weak=v.weak)
        return self.tr.emit(n)

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
                r = binop(self.tr, _CMPOPS[type(op)], left, right, e)
            result = r if result is None else logical(self.tr, "and", result, r, e)
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
            out = logical(self.tr, "and" if is_and else "or", out, v, e)
        return out

    def ex_IfExp(self, e):
        c = self.eval(e.test)
        if isinstance(c, Node) and c.host_value is not None:
            for g in c.guards:
                self.tr.guard(*g)
            c = c.host_value
        if not isinstance(c, Node):
            return self.eval(e.body) if c else self.eval(e.orelse)
        if not c.dims:
            self.check_not_per_tile(c, e.test, "a conditional expression (`a if cond else b`)")
        return where(self.tr, c, self.eval(e.body), self.eval(e.orelse), e)

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


    # ------------------------------------------------------------------ calls of ops (deuteron/ops/)
    def dt_call(self, name, args, kwargs, e):
        o = OPS.get(f"dt.{name}")
        if o is not None:
            return o.trace(self.tr, e, f"dt.{name}", args, kwargs)
        if name in ("tile", "grid"):
            raise TileNotIterated(e, op=name)
        if name in ops.DT_HOST_ONLY:
            raise NotInTileLoop(e, op=f"dt.{name}", why=": it belongs in the host code, before the tile loops",
                                hint="call it before the outermost `for ... in dt.tile(...)` and use the result")
        raise NotInTileLoop(e, op=f"dt.{name}", why="", hint="see docs/deuteron.md for the supported ops")

    def torch_call(self, tname, args, kwargs, e):
        kind, name = tname
        table = ops.FUNCTIONAL if kind == "F" else ops.TORCH_FUNCTIONS
        o = OPS.get(table.get(name))
        prefix = "torch.nn.functional." if kind == "F" else "torch."
        if o is None:
            raise NotInTileLoop(e, op=f"{prefix}{name}", why="", hint="see docs/deuteron.md for the supported ops")
        if not o.host_args and any(isinstance(a, HostTensor) for a in list(args) + list(kwargs.values())):
            ht = next(a for a in list(args) + list(kwargs.values()) if isinstance(a, HostTensor))
            raise WholeTensor(e, name=ht.name, what="")
        if o.first != "any":
            if args:
                args = [self._check_operand(args[0], name, o, e), *args[1:]]
            elif "input" in kwargs:
                kwargs = {**kwargs, "input": self._check_operand(kwargs["input"], name, o, e)}
        return o.trace(self.tr, e, f"{prefix}{name}", args, kwargs)

    def method(self, x, name, args, kwargs, e, canonical=False):
        """A tensor op on ``x`` (a Node) by canonical name or method name."""
        o = OPS.get(name if canonical else ops.TENSOR_METHODS.get(name))
        if o is None or o.stub is not None:
            raise NotInTileLoop(e, op=f".{name}()", why="", hint="see docs/deuteron.md for the supported ops")
        x = self._check_operand(x, name, o, e)
        return o.trace(self.tr, e, f".{name}()", [x, *args], kwargs)

    def _check_operand(self, x, name, o, e):
        if isinstance(x, TileInfo):
            raise TileAsNumber(e, what=f"the operand of {name}()", hint="use tile.index")
        if not isinstance(x, Node) and o.first != "number":
            if isinstance(x, (int, float)):
                return self.tr.const_node(x)
            raise OperandKind(e, op=f"{name}()", got=_describe(x))
        return x

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
                out = binop(self.tr, "minimum" if func is min else "maximum", out, v, e)
            return out
        if func is abs and args and isinstance(args[0], Node):
            return unary(self.tr, "abs", args[0], e)
        if func in (float, int, bool) and args and isinstance(args[0], Node):
            self.check_not_per_tile(args[0], e, f"{func.__name__}()")
            return cast(self.tr, args[0], {float: torch.float32, int: torch.int32, bool: torch.bool}[func])
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
                        self.tr.guard(*gd)
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
        except Exception as ex:
            raise HostCall(e, problem=f"calling {getattr(func, '__name__', func)!r} while compiling the kernel failed: "
                                       f"{type(ex).__name__}: {ex}") from None

    def inline(self, fn, args, kwargs, e):
        """A user helper: its body is traced at the call site."""
        if self.tr._inline_depth > 16:
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
        tr = self.tr
        saved_env, saved_host, saved_globals, saved_cache = tr.env, tr.host, tr.globals, tr._host_cache
        saved_captured = self.tr._captured
        self.tr.env = dict(bound.arguments)
        self.tr.host = {}
        self.tr.globals = dict(fn.__globals__)
        origin = self.tr._fn_origin.get(id(fn))
        gorigin = self.tr._fn_gorigin.get(id(fn))
        gorigin = gorigin[1] if gorigin is not None and gorigin[0] is fn else None
        saved_gcaptured = self.tr._gcaptured
        self.tr._captured = {}
        self.tr._gcaptured = {}
        if origin is not None:
            self.tr._captured = {nm: ("fnglobal", origin, nm) for nm in fn.__code__.co_names}
        elif gorigin is not None:  # a helper reached through a global: what it reads is fetched through it
            self.tr._gcaptured = {nm: ("fnglobal", gorigin, nm) for nm in fn.__code__.co_names}
        if fn.__closure__:
            for nm, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.tr.globals[nm] = cell.cell_contents
                except ValueError:
                    continue
                if origin is not None:
                    self.tr._captured[nm] = ("cell", origin, nm)
                elif gorigin is not None:
                    self.tr._gcaptured[nm] = ("cell", gorigin, nm)
        self.tr._host_cache = {}
        self.tr._inline_depth += 1
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        result = None
        # a helper of another file: its statements' line numbers are not the kernel file's, so what it emits is
        # placed at the call (the generated code's `# line N:` comments) and its errors move there, naming it
        foreign = self.tr._foreign_call is None and not _same_file(fn, self.tr.src)
        if foreign:
            self.tr._foreign_call = e
        try:
            self.tr.stmts(body)
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
                self.tr._foreign_call = None
            self.tr._inline_depth -= 1
            tr.env, tr.host, tr.globals, tr._host_cache = saved_env, saved_host, saved_globals, saved_cache
            self.tr._captured = saved_captured
            self.tr._gcaptured = saved_gcaptured
        return result

    def host_method(self, ht: HostTensor, name, args, kwargs, e):
        t = ht.t
        if name == "size":
            if not args:
                return tuple(self.tr.size_of(ht, d) for d in range(t.dim()))
            d = self.tr.static_int(args[0], e, "a dimension")
            return self.tr.size_of(ht, d % t.dim())
        if name == "stride":
            if not args:
                return tuple(self.tr.size_of(ht, d, "stride") for d in range(t.dim()))
            d = self.tr.static_int(args[0], e, "a dimension")
            return self.tr.size_of(ht, d % t.dim(), "stride")
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
    def check_not_per_tile(self, v, src, what: str):
        """``what`` decides in Python on a value computed from tiles: the kernel would decide per tile, PyTorch
        on the whole tensor -- a D004 (use torch.where).  A decision on where a tile of tunable block size starts
        or ends (``if tile.begin < n``) is the kernel's, as in Helion: it is compiled, and only ``kernel.ref``
        (which runs the loop as one tile) cannot stand for it -- recorded as the program's oracle gap."""
        if not isinstance(v, Node):
            return
        if v.dims:
            raise BlockDecision(src, what=what, dims=_dims_text(v.dims))
        if _per_tile_source(v) is not None:
            raise PerTileDecision(src, what=what)
        t = _tunable_tile_bound(v)
        if t is not None:
            self.tr.prog.oracle_gaps.append(TileBoundDecision(src, what=what, tile=t.name))

    # ------------------------------------------------------------------ elementwise


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
        if has(n, TILE_ATTR) and not n.dims:  # begin / end / id / count / block_size
            t = n.attrs["tile"]
            if t.kind == "tile" and t.slot is not None:
                return t
        stack.extend(n.operands())
    return None
