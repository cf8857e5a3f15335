"""Unannotated pointer parameters take their dtype from the file's launches (issue 15, item 11): hover shows
``fp16[...]`` where the generic check only knows ``T[x_ptr]``, and the dtype rules fire (a bitwise operator on
the fp16 values the launch passes), on a Triton file as it is."""

from __future__ import annotations

import sys

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pytest_lsp import make_test_lsp_client

from .conftest import diagnostics_of, fixture_text, fixture_uri, init_params, pos_of, server_env

pytestmark = [pytest.mark.timeout(300), pytest.mark.asyncio(loop_scope="module")]


# one server per client kind for the module's tests (they open different files and only read)
@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["visual-studio-code", "neovim"])
async def client(request, tmp_path_factory):
    c = make_test_lsp_client()
    await c.start_io(sys.executable, "-m", "lsp_server", env=server_env(tmp_path_factory.mktemp("launch-dtypes")))
    c.published = []  # what diagnostics_of reads: every publishDiagnostics, in order
    original = c.protocol.fm.features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def record(params):
        c.published.append((params.uri, params.version, len(params.diagnostics)))
        return original(params)

    c.protocol.fm.features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = record
    await c.initialize_session(init_params(request.param, trusted=False))
    yield c
    await c.shutdown_session()


async def _diagnostics(c, uri):
    return await diagnostics_of(c, uri, version=1)


async def test_hover_and_dtype_checks_use_the_launches_dtypes(client):
    uri = fixture_uri("launch_dtypes.py")
    text = fixture_text("launch_dtypes.py")
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", 1, text)))
    diags = await _diagnostics(client, uri)
    bitwise = [d for d in diags if d.code == "N021"]
    assert len(bitwise) == 1, [(d.code, d.message) for d in diags]
    d = bitwise[0]
    at = pos_of(text, "x & 1")
    assert (d.range.start.line, d.range.start.character) == (at.line, at.character)
    assert "float16" in d.message and "x_ptr: *fp16" in d.message
    h = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                pos_of(text, "x = tl.load", delta=0)))
    value = h.contents.value
    assert "fp16[1024]" in value and "from the launches" in value, value
    assert "the launch at line" not in value or "fp16" in value


async def test_an_annotated_or_unlaunched_kernel_gets_no_extra_row(client):
    uri = fixture_uri("kernels.py")
    text = fixture_text("kernels.py")
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", 1, text)))
    await _diagnostics(client, uri)
    h = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                pos_of(text, "offsets", 2)))
    assert h is not None and "from the launches" not in h.contents.value
