"""The analysis engines (issue 15, item 5): analysis runs in a fork of the engine that answers, so answers never
wait for analysis CPU; a dead engine is replaced; no engine outlives the server; ``NEWT_LSP_ENGINE=thread``
keeps the old in-process analysis."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from lsp_server.documents import Documents

from .conftest import ROOT, fixture_text, fixture_uri, pos_of, server_env
from .rawclient import RawClient, published, server_info, wait_published

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="engines need fork")]


def _big_file() -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from frontend import make_big_file
    finally:
        sys.path.pop(0)
    return make_big_file(60, 3000)


async def _start(tmp_path, **env):
    c = RawClient()
    await c.start(env=server_env(tmp_path, **env))
    await c.initialize(root_uri=None, options={"trusted": False, "debounceMs": 30, "logLevel": "debug"})
    return c




def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and ("Z" in line.split()[1] or "X" in line.split()[1])
                           for line in f)
    except OSError:
        return False


async def test_hover_is_answered_while_the_analysis_fork_is_stopped(tmp_path):
    """Freeze the fork that analyzes the new version (SIGSTOP): hovers on unchanged lines are still answered, from
    the last finished analysis, with the right contents; the diagnostics of the new version come once it runs."""
    text = _big_file()
    uri = "file:///tmp/newt_engine_test/big.py"
    c = await _start(tmp_path)
    try:
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        await wait_published(c, uri, 1)
        info = await server_info(c)
        assert info["engine"] == "fork" and info["torch_imported"] is False
        target = pos_of(text, "offs = ", 5)
        stopped = None
        version = 1
        for _attempt in range(5):  # catch the fork while it analyzes (it takes ~1 s for 60 edited kernels)
            version += 1
            # a new first line shifts every kernel: each is analyzed again
            c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                                                                              "end": {"line": 0, "character": 0}},
                                                                    "text": f"X{version} = {version}\n"}]})
            for _ in range(400):
                job = (await server_info(c))["memory"]["job"]
                if job and job["kind"] == "analyze" and job["version"] == version and job["pid"]:
                    stopped = job["pid"]
                    os.kill(stopped, signal.SIGSTOP)
                    break
                if published(c, uri, version):
                    break
                await asyncio.sleep(0.005)
            if stopped is not None and not published(c, uri, version):
                break
            if stopped is not None:
                os.kill(stopped, signal.SIGCONT)
                stopped = None
        if stopped is None:
            pytest.skip("the analysis finished before the test could stop it")
        assert (await server_info(c))["memory"]["serving_pid"] != stopped
        try:
            line = target.line + (version - 1)  # the lines the edits inserted above
            for _ in range(5):
                try:
                    body = await c.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {
                        "line": line, "character": target.character}}, timeout=30)
                except asyncio.TimeoutError:
                    log = "\n".join(ln for ln in c.stderr.decode(errors="replace").splitlines() if "pygls" not in ln)
                    raise AssertionError(f"no hover while the analysis was stopped:\n{log[-3000:]}") from None
                assert body["result"] is not None, body
                value = body["result"]["contents"]["value"]
                assert "offs" in value and "i32[" in value, value
                assert body["result"]["range"]["start"]["line"] == line
            assert not published(c, uri, version)  # the stopped fork holds the new version's analysis
        finally:
            os.kill(stopped, signal.SIGCONT)
        await wait_published(c, uri, version)
    finally:
        await c.stop()


async def test_a_killed_engine_is_replaced_and_no_engine_outlives_the_server(tmp_path):
    uri = fixture_uri("kernels.py")
    text = fixture_text("kernels.py")
    c = await _start(tmp_path)
    c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                       "text": text}})
    await wait_published(c, uri, 1)
    pids = (await server_info(c))["memory"]["engine_pids"]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    p = pos_of(text, "offsets", 2)
    body = await c.call("textDocument/hover", {"textDocument": {"uri": uri},
                                               "position": {"line": p.line, "character": p.character}}, timeout=60)
    assert body["result"] is not None and "offsets" in body["result"]["contents"]["value"]
    info = await server_info(c)
    assert info["memory"]["engine_starts"] == 2
    new_pids = info["memory"]["engine_pids"]
    assert new_pids and not set(new_pids) & set(pids)
    assert "the analysis engine exited; starting a new one" in c.stderr.decode(errors="replace")
    await c.stop()
    assert c.proc.returncode == 0
    for _ in range(100):
        if not any(_alive(p) for p in new_pids):
            break
        await asyncio.sleep(0.05)
    assert not any(_alive(p) for p in new_pids), "an engine outlived the server"


async def test_thread_mode_analyzes_in_the_server(tmp_path):
    uri = fixture_uri("kernels.py")
    text = fixture_text("kernels.py")
    c = await _start(tmp_path, NEWT_LSP_ENGINE="thread")
    try:
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        await wait_published(c, uri, 1)
        info = await server_info(c)
        assert info["engine"] == "thread" and info["memory"] == {}
        p = pos_of(text, "offsets", 2)
        body = await c.call("textDocument/hover", {"textDocument": {"uri": uri},
                                                   "position": {"line": p.line, "character": p.character}})
        assert "offsets" in body["result"]["contents"]["value"]
    finally:
        await c.stop()


class _A:
    def __init__(self, text, version):
        from lsp_server.positions import LineIndex
        self.text, self.version, self.index = text, version, LineIndex(text)


def test_same_token_position_maps_a_word_left_of_the_edit():
    d = Documents()
    old = "a = 1\n    offs = x + y\nb = 2\n"
    d.open("u", old, 1)
    a = _A(old, 1)
    # typing at the end of line 1 (after ``offs``): the word and what follows it are unchanged
    d.change("u", 2, [{"range": [1, 16, 1, 16], "text": " * 2"}])
    assert d.stale_position(a, "u", lsp.Position(1, 5)) is None  # the line changed
    assert d.same_token_position(a, "u", lsp.Position(1, 5)) == (lsp.Position(1, 5), 0)
    # a line inserted above moves it
    d.change("u", 3, [{"range": [0, 0, 0, 0], "text": "z = 0\n"}])
    assert d.same_token_position(a, "u", lsp.Position(2, 5)) == (lsp.Position(1, 5), 1)
    # an edit inside the word: no mapping
    d.change("u", 4, [{"range": [2, 6, 2, 6], "text": "2"}])
    assert d.same_token_position(a, "u", lsp.Position(2, 5)) is None


def test_engine_module_imports_no_torch():
    import subprocess
    code = ("import sys, lsp_server.engine, lsp_server.engine_host; "
            "print('torch' in sys.modules, any(m.startswith('cuda') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=server_env(),
                         cwd=str(Path(ROOT)), timeout=60)
    assert out.stdout.split() == ["False", "False"], out.stderr


async def test_a_result_id_from_an_earlier_server_never_answers_unchanged(tmp_path):
    """Clients keep pull-diagnostic result ids across a server restart (code-server did): the new server must
    send the full report for a reopened document, not "unchanged" (that left VS Code with no diagnostics)."""
    uri = fixture_uri("broken.py")
    text = fixture_text("broken.py")
    ids = []
    for _ in range(2):
        c = RawClient()
        await c.start(env=server_env(tmp_path))
        await c.initialize(root_uri=None, options={"trusted": False, "debounceMs": 30}, pull=True)
        try:
            c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                               "text": text}})
            params = {"textDocument": {"uri": uri}}
            if ids:
                params["previousResultId"] = ids[-1]
            r = (await c.call("textDocument/diagnostic", params, timeout=60))["result"]
            assert r["kind"] == "full" and r["items"], r
            ids.append(r["resultId"])
            # the same server, the same analysis: unchanged
            again = (await c.call("textDocument/diagnostic", dict(params, previousResultId=r["resultId"])))["result"]
            assert again["kind"] == "unchanged"
        finally:
            await c.stop()
    assert ids[0] != ids[1]
