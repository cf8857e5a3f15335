"""Elementwise ops on every dtype, against exact Python/torch references."""

from __future__ import annotations

import math

import pytest
import torch

import newt
import newt.language as nl

from .util import (
    FLOAT_DTYPES,
    INT_DTYPES,
    assert_same,
    bits,
    float_values,
    int_range,
    int_values,
    signed,
    tensor_of,
    wrap,
)

BLOCK = 64


@newt.jit
def binop_kernel(x_ptr, y_ptr, out_ptr, n, OP: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    y = nl.load(y_ptr + offs, mask=m)
    if OP == "add":
        z = x + y
    elif OP == "sub":
        z = x - y
    elif OP == "mul":
        z = x * y
    elif OP == "truediv":
        z = x / y
    elif OP == "floordiv":
        z = x // y
    elif OP == "mod":
        z = x % y
    elif OP == "and":
        z = x & y
    elif OP == "or":
        z = x | y
    elif OP == "xor":
        z = x ^ y
    elif OP == "shl":
        z = x << y
    elif OP == "shr":
        z = x >> y
    elif OP == "minimum":
        z = nl.minimum(x, y)
    elif OP == "maximum":
        z = nl.maximum(x, y)
    elif OP == "minimum_nan":
        z = nl.minimum(x, y, propagate_nan=nl.PropagateNan.ALL)
    elif OP == "maximum_nan":
        z = nl.maximum(x, y, propagate_nan=nl.PropagateNan.ALL)
    elif OP == "umulhi":
        z = nl.umulhi(x, y)
    elif OP == "lt":
        z = x < y
    elif OP == "le":
        z = x <= y
    elif OP == "gt":
        z = x > y
    elif OP == "ge":
        z = x >= y
    elif OP == "eq":
        z = x == y
    elif OP == "ne":
        z = x != y
    elif OP == "div_rn":
        z = nl.div_rn(x, y)
    elif OP == "pow":
        z = nl.math.pow(x, y)
    else:
        nl.static_assert(False, "unknown op")
    nl.store(out_ptr + offs, z, mask=m)


def run_binop(backend, op, x, y, out_dtype):
    n = x.numel()
    out = backend.empty(n, dtype=out_dtype)
    xd, yd = backend.put(x, y)
    backend.launch(binop_kernel, (newt.cdiv(n, BLOCK),), xd, yd, out, n, OP=op, BLOCK=BLOCK)
    return backend.get(out)


def c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


INT_REF = {
    "add": lambda a, b, dt: wrap(a + b, dt),
    "sub": lambda a, b, dt: wrap(a - b, dt),
    "mul": lambda a, b, dt: wrap(a * b, dt),
    "floordiv": lambda a, b, dt: wrap(c_div(a, b), dt),
    "mod": lambda a, b, dt: wrap(a - b * c_div(a, b), dt),
    "and": lambda a, b, dt: wrap(a & b, dt),
    "or": lambda a, b, dt: wrap(a | b, dt),
    "xor": lambda a, b, dt: wrap(a ^ b, dt),
    "shl": lambda a, b, dt: wrap(a << b, dt),
    "shr": lambda a, b, dt: wrap(a >> b, dt),
    "minimum": lambda a, b, dt: min(a, b),
    "maximum": lambda a, b, dt: max(a, b),
    # unsigned product of the bit patterns, like Triton's tl.umulhi
    "umulhi": lambda a, b, dt: wrap(((a % (1 << bits(dt))) * (b % (1 << bits(dt)))) >> bits(dt), dt),
}
CMP_REF = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
           "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def int_operands(dt, op, n=200):
    g = torch.Generator().manual_seed(hash((str(dt), op)) % 1000)
    a = int_values(dt, n, g)
    b = int_values(dt, n, g)[::-1]
    if op in ("floordiv", "mod"):
        lo, _ = int_range(dt)
        # division by zero and MIN // -1 have no portable GPU result: tests/interpreter covers them
        b = [v if v != 0 else 3 for v in b]
        b = [(-3 if (x == lo and v == -1) else v) for x, v in zip(a, b)]
    if op in ("shl", "shr"):
        b = [v % bits(dt) for v in b]
    return a, b


@pytest.mark.parametrize("dt", INT_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(INT_REF) + list(CMP_REF))
def test_int_binary(backend, dt, op):
    if op == "umulhi" and bits(dt) < 32:
        pytest.skip("umulhi is defined for 32- and 64-bit integers")
    a, b = int_operands(dt, op)
    cmp = op in CMP_REF
    got = run_binop(backend, op, tensor_of(a, dt), tensor_of(b, dt), torch.bool if cmp else dt)
    if cmp:
        want = torch.tensor([CMP_REF[op](x, y) for x, y in zip(a, b)])
    else:
        want = tensor_of([INT_REF[op](x, y, dt) for x, y in zip(a, b)], dt)
    assert_same(got, want, msg=f"{op} {dt}")


def test_int_truediv_gives_fp32(backend):
    a = int_values(torch.int32, 100)
    b = [v or 7 for v in int_values(torch.int32, 100)[::-1]]
    got = run_binop(backend, "truediv", tensor_of(a, torch.int32), tensor_of(b, torch.int32), torch.float32)
    want = torch.tensor(a, dtype=torch.float32) / torch.tensor(b, dtype=torch.float32)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)


