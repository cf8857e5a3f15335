"""The Dask path on a loopback cluster (127.0.0.1 only): same results as the local pool, failures classified."""

from __future__ import annotations

import pytest
import torch

distributed = pytest.importorskip("distributed")

import tune_fakes as F  # noqa: E402

from newt.runtime import compiler  # noqa: E402
from newt.tune import LocalExecutor, compile_all, compile_spec_for, get_executor  # noqa: E402
from newt.tune.cluster import DaskExecutor  # noqa: E402

REF = "tune_fakes:"


@pytest.fixture(scope="module")
def dask_ex():
    import dask
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        ex = DaskExecutor(n_workers=2)
        yield ex
        ex.close()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "cache"))
    compiler.clear_memory_cache()
    yield
    compiler.clear_memory_cache()


def test_loopback_only(dask_ex):
    assert dask_ex.client.scheduler.address.startswith("tcp://127.0.0.1:")
    workers = dask_ex.client.scheduler_info()["workers"]
    assert len(workers) == 2 and all(a.startswith("tcp://127.0.0.1:") for a in workers)
    assert dask_ex.compile_slots == 2 and "compile" in dask_ex._has


def test_failures_are_classified_on_the_cluster(dask_ex):
    out = dask_ex.map(REF + "ok", [1, 2], "compile")
    assert [r["value"] for r in out] == [2, 4]
    assert {r["status"] for r in dask_ex.map(REF + "compile_error", [0])} == {"compile_error"}
    assert dask_ex.map(REF + "oor", [0])[0]["status"] == "out_of_resources"
    assert dask_ex.map(REF + "crash", [0])[0]["status"] == "crashed"
    r = dask_ex.map(REF + "hang", [0], timeout=3)[0]
    assert r["status"] == "timeout"
    # the cluster still works after the crash and the hang
    assert [r["value"] for r in dask_ex.map(REF + "ok", [5, 6])] == [10, 12]


def test_the_cluster_compiles_like_the_local_pool(dask_ex):
    x = torch.empty(4096)
    tasks = [compile_spec_for(F.scale_kernel, (x, x, 4096, 2.0), {"BLOCK": c.kwargs["BLOCK"]}, c.num_warps, 3,
                              target="sm_90a", with_text=True) for c in F.configs()[:4]]
    remote = compile_all(tasks, dask_ex)
    assert all(r["status"] == "ok" and r["worker"].startswith("tcp://127.0.0.1:") for r in remote)
    cubins = [bytes(compiler._MEMORY[r["installed"]].asm["cubin"]) for r in remote]
    compiler.clear_memory_cache()
    with LocalExecutor(compile_workers=2) as ex:
        local = compile_all(tasks, ex)
    assert [r["installed"] for r in local] == [r["installed"] for r in remote] == [t.key for t in tasks]
    assert [bytes(compiler._MEMORY[r["installed"]].asm["cubin"]) for r in local] == cubins


def test_cancel_on_the_cluster(dask_ex):
    import time
    t0 = time.time()
    out = dask_ex.map(REF + "sleep", [20, 20, 20], should_stop=lambda: time.time() - t0 > 1)
    assert [r["status"] for r in out] == ["cancelled"] * 3
    assert dask_ex.pending() == 0


def test_env_var_selects_the_cluster(dask_ex, monkeypatch):
    monkeypatch.setenv("NEWT_TUNE_CLUSTER", dask_ex.client.scheduler.address)
    ex = get_executor()
    try:
        assert isinstance(ex, DaskExecutor) and ex.client.scheduler.address == dask_ex.client.scheduler.address
        assert ex.map(REF + "ok", [3])[0]["value"] == 6
    finally:
        ex.close()


def test_loopback_workers_are_spawned_without_dasks_malloc_trim_threshold(dask_ex):
    """Regression: Dask spawns workers with MALLOC_TRIM_THRESHOLD_=65536, which made NVRTC 1.5-3x slower with two
    workers on two cores; the cluster's env= is applied after the spawn, so the override must be pre-spawn."""
    r = dask_ex.map(REF + "env", ["MALLOC_TRIM_THRESHOLD_", "CUDA_VISIBLE_DEVICES"])
    assert r[0]["status"] == "ok" and r[0]["value"] is None
    assert r[1]["value"] == ""
