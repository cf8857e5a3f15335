"""Correct Triton-style kernels check clean; broken and half-typed files never crash the checker."""

import glob
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from newt.frontend import analyze_source
from newt.ir import verify

HERE = os.path.dirname(__file__)
GOOD = sorted(glob.glob(os.path.join(HERE, "corpus", "good", "*.py")))
BAD = sorted(glob.glob(os.path.join(HERE, "corpus", "bad", "*.py")))


@pytest.mark.parametrize("path", GOOD, ids=os.path.basename)
def test_good_kernels_have_no_diagnostics(path):
    text = open(path).read()
    fa = analyze_source(text, path)
    assert [d.format() for d in fa.diagnostics if d.severity <= 2] == []
    assert fa.kernels
    for k in fa.kernels:
        for r in k.results:
            if r.fn is not None:
                verify(r.fn, concrete=False)
    # every kernel that the file launches or configures got a concrete specialization
    assert any(len(k.results) > 1 for k in fa.kernels)


def test_at_least_fifty_malformed_kernels():
    assert len(BAD) + len(_truncations()) >= 50


@pytest.mark.parametrize("path", BAD, ids=os.path.basename)
def test_bad_files_give_diagnostics_not_exceptions(path):
    text = open(path).read()
    fa = analyze_source(text, path)
    assert fa.diagnostics, f"{path} should produce at least one diagnostic"
    for d in fa.diagnostics:
        assert d.span.line >= 1 and d.span.col >= 1
        assert d.message


def _truncations():
    out = []
    for p in GOOD:
        text = open(p).read()
        lines = text.splitlines()
        for cut in range(3, len(lines), 4):
            out.append((os.path.basename(p), cut, "\n".join(lines[:cut]) + "\n" + lines[cut][: len(lines[cut]) // 2]))
    return out


@pytest.mark.parametrize("name,cut,text", _truncations(), ids=lambda v: str(v)[:30])
def test_truncated_files(name, cut, text):
    fa = analyze_source(text, name)
    for d in fa.diagnostics:
        assert d.span.line <= text.count("\n") + 2


def _mutate(text: str, rnd: random.Random, n: int) -> str:
    chars = list(text)
    tokens = ["(", ")", "[", "]", ":", ",", "nl.", "=", " ", "\n", "    ", "if ", "for ", "@", "'", '"', "#",
              "None", "1.5", "x", "nl.load(", "return ", "else:", "\t", "\\", "lambda"]
    for _ in range(n):
        if not chars:
            break
        op = rnd.random()
        i = rnd.randrange(len(chars))
        if op < 0.4:
            del chars[i: i + rnd.randint(1, 6)]
        elif op < 0.8:
            chars[i:i] = list(rnd.choice(tokens))
        else:
            j = rnd.randrange(len(chars))
            chars[i], chars[j] = chars[j], chars[i]
    return "".join(chars)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=len(GOOD) - 1), st.integers(min_value=0, max_value=2 ** 32),
       st.integers(min_value=1, max_value=12))
def test_random_mutations_never_raise(idx, seed, n):
    text = open(GOOD[idx]).read()
    mutated = _mutate(text, random.Random(seed), n)
    fa = analyze_source(mutated, "m.py")
    for d in fa.diagnostics:
        assert d.code and d.span.line >= 1


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("nl.load()[]:,=+-*/ \n\tdefx_ptr@newt.jit0123456789ifwhilefor")),
               max_size=400))
def test_random_text_never_raises(text):
    analyze_source("import newt\nimport newt.language as nl\n@newt.jit\ndef k(x_ptr, n):\n" + text, "r.py")


def test_line_numbers_ignore_unicode_line_separators():
    """Regression: str.splitlines breaks at \\x85 and \\u2028, Python's parser does not."""
    text = 'import newt\n# a\x85b \u2028 c\n\ndef f(:\n    pass\n\ndef g(:\n    pass\n'
    fa = analyze_source(text, "t.py")
    assert [(d.code, d.span.line) for d in fa.diagnostics] == [("N001", 4), ("N001", 7)]


def test_an_analysis_is_freed_without_a_full_gc():
    import gc
    import weakref

    text = open(GOOD[0]).read()
    gc.collect()
    gc.disable()
    try:
        fa = analyze_source(text, "x.py")
        probe = weakref.ref(fa.scan)
        del fa
        assert probe() is None, "the analysis is kept alive by a reference cycle"
    finally:
        gc.enable()
