"""Matrix products: ``torch.matmul`` / ``mm`` / ``bmm`` / ``addmm`` / ``baddbmm``, ``a @ b`` and ``dt.dot``.

Node kind ``dot``.
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..errors import BadArguments, Einsum, MatmulDtypes, MatmulOperands, MatmulShapes, SizeOneMatmul
from ..optable import ALONG, NAMED, node, op
from ..program import ONE, Node, RInfo, TileInfo
from ..trace_common import (
    _broadcast_dims,
    _describe,
    _dims_text,
    result_type,
)
from .creation import full
from .elementwise import binop, cast
from .reduce import reduce
from .shape import expand_dims, permute

# ---------------------------------------------------------------------------- node kinds


def render_dot(g, n: Node) -> str:
    a, b = n.args[0], n.args[1]
    acc = n.args[2] if len(n.args) > 2 else None
    k = a.dims[-1]
    xa = g.masked(a, len(a.dims) - 1, 0, k) if not (a.pad == 0) else g.expr(a)
    xb = g.masked(b, len(b.dims) - 2, 0, k) if not (b.pad == 0) else g.expr(b)
    ra, rb = len(g.rd(a.dims)), len(g.rd(b.dims))
    if ra != rb:  # a batch of one on one side only: broadcast it away
        xa = f"nl.reshape({xa}, {g.shape_tuple(a.dims[-2:])})" if ra > 2 else xa
        xb = f"nl.reshape({xb}, {g.shape_tuple(b.dims[-2:])})" if rb > 2 else xb
    args = [xa, xb]
    if acc is not None:
        args.append(g.expr(acc))
    prec = n.attrs.get("precision")
    extra = f", input_precision={prec!r}" if prec in ("ieee", "tf32x3") else ""
    return f"nl.dot({', '.join(args)}{extra})"


node("dot", NAMED, ALONG, render=render_dot, name_hint=lambda n: "dot", family="matmul",
     doc="a (batched) matrix product, with an optional accumulator (attrs: precision)")

# ---------------------------------------------------------------------------- semantics


def matmul(tr, a, b, acc, src, out_dtype=None):
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
        a = cast(tr, a, in_dtype)
    if b.dtype != in_dtype:
        b = cast(tr, b, in_dtype)
    if in_dtype.is_floating_point:
        acc_dtype = torch.float32
    elif in_dtype in (torch.int8, torch.uint8):
        acc_dtype = torch.int32
    else:
        raise MatmulOperands(src, problem=f"of {in_dtype} values")
    tr.prog.has_dot = True
    acc_node = None
    if acc is not None:
        if not isinstance(acc, Node):
            acc = full(tr, list(dims), acc, acc_dtype, src)
        if _broadcast_dims(acc.dims, dims) != dims:
            raise MatmulShapes(src, problem=f"accumulator of shape {_dims_text(acc.dims)} for a product of "
                                               f"{_dims_text(dims)}")
        acc_node = acc if acc.dtype == acc_dtype and acc.dims == dims else \
            tr.materialize(cast(tr, acc, acc_dtype) if acc.dtype != acc_dtype else acc, dims, acc_dtype, src)
        if acc_node.block is None and acc_node.op == "expand":
            tr.emit(acc_node)
    n = tr.emit(Node("dot", [a, b] + ([acc_node] if acc_node is not None else []), dims=dims,
                       dtype=acc_dtype, attrs={"precision": tr.prog.dot_precision if in_dtype == torch.float32
                                               else None}))
    tr.prog.dims_used.add(dims)
    if acc is not None:
        target = acc.dtype
    elif out_dtype == "acc":
        target = acc_dtype
    else:
        target = out_dtype or in_dtype
    return cast(tr, n, target) if target != n.dtype else n


# ---------------------------------------------------------------------------- ops


@op("matmul", family="matmul", nodes=("dot", "cast"), torch=("matmul",), methods=("matmul",))
def _t_matmul(tr, e, op, input, other):
    return matmul(tr, input, other, None, e)


@op("mm", family="matmul", nodes=("dot", "cast"), torch=("mm", "bmm"), methods=("mm", "bmm"))
def _t_mm(tr, e, op, input, mat2, out_dtype=None):
    """``torch.mm`` / ``torch.bmm``, with torch's ``out_dtype`` overload (fp16 inputs, an fp32 result)."""
    if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
        raise BadArguments(e, op="torch.mm/bmm", problem=f"out_dtype must be a torch.dtype, not {out_dtype!r}",
                           signature="(input, mat2, out_dtype=None)")
    if out_dtype is not None and isinstance(input, Node) and isinstance(mat2, Node) and input.dtype != mat2.dtype:
        raise MatmulDtypes(e, a=input.dtype, b=mat2.dtype)
    return matmul(tr, input, mat2, None, e, out_dtype=out_dtype)


