"""The process pool's features for long tasks with fake workers: events while a task runs, a timeout counted
from the last event, a cooperative cancel with a grace period, the output tail in crash messages, another
interpreter, an environment and a working directory, an isolated start."""

from __future__ import annotations

import os
import sys
import time

import pytest

from newt.tune.workers import ProcessPool, worker_env

REF = "tune_fakes:"
HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = pytest.mark.timeout(120)


def _wait(pool, n=1, limit=60.0):
    got, t0 = [], time.monotonic()
    while len(got) < n and time.monotonic() - t0 < limit:
        got += pool.poll(0.1)
    return got


def test_events_reach_the_callback_of_their_task_in_order():
    with ProcessPool(2, timeout=60) as pool:
        seen: dict = {0: [], 1: []}
        a = pool.submit((REF + "steps", 3), on_event=lambda k, d: seen[0].append((k, d)))
        b = pool.submit((REF + "steps", 2), on_event=lambda k, d: seen[1].append((k, d)))
        res = {tid: r for tid, _, r in _wait(pool, 2)}
        assert res[a]["value"] == 3 and res[b]["value"] == 2
        assert seen[0] == [("step", {"i": 0}), ("step", {"i": 1}), ("step", {"i": 2})]
        assert seen[1] == [("step", {"i": 0}), ("step", {"i": 1})]


def test_the_timeout_counts_from_the_last_event():
    with ProcessPool(1, timeout=60) as pool:
        pool.submit((REF + "slow_steps", 4), timeout=2.5)  # 4 s in all, an event every second
        (_, _, r), = _wait(pool)
        assert r["status"] == "ok" and r["value"] == 4
        t0 = time.monotonic()
        pool.submit((REF + "hang", 0), timeout=1.5)  # no events: cut off
        (_, _, r), = _wait(pool)
        assert r["status"] == "timeout" and time.monotonic() - t0 < 20


def test_a_cooperative_cancel_stops_between_steps_and_keeps_the_worker():
    with ProcessPool(1, timeout=60) as pool:
        events = []
        tid = pool.submit((REF + "steps", 100), on_event=lambda k, d: events.append(d))
        while not events:
            pool.poll(0.1)
        pid = pool.workers[0].pid
        assert pool.cancel_task(tid, grace=30)
        (rtid, _, r), = _wait(pool)
        assert rtid == tid and r["status"] == "ok" and r["stopped"] is True and r["cancelled"] is True
        assert r["value"] < 100
        assert pool.workers[0].pid == pid and pool.restarts == 0  # the same warm worker runs the next task
        pool.submit((REF + "ok", 2))
        (_, _, r), = _wait(pool)
        assert r["value"] == 4 and r["pid"] == pid


def test_a_task_that_ignores_the_cancel_is_killed_after_the_grace_period():
    with ProcessPool(1, timeout=60) as pool:
        tid = pool.submit((REF + "ignore_cancel", 0))
        t0 = time.monotonic()
        while pool.worker_of(tid) is None and time.monotonic() - t0 < 30:
            pool.poll(0.05)
        pid = pool.workers[0].pid
        pool.cancel_task(tid, grace=1.0)
        (rtid, _, r), = _wait(pool)
        assert rtid == tid and r["status"] == "cancelled" and "did not stop within 1 s" in r["message"]
        assert 0.9 < time.monotonic() - t0 < 20
        assert pool.workers[0].pid != pid and pool.restarts == 1


def test_cancelling_a_queued_task_drops_it():
    with ProcessPool(1, timeout=60) as pool:
        first = pool.submit((REF + "sleep", 0.5))
        second = pool.submit((REF + "ok", 1))
        assert pool.cancel_task(second) and not pool.cancel_task(12345)
        res = {tid: r for tid, _, r in _wait(pool, 2)}
        assert res[second]["status"] == "cancelled" and res[first]["status"] == "ok"


def test_a_crash_message_quotes_the_workers_last_output():
    lines = []
    with ProcessPool(1, timeout=60, on_output=lambda name, line: lines.append((name, line))) as pool:
        pool.submit((REF + "noisy_crash", 0))
        (_, _, r), = _wait(pool)
        assert r["status"] == "crashed" and r["exit_code"] == 9
        assert "exited with code 9" in r["message"] and "exit code 9" in r["message"]
        assert "the reason it is about to die" in r["message"] and "a line on stdout" in r["output"]
        assert ("w0", "the reason it is about to die") in lines


def test_another_interpreter_an_environment_and_a_working_directory(tmp_path):
    link = tmp_path / "py"
    os.symlink(sys.executable, link)  # "another" interpreter: a different path to run
    env = worker_env({"NEWT_TEST_SLOT": "base"})
    with ProcessPool(1, timeout=60, python=str(link), env=env, cwd=str(tmp_path),
                     envs=[{"NEWT_TEST_SLOT": "slot"}]) as pool:
        pool.submit((REF + "where", 0))
        (_, _, r), = _wait(pool)
        assert r["status"] == "ok", r
        assert r["executable"] == str(link) and r["cwd"] == str(tmp_path) and r["slot"] == "slot"


def test_a_missing_interpreter_is_an_error():
    with pytest.raises(OSError):
        ProcessPool(1, python="/nonexistent/python3").start()


def test_an_isolated_worker_never_imports_from_its_folder(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = ws / "RAN"
    for name in ("json.py", "tune_fakes.py"):
        (ws / name).write_text(f"open({str(marker)!r}, 'w').write('x')\nraise ImportError('shadow')\n")
    env = worker_env()
    with ProcessPool(1, timeout=60, env=env, cwd=str(ws), isolated=True, handler=REF + "handle") as pool:
        seen = []
        pool.submit({"a": 1}, on_event=lambda k, d: seen.append((k, d)))
        (_, _, r), = _wait(pool)
        assert r["status"] == "ok" and r["value"] == {"a": 1} and seen == [("got", {"a": 1})]
        pool.submit({"b": 2})
        _wait(pool)
    assert not marker.exists()
    with ProcessPool(1, timeout=60, env=env, cwd=str(ws), isolated=True) as pool:
        pool.submit((REF + "where", 0))
        (_, _, r), = _wait(pool)
        assert r["cwd"] == str(ws) and not r["json"].startswith(str(ws))
    assert not marker.exists()


def test_without_respawn_an_ended_worker_is_replaced_by_the_next_task():
    with ProcessPool(1, timeout=60, respawn=False) as pool:
        pool.submit((REF + "crash", 0))
        (_, _, r), = _wait(pool)
        assert r["status"] == "crashed" and pool.workers == []
        pool.submit((REF + "ok", 1))
        (_, _, r), = _wait(pool)
        assert r["value"] == 2 and len(pool.workers) == 1 and pool.starts == 2


def test_a_worker_killed_by_a_signal_says_which():
    with ProcessPool(1, timeout=60) as pool:
        pool.submit((REF + "killed", 0))
        (_, _, r), = _wait(pool)
        assert r["status"] == "crashed" and r["exit_code"] == -9 and "was killed by SIGKILL" in r["message"]
