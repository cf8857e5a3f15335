"""The worker process: protocol, crashes, hangs, CUDA faults, cancellation, a fresh worker afterwards."""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest

from lsp_server.workers import Worker, WorkerError, worker_env

from .conftest import fixture_path, fixture_text

pytestmark = pytest.mark.timeout(300)


def _interpreter_ready() -> bool:
    try:
        import newt.interpreter as interp
    except Exception:
        return False
    return hasattr(interp, "launch")


needs_interpreter = pytest.mark.skipif(not _interpreter_ready(), reason="newt.interpreter.launch is not there yet")


def _worker(tmp_path) -> Worker:
    return Worker("test", sys.executable, worker_env(str(tmp_path / "cache"), {"NEWT_WORKER_DEVICE": "cpu"}),
                  cwd=str(tmp_path))


def _run(coro):
    return asyncio.run(coro)


def _params(name: str, kernel: str, text: str | None = None) -> dict:
    return {"path": str(fixture_path(name)), "text": text if text is not None else fixture_text(name),
            "kernel": kernel}


def test_hello_and_a_clean_stop(tmp_path):
    async def go():
        w = _worker(tmp_path)
        r = await w.request("hello", {}, timeout=60)
        assert r["pid"] == w.proc.pid and r["newt"]
        await w.stop()
        assert not w.alive
    _run(go())


@needs_interpreter
def test_verify_in_the_worker(tmp_path):
    async def go():
        w = _worker(tmp_path)
        events = []
        try:
            r = await w.request("verify", _params("kernels.py", "add_kernel"), timeout=120,
                                on_event=lambda k, d: events.append((k, d)))
        finally:
            await w.stop()
        assert r["ok"] is True and r["device"] == "interpreter" and len(r["cases"]) == 2
        assert [k for k, _ in events] == ["case", "case"]
    _run(go())


def test_a_crash_is_reported_and_the_next_request_gets_a_fresh_worker(tmp_path):
    async def go():
        w = _worker(tmp_path)
        try:
            with pytest.raises(WorkerError) as ei:
                await w.request("verify", _params("crashy.py", "crash_kernel"), timeout=120)
            assert ei.value.kind == "crash" and "exited with code 7" in str(ei.value)
            r = await w.request("hello", {}, timeout=60)
            assert w.starts == 2 and r["pid"] == w.proc.pid
        finally:
            await w.stop()
    _run(go())


def test_a_hang_past_the_timeout_kills_the_worker(tmp_path):
    async def go():
        w = _worker(tmp_path)
        try:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            with pytest.raises(WorkerError) as ei:
                await w.request("verify", _params("crashy.py", "hang_kernel"), timeout=3)
            assert ei.value.kind == "timeout" and "timed out after 3 s" in str(ei.value)
            assert loop.time() - t0 < 30
            await asyncio.sleep(0.2)
            assert not w.alive
            assert (await w.request("hello", {}, timeout=60))["pid"] == w.proc.pid and w.starts == 2
        finally:
            await w.stop()
    _run(go())


def test_a_fatal_cuda_error_ends_the_worker_after_answering(tmp_path):
    async def go():
        w = _worker(tmp_path)
        try:
            r = await w.request("verify", _params("crashy.py", "fault_kernel"), timeout=120)
            assert r["fatal"] is True and "illegal memory access" in r["cases"][0]["message"]
            pid = w.proc.pid
            await asyncio.wait_for(w.proc.wait(), 10)  # it exits by itself
            r = await w.request("hello", {}, timeout=60)
            assert r["pid"] != pid
        finally:
            await w.stop()
    _run(go())


def test_import_errors_name_the_file_and_line(tmp_path):
    async def go():
        w = _worker(tmp_path)
        try:
            text = fixture_text("kernels.py") + "\nraise RuntimeError('boom at import')\n"
            with pytest.raises(WorkerError) as ei:
                await w.request("verify", _params("kernels.py", "add_kernel", text), timeout=120)
            n = text.count("\n")
            assert ei.value.kind == "import"
            assert f"kernels.py:{n}" in str(ei.value) and "boom at import" in str(ei.value)
            with pytest.raises(WorkerError) as ei:
                await w.request("verify", _params("kernels.py", "add_kernel", "def (:\n"), timeout=120)
            assert ei.value.kind == "import" and "syntax error" in str(ei.value)
            with pytest.raises(WorkerError) as ei:
                await w.request("verify", _params("kernels.py", "nope"), timeout=120)
            assert "defines no 'nope'" in str(ei.value)
            assert w.starts == 1  # user errors do not cost a worker
        finally:
            await w.stop()
    _run(go())


@needs_interpreter
def test_prints_of_the_user_module_do_not_break_the_protocol(tmp_path):
    async def go():
        w = _worker(tmp_path)
        try:
            text = "print('hello from the module')\nimport os\nos.write(1, b'raw fd write\\n')\n" + \
                fixture_text("kernels.py")
            r = await w.request("verify", _params("kernels.py", "add_kernel", text), timeout=120)
            assert r["ok"] is True
            await asyncio.sleep(0.1)
            assert any("hello from the module" in ln for ln in w.stderr_tail)
        finally:
            await w.stop()
    _run(go())


