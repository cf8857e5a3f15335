"""Helion's kernel options and config fields, as deuteron takes them (``@dt.kernel(...)``, ``dt.Config(...)``)."""

from __future__ import annotations

import pytest
import torch

import deuteron as dt
from deuteron.oracle import Expected
from tests.deuteron.dt_helpers import check

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _scale_kernel(**options):
    @dt.kernel(**options)
    def scale(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in dt.tile(x.size()):
            out[tile] = x[tile] * 2.0
        return out
    return scale


def test_autotune_baseline_fn_is_the_autotuners_oracle():
    calls = []

    def baseline(x):
        calls.append(x.shape)
        return x * 3.0  # a different answer than the kernel's: the oracle must report it

    k = _scale_kernel(autotune_baseline_fn=baseline, autotune_baseline_atol=0.5, autotune_baseline_rtol=0.0)
    x = torch.randn(40, device=DEV)
    assert torch.equal(k.autotune_reference(x), x * 3.0)
    assert calls == [torch.Size([40])]
    b = k._bind((x,), {})
    exp = Expected(k, b)
    ok, msg, _ = exp.check(k(x), [x], {})
    assert not ok, msg
    # the tolerances are the kernel's: 0.5 absolute accepts an answer within it
    ok2, _, _ = exp.check(x * 3.0 + 0.25, [x], {})
    assert ok2
    ok3, _, _ = exp.check(x * 3.0 + 0.75, [x], {})
    assert not ok3


def test_autotune_accuracy_check_false_accepts_every_config():
    k = _scale_kernel(autotune_accuracy_check=False)
    x = torch.randn(16, device=DEV)
    exp = Expected(k, k._bind((x,), {}))
    assert exp.check(x * 100.0, [x], {})[0]
    k2 = _scale_kernel()
    exp2 = Expected(k2, k2._bind((x,), {}))
    assert not exp2.check(x * 100.0, [x], {})[0]


def test_autotune_config_overrides_apply_on_top_of_the_default():
    k = _scale_kernel(autotune_config_overrides={"num_warps": 2, "block_sizes": [16]})
    x = torch.randn(100, device=DEV)
    torch.testing.assert_close(k(x), x * 2.0)
    cfg = k.bind(x).config
    assert cfg.num_warps == 2 and cfg.block_sizes == [16]


def test_backend_and_dot_precision_are_checked():
    assert _scale_kernel(backend="triton").backend == "triton"
    with pytest.raises(dt.ConfigError, match="backend 'cute' is not available"):
        _scale_kernel(backend="cute")
    with pytest.raises(dt.ConfigError, match="dot_precision must be one of"):
        _scale_kernel(dot_precision="fp64")


def test_dot_precision_reaches_the_generated_dot():
    @dt.kernel(dot_precision="ieee")
    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        _, n = b.shape
        out = torch.empty([m, n], dtype=torch.float32, device=a.device)
        for tm, tn in dt.tile([m, n]):
            acc = dt.zeros([tm, tn], dtype=torch.float32)
            for tk in dt.tile(k):
                acc = torch.addmm(acc, a[tm, tk], b[tk, tn])
            out[tm, tn] = acc
        return out
    a, b = torch.randn(32, 32, device=DEV), torch.randn(32, 32, device=DEV)
    assert "input_precision='ieee'" in mm.to_newt_source(a, b)
    torch.testing.assert_close(mm(a, b), a @ b, atol=1e-3, rtol=1e-3)


def test_ignore_warnings_drops_d001_and_names_unknown_classes():
    body = """
    @dt.kernel{opts}
    def f(x):
        y = x * 2
        out = torch.empty_like(x)
        for t in dt.tile(out.size(0)):
            out[t] = y[t]
        return out
    """
    an, _, _ = check(body.format(opts=""))
    assert [d.code for d in an.diagnostics] == ["D001"]
    an, _, _ = check(body.format(opts="(ignore_warnings=[dt.exc.TensorOperationInWrapper])"))
    assert an.diagnostics == []
    an, _, src = check(body.format(opts="(ignore_warnings=[dt.exc.NoSuchWarning])"))
    codes = sorted(d.code for d in an.diagnostics)
    assert codes == ["D001", "D005"]
    d5 = next(d for d in an.diagnostics if d.code == "D005")
    assert d5.span.line == 5 and "NoSuchWarning" in d5.message
    with pytest.raises(dt.ConfigError, match="ignore_warnings takes dt.exc warning classes"):
        _scale_kernel(ignore_warnings=[UserWarning])
    assert dt.exc.TensorOperationInWrapper.code == "D001"
    assert issubclass(dt.exc.PerTileDecision, dt.exc.Cause)


def test_unknown_kernel_option_is_still_d005():
    an, _, _ = check("""
    @dt.kernel(autotune_baselin_fn=None)
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = x[t]
        return out
    """)
    assert [d.code for d in an.diagnostics] == ["D005"]


@pytest.mark.parametrize("pid_type", ["persistent_interleaved", "persistent_blocked", "persistent"])
def test_persistent_pid_types(pid_type):
    @dt.kernel(config=dt.Config(block_sizes=[8, 8], pid_type=pid_type))
    def add2d(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm, tn in dt.tile(x.size()):
            out[tm, tn] = x[tm, tn] + y[tm, tn]
        return out
    x, y = torch.randn(37, 29, device=DEV), torch.randn(37, 29, device=DEV)
    torch.testing.assert_close(add2d(x, y), x + y)
    src = add2d.to_newt_source(x, y)
    assert ("tiles_per_program" in src) == (pid_type == "persistent_blocked")
    assert "virtual_pid" in src


def test_range_config_fields_become_nl_range_options():
    cfg = dt.Config(block_sizes=[16, 16], range_num_stages=[3], range_unroll_factors=[2], range_flattens=[None],
                    range_multi_buffers=[False], indexing="tensor_descriptor")

    @dt.kernel(config=cfg)
    def row_sum(x: torch.Tensor) -> torch.Tensor:
        m, n = x.shape
        out = torch.empty([m], dtype=torch.float32, device=x.device)
        for tm in dt.tile(m):
            acc = dt.zeros([tm], dtype=torch.float32)
            for tn in dt.tile(n):
                acc += x[tm, tn].sum(dim=1)
            out[tm] = acc
        return out
    x = torch.randn(40, 70, device=DEV)
    torch.testing.assert_close(row_sum(x), x.sum(1), atol=1e-4, rtol=1e-4)
    src = row_sum.to_newt_source(x)
    assert "nl.range(" in src and "num_stages=3" in src and "loop_unroll_factor=2" in src
    assert "disallow_acc_multi_buffer=True" in src
    assert "indexing='tensor_descriptor'" in src  # said, not silently dropped
    plain = row_sum.to_newt_source(x, config=dt.Config(block_sizes=[16, 16]))
    assert "nl.range(" not in plain


def test_config_fields_are_validated():
    with pytest.raises(dt.ConfigError, match="indexing must be one of"):
        dt.Config(indexing="texture")
    with pytest.raises(dt.ConfigError, match="entries must be >= 0"):
        dt.Config(range_num_stages=[-1])
    c = dt.Config(range_unroll_factors=[0, 2], indexing=["pointer", "block_ptr"], pid_type="persistent_blocked")
    assert dt.Config.from_json(c.to_json()) == c


def test_get_num_sm_and_zeros_device():
    assert dt.runtime.get_num_sm("cpu") == 4

    @dt.kernel
    def fill(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = dt.zeros([t], dtype=x.dtype, device=x.device) + x[t]
        return out
    x = torch.randn(50, device=DEV)
    torch.testing.assert_close(fill(x), x)
    torch.testing.assert_close(fill.ref(x), x)


def test_a_four_dimensional_grid_runs_flat_and_rejects_xyz_and_grouping():
    @dt.kernel
    def add4(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for ta, tb, tc, td in dt.tile(x.size()):
            out[ta, tb, tc, td] = x[ta, tb, tc, td] + y[ta, tb, tc, td]
        return out
    x, y = torch.randn(3, 5, 6, 7, device=DEV), torch.randn(3, 5, 6, 7, device=DEV)
    torch.testing.assert_close(add4(x, y), x + y)
    torch.testing.assert_close(add4.run_with(dict(block_sizes=[2, 2, 4, 4], loop_orders=[[3, 1, 0, 2]]), x, y), x + y)
    with pytest.raises(dt.errors.DeuteronError, match="xyz"):
        add4.run_with(dict(pid_type="xyz"), x, y)
    with pytest.raises(dt.errors.DeuteronError, match="l2 grouping 4 needs a grid loop of at most 3"):
        add4.run_with(dict(l2_groupings=[4]), x, y)


def test_a_four_dimensional_grid_with_a_dot_defaults_to_no_grouping():
    """Found by Helion's mamba2 kernels: the matmul default (l2 grouping 8) decomposed only 2 of 4 grid
    dimensions (N003 on the generated code)."""
    @dt.kernel
    def bmm4(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        p, q, m, k = a.shape
        n = b.shape[-1]
        out = torch.empty([p, q, m, n], dtype=torch.float32, device=a.device)
        for tp, tq, tm, tn in dt.tile([p, q, m, n], block_size=[1, 1, None, None]):
            acc = dt.zeros([tm, tn], dtype=torch.float32)
            for tk in dt.tile(k):
                acc = torch.addmm(acc, a[tp.begin, tq.begin, tm, tk], b[tp.begin, tq.begin, tk, tn])
            out[tp.begin, tq.begin, tm, tn] = acc
        return out
    a, b = torch.randn(2, 3, 32, 16, device=DEV), torch.randn(2, 3, 16, 32, device=DEV)
    assert bmm4.default_config(a, b).l2_groupings == [1]
    torch.testing.assert_close(bmm4(a, b), a @ b, atol=1e-3, rtol=1e-3)


def test_bmm_with_out_dtype_in_the_kernel_and_in_ref():
    @dt.kernel
    def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        b, m, d = q.shape
        n = k.shape[1]
        out = torch.empty([b, m, n], dtype=torch.float32, device=q.device)
        for tb, tm, tn in dt.tile([b, m, n], block_size=[1, None, None]):
            out[tb, tm, tn] = torch.bmm(q[tb, tm, :], k[tb, tn, :].transpose(1, 2), torch.float32)
        return out
    q, k = torch.randn(2, 32, 16, device=DEV).half(), torch.randn(2, 48, 16, device=DEV).half()
    want = (q.float() @ k.float().transpose(1, 2))
    torch.testing.assert_close(scores(q, k), want, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(scores.ref(q, k), want, atol=1e-2, rtol=1e-2)
    assert scores(q, k).dtype == torch.float32


def test_barrier_between_two_tile_loops_and_not_inside_one():
    @dt.kernel
    def two_phase(x: torch.Tensor) -> torch.Tensor:
        tmp = torch.empty_like(x)
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            tmp[t] = x[t] * 2.0
        dt.barrier()
        for t in dt.tile(x.size(0)):
            out[t] = tmp[t] + tmp[x.size(0) - 1]
        return out
    x = torch.randn(70, device=DEV)
    want = x * 2.0 + x[-1] * 2.0
    torch.testing.assert_close(two_phase.run_with(dict(block_sizes=[16, 16]), x), want)
    torch.testing.assert_close(two_phase.ref(x), want)
    an, _, _ = check("""
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            dt.barrier()
            out[t] = x[t]
        return out
    """)
    (d,) = an.diagnostics
    assert d.code == "D004" and "between two tile loops" in d.message and d.span.line == 9


def test_arange_of_a_tile_block_size():
    """Helion's flex attention: ``tile.begin + dt.arange(tile.block_size)`` is the tile's indices."""
    @dt.kernel
    def idx(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.shape, dtype=torch.int32, device=x.device)
        for t in dt.tile(x.size(0)):
            out[t] = (t.begin + dt.arange(t.block_size)).to(torch.int32)
        return out
    x = torch.zeros(45, device=DEV)
    want = torch.arange(45, dtype=torch.int32, device=DEV)
    assert torch.equal(idx.run_with(dict(block_sizes=[16]), x), want)
    assert torch.equal(idx.ref(x), want)
