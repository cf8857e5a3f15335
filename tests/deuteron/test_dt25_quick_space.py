"""Issue 25 (dt25), no GPU: what deuteron's quick tune tries for matmul 4096^3 and attention 4x32x4096x64 fp16.

* matmul: the quick plan (seeds, then the first pattern-search batch) holds Triton's Hopper winners (128x256x64
  / 256x128x64, 8 warps, 3 stages) and their persistent / L2 variants; with TMA on the target (sm_90a under
  newt's default ``NEWT_TMA``, or ``NEWT_TMA=1``) also the descriptor form (``indexing="tensor_descriptor"``:
  tensor descriptors) and its warp-specialized pipeline, which compile to TMA copies, HGMMA and a producer
  warpgroup without spills;
* attention: at most 40 configs, the pinned winners of benchmarks/dtattn_configs.py among them, no batched-dot
  tile (``tile_b`` > 1: no wgmma) and no matmul tile that spills.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from dt_helpers import compile_config_sm90, needs_nvrtc

import deuteron as dt
from deuteron.autotune import EFFORT_BUDGETS
from deuteron.autotune.plan import quick_plan
from deuteron.space import descriptor_indexing, tma_active


def _matmul():
    x = torch.randn(4096, 4096, dtype=torch.float16)
    return importlib.import_module("matmul").matmul, (x, x)


def _attention():
    q = tuple(torch.randn(4, 32, 4096, 64, dtype=torch.float16) for _ in range(3))
    return importlib.import_module("attention").attention, q


def _shape(c):
    return (tuple(c.block_sizes), c.num_warps, c.num_stages)


def test_quick_budget_is_forty_configs():
    assert EFFORT_BUDGETS["quick"][0] == 40


def test_matmul_quick_plan_holds_the_hopper_winners():
    k, args = _matmul()
    p = quick_plan(k, args, tma=False)
    seeds = {_shape(c) for c in p["seeds"]}
    assert ((128, 256, 64), 8, 3) in seeds and ((256, 128, 64), 8, 3) in seeds
    allc = p["seeds"] + p["refine"]
    assert len(allc) <= 40
    big = [c for c in allc if _shape(c) == ((128, 256, 64), 8, 3)]
    assert {c.pid_type for c in big} >= {"flat", "persistent", "persistent_blocked"}
    assert {c.l2_groupings[0] for c in big} >= {4, 8, 16}
    assert not any(descriptor_indexing(c) for c in allc)  # no TMA on the target: no descriptor form


def test_matmul_quick_plan_with_tma_tries_descriptors_and_warp_specialization():
    k, args = _matmul()
    p = quick_plan(k, args, tma=True)
    desc = [c for c in p["seeds"] if descriptor_indexing(c)]
    assert ((128, 256, 64), 8, 3) in {_shape(c) for c in desc if not c.range_warp_specializes}
    ws = [c for c in desc if c.range_warp_specializes == [True]]
    assert {(_shape(c), c.pid_type) for c in ws} == {(((128, 256, 64), 8, 3), "flat"),
                                                     (((128, 256, 64), 8, 2), "persistent")}
    # the pointer form of the same tile stays a seed, and the neighbours flip the indexing
    assert any(_shape(c) == ((128, 256, 64), 8, 3) and not descriptor_indexing(c) for c in p["seeds"])
    b = k._bind(args, {})
    sp = k._entry(b).space
    sp.tma_loops = 1
    try:
        nbs = sp.neighbors(desc[0])
    finally:
        sp.tma_loops = 0
    assert any(not descriptor_indexing(c) and c.block_sizes == desc[0].block_sizes for c in nbs)
    assert any(c.range_warp_specializes == [True] for c in nbs)
    assert not any(descriptor_indexing(c) for c in sp.neighbors(sp.default()))


def test_descriptor_form_only_where_every_value_is_tiles():
    """attention's loads keep a whole head dimension (no mask there: no TMA map in its descriptor form on
    sm_90a), so with TMA on its plan is the pointer plan; matmul's values are tiles only."""
    k, args = _attention()
    assert not k._entry(k._bind(args, {})).space.descriptor_tiles()
    with_tma, without = quick_plan(k, args, tma=True), quick_plan(k, args, tma=False)
    assert [c.key() for c in with_tma["seeds"]] == [c.key() for c in without["seeds"]]
    mk, margs = _matmul()
    assert mk._entry(mk._bind(margs, {})).space.descriptor_tiles()


def test_attention_quick_plan_is_small_and_keeps_the_pinned_winners():
    k, args = _attention()
    p = quick_plan(k, args)
    allc = p["seeds"] + p["refine"]
    assert len(allc) <= 40
    pinned = [c for c in allc if c.block_sizes == [1, 128, 64] and c.num_warps == 8]
    assert {(c.num_stages, c.l2_groupings[0]) for c in pinned} >= {(3, 8), (2, 8)}
    assert any(c.block_sizes == [1, 128, 64] and c.num_warps == 8 and c.num_stages == 3 for c in p["seeds"])
    assert all(c.block_sizes[0] == 1 for c in allc)  # no batched dots


