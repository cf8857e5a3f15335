"""``dt.subscript(v, index)``: Helion's ``hl.subscript``, ``v[index]`` for a block (None adds a dimension)."""

from __future__ import annotations

import torch
from dt_helpers import raises_at, write_module

import deuteron as dt


@dt.kernel(config=dt.Config(block_sizes=[8, 8]))
def outer(x, y):
    out = torch.empty([x.size(0), y.size(0)], dtype=x.dtype, device=x.device)
    for ti, tj in dt.tile([x.size(0), y.size(0)]):
        a = dt.subscript(x[ti], [slice(None), None])  # [ti, 1]
        b = dt.subscript(y[tj], [None, ...])  # [1, tj]
        out[ti, tj] = a * b
    return out


def test_subscript_adds_dimensions_like_indexing_with_none():
    x, y = torch.randn(20), torch.randn(13)
    torch.testing.assert_close(outer(x, y), x[:, None] * y[None, :])
    torch.testing.assert_close(outer.ref(x, y), x[:, None] * y[None, :])
    assert "[:, None]" in outer.to_newt_source(x, y) or "None]" in outer.to_newt_source(x, y)


def test_subscript_of_a_host_tensor_is_located(tmp_path):
    mod = write_module(tmp_path, "k_sub", """
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = dt.subscript(x, [slice(None)])[t]
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8)), "D004", "dt.subscript", "dt.subscript", contains="not")
