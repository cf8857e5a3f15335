"""Defining kernels (jit, autotune, heuristics) loads neither torch nor the CUDA bindings."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_decorating_kernels_is_light(tmp_path):
    script = tmp_path / "light.py"
    script.write_text(textwrap.dedent('''
        import sys
        import newt
        import newt.language as nl

        @newt.autotune([newt.Config({"B": 64})], key=["n"])
        @newt.heuristics({"EVEN": lambda a: a["n"] % 64 == 0})
        @newt.jit
        def k(x_ptr, n, B: nl.constexpr, EVEN: nl.constexpr):
            offs = nl.arange(0, B)
            nl.store(x_ptr + offs, offs, mask=offs < n)

        newt.runtime, newt.compile, newt.testing
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "cuda", "numpy", "triton"})
        print("HEAVY", heavy)
    '''))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout


def test_the_autotuner_names_moved_to_tune_are_still_reachable_from_the_runtime():
    import newt
    import newt.runtime
    from newt.tune import autotuner
    assert newt.runtime.Autotuner is autotuner.Autotuner is newt.Autotuner
    assert newt.runtime.Config is newt.Config is autotuner.Config
    assert newt.runtime.autotune is newt.autotune
    with pytest.raises(AttributeError):
        newt.runtime.no_such_name  # noqa: B018
