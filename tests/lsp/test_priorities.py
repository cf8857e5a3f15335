"""Requests stay fast on a busy machine (issue 23): background work yields to requests.

The mechanism, tested deterministically (the figures are ``benchmarks/lsp_latency.py --storm 2500 --rate 50
--hogs 2``; no timed assertion here beyond generous sanity bounds):

* an analysis fork analyzes in a thread at the background priority (``lsp_server/priority.py``): lower than the
  protocol process and the answering engine, whose main thread keeps its priority when the fork takes over;
* while an analysis is in flight (its fork stopped with SIGSTOP), hover, inlay hints and code lens are answered
  from the last finished analysis, moved through the edits, without waiting for it; a hover at a position only
  the new analysis knows waits for it, but once the user typed on only a bounded time, then answers nothing;
  the client is asked to refresh inlay hints once the text's own analysis is out;
* a burst of edits causes a bounded number of analyses; a warm-up superseded by an edit is killed.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import threading

import pytest
from lsprotocol import types as lsp

from lsp_server import priority
from lsp_server.documents import Documents, text_offset
from lsp_server.positions import LineIndex

from .conftest import ROOT, server_env
from .rawclient import RawClient, published, server_info, wait_published

LINUX = sys.platform.startswith("linux")
needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="engines need fork")


def _lowered(prio):
    """What background work started from a thread at ``prio`` (nice, policy) runs at."""
    nice, policy = prio
    return min(19, nice + priority.BACKGROUND_NICE), os.SCHED_BATCH if policy == os.SCHED_OTHER else policy


# -- the priority API ----------------------------------------------------------------------------------------------
@pytest.mark.skipif(not LINUX, reason="per-thread priorities are Linux's")
def test_run_in_background_lowers_only_its_own_thread():
    mine = priority.thread_priority()
    seen = {}

    def work(x):
        seen["tid"] = threading.get_native_id()
        seen["prio"] = priority.thread_priority()
        return x * 2

    assert priority.run_in_background(work, 21) == 42
    assert seen["tid"] != threading.get_native_id()
    assert seen["prio"] == _lowered(mine) and priority.BACKGROUND_NICE > 0
    assert priority.thread_priority() == mine  # the caller keeps its priority


def test_run_in_background_hands_back_the_exception():
    def boom():
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        priority.run_in_background(boom)


@pytest.mark.skipif(not LINUX, reason="per-thread priorities are Linux's")
def test_background_preexec_lowers_a_child_process():
    import subprocess
    out = subprocess.run([sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0), "
                          "os.sched_getscheduler(0))"], preexec_fn=priority.background_preexec,
                         capture_output=True, text=True, check=True).stdout.split()
    assert (int(out[0]), int(out[1])) == _lowered(priority.thread_priority())


# -- answers moved through the edits ---------------------------------------------------------------------------------
class _A:
    def __init__(self, text, version):
        self.text, self.version, self.index = text, version, LineIndex(text)


def test_forward_lines_moves_unchanged_lines_and_drops_edited_ones():
    text = "".join(f"line{i}\n" for i in range(10))
    d = Documents()
    d.open("u", text, 1)
    a = _A(text, 1)
    d.change("u", 2, [{"range": [2, 0, 2, 0], "text": "new\nnew\n"}])  # two lines inserted before line 2
    d.change("u", 3, [{"range": [7, 1, 7, 2], "text": "X"}])  # old line 5 (now 7) edited in place
    fwd = d.forward_lines(a, "u")
    assert [fwd(i) for i in range(10)] == [0, 1, None, 5, 6, None, 8, 9, 10, 11]
    new = d.get("u")[0].split("\n")
    for old in (0, 1, 3, 4, 6, 9):
        assert new[fwd(old)] == f"line{old}"
    d.change("u", 4, [{"range": None, "text": "whole"}])
    assert d.forward_lines(a, "u") is None  # no map across a whole-document change


def test_text_offset_is_the_line_index_offset():
    import random
    rng = random.Random(7)
    for text in ("ab\u00e9\U0001F600c\nxy\n\nz", "a\nb\n", "", "x\ny", "a\r\nb\rc\n", "é" * 5 + "\n" + "x" * 3):
        for enc in ("utf-16", "utf-8", "utf-32"):
            idx = LineIndex(text, enc)
            for _ in range(300):
                p = lsp.Position(rng.randint(0, text.count("\n") + 2), rng.randint(0, 9))
                assert text_offset(text, p, enc) == idx.offset(p), (text, p, enc)


# -- through the server ----------------------------------------------------------------------------------------------
def _file(n_kernels: int = 30) -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from frontend import make_big_file
    finally:
        sys.path.pop(0)
    return make_big_file(n_kernels, 1500)


async def _start(tmp_path, refresh=False, **env):
    c = RawClient()
    await c.start(env=server_env(tmp_path, **env))
    if refresh:  # a client that can be asked to refresh inlay hints and code lenses
        caps = {"textDocument": {"hover": {"contentFormat": ["markdown"]}, "inlayHint": {}, "codeLens": {},
                                 "publishDiagnostics": {"versionSupport": True}},
                "workspace": {"configuration": False, "inlayHint": {"refreshSupport": True},
                              "codeLens": {"refreshSupport": True}}}
        await c.call("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": caps,
                                    "clientInfo": {"name": "Visual Studio Code", "version": "1.0"},
                                    "initializationOptions": {"trusted": False, "debounceMs": 30}}, timeout=60)
        c.notify("initialized", {})
    else:
        await c.initialize(options={"trusted": False, "debounceMs": 30})
    return c




def _edit(c, uri, version, line, text, end_line=None):
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [
        {"range": {"start": {"line": line, "character": 0},
                   "end": {"line": line if end_line is None else end_line, "character": 0}}, "text": text}]})


async def _stop_the_analysis(c, uri, first_version, edit):
    """Send edits (``edit(version)``) until the fork analyzing one is caught and stopped (SIGSTOP) before it
    published; returns (its pid, that version)."""
    version = first_version
    for _attempt in range(8):
        version += 1
        edit(version)
        for _ in range(800):
            job = (await server_info(c))["memory"]["job"]
            if job and job["kind"] == "analyze" and job["version"] == version and job["pid"]:
                os.kill(job["pid"], signal.SIGSTOP)
                if not published(c, uri, version):
                    return job["pid"], version
                os.kill(job["pid"], signal.SIGCONT)
                break
            if published(c, uri, version):
                break
            await asyncio.sleep(0.003)
    pytest.skip("every analysis finished before the test could stop it")


def _threads(pid: int) -> dict:
    """tid -> (nice, scheduling policy) of every thread of ``pid``, from /proc."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out[int(tid)] = (int(fields[16]), int(fields[38]))  # fields 19 (nice) and 41 (policy) of proc(5)
    return out


