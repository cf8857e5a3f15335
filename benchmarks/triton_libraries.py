"""A Triton library's own tests, unmodified, through newt's drop-in mode, per kernel.

    python benchmarks/triton_libraries.py LIBRARY [--tests test/transformers] [--only rms_norm,swiglu]
                                          [--per-test 2] [--timeout 120] [--json out.json] [--md]

LIBRARY is a checkout of a Triton library (nothing of it is kept in this project).  Its test files run
under ``python -m newt.dropin --capability 9.0 -m pytest`` (so ``import triton`` is newt's; without a GPU every
kernel runs on newt's interpreter), one pytest process per test file, with the library's own tests and torch references,
forward and backward as the tests have them.

Which tests: the interpreter runs every program of a launch, so the largest parametrizations of a test take
minutes; ``--per-test K`` (default 2) keeps, of each test function, the K parametrizations with the
smallest sizes (the sum of the integer parameters and shape tuples; a pytest plugin in this file does the
selection, the tests themselves are untouched).  ``--timeout`` bounds one test (pytest-timeout).
``--cuda-as-cpu``, for a library whose tests create their tensors on device ``cuda`` by name (attorch), reads
that device as the CPU (a torch function mode the plugin enters: factory functions' ``device=``,
``Tensor.to``, ``Tensor.cuda``, ``Tensor.is_cuda``); without a GPU those tests could not run at all otherwise.
``--cuda-tests`` also runs the tests a library marks ``skipif(not torch.cuda.is_available())`` (ml-cross-entropy's):
torch answers True while they are collected.

Per kernel: each ``@triton.jit`` function of the library module a test file exercises (``test_rms_norm.py``
-> ``<package>/ops/rms_norm.py``, or ``--map test_x.py=module.py``) gets the result of that file: "pass" when
every selected test passed, "fail" with the first failure's cause (exception class and first line, with the
newt diagnostic code when there is one), "skip" when the library's tests skip every case on this machine.
Known layouts: Liger-Kernel (``test/transformers`` -> ``src/liger_kernel/ops``), attorch
(``tests`` -> ``attorch/*_kernels.py``) and ml-cross-entropy (``tests`` -> ``cut_cross_entropy/*.py``);
``--md`` prints the table rows for docs/triton-compat.md.

``--impl both`` (the GPU mode): the selected test files in one pytest run under the installed Triton and one
under newt's drop-in (at once, ``--workers`` xdist workers each), compared case by case: a kernel Triton runs
must pass the same cases on newt.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))


# ---- the pytest plugin (loaded in the child with ``-p triton_libraries``) -------------------------------------

def _size(v) -> float:
    if isinstance(v, bool) or v is None:
        return 0
    if isinstance(v, (int, float)):
        return abs(v)
    if isinstance(v, (tuple, list)):
        total = 1
        ints = [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
        for x in ints:
            total *= max(abs(x), 1)
        return total if ints else sum(_size(x) for x in v)
    return 0


def _cpu_device(d):
    import torch
    if isinstance(d, str) and d.startswith("cuda"):
        return "cpu"
    if isinstance(d, torch.device) and d.type == "cuda":
        return torch.device("cpu")
    if isinstance(d, int) and not isinstance(d, bool):
        return "cpu"
    return d


def _cuda_as_cpu_mode():
    """A torch function mode that reads device ``cuda`` as the CPU (``--cuda-as-cpu``): factory functions'
    ``device=``, ``Tensor.to("cuda")`` / ``.to(device=...)``, ``Tensor.cuda()``, and ``Tensor.is_cuda`` answers
    True (host code that asserts its inputs are on the GPU: Liger-Kernel's ``mlp.py``)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class CudaAsCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = _cpu_device(kwargs["device"])
            if func in (torch.Tensor.cuda,):
                return args[0]
            if getattr(func, "__self__", None) is torch.Tensor.is_cuda:  # `x.is_cuda`: a CPU tensor stands for one
                return True
            if func is torch.Tensor.to and len(args) > 1:
                args = (args[0], _cpu_device(args[1])) + tuple(args[2:])
            return func(*args, **kwargs)

    return CudaAsCpu()


def pytest_configure(config):
    cap = os.environ.get("TRITON_LIBRARIES_DROPIN")
    if cap:  # an xdist worker is a fresh process: the drop-in of ``python -m newt.dropin`` is not in it
        from newt.dropin import install
        major, _, minor = cap.partition(".")
        install(capability=(int(major), int(minor or 0)))
    if os.environ.get("TRITON_LIBRARIES_CUDA_AS_CPU") == "1":
        mode = _cuda_as_cpu_mode()
        mode.__enter__()
        config._triton_libraries_mode = mode
    if os.environ.get("TRITON_LIBRARIES_CUDA_TESTS") == "1":
        # --cuda-tests: the library's `skipif(not torch.cuda.is_available())` marks are read at collection, while
        # torch answers True; the tests then run (with --cuda-as-cpu, on the CPU), torch's own probes answering
        # False again.  `is_bf16_supported()` stays True (ml-cross-entropy refuses to run without it).
        import torch
        config._triton_libraries_is_available = torch.cuda.is_available
        torch.cuda.is_available = lambda: True
        torch.cuda.is_bf16_supported = lambda *a, **k: True


def pytest_collection_finish(session):
    real = getattr(session.config, "_triton_libraries_is_available", None)
    if real is not None:
        import torch
        torch.cuda.is_available = real


def pytest_runtest_logreport(report):
    """``--impl both``: one JSON line per test outcome, written as the run goes (by the xdist controller, not
    its workers), so a run stopped at its time limit still reports what it finished."""
    path = os.environ.get("TRITON_LIBRARIES_LOG")
    if not path or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if report.when == "call" or (report.when == "setup" and not report.passed) or \
            (report.when == "teardown" and report.failed):
        res = "pass" if report.passed else "skip" if report.skipped else "fail"
        text = getattr(report, "longreprtext", "") or ""
        if report.skipped and isinstance(report.longrepr, tuple):
            text = str(report.longrepr[2])
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"nodeid": report.nodeid, "result": res, "when": report.when,
                                "cause": _cause(text) if res != "pass" else None,
                                "tail": _tail(text) if res == "fail" else None,
                                "seconds": round(getattr(report, "duration", 0.0), 3)}) + "\n")


