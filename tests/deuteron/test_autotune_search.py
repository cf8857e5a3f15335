"""The tuner's search (issue 12), on the CPU: effort ``full`` runs quick's search first, the hopeless cut-off,
compile tasks for persistent candidates, where the time goes (``Tuner.phases``)."""

from __future__ import annotations

import importlib
import math

import pytest
import torch

import deuteron as dt
from deuteron.autotune import CUTOFFS, Candidate, Tuner


def _matmul_tuner(effort="quick"):
    k = importlib.import_module("matmul").matmul
    x = torch.randn(256, 512, dtype=torch.float16)
    y = torch.randn(512, 256, dtype=torch.float16)
    b = k._bind((x, y), {})
    return Tuner(k, k._entry(b), b, effort, None, None)


@pytest.mark.parametrize("pid", ["flat", "persistent", "persistent_blocked"])
def test_every_candidate_gets_a_compile_task_for_the_compile_workers(monkeypatch, pid):
    """The launch function's ``_NUM_SMS`` (the persistent grid) is not the kernel's: passing it to the compile
    spec failed, and every persistent candidate was compiled on the GPU worker instead, one at a time."""
    import deuteron.runtime as drt
    import newt.tune.tasks as nt
    monkeypatch.setattr(nt, "default_target", lambda: "sm_90a")
    monkeypatch.setattr(drt, "num_sms", lambda device=None: 132)
    t = _matmul_tuner()
    t.gpu = True  # the GPU path of building tasks; nothing is launched
    c = Candidate(t.space.default().replace(pid_type=pid))
    t.prepare(c)
    assert c.status == "pending", c.error
    compiles, timing = t._tasks_of(c)
    assert len(compiles) == 1 and compiles[0] is not None
    assert "_NUM_SMS" not in compiles[0].constexprs
    kw = timing.launches[0][2]
    assert ("_NUM_SMS" in kw) == pid.startswith("persistent")
    assert "compiled_on_gpu_worker" not in t.phases


def test_the_hopeless_cut_off_depends_on_the_effort_and_the_best_so_far(monkeypatch):
    monkeypatch.delenv("DEUTERON_AUTOTUNE_CUTOFF", raising=False)
    for effort in ("quick", "full"):
        t = _matmul_tuner(effort)
        t.gpu = True
        assert t._cutoff() is None  # nothing timed yet
        for cfg, ms in ((t.space.default(), 0.5), (t.space.default().replace(num_warps=4), 0.25)):
            c = Candidate(cfg)
            c.status, c.ms = "ok", ms
            t.results[cfg.key()] = c
        assert t._cutoff() == pytest.approx(0.25 * CUTOFFS[effort])
    monkeypatch.setenv("DEUTERON_AUTOTUNE_CUTOFF", "1.5")
    assert t._cutoff() == pytest.approx(0.375)


@dt.kernel
def _rows(x):
    out = torch.empty_like(x)
    for tile in dt.tile(x.size(0)):
        out[tile, :] = torch.relu(x[tile, :]) * 2.0
    return out


def _fake_ms(cfg) -> float:
    """A deterministic cost: best at 16-row blocks, 2 warps (no clock noise in the comparison)."""
    bs = cfg.block_sizes[0]
    return 1.0 + abs(math.log2(bs) - 4) + 0.3 * abs(math.log2(cfg.num_warps) - 1) + 0.01 * (cfg.num_stages or 1)


def _tune(effort, monkeypatch, max_configs):
    monkeypatch.setenv("DEUTERON_AUTOTUNE_CACHE", "0")
    monkeypatch.setenv("DEUTERON_AUTOTUNE_MAX_CONFIGS", "10")  # quick's budget (and quick's phase of full)
    monkeypatch.setattr(Tuner, "time", lambda self, cfg, b, rep=None: _fake_ms(cfg))
    x = torch.randn(64, 24)
    b = _rows._bind((x,), {})
    t = Tuner(_rows, _rows._entry(b), b, effort, None, None)
    t.max_configs = max_configs
    best = t.run()
    return t, best


def test_full_evaluates_everything_quick_does_and_ends_at_least_as_fast(monkeypatch):
    monkeypatch.delenv("DEUTERON_AUTOTUNE_ALGORITHM", raising=False)  # quick: pattern search
    q, qbest = _tune("quick", monkeypatch, 10)
    monkeypatch.setenv("DEUTERON_AUTOTUNE_ALGORITHM", "de")  # on the CPU full's population search needs asking
    f, fbest = _tune("full", monkeypatch, 26)
    assert 0 < q.tested <= 10 < f.tested <= 26
    assert set(q.results) <= set(f.results)  # quick's search is the start of full's
    assert fbest.ms <= qbest.ms
    assert "quick_phase_s" in f.phases and "quick_phase_s" not in q.phases


def test_the_end_event_says_where_the_time_went(monkeypatch):
    monkeypatch.setenv("DEUTERON_AUTOTUNE_CACHE", "0")
    x = torch.randn(64, 24)
    ev = []
    _rows.autotune(x, effort="quick", callback=ev.append, force=True)
    end = next(e for e in ev if e["kind"] == "end")
    ph = end["phases"]
    for k in ("oracle", "generate", "check", "batches", "in_batches", "total", "main_other"):
        assert k in ph, k
    # (generating can round to 0.000 s: the kernel's programs are traced already when earlier tests tuned it)
    assert ph["batches"] >= 1 and ph["generate"] >= 0 and ph["check"] > 0
    assert ph["total"] == pytest.approx(end["elapsed"], abs=0.25)
    main = sum(ph.get(k, 0) for k in ("oracle", "pool_start", "generate", "tasks", "check", "wait", "retime"))
    assert main + ph["main_other"] == pytest.approx(ph["total"], abs=0.01)
