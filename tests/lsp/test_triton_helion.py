"""Triton and Helion files as they are (issue 15, item 6), named tuples of the file, and pointer dtypes from
the file's newt.harness examples (item 11).

A Triton file's diagnostics, hints, quick fixes, hovers and signatures name the language the way the file
does (``tl.arange``, ``tl.constexpr``, ``@triton.jit``), never ``nl.``; a newt file keeps ``nl.``.  A Helion
file's kernels are checked by deuteron where it covers the construct, and what it does not cover is an
Information note that says so.
"""

from __future__ import annotations

import re
import sys

import pytest
from lsprotocol import types as lsp
from pytest_lsp import make_test_lsp_client

from lsp_server.analysis import KernelCache, analyze, lsp_diagnostics
from lsp_server.features import code_actions, completion, inlay_hints, signature_help
from lsp_server.hover import hover
from newt.frontend.spelling import Spelling

from .conftest import diagnostics_of, fixture_text, fixture_uri, init_params, pos_of, server_env

NL = re.compile(r"(?<![\w./])nl\.")


def _a(name: str, text: str | None = None, cache=None):
    return analyze(text if text is not None else fixture_text(name), fixture_uri(name), cache=cache)


def _all_text(ld: lsp.Diagnostic) -> str:
    return ld.message + "".join(r.message for r in ld.related_information or ())


def _fix_texts(a, ld) -> list[tuple[str, list[str]]]:
    out = []
    for act in code_actions(a, ld.range):
        if act.diagnostics and ld not in act.diagnostics:
            continue
        edits = [e.new_text for es in (act.edit.changes or {}).values() for e in es] if act.edit else []
        out.append((act.title, edits))
    return out


# --- the spelling itself ---------------------------------------------------------------------------------


@pytest.mark.parametrize("imports, text, want", [
    ({"triton": "triton", "tl": "triton.language"}, "use nl.minimum; @newt.jit; x.to(nl.int32)",
     "use tl.minimum; @triton.jit; x.to(tl.int32)"),
    ({"triton": "triton"}, "nl.arange and newt.cdiv", "triton.language.arange and triton.cdiv"),
    ({"newt": "newt", "nl": "newt.language"}, "nl.arange and @newt.jit", "nl.arange and @newt.jit"),
    ({"newt": "newt", "lang": "newt.language"}, "nl.arange and @newt.jit", "lang.arange and @newt.jit"),
    # a file with both: nl stays (the file binds it)
    ({"nl": "newt.language", "tl": "triton.language"}, "nl.sum", "nl.sum"),
    ({"helion": "helion", "hl": "helion.language"}, "dt.tile loop, dt.kernel option, dt.Config",
     "hl.tile loop, helion.kernel option, helion.Config"),
    ({"dt": "deuteron"}, "dt.tile", "dt.tile"),
    # only whole names: an attribute chain, a path, a newt name Triton lacks are left alone
    ({"tl": "triton.language", "triton": "triton"}, "x.nl.y /a/nl.py newt.harness", "x.nl.y /a/nl.py newt.harness"),
])
def test_spelling_of_the_files_imports(imports, text, want):
    assert Spelling.of_imports(imports).respell(text) == want


# --- a Triton file ---------------------------------------------------------------------------------------


def test_triton_diagnostics_hints_and_fixes_say_tl():
    text = fixture_text("triton_errors.py")
    a = _a("triton_errors.py")
    diags = lsp_diagnostics(a)
    assert {d.code for d in diags} >= {"N011", "N008", "N010"}, [(d.code, d.message) for d in diags]
    for d in diags:
        assert not NL.search(_all_text(d)), d.message
    by = {d.code: d for d in diags}
    assert "tl.arange length 1000 is not a power of two" in by["N011"].message
    assert "use tl.minimum(a, b)" in by["N008"].message
    assert "tl.arange end must be a compile-time constant (tl.constexpr)" in by["N010"].message
    assert "`N: tl.constexpr`" in by["N010"].message
    fixes = dict(_fix_texts(a, by["N008"]))
    assert fixes.get("Replace min(x, 1.0) with tl.minimum(x, 1.0)") == ["tl.minimum(x, 1.0)"], fixes
    fixes = dict(_fix_texts(a, by["N010"]))
    assert fixes.get("Declare N as N: tl.constexpr") == [": tl.constexpr"], fixes
    # the positions are the user's: the N008 squiggle is on min(x, 1.0)
    at = pos_of(text, "min(x, 1.0)")
    assert (by["N008"].range.start.line, by["N008"].range.start.character) == (at.line, at.character)


