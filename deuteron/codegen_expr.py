"""Rendering the expressions of a generated kernel.

Every expression is built with a small precedence-aware builder: ``Ex`` is the
text of an expression together with how tightly it binds (an atom -- a name, a
call, a subscript, a non-negative literal -- a unary minus, or a binary
operator's level).  An operand is parenthesized when it is not an atom (the
generated code spells every compound operand in parentheses, so it reads
without knowing Python's precedence table); plain ``str`` values are atoms by
contract (names, calls, subscripts) and are never inspected.
"""

from __future__ import annotations

import math

import torch

from .config import ConfigError
from .program import ONE, Node, TileInfo

__all__ = ["NL_DTYPE", "Ex", "ExprRenderer", "binary"]

NL_DTYPE = {
    torch.float16: "nl.float16", torch.bfloat16: "nl.bfloat16", torch.float32: "nl.float32",
    torch.float64: "nl.float64", torch.int8: "nl.int8", torch.int16: "nl.int16", torch.int32: "nl.int32",
    torch.int64: "nl.int64", torch.uint8: "nl.uint8", torch.bool: "nl.int1",
}
for _n, _v in (("uint16", "nl.uint16"), ("uint32", "nl.uint32"), ("uint64", "nl.uint64"),
               ("float8_e4m3fn", "nl.float8e4nv"), ("float8_e5m2", "nl.float8e5")):
    if hasattr(torch, _n):
        NL_DTYPE[getattr(torch, _n)] = _v

#: node op -> renderer ``f(renderer, node) -> str``, registered by the module that traces the op
NODE_RENDER: dict = {}

_BINOP_SYM = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "and": "&",
              "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
              "eq": "==", "ne": "!="}



def _dt(dtype) -> str:
    try:
        return NL_DTYPE[dtype]
    except KeyError:
        raise ConfigError(f"dtype {dtype} is not supported in a newt kernel") from None


def _lit(v) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return Ex(str(v), UNARY) if v < 0 else str(v)
    if isinstance(v, float):
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        if math.isnan(v):
            return 'float("nan")'
        r = repr(v)
        # negative numbers and exponent forms (1e-05) are not atoms: they are spelled as operands in parentheses
        return Ex(r, UNARY) if r[0] == "-" or "e" in r else r
    raise ConfigError(f"cannot write the constant {v!r} into a kernel")


def _identity(kind: str, dtype) -> object:
    if kind == "sum":
        return 0.0 if dtype.is_floating_point else 0
    if kind == "prod":
        return 1.0 if dtype.is_floating_point else 1
    if dtype.is_floating_point:
        return float("-inf") if kind in ("max", "argmax") else float("inf")
    if dtype == torch.bool:
        return False if kind in ("max", "argmax") else True
    info = torch.iinfo(dtype)
    return info.min if kind in ("max", "argmax") else info.max


#: binding strength of expressions (Python's grammar levels)
ATOM, UNARY, POWER, MUL, ADD, SHIFT, BAND, BXOR, BOR, CMP = 100, 90, 95, 80, 70, 60, 50, 40, 30, 20
_SYM_PREC = {"**": POWER, "*": MUL, "/": MUL, "//": MUL, "%": MUL, "+": ADD, "-": ADD, "<<": SHIFT, ">>": SHIFT,
             "&": BAND, "^": BXOR, "|": BOR, "<": CMP, "<=": CMP, ">": CMP, ">=": CMP, "==": CMP, "!=": CMP}


class Ex(str):
    """The text of an expression and its binding strength (``prec``)."""

    prec: int

    def __new__(cls, text: str, prec: int):
        s = super().__new__(cls, text)
        s.prec = prec
        return s


def prec_of(e) -> int:
    return getattr(e, "prec", ATOM)


def _atom(e: str) -> str:
    """``e`` as an operand: parenthesized unless it is an atom."""
    return e if prec_of(e) >= ATOM else f"({e})"


_paren = _atom


def binary(a: str, sym: str, b: str) -> Ex:
    """``a sym b`` with both operands as operands (compound ones parenthesized)."""
    return Ex(f"{_atom(a)} {sym} {_atom(b)}", _SYM_PREC[sym])


