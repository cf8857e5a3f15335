"""The command line: ``python -m lsp_server`` over stdio (the other tests) and over TCP; ``--version``."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest
from lsprotocol import types as lsp
from pytest_lsp import make_test_lsp_client

from .conftest import ROOT, fixture_text, init_params, server_env

pytestmark = pytest.mark.timeout(120)


def test_version_and_help():
    out = subprocess.run([sys.executable, "-m", "lsp_server", "--version"], capture_output=True, text=True,
                         env=server_env(None), cwd=ROOT, check=True).stdout
    assert out.startswith("newt-lsp ")
    out = subprocess.run([sys.executable, "-m", "lsp_server", "--help"], capture_output=True, text=True,
                         env=server_env(None), cwd=ROOT, check=True).stdout
    assert "--tcp" in out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tcp():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lsp_server", "--tcp", f"127.0.0.1:{port}"],
                            env=server_env(None), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def go():
        client = make_test_lsp_client()
        for _ in range(100):
            try:
                await client.start_tcp("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("the server never listened")
        await client.initialize_session(init_params("neovim"))
        uri = "file:///tmp/tcp_kernels.py"
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri, "python", 1, fixture_text("kernels.py"))))
        lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        # 3 kernels x Compile, Verify, Show CUDA, + Autotune on the autotuned one and on add_kernel (an example)
        assert len(lenses) == 11
        await client.shutdown_session()
        await client.stop()

    try:
        asyncio.run(go())
    finally:
        proc.kill()
        proc.wait(10)


def _frame(msg: dict) -> bytes:
    import json
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


@pytest.mark.parametrize("shadow", ["argparse", "logging", "threading"])
def test_workspace_stdlib_shadows_never_run_from_the_working_directory(tmp_path, shadow):
    """Issue 22, item 3: ``python -m lsp_server`` started in the workspace (no ``PYTHONSAFEPATH``) must drop
    the working directory from ``sys.path`` before its first import that a workspace file could shadow."""
    marker = tmp_path / "RAN"
    (tmp_path / f"{shadow}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                           "raise ImportError('workspace shadow module')\n", encoding="utf-8")
    env = server_env(None)
    env.pop("PYTHONSAFEPATH", None)
    r = subprocess.run([sys.executable, "-m", "lsp_server", "--version"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("newt-lsp "), r.stderr
    session = b"".join(_frame(m) for m in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None,
                                                                       "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"}))
    r = subprocess.run([sys.executable, "-m", "lsp_server"], input=session, capture_output=True, env=env,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 0 and b'"capabilities"' in r.stdout, r.stderr.decode(errors="replace")[-2000:]
    assert not marker.exists(), f"the workspace's {shadow}.py ran inside the server"
