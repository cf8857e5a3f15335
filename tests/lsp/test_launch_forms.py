"""Launch sites anywhere in the file, one analysis for the editor and ``newt check`` (issue 23).

The pointer dtypes a kernel's launches pass used to be read only from launches inside a function: the same
launch at module level, under ``if __name__ == "__main__":`` or in a lambda gave ``?[BLOCK]`` hovers and no
N021 for a float ``x & 1``, and ``newt check`` never read them (exit 0, then N021 at run time).  Now the front
end's analysis reads them (``newt.frontend.hostvalues``) and both tools report what it says.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from lsp_server.analysis import analyze, lsp_diagnostics
from lsp_server.hover import hover
from newt.__main__ import main as newt_main
from newt.frontend import analyze_source

from .conftest import pos_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = x & 1
    tl.store(out_ptr + offs, y, mask=mask)

'''

HOST = "x = {make}\nout = torch.empty_like(x)\n{launch}\n"
LAUNCH = "scale_kernel[(4,)](x, out, 4096, BLOCK=1024)"


def _indent(s: str, n: int = 4) -> str:
    return "".join(" " * n + ln if ln.strip() else ln for ln in s.splitlines(keepends=True))


def _forms(make: str = "torch.randn(4096, dtype=torch.float16)") -> dict:
    host = HOST.format(make=make, launch=LAUNCH)
    lam = HOST.format(make=make, launch=f"ms = triton.testing.do_bench(lambda: {LAUNCH})")
    return {
        "function": KERNEL + "\ndef run():\n" + _indent(host) + "\n\nrun()\n",
        "module": KERNEL + host,
        "__main__": KERNEL + 'if __name__ == "__main__":\n' + _indent(host),
        "lambda in a function": KERNEL + "\ndef bench():\n" + _indent(lam),
        "lambda at module level": KERNEL + lam,
        "nested function": KERNEL + "\ndef outer():\n" + _indent("def inner():\n" + _indent(host) + "inner()\n"),
    }


def _editor(text: str, name: str):
    a = analyze(text, f"file:///forms/{name.replace(' ', '_')}.py")
    diags = [(d.code, d.range.start.line, d.range.start.character, d.message) for d in lsp_diagnostics(a)]
    md = hover(a, pos_of(text, "x = tl.load")).contents.value
    return diags, md


def _check(text: str, path: str):
    fa = analyze_source(text, path, record_notes=False)
    return [(d.code, d.span.line - 1, d.span.col - 1) for d in fa.diagnostics]


@pytest.mark.parametrize("form", list(_forms()))
def test_every_launch_form_types_the_pointers_as_a_launch_in_a_function(form):
    forms = _forms()
    want_diags, want_md = _editor(forms["function"], "function")
    diags, md = _editor(forms[form], form)
    # the kernel's lines are the same in every form: the diagnostics are equal, positions and messages
    assert diags == want_diags
    n021 = [d for d in diags if d[0] == "N021"]
    assert len(n021) == 1 and n021[0][1] == pos_of(forms[form], "x & 1").line, diags
    assert "pointer dtypes from the launches (out_ptr: *fp16, x_ptr: *fp16)" in n021[0][3]
    # hover: the loaded value's dtype from the launch, as for the launch in a function
    assert "x: fp16[BLOCK]" in md and "?[BLOCK]" not in md, md
    def table(m):  # the specializations' rows, without the launch's line number
        return re.sub(r"line \d+", "line N", m.split("Show the generated")[0])

    assert table(md) == table(want_md)
    # newt check reads the same analysis: the same codes at the same places
    assert _check(forms[form], "forms.py") == [(c, ln, col) for c, ln, col, _ in diags]


@pytest.mark.parametrize("make, dtype", [
    ("torch.randn(4096, dtype=torch.float16)", "fp16"),
    ("torch.empty(4096, dtype=torch.bfloat16, device='cpu')", "bf16"),
    ("torch.randn(4096).to(torch.float16)", "fp16"),
    ("torch.randn(4096).to('cpu', dtype=torch.float64)", "fp64"),
    ("torch.randn(4096).half()", "fp16"),
    ("torch.randn(4096)", "fp32"),
    ("torch.randn(4096, dtype=DT)", "fp16"),
    ("torch.randn(4096).to(DT)", "fp16"),
    ("torch.zeros(4096, dtype=torch.float16).to(DEVICE)", "fp16"),
    ("torch.randn(4096, dtype=torch.float32)[::2]", "fp32"),
])
def test_dtype_flows_of_the_host_code(make, dtype):
    text = KERNEL + "DT = torch.float16\nDEVICE = 'cpu'\n" + _forms(make)["module"][len(KERNEL):]
    a = analyze(text, "file:///forms/flows.py")
    md = hover(a, pos_of(text, "x = tl.load")).contents.value
    assert f"x: {dtype}[BLOCK]" in md, md
    assert [d.code for d in lsp_diagnostics(a) if d.code == "N021"] == ["N021"]


def test_an_integer_tensor_makes_the_bitwise_operator_valid():
    """The other side: ``x & 1`` on the int32 tensor a launch passes is no error (editor and newt check)."""
    text = _forms("torch.randint(0, 9, (4096,), dtype=torch.int32)")["module"]
    a = analyze(text, "file:///forms/int.py")
    assert [d.code for d in lsp_diagnostics(a) if d.severity == 1] == []
    assert "x: i32[BLOCK]" in hover(a, pos_of(text, "x = tl.load")).contents.value
    assert [c for c, *_ in _check(text, "int.py")] == []


def test_launches_that_disagree_get_a_specialization_each():
    """fp16 at one launch, int32 at another: the generic check knows no dtype (no error made up), the fp16
    launch's specialization reports N021 with its line."""
    text = KERNEL + (
        "x = torch.randn(4096, dtype=torch.float16)\nscale_kernel[(4,)](x, x, 4096, BLOCK=1024)\n"
        "i = torch.zeros(4096, dtype=torch.int32)\nscale_kernel[(4,)](i, i, 4096, BLOCK=1024)\n")
    fa = analyze_source(text, "disagree.py")
    n021 = [d for d in fa.diagnostics if d.code == "N021"]
    assert len(n021) == 1 and "launch at line 15" in (n021[0].context or ""), [(d.code, d.context) for d in n021]
    ka = fa.kernel_named("scale_kernel")
    assert ka.host_types == {}  # nothing agreed: the generic check stays generic


