"""The language end to end on the interpreter: every kernel is compared with torch and with kernel.ref."""

from __future__ import annotations

import math

import pytest
import torch

import deuteron as dt
import newt

torch.manual_seed(0)
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def close(a, b, atol=1e-4, rtol=1e-4):
    torch.testing.assert_close(a, b, atol=atol, rtol=rtol)


# ---------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------


@dt.kernel
def add_bcast(x, y):
    x, y = torch.broadcast_tensors(x, y)
    out = torch.empty_like(x)
    for tile in dt.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


@dt.kernel
def row_stats(x):
    m, n = x.shape
    mx = torch.empty([m], device=x.device)
    mn = torch.empty([m], device=x.device)
    sm = torch.empty([m], device=x.device)
    for tile_m in dt.tile(m):
        row = x[tile_m, :]
        mx[tile_m] = row.amax(dim=1)
        mn[tile_m] = torch.amin(row, dim=-1)
        sm[tile_m] = row.sum(1)
    return mx, mn, sm


@dt.kernel
def tile_partials(x):
    """Reductions over a tile dimension: masked lanes must not leak into max (-inf), min (+inf), sum (0)."""
    (n,) = x.shape
    bs = dt.register_block_size(16, 64)
    count = dt.cdiv(n, 16)
    mx = torch.full([count], float("nan"), device=x.device)
    mn = torch.full([count], float("nan"), device=x.device)
    sm = torch.full([count], float("nan"), device=x.device)
    for tile in dt.tile(n, block_size=16):
        v = x[tile]
        mx[tile.id] = v.amax()
        mn[tile.id] = v.amin()
        sm[tile.id] = v.sum()
    del bs
    return mx, mn, sm


@dt.kernel
def mean_var(x):
    m, n = x.shape
    out = torch.empty([m, 3], device=x.device)
    for tile_m in dt.tile(m):
        row = x[tile_m, :]
        out[tile_m, 0] = torch.mean(row, dim=1)
        out[tile_m, 1] = torch.var(row, dim=1)  # unbiased, like torch
        out[tile_m, 2] = row.std(dim=1, unbiased=False)
    return out


@dt.kernel
def where_clamp(x, lo: float, hi: float):
    out = torch.empty_like(x)
    for tile in dt.tile(x.size()):
        v = x[tile]
        out[tile] = torch.where(v > 0, torch.clamp(v, lo, hi), v * 0.5).abs() + torch.sigmoid(v)
    return out


@dt.kernel
def outer(a, b):
    m, n = a.shape[0], b.shape[0]
    out = torch.empty([m, n], device=a.device, dtype=torch.float32)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = a[tm][:, None] * b[None, tn]
    return out


@dt.kernel
def index_math(x):
    (n,) = x.shape
    out = torch.empty([n], device=x.device, dtype=torch.float32)
    for tile in dt.tile(n):
        out[tile] = x[tile] * tile.index.to(torch.float32) + tile.begin + tile.block_size * 0
    return out


@dt.kernel
def column_sum(x):
    m, n = x.shape
    out = torch.empty([n], device=x.device)
    for tile_n in dt.tile(n):
        acc = dt.zeros([tile_n], dtype=torch.float32)
        for tile_m in dt.tile(m):
            acc += x[tile_m, tile_n].sum(dim=0)
        out[tile_n] = acc
    return out


@dt.kernel
def grid_rows(x):
    m, n = x.shape
    out = torch.empty([m], device=x.device)
    for i in dt.grid(m):
        out[i] = x[i, :].sum()
    return out


@dt.kernel
def histogram(idx, nbins: int):
    (n,) = idx.shape
    out = torch.zeros([nbins], device=idx.device, dtype=torch.float32)
    for tile in dt.tile(n):
        dt.atomic_add(out, [idx[tile]], torch.ones_like(idx[tile], dtype=torch.float32))
    return out


@dt.kernel
def split_k_sum(x):
    m, n = x.shape
    out = torch.zeros([n], device=x.device)
    for tm, tn in dt.tile([m, n]):
        dt.atomic_add(out, [tn], x[tm, tn].sum(0))
    return out


def _gelu_helper(v, scale):
    return torch.nn.functional.gelu(v) * scale


@dt.kernel
def with_helper(x, scale: float):
    out = torch.empty_like(x)
    for tile in dt.tile(x.size(0)):
        out[tile] = _gelu_helper(x[tile], scale)
    return out


