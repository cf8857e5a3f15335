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
                               "in_use": str(newt.runtime.cache_dir()), "pid": os.getpid(),
                               "nvrtc": os.environ["NEWT_TESTS_NVRTC_MEMO"],
                               "examples": os.environ["NEWT_TESTS_EXAMPLES"]}))

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
    # the run's NVRTC results: one folder that both workers share (the controller's), removed at the end
    memo = {s["nvrtc"] for s in seen}
    assert len(memo) == 1 and not any(Path(m).exists() for m in memo), memo
    assert {s["examples"] for s in seen} == {"quick"}  # fewer property-test examples in a plain run
    # the listed test is slow: skipped with the advice by a plain run, selected by -m slow
    assert "1 skipped" in r.stdout.splitlines()[-1] or "2 skipped" in r.stdout.splitlines()[-1], r.stdout[-1500:]
    assert "-m slow" in r.stdout
    for p in out.glob("*.json"):
        p.unlink()
    r = subprocess.run([*base, "-n", "0", "-m", "slow or not slow", "test_probe.py"], cwd=proj, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "5 passed" in r.stdout, r.stdout[-2000:]
    assert {json.loads(p.read_text())["examples"] for p in out.glob("*.json")} == {"full"}  # and all with -m
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


def test_cpu_durations_ranks_tests_by_cpu_seconds(tmp_path):
    """``--cpu-durations=N``: the N tests that cost the most CPU seconds (the test's process and its reaped
    subprocesses), with the per-file sums, here through xdist workers (the figure travels on the reports)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", proj / "conftest.py")
    (proj / "test_probe.py").write_text(
        "import subprocess, sys, time\n\n"
        "def test_spins():\n    t = time.process_time()\n    while time.process_time() - t < 0.6:\n        pass\n\n"
        "def test_child_spins():\n    subprocess.run([sys.executable, '-c', 'import time\\nt = time.process_time()\\n"
        "while time.process_time() - t < 0.6: pass'], check=True)\n\n"
        "def test_sleeps():\n    time.sleep(0.6)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_", "PYTEST_"))}
    env["PYTHONPATH"] = str(REPO)
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir",
                        str(proj), "-q", "-n", "2", "--cpu-durations=2", "test_probe.py"], cwd=proj, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if "CPU time:" in ln and "in 3 tests" in ln)
    per_test = lines[next(i for i, ln in enumerate(lines) if "per test" in ln) + 1:][:2]
    # the two spinning tests (one in a child process) rank first, each at 0.6 s or more; the sleeping one is left off
    assert sorted(ln.split()[-1] for ln in per_test) == ["test_probe.py::test_child_spins",
                                                        "test_probe.py::test_spins"], r.stdout[-2000:]
    assert all(float(ln.split()[0].rstrip("s")) >= 0.55 for ln in per_test), per_test
    assert float(lines[head + 1].split()[0].rstrip("s")) >= 1.1 and lines[head + 1].endswith("test_probe.py")


def _nvrtc_ready() -> bool:
    try:
        import cuda.bindings.nvrtc  # noqa: F401

        import newt.backend.cuda.compiler  # noqa: F401
    except Exception:
        return False
    return True


_MEMO_KERNEL = """
import newt
import newt.language as nl


@newt.jit
def memo_probe_{tag}(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=offs < n) * {tag}.0 + 1.0, mask=offs < n)
"""


def _memo_kernel(tmp_path, tag: int):
    import importlib.util
    path = tmp_path / f"memo_probe_{tag}.py"
    path.write_text(_MEMO_KERNEL.format(tag=tag))
    spec = importlib.util.spec_from_file_location(f"memo_probe_{tag}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, f"memo_probe_{tag}")


def test_the_runs_nvrtc_memo_compiles_an_input_once(tmp_path, monkeypatch):
    """tests/conftest.py keeps NVRTC's result per distinct input for the run: a second ``cache=False`` compile of
    the same kernel gets an equal binary without NVRTC, a different input compiles, and a test that replaces
    NVRTC's entry point gets real compiles."""
    import pytest
    if not _nvrtc_ready():
        pytest.skip("NVRTC (cuda-bindings) is not installed")
    from cuda.bindings import nvrtc

    import newt
    folder = Path(os.environ["NEWT_TESTS_NVRTC_MEMO"])
    tag = 1 + os.getpid() % 1000  # a kernel no other test of this run compiles
    k = _memo_kernel(tmp_path, tag)
    sig = {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "n": "i32"}
    name = f"memo_probe_{tag}".encode()

    def ours(before):  # the results kept since ``before`` that are this kernel's (other workers share the folder)
        return {p for p in set(folder.glob("*.pickle")) - before if name in p.read_bytes()}

    before = set(folder.glob("*.pickle"))
    a = newt.compile(k, signature=sig, constexprs={"BLOCK": 256}, target="sm_90a", cache=False)
    kept = ours(before)
    assert len(kept) == 1
    b = newt.compile(k, signature=sig, constexprs={"BLOCK": 256}, target="sm_90a", cache=False)
    assert ours(before) == kept  # nothing new: the same input
    assert b.asm["cubin"] == a.asm["cubin"] and b.asm["ptx"] == a.asm["ptx"] and b is not a
    assert (b.metadata.n_regs, b.metadata.n_spills, b.metadata.shared) == (a.metadata.n_regs, a.metadata.n_spills,
                                                                           a.metadata.shared) and a.metadata.n_regs
    newt.compile(k, signature=sig, constexprs={"BLOCK": 512}, target="sm_90a", cache=False)
    assert len(ours(before)) == 2  # another input: compiled and kept
    from newt.backend.cuda.disasm import find_cuobjdump
    if find_cuobjdump() is not None:  # cuobjdump once per distinct cubin, too
        sass_before = set(folder.glob("*.sass"))
        text = a.asm["sass"]
        def sass_ours():
            return {p for p in set(folder.glob("*.sass")) - sass_before if name in p.read_bytes()}
        assert "memo_probe" in text and len(sass_ours()) == 1
        assert b.asm["sass"] == text and len(sass_ours()) == 1
    calls = []
    real = nvrtc.nvrtcCompileProgram
    monkeypatch.setattr(nvrtc, "nvrtcCompileProgram", lambda *a: calls.append(1) or real(*a))
    newt.compile(k, signature=sig, constexprs={"BLOCK": 256}, target="sm_90a", cache=False)
    assert calls == [1]  # replaced by the test: compiled for real


