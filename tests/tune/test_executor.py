"""The tuning executor with fake workers (hangs, crashes, wrong results), cancellation, the serial path."""

from __future__ import annotations

import os
import time

import pytest
import torch
import tune_fakes as F

from newt.runtime import compiler
from newt.tune import (
    AdaptiveTimeout,
    LocalExecutor,
    SerialExecutor,
    TuneProgress,
    classify,
    compile_all,
    compile_spec_for,
    get_executor,
)
from newt.tune.workers import ProcessPool

REF = "tune_fakes:"


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NEWT_TUNE_CLUSTER", raising=False)
    monkeypatch.delenv("NEWT_TUNE_EXECUTOR", raising=False)
    compiler.clear_memory_cache()
    yield
    compiler.clear_memory_cache()


def _alive(pid) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_every_failure_is_classified_and_never_stops_the_rest():
    names = ["ok", "hang", "crash", "compile_error", "oor", "fault", "boom", "ok", "wrong"]
    ex = LocalExecutor(compile_workers=2)
    try:
        res = ex.map(REF + "ok", [], "compile")  # nothing to do: nothing starts
        assert res == [] and not ex._pools
        ids = {}
        for i, n in enumerate(names):
            ids[ex.submit(REF + n, i, "compile", timeout=3 if n == "hang" else 60)] = n
        got, n = {}, 0
        t0 = time.time()
        while n < len(ids) and time.time() - t0 < 120:
            for tid, r in ex.poll(0.2):
                got[ids[tid]] = got.get(ids[tid], []) + [r]
                n += 1
        status = {n: [r["status"] for r in rs] for n, rs in got.items()}
        assert status == {"ok": ["ok", "ok"], "hang": ["timeout"], "crash": ["crashed"],
                          "compile_error": ["compile_error"], "oor": ["out_of_resources"], "fault": ["fault"],
                          "boom": ["error"], "wrong": ["ok"]}, got
        assert "exit code 7" in got["crash"][0]["message"]
        assert "ValueError: something else" in got["boom"][0]["message"] and got["boom"][0]["traceback"]
        pool = ex._pools["compile"]
        assert pool.restarts >= 3  # the hang, the crash and the fault each replaced their worker
        assert len(pool.workers) == 2 and all(w.proc.poll() is None for w in pool.workers)
        assert {r["worker"] for rs in got.values() for r in rs} <= {"compile0", "compile1"}
    finally:
        ex.close()


def test_wrong_results_are_classified_by_the_check():
    ex = LocalExecutor(compile_workers=2)
    try:
        calls = [("ok", 1), ("wrong", 2), ("ok", 3)]
        out = [ex.map(REF + n, [x], "compile")[0] for n, x in calls]
    finally:
        ex.close()
    # the caller's check (deuteron: the eager oracle) turns a result that differs into "wrong"
    checked = [r if r["value"] == 2 * x else {**r, "status": "wrong"} for r, (_, x) in zip(out, calls)]
    assert [r["status"] for r in checked] == ["ok", "wrong", "ok"]


def test_map_keeps_the_order_and_reports_each_result():
    seen = []
    with LocalExecutor(compile_workers=2) as ex:
        out = ex.map(REF + "sleep", [0.3, 0.0, 0.2, 0.0], "compile", on_result=lambda i, r: seen.append(i))
    assert [r["value"] for r in out] == [0.3, 0.0, 0.2, 0.0]
    assert sorted(seen) == [0, 1, 2, 3] and seen != [0, 1, 2, 3]  # reported as they finished


def test_cancel_stops_every_worker():
    ex = LocalExecutor(compile_workers=2)
    t0 = time.time()
    stop = lambda: time.time() - t0 > 2
    out = ex.map(REF + "hang", list(range(5)), "compile", should_stop=stop)
    assert [r["status"] for r in out] == ["cancelled"] * 5
    assert not ex._pools  # every pool is gone
    ex.close()


def test_an_exception_in_the_caller_kills_the_workers():
    ex = LocalExecutor(compile_workers=2)
    pids = []

    def on_result(i, r):
        pids.append(r["pid"])
        raise KeyboardInterrupt

    ex.submit(REF + "ok", 0)  # start the pool
    procs = []
    t0 = time.time()
    while not procs and time.time() - t0 < 60:
        procs = [w.proc for w in ex._pools["compile"].workers]
    with pytest.raises(KeyboardInterrupt):
        ex.map(REF + "sleep", [0.0, 30, 30, 30], "compile", on_result=on_result)
    assert not ex._pools
    time.sleep(0.5)
    assert not any(_alive(p.pid) for p in procs)
    ex.close()