def neg(x: str) -> Ex:
    return Ex(f"-{_atom(x)}", UNARY)


def invert(x: str) -> Ex:
    return Ex(f"~{_atom(x)}", UNARY)


def call(fn: str, *args) -> str:
    return f"{fn}({', '.join(args)})"


#: elementwise unary math: ``ops.UNARY`` name -> the newt expression of its operand
UNARY_RENDER = {
    "exp": lambda x: call("nl.exp", x),
    "exp2": lambda x: call("nl.exp2", x),
    "log": lambda x: call("nl.log", x),
    "log2": lambda x: call("nl.log2", x),
    "sqrt": lambda x: call("nl.sqrt_rn", x),
    "rsqrt": lambda x: call("nl.rsqrt", x),
    "sin": lambda x: call("nl.sin", x),
    "cos": lambda x: call("nl.cos", x),
    "tanh": lambda x: call("nl.tanh", x),
    "erf": lambda x: call("nl.erf", x),
    "floor": lambda x: call("nl.floor", x),
    "ceil": lambda x: call("nl.ceil", x),
    "abs": lambda x: call("nl.abs", x),
    "neg": neg,
    "sigmoid": lambda x: call("nl.sigmoid", x),
    "relu": lambda x: call("nl.maximum", x, "0"),
    "reciprocal": lambda x: binary("1.0", "/", x),
    "square": lambda x: binary(x, "*", x),
    "silu": lambda x: binary(x, "*", call("nl.sigmoid", x)),
    "log1p": lambda x: call("nl.log", binary("1.0", "+", x)),
    "expm1": lambda x: binary(call("nl.exp", _atom(x)), "-", "1.0"),
    "logical_not": lambda x: binary(x, "==", "0"),
    "invert": invert,
}