def pytest_collection_modifyitems(config, items):
    k = int(os.environ.get("TRITON_LIBRARIES_PER_TEST", "0") or 0)
    if k <= 0:
        return
    by_fn: dict = {}
    for it in items:
        key = (it.fspath, getattr(it, "originalname", it.name))
        by_fn.setdefault(key, []).append(it)
    keep = set()
    for group in by_fn.values():
        def size(it):
            cs = getattr(it, "callspec", None)
            return sum(_size(v) for v in cs.params.values()) if cs else 0
        for it in sorted(group, key=size)[:k]:
            keep.add(id(it))
    deselected = [it for it in items if id(it) not in keep]
    items[:] = [it for it in items if id(it) in keep]
    if deselected:
        config.hook.pytest_deselected(items=deselected)


# ---- the layouts: test file -> the library module whose kernels it exercises ------------------------------------

def layout(lib: str) -> dict:
    if os.path.isdir(os.path.join(lib, "src", "liger_kernel")):
        return {"name": "Liger-Kernel", "tests": "test/transformers", "pythonpath": ["src", "."],
                "module": lambda t: os.path.join("src", "liger_kernel", "ops", t[len("test_"):])}
    if os.path.isdir(os.path.join(lib, "attorch")):
        return {"name": "attorch", "tests": "tests", "pythonpath": ["."],
                "module": lambda t: os.path.join("attorch", t[len("test_"):].replace("_layers.py", "_kernels.py")
                                                 .replace("_layer.py", "_kernels.py"))}
    if os.path.isdir(os.path.join(lib, "cut_cross_entropy")):  # apple/ml-cross-entropy
        cce = {"test_cce_lse.py": "cce_lse_forward.py", "test_cce_indexed_dot.py": "indexed_dot.py",
               "test_cce_loss_backward.py": "cce_backward.py", "test_vocab_parallel.py": "vocab_parallel/utils.py"}
        return {"name": "ml-cross-entropy", "tests": "tests", "pythonpath": ["."],
                "module": lambda t: os.path.join("cut_cross_entropy", cce.get(t, "cce.py"))}
    return {"name": os.path.basename(os.path.abspath(lib)), "tests": "tests", "pythonpath": ["."],
            "module": lambda t: t[len("test_"):]}