def test_the_pool_replaces_dead_workers_in_their_slot():
    envs = [{"NEWT_TEST_SLOT": "a"}, {"NEWT_TEST_SLOT": "b"}]
    with ProcessPool(2, envs=envs, timeout=60) as pool:
        pool.submit((REF + "crash", 0))
        t0 = time.time()
        res = []
        while not res and time.time() - t0 < 60:
            res = pool.poll(0.2)
        assert res[0][2]["status"] == "crashed"
        assert sorted(w.slot for w in pool.workers) == [0, 1]


def test_adaptive_timeout():
    t = AdaptiveTimeout(initial=120, quantile=0.9, factor=5, floor=1, min_samples=4)
    assert t.current() == 120 and not t.adapted
    for s in (0.5, 0.4, 0.6, 0.5):
        t.observe(s)
    assert t.adapted and t.current() == pytest.approx(3.0)
    t.observe(100)
    assert t.current() == 120  # capped at the initial value
    t2 = AdaptiveTimeout(initial=60, floor=2, min_samples=2)
    t2.observe(0.01)
    t2.observe(0.01)
    assert t2.current() == 2  # never below the floor


def test_an_adapted_timeout_cuts_off_a_slow_task():
    t = AdaptiveTimeout(initial=120, factor=5, floor=1.5, min_samples=2)
    with LocalExecutor(compile_workers=2) as ex:
        ex.map(REF + "ok", [0, 1], "compile")  # workers started: their first task's imports are not counted
        out = ex.map(REF + "sleep", [0.05] * 6 + [60], "compile", timeout=t)  # 4 in flight: the 7th adapted
    assert [r["status"] for r in out] == ["ok"] * 6 + ["timeout"]
    assert out[-1]["seconds"] < 10


