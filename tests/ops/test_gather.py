"""nl.gather along an axis, as torch.gather; interpreter and CUDA."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, S0: nl.constexpr, S1: nl.constexpr, I0: nl.constexpr,
                  I1: nl.constexpr, AXIS: nl.constexpr):
    s = nl.load(src_ptr + nl.arange(0, S0)[:, None] * S1 + nl.arange(0, S1)[None, :])
    ioffs = nl.arange(0, I0)[:, None] * I1 + nl.arange(0, I1)[None, :]
    i = nl.load(idx_ptr + ioffs)
    nl.store(out_ptr + ioffs, nl.gather(s, i, AXIS))


@newt.jit
def gather_1d_kernel(src_ptr, idx_ptr, out_ptr, S: nl.constexpr, I: nl.constexpr):
    s = nl.load(src_ptr + nl.arange(0, S))
    i = nl.load(idx_ptr + nl.arange(0, I))
    nl.store(out_ptr + nl.arange(0, I), s.gather(i, 0))


@pytest.mark.parametrize("src_shape,idx_shape,axis", [((4, 4), (8, 4), 0), ((16, 8), (32, 8), 0),
                                                      ((16, 8), (16, 32), 1), ((4, 4), (512, 4), 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_gather(backend, src_shape, idx_shape, axis, dtype):
    src = (torch.randn(src_shape) * 100).to(dtype)
    idx = torch.randint(0, src_shape[axis], idx_shape, dtype=torch.int32)
    out = backend.zeros(*idx_shape, dtype=dtype)
    backend.launch(gather_kernel, (1,), backend.put(src), backend.put(idx), out, S0=src_shape[0], S1=src_shape[1],
                   I0=idx_shape[0], I1=idx_shape[1], AXIS=axis)
    assert torch.equal(backend.get(out), torch.gather(src, axis, idx.long()))


def test_gather_1d(backend):
    src = torch.randn(32)
    idx = torch.randint(0, 32, (64,), dtype=torch.int32)
    out = backend.zeros(64)
    backend.launch(gather_1d_kernel, (1,), backend.put(src), backend.put(idx), out, S=32, I=64)
    assert torch.equal(backend.get(out), src[idx.long()])


def test_gather_rules():
    from newt.frontend import analyze_source
    src = '''
import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    s = nl.full((4, 8), 1.0, nl.float32)
    a = nl.gather(s, nl.full((4, 8), 1.5, nl.float32), 0)
    b = nl.gather(s, nl.full((8,), 1, nl.int32), 0)
    c = nl.gather(s, nl.full((4, 16), 1, nl.int32), 0)
    d = nl.gather(s, nl.full((4, 8), 1, nl.int32), 2)
'''
    fa = analyze_source(src, "k.py")
    got = {(d.code, d.span.line, d.span.col) for d in fa.diagnostics if d.severity <= 2}
    assert {("N023", 8, 22), ("N030", 9, 22), ("N030", 10, 22), ("N032", 11, 52)} <= got, got


def test_gather_compiles_for_sm80_and_sm90a():
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.frontend import build_ir
    P = nl.pointer_type
    for target in ("sm_80", "sm_90a"):
        f = build_ir(gather_kernel, dict(src_ptr=P(nl.float32), idx_ptr=P(nl.int32), out_ptr=P(nl.float32)),
                     dict(S0=128, S1=64, I0=128, I1=128, AXIS=1))
        assert compile_cuda(generate_cuda(f, target, 4, 3), target).cubin
