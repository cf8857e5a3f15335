"""Test configuration: the ``gpu`` marker skips without a CUDA device; ``slow`` tests run when asked for
(``-m slow``, or any ``-m`` expression that selects them: ``./dev test`` runs ``-m "not e2e"``); and every
test process -- each pytest-xdist worker, or the one process of a serial run -- gets caches of its own, so
the suite runs in parallel (``-n auto``, the default in pyproject.toml) and never writes the user's caches."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile

import pytest

#: the cache folders a test process gets for itself (a fresh temporary folder per process, removed at the end)
PRIVATE_CACHES = ("NEWT_CACHE_DIR", "DEUTERON_CACHE_DIR")


# -- compiled bytecode kept, even under PYTHONDONTWRITEBYTECODE ----------------------------------------------------
#: ``PYTHONDONTWRITEBYTECODE=1`` (set in some containers) makes every process of a test run compile the project's
#: modules from source, and makes pytest rewrite the asserts of every test module in every xdist worker: about
#: 9 CPU seconds of each worker's collection and 0.2-0.5 s of each of the run's few hundred subprocesses (language
#: servers, workers, scripts). The test run writes the ``__pycache__`` folders a default Python writes (ignored by
#: git); ``NEWT_TESTS_PYCACHE=off`` keeps the environment's choice. Done when this file is imported: before the
#: test modules are, and before the xdist workers start (they inherit the environment).
PYCACHE_VAR = "NEWT_TESTS_PYCACHE"


def _keep_bytecode() -> dict:
    """Lift ``PYTHONDONTWRITEBYTECODE`` for this process and the ones it starts; the variables' old values (for
    :func:`pytest_unconfigure`)."""
    import sys
    if os.environ.get(PYCACHE_VAR) == "off" or not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return {}
    saved = {"PYTHONDONTWRITEBYTECODE": os.environ.pop("PYTHONDONTWRITEBYTECODE")}
    sys.dont_write_bytecode = False
    return saved


_BYTECODE_SAVED = _keep_bytecode()


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def pytest_configure(config):
    """Private caches for this process: two xdist workers compiling into one ``NEWT_CACHE_DIR`` would see
    each other's entries (a test counting its cache files, or clearing the cache, would race), and a
    developer's run would fill their ``~/.cache/newt``.  Set before collection (and before any test's
    environment snapshot), restored at the end."""
    for line in ("gpu: needs a CUDA GPU (skipped without one)", "slow: slow tests (run with -m slow)",
                 "e2e: editor end-to-end tests (run with -m e2e)"):
        config.addinivalue_line("markers", line)  # (also in pyproject.toml; here for a run without it)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    root = tempfile.mkdtemp(prefix=f"newt-tests-{worker}-")
    saved = {}
    for var in PRIVATE_CACHES:
        saved[var] = os.environ.get(var)
        os.environ[var] = os.path.join(root, var.lower())
    # inductor (tests/runtime/test_torch_compile.py) sets this variable itself on first use, to its default
    # folder (shared between processes, with its own locks); set it first so that no test "changes" it
    var = "TORCHINDUCTOR_CACHE_DIR"
    saved[var] = os.environ.get(var)
    if saved[var] is None:
        import getpass
        try:
            user = getpass.getuser()
        except Exception:  # (no user name: a container with an unknown uid)
            user = str(os.getuid()) if hasattr(os, "getuid") else "user"
        os.environ[var] = os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")
    # property tests (hypothesis) draw their full number of examples where the slow tests run, fewer in the
    # default run: a module reads NEWT_TESTS_EXAMPLES ("full" or "quick"; "full" when run without this file)
    var = "NEWT_TESTS_EXAMPLES"
    saved[var] = os.environ.get(var)
    os.environ[var] = "full" if _asked_for_slow(config) else "quick"
    # the run's NVRTC results, shared by its workers (made by the controller: a worker finds the variable set)
    var = NVRTC_MEMO_VAR
    if os.environ.get(var) is None:
        saved[var] = None
        os.makedirs(os.path.join(root, "nvrtc"), exist_ok=True)
        os.environ[var] = os.path.join(root, "nvrtc")
    controller = worker == "main" and getattr(config.option, "dist", "no") != "no"  # (xdist's: runs no test)
    memo = _memo_module() if os.environ[var] != "off" and os.path.isdir(os.environ[var]) else None
    if memo is not None:
        if not controller:
            memo.install_nvrtc_memo(os.environ[var])
        # ... and in the processes the tests start (tests/subprocess_site/sitecustomize.py)
        parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if SUBPROCESS_SITE not in parts:
            saved["PYTHONPATH"] = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = os.pathsep.join([SUBPROCESS_SITE, *parts])
    config._newt_private = (root, saved)


def pytest_unconfigure(config):
    root, saved = getattr(config, "_newt_private", (None, {}))
    for var, value in [*saved.items(), *_BYTECODE_SAVED.items()]:
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
    if root:
        shutil.rmtree(root, ignore_errors=True)


# -- one NVRTC compile per distinct input in a test run (tests/subprocess_site/newt_tests_memo.py) ---------------
#: the folder of the run's NVRTC results (set by the controller, or the one process of a serial run; inherited by
#: its xdist workers and every process a test starts, which share it: each file is written whole and renamed)
NVRTC_MEMO_VAR = "NEWT_TESTS_NVRTC_MEMO"
#: put first on ``PYTHONPATH`` for the run: its ``sitecustomize.py`` installs the memo in a Python process that a
#: test starts (a language server, its compile processes), when that process imports the compiler. A test that
#: must see a subprocess compile for real (one that times it) sets ``NEWT_TESTS_NVRTC_MEMO=off`` for it.
SUBPROCESS_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "subprocess_site")


def _memo_module():
    """tests/subprocess_site/newt_tests_memo.py (None where this file runs without it: a copy in another folder)."""
    import importlib.util
    import sys
    if "newt_tests_memo" in sys.modules:
        return sys.modules["newt_tests_memo"]
    path = os.path.join(SUBPROCESS_SITE, "newt_tests_memo.py")
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location("newt_tests_memo", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["newt_tests_memo"] = mod
    spec.loader.exec_module(mod)
    return mod


# -- --cpu-durations: where the suite's CPU time goes -------------------------------------------------------
def pytest_addoption(parser):
    parser.addoption("--cpu-durations", type=int, default=None, metavar="N",
                     help="list the N tests that cost the most CPU time (0: all): this process's and its "
                          "reaped subprocesses' user+system seconds, setup to teardown; on a loaded machine "
                          "wall-clock durations say little, CPU seconds much more (tests/conftest.py)")


def _cpu_seconds() -> float:
    """User+system seconds of this process (every thread) and of its children that ended and were waited for
    (a language server a test started and stopped; one kept by a module-scoped fixture is counted at the
    teardown that stops it)."""
    import resource
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if item.config.getoption("cpu_durations", None) is not None:
        item._newt_cpu0 = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    start = getattr(item, "_newt_cpu0", None)
    if start is not None and call.when == "teardown":
        # on the teardown report: it travels from an xdist worker to the controller with its user_properties
        outcome.get_result().user_properties.append(("cpu_seconds", round(_cpu_seconds() - start, 3)))


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        cpu = dict(report.user_properties).get("cpu_seconds")
        if cpu is not None:
            _CPU_SPENT[report.nodeid] = cpu


_CPU_SPENT: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter, config):
    n = config.getoption("cpu_durations", None)
    if n is None or not _CPU_SPENT:
        return
    tr = terminalreporter
    ranked = sorted(_CPU_SPENT.items(), key=lambda kv: -kv[1])
    total = sum(_CPU_SPENT.values())
    tr.write_sep("=", f"CPU time: {total:.1f} s in {len(ranked)} tests")
    by_file: dict[str, float] = {}
    for nodeid, cpu in ranked:
        by_file[nodeid.split("::", 1)[0]] = by_file.get(nodeid.split("::", 1)[0], 0.0) + cpu
    for path, cpu in sorted(by_file.items(), key=lambda kv: -kv[1])[: n or None]:
        tr.write_line(f"{cpu:8.2f}s  {path}")
    tr.write_sep("-", "per test")
    for nodeid, cpu in ranked[: n or None]:
        tr.write_line(f"{cpu:8.2f}s  {nodeid}")


#: tests/slow_tests.txt: the tests that get the ``slow`` marker here, by node id (one per line, ``#`` comments):
#: the default suite must stay within 5 minutes on 2 cores, and these are the ones whose CPU time buys the
#: least there (the other parameters of a parametrized test stay fast). They still run in ``./dev test``
#: and CI. Listed here rather than marked in each file: the measurement that chose them is one list.
SLOW_LIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slow_tests.txt")


@functools.lru_cache(maxsize=1)
def listed_slow() -> frozenset[str]:
    try:
        with open(SLOW_LIST, encoding="utf-8") as f:
            lines = [ln.split("#", 1)[0].strip() for ln in f]
    except OSError:
        return frozenset()
    return frozenset(ln for ln in lines if ln)


def _asked_for_slow(config) -> bool:
    """``slow`` tests run when the command line gives a marker expression (``-m slow``, ``-m "not e2e"``: the
    selection is then the user's) or with ``NEWT_SLOW=1``; a plain ``pytest`` skips them with that advice
    (skipped, not deselected: a run of one slow file alone still ends with pytest's usual exit status)."""
    return bool(getattr(config.option, "markexpr", "")) or os.environ.get("NEWT_SLOW") == "1"


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marker
def pytest_collection_modifyitems(config, items):
    listed = listed_slow()
    if listed:
        for item in items:
            if item.nodeid in listed:
                item.add_marker(pytest.mark.slow)
    if not _asked_for_slow(config):
        skip_slow = pytest.mark.skip(reason="slow: runs with `python -m pytest -m slow` (and in `./dev test`)")
        for item in items:
            if item.get_closest_marker("slow") is not None and item.get_closest_marker("e2e") is None:
                item.add_marker(skip_slow)
    gpu = [item for item in items if "gpu" in item.keywords]
    if not gpu or cuda_available():  # (torch is imported only where a test needs the answer)
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in gpu:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _environment_restored(request):
    """Every test leaves ``os.environ`` as it found it.  Code under test may set variables for its own
    process (the editor worker sets ``NEWT_INTERPRET=1`` when it finds no GPU); inside the pytest process
    that would change every later test and every subprocess they start (a benchmark smoke run, seen in CI,
    ran its kernels through the interpreter because an earlier test had called the worker's code)."""
    import os
    import warnings
    # pytest's own (per phase), and inductor's process-wide switches (it sets them once for its C++ wrappers)
    def own(k):
        return k == "PYTEST_CURRENT_TEST" or k.startswith("_TORCHINDUCTOR_")
    before = {k: v for k, v in os.environ.items() if not own(k)}
    yield
    after = {k: v for k, v in os.environ.items() if not own(k)}
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        for k in changed:
            if k in before:
                os.environ[k] = before[k]
            else:
                os.environ.pop(k, None)
        warnings.warn(f"{request.node.nodeid} left the environment changed ({', '.join(changed)}); restored",
                      stacklevel=1)
