"""The public analyzer (newt.frontend.Analyzer): its result object, incremental reuse, kernel kinds."""

from __future__ import annotations

import pytest

from newt.frontend import (
    AnalysisCache,
    Analyzer,
    FileAnalysis,
    Severity,
    Span,
    analyze_source,
    build_specialization,
    register_kernel_kind,
    unregister_kernel_kind,
)
from newt.frontend.check import KernelAnalysis, SpecResult
from newt.frontend.values import TensorV

TWO = '''import newt
import newt.language as nl


@newt.jit
def helper(x):
    return x * 2


@newt.jit
def uses_helper(x_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, helper(nl.load(x_ptr + offs)))


@newt.jit
def alone(y_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(y_ptr + offs, nl.load(y_ptr + offs) + 1)


uses_helper[(1,)](None, BLOCK=128)
alone[(1,)](None, BLOCK=64)
'''


def _sig(fa: FileAnalysis):
    return ([(d.code, d.span, d.message, d.context) for d in fa.diagnostics],
            [(k.name, k.helper, [(r.spec.label, sorted(map(repr, r.notes)), [(d.code, d.span) for d in r.diagnostics])
                                 for r in k.results]) for k in fa.kernels])


def _built(cache: AnalysisCache, before: int) -> int:
    return cache.misses - before


def test_result_object_kernels_diagnostics_and_typed_notes():
    fa = Analyzer().analyze(TWO, "two.py")
    assert [k.name for k in fa.kernels] == ["helper", "uses_helper", "alone"]
    assert fa.diagnostics == []
    ka = fa.kernel_named("alone")
    assert isinstance(ka, KernelAnalysis) and ka.kind == "jit" and ka.launched and not ka.helper
    assert fa.kernel_named("helper").helper
    # generic check first, then the launch's specialization
    assert [r.spec.label for r in ka.results] == ["generic", "launch at line 23 (BLOCK=64)"]
    r = ka.results[1]
    assert isinstance(r, SpecResult) and r.fn is not None
    line = TWO.splitlines().index("    offs = nl.arange(0, BLOCK)", 15) + 1
    span, av = r.note_at(line, 6)  # on "offs"
    assert span == Span(line, 5, line, 9)
    assert isinstance(av, TensorV) and av.shape == (64,)
    assert r.note_at(1, 1) is None
    assert fa.kernel_at(line) is ka and fa.kernel_at(1) is None


def test_spec_of_names_the_specialization_of_a_diagnostic():
    text = TWO.replace("BLOCK=64", "BLOCK=1000")
    fa = Analyzer().analyze(text, "two.py")
    d = next(d for d in fa.diagnostics if d.code == "N011")
    ka, idx = fa.spec_of(d)
    assert ka.name == "alone" and ka.results[idx].spec.constexprs == {"BLOCK": 1000}


def test_cache_rebuilds_only_the_edited_kernel():
    cache = AnalysisCache()
    an = Analyzer(cache=cache)
    first = an.analyze(TWO, "two.py")
    n_results = sum(len(k.results) for k in first.kernels)
    assert first.reused == 0 and cache.misses == n_results
    again = an.analyze(TWO, "two.py")
    assert again.reused == n_results and _sig(again) == _sig(first)
    # an edit inside `alone` rebuilds alone's two results only
    before = cache.misses
    edited = TWO.replace("nl.load(y_ptr + offs) + 1", "nl.load(y_ptr + offs) + 2")
    fa = an.analyze(edited, "two.py")
    assert _built(cache, before) == len(fa.kernel_named("alone").results) == 2
    assert _sig(fa) == _sig(analyze_source(edited, "two.py"))
    # an edit of the helper rebuilds the helper and the kernel that inlines it, not `alone`
    before = cache.misses
    edited2 = edited.replace("return x * 2", "return x * 3")
    fa2 = an.analyze(edited2, "two.py")
    rebuilt = len(fa2.kernel_named("helper").results) + len(fa2.kernel_named("uses_helper").results)
    assert _built(cache, before) == rebuilt
    assert fa2.kernel_named("alone").content_key == fa.kernel_named("alone").content_key
    assert fa2.kernel_named("uses_helper").content_key != fa.kernel_named("uses_helper").content_key
    assert _sig(fa2) == _sig(analyze_source(edited2, "two.py"))


def test_moved_kernels_are_reused_with_moved_spans():
    cache = AnalysisCache()
    an = Analyzer(cache=cache)
    an.analyze(TWO.replace("BLOCK=64", "BLOCK=1000"), "two.py")
    moved = "# one\n# two\n" + TWO.replace("BLOCK=64", "BLOCK=1000")
    before = cache.misses
    fa = an.analyze(moved, "two.py")
    assert _built(cache, before) == 0 and fa.reused > 0
    assert _sig(fa) == _sig(analyze_source(moved, "two.py"))
    d = next(d for d in fa.diagnostics if d.code == "N011")
    assert moved.splitlines()[d.span.line - 1].strip() == "offs = nl.arange(0, BLOCK)"


