"""The README's newcomer path (issue 15, item 12), checked without installing anything: its commands are the
ones ``.ci/run`` runs on a clean clone, ``python -m pytest`` is the fast suite (the editor e2e is skipped there
with the command that runs it), and ``-m e2e`` selects the e2e.  (Part of the fast suite: no e2e marker.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set up and test", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [ln.split("#", 1)[0].strip() for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_readme_commands_are_what_ci_runs():
    cmds = _readme_commands()
    assert cmds[0].startswith("git clone ") and cmds[1].startswith("python3 -m venv .venv")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    ci_lines = [ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    # the installs: the same packages and extras, in the same order
    pip = [c for c in cmds if " -m pip install " in c]
    assert [re.sub(r"^python -m pip install ", "", c) for c in pip] == ["torch==2.13.0", '-e ".[dev]"'], pip
    pos = [next(i for i, ln in enumerate(ci_lines) if "pip install" in ln and want in ln)
           for want in ("torch==2.13.0", '-e ".[dev]"')]
    assert pos == sorted(pos)
    # the tests: the fast suite, then the e2e through its marker
    assert "python -m pytest" in cmds and "python -m pytest -m e2e" in cmds
    fast = next(i for i, ln in enumerate(ci_lines) if re.fullmatch(r"python -m pytest( -x)?( -q)?", ln))
    e2e = next(i for i, ln in enumerate(ci_lines) if re.match(r"python -m pytest .*-m e2e", ln))
    assert pos[-1] < fast < e2e
    # what the README promises of the dev extra: the language server's test client and the lint tools
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    dev = re.search(r"^dev = \[(.*?)\]", pyproject, re.S | re.M).group(1)
    for pkg in ("pytest", "pytest-lsp", "ruff", "mypy"):
        assert re.search(rf'"{re.escape(pkg)}[<>=!~ \[";]', dev + '"'), pkg


def _pytest(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_the_fast_suite_skips_the_e2e_and_its_marker_selects_it():
    r = _pytest("tests/e2e/test_editor_e2e.py", "-q", "-rs")
    assert r.returncode == 0, r.stdout[-2000:]
    assert "1 skipped" in r.stdout and "python -m pytest -m e2e" in r.stdout, r.stdout[-2000:]
    r = _pytest("tests/e2e", "-m", "e2e", "--collect-only", "-q")
    assert r.returncode == 0, r.stdout[-2000:]
    collected = [ln for ln in r.stdout.splitlines() if "::" in ln]
    assert collected == ["tests/e2e/test_editor_e2e.py::test_vscode_and_neovim_end_to_end"], r.stdout[-2000:]
