"""Per-folder settings (issue 15, item 7): target, diagnosticsOn and inlayHints of the folder that holds a
file, asked with workspace/configuration per folder; Compile, Show and the generated documents agree."""

from __future__ import annotations

import shutil
import sys

import pytest
from lsprotocol import types as lsp
from pytest_lsp import client_capabilities, make_test_lsp_client

from .conftest import CLIENTS, fixture_path, pos_of, server_env

pytestmark = pytest.mark.timeout(300)


async def test_each_folder_gets_its_own_target_and_inlay_hints(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        shutil.copy(fixture_path("kernels.py"), d / "kernels.py")
    per_folder = {a.as_uri(): {"target": "sm_89", "inlayHints": {"shapes": False, "dtypes": False}},
                  b.as_uri(): {"target": "sm_80", "inlayHints": {"shapes": True, "dtypes": True}}}
    client = make_test_lsp_client()

    def configuration(params: lsp.ConfigurationParams):
        return [per_folder.get(item.scope_uri, {}) for item in params.items]

    client.protocol.fm.features[lsp.WORKSPACE_CONFIGURATION] = configuration  # replaces pytest-lsp's answer

    await client.start_io(sys.executable, "-m", "lsp_server", env=server_env(tmp_path / "cache"))
    caps = client_capabilities("visual-studio-code")
    await client.initialize_session(lsp.InitializeParams(
        capabilities=caps, client_info=CLIENTS["visual-studio-code"],
        initialization_options={"trusted": True, "target": "sm_90a",
                                "perfDiagnostics": False},  # (its figures are inlay hints of their own)
        workspace_folders=[lsp.WorkspaceFolder(uri=a.as_uri(), name="a"),
                           lsp.WorkspaceFolder(uri=b.as_uri(), name="b")]))
    try:
        text = (a / "kernels.py").read_text(encoding="utf-8")
        name = pos_of(text, "def add_kernel", delta=4)
        got = {}
        for d in (a, b):
            uri = (d / "kernels.py").as_uri()
            client.text_document_did_open(lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
            arg = {"uri": uri, "position": {"line": name.line, "character": name.character}}
            for _ in range(50):  # the per-folder answers arrive after `initialized`
                r = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
                    command="newt.show", arguments=[dict(arg, kind="sass")]))
                r_uri = r["uri"] if isinstance(r, dict) else r.uri
                if "target=sm_89" in r_uri or "target=sm_80" in r_uri:
                    break
                import asyncio
                await asyncio.sleep(0.1)
            hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
                text_document=lsp.TextDocumentIdentifier(uri),
                range=lsp.Range(lsp.Position(0, 0), lsp.Position(len(text.splitlines()), 0))))
            got[d.name] = (r_uri, len(hints or []))
        assert "target=sm_89" in got["a"][0] and got["a"][1] == 0, got
        assert "target=sm_80" in got["b"][0] and got["b"][1] > 0, got
    finally:
        await client.shutdown_session()


async def test_each_folder_gets_its_own_diagnostics_on(tmp_path):
    """diagnosticsOn "save" in one folder, "type" in the other: an edit shows at once in the second only."""
    import asyncio

    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        shutil.copy(fixture_path("kernels.py"), d / "kernels.py")
    per_folder = {a.as_uri(): {"target": "sm_89", "diagnosticsOn": "save"},
                  b.as_uri(): {"target": "sm_80", "diagnosticsOn": "type"}}
    client = make_test_lsp_client()
    client.protocol.fm.features[lsp.WORKSPACE_CONFIGURATION] = (
        lambda params: [per_folder.get(item.scope_uri, {}) for item in params.items])
    await client.start_io(sys.executable, "-m", "lsp_server", env=server_env(tmp_path / "cache"))
    await client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), client_info=CLIENTS["visual-studio-code"],
        initialization_options={"trusted": True, "target": "sm_90a", "diagnosticsOn": "type"},
        workspace_folders=[lsp.WorkspaceFolder(uri=a.as_uri(), name="a"),
                           lsp.WorkspaceFolder(uri=b.as_uri(), name="b")]))
    try:
        text = (a / "kernels.py").read_text(encoding="utf-8")
        name = pos_of(text, "def add_kernel", delta=4)
        uris = {d.name: (d / "kernels.py").as_uri() for d in (a, b)}
        for d in (a, b):
            client.text_document_did_open(lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri=uris[d.name], language_id="python", version=1, text=text)))
            for _ in range(100):  # wait until the folder's own answers apply (they arrive after `initialized`)
                r = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
                    command="newt.show", arguments=[{"uri": uris[d.name], "kind": "ir",
                                                     "position": {"line": name.line, "character": name.character}}]))
                if ("target=sm_89" if d is a else "target=sm_80") in (r["uri"] if isinstance(r, dict) else r.uri):
                    break
                await asyncio.sleep(0.1)

        async def codes(folder):
            rep = await client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
                text_document=lsp.TextDocumentIdentifier(uris[folder])))
            return {d.code for d in rep.items}

        assert await codes("a") == set() and await codes("b") == set()
        broken = text.replace("nl.arange(0, BLOCK_SIZE)", "nl.arange(0, 1000)", 1)
        end = lsp.Position(len(text.splitlines()) + 1, 0)
        for folder in ("a", "b"):
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uris[folder], version=2),
                content_changes=[lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(0, 0), end), text=broken)]))
        for _ in range(100):
            if "N011" in await codes("b"):
                break
            await asyncio.sleep(0.1)
        assert "N011" in await codes("b")  # "type": as you type
        assert "N011" not in await codes("a")  # "save": still the diagnostics of the last save (the open)
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uris["a"])))
        for _ in range(100):
            if "N011" in await codes("a"):
                break
            await asyncio.sleep(0.1)
        assert "N011" in await codes("a")
    finally:
        await client.shutdown_session()