def test_the_same_file_in_newt_spelling_keeps_nl():
    text = fixture_text("triton_errors.py")
    newt_text = (text.replace("import triton.language as tl", "import newt.language as nl")
                 .replace("import triton\n", "import newt\n").replace("tl.", "nl.").replace("triton.", "newt."))
    a = _a("triton_errors.py", newt_text)
    msgs = {d.code: d.message for d in lsp_diagnostics(a)}
    assert "nl.arange length 1000" in msgs["N011"] and "use nl.minimum(a, b)" in msgs["N008"]
    assert "tl." not in "".join(msgs.values())


def test_triton_hovers_completion_and_signatures_say_tl():
    text = fixture_text("triton_errors.py")
    a = _a("triton_errors.py")
    md = hover(a, pos_of(text, "clip_kernel(x_ptr", delta=2)).contents.value
    assert "@triton.jit\ndef clip_kernel" in md and "@newt.jit" not in md
    assert "tl.arange length 1000" in md and not NL.search(md)  # the CUDA line quotes the errors
    md = hover(a, pos_of(text, "tl.maximum", delta=4)).contents.value
    assert "tl.maximum(x, y, propagate_nan=tl.PropagateNan.NONE)" in md and not NL.search(md)
    items = completion(a, pos_of(text, "tl.maximum", delta=3)).items
    maximum = next(i for i in items if i.label == "maximum")
    assert maximum.detail == "maximum(x, y, propagate_nan=tl.PropagateNan.NONE)"
    line = text.splitlines()[pos_of(text, "tl.maximum").line]
    col = line.index("tl.maximum(") + len("tl.maximum(y, ")
    sh = signature_help(a, text, lsp.Position(pos_of(text, "tl.maximum").line, col))
    sig = sh.signatures[0]
    assert sig.label == "maximum(x, y, propagate_nan=tl.PropagateNan.NONE)"
    start, end = sig.parameters[sh.active_parameter].label
    assert sig.label[start:end] == "y"
    assert sig.label[slice(*sig.parameters[2].label)] == "propagate_nan=tl.PropagateNan.NONE"


def test_triton_inlay_hints_show_shapes_and_dtypes():
    text = fixture_text("triton_errors.py")
    a = _a("triton_errors.py")
    hints = {(h.position.line, h.label if isinstance(h.label, str) else "".join(p.value for p in h.label))
             for h in inlay_hints(a)}
    assert (pos_of(text, "offs = pid").line, ": i32[BLOCK]") in hints
    # the launch passes float16: the generic check knows x's element type even though the launch's
    # BLOCK=1000 is an error of its own (N011) (issue 23: the front end reads the launches' dtypes)
    assert (pos_of(text, "x = tl.load").line, ": fp16[BLOCK]") in hints, hints
    text = fixture_text("launch_dtypes.py")
    hints = {(h.position.line, h.label) for h in inlay_hints(_a("launch_dtypes.py"))}
    # here the launch passes float16 and builds: the element type from the launch, the generic shape (item 11)
    assert (pos_of(text, "x = tl.load").line, ": fp16[BLOCK]") in hints, hints
    assert (pos_of(text, "offs = tl").line, ": i32[BLOCK]") in hints, hints


def test_triton_constexpr_error_of_compile_says_tl():
    from lsp_server.concrete import SpecError, concrete_spec
    text = fixture_text("triton_errors.py").replace("def fill_kernel(out_ptr, N)",
                                                    "def fill_kernel(out_ptr, N: tl.constexpr)")
    a = _a("triton_errors.py", text)
    with pytest.raises(SpecError) as e:
        concrete_spec(a, a.kernel_named("fill_kernel"))
    assert "(N: tl.constexpr = 128)" in str(e.value) and not NL.search(str(e.value))


# --- a Helion file ---------------------------------------------------------------------------------------


