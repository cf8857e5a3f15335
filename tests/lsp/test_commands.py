"""``newt.compile`` / ``newt.verify`` / ``newt.autotune`` / ``newt.show`` over LSP, both client kinds.

Verify and Autotune run through the interpreter here (no GPU); on the GPU machine the same tests run
the kernels with CUDA.  Compile needs the CUDA backend (NVRTC works without a GPU).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_server.concrete import backend

from .conftest import SERVER_COMMAND, fixture_text, fixture_uri, init_params, pos_of, server_env

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(600)]

_CACHE = tempfile.mkdtemp(prefix="newt-lsp-cmd-")


def _interpreter_ready() -> bool:
    try:
        import newt.interpreter as interp
    except Exception:
        return False
    return hasattr(interp, "launch")


needs_interpreter = pytest.mark.skipif(not _interpreter_ready(), reason="newt.interpreter.launch is not there yet")
HAVE_BACKEND = backend() is not None


def _gpu() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:
        return False


DEVICE = "cuda" if _gpu() else "interpreter"


@pytest_lsp.fixture(scope="module", params=["visual-studio-code", "neovim"],
                    config=ClientServerConfig(server_command=SERVER_COMMAND,
                                              server_env=server_env(None, NEWT_CACHE_DIR=_CACHE)))
async def client(request, lsp_client: LanguageClient):
    lsp_client.kind = request.param
    # the refresh requests the client's capabilities announce are answered, as the editors answer them (a settings
    # change or the figures of a trusted document send them)
    fm = lsp_client.protocol.fm
    for method in (lsp.WORKSPACE_INLAY_HINT_REFRESH, lsp.WORKSPACE_CODE_LENS_REFRESH, lsp.WORKSPACE_DIAGNOSTIC_REFRESH):
        if method not in fm.features and method not in fm.builtin_features:
            lsp_client.feature(method)(lambda params: None)
    await lsp_client.initialize_session(init_params(request.param, trusted=True))
    yield
    await lsp_client.shutdown_session()


def teardown_module(module):
    shutil.rmtree(_CACHE, ignore_errors=True)


def _open(client, name):
    uri = fixture_uri(name)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=fixture_text(name))))
    return uri


def _at(name, kernel):
    p = pos_of(fixture_text(name), f"def {kernel}", delta=4)
    return {"line": p.line, "character": p.character}


def _d(x):
    """pygls hands results back as namedtuples: plain dicts and lists."""
    if hasattr(x, "_asdict"):
        return {k: _d(v) for k, v in x._asdict().items()}
    if isinstance(x, dict):
        return {k: _d(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_d(v) for v in x]
    return x


async def _cmd(client, command, *args, token=None):
    return _d(await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command=command, arguments=list(args), work_done_token=token)))


# --- verify ---------------------------------------------------------------------------------------------------


@needs_interpreter
async def test_verify_passes(client):
    uri = _open(client, "kernels.py")
    r = await _cmd(client, "newt.verify", {"uri": uri, "position": _at("kernels.py", "add_kernel")})
    assert r["kernel"] == "add_kernel" and r["ok"] is True and r["device"] == DEVICE
    assert [c["name"] for c in r["cases"]] == ["ragged", "tiny"] and all(c["ok"] for c in r["cases"])
    assert "match the reference" in r["message"]


@needs_interpreter
async def test_verify_through_the_lens_alias(client):
    uri = _open(client, "kernels.py")
    r = await _cmd(client, "newt.verifyKernel", uri, _at("kernels.py", "scale_kernel"))
    assert r["kernel"] == "scale_kernel" and r["ok"] is True


@needs_interpreter
async def test_verify_reports_mismatches(client):
    uri = _open(client, "crashy.py")
    r = await _cmd(client, "newt.verify", {"uri": uri, "position": _at("crashy.py", "wrong_kernel")})
    assert r["ok"] is False and r["cases"][0]["max_abs_err"] == 1.0
    assert "differ" in r["cases"][0]["message"]


async def test_verify_without_examples_explains(client):
    uri = _open(client, "crashy.py")
    r = await _cmd(client, "newt.verify", {"uri": uri, "position": _at("crashy.py", "lonely_kernel")})
    assert r["ok"] is False and "@newt.harness.example(lonely_kernel)" in r["message"]


async def test_a_crashing_example_is_an_error_and_the_next_command_works(client):
    uri = _open(client, "crashy.py")
    with pytest.raises(JsonRpcException) as ei:
        await _cmd(client, "newt.verify", {"uri": uri, "position": _at("crashy.py", "crash_kernel")})
    assert ei.value.code == -32003 and "exited with code 7" in ei.value.message
    with pytest.raises(JsonRpcException) as ei:
        await _cmd(client, "newt.verify", {"uri": uri, "position": _at("crashy.py", "fault_kernel")})
    assert ei.value.code == -32003 and "illegal memory access" in ei.value.message
    r = await _cmd(client, "newt.verify", {"uri": uri, "position": _at("crashy.py", "lonely_kernel")})
    assert r["kernel"] == "lonely_kernel"
    info = _d(await client.protocol.send_request_async("newt/serverInfo", {}))
    assert info["workers"]["run"][1] >= 3  # a fresh worker after the crash and after the fault
    assert info["torch_imported"] is False


async def test_a_hang_is_stopped_after_the_timeout(client):
    uri = _open(client, "crashy.py")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"newt": {"workerTimeout": 3}}))
    await asyncio.sleep(0.2)
    try:
        with pytest.raises(JsonRpcException) as ei:
            await _cmd(client, "newt.verify", {"uri": uri, "position": _at("crashy.py", "hang_kernel")})
        assert ei.value.code == -32003 and "timed out after 3 s" in ei.value.message
    finally:
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
            settings={"newt": {"workerTimeout": 300}}))
        await asyncio.sleep(0.2)


async def test_no_kernel_at_the_position(client):
    uri = _open(client, "kernels.py")
    with pytest.raises(JsonRpcException) as ei:
        await _cmd(client, "newt.verify", {"uri": uri, "position": {"line": 0, "character": 0}})
    assert ei.value.code == -32002 and "no @newt.jit or @dt.kernel kernel at line 1" in ei.value.message


# --- autotune ---------------------------------------------------------------------------------------------------


async def test_command_messages_in_a_triton_file_say_triton(client):
    """A Triton file's command errors name Triton's decorators (issue 15, item 6), not newt's."""
    uri = _open(client, "triton_errors.py")
    with pytest.raises(JsonRpcException) as ei:
        await _cmd(client, "newt.autotuneKernel", uri, _at("triton_errors.py", "clip_kernel"))
    assert ei.value.code == -32002 and "@triton.autotune(configs=" in ei.value.message, ei.value.message
    with pytest.raises(JsonRpcException) as ei:
        await _cmd(client, "newt.verify", {"uri": uri, "position": {"line": 0, "character": 0}})
    assert "no @triton.jit or @dt.kernel kernel at line 1" in ei.value.message, ei.value.message


