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

#: the collector's oldest-generation threshold in a test process (Python's default: 10). A test process holds the
#: whole session's items, modules and reports, and every full collection traverses them: over the front-end and
#: deuteron tests 17 full passes cost 2.8 of 52 CPU seconds, at 100 four passes cost 0.7 s. Only full passes
#: become rarer: the young generations are collected as before (tests/frontend/test_incremental_parse.py watches
#: those), and nothing is frozen (``gc.freeze`` would change ``newt.frontend.parsing.no_gc``'s path).
GC_OLDEST_THRESHOLD = 100


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
    if os.environ[var] != "off" and os.path.isdir(os.environ[var]) and not controller:
        _install_nvrtc_memo(os.environ[var])
    import gc
    config._newt_gc_threshold = gc.get_threshold()
    t0, t1, t2 = config._newt_gc_threshold
    gc.set_threshold(t0, t1, max(t2, GC_OLDEST_THRESHOLD))
    config._newt_private = (root, saved)


def pytest_unconfigure(config):
    root, saved = getattr(config, "_newt_private", (None, {}))
    if getattr(config, "_newt_gc_threshold", None):
        import gc
        gc.set_threshold(*config._newt_gc_threshold)
    for var, value in [*saved.items(), *_BYTECODE_SAVED.items()]:
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
    if root:
        shutil.rmtree(root, ignore_errors=True)


# -- one NVRTC compile per distinct input in a test run ----------------------------------------------------------
#: the folder of the run's NVRTC results (set by the controller, or the one process of a serial run; inherited by
#: its xdist workers, which share it: every file is written whole under a temporary name and renamed into place)
NVRTC_MEMO_VAR = "NEWT_TESTS_NVRTC_MEMO"


def _nvrtc_memo_key(cc, module, target, extra_options, lineinfo) -> str | None:
    """A digest of everything ``_compile_once`` reads from its arguments and of NVRTC's version (None: not a
    module it knows)."""
    import hashlib
    try:
        h = hashlib.sha256()
        for part in (module.source, repr(list(module.headers.items())), module.kernel or module.name, module.name,
                     module.shared_bytes, module.num_warps, cc.get_target(target or module.target).name,
                     list(extra_options), bool(lineinfo), cc.nvrtc_version()):
            h.update(repr(part).encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        return h.hexdigest()
    except Exception:  # (a stand-in module of a test: compiled as it is)
        return None


def _install_nvrtc_memo(folder: str) -> None:
    """Many tests compile the same generated CUDA (the examples' matmul and attention at the same configs) with
    ``cache=False`` or in a fresh cache; NVRTC and ptxas cost 0.3-3 CPU seconds each time. Within a test run an
    identical input (source, headers, target, options: see ``_nvrtc_memo_key``) is compiled once and later calls
    get a copy of that result, the one NVRTC gives again. A test that replaces any part of the compile path
    (NVRTC's entry point, the ptxas report's parser, the cache options: ``monkeypatch``) gets real compiles
    while it does. Failures are not kept. ``NEWT_TESTS_NVRTC_MEMO=off`` turns it off."""
    import dataclasses
    import pickle
    try:
        from cuda.bindings import nvrtc

        from newt.backend.cuda import compiler as cc
    except Exception:  # (no backend or no NVRTC: nothing to keep)
        return
    if getattr(cc._compile_once, "_newt_test_memo", False):
        return
    real = cc._compile_once
    own = {name: getattr(cc, name) for name in ("parse_ptxas_report", "cubin_register_count", "cache_options",
                                                "nvrtc_version", "get_target")}
    own_nvrtc = nvrtc.nvrtcCompileProgram

    def untouched() -> bool:
        return nvrtc.nvrtcCompileProgram is own_nvrtc and all(getattr(cc, n) is f for n, f in own.items())

    def compile_once(module, target, extra_options, lineinfo):
        key = _nvrtc_memo_key(cc, module, target, extra_options, lineinfo) if untouched() else None
        if key is None:
            return real(module, target, extra_options, lineinfo)
        path = os.path.join(folder, key + ".pickle")
        try:
            with open(path, "rb") as f:
                kept = pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError):
            kept = None
        if isinstance(kept, cc.CompiledBinary):
            return dataclasses.replace(kept, module=module)
        b = real(module, target, extra_options, lineinfo)
        _keep(path, "wb", lambda f: pickle.dump(dataclasses.replace(b, module=None), f))
        return b

    compile_once._newt_test_memo = True
    cc._compile_once = compile_once
    _install_sass_memo(folder)


def _keep(path: str, mode: str, write) -> None:
    """Write a memo file whole: under a temporary name, then renamed into place (the run's workers share the
    folder; a reader sees the old file or the whole new one). A failure keeps nothing."""
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})) as f:
            write(f)
        os.replace(tmp, path)
    except OSError:
        pass


def _install_sass_memo(folder: str) -> None:
    """The same for ``asm["sass"]``: cuobjdump runs once per distinct cubin in a test run."""
    import hashlib
    import importlib
    try:
        disasm = importlib.import_module("newt.backend.cuda.disasm")
        sass_module = importlib.import_module("newt.backend.cuda.sass")  # (the package attribute is a function)
    except Exception:
        return
    real = disasm.sass
    if getattr(real, "_newt_test_memo", False):
        return

    def sass(cubin: bytes) -> str:
        tool = disasm.find_cuobjdump()
        if tool is None:
            return real(cubin)
        path = os.path.join(folder, hashlib.sha256(repr(tool).encode() + bytes(cubin)).hexdigest() + ".sass")
        try:
            with open(path, encoding="utf-8", newline="") as f:
                return f.read()
        except OSError:
            pass
        text = real(cubin)
        _keep(path, "w", lambda f: f.write(text))
        return text

    sass._newt_test_memo = True
    disasm.sass = sass
    sass_module.sass = sass  # (bound there at its import)


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
