"""Loads and stores: masks, ``other``, boundaries, strides, scalars, every element type."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl

from .util import INT_DTYPES, assert_same, float_values, int_values, tensor_of


@newt.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m), mask=m)


@pytest.mark.parametrize("dt", [torch.bool] + INT_DTYPES + [torch.float16, torch.bfloat16, torch.float32,
                                                            torch.float64, torch.float8_e4m3fn,
                                                            torch.float8_e5m2], ids=str)
def test_round_trip_every_dtype(backend, dt):
    n = 200
    if dt == torch.bool:
        x = torch.rand(n) > 0.5
    elif dt in INT_DTYPES:
        x = tensor_of(int_values(dt, n), dt)
    elif dt in (torch.float8_e4m3fn, torch.float8_e5m2):
        x = torch.arange(200, dtype=torch.int32).to(torch.uint8).view(dt)
    else:
        x = float_values(dt, n)
    out = backend.zeros(n + 7, dtype=dt)
    backend.launch(copy_kernel, (newt.cdiv(n, 64),), backend.put(x), out, n, BLOCK=64)
    got = backend.get(out)
    if dt.is_floating_point and dt.itemsize == 1:
        assert torch.equal(got[:n].view(torch.uint8), x.view(torch.uint8))
    else:
        assert_same(got[:n], x)
    assert not got[n:].to(torch.float32).any(), "masked-off lanes must not be written"


@newt.jit
def other_kernel(x_ptr, out_ptr, n, OTHER: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=OTHER)
    nl.store(out_ptr + offs, x)


@pytest.mark.parametrize("other", [0.0, -1.5, float("-inf")])
def test_masked_lanes_read_other(backend, other):
    x = torch.arange(10, dtype=torch.float32)
    out = backend.empty(16)
    backend.launch(other_kernel, (1,), backend.put(x), out, 10, OTHER=other, BLOCK=16)
    want = torch.cat([x, torch.full((6,), other)])
    assert_same(backend.get(out), want)


@newt.jit
def other_block_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    y = nl.load(y_ptr + offs)
    x = nl.load(x_ptr + offs, mask=offs < n, other=y * 2)
    nl.store(out_ptr + offs, x)


def test_other_is_a_block(backend):
    x = torch.arange(10, dtype=torch.int32)
    y = torch.arange(100, 116, dtype=torch.int32)
    out = backend.empty(16, dtype=torch.int32)
    xd, yd = backend.put(x, y)
    backend.launch(other_block_kernel, (1,), xd, yd, out, 10, BLOCK=16)
    assert backend.get(out).tolist() == list(range(10)) + [2 * v for v in range(110, 116)]


@newt.jit
def transpose_kernel(x_ptr, out_ptr, M, N, sxm, sxn, som, son, BM: nl.constexpr, BN: nl.constexpr):
    pm = nl.program_id(0)
    pn = nl.program_id(1)
    rm = pm * BM + nl.arange(0, BM)
    rn = pn * BN + nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = nl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=mask)
    nl.store(out_ptr + rn[None, :] * som + rm[:, None] * son, x, mask=mask)


@pytest.mark.parametrize("M,N", [(37, 50), (64, 64), (1, 129)])
def test_2d_strided_transpose(backend, M, N):
    x = torch.randn(N, M).t()  # a non-contiguous view
    out = backend.empty(N, M)
    xd = backend.put(x) if backend.name == "interpreter" else x.cuda().t().contiguous().t()
    backend.launch(transpose_kernel, (newt.cdiv(M, 16), newt.cdiv(N, 32)), xd, out, M, N, xd.stride(0),
                   xd.stride(1), out.stride(0), out.stride(1), BM=16, BN=32)
    assert_same(backend.get(out), x.t().contiguous())


@newt.jit
def scalar_kernel(x_ptr, out_ptr, i):
    v = nl.load(x_ptr + i)
    nl.store(out_ptr + i, v * 2 + 1)
    nl.store(out_ptr, nl.load(x_ptr) - 1)


def test_scalar_load_store(backend):
    x = torch.arange(10, dtype=torch.int64) * 10
    out = backend.zeros(10, dtype=torch.int64)
    backend.launch(scalar_kernel, (1,), backend.put(x), out, 7)
    assert backend.get(out).tolist() == [-1, 0, 0, 0, 0, 0, 0, 141, 0, 0]


@newt.jit
def offset_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    p = x_ptr + 100
    offs = nl.arange(0, BLOCK)
    a = nl.load(p - offs)  # walking backwards from element 100
    off64 = offs.to(nl.int64) + 3
    b = nl.load(x_ptr + off64)
    nl.store(out_ptr + offs, a + b)


def test_negative_and_int64_offsets(backend):
    x = torch.arange(128, dtype=torch.float32)
    out = backend.empty(32)
    backend.launch(offset_kernel, (1,), backend.put(x), out, BLOCK=32)
    o = torch.arange(32, dtype=torch.float32)
    assert_same(backend.get(out), (100 - o) + (o + 3))


@newt.jit
def store_broadcast_kernel(out_ptr, v, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, v)
    nl.store(out_ptr + BLOCK + offs[:, None] * 0 + offs[None, :], offs[None, :] * 1.0)


def test_store_broadcasts_value(backend):
    out = backend.zeros(48)
    backend.launch(store_broadcast_kernel, (1,), out, 2.5, BLOCK=16)
    got = backend.get(out)
    assert got[:16].tolist() == [2.5] * 16
    assert got[16:32].tolist() == [float(i) for i in range(16)]


@newt.jit
def bool_mem_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m, other=False)
    nl.store(out_ptr + offs, (x == False) | (offs == 0), mask=m)  # noqa: E712


def test_bool_memory(backend):
    x = torch.tensor([True, False, False, True, True])
    out = backend.zeros(5, dtype=torch.bool)
    backend.launch(bool_mem_kernel, (1,), backend.put(x), out, 5, BLOCK=8)
    assert backend.get(out).tolist() == [True, True, True, False, False]


@newt.jit
def pointer_loop_kernel(x_ptr, out_ptr, n, stride, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    p = x_ptr + row * stride
    acc = nl.zeros([BLOCK], dtype=nl.float32)
    for start in range(0, n, BLOCK):
        offs = nl.arange(0, BLOCK)
        acc += nl.load(p + offs, mask=start + offs < n, other=0.0)
        p += BLOCK
    nl.store(out_ptr + row, nl.sum(acc, axis=0))


def test_loop_carried_pointer(backend):
    x = torch.randn(5, 100)
    out = backend.empty(5)
    backend.launch(pointer_loop_kernel, (5,), backend.put(x), out, 100, x.stride(0), BLOCK=32)
    torch.testing.assert_close(backend.get(out), x.sum(1), rtol=1e-5, atol=1e-5)


@newt.jit
def two_tensor_where_kernel(a_ptr, b_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    p = nl.where(offs % 2 == 0, a_ptr + offs, b_ptr + offs)
    nl.store(out_ptr + offs, nl.load(p))


def test_pointer_select_between_tensors(backend):
    a = torch.arange(16, dtype=torch.float32)
    b = -torch.arange(16, dtype=torch.float32)
    out = backend.empty(16)
    ad, bd = backend.put(a, b)
    backend.launch(two_tensor_where_kernel, (1,), ad, bd, out, BLOCK=16)
    assert_same(backend.get(out), torch.where(torch.arange(16) % 2 == 0, a, b))
