"""Calls in a kernel body: ``nl.*`` builtins, Python builtins on compile-time values, inlined jit helpers.

``CallBinder`` binds a call's arguments and dispatches it: to an op rule (``ops.py``), a Python
builtin folded at compile time, a plain function, or a ``@jit`` helper it inlines in a new frame.
"""

from __future__ import annotations

import ast
import builtins as pybuiltins
import difflib
import types as pytypes

from newt.ir.types import SymDim, SymDType
from newt.language import core as lc

from .context import BuilderPart
from .exprs import _PY_BUILTIN_FUNCS
from .frame import FLAG_RET, MAX_INLINE_DEPTH, RETVAL, Frame
from .semantic import SemError
from .values import (
    AV,
    Const,
    DescV,
    JitRef,
    JitSource,
    Method,
    Opaque,
    PyFunc,
    Sym,
    TensorV,
    TupleV,
    Undef,
    from_python,
    is_namedtuple_class,
)


class CallBinder(BuilderPart):
    """Binds and dispatches calls: op rules, Python builtins, plain functions, inlined ``@jit`` helpers."""

    def expr_Call(self, node):
        func = self.exprs.expr(node.func)
        args, arg_nodes = [], []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.exprs.expr(a.value)
                if isinstance(v, TupleV):
                    args.extend(v.items)
                    arg_nodes.extend([a] * len(v.items))
                    continue
                if isinstance(v, Const) and isinstance(v.value, (tuple, list)):
                    args.extend(Const(x) for x in v.value)
                    arg_nodes.extend([a] * len(v.value))
                    continue
                if isinstance(v, Opaque):
                    return Opaque()
                raise SemError("N002", "only tuples can be unpacked with * in a call")
            args.append(self.exprs.expr(a))
            arg_nodes.append(a)
        kwargs, kw_nodes = {}, {}
        for k in node.keywords:
            if k.arg is None:
                raise SemError("N002", "'**' arguments are not supported inside a kernel")
            kwargs[k.arg] = self.exprs.expr(k.value)
            kw_nodes[k.arg] = k.value
        return self.call(func, args, kwargs, node, arg_nodes, kw_nodes)

    def call(self, func: AV, args, kwargs, node, arg_nodes, kw_nodes) -> AV:
        if isinstance(func, Opaque) and func.reason:
            # a value the front end found but cannot use (e.g. a Python object of an unknown type): calling it
            # would compile to nothing, so it is an error
            raise SemError("N006", f"a {func.reason} object cannot be called inside a kernel")
        if isinstance(func, (Opaque, Undef)):
            return Opaque()
        if isinstance(func, Method) and isinstance(func.self_av, DescV):
            from .rules.memory import desc_load, desc_store
            if kwargs:
                raise SemError("N005", f"descriptor .{func.name[5:]}() takes positional arguments only")
            if func.name == "desc_load":
                if len(args) != 1:
                    raise SemError("N005", "descriptor .load(offsets) takes one argument")
                return desc_load(self.api, func.self_av, args[0], node)
            if len(args) != 2:
                raise SemError("N005", "descriptor .store(offsets, value) takes two arguments")
            return desc_store(self.api, func.self_av, args[0], args[1], node)
        if isinstance(func, Method):
            name = lc.TENSOR_METHODS[func.name]
            return self.call_any(name, [func.self_av] + args, kwargs, node, [node] + arg_nodes, kw_nodes)
        if isinstance(func, JitRef):
            return self.inline(func.fn, args, kwargs, node, arg_nodes, kw_nodes)
        if isinstance(func, Const):
            obj = func.value
            bname = getattr(obj, "__newt_builtin__", None)
            if bname in ("range", "static_range"):
                raise SemError("N045", f"nl.{bname} can only be used as the iterable of a for loop")
            if bname is not None:
                return self.call_builtin(bname, args, kwargs, node, arg_nodes, kw_nodes)
            if obj is lc.constexpr:
                if len(args) != 1:
                    raise SemError("N005", "nl.constexpr takes one argument")
                if not isinstance(args[0], (Const, Sym, Opaque)):
                    raise SemError("N010", "nl.constexpr(...) needs a compile-time value", node=arg_nodes[0])
                return args[0]
            if getattr(obj, "__newt_tuple__", False) and isinstance(obj, type):  # nl.tuple(iterable)
                if kwargs or len(args) > 1:
                    raise SemError("N005", "nl.tuple takes one iterable")
                if not args:
                    return TupleV([])
                if isinstance(args[0], TupleV):
                    return TupleV(list(args[0].items))
                if isinstance(args[0], Const) and isinstance(args[0].value, (tuple, list)):
                    return TupleV([Const(x) for x in args[0].value])
                raise SemError("N023", "nl.tuple expects a tuple or list of values", node=arg_nodes[0])
            if obj is lc.pointer_type:
                if args and isinstance(args[0], Const) and isinstance(args[0].value, lc.dtype):
                    return Const(lc.pointer_type(args[0].value))
                raise SemError("N023", "nl.pointer_type expects a dtype")
            if isinstance(obj, lc.dtype):
                return self.dtype_call(obj, args, kwargs, node, arg_nodes)
            if obj in _PY_BUILTIN_FUNCS:
                return self.call_pybuiltin(obj, args, kwargs, node, arg_nodes)
            if isinstance(obj, pytypes.BuiltinFunctionType) and getattr(obj, "__module__", "") == "math":
                if all(isinstance(a, Const) for a in args) and not kwargs:
                    return Const(obj(*[a.value for a in args]))
                raise SemError("N006", f"math.{obj.__name__} runs only on compile-time values in a kernel",
                               hint="use nl.math functions on blocks")
            raise SemError("N006", f"{obj!r} cannot be called inside a kernel")
        if isinstance(func, PyFunc) and is_namedtuple_class(func.obj):
            return self.make_namedtuple(func.obj, args, kwargs, node)
        if isinstance(func, PyFunc):
            if func.trusted or isinstance(func.obj, pytypes.MethodType):
                vals = []
                for a in args:
                    py = _to_python(a)
                    if py is _NO:
                        break
                    vals.append(py)
                else:
                    kv = {k: _to_python(v) for k, v in kwargs.items()}
                    if _NO not in kv.values():
                        try:
                            return _from_py_result(func.obj(*vals, **kv))
                        except Exception as e:
                            raise SemError("N023", f"{func.name}: {e}") from None
                if any(isinstance(a, (Sym, Opaque)) for a in args):
                    return Opaque()
            has_block = any(isinstance(a, (TensorV, DescV)) for a in list(args) + list(kwargs.values()))
            if not has_block:
                # Triton's code generator calls any other Python function as it is, on the compile-time values
                # (``triton.cdiv(H, BLOCK)``, a helper of the user's module): so do we where we hold the function,
                # and where the analysis only knows its name the result is unknown
                return self.call_plain_function(func, args, kwargs)
            raise SemError("N006", f"{func.name!r} is a plain Python function and cannot be called inside a kernel"
                           + (" on block values" if has_block else ""),
                           hint=f"decorate {func.name} with @newt.jit to call it from a kernel")
        if isinstance(func, TensorV):
            raise SemError("N023", "a block value is not callable")
        raise SemError("N023", "this value is not callable")

    def call_plain_function(self, func: PyFunc, args, kwargs) -> AV:
        if not isinstance(func.obj, pytypes.FunctionType):
            return Opaque()
        vals = [_to_python(a) for a in args]
        kv = {k: _to_python(v) for k, v in kwargs.items()}
        if _NO in vals or _NO in kv.values():
            return Opaque()
        try:
            return _from_py_result(func.obj(*vals, **kv))
        except Exception as e:  # the user's function failed at compile time: say how
            raise SemError("N023", f"{func.name}() raised {type(e).__name__}: {e}") from None

    @staticmethod
    def isinstance_of(v: AV, cls: AV) -> bool:
        """``isinstance(v, cls)`` for a run-time value: a block is an ``nl.tensor``, a tuple a ``tuple`` (or
        ``nl.tuple``, or its named tuple class)."""
        if isinstance(cls, TupleV):
            return any(CallBinder.isinstance_of(v, c) for c in cls.items)
        c = cls.value if isinstance(cls, Const) else (cls.obj if isinstance(cls, PyFunc) else None)
        if not isinstance(c, type):
            raise SemError("N023", "isinstance() needs a class (or a tuple of classes) as its second argument")
        if isinstance(v, TensorV):
            return c is lc.tensor or c is object
        if isinstance(v, DescV):
            return c in (lc.tensor_descriptor, lc.tensor_descriptor_base, object)
        if isinstance(v, TupleV):
            if getattr(c, "__newt_tuple__", False) or c in (tuple, object):
                return True
            if v.ntype is not None:
                return issubclass(v.ntype, c)
            # a named tuple argument carries its field names only: the same fields are the same class
            return v.fields is not None and is_namedtuple_class(c) and tuple(c._fields) == v.fields  # type: ignore[attr-defined]
        return c is object

    def make_namedtuple(self, cls, args, kwargs, node) -> TupleV:
        """``Point(x, y=...)`` in a kernel: a named tuple of the values, in the class's field order."""
        fields = list(cls._fields)
        if len(args) > len(fields):
            raise SemError("N005", f"{cls.__name__} takes {len(fields)} fields, got {len(args)} values")
        vals = dict(zip(fields, args))
        for k, v in kwargs.items():
            if k not in fields:
                raise SemError("N005", f"{cls.__name__} has no field {k!r} (its fields: {', '.join(fields)})")
            if k in vals:
                raise SemError("N005", f"{cls.__name__}: field {k!r} given twice")
            vals[k] = v
        for f, dv in getattr(cls, "_field_defaults", {}).items():
            vals.setdefault(f, from_python(dv))
        missing = [f for f in fields if f not in vals]
        if missing:
            raise SemError("N005", f"{cls.__name__} is missing field{'s' if len(missing) > 1 else ''} "
                           f"{', '.join(repr(m) for m in missing)}")
        return TupleV([vals[f] for f in fields], ntype=cls)

    def call_any(self, name, args, kwargs, node, arg_nodes, kw_nodes):
        from newt.language import BUILTINS
        fn = BUILTINS.get(name)
        if getattr(fn, "__newt_inline__", False):
            from .values import jit_source_from_function
            return self.inline(jit_source_from_function(fn, lib=True), args, kwargs, node, arg_nodes, kw_nodes)
        return self.call_builtin(name, args, kwargs, node, arg_nodes, kw_nodes)

    def call_builtin(self, name, args, kwargs, node, arg_nodes, kw_nodes) -> AV:
        from .ops import RULES, bind, call_stub
        if name not in RULES:
            raise SemError("N004", f"nl.{name} is not supported yet")
        bound = bind(name, args, kwargs, arg_nodes, kw_nodes, node)
        return call_stub(self.api, name, bound, node)

    def call_pybuiltin(self, fn, args, kwargs, node, arg_nodes):
        name = fn.__name__
        if fn is pybuiltins.range:
            raise SemError("N045", "range(...) can only be used as the iterable of a for loop")
        if fn is pybuiltins.print:
            prefix = ""
            rest = list(args)
            if rest and isinstance(rest[0], Const) and isinstance(rest[0].value, str):
                prefix = rest.pop(0).value
            return self.call_builtin("device_print", [Const(prefix)] + rest, {}, node,
                                     [node] * (len(rest) + 1), {})
        if fn in (pybuiltins.getattr, pybuiltins.hasattr):
            return self.getattr_call(fn, args, node, arg_nodes)
        if fn in (pybuiltins.min, pybuiltins.max) and (
                "propagate_nan" in kwargs or any(isinstance(a, TensorV) for a in args)):
            return self.min_max_call(fn, args, kwargs, node, arg_nodes)
        if fn is pybuiltins.isinstance and len(args) == 2 and isinstance(args[1], (Const, TupleV, PyFunc)) and \
                isinstance(args[0], (TensorV, TupleV, DescV)):
            if isinstance(args[0], TensorV) and not self.ctx.spec.concrete and args[0].dtype == SymDType("?"):
                # a parameter of unknown kind (the generic check): a descriptor or a block, each specialization
                # knows which
                return Sym("isinstance(...)", True)
            return Const(self.isinstance_of(args[0], args[1]))
        if any(isinstance(a, (Opaque, Undef)) for a in args):
            return Opaque()
        if all(isinstance(a, Const) for a in args) and all(isinstance(v, Const) for v in kwargs.values()):
            try:
                return _from_py_result(fn(*[a.value for a in args], **{k: v.value for k, v in kwargs.items()}))
            except Exception as e:
                raise SemError("N023", f"{name}(): {e}") from None
        if fn is pybuiltins.len:
            a = args[0] if args else None
            if isinstance(a, TupleV):
                return Const(len(a.items))
            if isinstance(a, TensorV) and a.shape:
                d = a.shape[0]
                return Const(d) if isinstance(d, int) else Sym(d.expr)
        if fn in (pybuiltins.tuple, pybuiltins.list) and len(args) == 1 and isinstance(args[0], TupleV):
            return args[0]
        if fn in (pybuiltins.min, pybuiltins.max) and all(isinstance(a, (Const, Sym)) for a in args):
            return Sym(f"{name}(...)")
        if fn is pybuiltins.abs and len(args) == 1 and isinstance(args[0], TensorV):
            return self.call_builtin("abs", args, {}, node, arg_nodes, {})
        if fn is pybuiltins.float and args and isinstance(args[0], Sym) and not args[0].is_bool:
            # a compile-time float the generic check does not know (``float(BT)``): not the integer a bare unknown
            # constexpr stands for (``tl.log2(float(BT))`` takes a float), so unknown
            return Opaque()
        if fn in (pybuiltins.int, pybuiltins.float, pybuiltins.bool) and args and isinstance(args[0], Sym):
            return args[0]
        if any(isinstance(a, Sym) for a in args) and all(isinstance(a, (Const, Sym, TupleV)) for a in args):
            # a compile-time value the generic check does not know (``len(SHAPE)`` of a constexpr parameter)
            return Sym(f"{name}(...)", fn in (pybuiltins.bool, pybuiltins.isinstance))
        hint = None
        if fn in (pybuiltins.min, pybuiltins.max):
            hint = f"use nl.{'minimum' if fn is pybuiltins.min else 'maximum'}(a, b) for elementwise, " \
                   f"or nl.{name}(x, axis) to reduce"
        elif fn in (pybuiltins.int, pybuiltins.float, pybuiltins.bool):
            hint = f"use x.to(nl.{ {'int': 'int32', 'float': 'float32', 'bool': 'int1'}[name] })"
        raise SemError("N006", f"Python's {name}() only works on compile-time values inside a kernel", hint=hint)

    def dtype_call(self, dt, args, kwargs, node, arg_nodes) -> AV:
        """``nl.float32(x)``: a dtype called on one value makes a value of that type, as older Triton code does
        (``m = tl.float32(-float("inf"))``): a number becomes a scalar of ``dt`` (``nl.full([], x, dt)``), a
        run-time value is converted (``x.to(dt)``)."""
        if kwargs or len(args) != 1:
            raise SemError("N005", f"{dt!r}(x) takes one value")
        x = args[0]
        if isinstance(x, (Opaque, Undef)):
            return Opaque()
        if isinstance(x, TensorV):
            return self.call_builtin("cast", [x, Const(dt)], {}, node, [arg_nodes[0], node], {})
        if isinstance(x, (Const, Sym)) and (isinstance(x, Sym) or isinstance(x.value, (bool, int, float))):
            return self.call_builtin("full", [Const(()), x, Const(dt)], {}, node, [node, arg_nodes[0], node], {})
        raise SemError("N023", f"{dt!r}(x) needs a number or a scalar value", node=arg_nodes[0])

    def min_max_call(self, fn, args, kwargs, node, arg_nodes) -> AV:
        """``min(a, b, ...)`` / ``max(...)`` with a run-time value among the arguments, as Triton's code generator
        reads them (its ``builtin_min``/``builtin_max``): a left-to-right chain of ``nl.minimum`` /
        ``nl.maximum`` (any arity, constants mixed in, promoted as those are), NaN not propagated unless the
        deprecated ``propagate_nan=`` says so."""
        name = fn.__name__
        extra = set(kwargs) - {"propagate_nan"}
        if extra:
            raise SemError("N005", f"{name}() got an unexpected keyword argument {sorted(extra)[0]!r}")
        if len(args) < 2:
            raise SemError("N005", f"{name}() on run-time values needs at least 2 arguments, got {len(args)}",
                           hint=f"use nl.{name}(x, axis) to reduce a block")
        if any(isinstance(a, (Opaque, Undef)) for a in args):
            return Opaque()
        op = "minimum" if fn is pybuiltins.min else "maximum"
        kw = {"propagate_nan": kwargs["propagate_nan"]} if "propagate_nan" in kwargs else {}
        kw_nodes = {"propagate_nan": node} if kw else {}
        acc = args[0]
        for a, an in zip(args[1:], arg_nodes[1:]):
            acc = self.call_builtin(op, [acc, a], kw, node, [node, an], kw_nodes)
        if isinstance(acc, TensorV) and acc.shape:
            from newt.diagnostics import Severity
            self.ctx.report("N008", f"Python's {name}() on blocks is deprecated in Triton: use nl.{op}", node,
                            hint=f"use nl.{op}(a, b) for elementwise, or nl.{name}(x, axis) to reduce",
                            severity=Severity.WARNING)
        return acc

    def getattr_call(self, fn, args, node, arg_nodes) -> AV:
        """``getattr(obj, "name"[, default])`` and ``hasattr(obj, "name")`` with a compile-time name."""
        name = fn.__name__
        want = 2 if fn is pybuiltins.hasattr else (2, 3)
        if len(args) not in ((want,) if isinstance(want, int) else want):
            raise SemError("N005", f"{name}() takes {'2' if fn is pybuiltins.hasattr else '2 or 3'} arguments, "
                           f"got {len(args)}")
        attr = args[1]
        if isinstance(attr, (Opaque, Undef)):
            return Opaque()
        if not (isinstance(attr, Const) and isinstance(attr.value, str)):
            raise SemError("N010", f"the attribute name of {name}() must be a compile-time string",
                           node=arg_nodes[1] if len(arg_nodes) > 1 else node)
        has = self.exprs.has_attr(args[0], attr.value)
        if fn is pybuiltins.hasattr:
            return Sym(f"hasattr(..., {attr.value!r})", True) if has is None else Const(has)
        if has is False and len(args) == 3:
            return args[2]
        return self.exprs.getattr(args[0], attr.value, node)

    # -- inlining --------------------------------------------------------
    def inline(self, fn: JitSource, args, kwargs, node, arg_nodes, kw_nodes) -> AV:
        if len(self.ctx.frames) >= MAX_INLINE_DEPTH:
            raise SemError("N002", f"calls nest more than {MAX_INLINE_DEPTH} deep (recursion is not supported)")
        if any(fr.fn.node is fn.node for fr in self.ctx.frames):
            raise SemError("N002", f"{fn.name} calls itself; recursion is not supported inside kernels")
        params = fn.params
        fnode = fn.node
        defaults = list(fnode.args.defaults)
        n_nodef = len(params) - len(defaults)
        if len(args) > len(params):
            raise SemError("N005", f"{fn.name}() takes {len(params)} arguments but {len(args)} were given")
        bound: dict[str, AV] = {}
        for p, v in zip(params, args):
            bound[p.arg] = v
        pnames = [p.arg for p in params]
        for k, v in kwargs.items():
            if k not in pnames:
                sugg = difflib.get_close_matches(k, pnames, n=1)
                raise SemError("N005", f"{fn.name}() got an unexpected keyword argument {k!r}",
                               hint=f"did you mean {sugg[0]!r}?" if sugg else None, node=kw_nodes.get(k))
            if k in bound:
                raise SemError("N005", f"{fn.name}() got multiple values for argument {k!r}")
            bound[k] = v
        call_span = self.ctx.span(node)
        if not fn.lib:
            self.ctx.sources.setdefault(fn.src.path, fn.src.text)
        frame = Frame(fn, call_span, is_kernel=False)
        self.ctx.frames.append(frame)
        try:
            for i, p in enumerate(params):
                if p.arg not in bound:
                    if i >= n_nodef:
                        bound[p.arg] = self.exprs.expr(defaults[i - n_nodef], record=False)
                    else:
                        self.ctx.frames.pop()
                        try:
                            raise SemError("N005", f"{fn.name}() missing required argument {p.arg!r}")
                        finally:
                            self.ctx.frames.append(frame)
                # a helper's parameters take the values they are given, whatever their annotation: Triton binds a
                # run-time block passed to a parameter annotated nl.constexpr as that block (tutorial 06 passes
                # offs_m / offs_n so); only a kernel's own constexpr parameters must be compile-time values
                v = bound[p.arg]
                frame.scope[p.arg] = v
                self.ctx.note(p, v)
            frame.scope[FLAG_RET] = Const(False)
            self.statements.stmts(fnode.body)
            rv = frame.scope.get(RETVAL)
        finally:
            self.ctx.frames.pop()
        if rv is None or isinstance(rv, Undef):
            return Const(None)
        return rv


class _NoValue:
    pass


_NO = _NoValue()


def _to_python(av):
    if isinstance(av, Const):
        return av.value
    if isinstance(av, TupleV):
        items = [_to_python(x) for x in av.items]
        if any(i is _NO for i in items):
            return _NO
        return av.ntype(*items) if av.ntype is not None else tuple(items)
    return _NO


def _from_py_result(v):
    if isinstance(v, tuple):
        return TupleV([_from_py_result(x) for x in v], ntype=type(v) if is_namedtuple_class(type(v)) else None)
    if isinstance(v, SymDim):
        return Sym(v.expr)
    return Const(v)
