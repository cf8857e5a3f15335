"""Hover, inlay hints, completion, signature help, quick fixes and code lenses as plain functions."""

from __future__ import annotations

import sys

import pytest
from lsprotocol import types as lsp

from lsp_server import language
from lsp_server.analysis import analyze, lsp_diagnostics
from lsp_server.features import code_actions, code_lenses, completion, inlay_hints, signature_help
from lsp_server.hover import hover
from lsp_server.positions import LineIndex

from .conftest import fixture_text, fixture_uri, pos_of, utf16


def _a(name="kernels.py", text=None):
    return analyze(text if text is not None else fixture_text(name), fixture_uri(name))


def _hover_text(a, pos, markdown=True):
    h = hover(a, pos, markdown=markdown)
    return h.contents.value if h else None


# --- hover ----------------------------------------------------------------------------------------------


def test_hover_on_a_value_shows_dtype_and_shape_per_specialization():
    text = fixture_text("kernels.py")
    a = _a()
    h = hover(a, pos_of(text, "offsets = pid"))
    md = h.contents.value
    assert h.contents.kind == lsp.MarkupKind.Markdown
    assert "offsets: i32[BLOCK_SIZE]" in md
    assert "| generic | `i32[BLOCK_SIZE]` |" in md
    assert "BLOCK_SIZE=1024) | `i32[1024]` |" in md
    assert "[CUDA](newt:/kernels/add_kernel.cu?" in md
    # the range is the hovered name
    assert h.range == lsp.Range(pos_of(text, "offsets = pid"), pos_of(text, "offsets = pid", delta=7))


def test_hover_on_loaded_values_and_pointers():
    text = fixture_text("kernels.py")
    a = _a()
    md = _hover_text(a, pos_of(text, "x = nl.load(x_ptr"))
    # the file's newt.harness examples pass fp32 tensors (torch.randn): the generic check and every
    # specialization have those dtypes (issue 23: the front end reads them), and the hover says where from
    assert "| generic | `fp32[BLOCK_SIZE]` |" in md and "| launch at line 44 (BLOCK_SIZE=1024) | `fp32[1024]` |" in md
    assert "pointer dtypes from the examples (out_ptr: *fp32, x_ptr: *fp32, y_ptr: *fp32)" in md
    md = _hover_text(a, pos_of(text, "x_ptr, y_ptr, out_ptr, n_elements"))
    assert "x_ptr: *fp32" in md and "the same in all 2 specializations" in md
    md = _hover_text(a, pos_of(text, "pid = nl.program_id"))
    assert "pid: i32 scalar" in md and "the same in all" in md


def test_hover_on_a_sub_expression():
    text = fixture_text("kernels.py")
    a = _a()
    md = _hover_text(a, pos_of(text, "< n_elements", delta=2))
    assert "n_elements" in md
    md = _hover_text(a, pos_of(text, "offsets < n_elements", delta=8))  # on the '<'
    assert "offsets < n_elements: i1[BLOCK_SIZE]" in md


def test_hover_after_a_non_ascii_name_uses_utf16_columns():
    text = fixture_text("kernels.py")
    a = _a()
    md = _hover_text(a, pos_of(text, "σ = cols"))
    assert md is not None and "σ: i1[BLOCK]" in md
    line = next(ln for ln in text.splitlines() if "mask=σ, other" in ln)
    col = line.index("mask=σ") + len("mask=")
    lineno = text.splitlines().index(line)
    md = _hover_text(a, lsp.Position(lineno, utf16(line[:col])))
    assert md is not None and "σ: i1[BLOCK]" in md


def test_hover_on_a_constexpr_parameter():
    text = fixture_text("kernels.py")
    md = _hover_text(_a(), pos_of(text, "BLOCK_SIZE + nl.arange"))
    assert "constexpr BLOCK_SIZE" in md and "constexpr 1024" in md


def test_hover_on_the_language():
    text = fixture_text("kernels.py")
    a = _a()
    md = _hover_text(a, pos_of(text, "nl.load(x_ptr", delta=4))
    assert "nl.load(pointer, mask=None, other=None" in md and "global memory" in md
    md = _hover_text(a, pos_of(text, "nl.program_id(axis=0)", delta=1))  # on "nl"
    assert "module newt.language" in md
    md = _hover_text(a, pos_of(text, "newt.jit", delta=6))
    assert "jit(fn=None" in md
    md = _hover_text(a, pos_of(text, "newt.Config", delta=6))
    assert md is not None and "Config(" in md
    md = _hover_text(a, pos_of(text, "nh.example(add_kernel)", delta=4))
    assert md is not None and "example(kernel" in md


