"""The autotuner on the CPU (interpreter): the oracle gate, the config cache, progress, dedup, worker processes."""

from __future__ import annotations

import io
import json
import os
import textwrap

import pytest
import torch

import deuteron as dt
from deuteron.autotune.cache import ConfigCache
from deuteron.autotune.progress import Progress
from deuteron.autotune.workers import WorkerPool, save_args


@dt.kernel(configs=[dt.Config(block_sizes=[64], bug=True), dt.Config(block_sizes=[32], bug=False),
                    dt.Config(block_sizes=[128], bug=True)])
def scale(x):
    out = torch.empty_like(x)
    bug = dt.register_tunable("bug", dt.Bool())
    for tile in dt.tile(x.size(0)):
        if bug:
            out[tile] = x[tile] * 2.001  # wrong, and as fast as the right one
        else:
            out[tile] = x[tile] * 2
    return out


@dt.kernel(configs=[dt.Config(block_sizes=[64], skip=True), dt.Config(block_sizes=[32], skip=False)])
def maybe_skip(x):
    out = torch.empty_like(x)
    skip = dt.register_tunable("skip", dt.Bool())
    for tile in dt.tile(x.size(0)):
        if not skip:
            out[tile] = x[tile] + 1
    return out


@dt.kernel(configs=[dt.Config(block_sizes=[64], bug=True)])
def always_wrong_single(x):
    out = torch.empty_like(x)
    bug = dt.register_tunable("bug", dt.Bool())
    for tile in dt.tile(x.size(0)):
        out[tile] = x[tile] + (1 if bug else 0)
    return out


@dt.kernel(configs=[dt.Config(block_sizes=[64], bug=True), dt.Config(block_sizes=[32], bug=True)])
def always_wrong(x):
    out = torch.empty_like(x)
    bug = dt.register_tunable("bug", dt.Bool())
    for tile in dt.tile(x.size(0)):
        out[tile] = x[tile] + (1 if bug else 0)
    return out


@dt.kernel(configs=[dt.Config(reduction_loops=[None]), dt.Config(reduction_loops=[128]),
                    dt.Config(reduction_loops=[32])])
def rowsum(x):
    out = torch.empty([x.size(0)], device=x.device)
    for t in dt.tile(x.size(0)):
        out[t] = x[t, :].sum(-1)
    return out


@dt.kernel(autotune_effort="quick")
def searched(x, y):
    out = torch.empty_like(x)
    for tile in dt.tile(x.size()):
        out[tile] = x[tile] * y[tile]
    return out


def events_of(kernel, *args):
    ev = []
    kernel.reset()
    kernel.autotune_callback = ev.append
    try:
        out = kernel(*args)
    finally:
        kernel.autotune_callback = None
    return out, ev


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("DEUTERON_AUTOTUNE_CACHE", "0")


def test_wrong_config_in_the_space_is_never_chosen():
    x = torch.randn(1000)
    out, ev = events_of(scale, x)
    torch.testing.assert_close(out, x * 2)
    reports = [e for e in ev if e["kind"] == "report"]
    assert [r["status"] for r in reports] == ["wrong", "ok", "wrong"]
    assert "does not match the eager reference" in reports[0]["error"]
    end = ev[-1]
    assert end["kind"] == "end" and "bug=False" in end["best_config"]
    assert next(iter(scale._entries.values())).config.tunables["bug"] is False


def test_unwritten_outputs_fail_through_nan_prefill():
    x = torch.randn(1000)
    out, ev = events_of(maybe_skip, x)
    torch.testing.assert_close(out, x + 1)
    bad = [e for e in ev if e["kind"] == "report" and e["status"] == "wrong"]
    assert bad and "NaN" in bad[0]["error"]


def test_a_single_given_config_is_used_without_tuning():
    x = torch.randn(100)
    out, ev = events_of(always_wrong_single, x)
    assert ev == []  # one config: nothing to choose from
    torch.testing.assert_close(out, x + 1)


def test_no_config_passes():
    with pytest.raises(dt.errors.DeuteronError if hasattr(dt, "errors") else Exception) as ei:
        always_wrong.reset()
        always_wrong(torch.randn(100))
    assert "no config" in str(ei.value) and "wrong" in str(ei.value)


