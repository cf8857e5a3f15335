"""Type rules of ``nl.dot``."""

from __future__ import annotations

from newt.ir.types import ANY_DTYPE, block_of, dims_equal
from newt.language import core as lc

from ..ops import Bound, _poison, const_dtype, const_str, need_block, rule
from ..semantic import (
    SemError,
    fmt_shape,
)
from ..values import Const, TensorV

_DOT_FLOATS = ("fp16", "bf16", "fp32", "fp8e4nv", "fp8e5", "fp64")
#: fp8 formats without tensor-core support, upcast to fp16 before the product (as Triton does)
_UPCAST_FP8 = ("fp8e4b15", "fp8e4b8", "fp8e5b16")


@rule("dot")
def _dot(b, a: Bound, node):
    x = need_block(a["input"], "nl.dot input", a.node("input"))
    y = need_block(a["other"], "nl.dot other", a.node("other"))
    rx, ry = len(x.shape), len(y.shape)
    if rx != ry or rx not in (2, 3):
        raise SemError("N031", f"nl.dot operands must both be 2-D (or both 3-D for a batched dot); got "
                       f"{fmt_shape(x.shape)} and {fmt_shape(y.shape)}",
                       hint="reshape or index with [:, None] to make 2-D blocks")
    k1, k2 = x.shape[-1], y.shape[-2]
    if dims_equal(k1, k2) is False:
        raise SemError("N031", f"nl.dot inner dimensions differ: {fmt_shape(x.shape)} @ {fmt_shape(y.shape)} "
                       f"(K = {k1} vs {k2})", hint="the last dimension of the first operand must equal the "
                                                   "first (non-batch) dimension of the second")
    if rx == 3 and dims_equal(x.shape[0], y.shape[0]) is False:
        raise SemError("N031", f"nl.dot batch dimensions differ: {x.shape[0]} vs {y.shape[0]}")
    m, n = x.shape[-2], y.shape[-1]
    # any M, N, K (Triton's interpreter takes them all): shapes below the tensor-core tiles lower by FMA
    tx, ty = x.dtype, y.dtype
    if not (tx.is_symbolic() or ty.is_symbolic()):
        for t, nd in ((tx, a.node("input")), (ty, a.node("other"))):
            if not (t.name in _DOT_FLOATS or t.name == "int8" or t.is_fp8()):
                raise SemError("N031", f"nl.dot does not support {t!r} operands", node=nd,
                               hint="use fp16, bf16, fp32 (tf32), fp8 or int8 operands")
        if tx != ty and not (tx.is_fp8() and ty.is_fp8()):
            raise SemError("N031", f"nl.dot operands must have the same dtype, got {tx!r} and {ty!r}",
                           hint=f"cast one of them, e.g. b.to({tx!r})")
        if tx.name in _UPCAST_FP8 or ty.name in _UPCAST_FP8:
            # no tensor-core instruction takes these fp8 formats: Triton computes the product in fp16 (exact)
            x = TensorV(b.cast_value(x.v, lc.float16, node))
            y = TensorV(b.cast_value(y.v, lc.float16, node))
            tx = ty = lc.float16
    od_av = a["out_dtype"]
    acc = a["acc"]
    _poison(acc)
    out_shape = (x.shape[0], m, n) if rx == 3 else (m, n)
    if isinstance(od_av, Const) and od_av.value is None:
        if isinstance(acc, TensorV):
            od = acc.dtype
        elif tx.is_symbolic():
            od = ANY_DTYPE
        else:
            od = lc.int32 if tx.is_int() else lc.float32
    else:
        od = const_dtype(od_av, "out_dtype", a.node("out_dtype"))
    if not tx.is_symbolic() and not od.is_symbolic():
        if tx.is_int():
            if od not in (lc.int32, lc.int8):
                raise SemError("N031", f"an int8 nl.dot accumulates in int32, not {od!r}",
                               hint="leave out_dtype out (or pass nl.int32)")
            # Triton's rule: out_dtype=nl.int8 is accepted and the product is still int32
            od = lc.int32
        if tx.is_floating() and od.name not in ("fp32", "fp16", "fp64"):
            raise SemError("N031", f"nl.dot out_dtype must be fp32 (or fp16 for fp16 inputs), got {od!r}")
        if od.is_fp16() and not tx.is_fp16() and not tx.is_fp8():
            raise SemError("N031", f"an fp16 accumulator needs fp16 operands, got {tx!r}")
    if isinstance(acc, TensorV):
        if len(acc.shape) != len(out_shape) or any(dims_equal(p, q) is False for p, q in zip(acc.shape, out_shape)):
            raise SemError("N031", f"nl.dot acc has shape {fmt_shape(acc.shape)}, expected {fmt_shape(out_shape)}",
                           node=a.node("acc"))
        if acc.dtype != od and not (acc.dtype.is_symbolic() or od.is_symbolic()):
            raise SemError("N031", f"nl.dot acc is {acc.dtype!r} but the product accumulates in {od!r}",
                           node=a.node("acc"), hint="create the accumulator with nl.zeros(..., dtype=nl.float32)")
        accv = acc.v
    elif isinstance(acc, Const) and acc.value is None:
        accv = b.as_tensor(Const(0), od, out_shape, node)
    else:
        raise SemError("N031", "nl.dot acc must be a block", node=a.node("acc"))
    ip = a["input_precision"]
    prec = None
    if isinstance(ip, Const) and ip.value is not None:
        prec = const_str(ip, "input_precision", ("tf32", "tf32x3", "ieee", "bf16x3", "bf16x6"),
                         a.node("input_precision"))
    at = a["allow_tf32"]
    if prec is None and isinstance(at, Const) and at.value is not None:
        prec = "tf32" if at.value else "ieee"
    if tx.is_fp32() and prec is None:
        prec = "tf32"
    attrs = {"input_precision": prec or "", "max_num_imprecise_acc": getattr(a["max_num_imprecise_acc"], "value",
                                                                             None) or 0}
    return TensorV(b.emit("dot", [x.v, y.v, accv], [block_of(od, out_shape)], attrs, node=node).result)
