"""dt.Config: JSON round trip, the pasteable line, validation, merging; the config space."""

from __future__ import annotations

import json

import pytest
import torch

import deuteron as dt
from deuteron.config import Config, ConfigError


def test_json_round_trip_and_str_pastes_back():
    c = dt.Config(block_sizes=[64, 128, 32], loop_orders=[[1, 0]], l2_groupings=[8], reduction_loops=[None, 256],
                  num_warps=8, num_stages=3, pid_type="persistent", unroll=4)
    assert Config.from_json(c.to_json()) == c
    assert json.loads(c.to_json())["unroll"] == 4
    again = eval(str(c), {"dt": dt})  # the printed line is meant to be pasted
    assert again == c and hash(again) == hash(c)
    assert str(c).startswith("dt.Config(block_sizes=[64, 128, 32]")


@pytest.mark.parametrize("kw", [dict(block_sizes=[48]), dict(num_warps=3), dict(num_warps=64), dict(num_stages=0),
                                dict(loop_orders=[[0, 0]]), dict(reduction_loops=[100]), dict(pid_type="z"),
                                dict(block_sizes=["a"]), dict(l2_groupings=[0])])
def test_invalid(kw):
    with pytest.raises(ConfigError):
        Config(**kw)


def test_merge_and_replace():
    a = Config(block_sizes=[32], num_warps=4)
    b = Config(num_warps=8).merged_over(a)
    assert b.block_sizes == [32] and b.num_warps == 8
    assert a.replace(num_warps=None).num_warps is None


@dt.kernel
def mm(x, y):
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], device=x.device)
    for tm, tn in dt.tile([m, n]):
        acc = dt.zeros([tm, tn])
        for tk in dt.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = acc
    return out


@dt.kernel
def rows(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t, :] = torch.softmax(x[t, :], dim=-1)
    return out


def test_space_of_a_matmul():
    x = torch.randn(300, 200)
    sp = mm.config_space(x, x.T.contiguous())
    assert [s.label for s in sp.slots] == ["tm", "tn", "tk"]
    assert all(s.used_in_dot and s.lo == 16 for s in sp.slots)
    assert sp.grid_loops == [2] and sp.has_dot
    d = sp.default()
    assert d.block_sizes == [128, 128, 64] and d.l2_groupings == [8]
    nbs = sp.neighbors(d)
    assert len(nbs) > 10 and all(sp.feasible(c) for c in nbs)
    with pytest.raises(ConfigError):
        sp.complete(Config(block_sizes=[64, 64]))
    with pytest.raises(ConfigError):
        sp.complete(Config(loop_orders=[[0, 1], [1, 0]]))


def test_space_of_a_row_reduction():
    x = torch.randn(64, 5000)
    sp = rows.config_space(x)
    assert len(sp.rspecs) == 1 and sp.rspecs[0].size == 5000
    assert sp.rspecs[0].choices()[0] is None and 4096 in sp.rspecs[0].choices()
    d = sp.default()
    assert d.reduction_loops == [None]
    assert sp.elems(d) <= 8192