def test_search_space_prunes_batched_dots_and_spilling_tiles_but_users_may_ask():
    k, args = _attention()
    sp = k._entry(k._bind(args, {})).space
    assert [s.label for s in sp.batch_slots()] == ["tile_b"]
    d = sp.default()
    assert sp.feasible(d)
    assert not sp.feasible(d.replace(block_sizes=[2, 128, 64]))
    sp.complete(dt.Config(block_sizes=[2, 128, 64]))  # a user's config is still valid (no ConfigError)
    mk, margs = _matmul()
    ms = mk._entry(mk._bind(margs, {})).space
    assert ms.batch_slots() == []
    base = ms.default()
    assert ms.feasible(base.replace(block_sizes=[128, 256, 64], num_warps=8))
    assert not ms.feasible(base.replace(block_sizes=[128, 256, 64], num_warps=4))  # 256 fp32 a thread: spills
    assert not ms.feasible(base.replace(block_sizes=[256, 256, 64], num_warps=8))


def test_descriptor_form_uses_tensor_descriptors_and_stays_correct():
    """The descriptor form makes x, y and out tensor descriptors (bounds checked by the descriptors, no pointer
    masks left); it used to keep every bounds mask on pointer loads (TMA only under ``NEWT_TMA=1``)."""
    k = importlib.import_module("matmul").matmul
    x = torch.randn(64, 64, dtype=torch.float16)
    y = torch.randn(64, 64, dtype=torch.float16)
    plain = dt.Config(block_sizes=[32, 32, 16], num_warps=4, num_stages=2)
    desc = plain.replace(indexing="tensor_descriptor")
    src_plain = k.to_newt_source(x, y, config=plain)
    src_desc = k.to_newt_source(x, y, config=desc)
    assert "mask=" not in src_plain  # 64 divides by every block: no masks
    assert "mask=" not in src_desc and "nl.load(" not in src_desc and "nl.store(" not in src_desc
    assert src_desc.count("nl.make_tensor_descriptor(") == 3
    assert "x_desc.load([begin_m, begin_k])" in src_desc and "out_desc.store([begin_m, begin_n]" in src_desc
    got = k.run_with(desc, x, y)
    torch.testing.assert_close(got.float(), x.float() @ y.float(), atol=1e-1, rtol=1e-2)


def test_tma_active_follows_newts_switch(monkeypatch):
    monkeypatch.setenv("NEWT_TMA", "1")
    assert tma_active(torch.device("cpu")) is False
    if not torch.cuda.is_available():  # no GPU: the target is NEWT_TARGET's
        monkeypatch.setenv("NEWT_TARGET", "sm_90a")
        assert tma_active(torch.device("cuda")) is True
        monkeypatch.setenv("NEWT_TARGET", "sm_80")
        assert tma_active(torch.device("cuda")) is False  # no TMA on the target
        monkeypatch.setenv("NEWT_TARGET", "sm_90a")
    monkeypatch.setenv("NEWT_TMA", "0")
    assert tma_active(torch.device("cuda")) is False
    # newt's default (tensor descriptors' tiles) takes the descriptor form's tiles: they are tensor descriptors
    for v in ("desc", ""):
        monkeypatch.setenv("NEWT_TMA", v)
        assert tma_active(torch.device("cpu")) is False
        if not torch.cuda.is_available():
            assert tma_active(torch.device("cuda")) is True
    monkeypatch.delenv("NEWT_TMA")
    if not torch.cuda.is_available():
        assert tma_active(torch.device("cuda")) is True


@needs_nvrtc
def test_under_newts_default_the_descriptor_form_compiles_to_tma(monkeypatch):
    """Why the search proposes the descriptor form under newt's default: its warp-specialized config compiles
    to TMA copies and a producer warpgroup there (tensor descriptors' tiles), as with ``NEWT_TMA=1``; with
    ``NEWT_TMA=0`` to neither.  (Until the descriptor form made real descriptors, the default gave no TMA copy
    and no producer: what the H100's quick tune picked on 2026-12-07 under that label.)"""
    monkeypatch.delenv("NEWT_TMA", raising=False)
    cfg = dt.Config(block_sizes=[128, 256, 64], num_warps=8, num_stages=2, pid_type="persistent",
                    indexing="tensor_descriptor", range_warp_specializes=[True])
    md, sass = _compile(cfg)
    assert len(md.get("tensormaps") or []) == 3 and md.get("producer_warps") == 4 and "UTMALDG" in sass
    monkeypatch.setenv("NEWT_TMA", "1")
    md, sass = _compile(cfg)
    assert md.get("tensormaps") and md.get("producer_warps") and "UTMALDG" in sass
    monkeypatch.setenv("NEWT_TMA", "0")
    md, sass = _compile(cfg)
    assert not (md.get("tensormaps") or []) and not md.get("producer_warps") and "UTMALDG" not in sass


