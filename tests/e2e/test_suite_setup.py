"""The test suite's own set-up (tests/conftest.py, issue 27): each xdist worker gets private caches, removed at
the end and never the user's; the ``slow`` list names tests that exist; a listed test is skipped by a plain
run and selected by ``-m slow``."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_PROBE = '''
import json, os, pathlib
import newt.runtime

def _record(tmp_name):
    out = pathlib.Path(os.environ["PROBE_OUT"]) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{tmp_name}.json"
    out.write_text(json.dumps({"newt": os.environ["NEWT_CACHE_DIR"], "deuteron": os.environ["DEUTERON_CACHE_DIR"],
                               "in_use": str(newt.runtime.cache_dir()), "pid": os.getpid()}))

def test_a():
    _record("a")

def test_b():
    _record("b")

def test_c():
    _record("c")

def test_d():
    _record("d")

def test_listed():
    pass
'''


def test_each_worker_gets_private_caches_and_the_slow_list_marks(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", proj / "conftest.py")
    (proj / "test_probe.py").write_text(_PROBE)
    (proj / "slow_tests.txt").write_text("test_probe.py::test_listed  # a listed test\n")
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_", "PYTEST_"))}
    env.update(PROBE_OUT=str(out), PYTHONPATH=str(REPO), NEWT_CACHE_DIR=str(tmp_path / "users-cache"))
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(proj),
            "-q", "-rs"]
    r = subprocess.run([*base, "-n", "2", "--dist", "each", "test_probe.py"], cwd=proj, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    seen = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    assert sorted(p.name.split("-")[0] for p in out.glob("*.json")) == ["gw0"] * 4 + ["gw1"] * 4
    dirs = {(s["newt"], s["deuteron"], s["in_use"]) for s in seen}
    assert len(dirs) == 2 and len({s["pid"] for s in seen}) == 2, dirs  # one set per worker, shared by its tests
    for newt_dir, dt_dir, in_use in dirs:
        assert in_use == newt_dir and str(tmp_path / "users-cache") not in newt_dir
        assert not Path(newt_dir).exists() and not Path(dt_dir).exists()  # removed when the worker ended
    # the listed test is slow: skipped with the advice by a plain run, selected by -m slow
    assert "1 skipped" in r.stdout.splitlines()[-1] or "2 skipped" in r.stdout.splitlines()[-1], r.stdout[-1500:]
    assert "-m slow" in r.stdout
    r = subprocess.run([*base, "-n", "0", "-m", "slow", "test_probe.py"], cwd=proj, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "1 passed, 4 deselected" in r.stdout, r.stdout[-2000:]


def test_the_slow_list_names_tests_that_exist():
    listed = [ln.split("#", 1)[0].strip() for ln in (REPO / "tests" / "slow_tests.txt").read_text().splitlines()]
    listed = [ln for ln in listed if ln]
    assert listed, "tests/slow_tests.txt is empty"
    defs: dict[str, set[str]] = {}
    missing = []
    for nodeid in listed:
        path, _, rest = nodeid.partition("::")
        if path not in defs:
            f = REPO / path
            tree = ast.parse(f.read_text()) if f.is_file() else ast.Module(body=[], type_ignores=[])
            defs[path] = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if rest.split("[", 1)[0] not in defs[path]:
            missing.append(nodeid)
    assert not missing, f"tests/slow_tests.txt names tests that do not exist: {missing}"
    assert len(set(listed)) == len(listed)