@needs_interpreter
async def test_autotune_with_progress(client):
    uri = _open(client, "kernels.py")
    token = f"tune-{client.kind}"
    client.progress_reports.setdefault(token, [])
    r = await _cmd(client, "newt.autotune", {"uri": uri, "position": _at("kernels.py", "scale_kernel")}, token=token)
    assert r["kernel"] == "scale_kernel" and r["device"] == DEVICE
    assert len(r["results"]) == 3 and all(isinstance(x["ms"], float) for x in r["results"])
    assert r["best"]["ms"] == min(x["ms"] for x in r["results"])
    assert r["cache"]["memory"] is True
    reports = client.progress_reports[token]
    kinds = [p.kind for p in reports]
    assert kinds == ["begin", "report", "report", "report", "end"]
    assert reports[0].title == "Autotuning scale_kernel" and reports[0].cancellable
    assert "BLOCK=128" in reports[1].message and reports[3].percentage == 100
    assert reports[-1].message.startswith("best: BLOCK=") and "{" not in reports[-1].message


@needs_interpreter
async def test_autotune_of_a_plain_kernel_with_an_example_tunes_its_launch_options(client):
    uri = _open(client, "kernels.py")
    r = await _cmd(client, "newt.autotuneKernel", uri, _at("kernels.py", "add_kernel"))
    assert r["kernel"] == "add_kernel" and r["best"] is not None, r
    assert len(r["results"]) == 9 and all(x["error"] is None for x in r["results"])
    assert "plain @newt.jit kernel" in r["message"]


