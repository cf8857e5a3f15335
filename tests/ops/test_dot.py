"""nl.dot: every operand dtype, accumulators, input precisions, batched (3-D) dots."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl

from .util import NL


@newt.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr,
               PREC: nl.constexpr, USE_ACC: nl.constexpr, OUT: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    rk = nl.arange(0, K)
    a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = nl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if USE_ACC:
        c = nl.load(c_ptr + rm[:, None] * N + rn[None, :])
        r = nl.dot(a, b, c, input_precision=PREC, out_dtype=OUT)
    else:
        r = nl.dot(a, b, input_precision=PREC, out_dtype=OUT)
    nl.store(out_ptr + rm[:, None] * N + rn[None, :], r)


def run_dot(backend, a, b, c=None, prec=None, out_dtype=torch.float32):
    M, K = a.shape
    N = b.shape[1]
    out = backend.empty(M, N, dtype=out_dtype)
    cc = c if c is not None else torch.zeros(M, N, dtype=out_dtype)
    ad, bd, cd = backend.put(a, b, cc)
    backend.launch(dot_kernel, (1,), ad, bd, cd, out, M=M, N=N, K=K, PREC=prec, USE_ACC=c is not None,
                   OUT=NL[out_dtype])
    return backend.get(out)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
@pytest.mark.parametrize("shape", [(16, 16, 16), (32, 64, 32), (64, 16, 128)])
def test_dot_low_precision(backend, dt, shape):
    M, N, K = shape
    a = (torch.randn(M, K) * 2).to(dt)
    b = (torch.randn(K, N) * 2).to(dt)
    c = torch.randn(M, N)
    got = run_dot(backend, a, b, c)
    want = c.double() + a.double() @ b.double()  # products are exact in fp32
    if dt.itemsize == 1 and _fp8_wgmma(backend, M):
        # Hopper's fp8 wgmma sums in its own reduced precision (Triton's default on sm_90 too:
        # max_num_imprecise_acc = 2**30); test_dot_fp8_promoted asks for exact fp32 sums
        err = (got.double() - want).norm() / want.norm()
        assert err < 1e-3, err
        return
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-4 * K)


def _fp8_wgmma(backend, M) -> bool:
    """The dot runs on Hopper's wgmma (fp8: a whole 64-row warpgroup tile)."""
    return (backend.name == "cuda" and torch.cuda.get_device_capability() == (9, 0) and M % 64 == 0
            and __import__("newt.backend.cuda.dot.wgmma", fromlist=["x"]).wgmma_selected())


@newt.jit
def dot_promoted_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    rk = nl.arange(0, K)
    a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = nl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = nl.load(c_ptr + rm[:, None] * N + rn[None, :])
    nl.store(out_ptr + rm[:, None] * N + rn[None, :], nl.dot(a, b, c, max_num_imprecise_acc=32))


@pytest.mark.parametrize("dt", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
@pytest.mark.parametrize("shape", [(64, 16, 128), (64, 64, 64)])
def test_dot_fp8_promoted(backend, dt, shape):
    """``max_num_imprecise_acc=32``: every 32-long piece of K is added to the fp32 accumulator in fp32
    (on sm_90 a fresh wgmma sum per piece).  Exact elsewhere; on Hopper each 32-long piece is still
    summed by the tensor cores in their reduced precision (about 14 bits kept: the H200 run of
    2026-12-02 saw up to 0.009 off at K = 64), so there the bound is 2**-12 of the piece's magnitude
    (sum of |a b|) and ``c`` itself is added exactly."""
    M, N, K = shape
    a = (torch.randn(M, K) * 2).to(dt)
    b = (torch.randn(K, N) * 2).to(dt)
    c = torch.randn(M, N)
    out = backend.empty(M, N)
    ad, bd, cd = backend.put(a, b, c)
    backend.launch(dot_promoted_kernel, (1,), ad, bd, cd, out, M=M, N=N, K=K)
    want = c.double() + a.double() @ b.double()
    got = backend.get(out).double()
    if _fp8_wgmma(backend, M):
        bound = 2.0 ** -12 * (a.double().abs() @ b.double().abs()) + 1e-6 * c.double().abs()
        assert ((got - want).abs() <= bound).all(), ((got - want).abs() - bound).max()
        return
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4 * K)


