"""Block pointers (Triton's deprecated ``make_block_ptr`` / ``advance`` / ``load(boundary_check=)``): a
matmul in the style of Triton's block-pointer tutorial, partial blocks with and without boundary checks,
padding, stores, a 1-D block pointer advanced in a while loop; interpreter (and GPU) against torch, and
the matmul compiled to cubin for sm_90a and sm_80."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def bp_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
              BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, BLOCK_K: nl.constexpr, GROUP_M: nl.constexpr):
    pid = nl.program_id(axis=0)
    num_pid_m = nl.cdiv(M, BLOCK_M)
    num_pid_n = nl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = nl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_m)
    pid_n = (pid % in_group) // group_m
    a_bp = nl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                             offsets=(pid_m * BLOCK_M, 0), block_shape=(BLOCK_M, BLOCK_K), order=(1, 0))
    b_bp = nl.make_block_ptr(b_ptr, (K, N), (stride_bk, stride_bn), (0, pid_n * BLOCK_N), (BLOCK_K, BLOCK_N),
                             (1, 0))
    acc = nl.zeros((BLOCK_M, BLOCK_N), dtype=nl.float32)
    for _ in range(0, K, BLOCK_K):
        a = nl.load(a_bp, boundary_check=(0, 1), padding_option="zero")
        b = nl.load(b_bp, boundary_check=(0, 1), padding_option="zero")
        acc += nl.dot(a, b)
        a_bp = nl.advance(a_bp, (0, BLOCK_K))
        b_bp = nl.advance(b_bp, (BLOCK_K, 0))
    c_bp = nl.make_block_ptr(base=c_ptr, shape=(M, N), strides=(stride_cm, stride_cn),
                             offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N), block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    nl.store(c_bp, acc.to(nl.float16), boundary_check=(0, 1))


def _matmul(backend, a, b, BM=32, BN=32, BK=32):
    M, K = a.shape
    _, N = b.shape
    c = backend.zeros(M, N, dtype=torch.float16)
    da, db = backend.put(a, b)
    grid = (newt.cdiv(M, BM) * newt.cdiv(N, BN),)
    backend.launch(bp_matmul, grid, da, db, c, M, N, K, da.stride(0), da.stride(1), db.stride(0), db.stride(1),
                   c.stride(0), c.stride(1), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=4)
    return backend.get(c)


@pytest.mark.parametrize("shape", [(64, 64, 64), (100, 90, 70), (33, 17, 129)])
def test_block_pointer_matmul(backend, shape):
    M, N, K = shape
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = _matmul(backend, a, b)
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), rtol=1e-2, atol=2e-2)


def test_block_pointer_matmul_on_a_transposed_view(backend):
    """Strides from a transposed tensor (order=(1, 0) is only a layout hint: the strides decide)."""
    a = torch.randn(48, 80, dtype=torch.float16)
    bt = torch.randn(56, 80, dtype=torch.float16)
    c = _matmul(backend, a, bt.t())
    torch.testing.assert_close(c.float(), a.float() @ bt.t().float(), rtol=1e-2, atol=2e-2)


@newt.jit
def bp_partial(x_ptr, out_ptr, M, N, CHECK: nl.constexpr, PAD: nl.constexpr):
    bp = nl.make_block_ptr(x_ptr, (M, N), (N, 1), (M - 4, N - 4), (8, 8), (1, 0))
    v = nl.load(bp, boundary_check=CHECK, padding_option=PAD)
    o = nl.make_block_ptr(out_ptr, (8, 8), (8, 1), (0, 0), (8, 8), (1, 0))
    nl.store(o, v)


@pytest.mark.parametrize("check,pad", [((0, 1), "zero"), ((0, 1), "nan"), ((1,), "zero"), ((0,), "nan")])
def test_boundary_check_and_padding(backend, check, pad):
    M, N = 12, 10
    x = torch.arange(M * (N + 8), dtype=torch.float32).reshape(M, N + 8)[:, :N].contiguous()
    # a tensor with room beyond its logical end, so that unchecked rows/columns read real memory
    big = torch.arange(32 * 16, dtype=torch.float32)
    big[: M * N] = x.reshape(-1)
    out = backend.zeros(8, 8)
    backend.launch(bp_partial, (1,), backend.put(big), out, M, N, CHECK=check, PAD=pad)
    got = backend.get(out)
    want = torch.empty(8, 8)
    fill = float("nan") if pad == "nan" else 0.0
    for i in range(8):
        for j in range(8):
            r, c = M - 4 + i, N - 4 + j
            oob = (0 in check and r >= M) or (1 in check and c >= N)
            want[i, j] = fill if oob else big[r * N + c]
    torch.testing.assert_close(got, want, equal_nan=True)


@newt.jit
def bp_store_partial(x_ptr, y_ptr, n, BLOCK: nl.constexpr):
    src = nl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    dst = nl.make_block_ptr(y_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    i = 0
    while i < n:
        v = nl.load(src, boundary_check=(0,))
        nl.store(dst, v * 2 + 1, boundary_check=(0,))
        src = nl.advance(src, (BLOCK,))
        dst = nl.advance(dst, (BLOCK,))
        i += BLOCK


def test_store_boundary_and_while_loop(backend):
    n = 37
    x = torch.randn(n)
    y = backend.full((48,), -5.0, torch.float32)
    backend.launch(bp_store_partial, (1,), backend.put(x), y, n, BLOCK=16)
    got = backend.get(y)
    torch.testing.assert_close(got[:n], x * 2 + 1)
    assert bool((got[n:] == -5.0).all())  # nothing written past the tensor's end


def _nvrtc() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _nvrtc(), reason="needs NVRTC (cuda-python)")
@pytest.mark.parametrize("target,block_k", [("sm_90a", 64), ("sm_80", 32)])
def test_block_pointer_matmul_compiles_to_cubin(target, block_k):
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
           "stride_cm": "i32", "stride_cn": "constexpr"}
    ce = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": block_k,
          "GROUP_M": 8}
    ck = newt.compile(bp_matmul, signature=sig, constexprs=ce, target=target, num_warps=8, num_stages=3,
                      cache=False)
    assert ck.asm["cubin"][:4] == b"\x7fELF"
    assert ck.metadata.n_spills == 0
    ptx = ck.asm["ptx"]
    assert ("wgmma.mma_async" in ptx) if target == "sm_90a" else ("mma.sync" in ptx)
    # the front end's warning travels with the compiled kernel, not as an error
    assert any(w.code == "N080" for w in ck.warnings)


@newt.jit
def bp_branch(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    bp = nl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    if pid % 2 == 1:  # a run-time condition: the two branches' block pointers merge
        bp = nl.advance(bp, (BLOCK,))
    v = nl.load(bp, boundary_check=(0,), padding_option="zero")
    nl.store(out_ptr + pid * BLOCK + nl.arange(0, BLOCK), v)


def test_block_pointer_advanced_on_one_branch(backend):
    x = torch.arange(24, dtype=torch.float32)
    out = backend.zeros(4 * 16)
    backend.launch(bp_branch, (4,), backend.put(x), out, 24, BLOCK=16)
    got = backend.get(out).view(4, 16)
    second = torch.cat([x[16:], torch.zeros(8)])
    torch.testing.assert_close(got, torch.stack([x[:16], second, x[:16], second]))
