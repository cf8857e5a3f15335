"""Slices whose start moves with the tile (``x[t, s : s + C]``, ``s`` a scalar of the kernel, ``C`` known when
compiling) and reshapes that merge a tile with a whole dimension (``[tk, 2, tn] -> [2 * tk.block_size, tn]``)
or split it back, on the CPU interpreter against eager PyTorch."""

from __future__ import annotations

import pytest
import torch
from dt_helpers import raises_at, write_module

import deuteron as dt


@dt.kernel(config=dt.Config(block_sizes=[4]))
def window_sum(a: torch.Tensor, n: int) -> torch.Tensor:
    m, _ = a.shape
    out = torch.zeros(m, n, dtype=a.dtype, device=a.device)
    for tm, tn in dt.tile([m, n], block_size=[None, 1]):
        s = tn.begin * 2
        out[tm, tn] = a[tm, s + 1 : s + 9].sum(-1, keepdim=True)
    return out


@dt.kernel(static_shapes=False, config=dt.Config(block_sizes=[4]))
def window_sum_dyn(a: torch.Tensor, n: int) -> torch.Tensor:
    m, _ = a.shape
    out = torch.zeros(m, n, dtype=a.dtype, device=a.device)
    for tm, tn in dt.tile([m, n], block_size=[None, 1]):
        s = tn.begin * 2
        out[tm, tn] = a[tm, s + 1 : s + 9].sum(-1, keepdim=True)
    return out


def _window_eager(a, n):
    # windows running past the end are shorter in eager PyTorch (the kernel reads 0 there)
    return torch.stack([a[:, 2 * j + 1:2 * j + 9].sum(-1) for j in range(n)], 1)


@pytest.mark.parametrize("kern", [window_sum, window_sum_dyn], ids=["static", "dynamic"])
@pytest.mark.parametrize("m,k,n", [(6, 30, 16), (5, 40, 9)])
def test_window_sum_against_eager(kern, m, k, n):
    a = torch.randn(m, k)
    want = _window_eager(a, n)
    torch.testing.assert_close(kern(a, n), want)
    torch.testing.assert_close(kern.ref(a, n), want)


def test_the_window_is_masked_by_the_tensor_end():
    src = window_sum.to_newt_source(torch.randn(6, 30), 16)
    load = next(ln for ln in src.splitlines() if "nl.load(a" in ln)
    assert "< 30)" in load, load


@dt.kernel
def scatter_rows(x: torch.Tensor, width: int) -> torch.Tensor:
    n = x.size(0)
    out = torch.zeros(n * 4 - 2, dtype=x.dtype, device=x.device)
    for t in dt.tile(n, block_size=1):
        s = t.begin * 4
        out[s : s + 4] = x[t.begin] + torch.zeros([4], dtype=x.dtype, device=x.device)
    return out


def test_store_through_a_moving_slice_stops_at_the_end():
    x = torch.arange(1, 6, dtype=torch.float32)
    want = torch.zeros(18)
    for i in range(5):  # the last window runs 2 past the end
        want[4 * i:4 * i + 4] = x[i]
    torch.testing.assert_close(scatter_rows(x, 4), want)


