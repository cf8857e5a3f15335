"""A one-element block read as a scalar (``nl.reshape(x, ())``, ``nl.permute`` of a 0-d view) on the CUDA backend.

deuteron writes ``t.squeeze(-1)`` of a ``[tile, 1]`` block as ``nl.reshape(x, ())`` when the tile is one row,
as in Helion's cross_entropy at one row a program (Helion's own best config there: a row a program over 32
warps). The backend stopped with an internal error B002 ("reshape ... should have been materialized on use"),
so every such config of the tune failed to compile and the tune settled for two rows a program, which spills
132 bytes (H100, 2026-12-07: deuteron 0.86x Helion's speed on that kernel). The interpreter always ran it."""

from __future__ import annotations

import math

import pytest

import newt
import newt.language as nl


@newt.jit
def logsumexp_kernel(x, out, n, stride, B: nl.constexpr):
    row = nl.program_id(0)
    offs = nl.arange(0, B)
    v = nl.load(x + row * stride + offs, mask=offs < n, other=float("-inf"))
    m = nl.max(v, axis=0, keep_dims=True)
    s = nl.sum(nl.exp(v - m), axis=0, keep_dims=True)
    nl.store(out + row, nl.reshape(m, ()) + nl.log(nl.reshape(s, ())))


@newt.jit
def first_of_kernel(x, out, B: nl.constexpr):
    v = nl.load(x + nl.arange(0, B))
    one = nl.reshape(nl.sum(nl.reshape(v, (1, B)), axis=1, keep_dims=True), (1, 1))
    nl.store(out, nl.reshape(nl.permute(one, (1, 0)), ()) * 2)


@pytest.mark.parametrize("num_warps", [1, 4, 32])
def test_reshape_of_a_reduction_to_a_scalar_compiles(num_warps):
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.runtime.compiler import compile as ncompile
    k = ncompile(logsumexp_kernel, signature={"x": "*fp32", "out": "*fp32", "n": "i32", "stride": "i32"},
                 constexprs={"B": 4096}, num_warps=num_warps, cache=False)
    assert k.n_spills == 0
    # the scalar is the block's one element, which every thread holds after the reduction
    assert "should have been materialized" not in k.asm["cuda"] and "logf(" in k.asm["cuda"]


def test_permute_and_reshape_of_a_one_element_block_compile():
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.runtime.compiler import compile as ncompile
    ncompile(first_of_kernel, signature={"x": "*fp32", "out": "*fp32"}, constexprs={"B": 256}, num_warps=4,
             cache=False)


def test_on_the_interpreter(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    x = torch.randn(3, 1000)
    out = torch.empty(3)
    logsumexp_kernel[(3,)](x, out, 1000, x.stride(0), B=1024)
    torch.testing.assert_close(out, torch.logsumexp(x, dim=1))
    o = torch.empty(1)
    first_of_kernel[(1,)](x[0, :256].contiguous(), o, B=256)
    assert math.isclose(float(o), 2 * float(x[0, :256].sum()), rel_tol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("num_warps", [1, 4, 32])
def test_on_the_gpu(num_warps):
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 3000, device="cuda")
    out = torch.empty(64, device="cuda")
    logsumexp_kernel[(64,)](x, out, 3000, x.stride(0), B=4096, num_warps=num_warps)
    torch.testing.assert_close(out, torch.logsumexp(x, dim=1))
    o = torch.empty(1, device="cuda")
    first_of_kernel[(1,)](x[0, :256].contiguous(), o, B=256, num_warps=num_warps)
    torch.testing.assert_close(o, 2 * x[0, :256].sum().reshape(1))