def test_hover_on_a_block_method():
    text = fixture_text("broken.py")
    md = _hover_text(_a("broken.py"), pos_of(text, ".to(nl.uint32)", delta=1))
    assert "(method) to(dtype" in md


def test_hover_on_a_kernel_name_lists_specializations_and_links_the_code():
    text = fixture_text("kernels.py")
    a = _a()
    md = _hover_text(a, pos_of(text, "def add_kernel", delta=4))
    assert "def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr)" in md
    assert "1 specialization found in this file" in md and "launch at line" in md
    assert "newt:/kernels/add_kernel.ir?" in md
    md = _hover_text(a, pos_of(text, "def scale_kernel", delta=4))
    assert "3 specializations" in md and "config #2 (BLOCK=256)" in md and "num_warps=8" in md
    # the kernel at its launch site
    md = _hover_text(a, pos_of(text, "add_kernel[("))
    assert "def add_kernel(" in md


def test_hover_plain_text_for_clients_without_markdown():
    text = fixture_text("kernels.py")
    h = hover(_a(), pos_of(text, "offsets = pid"), markdown=False)
    assert h.contents.kind == lsp.MarkupKind.PlainText
    assert "```" not in h.contents.value and "|" not in h.contents.value
    assert "launch at line" in h.contents.value


def test_hover_outside_kernels_is_empty():
    text = fixture_text("kernels.py")
    a = _a()
    assert hover(a, pos_of(text, "n = out.numel()")) is None
    assert hover(a, lsp.Position(0, 0)) is None
    assert hover(a, lsp.Position(10_000, 3)) is None


def test_hover_on_half_typed_code_still_answers_for_the_rest_of_the_kernel():
    text = fixture_text("kernels.py").replace("    mask = offsets < n_elements\n",
                                              "    mask = offsets < n_elements\n    zz = nl.load(x_ptr +\n", 1)
    a = _a(text=text)
    md = _hover_text(a, pos_of(text, "offsets = pid"))
    assert md is not None and "i32[BLOCK_SIZE]" in md


# --- inlay hints ---------------------------------------------------------------------------------------


def test_inlay_hints_after_assignments():
    text = fixture_text("kernels.py")
    a = _a()
    hints = {(h.position.line, h.position.character): h.label for h in inlay_hints(a)}
    assert hints[tuple(vars_of(pos_of(text, "offsets = pid", delta=7)))] == ": i32[BLOCK_SIZE]"
    assert hints[tuple(vars_of(pos_of(text, "pid = nl", delta=3)))] == ": i32"
    assert hints[tuple(vars_of(pos_of(text, "σ = cols", delta=1)))] == ": i1[BLOCK]"
    # loaded values: the element type is unknown in the generic check, the shape is not; scale_rows's launch
    # passes tensors of unknown dtype (the shape only), add_kernel's newt.harness examples pass fp32 (item 11)
    assert hints[tuple(vars_of(pos_of(text, "x = nl.load(x_ptr + row", delta=1)))] == ": [BLOCK]"
    assert hints[tuple(vars_of(pos_of(text, "x = nl.load(x_ptr + offsets", delta=1)))] == ": fp32[BLOCK_SIZE]"
    assert all(h.kind == lsp.InlayHintKind.Type for h in inlay_hints(a))


def vars_of(p: lsp.Position):
    return p.line, p.character


def test_inlay_hints_switch_per_kind_and_range():
    text = fixture_text("kernels.py")
    a = _a()
    p = vars_of(pos_of(text, "offsets = pid", delta=7))
    shapes = {vars_of(h.position): h.label for h in inlay_hints(a, shapes=True, dtypes=False)}
    dtypes = {vars_of(h.position): h.label for h in inlay_hints(a, shapes=False, dtypes=True)}
    assert shapes[p] == ": [BLOCK_SIZE]" and dtypes[p] == ": i32"
    assert vars_of(pos_of(text, "pid = nl", delta=3)) not in shapes  # a scalar has no shape
    assert inlay_hints(a, shapes=False, dtypes=False) == []
    line = pos_of(text, "offsets = pid").line
    only = inlay_hints(a, lsp.Range(lsp.Position(line, 0), lsp.Position(line, 99)))
    assert [vars_of(h.position) for h in only] == [p]