async def test_autotune_of_a_plain_kernel_without_an_example_is_refused(client):
    uri = fixture_uri("plain_no_example.py")
    text = ("import newt\nimport newt.language as nl\n\n\n@newt.jit\ndef lone_kernel(x_ptr, n, BLOCK: nl.constexpr):\n"
            "    offs = nl.arange(0, BLOCK)\n    nl.store(x_ptr + offs, 1.0, mask=offs < n)\n")
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    with pytest.raises(JsonRpcException) as ei:
        await _cmd(client, "newt.autotuneKernel", uri, {"line": 5, "character": 4})
    assert ei.value.code == -32002 and "not autotuned and has no example inputs" in ei.value.message


@needs_interpreter
async def test_autotune_cancelled_by_cancel_request(client):
    uri = _open(client, "slow_tune.py")
    token = f"slow-{client.kind}"
    client.progress_reports.setdefault(token, [])
    msg_id = f"cancel-me-{client.kind}"
    fut = client.protocol.send_request(lsp.WORKSPACE_EXECUTE_COMMAND, lsp.ExecuteCommandParams(
        command="newt.autotune", arguments=[{"uri": uri, "position": _at("slow_tune.py", "slow_kernel")}],
        work_done_token=token), msg_id=msg_id)
    loop = asyncio.get_running_loop()
    end = loop.time() + 120
    while not any(p.kind == "report" for p in client.progress_reports[token]):
        assert loop.time() < end, "no progress report"
        await asyncio.sleep(0.05)
    client.protocol.notify("$/cancelRequest", lsp.CancelParams(id=msg_id))
    with pytest.raises(Exception) as ei:
        await asyncio.wrap_future(fut)
    assert "cancel" in str(ei.value).lower()
    while client.progress_reports[token][-1].kind != "end":
        assert loop.time() < end, "no progress end"
        await asyncio.sleep(0.05)
    assert client.progress_reports[token][-1].message == "cancelled"
    n_reports = sum(1 for p in client.progress_reports[token] if p.kind == "report")
    assert n_reports < 7
    # the worker stopped (or was replaced): the next command runs at once
    r = await _cmd(client, "newt.verify", {"uri": uri, "position": _at("slow_tune.py", "slow_kernel")})
    assert r["ok"] is True


@needs_interpreter
async def test_autotune_cancelled_from_the_progress_bar(client):
    uri = _open(client, "slow_tune.py")
    token = f"slow-bar-{client.kind}"
    client.progress_reports.setdefault(token, [])
    task = asyncio.ensure_future(_cmd(client, "newt.autotune",
                                      {"uri": uri, "position": _at("slow_tune.py", "slow_kernel")}, token=token))
    loop = asyncio.get_running_loop()
    end = loop.time() + 120
    while not any(p.kind == "report" for p in client.progress_reports[token]):
        assert loop.time() < end, "no progress report"
        await asyncio.sleep(0.05)
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    r = await task
    assert r["cancelled"] is True and 1 <= len(r["results"]) < 7 and r["cache"] is None
    assert client.progress_reports[token][-1].kind == "end"