FLOAT_OPS = ["add", "sub", "mul", "truediv", "mod", "minimum", "maximum", "minimum_nan", "maximum_nan", "lt", "le",
             "gt", "ge", "eq", "ne"]


def exact_fmod(x, y):
    import numpy as np
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    with np.errstate(all="ignore"):
        r = np.fmod(x.to(wide).numpy(), y.to(wide).numpy())
    return torch.from_numpy(r).to(x.dtype)


def float_ref(op, x, y):
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        return getattr(torch, op)(x, y)
    if op == "mod":
        return exact_fmod(x, y)  # C fmod; torch's vectorized fmod is wrong for huge quotients
    f = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "truediv": torch.div, "mod": torch.fmod,
         "minimum": torch.fmin, "maximum": torch.fmax, "minimum_nan": torch.minimum,
         "maximum_nan": torch.maximum, "div_rn": torch.div}[op]
    if x.dtype in (torch.float16, torch.bfloat16):
        # one rounding of the exact result: compute in fp64, round once
        return f(x.double(), y.double()).to(x.dtype)
    return f(x, y)


# ops the GPU computes with an approximation (fast division) get a tolerance there
_APPROX = {"truediv": 2e-7}


@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", FLOAT_OPS)
def test_float_binary(backend, dt, op):
    x = float_values(dt, 150)
    y = float_values(dt, 150, gen=torch.Generator().manual_seed(9)).flip(0)
    cmp = op in ("lt", "le", "gt", "ge", "eq", "ne")
    got = run_binop(backend, op, x, y, torch.bool if cmp else dt)
    want = float_ref(op, x, y)
    if backend.name == "cuda" and op in _APPROX and dt == torch.float32:
        fin = torch.isfinite(want) & (want.abs() > 1e-30) & (want.abs() < 1e30)
        assert_same(got[fin], want[fin], rtol=_APPROX[op], atol=0, msg=f"{op} {dt}")
        return
    assert_same(got, want, msg=f"{op} {dt}")


@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=str)
def test_div_rn_is_ieee(backend, dt):
    x = float_values(dt, 200)
    y = float_values(dt, 200, gen=torch.Generator().manual_seed(3))
    assert_same(run_binop(backend, "div_rn", x, y, dt), x / y)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_pow(backend, dt):
    x = torch.rand(128, dtype=torch.float64).mul(4).to(dt)
    y = (torch.rand(128, dtype=torch.float64) * 6 - 3).to(dt)
    got = run_binop(backend, "pow", x, y, dt)
    want = torch.pow(x.float(), y.float()).to(dt)
    tol = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1e-6}[dt]
    torch.testing.assert_close(got, want, rtol=tol, atol=0)


# ---------------------------------------------------------------------------
# unary ops
# ---------------------------------------------------------------------------


@newt.jit
def unary_kernel(x_ptr, out_ptr, n, OP: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    if OP == "neg":
        z = -x
    elif OP == "invert":
        z = ~x
    elif OP == "abs":
        z = nl.abs(x)
    elif OP == "not":
        z = not x
    elif OP == "exp":
        z = nl.exp(x)
    elif OP == "exp2":
        z = nl.exp2(x)
    elif OP == "log":
        z = nl.log(x)
    elif OP == "log2":
        z = nl.log2(x)
    elif OP == "sqrt":
        z = nl.sqrt(x)
    elif OP == "sqrt_rn":
        z = nl.sqrt_rn(x)
    elif OP == "rsqrt":
        z = nl.rsqrt(x)
    elif OP == "sin":
        z = nl.sin(x)
    elif OP == "cos":
        z = nl.cos(x)
    elif OP == "tanh":
        z = nl.math.tanh(x)
    elif OP == "erf":
        z = nl.erf(x)
    elif OP == "floor":
        z = nl.floor(x)
    elif OP == "ceil":
        z = nl.ceil(x)
    elif OP == "sigmoid":
        z = nl.sigmoid(x)
    else:
        nl.static_assert(False, "unknown op")
    nl.store(out_ptr + offs, z, mask=m)


def run_unary(backend, op, x, out_dtype=None):
    n = x.numel()
    out = backend.empty(n, dtype=out_dtype or x.dtype)
    backend.launch(unary_kernel, (newt.cdiv(n, BLOCK),), backend.put(x), out, n, OP=op, BLOCK=BLOCK)
    return backend.get(out)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["neg", "invert", "abs"])
