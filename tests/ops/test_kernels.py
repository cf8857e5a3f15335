"""The kernels of issue 6's "done when" list, each against torch: vector add, softmax, layer norm,
matmul, causal flash attention, histogram with atomics, cumsum, random dropout (test_random.py)."""

from __future__ import annotations

import math

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    y = nl.load(y_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, x + y, mask=mask)


@pytest.mark.parametrize("n", [1, 127, 1024, 98_000])
def test_vector_add(backend, n):
    x, y = torch.randn(n), torch.randn(n)
    out = backend.empty(n)
    xd, yd = backend.put(x, y)
    backend.launch(add_kernel, lambda meta: (newt.cdiv(n, meta["BLOCK"]),), xd, yd, out, n, BLOCK=512)
    assert torch.equal(backend.get(out), x + y)


@newt.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: nl.constexpr):
    row_start = nl.program_id(0)
    row_step = nl.num_programs(0)
    for row in range(row_start, n_rows, row_step):
        row_ptr = in_ptr + row * in_stride
        cols = nl.arange(0, BLOCK)
        x = nl.load(row_ptr + cols, mask=cols < n_cols, other=-float("inf"))
        z = x - nl.max(x, axis=0)
        num = nl.exp(z)
        den = nl.sum(num, axis=0)
        nl.store(out_ptr + row * out_stride + cols, num / den, mask=cols < n_cols)


@pytest.mark.parametrize("shape", [(37, 781), (128, 64), (3, 1000)])
def test_softmax(backend, shape):
    x = torch.randn(*shape) * 3
    out = backend.empty(*shape)
    xd = backend.put(x)
    backend.launch(softmax_kernel, (min(shape[0], 16),), out, xd, xd.stride(0), out.stride(0), shape[0], shape[1],
                   BLOCK=triton_next_pow2(shape[1]))
    torch.testing.assert_close(backend.get(out), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)


def triton_next_pow2(n):
    return 1 << (n - 1).bit_length()


@newt.jit
def layer_norm_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: nl.constexpr):
    row = nl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = nl.zeros([BLOCK_SIZE], dtype=nl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + nl.arange(0, BLOCK_SIZE)
        a = nl.load(X + cols, mask=cols < N, other=0.).to(nl.float32)
        _mean += a
    mean = nl.sum(_mean, axis=0) / N
    _var = nl.zeros([BLOCK_SIZE], dtype=nl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + nl.arange(0, BLOCK_SIZE)
        x = nl.load(X + cols, mask=cols < N, other=0.).to(nl.float32)
        x = nl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = nl.sum(_var, axis=0) / N
    rstd = 1 / nl.sqrt(var + eps)
    nl.store(Mean + row, mean)
    nl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + nl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = nl.load(W + cols, mask=mask)
        b = nl.load(B + cols, mask=mask)
        x = nl.load(X + cols, mask=mask, other=0.).to(nl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        nl.store(Y + cols, y, mask=mask)


@pytest.mark.parametrize("dt", [torch.float32, torch.float16], ids=str)
def test_layer_norm(backend, dt):
    M, N = 24, 1000
    x = (torch.randn(M, N) * 2 + 0.5).to(dt)
    w = torch.rand(N).to(dt)
    b = torch.randn(N).to(dt)
    y = backend.empty(M, N, dtype=dt)
    mean, rstd = backend.empty(M), backend.empty(M)
    xd, wd, bd = backend.put(x, w, b)
    backend.launch(layer_norm_kernel, (M,), xd, y, wd, bd, mean, rstd, xd.stride(0), N, 1e-5, BLOCK_SIZE=256)
    want = torch.nn.functional.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5)
    tol = 1e-5 if dt == torch.float32 else 2e-3
    torch.testing.assert_close(backend.get(y).float(), want, rtol=tol, atol=tol * 4)
    torch.testing.assert_close(backend.get(mean), x.float().mean(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(backend.get(rstd), 1 / torch.sqrt(x.float().var(1, unbiased=False) + 1e-5),
                               rtol=1e-4, atol=1e-5)


@newt.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, BLOCK_K: nl.constexpr, GROUP_M: nl.constexpr):
    pid = nl.program_id(axis=0)
    num_pid_m = nl.cdiv(M, BLOCK_M)
    num_pid_n = nl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = nl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + nl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + nl.arange(0, BLOCK_N)) % N
    offs_k = nl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = nl.zeros((BLOCK_M, BLOCK_N), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BLOCK_K)):
        a = nl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = nl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = nl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(nl.float16)
    offs_cm = pid_m * BLOCK_M + nl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + nl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    nl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@pytest.mark.parametrize("M,N,K", [(67, 129, 100), (128, 128, 64), (16, 300, 48)])
def test_matmul(backend, M, N, K):
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    c = backend.empty(M, N, dtype=torch.float16)
    ad, bd = backend.put(a, b)
    grid = lambda meta: (newt.cdiv(M, meta["BLOCK_M"]) * newt.cdiv(N, meta["BLOCK_N"]),)
    backend.launch(matmul_kernel, grid, ad, bd, c, M, N, K, ad.stride(0), ad.stride(1), bd.stride(0), bd.stride(1),
                   c.stride(0), c.stride(1), BLOCK_M=32, BLOCK_N=64, BLOCK_K=32, GROUP_M=4)
    torch.testing.assert_close(backend.get(c).float(), (a.float() @ b.float()).half().float(), rtol=1e-2,
                               atol=1e-2)


@newt.jit
def attn_fwd_kernel(Q, K, V, Out, sm_scale, N_CTX, HEAD_DIM: nl.constexpr, BLOCK_M: nl.constexpr,
                    BLOCK_N: nl.constexpr):
    start_m = nl.program_id(0)
    off_h = nl.program_id(1)
    base = off_h * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + nl.arange(0, BLOCK_M)
    offs_n = nl.arange(0, BLOCK_N)
    offs_d = nl.arange(0, HEAD_DIM)
    q = nl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = nl.zeros([BLOCK_M], dtype=nl.float32) - float("inf")
    l_i = nl.zeros([BLOCK_M], dtype=nl.float32)
    acc = nl.zeros([BLOCK_M, HEAD_DIM], dtype=nl.float32)
    qk_scale = sm_scale * 1.44269504
    hi = nl.minimum((start_m + 1) * BLOCK_M, N_CTX)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = nl.load(K + base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=cols[None, :] < N_CTX, other=0.0)
        qk = nl.dot(q, k) * qk_scale
        qk = nl.where((offs_m[:, None] >= cols[None, :]) & (cols[None, :] < N_CTX), qk, float("-inf"))
        m_ij = nl.maximum(m_i, nl.max(qk, 1))
        p = nl.math.exp2(qk - m_ij[:, None])
        alpha = nl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + nl.sum(p, 1)
        v = nl.load(V + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None] < N_CTX, other=0.0)
        acc = acc * alpha[:, None]
        acc = nl.dot(p.to(nl.float16), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    nl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(nl.float16),
             mask=offs_m[:, None] < N_CTX)