@needs_fork
@pytest.mark.skipif(not LINUX, reason="per-thread priorities are Linux's")
@pytest.mark.timeout(300)
async def test_the_analysis_runs_below_the_protocol_process_and_the_answering_engine(tmp_path):
    text = _file()
    uri = "file:///tmp/newt_prio_test/big.py"
    c = await _start(tmp_path)
    try:
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        await wait_published(c, uri, 1)
        info = await server_info(c)
        server = _threads(info["pid"])[info["pid"]]  # the protocol process's (nice, policy): the test runner's
        serving = info["memory"]["serving_pid"]
        assert all(t == server for t in _threads(serving).values())
        pid, version = await _stop_the_analysis(c, uri, 1, lambda v: _edit(c, uri, v, 0, f"X{v} = {v}\n"))
        try:
            for _ in range(2000):  # stopped before its analysis thread started: let it run a moment
                if len(_threads(pid)) > 1 or published(c, uri, version):
                    break
                os.kill(pid, signal.SIGCONT)
                await asyncio.sleep(0.001)
                os.kill(pid, signal.SIGSTOP)
            if len(_threads(pid)) == 1:
                pytest.skip("the analysis finished before the test could see its thread")
            # a thread caught before its first statement (the one that lowers it) still has its creator's
            # priority: let it run a moment at a time until it has lowered itself (or the analysis is done)
            for _ in range(2000):
                if any(p != server for tid, p in _threads(pid).items() if tid != pid) or published(c, uri, version):
                    break
                os.kill(pid, signal.SIGCONT)
                await asyncio.sleep(0.001)
                os.kill(pid, signal.SIGSTOP)
            threads = _threads(pid)
            if len(threads) == 1:
                pytest.skip("the analysis finished before the test could see its thread lowered")
            low = {tid: p for tid, p in threads.items() if tid != pid}
            # the fork's main thread (it answers once the fork serves) keeps the engine's priority; the thread
            # that analyzes runs lower: a higher nice value and SCHED_BATCH
            assert threads[pid] == server
            assert list(low.values()) == [_lowered(server)] and _lowered(server) != server
            assert _threads(info["pid"])[info["pid"]] == server  # the protocol process
        finally:
            os.kill(pid, signal.SIGCONT)
        await wait_published(c, uri, version)
        for _ in range(500):  # the fork took over: it answers at the engine's priority, its analysis thread ended
            if (await server_info(c))["memory"]["serving_pid"] == pid and len(_threads(pid)) == 1:
                break
            await asyncio.sleep(0.02)
        assert _threads(pid) == {pid: server}
    finally:
        await c.stop()