def test_identical_generated_source_is_evaluated_once(tmp_path):
    log = tmp_path / "log.jsonl"
    rowsum.autotune_log = str(log)
    try:
        x = torch.randn(10, 100)
        torch.testing.assert_close(events_of(rowsum, x)[0], x.sum(-1))
    finally:
        rowsum.autotune_log = None
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert [ln["duplicate"] for ln in lines] == [False, True, False]


def test_search_explores_neighbours(monkeypatch):
    monkeypatch.setenv("DEUTERON_AUTOTUNE_MAX_CONFIGS", "5")
    x = torch.randn(300, 20)
    y = torch.randn(300, 20)
    ev = []
    cfg = searched.autotune(x, y, callback=ev.append, force=True)
    reports = [e for e in ev if e["kind"] == "report"]
    assert 2 <= len(reports) <= 5
    assert len({r["config"] for r in reports}) == len(reports)
    assert all(r["status"] == "ok" for r in reports)
    torch.testing.assert_close(searched(x, y), x * y)
    assert isinstance(cfg, dt.Config)


def test_config_cache_on_disk(monkeypatch, tmp_path):
    monkeypatch.setenv("DEUTERON_AUTOTUNE_CACHE", "1")
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path))
    x = torch.randn(500)
    _, ev1 = events_of(scale, x)
    assert sum(e["kind"] == "report" for e in ev1) == 3
    files = list((tmp_path / "configs").glob("*.json"))
    assert len(files) == 1 and not list((tmp_path / "configs").glob(".tmp-*"))
    saved = json.loads(files[0].read_text())
    assert saved["config"]["bug"] is False and saved["kernel"].endswith("scale")
    assert "torch" in saved["versions"] and "device" in saved["versions"]
    _, ev2 = events_of(scale, x)  # a fresh in-memory state: the disk cache answers
    assert [e["kind"] for e in ev2] == ["end"] and ev2[0]["message"] == "from the config cache"
    # another shape is another key
    _, ev3 = events_of(scale, torch.randn(64))
    assert sum(e["kind"] == "report" for e in ev3) == 3
    # a corrupt entry is ignored (and replaced)
    for f in (tmp_path / "configs").glob("*.json"):
        f.write_text("{not json")
    _, ev4 = events_of(scale, x)
    assert sum(e["kind"] == "report" for e in ev4) == 3


def test_cache_put_get_round_trip(tmp_path):
    c = ConfigCache(tmp_path)
    c.put("k", dt.Config(block_sizes=[16]), 0.5, {"kernel": "f"})
    got = c.get("k")
    assert got["config"] == dt.Config(block_sizes=[16]) and got["ms"] == 0.5
    assert c.get("missing") is None


def test_progress_bar_and_events():
    stream = io.StringIO()
    ev = []
    p = Progress("k", 3, ev.append, bar=True, stream=stream)
    p.begin("space")
    p.report(dt.Config(num_warps=4), 1.5, "ok")
    p.report(dt.Config(num_warps=8), None, "wrong", "mismatch")
    p.report(dt.Config(num_warps=2), 0.5, "ok")
    p.end(dt.Config(num_warps=2), 0.5)
    out = stream.getvalue()
    assert "[deuteron] autotune k [" in out and "3/3" in out and "best 0.5000 ms" in out
    assert [e["kind"] for e in ev] == ["begin", "report", "report", "report", "end"]
    assert ev[-1]["tested"] == 3 and ev[-1]["failed"] == 1 and ev[2]["error"] == "mismatch"


def test_broken_callback_does_not_stop_tuning():
    def boom(ev):
        raise RuntimeError("callback bug")
    x = torch.randn(100)
    scale.reset()
    scale.autotune_callback = boom
    try:
        torch.testing.assert_close(scale(x), x * 2)
    finally:
        scale.autotune_callback = None


# ---------------------------------------------------------------------------
# worker processes (on the CPU they run the interpreter)
# ---------------------------------------------------------------------------