# --- compile / show ------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not HAVE_BACKEND, reason="the CUDA backend (newt.backend.cuda) is not there yet")
async def test_compile_returns_resources_and_documents(client):
    uri = _open(client, "kernels.py")
    r = await _cmd(client, "newt.compile", {"uri": uri, "position": _at("kernels.py", "add_kernel"),
                                            "target": "sm_80"})
    assert r["kernel"] == "add_kernel" and r["target"] == "sm_80"
    assert isinstance(r["n_regs"], int) and r["n_regs"] > 0 and r["n_spills"] == 0
    assert r["specialization"]["constexprs"] == {"BLOCK_SIZE": 1024}
    assert r["assumed"]["x_ptr"].startswith("*fp32")
    assert r["compile_ms"] > 0
    docs = r["documents"]
    for kind, needle, lang in (("cuda", "__global__", "cuda-cpp"), ("ptx", ".entry", "ptx"), ("sass", "EXIT", "sass"),
                               ("ir", "func @add_kernel", "plaintext")):
        assert docs[kind].startswith("newt:/kernels/add_kernel.")
        doc = _d(await client.protocol.send_request_async("newt/virtualDocument", {"uri": docs[kind]}))
        assert doc["languageId"] == lang and needle in doc["text"], (kind, doc["text"][:400])
    # the lens alias compiles the same kernel
    r2 = await _cmd(client, "newt.compileKernel", uri, _at("kernels.py", "add_kernel"))
    assert r2["kernel"] == "add_kernel" and r2["n_regs"] > 0


@pytest.mark.skipif(HAVE_BACKEND, reason="checks the message shown before the backend exists")
async def test_compile_without_the_backend_explains(client):
    uri = _open(client, "kernels.py")
    with pytest.raises(JsonRpcException) as ei:
        await _cmd(client, "newt.compile", {"uri": uri, "position": _at("kernels.py", "add_kernel")})
    assert ei.value.code == -32002 and "CUDA backend" in ei.value.message


async def test_compile_of_a_broken_kernel_points_at_the_line(client):
    uri = _open(client, "broken.py")
    with pytest.raises(JsonRpcException) as ei:
        await _cmd(client, "newt.compile", {"uri": uri, "position": _at("broken.py", "pow2_kernel")})
    assert ei.value.code == -32002
    assert "broken.py:9:25: error[N011]" in ei.value.message


async def test_show_returns_virtual_document_uris(client):
    uri = _open(client, "kernels.py")
    for kind in ("cuda", "ptx", "sass", "ir"):
        r = await _cmd(client, "newt.show", {"uri": uri, "position": _at("kernels.py", "scale_rows"), "kind": kind})
        assert r["uri"].startswith(f"newt:/kernels/scale_rows.{ {'cuda': 'cu'}.get(kind, kind)}?")
        assert f"kind={kind}" in r["uri"] and "spec=1" in r["uri"]
    r = await _cmd(client, "newt.showCuda", uri, _at("kernels.py", "scale_rows"))
    assert "kind=cuda" in r["uri"]
    doc = _d(await client.protocol.send_request_async("newt/virtualDocument", {"uri": r["uri"]}))
    assert doc["languageId"] == "cuda-cpp"
    if HAVE_BACKEND:
        assert "__global__" in doc["text"]
        # scale_rows' alpha is a float at its launch: typed fp32, not assumed
        assert "alpha: fp32" in doc["text"]
    else:
        assert "not available" in doc["text"]


# --- deuteron kernels ---------------------------------------------------------------------------------------------

HAVE_DEUTERON = __import__("importlib").util.find_spec("deuteron") is not None
needs_deuteron = pytest.mark.skipif(not HAVE_DEUTERON, reason="deuteron is not installed")


@needs_deuteron
@needs_interpreter
async def test_deuteron_verify_uses_the_eager_oracle(client):
    uri = _open(client, "dt_kernels.py")
    r = await _cmd(client, "newt.verify", {"uri": uri, "position": _at("dt_kernels.py", "scaled_add")})
    assert r["kernel"] == "scaled_add" and r["ok"] is True and r["device"] == DEVICE


