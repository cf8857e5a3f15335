"""Start-up costs of the executor: preloaded workers, shared executors reused across tunes, the in-process
ThreadExecutor, timing inputs made once per worker."""

from __future__ import annotations

import pytest
import torch
import tune_fakes as F

from newt.runtime import compiler
from newt.tune import (
    ArgSpec,
    LocalExecutor,
    ThreadExecutor,
    close_shared,
    compile_all,
    compile_spec_for,
    shared_executor,
)
from newt.tune import tasks as T

REF = "tune_fakes:"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NEWT_TUNE_CLUSTER", raising=False)
    monkeypatch.delenv("NEWT_TUNE_EXECUTOR", raising=False)
    compiler.clear_memory_cache()
    yield
    close_shared()
    T.forget_made_args()
    compiler.clear_memory_cache()


def test_workers_run_their_preload_before_the_first_task():
    with LocalExecutor(compile_workers=1, gpus=[], compile_env={"NEWT_TUNE_PRELOAD": REF + "mark"}) as ex:
        ex.start(("compile",))
        assert ex.started("compile") and not ex.started("time")
        r = ex.map(REF + "env", ["CUDA_VISIBLE_DEVICES"])[0]
    assert r["status"] == "ok" and r["marked"] is True
    assert r["value"] == ""  # compile workers never see a GPU


def test_a_failing_preload_does_not_stop_the_worker():
    with LocalExecutor(compile_workers=1, gpus=[], compile_env={"NEWT_TUNE_PRELOAD": "no_such_module_x:f"}) as ex:
        r = ex.map(REF + "ok", [4])[0]
    assert r["status"] == "ok" and r["value"] == 8


def test_shared_executors_are_reused_and_keyed_by_options():
    assert shared_executor("local", create=False, gpus=[]) is None
    a = shared_executor("local", compile_workers=1, gpus=[])
    assert shared_executor("local", compile_workers=1, gpus=[]) is a
    assert shared_executor("local", create=False, compile_workers=1, gpus=[]) is a
    b = shared_executor("local", compile_workers=2, gpus=[])
    assert b is not a
    first = a.map(REF + "ok", [1, 2])
    pids = {r["pid"] for r in first}
    again = a.map(REF + "ok", [3, 4])  # a second tune: the same (warm) worker processes
    assert {r["pid"] for r in again} == pids
    close_shared()
    assert shared_executor("local", create=False, compile_workers=1, gpus=[]) is None


def test_thread_executor_compiles_in_threads_and_times_in_this_process():
    x = torch.empty(4096)
    args = (x, x, 4096, 2.0)
    tasks = [compile_spec_for(F.scale_kernel, args, {"BLOCK": b}, 4, 3, target="sm_90a") for b in (128, 256, 512)]
    ex = ThreadExecutor(compile_threads=2)
    try:
        res = compile_all(tasks, ex)
        assert [r["status"] for r in res] == ["ok"] * 3 and {r["worker"] for r in res} == {"thread"}
        assert all(r["installed"] == t.key for r, t in zip(res, tasks))
        tid = ex.submit(REF + "ok", 5, "time")
        got = []
        while ex.pending():
            got += ex.poll(0.01)
        assert got == [(tid, got[0][1])] and got[0][1]["value"] == 10 and got[0][1]["worker"] == "main"
    finally:
        ex.close()


def test_timing_inputs_are_made_once_per_worker_and_bounded(monkeypatch):
    a = torch.empty(64, 32, dtype=torch.float16)
    s1, s2 = ArgSpec.of(a, seed=1), ArgSpec.of(a, seed=2)
    t1 = T.made_arg(s1, "cpu")
    assert T.made_arg(ArgSpec.of(a, seed=1), "cpu") is t1  # the same spec: the same tensor, not made again
    assert torch.equal(T.made_arg(s2, "cpu"), s2.make("cpu")) and not torch.equal(t1, T.made_arg(s2, "cpu"))
    idx = ArgSpec.of(torch.tensor([3, 1, 2]))
    assert torch.equal(T.made_arg(idx, "cpu"), torch.tensor([3, 1, 2]))
    monkeypatch.setenv("NEWT_TUNE_ARG_CACHE_MB", "0")  # nothing fits: made every time, nothing kept
    T.forget_made_args()
    assert T.made_arg(s1, "cpu") is not T.made_arg(s1, "cpu") and not T._MADE


def test_poisoned_and_fp8_inputs_are_made():
    p = ArgSpec.of(torch.empty(8), poison=True).make("cpu")
    assert torch.isnan(p).all()
    if hasattr(torch, "float8_e4m3fn"):
        f = ArgSpec.of(torch.empty(8, dtype=torch.float8_e4m3fn), seed=3).make("cpu")
        assert f.dtype == torch.float8_e4m3fn and f.shape == (8,)