FAKE = '''
import os, time
import newt
import newt.language as nl
from newt.runtime.errors import KernelFaultError, OutOfResources


@newt.jit
def _k(x, out, n, B: nl.constexpr):
    offs = nl.program_id(0) * B + nl.arange(0, B)
    nl.store(out + offs, nl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


def ok(x, out, n, *, B, num_warps, num_stages):
    _k[(newt.cdiv(n, B),)](x, out, n, B=B, num_warps=num_warps, num_stages=num_stages)


def hang(*args, **kw):
    time.sleep(60)


def crash(*args, **kw):
    os._exit(7)


def fault(*args, **kw):
    raise KernelFaultError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access", kernel="_k",
                           code="CUDA_ERROR_ILLEGAL_ADDRESS", sticky=True)


def oor(*args, **kw):
    raise OutOfResources("_k", "shared memory", 300000, 232448)
'''


def test_worker_pool_classifies_results(tmp_path):
    mod = tmp_path / "fake_kernels.py"
    mod.write_text(textwrap.dedent(FAKE))
    x = torch.randn(100)
    args = tmp_path / "args.pt"
    save_args(args, [x, torch.empty(100), 100])
    pool = WorkerPool(2, "cpu", tmp_path / "w.log", timeout=20)
    pool.start()
    try:
        ids = {}
        for name in ("ok", "hang", "crash", "fault", "oor", "ok"):
            task = {"module": str(mod), "launch": name, "kernel": "_k", "constexprs": {"B": 64}, "num_warps": 4,
                    "num_stages": 1, "needs_num_sms": False, "args": str(args)}
            ids[pool.submit(task, timeout=20 if name != "hang" else 3)] = name
        got = {}
        import time
        t0 = time.time()
        while len(got) < len(ids) and time.time() - t0 < 120:
            for tid, _task, res in pool.poll(0.2):
                got[tid] = res
        status = {ids[t]: r["status"] for t, r in got.items()}
        assert status == {"ok": "ok", "hang": "timeout", "crash": "crashed", "fault": "fault",
                          "oor": "out_of_resources"}, got
        assert pool.restarts >= 3  # hang, crash, fault each replaced their worker
        assert len(pool.workers) == 2
    finally:
        pool.close()
    assert all(w.proc.poll() is not None for w in pool.workers) or not pool.workers


def test_saved_args_keep_strides_and_offsets(tmp_path):
    from deuteron.autotune.workers import load_args
    base = torch.randn(10, 12)
    view = base[2:, 3:].T  # non-contiguous, offset storage
    p = tmp_path / "a.pt"
    save_args(p, [view, 3, 2.5])
    t, i, f = load_args(str(p), "cpu")
    assert t.stride() == view.stride() and t.storage_offset() == view.storage_offset()
    assert torch.equal(t, view) and i == 3 and f == 2.5


def test_worker_env_has_no_stray_output(tmp_path):
    # a worker never writes protocol frames to stdout (prints cannot corrupt answers)
    assert "DEUTERON_WORKER" not in os.environ


def test_isolated_screening_path_on_the_cpu(monkeypatch, tmp_path):
    """The GPU flow (worker screening, then the oracle, then timing), exercised with interpreter workers."""
    monkeypatch.setenv("DEUTERON_AUTOTUNE_ISOLATE", "1")
    monkeypatch.setenv("DEUTERON_AUTOTUNE_WORKERS", "2")
    log = tmp_path / "log.jsonl"
    scale.autotune_log = str(log)
    try:
        x = torch.randn(700)
        out, ev = events_of(scale, x)
    finally:
        scale.autotune_log = None
    torch.testing.assert_close(out, x * 2)
    status = sorted(e["status"] for e in ev if e["kind"] == "report")
    assert status == ["ok", "wrong", "wrong"]
    assert len(log.read_text().splitlines()) == 3


def test_explicit_autotune_searches_only_the_given_configs(monkeypatch):
    """Regression (seen on the H200): kernel.autotune() without configs= searched the whole space instead of
    the @dt.kernel(configs=[...]) list, unlike the implicit tuning of the first call."""
    monkeypatch.setenv("DEUTERON_AUTOTUNE_CACHE", "0")
    ev = []
    x = torch.randn(1000)
    cfg = scale.autotune(x, callback=ev.append, force=True)
    reports = [e for e in ev if e["kind"] == "report"]
    assert sorted(r["status"] for r in reports) == ["ok", "wrong", "wrong"]
    assert cfg.tunables == {"bug": False} and cfg.block_sizes == [32]