def launched_names(lib: str) -> set:
    """Every name launched as ``name[grid](...)`` (or ``wrap_triton(name)[grid](...)``) in the library."""
    out = set()
    for dirpath, dirs, files in os.walk(lib):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if not f.endswith(".py"):
                continue
            try:
                tree = ast.parse(open(os.path.join(dirpath, f), encoding="utf-8").read())
            except (OSError, SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                    v = node.func.value
                    if isinstance(v, ast.Call) and v.args:  # wrap_triton(k)[grid](...)
                        v = v.args[0]
                    if isinstance(v, ast.Name):
                        out.add(v.id)
                    elif isinstance(v, ast.Attribute):
                        out.add(v.attr)
    return out


def jit_kernels(path: str, launched: set) -> list[str]:
    """The kernels of a file: its ``@triton.jit`` functions (under ``autotune``/``heuristics`` too, or wrapped
    by a module-level ``f = triton.jit(f)``) that the library launches (``@triton.jit`` helpers called from
    other kernels are not counted)."""
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError):
        return []
    out = []
    jitted = set()  # `name = triton.jit(name)` at module level (ml-cross-entropy wraps its kernels so)
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args and \
                isinstance(node.value.args[0], ast.Name) and \
                ast.unparse(node.value.func).split(".")[-1] == "jit":
            jitted.add(node.value.args[0].id)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in launched:
            if node.name in jitted:
                out.append(node.name)
                continue
            for d in node.decorator_list:
                text = ast.unparse(d.func if isinstance(d, ast.Call) else d)
                if text.split(".")[-1] == "jit":
                    out.append(node.name)
                    break
    return out


# ---- running ------------------------------------------------------------------------------------------------------

#: lines kept of a failing case's report (its traceback's end: the error and where it was raised)
TAIL_LINES = 30


def _tail(text: str, n: int = TAIL_LINES) -> str:
    """The last ``n`` lines of a failure's report, for the log: the cause line alone often names no place."""
    lines = [ln.rstrip() for ln in (text or "").strip().splitlines()]
    return "\n".join(lines[-n:])


def _cause(text: str) -> str:
    m = re.search(r"error\[([A-Z]\d+)\] ([^\n]*)", text)
    if m:
        return f"CompilationError {m.group(1)}: {m.group(2)[:120]}"
    # an xdist worker's report starts with "[gw0] linux -- Python 3.11 ..." : not the cause
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not re.match(r"\[gw\d+\] ", ln)]
    errs = [ln for ln in lines if re.match(r"E\s+\S", ln)]  # pytest's "E   ValueError: ..." lines
    first = errs[0][1:].strip() if errs else (lines or [""])[0]
    return first[:160]


def run_file(lib: str, lay: dict, test: str, per_test: int, timeout: int, file_timeout: int,
             cuda_as_cpu: bool = False, capability: str = "9.0", cuda_tests: bool = False) -> dict:
    env = dict(os.environ)
    if cuda_as_cpu:
        env["TRITON_LIBRARIES_CUDA_AS_CPU"] = "1"
    if cuda_tests:
        env["TRITON_LIBRARIES_CUDA_TESTS"] = "1"
    paths = [ROOT, HERE] + [os.path.join(lib, p) for p in lay["pythonpath"]] + \
        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["TRITON_LIBRARIES_PER_TEST"] = str(per_test)
    with tempfile.TemporaryDirectory(prefix="tlib_") as tmp:
        xml = os.path.join(tmp, "junit.xml")
        cmd = [sys.executable, "-m", "newt.dropin", "--capability", capability, "-m", "pytest",
               os.path.join(lay["tests"], test), "-q",
               "-p", "no:cacheprovider", "-p", "triton_libraries", f"--junitxml={xml}", f"--timeout={timeout}",
               "-o", "addopts=", "-n", "0"]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, cwd=lib, env=env, capture_output=True, text=True, timeout=file_timeout)
            tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            return {"test": test, "seconds": file_timeout, "cases": [], "error": f"timed out after {file_timeout} s"}
        cases = []
        if os.path.exists(xml):
            for tc in ET.parse(xml).getroot().iter("testcase"):
                res, cause = "pass", None
                for tag in ("failure", "error", "skipped"):
                    el = tc.find(tag)
                    if el is not None:
                        res = "skip" if tag == "skipped" else "fail"
                        cause = _cause((el.get("message") or "") + "\n" + (el.text or ""))
                        ctail = _tail(el.text or el.get("message") or "") if res == "fail" else None
                        break
                else:
                    ctail = None
                cases.append({"name": tc.get("name"), "result": res, "cause": cause, "tail": ctail,
                              "seconds": float(tc.get("time") or 0)})
        return {"test": test, "seconds": round(time.time() - t0, 1), "cases": cases,
                "error": None if cases else "no test ran: " + " | ".join(tail)}


