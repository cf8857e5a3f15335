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
    config._newt_private = (root, saved)


def pytest_unconfigure(config):
    root, saved = getattr(config, "_newt_private", (None, {}))
    for var, value in saved.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
    if root:
        shutil.rmtree(root, ignore_errors=True)


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
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
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
