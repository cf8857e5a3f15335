"""The generated newt line in deuteron value hovers (issue 25): the map from the user's lines to the generated
newt (read back from deuteron's ``# line N:`` comments), the run worker's ``dt_newt`` trace (an example's inputs,
else tensors of the file's launch shapes), the server's background cache (trusted only, once per content), and
the whole path over LSP."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_server.deuteron_newt import MAX_LINES, GeneratedNewt, newt_lines_by_user_line

from .conftest import SERVER_COMMAND, fixture_text, fixture_uri, init_params, pos_of, server_env
from .test_deuteron_hints import LAUNCHED

ROOT = Path(__file__).resolve().parents[2]
HAVE_DEUTERON = __import__("importlib").util.find_spec("deuteron") is not None
needs_deuteron = pytest.mark.skipif(not HAVE_DEUTERON, reason="deuteron is not installed")


def test_the_generated_source_maps_back_to_the_users_lines():
    src = (ROOT / "tests" / "deuteron" / "golden" / "matmul.py.txt").read_text()
    m = newt_lines_by_user_line(src)
    assert m[69] == ["acc = nl.zeros((_BLOCK_0, _BLOCK_1), dtype=nl.float32)"]
    # a loop keeps its body's relative indentation; the statement inside it has its own lines
    assert m[70] == ["for begin_tk in range(0, 48, _BLOCK_2):", "    offs_tk = begin_tk + nl.arange(0, _BLOCK_2)"]
    assert m[71][-1] == "acc = nl.dot(load_x, load_y, acc)" and len(m[71]) == 3
    # after the loop (less indented than line 71's comment) the next statement starts; the launch function is
    # nobody's
    assert m[72][-1].startswith("nl.store(out + ")
    assert not any("_matmul_kernel[grid]" in ln for lines in m.values() for ln in lines)
    assert newt_lines_by_user_line("x = 1\n") == {}


class _FakeWorker:
    def __init__(self, answer=None, fail=False):
        self.calls = []
        self.answer = answer
        self.fail = fail

    async def __call__(self, method, params):
        self.calls.append((method, params))
        await asyncio.sleep(0)
        if self.fail:
            raise RuntimeError("the file does not import")
        return self.answer


_ANSWER = {"lines": {"12": {"kernel": "scaled_add", "with": "the example small",
                            "newt": ["load_x = nl.load(x + offs)", "nl.store(out + offs, load_x * 2.0)"]}},
           "errors": {}}
_TEXT = "import deuteron as dt\n# a deuteron file\n"


def _hover(value="block fp32[tile0, tile1]"):
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=value))


def test_an_untrusted_workspace_never_traces_and_shows_no_newt_line():
    async def go():
        gen, w = GeneratedNewt(), _FakeWorker(_ANSWER)
        gen.ensure("file:///a.py", _TEXT, "/a.py", False, w)
        await asyncio.sleep(0.01)
        assert w.calls == [] and not gen.pending
        h = gen.decorate(_hover(), "file:///a.py", _TEXT, 12, True)
        assert "generated newt" not in h.contents.value
    asyncio.run(go())


def test_a_trusted_workspace_traces_once_per_content_in_the_background():
    async def go():
        gen, w = GeneratedNewt(), _FakeWorker(_ANSWER)
        # before the trace is there the hover is as it was (a hover never waits)
        gen.ensure("file:///a.py", _TEXT, "/a.py", True, w)
        gen.ensure("file:///a.py", _TEXT, "/a.py", True, w)  # already running: not again
        assert "generated newt" not in gen.decorate(_hover(), "file:///a.py", _TEXT, 12, True).contents.value
        await asyncio.gather(*gen.pending.values())
        assert [c[0] for c in w.calls] == ["dt_newt"] and w.calls[0][1] == {"path": "/a.py", "text": _TEXT}
        h = gen.decorate(_hover(), "file:///a.py", _TEXT, 12, True)
        assert h.contents.value.startswith("block fp32[tile0, tile1]")
        assert "generated newt (scaled_add, traced with the example small)" in h.contents.value
        assert "```python\nload_x = nl.load(x + offs)\nnl.store(out + offs, load_x * 2.0)\n```" in h.contents.value
        # another line, no hover, or the engine's JSON hover
        assert gen.decorate(_hover(), "file:///a.py", _TEXT, 11, True).contents.value == "block fp32[tile0, tile1]"
        assert gen.decorate(None, "file:///a.py", _TEXT, 12, True) is None
        js = gen.decorate({"contents": {"kind": "plaintext", "value": "v"}}, "file:///a.py", _TEXT, 12, False)
        assert js["contents"]["value"].startswith("v\n\ngenerated newt") and "```" not in js["contents"]["value"]
        gen.ensure("file:///a.py", _TEXT, "/a.py", True, w)  # cached by content
        await asyncio.sleep(0.01)
        assert len(w.calls) == 1
        changed = _TEXT + "x = 1\n"
        gen.ensure("file:///a.py", changed, "/a.py", True, w)  # new content: traced again
        gen.ensure("file:///a.py", changed + "y = 2\n", "/a.py", True, w)  # (while it runs, no other of the file)
        await asyncio.gather(*gen.pending.values())
        assert len(w.calls) == 2
        # a file without deuteron is never traced
        gen.ensure("file:///b.py", "import torch\n", "/b.py", True, w)
        assert len(w.calls) == 2
    asyncio.run(go())


def test_a_failed_trace_shows_nothing_and_is_not_retried_for_that_content():
    async def go():
        gen, w = GeneratedNewt(), _FakeWorker(fail=True)
        gen.ensure("file:///a.py", _TEXT, "/a.py", True, w)
        await asyncio.gather(*gen.pending.values())
        assert "generated newt" not in gen.decorate(_hover(), "file:///a.py", _TEXT, 12, True).contents.value
        gen.ensure("file:///a.py", _TEXT, "/a.py", True, w)
        assert len(w.calls) == 1 and not gen.pending
    asyncio.run(go())


def test_a_long_statement_is_cut_with_a_count():
    async def go():
        many = {"lines": {"3": {"kernel": "k", "with": "w", "newt": [f"v{i} = {i}" for i in range(MAX_LINES + 3)]}}}
        gen, w = GeneratedNewt(), _FakeWorker(many)
        gen.ensure("u", _TEXT, "/a.py", True, w)
        await asyncio.gather(*gen.pending.values())
        text = gen.section("u", _TEXT, 3, False)
        assert f"v{MAX_LINES - 1} = " in text and f"v{MAX_LINES} = " not in text and "3 more generated lines" in text
    asyncio.run(go())


# test_deuteron_hints' launched matmul, with sizes that agree (it traces)
_LAUNCHED = LAUNCHED.replace("torch.randn(128, n)", "torch.randn(64, n)")


@needs_deuteron
def test_the_worker_traces_on_an_example_or_on_the_files_launch_shapes(tmp_path, monkeypatch):
    import lsp_server.worker as worker
    monkeypatch.setenv("NEWT_WORKER_DEVICE", "cpu")
    monkeypatch.setenv("NEWT_INTERPRET", "1")  # (what the worker sets on a CPU: restored after the test)
    monkeypatch.setattr(worker, "_DEVICE", None)
    # an example (newt.harness)
    p = tmp_path / "dtk.py"
    p.write_text(fixture_text("dt_kernels.py"))
    r = worker.handle({"method": "dt_newt", "params": {"path": str(p), "text": p.read_text()}})
    assert r["status"] == "ok", r
    line = fixture_text("dt_kernels.py").splitlines().index("        out[tile] = x[tile] * 2.0 + y[tile]") + 1
    entry = r["result"]["lines"][str(line)]
    assert entry["kernel"] == "scaled_add" and entry["with"] == "the example small"
    assert entry["newt"][0].startswith("load_x = nl.load(x + ") and entry["newt"][-1].startswith("nl.store(out + ")
    # no example: tensors of the shapes and dtypes of the file's launch (check(32) from __main__)
    q = tmp_path / "launched.py"
    q.write_text(_LAUNCHED)
    r = worker.handle({"method": "dt_newt", "params": {"path": str(q), "text": _LAUNCHED}})
    lines = r["result"]["lines"]
    entry = lines[str(_LAUNCHED.splitlines().index("        out[tm, tn] = x[tm, :] @ w[:, tn]") + 1)]
    assert entry["with"] == "the call at line 20 (x: fp16[64, 64], w: fp16[64, 32])"
    assert any("nl.dot(" in ln for ln in entry["newt"]), entry
    # neither: nothing traced, and why
    lone = _LAUNCHED.split("\n\ndef check")[0] + "\n"
    q.write_text(lone)
    r = worker.handle({"method": "dt_newt", "params": {"path": str(q), "text": lone}})
    assert r["result"]["lines"] == {} and "no example and no launch" in r["result"]["errors"]["mm"]


_HELION = """import torch