def _compile(cfg):
    k, args = _matmul()
    return compile_config_sm90(k, args, cfg)


@needs_nvrtc
@pytest.mark.parametrize("ws,pid,stages", [(False, "flat", 3), (True, "flat", 3), (True, "persistent", 2)])
def test_descriptor_form_compiles_to_tma_hgmma_without_spills(ws, pid, stages, monkeypatch, tmp_path):
    """The TMA seeds as sm_90a cubins under newt's default ``NEWT_TMA``: TMA boxes, HGMMA, no spills, and a
    producer warpgroup where warp specialized -- persistent too, at newt's persistent tile (128x256x64 in 2
    stages)."""
    monkeypatch.delenv("NEWT_TMA", raising=False)
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path))
    cfg = dt.Config(block_sizes=[128, 256, 64], num_warps=8, num_stages=stages, indexing="tensor_descriptor",
                    range_warp_specializes=[True] if ws else None, pid_type=pid)
    md, sass = _compile(cfg)
    assert len(md.get("tensormaps") or []) == 3  # x, y and out as TMA boxes
    assert "HGMMA" in sass and "UTMALDG" in sass
    assert md["n_spills"] == 0
    assert (md.get("producer_warps") or 0) == (4 if ws else 0)
    md, _ = _compile(cfg.replace(indexing=None, range_warp_specializes=None))
    assert not md.get("tensormaps")  # the pointer form: no TMA


def test_full_search_genome_keeps_the_pointer_form_a_choice():
    """Effort full's genome: with the TMA moves the indexing gene is [unset, descriptor], not the descriptor
    form alone (which made every decoded mutant a descriptor config)."""
    import random

    from deuteron.autotune.search import Genome
    k, args = _matmul()
    sp = k._entry(k._bind(args, {})).space
    sp.tma_loops = 1
    try:
        g = Genome(sp, random.Random(0))
        assert g.domains[("indexing", None)] == [None, "tensor_descriptor"]
        base = g.decode(g.encode(sp.default()))
        assert base is not None and not descriptor_indexing(base)
    finally:
        sp.tma_loops = 0


def test_wgmma_targets_skip_dot_tiles_newt_lowers_to_mma_sync():
    """On sm_90a the plan compiled no HGMMA for 2 warps, 8 warps over 64 rows or 16 over 128; with ``wgmma``
    set (the tuner sets it from the GPU's target) the search skips those, elsewhere it keeps them."""
    mk, margs = _matmul()
    ms = mk._entry(mk._bind(margs, {})).space
    base = ms.default()
    bad = [base.replace(block_sizes=[64, 256, 64], num_warps=8), base.replace(block_sizes=[64, 64, 32], num_warps=2),
           base.replace(block_sizes=[128, 128, 64], num_warps=16)]
    good = [base.replace(block_sizes=[128, 256, 64], num_warps=8), base.replace(block_sizes=[64, 128, 64], num_warps=4)]
    assert all(ms.feasible(c) for c in bad + good)  # no target said: everything the other rules allow
    ms.wgmma = True
    try:
        assert not any(ms.feasible(c) for c in bad)
        assert all(ms.feasible(c) for c in good)
    finally:
        ms.wgmma = False
    # the plan (as on sm_90a): every config after the default has warpgroups of at least 64 rows of the dot's M
    p = quick_plan(mk, margs)
    assert all(c.num_warps % 4 == 0 and c.block_sizes[0] >= 16 * c.num_warps for c in p["seeds"] + p["refine"])
    p = quick_plan(*_attention())
    assert all(c.num_warps % 4 == 0 and c.block_sizes[1] >= 16 * c.num_warps for c in p["seeds"] + p["refine"])


@needs_nvrtc
@pytest.mark.parametrize("pid_type", ["persistent", "persistent_blocked"])
@pytest.mark.parametrize("tma_env", [None, "1"])
def test_both_persistent_forms_warp_specialize_with_tma(monkeypatch, pid_type, tma_env):
    """``persistent_blocked`` bounds its tile loop in the ``range`` (no ``if`` around the K loop), so newt's
    warp specialization takes it as it takes ``persistent``: a producer warpgroup and TMA maps on sm_90a under
    newt's default ``NEWT_TMA`` and ``NEWT_TMA=1``, 0 spill bytes (helper-38: the ``if`` made the split fall
    back, silently)."""
    if tma_env is None:
        monkeypatch.delenv("NEWT_TMA", raising=False)
    else:
        monkeypatch.setenv("NEWT_TMA", tma_env)
    cfg = dt.Config(block_sizes=[128, 256, 64], num_warps=8, num_stages=2, pid_type=pid_type, l2_groupings=[8],
                    indexing="tensor_descriptor", range_warp_specializes=[True])
    md, sass = _compile(cfg)
    assert md.get("producer_warps") == 4 and md.get("tensormaps") and md["n_spills"] == 0, md
    assert "UTMALDG" in sass
