"""nl.histogram: counts per bin, with a mask, out-of-range values ignored; interpreter and CUDA."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def histogram_kernel(x_ptr, z_ptr, M: nl.constexpr, N: nl.constexpr, MASKED: nl.constexpr):
    offs = nl.arange(0, M)
    x = nl.load(x_ptr + offs)
    if MASKED:
        h = nl.histogram(x, N, mask=offs % 3 != 0)
    else:
        h = x.histogram(N)
    nl.store(z_ptr + nl.arange(0, N), h)


@pytest.mark.parametrize("M,N", [(2048, 2), (1024, 128), (8, 512), (64, 1), (256, 16)])
@pytest.mark.parametrize("masked", [False, True])
def test_histogram(backend, M, N, masked):
    x = torch.randint(-3, N + 3, (M,), dtype=torch.int32)  # some values outside the bins
    z = backend.full((N + 1,), -7, torch.int32)  # one element past the bins: must stay untouched
    backend.launch(histogram_kernel, (1,), backend.put(x), z, M=M, N=N, MASKED=masked)
    keep = (x >= 0) & (x < N)
    if masked:
        keep &= torch.arange(M) % 3 != 0
    want = torch.bincount(x[keep].long(), minlength=N).to(torch.int32)
    got = backend.get(z)
    assert torch.equal(got[:N], want)
    assert got[N] == -7


def test_histogram_rules():
    from newt.frontend import analyze_source
    src = '''
import newt
import newt.language as nl

@newt.jit
def k(x_ptr, f_ptr):
    x = nl.load(x_ptr + nl.arange(0, 16))
    a = nl.histogram(x, 12)
    f = nl.full((16,), 1.5, nl.float32)
    b = nl.histogram(f, 4)
    c = nl.histogram(nl.reshape(x, (4, 4)), 4)
'''
    fa = analyze_source(src, "k.py")
    got = {(d.code, d.span.line, d.span.col) for d in fa.diagnostics if d.severity <= 2}
    assert ("N011", 8, 25) in got  # 12 bins: not a power of two
    assert ("N023", 10, 22) in got  # floats are not counted
    assert ("N032", 11, 22) in got


def test_histogram_compiles_for_sm80_and_sm90a():
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.frontend import build_ir
    P = nl.pointer_type
    for M, N, masked in [(2048, 2, False), (8, 512, True)]:
        for target in ("sm_80", "sm_90a"):
            f = build_ir(histogram_kernel, dict(x_ptr=P(nl.int32), z_ptr=P(nl.int32)), dict(M=M, N=N, MASKED=masked))
            m = generate_cuda(f, target, 4, 3)
            assert m.shared_bytes >= N * 4
            assert compile_cuda(m, target).cubin