@needs_fork
@pytest.mark.timeout(300)
async def test_requests_are_answered_from_the_last_analysis_while_one_is_in_flight(tmp_path):
    """With the fork of the new version stopped: inlay hints and code lenses come at once from the last
    analysis, moved down by the inserted lines (none on the edited line); a hover on a line only the new
    version has waits, and once the text changed again answers nothing; once the analysis is out, the client is
    asked to refresh inlay hints and code lenses."""
    text = _file()
    uri = "file:///tmp/newt_prio_test/moved.py"
    lines = text.split("\n")
    c = await _start(tmp_path, refresh=True)
    try:
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        await wait_published(c, uri, 1)
        whole = {"start": {"line": 0, "character": 0}, "end": {"line": len(lines) + 50, "character": 0}}
        hints0 = (await c.call("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": whole}))["result"]
        lens0 = (await c.call("textDocument/codeLens", {"textDocument": {"uri": uri}}))["result"]
        assert hints0 and lens0
        inserted = []

        def edit(v):  # a new line at the top each time: every later line moves down by one
            inserted.append(v)
            _edit(c, uri, v, 0, f"X{v} = {v}\n")
        pid, version = await _stop_the_analysis(c, uri, 1, edit)
        try:
            info = await server_info(c)
            analyzed = max(v for v in [1, *inserted] if published(c, uri, v))
            shift = sum(1 for v in inserted if v > analyzed)
            assert shift >= 1
            hints = (await c.call("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": whole},
                                  timeout=20))["result"]
            lens = (await c.call("textDocument/codeLens", {"textDocument": {"uri": uri}}, timeout=20))["result"]
            assert not published(c, uri, version)  # answered while the analysis is still stopped
            if analyzed == 1:
                assert [(h["position"]["line"], h["position"]["character"], h["label"]) for h in hints] == \
                    [(h["position"]["line"] + shift, h["position"]["character"], h["label"]) for h in hints0]
                assert [(x["range"]["start"]["line"], x["command"]["arguments"][1]["line"]) for x in lens] == \
                    [(x["range"]["start"]["line"] + shift, x["command"]["arguments"][1]["line"] + shift)
                     for x in lens0]
            else:
                assert len(hints) == len(hints0) and len(lens) == len(lens0)
            # a hover on the line typed since the last analysis: only the stopped one could answer it; it waits
            # while the text stays as it is, and gives up once the user typed on (and MISS_WAIT_S passed)
            expired = info["memory"]["answers"]["wait_expired"]
            fut = c.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                   "position": {"line": 0, "character": 1}})
            await asyncio.sleep(0.6)
            assert not fut.done()
            _edit(c, uri, version + 1, len(lines) + 10, "")  # an empty change past the end: a new version
            body, _t = await asyncio.wait_for(fut, 20)
            assert body["result"] is None
            assert (await server_info(c))["memory"]["answers"]["wait_expired"] == expired + 1
            refreshes = [r for r in c.server_requests if r["method"] in ("workspace/inlayHint/refresh",
                                                                          "workspace/codeLens/refresh")]
        finally:
            os.kill(pid, signal.SIGCONT)
        await wait_published(c, uri, version)
        for _ in range(500):
            got = {r["method"] for r in c.server_requests if r["method"] in ("workspace/inlayHint/refresh",
                                                                              "workspace/codeLens/refresh")}
            if len(got) == 2:
                break
            await asyncio.sleep(0.02)
        assert got == {"workspace/inlayHint/refresh", "workspace/codeLens/refresh"}
        assert not refreshes  # not before the text's own analysis was out
        # and the fresh answers are of the text as it is
        hints = (await c.call("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": whole}))["result"]
        assert len(hints) == len(hints0)
    finally:
        await c.stop()