def test_helion_kernels_are_checked_by_deuteron_with_notes_where_it_does_not_cover():
    text = fixture_text("helion_kernels.py")
    a = _a("helion_kernels.py")
    assert [(k.name, k.kind) for k in a.kernels] == [("scale_rows", "deuteron"), ("bad_index", "deuteron"),
                                                     ("ragged_sum", "deuteron")]
    diags = lsp_diagnostics(a)
    got = sorted((d.code, d.range.start.line, d.severity) for d in diags)
    assert got == [("D003", pos_of(text, "tile / 2").line, lsp.DiagnosticSeverity.Error),
                   ("D004", pos_of(text, "hl.inline_triton").line, lsp.DiagnosticSeverity.Information)], \
        [(d.code, d.message) for d in diags]
    note = next(d for d in diags if d.code == "D004")
    assert note.message.startswith("not checked: deuteron") and "hl.inline_triton" in note.message
    assert "dt." not in "".join(d.message for d in diags)
    md = hover(a, pos_of(text, "scale_rows(x", delta=2)).contents.value
    assert "@helion.kernel\ndef scale_rows" in md and "A Helion kernel, checked through deuteron" in md
    md = hover(a, pos_of(text, "hl.tile(x.size())", delta=4)).contents.value
    assert "hl.tile(begin_or_sizes" in md
    md = hover(a, pos_of(text, "inline_triton(", delta=2)).contents.value
    assert "Helion's `hl.inline_triton`" in md and "does not cover it" in md


def test_a_deuteron_file_keeps_dt_and_its_errors():
    text = fixture_text("helion_kernels.py").replace("import helion.language as hl", "import deuteron as dt") \
        .replace("import helion\n", "").replace("@helion.kernel()", "@dt.kernel()").replace("hl.", "dt.")
    a = _a("helion_kernels.py", text)
    diags = lsp_diagnostics(a)
    d004 = next(d for d in diags if d.code == "D004")
    assert d004.severity == lsp.DiagnosticSeverity.Error and d004.message.startswith("dt.inline_triton")


# --- named tuples of the file ------------------------------------------------------------------------------


def test_named_tuples_of_the_file_are_known_in_kernels():
    text = fixture_text("namedtuples.py")
    a = _a("namedtuples.py")
    diags = lsp_diagnostics(a)
    assert [(d.code, d.range.start.line) for d in diags] == [("N004", pos_of(text, "m.variance").line)], \
        [(d.code, d.message) for d in diags]
    assert "no field 'variance' (its fields: mean, sq, count)" in diags[0].message
    md = hover(a, pos_of(text, "m = moments")).contents.value
    assert "m: Moments(mean=T[x_ptr] scalar, sq=T[x_ptr] scalar, count=constexpr 1)" in md
    md = hover(a, pos_of(text, "b = Bounds")).contents.value
    assert "b: Bounds(lo=T[x_ptr] scalar, hi=T[x_ptr] scalar)" in md


@pytest.mark.parametrize("edit, code", [
    ('Bounds = namedtuple("Bounds", "lo hi")', None),
    ('Bounds = namedtuple("Bounds", "lo")', "N005"),  # Bounds(lo=..., hi=...): no field hi
    ('Bounds = namedtuple("Bounds", "lo hi mid")', "N005"),  # mid missing
    ('Bounds = namedtuple("Bounds", "lo hi mid", defaults=[0])', None),
])
def test_a_changed_named_tuple_is_rechecked_with_the_cache(edit, code):
    cache = KernelCache()
    text = fixture_text("namedtuples.py")
    _a("namedtuples.py", text, cache)
    new = text.replace('Bounds = namedtuple("Bounds", "lo hi")', edit)
    cached = {(d.code, d.range.start.line, d.message) for d in lsp_diagnostics(_a("namedtuples.py", new, cache))}
    fresh = {(d.code, d.range.start.line, d.message) for d in lsp_diagnostics(_a("namedtuples.py", new))}
    assert cached == fresh
    codes = {c for c, _, _ in fresh} - {"N004"}
    assert codes == ({code} if code else set()), fresh


# --- pointer dtypes from the examples (item 11) -----------------------------------------------------------------


