"""Expressions of a kernel body: names, attributes, subscripts, conditionals, conversions.

``ExpressionBuilder`` evaluates one expression to an abstract value; calls are ``CallBinder``'s
(``calls.py``), operator typing is in ``semantic.py``.
"""

from __future__ import annotations

import ast
import builtins as pybuiltins
import difflib
import math
import types as pytypes
from typing import Any

from newt import ir
from newt.ir.types import SymDType, block_of, dims_equal, numel, scalar_of, shape_of, type_str
from newt.language import core as lc

from . import semantic
from .context import BuilderPart
from .semantic import BINOP_NAMES, CMP_NAMES, SemError, broadcast_shapes, fmt_shape, literal_type, sym_text, wrap_int
from .typedconst import fold_binary, fold_unary, is_typed
from .values import AV, Const, DescV, JitRef, Method, Opaque, Poison, PyFunc, Sym, TensorV, TupleV, Undef

_PY_BUILTIN_FUNCS: set[Any] = {pybuiltins.range, pybuiltins.min, pybuiltins.max, pybuiltins.len, pybuiltins.int,
                     pybuiltins.float, pybuiltins.bool, pybuiltins.print, pybuiltins.abs, pybuiltins.tuple,
                     pybuiltins.list, pybuiltins.isinstance, pybuiltins.round, pybuiltins.str, pybuiltins.getattr,
                     pybuiltins.hasattr}
_PY_BUILTINS: dict[str, Any] = {f.__name__: f for f in _PY_BUILTIN_FUNCS}
_PY_BUILTINS.update({"True": True, "False": False, "None": None, "math": math})
_MODULE_ATTR_CACHE: dict = {}
_EXPR_DISPATCH: dict = {}


def _is_none(e) -> bool:
    return e is None or (isinstance(e, ast.Constant) and e.value is None)


