"""The README's newcomer path (issue 27), checked without installing anything: its two commands are
``./dev setup`` and ``./dev test``, ``.ci/run`` runs the second, ``./dev test`` runs every test (the fast and
slow ones in parallel, then the e2e through its marker), a plain ``python -m pytest`` is the fast suite (the
slow tests and the editor e2e skipped with the command that runs them), and the README's first kernel runs as
written on this machine, GPU or not.  (Part of the fast suite: no e2e marker.)  The real fresh-clone run of
``./dev setup`` is tests/e2e/test_dev_script.py (slow)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _section(title: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", _section("Set up and test"), re.S).group(1)
    return [ln.split("#", 1)[0].strip() for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_readme_has_two_commands_and_ci_runs_the_second():
    cmds = _readme_commands()
    assert cmds[0].startswith("git clone ") and cmds[1:] == ["./dev setup", "./dev test"], cmds
    assert os.access(REPO / "dev", os.X_OK) and (REPO / "dev").read_text().startswith("#!/usr/bin/env python3")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    ci_lines = [ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert any(re.fullmatch(r'(exec )?"?\$\{PYTHON:-python3\}"? dev test', ln) for ln in ci_lines), ci_lines
    # what ./dev test runs: everything but the e2e in parallel, then the e2e through its marker
    dev = (REPO / "dev").read_text(encoding="utf-8")
    assert '["-m", "not e2e and not own_process"' in dev and '["-m", "e2e"' in dev
    assert dev.index('["-m", "not e2e and not own_process"') < dev.index('["-m", "own_process"') < \
        dev.index('["-m", "e2e"')
    # the dev extra: the language server's test client, the lint tools, the parallel runner, the packager
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(r"^dev = \[(.*?)\]", pyproject, re.S | re.M).group(1)
    for pkg in ("pytest", "pytest-lsp", "pytest-xdist", "ruff", "mypy", "build"):
        assert re.search(rf'"{re.escape(pkg)}[<>=!~ \[";]', extra + '"'), pkg
    addopts = re.search(r'^addopts = "(.*)"', pyproject, re.M).group(1)
    assert "-n auto" in addopts


def _pytest(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_the_fast_suite_skips_the_e2e_and_slow_tests_and_markers_select_them():
    r = _pytest("tests/e2e/test_editor_e2e.py", "-q", "-rs")
    assert r.returncode == 0, r.stdout[-2000:]
    assert "1 skipped" in r.stdout and "python -m pytest -m e2e" in r.stdout, r.stdout[-2000:]
    r = _pytest("tests/e2e", "-m", "e2e", "--collect-only", "-q")
    assert r.returncode == 0, r.stdout[-2000:]
    collected = [ln for ln in r.stdout.splitlines() if "::" in ln]
    assert collected == ["tests/e2e/test_editor_e2e.py::test_vscode_and_neovim_end_to_end"], r.stdout[-2000:]
    # a listed slow test is selected by ./dev test's -m "not e2e" (the plain run's skip and -m slow's selection
    # are checked on a small project in tests/e2e/test_suite_setup.py: cheaper than a real slow test here)
    slow = "tests/backend/test_bf16_cast.py::test_integer_rounding_is_ieee_round_to_nearest_even_and_toward_zero[all]"
    r = _pytest(slow, "-q", "--co", "-m", "not e2e")
    assert r.returncode == 0 and slow in r.stdout, r.stdout[-2000:]


def test_the_readme_first_kernel_runs_as_written():
    """Its one python block, run in a clean process: on the GPU where there is one, else the interpreter."""
    code = re.search(r"```python\n(.*?)```", _section("A first kernel"), re.S).group(1)
    assert 'device="cuda"' not in code
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_"))}
    env["PYTHONPATH"] = str(REPO)
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    device = "cuda" if "cuda" in r.stdout else "cpu"
    assert f"add_kernel on {device}: matches torch" in r.stdout, r.stdout