class ExprRenderer:
    """Mixin of the generator: rendering values as newt expressions."""

    def scalar_expr(self, v) -> str:
        """An int or a scalar Node (begin / end of a tile), as an expression."""
        if isinstance(v, Node):
            return self.expr(v)
        return _lit(v)

    # ------------------------------------------------------------------ expressions
    @staticmethod
    def expand(expr: str, pos: int, k: int, rank: int) -> str:
        """``expr`` of rank k placed at dims [pos, pos+k) of a rank-``rank`` value."""
        if rank == k:
            return expr
        idx = ["None"] * pos + [":"] * k + ["None"] * (rank - pos - k)
        return f"{_atom(expr)}[{', '.join(idx)}]"

    def aligned(self, v, rank: int, out_dims=None) -> str:
        """Operand ``v`` left-padded with size-1 dims to ``rank`` (torch broadcasting) for a value of dims
        ``out_dims``: size-1 dims of ``v`` that broadcast against block-size-1 tiles (scalars in the generated
        code) are reshaped away first."""
        if not isinstance(v, Node):
            return _lit(v)
        e = self.expr(v)
        k = len(self.rd(v.dims))
        if k > rank and out_dims is not None and len(out_dims) >= len(v.dims):
            off = len(out_dims) - len(v.dims)
            keep = [d for i, d in enumerate(v.dims) if not (d is ONE and self.is_unit(out_dims[off + i]))]
            e = f"nl.reshape({e}, {self.shape_tuple(keep)})" if self.rd(keep) else f"nl.reshape({e}, ())"
            k = len(self.rd(keep))
        if k == 0 or k == rank:
            return e
        return self.expand(e, rank - k, k, rank)

    def shape_tuple(self, dims) -> str:
        parts = [self.block_expr(d) for d in self.rd(dims)]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def expr(self, n) -> str:
        if not isinstance(n, Node):
            return _lit(n)
        if n.id in self.var:
            return self.var[n.id]
        op = n.op
        if op == "const":
            v = n.attrs["value"]
            if n.weak or (n.dtype == torch.float32 and isinstance(v, float)) or \
                    (n.dtype == torch.int32 and isinstance(v, int) and not isinstance(v, bool)):
                return _lit(float(v) if n.dtype == torch.float32 else v)
            return f"nl.full((), {_lit(v)}, {_dt(n.dtype)})"
        if op == "param":
            return n.attrs["name"]
        if op in ("carried", "loopout", "phi"):
            return self.var.get(n.id) or self.carried_name(n)
        if op.startswith("tile_") or op == "grid_index" or op == "loop_index":
            return self.tile_attr_expr(n)
        return self.render(n)

    def is_constexpr(self, n) -> bool:
        """Is this scalar a compile-time constant in the generated kernel (a block size, a literal)?"""
        if not isinstance(n, Node):
            return True
        if n.dims:
            return False
        if n.op == "const" or n.op == "tile_block_size":
            return True
        if n.op == "tile_count":
            return n.attrs["tile"].extent is not None
        if n.op in ("binary", "unary"):
            return all(self.is_constexpr(a) for a in n.args)
        return False

    def carried_name(self, n) -> str:
        raise AssertionError(f"unbound loop variable {n}")

    def tile_attr_expr(self, n) -> str:
        op = n.op
        if op == "loop_index":
            return self.var[n.id]
        t = n.attrs["tile"]
        tn = self.tile_names[t.id]
        if op == "grid_index":
            return tn["index"]
        if op == "tile_index":
            return tn["begin"] if t.id in self.unit else tn["offs"]
        if op == "tile_begin":
            return tn["begin"]
        b = self.block_expr(t)
        if op == "tile_block_size":
            return b
        if op == "tile_end":
            end = self.scalar_expr(t.end)
            if self.tile_mask_needed(t):
                return f"nl.minimum({tn['begin']} + {b}, {end})"
            return f"({tn['begin']} + {b})"
        start = self.scalar_expr(t.begin)
        if op == "tile_id":
            if "pid" in tn:
                return tn["pid"]
            return f"(({tn['begin']} - {start}) // {b})" if start != "0" else f"({tn['begin']} // {b})"
        if op == "tile_count":
            ext = t.extent
            if ext is not None and t.slot is None:
                return str(-(-ext // self.block_vals[t.id]))
            if ext is not None:
                return f"nl.cdiv({ext}, {b})"
            return f"nl.cdiv({self.scalar_expr(t.end)} - {start}, {b})"
        raise AssertionError(op)

    def render(self, n: Node) -> str:
        op = n.op
        rank = len(self.rd(n.dims))
        if op == "binary":
            a, b = n.args
            o = n.attrs["op"]
            if o in ("minimum", "maximum"):
                return f"nl.{o}({self.aligned(a, rank, n.dims)}, {self.aligned(b, rank, n.dims)})"
            if o == "pow":
                return f"nl.pow({self.aligned(a, rank, n.dims)}, {self.aligned(b, rank, n.dims)})"
            return binary(self.aligned(a, rank, n.dims), _BINOP_SYM[o], self.aligned(b, rank, n.dims))
        if op == "unary":
            (a,) = n.args
            fn = n.attrs["fn"]
            x = self.expr(a)
            return UNARY_RENDER[fn](x)
        if op == "cast":
            (a,) = n.args
            if isinstance(a, Node) and self.is_constexpr(a):
                return f"nl.full((), {self.expr(a)}, {_dt(n.dtype)})"  # a compile-time constant
            return f"{_atom(self.expr(a))}.to({_dt(n.dtype)})"
        if op == "combine":
            return self.render_combine(n)
        if op == "split":
            return f"nl.split({self.expr(n.args[0])})"
        if op == "join":
            a, b = n.args
            r = len(self.rd(n.dims)) - 1
            return f"nl.join({self.aligned(a, r, n.dims[:-1])}, {self.aligned(b, r, n.dims[:-1])})"
        if op in NODE_RENDER:  # ops whose tracing module renders them (deuteron/trace_asm.py)
            return NODE_RENDER[op](self, n)
        if op == "tuple_get":
            return f"{self.expr(n.args[0])}[{n.attrs['index']}]"
        if op in ("rand", "randint"):
            seed = self.expr(n.args[1]) if len(n.args) > 1 else str(n.attrs["seed"])
            off = self.expr(n.args[0])
            if op == "rand":
                return f"nl.rand({seed}, {off})"
            lo, span = n.attrs["low"], n.attrs["high"] - n.attrs["low"]
            bits = f"nl.randint({seed}, {off}).to(nl.int64) % {span}"  # uint32 bits, zero-extended
            return f"({bits} + {lo}).to(nl.int32)" if lo else f"({bits}).to(nl.int32)"
        if op == "where":
            c, a, b = n.args
            parts = [self.aligned(x, rank, n.dims) for x in (c, a, b)]
            return f"nl.where({', '.join(parts)})"
        if op == "expand_dims":
            (a,) = n.args
            ax = self.rpos(n.dims, n.attrs["axis"])
            k = len(self.rd(a.dims))
            idx = [":"] * k
            idx.insert(ax, "None")
            return f"{_atom(self.expr(a))}[{', '.join(idx)}]"
        if op == "reshape":
            (a,) = n.args
            if self.rd(n.dims) == self.rd(a.dims):
                return self.expr(a)
            if not self.rd(n.dims):
                return f"nl.reshape({self.expr(a)}, ())" if self.rd(a.dims) else self.expr(a)
            return f"nl.reshape({self.expr(a)}, {self.shape_tuple(n.dims)})"
        if op == "permute":
            (a,) = n.args
            kept = [i for i, d in enumerate(a.dims) if not self.is_unit(d)]
            order = [kept.index(i) for i in n.attrs["order"] if i in kept]
            if order == list(range(len(order))):
                return self.expr(a)
            if order == [1, 0]:
                return f"nl.trans({self.expr(a)})"
            return f"nl.permute({self.expr(a)}, {tuple(order)})"
        if op == "expand":
            (a,) = n.args
            if isinstance(a, Node) and self.rd(a.dims):
                if self.rd(a.dims) == self.rd(n.dims):
                    return self.expr(a)
                return f"nl.broadcast_to({self.aligned(a, rank, n.dims)}, {self.shape_tuple(n.dims)})"
            if not self.rd(n.dims):
                return self.expr(a)
            return f"nl.full({self.shape_tuple(n.dims)}, {self.expr(a)}, {_dt(n.dtype)})"
        if op == "full":
            v = n.attrs["value"]
            if not self.rd(n.dims):
                return f"nl.full((), {_lit(v)}, {_dt(n.dtype)})"
            if v == 0 and not isinstance(v, bool):
                return f"nl.zeros({self.shape_tuple(n.dims)}, dtype={_dt(n.dtype)})"
            return f"nl.full({self.shape_tuple(n.dims)}, {_lit(v)}, {_dt(n.dtype)})"
        if op == "arange":
            r = n.attrs["rdim"]
            start = n.attrs["start"]
            if r is None:
                return f"nl.full((1,), {start}, nl.int32)"
            base = self.rd_names[r.id]["offs"]
            return base if start == 0 else f"({base} + {start})"
        if op == "load":
            return self.render_load(n)
        if op == "reduce":
            return self.render_reduce(n)
        if op == "dot":
            return self.render_dot(n)
        if op == "scan":
            (a,) = n.args
            ax = n.attrs["axis"]
            d = a.dims[ax]
            if self.is_unit(d):
                return self.expr(a)
            x = self.masked(a, ax, 0 if n.attrs["kind"] == "cumsum" else 1, d)
            return f"nl.{n.attrs['kind']}({x}, axis={self.rpos(a.dims, ax)})"
        raise AssertionError(f"cannot render {n}")

    # ------------------------------------------------------------------ memory
    def pointer(self, ta, items, dims, keep_shape=False):
        """(pointer, mask) of an access; ``keep_shape``: a store, whose pointer must have the value's shape even
        where a dimension has stride 0 (a load broadcasts pointer and mask together)."""
        rank = len(self.rd(dims))
        terms = []
        masks = []
        pos = 0
        dropped = False  # a block dimension whose offsets add nothing (stride 0): the pointer must keep its shape
        for it in items:
            kind = it[0]
            if kind == "none":
                pos += 1
                continue
            d = it[2]
            stride = ta.strides[d] if self.prog.static_shapes else None
            if self.prog.static_shapes:
                st_expr = None if stride == 1 else str(stride)
                if stride == 0 or ta.shape[d] == 1 and kind == "red":
                    st_expr = "0"
            else:
                st_expr = f"{ta.name}_stride_{d}"
            if kind in ("tile", "red"):
                dim = it[1]
                clip = it[3] if kind == "tile" and len(it) > 3 else None  # dt.load past the tensor's end
                if self.is_unit(dim):
                    e = self.tile_names[dim.id]["begin"]
                    if clip is not None:
                        masks.append(f"({e} < {self.scalar_expr(clip)})")
                    m = self.dim_mask(dim, dims, pos, rank)
                    if m is not None:
                        masks.append(m)
                else:
                    offs = self.offs_of(dim)
                    moving = kind == "red" and len(it) > 4  # x[t, s:s + C]: masked by the dimension's size
                    if kind == "red" and len(it) > 3 and (moving or it[3]):  # a bounded slice a:b starts at a
                        offs = f"({offs} + {self.scalar_expr(it[3]) if moving else it[3]})"
                    e = self.expand(offs, pos, 1, rank)
                    m = self.dim_mask(dim, dims, pos, rank)
                    if m is not None:
                        masks.append(m)
                    if moving:
                        masks.append(self.expand(f"({offs} < {self.scalar_expr(it[4])})", pos, 1, rank))
                    if clip is not None:
                        masks.append(self.expand(f"({self.offs_of(dim)} < {self.scalar_expr(clip)})", pos, 1, rank))
                    pos += 1
            elif kind == "vec":
                v = it[1]
                vd_r = self.rd(v.dims)
                k = len(vd_r)
                e = self.expand(self.expr(v), pos, k, rank) if k else self.expr(v)
                for j, vd in enumerate(vd_r):
                    m = self.dim_mask(vd, dims, pos + j, rank)
                    if m is not None:
                        masks.append(m)
                for vd in v.dims:  # a jagged tile of block size 1 (a scalar here) still masks its parents' lanes
                    if self.is_unit(vd) and vd.jagged_mask is not None:
                        masks.append(self.dim_mask(vd, dims, pos, rank))
                pos += k
            else:  # scalar
                v = it[1]
                e = self.scalar_expr(v)
                if isinstance(v, int) and v == 0:
                    continue
            if st_expr == "0":
                dropped = dropped or (kind in ("tile", "red") and not self.is_unit(it[1])) or (
                    kind == "vec" and bool(self.rd(it[1].dims)))
                continue
            if ta.int64:
                e = f"{_atom(e)}.to(nl.int64)"
            terms.append(e if st_expr is None else f"{_paren(e)} * {st_expr}")
        ptr = ta.name if not terms else f"{ta.name} + " + (" + ".join(terms) if len(terms) == 1 else
                                                           "(" + " + ".join(terms) + ")")
        if dropped and rank and keep_shape:
            ptr = f"nl.broadcast_to({ptr}, {self.shape_tuple(dims)})"
        seen = []
        for m in masks:
            if m not in seen:
                seen.append(m)
        mask = " & ".join(seen) if seen else None
        return ptr, mask

    def render_load(self, n: Node) -> str:
        ta = n.attrs["tensor"]
        ptr, mask = self.pointer(ta, n.attrs["items"], n.dims)
        if n.args:  # dt.load(..., extra_mask=)
            extra = self.aligned(n.args[0], len(self.rd(n.dims)), n.dims)
            mask = extra if mask is None else f"{mask} & {_atom(extra)}"
        ev = f", eviction_policy={n.attrs['eviction']!r}" if n.attrs.get("eviction") else ""
        if mask is None:
            return f"nl.load({ptr}{ev})"
        return f"nl.load({ptr}, mask={mask}, other=0{ev})"

    def emit_store(self, n: Node, indent: int, atomic=False):
        ta = n.attrs["tensor"]
        dims = n.attrs["dims"]
        ptr, mask = self.pointer(ta, n.attrs["items"], dims, keep_shape=True)
        if atomic and n.attrs.get("kind") in ("wait", "signal"):
            self.emit_sync(n, ptr, mask, indent)
            return
        v = n.args[0]
        cas = atomic and n.attrs.get("kind") == "cas"
        if len(n.args) > 1 and not cas:  # dt.store(..., extra_mask=)
            extra = self.aligned(n.args[1], len(self.rd(dims)), dims)
            mask = extra if mask is None else f"{mask} & {_atom(extra)}"

        def value_of(x):
            r = self.aligned(x, len(self.rd(dims)), dims) if isinstance(x, Node) else _lit(x)
            if isinstance(x, Node) and x.dtype != ta.dtype:
                r = f"{_atom(r)}.to({_dt(ta.dtype)})"
            return r
        val = value_of(v)
        if atomic:
            scope = n.attrs.get("scope", "gpu")
            order = f", sem={n.attrs['sem']!r}" + (f", scope={scope!r}" if scope != "gpu" else "")
            if cas:  # newt's atomic_cas: mask= is its extension over Triton's
                args = f"{ptr}, {value_of(n.args[1])}, {val}" + order + (f", mask={mask}" if mask else "")
            else:
                args = f"{ptr}, {val}" + (f", mask={mask}" if mask else "") + order
            old = n.attrs.get("old")
            call = f"nl.atomic_{n.attrs.get('kind', 'add')}({args})"
            if old is not None and self.use_count.get(old.id, 0) > 0:
                nm = self.names.fresh(f"old_{ta.name}")
                self.var[old.id] = nm
                self.w(indent, f"{nm} = {call}")
            else:
                self.w(indent, call)
        else:
            self.w(indent, f"nl.store({ptr}, {val}" + (f", mask={mask})" if mask else ")"))

    def emit_sync(self, n: Node, ptr: str, mask, indent: int):
        """``dt.wait`` / ``dt.signal``: spin loops of newt's (masked) ``atomic_cas``, or one ``atomic_xchg``."""
        a = n.attrs
        ta = a["tensor"]
        order = f"sem={a['sem']!r}" + (f", scope={a['scope']!r}" if a["scope"] != "gpu" else "")
        old = a.get("old")
        keep = old is not None and self.use_count.get(old.id, 0) > 0
        nm = self.names.fresh(f"old_{ta.name}") if keep else None
        if a["kind"] == "signal" and a["sync"]:
            self.w(indent, "nl.debug_barrier()  # the block's earlier stores come before the signal")
        if a["kind"] == "signal" and a["expect"] is None:
            call = f"nl.atomic_xchg({ptr}, {a['new']}" + (f", mask={mask}" if mask else "") + f", {order})"
            self.w(indent, f"{nm} = {call}" if keep else call)
        else:
            expect, new = a["expect"], a["new"]
            rank = len(self.rd(a["dims"]))
            if rank == 0:
                m = f"({mask}) & " if mask else ""
                cas = f"nl.atomic_cas({ptr}, {expect}, {new}, {order}" + (f", mask={mask}" if mask else "") + ")"
                self.w(indent, f"while {m}({cas} != {expect}):")
                self.w(indent + 1, "pass")
            else:
                p = self.names.fresh("pending")
                o = self.names.fresh("seen")
                shape = self.shape_tuple(a["dims"])
                self.w(indent, f"{p} = " + (f"nl.broadcast_to({mask}, {shape})" if mask else
                                            f"nl.full({shape}, True, nl.int1)"))
                self.w(indent, f"while nl.max({p}.to(nl.int32)) > 0:")
                self.w(indent + 1, f"{o} = nl.atomic_cas({ptr}, {expect}, {new}, {order}, mask={p})")
                self.w(indent + 1, f"{p} = {p} & ({o} != {expect})")
            if keep:  # a signal that waited: every flag held wait_for
                self.w(indent, f"{nm} = nl.full({self.shape_tuple(a['dims'])}, {expect}, {_dt(ta.dtype)})")
        if a["kind"] == "wait" and a["sync"]:
            self.w(indent, "nl.debug_barrier()  # the block's later loads come after the wait")
        if keep:
            self.var[old.id] = nm

    # ------------------------------------------------------------------ reductions and dots
    def masked(self, a: Node, ax: int, identity, d) -> str:
        """``a`` with the masked-off lanes of its dim ``ax`` set to ``identity``."""
        x = self.expr(a)
        jagged = isinstance(d, TileInfo) and d.jagged_mask is not None
        m = self.mask_of(d)
        if (m is None and not jagged) or (self.is_unit(d) and not jagged) or (
                a.pad is not None and a.pad == identity and not (isinstance(identity, float) and math.isnan(identity))):
            return x
        rank = len(self.rd(a.dims))
        return f"nl.where({self.dim_mask(d, a.dims, self.rpos(a.dims, ax), rank)}, {x}, {_lit(identity)})"

    def dim_mask(self, d, dims, pos: int, rank: int) -> str | None:
        """The mask of dim ``d`` (at position ``pos`` of the generated value, of rank ``rank``) in a value of
        ``dims``: a tile's ``offs < end`` along ``pos``; a jagged tile's ``index < lengths`` placed along its own
        position and those of its parent tiles in ``dims``."""
        jm = d.jagged_mask if isinstance(d, TileInfo) else None
        if jm is None:
            m = self.mask_of(d)
            return None if m is None else self.expand(m, pos, 1, rank)
        rdims = self.rd(dims)
        places = []
        for md in self.rd(jm.dims):
            if md is d:
                places.append(pos)
                continue
            at = next((i for i, x in enumerate(rdims) if x is md), None)
            if at is None:  # the tracer checks this (deuteron.trace._check_jagged)
                raise AssertionError(f"the jagged tile {d.name}'s parent {md} is not among {dims}")
            places.append(at)
        e = self.expr(jm)
        order = sorted(range(len(places)), key=lambda i: places[i])
        if order != list(range(len(places))):
            e = f"nl.permute({e}, {tuple(order)})"
        taken = set(places)
        if len(taken) == rank:
            return e
        if not taken:
            return e  # a scalar (every dim a block-size-1 tile)
        return f"{_atom(e)}[{', '.join(':' if i in taken else 'None' for i in range(rank))}]"

    def render_reduce(self, n: Node) -> str:
        (a,) = n.args
        kind = n.attrs["kind"]
        ax = n.attrs["axis"]
        d = n.attrs["dim"]
        keep = n.attrs["keepdim"]
        if self.is_unit(d):
            # a block-size-1 tile: nothing to reduce (a jagged one still leaves out its parents' missing lanes)
            x = self.masked(a, ax, _identity(kind, a.dtype), d) if d.jagged_mask is not None else self.expr(a)
            if kind in ("argmax", "argmin"):
                x = f"nl.zeros({self.shape_tuple(n.dims)}, dtype=nl.int64)" if self.rd(n.dims) else \
                    "nl.full((), 0, nl.int64)"
            return x
        x = self.masked(a, ax, _identity(kind, a.dtype), d)
        kd = ", keep_dims=True" if keep else ""
        ax = self.rpos(a.dims, ax)
        if kind == "sum":
            return f"nl.sum({x}, axis={ax}{kd})"
        if kind in ("max", "min"):
            return f"nl.{kind}({x}, axis={ax}{kd})"
        if kind == "prod":
            return f"nl.reduce({x}, {ax}, _dt_mul{kd})"
        if kind in ("argmax", "argmin"):
            return f"nl.{kind}({x}, axis={ax}{kd}).to(nl.int64)"
        raise AssertionError(kind)

    def render_dot(self, n: Node) -> str:
        a, b = n.args[0], n.args[1]
        acc = n.args[2] if len(n.args) > 2 else None
        k = a.dims[-1]
        xa = self.masked(a, len(a.dims) - 1, 0, k) if not (a.pad == 0) else self.expr(a)
        xb = self.masked(b, len(b.dims) - 2, 0, k) if not (b.pad == 0) else self.expr(b)
        ra, rb = len(self.rd(a.dims)), len(self.rd(b.dims))
        if ra != rb:  # a batch of one on one side only: broadcast it away
            xa = f"nl.reshape({xa}, {self.shape_tuple(a.dims[-2:])})" if ra > 2 else xa
            xb = f"nl.reshape({xb}, {self.shape_tuple(b.dims[-2:])})" if rb > 2 else xb
        args = [xa, xb]
        if acc is not None:
            args.append(self.expr(acc))
        prec = n.attrs.get("precision")
        extra = f", input_precision={prec!r}" if prec in ("ieee", "tf32x3") else ""
        return f"nl.dot({', '.join(args)}{extra})"
