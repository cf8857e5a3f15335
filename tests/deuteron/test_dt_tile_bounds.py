"""The oracle gap of a branch on where a tile starts: with a tunable block size the kernel decides per tile of the
config's size while kernel.ref runs the loop as one tile, so they disagree.  Since issue 25 (Helion's
jagged_hstu_attn) the kernel compiles and runs, as in Helion; kernel.ref raises the D004 (TileBoundDecision) at
the user's line (tests/deuteron/test_hstu25.py: the autotuner's default-config oracle).  With a fixed block size
kernel.ref uses the same tiles, and the branch is fine."""

from __future__ import annotations

import pytest
import torch
from dt_helpers import write_module

import deuteron as dt
import newt

DEV = "cuda" if torch.cuda.is_available() else "cpu"

BODY = """
@dt.kernel
def first_block(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0){bs}):
        if {cond}:
            out[t] = x[t] * 2.0
        else:
            out[t] = x[t]
    return out
"""


@pytest.mark.parametrize("cond", ["t.begin == 0", "t.end > 40", "t.id < 1", "t.begin + t.block_size < 10"])
def test_a_branch_on_a_tunable_tile_bound_is_d004_of_ref(tmp_path, cond):
    mod = write_module(tmp_path, f"tb_{abs(hash(cond))}", BODY.format(bs="", cond=cond))
    x = torch.randn(100, device=DEV)
    assert mod.first_block(x).shape == x.shape  # the kernel itself runs (Helion's semantics)
    with pytest.raises(newt.CompilationError) as ei:
        mod.first_block.ref(x)
    d = ei.value.diagnostics[0]
    assert d.code == "D004" and d.data["cause"] == "TileBoundDecision" and d.span.line == 9, d.message
    assert "block_size=" in d.hint


def test_with_a_fixed_block_size_kernel_and_ref_agree(tmp_path):
    mod = write_module(tmp_path, "tb_fixed", BODY.format(bs=", block_size=32", cond="t.begin == 0"))
    x = torch.randn(100, device=DEV)
    want = torch.cat([x[:32] * 2.0, x[32:]])
    torch.testing.assert_close(mod.first_block(x), want)
    torch.testing.assert_close(mod.first_block.ref(x), want)


def test_a_branch_on_a_scalar_argument_stays_a_branch(tmp_path):
    mod = write_module(tmp_path, "tb_arg", """
@dt.kernel
def scale(x, flag: int):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        if flag > 0:
            out[t] = x[t] * 2.0
        else:
            out[t] = x[t]
    return out
""")
    x = torch.randn(50, device=DEV)
    torch.testing.assert_close(mod.scale(x, 1), x * 2.0)
    torch.testing.assert_close(mod.scale(x, 0), x)


SCAN = """
@dt.kernel
def prefix(x):
    m, n = x.shape
    out = torch.empty_like(x)
    for tm in dt.tile(m):
        for tn in dt.tile(n{bs}):
            out[tm, tn] = torch.cumsum(x[tm, tn], dim={dim})
    return out
"""


def test_a_scan_along_a_tunable_tile_runs_per_tile_and_is_d004_of_ref(tmp_path):
    """As in Helion (its segment_reduction example): the kernel scans each tile of the config's size; kernel.ref,
    which runs the loop as one tile, cannot stand for it and raises the D004 (TileScan) at the user's line."""
    mod = write_module(tmp_path, "ts_bad", SCAN.format(bs="", dim=1))
    x = torch.randn(8, 40, device=DEV)
    for bn in (8, 16):
        got = mod.prefix.run_with(dt.Config(block_sizes=[8, bn]), x)
        want = torch.cat([torch.cumsum(c, dim=1) for c in x.split(bn, dim=1)], dim=1)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    out = mod.prefix(x)
    assert out.shape == x.shape
    with pytest.raises(newt.CompilationError) as ei:
        mod.prefix.ref(x)
    d = ei.value.diagnostics[0]
    assert d.code == "D004" and d.data["cause"] == "TileScan" and d.span.line == 11, d.message


def test_a_scan_along_a_fixed_size_tile_matches_ref(tmp_path):
    mod = write_module(tmp_path, "ts_fixed", SCAN.format(bs=", block_size=16", dim=1))
    x = torch.randn(8, 40, device=DEV)
    torch.testing.assert_close(mod.prefix(x), mod.prefix.ref(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fn, op", [("lambda v: torch.nan_to_num(v)", "torch.nan_to_num"),
                                     ("lambda v: v.sort()[0]", ".sort()"),
                                     ("lambda v: v + dt.register_tunable('u', dt.PowerOfTwo(1, 4))",
                                      "dt.register_tunable")])
def test_unsupported_ops_in_a_callable_argument_name_their_cause(tmp_path, fn, op):
    """The static checker reports these in the kernel's own body; in a callable argument (inlined when tracing)
    the tracer does, with the cause class NotInTileLoop."""
    mod = write_module(tmp_path, f"unsup_{abs(hash(fn))}", f"""
@dt.kernel
def f(x, g):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = g(x[t])
    return out


def run(x):
    return f(x, {fn})
""")
    with pytest.raises(newt.CompilationError) as ei:
        mod.run(torch.randn(10, device=DEV))
    d = ei.value.diagnostics[0]
    assert d.code == "D004" and d.data["cause"] == "NotInTileLoop" and d.data["op"] == op, d.format()
    assert d.span.line == 14


def test_a_registered_block_size_before_its_tile_is_its_dimension(tmp_path):
    mod = write_module(tmp_path, "bs_before", """
@dt.kernel
def f(x):
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    bn = dt.register_block_size(n)
    for tm in dt.tile(m):
        acc = dt.zeros([tm, bn], dtype=torch.float32)
        for tn in dt.tile(n, block_size=bn):
            acc += x[tm, tn]
        out[tm] = acc.sum(-1)
    return out
""")
    x = torch.randn(8, 40, device=DEV)
    for cfg in (dt.Config(block_sizes=[16, 4]), dt.Config(block_sizes=[64, 1]), dt.Config(block_sizes=[8, 8]),
                dt.Config(block_sizes=[1, 8])):  # a register of 1: a broadcast dim (found by the property test)
        torch.testing.assert_close(mod.f.run_with(cfg, x), x.sum(-1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mod.f.ref(x), x.sum(-1), atol=1e-5, rtol=1e-5)
