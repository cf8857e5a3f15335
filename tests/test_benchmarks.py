"""Every benchmark script gets a CPU smoke run at tiny sizes, so no refactor breaks one unnoticed.

Scripts with a CPU path run it (small sizes, no result files written); scripts that time the GPU run
until their GPU check and must exit 2 with "needs a CUDA GPU" (their argument parsing and imports run).
On a machine with a GPU those are skipped: there they are the real benchmarks (minutes each), run by
benchmarks/run_device.sh."""

from __future__ import annotations

import glob
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


@pytest.mark.parametrize("script", sorted(GPU_ONLY))
def test_gpu_script_reaches_its_gpu_check(script, tmp_path):
    if _has_gpu():
        pytest.skip("with a GPU this is the full benchmark (benchmarks/run_device.sh runs it)")
    r = _run(script, GPU_ONLY[script], tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out[-3000:]
    assert "CUDA GPU" in out
