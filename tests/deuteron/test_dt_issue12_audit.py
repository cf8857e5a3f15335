"""Issue 12's construct list, one check per bullet that had no test of its own (the others: test_dt_load_store,
test_dt_slices, test_dt_split_join, test_dt_surface, test_dt_combine, test_dt_random, test_dt_atomics,
test_dt_atomic_cas, test_dt_signal_wait, test_dt_moving_slice, test_dt_regroup_ops, test_dt_helion_options; control
flow on tile values: test_dt_oracle)."""

from __future__ import annotations

import torch

import deuteron as dt


@dt.kernel
def chunked_row_sums(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty(m, dtype=torch.float32, device=x.device)
    bn = dt.register_block_size(n)
    for tm in dt.tile(m):
        acc = dt.zeros([tm, bn], dtype=torch.float32)  # the registered size as a plain dimension, before its tile
        for tn in dt.tile(n, block_size=bn):
            acc = acc + x[tm, tn]
        out[tm] = acc.sum(-1)
    return out


def test_register_block_size_as_a_dimension_before_its_tile():
    x = torch.randn(13, 70)
    for bs in (16, 32, 128):
        torch.testing.assert_close(chunked_row_sums.run_with(dict(block_sizes=[4, bs]), x), x.sum(1),
                                   atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(chunked_row_sums.ref(x), x.sum(1), atol=1e-4, rtol=1e-4)


@dt.kernel
def maybe_shift(x: torch.Tensor, shift: torch.Tensor | None = None) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        v = x[t]
        if shift is not None:  # not taken with None: its body (shift[t] of None) is not traced
            v = v + shift[t]
        out[t] = v
    return out


def test_a_branch_on_a_host_none_is_not_traced():
    x = torch.randn(20)
    torch.testing.assert_close(maybe_shift(x), x)
    s = torch.randn(20)
    torch.testing.assert_close(maybe_shift(x, s), x + s)