# -- the searches (issue 12): differential evolution and the surrogate, on the interpreter ---------------


@dt.kernel
def _search_softmax(x):
    out = torch.empty_like(x)
    for tile in dt.tile(x.size(0)):
        out[tile, :] = torch.softmax(x[tile, :], dim=-1)
    return out




@pytest.mark.parametrize("algorithm", ["de", "surrogate"])
def test_population_and_model_guided_searches_find_a_correct_config(monkeypatch, tmp_path, algorithm):
    if algorithm == "surrogate":
        pytest.importorskip("sklearn")
    monkeypatch.setenv("DEUTERON_AUTOTUNE_CACHE", "0")
    monkeypatch.setenv("DEUTERON_AUTOTUNE_ALGORITHM", algorithm)
    monkeypatch.setenv("DEUTERON_AUTOTUNE_MAX_CONFIGS", "14")
    log = tmp_path / "log.jsonl"
    _search_softmax.autotune_log = str(log)
    try:
        x = torch.randn(48, 40)
        ev = []
        cfg = _search_softmax.autotune(x, effort="full", callback=ev.append, force=True)
    finally:
        _search_softmax.autotune_log = None
    lines = [json.loads(s) for s in log.read_text().splitlines()]
    keys = [json.dumps(e["config"], sort_keys=True) for e in lines]
    assert len(keys) == len(set(keys))  # no config evaluated twice
    assert 8 <= len(lines) <= 14
    assert any(e["status"] == "ok" for e in lines)
    torch.testing.assert_close(_search_softmax(x), torch.softmax(x, dim=-1))
    assert cfg is not None


def test_genome_round_trips_and_mutants_stay_feasible():
    import random

    from deuteron.autotune.search import Genome
    x = torch.randn(48, 40)
    captured = {}
    from deuteron import autotune as at
    real = at.Tuner.__init__

    def grab(self, kernel, entry, bound, *a, **k):
        captured["space"] = entry.space
        real(self, kernel, entry, bound, *a, **k)
    import unittest.mock as um
    with um.patch.object(at.Tuner, "__init__", grab), um.patch.dict(os.environ, {"DEUTERON_AUTOTUNE_CACHE": "0"}):
        _search_softmax.autotune(x, force=True)
    space = captured["space"]
    rng = random.Random(0)
    g = Genome(space, rng)
    d = space.default()
    assert g.decode(g.encode(d)) == d
    pts = [g.encode(space.random(rng)) for _ in range(6)]
    for _ in range(30):
        m = g.decode(g.mutant(*pts[:4]))
        assert m is None or space.feasible(m)


def test_generated_module_survives_a_cleared_cache_dir(tmp_path, monkeypatch):
    """Tuning workers import a candidate's generated module by its file: after the cache directory is
    cleared (or changed), loading the same source again must give a module whose file exists."""
    import os
    import shutil

    from deuteron import runtime as drt

    src = "X = 41\n"
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "a"))
    m1 = drt.load_module(src, stem="cleared")
    assert os.path.exists(m1.__file__)
    shutil.rmtree(tmp_path / "a")
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "b"))
    m2 = drt.load_module(src, stem="cleared")
    assert os.path.exists(m2.__file__) and m2.X == 41


