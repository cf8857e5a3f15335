"""Errors at call time point at the user's file, line and column (newt.CompilationError values)."""

from __future__ import annotations

import pytest
import torch
from dt_helpers import raises_at, write_module

import deuteron as dt
import newt


def test_rank_mismatch_found_at_call_time(tmp_path):
    mod = write_module(tmp_path, "k_rank", """
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            out[tile, :] = x[tile]
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8, 8)), "D002", "out[tile, :] = x[tile]", "x[tile]",
              contains="rank 2")


def test_shapes_that_do_not_broadcast(tmp_path):
    mod = write_module(tmp_path, "k_shape", """
    @dt.kernel
    def f(x):
        m, n = x.shape
        out = torch.empty_like(x)
        for tm, tn in dt.tile([m, n]):
            a = x[tm, tn]
            out[tm, tn] = a + a.T
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8, 8)), "D006", "out[tm, tn] = a + a.T", "a + a.T",
              contains="do not broadcast")


def test_unsupported_op_static_error_before_running(tmp_path):
    mod = write_module(tmp_path, "k_sort", """
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            out[tile] = torch.sort(x[tile])
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8)), "D004", "torch.sort", "torch.sort")


def test_tile_arithmetic(tmp_path):
    mod = write_module(tmp_path, "k_tile", """
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            out[tile] = x[tile] * (tile < 1)
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8)), "D003", "(tile < 1)", "tile <")


def test_bad_config_names_the_decorator(tmp_path):
    mod = write_module(tmp_path, "k_cfg", """
    @dt.kernel(config=dt.Config(block_sizes=[64, 64]))
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            out[tile] = x[tile]
        return out
    """)
    with pytest.raises(newt.CompilationError) as ei:
        mod.f(torch.randn(8))
    d = ei.value.diagnostics[0]
    assert d.code == "D005" and "1 tunable block size" in d.message
    assert d.span.line == 5  # the config= keyword on the decorator line


def test_matmul_block_too_small_for_tensor_cores(tmp_path):
    mod = write_module(tmp_path, "k_mm", """
    @dt.kernel
    def f(x, y):
        m, k = x.shape
        _, n = y.shape
        out = torch.empty([m, n], device=x.device)
        for tm, tn in dt.tile([m, n]):
            acc = dt.zeros([tm, tn])
            for tk in dt.tile(k):
                acc = dt.dot(x[tm, tk], y[tk, tn], acc=acc)
            out[tm, tn] = acc
        return out
    """)
    x = torch.randn(32, 32)
    with pytest.raises(newt.CompilationError) as ei:
        mod.f.run_with(dict(block_sizes=[8, 32, 16]), x, x)
    assert "at least 16" in ei.value.diagnostics[0].message


def test_dt_functions_outside_kernels():
    with pytest.raises(dt.DeuteronUsageError):
        dt.tile(10)
    with pytest.raises(dt.DeuteronUsageError):
        dt.register_block_size(64)


def test_decorator_option_errors():
    with pytest.raises(dt.ConfigError):
        dt.kernel(autotune_effort="max")(lambda x: x)
    with pytest.raises(dt.ConfigError):
        dt.Config(block_sizes=[100])
    with pytest.raises(dt.ConfigError):
        dt.Config(pid_type="zigzag")


def test_value_computed_in_kernel_read_by_host(tmp_path):
    mod = write_module(tmp_path, "k_escape", """
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            s = x[tile] * 2
            out[tile] = s
        return out, s
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8)), "D004", "return out, s", contains="cannot be read by the host")


def test_every_tracer_error_is_a_cause_class_documented_in_diagnostics():
    """One class per cause (issue 12): the tracer raises Cause subclasses only, each named in docs/diagnostics.md."""
    import re
    from pathlib import Path

    from deuteron import errors
    root = Path(__file__).resolve().parents[2]
    for f in sorted((root / "deuteron").glob("trace*.py")) + sorted((root / "deuteron" / "ops").glob("*.py")):
        text = f.read_text()
        assert not re.search(r"\b(self|tr|tracer)\.error\(", text), f"{f.name} raises a plain TraceError"
        assert "TraceError(" not in text, f.name
    docs = (root / "docs" / "diagnostics.md").read_text()
    causes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.Cause)
              and c is not errors.Cause]
    assert len(causes) > 40
    missing = [c.__name__ for c in causes if f"`{c.__name__}`" not in docs]
    assert not missing, missing
    for c in causes:
        assert re.fullmatch(r"D00[1-7]", c.code), c