import helion
import helion.language as hl
from helion._testing import DEVICE, run_example


@helion.kernel(autotune_effort="none")
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    k2, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(x.dtype)
    return out


def check(m: int, k: int, n: int) -> None:
    x = torch.randn([m, k], device=DEVICE, dtype=torch.float16)
    y = torch.randn([k, n], device=DEVICE, dtype=torch.float16)
    run_example(matmul, torch.matmul, (x, y))


def main() -> None:
    check(256, 64, 128)
"""


@needs_deuteron
def test_a_helion_file_as_it_is_is_traced_through_the_drop_in(tmp_path, monkeypatch):
    """``import helion`` with no Helion installed: served from deuteron while the worker traces the file (on
    the shapes of its run_example), and the import hook is gone again afterwards."""
    import importlib.util

    import lsp_server.worker as worker
    import newt.dropin
    if importlib.util.find_spec("helion") is not None:
        pytest.skip("Helion itself is installed: its kernels are not deuteron's")
    monkeypatch.setenv("NEWT_WORKER_DEVICE", "cpu")
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    monkeypatch.setattr(worker, "_DEVICE", None)
    assert not newt.dropin.is_installed()
    p = tmp_path / "hl_matmul.py"
    p.write_text(_HELION)
    r = worker.handle({"method": "dt_newt", "params": {"path": str(p), "text": _HELION}})
    assert r["status"] == "ok", r
    entry = r["result"]["lines"][str(_HELION.splitlines().index(
        "            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])") + 1)]
    assert entry["with"] == "run_example at line 24 (x: fp16[256, 64], y: fp16[64, 128])"
    assert entry["newt"][-1] == "acc = nl.dot(load_x, load_y, acc)", entry
    assert not newt.dropin.is_installed()


# --- over LSP: a trusted workspace's hover gets the newt lines once the background trace is there ------------------

_CACHE = tempfile.mkdtemp(prefix="newt-lsp-dtnewt-")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER_COMMAND,
                                              server_env=server_env(None, NEWT_CACHE_DIR=_CACHE,
                                                                    NEWT_WORKER_DEVICE="cpu")))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params("neovim", trusted=True))
    yield
    await lsp_client.shutdown_session()


@needs_deuteron
@pytest.mark.asyncio
@pytest.mark.timeout(300)
async def test_a_trusted_hover_shows_the_generated_newt_line(client):
    text = fixture_text("dt_kernels.py")
    uri = fixture_uri("dt_kernels.py")
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    params = lsp.HoverParams(lsp.TextDocumentIdentifier(uri), pos_of(text, "x[tile] * 2.0", delta=1))
    value = ""
    for _ in range(240):  # the first hover starts the trace; later ones show it
        h = await client.text_document_hover_async(params)
        value = h.contents.value if h is not None else ""
        if "generated newt" in value:
            break
        await asyncio.sleep(0.5)
    assert "generated newt (scaled_add, traced with the example small)" in value, value
    assert "nl.load(x + " in value and "nl.store(out + " in value
    assert os.path.isdir(_CACHE)
