"""One handler per IR op (docs/ir.md), over values with a leading program dimension.

A value of IR type ``T`` (scalar) is a tensor of shape ``(p,)``; of type
``<S x T>`` a tensor of shape ``(p, *S)``, where ``p`` is the number of
programs running together or 1 when the value is the same in every program
(constants, ``arange``, scalar arguments and what is computed only from them).
torch broadcasting does the rest.

``OPS[name](op, plan)`` builds, once per op, a function ``f(ex, args)`` that
takes the operand tensors and returns the result (a tuple for several, None
for none).  Handlers never modify their inputs in place: values may be
expanded views shared by other values.
"""

from __future__ import annotations

import math
import os

import torch

from newt.ir.ops import BINARY
from newt.ir.types import scalar_of, shape_of
from newt.language import core as lc

from . import dtypes as D
from .errors import DeviceAssertionError, InterpreterError

OPS: dict = {}


def bshape(*shapes):
    """Broadcast shapes (torch.broadcast_shapes imports sympy on first use: 1.5 s)."""
    n = max(len(s) for s in shapes)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(s, n - len(s)):
            if d != 1:
                out[i] = d
    return tuple(out)


def op(*names):
    def deco(f):
        for n in names:
            OPS[n] = f
        return f
    return deco


def elem(v):
    return scalar_of(v.type)


def rank(v) -> int:
    return len(shape_of(v.type))


def _program_mask(ex, r: int):
    """The active-programs mask shaped to broadcast against a value of block rank ``r`` (None: all)."""
    a = ex.active
    if a is None:
        return None
    return a.view((a.shape[0],) + (1,) * r)


# ---------------------------------------------------------------------------
# constants and indices
# ---------------------------------------------------------------------------


@op("constant")
def _constant(o, plan):
    ty = o.results[0].type
    dt = scalar_of(ty)
    shape = shape_of(ty)
    t = D.python_constant(o.attrs["value"], dt)
    if shape:
        t = t.view((1,) + (1,) * len(shape)).expand((1,) + tuple(shape))
    return lambda ex, args: t


@op("program_id")
def _program_id(o, plan):
    axis = o.attrs["axis"]
    return lambda ex, args: ex.pid_t[axis]


@op("num_programs")
def _num_programs(o, plan):
    axis = o.attrs["axis"]
    return lambda ex, args: ex.grid_t[axis]


@op("arange")
def _arange(o, plan):
    t = torch.arange(o.attrs["start"], o.attrs["end"], dtype=torch.int32).view(1, -1)
    return lambda ex, args: t


# ---------------------------------------------------------------------------
# shape
# ---------------------------------------------------------------------------


@op("splat")
def _splat(o, plan):
    shape = tuple(shape_of(o.results[0].type))
    ones = (1,) * len(shape)

    def f(ex, args):
        x = args[0]
        return x.view((x.shape[0],) + ones).expand((x.shape[0],) + shape)
    return f


@op("broadcast")
def _broadcast(o, plan):
    shape = tuple(shape_of(o.results[0].type))

    def f(ex, args):
        x = args[0]
        return x.expand((x.shape[0],) + shape)
    return f


@op("expand_dims")
def _expand_dims(o, plan):
    axis = o.attrs["axis"] + 1
    return lambda ex, args: args[0].unsqueeze(axis)


@op("reshape")
def _reshape(o, plan):
    shape = tuple(shape_of(o.results[0].type))

    def f(ex, args):
        x = args[0]
        return x.reshape((x.shape[0],) + shape)
    return f


@op("permute")
def _permute(o, plan):
    order = (0,) + tuple(i + 1 for i in o.attrs["order"])
    return lambda ex, args: args[0].permute(order)


@op("join")
def _join(o, plan):
    return lambda ex, args: torch.stack(torch.broadcast_tensors(args[0], args[1]), dim=-1)


@op("split")
def _split(o, plan):
    return lambda ex, args: (args[0][..., 0], args[0][..., 1])


@op("cat")
def _cat(o, plan):
    return lambda ex, args: torch.cat(torch.broadcast_tensors(args[0], args[1]), dim=1)


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------


def _fp8_wrap(f, dt, float_result=True):
    """Run ``f`` on fp32 copies of fp8 operands and round the result back."""
    if not dt.is_fp8():
        return f
    if float_result:
        return lambda *xs: D.cast(f(*[D.to_f32(x, dt) for x in xs]), lc.float32, dt)
    return lambda *xs: f(*[D.to_f32(x, dt) for x in xs])