# --- completion ------------------------------------------------------------------------------------------


def _complete(text, line_text_after, needle="    mask = offsets < n_elements\n"):
    new = text.replace(needle, needle + line_text_after + "\n", 1)
    a = analyze(new, fixture_uri("kernels.py"))
    p = pos_of(new, line_text_after, delta=len(line_text_after))
    return completion(a, p)


def test_completion_after_nl_dot():
    c = _complete(fixture_text("kernels.py"), "    z = nl.")
    labels = {i.label for i in c.items}
    assert {"load", "store", "arange", "float16", "math", "constexpr", "dot", "softmax"} <= labels
    load = next(i for i in c.items if i.label == "load")
    assert load.kind == lsp.CompletionItemKind.Function and load.detail.startswith("load(pointer, mask=None")
    assert "global memory" in load.documentation.value
    f16 = next(i for i in c.items if i.label == "float16")
    assert f16.kind == lsp.CompletionItemKind.Constant


def test_completion_after_nl_math_and_newt():
    labels = {i.label for i in _complete(fixture_text("kernels.py"), "    z = nl.math.ex").items}
    assert {"exp", "exp2", "sqrt", "erf"} <= labels and "load" not in labels
    labels = {i.label for i in _complete(fixture_text("kernels.py"), "    z = newt.").items}
    assert {"jit", "autotune", "Config", "cdiv", "next_power_of_2"} <= labels


def test_completion_of_block_methods():
    c = _complete(fixture_text("kernels.py"), "    z = offsets.")
    labels = {i.label for i in c.items}
    assert {"to", "sum", "reshape", "trans", "dtype", "shape", "T", "exp"} <= labels
    to = next(i for i in c.items if i.label == "to")
    assert to.kind == lsp.CompletionItemKind.Method and to.detail.startswith("to(dtype")
    # an expression's methods
    assert _complete(fixture_text("kernels.py"), "    z = (x + y).") is not None


def test_no_completion_where_it_does_not_belong():
    text = fixture_text("kernels.py")
    assert _complete(text, "    z = 'nl.") is None  # inside a string
    assert _complete(text, "    z = 1  # nl.") is None  # inside a comment
    assert _complete(text, "    z = BLOCK_SIZE.") is None  # a constexpr int has no block methods
    # outside kernels only module members are completed
    new = text + "\nzz = torch_thing.\n"
    a = analyze(new, fixture_uri("kernels.py"))
    assert completion(a, pos_of(new, "torch_thing.", delta=12)) is None


@pytest.mark.skipif("deuteron" not in sys.modules and not __import__("importlib").util.find_spec("deuteron"),
                    reason="deuteron is not installed")
def test_completion_after_dt_dot_reads_deuteron_without_importing_it():
    text = "import deuteron as dt\n\nx = dt.\n"
    before = set(sys.modules)
    a = analyze(text, "file:///tmp/dt.py")
    c = completion(a, lsp.Position(2, 7))
    assert c is not None and c.items
    assert not any(m.startswith("deuteron") for m in set(sys.modules) - before if m.split(".")[0] == "deuteron"
                   and "frontend" not in m)


# --- signature help --------------------------------------------------------------------------------------


def test_signature_help_for_nl_functions_with_active_parameter():
    text = fixture_text("kernels.py")
    new = text.replace("    mask = offsets < n_elements\n",
                       "    mask = offsets < n_elements\n    z = nl.load(x_ptr + offsets, mask=mask, \n", 1)
    a = analyze(new, fixture_uri("kernels.py"))
    p = pos_of(new, "mask=mask, ", delta=len("mask=mask, "))
    s = signature_help(a, new, p)
    sig = s.signatures[0]
    assert sig.label.startswith("load(pointer, mask=None, other=None")
    assert s.active_parameter == 2  # the third argument: other
    start, end = sig.parameters[2].label
    assert sig.label[start:end] == "other=None"
    # a keyword argument selects its parameter
    p2 = pos_of(new, "mask=mask", delta=len("mask="))
    assert signature_help(a, new, p2).active_parameter == 1


def test_signature_help_for_methods_and_jit_helpers():
    text = fixture_text("kernels.py")
    new = text.replace("    mask = offsets < n_elements\n",
                       "    mask = offsets < n_elements\n    z = offsets.to(nl.float16, \n", 1)
    a = analyze(new, fixture_uri("kernels.py"))
    s = signature_help(a, new, pos_of(new, "nl.float16, ", delta=len("nl.float16, ")))
    assert s.signatures[0].label.startswith("to(dtype") and s.active_parameter == 1
    assert signature_help(a, new, lsp.Position(0, 0)) is None


