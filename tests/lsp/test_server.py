"""End to end over LSP (pytest-lsp): every static feature, with VS Code's and Neovim's capabilities.

VS Code 1.65's recorded capabilities have no pull diagnostics (the server pushes them); Neovim 0.11's
have them (the server answers ``textDocument/diagnostic`` and pushes nothing).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from .conftest import (
    SERVER_COMMAND,
    diagnostics_of,
    fixture_text,
    fixture_uri,
    init_params,
    pull_capable,
    server_env,
    units,
)
from .conftest import pos_of as _pos_of

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

_CACHE = tempfile.mkdtemp(prefix="newt-lsp-test-")


@pytest_lsp.fixture(scope="module", params=["visual-studio-code", "neovim"],
                    config=ClientServerConfig(server_command=SERVER_COMMAND,
                                              server_env=server_env(None, NEWT_CACHE_DIR=_CACHE)))
async def client(request, lsp_client: LanguageClient):
    lsp_client.published = []  # every publishDiagnostics, in order
    lsp_client.opened = {}  # uri -> len(published) when it was last opened
    lsp_client.status = []
    original = lsp_client.protocol.fm.features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def record(params):
        lsp_client.published.append((params.uri, params.version, len(params.diagnostics)))
        return original(params)

    lsp_client.protocol.fm.features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = record

    @lsp_client.feature("newt/status")
    def status(params):
        lsp_client.status.append(params)

    lsp_client.inlay_refreshes = 0

    @lsp_client.feature(lsp.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_refresh(params):
        lsp_client.inlay_refreshes += 1

    lsp_client.init_result = await lsp_client.initialize_session(init_params(request.param))
    lsp_client.kind = request.param
    lsp_client.encoding = str(getattr(lsp_client.init_result.capabilities.position_encoding, "value",
                                      lsp_client.init_result.capabilities.position_encoding) or "utf-16")
    yield
    await lsp_client.shutdown_session()


def teardown_module(module):
    shutil.rmtree(_CACHE, ignore_errors=True)


def _open(client: LanguageClient, name: str, text: str | None = None, version: int = 1) -> str:
    uri = fixture_uri(name)
    client.opened[uri] = len(client.published)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=version,
                             text=text if text is not None else fixture_text(name))))
    return uri


def _close(client: LanguageClient, uri: str):
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))


def _doc(uri):
    return lsp.TextDocumentIdentifier(uri)


async def _wait(cond, timeout=30.0):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.02)


_ENC = {"encoding": "utf-16"}


def pos_of(text, needle, occurrence=1, delta=0):
    return _pos_of(text, needle, occurrence, delta, _ENC["encoding"])


@pytest.fixture(autouse=True)
def _encoding(client):
    _ENC["encoding"] = client.encoding


# --- initialization ----------------------------------------------------------------------------------------


async def test_capabilities(client: LanguageClient):
    caps = client.init_result.capabilities
    assert client.init_result.server_info.name == "newt-lsp"
    # VS Code 1.65 offers no encodings (UTF-16); Neovim 0.11 offers UTF-8 first, and gets it
    assert client.encoding == ("utf-16" if client.kind == "visual-studio-code" else "utf-8")
    assert caps.hover_provider and caps.code_lens_provider and caps.inlay_hint_provider
    assert "." in caps.completion_provider.trigger_characters
    assert "(" in caps.signature_help_provider.trigger_characters
    assert lsp.CodeActionKind.QuickFix in caps.code_action_provider.code_action_kinds
    assert caps.diagnostic_provider is not None
    cmds = set(caps.execute_command_provider.commands)
    assert {"newt.compile", "newt.verify", "newt.autotune", "newt.show"} <= cmds
    # VS Code's extension registers the lens commands itself; other clients need them advertised
    assert ("newt.compileKernel" in cmds) == (client.kind != "visual-studio-code")


async def test_status_notification(client: LanguageClient):
    await _wait(lambda: client.status)
    s = client.status[-1]
    s = s._asdict() if hasattr(s, "_asdict") else s
    assert s["mode"] in ("gpu", "compile-only")
    assert (s["gpu"] is None) == (s["mode"] == "compile-only")
    assert s["target"].startswith("sm_")


# --- diagnostics -----------------------------------------------------------------------------------------------


async def test_diagnostics_on_open_with_codes_links_and_positions(client: LanguageClient):
    text = fixture_text("broken.py")
    uri = _open(client, "broken.py", text)
    try:
        diags = await diagnostics_of(client, uri)
        codes = sorted(d.code for d in diags)
        assert codes == ["N003", "N010", "N011", "N011", "N020", "N031"]
        for d in diags:
            assert d.source == "newt" and d.severity == lsp.DiagnosticSeverity.Error
            assert re.search(r"diagnostics\.md#L\d+$", d.code_description.href), d.code_description.href
        n003 = next(d for d in diags if d.code == "N003")
        line = text.splitlines()[n003.range.start.line]
        assert n003.range.start.character == units(line[:line.index("undefined_name")], client.encoding)
        if not pull_capable(client):
            assert client.published[-1][:2] == (uri, 1)
    finally:
        _close(client, uri)


async def test_diagnostics_follow_edits_debounced_and_versioned(client: LanguageClient):
    text = fixture_text("kernels.py")
    uri = _open(client, "kernels.py", text)
    try:
        assert await diagnostics_of(client, uri) == []
        n_before = len(client.published)
        # five quick edits: each makes a new mistake; only the last version's diagnostics may show
        target = pos_of(text, "nl.arange(0, BLOCK_SIZE)", delta=len("nl.arange(0, "))
        version = 1
        for i in range(5):
            version += 1
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(target, lsp.Position(target.line, target.character + len("BLOCK_SIZE")
                                                         if i == 0 else target.character + 3)),
                    text=f"{100 + i}")]))
        if pull_capable(client):
            diags = await diagnostics_of(client, uri)
        else:
            await _wait(lambda: any(p[0] == uri and p[1] == version for p in client.published[n_before:]))
            await asyncio.sleep(0.4)
            mine = [p for p in client.published[n_before:] if p[0] == uri]
            assert mine[-1][1] == version  # the last edit's version
            # debounced: a version is published only when the server saw the text rest for the debounce (150 ms);
            # on a loaded machine the server may read the next edit later than that, and then the version it
            # rested on is published (by design: the user paused; a version may be published again, unchanged) --
            # but never after a newer one
            versions = [v for _, v, _ in mine]
            assert versions == sorted(versions)
            diags = client.diagnostics[uri]
        assert [(d.code, "length 104" in d.message) for d in diags] == [("N011", True)]
        # fixed again
        version += 1
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [lsp.TextDocumentContentChangeWholeDocument(text=text)]))
        if pull_capable(client):
            assert await diagnostics_of(client, uri) == []
        else:
            await _wait(lambda: client.published[-1][:2] == (uri, version) and client.published[-1][2] == 0)
    finally:
        _close(client, uri)
    if not pull_capable(client):
        await _wait(lambda: client.published[-1] == (uri, None, 0))  # cleared on close


async def test_pull_diagnostics_report_unchanged(client: LanguageClient):
    if not pull_capable(client):
        pytest.skip("this client has no pull diagnostics")
    uri = _open(client, "broken.py")
    try:
        first = await client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(text_document=_doc(uri)))
        again = await client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
            text_document=_doc(uri), previous_result_id=first.result_id))
        assert again.kind == "unchanged" and again.result_id == first.result_id
    finally:
        _close(client, uri)


# --- hover / inlay hints / completion / signature help --------------------------------------------------------


async def test_hover(client: LanguageClient):
    text = fixture_text("kernels.py")
    uri = _open(client, "kernels.py", text)
    try:
        h = await client.text_document_hover_async(lsp.HoverParams(_doc(uri), pos_of(text, "offsets = pid")))
        assert "i32[BLOCK_SIZE]" in h.contents.value and "i32[1024]" in h.contents.value
        assert "CUDA" in h.contents.value
        h = await client.text_document_hover_async(lsp.HoverParams(_doc(uri), pos_of(text, "def add_kernel", delta=5)))
        assert "specialization" in h.contents.value
        h = await client.text_document_hover_async(lsp.HoverParams(_doc(uri), pos_of(text, "nl.store(out_ptr",
                                                                                      delta=4)))
        assert "store(pointer, value, mask=None" in h.contents.value
        # after a non-ASCII name on the same line
        line = next(ln for ln in text.splitlines() if "mask=σ, other" in ln)
        p = lsp.Position(text.splitlines().index(line), units(line[:line.index("mask=σ") + 5], client.encoding))
        h = await client.text_document_hover_async(lsp.HoverParams(_doc(uri), p))
        assert "σ: i1[BLOCK]" in h.contents.value
        assert await client.text_document_hover_async(lsp.HoverParams(_doc(uri), lsp.Position(0, 0))) is None
    finally:
        _close(client, uri)


async def test_inlay_hints_and_their_settings(client: LanguageClient):
    text = fixture_text("kernels.py")
    uri = _open(client, "kernels.py", text)
    whole = lsp.Range(lsp.Position(0, 0), lsp.Position(len(text.splitlines()), 0))
    try:
        hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(_doc(uri), whole))
        labels = {(h.position.line, h.position.character): h.label for h in hints}
        p = pos_of(text, "offsets = pid", delta=7)
        assert labels[(p.line, p.character)] == ": i32[BLOCK_SIZE]"
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
            settings={"newt": {"inlayHints": {"shapes": False, "dtypes": True}}}))
        await asyncio.sleep(0.2)
        hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(_doc(uri), whole))
        labels = {(h.position.line, h.position.character): h.label for h in hints}
        assert labels[(p.line, p.character)] == ": i32"
        refresh = client.capabilities.workspace.inlay_hint if client.capabilities.workspace else None
        assert (client.inlay_refreshes > 0) == bool(refresh and refresh.refresh_support)
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
            settings={"newt": {"inlayHints": {"shapes": False, "dtypes": False}}}))
        await asyncio.sleep(0.2)
        left = await client.text_document_inlay_hint_async(lsp.InlayHintParams(_doc(uri), whole))
        # the performance figures (``26 regs · no spill · ...`` at a config's line, once its compile is done) are
        # hints of their own, not governed by inlayHints.shapes/dtypes: only they may remain
        assert all(re.search(r"\d+ regs · ", str(h.label)) for h in left or []), left
    finally:
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
            settings={"newt": {"inlayHints": {"shapes": True, "dtypes": True}}}))
        _close(client, uri)


async def test_completion_and_signature_help_while_typing(client: LanguageClient):
    text = fixture_text("kernels.py")
    uri = _open(client, "kernels.py", text)
    try:
        at = pos_of(text, "    mask = offsets < n_elements\n", delta=len("    mask = offsets < n_elements\n"))
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [lsp.TextDocumentContentChangePartial(range=lsp.Range(at, at), text="    z = nl.\n")]))
        c = await client.text_document_completion_async(lsp.CompletionParams(
            _doc(uri), lsp.Position(at.line, len("    z = nl.")),
            context=lsp.CompletionContext(lsp.CompletionTriggerKind.TriggerCharacter, trigger_character=".")))
        labels = {i.label for i in (c.items if hasattr(c, "items") else c)}
        assert {"load", "store", "arange", "float16", "math"} <= labels
        # keep typing: a call, then the signature
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=3),
            [lsp.TextDocumentContentChangePartial(
                range=lsp.Range(lsp.Position(at.line, 11), lsp.Position(at.line, 11)),
                text="load(x_ptr + offsets, mask=mask, ")]))
        s = await client.text_document_signature_help_async(lsp.SignatureHelpParams(
            _doc(uri), lsp.Position(at.line, len("    z = nl.load(x_ptr + offsets, mask=mask, "))))
        assert s.signatures[0].label.startswith("load(pointer") and s.active_parameter == 2
        # block methods
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=4),
            [lsp.TextDocumentContentChangePartial(
                range=lsp.Range(lsp.Position(at.line, 0), lsp.Position(at.line + 1, 0)), text="    z = offsets.\n")]))
        c = await client.text_document_completion_async(lsp.CompletionParams(
            _doc(uri), lsp.Position(at.line, len("    z = offsets."))))
        labels = {i.label for i in (c.items if hasattr(c, "items") else c)}
        assert {"to", "sum", "reshape", "dtype"} <= labels
    finally:
        _close(client, uri)


# --- code lenses and quick fixes ---------------------------------------------------------------------------------


async def test_code_lenses(client: LanguageClient):
    text = fixture_text("kernels.py")
    uri = _open(client, "kernels.py", text)
    try:
        lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(_doc(uri)))
        name = pos_of(text, "def add_kernel", delta=4)
        mine = [lens for lens in lenses if lens.range.start.line == name.line]
        # add_kernel has a newt.harness example: Autotune tunes its launch options
        assert [lens.command.title for lens in mine] == ["Compile", "Verify", "Autotune", "Show CUDA"]
        assert [lens.command.command for lens in mine] == ["newt.compileKernel", "newt.verifyKernel",
                                                           "newt.autotuneKernel", "newt.showCuda"]
        assert all(list(lens.command.arguments) == [uri, {"line": name.line, "character": name.character}]
                   for lens in mine)
    finally:
        _close(client, uri)


async def test_quick_fixes_apply_and_clear_the_diagnostic(client: LanguageClient):
    text = fixture_text("broken.py")
    uri = _open(client, "broken.py", text)
    try:
        diags = await diagnostics_of(client, uri)
        d = next(d for d in diags if d.code == "N010")
        actions = await client.text_document_code_action_async(lsp.CodeActionParams(
            _doc(uri), d.range, lsp.CodeActionContext(diagnostics=[d], only=[lsp.CodeActionKind.QuickFix])))
        fix = next(a for a in actions if a.title.startswith("Declare n"))
        edits = fix.edit.changes[uri]
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [lsp.TextDocumentContentChangePartial(range=e.range, text=e.new_text) for e in edits]))
        after = await diagnostics_of(client, uri, version=2)
        assert "N010" not in [x.code for x in after]
        assert len(after) == len(diags) - 1
        n011 = next(x for x in after if x.code == "N011" and "BLOCK=1000" in x.message)
        actions = await client.text_document_code_action_async(lsp.CodeActionParams(
            _doc(uri), n011.range, lsp.CodeActionContext(diagnostics=[n011])))
        assert any("BLOCK=1024" in a.title for a in actions)
    finally:
        _close(client, uri)


# --- virtual documents, robustness, the process -----------------------------------------------------------------


async def test_virtual_document_ir_and_show(client: LanguageClient):
    uri = _open(client, "kernels.py")
    try:
        shown = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            "newt.show", [{"uri": uri, "position": {"line": 8, "character": 4}, "kind": "ir"}]))
        shown = shown._asdict() if hasattr(shown, "_asdict") else shown
        assert shown["uri"].startswith("newt:/kernels/add_kernel.ir?")
        doc = await client.protocol.send_request_async("newt/virtualDocument", {"uri": shown["uri"]})
        assert doc.languageId == "plaintext"
        assert "func @add_kernel(" in doc.text and "BLOCK_SIZE: constexpr = 1024" in doc.text
        generic = shown["uri"].replace("spec=1", "spec=0")
        doc = await client.protocol.send_request_async("newt/virtualDocument", {"uri": generic})
        assert "generic check" in doc.text and "BLOCK_SIZE" in doc.text
    finally:
        _close(client, uri)


async def test_bad_requests_never_kill_the_server(client: LanguageClient):
    missing = "file:///nonexistent/never.py"
    assert await client.text_document_hover_async(lsp.HoverParams(_doc(missing), lsp.Position(3, 3))) is None
    assert not await client.text_document_code_lens_async(lsp.CodeLensParams(_doc(missing)))
    uri = _open(client, "kernels.py", "\x00garbage (((\n" * 3)
    try:
        await client.text_document_hover_async(lsp.HoverParams(_doc(uri), lsp.Position(99, 99)))
        await client.text_document_completion_async(lsp.CompletionParams(_doc(uri), lsp.Position(0, 99)))
        with pytest.raises(Exception):  # noqa: B017 - an unknown document kind is refused, not fatal
            await client.protocol.send_request_async("newt/virtualDocument", {"uri": "newt:/x/y.zz?src=q&kind=zz"})
    finally:
        _close(client, uri)
    info = await client.protocol.send_request_async("newt/serverInfo", {})
    assert info.pid > 0


async def test_the_server_never_imported_torch(client: LanguageClient):
    """Runs last in this module: after every static feature above, neither torch nor CUDA is loaded."""
    info = await client.protocol.send_request_async("newt/serverInfo", {})
    assert info.torch_imported is False
    assert info.cuda_imported is False
    assert info.pull_diagnostics == pull_capable(client)


async def test_incremental_sync_with_unicode_line_separators_inside_lines(client: LanguageClient):
    """\\x85, \\x0c and \\u2028 do not end lines in LSP (pygls 2.1's own document copy thinks they do and rewrites
    positions past its idea of a line's end; the server keeps its own copy)."""
    import hashlib

    text = "x = 1  # a\x85b\x0cc\u2028d\n" + fixture_text("kernels.py")
    uri = _open(client, "kernels.py", text)
    try:
        line = text.splitlines()[0]  # str.splitlines: "x = 1  # a"
        n = sum(1 for _ in line)
        target_line = next(i for i, ln in enumerate(text.split("\n")) if "offsets = pid" in ln)
        p0 = lsp.Position(target_line, 30)
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [lsp.TextDocumentContentChangePartial(range=lsp.Range(p0, p0), text="  ")]))
        lines = text.split("\n")
        lines[target_line] = lines[target_line][:30] + "  " + lines[target_line][30:]
        want = "\n".join(lines)
        info = await client.protocol.send_request_async("newt/serverInfo", {})
        mine = next(x for x in info.texts if x.uri == uri)
        assert mine.sha1 == hashlib.sha1(want.encode()).hexdigest() and n > 0
    finally:
        _close(client, uri)


