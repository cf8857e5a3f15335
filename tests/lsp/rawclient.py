"""A bare JSON-RPC client over stdio: sends exactly the bytes a test wants (malformed params included, which
pytest-lsp's typed client cannot send) and records when every answer arrives."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time


class RawClient:
    def __init__(self):
        self.proc: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self.pending: dict = {}  # id -> (future, method, sent_at)
        self.notifications: list = []  # (method, params, time)
        self.server_requests: list = []
        self.unmatched: list = []  # responses whose id is no pending request's (null for a parse error)
        self._reader: asyncio.Task | None = None
        self.on_notification = None
        self.stderr = bytearray()

    async def start(self, *cmd, env=None, cwd=None):
        self.proc = await asyncio.create_subprocess_exec(
            *(cmd or (sys.executable, "-m", "lsp_server")), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env or dict(os.environ), cwd=cwd)
        self._reader = asyncio.ensure_future(self._read())
        self._err = asyncio.ensure_future(self._read_stderr())

    async def _read_stderr(self):
        while True:
            chunk = await self.proc.stderr.read(65536)
            if not chunk:
                return
            self.stderr += chunk
            if len(self.stderr) > 2_000_000:
                del self.stderr[:1_000_000]

    async def _read(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = await out.readline()
                if not line:
                    self._fail_all(ConnectionError("the server closed its stdout"))
                    return
                line = line.strip()
                if not line:
                    break
                k, _, v = line.decode("ascii").partition(":")
                if k.lower() == "content-length":
                    length = int(v)
            body = json.loads(await out.readexactly(length))
            now = time.perf_counter()
            if "id" in body and ("result" in body or "error" in body) and "method" not in body:
                got = self.pending.pop(body["id"], None)
                if got is not None and not got[0].done():
                    got[0].set_result((body, now))
                elif got is None:  # an answer to no request of ours ("id": null: a parse error...)
                    self.unmatched.append(body)
            elif "id" in body and "method" in body:  # a request from the server: answer it
                self.server_requests.append(body)
                result = None
                if body["method"] == "workspace/configuration":
                    result = [None for _ in body.get("params", {}).get("items", [])]
                self._write({"jsonrpc": "2.0", "id": body["id"], "result": result})
            else:
                self.notifications.append((body.get("method"), body.get("params"), now))
                if self.on_notification is not None:
                    self.on_notification(body.get("method"), body.get("params"), now)

    def _fail_all(self, exc):
        for fut, _m, _t in self.pending.values():
            if not fut.done():
                fut.set_exception(exc)
        self.pending.clear()

    def _write(self, msg):
        data = json.dumps(msg).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)

    def request(self, method, params=None) -> asyncio.Future:
        """Send a request; the future resolves to (response body, arrival time)."""
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self.pending[rid] = (fut, method, time.perf_counter())
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self._write(msg)
        fut.rid = rid
        fut.sent = self.pending[rid][2]
        return fut

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._write(msg)

    async def call(self, method, params=None, timeout=30.0):
        body, _ = await asyncio.wait_for(self.request(method, params), timeout)
        return body

    async def initialize(self, root_uri=None, options=None, client="Visual Studio Code", pull=False):
        caps = {"textDocument": {"hover": {"contentFormat": ["markdown", "plaintext"]},
                                 "completion": {"completionItem": {"snippetSupport": True}},
                                 "publishDiagnostics": {"versionSupport": True}},
                "window": {"workDoneProgress": True}, "workspace": {"configuration": False}}
        if pull:
            caps["textDocument"]["diagnostic"] = {}
        r = await self.call("initialize", {"processId": os.getpid(), "rootUri": root_uri, "capabilities": caps,
                                           "clientInfo": {"name": client, "version": "1.0"},
                                           "initializationOptions": options or {"trusted": False}}, timeout=60)
        self.notify("initialized", {})
        return r

    async def stop(self):
        if self.proc is None:
            return
        try:
            await self.call("shutdown", None, timeout=20)
            self.notify("exit")
            await asyncio.wait_for(self.proc.wait(), 20)
        except Exception:
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
        for t in (self._reader, self._err):
            if t is not None:
                t.cancel()


def published(c, uri, version) -> bool:
    """Whether the server has published diagnostics for ``uri`` at ``version``."""
    return any(m == "textDocument/publishDiagnostics" and p.get("uri") == uri and p.get("version") == version
               for m, p, _t in c.notifications)


async def wait_published(c, uri, version, timeout=120):
    for _ in range(int(timeout / 0.02)):
        if published(c, uri, version):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no diagnostics for v{version}: {c.stderr.decode(errors='replace')[-2000:]}")


async def server_info(c):
    return (await c.call("newt/serverInfo", {}))["result"]