def _masked(f, m):
    return lambda a, b: f(a, b) & m


def _int_div(dt, want_mod: bool):
    """C division / remainder with the GPU-like total definition: x // 0 = -1 (all bits), x % 0 = x."""
    name = dt.name
    if name == "uint64":
        def f_u64(a, b):
            zero = b == 0
            bs = torch.where(zero, torch.ones_like(b), b)
            q = D.udiv64(a, bs)
            if want_mod:
                return torch.where(zero, a.expand_as(q) if a.shape != q.shape else a, a - q * bs)
            return torch.where(zero, torch.full_like(q, -1), q)
        return f_u64
    signed = dt.is_int_signed()
    allones = -1 if signed else (D.NARROW_UNSIGNED_MASK.get(name) or (255 if name == "uint8" else 1))

    def f(a, b):
        if signed:
            bad = (b == 0) | (b == -1)
        else:
            bad = b == 0
        if not bool(bad.any()):
            return torch.fmod(a, b) if want_mod else torch.div(a, b, rounding_mode="trunc")
        zero = b == 0
        bs = torch.where(bad, torch.ones_like(b), b)
        if want_mod:
            r = torch.fmod(a, bs)
            if signed:
                r = torch.where(b == -1, torch.zeros_like(r), r)
            return torch.where(zero, a + torch.zeros_like(r), r)
        q = torch.div(a, bs, rounding_mode="trunc")
        if signed:
            q = torch.where(b == -1, -a + torch.zeros_like(q), q)
        return torch.where(zero, torch.full_like(q, allones), q)
    return f


def _exact_fmod(a, b):
    """C ``fmod`` (exact; torch's vectorized fmod loses the result when the quotient is huge)."""
    import numpy as np
    dt = torch.promote_types(a.dtype, b.dtype)
    a, b = torch.broadcast_tensors(a, b)
    wide = torch.float64 if dt == torch.float64 else torch.float32
    an = a.to(wide).contiguous().numpy()
    bn = b.to(wide).contiguous().numpy()
    with np.errstate(all="ignore"):
        r = np.fmod(an, bn)
    return torch.from_numpy(r).to(dt)  # the remainder is exact in the operands' format


def _sqrt_rn(x):
    """Correctly rounded square root: torch's fp32 CPU sqrt is not (about 14% of inputs are one ulp off);
    a float64 square root rounded once to fp32 is (53 >= 2*24 + 2 bits)."""
    if x.dtype == torch.float32:
        return torch.sqrt(x.double()).float()
    if x.dtype == torch.float64:
        # torch's fp64 CPU sqrt is not correctly rounded either (about 1% of inputs); numpy's is
        import numpy as np
        return torch.from_numpy(np.sqrt(x.contiguous().numpy())).view(x.shape)
    return torch.sqrt(x)


def _float_math(name):
    return {
        "exp": torch.exp, "exp2": torch.exp2, "log": torch.log, "log2": torch.log2, "sqrt": _sqrt_rn,
        "sqrt_rn": _sqrt_rn, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh,
        "erf": torch.erf, "floor": torch.floor, "ceil": torch.ceil,
    }[name]


