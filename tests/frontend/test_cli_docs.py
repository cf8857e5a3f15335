"""The command line, the documentation of codes, and the import-time budget."""

import json
import os
import re
import subprocess
import sys

import deuteron  # noqa: F401  (registers its D codes)
from newt.diagnostics import CODES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
BAD = """import newt
import newt.language as nl


@newt.jit
def k(x_ptr, n):
    offs = nl.arange(0, 1000)
    nl.store(x_ptr + offs, 1.0, mask=offs < n)
"""


def run_cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "newt", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def test_every_code_is_documented():
    doc = open(os.path.join(ROOT, "docs", "diagnostics.md")).read()
    for code, (name, _) in CODES.items():
        assert f'<a id="{code.lower()}"></a>' in doc, code
        assert f"## {code} `{name}`" in doc, code
    documented = set(re.findall(r"^## ([NDB]\d{3}) ", doc, re.M))
    assert documented == set(CODES)


def test_cli_text_and_exit_code(tmp_path):
    p = tmp_path / "k.py"
    p.write_text(BAD)
    r = run_cli("check", str(p))
    assert r.returncode == 1
    assert f"{p}:7:25: error[N011] nl.arange length 1000 is not a power of two" in r.stdout


def test_cli_json(tmp_path):
    p = tmp_path / "k.py"
    p.write_text(BAD)
    r = run_cli("check", "--format", "json", str(p))
    data = json.loads(r.stdout)
    assert data == [{
        "path": str(p), "line": 7, "column": 25, "end_line": 7, "end_column": 29, "severity": "error",
        "code": "N011", "name": "not-power-of-two", "message": "nl.arange length 1000 is not a power of two",
        "hint": "round 1000 up to 1024 and mask the extra elements", "kernel": "k"}]


def test_cli_clean_file_exits_zero(tmp_path):
    p = tmp_path / "k.py"
    p.write_text(BAD.replace("1000", "1024"))
    r = run_cli("check", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "checked 1 file, 1 kernel: 0 errors, 0 warnings\n"


def test_cli_summary_hints_and_version(tmp_path):
    """Issue 23: a one-line summary, the hints in the default format (--no-hints leaves them out), --version."""
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text(BAD.replace("1000", "1024"))
    (tmp_path / "c.py").write_text("x = 1\n")
    r = run_cli("check", str(tmp_path))
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    at = lines.index(f"{tmp_path / 'a.py'}:7:25: error[N011] nl.arange length 1000 is not a power of two")
    assert lines[at + 1] == "  hint: round 1000 up to 1024 and mask the extra elements"
    assert lines[-1] == "checked 3 files, 2 kernels: 1 error, 0 warnings"
    r = run_cli("check", "--no-hints", "--min-severity", "info", str(tmp_path / "a.py"))
    assert "hint:" not in r.stdout and r.stdout.splitlines()[-1].endswith("1 error, 0 warnings, 0 notes")
    import newt
    for args in (("--version",), ("check", "--version")):
        r = run_cli(*args)
        assert r.returncode == 0 and r.stdout.strip() == f"newt {newt.__version__}"


def test_cli_full_format_shows_caret(tmp_path):
    p = tmp_path / "k.py"
    p.write_text(BAD)
    r = run_cli("check", "--format", "full", str(p))
    assert "    offs = nl.arange(0, 1000)\n" in r.stdout
    assert "                        ^~~~\n" in r.stdout
    assert "hint: round 1000 up to 1024" in r.stdout


def test_cli_missing_file():
    r = run_cli("check", "/nonexistent/file.py")
    assert r.returncode == 1
    assert "cannot read" in r.stderr


def test_import_is_light_and_torch_free():
    # CPU time of the import, not wall time: the suite runs in parallel (xdist), and another worker on the
    # same core must not make a light import look heavy
    code = ("import sys, time; t = time.process_time(); import newt, newt.language, newt.frontend; "
            "dt = time.process_time() - t; "
            "bad = [m for m in ('torch', 'cuda', 'cuda.bindings', 'numpy') if m in sys.modules]; "
            "print(dt, bad)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout.split(" ", 1)
    assert out[1].strip() == "[]"
    assert float(out[0]) < 0.2