@pytest.mark.parametrize("compile_tasks", [False, True])
def test_the_next_pattern_batch_is_generated_while_a_batch_finishes(monkeypatch, compile_tasks):
    """Executor path: while a batch's last candidates are timed, the leaders' neighbours are generated (and
    compiled) ahead and the next batch takes them over; with deterministic times the same configs are
    evaluated with speculation on and off (reports come in completion order).  ``compile_tasks``: the GPU path's compile
    tasks (NVRTC for sm_90a in the workers) with the interpreter timing them."""
    import zlib

    from deuteron.autotune import Tuner
    monkeypatch.setenv("DEUTERON_AUTOTUNE_ISOLATE", "1")
    monkeypatch.setenv("DEUTERON_AUTOTUNE_WORKERS", "2")
    monkeypatch.setenv("DEUTERON_AUTOTUNE_MAX_CONFIGS", "30")
    seen = {"ahead": 0, "taken": 0}
    speculate, admit, tasks_of = Tuner._speculate, Tuner._admit, Tuner._tasks_of

    def counting_speculate(self, slots, n_open):
        made = speculate(self, slots, n_open)
        seen["ahead"] += bool(made)
        return made

    def counting_admit(self, cfg, n_open):
        seen["taken"] += cfg.key() in self._pre
        return admit(self, cfg, n_open)

    def gpu_tasks_of(self, c):
        self.gpu = True
        try:
            return tasks_of(self, c)
        finally:
            self.gpu = False

    monkeypatch.setattr(Tuner, "_speculate", counting_speculate)
    monkeypatch.setattr(Tuner, "_admit", counting_admit)
    monkeypatch.setattr(Tuner, "time", lambda self, cfg, b, rep=None: 1.0 + zlib.crc32(cfg.to_json().encode()) % 97)
    if compile_tasks:
        monkeypatch.setattr(Tuner, "_tasks_of", gpu_tasks_of)
    x, y = torch.randn(300, 20), torch.randn(300, 20)
    order = {}
    for spec in ("0", "1"):
        monkeypatch.setenv("DEUTERON_AUTOTUNE_SPECULATE", spec)
        ev = []
        searched.autotune(x, y, callback=ev.append, force=True)
        reports = [e for e in ev if e["kind"] == "report"]
        assert len({r["config"] for r in reports}) == len(reports) and all(r["status"] == "ok" for r in reports)
        order[spec] = sorted(r["config"] for r in reports)
        if spec == "0":
            assert seen == {"ahead": 0, "taken": 0}
    assert order["1"] == order["0"]
    assert seen["ahead"] >= 1 and 1 <= seen["taken"] <= seen["ahead"]
    torch.testing.assert_close(searched(x, y), x * y)


@pytest.mark.parametrize("isolate", ["0", "1"])
def test_a_tune_does_not_keep_each_candidates_arguments(monkeypatch, isolate):
    """Regression (H100, 2026-12-07): every candidate kept the locals of the host run that generated it (its own
    clones of the arguments and the outputs its host code allocated) until the tune ended, so a full-effort tune
    of a 4x32x4096x64 attention (365 candidates) ran out of GPU memory.  The clones made for candidates are
    counted while the tune goes on: at most a few are alive at any report, however many candidates were tried;
    both the serial path and the worker path (the GPU's, with interpreter workers)."""
    import gc
    import weakref
    import zlib

    from deuteron.autotune import Tuner
    from deuteron.oracle import Expected
    monkeypatch.setenv("DEUTERON_AUTOTUNE_ISOLATE", isolate)
    monkeypatch.setenv("DEUTERON_AUTOTUNE_WORKERS", "2")
    monkeypatch.setenv("DEUTERON_AUTOTUNE_MAX_CONFIGS", "14")
    monkeypatch.setattr(Tuner, "time", lambda self, cfg, b, rep=None: 1.0 + zlib.crc32(cfg.to_json().encode()) % 97)
    clones: list = []
    fresh_args = Expected.fresh_args

    def counted(self, poison):
        args, kwargs = fresh_args(self, poison)
        clones.extend(weakref.ref(a) for a in args if isinstance(a, torch.Tensor))
        return args, kwargs

    monkeypatch.setattr(Expected, "fresh_args", counted)
    alive_at_reports = []

    def on_event(e):
        if e["kind"] == "report":
            gc.collect()
            alive_at_reports.append(sum(r() is not None for r in clones))

    x, y = torch.randn(300, 20), torch.randn(300, 20)
    searched.autotune(x, y, callback=on_event, force=True)
    assert len(alive_at_reports) >= 10 and len(clones) >= 20
    # two tensors per set of arguments; a few sets in flight (the one being checked, one generated ahead)
    assert max(alive_at_reports) <= 8, alive_at_reports
