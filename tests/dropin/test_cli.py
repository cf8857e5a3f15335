"""``python -m newt.dropin``: a Triton-style script, a pytest suite and a Helion-style file, unmodified, in a
subprocess (no GPU here: the kernels run on the interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.dropin.samples import HELION, SCRIPT, TEST_FILE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _run(args, cwd, extra_env=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NEWT_INTERPRET", None)
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-m", "newt.dropin", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_script(tmp_path):
    (tmp_path / "add.py").write_text(SCRIPT)
    p = _run(["add.py", "--flag", "v"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "max diff 0.0 argv ['--flag', 'v'] version 3.4.0" in p.stdout


def test_pytest_suite(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_relu.py").write_text(TEST_FILE)
    p = _run(["-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"], tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr   # one test is wrong on purpose: pytest's own exit status
    assert "1 failed, 2 passed" in p.stdout


def test_command_and_usage(tmp_path):
    p = _run(["-c", "import triton, sys; print(triton.__version__, sys.argv)", "a"], tmp_path)
    assert p.returncode == 0 and "3.4.0 ['-c', 'a']" in p.stdout
    p = _run([], tmp_path)
    assert p.returncode == 2 and "usage" in p.stdout


def test_capability_flag(tmp_path):
    p = _run(["--capability", "8.0", "-c", "import torch; print(torch.cuda.get_device_capability())"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith("(8, 0)") or "(8, 0)" in p.stdout


def test_helion_file_unmodified(tmp_path):
    (tmp_path / "k.py").write_text(HELION)
    p = _run(["k.py"], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "helion ok helion" in p.stdout
