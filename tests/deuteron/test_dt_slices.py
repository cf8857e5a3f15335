"""Bounded slices in tile loops: ``x[tile, a:b]`` reads and ``out[tile, :n1] = ...`` writes a whole dimension of
``b - a`` elements starting at ``a`` (bounds known when compiling), in the kernel and in ``kernel.ref``."""

from __future__ import annotations

import pytest
import torch
from dt_helpers import write_module

import newt

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def test_concat_by_two_slice_stores(tmp_path):
    mod = write_module(tmp_path, "sl_concat", """
@dt.kernel
def concat(x, y):
    out = torch.empty([x.size(0), x.size(1) + y.size(1)], dtype=x.dtype, device=x.device)
    n1 = x.size(1)
    for tile_m in dt.tile(x.size(0)):
        out[tile_m, :n1] = x[tile_m, :]
        out[tile_m, n1:] = y[tile_m, :]
    return out
""")
    x, y = torch.randn(37, 20, device=DEV), torch.randn(37, 13, device=DEV)
    torch.testing.assert_close(mod.concat(x, y), torch.cat([x, y], dim=1))
    torch.testing.assert_close(mod.concat.ref(x, y), torch.cat([x, y], dim=1))
    assert "+ 20)" in mod.concat.to_newt_source(x, y)  # the second store starts at column 20


def test_a_bounded_slice_load_reduced_and_negative_bounds(tmp_path):
    mod = write_module(tmp_path, "sl_sum", """
@dt.kernel
def mid_sum(x):
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        out[tm] = x[tm, 3:-2].sum(dim=1) + x[tm, -1]
    return out
""")
    x = torch.randn(50, 30, device=DEV)
    want = x[:, 3:-2].sum(1) + x[:, -1]
    torch.testing.assert_close(mod.mid_sum(x), want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(mod.mid_sum.ref(x), want, atol=1e-4, rtol=1e-4)
    # a looped reduction over the slice (chunks of 8 of the 25 columns)
    torch.testing.assert_close(mod.mid_sum.run_with(dict(reduction_loops=[8]), x), want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("index, what", [("x[tm, 0:n:2]", "step"), ("x[tm, tm.begin:]", "start"),
                                         ("x[tm, 5:5]", "range")])
def test_slice_bounds_not_known_when_compiling_are_d004_at_the_line(tmp_path, index, what):
    mod = write_module(tmp_path, f"sl_bad_{what}", f"""
@dt.kernel
def f(x):
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        out[tm] = {index}.sum(dim=1)
    return out
""")
    with pytest.raises(newt.CompilationError) as ei:
        mod.f(torch.randn(8, 10, device=DEV))
    d = ei.value.diagnostics[0]
    assert d.code == "D004" and d.data["cause"] == "SliceBound" and d.data["what"] == what, d.message
    assert d.span.line == 10 and d.file == mod.__file__


CONCAT_MASKED = """
@dt.kernel
def concat(x, y):
    out = torch.empty([x.size(0), x.size(1) + y.size(1)], dtype=x.dtype, device=x.device)
    for t0, t1 in dt.tile(out.size()):
        xp = dt.load(x, [t0, t1], extra_mask=(t1.index < x.size(1))[None, :])
        yp = dt.load(y, [t0, t1.index - x.size(1)], extra_mask=(t1.index >= x.size(1))[None, :])
        out[t0, t1] = torch.where((t1.index < x.size(1))[None, :], xp, yp)
    return out
"""


@pytest.mark.parametrize("cfg", [None, dict(block_sizes=[8, 16]), dict(block_sizes=[1, 1])])
def test_dt_load_of_a_tile_past_the_tensors_end_reads_zero(tmp_path, cfg):
    """Helion's concat2d_dim1: the column tile of the output runs past x; dt.load masks by x's own bound (the
    kernel) and pads with zeros (kernel.ref); gathered indices outside y are masked by extra_mask."""
    mod = write_module(tmp_path, f"sl_cm_{'d' if cfg is None else cfg['block_sizes'][0]}", CONCAT_MASKED)
    x, y = torch.randn(21, 40, device=DEV), torch.randn(21, 25, device=DEV)  # y narrower than x: y[-40] is invalid
    want = torch.cat([x, y], dim=1)
    got = mod.concat(x, y) if cfg is None else mod.concat.run_with(cfg, x, y)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(mod.concat.ref(x, y), want)


def test_plain_indexing_past_the_end_is_still_d006(tmp_path):
    mod = write_module(tmp_path, "sl_past", """
@dt.kernel
def f(x, y):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = x[t] + y[t]
    return out
""")
    with pytest.raises(newt.CompilationError) as ei:
        mod.f(torch.randn(20, device=DEV), torch.randn(10, device=DEV))
    assert ei.value.diagnostics[0].code == "D006"


RMS_BWD_LIKE = """
@dt.kernel
def scaled(x, r):
    m, n = x.shape
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    col = torch.empty([n], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        out[tm, :] = x[tm, :] * r[tm, :]
    for tn in dt.tile(n):
        acc = dt.zeros([tn], dtype=torch.float32)
        for tm in dt.tile(m):
            acc += (x[tm, tn] * r[tm, :]).sum(0)
        col[tn] = acc
    return out, col
"""


@pytest.mark.parametrize("cfg", [None, dict(block_sizes=[8, 16, 8], reduction_loops=[16])])
def test_a_whole_dimension_of_size_one_broadcasts_like_torch(tmp_path, cfg):
    """Helion's rms_norm backward: ``rsqrt[mb, :]`` of an ``[M, 1]`` tensor against ``x[mb, :]`` (was D006)."""
    mod = write_module(tmp_path, f"size1_{'d' if cfg is None else 'l'}", RMS_BWD_LIKE)
    x, r = torch.randn(37, 50, device=DEV), torch.randn(37, 1, device=DEV)
    got = mod.scaled(x, r) if cfg is None else mod.scaled.run_with(cfg, x, r)
    want = (x * r, (x * r).sum(0))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    for g, w in zip(mod.scaled.ref(x, r), want):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)


def test_a_size_one_dimension_broadcast_and_then_used_in_a_matmul_is_d004(tmp_path):
    mod = write_module(tmp_path, "size1_mm", """
@dt.kernel
def f(w, v, u):
    m, s = w.shape
    out = torch.empty([m, 1], dtype=torch.float32, device=w.device)
    for tm in dt.tile(m):
        z = w[tm, :] * v[tm, :]
        out[tm, :] = dt.dot(z, u[:, :])
    return out
""")
    w, v, u = torch.randn(32, 32, device=DEV), torch.randn(32, 1, device=DEV), torch.randn(32, 1, device=DEV)
    with pytest.raises(newt.CompilationError) as ei:
        mod.f(w, v, u)
    d = ei.value.diagnostics[0]
    assert d.code == "D004" and d.data["cause"] == "SizeOneMatmul" and d.span.line == 11, d.format()