@needs_deuteron
@pytest.mark.skipif(not HAVE_BACKEND, reason="the CUDA backend (newt.backend.cuda) is not there yet")
async def test_deuteron_compile_traces_the_example(client):
    uri = _open(client, "dt_kernels.py")
    r = await _cmd(client, "newt.compile", {"uri": uri, "position": _at("dt_kernels.py", "scaled_add"),
                                            "target": "sm_90a"})
    assert r["kernel"] == "scaled_add" and r["n_regs"] > 0 and r["specialization_label"] == "example small"
    doc = _d(await client.protocol.send_request_async("newt/virtualDocument", {"uri": r["documents"]["cuda"]}))
    assert "__global__" in doc["text"]
    shown = await _cmd(client, "newt.showSass", uri, _at("dt_kernels.py", "scaled_add"))
    doc = _d(await client.protocol.send_request_async("newt/virtualDocument", {"uri": shown["uri"]}))
    assert doc["languageId"] == "sass" and "EXIT" in doc["text"]


@needs_deuteron
async def test_deuteron_hover(client):
    text = fixture_text("dt_kernels.py")
    uri = _open(client, "dt_kernels.py")
    h = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                 pos_of(text, "tile in dt.tile")))
    assert h is not None and "tile" in h.contents.value
    h = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                 pos_of(text, "def scaled_add", delta=4)))
    assert "deuteron kernel" in h.contents.value
    if client.kind == "visual-studio-code":
        # VS Code renders only command: links in hovers: they run the client's Show commands
        import json
        import re
        from urllib.parse import unquote
        m = re.search(r"\[CUDA\]\(command:newt\.showCuda\?(\S+)", h.contents.value)
        assert m, h.contents.value
        assert json.loads(unquote(m.group(1)))[0] == uri
    else:
        assert "newt:/dt_kernels/scaled_add.cu?" in h.contents.value


# --- on a GPU (the device machine): real launches, and a real fault --------------------------------------------------


@pytest.mark.gpu
async def test_gpu_verify_autotune_and_a_real_cuda_fault(client, tmp_path):
    uri = _open(client, "kernels.py")
    r = await _cmd(client, "newt.verify", {"uri": uri, "position": _at("kernels.py", "add_kernel")})
    assert r["ok"] is True and r["device"] == "cuda"
    token = f"gpu-tune-{client.kind}"
    client.progress_reports.setdefault(token, [])
    r = await _cmd(client, "newt.autotune", {"uri": uri, "position": _at("kernels.py", "scale_kernel")}, token=token)
    assert r["device"] == "cuda" and r["best"] is not None and r["cache"]["memory"] is True
    # an out-of-bounds store faults the context: an error, and the next command gets a fresh worker
    bad = tmp_path / "fault_for_real.py"
    bad.write_text(
        "import newt\nimport newt.harness as nh\nimport newt.language as nl\n\n\n@newt.jit\n"
        "def oob(x_ptr, BLOCK: nl.constexpr):\n    offs = nl.arange(0, BLOCK) + (1 << 30)\n"
        "    nl.store(x_ptr + offs, 1.0)\n\n\n@nh.example(oob)\ndef ex(device):\n    import torch\n"
        "    x = torch.zeros(16, device=device)\n"
        "    return nh.Case(grid=(1,), args=(x,), kwargs={'BLOCK': 128}, reference=lambda x, BLOCK: {'x_ptr': x})\n")
    buri = bad.as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=buri, language_id="python", version=1, text=bad.read_text())))
    with pytest.raises(JsonRpcException) as ei:
        await _cmd(client, "newt.verify", {"uri": buri, "position": {"line": 6, "character": 4}})
    assert ei.value.code == -32003
    r = await _cmd(client, "newt.verify", {"uri": uri, "position": _at("kernels.py", "add_kernel")})
    assert r["ok"] is True and r["device"] == "cuda"
