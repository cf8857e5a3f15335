"""Helion's surface, session 3 (issue 12): tile arithmetic, jagged tiles, registered block sizes as dimensions,
library score modifiers.  Each kernel runs on the CPU interpreter and is compared with eager PyTorch and with
``kernel.ref``."""

from __future__ import annotations

import pytest
import torch
from dt_helpers import check, raises_at, write_module

import deuteron as dt

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


# ---- dt.jagged_tile ----------------------------------------------------------------------------------------------

def _jagged(lengths, m, dtype=torch.float32):
    lengths = torch.tensor(lengths)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    return torch.randn(int(offsets[-1]), m, dtype=dtype), offsets


@dt.kernel
def jagged_row_max(x, offsets):
    """Per row of a packed jagged tensor: the max over its rows (a reduction whose padding must be -inf)."""
    m = x.size(1)
    b = offsets.size(0) - 1
    out = torch.full([b, m], float("-inf"), dtype=x.dtype, device=x.device)
    x_flat = x.view(-1)
    for tile_b in dt.tile(b):
        starts = offsets[tile_b]
        lengths = offsets[tile_b.index + 1] - starts
        for tile_m in dt.tile(m):
            acc = dt.full([tile_b, tile_m], float("-inf"), dtype=x.dtype)
            for tile_k in dt.jagged_tile(lengths):
                idx = (starts[:, None] + tile_k.index[None, :])[:, :, None] * m + tile_m.index[None, None, :]
                acc = torch.maximum(acc, dt.load(x_flat, [idx]).amax(dim=1))
            out[tile_b, tile_m] = acc
    return out


def _row_max_ref(x, offsets):
    out = torch.full([len(offsets) - 1, x.size(1)], float("-inf"))
    for i in range(len(offsets) - 1):
        if offsets[i + 1] > offsets[i]:
            out[i] = x[offsets[i]:offsets[i + 1]].amax(0)
    return out


def test_jagged_tile_masks_reductions_with_their_identity():
    x, off = _jagged([3, 0, 7, 1, 12, 5], 10)
    x = x - 5.0  # all negative: a padding of 0 would win the max
    want = _row_max_ref(x, off)
    for cfg in (dt.Config(block_sizes=[4, 8, 4]), dt.Config(block_sizes=[2, 16, 1]), dt.Config(block_sizes=[1, 4, 8])):
        torch.testing.assert_close(jagged_row_max.run_with(cfg, x, off), want)
    torch.testing.assert_close(jagged_row_max.ref(x, off), want)


@dt.kernel
def jagged_scale(x, lengths, w):
    """Dense [b, k_max, m] rows, each valid up to its length: store y = x * w only there (stores masked)."""
    b, kmax, m = x.shape
    out = torch.zeros_like(x)
    for tile_b in dt.tile(b):
        n = lengths[tile_b]
        for tile_k in dt.jagged_tile(n):
            v = x[tile_b, tile_k, :] * w[None, None, :]
            out[tile_b, tile_k, :] = v
            # the sum along the jagged tile skips the missing lanes: a mean over what exists
    return out


def test_jagged_tile_over_a_dense_tensor_masks_stores():
    x = torch.randn(5, 9, 6)
    lengths = torch.tensor([9, 0, 4, 1, 7])
    w = torch.randn(6)
    want = torch.zeros_like(x)
    for i, n in enumerate(lengths.tolist()):
        want[i, :n] = x[i, :n] * w
    for cfg in (dt.Config(block_sizes=[2, 4]), dt.Config(block_sizes=[8, 1])):
        torch.testing.assert_close(jagged_scale.run_with(cfg, x, lengths, w), want)
    torch.testing.assert_close(jagged_scale.ref(x, lengths, w), want)


@dt.kernel
def nested_jagged_mean(x, offsets, counts, max_m: int):
    """Two jagged loops: features per row (counts) and rows per sequence (offsets), as Helion's jagged_mean."""
    b = offsets.size(0) - 1
    out = torch.zeros([b, max_m], dtype=x.dtype, device=x.device)
    x_flat = x.view(-1)
    for tile_b in dt.tile(b):
        starts = offsets[tile_b]
        nnz = offsets[tile_b.index + 1] - starts
        for tile_m in dt.jagged_tile(counts[tile_b]):
            s = dt.zeros([tile_b, tile_m], dtype=x.dtype)
            for tile_k in dt.jagged_tile(nnz):
                idx = (starts[:, None] + tile_k.index[None, :])[:, :, None] * max_m + tile_m.index[None, None, :]
                s = s + dt.load(x_flat, [idx]).sum(dim=1)
            cnt = nnz.to(x.dtype)[:, None]
            out[tile_b, tile_m] = torch.where(cnt > 0, s / cnt, 0.0)
    return out


