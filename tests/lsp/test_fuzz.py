"""Fuzzing the server: thousands of random edits (hypothesis) to a file with kernels.

Each example is one editing session against a fresh server: a few hundred incremental ``didChange``
edits at random places (any Unicode, half-typed code, deleted lines), with hovers, inlay hints,
completions, code lenses and code actions in between.  The server must answer every request, and at
the end its diagnostics must be exactly the front end's for the text the client has (which also
checks that incremental sync kept the server's copy identical, in UTF-16 and UTF-8 positions).
"""

from __future__ import annotations

import asyncio
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp
from pytest_lsp import make_test_lsp_client

from lsp_server.positions import LineIndex
from newt.frontend import analyze_source

from .conftest import SERVER_COMMAND, fixture_text, init_params, server_env

pytestmark = pytest.mark.timeout(900)

SESSIONS = int(os.environ.get("NEWT_LSP_FUZZ_SESSIONS", "6"))
EDITS = int(os.environ.get("NEWT_LSP_FUZZ_EDITS", "350"))

_SNIPPETS = ["nl.", "(", ")", ":", "\n", "    ", "BLOCK", "1000", "x", " + ", "[:, None]", "é", "😀", "#", "'", '"""',
             "return ", "\n@newt.jit\ndef k(x_ptr, B: nl.constexpr):\n    nl.store(x_ptr + nl.arange(0, B), 1)\n",
             ", ", "0", "\r\n", "\t", "nl.arange(0, 100)", "x.to(nl.float16)", "def ", "@newt.jit\n", "\x00"]

edit = st.tuples(
    st.floats(0, 1),  # where (fraction of the text)
    st.integers(0, 16),  # how many characters to delete
    st.one_of(st.sampled_from(_SNIPPETS), st.text(alphabet=st.characters(blacklist_categories=("Cs",)),
                                                  max_size=4)),
)


def _start_text() -> str:
    return fixture_text("kernels.py") + "\n\n" + fixture_text("broken.py").split('"""', 2)[2]


_STR_ONLY_BREAKS = set("\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
_FAIL_DIR = os.path.join(os.environ.get("TMPDIR", "/tmp"), "newt_lsp_fuzz_failures")


def _dump_failure(text: str):
    os.makedirs(_FAIL_DIR, exist_ok=True)
    with open(os.path.join(_FAIL_DIR, "last_failure.py"), "w", encoding="utf-8", newline="") as f:
        f.write(text)


async def _session(edits, kind: str):
    client = make_test_lsp_client()
    await client.start_io(*SERVER_COMMAND, env=server_env(None))
    try:
        res = await client.initialize_session(init_params(kind, trusted=False))
        enc = str(getattr(res.capabilities.position_encoding, "value", res.capabilities.position_encoding))
        uri = "file:///tmp/newt_fuzz_session.py"
        text = _start_text()
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", 1, text)))
        doc = lsp.TextDocumentIdentifier(uri)
        version = 1
        for i, (where, n_del, ins) in enumerate(edits):
            idx = LineIndex(text, enc)
            start = int(where * len(text))
            end = min(len(text), start + n_del)
            # never split a \r\n pair: LSP positions cannot point between them
            if 0 < start < len(text) and text[start - 1] == "\r" and text[start] == "\n":
                start -= 1
            if 0 < end < len(text) and text[end - 1] == "\r" and text[end] == "\n":
                end += 1
            rng = lsp.Range(idx.pos_of_offset(start), idx.pos_of_offset(end))
            text = text[:start] + ins + text[end:]
            version += 1
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [lsp.TextDocumentContentChangePartial(range=rng, text=ins)]))
            if i % 9 == 0:
                p = LineIndex(text, enc).pos_of_offset(int(where * len(text)))
                await asyncio.wait_for(client.text_document_hover_async(lsp.HoverParams(doc, p)), 60)
                await asyncio.wait_for(client.text_document_completion_async(lsp.CompletionParams(doc, p)), 60)
                await asyncio.wait_for(client.text_document_signature_help_async(
                    lsp.SignatureHelpParams(doc, p)), 60)
            if i % 23 == 0:
                whole = lsp.Range(lsp.Position(0, 0), lsp.Position(text.count("\n") + 1, 0))
                await asyncio.wait_for(client.text_document_inlay_hint_async(lsp.InlayHintParams(doc, whole)), 60)
                await asyncio.wait_for(client.text_document_code_lens_async(lsp.CodeLensParams(doc)), 60)
                await asyncio.wait_for(client.text_document_code_action_async(lsp.CodeActionParams(
                    doc, whole, lsp.CodeActionContext(diagnostics=[]))), 60)
            if i % 50 == 0:
                await asyncio.sleep(0.2)  # a pause: the debounced analysis runs and publishes
        # the end: the server holds exactly the client's text ...
        import hashlib
        info = await asyncio.wait_for(client.protocol.send_request_async("newt/serverInfo", {}), 30)
        held = next(x for x in info.texts if x.uri == uri)
        assert held.sha1 == hashlib.sha1(text.encode("utf-8")).hexdigest(), (
            f"incremental sync diverged: the server holds {held.length} characters, the client {len(text)}")
        # ... and its diagnostics are the front end's for that text
        want = sorted((d.code, d.span.line - 1) for d in analyze_source(text, "/tmp/newt_fuzz_session.py").diagnostics)
        caps = client.capabilities.text_document
        if caps.diagnostic is not None:
            rep = await asyncio.wait_for(client.text_document_diagnostic_async(
                lsp.DocumentDiagnosticParams(text_document=doc)), 60)
            got = sorted((d.code, d.range.start.line) for d in rep.items)
        else:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            got = None
            while loop.time() < deadline:
                diags = client.diagnostics.get(uri)
                if diags is not None:
                    got = sorted((d.code, d.range.start.line) for d in diags)
                    if got == want:
                        break
                await asyncio.sleep(0.05)
        # (str.splitlines breaks lines at \x0b \x0c \x1c-\x1e \x85 \u2028 \u2029, Python and LSP do not; the
        # front end's syntax-error recovery counts lines with str.splitlines, so its line numbers are off by
        # one per such character before the error: reported, and left out of the comparison here)
        if got != want and not (_STR_ONLY_BREAKS & set(text)):
            _dump_failure(text)
            raise AssertionError(f"server {got} vs front end {want} (text kept in {_FAIL_DIR})")
        info = await asyncio.wait_for(client.protocol.send_request_async("newt/serverInfo", {}), 30)
        assert info.torch_imported is False
        await asyncio.wait_for(client.shutdown_session(), 60)
    finally:
        if client._server is not None and client._server.returncode is None:
            client._server.kill()  # a failed session: do not wait for an exit that was never asked for
        await client.stop()


@settings(max_examples=SESSIONS, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(edits=st.lists(edit, min_size=EDITS, max_size=EDITS), neovim=st.booleans())
def test_thousands_of_random_edits_never_break_the_server(edits, neovim):
    asyncio.run(_session(edits, "neovim" if neovim else "visual-studio-code"))


if __name__ == "__main__":  # pragma: no cover - a longer run by hand: NEWT_LSP_FUZZ_SESSIONS=50 python -m ...
    sys.exit(pytest.main([__file__, "-q"]))
