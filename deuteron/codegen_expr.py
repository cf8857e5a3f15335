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

from ._torch import torch
from .config import ConfigError
from .optable import FOLDS, NODE_KINDS
from .program import ONE, Node, TileInfo

__all__ = ["NL_DTYPE", "Ex", "ExprRenderer", "binary"]

class _DtypeNames(dict):
    """torch dtype -> its newt spelling, filled on first use (torch is imported then)."""

    def _fill(self):
        if not dict.__len__(self):
            for n, v in (("float16", "nl.float16"), ("bfloat16", "nl.bfloat16"), ("float32", "nl.float32"),
                         ("float64", "nl.float64"), ("int8", "nl.int8"), ("int16", "nl.int16"), ("int32", "nl.int32"),
                         ("int64", "nl.int64"), ("uint8", "nl.uint8"), ("bool", "nl.int1"), ("uint16", "nl.uint16"),
                         ("uint32", "nl.uint32"), ("uint64", "nl.uint64"), ("float8_e4m3fn", "nl.float8e4nv"),
                         ("float8_e5m2", "nl.float8e5")):
                if hasattr(torch, n):
                    dict.__setitem__(self, getattr(torch, n), v)

    def __getitem__(self, k):
        self._fill()
        return dict.__getitem__(self, k)

    def __contains__(self, k):
        self._fill()
        return dict.__contains__(self, k)

    def get(self, k, default=None):
        self._fill()
        return dict.get(self, k, default)

    def __iter__(self):
        self._fill()
        return dict.__iter__(self)

    def __len__(self):
        self._fill()
        return dict.__len__(self)

    def items(self):
        self._fill()
        return dict.items(self)


NL_DTYPE = _DtypeNames()

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
        if FOLDS in NODE_KINDS[n.op].traits:
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
        """``n``'s newt expression: its node kind's renderer (``deuteron/ops/<family>.py``)."""
        return NODE_KINDS[n.op].render(self, n)

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
                if len(it) > 3:
                    masks.extend(self.bound_masks(e, it[3]))
                pos += k
            else:  # scalar
                v = it[1]
                e = self.scalar_expr(v)
                if len(it) > 3:
                    masks.extend(self.bound_masks(e, it[3]))
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

    def bound_masks(self, e: str, check) -> list:
        """The masks that keep index ``e`` inside its dimension: ``check`` is ``(check_lower, size or None)`` of an
        index item (``deuteron.ops.memory._index_item``)."""
        lower, size = check
        out = []
        if lower:
            out.append(f"({_atom(e)} >= 0)")
        if size is not None:
            out.append(f"({_atom(e)} < {self.scalar_expr(size)})")
        return out

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
