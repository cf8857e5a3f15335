"""Nothing of the workspace runs when the server starts, trusted or not (issue 15, item 4).

A workspace holds files that shadow what the server imports: the standard library's ``json`` and
``argparse``, and the packages ``pygls``, ``newt`` and ``lsp_server``. Each writes a marker file when
imported. The server is started the two ways the docs give (the VS Code extension's: a neutral working
directory and ``PYTHONSAFEPATH=1``; an editor that starts it in the workspace, as a Neovim config with
``cmd_cwd`` would), a kernel of the workspace is opened, hovered and compiled (trusted: in the compile
worker), and no marker may appear.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import make_test_lsp_client

from .conftest import fixture_text, init_params, pos_of, server_env

pytestmark = pytest.mark.timeout(300)

SHADOWS = ("json.py", "argparse.py", "pygls/__init__.py", "newt/__init__.py", "lsp_server/__init__.py",
           "lsprotocol/__init__.py", "typing_extensions.py")


def _workspace(tmp: Path) -> Path:
    ws = tmp / "ws"
    for rel in SHADOWS:
        f = ws / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        marker = ws / ("RAN_" + rel.replace("/", "_"))
        f.write_text(f"open({str(marker)!r}, 'w').write('imported from the workspace')\n"
                     "raise ImportError('workspace shadow module')\n", encoding="utf-8")
    (ws / "kernels").mkdir()
    (ws / "kernels" / "add.py").write_text(fixture_text("kernels.py"), encoding="utf-8")
    return ws


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "restricted"])
@pytest.mark.parametrize("launch", ["extension", "workspace-cwd"])
async def test_workspace_modules_never_run(tmp_path, launch, trusted):
    ws = _workspace(tmp_path)
    neutral = tmp_path / "neutral"
    neutral.mkdir()
    env = server_env(tmp_path / "cache", PYTHONSAFEPATH="1")
    cwd = neutral if launch == "extension" else ws
    if launch == "workspace-cwd" and sys.version_info < (3, 11):
        env.pop("PYTHONSAFEPATH")  # no such variable before 3.11: the server must protect itself... it cannot
        pytest.skip("before Python 3.11 only a neutral working directory keeps the workspace off sys.path")
    client = make_test_lsp_client()
    await client.start_io(sys.executable, "-m", "lsp_server", env=env, cwd=str(cwd))
    try:
        params = init_params("visual-studio-code", trusted=trusted)
        params.root_uri = ws.as_uri()
        params.workspace_folders = [lsp.WorkspaceFolder(uri=ws.as_uri(), name="ws")]
        await client.initialize_session(params)
        path = ws / "kernels" / "add.py"
        text = path.read_text(encoding="utf-8")
        uri = path.as_uri()
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
        hov = await client.text_document_hover_async(lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri), position=pos_of(text, "offsets", 2)))
        assert hov is not None
        arg = {"uri": uri, "position": {"line": pos_of(text, "def add_kernel", delta=4).line, "character": 4}}
        if trusted:
            r = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
                command="newt.compile", arguments=[arg]))
            assert r is not None
        else:
            with pytest.raises(Exception, match="trusted"):
                await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
                    command="newt.compile", arguments=[arg]))
        info = await client.protocol.send_request_async("newt/serverInfo", {})
        assert info is not None
        await asyncio.sleep(0.2)
    finally:
        await client.shutdown_session()
    ran = sorted(p.name for p in ws.glob("RAN_*"))
    assert ran == [], f"workspace modules ran at start-up ({launch}, trusted={trusted}): {ran}"
