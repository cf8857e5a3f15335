import textwrap

import pytest

from newt.frontend import analyze_source

HEADER = "import newt\nimport newt.language as nl\n"
MARK = "\u00ab"  # « marks where a diagnostic must start


def locate(src: str):
    """Remove every « from the source and return (clean source, [(line, col), ...]) 1-based."""
    lines = src.split("\n")
    marks = []
    out = []
    for i, line in enumerate(lines, start=1):
        while MARK in line:
            col = line.index(MARK)
            marks.append((i, col + 1))
            line = line[:col] + line[col + 1:]
        out.append(line)
    return "\n".join(out), marks


def check_src(body: str, path="t.py"):
    src, marks = locate(HEADER + textwrap.dedent(body).lstrip("\n"))
    fa = analyze_source(src, path)
    return fa, marks


@pytest.fixture
def expect():
    def run(body: str, code: str, *, only=True, severity="error", contains=None, hint=None):
        fa, marks = check_src(body)
        assert marks, "test needs a « marker"
        got = [(d.code, d.span.line, d.span.col) for d in fa.diagnostics]
        for (ln, col) in marks:
            matches = [d for d in fa.diagnostics if d.code == code and (d.span.line, d.span.col) == (ln, col)]
            assert matches, f"expected {code} at {ln}:{col}; got {got}\n" + "\n".join(
                d.format() for d in fa.diagnostics)
            d = matches[0]
            assert str(d.severity) == severity, d.format()
            if contains:
                assert contains in d.message, d.message
            if hint:
                assert d.hint and hint in d.hint, d.hint
        if only:
            others = [d for d in fa.diagnostics if d.code != code and str(d.severity) == "error"]
            assert not others, "unexpected: " + "; ".join(d.format() for d in others)
        return fa
    return run
