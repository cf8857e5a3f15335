"""The compiled launcher's build and its fallbacks (its launches are tested in test_launch.py, which runs
every launch test through both launchers)."""

from __future__ import annotations

import importlib.machinery
import os
import stat
import sys
import tempfile

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


# -- issue 22, item 1: with the disk cache off the launcher is built under the shared temporary directory;
# -- a directory or shared object planted there by another user is never used

def _fake_compiler(src, out):
    return [sys.executable, "-c", "import sys; open(sys.argv[1], 'wb').write(b'built here')", str(out)]


def _planted(tmp_path, fresh, mode=0o777, uid=None):
    launcher = tmp_path / f"newt-{os.geteuid()}" / "launcher"
    launcher.mkdir(parents=True)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    so = launcher / f"{fresh.MODULE_NAME}_{fresh._tag(fresh.SOURCE.read_bytes())}{suffix}"
    so.write_bytes(b"planted by another user")
    for p in (launcher.parent, launcher):
        os.chmod(p, mode)
        if uid is not None:
            os.chown(p, uid, uid)
    return launcher, so


@pytest.fixture
def cache_off(fresh, monkeypatch, tmp_path):
    monkeypatch.setenv("NEWT_DISABLE_CACHE", "1")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(fresh, "_session_dir", [], raising=False)
    monkeypatch.setattr(fresh, "compiler_command", _fake_compiler)
    return fresh


@pytest.mark.parametrize("how", ["another owner", "a symbolic link"])
def test_a_planted_launcher_directory_is_not_used(cache_off, tmp_path, how):
    if how == "another owner":
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        launcher, so = _planted(tmp_path, cache_off, mode=0o755, uid=12345)
    else:  # $TMPDIR/newt-<uid> is a link to a directory the other user controls
        elsewhere = tmp_path / "elsewhere"
        launcher, so = _planted(elsewhere, cache_off)
        (tmp_path / f"newt-{os.geteuid()}").symlink_to(launcher.parent)
    with pytest.warns(RuntimeWarning, match="private temporary directory"):
        built = cache_off.build()
    assert built != so and launcher not in built.parents and launcher.resolve() not in built.resolve().parents
    assert built.read_bytes() == b"built here" and so.read_bytes() == b"planted by another user"
    st = built.parent.stat()
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700


def test_a_world_writable_directory_of_ours_is_closed_and_a_planted_object_replaced(cache_off, tmp_path):
    """Our own ``newt-<uid>`` made world-writable (or by another newt under umask 0): the write bits go, and a
    shared object someone else put there (another owner, or writable by others) is rebuilt, not loaded."""
    launcher, so = _planted(tmp_path, cache_off, mode=0o777)
    if os.geteuid() == 0:
        os.chown(so, 12345, 12345)
    else:
        os.chmod(so, 0o666)
    built = cache_off.build()
    assert built == so and built.read_bytes() == b"built here"
    assert built.stat().st_uid == os.geteuid() and stat.S_IMODE(built.stat().st_mode) == 0o755
    for d in (launcher, launcher.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o755  # 0o777 without the group/other write bits


def test_a_cache_directory_others_may_write_is_left_alone(fresh, monkeypatch, tmp_path):
    cache_dir = tmp_path / "shared-cache"
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o777)
    monkeypatch.setenv("NEWT_CACHE_DIR", str(cache_dir))
    monkeypatch.delenv("NEWT_DISABLE_CACHE", raising=False)
    monkeypatch.setattr(fresh, "_session_dir", [], raising=False)
    monkeypatch.setattr(fresh, "compiler_command", _fake_compiler)
    with pytest.warns(RuntimeWarning, match="chmod go-w"):
        built = fresh.build()
    assert cache_dir not in built.parents and stat.S_IMODE(cache_dir.stat().st_mode) == 0o777


def test_the_shared_launcher_directory_is_made_private(cache_off, tmp_path):
    built = cache_off.build()
    assert built.parent == tmp_path / f"newt-{os.geteuid()}" / "launcher"
    for d in (built.parent, built.parent.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE(built.stat().st_mode) == 0o755


@pytest.mark.parametrize("bad", ["group-writable", "symlink", "another owner", "fifo"])
def test_load_refuses_a_shared_object_others_could_change(fresh, tmp_path, bad):
    target = tmp_path / "real.so"
    target.write_bytes(b"x")
    os.chmod(target, 0o644)
    so = tmp_path / "ext.so"
    if bad == "group-writable":
        so.write_bytes(b"x")
        os.chmod(so, 0o664)
    elif bad == "symlink":
        so.symlink_to(target)
    elif bad == "fifo":
        os.mkfifo(so)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        so.write_bytes(b"x")
        os.chown(so, 12345, 12345)
    from newt.runtime.cache import UnsafePathError
    with pytest.raises(UnsafePathError):
        fresh.load(so)