async def test_diagnostics_on_save_only(client: LanguageClient):
    text = fixture_text("kernels.py")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
        settings={"newt": {"diagnosticsOn": "save"}}))
    await asyncio.sleep(0.2)
    uri = _open(client, "kernels.py", text)
    try:
        assert await diagnostics_of(client, uri, version=1) == []
        broken = text.replace("nl.arange(0, BLOCK_SIZE)", "nl.arange(0, 1000)", 1)
        n = len(client.published)
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [lsp.TextDocumentContentChangeWholeDocument(text=broken)]))
        await asyncio.sleep(0.5)
        if pull_capable(client):
            assert await diagnostics_of(client, uri) == []  # not saved yet: the saved version's diagnostics
        else:
            # (a late republication of the saved version 1's diagnostics may still come; nothing of version 2)
            assert [p for p in client.published[n:] if p[0] == uri and p[1] != 1] == []
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(_doc(uri)))
        diags = await diagnostics_of(client, uri, version=2)
        if pull_capable(client):
            loop = asyncio.get_running_loop()
            end = loop.time() + 10
            while not diags and loop.time() < end:
                await asyncio.sleep(0.05)
                diags = await diagnostics_of(client, uri)
        assert [d.code for d in diags] == ["N011"]
    finally:
        _close(client, uri)
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
            settings={"newt": {"diagnosticsOn": "type"}}))
        await asyncio.sleep(0.2)