@op("addmm", family="matmul", nodes=("dot", "binary", "cast"), torch=("addmm", "baddbmm"))
def _t_addmm(tr, e, op, input, mat1, mat2, *, beta=1, alpha=1):
    x = input
    if beta != 1 or alpha != 1:
        prod = matmul(tr, mat1, mat2, None, e, out_dtype=torch.float32)
        return cast(tr, binop(tr, "add", binop(tr, "mul", x, beta, e), binop(tr, "mul", prod, alpha, e), e), x.dtype)
    return matmul(tr, mat1, mat2, x, e)


@op("dt.dot", family="matmul", stub=L.dot, nodes=("dot", "cast"))
def _dt_dot(tr, e, a, b, acc=None, out_dtype=None):
    return matmul(tr, a, b, acc, e, out_dtype=out_dtype or "acc")


def _parse(eq: str, n: int, e):
    eq = eq.replace(" ", "")
    if "..." in eq:
        raise Einsum(e, problem="an ellipsis (...)")
    lhs, arrow, rhs = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != n:
        raise Einsum(e, problem=f"the equation names {len(ins)} operands, {n} given")
    for s in ins + ([rhs] if arrow else []):
        if not s.isalpha() and s:
            raise Einsum(e, problem=f"{s!r}: subscripts are letters")
        if len(set(s)) != len(s):
            raise Einsum(e, problem=f"{s!r} repeats a letter (diagonals)")
    if not arrow:  # torch's implicit output: the letters used once, in alphabetical order
        rhs = "".join(sorted(c for c in set("".join(ins)) if "".join(ins).count(c) == 1))
    for c in rhs:
        if not any(c in s for s in ins):
            raise Einsum(e, problem=f"the output letter {c!r} is in no operand")
    return ins, rhs


def _align(tr, e, x: Node, letters: str, order: str) -> Node:
    """``x`` (dims named by ``letters``) permuted to ``order`` with ONE where a letter is missing."""
    have = sorted(letters, key=order.index)
    x = permute(tr, x, [letters.index(c) for c in have], e)
    for i, c in enumerate(order):
        if c not in letters:
            x = expand_dims(tr, x, i, e)
    return x


@op("einsum", family="matmul", nodes=("expand_dims", "permute", "dot", "reduce", "binary"), torch=("einsum",),
    first="any")
def _t_einsum(tr, e, op, equation, *operands):
    """``torch.einsum`` of one or two blocks: a matmul where the equation is one (``mk,kn->mn``, batched
    ``bmk,bkn->bmn``), else a broadcast product summed over the contracted letters."""
    ops_ = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)
    if not isinstance(equation, str):
        raise Einsum(e, problem=f"the equation must be a string, not {_describe(equation)}")
    if len(ops_) not in (1, 2):
        raise Einsum(e, problem=f"{len(ops_)} operands (one or two are supported)")
    xs = [tr.as_node(x, e) for x in ops_]
    ins, out = _parse(equation, len(xs), e)
    for x, s in zip(xs, ins):
        if len(x.dims) != len(s):
            raise Einsum(e, problem=f"{s!r} names {len(s)} dimensions of a block of rank {len(x.dims)}")
    for c in set("".join(ins)):
        ds = [x.dims[s.index(c)] for x, s in zip(xs, ins) if c in s]
        real = [d for d in ds if d is not ONE]
        if any(d is not real[0] for d in real):
            raise Einsum(e, problem=f"the letter {c!r} stands for different dimensions")
    if len(xs) == 2:
        a, b = xs
        sa, sb = ins
        batch = [c for c in out if c in sa and c in sb]
        k = [c for c in sa if c in sb and c not in out]
        m = [c for c in out if c in sa and c not in sb]
        n = [c for c in out if c in sb and c not in sa]
        if len(k) == 1 and len(m) == 1 and len(n) == 1 and len(batch) <= 1 and \
                set(sa) == set(batch + m + k) and set(sb) == set(batch + k + n):
            a2 = _align(tr, e, a, sa, "".join(batch + m + k))
            b2 = _align(tr, e, b, sb, "".join(batch + k + n))
            r = matmul(tr, a2, b2, None, e)
            have = "".join(batch + m + n)
            return permute(tr, r, [have.index(c) for c in out], e)
    summed = "".join(sorted({c for s in ins for c in s if c not in out}))
    order = out + summed
    prod = None
    for x, s in zip(xs, ins):
        al = _align(tr, e, x, s, order)
        prod = al if prod is None else binop(tr, "mul", prod, al, e)
    for i in range(len(order) - 1, len(out) - 1, -1):
        prod = reduce(tr, "sum", prod, i, False, e)
    return prod
