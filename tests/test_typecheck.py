"""mypy is part of the test run over newt/: the configuration (and the list of modules not yet clean)
lives in pyproject.toml under [tool.mypy]."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mypy_is_clean():
    import importlib.util
    assert importlib.util.find_spec("mypy") is not None, "mypy is a dev dependency: pip install -e '.[dev]'"
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
