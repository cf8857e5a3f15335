"""The compiled launcher is built in the background when the timing workers start (no GPU needed)."""

from __future__ import annotations

import threading

import newt.tune.executor as ex


def test_prebuild_builds_the_launcher_once_in_a_thread(monkeypatch):
    from newt.runtime import clauncher
    calls = []
    done = threading.Event()

    def module():
        calls.append(threading.current_thread().name)
        done.set()

    monkeypatch.setattr(clauncher, "module", module)
    monkeypatch.setattr(clauncher, "enabled", lambda: True)
    monkeypatch.setattr(ex, "_PREBUILT", [])
    ex.prebuild_launcher()
    assert done.wait(10)
    ex.prebuild_launcher()  # once per process
    assert calls == ["newt-tune-launcher"]


def test_prebuild_respects_newt_c_launcher_off(monkeypatch):
    from newt.runtime import clauncher
    calls = []
    monkeypatch.setattr(clauncher, "module", lambda: calls.append(1))
    monkeypatch.setenv("NEWT_C_LAUNCHER", "0")
    monkeypatch.setattr(ex, "_PREBUILT", [])
    ex.prebuild_launcher()
    for t in threading.enumerate():
        if t.name == "newt-tune-launcher":
            t.join(10)
    assert calls == []