@pytest.mark.parametrize("T", [128, 100])
def test_causal_flash_attention(backend, T):
    H, D = 3, 32
    q, k, v = (torch.randn(H, T, D).half() for _ in range(3))
    o = backend.empty(H, T, D, dtype=torch.float16)
    scale = 1 / math.sqrt(D)
    qd, kd, vd = backend.put(q, k, v)
    backend.launch(attn_fwd_kernel, (newt.cdiv(T, 32), H), qd, kd, vd, o, scale, T, HEAD_DIM=D, BLOCK_M=32,
                   BLOCK_N=16)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    s = (q.float() @ k.float().transpose(1, 2)) * scale
    want = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v.float()
    torch.testing.assert_close(backend.get(o).float(), want, rtol=1e-2, atol=1e-2)


@newt.jit
def histogram_kernel(x_ptr, hist_ptr, n, lo, hi, NBINS: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask, other=0.0)
    b = ((x - lo) / (hi - lo) * NBINS).to(nl.int32)
    b = nl.minimum(nl.maximum(b, 0), NBINS - 1)
    nl.atomic_add(hist_ptr + b, 1, mask=mask)


def test_histogram_with_atomics(backend):
    n, nbins = 100_000, 64
    x = torch.randn(n)
    hist = backend.zeros(nbins, dtype=torch.int32)
    backend.launch(histogram_kernel, (newt.cdiv(n, 1024),), backend.put(x), hist, n, -3.0, 3.0, NBINS=nbins,
                   BLOCK=1024)
    b = ((x - -3.0) / (3.0 - -3.0) * nbins).to(torch.int32).clamp(0, nbins - 1)
    assert torch.equal(backend.get(hist), torch.bincount(b, minlength=nbins).to(torch.int32))


@newt.jit
def cumsum_kernel(x_ptr, out_ptr, n, stride, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    carry = 0.0
    for start in range(0, n, BLOCK):
        offs = start + nl.arange(0, BLOCK)
        mask = offs < n
        x = nl.load(x_ptr + row * stride + offs, mask=mask, other=0.0)
        c = nl.cumsum(x, axis=0) + carry
        nl.store(out_ptr + row * stride + offs, c, mask=mask)
        carry += nl.sum(x, axis=0)


def test_cumsum(backend):
    M, N = 6, 1000
    x = torch.randn(M, N)
    out = backend.empty(M, N)
    backend.launch(cumsum_kernel, (M,), backend.put(x), out, N, N, BLOCK=128)
    torch.testing.assert_close(backend.get(out), x.double().cumsum(1).float(), rtol=1e-4, atol=1e-4)


@newt.jit
def int_cumsum_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.cumsum(nl.load(x_ptr + offs), axis=0))


def test_int_cumsum_wraps(backend):
    x = torch.full((64,), 2 ** 30, dtype=torch.int32)
    out = backend.empty(64, dtype=torch.int32)
    backend.launch(int_cumsum_kernel, (1,), backend.put(x), out, BLOCK=64)
    want = [((i + 1) * 2 ** 30 + 2 ** 31) % 2 ** 32 - 2 ** 31 for i in range(64)]
    assert backend.get(out).tolist() == want
