"""What the Triton-code tests (``test_triton_code.py``, ``test_triton_corpus_forms.py``) share: a snippet of
Triton code, analyzed as a library file by the front end, and its diagnostics."""

from __future__ import annotations

import textwrap

from newt.frontend import analyze_source

TRITON = "import triton\nimport triton.language as tl\n"


def _diags(body: str, path="lib/kernels.py", header=TRITON):
    fa = analyze_source(header + textwrap.dedent(body).lstrip("\n"), path)
    return fa.diagnostics


def _errors(body: str, **kw):
    return [d for d in _diags(body, **kw) if str(d.severity) == "error"]


def _fmt(ds):
    return "\n".join(d.format() for d in ds)