def test_int_unary(backend, dt, op):
    a = int_values(dt, 100)
    f = {"neg": lambda v: wrap(-v, dt), "invert": lambda v: wrap(~v, dt),
         "abs": lambda v: wrap(abs(v), dt) if signed(dt) else v}[op]
    assert_same(run_unary(backend, op, tensor_of(a, dt)), tensor_of([f(v) for v in a], dt), msg=f"{op} {dt}")


@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["neg", "abs", "floor", "ceil"])
def test_float_exact_unary(backend, dt, op):
    x = float_values(dt, 128)
    want = {"neg": torch.neg, "abs": torch.abs, "floor": torch.floor, "ceil": torch.ceil}[op](x)
    assert_same(run_unary(backend, op, x), want, msg=f"{op} {dt}")


def _sqrt_exact(x):
    # torch's fp32 CPU sqrt is not correctly rounded; a float64 sqrt rounded once to fp32 is
    # (and its fp64 sqrt is not either: numpy's is)
    if x.dtype == torch.float64:
        import numpy as np
        return torch.from_numpy(np.sqrt(x.numpy()))
    return torch.sqrt(x.double()).to(x.dtype) if x.dtype == torch.float32 else torch.sqrt(x)


MATH = {"exp": torch.exp, "exp2": torch.exp2, "log": torch.log, "log2": torch.log2, "sqrt": _sqrt_exact,
        "sqrt_rn": _sqrt_exact, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh,
        "erf": torch.erf, "sigmoid": torch.sigmoid}


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("op", list(MATH))
def test_float_math(backend, dt, op):
    if op == "sqrt_rn" and dt in (torch.float16, torch.bfloat16):
        pytest.skip("sqrt_rn is fp32/fp64 only")
    x = (torch.rand(256, dtype=torch.float64) * 8 - 4)
    if op in ("log", "log2", "sqrt", "sqrt_rn", "rsqrt"):
        x = x.abs() + 1e-3
    x = x.to(dt)
    got = run_unary(backend, op, x)
    # fp16/bf16 compute in fp32 and round once
    want = MATH[op](x.float()).to(dt) if dt in (torch.float16, torch.bfloat16) else MATH[op](x)
    if backend.name == "interpreter" or op == "sqrt_rn":
        assert_same(got, want, msg=f"{op} {dt}") if op != "sigmoid" else \
            torch.testing.assert_close(got, want, rtol=2e-6 if dt == torch.float32 else 1e-2, atol=1e-7)
    else:
        tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 3e-6, torch.float64: 1e-12}[dt]
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_math_special_values(backend):
    x = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), -1.0, 1e-45])
    assert_same(run_unary(backend, "sqrt_rn", x), torch.sqrt(x))
    got = run_unary(backend, "exp", x)
    assert got[2] == float("inf") and got[3] == 0.0 and math.isnan(got[4]) and got[0] == 1.0
    got = run_unary(backend, "log", x)
    assert got[0] == float("-inf") and math.isnan(got[5]) and got[2] == float("inf")


# ---------------------------------------------------------------------------
# fma, where, clamp
# ---------------------------------------------------------------------------


@newt.jit
def fma_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    y = nl.load(y_ptr + offs, mask=m)
    z = nl.load(z_ptr + offs, mask=m)
    nl.store(out_ptr + offs, nl.fma(x, y, z), mask=m)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_fma_rounds_once(backend, dt):
    n = 4096
    g = torch.Generator().manual_seed(5)
    x = torch.randn(n, generator=g).to(dt)
    y = torch.randn(n, generator=g).to(dt)
    # z close to -x*y: the exact product matters (a separate multiply would round it away)
    z = (-(x.double() * y.double()) * (1 + torch.randn(n, generator=g, dtype=torch.float64) * 1e-3)).to(dt)
    out = backend.empty(n, dtype=dt)
    xd, yd, zd = backend.put(x, y, z)
    backend.launch(fma_kernel, (newt.cdiv(n, 256),), xd, yd, zd, out, n, BLOCK=256)
    # reference: the exact value x*y+z computed with fractions, rounded once
    from fractions import Fraction
    want = []
    for a, b, c in zip(x.double().tolist(), y.double().tolist(), z.double().tolist()):
        exact = Fraction(a) * Fraction(b) + Fraction(c)
        want.append(_round_fraction(exact, dt))
    assert_same(backend.get(out), torch.tensor(want, dtype=torch.float64).to(dt) if dt == torch.float32 else
                torch.tensor(want, dtype=torch.float32).to(dt))


