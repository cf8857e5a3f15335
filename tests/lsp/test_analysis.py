"""The plain analysis: same result as the front end (incrementally too), LSP diagnostics, robustness."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp

from lsp_server.analysis import KernelCache, analyze, docs_href, lsp_diagnostics, uri_to_path
from newt.frontend import analyze_source

from .conftest import CORPUS, fixture_text, fixture_uri, pos_of, utf16


def _sig(fa):
    """Everything the editor shows, as comparable data (no object addresses)."""
    diags = [(d.code, d.span, d.message, d.hint, d.context, sorted(map(repr, d.data.items()))) for d in fa.diagnostics]
    kernels = []
    for k in fa.kernels:
        for r in k.results:
            notes = sorted((repr(s), repr(v) if " at 0x" not in repr(v) else type(v).__name__)
                           for s, v in r.notes.items())
            kernels.append((k.name, k.helper, r.spec.label, notes, [(d.code, d.span, d.message, d.context)
                                                                    for d in r.diagnostics]))
    return diags, kernels


def _corpus():
    files = sorted(CORPUS.glob("*.py"))
    assert files, "the front end's corpus is missing"
    return files


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.name)
def test_incremental_equals_front_end(path):
    text = path.read_text()
    cache = KernelCache()
    uri = path.as_uri()
    assert _sig(analyze(text, uri, cache=cache).file) == _sig(analyze_source(text, str(path)))
    # the same text again: everything reused
    a = analyze(text, uri, cache=cache)
    assert a.reused == sum(len(k.results) for k in a.kernels if k.kind == "jit")
    assert _sig(a.file) == _sig(analyze_source(text, str(path)))
    # lines inserted above: the results move with the kernels
    moved = "# a comment\n\n" + text
    b = analyze(moved, uri, cache=cache)
    assert b.reused > 0
    assert _sig(b.file) == _sig(analyze_source(moved, str(path)))


def _random_edit(rng: random.Random, text: str) -> str:
    snippets = ["nl.", "(", ")", ":", "\n", "    ", "BLOCK", "1000", "x", " + ", "[:, None]", "é", "😀", "#",
                "return ", "\n@newt.jit\ndef k(x_ptr, B: nl.constexpr):\n    nl.store(x_ptr, 1)\n", ", ", "0"]
    i = rng.randrange(len(text) + 1)
    op = rng.random()
    if op < 0.45:
        return text[:i] + rng.choice(snippets) + text[i:]
    j = min(len(text), i + rng.randrange(1, 12))
    if op < 0.8:
        return text[:i] + text[j:]
    return text[:i] + rng.choice(snippets) + text[j:]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1))
def test_incremental_equals_front_end_after_random_edits(seed):
    rng = random.Random(seed)
    text = fixture_text("kernels.py") + "\n" + fixture_text("broken.py").replace('"""', "#", 2)
    cache = KernelCache()
    uri = "file:///tmp/fuzz_incremental.py"
    for _ in range(8):
        text = _random_edit(rng, text)
        got = analyze(text, uri, cache=cache)
        assert _sig(got.file) == _sig(analyze_source(text, uri_to_path(uri)))


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_analyze_never_raises_on_any_text(text):
    a = analyze("import newt\nimport newt.language as nl\n@newt.jit\ndef k(x):\n" + text, "file:///tmp/any.py",
                cache=KernelCache())
    lsp_diagnostics(a)


def test_lsp_diagnostics_carry_code_link_severity_and_data():
    text = fixture_text("broken.py")
    a = analyze(text, fixture_uri("broken.py"))
    diags = lsp_diagnostics(a)
    by_code = {}
    for d in diags:
        by_code.setdefault(d.code, []).append(d)
    assert sorted(by_code) == ["N003", "N010", "N011", "N020", "N031"]
    for d in diags:
        assert d.source == "newt"
        assert d.severity == lsp.DiagnosticSeverity.Error
        assert d.code_description is not None and d.code_description.href == docs_href(d.code)
        assert d.data["code"] == d.code
    launch_n011 = next(d for d in by_code["N011"] if "BLOCK=1000" in d.message)
    # the launch that set BLOCK=1000 is where the value can be fixed
    assert launch_n011.range.start == pos_of(text, "nl.arange(0, BLOCK)", delta=len("nl.arange(0, "))
    origin = launch_n011.data["origin"]
    want = pos_of(text, "BLOCK=1000", delta=len("BLOCK="))
    assert (origin["start"]["line"], origin["start"]["character"]) == (want.line, want.character)
    assert launch_n011.data["param"] == "BLOCK" and launch_n011.data["replace"] == "1024"
    assert launch_n011.related_information and "BLOCK gets its value here" in launch_n011.related_information[0].message
    n010 = by_code["N010"][0]
    assert n010.data["param"] == "n"
    assert "hint:" in n010.message


def test_diagnostic_after_an_astral_character_is_at_the_right_utf16_column():
    text = fixture_text("broken.py")
    a = analyze(text, fixture_uri("broken.py"))
    d = next(d for d in lsp_diagnostics(a) if d.code == "N003")
    line = text.splitlines()[d.range.start.line]
    col = line.index("undefined_name")
    assert d.range.start.character == utf16(line[:col]) == col + 1  # 😀 is two UTF-16 units
    assert d.range.end.character == d.range.start.character + len("undefined_name")
    a8 = analyze(text, fixture_uri("broken.py"), encoding="utf-8")
    d8 = next(d for d in lsp_diagnostics(a8) if d.code == "N003")
    assert d8.range.start.character == len(line[:col].encode("utf-8"))


def test_docs_link_points_at_the_code_section():
    href = docs_href("N011")
    assert href is not None and "docs/diagnostics.md#L" in href
    # the line is the section's heading: an editor opens the file there
    from pathlib import Path
    from urllib.parse import unquote, urlparse
    u = urlparse(href)
    lines = Path(unquote(u.path)).read_text(encoding="utf-8").splitlines()
    assert lines[int(u.fragment[1:]) - 1].startswith("## N011")
    assert docs_href("N003", base="https://example.org/diagnostics") == "https://example.org/diagnostics#n003"


def test_uri_to_path():
    assert uri_to_path("file:///tmp/a%20b.py") == "/tmp/a b.py"
    assert uri_to_path("untitled:Untitled-1") == "untitled:Untitled-1"


def test_kernel_at_and_named():
    text = fixture_text("kernels.py")
    a = analyze(text, fixture_uri("kernels.py"))
    line = text[:text.index("mask = offsets")].count("\n") + 1
    assert a.kernel_at(line).name == "add_kernel"
    assert a.kernel_named("scale_kernel").kernel_def.autotune is not None
    assert a.kernel_at(1) is None
