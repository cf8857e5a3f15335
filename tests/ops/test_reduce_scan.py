"""Reductions and scans: builtin combines, argmax/argmin ties, custom combine functions."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl

from .util import NL, assert_same, int_values, tensor_of, wrap


@newt.jit
def reduce2d_kernel(x_ptr, out_ptr, OP: nl.constexpr, AXIS: nl.constexpr, KEEP: nl.constexpr,
                    M: nl.constexpr, N: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :])
    if OP == "sum":
        r = nl.sum(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "max":
        r = nl.max(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "min":
        r = nl.min(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "xor_sum":
        r = nl.xor_sum(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "argmax":
        r = nl.argmax(x, axis=AXIS, keep_dims=KEEP)
    else:
        r = nl.argmin(x, axis=AXIS, keep_dims=KEEP)
    if AXIS == 0:
        offs = nl.arange(0, N)
        if KEEP:
            nl.store(out_ptr + offs[None, :], r)
        else:
            nl.store(out_ptr + offs, r)
    else:
        offs = nl.arange(0, M)
        if KEEP:
            nl.store(out_ptr + offs[:, None], r)
        else:
            nl.store(out_ptr + offs, r)


def run_reduce(backend, x, op, axis, keep, out_dtype):
    M, N = x.shape
    out = backend.empty(N if axis == 0 else M, dtype=out_dtype)
    backend.launch(reduce2d_kernel, (1,), backend.put(x), out, OP=op, AXIS=axis, KEEP=keep, M=M, N=N)
    return backend.get(out)


def sum_dtype(dt):
    if dt in (torch.int8, torch.int16, torch.bool):
        return torch.int32
    if dt in (torch.uint8, torch.uint16):
        return torch.uint32
    return dt


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.int32, torch.int8, torch.uint32, torch.int64,
                                torch.uint8], ids=str)
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("keep", [False, True])
def test_sum(backend, dt, axis, keep):
    M, N = 16, 32
    if dt.is_floating_point:
        x = torch.randn(M, N).to(dt)
    else:
        x = tensor_of(int_values(dt, M * N), dt).view(M, N)
    rd = sum_dtype(dt)
    got = run_reduce(backend, x, "sum", axis, keep, rd)
    if dt.is_floating_point:
        want = x.float().sum(axis).to(dt)
        torch.testing.assert_close(got, want, rtol=2e-3 if dt == torch.float16 else 1e-5, atol=1e-2)
    else:
        rows = x.tolist()
        cols = [list(c) for c in zip(*rows)] if axis == 0 else rows
        assert_same(got, tensor_of([wrap(sum(c), rd) for c in cols], rd))


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.int32, torch.uint32, torch.int8, torch.uint64],
                         ids=str)
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("axis", [0, 1])
def test_max_min(backend, dt, op, axis):
    M, N = 8, 64
    if dt.is_floating_point:
        x = torch.randn(M, N).to(dt)
        x[0, 3] = float("inf")
        x[1, 5] = float("-inf")
    else:
        x = tensor_of(int_values(dt, M * N), dt).view(M, N)
    got = run_reduce(backend, x, op, axis, False, dt)
    rows = x.tolist()
    cols = [list(c) for c in zip(*rows)] if axis == 0 else rows
    f = max if op == "max" else min
    assert_same(got, torch.tensor([f(c) for c in cols], dtype=torch.float64 if dt.is_floating_point else None)
                .to(dt) if dt.is_floating_point else tensor_of([f(c) for c in cols], dt))


def test_xor_sum(backend):
    x = tensor_of(int_values(torch.int32, 16 * 32), torch.int32).view(16, 32)
    got = run_reduce(backend, x, "xor_sum", 1, False, torch.int32)
    want = []
    for r in x.tolist():
        a = 0
        for v in r:
            a ^= v
        want.append(a)
    assert got.tolist() == want


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dt", [torch.float32, torch.int32, torch.float16], ids=str)
def test_argmax_ties_break_left(backend, op, axis, dt):
    M, N = 16, 32
    x = torch.randint(-3, 4, (M, N)).to(dt)  # many ties
    got = run_reduce(backend, x, op, axis, False, torch.int32)
    rows = x.tolist()
    cols = [list(c) for c in zip(*rows)] if axis == 0 else rows
    best = max if op == "argmax" else min
    want = [c.index(best(c)) for c in cols]
    assert got.tolist() == want


def test_keep_dims(backend):
    x = torch.randn(16, 32)
    got = run_reduce(backend, x, "max", 1, True, torch.float32)
    assert_same(got, x.amax(1))


@newt.jit
def reduce_all_kernel(x_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :])
    nl.store(out_ptr, nl.sum(x))
    nl.store(out_ptr + 1, nl.max(x))
    v, i = nl.max(x.reshape(M * N), axis=0, return_indices=True)
    nl.store(out_ptr + 2, v)
    nl.store(out_ptr + 3, i.to(nl.float32))
    nl.store(out_ptr + 4, x.sum(0).sum(0))


def test_reduce_over_everything(backend):
    x = torch.randn(8, 16)
    out = backend.empty(5)
    backend.launch(reduce_all_kernel, (1,), backend.put(x), out, M=8, N=16)
    got = backend.get(out)
    torch.testing.assert_close(got[0], x.sum(), rtol=1e-5, atol=1e-5)
    assert got[1] == x.max() and got[2] == x.max() and int(got[3]) == int(x.reshape(-1).argmax())
    torch.testing.assert_close(got[4], x.sum(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# custom combine functions
# ---------------------------------------------------------------------------


@newt.jit
def _argmax_combine(v1, i1, v2, i2):
    gt = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return nl.where(gt, v1, v2), nl.where(gt, i1, i2)


@newt.jit
def _add_mul(a1, b1, a2, b2):
    return a1 + a2, b1 * b2


@newt.jit
def _clamped_add(a, b):
    s = a + b
    if s > 100:
        s = 100
    return s


@newt.jit
def custom_reduce_kernel(x_ptr, out_ptr, N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    v, i = nl.reduce((x, offs), 0, _argmax_combine)
    nl.store(out_ptr, v)
    nl.store(out_ptr + 1, i.to(nl.float32))
    s, p = nl.reduce((x, x * 0 + 1.0001), 0, _add_mul)
    nl.store(out_ptr + 2, s)
    nl.store(out_ptr + 3, p)
    c = nl.reduce(nl.abs(x) * 10, 0, _clamped_add)
    nl.store(out_ptr + 4, c)


def test_custom_reduce(backend):
    x = torch.randn(64)
    x[10] = x[50] = 5.0  # a tie: the lower index wins
    out = backend.empty(5)
    backend.launch(custom_reduce_kernel, (1,), backend.put(x), out, N=64)
    got = backend.get(out)
    assert got[0] == 5.0 and int(got[1]) == 10
    torch.testing.assert_close(got[2], x.sum(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[3], torch.tensor(1.0001) ** 64, rtol=1e-5, atol=0)
    assert got[4] == 100.0


@newt.jit
def scan_kernel(x_ptr, out_ptr, OP: nl.constexpr, REV: nl.constexpr, AXIS: nl.constexpr, M: nl.constexpr,
                N: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs)
    if OP == "cumsum":
        y = nl.cumsum(x, axis=AXIS, reverse=REV)
    else:
        y = nl.cumprod(x, axis=AXIS, reverse=REV)
    nl.store(out_ptr + offs, y)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("rev", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dt", [torch.float32, torch.int32, torch.int64], ids=str)
def test_cumsum_cumprod(backend, op, rev, axis, dt):
    M, N = 8, 32
    if dt.is_floating_point:
        x = torch.rand(M, N) + 0.5
    else:
        x = torch.randint(-3, 4, (M, N), dtype=dt)
    out = backend.empty(M, N, dtype=dt)
    backend.launch(scan_kernel, (1,), backend.put(x), out, OP=op, REV=rev, AXIS=axis, M=M, N=N)
    xr = x.flip(axis) if rev else x
    f = torch.cumsum if op == "cumsum" else torch.cumprod
    want = f(xr.double() if dt.is_floating_point else xr, axis)
    if rev:
        want = want.flip(axis)
    want = want.to(dt)
    if dt.is_floating_point:
        torch.testing.assert_close(backend.get(out), want, rtol=1e-5, atol=1e-5)
    else:
        assert_same(backend.get(out), want)


@newt.jit
def _linrec(a1, b1, a2, b2):
    # h = a*h_prev + b composed: associative, not commutative
    return a1 * a2, a2 * b1 + b2


@newt.jit
def linrec_kernel(a_ptr, b_ptr, out_ptr, REV: nl.constexpr, N: nl.constexpr):
    offs = nl.arange(0, N)
    a = nl.load(a_ptr + offs)
    b = nl.load(b_ptr + offs)
    _, h = nl.associative_scan((a, b), 0, _linrec, reverse=REV)
    nl.store(out_ptr + offs, h)


@pytest.mark.parametrize("rev", [False, True])
def test_associative_scan_order(backend, rev):
    N = 64
    a = torch.rand(N, dtype=torch.float64) * 0.5 + 0.5
    b = torch.randn(N, dtype=torch.float64)
    out = backend.empty(N, dtype=torch.float64)
    ad, bd = backend.put(a, b)
    backend.launch(linrec_kernel, (1,), ad, bd, out, REV=rev, N=N)
    want = []
    h = 0.0
    idx = range(N - 1, -1, -1) if rev else range(N)
    for i in idx:
        h = a[i].item() * h + b[i].item()
        want.append(h)
    if rev:
        want = want[::-1]
    torch.testing.assert_close(backend.get(out), torch.tensor(want, dtype=torch.float64), rtol=1e-10, atol=1e-10)


@newt.jit
def _max_pair(a, b):
    return nl.maximum(a, b)


@newt.jit
def running_max_kernel(x_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs)
    nl.store(out_ptr + offs, nl.associative_scan(x, 1, _max_pair))


def test_associative_scan_2d(backend):
    x = torch.randn(4, 128)
    out = backend.empty(4, 128)
    backend.launch(running_max_kernel, (1,), backend.put(x), out, M=4, N=128)
    assert_same(backend.get(out), torch.cummax(x, 1).values)


def test_nl_dtype_map_covers_fp8():
    assert NL[torch.float8_e4m3fn] == nl.float8e4nv