def summarize(lib: str, lay: dict, r: dict, launched: set) -> list[dict]:
    """One row per kernel of the module the test file exercises."""
    mod = lay["module"](r["test"])
    kernels = jit_kernels(os.path.join(lib, mod), launched) or [f"({os.path.basename(mod)})"]
    cases = r["cases"]
    fails = [c for c in cases if c["result"] == "fail"]
    passes = [c for c in cases if c["result"] == "pass"]
    if r.get("error"):
        res, cause = "fail", r["error"]
    elif fails:
        res, cause = "fail", fails[0]["cause"]
    elif passes:
        res, cause = "pass", None
    else:
        res, cause = "skip", (cases[0]["cause"] if cases else None)
    note = f"{len(passes)}/{len(cases)} tests"
    return [{"kernel": k, "module": mod, "test": r["test"], "result": res, "cause": cause, "tests": note}
            for k in kernels]


# a stand-in library written for --smoke: one kernel, a jit helper of it, a test with three sizes
_SMOKE_FILES = {
    "scale.py": """
import torch
import triton
import triton.language as tl


@triton.jit
def _times(x):
    return x


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, _times(tl.load(x_ptr + offs, mask=m)) * factor, mask=m)


def scale(x, factor):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), factor, BLOCK=64)
    return out
""",
    "tests/test_scale.py": """
import pytest
import torch
from scale import scale


@pytest.mark.parametrize("n", [5, 100, 100000])
def test_scale(n):
    x = torch.randn(n)
    torch.testing.assert_close(scale(x, 2.0), x * 2)
""",
    "tests/test_scale_negative.py": """
import torch
from scale import scale


def test_negative_factor():
    x = torch.randn(37)
    torch.testing.assert_close(scale(x, -0.5), x * -0.5)


def test_wrong_reference():
    x = torch.ones(8)
    assert scale(x, 3.0).sum().item() == 25.0, "the stand-in's failing case"
""",
    "tests/test_scale_gpu_only.py": """
import pytest
import torch
from scale import scale


@pytest.mark.skipif(not torch.cuda.is_available(), reason="Test requires CUDA")
def test_on_the_gpu():
    x = torch.randn(40, device="cuda")
    assert x.is_cuda  # host code that insists on a GPU tensor
    torch.testing.assert_close(scale(x, 4.0), x * 4)
""",
}


