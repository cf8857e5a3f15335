"""nl.make_tensor_descriptor with desc.load / desc.store: masked block moves (plain loads on sm_80)."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def desc_copy_kernel(x_ptr, y_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    xd = nl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    yd = nl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    pm, pn = nl.program_id(0), nl.program_id(1)
    blk = xd.load([pm * BM, pn * BN])
    yd.store([pm * BM, pn * BN], blk * 2 + 1)


@newt.jit
def desc_edge_kernel(x_ptr, out_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    xd = nl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    blk = xd.load([M - 3, -2])  # partly outside on both sides: zeros there
    o = nl.arange(0, BM)[:, None] * BN + nl.arange(0, BN)[None, :]
    nl.store(out_ptr + o, blk)
    nl.static_assert(xd.block_shape == [BM, BN])


@pytest.mark.parametrize("M,N", [(64, 64), (50, 37)])
def test_descriptor_copy(backend, M, N):
    x = torch.randn(M, N)
    y = backend.full((M, N), -5.0, torch.float32)
    backend.launch(desc_copy_kernel, (newt.cdiv(M, 16), newt.cdiv(N, 16)), backend.put(x), y, M, N, BM=16, BN=16)
    assert torch.equal(backend.get(y), x * 2 + 1)


def test_descriptor_padding(backend):
    M, N = 20, 12
    x = torch.randn(M, N)
    out = backend.zeros(8, 8)
    backend.launch(desc_edge_kernel, (1,), backend.put(x), out, M, N, BM=8, BN=8)
    want = torch.zeros(8, 8)
    for i in range(8):
        for j in range(8):
            r, c = M - 3 + i, -2 + j
            if 0 <= r < M and 0 <= c < N:
                want[i, j] = x[r, c]
    assert torch.equal(backend.get(out), want)


def test_descriptor_rules():
    from newt.frontend import analyze_source
    src = '''
import newt
import newt.language as nl

@newt.jit
def k(p: nl.pointer_type(nl.float32)):
    a = nl.make_tensor_descriptor(p, [128, 128], [128, 1], [1, 2])
    b = nl.make_tensor_descriptor(p, [128, 128], [128, 1], [8, 6])
    c = nl.make_tensor_descriptor(p, [128, 128], [128, 1], [8, 8])
    c.store([0], nl.zeros((8, 8), nl.float32))
    c.nothing
'''
    fa = analyze_source(src, "k.py")
    got = {(d.code, d.span.line) for d in fa.diagnostics if d.severity <= 2}
    assert {("N023", 7), ("N011", 8), ("N030", 10), ("N004", 11)} <= got, got


def test_descriptor_compiles_for_sm80_and_sm90a():
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.frontend import build_ir
    P = nl.pointer_type
    for target in ("sm_80", "sm_90a"):
        f = build_ir(desc_copy_kernel, dict(x_ptr=P(nl.float32), y_ptr=P(nl.float32), M=nl.int32, N=nl.int32),
                     dict(BM=64, BN=64))
        assert compile_cuda(generate_cuda(f, target, 4, 3), target).cubin