def test_bytecode_is_kept_under_pythondontwritebytecode(tmp_path):
    """With ``PYTHONDONTWRITEBYTECODE=1`` in the environment, a test run (each xdist worker, and the processes a
    test starts) still keeps compiled modules and pytest's rewritten test modules in ``__pycache__``, so that a
    second process does not compile them again; ``NEWT_TESTS_PYCACHE=off`` keeps the environment's choice."""
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", proj / "conftest.py")
    (proj / "helper_mod.py").write_text("VALUE = 1\n")
    (proj / "test_probe.py").write_text(
        "import subprocess, sys\n\n"
        "def test_worker_and_child_write_bytecode():\n"
        "    assert not sys.dont_write_bytecode\n"
        "    assert 'torch' not in sys.modules  # (conftest.py asks torch about CUDA only for a gpu test)\n"
        "    child = subprocess.run([sys.executable, '-c', 'import sys, helper_mod; print(sys.dont_write_bytecode)'],\n"
        "                           capture_output=True, text=True, check=True)\n"
        "    assert child.stdout.strip() == 'False'\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_", "PYTEST_"))}
    # one process, no plugins (none is needed here): an xdist worker is a process the run starts, like the child
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), str(proj)]), PYTHONDONTWRITEBYTECODE="1",
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", os.devnull,
            "--rootdir", str(proj), "-q"]
    r = subprocess.run([*base, "test_probe.py"], cwd=proj, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    kept = sorted(p.name for p in (proj / "__pycache__").iterdir())
    assert any(n.startswith("test_probe.") and "pytest" in n for n in kept), kept  # the rewritten test module
    assert any(n.startswith("helper_mod.") for n in kept), kept  # the child's import
    shutil.rmtree(proj / "__pycache__")
    r = subprocess.run([*base, "test_probe.py"], cwd=proj, env={**env, "NEWT_TESTS_PYCACHE": "off"},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and not (proj / "__pycache__").exists(), r.stdout[-2000:]  # the environment's choice


_SUBPROCESS_COMPILE = """
import hashlib, importlib.util, sys
spec = importlib.util.spec_from_file_location("memo_probe_{tag}", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
import newt
from newt.backend.cuda import compiler
k = newt.compile(mod.memo_probe_{tag}, signature={{"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "n": "i32"}},
                 constexprs={{"BLOCK": 256}}, target="sm_90a", cache=False)
print(getattr(compiler._compile_once, "_newt_test_memo", False), hashlib.sha256(k.asm["cubin"]).hexdigest())
"""


def test_a_process_a_test_starts_shares_the_runs_nvrtc_memo(tmp_path):
    """tests/subprocess_site is first on ``PYTHONPATH`` for the run: a Python process a test starts (a language
    server, a worker) installs the run's memo when it imports the compiler, so its compile of an input this
    process compiled gets that result; with ``NEWT_TESTS_NVRTC_MEMO=off`` it compiles for real."""
    import hashlib

    import pytest
    if not _nvrtc_ready():
        pytest.skip("NVRTC (cuda-bindings) is not installed")
    import newt
    folder = Path(os.environ["NEWT_TESTS_NVRTC_MEMO"])
    assert str(REPO / "tests" / "subprocess_site") in os.environ["PYTHONPATH"].split(os.pathsep)
    tag = 1001 + os.getpid() % 1000  # a kernel no other test of this run compiles
    k = _memo_kernel(tmp_path, tag)
    a = newt.compile(k, signature={"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "n": "i32"}, constexprs={"BLOCK": 256},
                     target="sm_90a", cache=False)
    before = set(folder.glob("*.pickle"))
    code = _SUBPROCESS_COMPILE.format(tag=tag)
    path = str(tmp_path / f"memo_probe_{tag}.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.environ["PYTHONPATH"], str(REPO)]))
    r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["True", hashlib.sha256(a.asm["cubin"]).hexdigest()]
    # nothing compiled again: no memo file written since holds this kernel (the run's other workers share the
    # folder and may add their own meanwhile)
    import pickle
    for fresh in set(folder.glob("*.pickle")) - before:
        try:
            kept = pickle.loads(fresh.read_bytes())
        except Exception:  # (a file another worker is replacing)
            continue
        assert getattr(kept, "cubin", None) != a.asm["cubin"], f"{fresh.name}: the subprocess compiled it again"
    off = ("import sys; from newt.backend.cuda import compiler; "
           "print('newt_tests_memo' in sys.modules, getattr(compiler._compile_once, '_newt_test_memo', False))")
    r = subprocess.run([sys.executable, "-c", off], capture_output=True, text=True, timeout=300,
                       env={**env, "NEWT_TESTS_NVRTC_MEMO": "off"})
    assert r.returncode == 0 and r.stdout.split() == ["False", "False"], r.stdout + r.stderr[-3000:]
