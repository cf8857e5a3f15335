"""The compiled launcher's build and its fallbacks (its launches are tested in test_launch.py, which runs
every launch test through both launchers)."""

from __future__ import annotations

import pytest
import torch

from newt.runtime import clauncher, driver

from . import kernels as K


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(clauncher, "_state", {})
    return clauncher


def test_disabled_by_the_environment(fresh, monkeypatch):
    monkeypatch.setenv("NEWT_C_LAUNCHER", "0")
    assert fresh.module() is None
    assert fresh.status() == "pure Python (NEWT_C_LAUNCHER=0)"


def test_a_failed_build_falls_back_with_the_reason(fresh, monkeypatch, tmp_path):
    monkeypatch.setattr(fresh, "_build_dir", lambda: tmp_path / "launcher")
    monkeypatch.setattr(fresh, "compiler_command", lambda src, out: None)
    assert fresh.module() is None
    assert "no C compiler" in fresh.status()
    assert not list((tmp_path / "launcher").glob("*.tmp"))  # nothing half-written left behind


def test_the_build_is_content_addressed_and_reused(fresh, monkeypatch, tmp_path):
    if fresh.compiler_command(fresh.SOURCE, tmp_path / "x.so") is None:
        pytest.skip("no C compiler here")
    so = fresh.build(tmp_path)
    assert so.exists() and so.name.startswith("_newt_launch_")
    mtime = so.stat().st_mtime_ns
    assert fresh.build(tmp_path) == so and so.stat().st_mtime_ns == mtime
    mod = fresh.load(so)
    assert hasattr(mod, "Launcher") and mod.MAX_PARAMS >= 64


def test_without_a_driver_entry_the_python_launcher_is_used(fake_gpu, fake_backend, cuda_ok):
    # the fake driver has no cuGetProcAddress: launches go through cuda.bindings' cuLaunchKernel from Python
    assert driver.launch_entry() is None
    x = torch.randn(16)
    K.add_kernel.clear_cache()
    K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)
    (ln,) = K.add_kernel._cache.values()
    assert ln.compiled is None and ln.launch is ln.py_launch
    assert fake_gpu.launches[-1].values == (x.data_ptr(),) * 3 + (16,)
    K.add_kernel.clear_cache()