def _slow_tune_file(tmp_path, sleep: float):
    """An autotuned kernel of six configs whose pre-hook sleeps ``sleep`` seconds, with a harness example."""
    src = textwrap.dedent(f"""
        import time
        import newt
        import newt.harness as nh
        import newt.language as nl

        def slow(nargs):
            time.sleep({sleep})

        @newt.autotune(configs=[newt.Config({{"BLOCK": b}}, pre_hook=slow) for b in (16, 32, 64, 128, 256, 512)],
                       key=["n"])
        @newt.jit
        def k(x_ptr, n, BLOCK: nl.constexpr):
            offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
            nl.store(x_ptr + offs, 1.0, mask=offs < n)

        @nh.example(k)
        def ex(device):
            import torch
            return nh.Case(grid=lambda m: (newt.cdiv(512, m["BLOCK"]),), args=(torch.zeros(512, device=device), 512))
    """)
    path = tmp_path / "slow_tune.py"
    path.write_text(src)
    return path, src


@needs_interpreter
def test_autotune_events_and_cancellation(tmp_path):
    path, src = _slow_tune_file(tmp_path, 0.4)

    async def go():
        w = _worker(tmp_path)
        cancel = asyncio.Event()
        events = []

        def on_event(kind, data):
            events.append(data)
            cancel.set()

        try:
            r = await w.request("autotune", {"path": str(path), "text": src, "kernel": "k"}, timeout=120,
                                on_event=on_event, cancel=cancel)
            assert r["cancelled"] is True
            assert 1 <= len(r["results"]) < 6 and len(events) == len(r["results"])
            assert r["cache"] is None
            assert (await w.request("hello", {}, timeout=60))["pid"] == w.proc.pid and w.starts == 1
        finally:
            await w.stop()
    _run(go())


def test_a_python_that_does_not_exist(tmp_path):
    async def go():
        w = Worker("bad", str(tmp_path / "no-python"), worker_env())
        with pytest.raises(WorkerError) as ei:
            await w.request("hello", {}, timeout=10)
        assert ei.value.kind == "start" and "cannot start the worker" in str(ei.value)
    _run(go())


def test_a_crash_quotes_the_last_output_of_the_worker(tmp_path):
    async def go():
        w = _worker(tmp_path)
        text = "import os, sys\nsys.stderr.write('about to die: reason 42\\n')\nsys.stderr.flush()\nos._exit(5)\n"
        try:
            with pytest.raises(WorkerError) as ei:
                await w.request("verify", _params("kernels.py", "add_kernel", text), timeout=120)
            assert ei.value.kind == "crash" and "exited with code 5" in str(ei.value)
            assert "about to die: reason 42" in str(ei.value)
        finally:
            await w.stop()
    _run(go())


def test_the_worker_runs_in_its_folder_but_never_imports_from_it(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = ws / "RAN"
    for name in ("json.py", "pickle.py", "newt/__init__.py", "lsp_server/__init__.py"):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(f"open({str(marker)!r}, 'w').write('x')\nraise ImportError('shadow')\n")

    async def go():
        w = Worker("test", sys.executable, worker_env(str(tmp_path / "cache"), {"NEWT_WORKER_DEVICE": "cpu"}),
                   cwd=str(ws))
        try:
            r = await w.request("hello", {}, timeout=60)
            assert r["newt"] and not r["newt"].startswith(str(ws))
            import os
            assert os.readlink(f"/proc/{r['pid']}/cwd") == str(ws)
        finally:
            await w.stop()
    _run(go())
    assert not marker.exists()


@needs_interpreter
def test_a_cancelled_request_stops_the_worker_between_configs_and_keeps_it(tmp_path):
    path, src = _slow_tune_file(tmp_path, 2.0)

    async def go():
        w = _worker(tmp_path)
        first = asyncio.Event()
        try:
            task = asyncio.ensure_future(w.request("autotune", {"path": str(path), "text": src, "kernel": "k"},
                                                   timeout=120, on_event=lambda k, d: first.set()))
            await asyncio.wait_for(first.wait(), 120)
            pid = w.proc.pid
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            task.cancel()  # the LSP request was cancelled ($/cancelRequest)
            with pytest.raises(asyncio.CancelledError):
                await task
            r = await w.request("hello", {}, timeout=60)  # waits for the cancelled request to stop
            assert r["pid"] == pid and w.starts == 1  # it stopped between configs: the same worker
            assert loop.time() - t0 < 7.5  # not after the 5 configs (>= 10 s) left, nor killed after the grace
        finally:
            await w.stop()
    _run(go())


def test_the_event_loop_keeps_running_while_a_dead_worker_is_collected(tmp_path):
    """A worker that dies while a child of it keeps its output pipe open: collecting it (its exit code, the
    last of its output) waits for the pipe up to a second, on the poller thread; the loop keeps running (a
    ticker every 10 ms measures the longest gap)."""
    text = ("import os, subprocess, sys\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(6)'])  # inherits stderr\n"
            "sys.stderr.write('about to die with a child left\\n')\n"
            "sys.stderr.flush()\n"
            "os._exit(5)\n")

    async def go():
        w = _worker(tmp_path)
        gaps = []
        stop = asyncio.Event()

        async def ticker():
            loop = asyncio.get_running_loop()
            last = loop.time()
            while not stop.is_set():
                await asyncio.sleep(0.01)
                now = loop.time()
                gaps.append(now - last)
                last = now

        t = asyncio.ensure_future(ticker())
        try:
            await w.request("hello", {}, timeout=60)  # started: what is measured is the crash, not the start
            gaps.clear()
            with pytest.raises(WorkerError) as ei:
                await w.request("verify", _params("kernels.py", "add_kernel", text), timeout=120)
            assert ei.value.kind == "crash" and "exited with code 5" in str(ei.value)
        finally:
            stop.set()
            await t
            await w.stop()
        assert gaps and max(gaps) < 0.5, f"the event loop stalled {max(gaps):.2f} s while the worker was collected"
    _run(go())