def binary_fn(name, dt, attrs=None):
    """The torch function computing elementwise op ``name`` on representations of ``dt``."""
    attrs = attrs or {}
    fl = dt.is_floating()
    m = D.NARROW_UNSIGNED_MASK.get(dt.name)
    u64 = dt.name == "uint64"
    if name in ("add", "sub", "mul"):
        f = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[name]
        if fl:
            return _fp8_wrap(f, dt)
        if dt.name == "int1":
            return {"add": torch.logical_xor, "sub": torch.logical_xor, "mul": torch.logical_and}[name]
        return _masked(f, m) if m else f
    if name == "truediv":
        return _fp8_wrap(torch.div, dt)
    if name in ("floordiv", "mod"):
        if fl:
            if name == "mod":
                return _exact_fmod
            return _fp8_wrap(lambda a, b: torch.div(a, b, rounding_mode="trunc"), dt)
        return _int_div(dt, name == "mod")
    if name in ("and", "or", "xor"):
        return {"and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor}[name]
    if name == "shl":
        if m:
            return lambda a, b: (a << b) & m
        return lambda a, b: a << b
    if name == "shr":
        if u64:
            return D.lshr64
        return lambda a, b: a >> b
    if name in ("minimum", "maximum"):
        mx = name == "maximum"
        if fl:
            if attrs.get("propagate_nan"):
                f = torch.maximum if mx else torch.minimum
            else:
                f = torch.fmax if mx else torch.fmin
            return _fp8_wrap(f, dt)
        if u64:
            if mx:
                return lambda a, b: torch.where(D.ucmp_key(a) >= D.ucmp_key(b), a, b)
            return lambda a, b: torch.where(D.ucmp_key(a) <= D.ucmp_key(b), a, b)
        return torch.maximum if mx else torch.minimum
    if name == "umulhi":
        # like Triton's tl.umulhi: the high half of the *unsigned* product, whatever the signedness
        w = dt.primitive_bitwidth
        if w == 32 and dt.is_int_signed():
            m = 0xFFFFFFFF
            return lambda a, b: ((((a.to(torch.int64) & m) * (b.to(torch.int64) & m)) >> 32) & m).to(torch.int32)
        if w == 32:
            return lambda a, b: ((a * b) >> 32) & 0xFFFFFFFF
        return D.mulhi_u64
    if name == "div_rn":
        return torch.div
    if name == "pow":
        if dt.name in ("fp16", "bf16") or dt.is_fp8():
            return lambda a, b: D.cast(torch.pow(D.to_f32(a, dt), D.to_f32(b, dt)), lc.float32, dt)
        return torch.pow
    if name in ("lt", "le", "gt", "ge", "eq", "ne"):
        f = {"lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge, "eq": torch.eq, "ne": torch.ne}[name]
        if u64 and name not in ("eq", "ne"):
            return lambda a, b: f(D.ucmp_key(a), D.ucmp_key(b))
        return _fp8_wrap(f, dt, float_result=False)
    raise InterpreterError(f"no elementwise rule for {name!r} on {dt!r}")


@op(*sorted(BINARY))
def _binary(o, plan):
    f = binary_fn(o.name, elem(o.operands[0]), o.attrs)
    return lambda ex, args: f(args[0], args[1])


@op("neg")
def _neg(o, plan):
    dt = elem(o.operands[0])
    m = D.NARROW_UNSIGNED_MASK.get(dt.name)
    if dt.is_fp8():
        if dt.FP8_FORMATS[dt.name][1] == "fnuz":  # no -0: 0 stays 0, the NaN 0x80 stays NaN
            def fnuz_neg(ex, args):
                b = D.bits_of(args[0], dt)
                return D.from_bits(torch.where((b & 0x7F) == 0, b, b ^ -128), dt)
            return fnuz_neg
        return lambda ex, args: D.from_bits(D.bits_of(args[0], dt) ^ -128, dt)
    if m:
        return lambda ex, args: (-args[0]) & m
    if dt.name == "int1":
        return lambda ex, args: args[0]
    return lambda ex, args: torch.neg(args[0])


@op("invert")
def _invert(o, plan):
    dt = elem(o.operands[0])
    m = D.NARROW_UNSIGNED_MASK.get(dt.name)
    if m:
        return lambda ex, args: (~args[0]) & m
    return lambda ex, args: torch.bitwise_not(args[0])


@op("abs")
def _abs(o, plan):
    dt = elem(o.operands[0])
    if dt.is_fp8():
        if dt.FP8_FORMATS[dt.name][1] == "fnuz":  # the NaN 0x80 stays NaN
            def fnuz_abs(ex, args):
                b = D.bits_of(args[0], dt)
                return D.from_bits(torch.where(b == -128, b, b & 0x7F), dt)
            return fnuz_abs
        return lambda ex, args: D.from_bits(D.bits_of(args[0], dt) & 0x7F, dt)
    if D.is_unsigned(dt):
        return lambda ex, args: args[0]
    return lambda ex, args: torch.abs(args[0])


@op("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "tanh", "erf", "floor", "ceil")
def _unary_math(o, plan):
    dt = elem(o.operands[0])
    f = _float_math(o.name)
    if dt.name in ("fp16", "bf16") or dt.is_fp8():
        return lambda ex, args: D.cast(f(D.to_f32(args[0], dt)), lc.float32, dt)
    return lambda ex, args: f(args[0])


def _two_prod_f64(a, b):
    """Dekker: p + e == a * b exactly (no overflow)."""
    p = a * b
    split = 134217729.0  # 2**27 + 1

    def halves(x):
        c = split * x
        hi = c - (c - x)
        return hi, x - hi
    ah, al = halves(a)
    bh, bl = halves(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@op("fma")
def _fma(o, plan):
    dt = elem(o.operands[0])
    if dt.name == "fp64":
        def f64(ex, args):
            a, b, c = args
            p, e = _two_prod_f64(a, b)
            s = p + c
            bb = s - p
            t = (p - (s - bb)) + (c - bb)
            r = s + (t + e)
            return torch.where(torch.isfinite(r), r, a * b + c)
        return f64

    def f(ex, args):
        a, b, c = (x.to(torch.float64) for x in args)
        s = D.add_f64_odd(a * b, c)  # a*b is exact in fp64 for fp32 and narrower inputs
        return D.cast(s, lc.float64, dt)
    return f


@op("where")
def _where(o, plan):
    dt = elem(o.results[0])
    if dt.is_fp8():
        def f8(ex, args):
            c, x, y = args
            return D.from_bits(torch.where(c, D.bits_of(x, dt), D.bits_of(y, dt)), dt)
        return f8
    return lambda ex, args: torch.where(args[0], args[1], args[2])


@op("cast")
def _cast(o, plan):
    src, dst = elem(o.operands[0]), elem(o.results[0])
    rnd = o.attrs.get("rounding") or "rtne"
    return lambda ex, args: D.cast(args[0], src, dst, rnd)


@op("bitcast")
def _bitcast(o, plan):
    src, dst = elem(o.operands[0]), elem(o.results[0])
    return lambda ex, args: D.bitcast(args[0], src, dst)


@op("addptr")
def _addptr(o, plan):
    isz = D.itemsize(elem(o.results[0]).element_ty)

    def f(ex, args):
        p, off = args
        if off.dtype != torch.int64:
            off = off.to(torch.int64)
        return p + off * isz if isz != 1 else p + off
    return f


@op("hint")
def _hint(o, plan):
    return lambda ex, args: args[0]


@op("barrier")
def _barrier(o, plan):
    return lambda ex, args: None


@op("assume")
def _assume(o, plan):
    def f(ex, args):
        c = args[0]
        a = ex.active
        bad = ~c if a is None else (a & ~c)
        if bool(bad.any()):
            lane = int(torch.nonzero(bad.reshape(-1))[0])
            pid, _ = ex.lane_position(lane, bad.shape)
            raise InterpreterError("the condition of nl.assume is false", kernel=ex.kernel_name, loc=o.loc,
                                   pid=pid, hint="the compiler may optimize on this assumption; it must hold")
    return f


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------


def _effective_mask(ex, mask, r):
    pm = _program_mask(ex, r)
    if pm is None:
        return mask
    return pm if mask is None else mask & pm


@op("load")
def _load(o, plan):
    dt = elem(o.operands[0]).element_ty
    r = rank(o.results[0])
    has_mask = o.operand("mask") is not None
    has_other = o.operand("other") is not None
    zero = D.python_constant(0, dt).view(())

    def f(ex, args):
        ptr = args[0]
        mask = args[1] if has_mask else None
        mask = _effective_mask(ex, mask, r)
        if mask is not None:
            ptr, mask = torch.broadcast_tensors(ptr, mask)
        vals = ex.mem.load(ex, o, ptr, mask, dt)
        if mask is None:
            return vals
        other = args[2] if has_other else zero
        if vals is None:
            return torch.broadcast_to(other, ptr.shape)
        return torch.where(mask, vals, other)
    return f


@op("store")
def _store(o, plan):
    dt = elem(o.operands[0]).element_ty
    r = rank(o.operands[0])
    has_mask = o.operand("mask") is not None

    def f(ex, args):
        ptr, val = args[0], args[1]
        mask = args[2] if has_mask else None
        mask = _effective_mask(ex, mask, r)
        if mask is not None:
            ptr, val, mask = torch.broadcast_tensors(ptr, val, mask)
        elif ptr.shape != val.shape:
            ptr, val = torch.broadcast_tensors(ptr, val)
        ex.mem.store(ex, o, ptr, val, mask, dt)
    return f


def _full_programs(ex, ts, r):
    """Expand every tensor to the full (programs x block) shape: each program performs the access."""
    shape = bshape(*[t.shape for t in ts if t is not None])
    shape = (ex.P,) + tuple(shape[1:])
    return [None if t is None else t.expand(shape) for t in ts]


@op("atomic_rmw")
def _atomic_rmw(o, plan):
    dt = elem(o.operands[0]).element_ty
    r = rank(o.operands[0])
    kind = o.attr("kind")
    has_mask = o.operand("mask") is not None
    need_old = id(o.results[0]) in plan.analysis.used

    def f(ex, args):
        ptr, val = args[0], args[1]
        mask = args[2] if has_mask else None
        mask = _effective_mask(ex, mask, r)
        ptr, val, mask = _full_programs(ex, [ptr, val, mask], r)
        old = ex.mem.atomic(ex, o, kind, ptr, val, None, mask, dt, need_old)
        return old
    return f


@op("atomic_poll")
def _atomic_poll(o, plan):
    dt = elem(o.operands[0]).element_ty
    has_timeout = o.operand("timeout") is not None

    def f(ex, args):
        ptr, expected = torch.broadcast_tensors(args[0], args[1])
        vals = ex.mem.load(ex, o, ptr, None, dt)
        seen = vals == expected
        if not has_timeout and not bool(seen.all()):
            # programs run in lockstep here: nothing else can store while this op waits
            raise InterpreterError("nl.atomic_poll without a timeout would wait forever: the expected value is "
                                   "not in memory", kernel=ex.kernel_name, loc=o.loc,
                                   hint="pass timeout_ns=..., or store the value before polling")
        return seen
    return f


@op("atomic_cas")
def _atomic_cas(o, plan):
    dt = elem(o.operands[0]).element_ty
    r = rank(o.operands[0])
    has_mask = o.operand("mask") is not None
    need_old = id(o.results[0]) in plan.analysis.used

    def f(ex, args):
        ptr, cmp, val = args[0], args[1], args[2]
        mask = _effective_mask(ex, args[3] if has_mask else None, r)
        ptr, cmp, val, mask = _full_programs(ex, [ptr, cmp, val, mask], r)
        return ex.mem.atomic(ex, o, "cas", ptr, val, cmp, mask, dt, need_old)
    return f


# ---------------------------------------------------------------------------
# reductions and scans
# ---------------------------------------------------------------------------


def _nan_ignoring(x, dim, mx: bool):
    if not x.is_floating_point():
        return x.amax(dim) if mx else x.amin(dim)
    nan = torch.isnan(x)
    if not bool(nan.any()):
        return x.amax(dim) if mx else x.amin(dim)
    fill = float("-inf") if mx else float("inf")
    r = torch.where(nan, fill, x)
    r = r.amax(dim) if mx else r.amin(dim)
    return torch.where(nan.all(dim), float("nan"), r)


def _tree_reduce(x, dim, f):
    """Combine adjacent pairs along ``dim`` until one element is left (power-of-two size)."""
    while x.shape[dim] > 1:
        n = x.shape[dim] // 2
        pairs = x.unflatten(dim, (n, 2))
        x = f(pairs.select(dim + 1, 0), pairs.select(dim + 1, 1))
    return x.squeeze(dim)


def reduce_fn(combine, dt):
    """Reduction along ``dim`` of a single operand for the builtin combines."""
    fl = dt.is_floating()
    if combine == "add":
        if fl:
            if dt.is_fp8():
                return lambda x, dim: D.cast(D.to_f32(x, dt).sum(dim), lc.float32, dt)
            return lambda x, dim: x.sum(dim)
        return lambda x, dim: D.wrap_int(x.sum(dim, dtype=torch.int64), dt)
    if combine in ("max", "min"):
        mx = combine == "max"
        if dt.name == "uint64":
            return lambda x, dim: D.ucmp_key(_nan_ignoring(D.ucmp_key(x), dim, mx))
        if dt.is_fp8():
            return lambda x, dim: D.cast(_nan_ignoring(D.to_f32(x, dt), dim, mx), lc.float32, dt)
        return lambda x, dim: _nan_ignoring(x, dim, mx)
    if combine == "xor":
        return lambda x, dim: _tree_reduce(x, dim, torch.bitwise_xor)
    raise InterpreterError(f"unknown reduction {combine!r}")


def _argreduce(values, indices, dim, mx, tie_left, dt):
    v = values
    if dt.name == "uint64":
        v = D.ucmp_key(v)
    elif dt.is_fp8() or dt.name == "int1":
        v = v.to(torch.float32)
    if v.is_floating_point():
        nan = torch.isnan(v)
        v = torch.where(nan, float("-inf") if mx else float("inf"), v)
    n = v.shape[dim]
    if tie_left:
        pos = v.argmax(dim) if mx else v.argmin(dim)
    else:
        pos = (n - 1) - (v.flip(dim).argmax(dim) if mx else v.flip(dim).argmin(dim))
    pos = pos.unsqueeze(dim)
    values, indices = torch.broadcast_tensors(values, indices)
    return values.gather(dim, pos).squeeze(dim), indices.gather(dim, pos).squeeze(dim)


@op("gather")
def _gather(o, plan):
    dim = o.attrs["axis"] + 1

    def f(ex, src, idx=None):
        n = max(src.shape[0], idx.shape[0])
        src = src.expand((n,) + tuple(src.shape[1:]))
        idx = idx.expand((n,) + tuple(idx.shape[1:])).to(torch.int64)
        return torch.gather(src, dim, idx)
    return lambda ex, args: f(ex, args[0], args[1])


@op("histogram")
def _histogram(o, plan):
    nb = o.attrs["num_bins"]

    def f(ex, args):
        xs = torch.broadcast_tensors(*args) if len(args) > 1 else args
        x = xs[0].to(torch.int64)
        keep = (x >= 0) & (x < nb)
        if len(xs) > 1:
            keep &= xs[1].bool()
        idx = torch.where(keep, x, torch.full_like(x, nb))  # uncounted elements go to a spare bin
        out = torch.zeros(x.shape[0], nb + 1, dtype=torch.int64, device=x.device)
        out.scatter_add_(1, idx, torch.ones_like(idx))
        return out[:, :nb].to(torch.int32)
    return f


@op("reduce")
def _reduce(o, plan):
    axis = o.attrs["axis"]
    dim = axis + 1
    combine = o.attrs["combine"]
    if combine == "region":
        rp = plan.region(o.regions[0])
        n = len(o.operands)

        def fr(ex, args):
            xs = list(torch.broadcast_tensors(*args)) if n > 1 else list(args)
            while xs[0].shape[dim] > 1:
                half = xs[0].shape[dim] // 2
                pairs = [x.unflatten(dim, (half, 2)) for x in xs]
                lhs = [p.select(dim + 1, 0) for p in pairs]
                rhs = [p.select(dim + 1, 1) for p in pairs]
                xs = ex.eval_combine(rp, lhs, rhs)
            outs = [x.squeeze(dim) for x in xs]
            return tuple(outs) if n > 1 else outs[0]
        return fr
    if combine in ("argmax", "argmin"):
        dt = elem(o.operands[0])
        tie = o.attr("tie_break_left")
        mx = combine == "argmax"
        return lambda ex, args: _argreduce(args[0], args[1], dim, mx, tie, dt)
    dt = elem(o.operands[0])
    f = reduce_fn(combine, dt)
    return lambda ex, args: f(args[0], dim)


def _cum_nan_ignoring(x, dim, mx):
    if not x.is_floating_point():
        return (torch.cummax if mx else torch.cummin)(x, dim).values
    nan = torch.isnan(x)
    fill = float("-inf") if mx else float("inf")
    r = (torch.cummax if mx else torch.cummin)(torch.where(nan, fill, x), dim).values
    allnan = torch.cumprod(nan.to(torch.uint8), dim).bool()
    return torch.where(allnan, float("nan"), r)


def scan_fn(combine, dt):
    fl = dt.is_floating()
    if combine in ("add", "mul"):
        f = torch.cumsum if combine == "add" else torch.cumprod
        if fl:
            if dt.name in ("fp16", "bf16") or dt.is_fp8():
                return lambda x, dim: D.cast(f(D.to_f32(x, dt), dim), lc.float32, dt)
            return lambda x, dim: f(x, dim)
        return lambda x, dim: D.wrap_int(f(x.to(torch.int64), dim), dt)
    if combine in ("max", "min"):
        mx = combine == "max"
        if dt.name == "uint64":
            return lambda x, dim: D.ucmp_key(_cum_nan_ignoring(D.ucmp_key(x), dim, mx))
        if dt.is_fp8() or dt.name == "int1":
            return lambda x, dim: D.cast(_cum_nan_ignoring(D.to_f32(x, dt), dim, mx), lc.float32, dt)
        return lambda x, dim: _cum_nan_ignoring(x, dim, mx)
    raise InterpreterError(f"unknown scan {combine!r}")


@op("scan")
def _scan(o, plan):
    dim = o.attrs["axis"] + 1
    rev = o.attr("reverse")
    combine = o.attrs["combine"]
    n = len(o.operands)
    if combine == "region":
        rp = plan.region(o.regions[0])

        def fr(ex, args):
            xs = list(torch.broadcast_tensors(*args)) if n > 1 else list(args)
            if rev:
                xs = [x.flip(dim) for x in xs]
            size = xs[0].shape[dim]
            d = 1
            while d < size:
                earlier = [x.narrow(dim, 0, size - d) for x in xs]
                later = [x.narrow(dim, d, size - d) for x in xs]
                # a reversed scan is the forward scan of the flipped block (Triton's semantics):
                # combine(carry, element) with the carry coming from the end
                comb = ex.eval_combine(rp, earlier, later)
                xs = [torch.cat([x.narrow(dim, 0, d), c], dim) for x, c in zip(xs, comb)]
                d *= 2
            if rev:
                xs = [x.flip(dim) for x in xs]
            return tuple(xs) if n > 1 else xs[0]
        return fr
    dt = elem(o.operands[0])
    f = scan_fn(combine, dt)
    if rev:
        return lambda ex, args: f(args[0].flip(dim), dim).flip(dim)
    return lambda ex, args: f(args[0], dim)


# ---------------------------------------------------------------------------
# dot
# ---------------------------------------------------------------------------


def _split_tf32(x):
    big = D.tf32_round(x)
    return big, D.tf32_round(x - big)


@op("dot")
def _dot(o, plan):
    ta = elem(o.operands[0])
    tacc = elem(o.operands[2])
    prec = o.attr("input_precision")
    if ta.is_fp32() and not prec:
        prec = "tf32"

    if ta.is_int():
        def fi(ex, args):
            a, b, acc = args
            p = torch.matmul(a.to(torch.float64), b.to(torch.float64))  # exact for int8 products
            return D.wrap_int(acc.to(torch.int64) + p.to(torch.int64), tacc)
        return fi
    if ta.is_fp64():
        return lambda ex, args: args[2] + torch.matmul(args[0], args[1])

    def ff(ex, args):
        a, b, acc = args
        a = a.to(torch.float32)
        b = b.to(torch.float32)
        if ta.is_fp32() and prec in ("tf32", "tf32x3"):
            if prec == "tf32":
                p = torch.matmul(D.tf32_round(a), D.tf32_round(b))
            else:
                ab, asm = _split_tf32(a)
                bb, bsm = _split_tf32(b)
                p = torch.matmul(ab, bsm) + torch.matmul(asm, bb) + torch.matmul(ab, bb)
        else:
            p = torch.matmul(a, b)
        if tacc.is_fp32():
            return acc + p
        if tacc.is_fp64():
            return acc + p.to(torch.float64)
        return D.cast(acc.to(torch.float32) + p, lc.float32, tacc)
    return ff


# ---------------------------------------------------------------------------
# debugging
# ---------------------------------------------------------------------------


def _fmt_value(v, dt, hexa: bool) -> str:
    if hexa:
        w = dt.primitive_bitwidth if not dt.is_ptr() else 64
        if dt.name == "int1":
            return hex(int(v))
        return f"0x{int(v) & ((1 << w) - 1):0{max(w // 4, 1)}x}"
    if dt.is_ptr():
        return f"{int(v):#x}"
    if dt.name == "int1":
        return str(int(bool(v)))
    if dt.is_floating():
        x = float(v)
        if math.isnan(x) or math.isinf(x):
            return str(x)
        if dt.name == "fp64":
            return repr(x)
        return _short_float(x, dt)
    return str(int(v))


def _short_float(x: float, dt) -> str:
    """The shortest decimal that reads back to the same value of ``dt``."""
    td = D.rep_dtype(dt)
    ref = torch.tensor([x], dtype=torch.float64).to(td)
    for digits in range(1, 18):
        s = f"{x:.{digits}g}"
        if torch.tensor([float(s)], dtype=torch.float64).to(td).view(-1)[0] == ref.view(-1)[0] or digits >= 9:
            return s
    return repr(x)


def print_mode() -> str:
    return os.environ.get("NEWT_INTERPRET_PRINT", "elements").strip().lower() or "elements"


@op("print")
def _print(o, plan):
    prefix = o.attr("prefix")
    hexa = bool(o.attr("hex"))
    dts = [elem(v) for v in o.operands]
    shapes = [tuple(shape_of(v.type)) for v in o.operands]

    def f(ex, args):
        compact = (ex.print_mode or print_mode()) == "compact"
        progs = ex.active_programs()
        vals = [a.expand((ex.P,) + tuple(a.shape[1:])) if a.shape[0] == 1 else a for a in args]
        if not args:
            for p in progs:
                ex.printed.append((p, [f"pid {ex.pid_of(p)} {prefix}".rstrip()]))
        for p in progs:
            pid = ex.pid_of(p)
            lines = []
            ex.printed.append((p, lines))
            for k, (v, dt, shp) in enumerate(zip(vals, dts, shapes)):
                tag = f"{prefix}(operand {k}) " if len(args) > 1 else prefix
                pv = v[p]
                if compact:
                    if shp:
                        body = _fmt_block(pv, dt, hexa)
                    else:
                        body = _fmt_value(pv.item(), dt, hexa)
                    lines.append(f"pid {pid} {tag}{body}")
                    continue
                if not shp:
                    lines.append(f"pid {pid} idx () {tag}{_fmt_value(pv.item(), dt, hexa)}")
                    continue
                flat = _plain_list(pv.reshape(-1), dt)
                for i, x in enumerate(flat):
                    idx = _unravel(i, shp)
                    lines.append(f"pid {pid} idx ({', '.join(map(str, idx))}) {tag}{_fmt_value(x, dt, hexa)}")
    return f


def _plain_list(t, dt):
    if dt.is_fp8() or dt.name in ("bf16", "fp16"):
        return D.to_f32(t, dt).tolist()
    return t.tolist()


def _fmt_block(t, dt, hexa):
    def rec(x):
        if x.dim() == 0:
            return _fmt_value(x.item() if not (dt.is_fp8()) else D.to_f32(x, dt).item(), dt, hexa)
        return "[" + ", ".join(rec(y) for y in x) + "]"
    return rec(t)


def _unravel(i, shape):
    idx = []
    for d in reversed(shape):
        idx.append(i % d)
        i //= d
    return tuple(reversed(idx))


@op("assert")
def _assert(o, plan):
    msg = o.attr("msg")
    has_mask = o.operand("mask") is not None
    r = rank(o.operands[0])

    def f(ex, args):
        cond = args[0]
        bad = ~cond
        if has_mask:
            bad = bad & args[1]
        pm = _program_mask(ex, r)
        if pm is not None:
            bad = bad & pm
        if bool(bad.any()):
            if bad.shape[0] == 1 and ex.P > 1:
                bad = bad.expand((ex.P,) + tuple(bad.shape[1:]))
            lane = int(torch.nonzero(bad.reshape(-1))[0])
            pid, index = ex.lane_position(lane, bad.shape)
            n = int(bad.sum())
            where = f" at block index {index}" if r else ""
            detail = (msg or "assertion failed") + where
            if n > 1:
                detail += f" ({n} failing elements)"
            raise DeviceAssertionError(detail, kernel=ex.kernel_name, loc=o.loc, pid=pid)
    return f


# ---------------------------------------------------------------------------
# inline assembly (nl.inline_asm_elementwise): the PTX-subset evaluator of ptx.py
# ---------------------------------------------------------------------------


@op("inline_asm")
def _inline_asm(o, plan):
    from . import ptx

    asm, cons, pack = o.attrs["asm"], o.attrs["constraints"], o.attr("pack")
    in_t = [elem(v) for v in o.operands]
    out_t = [elem(r) for r in o.results]
    shape = tuple(shape_of(o.results[0].type))

    def f(ex, args):
        try:
            res = ptx.run_elementwise(asm, cons, pack, list(args), in_t, out_t, shape)
        except ptx.PtxError as e:
            raise InterpreterError(f"nl.inline_asm_elementwise: {e}", kernel=ex.kernel_name, loc=o.loc,
                                   hint="the interpreter runs a subset of PTX (docs/interpreter.md, 'Inline "
                                        "assembly'); on a GPU the asm runs as written") from None
        return tuple(res) if len(res) > 1 else res[0]
    return f


@op("libdevice")
def _libdevice(o, plan):
    from .libdevice import reference  # the torch references of newt.language.extra.libdevice
    f = reference(o.attrs["fn"], [elem(x).name for x in o.operands], elem(o.results[0]).name)
    return lambda ex, args: f(*args)
