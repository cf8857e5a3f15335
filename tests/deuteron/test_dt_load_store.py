"""dt.load / dt.store with extra_mask and an eviction policy (Helion's hl.load / hl.store)."""

from __future__ import annotations

from pathlib import Path

import torch
from dt_helpers import raises_at, write_module

import deuteron as dt


@dt.kernel
def masked_copy_lower(x):
    m, n = x.shape
    out = torch.zeros_like(x)
    for tm, tn in dt.tile([m, n]):
        keep = tm.index[:, None] >= tn.index[None, :]
        v = dt.load(x, [tm, tn], extra_mask=keep, eviction_policy="evict_first")
        dt.store(out, [tm, tn], v * 2, extra_mask=keep)
    return out


@dt.kernel
def prefix_window(x, width: int):
    n = x.size(0)
    out = torch.empty_like(x)
    for t in dt.tile(n):
        cur = dt.load(x, [t], eviction_policy="evict_last")
        prev_idx = t.index - width
        prev = dt.load(x, [torch.clamp(prev_idx, min=0)], extra_mask=prev_idx >= 0)
        out[t] = cur - prev
    return out


def test_tril_through_masks():
    x = torch.randn(37, 29)
    exp = torch.tril(x) * 2
    torch.testing.assert_close(masked_copy_lower(x), exp)
    torch.testing.assert_close(masked_copy_lower.ref(x), exp)
    src = masked_copy_lower.to_newt_source(x)
    assert "eviction_policy='evict_first'" in src


def test_gather_with_extra_mask_and_a_runtime_width():
    x = torch.randn(100)
    for w in (3, 17):
        prev = torch.cat([torch.zeros(w), x[:-w]])
        torch.testing.assert_close(prefix_window(x, w), x - prev)
    assert "eviction_policy='evict_last'" in prefix_window.to_newt_source(x, 3)


def test_static_checker_is_clean_on_this_file():
    from newt.frontend import analyze_source
    fa = analyze_source(Path(__file__).read_text(), __file__)
    assert [d.format() for d in fa.diagnostics] == []


def test_a_mask_that_does_not_broadcast_is_d006(tmp_path):
    mod = write_module(tmp_path, "k_bad_mask", """
    @dt.kernel
    def f(x):
        m, n = x.shape
        out = torch.empty_like(x)
        for tm, tn in dt.tile([m, n]):
            out[tm, tn] = dt.load(x, [tm, tn], extra_mask=tn.index[:, None] > 0)
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8, 16)), "D006", "dt.load(x, [tm, tn], extra_mask",
              contains="does not broadcast")


def test_unknown_eviction_policy_is_d004(tmp_path):
    mod = write_module(tmp_path, "k_bad_evict", """
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = dt.load(x, [t], eviction_policy="keep")
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8)), "D004", "dt.load(x, [t]", contains="eviction_policy")