class ExpressionBuilder(BuilderPart):
    """Evaluates expressions to abstract values (``values.py``) and converts them to IR values."""

    def expr(self, node, record: bool = True) -> AV:
        try:
            meth = _EXPR_DISPATCH.get(node.__class__)
            if meth is None:
                meth = getattr(type(self), "expr_" + type(node).__name__, None)
                if meth is not None:
                    _EXPR_DISPATCH[node.__class__] = meth
            if meth is not None:
                meth = meth.__get__(self)
            if meth is None:
                self.statements.unsupported(node)
                v = Opaque()
            else:
                v = meth(node)
        except SemError as e:
            self.ctx.report_sem(e, node)
            v = Opaque()
        except Poison:
            v = Opaque()
        except RecursionError:
            self.ctx.report("N002", "the expression is nested too deeply to analyze", node)
            v = Opaque()
        if record:
            self.ctx.note(node, v)
        return v

    def expr_Constant(self, node):
        if node.value is Ellipsis:
            raise SemError("N002", "'...' is not supported inside a kernel")
        if isinstance(node.value, bytes):
            raise SemError("N002", "bytes literals are not supported inside a kernel")
        if isinstance(node.value, complex):
            raise SemError("N002", "complex numbers are not supported inside a kernel")
        return Const(node.value)

    def expr_Name(self, node):
        return self.load_name(node.id, node)

    def load_name(self, name, node) -> AV:
        v = self.ctx.scope.get(name)
        if v is not None:
            if isinstance(v, Undef):
                self.ctx.report("N007", f"{name!r} may be undefined here: it is only assigned on some paths "
                                "(or only inside a loop)", node,
                                hint=f"assign {name} before the if/loop as well")
                return Opaque()
            return v
        g = self.ctx.frame.fn.env.lookup(name)
        if g is not None:
            return g
        if name in _PY_BUILTINS:
            return Const(_PY_BUILTINS[name])
        cands = list(self.ctx.scope) + list(_PY_BUILTINS)
        sugg = difflib.get_close_matches(name, [c for c in cands if not c.startswith("$")], n=1)
        self.ctx.report("N003", f"name {name!r} is not defined", node,
                        hint=f"did you mean {sugg[0]!r}?" if sugg else None)
        return Opaque()

    def expr_Attribute(self, node):
        base = self.expr(node.value)
        return self.getattr(base, node.attr, node)

    def getattr(self, base: AV, attr: str, node) -> AV:
        if isinstance(base, (Opaque, Undef)):
            return Opaque()
        if isinstance(base, Const) and base.typed is not None:
            if attr == "dtype":
                return Const(base.typed)
            # a number assigned to a name is a 0-d tensor in Triton (``bs = BLOCK_SIZE; bs.to(tl.uint32)``)
            base = TensorV(self.as_value(base, node))
        if isinstance(base, Const):
            obj = base.value
            if isinstance(obj, pytypes.ModuleType):
                if obj is lc and not hasattr(obj, attr):
                    # Triton's ``triton.language.core`` holds the whole language (``core.arange``, ``core.where``,
                    # ``tl.core.reshape``), as newt's drop-in has it: the language's names are found there
                    import newt.language as nl
                    obj = nl
                if not hasattr(obj, attr) or (attr.startswith("_") and
                                              attr not in getattr(obj, "__triton_private__", ())):
                    names = [n for n in dir(obj) if not n.startswith("_")]
                    sugg = difflib.get_close_matches(attr, names, n=1)
                    modname = obj.__name__.replace("newt.language", "nl")
                    self.ctx.report("N004", f"{modname} has no attribute {attr!r}", node,
                                    hint=f"did you mean {modname}.{sugg[0]}?" if sugg else None)
                    return Opaque()
                key = (obj.__name__, id(obj), attr)
                hit = _MODULE_ATTR_CACHE.get(key)
                if hit is None:
                    from .values import from_python
                    hit = from_python(getattr(obj, attr), lib=False)
                    if isinstance(hit, (Const, JitRef, PyFunc)):
                        _MODULE_ATTR_CACHE[key] = hit
                return hit
            if isinstance(obj, lc.dtype):
                if isinstance(obj, lc.pointer_type) and attr == "element_ty":
                    return Const(obj.element_ty)
                if attr in ("primitive_bitwidth", "int_bitwidth", "fp_mantissa_width", "name", "itemsize",
                            "exponent_bias"):
                    if obj.is_symbolic():
                        return Sym(f"{obj}.{attr}")
                    try:
                        return Const(getattr(obj, attr))
                    except TypeError as e:
                        raise SemError("N023", str(e)) from None
                if (attr.startswith("is_") or attr in ("get_int_max_value", "get_int_min_value")) and \
                        hasattr(obj, attr):
                    if obj.is_symbolic():
                        return Opaque()  # a dtype the generic check does not know: its predicates are unknown
                    return PyFunc(attr, getattr(obj, attr), trusted=True)
                if attr == "scalar":
                    return Const(obj)
                if _unknown_kind(obj):
                    return Opaque()  # the type of a parameter of unknown kind (maybe a pointer: .element_ty)
                self.ctx.report("N004", f"dtype {obj!r} has no attribute {attr!r}", node)
                return Opaque()
            if obj is lc.PropagateNan and attr in ("NONE", "ALL"):
                return Const(getattr(lc.PropagateNan, attr))
            if attr == "dtype" and isinstance(obj, (int, float, bool)):
                return Const(literal_type(obj))  # the type the literal takes as a value (Triton's rules)
            if isinstance(obj, (int, float, bool, str)) or obj is None:
                self.ctx.report("N004", f"{type(obj).__name__} value has no attribute {attr!r}", node)
                return Opaque()
            self.ctx.report("N004", f"{obj!r} has no attribute {attr!r}", node)
            return Opaque()
        if isinstance(base, Sym):
            return Opaque()
        if isinstance(base, TensorV):
            if attr == "dtype":
                return Const(base.dtype)
            if attr == "type":
                return Const(base.type)
            if attr == "shape":
                return TupleV([Const(d) if isinstance(d, int) else Sym(d.expr) for d in base.shape])
            if attr == "numel":
                n = 1
                for d in base.shape:
                    if not isinstance(d, int):
                        return Sym("numel")
                    n *= d
                return Const(n)
            if attr == "T":
                return self.calls.call_builtin("trans", [base], {}, node, [node.value], {})
            if attr in lc.TENSOR_METHODS:
                return Method(attr, base)
            if _unknown_kind(base.dtype):
                # a parameter the generic check knows nothing about (no annotation, not used as a pointer): it may
                # be a tensor descriptor or another object a launch passes; its attributes are unknown, not wrong
                return Opaque()
            names = sorted(set(lc.TENSOR_METHODS) | {"dtype", "shape", "T", "numel"})
            sugg = difflib.get_close_matches(attr, names, n=1)
            self.ctx.report("N004", f"block values have no attribute {attr!r}", node,
                            hint=f"did you mean .{sugg[0]}?" if sugg else None)
            return Opaque()
        if isinstance(base, DescV):
            if attr in ("load", "store"):
                return Method("desc_" + attr, base)
            if attr == "block_shape":
                return TupleV([Const(d) for d in base.block_shape])
            if attr == "dtype":
                return Const(base.dtype)
            if attr in ("shape", "strides"):
                return TupleV(list(getattr(base, attr)))
            self.ctx.report("N004", f"tensor descriptors have no attribute {attr!r}", node,
                            hint="a descriptor has .load(offsets), .store(offsets, value), .block_shape, .dtype")
            return Opaque()
        if isinstance(base, TupleV):
            hit = base.field(attr)
            if hit is not None:
                return hit
            if base.fields:
                sugg = difflib.get_close_matches(attr, list(base.fields), n=1)
                self.ctx.report("N004",
                                f"this named tuple has no field {attr!r} (its fields: {', '.join(base.fields)})",
                                node, hint=f"did you mean .{sugg[0]}?" if sugg else None)
                return Opaque()
            self.ctx.report("N004", f"tuples have no attribute {attr!r}", node)
            return Opaque()
        self.ctx.report("N004", f"this value has no attribute {attr!r}", node)
        return Opaque()

    def unsplat(self, v: TensorV, node) -> TensorV:
        """The one element of a block of one element, as a scalar (Triton's ``x.item()``)."""
        shape = v.shape
        n = numel(shape)
        if not shape:
            return v
        if n != 1:
            raise SemError("N033", f"only a block of one element converts to a scalar; this one has shape "
                           f"{fmt_shape(shape)}", hint="reduce it (nl.max, nl.sum) or index it with nl.where first")
        x = v.v
        if len(shape) > 1:
            x = self.ctx.emit("reshape", [x], [block_of(v.dtype, (1,))], {"shape": [1], "can_reorder": False},
                              node=node).result
        return TensorV(self.ctx.emit("reduce", [x], [v.dtype], {"axis": 0, "combine": "max"}, node=node).result)

    def has_attr(self, base: AV, attr: str) -> bool | None:
        """Python's ``hasattr`` on what the front end knows of ``base`` (None: unknown until specialized)."""
        if isinstance(base, (Opaque, Undef, Sym)):
            return None
        if isinstance(base, Const) and base.typed is not None:  # a 0-d tensor in Triton (typedconst.py)
            return attr in ("dtype", "type", "shape", "numel", "T") or attr in lc.TENSOR_METHODS
        if isinstance(base, Const):
            obj = base.value
            if isinstance(obj, pytypes.ModuleType):
                return hasattr(obj, attr) and not attr.startswith("_")
            if isinstance(obj, lc.dtype):
                return attr in ("primitive_bitwidth", "int_bitwidth", "fp_mantissa_width", "name", "itemsize",
                                "scalar", "exponent_bias", "get_int_max_value", "get_int_min_value") or \
                    (attr.startswith("is_") and hasattr(obj, attr)) or \
                    (attr == "element_ty" and isinstance(obj, lc.pointer_type))
            if isinstance(obj, (int, float, bool)) and attr == "dtype":
                return True
            return hasattr(obj, attr)
        if isinstance(base, TensorV):
            return attr in ("dtype", "type", "shape", "numel", "T") or attr in lc.TENSOR_METHODS
        return False

    def expr_Tuple(self, node):
        return TupleV([self.expr(e) for e in node.elts])

    expr_List = expr_Tuple

    def expr_JoinedStr(self, node):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                av = self.expr(v.value)
                if isinstance(av, Const):
                    spec = ""
                    if v.format_spec is not None:
                        fs = self.expr(v.format_spec)
                        spec = fs.value if isinstance(fs, Const) else ""
                    parts.append(format(av.value, spec))
                elif isinstance(av, TensorV):
                    parts.append(type_str(av.type))
                else:
                    parts.append("?")
        return Const("".join(parts))

    def expr_Subscript(self, node):
        base = self.expr(node.value)
        sl = node.slice
        if isinstance(base, (Opaque, Undef)):
            return Opaque()
        if isinstance(base, TupleV) or (isinstance(base, Const) and isinstance(base.value, (tuple, list, str))):
            items = base.items if isinstance(base, TupleV) else [Const(x) for x in base.value]
            if isinstance(sl, ast.Slice):
                parts = []
                for x in (sl.lower, sl.upper, sl.step):
                    if x is None:
                        parts.append(None)
                        continue
                    xv = self.expr(x)
                    if not isinstance(xv, Const):
                        raise SemError("N010", "tuple slices must use constexpr bounds")
                    parts.append(xv.value)
                r = items[slice(*parts)]
                return TupleV(r) if isinstance(base, TupleV) else Const(base.value[slice(*parts)])
            idx = self.expr(sl)
            if not isinstance(idx, Const) or not isinstance(idx.value, int):
                if isinstance(idx, Opaque):
                    return Opaque()
                raise SemError("N010", "tuples can only be indexed with a constexpr int")
            try:
                return items[idx.value]
            except IndexError:
                raise SemError("N032", f"index {idx.value} is out of range for a tuple of {len(items)}") from None
        if isinstance(base, TensorV):
            dt = base.dtype
            if not base.shape and (_unknown_kind(dt) or (dt.is_ptr() and isinstance(dt.element_ty, SymDType))):
                # a parameter the generic check knows nothing about, or only guesses is a pointer (it flows into a
                # load): a launch may pass a tuple (``res[0]``, ``res[i]`` in a static_range), so indexing it is
                # unknown
                self.expr(sl)
                return Opaque()
            return self.index_block(base, sl, node)
        if isinstance(base, Sym):
            return Opaque()
        raise SemError("N023", "this value cannot be indexed")

    def index_block(self, base: TensorV, sl, node) -> AV:
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        shape = list(base.shape)
        rank = len(shape)
        n_colon = 0
        new_dims = []  # positions of None in the output
        out_pos = 0
        for e in elts:
            if isinstance(e, ast.Constant) and e.value is None:
                new_dims.append(out_pos)
                out_pos += 1
            elif isinstance(e, ast.Slice) and all(_is_none(p) for p in (e.lower, e.upper, e.step)):
                n_colon += 1  # ':' (None bounds and steps, as in x[None:None:None], mean the same)
                out_pos += 1
            else:
                raise SemError("N002", "unsupported tensor index: blocks can only be indexed with ':' and None "
                               "(e.g. x[:, None])",
                               hint="to pick elements, compute pointers and use nl.load, or use nl.where")
        if n_colon > rank:  # (fewer are fine, as in Triton: x[None] of a [n] block is [1, n])
            raise SemError("N032", f"too many indices: {n_colon} ':' for a block of rank {rank}"
                           + (" (a scalar has rank 0)" if rank == 0 else ""),
                           hint=f"use at most {rank} ':' plus any number of None")
        v = base.v
        for pos in new_dims:
            v = self._expand_dims(v, pos, node)
        return TensorV(v)

    def _expand_dims(self, v, axis, node):
        shape = list(shape_of(v.type))
        shape.insert(axis, 1)
        return self.ctx.emit("expand_dims", [v], [block_of(scalar_of(v.type), shape)], {"axis": axis}, node=node).result

    def expr_IfExp(self, node):
        cond = self.expr(node.test)
        if isinstance(cond, Const):
            return self.expr(node.body) if cond.value else self.expr(node.orelse)
        if isinstance(cond, (Sym, Opaque, Undef)):
            self.ctx.speculative += 1
            try:
                a = self.expr(node.body)
                b = self.expr(node.orelse)
            finally:
                self.ctx.speculative -= 1
            if isinstance(a, TensorV) and isinstance(b, TensorV) and a.type == b.type:
                return a
            if isinstance(a, Const) and isinstance(b, Const) and a.value == b.value:
                return a
            return Opaque()
        if isinstance(cond, TensorV):
            if shape_of(cond.type) and numel(shape_of(cond.type)) == 1:
                cond = self.unsplat(cond, node.test)
            if shape_of(cond.type):
                raise SemError("N040", "a conditional expression needs a scalar condition; "
                               "for blocks use nl.where(cond, a, b)")
            if any(isinstance(n, ast.Call) for br in (node.body, node.orelse) for n in ast.walk(br)):
                return self.runtime_ifexp(cond, node)
            a = self.expr(node.body)
            b = self.expr(node.orelse)
            return self.calls.call_builtin("where", [cond, a, b], {}, node, [node.test, node.body, node.orelse], {})
        raise SemError("N023", "this value cannot be used as a condition")

    def runtime_ifexp(self, cond: TensorV, node) -> AV:
        """``a if c else b`` with a run-time ``c`` and calls in a branch: only the taken branch runs (an
        ``scf.if``, as Triton builds it), so stores in the branches happen once; void branches give None."""
        tmp = f"$ifexp{id(node)}"
        c = self.statements.to_bool(cond, node.test)

        def branch(expr_node):
            def run():
                v = self.expr(expr_node)
                if not (isinstance(v, Const) and v.value is None):
                    self.ctx.scope[tmp] = v
            return run

        self.statements.runtime_if(c, branch(node.body), branch(node.orelse), node)
        v = self.ctx.scope.pop(tmp, None)
        if v is None:
            return Const(None)
        if isinstance(v, Undef):
            raise SemError("N023", "one branch of this conditional expression has a value and the other has none")
        return v

    def expr_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        cur = self.expr(node.values[0])
        for vnode in node.values[1:]:
            if isinstance(cur, TupleV):  # a tuple is true when it is not empty, as in Python
                if bool(cur.items) != is_and:
                    return cur
                cur = self.expr(vnode)
                continue
            if isinstance(cur, Const):
                if bool(cur.value) != is_and:  # short-circuit
                    return cur
                cur = self.expr(vnode)
                continue
            nxt = self.expr(vnode)
            if isinstance(cur, (Opaque, Undef)) or isinstance(nxt, (Opaque, Undef)):
                return Opaque()
            if isinstance(cur, Sym) and isinstance(nxt, (Sym, Const)):
                cur = Sym(f"({cur.expr} {'and' if is_and else 'or'} {sym_text(nxt)})", True)
                continue
            a = self.statements.to_bool(cur, node)
            b = self.statements.to_bool(nxt, node) if not isinstance(nxt, Const) else \
                self.ctx.constant(bool(nxt.value), lc.int1)
            shape = broadcast_shapes(shape_of(a.type), shape_of(b.type))
            a = self.convert(a, lc.int1, shape, node)
            b = self.convert(b, lc.int1, shape, node)
            cur = TensorV(self.ctx.emit("and" if is_and else "or", [a, b], [a.type], node=node).result)
        return cur

    # ------------------------------------------------------------------
    # operators: typed by the rules in semantic.py (as Triton's _apply_binary_method calls semantic.add)
    # ------------------------------------------------------------------
    def expr_UnaryOp(self, node):
        v = self.expr(node.operand)
        return self.unop(type(node.op), v, node)

    def unop(self, opty, v, node):
        if is_typed(v):  # a number assigned to a name: a 0-d tensor in Triton (typedconst.py)
            r = fold_unary(opty, v)
            if r is not None:
                return r
            v = TensorV(self.as_value(v, node))  # the run-time path has the tensor's semantics
        return semantic.unary(self.api, opty, v, node)

    def expr_BinOp(self, node):
        a = self.expr(node.left)
        b = self.expr(node.right)
        return self.binop(BINOP_NAMES[type(node.op)], a, b, node)

    def expr_Compare(self, node):
        left = self.expr(node.left)
        result = None
        for op, rnode in zip(node.ops, node.comparators):
            right = self.expr(rnode)
            if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                r = semantic.compare_identity(op, left, right)
            else:
                r = self.binop(CMP_NAMES[type(op)], left, right, node)
            result = r if result is None else semantic.logical_and(self.api, result, r, node)
            left = right
        return result

    def binop(self, opname: str, a: AV, b: AV, node) -> AV:
        if isinstance(a, Const) and isinstance(b, Const) and (is_typed(a) or is_typed(b)):
            r = fold_binary(opname, a, b)
            return r if r is not None else semantic.tensor_binary(self.api, opname, a, b, node)
        return semantic.binary(self.api, opname, a, b, node)

    def operand_info(self, av: AV):
        """(dtype, shape, is_literal)."""
        return semantic.operand_info(av)

    def as_value(self, av: AV, node) -> ir.Value:
        """A run-time value for ``av`` with its natural type."""
        if isinstance(av, TensorV):
            return av.v
        if isinstance(av, (Opaque, Undef)):
            raise Poison()
        t, s, _ = self.operand_info(av)
        return self.as_tensor(av, t, s, node)

    def as_tensor(self, av: AV, dtype, shape, node) -> ir.Value:
        """``av`` converted to ``dtype`` and broadcast to ``shape``."""
        if isinstance(av, (Opaque, Undef)):
            raise Poison()
        if isinstance(av, Const):
            val = av.value
            if isinstance(val, bool):
                val = bool(val)
            elif not isinstance(val, (int, float)):
                self.operand_info(av)  # raises a clear error
            if dtype.is_floating() or dtype.is_symbolic():
                val = float(val) if dtype.is_floating() else val
            elif dtype.is_bool():
                val = bool(val)
            elif dtype.is_int():
                if isinstance(val, float):
                    if not math.isfinite(val):  # (int() would raise a bare OverflowError / ValueError)
                        raise SemError("N023", f"the constant {val!r} has no value of type {dtype!r}: an integer "
                                       "is needed here", node=node,
                                       hint="use a finite value, or a floating-point dtype")
                    val = int(val)
                val = wrap_int(val, dtype)
            return self.ctx.constant(val, block_of(dtype, shape), node)
        if isinstance(av, Sym):
            return self.ctx.constant(av, block_of(dtype, shape), node)
        if isinstance(av, TensorV):
            return self.convert(av.v, dtype, shape, node)
        raise SemError("N023", "this value cannot be used as a block value")

    def convert(self, v: ir.Value, dtype, shape, node) -> ir.Value:
        if scalar_of(v.type) != dtype:
            v = self.cast_value(v, dtype, node)
        return self.broadcast_value(v, shape, node)

    def broadcast_value(self, v: ir.Value, shape, node) -> ir.Value:
        shape = tuple(shape)
        cur = shape_of(v.type)
        if cur == shape:
            return v
        el = scalar_of(v.type)
        if not cur:
            return self.ctx.emit("splat", [v], [block_of(el, shape)], node=node).result
        if len(cur) < len(shape):
            for _ in range(len(shape) - len(cur)):
                v = self._expand_dims(v, 0, node)
            cur = shape_of(v.type)
            if cur == shape:
                return v
        if len(cur) > len(shape):
            raise SemError("N030", f"cannot broadcast shape {fmt_shape(cur)} to {fmt_shape(shape)}")
        for c, s in zip(cur, shape):
            if c != 1 and dims_equal(c, s) is False:
                raise SemError("N030", f"cannot broadcast shape {fmt_shape(cur)} to {fmt_shape(shape)}")
        return self.ctx.emit("broadcast", [v], [block_of(el, shape)], node=node).result

    def cast_value(self, v: ir.Value, dst, node, bitcast: bool = False, rounding: str | None = None) -> ir.Value:
        src = scalar_of(v.type)
        shape = shape_of(v.type)
        if src == dst:
            return v
        rt = block_of(dst, shape)
        if src.is_symbolic() or dst.is_symbolic():
            return self.ctx.emit("cast", [v], [rt], node=node).result
        if bitcast:
            if src.primitive_bitwidth != dst.primitive_bitwidth:
                raise SemError("N024", f"cannot bitcast {src!r} ({src.primitive_bitwidth} bits) to {dst!r} "
                               f"({dst.primitive_bitwidth} bits)", hint="bitcast needs types of the same width")
            return self.ctx.emit("bitcast", [v], [rt], node=node).result
        if src.is_ptr() and dst.is_ptr():
            return self.ctx.emit("bitcast", [v], [rt], node=node).result
        if src.is_ptr() and dst.is_bool():
            # Triton: pointer -> int1 is "not null" (its address as a 64-bit integer != 0)
            v = self.cast_value(v, lc.int64, node)
            zero = self.ctx.constant(0, v.type, node)
            return self.ctx.emit("ne", [v, zero], [rt], node=node).result
        if src.is_ptr() or dst.is_ptr():
            other = dst if src.is_ptr() else src
            if not (other.is_int() and other.primitive_bitwidth == 64):
                raise SemError("N024", f"cannot cast between {src!r} and {dst!r}",
                               hint="pointers convert only to and from 64-bit integers")
            return self.ctx.emit("cast", [v], [rt], node=node).result
        if dst.is_bool():
            zero = self.ctx.constant(0.0 if src.is_floating() else 0, v.type, node)
            return self.ctx.emit("ne", [v, zero], [rt], node=node).result
        attrs = {}
        if rounding:
            attrs["rounding"] = rounding
        return self.ctx.emit("cast", [v], [rt], attrs, node=node).result

    def cast_to(self, av: AV, dst, node, bitcast=False, rounding=None) -> ir.Value:
        if isinstance(av, TensorV):
            return self.cast_value(av.v, dst, node, bitcast=bitcast, rounding=rounding)
        if bitcast and isinstance(av, Const):
            v = self.as_value(av, node)
            return self.cast_value(v, dst, node, bitcast=True)
        t, s, _ = self.operand_info(av)
        return self.as_tensor(av, dst, s, node)

    def expr_Call(self, node):
        return self.calls.expr_Call(node)


def _unknown_kind(dt) -> bool:
    """The element type of a value whose kind the generic check does not know (``SymDType("?")``: an
    unannotated parameter that no load or store shows to be a pointer)."""
    return isinstance(dt, SymDType) and dt.label == "?"