def test_a_module_constant_a_kernel_reads_is_part_of_its_key():
    text = TWO.replace("import newt.language as nl\n", "import newt.language as nl\nK = 1\n").replace(
        "nl.load(y_ptr + offs) + 1", "nl.load(y_ptr + offs) + K")
    cache = AnalysisCache()
    an = Analyzer(cache=cache)
    an.analyze(text, "two.py")
    before = cache.misses
    fa = an.analyze(text.replace("K = 1", "K = 2.5"), "two.py")
    assert _built(cache, before) == len(fa.kernel_named("alone").results)


def test_registered_kind_is_dispatched_and_a_crashing_one_is_contained():
    calls = []

    def analyze_kernel(scan, src, kd):
        calls.append(kd.name)
        if kd.name == "boom":
            raise RuntimeError("kaput")
        sp = src.span(kd.node)
        ka = KernelAnalysis(kd.name, "mykind", kd.node, Span.of_def_name(kd.node, src.lines), sp, kernel_def=kd)
        from newt.frontend import Diagnostic
        ka.diagnostics = [Diagnostic("Q001", Severity.WARNING, Span.of_def_name(kd.node, src.lines), "seen",
                                     file=src.path)]
        return ka

    register_kernel_kind("mykind.kernel", analyze_kernel, codes={"Q001": ("q-seen", "a test kind's diagnostic")})
    try:
        text = ("import mykind as mk\n\n@mk.kernel\ndef fine(x):\n    pass\n\n"
                "@mk.kernel\ndef boom(x):\n    pass\n")
        fa = Analyzer(cache=AnalysisCache()).analyze(text, "k.py")
        assert calls == ["fine", "boom"]
        assert [(k.name, k.kind) for k in fa.kernels] == [("fine", "mykind"), ("boom", "mykind")]
        assert [(d.code, d.span.line, d.severity) for d in fa.diagnostics] == [
            ("Q001", 4, Severity.WARNING), ("N001", 8, Severity.WARNING)]
        assert "RuntimeError: kaput" in fa.diagnostics[1].message
    finally:
        unregister_kernel_kind("mykind")
    fa = Analyzer().analyze(text, "k.py")
    assert fa.kernels == [] and fa.diagnostics == []
    from newt.diagnostics import CODES
    assert "Q001" not in CODES


def test_an_internal_error_is_one_warning_and_empties_the_cache(monkeypatch):
    cache = AnalysisCache()
    an = Analyzer(cache=cache)
    an.analyze(TWO, "two.py")
    assert len(cache) > 0
    from newt.frontend import analyzer as A

    def broken(*a, **k):
        raise ValueError("front end bug")

    monkeypatch.setattr(A, "discover_specs", broken)
    fa = an.analyze(TWO, "two.py")
    assert [(d.code, d.severity) for d in fa.diagnostics] == [("N001", Severity.WARNING)]
    assert "ValueError: front end bug" in fa.diagnostics[0].message
    assert len(cache) == 0


def test_record_notes_off_keeps_diagnostics():
    text = TWO.replace("BLOCK=64", "BLOCK=1000")
    with_notes = Analyzer().analyze(text, "two.py")
    without = Analyzer(record_notes=False).analyze(text, "two.py")
    assert [d.code for d in without.diagnostics] == [d.code for d in with_notes.diagnostics] == ["N011"]
    assert all(not r.notes for k in without.kernels for r in k.results)


def test_build_specialization_returns_notes_and_diagnostics_without_raising():
    import newt.language as nl
    fa = Analyzer().analyze(TWO, "two.py")
    js = fa.kernel_named("alone").jit_source
    r = build_specialization(js, constexprs={"BLOCK": 256}, arg_types={"y_ptr": nl.pointer_type(nl.float16)})
    assert r.fn is not None and r.diagnostics == []
    assert any(isinstance(v, TensorV) and v.shape == (256,) for v in r.notes.values())
    bad = build_specialization(js, constexprs={"BLOCK": 100}, arg_types={"y_ptr": nl.pointer_type(nl.float16)})
    assert [d.code for d in bad.diagnostics if d.severity == Severity.ERROR] == ["N011"]


@pytest.mark.parametrize("text", ["", "def (", "@newt.jit\ndef k(:\n", "\x00\x01"])
def test_bad_text_never_raises(text):
    fa = Analyzer(cache=AnalysisCache()).analyze(text, "bad.py")
    assert isinstance(fa, FileAnalysis)