@dt.kernel
def two_loops(x):
    (n,) = x.shape
    tmp = torch.empty_like(x)
    out = torch.empty_like(x)
    for tile in dt.tile(n):
        tmp[tile] = x[tile] * 2
    for tile in dt.tile(n):
        out[tile] = tmp[tile] + 1
    return out


@dt.kernel
def inplace(x, y):
    for tile in dt.tile(x.size(0)):
        x[tile] += y[tile]


@dt.kernel
def tunable_unroll(x):
    out = torch.empty_like(x)
    k = dt.register_tunable("times", dt.PowerOfTwo(1, 4))
    for tile in dt.tile(x.size(0)):
        v = x[tile]
        for _ in range(k):
            v = v + 1
        out[tile] = v - k
    return out


@dt.kernel
def softmax_dim0(x):
    m, n = x.shape
    out = torch.empty_like(x)
    for tile_n in dt.tile(n):
        out[:, tile_n] = torch.softmax(x[:, tile_n], dim=0)
    return out


@dt.kernel
def argmax_rows(x):
    m, n = x.shape
    out = torch.empty([m], dtype=torch.int64, device=x.device)
    for tile_m in dt.tile(m):
        out[tile_m] = torch.argmax(x[tile_m, :], dim=1)
    return out


@dt.kernel
def cond_scalar(x, flag: int):
    out = torch.empty_like(x)
    for tile in dt.tile(x.size(0)):
        v = x[tile]
        if flag > 0:
            v = v * 2
        else:
            v = v - 1
        out[tile] = v
    return out


@dt.kernel
def transposed(x):
    m, n = x.shape
    out = torch.empty([n, m], device=x.device, dtype=x.dtype)
    for tm, tn in dt.tile([m, n]):
        out[tn, tm] = x[tm, tn].T
    return out


@dt.kernel(static_shapes=False)
def dyn_scale(x, y):
    out = torch.empty_like(x)
    for tile in dt.tile(x.size()):
        out[tile] = x[tile] * 3 + y[tile]
    return out


@dt.kernel
def bf16_matmul(x, y):
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], device=x.device, dtype=torch.float32)
    for tm, tn in dt.tile([m, n]):
        acc = dt.zeros([tm, tn])
        for tk in dt.tile(k):
            acc = dt.dot(x[tm, tk], y[tk, tn], acc=acc)
        out[tm, tn] = acc
    return out


# ---------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------


def both(kernel, *args, **kwargs):
    """Run the generated kernel and the eager reference on clones."""
    def clones():
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    return kernel(*clones(), **kwargs), kernel.ref(*clones(), **kwargs)


def test_add_broadcast_fp16():
    x = torch.randn(130, 70, device=DEV, dtype=torch.float16)
    y = torch.randn(70, device=DEV, dtype=torch.float16)
    out, ref = both(add_bcast, x, y)
    close(out, x + y, 0, 0)
    close(ref, x + y, 0, 0)


def test_reductions_over_a_whole_dimension_persistent_and_looped():
    x = torch.randn(37, 300, device=DEV) - 5.0  # all negative-ish: a 0 identity would win a max
    for cfg in (None, dict(reduction_loops=[64]), dict(reduction_loops=[16], block_sizes=[4])):
        got = row_stats(x) if cfg is None else row_stats.run_with(cfg, x)
        close(got[0], x.amax(1))
        close(got[1], x.amin(1))
        close(got[2], x.sum(1), 1e-3, 1e-4)


def test_reduction_identities_on_ragged_tiles():
    for n in (37, 100, 16):
        x = torch.randn(n, device=DEV) + 3.0  # positive: a 0 identity would win a min
        x[::3] -= 10.0
        mx, mn, sm = tile_partials(x)
        for i in range(math.ceil(n / 16)):
            seg = x[i * 16:(i + 1) * 16]
            assert mx[i].item() == pytest.approx(seg.max().item())
            assert mn[i].item() == pytest.approx(seg.min().item())
            assert sm[i].item() == pytest.approx(seg.sum().item(), abs=1e-4)


def test_mean_var_std():
    x = torch.randn(20, 333, device=DEV)
    out, ref = both(mean_var, x)
    exp = torch.stack([x.mean(1), x.var(1), x.std(1, unbiased=False)], 1)
    close(out, exp, 1e-4, 1e-4)
    close(ref, exp, 1e-4, 1e-4)
    close(mean_var.run_with(dict(reduction_loops=[32]), x), exp, 1e-4, 1e-4)