@dt.kernel(config=dt.Config(block_sizes=[16, 8]))
def interleave(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    n, m = lo.shape
    out = torch.zeros(2 * n, m, dtype=lo.dtype, device=lo.device)
    bs = dt.register_block_size(n)
    for tm in dt.tile(m):
        for tk in dt.tile(n, block_size=bs):
            st = torch.stack([lo[tk, tm], hi[tk, tm]], dim=1)
            merged = st.reshape(tk.block_size * 2, tm.block_size)
            out[tk.begin * 2 : tk.begin * 2 + 2 * bs, tm] = merged
    return out


@dt.kernel(config=dt.Config(block_sizes=[16, 8]))
def deinterleave_sum(x: torch.Tensor) -> torch.Tensor:
    n2, m = x.shape
    n = n2 // 2
    out = torch.zeros(n, m, dtype=x.dtype, device=x.device)
    bs = dt.register_block_size(n)
    for tm in dt.tile(m):
        for tk in dt.tile(n, block_size=bs):
            w = x[tk.begin * 2 : tk.begin * 2 + 2 * bs, tm]
            pairs = w.reshape(tk.block_size, 2, tm.block_size)  # splits the merged dimension back into tk
            out[tk, tm] = pairs.sum(1)
    return out


@pytest.mark.parametrize("bs", [4, 8, 16, 32])
def test_merge_a_tile_with_a_pair_against_eager(bs):
    lo, hi = torch.randn(20, 6), torch.randn(20, 6)
    want = torch.stack([lo, hi], 1).reshape(40, 6)
    assert torch.equal(interleave.run_with(dict(block_sizes=[8, bs]), lo, hi), want)
    assert torch.equal(interleave.ref(lo, hi), want)


@pytest.mark.parametrize("bs", [4, 16, 32])
def test_split_back_into_the_tile_against_eager(bs):
    x = torch.randn(40, 6)
    want = x[0::2] + x[1::2]
    torch.testing.assert_close(deinterleave_sum.run_with(dict(block_sizes=[8, bs]), x), want)
    torch.testing.assert_close(deinterleave_sum.ref(x), want)


def test_merged_lanes_of_a_ragged_tile_are_zero():
    """The last tile of 20 rows with block 16 has 12 lanes past the end; merged, they are ordinary lanes of the
    whole dimension: they hold 0, so a sum over the merged dimension equals eager's."""
    @dt.kernel(config=dt.Config(block_sizes=[8, 16]))
    def pair_sums(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
        n, m = lo.shape
        out = torch.zeros(m, dtype=lo.dtype, device=lo.device)
        bs = dt.register_block_size(n)
        for tm in dt.tile(m):
            acc = dt.zeros([tm], dtype=torch.float32)
            for tk in dt.tile(n, block_size=bs):
                st = torch.stack([lo[tk, tm] + 1.0, hi[tk, tm] + 1.0], dim=1)
                acc = acc + st.reshape(tk.block_size * 2, tm.block_size).sum(0)
            out[tm] = acc
        return out

    lo, hi = torch.randn(20, 6), torch.randn(20, 6)
    want = (lo + 1).sum(0) + (hi + 1).sum(0)
    torch.testing.assert_close(pair_sums(lo, hi), want)
    src = pair_sums.to_newt_source(lo, hi)
    assert "nl.where(" in src  # the ragged lanes are zeroed before the merge (lo + 1 is 1 there)


@dt.kernel(config=dt.Config(block_sizes=[16, 16, 16]))
def packed_pair_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [M, K] times the [K, N] matrix whose even rows are b's low nibbles and odd rows its high ones."""
    m, k = a.shape
    _, n = b.shape
    out = torch.zeros(m, n, dtype=torch.float32, device=a.device)
    bk = dt.register_block_size(k // 2)
    for tm, tn in dt.tile([m, n]):
        acc = dt.zeros([tm, tn], dtype=torch.float32)
        for tk in dt.tile(k // 2, block_size=bk):
            s = tk.begin * 2
            a_blk = a[tm, s : s + 2 * bk]
            packed = b[tk, tn]
            low = (packed & 0xF).to(torch.float32)
            high = ((packed >> 4) & 0xF).to(torch.float32)
            w = torch.stack([low, high], dim=1).reshape(tk.block_size * 2, tn.block_size)
            acc = dt.dot(a_blk, w, acc=acc)
        out[tm, tn] = acc
    return out


@pytest.mark.parametrize("bk", [16, 32])
@pytest.mark.parametrize("k", [64, 96])
def test_packed_gemm_against_eager(bk, k):
    g = torch.Generator().manual_seed(k + bk)
    a = torch.randn(24, k, generator=g)
    b = torch.randint(0, 256, (k // 2, 20), generator=g, dtype=torch.int32)
    w = torch.stack([b & 0xF, (b >> 4) & 0xF], 1).reshape(k, 20).float()
    want = a @ w
    torch.testing.assert_close(packed_pair_gemm.run_with(dict(block_sizes=[16, 16, bk]), a, b), want,
                               rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(packed_pair_gemm.ref(a, b), want, rtol=1e-4, atol=1e-3)


def test_errors_at_the_users_line(tmp_path):
    mod = write_module(tmp_path, "k_moving_bad", """
    @dt.kernel(config=dt.Config(block_sizes=[4]))
    def runtime_length(a, w: int):
        out = torch.zeros(a.size(0), dtype=a.dtype, device=a.device)
        for t in dt.tile(a.size(0), block_size=1):
            s = t.begin
            out[t] = a[t, s : s + w].sum(-1)
        return out

    @dt.kernel(config=dt.Config(block_sizes=[4]))
    def open_stop(a):
        out = torch.zeros(a.size(0), dtype=a.dtype, device=a.device)
        for t in dt.tile(a.size(0), block_size=1):
            out[t] = a[t, t.begin :].sum(-1)
        return out

    @dt.kernel(config=dt.Config(block_sizes=[8, 8]))
    def tunable_merge(x):
        n, m = x.shape
        out = torch.zeros(2 * n, m, dtype=x.dtype, device=x.device)
        for tm, tk in dt.tile([m, n]):
            st = torch.stack([x[tk, tm], x[tk, tm]], dim=1)
            out[tk.begin * 2 : tk.begin * 2 + 16, tm] = st.reshape(tk.block_size * 2, tm.block_size)
        return out
    """)
    a = torch.randn(4, 16)
    raises_at(mod, lambda: mod.runtime_length(a, 3), "D004", "a[t, s : s + w]", contains="do not differ")
    raises_at(mod, lambda: mod.open_stop(a), "D004", "a[t, t.begin :]", contains="open stop")
    raises_at(mod, lambda: mod.tunable_merge(torch.randn(16, 8)), "D004", "st.reshape(tk.block_size * 2",
              contains="tunable block size")
