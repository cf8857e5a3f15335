"""Commands analyze in a fork of the analysis engine, never in the server process (issue 15, item 5).

Show, the generated documents (the CUDA text is code generation: 50-500 ms) and Compile's specialization are
computed by ``commandinfo.command_info`` in a fork of the serving engine; the server's own kernel cache stays
empty and its loop answers other requests meanwhile. ``NEWT_LSP_ENGINE=thread`` keeps the in-process path.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from .conftest import fixture_text, fixture_uri, pos_of, server_env
from .rawclient import RawClient

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="engines need fork")]


def _at(name, kernel):
    p = pos_of(fixture_text(name), f"def {kernel}", delta=4)
    return {"line": p.line, "character": p.character}


async def _start(tmp_path, **env):
    c = RawClient()
    await c.start(env=server_env(tmp_path, **env))
    await c.initialize(root_uri=None, options={"trusted": False, "debounceMs": 30})
    return c


async def _show_and_document(c):
    uri = fixture_uri("kernels.py")
    c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                       "text": fixture_text("kernels.py")}})
    r = await c.call("workspace/executeCommand", {"command": "newt.show", "arguments": [
        {"uri": uri, "position": _at("kernels.py", "scale_rows"), "kind": "cuda"}]})
    doc_uri = r["result"]["uri"]
    t0 = time.perf_counter()
    doc = asyncio.ensure_future(c.call("newt/virtualDocument", {"uri": doc_uri}))
    info = await c.call("newt/serverInfo", {})
    info_at = time.perf_counter() - t0
    body = await doc
    doc_at = time.perf_counter() - t0
    ir = await c.call("workspace/executeCommand", {"command": "newt.show", "arguments": [
        {"uri": uri, "position": _at("kernels.py", "scale_rows"), "kind": "ir"}]})
    ir_doc = await c.call("newt/virtualDocument", {"uri": ir["result"]["uri"]})
    missing = await c.call("workspace/executeCommand", {"command": "newt.show", "arguments": [
        {"uri": uri, "position": {"line": 0, "character": 0}, "kind": "cuda"}]})
    after = (await c.call("newt/serverInfo", {}))["result"]
    return body["result"], ir_doc["result"], missing, info["result"], after, info_at, doc_at


@pytest.mark.parametrize("mode", ["fork", "thread"])
def test_commands_analyze_outside_the_server_process(tmp_path, mode):
    async def go():
        c = await _start(tmp_path, **({"NEWT_LSP_ENGINE": "thread"} if mode == "thread" else {}))
        try:
            return await _show_and_document(c)
        finally:
            await c.stop()

    doc, ir_doc, missing, info, after, info_at, doc_at = asyncio.run(go())
    assert doc["languageId"] == "cuda-cpp" and "scale_rows" in doc["text"]
    assert "scale_rows" in ir_doc["text"]
    assert missing["error"]["code"] == -32002 and "no @newt.jit" in missing["error"]["message"]
    assert after["engine"] == mode
    if mode == "fork":
        # the server process analyzed nothing (its cache is the in-process path's), and answered serverInfo
        # while the fork generated the document
        assert after["kernel_cache"]["entries"] == 0
        assert info_at < doc_at
    else:
        assert after["kernel_cache"]["entries"] > 0
