"""Compile on real files (issue 15, items 1 and 6): constexprs from the host code that launches a kernel,
asking for what nothing says (the error names it and why, with suggestions; the answer compiles), every
kernel of examples/, and Triton files as they are."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import make_test_lsp_client

from lsp_server.analysis import analyze
from lsp_server.concrete import SpecError, concrete_spec
from newt.frontend.hostvalues import host_constexprs

from .conftest import ROOT, fixture_uri, init_params, server_env

pytestmark = pytest.mark.timeout(600)
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def _analysis(path: Path):
    return analyze(path.read_text(encoding="utf-8"), path.as_uri())


def test_host_expression_before_the_launch_is_evaluated():
    text = (
        "import newt\nimport newt.language as nl\n\n"
        "@newt.jit\ndef k(x_ptr, n, BLOCK: nl.constexpr, WARPS: nl.constexpr):\n"
        "    nl.store(x_ptr + nl.arange(0, BLOCK), 1.0)\n\n"
        "LIMIT = 4096\n\n"
        "def run(x, n_cols=1000):\n"
        "    block = newt.next_power_of_2(n_cols)\n"
        "    block = min(block, LIMIT)\n"
        "    warps = 4 if block <= 2048 else 8\n"
        "    k[(1,)](x, n_cols, BLOCK=block, WARPS=warps)\n"
    )
    a = analyze(text, "file:///t.py")
    c = concrete_spec(a, a.kernel_named("k"))
    assert c.constexprs == {"BLOCK": 1024, "WARPS": 4}
    assert "from the host code: BLOCK=block at line 14 = 1024" in c.assumed["BLOCK"]


def test_a_call_of_the_wrapper_gives_its_arguments():
    text = (
        "import newt\nimport newt.language as nl\n\n"
        "@newt.jit\ndef k(x_ptr, BLOCK: nl.constexpr):\n    nl.store(x_ptr + nl.arange(0, BLOCK), 1.0)\n\n"
        "def run(x, block):\n    k[(1,)](x, BLOCK=block * 2)\n\n"
        "def main():\n    run(None, 64)\n"
    )
    a = analyze(text, "file:///t.py")
    assert concrete_spec(a, a.kernel_named("k")).constexprs == {"BLOCK": 128}


def test_run_time_values_are_asked_for_with_the_reason():
    path = ROOT / "examples" / "fused_softmax.py"
    text = path.read_text(encoding="utf-8")
    # without its harness example (which gives BLOCK_SIZE and num_stages): only the launch's run-time values
    text = text[:text.index("@nh.reference(softmax_kernel)")] + text[text.index("def main("):]
    a = analyze(text, path.as_uri())
    ka = a.kernel_named("softmax_kernel")
    with pytest.raises(SpecError) as ei:
        concrete_spec(a, ka)
    data = ei.value.data
    assert set(data["missing"]) == {"BLOCK_SIZE", "num_stages"}
    assert "n_cols" in data["why"]["BLOCK_SIZE"] and "run time" in data["why"]["BLOCK_SIZE"]
    assert data["suggestions"]["BLOCK_SIZE"][0] in (64, 128, 256)
    c = concrete_spec(a, ka, None, {"BLOCK_SIZE": 1024, "num_stages": 2})
    assert c.constexprs["BLOCK_SIZE"] == 1024 and "picked" in c.assumed["BLOCK_SIZE"]


def test_host_values_never_execute_code():
    # a call to anything but the few pure functions stays unknown
    import ast
    text = "import os\n\ndef run(k):\n    b = os.system('touch /tmp/never')\n    k[(1,)](BLOCK=b)\n"
    tree = ast.parse(text)
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript))

    class L:
        node = call
        kw_nodes = {"BLOCK": call.keywords[0]}
    values, why = host_constexprs(text, [L()], ["BLOCK"])
    assert values == {} and "run time" in why["BLOCK"]


@pytest.fixture
async def client(tmp_path):
    c = make_test_lsp_client()
    await c.start_io(sys.executable, "-m", "lsp_server", env=server_env(tmp_path))
    await c.initialize_session(init_params("visual-studio-code", trusted=True))
    yield c
    await c.shutdown_session()


def _open(client, path: Path) -> str:
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=path.as_uri(), language_id="python", version=1,
                             text=path.read_text(encoding="utf-8"))))
    return path.as_uri()


def _d(x):
    if hasattr(x, "_asdict"):
        return {k: _d(v) for k, v in x._asdict().items()}
    if isinstance(x, dict):
        return {k: _d(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_d(v) for v in x]
    return x


async def _compile(client, uri, line, constexprs=None):
    arg = {"uri": uri, "position": {"line": line, "character": 4}}
    if constexprs:
        arg["constexprs"] = constexprs
    return _d(await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="newt.compile",
                                                                                     arguments=[arg])))


async def test_every_kernel_of_the_examples_compiles(client):
    """What a user gets: Compile on each kernel of examples/; where the file only says run-time values the
    error asks (-32002 with what is missing), and the first suggested values compile."""
    compiled, asked = [], []
    for path in EXAMPLES:
        uri = _open(client, path)
        for ka in _analysis(path).kernels:
            if ka.helper:
                continue
            line = ka.span.line - 1
            try:
                r = await _compile(client, uri, line)
            except Exception as e:
                data = getattr(e, "data", None) or {}
                assert "missing" in data, f"{path.name}:{ka.name}: {e}"
                picks = {m: data["suggestions"][m][0] for m in data["missing"]}
                asked.append((path.name, ka.name, sorted(picks)))
                r = await _compile(client, uri, line, picks)
                assert all(m in r["assumed"] for m in picks), r["assumed"]
            assert r["n_regs"] > 0, (path.name, ka.name)
            compiled.append(ka.name)
    assert len(compiled) >= 7, compiled
    assert ("vector_add.py", "add_kernel") not in [(f, k) for f, k, _ in asked]  # its host code says 1024


async def test_triton_file_as_it_is(client):
    uri = fixture_uri("triton_add.py")
    _open(client, Path(__file__).parent / "fixtures" / "triton_add.py")
    r = await _compile(client, uri, 5)
    assert r["kernel"] == "add_kernel" and r["n_regs"] > 0
    assert r["specialization"]["constexprs"] == {"BLOCK_SIZE": 1024}
    hov = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri), position=lsp.Position(7, 6)))
    assert hov is not None and "BLOCK_SIZE" in str(hov.contents)


def test_triton_file_gets_newt_diagnostics():
    from lsp_server.analysis import lsp_diagnostics
    text = (Path(__file__).parent / "fixtures" / "triton_add.py").read_text(encoding="utf-8")
    a = analyze(text.replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=1000)"), "file:///triton_add.py")
    assert [k.name for k in a.kernels] == ["add_kernel"]
    assert [d.code for d in lsp_diagnostics(a)] == ["N011"]
    assert not lsp_diagnostics(analyze(text, "file:///triton_add.py"))


def _apply(text, edits):
    from lsp_server.positions import LineIndex
    idx = LineIndex(text)
    spans = sorted(((idx.offset(e.range.start), idx.offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for s0, s1, new in spans:
        text = text[:s0] + new + text[s1:]
    return text


def test_code_actions_give_the_missing_constexprs_and_an_example():
    from lsp_server.features import code_actions
    path = ROOT / "examples" / "fused_softmax.py"
    text = path.read_text(encoding="utf-8")
    # the example as it would be without its harness declarations (they give BLOCK_SIZE, and an example)
    text = text[:text.index("@nh.reference(softmax_kernel)")] + text[text.index("def main("):]
    a = analyze(text, path.as_uri())
    ka = a.kernel_named("softmax_kernel")
    line = ka.span.line - 1
    acts = code_actions(a, lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)))
    titles = [x.title for x in acts]
    example = next(x for x in acts if x.title.startswith("Add a newt.harness example"))
    defaults = next(x for x in acts if x.title.startswith("Give BLOCK_SIZE = 64, num_stages = 3"))
    # the defaults make Compile work without asking
    fixed = _apply(text, defaults.edit.changes[path.as_uri()])
    a2 = analyze(fixed, path.as_uri())
    assert concrete_spec(a2, a2.kernel_named("softmax_kernel")).constexprs["BLOCK_SIZE"] == 64, titles
    # the example is valid Python that registers an example for the kernel
    with_example = _apply(text, example.edit.changes[path.as_uri()])
    import ast
    ast.parse(with_example)
    assert "@nh.example(softmax_kernel)" in with_example and "import newt.harness as nh" in with_example
    # and a reference to fill in, naming the output the kernel writes (Verify says it is not written yet)
    assert "@nh.reference(softmax_kernel)\ndef softmax_kernel_reference(out_ptr, in_ptr," in with_example
    assert "raise NotImplementedError(\"softmax_kernel_reference: return {'out_ptr': ...}" in with_example
    a3 = analyze(with_example, path.as_uri())
    line3 = a3.kernel_named("softmax_kernel").span.line - 1
    again = code_actions(a3, lsp.Range(lsp.Position(line3, 0), lsp.Position(line3, 0)))
    assert not any(x.title.startswith("Add a newt.harness example") for x in again)


def test_pointer_dtypes_come_from_the_tensors_launched():
    text = (
        "import torch\nimport newt\nimport newt.language as nl\n\n"
        "@newt.jit\ndef k(x_ptr, y_ptr, z_ptr, n, BLOCK: nl.constexpr):\n"
        "    o = nl.arange(0, BLOCK)\n    nl.store(y_ptr + o, nl.load(x_ptr + o))\n    nl.store(z_ptr + o, 1)\n\n"
        "def run(z):\n"
        "    x = torch.randn(100, dtype=torch.float16, device='cuda')\n"
        "    y = torch.empty_like(x)\n"
        "    k[(1,)](x, y, z, 100, BLOCK=128)\n"
    )
    a = analyze(text, "file:///t.py")
    c = concrete_spec(a, a.kernel_named("k"))
    assert str(c.arg_types["x_ptr"]) == str(c.arg_types["y_ptr"]) == "*fp16"
    assert c.assumed["y_ptr"].startswith("*fp16 (from the host code: the launch at line 14 passes y")
    assert "assumed: the file does not say" in c.assumed["z_ptr"]  # a parameter of run(): unknown, said so


DEUTERON_EXAMPLES = sorted((ROOT / "examples" / "deuteron").glob("*.py"))


@pytest.mark.parametrize("path", DEUTERON_EXAMPLES, ids=lambda p: p.name)
async def test_every_deuteron_example_kernel_compiles(client, path):
    """Compile on each ``@dt.kernel`` of examples/deuteron (Helion-style tile code): the server traces it to
    newt and compiles that; where the file only has run-time sizes the error asks and the suggestion compiles."""
    uri = _open(client, path)
    kernels = [ka for ka in _analysis(path).kernels if not ka.helper]
    assert kernels, path.name
    for ka in kernels:
        line = ka.span.line - 1
        try:
            r = await _compile(client, uri, line)
        except Exception as e:
            data = getattr(e, "data", None) or {}
            assert "missing" in data, f"{path.name}:{ka.name}: {e}"
            r = await _compile(client, uri, line, {m: data["suggestions"][m][0] for m in data["missing"]})
        assert r["kernel"] and r["n_regs"] > 0, (path.name, ka.name, r)
