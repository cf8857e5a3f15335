"""The editor end-to-end test: the VS Code extension in a real workbench (code-server + headless Chromium)
and headless Neovim, both against ``python -m lsp_server``.  It runs ``.ci/e2e.sh`` and fails on any failed
check; it skips only when the tooling cannot be installed on this machine (exit status 77, reason shown).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / ".ci" / "e2e.sh"

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(3600)]


def _build_outputs() -> dict[str, tuple[int, int]]:
    """The user's build outputs in vscode-extension/ (a .vsix, dist/, out/): path -> (size, mtime)."""
    ext = REPO / "vscode-extension"
    files = [*ext.glob("*.vsix"), *(p for d in ("dist", "out") for p in (ext / d).rglob("*") if p.is_file())]
    return {str(p.relative_to(REPO)): (p.stat().st_size, p.stat().st_mtime_ns) for p in files}


def test_vscode_and_neovim_end_to_end():
    if not sys.platform.startswith("linux"):
        pytest.skip("the editor e2e tooling (code-server, Debian's chromium, Neovim wheels) is set up for Linux only")
    if shutil.which("bash") is None:
        pytest.skip("bash is needed to run .ci/e2e.sh")
    env = dict(os.environ)
    env.setdefault("NEWT_E2E_PYTHON", sys.executable)  # the interpreter this test suite runs with
    env.pop("NEWT_E2E_ONLY", None)
    # a .vsix the user built (the README's `npm run package`) must survive the run, as must dist/ and out/
    sentinel = REPO / "vscode-extension" / "newt-e2e-sentinel.vsix"
    sentinel.write_bytes(b"a user's build output")
    before = _build_outputs()
    try:
        proc = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=3500)
        after = _build_outputs()
    finally:
        sentinel.unlink(missing_ok=True)
    assert after == before, f"the e2e changed build outputs in vscode-extension/: {sorted(set(before) ^ set(after))}"
    out = proc.stdout
    if proc.returncode == 77:
        reason = next((ln for ln in reversed(out.splitlines()) if ln.startswith("SKIP:")), out[-500:])
        pytest.skip(reason)
    summary = re.findall(r"^(\d+) passed, (\d+) failed$", out, re.M)
    assert proc.returncode == 0 and summary and summary[-1][1] == "0", f".ci/e2e.sh failed:\n{out[-30000:]}"
    assert int(summary[-1][0]) >= 4, f"expected the build, two code-server sessions and Neovim:\n{out[-5000:]}"
