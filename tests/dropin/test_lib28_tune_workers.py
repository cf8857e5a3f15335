"""The autotuner's compile workers run a drop-in project's kernels too (issue 28, attorch's conv2d).

A Triton library's autotuned kernel with 8 or more configs is compiled in newt's worker processes.  Those are
fresh interpreters: unless the drop-in mode is turned on there as well, the worker's ``import triton`` (in the
library's kernel module) finds no module -- or Triton itself where it is installed -- every config fails in
the worker, and the main process compiles them all again, one after another (attorch's 16-config conv ran past
the 120 s per-case limit on the H100 that way, where Triton took 55 s)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from newt.runtime import compiler

# install(capability=(9, 0)) emulates 9.0 only where there is no GPU (with one, a worker takes its target's)
_EMULATED = "1" if torch.cuda.is_available() else "9.0"

KERNELS = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    # as attorch's conv_kernels.py: a config list built from the GPU's capability while the module is imported
    STAGES = 2 if torch.cuda.get_device_capability()[0] < 8 else 3


    @triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w, num_stages=STAGES)
                              for b in (64, 128, 256, 512) for w in (1, 2)], key=["n"])
    @triton.jit
    def add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)
''')


@pytest.fixture
def project(tmp_path, monkeypatch):
    pkg = tmp_path / "lib28proj"
    pkg.mkdir()
    (pkg / "lib28_kernels.py").write_text(KERNELS)
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "cache"))
    compiler.clear_memory_cache()
    yield pkg
    sys.modules.pop("lib28_kernels", None)
    compiler.clear_memory_cache()


def test_compile_workers_turn_the_dropin_on(dropin, project):
    """Every config of a drop-in kernel compiles in the workers (status ok); before, each came back as an
    error (``ModuleNotFoundError: No module named 'triton'``) and was compiled again in the main process."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.tune import AdaptiveTimeout, LocalExecutor, compile_spec_for, compile_stream

    dropin.install(capability=(9, 0))  # (with no GPU: what the module's import asks torch)
    assert os.environ.get(dropin.ENV_VAR) == _EMULATED  # what the workers inherit
    import lib28_kernels as K

    x, y = torch.empty(1000), torch.empty(1000)
    tasks = [compile_spec_for(K.add_one.fn, (x, y, 1000), dict(c.kwargs), c.num_warps, c.num_stages, target="sm_90a")
             for c in K.add_one.configs[:2]]
    assert all(t is not None for t in tasks)
    ex = LocalExecutor(compile_workers=1)
    try:
        res = dict(compile_stream(tasks, ex, timeout=AdaptiveTimeout()))
    finally:
        ex.close()
    assert sorted(res) == [0, 1]
    for i, r in res.items():
        assert r["status"] == "ok", (i, r.get("message"))
        assert r["key"] == tasks[i].key  # the main process's specialization: installed, not compiled again


def _child(code: str, **env) -> str:
    e = {k: v for k, v in os.environ.items() if k != "NEWT_DROPIN"}
    e.update(env)
    e["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout.strip()


PROBE = ("from newt.dropin import install_inherited, is_installed\n"
         "on = install_inherited({target!r})\n"
         "import torch\n"
         "cap = torch.cuda.get_device_capability() if on and not torch.cuda.is_available() else None\n"
         "import importlib.util\n"
         "print(on, is_installed(), cap, on and __import__('triton').__name__ == 'triton' "
         "and hasattr(__import__('triton'), '__newt_dropin__'))")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the emulated capability is for machines without a GPU")
def test_install_inherited_follows_the_parent():
    # the parent emulated 8.0: the worker emulates it too, whatever its target
    assert _child(PROBE.format(target="sm_90a"), NEWT_DROPIN="8.0") == "True True (8, 0) True"
    # the parent had a GPU (or no emulation): the compile target's capability
    assert _child(PROBE.format(target="sm_90a"), NEWT_DROPIN="1") == "True True (9, 0) True"
    # the parent was not in drop-in mode: nothing changes
    assert _child(PROBE.format(target="sm_90a")) == "False False None False"


def test_uninstall_clears_the_inherited_flag(dropin):
    assert os.environ.get(dropin.ENV_VAR) == "1"
    dropin.uninstall()
    assert dropin.ENV_VAR not in os.environ
    dropin.install(capability=(9, 0))
    assert os.environ.get(dropin.ENV_VAR) == _EMULATED