def smoke() -> int:
    """The whole runner on the stand-in library: scale_kernel passes its two smallest cases (the 100000-element
    case is not selected) and its ``@triton.jit`` helper is not counted as a kernel."""
    with tempfile.TemporaryDirectory(prefix="tlib_smoke_") as lib:
        for rel, text in _SMOKE_FILES.items():
            os.makedirs(os.path.dirname(os.path.join(lib, rel)), exist_ok=True)
            with open(os.path.join(lib, rel), "w", encoding="utf-8") as f:
                f.write(text)
        out = os.path.join(lib, "r.json")
        main([lib, "--json", out, "--skip", "gpu_only"])
        with open(out, encoding="utf-8") as f:
            rows = {r["kernel"]: r for r in json.load(f)["rows"]}
        by_test = {r["test"]: r for r in json.load(open(out, encoding="utf-8"))["rows"]}
        ok = set(rows) == {"scale_kernel", "(scale_negative.py)"} and by_test["test_scale.py"]["result"] == "pass" \
            and by_test["test_scale.py"]["tests"] == "2/2 tests" \
            and by_test["test_scale_negative.py"]["result"] == "fail"
        # a failing case keeps the end of its report (the assertion and the line that raised it)
        res = {r["test"]: r for r in json.load(open(out, encoding="utf-8"))["results"]}
        bad = [c for c in res["test_scale_negative.py"]["cases"] if c["result"] == "fail"]
        ok = ok and len(bad) == 1 and "the stand-in's failing case" in (bad[0]["tail"] or "") \
            and "test_scale_negative.py" in bad[0]["tail"]
        # the GPU mode's plumbing: both runs, compared (without Triton here, its side also runs the drop-in)
        main([lib, "--impl", "both", "--workers", "1", "--shards", "2", "--json", out, "--skip", "gpu_only"] +
             ([] if _real_triton() else ["--triton-via-dropin"]))
        with open(out, encoding="utf-8") as f:
            data = json.load(f)
        both = {r["test"]: r for r in data["rows"]}
        ok2 = set(both) == {"test_scale.py", "test_scale_negative.py"} and \
            both["test_scale.py"]["verdict"] == both["test_scale_negative.py"]["verdict"] == "match" \
            and both["test_scale.py"]["triton"] == both["test_scale.py"]["newt"] == "2/2" \
            and both["test_scale_negative.py"]["newt"] == "1/2" and data["runs"]["newt"]["shards"] == 2
        ok2 = ok2 and sorted(map(len, shards(lib, {"tests": "tests"}, ["test_scale.py", "test_scale_negative.py",
                                                                        "test_x.py"], 2))) == [1, 2]
        # a test the library keeps for a GPU: skipped, or with --cuda-as-cpu --cuda-tests run on the CPU
        gpu = {}
        for extra in ([], ["--cuda-as-cpu", "--cuda-tests"]):
            main([lib, "--only", "scale_gpu_only", "--json", out] + extra)
            with open(out, encoding="utf-8") as f:
                gpu[bool(extra)] = json.load(f)["rows"][0]["result"]
        ok = ok and gpu == {False: "skip", True: "pass"}
        # --list: the kernels the files exercise, nothing run
        import contextlib
        import io
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            main([lib, "--list"])
        ok = ok and buf.getvalue().rstrip().endswith("1 kernels exercised by 3 test files")
        # a run past its time limit stops at once, xdist workers and all, and says so
        t0 = time.time()
        cut = run_suite(lib, {"tests": "tests", "pythonpath": ["."]}, ["test_scale.py"], "newt", 2, 60, 2, 2)
        ok2 = ok2 and time.time() - t0 < 30 and cut["tail"][0].startswith("timed out after 2 s")
        # the comparison itself, on made-up outcomes: a case Triton passes and newt fails, and a file Triton
        # runs none of
        def case(name, result):
            return {"classname": "tests/test_scale.py", "name": name, "result": result, "cause": None}
        runs = {"triton": {"by_file": {"test_scale.py": [case("a", "pass"), case("b", "pass")]}},
                "newt": {"by_file": {"test_scale.py": [case("a", "pass"), case("b", "fail")]}}}
        lay = {"module": lambda t: "scale.py"}
        fails = compare(lib, lay, runs, {"scale_kernel"})
        runs["triton"]["by_file"]["test_scale.py"] = [case("a", "fail"), case("b", "skip")]
        not_run = compare(lib, lay, runs, {"scale_kernel"})
        ok2 = ok2 and [r["verdict"] for r in fails] == ["newt fails"] and fails[0]["cause"].startswith("b:") \
            and [r["verdict"] for r in not_run] == ["not run by Triton"]
        # the log's failure tails: only a case Triton passes and newt fails, with its report's end
        runs["triton"]["by_file"]["test_scale.py"] = [case("a", "pass"), case("b", "pass")]
        runs["newt"]["by_file"]["test_scale.py"][1]["tail"] = "Traceback\nE   ValueError: i=0, errors.max()=..."
        tails = failure_tails(runs)
        ok2 = ok2 and tails[0].startswith("--- newt fails tests/test_scale.py::b") and "ValueError" in tails[-1]
    print("smoke:", "ok" if ok and ok2 else f"unexpected {rows} {both}")
    return 0 if ok and ok2 else 1


def _real_triton() -> bool:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", "import triton.language"], capture_output=True,
                          env=env).returncode == 0


