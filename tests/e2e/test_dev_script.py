"""``./dev`` (the README's two commands): its decisions, checked fast with stand-ins (which torch for which
machine, what a rerun skips, what ``./dev test`` runs), and (slow) the real thing: ``./dev setup`` on a fresh
copy of the checkout makes its venv, installs torch and the project, runs the examples and ``newt check``, a
rerun skips all of it in seconds, and ``./dev test ARGS`` runs pytest in that venv."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_dev():
    loader = importlib.machinery.SourceFileLoader("newt_dev_script", str(REPO / "dev"))
    spec = importlib.util.spec_from_loader("newt_dev_script", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@pytest.fixture
def dev(monkeypatch):
    mod = _load_dev()
    monkeypatch.delenv("NEWT_TORCH", raising=False)
    monkeypatch.delenv("NEWT_TORCH_INDEX", raising=False)
    return mod


class _FakeVenv:
    def __init__(self, tmp_path, versions):
        self.path = tmp_path
        self._versions = versions
        self.installs: list[tuple] = []
        (tmp_path / "bin").mkdir(exist_ok=True)
        self.bin = tmp_path / "bin"
        self.python = self.bin / "python"

    def versions(self, *dists):
        return {d: self._versions.get(d) for d in dists}

    def exe(self, name):
        return self.bin / name


def test_torch_for_the_machine(dev, tmp_path, monkeypatch):
    v = _FakeVenv(tmp_path, {})
    monkeypatch.setattr(dev.sys, "platform", "linux")
    # no GPU: the CPU build, from PyTorch's CPU index where it can be reached, else the configured index
    monkeypatch.setattr(dev, "reachable", lambda url, timeout=3.0: True)
    assert dev.torch_install_args(v, []) == ["torch==2.13.0", "--extra-index-url", dev.TORCH_CPU_INDEX]
    monkeypatch.setattr(dev, "reachable", lambda url, timeout=3.0: False)
    assert dev.torch_install_args(v, []) == ["torch==2.13.0"]
    # a GPU: PyPI's (CUDA) build
    assert dev.torch_install_args(v, ["GPU 0: NVIDIA H100"]) == ["torch==2.13.0"]
    # another version or index on request
    monkeypatch.setenv("NEWT_TORCH", "torch==2.11.0")
    monkeypatch.setenv("NEWT_TORCH_INDEX", "https://example.invalid/simple")
    assert dev.torch_install_args(v, []) == ["torch==2.11.0", "--index-url", "https://example.invalid/simple"]
    monkeypatch.delenv("NEWT_TORCH")
    monkeypatch.delenv("NEWT_TORCH_INDEX")
    # one that fits is kept: >= 2.4, and a CUDA build where there is a GPU
    assert dev.torch_install_args(_FakeVenv(tmp_path, {"torch": "2.11.0+cpu"}), []) is None
    assert dev.torch_install_args(_FakeVenv(tmp_path, {"torch": "2.13.0"}), ["GPU 0: x"]) is None
    assert dev.torch_install_args(_FakeVenv(tmp_path, {"torch": "2.13.0+cpu"}), ["GPU 0: x"]) == ["torch==2.13.0"]
    assert dev.torch_install_args(_FakeVenv(tmp_path, {"torch": "2.3.1"}), []) == ["torch==2.13.0"]


def test_the_project_install_is_redone_only_when_pyproject_changes(dev, tmp_path):
    v = dev.Venv(tmp_path / "venv")
    (v.bin).mkdir(parents=True)
    v.versions = lambda *d: {"newt": "0.1.0"}
    v.exe("newt-lsp").write_text("")
    assert not dev.project_installed(v)  # no stamp yet
    v.write_stamp(project=dev.pyproject_key(), repo=str(dev.REPO))
    assert dev.project_installed(v)
    v.write_stamp(project="0" * 16)  # pyproject.toml changed since
    assert not dev.project_installed(v)
    v.write_stamp(project=dev.pyproject_key(), repo="/another/checkout")
    assert not dev.project_installed(v)


def test_the_examples_rerun_only_when_a_source_changes(dev, tmp_path, monkeypatch, capsys):
    v = dev.Venv(tmp_path / "venv")
    v.path.mkdir()
    ran = []

    class _Done:
        returncode = 0
        stdout = "ok: matches torch\n"
        stderr = ""

    monkeypatch.setattr(dev, "run", lambda cmd, **kw: ran.append(cmd[1]) or _Done())
    monkeypatch.setattr(dev, "sources_key", lambda venv, gpus, torch: "k1")
    assert dev.run_examples(v, [], "2.13.0", again=False)
    assert len(ran) == len(dev.examples()) >= 13
    ran.clear()
    assert dev.run_examples(v, [], "2.13.0", again=False) and ran == []
    assert "matches torch" in capsys.readouterr().out
    assert dev.run_examples(v, [], "2.13.0", again=True) and len(ran) == len(dev.examples())
    ran.clear()
    monkeypatch.setattr(dev, "sources_key", lambda venv, gpus, torch: "k2")
    assert dev.run_examples(v, [], "2.13.0", again=False) and len(ran) == len(dev.examples())


def test_the_sources_key_follows_the_sources(dev, tmp_path):
    v = dev.Venv(tmp_path / "venv")
    k = dev.sources_key(v, [], "2.13.0")
    assert k == dev.sources_key(v, [], "2.13.0")
    assert k != dev.sources_key(v, ["GPU 0: x"], "2.13.0") != dev.sources_key(v, [], "2.11.0")


def test_dev_test_runs_everything_but_the_e2e_in_parallel_then_the_e2e(dev, monkeypatch, tmp_path):
    calls = []

    class _Ok:
        returncode = 0

    monkeypatch.setattr(dev, "setup_env", lambda venv: ([], "2.13.0"))
    monkeypatch.setattr(dev, "run", lambda cmd, **kw: calls.append([str(c) for c in cmd]) or _Ok())
    monkeypatch.setenv("NEWT_VENV", str(tmp_path / "v"))
    assert dev.main(["test"]) == 0
    assert [c[3:] for c in calls] == [["-m", "not e2e and not own_process", "-q"],
                                      ["-m", "own_process", "-q", "-n", "0", "tests/dropin"],
                                      ["-m", "e2e", "-q", "-n", "0", "tests/e2e"]]
    assert all(c[:3] == [str(tmp_path / "v" / "bin" / "python"), "-m", "pytest"] for c in calls)
    calls.clear()
    assert dev.main(["test", "tests/runtime", "-x"]) == 0
    assert [c[3:] for c in calls] == [["tests/runtime", "-x"]]
    calls.clear()
    assert dev.main(["test", "--fast"]) == 0
    assert [c[3:] for c in calls] == [["-q"]]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_dev_setup_on_a_fresh_copy_then_a_rerun(tmp_path):
    """The README's first command where nothing is set up: a copy of the checkout (what git sees), no venv.
    Installs from the configured package index (on the development machines a local wheel folder)."""
    src = tmp_path / "newt"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NEWT_VENV", "NEWT_TORCH", "NEWT_TORCH_INDEX")
           and not k.startswith(("NEWT_INTERPRET", "PYTEST"))}
    py = shutil.which("python3") or sys.executable
    t = time.monotonic()
    r = subprocess.run([py, str(src / "dev"), "setup"], cwd=src, env=env, capture_output=True, text=True,
                       timeout=1700)
    first = time.monotonic() - t
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert "creating the virtual environment" in out and "installing torch and this project" in out, out[-3000:]
    assert len(re.findall(r"^  examples/\S+\.py \([\d.]+s\): ", r.stdout, re.M)) == 13, r.stdout[-4000:]
    # newt check's own summary line (one analysis for the editor and the command line)
    assert "checked 13 files" in r.stdout and "0 errors" in r.stdout and "newt-lsp" in r.stdout, r.stdout[-2000:]
    venv = src / ".venv"
    assert (venv / "bin" / "newt-lsp").exists() and (venv / "bin" / "newt").exists()
    # the rerun skips what is done: seconds, nothing installed, the examples' output recalled
    t = time.monotonic()
    r = subprocess.run([py, str(src / "dev"), "setup"], cwd=src, env=env, capture_output=True, text=True,
                       timeout=600)
    again = time.monotonic() - t
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "installing" not in r.stdout and ": installed" in r.stdout and "passed with these sources" in r.stdout
    assert again < min(60.0, first / 3), (again, first)
    # the second command's pass-through runs pytest in that venv
    r = subprocess.run([py, str(src / "dev"), "test", "tests/test_layers.py", "-q", "-n", "0",
                        "-p", "no:cacheprovider"], cwd=src, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
