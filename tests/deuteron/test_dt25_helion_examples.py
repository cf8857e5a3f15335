"""Issue 25 (dt25): benchmarks/helion_examples.py's GPU and real-Helion modes, without a GPU or Helion.

The CPU mode keeps its smoke run (tests/test_benchmarks.py::test_cpu_smoke_run[helion_examples.py]); here: the
drivers that name the CPU take ``DEVICE`` on the GPU, ``--device cuda`` refuses to run without one, results are
written after every file, and ``--compare`` says which kernels Helion runs that deuteron does not.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "helion_examples.py"


@pytest.fixture(scope="module")
def hx():
    spec = importlib.util.spec_from_file_location("_dt25_helion_examples", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_gpu_drivers_use_the_examples_device(hx):
    cpu = hx.drivers_for("flex_attention.py", "cpu")
    gpu = hx.drivers_for("flex_attention.py", "cuda")
    assert all("device='cpu'" in s for s in cpu)
    assert len(gpu) == len(cpu) and not any("'cpu'" in s for s in gpu)
    assert all("device=DEVICE" in s for s in gpu)
    assert hx.drivers_for("add.py", "cuda") == hx.drivers_for("add.py", "cpu")
    assert hx.drivers_for("no_such.py", "cuda") == ["main()"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU this runs the examples")
def test_cuda_mode_needs_a_gpu(hx, tmp_path, capsys):
    (tmp_path / "examples").mkdir()
    assert hx.main([str(tmp_path), "--device", "cuda"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out


def _result(impl, kernels):
    return {"impl": impl, "env": {"impl": impl, "device": "cuda", "device_name": "H100", "helion": "1.4.0"},
            "passed": sum(1 for v in kernels.values() if v[1] is True),
            "counted": sum(1 for v in kernels.values() if v[1] is not None),
            "results": [{"file": f, "kernels": {k: {"ok": ok, "cause": None if ok else "DeuteronError: D002 x"}}}
                        for k, (f, ok) in kernels.items()]}


def test_compare_names_what_helion_runs_and_deuteron_does_not(hx, tmp_path):
    d = tmp_path / "d.json"
    h = tmp_path / "h.json"
    d.write_text(json.dumps(_result("deuteron", {"add": ("add.py", True), "jsd_forward": ("jsd.py", False),
                                                 "softmax": ("softmax.py", True)})))
    h.write_text(json.dumps(_result("helion", {"add": ("add.py", True), "jsd_forward": ("jsd.py", True),
                                               "softmax": ("softmax.py", False)})))
    md = hx.compare([str(d), str(h)])
    assert "**Of the 2 kernels Helion runs correctly, deuteron runs 1.**" in md
    assert "Helion runs them, deuteron does not: jsd.py:jsd_forward" in md
    assert "deuteron runs them, Helion does not: softmax.py:softmax" in md
    assert "| jsd.py | jsd_forward | ok | FAIL: DeuteronError: D002 x |" in md
    with pytest.raises(SystemExit):
        hx.compare([str(d), str(d)])


def test_results_are_written_after_every_file(hx, tmp_path, monkeypatch):
    """A run cut short by its time limit leaves the files done so far in --json (``partial``)."""
    (tmp_path / "examples").mkdir()
    for name in ("a.py", "b.py"):
        (tmp_path / "examples" / name).write_text("x = 1\n")
    out = tmp_path / "r.json"
    seen = []

    def fake_run_file(name, src, path, tmp, timeout, device="cpu"):
        if seen:  # the second file: the first one's result is on disk already
            r = json.loads(out.read_text())
            assert r["partial"] and [x["file"] for x in r["results"]] == ["a.py"]
        seen.append(name)
        return {"file": name, "seconds": 0.0, "kernels": {name[:-3]: {"ok": True, "cause": None}}, "checks": [],
                "traces": []}
    monkeypatch.setenv("DEUTERON_AUTOTUNE_EFFORT", "none")  # (main sets it when unset)
    monkeypatch.setattr(hx, "run_file", fake_run_file)
    monkeypatch.setattr(hx, "instrument", lambda *a: None)
    monkeypatch.setattr(hx, "watch_kernels", lambda *a: None)
    assert hx.main([str(tmp_path), "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert seen == ["a.py", "b.py"] and r["passed"] == 2 and r["partial"] is False and r["impl"] == "deuteron"


_EXAMPLE = '''
import torch
import helion
from helion._testing import DEVICE, run_example
import helion.language as hl


@helion.kernel()
def double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2
    return out


def main() -> None:
    x = torch.randn(100, device=DEVICE)
    run_example(double, lambda x: x * 2, (x,))
'''


def _run_compile(tmp_path, target):
    import os
    import subprocess
    (tmp_path / "examples").mkdir(exist_ok=True)
    (tmp_path / "examples" / "twice.py").write_text(_EXAMPLE)
    out = tmp_path / f"{target}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_"))}
    env["PYTHONPATH"] = str(BENCH.parents[1])
    env["DEUTERON_CACHE_DIR"] = str(tmp_path / "dcache")
    env["NEWT_CACHE_DIR"] = str(tmp_path / "ncache")
    p = subprocess.run([sys.executable, str(BENCH), str(tmp_path), "--compile", target, "--json", str(out)],
                       capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(out.read_text())


def test_compile_mode_compiles_each_kernel_and_blames_a_failure(tmp_path):
    from dt_helpers import needs_nvrtc
    if needs_nvrtc.args[0]:
        pytest.skip("NVRTC (cuda-bindings) is not installed")
    r = _run_compile(tmp_path, "sm_90a")
    assert r["passed"] == 1 and r["env"]["compiled_for"]["kernels"] == 1
    bad = _run_compile(tmp_path, "sm_1")  # no such target: the interpreter's pass does not count
    ks = bad["results"][0]["kernels"]
    assert bad["passed"] == 0 and ks["double"]["ok"] is False
    assert ks["double"]["cause"].startswith("CompileCheckError: sm_N: ")


_OK = _EXAMPLE
_CRASH = _EXAMPLE.replace("    run_example(double", "    import os\n    os._exit(7)\n    run_example(double")
_HANG = _EXAMPLE.replace("    run_example(double", "    import signal, time\n    signal.pthread_sigmask("
                         "signal.SIG_BLOCK, {signal.SIGALRM})\n    time.sleep(120)\n    run_example(double")


def test_supervised_run_survives_a_crash_and_a_hang(tmp_path):
    """--supervise (the GPU default): a file whose process dies, and one that never returns (the per-check
    alarm blocked, as in a GPU kernel that never finishes), are blamed with that cause; the files after them
    still run, each in a fresh child."""
    import os
    import subprocess
    ex = tmp_path / "examples"
    ex.mkdir()
    for name, text in (("a_ok.py", _OK), ("b_crash.py", _CRASH), ("c_hang.py", _HANG), ("d_ok.py", _OK)):
        (ex / name).write_text(text)
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_"))}
    env.update(PYTHONPATH=str(BENCH.parents[1]), DEUTERON_CACHE_DIR=str(tmp_path / "dc"),
               NEWT_CACHE_DIR=str(tmp_path / "nc"), HELION_EXAMPLES_HANG_MARGIN="3")
    p = subprocess.run([sys.executable, str(BENCH), str(tmp_path), "--supervise", "--timeout", "2", "--json",
                        str(out)], capture_output=True, text=True, timeout=280, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(out.read_text())
    by = {x["file"]: x["kernels"]["double"] for x in r["results"]}
    assert by["a_ok.py"]["ok"] and by["d_ok.py"]["ok"]
    assert by["b_crash.py"]["ok"] is False and "exit status 7" in by["b_crash.py"]["cause"]
    assert by["c_hang.py"]["ok"] is False and "no progress" in by["c_hang.py"]["cause"]
    assert r["passed"] == 2 and r["counted"] == 4


def test_supervised_run_stopped_by_its_time_limit_keeps_what_it_did(tmp_path):
    """run_device.sh stops the run with ``timeout`` (SIGTERM to the process group): the files finished before
    are in --json already (``partial``)."""
    import os
    import signal
    import subprocess
    import time
    ex = tmp_path / "examples"
    ex.mkdir()
    (ex / "a_ok.py").write_text(_OK)
    (ex / "b_hang.py").write_text(_HANG)
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_"))}
    env.update(PYTHONPATH=str(BENCH.parents[1]), DEUTERON_CACHE_DIR=str(tmp_path / "dc"),
               NEWT_CACHE_DIR=str(tmp_path / "nc"))
    p = subprocess.Popen([sys.executable, str(BENCH), str(tmp_path), "--supervise", "--timeout", "60", "--json",
                          str(out)], env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 200
        while time.time() < deadline and not (out.exists() and "a_ok.py" in out.read_text()):
            time.sleep(0.5)
        time.sleep(1)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=60)
    r = json.loads(out.read_text())
    assert r["partial"] is True and [x["file"] for x in r["results"]] == ["a_ok.py"] and r["passed"] == 1