def test_classify():
    from newt import CompilationError
    from newt.runtime.errors import OutOfResources
    assert classify(CompilationError([], extra="x"))["status"] == "compile_error"
    assert classify(OutOfResources("k", "shared memory", 2, 1))["status"] == "out_of_resources"
    assert classify(RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access"))["fatal"]
    assert classify(KeyboardInterrupt())["status"] == "cancelled"


def test_progress_events_and_no_tqdm(monkeypatch):
    import newt.tune.progress as P
    monkeypatch.setattr(P, "have_tqdm", lambda: False)
    ev = []
    p = TuneProgress("k", 3, callback=ev.append, bar=True)
    p.begin()
    p.report("c1", "ok", 2.0, worker="compile0")
    p.report("c2", "timeout", None, worker="compile1")
    p.report("c3", "ok", 1.0, worker="gpu0")
    p.end()
    assert [e["kind"] for e in ev] == ["begin", "report", "report", "report", "end"]
    assert ev[-2]["best_ms"] == 1.0 and ev[-2]["best_config"] == "c3" and ev[2]["worker"] == "compile1"
    assert ev[-1]["failed"] == 1 and ev[-1]["tested"] == 3


def test_tqdm_bar(monkeypatch):
    pytest.importorskip("tqdm")
    import io
    s = io.StringIO()
    p = TuneProgress("k", 2, bar=True, stream=s)
    p.report("c1", "ok", 2.0, worker="compile0")
    p.end()
    assert "tune k" in s.getvalue()


def test_get_executor(monkeypatch):
    assert isinstance(get_executor("serial"), SerialExecutor)
    monkeypatch.setenv("NEWT_TUNE_EXECUTOR", "serial")
    assert isinstance(get_executor(), SerialExecutor)
    monkeypatch.delenv("NEWT_TUNE_EXECUTOR")
    assert isinstance(get_executor(), LocalExecutor)
    with pytest.raises(ValueError, match="unknown executor"):
        get_executor("nope")


def test_without_distributed_the_cluster_path_says_how_to_get_it(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "distributed", None)
    monkeypatch.setenv("NEWT_TUNE_CLUSTER", "tcp://127.0.0.1:8786")
    with pytest.raises(ImportError, match=r"newt\[cluster\]"):
        get_executor()


# -- real compilation -------------------------------------------------------------------------------


def _tasks():
    x = torch.empty(4096)
    return [compile_spec_for(F.scale_kernel, (x, x, 4096, 2.0), {"BLOCK": c.kwargs["BLOCK"]}, c.num_warps, 3,
                             target="sm_90a") for c in F.configs()[:4]]


def _summary(results):
    out = []
    for r in results:
        ck = compiler._MEMORY[r["installed"]]
        out.append((r["status"], r["installed"], ck.metadata.n_regs, ck.asm["cuda"], bytes(ck.asm["cubin"])))
    return out


def test_results_identical_to_the_serial_path():
    tasks = _tasks()
    assert all(t is not None and t.key for t in tasks)
    serial = _summary(compile_all(tasks, SerialExecutor()))
    compiler.clear_memory_cache()
    with LocalExecutor(compile_workers=2) as ex:
        par = compile_all(tasks, ex)
    assert {r["worker"] for r in par} <= {"compile0", "compile1"}
    assert _summary(par) == serial
    assert [s[1] for s in serial] == [t.key for t in tasks]


def test_the_main_process_only_loads_what_the_workers_compiled(monkeypatch):
    tasks = _tasks()
    with LocalExecutor(compile_workers=2) as ex:
        compile_all(tasks, ex)

    def no_build(*a, **k):
        raise AssertionError("compiled again in the main process")
    monkeypatch.setattr(compiler, "build", no_build)
    for t in tasks:
        ck = compiler.compile_specialization(F.scale_kernel, t.arg_types, t.constexprs, t.hints, t.target,
                                             t.num_warps, t.num_stages, fingerprint=F.scale_kernel.fingerprint())
        assert ck.cache_key == t.key
    # and the disk cache has them (another process finds them there)
    compiler.clear_memory_cache()
    t = tasks[0]
    ck = compiler.compile_specialization(F.scale_kernel, t.arg_types, t.constexprs, t.hints, t.target,
                                         t.num_warps, t.num_stages, fingerprint=F.scale_kernel.fingerprint())
    assert ck.cache_key == t.key


def test_closures_cannot_be_sent_and_compile_in_process():
    import newt
    import newt.language as nl

    @newt.jit
    def local_kernel(x_ptr, BLOCK: nl.constexpr):
        nl.store(x_ptr + nl.arange(0, BLOCK), 1.0)
    assert compile_spec_for(local_kernel, (torch.empty(16),), {"BLOCK": 16}, 4, 3) is None


def test_autotune_compiles_its_configs_in_the_workers(monkeypatch):
    """``@newt.autotune(executor="local")``: every config is compiled by a worker, the main only loads."""
    x = torch.empty(4096)
    at = F.tuned_scale
    built = []
    real = compiler.build
    monkeypatch.setattr(compiler, "build", lambda *a, **k: built.append(a) or real(*a, **k))
    monkeypatch.setenv("NEWT_TARGET", "sm_90a")
    got = list(at._compiled(at.configs, (x, x, 4096, 2.0), {}))
    assert got and sorted(map(str, got)) == sorted(map(str, at.configs))
    assert not at.failed_configs and not built
    at.executor.close()


def test_arg_specs_rebuild_tensors_from_a_seed():
    from newt.tune import ArgSpec
    base = torch.randn(10, 12)
    view = base[2:, 3:].T
    idx = torch.tensor([3, 1, 2])
    s = [ArgSpec.of(view, seed=5), ArgSpec.of(idx), ArgSpec.of(7)]
    a, b, c = [x.make("cpu") for x in s]
    assert a.shape == view.shape and a.stride() == view.stride() and a.storage_offset() == view.storage_offset()
    assert torch.equal(a, s[0].make("cpu"))  # the same seed, the same values
    assert torch.equal(b, idx) and c == 7  # integer tensors (indices) are shipped, not invented


@pytest.mark.gpu
def test_time_tasks_run_on_gpu_workers():
    from newt.tune import ArgSpec, KernelRef, TimeTask, visible_gpus
    if not visible_gpus():
        pytest.skip("no GPU")
    x = torch.empty(1 << 20)
    ref = KernelRef.of(F.scale_kernel)
    tasks = [TimeTask(ref, [ArgSpec.of(x, 1), ArgSpec.of(x, 2), 1 << 20, 2.0], {"BLOCK": b, "num_warps": 4},
                      grid=((1 << 20) // b,), use_cuda_graph=g) for b in (256, 1024) for g in (False, True)]
    with LocalExecutor(compile_workers=1) as ex:
        out = ex.map("newt.tune.tasks:time_task", tasks, "time")
    assert all(r["status"] == "ok" and r["ms"] > 0 for r in out), out
    assert {r["worker"] for r in out} <= {f"gpu{i}" for i in range(len(visible_gpus()))}
    hopeless = TimeTask(ref, tasks[0].args, tasks[0].kwargs, grid=tasks[0].grid, cutoff_ms=1e-6)
    with LocalExecutor(compile_workers=1) as ex:
        assert ex.map("newt.tune.tasks:time_task", [hopeless], "time")[0]["status"] == "hopeless"