def test_pointer_dtypes_come_from_the_files_examples():
    text = fixture_text("example_dtypes.py")
    a = _a("example_dtypes.py")
    extra = [d for d in lsp_diagnostics(a) if d.code == "N021"]
    assert [(d.code, d.range.start.line) for d in extra] == [("N021", pos_of(text, "x | 1").line)]
    assert "pointer dtypes from the examples (out_ptr: *fp16, x_ptr: *fp16)" in extra[0].message
    md = hover(a, pos_of(text, "x = nl.load")).contents.value
    assert "x: fp16[BLOCK]" in md and "pointer dtypes from the examples (out_ptr: *fp16, x_ptr: *fp16)" in md


def test_a_pointer_the_file_does_not_type_stays_unknown_and_the_others_still_check():
    """out_ptr gets a tensor the file does not say the dtype of: it stays unknown (no *fp32 made up), while
    x_ptr's fp16 from the example still makes ``x | 1`` an error (the generic check has it)."""
    text = fixture_text("example_dtypes.py").replace("out = torch.empty_like(x)", "out = make_out(x)")
    a = _a("example_dtypes.py", text)
    md = hover(a, pos_of(text, "x = nl.load")).contents.value
    assert "pointer dtypes from the examples (x_ptr: *fp16)" in md and "out_ptr" not in md.split("examples")[1]
    assert [d.code for d in lsp_diagnostics(a) if d.code == "N021"] == ["N021"]


# --- through the protocol ----------------------------------------------------------------------------------


@pytest.fixture
async def client(tmp_path):
    c = make_test_lsp_client()
    await c.start_io(sys.executable, "-m", "lsp_server", env=server_env(tmp_path))
    c.published = []  # what diagnostics_of reads: every publishDiagnostics, in order
    original = c.protocol.fm.features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def record(params):
        c.published.append((params.uri, params.version, len(params.diagnostics)))
        return original(params)

    c.protocol.fm.features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = record
    await c.initialize_session(init_params("visual-studio-code", trusted=False))
    yield c
    await c.shutdown_session()


@pytest.mark.timeout(300)
async def test_a_triton_file_through_the_protocol(client):
    uri, text = fixture_uri("triton_errors.py"), fixture_text("triton_errors.py")
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", 1, text)))
    diags = await diagnostics_of(client, uri, version=1)
    assert {d.code for d in diags} >= {"N011", "N008", "N010"}
    assert all(not NL.search(d.message) for d in diags), [d.message for d in diags]
    h = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                pos_of(text, "clip_kernel(x_ptr", delta=2)))
    assert "@triton.jit" in h.contents.value and not NL.search(h.contents.value)


# --- the files the drop-in mode runs (python -m newt.dropin) are the files the editor reads ----------------------


def test_drop_in_programs_are_read_as_newt_and_deuteron_kernels_without_diagnostics():
    """A Triton program and a Helion program that ``python -m newt.dropin`` runs unmodified
    (tests/dropin/test_cli.py): the editor takes ``@triton.jit`` for newt's kernel kind and ``@helion.kernel``
    (with ``config=``, ``static_shapes=``, ``autotune_effort=``) for deuteron's, and reports nothing."""
    from tests.dropin.samples import HELION, SCRIPT, TEST_FILE
    for name, text, kinds in [("add.py", SCRIPT, [("add_kernel", "jit")]),
                              ("test_relu.py", TEST_FILE, [("relu_kernel", "jit")]),
                              ("k.py", HELION, [("add", "deuteron"), ("row_sum", "deuteron")])]:
        a = analyze(text, f"file:///w/{name}")
        assert [(k.name, k.kind) for k in a.kernels] == kinds, name
        assert lsp_diagnostics(a) == [], (name, [(d.code, d.message) for d in lsp_diagnostics(a)])


def test_a_mistake_in_a_drop_in_helion_program_is_reported_in_helions_spelling():
    from tests.dropin.samples import HELION
    text = HELION.replace("out[tile] = x[tile] + y[tile]", "out[tile] = x[tile] + y[tile] * (tile / 2)")
    a = analyze(text, "file:///w/k.py")
    diags = lsp_diagnostics(a)
    assert [(d.code, d.range.start.line) for d in diags] == [("D003", pos_of(text, "tile / 2").line)], \
        [(d.code, d.message) for d in diags]
    assert diags[0].severity == lsp.DiagnosticSeverity.Error and "dt." not in diags[0].message