def commit_of(lib: str) -> str:
    """The checkout's commit, or the one a ``COMMIT`` file beside it names (a copy without ``.git``)."""
    marker = os.path.join(lib, "COMMIT")
    if os.path.exists(marker):
        return open(marker, encoding="utf-8").read().strip()
    try:
        return subprocess.run(["git", "-C", lib, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ---- both implementations, one pytest run each (the GPU mode, ``--impl both``) -------------------------------------

def run_suite(lib: str, lay: dict, tests: list[str], impl: str, per_test: int, timeout: int, suite_timeout: int,
              workers: int, capability: str = "9.0", via_dropin: bool = False, cuda_as_cpu: bool = False) -> dict:
    """The selected test files in one pytest run (``-n workers``) under ``impl``: ``triton`` is plain
    ``python -m pytest`` (the installed Triton), ``newt`` the same under ``python -m newt.dropin``.  Returns
    {test file: [cases]} and the run's tail."""
    # an outer pytest's variables (PYTEST_XDIST_WORKER: this run started from an xdist worker) would make the inner
    # run's controller take itself for a worker, and the plugin would record nothing
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT_TEST"))}
    paths = ([ROOT] if impl == "newt" else []) + [HERE] + [os.path.join(lib, p) for p in lay["pythonpath"]] + \
        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != ROOT]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["TRITON_LIBRARIES_PER_TEST"] = str(per_test)
    if cuda_as_cpu:
        env["TRITON_LIBRARIES_CUDA_AS_CPU"] = "1"
    dropin = impl == "newt" or via_dropin  # via_dropin: --smoke on a machine without Triton (plumbing only)
    if dropin and ROOT not in paths:
        paths.insert(0, ROOT)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    pre = [sys.executable] + (["-m", "newt.dropin", "--capability", capability] if dropin else [])
    if dropin:
        env["TRITON_LIBRARIES_DROPIN"] = capability
    with tempfile.TemporaryDirectory(prefix=f"tlib_{impl}_") as tmp:
        log = os.path.join(tmp, "outcomes.jsonl")
        env["TRITON_LIBRARIES_LOG"] = log
        cmd = pre + ["-m", "pytest"] + [os.path.join(lay["tests"], t) for t in tests] + \
            ["-q", "-p", "no:cacheprovider", "-p", "triton_libraries", f"--timeout={timeout}",
             "-o", "addopts=", "-n", str(workers), "--max-worker-restart", "100", "--continue-on-collection-errors"]
        t0 = time.time()
        # its own session: at the time limit the whole run stops, the xdist workers with it (they hold the
        # output pipes; killing the controller alone would leave them running and this wait with them)
        p = subprocess.Popen(cmd, cwd=lib, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=suite_timeout)
            tail = out.strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            out, _ = p.communicate()
            tail = [f"timed out after {suite_timeout} s: the cases it finished are counted"] + \
                (out or "").strip().splitlines()[-2:]
        cases = []
        if os.path.exists(log):
            with open(log, encoding="utf-8") as f:
                cases = [json.loads(line) for line in f if line.strip()]
    by_file: dict = {t: [] for t in tests}
    seen = set()
    for c in cases:
        if c["nodeid"] in seen and c["when"] == "teardown":  # a teardown error after its call: the call counts
            continue
        seen.add(c["nodeid"])
        f = os.path.basename(c["nodeid"].split("::")[0])
        if f in by_file:
            by_file[f].append({"classname": c["nodeid"].split("::")[0], "name": c["nodeid"].split("::", 1)[-1],
                               "result": c["result"], "cause": c["cause"], "tail": c.get("tail"),
                               "seconds": c["seconds"]})
    return {"impl": impl, "seconds": round(time.time() - t0, 1), "by_file": by_file, "tail": tail}


def compare(lib: str, lay: dict, runs: dict, launched: set) -> list[dict]:
    """One row per kernel: its test file's cases under Triton and under newt.  A kernel "runs on Triton" when
    some of its cases pass there; it "matches" when every case that passes on Triton also passes on newt (the
    tests compare with their own torch references, so passing on both means matching results)."""
    rows = []
    for test in runs["triton"]["by_file"]:
        tri = {(c["classname"], c["name"]): c for c in runs["triton"]["by_file"][test]}
        new = {(c["classname"], c["name"]): c for c in runs["newt"]["by_file"][test]}
        t_pass = {k for k, c in tri.items() if c["result"] == "pass"}
        n_pass = {k for k, c in new.items() if c["result"] == "pass"}
        missing = sorted(t_pass - n_pass)
        extra = sorted(n_pass - t_pass)
        if not t_pass:
            verdict = "not run by Triton"
        else:
            verdict = "match" if not missing else "newt fails"
        cause = None
        if missing:
            c = new.get(missing[0])
            cause = f"{missing[0][1]}: " + ((c["cause"] or c["result"]) if c else "not reported by the newt run")
        mod = lay["module"](test)
        kernels = jit_kernels(os.path.join(lib, mod), launched) or [f"({os.path.basename(mod)})"]
        for k in kernels:
            rows.append({"kernel": k, "module": mod, "test": test, "verdict": verdict,
                         "triton": f"{len(t_pass)}/{len(tri)}", "newt": f"{len(n_pass)}/{len(new)}",
                         "newt_only": len(extra), "cause": cause,
                         "triton_cause": next((c["cause"] for c in tri.values() if c["result"] == "fail"), None)})
    return rows


def shards(lib: str, lay: dict, tests: list[str], k: int) -> list[list[str]]:
    """``tests`` in ``k`` groups of about equal weight (a test file's size stands for its cases): the largest
    files first, each onto the lightest group, so the slow files (Liger's grpo_loss, cross_entropy) do not
    queue behind each other in one run."""
    if k <= 1 or len(tests) <= 1:
        return [list(tests)]
    folder = os.path.join(lib, lay["tests"])

    def weight(t):
        try:
            return os.path.getsize(os.path.join(folder, t))
        except OSError:
            return 0

    groups: list[list[str]] = [[] for _ in range(min(k, len(tests)))]
    loads = [0] * len(groups)
    for t in sorted(tests, key=lambda t: (-weight(t), t)):
        i = loads.index(min(loads))
        groups[i].append(t)
        loads[i] += weight(t)
    return [sorted(g) for g in groups]


def merge_runs(parts: list[dict]) -> dict:
    """The runs of one implementation over several shards, as one run."""
    by_file: dict = {}
    for r in parts:
        by_file.update(r["by_file"])
    return {"impl": parts[0]["impl"], "seconds": max(r["seconds"] for r in parts), "by_file": by_file,
            "tail": [x for r in parts for x in r["tail"]][-6:], "shards": len(parts)}


def failure_tails(runs: dict) -> list[str]:
    """For the log: the end of the report of each case that passes under Triton and fails under newt."""
    out = []
    for test, cases in runs["newt"]["by_file"].items():
        tri = {(c["classname"], c["name"]): c for c in runs["triton"]["by_file"].get(test, [])}
        for c in cases:
            t = tri.get((c["classname"], c["name"]))
            if c["result"] == "fail" and t is not None and t["result"] == "pass":
                out.append(f"--- newt fails {c['classname']}::{c['name']} (passes under Triton)")
                out += ["    " + ln for ln in (c.get("tail") or c.get("cause") or "(no report)").splitlines()]
    return out


def main_both(a, lib: str, lay: dict, tests: list[str]) -> int:
    import concurrent.futures as cf
    commit = commit_of(lib)
    launched = launched_names(lib)
    groups = shards(lib, lay, tests, a.shards)
    with cf.ThreadPoolExecutor(2 * len(groups)) as ex:  # every run at once: one GPU, separate processes
        futs = {(impl, i): ex.submit(run_suite, lib, lay, g, impl, a.per_test, a.timeout, a.file_timeout,
                                     a.workers, a.capability, a.triton_via_dropin, a.cuda_as_cpu)
                for impl in ("triton", "newt") for i, g in enumerate(groups)}
        runs = {impl: merge_runs([futs[(impl, i)].result() for i in range(len(groups))])
                for impl in ("triton", "newt")}
    rows = compare(lib, lay, runs, launched)
    for impl, r in runs.items():
        n = sum(len(v) for v in r["by_file"].values())
        print(f"{impl}: {n} test cases in {r['seconds']} s ({len(groups)} shard(s)); {' | '.join(r['tail'])}")
    for x in rows:
        print(f"  {x['verdict']:18s} {x['kernel']:45s} triton {x['triton']:7s} newt {x['newt']:7s}"
              + (f"  {x['cause']}" if x["cause"] else ""))
    tails = failure_tails(runs)
    if tails:
        print("\nThe end of each failing case's report under newt:")
        print("\n".join(tails))
    # a kernel several test files exercise counts once: it matches when every file Triton runs matches
    verdicts: dict = {}
    for x in rows:
        if x["kernel"].startswith("("):  # a test file whose module launches no kernel of its own
            continue
        verdicts.setdefault(x["kernel"], []).append(x["verdict"])
    ran = {k for k, v in verdicts.items() if any(x != "not run by Triton" for x in v)}
    match = {k for k in ran if all(x in ("match", "not run by Triton") for x in verdicts[k])}
    print(f"\n{lay['name']} at {commit[:10]}: {len(match)} of {len(ran)} kernels Triton runs also pass on newt "
          f"(same tests; {len(verdicts) - len(ran)} kernels not run by Triton here)")
    if a.md:
        for x in rows:
            print(f"| {lay['name']} | {commit[:10]} | `{x['kernel']}` ({os.path.basename(x['module'])}) | "
                  f"{x['triton']} | {x['newt']} | {x['verdict']} | {x['cause'] or x['triton_cause'] or ''} |")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"library": lay["name"], "commit": commit, "rows": rows, "runs": runs}, f, indent=1)
    return 0


