"""Every request gets an answer (issue 15, item 5): malformed params are answered InvalidParams, requests
that share a debounced analysis are never answered "cancelled", and while edits stream in, hovers and
completions are answered from the last good analysis, fast.

The full storm (20 edits/s into a 1,000-line file, 10,000 edits) is ``benchmarks/lsp_latency.py --storm``;
CI runs a bounded count (``NEWT_LSP_STORM_EDITS``).
"""

from __future__ import annotations

import asyncio
import os
import random

import pytest

from .conftest import fixture_text, fixture_uri, pos_of, server_env
from .rawclient import RawClient

pytestmark = pytest.mark.timeout(600)

INVALID_PARAMS, CANCELLED = -32602, -32800


@pytest.fixture
async def raw(tmp_path):
    c = RawClient()
    await c.start(env=server_env(tmp_path))
    await c.initialize(root_uri=None, options={"trusted": False, "debounceMs": 50})
    yield c
    await c.stop()
    assert c.proc.returncode == 0, c.stderr.decode(errors="replace")[-3000:]


def _open(raw, name="kernels.py", version=1):
    uri = fixture_uri(name)
    raw.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version,
                                                         "text": fixture_text(name)}})
    return uri


BAD = [
    {},
    {"textDocument": {"uri": "file:///x.py"}},
    {"textDocument": {"uri": "file:///x.py"}, "position": {"line": -1, "character": 0}},
    {"textDocument": {"uri": "file:///x.py"}, "position": {"line": "a", "character": 0}},
    {"position": {"line": 0, "character": 0}},
    [1, 2],
]


@pytest.mark.parametrize("method", ["textDocument/hover", "textDocument/completion", "textDocument/signatureHelp",
                                    "textDocument/inlayHint", "textDocument/codeAction", "textDocument/codeLens",
                                    "textDocument/documentSymbol"])
async def test_malformed_params_are_answered_invalid_params(raw, method):
    uri = _open(raw)
    for params in BAD:
        if method in ("textDocument/codeLens", "textDocument/documentSymbol") and "textDocument" in params:
            continue  # {textDocument} is all these take
        body = await raw.call(method, params, timeout=10)
        assert "error" in body, (method, params, body)
        assert body["error"]["code"] == INVALID_PARAMS, (method, params, body)
        assert method in body["error"]["message"]
    # the server still works
    text = fixture_text("kernels.py")
    p = pos_of(text, "offsets", 2)
    body = await raw.call("textDocument/hover", {"textDocument": {"uri": uri},
                                                 "position": {"line": p.line, "character": p.character}})
    assert "result" in body and body["result"] is not None
    # an unknown method is still MethodNotFound, at once
    body = await raw.call("newt/noSuchThing", {}, timeout=5)
    assert body["error"]["code"] == -32601


async def test_requests_sharing_a_debounced_analysis_are_not_cancelled(raw):
    """Edits replace the debounce timer while hovers wait on the same analysis: none is answered -32800."""
    uri = _open(raw)
    text = fixture_text("kernels.py")
    p = pos_of(text, "offsets", 2)
    futs = []
    version = 1
    for i in range(60):
        version += 1
        raw.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                              "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                                                                            "end": {"line": 0, "character": 0}},
                                                                  "text": "" if i % 2 else "#"}]})
        for m in ("textDocument/hover", "textDocument/codeAction", "textDocument/inlayHint",
                  "textDocument/codeLens"):
            params = {"textDocument": {"uri": uri}, "position": {"line": p.line, "character": p.character}}
            if m == "textDocument/codeAction":
                params = {"textDocument": {"uri": uri}, "range": {"start": {"line": p.line, "character": 0},
                                                                  "end": {"line": p.line, "character": 0}},
                          "context": {"diagnostics": []}}
            elif m in ("textDocument/inlayHint",):
                params = {"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0},
                                                                  "end": {"line": 200, "character": 0}}}
            elif m == "textDocument/codeLens":
                params = {"textDocument": {"uri": uri}}
            futs.append(raw.request(m, params))
        await asyncio.sleep(0.01)
    bodies = [b for b, _t in await asyncio.wait_for(asyncio.gather(*futs), 120)]
    errors = [b["error"] for b in bodies if "error" in b]
    assert errors == [], errors[:5]


STORM_EDITS = int(os.environ.get("NEWT_LSP_STORM_EDITS", "400"))


async def test_fuzzing_client_storm(tmp_path):
    """Random edits at 20/s with hovers, completions, signature help and a few cancelled requests in between:
    no crash, every request answered, no -32800 except for the requests the client cancelled."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    try:
        from lsp_latency import storm
    finally:
        sys.path.pop(0)
    res = await storm(edits=STORM_EDITS, rate=20.0, seed=random.randrange(1 << 30), env=server_env(tmp_path))
    assert res["crashed"] is False, res["stderr_tail"]
    assert res["unanswered"] == 0, res
    assert res["spurious_cancellations"] == 0, res
    assert res["errors"] == [], res["errors"][:5]
    assert res["answered"] >= STORM_EDITS  # at least one request per edit


async def test_user_errors_are_not_logged_as_errors_with_tracebacks(tmp_path):
    """-32002 (here: Compile of a kernel whose constexprs only run-time values give) is one INFO line."""
    from .conftest import ROOT
    c = RawClient()
    await c.start(env=server_env(tmp_path))
    await c.initialize(options={"trusted": True})
    path = ROOT / "examples" / "fused_softmax.py"
    text = path.read_text(encoding="utf-8")
    # without its harness example, which gives the constexprs: then only run-time values give them
    text = text[:text.index("@nh.reference(softmax_kernel)")] + text[text.index("def main("):]
    c.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python", "version": 1,
                                                       "text": text}})
    line = text.splitlines().index(next(ln for ln in text.splitlines() if ln.startswith("def softmax_kernel")))
    body = await c.call("workspace/executeCommand", {"command": "newt.compile", "arguments": [
        {"uri": path.as_uri(), "position": {"line": line, "character": 4}}]}, timeout=120)
    assert body["error"]["code"] == -32002 and body["error"]["data"]["missing"]
    await c.stop()
    log = c.stderr.decode(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    assert " ERROR " not in log, log[-3000:]
    assert "user error -32002" in log


@pytest.mark.parametrize("round_", range(3))
async def test_shutdown_during_analyses_leaves_a_clean_exit(tmp_path, round_):
    """Shut down while analyses run (the engine's forks still hold its stderr): the server exits 0 and asyncio
    reports nothing at exit (a pipe transport collected after the loop closed raised "Event loop is closed")."""
    c = RawClient()
    await c.start(env=server_env(tmp_path))
    await c.initialize(root_uri=None, options={"trusted": False, "debounceMs": 0})
    uri = fixture_uri("kernels.py")
    text = fixture_text("kernels.py")
    c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                       "text": text}})
    for v in range(2, 12):  # a burst of edits: analyses in flight when the shutdown comes
        c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v},
                                            "contentChanges": [{"text": text + "\n" * v}]})
    await asyncio.sleep(0.05 * round_)
    await c.stop()
    log = c.stderr.decode(errors="replace")
    assert c.proc.returncode == 0, log[-3000:]
    assert "Exception ignored" not in log and "Event loop is closed" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