def test_where_clamp_scalar_args():
    x = torch.randn(1000, device=DEV)
    out, ref = both(where_clamp, x, -0.5, 0.7)
    exp = torch.where(x > 0, x.clamp(-0.5, 0.7), x * 0.5).abs() + torch.sigmoid(x)
    close(out, exp)
    close(ref, exp)


def test_none_indexing_outer_product():
    a = torch.randn(50, device=DEV)
    b = torch.randn(70, device=DEV)
    close(outer(a, b), a[:, None] * b[None, :])


def test_tile_attributes():
    x = torch.randn(300, device=DEV)
    out = index_math.run_with(dict(block_sizes=[64]), x)
    idx = torch.arange(300, device=DEV, dtype=torch.float32)
    begin = (idx // 64) * 64
    close(out, x * idx + begin)


def test_inner_tile_loop_column_sum():
    x = torch.randn(333, 77, device=DEV)
    close(column_sum(x), x.sum(0), 1e-3, 1e-4)
    close(column_sum.run_with(dict(block_sizes=[16, 128]), x), x.sum(0), 1e-3, 1e-4)


def test_grid_scalar_rows():
    x = torch.randn(9, 50, device=DEV)
    close(grid_rows(x), x.sum(1), 1e-4, 1e-4)


def test_atomic_add_histogram():
    idx = torch.randint(0, 10, (1000,), device=DEV)
    out, ref = both(histogram, idx, 10)
    exp = torch.bincount(idx, minlength=10).float()
    close(out, exp, 0, 0)
    close(ref, exp, 0, 0)


def test_atomic_add_split_reduction():
    x = torch.randn(100, 40, device=DEV)
    close(split_k_sum.run_with(dict(block_sizes=[16, 32]), x), x.sum(0), 1e-4, 1e-4)


def test_helper_functions_are_inlined():
    x = torch.randn(500, device=DEV)
    close(with_helper(x, 2.0), torch.nn.functional.gelu(x) * 2.0, 1e-5, 1e-5)
    assert "nl.erf" in with_helper.to_newt_source(x, 2.0)


def test_two_tile_loops_two_kernels():
    x = torch.randn(100, device=DEV)
    close(two_loops(x), x * 2 + 1)
    src = two_loops.to_newt_source(x)
    assert "_two_loops_kernel(" in src and "_two_loops_kernel_1(" in src


def test_in_place_update_no_return():
    x = torch.randn(100, device=DEV)
    y = torch.randn(100, device=DEV)
    exp = x + y
    assert inplace(x, y) is None
    close(x, exp)


def test_user_tunable_and_range_loop():
    x = torch.randn(100, device=DEV)
    for k in (1, 2, 4):
        close(tunable_unroll.run_with(dict(times=k), x), x, 1e-6, 1e-6)


def test_softmax_over_dim0_and_argmax():
    x = torch.randn(40, 30, device=DEV)
    close(softmax_dim0(x), torch.softmax(x, 0), 1e-5, 1e-5)
    assert torch.equal(argmax_rows(x), x.argmax(1))


def test_device_if_on_a_runtime_scalar():
    x = torch.randn(100, device=DEV)
    close(cond_scalar(x, 1), x * 2)
    close(cond_scalar(x, 0), x - 1)
    assert "if " in cond_scalar.to_newt_source(x, 1)


def test_transpose_store():
    x = torch.randn(50, 30, device=DEV)
    close(transposed(x), x.T.contiguous())


def test_dynamic_shapes_reuse_one_program():
    for n in (100, 120, 127):
        x = torch.randn(n, 3, device=DEV)
        y = torch.randn(n, 3, device=DEV)
        close(dyn_scale(x, y), x * 3 + y)
    src = dyn_scale.to_newt_source(x, y)
    assert "x_size_0" in src and "x_stride_0" in src
    assert len(dyn_scale._entries) == 1


def test_bf16_dot_accumulates_in_fp32():
    x = torch.randn(64, 48, device=DEV, dtype=torch.bfloat16)
    y = torch.randn(48, 32, device=DEV, dtype=torch.bfloat16)
    close(bf16_matmul(x, y), x.float() @ y.float(), 1e-2, 1e-2)


def test_generated_source_is_readable():
    x = torch.randn(64, 100, device=DEV)
    src = row_stats.to_newt_source(x)
    assert "import newt.language as nl" in src and "@newt.jit" in src
    assert "# line " in src and "row = x[tile_m, :]" in src
    assert "nl.where(mask_r0[None, :], row, float(\"-inf\"))" in src
    assert "launched as: _row_stats_launch(" in src
    looped = row_stats.to_newt_source(x, config=dict(reduction_loops=[32]))
    assert "looped reduction over 100 elements" in looped


def test_newt_compile_error_type():
    assert issubclass(dt.errors.DeuteronError, newt.CompilationError) if hasattr(dt, "errors") else True


@pytest.mark.parametrize("cfg", [dict(pid_type="xyz"), dict(pid_type="persistent"), dict(loop_orders=[[1, 0]]),
                                 dict(l2_groupings=[4]), dict(l2_groupings=[2], loop_orders=[[1, 0]],
                                                              pid_type="persistent")])
def test_program_id_mappings_compute_the_same(cfg):
    x = torch.randn(100, 70, device=DEV, dtype=torch.float16)
    y = torch.randn(70, 90, device=DEV, dtype=torch.float16)
    got = bf16_matmul.run_with(dict(block_sizes=[16, 32, 16], **cfg), x, y)
    close(got, x.float() @ y.float(), 1e-2, 1e-2)
    a = torch.randn(33, 65, device=DEV)
    close(add_bcast.run_with(dict(block_sizes=[8, 16], **cfg), a, a), a + a)


@dt.kernel
def grid3(x):
    a, b, c = x.shape
    out = torch.empty_like(x)
    for ta, tb, tc in dt.tile([a, b, c]):
        out[ta, tb, tc] = x[ta, tb, tc] * 2 + 1
    return out


@dt.kernel
def sub_range(x, lo: int, hi: int):
    out = torch.zeros_like(x)
    for t in dt.tile(lo, hi):
        out[t] = x[t] + 1
    return out


@dt.kernel
def registered_k(x, y):
    m, k = x.shape
    _, n = y.shape
    bk = dt.register_block_size(16, 64)
    out = torch.empty([m, n], device=x.device)
    for tm, tn in dt.tile([m, n]):
        acc = dt.zeros([tm, tn])
        for tk in dt.tile(k, block_size=bk):
            acc = dt.dot(x[tm, tk], y[tk, tn], acc=acc)
        out[tm, tn] = acc
    return out


@dt.kernel
def causal_rows(x):
    """An inner tile loop whose bounds come from the outer tile (a lower-triangular row sum)."""
    (n,) = x.shape
    out = torch.empty_like(x)
    for tm in dt.tile(n, block_size=16):
        acc = dt.zeros([tm])
        for tk in dt.tile(0, tm.end, block_size=16):
            v = x[tk]
            keep = tk.index[None, :] <= tm.index[:, None]
            acc += torch.where(keep, v[None, :], 0.0).sum(1)
        out[tm] = acc
    return out


@dt.kernel
def grid2(x):
    m, n = x.shape
    out = torch.empty([m, n], device=x.device)
    for i, j in dt.grid([m, n]):
        out[i, j] = x[i, j] * (i + j)
    return out


def test_three_dimensional_grid():
    x = torch.randn(5, 6, 7, device=DEV)
    close(grid3(x), x * 2 + 1)
    close(grid3.run_with(dict(pid_type="xyz", block_sizes=[2, 4, 4]), x), x * 2 + 1)


def test_tile_with_begin_and_end():
    x = torch.randn(100, device=DEV)
    got = sub_range(x, 10, 73)
    exp = torch.zeros_like(x)
    exp[10:73] = x[10:73] + 1
    close(got, exp)
    close(sub_range.ref(x, 10, 73), exp)


def test_registered_block_size_drives_the_inner_tile():
    x = torch.randn(64, 100, device=DEV)
    y = torch.randn(100, 48, device=DEV)
    sp = registered_k.config_space(x, y)
    assert [s.kind for s in sp.slots] == ["register", "tile", "tile"]
    assert sp.slots[0].lo == 16 and sp.slots[0].hi == 64
    for bk in (16, 32, 64):
        got = registered_k.run_with(dict(block_sizes=[bk, 16, 16]), x, y)
        close(got, x @ y, 1e-2, 1e-2)
        assert f"_BLOCK_0={bk}" in registered_k.to_newt_source(x, y, config=dict(block_sizes=[bk, 16, 16]))


def test_inner_bounds_from_the_outer_tile():
    x = torch.randn(75, device=DEV)
    close(causal_rows(x), torch.cumsum(x, 0), 1e-4, 1e-4)


def test_two_dimensional_scalar_grid():
    x = torch.randn(4, 5, device=DEV)
    i = torch.arange(4, device=DEV)[:, None]
    j = torch.arange(5, device=DEV)[None, :]
    close(grid2(x), x * (i + j))
