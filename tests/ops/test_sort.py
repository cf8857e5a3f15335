"""nl.sort and nl.topk (a bitonic network through existing IR ops); interpreter and CUDA."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def sort_kernel(x_ptr, z_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr, DESC: nl.constexpr):
    offs = nl.arange(0, M)[:, None] * N + nl.arange(0, N)[None, :]
    x = nl.load(x_ptr + offs)
    if K == 0:
        nl.store(z_ptr + offs, nl.sort(x, descending=DESC))
    else:
        zo = nl.arange(0, M)[:, None] * K + nl.arange(0, K)[None, :]
        nl.store(z_ptr + zo, x.topk(K, descending=DESC))


@pytest.mark.parametrize("M,N", [(1, 512), (8, 64), (4, 2), (16, 1)])
@pytest.mark.parametrize("desc", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int8])
def test_sort(backend, M, N, desc, dtype):
    x = (torch.randn(M, N) * 50).to(dtype)
    z = backend.zeros(M, N, dtype=dtype)
    backend.launch(sort_kernel, (1,), backend.put(x), z, M=M, N=N, K=0, DESC=desc)
    assert torch.equal(backend.get(z), torch.sort(x, dim=1, descending=desc).values)


@pytest.mark.parametrize("M,N,K", [(1, 512, 8), (8, 64, 64), (4, 16, 1), (2, 32, 4)])
@pytest.mark.parametrize("desc", [False, True])
def test_topk(backend, M, N, K, desc):
    x = torch.randn(M, N)
    z = backend.zeros(M, K)
    backend.launch(sort_kernel, (1,), backend.put(x), z, M=M, N=N, K=K, DESC=desc)
    assert torch.equal(backend.get(z), torch.topk(x, K, dim=1, largest=desc).values)


def test_sort_rules():
    from newt.frontend import analyze_source
    src = '''
import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    s = nl.full((4, 8), 1.0, nl.float32)
    a = nl.sort(s, dim=0)
    b = nl.topk(s, 16)
    c = nl.topk(s, 3)
'''
    fa = analyze_source(src, "k.py")
    got = {(d.code, d.span.line, d.span.col) for d in fa.diagnostics if d.severity <= 2}
    assert {("N032", 8, 24), ("N011", 9, 20), ("N011", 10, 20)} <= got, got


def test_sort_compiles_for_sm80_and_sm90a():
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.frontend import build_ir
    P = nl.pointer_type
    for K in (0, 8):
        for target in ("sm_80", "sm_90a"):
            f = build_ir(sort_kernel, dict(x_ptr=P(nl.float32), z_ptr=P(nl.float32)), dict(M=8, N=64, K=K,
                                                                                             DESC=True))
            assert compile_cuda(generate_cuda(f, target, 4, 3), target).cubin
