"""Conformance of the base protocol and the lifecycle (issue 22, items 5 and 7), against the real server
process over stdio (``python -m lsp_server``), with the exact bytes a test wants:

* header forms: ``Content-Length`` in any case, LF-only line ends, ``Content-Type`` and unknown headers, no
  space after the colon; a frame without a ``Content-Length`` is skipped and the server still hears the next;
* a body that is not JSON gets ``-32700`` (``"id": null``), a JSON value that is not a message ``-32600``;
* a request before ``initialize`` gets ``-32002`` at once, a notification then is dropped;
* after ``shutdown`` a request gets ``-32600``; ``exit`` then ends the process with code 0, ``exit`` without
  ``shutdown`` with code 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import pytest

from .conftest import server_env
from .rawclient import RawClient

pytestmark = pytest.mark.timeout(120)

#: how long an answer that must come at once may take (the server answers these without analysis)
PROMPT = 10.0


def _body(msg) -> bytes:
    return json.dumps(msg).encode("utf-8")


def _frame(body: bytes, header: str = "Content-Length: {n}\r\n\r\n") -> bytes:
    return header.format(n=len(body)).encode("ascii") + body


async def _start(tmp_path) -> RawClient:
    c = RawClient()
    await c.start(sys.executable, "-m", "lsp_server", env=server_env(tmp_path / "cache"), cwd=str(tmp_path))
    return c


async def _exit_code(c: RawClient, timeout: float = 30.0) -> int:
    rc = await asyncio.wait_for(c.proc.wait(), timeout)
    for t in (c._reader, c._err):
        t.cancel()
    return rc


async def _request_raw(c: RawClient, method: str, header: str, rid: int, params=None) -> dict:
    fut = asyncio.get_running_loop().create_future()
    c.pending[rid] = (fut, method, 0.0)
    msg = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    c.proc.stdin.write(_frame(_body(msg), header))
    body, _ = await asyncio.wait_for(fut, PROMPT)
    return body


async def _unmatched(c: RawClient, n: int = 1) -> list:
    loop = asyncio.get_running_loop()
    end = loop.time() + PROMPT
    while len(c.unmatched) < n:
        assert loop.time() < end, "no answer with a null id"
        await asyncio.sleep(0.02)
    return c.unmatched[:n]


HEADERS = {
    "canonical": "Content-Length: {n}\r\n\r\n",
    "lower-case": "content-length: {n}\r\n\r\n",
    "upper-case": "CONTENT-LENGTH: {n}\r\n\r\n",
    "LF only": "Content-Length: {n}\n\n",
    "lower-case, LF only": "content-length: {n}\n\n",
    "with Content-Type": "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: {n}\r\n\r\n",
    "unknown header, no space": "X-Anything: 1\r\nContent-Length:{n}\r\n\r\n",
    "blank lines before": "\r\n\r\nContent-Length: {n}\r\n\r\n",
}


async def test_header_forms(tmp_path):
    c = await _start(tmp_path)
    try:
        await c.initialize()
        for i, (name, header) in enumerate(HEADERS.items()):
            try:
                body = await _request_raw(c, "newt/serverInfo", header, 1000 + i, {})
                assert "result" in body, body
                # the server is not deaf afterwards: the next frame (canonical) is answered too
                assert "result" in await c.call("newt/serverInfo", {}, timeout=PROMPT)
            except (AssertionError, asyncio.TimeoutError) as e:
                raise AssertionError(f"header form {name!r}: {e!r}") from None
    finally:
        await c.stop()


async def test_a_frame_without_content_length_is_skipped_and_the_next_is_heard(tmp_path):
    c = await _start(tmp_path)
    try:
        await c.initialize()
        c.proc.stdin.write(b"Content-Type: application/vscode-jsonrpc\r\n\r\n")
        c.proc.stdin.write(b"Content-Length: twelve\r\n\r\n")
        c.proc.stdin.write(b"X-" + b"a" * 20000 + b": overlong\r\n\r\n")
        assert "result" in await c.call("newt/serverInfo", {}, timeout=PROMPT)
    finally:
        await c.stop()


MALFORMED = {
    "garbage": (b"{not json", -32700),
    "truncated": (b'{"jsonrpc": "2.0", "id": 5, "method": "newt/serverInfo"', -32700),
    "not utf-8": (b'{"jsonrpc": "2.0", "id": 5, "method": "x\xff\xfe"}', -32700),
    "array": (b"[1, 2]", -32600),
    "number": (b"42", -32600),
    "no jsonrpc": (b'{"id": "raw-7", "method": "newt/serverInfo"}', -32600),
}


async def test_malformed_bodies_are_answered(tmp_path):
    c = await _start(tmp_path)
    try:
        await c.initialize()
        for name, (body, code) in MALFORMED.items():
            c.unmatched.clear()
            c.proc.stdin.write(_frame(body))
            try:
                (err,) = await _unmatched(c)
                assert err["error"]["code"] == code, err
                assert err["id"] == ("raw-7" if b'"raw-7"' in body else None), err
                assert "result" in await c.call("newt/serverInfo", {}, timeout=PROMPT)
            except (AssertionError, asyncio.TimeoutError) as e:
                raise AssertionError(f"body {name!r}: {e!r}") from None
    finally:
        await c.stop()


async def test_requests_before_initialize_get_server_not_initialized(tmp_path):
    c = await _start(tmp_path)
    try:
        c.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///tmp/early.py", "languageId": "python",
                                                           "version": 1, "text": "x = 1\n"}})
        body = await c.call("textDocument/hover", {"textDocument": {"uri": "file:///tmp/early.py"},
                                                   "position": {"line": 0, "character": 0}}, timeout=PROMPT)
        assert body["error"]["code"] == -32002, body
        body = await c.call("newt/serverInfo", {}, timeout=PROMPT)
        assert body["error"]["code"] == -32002, body
        r = await c.initialize()
        assert "capabilities" in r["result"]
        assert "result" in await c.call("newt/serverInfo", {}, timeout=PROMPT)
    finally:
        await c.stop()


async def test_after_shutdown_requests_are_invalid_and_exit_is_0(tmp_path):
    c = await _start(tmp_path)
    await c.initialize()
    body = await c.call("shutdown", None, timeout=60)
    assert body.get("result", "missing") is None and "error" not in body, body
    body = await c.call("newt/serverInfo", {}, timeout=PROMPT)
    assert body["error"]["code"] == -32600, body
    body = await c.call("textDocument/hover", {"textDocument": {"uri": "file:///tmp/x.py"},
                                               "position": {"line": 0, "character": 0}}, timeout=PROMPT)
    assert body["error"]["code"] == -32600, body
    c.notify("exit")
    assert await _exit_code(c) == 0


@pytest.mark.parametrize("initialized", [True, False], ids=["after initialize", "before initialize"])
async def test_exit_without_shutdown_is_1(tmp_path, initialized):
    c = await _start(tmp_path)
    if initialized:
        await c.initialize()
    c.notify("exit")
    assert await _exit_code(c) == 1


def _children(pid: int) -> set[int]:
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.add(int(d))
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
async def test_exit_without_shutdown_leaves_no_child_running(tmp_path):
    """An ``exit`` with no ``shutdown`` while the engine and the workers start: the server exits and no process
    it started outlives it."""
    c = await _start(tmp_path)
    await c.initialize()
    deadline = time.monotonic() + 20
    kids: set[int] = set()
    while time.monotonic() < deadline and not kids:
        kids = _children(c.proc.pid)
        await asyncio.sleep(0.05)
    assert kids, "the server started no engine or worker after initialize"
    c.notify("exit")
    assert await _exit_code(c, timeout=15.0) == 1
    for _ in range(100):
        if not any(_alive(k) for k in kids):
            break
        await asyncio.sleep(0.05)
    assert not [k for k in kids if _alive(k)], kids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# -- the reader alone (no server process) ------------------------------------------------------------------------

class _Proto:
    def __init__(self):
        self.handled, self.sent = [], []

    def structure_message(self, d):
        import types
        return types.SimpleNamespace(**d) if "jsonrpc" in d else d

    def handle_message(self, m):
        self.handled.append(m.method)

    def _send_data(self, data):
        self.sent.append(data)


def _run_reader(data: bytes) -> _Proto:
    import io
    import threading

    from lsp_server.transport import StdinReader, run_async
    proto = _Proto()
    asyncio.run(asyncio.wait_for(run_async(threading.Event(), StdinReader(io.BytesIO(data)), proto), 30))
    return proto


def test_the_reader_dispatches_every_header_form():
    frames = b"".join(_frame(_body({"jsonrpc": "2.0", "method": f"m{i}"}), h) for i, h in enumerate(HEADERS.values()))
    proto = _run_reader(frames)
    assert proto.handled == [f"m{i}" for i in range(len(HEADERS))] and proto.sent == []


def test_a_huge_content_length_costs_only_what_arrives():
    ok = _frame(_body({"jsonrpc": "2.0", "method": "first"}))
    proto = _run_reader(ok + b"Content-Length: 1000000000000\r\n\r\n{\"jsonrpc\": \"2.0\"}")
    assert proto.handled == ["first"]  # then the end of the input, no MemoryError
