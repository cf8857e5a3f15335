"""tf32 and int8 matmuls at warpgroup tile sizes: on the H200 they run on wgmma (``.tf32`` k8,
``.s8`` k32 with s32 accumulators), with the operands K-major in shared memory -- transposed there
first when they are stored the other way round (``dot/transpose.py``).  The same kernel, launched
like Triton's matmul tutorial (masks on the K loop, K not a multiple of BLOCK_K), runs in the
interpreter too."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl

from .util import NL


@newt.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
              BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, BLOCK_K: nl.constexpr, ACC: nl.constexpr):
    pid_m = nl.program_id(0)
    pid_n = nl.program_id(1)
    offs_m = pid_m * BLOCK_M + nl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + nl.arange(0, BLOCK_N)
    offs_k = nl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_m[:, None] % M) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + (offs_n[None, :] % N) * stride_bn
    acc = nl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for k in range(0, nl.cdiv(K, BLOCK_K)):
        a = nl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0)
        b = nl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0)
        acc = nl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    nl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _major(x: torch.Tensor, inner: str) -> torch.Tensor:
    """``x`` (rows, cols) stored with its rows ("row") or its columns ("col") contiguous."""
    return x.contiguous() if inner == "row" else x.t().contiguous().t()


@pytest.fixture(autouse=True)
def _wgmma(monkeypatch):
    """tf32/int8 take wgmma only when asked for until a GPU run has checked them (dot/wgmma.py)."""
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")


def run_mm(backend, a, b, out_dtype, blocks, num_warps, num_stages):
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk = blocks
    c = backend.empty(M, N, dtype=out_dtype)
    ad, bd = backend.put(a, b)  # .to(device) keeps the strides of a transposed copy
    assert ad.stride() == a.stride() and bd.stride() == b.stride()
    grid = (-(-M // bm), -(-N // bn))
    backend.launch(mm_kernel, grid, ad, bd, c, M, N, K, ad.stride(0), ad.stride(1), bd.stride(0), bd.stride(1),
                   c.stride(0), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, ACC=NL[out_dtype], num_warps=num_warps,
                   num_stages=num_stages)
    return backend.get(c)


def _tf32_trunc(x):
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def _tf32_round(x):
    return ((x.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)


# (M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
TF32_CASES = [(256, 256, 200, 128, 128, 32, 8, 3),
              (192, 128, 72, 64, 128, 16, 4, 4), (128, 512, 96, 128, 256, 32, 8, 2)]


@pytest.mark.parametrize("case", TF32_CASES, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("a_inner,b_inner", [("row", "row"), ("row", "col"), ("col", "row")])
def test_tf32_matmul(backend, case, a_inner, b_inner):
    """fp32 operands, tf32 products (the default input precision), fp32 sums.  The tensor cores read
    the top 19 bits of each operand (truncation); the interpreter and the mma.sync path round to
    tf32: either way the result is within the tf32 products' error of the exact one and clearly not
    the fp32 product."""
    M, N, K, *blocks = case
    torch.manual_seed(1)
    a = _major(torch.randn(M, K), a_inner)
    b = _major(torch.randn(K, N), b_inner)
    got = run_mm(backend, a, b, torch.float32, blocks[:3], *blocks[3:]).double()
    lo = _tf32_trunc(a).double() @ _tf32_trunc(b).double()
    hi = _tf32_round(a).double() @ _tf32_round(b).double()
    scale = a.abs().double() @ b.abs().double()
    # summation error in fp32 on top of either rounding of the inputs
    err = torch.minimum((got - lo).abs(), (got - hi).abs())
    assert (err <= 1e-5 * scale + 1e-5).all(), (err - 1e-5 * scale).max()
    exact = a.double() @ b.double()
    assert (got - exact).abs().max() > 1e-4, "tf32 must be less precise than fp32"


INT8_CASES = [(256, 256, 200, 128, 128, 64, 8, 3),
              (192, 128, 136, 64, 128, 32, 4, 4), (128, 512, 96, 128, 256, 64, 8, 2)]


@pytest.mark.parametrize("case", INT8_CASES, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("a_inner,b_inner", [("row", "row"), ("row", "col"), ("col", "row")])
def test_int8_matmul(backend, case, a_inner, b_inner):
    """int8 operands, int32 accumulation: exact."""
    M, N, K, *blocks = case
    torch.manual_seed(2)
    a = _major(torch.randint(-128, 128, (M, K), dtype=torch.int8), a_inner)
    b = _major(torch.randint(-128, 128, (K, N), dtype=torch.int8), b_inner)
    got = run_mm(backend, a, b, torch.int32, blocks[:3], *blocks[3:])
    assert torch.equal(got, a.int() @ b.int())