@needs_fork
@pytest.mark.timeout(300)
async def test_a_burst_of_edits_causes_a_bounded_number_of_analyses(tmp_path):
    """50 keystrokes sent at once: the analyses run one at a time, each of the text as it is when it starts, so
    the burst costs at most a few (not one per keystroke)."""
    text = _file(10)
    uri = "file:///tmp/newt_prio_test/burst.py"
    c = await _start(tmp_path)
    try:
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        await wait_published(c, uri, 1)
        before = (await server_info(c))["analyses"]["count"]
        line = next(i for i, ln in enumerate(text.split("\n")) if re.match(r"\s+\w+ = ", ln))
        for k in range(50):
            c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2 + k}, "contentChanges": [
                {"range": {"start": {"line": line, "character": 4}, "end": {"line": line, "character": 4}},
                 "text": "a"}]})
        await wait_published(c, uri, 51)
        await asyncio.sleep(0.5)
        info = await server_info(c)
        assert 1 <= info["analyses"]["count"] - before <= 4, info["analyses"]
        assert info["texts"][0]["version"] == 51
    finally:
        await c.stop()


def test_stdin_frames_cost_one_thread_hand_over_per_read():
    """The protocol process reads stdin on a thread: a frame's header lines and body come from one read, not a
    hand-over (a wake-up of the event loop) each."""
    import io
    import json
    from concurrent.futures import ThreadPoolExecutor

    from lsp_server.transport import StdinReader, run_async

    class Counting(ThreadPoolExecutor):
        calls = 0

        def submit(self, *a, **k):
            Counting.calls += 1
            return super().submit(*a, **k)

    class Proto:
        handled: list = []

        def structure_message(self, d):
            import types
            return types.SimpleNamespace(**d) if "jsonrpc" in d else d

        def handle_message(self, m):
            self.handled.append(m)

        def _send_data(self, data):
            raise AssertionError(data)

    frames = b""
    for i in range(20):
        body = json.dumps({"jsonrpc": "2.0", "method": f"m{i}"}).encode()
        frames += b"Content-Length: %d\r\n\r\n" % len(body) + body
    proto = Proto()
    with Counting(max_workers=1) as ex:
        asyncio.run(asyncio.wait_for(run_async(threading.Event(), StdinReader(io.BytesIO(frames), ex), proto), 30))
    assert [m.method for m in proto.handled] == [f"m{i}" for i in range(20)]
    assert Counting.calls <= 2  # the frames, then the end of the stream (was 3 per frame)
