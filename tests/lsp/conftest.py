"""Helpers for the language server tests: fixture files, positions, a pytest-lsp client per client kind."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CORPUS = ROOT / "tests" / "frontend" / "corpus" / "good"

#: the two client capability sets every end-to-end test runs with (pytest-lsp's recorded clients)
CLIENTS = {
    "visual-studio-code": lsp.ClientInfo(name="Visual Studio Code", version="1.65.2"),
    "neovim": lsp.ClientInfo(name="Neovim", version="0.11.0"),
}


def fixture_path(name: str) -> Path:
    return FIXTURES / name


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def fixture_uri(name: str) -> str:
    return (FIXTURES / name).as_uri()


def utf16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def units(s: str, encoding: str = "utf-16") -> int:
    """Length of ``s`` in the code units of an LSP position encoding."""
    e = str(getattr(encoding, "value", encoding))
    if e == "utf-8":
        return len(s.encode("utf-8"))
    if e == "utf-32":
        return len(s)
    return utf16(s)


def pos_of(text: str, needle: str, occurrence: int = 1, delta: int = 0, encoding: str = "utf-16") -> lsp.Position:
    """LSP position of the ``occurrence``-th ``needle`` in ``text``, plus ``delta`` characters."""
    idx = -1
    for _ in range(occurrence):
        idx = text.index(needle, idx + 1)
    idx += delta
    line = text.count("\n", 0, idx)
    start = text.rfind("\n", 0, idx) + 1
    return lsp.Position(line, units(text[start:idx], encoding))


def server_env(tmp: Path | None = None, **extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("NEWT_INTERPRET", None)
    if tmp is not None:
        env["NEWT_CACHE_DIR"] = str(tmp)
    env.update(extra)
    return env


SERVER_COMMAND = [sys.executable, "-m", "lsp_server"]


def init_params(client: str, trusted: bool = True, **options) -> lsp.InitializeParams:
    from pytest_lsp import client_capabilities

    opts = {"trusted": trusted, "target": "auto", "diagnosticsOn": "type",
            "inlayHints": {"shapes": True, "dtypes": True},
            "perfDiagnostics": False}  # background NVRTC compiles only where a test asks (test_perf_diagnostics)
    opts.update(options)
    return lsp.InitializeParams(capabilities=client_capabilities(client), client_info=CLIENTS[client],
                                initialization_options=opts, root_uri=FIXTURES.as_uri(),
                                workspace_folders=[lsp.WorkspaceFolder(uri=FIXTURES.as_uri(), name="fixtures")])


def pull_capable(client) -> bool:
    caps = client.capabilities
    return bool(caps and caps.text_document and caps.text_document.diagnostic is not None)


async def diagnostics_of(client, uri: str, version: int | None = None, timeout: float = 30.0):
    """The diagnostics of a document the way the client gets them: pulled, or published (for ``version``, after
    the document was last opened: ``client.published`` / ``client.opened`` are kept by the tests' fixtures)."""
    import asyncio

    if pull_capable(client):
        rep = await client.text_document_diagnostic_async(
            lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri)))
        return list(rep.items)
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    since = getattr(client, "opened", {}).get(uri, 0)

    def ready():
        pubs = [p for p in client.published[since:] if p[0] == uri]
        return pubs and (version is None or pubs[-1][1] == version)

    while not ready():
        if loop.time() > end:
            raise TimeoutError(f"no diagnostics for {uri} (version {version})")
        await asyncio.sleep(0.02)
    return list(client.diagnostics[uri])


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path