def list_kernels(lib: str, lay: dict, tests: list[str]) -> int:
    """``--list``: the kernels the selected test files exercise (each counted once), without running them."""
    launched = launched_names(lib)
    seen: dict = {}
    for t in tests:
        mod = lay["module"](t)
        ks = jit_kernels(os.path.join(lib, mod), launched)
        print(f"{t:45s} {mod:55s} {len(ks):3d}  {', '.join(ks)}")
        for k in ks:
            seen.setdefault(k, t)
    print(f"\n{lay['name']} at {commit_of(lib)[:10]}: {len(seen)} kernels exercised by {len(tests)} test files")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("library", nargs="?", help="a checkout of a Triton library")
    ap.add_argument("--tests", help="the folder of test files (default: the layout's)")
    ap.add_argument("--only", help="comma-separated test names (rms_norm,swiglu or test_rms_norm.py)")
    ap.add_argument("--skip", help="comma-separated parts of test file names to leave out (model-level tests)")
    ap.add_argument("--per-test", type=int, default=2, help="parametrizations kept per test function (smallest)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per test")
    ap.add_argument("--file-timeout", type=int, default=900,
                    help="seconds per test file (--impl both: per pytest run)")
    ap.add_argument("--cuda-as-cpu", action="store_true",
                    help="the tests name device 'cuda' (attorch's do): read it as the CPU (a torch function mode)")
    ap.add_argument("--cuda-tests", action="store_true",
                    help="(the interpreter) run tests the library marks skipif(not torch.cuda.is_available()): "
                         "torch answers True while the tests are collected (ml-cross-entropy's are all so marked); "
                         "with --cuda-as-cpu")
    ap.add_argument("--capability", default="9.0",
                    help="without a GPU, what torch.cuda.get_device_capability() reports (python -m newt.dropin "
                         "--capability): libraries pick configs by it at import")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--md", action="store_true", help="print markdown table rows")
    ap.add_argument("--smoke", action="store_true", help="run on a built-in two-kernel stand-in library")
    ap.add_argument("--list", action="store_true",
                    help="run nothing: each selected test file with the kernels it exercises, and their number "
                         "(what a full pass would count)")
    ap.add_argument("--impl", choices=("newt", "both"), default="newt",
                    help="newt: each test file under the drop-in (the interpreter counts); both: the selected "
                         "files in one pytest run under the installed Triton and one under newt's drop-in, "
                         "compared case by case (the GPU mode)")
    ap.add_argument("--workers", type=int, default=4, help="--impl both: pytest-xdist workers per run")
    ap.add_argument("--shards", type=int, default=1,
                    help="--impl both: split the test files into this many groups, each its own pair of runs, all "
                         "at once (a slow file no longer holds up the rest within the time limit)")
    ap.add_argument("--triton-via-dropin", action="store_true", help=argparse.SUPPRESS)  # the smoke, without Triton
    a = ap.parse_args(argv)
    if a.smoke:
        return smoke()
    if not a.library or not os.path.isdir(a.library):
        print(f"triton_libraries: no library checkout at {a.library!r}; nothing measured")
        return 0
    lib = os.path.abspath(a.library)
    lay = layout(lib)
    if a.tests:
        lay["tests"] = a.tests
    folder = os.path.join(lib, lay["tests"])
    tests = sorted(f for f in os.listdir(folder) if f.startswith("test_") and f.endswith(".py"))
    if a.skip:
        tests = [t for t in tests if not any(w in t for w in a.skip.split(","))]
    if a.only:
        want = {w if w.startswith("test_") else f"test_{w}" for w in a.only.split(",")}
        want = {w if w.endswith(".py") else w + ".py" for w in want}
        tests = [t for t in tests if t in want]
    if a.list:
        return list_kernels(lib, lay, tests)
    if a.impl == "both":
        return main_both(a, lib, lay, tests)
    commit = commit_of(lib)
    launched = launched_names(lib)
    rows, results = [], []
    for t in tests:
        r = run_file(lib, lay, t, a.per_test, a.timeout, a.file_timeout, a.cuda_as_cpu, a.capability, a.cuda_tests)
        results.append(r)
        rs = summarize(lib, lay, r, launched)
        rows += rs
        ok = sum(1 for c in r["cases"] if c["result"] == "pass")
        print(f"{t:45s} {ok}/{len(r['cases'])} tests  {len(rs)} kernels {rs[0]['result'] if rs else ''}  "
              f"({r['seconds']} s)" + (f"  {rs[0]['cause']}" if rs and rs[0]["cause"] else ""), flush=True)
        for c in r["cases"]:
            if c["result"] == "fail" and c.get("tail"):
                print(f"    --- {c['name']}\n" + "\n".join("      " + ln for ln in c["tail"].splitlines()),
                      flush=True)
    counted = [x for x in rows if x["result"] != "skip"]
    passed = [x for x in counted if x["result"] == "pass"]
    print(f"\n{lay['name']} at {commit[:10]}: {len(passed)} of {len(counted)} kernels pass their tests "
          f"({len(rows) - len(counted)} skipped by the library on this machine)")
    if a.md:
        for x in rows:
            print(f"| {lay['name']} | {commit[:10]} | `{x['kernel']}` ({os.path.basename(x['module'])}) | "
                  f"{x['result']} ({x['tests']}) | {x['cause'] or ''} |")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"library": lay["name"], "commit": commit, "rows": rows, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