# --- code lenses -----------------------------------------------------------------------------------------


def test_code_lenses_on_each_kernel_with_protocol_arguments():
    text = fixture_text("kernels.py")
    a = _a()
    lenses = code_lenses(a)
    by_kernel = {}
    for lens in lenses:
        by_kernel.setdefault(lens.range.start.line, []).append(lens)
    def_line = pos_of(text, "def add_kernel").line
    titles = [lens.command.title for lens in by_kernel[def_line]]
    # add_kernel is not @newt.autotune, but it has a newt.harness example: Autotune tunes its launch options
    assert titles == ["Compile", "Verify", "Autotune", "Show CUDA"]
    cmds = [lens.command.command for lens in by_kernel[def_line]]
    assert cmds == ["newt.compileKernel", "newt.verifyKernel", "newt.autotuneKernel", "newt.showCuda"]
    rows = pos_of(text, "def scale_rows").line  # no example: nothing Autotune could run on
    assert [lens.command.title for lens in by_kernel[rows]] == ["Compile", "Verify", "Show CUDA"]
    tuned = pos_of(text, "def scale_kernel").line
    assert [lens.command.title for lens in by_kernel[tuned]] == ["Compile", "Verify", "Autotune", "Show CUDA"]
    name = pos_of(text, "def add_kernel", delta=4)
    assert by_kernel[def_line][0].command.arguments == [a.uri, {"line": name.line, "character": name.character}]
    assert len(by_kernel) == 3  # add_kernel, scale_rows, scale_kernel


def test_no_lenses_on_helpers():
    text = ("import newt\nimport newt.language as nl\n\n@newt.jit\ndef helper(x):\n    return x * 2\n\n"
            "@newt.jit\ndef k(p, B: nl.constexpr):\n    nl.store(p + nl.arange(0, B), helper(1.0))\n")
    lenses = code_lenses(analyze(text, "file:///tmp/h.py"))
    assert {lens.range.start.line for lens in lenses} == {8}


# --- quick fixes -------------------------------------------------------------------------------------------


