"""Files named by the client are read only when they are regular files under a size cap (issue 22, item 4):
``newt.show`` -- allowed in an untrusted workspace -- on a FIFO or ``/dev/stdin`` hung the server for good, on
``/dev/zero`` its memory grew until it died.  The server now answers those with a clear error at once and
keeps answering."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from lsp_server import files

from .conftest import server_env
from .rawclient import RawClient

pytestmark = pytest.mark.timeout(120)


def test_regular_files_are_read_with_their_line_ends(tmp_path):
    p = tmp_path / "k.py"
    p.write_bytes("a = 1\r\nb = 'é'\n".encode())
    assert files.read_document(p) == "a = 1\r\nb = 'é'\n"


@pytest.mark.parametrize("what", ["fifo", "/dev/zero", "/dev/stdin", "directory", "too large", "not utf-8"])
def test_anything_else_is_refused_without_blocking(tmp_path, what):
    if what == "fifo":
        path = tmp_path / "k.py"
        os.mkfifo(path)
        match = "a FIFO"
    elif what == "directory":
        path, match = tmp_path, "a directory"
    elif what == "too large":
        path = tmp_path / "big.py"
        path.write_bytes(b"#" * 2000)
        with pytest.raises(files.UnreadableDocument, match="more than newt reads"):
            files.read_document(path, max_bytes=1000)
        return
    elif what == "not utf-8":
        path = tmp_path / "latin.py"
        path.write_bytes(b"x = '\xe9'\n")
        match = "not UTF-8"
    else:
        if not os.path.exists(what):
            pytest.skip(f"no {what} here")
        path, match = Path(what), "not a regular file|a FIFO|a character device|a socket"
    with pytest.raises(files.UnreadableDocument, match=match):
        files.read_document(path)


#: the server under a 4 GiB address-space limit: a server that reads /dev/zero dies of MemoryError, not the machine
LIMITED = ("import resource, runpy; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)); "
           "runpy.run_module('lsp_server', run_name='__main__', alter_sys=True)")


async def _server(tmp_path) -> RawClient:
    c = RawClient()
    # stdin is a pipe the test holds open: /dev/stdin of the server is its LSP input, which it must not read
    await c.start(sys.executable, "-c", LIMITED, env=server_env(tmp_path / "cache"), cwd=str(tmp_path))
    await c.initialize(root_uri=tmp_path.as_uri(), options={"trusted": False})
    return c


@pytest.mark.parametrize("target", ["fifo", "/dev/stdin", "/dev/zero"])
async def test_show_on_a_special_file_is_an_error_not_a_hang(tmp_path, target):
    if target == "fifo":
        path = tmp_path / "kernels.py"
        os.mkfifo(path)
    else:
        if not os.path.exists(target):
            pytest.skip(f"no {target} here")
        path = Path(target)
    uri = path.as_uri() if target == "fifo" else "file://" + target
    c = await _server(tmp_path)
    try:
        body = await c.call("workspace/executeCommand", {"command": "newt.show", "arguments": [
            {"uri": uri, "position": {"line": 0, "character": 0}, "kind": "cuda"}]}, timeout=20)
        assert "error" in body, body
        assert "newt reads only regular files" in body["error"]["message"]
        # requests that read the file quietly (the document is not open) answer too, and the server lives on
        hover = await c.call("textDocument/hover", {"textDocument": {"uri": uri},
                                                    "position": {"line": 0, "character": 0}}, timeout=20)
        assert "result" in hover
        info = await c.call("newt/serverInfo", {}, timeout=20)
        assert "result" in info
    finally:
        await asyncio.wait_for(c.stop(), 60)
