"""``torch.cat`` of two blocks, ``repeat_interleave`` and ``torch.einsum`` inside tile loops (issue 12's list),
on the CPU interpreter against eager PyTorch and ``kernel.ref``."""

from __future__ import annotations

import pytest
import torch
from dt_helpers import raises_at, write_module

import deuteron as dt


def _both(kern, args, want, **tol):
    torch.testing.assert_close(kern(*args), want, **tol)
    torch.testing.assert_close(kern.ref(*args), want, **tol)


@dt.kernel
def cat_cols(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    out = torch.empty(m, 2 * k, dtype=x.dtype, device=x.device)
    for tm in dt.tile(m):
        out[tm, :] = torch.cat([x[tm, :], y[tm, :] * 2], dim=1)
    return out


@dt.kernel
def cat_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    k, n = x.shape
    out = torch.empty(2 * k, n, dtype=x.dtype, device=x.device)
    for tn in dt.tile(n):
        out[:, tn] = torch.cat((x[:, tn], y[:, tn]), 0)
    return out


def test_cat_of_two_blocks():
    x, y = torch.randn(37, 16), torch.randn(37, 16)
    _both(cat_cols, (x, y), torch.cat([x, y * 2], 1))
    a, b = torch.randn(8, 21), torch.randn(8, 21)
    _both(cat_rows, (a, b), torch.cat([a, b], 0))


@dt.kernel
def rep_cols(x: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    out = torch.empty(m, 4 * k, dtype=x.dtype, device=x.device)
    for tm in dt.tile(m):
        out[tm, :] = x[tm, :].repeat_interleave(4, dim=1)
    return out


@dt.kernel
def rep_tile_rows(x: torch.Tensor) -> torch.Tensor:
    n, k = x.shape
    out = torch.empty(2 * n, k, dtype=x.dtype, device=x.device)
    bs = dt.register_block_size(n)
    for tn in dt.tile(n, block_size=bs):
        out[tn.begin * 2 : tn.begin * 2 + 2 * bs, :] = torch.repeat_interleave(x[tn, :], 2, dim=0)
    return out


def test_repeat_interleave_whole_and_tile_dimensions():
    x = torch.randn(37, 8)
    _both(rep_cols, (x,), x.repeat_interleave(4, dim=1))
    for bs in (8, 16, 64):
        torch.testing.assert_close(rep_tile_rows.run_with(dict(block_sizes=[bs]), x), x.repeat_interleave(2, 0))
    torch.testing.assert_close(rep_tile_rows.ref(x), x.repeat_interleave(2, 0))


@dt.kernel
def ein_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.size(0)
    out = torch.empty(m, n, dtype=torch.float32, device=a.device)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = torch.einsum("mk,nk->mn", a[tm, :], b[tn, :])
    return out


@dt.kernel
def ein_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    bt, m, k = a.shape
    n = b.size(2)
    out = torch.empty(bt, n, m, dtype=torch.float32, device=a.device)
    for tb, tm, tn in dt.tile([bt, m, n]):
        out[tb, tn, tm] = torch.einsum("bmk,bkn->bnm", a[tb, tm, :], b[tb, :, tn])
    return out


@dt.kernel
def ein_general(w: torch.Tensor, v: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    m, k = w.shape
    out = torch.empty(m, dtype=torch.float32, device=w.device)
    for tm in dt.tile(m):
        rowdot = torch.einsum("ij,j->i", w[tm, :], v[:])  # a broadcast product summed over j
        total = torch.einsum("ij->i", w[tm, :] * s[tm, :])
        out[tm] = rowdot + torch.einsum("i,i->i", total, total)
    return out


def test_einsum_matmul_forms_become_dots():
    a, b = torch.randn(40, 32), torch.randn(24, 32)
    _both(ein_mm, (a, b), a @ b.T, atol=1e-4, rtol=1e-4)
    assert "nl.dot(" in ein_mm.to_newt_source(a, b)
    x, y = torch.randn(3, 20, 32), torch.randn(3, 32, 17)
    _both(ein_bmm, (x, y), (x @ y).transpose(1, 2), atol=1e-4, rtol=1e-4)


def test_einsum_general_product_and_sum():
    w, v, s = torch.randn(37, 12), torch.randn(12), torch.randn(37, 12)
    tot = (w * s).sum(1)
    _both(ein_general, (w, v, s), w @ v + tot * tot, atol=1e-4, rtol=1e-4)


def test_unsupported_forms_are_d004_at_the_line(tmp_path):
    mod = write_module(tmp_path, "k_regroup_bad", """
    @dt.kernel
    def cat3(x):
        out = torch.empty(x.size(0), 3 * x.size(1), device=x.device)
        for tm in dt.tile(x.size(0)):
            out[tm, :] = torch.cat([x[tm, :], x[tm, :], x[tm, :]], dim=1)
        return out

    @dt.kernel
    def cat_tile(x):
        out = torch.empty(2 * x.size(0), x.size(1), device=x.device)
        for tm in dt.tile(x.size(0)):
            v = torch.cat([x[tm, :], x[tm, :]], dim=0)
        return out

    @dt.kernel
    def ein_dots(x):
        out = torch.empty(x.size(0), device=x.device)
        for tm in dt.tile(x.size(0)):
            out[tm] = torch.einsum("...k->...", x[tm, :])
        return out

    @dt.kernel
    def rep3(x):
        out = torch.empty(x.size(0), 3 * x.size(1), device=x.device)
        for tm in dt.tile(x.size(0)):
            out[tm, :] = x[tm, :].repeat_interleave(3, dim=1)
        return out
    """)
    x = torch.randn(8, 16)
    raises_at(mod, lambda: mod.cat3(x), "D004", "torch.cat([x[tm, :], x[tm, :], x[tm, :]]", contains="3 blocks")
    raises_at(mod, lambda: mod.cat_tile(x), "D004", "v = torch.cat", contains="along a tile")
    raises_at(mod, lambda: mod.ein_dots(x), "D004", "torch.einsum(", contains="ellipsis")
    raises_at(mod, lambda: mod.rep3(x), "D004", "repeat_interleave(3", contains="power of two")


@pytest.mark.parametrize("eq", ["ij,jk->ik", "ij,jk->ki", "ik,jk->ij", "ij,ij->j"])
def test_einsum_equations_match_torch(eq):
    a = torch.randn(32, 16)
    b = torch.randn(16, 24) if eq[3:5] == "jk" and eq[:2] == "ij" else torch.randn(24, 16) if eq[:2] == "ik" \
        else torch.randn(32, 16)
    want = torch.einsum(eq, a, b)

    @dt.kernel
    def whole(a: torch.Tensor, b: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(like)
        equation = eq  # a host string: known when compiling
        for _ in dt.tile(1, block_size=1):
            out[...] = torch.einsum(equation, a[:, :], b[:, :])
        return out

    torch.testing.assert_close(whole(a, b, want), want, atol=1e-4, rtol=1e-4)
