"""Helion's surface, session 3 (issue 12): tile arithmetic, jagged tiles, registered block sizes as dimensions,
library score modifiers.  Each kernel runs on the CPU interpreter and is compared with eager PyTorch and with
``kernel.ref``."""

from __future__ import annotations

import torch

import deuteron as dt
from dt_helpers import check, raises_at, write_module


# ---- a tile in + - * // % is its indices -----------------------------------------------------------------------

@dt.kernel(config=dt.Config(block_sizes=[16]))
def shifted_rows(k, n: int, start: int):
    d = k.size(1)
    out = torch.empty([n, d], dtype=k.dtype, device=k.device)
    for tile_n in dt.tile(n):
        out[tile_n, :] = k[tile_n + start, :] * 2 + (tile_n * 3 - 1)[:, None].to(k.dtype)
    return out


def test_tile_plus_offset_indexes_shifted_rows():
    k = torch.randn(50, 8)
    got = shifted_rows(k, 30, 7)
    idx = torch.arange(30)
    want = k[7:37] * 2 + (idx * 3 - 1)[:, None].float()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(shifted_rows.ref(k, 30, 7), want)


@dt.kernel(config=dt.Config(block_sizes=[4]))
def negated(x):
    n = x.size(0)
    out = torch.empty_like(x)
    for t in dt.tile(n):
        out[t] = x[(n - 1) + -t] + (t % 3).to(x.dtype) + (t // 2).to(x.dtype)
    return out


def test_negated_tile_and_modulo():
    x = torch.randn(10)
    i = torch.arange(10)
    want = x.flip(0) + (i % 3).float() + (i // 2).float()
    torch.testing.assert_close(negated(x), want)
    torch.testing.assert_close(negated.ref(x), want)


def test_tile_compared_or_divided_stays_d003(tmp_path):
    mod = write_module(tmp_path, "k_tcmp", """
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            out[tile] = x[tile] * (tile / 2)
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8)), "D003", "(tile / 2)", "tile / 2")


def _static(body):
    from deuteron import frontend
    frontend.register()  # as the newt.kernel_kinds entry point does where the package is installed
    res, _, _ = check(body)
    return [d for d in res.diagnostics if d.code.startswith("D")]


def test_static_checker_accepts_tile_offsets():
    assert not _static("""
    @dt.kernel
    def f(k, start: int):
        out = torch.empty_like(k)
        for tile_n in dt.tile(k.size(0) - start):
            out[tile_n, :] = k[tile_n + start, :]
        return out
    """)
    bad = _static("""
    @dt.kernel
    def f(k, start: int):
        out = torch.empty_like(k)
        for tile_n in dt.tile(k.size(0) - start):
            out[tile_n, :] = k[tile_n / start, :]
        return out
    """)
    assert [d.code for d in bad] == ["D003"], bad