def apply(text: str, edits: list[lsp.TextEdit]) -> str:
    idx = LineIndex(text)
    spans = sorted(((idx.offset(e.range.start), idx.offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for s, e, new in spans:
        text = text[:s] + new + text[e:]
    return text


def _fixes(text, code, which=None):
    a = analyze(text, fixture_uri("broken.py"))
    out = []
    for d in lsp_diagnostics(a):
        if d.code == code and (which is None or which in d.message):
            out.extend(code_actions(a, d.range))
    return [f for f in out if f.diagnostics and f.diagnostics[0].code == code]


def _codes(text):
    return sorted(d.code for d in analyze(text, fixture_uri("broken.py")).file.diagnostics)


def test_fix_rounds_a_launch_constexpr_to_a_power_of_two():
    text = fixture_text("broken.py")
    fixes = _fixes(text, "N011", "BLOCK=1000")
    assert len(fixes) == 1
    f = fixes[0]
    assert f.kind == lsp.CodeActionKind.QuickFix and f.is_preferred
    assert "BLOCK=1024" in f.title
    new = apply(text, f.edit.changes[fixture_uri("broken.py")])
    assert "BLOCK=1024)" in new and "nl.arange(0, BLOCK)" in new
    assert _codes(new).count("N011") == _codes(text).count("N011") - 1


def test_fix_rounds_a_literal_block_size():
    text = fixture_text("broken.py")
    f = _fixes(text, "N011", "length 100 ")[0]
    new = apply(text, f.edit.changes[fixture_uri("broken.py")])
    assert "nl.arange(0, 128)" in new
    assert _codes(new).count("N011") == _codes(text).count("N011") - 1


def test_fix_declares_a_constexpr_parameter():
    text = fixture_text("broken.py")
    f = _fixes(text, "N010")[0]
    assert f.title == "Declare n as n: nl.constexpr"
    new = apply(text, f.edit.changes[fixture_uri("broken.py")])
    assert "def constexpr_kernel(x_ptr, n: nl.constexpr):" in new
    assert "N010" not in _codes(new)


@pytest.mark.parametrize("imports, annotation, added", [
    ("import newt\nimport newt.language as tl\n", "tl.constexpr", None),
    ("import newt\nfrom newt.language import arange, store\n", "newt.language.constexpr", None),
    ("from newt import jit\nfrom newt.language import arange, store\n", "nl.constexpr", "import newt.language as nl"),
])
def test_fix_declares_constexpr_with_the_files_spelling(imports, annotation, added):
    deco = "@jit" if "from newt import jit" in imports else "@newt.jit"
    aliased = "tl." if "as tl" in imports else ""
    text = (f"{imports}\n\n{deco}\ndef k(x_ptr, n):\n"
            f"    offs = {aliased}arange(0, n)\n    {aliased}store(x_ptr + offs, offs)\n")
    a = analyze(text, "file:///tmp/k.py")
    d = next(d for d in lsp_diagnostics(a) if d.code == "N010")
    f = code_actions(a, d.range)[0]
    new = apply(text, f.edit.changes["file:///tmp/k.py"])
    assert f"def k(x_ptr, n: {annotation}):" in new
    assert (added in new) if added else new.count("import") == text.count("import")
    assert not [d for d in analyze(new, "file:///tmp/k.py").file.diagnostics if d.code == "N010"]


def test_fix_inserts_a_cast_for_mixed_signedness():
    text = fixture_text("broken.py")
    fixes = _fixes(text, "N020")
    titles = [f.title for f in fixes]
    assert titles == ["Cast u to nl.int32", "Cast offs to nl.uint32"]
    new = apply(text, fixes[0].edit.changes[fixture_uri("broken.py")])
    assert "q = offs / u.to(nl.int32)" in new
    assert "N020" not in _codes(new)


def test_fix_inserts_a_cast_for_dot_operands():
    text = fixture_text("broken.py")
    fixes = _fixes(text, "N031")
    assert [f.title for f in fixes] == ["Cast b to nl.float16", "Cast a to nl.float32"]
    new = apply(text, fixes[0].edit.changes[fixture_uri("broken.py")])
    assert "c = nl.dot(a, b.to(nl.float16))" in new
    assert "N031" not in _codes(new)


def test_cast_fix_wraps_compound_operands_in_parentheses():
    text = ("import newt\nimport newt.language as nl\n\n@newt.jit\ndef k(p, B: nl.constexpr):\n"
            "    o = nl.arange(0, B)\n    u = nl.load(p + o).to(nl.uint32)\n    q = (o + 1) % (u * 2)\n"
            "    nl.store(p + o, q)\n")
    a = analyze(text, "file:///tmp/c.py")
    d = next(d for d in lsp_diagnostics(a) if d.code == "N020")
    titles = {f.title: f for f in code_actions(a, d.range)}
    f = titles["Cast u * 2 to nl.int32"]
    new = apply(text, f.edit.changes["file:///tmp/c.py"])
    assert "q = (o + 1) % (u * 2).to(nl.int32)" in new
    assert "N020" not in [d.code for d in analyze(new, "file:///tmp/c.py").file.diagnostics]


def test_code_actions_only_for_the_requested_range_and_kinds():
    text = fixture_text("broken.py")
    a = analyze(text, fixture_uri("broken.py"))
    assert code_actions(a, lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1))) == []
    d = next(d for d in lsp_diagnostics(a) if d.code == "N010")
    assert code_actions(a, d.range, only=["refactor"]) == []
    assert code_actions(a, d.range, only=["quickfix"])


# --- the language reference ------------------------------------------------------------------------------


def test_language_lookup_reads_other_packages_statically():
    m = language.lookup("newt.language.dot")
    assert m.kind == "function" and "input_precision" in m.signature
    assert language.lookup("newt.language.float8e5").kind == "dtype"
    assert language.lookup("newt.autotune").signature.startswith("autotune(configs, key")
    assert language.lookup("newt.harness.Case").kind == "class"
    assert language.lookup("newt.nothing_here") is None
    assert language.lookup("torch.zeros") is None or True  # not ours: may be absent, must not raise
    assert "torch" not in sys.modules or True


def test_static_reading_of_other_modules_does_not_import_them():
    import subprocess

    from .conftest import ROOT
    code = ("import sys\nfrom lsp_server import language\n"
            "m = language.lookup('newt.harness.example')\n"
            "assert m is not None and 'example inputs' in m.doc, m\n"
            "assert language.lookup('newt.testing.do_bench').signature.startswith('do_bench(fn')\n"
            "assert 'newt.harness' not in sys.modules and 'newt.testing' not in sys.modules\n"
            "assert 'torch' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})


def test_document_symbols_outline():
    from lsp_server.features import document_symbols
    text = fixture_text("kernels.py")
    syms = document_symbols(_a())
    names = [s.name for s in syms]
    assert "add_kernel" in names and "scale_kernel" in names
    add = syms[names.index("add_kernel")]
    assert add.kind == lsp.SymbolKind.Function and add.detail == "kernel"
    assert add.selection_range.start == pos_of(text, "def add_kernel", delta=4)
    kids = {c.name: c for c in add.children}
    assert kids["BLOCK_SIZE"].kind == lsp.SymbolKind.Constant and kids["BLOCK_SIZE"].detail == "constexpr"
    assert kids["x_ptr"].kind == lsp.SymbolKind.Variable
    assert syms[names.index("scale_kernel")].detail.startswith("autotuned")


def test_quick_fixes_for_mechanical_hints_and_casts_do_not_stack():
    from lsp_server.analysis import analyze
    text = (
        "import math\n\nimport newt\nimport newt.language as nl\n\n\n@newt.jit\n"
        "def k(x_ptr, y_ptr, u_ptr, BLOCK: nl.constexpr):\n"
        "    offs = nl.arange(0, BLOCK)\n"
        "    x = nl.load(x_ptr + offs)\n"
        "    y = nl.load(y_ptr + offs)\n"
        "    a = min(x, y)\n"
        "    b = int(x)\n"
        "    c = math.exp(x)\n"
        "    nl.store(x_ptr + offs, a + b + c)\n"
    )
    a = analyze(text, "file:///mech.py")

    def fixes(line):
        return [x.edit.changes["file:///mech.py"][0].new_text
                for x in code_actions(a, lsp.Range(lsp.Position(line, 0), lsp.Position(line, 40)))]
    assert "nl.minimum(x, y)" in fixes(11)
    assert "x.to(nl.int32)" in fixes(12)
    assert "nl.math.exp(x)" in fixes(13)
    import ast

    from lsp_server.features import _cast_text
    node = ast.parse("u.to(nl.uint32)", mode="eval").body
    assert _cast_text("u.to(nl.uint32)", node, "nl.int32") == "u.to(nl.int32)"
    stacked = _cast_text("u.to(nl.float16)", node, "nl.int16", bitcast=True)
    assert stacked == "u.to(nl.float16).to(nl.int16, bitcast=True)"


def test_did_you_mean_hints_get_a_quick_fix_that_replaces_the_misspelled_word():
    """Every 'did you mean X?' hint (an undefined name, an unknown attribute or keyword, a launch parameter)
    names a mechanical replacement: its quick fix edits the misspelled word only, and the result is clean."""
    from lsp_server.analysis import analyze
    text = (
        "import newt\nimport newt.language as nl\n\n\n@newt.jit\n"
        "def k(x_ptr, out_ptr, n, BLOCK: nl.constexpr):\n"
        "    offs = nl.arnge(0, BLOCK)\n"
        "    x = nl.load(x_ptr + offs, maskk=offs < n)\n"
        "    nl.store(out_ptr + offs, x + offz)\n"
        "\n\ndef run(x, out):\n"
        "    k[(1,)](x, out, x.numel(), BLOCKK=128)\n"
    )
    uri = "file:///dym.py"
    a = analyze(text, uri)
    want = {"N004": ("arnge", "arange"), "N005": ("maskk", "mask"), "N003": ("offz", "offs"),
            "N060": ("BLOCKK", "BLOCK")}
    import re
    edits = []
    for d in lsp_diagnostics(a):
        if d.code not in want or "did you mean" not in d.message:
            continue
        wrong, right = want.pop(d.code)
        acts = [x for x in code_actions(a, d.range)
                if x.diagnostics == [d] and x.title == f"Replace {wrong} with {right}"]
        assert len(acts) == 1, (d.code, [x.title for x in code_actions(a, d.range)])
        (edit,) = acts[0].edit.changes[uri]
        # the one word, nothing else
        assert apply(text, [edit]) == re.sub(rf"\b{wrong}\b", right, text, count=1), edit
        edits.append(edit)
    assert want == {}, want
    assert [d.code for d in lsp_diagnostics(analyze(apply(text, edits), uri))] == []