def test_nested_jagged_tiles():
    x, off = _jagged([4, 2, 0, 9], 8)
    counts = torch.tensor([8, 3, 5, 1])
    want = torch.zeros(4, 8)
    for i in range(4):
        a, e = int(off[i]), int(off[i + 1])
        if e > a:
            want[i, :counts[i]] = x[a:e, :counts[i]].mean(0)
    for cfg in (dt.Config(block_sizes=[2, 4, 2]), dt.Config(block_sizes=[4, 2, 8])):
        torch.testing.assert_close(nested_jagged_mean.run_with(cfg, x, off, counts, 8), want)
    torch.testing.assert_close(nested_jagged_mean.ref(x, off, counts, 8), want)


def test_jagged_tile_errors(tmp_path):
    mod = write_module(tmp_path, "k_jag", """
    @dt.kernel
    def outer(x, lengths):
        out = torch.empty_like(x)
        for tile_k in dt.jagged_tile(lengths):
            out[tile_k] = x[tile_k]
        return out

    @dt.kernel
    def no_parent(x, lengths):
        out = torch.zeros_like(x)
        for tile_b in dt.tile(x.size(0)):
            n = lengths[tile_b]
            for tile_k in dt.jagged_tile(n):
                out[0, tile_k] = x[0, tile_k]
        return out

    @dt.kernel
    def float_lengths(x, lengths):
        out = torch.zeros_like(x)
        for tile_b in dt.tile(x.size(0)):
            for tile_k in dt.jagged_tile(lengths[tile_b]):
                out[tile_b, tile_k] = x[tile_b, tile_k]
        return out
    """)
    x = torch.randn(4, 6)
    raises_at(mod, lambda: mod.outer(x, torch.tensor([1, 2, 3, 4])), "D003", "dt.jagged_tile(lengths)",
              "dt.jagged_tile", contains="outermost")
    raises_at(mod, lambda: mod.no_parent(x, torch.tensor([1, 2, 3, 4])), "D004", "x[0, tile_k]", "out[0, tile_k]",
              contains="without its parent tile(s) tile_b")
    raises_at(mod, lambda: mod.float_lengths(x, torch.rand(4)), "D004", "dt.jagged_tile(lengths[tile_b])",
              "dt.jagged_tile", contains="integers")


# ---- Python functions of a library passed as callables (flex attention's default score_mod / mask_mod) ----------

@dt.kernel(config=dt.Config(block_sizes=[16, 16]))
def scored(q, k, score_mod, mask_mod):
    m, d = q.shape
    n = k.size(0)
    out = torch.empty([m, n], dtype=torch.float32, device=q.device)
    for tm, tn in dt.tile([m, n]):
        s = q[tm, :].float() @ k[tn, :].float().T
        b = dt.zeros([tm, tn], dtype=torch.int32)
        s = score_mod(s, b, b, tm.index[:, None], tn.index[None, :])
        keep = mask_mod(b, b, tm.index[:, None], tn.index[None, :])
        out[tm, tn] = torch.where(keep, s, float("-inf"))
    return out