def tf32(x):
    bits = x.view(torch.int32)
    r = (bits + 0x1000) & ~0x1FFF
    return torch.where(torch.isfinite(x), r.view(torch.float32), x)


@pytest.mark.parametrize("prec", ["tf32", "ieee", "tf32x3", None])
def test_dot_fp32_precisions(backend, prec):
    M = N = K = 32
    a = torch.randn(M, K)
    b = torch.randn(K, N)
    got = run_dot(backend, a, b, prec=prec).double()
    if prec in ("tf32", None):
        # tf32 inputs, fp32 accumulation; the GPU may truncate rather than round the inputs
        want = tf32(a).double() @ tf32(b).double()
        torch.testing.assert_close(got, want, rtol=0, atol=2e-2)
        exact = a.double() @ b.double()
        assert (got - exact).abs().max() > 1e-5, "tf32 must be less precise than fp32"
    else:
        torch.testing.assert_close(got, a.double() @ b.double(), rtol=1e-5, atol=1e-4)


def test_dot_int8(backend):
    M, N, K = 32, 32, 64
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
    b = torch.randint(-128, 128, (K, N), dtype=torch.int8)
    c = torch.randint(-1000, 1000, (M, N), dtype=torch.int32)
    got = run_dot(backend, a, b, c, out_dtype=torch.int32)
    assert torch.equal(got, c + a.int() @ b.int())


def test_dot_fp64(backend):
    a = torch.randn(16, 32, dtype=torch.float64)
    b = torch.randn(32, 16, dtype=torch.float64)
    got = run_dot(backend, a, b, out_dtype=torch.float64)
    torch.testing.assert_close(got, a @ b, rtol=1e-12, atol=1e-12)


def test_dot_fp16_accumulator(backend):
    a = torch.randn(16, 16).half()
    b = torch.randn(16, 16).half()
    got = run_dot(backend, a, b, out_dtype=torch.float16)
    torch.testing.assert_close(got.float(), (a.float() @ b.float()), rtol=2e-3, atol=2e-2)


@newt.jit
def bdot_kernel(a_ptr, b_ptr, out_ptr, B: nl.constexpr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr):
    rb = nl.arange(0, B)
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    rk = nl.arange(0, K)
    a = nl.load(a_ptr + rb[:, None, None] * M * K + rm[None, :, None] * K + rk[None, None, :])
    b = nl.load(b_ptr + rb[:, None, None] * K * N + rk[None, :, None] * N + rn[None, None, :])
    r = nl.dot(a, b)
    nl.store(out_ptr + rb[:, None, None] * M * N + rm[None, :, None] * N + rn[None, None, :], r)


def test_batched_dot(backend):
    B, M, N, K = 2, 16, 32, 16
    a = torch.randn(B, M, K).half()
    b = torch.randn(B, K, N).half()
    out = backend.empty(B, M, N)
    ad, bd = backend.put(a, b)
    backend.launch(bdot_kernel, (1,), ad, bd, out, B=B, M=M, N=N, K=K)
    torch.testing.assert_close(backend.get(out), a.float() @ b.float(), rtol=1e-4, atol=1e-3)


@newt.jit
def dot_trans_kernel(a_ptr, b_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    rk = nl.arange(0, K)
    at = nl.load(a_ptr + rk[:, None] * M + rm[None, :])  # (K, M)
    b = nl.load(b_ptr + rn[:, None] * K + rk[None, :])  # (N, K)
    nl.store(out_ptr + rm[:, None] * N + rn[None, :], nl.dot(nl.trans(at), b.T))


def test_dot_of_transposed_operands(backend):
    M, N, K = 16, 32, 64
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    out = backend.empty(M, N)
    ad, bd = backend.put(a.t().contiguous(), b.t().contiguous())
    backend.launch(dot_trans_kernel, (1,), ad, bd, out, M=M, N=N, K=K)
    torch.testing.assert_close(backend.get(out), a.float() @ b.float(), rtol=1e-4, atol=1e-3)