def _round_fraction(q, dt):
    """Round a Fraction to ``dt`` (nearest even) via exact comparison with its neighbours."""
    approx = torch.tensor([float(q)], dtype=torch.float64).to(dt)
    from fractions import Fraction
    best = approx
    # candidates: approx and its two neighbours in dt
    ib = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}[dt]
    b = approx.view(ib)
    cands = [approx, (b + 1).view(dt), (b - 1).view(dt)]
    err = None
    for c in cands:
        v = c.double().item()
        if math.isnan(v) or math.isinf(v):
            continue
        e = abs(Fraction(v) - q)
        even = int(c.view(ib).item()) % 2 == 0
        key = (e, not even)
        if err is None or key < err:
            err, best = key, c
    return best.double().item()


@newt.jit
def where_kernel(c_ptr, x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    c = nl.load(c_ptr + offs, mask=m, other=0)
    x = nl.load(x_ptr + offs, mask=m)
    y = nl.load(y_ptr + offs, mask=m)
    nl.store(out_ptr + offs, nl.where(c != 0, x, y), mask=m)


@pytest.mark.parametrize("dt", INT_DTYPES + FLOAT_DTYPES, ids=str)
def test_where(backend, dt):
    n = 100
    c = (torch.arange(n) % 3 == 0).to(torch.int32)
    if dt.is_floating_point:
        x, y = float_values(dt, n), float_values(dt, n, gen=torch.Generator().manual_seed(2))
    else:
        x, y = tensor_of(int_values(dt, n), dt), tensor_of(int_values(dt, n)[::-1], dt)
    out = backend.empty(n, dtype=dt)
    cd, xd, yd = backend.put(c, x, y)
    backend.launch(where_kernel, (2,), cd, xd, yd, out, n, BLOCK=64)
    if dt in (torch.uint16, torch.uint32, torch.uint64):
        # torch's CPU where is not implemented for these: select on the int64 bit patterns
        want = torch.where(c != 0, x.view(_SIGNED[dt]), y.view(_SIGNED[dt])).view(dt)
    else:
        want = torch.where(c != 0, x, y)
    assert_same(backend.get(out), want)


_SIGNED = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


@newt.jit
def clamp_kernel(x_ptr, out_ptr, lo, hi, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    nl.store(out_ptr + offs, nl.clamp(x, lo, hi), mask=m)


def test_clamp(backend):
    x = float_values(torch.float32, 100)
    out = backend.empty(100)
    backend.launch(clamp_kernel, (2,), backend.put(x), out, -1.5, 2.0, 100, BLOCK=64)
    want = torch.fmin(torch.fmax(x, torch.tensor(-1.5)), torch.tensor(2.0))
    assert_same(backend.get(out), want)


# ---------------------------------------------------------------------------
# scalar arguments and literals
# ---------------------------------------------------------------------------


@newt.jit
def scalar_mix_kernel(x_ptr, out_ptr, s, f, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    y = x * s + f - 3 * x // 2 + (x % 5) * 0.5
    nl.store(out_ptr + offs, y, mask=m)


def test_scalars_and_literals_promote(backend):
    n = 50
    x = torch.arange(-25, 25, dtype=torch.int32)
    out = backend.empty(n)
    backend.launch(scalar_mix_kernel, (1,), backend.put(x), out, 7, 0.25, n, BLOCK=64)
    xs = x.tolist()
    want = [(v * 7 + 0.25) - wrap(c_div_t(3 * v, 2), torch.int32) + (v - 5 * c_div_t(v, 5)) * 0.5 for v in xs]
    torch.testing.assert_close(backend.get(out), torch.tensor(want, dtype=torch.float32))


def c_div_t(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_SIGNED_INTS = [torch.int8, torch.int16, torch.int32, torch.int64]
_UNSIGNED_INTS = [torch.uint8, torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("xt", _SIGNED_INTS, ids=str)
@pytest.mark.parametrize("yt", _UNSIGNED_INTS, ids=str)
def test_shift_right_of_signed_by_unsigned(backend, xt, yt):
    # Triton: the operands promote to the wider unsigned type, and the shift is arithmetic because the left
    # operand is signed: int8(-1) >> uint8(6) is 0xFF (not 3); int16(-8) >> uint32(1) is 0xFFFFFFFC
    zt = xt if bits(xt) > bits(yt) else yt
    g = torch.Generator().manual_seed(bits(xt) * 7 + bits(yt))
    a = int_values(xt, 128, g)
    b = [v % bits(zt) for v in int_values(yt, 128, g)]
    got = run_binop(backend, "shr", tensor_of(a, xt), tensor_of(b, yt), zt)
    want = tensor_of([wrap(x >> y, zt) for x, y in zip(a, b)], zt)  # Python's >> on the signed value
    assert_same(got, want, msg=f"{xt} >> {yt}")
