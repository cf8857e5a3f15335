"""dt.reduce and dt.associative_scan with user combine functions (one block or a tuple), in the kernel (a
@newt.jit helper next to it) and in kernel.ref (an eager fold with the same function)."""

from __future__ import annotations

import pytest
import torch
from dt_helpers import write_module

import deuteron as dt
import newt

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def add(a, b):
    return a + b


def argmax_combine(v0, i0, v1, i1):
    take = v1 > v0
    return torch.where(take, v1, v0), torch.where(take, i1, i0)


def segment_combine(v0, k0, v1, k1):
    return torch.where(k0 == k1, v0 + v1, v1), k1


@dt.kernel
def row_reduce(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in dt.tile(m):
        out[tm] = dt.reduce(add, x[tm, :], dim=1)
    return out


@dt.kernel
def row_argmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=torch.int32, device=x.device)
    for tm in dt.tile(m):
        idx = torch.zeros_like(x[tm, :], dtype=torch.int32) + dt.arange(n)[None, :]
        _, best = dt.reduce(argmax_combine, (x[tm, :], idx), dim=1, other=(float("-inf"), 0))
        out[tm] = best
    return out


@dt.kernel
def segment_scan(x: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tm in dt.tile(m):
        vals, _ = dt.associative_scan(segment_combine, (x[tm, :], keys[tm, :]), dim=1)
        out[tm, :] = vals
    return out


@pytest.mark.parametrize("cfg", [None, dict(block_sizes=[4])])
def test_custom_reduce_over_a_whole_dimension(cfg):
    x = torch.randn(37, 50, device=DEV)
    got = row_reduce(x) if cfg is None else row_reduce.run_with(cfg, x)
    torch.testing.assert_close(got, x.sum(1), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(row_reduce.ref(x), x.sum(1), atol=1e-4, rtol=1e-4)
    assert "def _dt_combine(a0, b0):" in row_reduce.to_newt_source(x)


def test_tuple_reduce_argmax_with_other_for_the_padding():
    x = torch.randn(21, 50, device=DEV)  # 50 columns in a block of 64: the padding must be -inf
    want = x.argmax(1).to(torch.int32)
    assert torch.equal(row_argmax(x), want)
    assert torch.equal(row_argmax.ref(x), want)


def test_tuple_associative_scan_segments():
    x = torch.randn(9, 30, device=DEV)
    keys = (torch.arange(30, device=DEV) // 7).expand(9, 30).contiguous().to(torch.int32)
    want = torch.empty_like(x)
    for s in range(0, 30, 7):
        want[:, s:s + 7] = x[:, s:s + 7].cumsum(1)
    torch.testing.assert_close(segment_scan(x, keys), want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(segment_scan.ref(x, keys), want, atol=1e-4, rtol=1e-4)


def test_a_combine_that_returns_a_block_is_d004(tmp_path):
    mod = write_module(tmp_path, "comb_bad", """
def bad(a, b):
    return a, b


@dt.kernel
def f(x):
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in dt.tile(m):
        out[tm] = dt.reduce(bad, x[tm, :], dim=1)
    return out
""")
    with pytest.raises(newt.CompilationError) as ei:
        mod.f(torch.randn(4, 8, device=DEV))
    d = ei.value.diagnostics[0]
    assert d.code == "D004" and d.data["cause"] == "CombineFunction" and d.span.line == 14, d.format()