def test_newt_check_fails_the_float_bitwise_file_at_module_level(tmp_path, capsys):
    """The issue's file: a float ``acc ^ 1`` launched at module level. ``newt check`` used to exit 0."""
    p = tmp_path / "module_level.py"
    p.write_text(_forms()["module"].replace("x & 1", "x ^ 1"))
    assert newt_main(["check", str(p)]) == 1
    out = capsys.readouterr().out
    assert f"{p}:11:9: error[N021]" in out and "bitwise operator ^" in out
    assert "  hint: " in out  # hints by default
    assert out.strip().splitlines()[-1] == "checked 1 file, 1 kernel: 1 error, 0 warnings"


def _corpus_files() -> list[str]:
    out = []
    for base in ("examples", os.path.join("tests", "frontend", "corpus")):
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, base)):
            out += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".py")]
    return sorted(out)


def test_newt_check_and_the_editor_report_the_same_diagnostics_on_examples_and_corpus():
    """Every file of examples/ and tests/frontend/corpus: ``python -m newt check --format json`` (a separate
    process, as users run it, plugins loaded from entry points) against the editor's diagnostics."""
    files = _corpus_files()
    assert len(files) > 20
    r = subprocess.run([sys.executable, "-m", "newt", "check", "--format", "json", "--min-severity", "info",
                        *files], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=600)
    assert r.returncode in (0, 1), r.stderr
    by_file: dict = {f: [] for f in files}
    for d in json.loads(r.stdout):
        msg = d["message"] + (f" [{d['context']}]" if d.get("context") else "")
        if d.get("hint"):
            msg += f"\nhint: {d['hint']}"
        by_file[d["path"]].append((d["code"], d["line"] - 1, d["column"] - 1, msg))
    compared = 0
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        a = analyze(text, "file://" + f)
        editor = [(d.code, d.range.start.line, d.range.start.character, d.message) for d in lsp_diagnostics(a)
                  if d.severity is None or d.severity <= 3]
        assert sorted(editor) == sorted(by_file[f]), f
        compared += len(editor)
    assert compared > 20  # the corpus's bad files do have diagnostics


def test_an_error_in_a_helper_is_reported_once_with_and_without_the_dtypes():
    """A jit helper's error is found by its own check (no launch dtypes) and by the launched kernel's (with
    them): one diagnostic, not two that differ only by the dtypes' context."""
    helper = "@triton.jit\ndef helper(p):\n    return tl.no_such_op(p)\n\n\n"
    text = KERNEL.replace("@triton.jit\ndef scale_kernel", helper + "@triton.jit\ndef scale_kernel")
    text = text.replace("y = x & 1", "y = helper(x)")
    text += "x = torch.randn(4096, dtype=torch.float16)\nscale_kernel[(4,)](x, x, 4096, BLOCK=1024)\n"
    fa = analyze_source(text, "helper.py")
    n004 = [d for d in fa.diagnostics if d.code == "N004"]
    assert len(n004) == 1, [(d.code, d.span.line, d.context) for d in fa.diagnostics]
