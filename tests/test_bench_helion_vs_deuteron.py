"""benchmarks/helion_vs_deuteron.py, the one device call of issue 25, run end to end on the CPU (``--smoke``).

The examples folder is a Helion-style file written here; the "real Helion" is a stand-in package on a site
folder of its own (a ``kernel`` decorator that returns the function, ``hl.tile`` one tile over the whole
tensor), so the test checks the orchestration: Helion's processes import the site's package and only they see
it, deuteron's run the same file through the drop-in, the tuned configs travel to the timing processes, the
rounds are interleaved, the deadline skips what does not fit, and the table and its geomean come out right.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "helion_vs_deuteron.py")

ADD = '''\
import torch

import helion
import helion.language as hl


@helion.kernel()
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out
'''

FAKE_HELION = {
    "helion/__init__.py": '''\
        """A stand-in for the real package: kernels run as plain torch code."""
        from . import language

        __version__ = "0.0-standin"


        def kernel(fn=None, **options):
            return (lambda f: f) if fn is None else fn
    ''',
    "helion/language.py": '''\
        def tile(sizes):
            """One tile covering every index."""
            if isinstance(sizes, int):
                yield slice(0, sizes)
            else:
                yield tuple(slice(0, int(s)) for s in sizes)
    ''',
}


def _run(tmp_path, *args, timeout=600):
    ex = tmp_path / "examples"
    ex.mkdir(exist_ok=True)
    (ex / "add.py").write_text(ADD)
    site = tmp_path / "site"
    for rel, text in FAKE_HELION.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(textwrap.dedent(text))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_", "HELION_"))}
    env["PYTHONPATH"] = ROOT
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--examples", str(ex), "--helion-site", str(site),
                        "--out", str(out), "--only", "add", *args], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r, json.loads((out / "helion_vs_deuteron.json").read_text()), (out / "helion_vs_deuteron.md").read_text(), \
        site


def test_smoke_run_end_to_end(tmp_path):
    r, data, md, site = _run(tmp_path, "--full", "add", "--parallel", "2", "--rounds", "3", "--budget", "500")
    tunes = data["tunes"]
    # Helion's process imported the site's package; deuteron's processes the drop-in, never the site
    assert tunes["helion quick add"]["helion_module"].startswith(str(site)), tunes["helion quick add"]
    for key in ("deuteron quick add", "deuteron full add"):
        assert tunes[key].get("ok") is True, tunes[key]
        assert not tunes[key]["helion_module"].startswith(str(site)), tunes[key]
    assert tunes["helion quick add"]["ok"] is True
    # the timing processes loaded every tuned kernel, and each was timed once a round
    for g in ("helion quick", "deuteron quick", "deuteron full"):
        assert data["ready"][g]["add"]["ok"] is True, data["ready"]
        assert data["ready"][g]["_cache"] == "hit", data["ready"]  # the tuned config came with it
        assert len(data["times"][f"{g} add"]) == 3, data["times"]
    row = data["rows"][0]
    assert row["kernel"] == "add" and row["ratio"] == pytest.approx(row["helion_ms"] / row["deuteron_ms"])
    assert row["checks"] == "Helion ok, deuteron ok"
    assert "Helion 0.0-standin" in data["env"]
    assert "| add |" in md and f"**{row['ratio']:.2f}x**" in md  # one kernel: the geomean is its ratio
    assert [n for n in data["skipped"] if "full) effort: not attempted" not in n] == [], data["skipped"]


def test_what_does_not_fit_the_budget_is_skipped_and_said(tmp_path):
    r, data, md, _ = _run(tmp_path, "--full", "add", "--budget", "1", timeout=300)
    assert data["tunes"] == {}
    assert "deuteron quick add: did not fit the budget" in data["skipped"]
    assert "Helion quick add: did not fit the budget" in data["skipped"]
    assert "deuteron full add: did not fit the budget" in data["skipped"]
    assert "Not run, or to note: " in md and "No kernel ran correctly on both" in md


def test_stopped_by_timeout_it_still_reports(tmp_path):
    """run_device.sh runs it under ``timeout``: SIGTERM stops the tunes under way and the report is written
    with what was measured."""
    ex = tmp_path / "examples"
    ex.mkdir()
    (ex / "add.py").write_text(ADD)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_", "HELION_"))}
    env["PYTHONPATH"] = ROOT
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, SCRIPT, "--smoke", "--no-helion", "--examples", str(ex), "--out", str(out),
                          "--only", "add", "--budget", "900"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if line.startswith("phase 1"):
            break
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    rest = p.communicate(timeout=300)[0]
    assert p.returncode == 0, rest[-3000:]
    md = (out / "helion_vs_deuteron.md").read_text()
    assert "the run was stopped after" in md
    assert "| add |" in md


def _module():
    spec = importlib.util.spec_from_file_location("_hvd_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks the module up
    spec.loader.exec_module(mod)
    return mod


def test_table_geomean_counts_only_rows_both_ran():
    mod = _module()
    rows = [{"kernel": k, "shape": "s", "helion_ms": h, "deuteron_ms": d, "full_ms": None, "full_tune_s": None,
             "ratio": r, "helion_tune_s": 80.0, "deuteron_tune_s": 5.0, "checks": "Helion ok, deuteron ok"}
            for k, h, d, r in (("a", 2.0, 1.0, 2.0), ("b", 1.0, 2.0, 0.5), ("c", 1.0, 1.0, None),
                               ("d", 4.0, 1.0, 4.0))]
    md = mod.table(rows, "env", [], 4)
    assert "over the 3 kernels both ran correctly: **1.59x**" in md  # (2 * 0.5 * 4) ** (1/3)
    assert "| c | s | 1.0000 | 1.0000 | —x |" in md


@pytest.mark.skipif(not os.environ.get("HELION_EXAMPLES"), reason="set HELION_EXAMPLES to Helion's examples/ "
                    "folder (pytorch/helion at ef091f41) to check every kernel's inputs against the real files")
def test_every_case_runs_on_deuteron_with_its_inputs(tmp_path):
    """Each kernel of the table, through the drop-in on the interpreter at tiny shapes, matches its torch
    reference: the inputs fit the example's signature and the reference is the kernel's meaning."""
    mod = _module()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWT_", "DEUTERON_", "HELION_"))}
    env["PYTHONPATH"] = ROOT
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--no-helion", "--examples", os.environ["HELION_EXAMPLES"],
                        "--out", str(out), "--only", ",".join(mod.CASES), "--full", "", "--budget", "3000"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=3000)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads((out / "helion_vs_deuteron.json").read_text())
    bad = {k: v for k, v in data["tunes"].items() if not v.get("ok")}
    assert not bad and len(data["tunes"]) == len(mod.CASES), bad