def test_library_score_and_mask_functions_are_inlined():
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    q, k = torch.randn(20, 16), torch.randn(24, 16)
    want = q @ k.T
    torch.testing.assert_close(scored(q, k, fa._identity, fa.noop_mask), want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(scored.ref(q, k, fa._identity, fa.noop_mask), want, atol=1e-4, rtol=1e-4)

    def causal(b, h, qi, ki):
        return qi >= ki
    got = scored(q, k, lambda s, b, h, qi, ki: torch.tanh(s), causal)  # another function: another program
    i = torch.arange(20)[:, None] >= torch.arange(24)[None, :]
    torch.testing.assert_close(got, torch.where(i, torch.tanh(want), float("-inf")), atol=1e-4, rtol=1e-4)


def test_a_library_function_that_cannot_compile_is_located_at_the_call(tmp_path):
    mod = write_module(tmp_path, "k_libfn", """
    import torch.nn.functional as F

    @dt.kernel
    def f(x, fn):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = fn(x[t])
        return out

    def run(x):
        return f(x, F.dropout)
    """)
    raises_at(mod, lambda: mod.run(torch.randn(8)), "D004", "out[t] = fn(x[t])", "fn(x[t])",
              contains="in torch.nn.functional.dropout")


# ---- Helion's function spellings; Helion functions deuteron lacks name themselves -------------------------------

@dt.kernel
def tile_fns(x):
    out = torch.empty_like(x)
    ids = torch.empty([dt.cdiv(x.size(0), 16)], dtype=torch.int32, device=x.device)
    for t in dt.tile(x.size(0), block_size=16):
        out[t] = dt.cumsum(x[t], 0) + (dt.tile_index(t) - dt.tile_begin(t)).to(x.dtype) * 0 + dt.cumprod(
            x[t] * 0 + 1, 0) - 1
        ids[dt.tile_id(t)] = dt.tile_end(t) - dt.tile_begin(t) + dt.tile_block_size(t) * 0
    return out, ids


def test_tile_functions_and_cumulative_ops():
    x = torch.randn(40)
    want = torch.cat([c.cumsum(0) for c in x.split(16)])
    for out, ids in (tile_fns(x), tile_fns.ref(x)):
        torch.testing.assert_close(out, want)
        assert ids.tolist() == [16, 16, 8]


def test_helion_functions_deuteron_lacks_are_named(tmp_path):
    mod = write_module(tmp_path, "k_asm", """
    def fma(a, b, c):
        return dt.inline_triton("{0} * {1} + {2}", args=[a, b, c], output_like=a)

    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = fma(x[t], x[t], x[t])
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8)), "D004", "dt.inline_triton", "dt.inline_triton",
              contains="not Triton source snippets")


# ---- torch.stack of two blocks ----------------------------------------------------------------------------------

@dt.kernel(config=dt.Config(block_sizes=[8]))
def stacked(x, y):
    m, n = x.shape
    out = torch.empty([m, 2, n], dtype=torch.float32, device=x.device)
    last = torch.empty([m, n, 2], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        a = x[tm, :]
        b = y[tm, :].to(torch.float16)
        out[tm, :, :] = torch.stack([a, b], dim=1)  # promoted like torch (float32)
        last[tm, :, :] = torch.stack((a * 2, b), -1)
    return out, last


def test_torch_stack_of_two_blocks():
    x, y = torch.randn(20, 16), torch.randn(20, 16)
    want = (torch.stack([x, y.half().float()], 1), torch.stack([x * 2, y.half().float()], -1))
    for got in (stacked(x, y), stacked.ref(x, y)):
        torch.testing.assert_close(got, want)


def test_torch_stack_of_three_blocks_is_named(tmp_path):
    mod = write_module(tmp_path, "k_stack3", """
    @dt.kernel
    def f(x):
        out = torch.empty([x.size(0), 3], dtype=x.dtype, device=x.device)
        for t in dt.tile(x.size(0)):
            out[t, :] = torch.stack([x[t], x[t], x[t]], dim=1)
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8)), "D004", "torch.stack(", "torch.stack", contains="3 blocks")


# ---- Helion's autotuner / debugging settings are accepted; unknown options are not ------------------------------

def test_helion_settings_accepted_and_unknown_options_named():
    @dt.kernel(autotune_compile_timeout=5, print_output_code=False, autotune_random_seed=1,
               config=dt.Config(block_sizes=[8]))
    def twice(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = x[t] * 2
        return out
    x = torch.randn(20)
    torch.testing.assert_close(twice(x), x * 2)
    with pytest.raises(dt.ConfigError, match="autotune_compile_timeut.*did you mean 'autotune_compile_timeout'"):
        dt.kernel(autotune_compile_timeut=5)
    assert not _static("""
    @dt.kernel(autotune_compile_timeout=5, force_autotune=True)
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = x[t]
        return out
    """)
    assert [d.code for d in _static("""
    @dt.kernel(autotune_compile_timeut=5)
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = x[t]
        return out
    """)] == ["D005"]
