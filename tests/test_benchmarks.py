"""Every benchmark script gets a CPU smoke run at tiny sizes, so no refactor breaks one unnoticed.

Scripts with a CPU path run it (small sizes, no result files written); scripts that time the GPU run
until their GPU check and must exit 2 with "needs a CUDA GPU" (their argument parsing and imports run).
On a machine with a GPU those are skipped: there they are the real benchmarks (minutes each), run by
benchmarks/run_device.sh."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")

#: script -> the CPU command line (arguments after the script)
CPU_RUNS = {
    "interpreter.py": ["--smoke"],
    "frontend.py": ["--repeat", "1"],
    "backend_perf.py": ["--compile", "--smoke"],
    "lsp_latency.py": ["--edits", "2", "--hovers", "3", "--idle", "0.1"],
    "autotune_scaling.py": ["cpu", "--configs", "4", "--workers", "1,2", "--no-dask"],
    "launch_overhead.py": ["--cpu", "--deuteron", "--windows", "2", "--rounds", "1", "--launches", "20"],
    "helion_examples.py": ["--smoke"],
    "triton_tutorials.py": ["--smoke"],
    "triton_libraries.py": ["--smoke"],
    "triton_tutorial_timings.py": ["--smoke"],
    "five_mb.py": ["--size", "200000", "--repeat", "1"],
    "newt_check_corpus.py": ["--smoke"],
    "perf_first_warning.py": ["--runs", "1"],
    "tut06_bwd_offline.py": ["--smoke"],
    "host_dispatch_offline.py": ["--smoke"],
}
#: scripts that need a GPU for everything they measure -> arguments they require
GPU_ONLY = {
    "bench.py": ["--out", "{tmp}"],
    "config_sweep.py": ["--out", "{tmp}"],
    "deuteron_bench.py": ["--out", "{tmp}"],
    "bench_tma.py": ["--out", "{tmp}"],
    "helion_vs_deuteron.py": ["--examples", "{tmp}", "--out", "{tmp}"],
    "dtattn_configs.py": [],
    "bench_ws.py": ["--out", "{tmp}"],
    "tut06_profile.py": ["{tmp}"],
}
#: modules of the benchmarks that are not scripts
LIBRARIES = {"common.py"}


def _run(script, args, tmp_path):
    # the scripts' own settings only: nothing a test of this process set (NEWT_INTERPRET, NEWT_C_LAUNCHER ...)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_"))}
    env["PYTHONPATH"] = ROOT
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    return subprocess.run([sys.executable, os.path.join(BENCH, script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_every_script_has_a_smoke_run():
    scripts = {os.path.basename(p) for p in glob.glob(os.path.join(BENCH, "*.py"))}
    assert scripts - LIBRARIES == set(CPU_RUNS) | set(GPU_ONLY)


@pytest.mark.parametrize("script", sorted(CPU_RUNS))
def test_cpu_smoke_run(script, tmp_path):
    before = {p: os.path.getmtime(p) for p in glob.glob(os.path.join(BENCH, "*")) if os.path.isfile(p)}
    r = _run(script, CPU_RUNS[script], tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    after = {p: os.path.getmtime(p) for p in before}
    assert after == before, "a smoke run must not rewrite the committed results"


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


#: runs every GPU-only script up to its GPU check in one process: torch and the packages the scripts share are
#: imported once, then each script runs in a fork of that process as ``python SCRIPT ARGS`` would run it (its own
#: folder first on ``sys.path``, its arguments in ``sys.argv``, ``__main__``), its output in a file and its exit
#: status the fork's. Each script's import and argument parsing are its own; what a fresh interpreter would add
#: is the import of torch, about 2.5 CPU seconds per script, paid here once.
_GPU_CHECK_RUNNER = r"""
import json, os, runpy, sys
import torch  # noqa: F401  (the scripts' common imports, shared by the forks)
jobs, results = json.loads(sys.argv[1]), {}
for script, args, out in jobs:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.argv = [script, *args]
            sys.path[0] = os.path.dirname(script)
            try:
                runpy.run_path(script, run_name="__main__")
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, (int, type(None))):
                    print(e.code, file=sys.stderr)
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    results[script] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def gpu_check_runs(tmp_path_factory):
    """script -> (exit status, output) of each GPU-only script run up to its GPU check (one process, a fork each)."""
    tmp = tmp_path_factory.mktemp("gpu-check")
    jobs = [(os.path.join(BENCH, s), [a.replace("{tmp}", str(tmp / s)) for a in args], str(tmp / f"{s}.out"))
            for s, args in sorted(GPU_ONLY.items())]
    for s in GPU_ONLY:
        (tmp / s).mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_"))}
    env["PYTHONPATH"] = ROOT
    r = subprocess.run([sys.executable, "-c", _GPU_CHECK_RUNNER, json.dumps(jobs)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    codes = json.loads(r.stdout.strip().splitlines()[-1])
    return {os.path.basename(script): (codes[script], open(out, encoding="utf-8", errors="replace").read())
            for script, _args, out in jobs}


@pytest.mark.parametrize("script", sorted(GPU_ONLY))
def test_gpu_script_reaches_its_gpu_check(script, request):
    if _has_gpu():
        pytest.skip("with a GPU this is the full benchmark (benchmarks/run_device.sh runs it)")
    code, out = request.getfixturevalue("gpu_check_runs")[script]
    assert code == 2, out[-3000:]
    assert "CUDA GPU" in out
