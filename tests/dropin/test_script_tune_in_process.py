"""An autotuned kernel of a *script* compiles in the main process, never in the tuning workers (issue 28).

A worker finds a kernel by loading its module.  A script's top level is the program itself: Triton's tutorial 03
(`03-matrix-multiplication.py`, unmodified through the drop-in) runs its matmul, its checks and its whole
benchmark at the top level, so each of the 16 configs' workers ran all that again; on the H100 (2026-12-07) every
config came back "compiling took longer than 120 s" and the tutorial stopped with "no autotune config could run".
Scripts (run as ``__main__``, or loaded under a name that does not import them, as a harness does) now compile
in threads of their own process; a module ``import`` finds keeps its workers."""

from __future__ import annotations

import sys
import textwrap
import types

import pytest

from newt.tune.tasks import KernelRef, in_importable_module


def test_a_script_kernel_is_not_in_an_importable_module(tmp_path):
    f = tmp_path / "tut_like.py"
    f.write_text("def k():\n    return 1\n")
    for name in ("__main__", "tutorial_03"):  # run as a script; loaded by a harness under a made-up name
        mod = types.ModuleType(name)
        mod.__file__ = str(f)
        exec(compile(f.read_text(), str(f), "exec"), mod.__dict__)
        saved = sys.modules.get(name)
        sys.modules[name] = mod
        try:
            assert not in_importable_module(mod.k)
            # (an explicit caller may still ship a script's kernel: benchmarks/autotune_scaling.py does, its own
            # top level guarded by ``if __name__ == "__main__":``)
            assert name != "__main__" or KernelRef.of(mod.k) is not None
        finally:
            if saved is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = saved


def test_an_importable_module_keeps_its_workers(tmp_path, monkeypatch):
    (tmp_path / "kmod_s15.py").write_text("def k():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import kmod_s15
    try:
        ref = KernelRef.of(kmod_s15.k)
        assert in_importable_module(kmod_s15.k)
        assert ref is not None and ref.module == "kmod_s15" and ref.file == str(tmp_path / "kmod_s15.py")
    finally:
        sys.modules.pop("kmod_s15", None)


def _module_from(path, name, text):
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    path.write_text(text)
    sys.modules[name] = mod
    exec(compile(text, str(path), "exec"), mod.__dict__)
    return mod


KERNEL = textwrap.dedent('''
    import newt
    import newt.language as nl

    @newt.autotune(configs=[newt.Config({"BLOCK": b}, num_warps=w) for b in (64, 128, 256, 512) for w in (1, 2)],
                   key=["n"])
    @newt.jit
    def add_one(x_ptr, y_ptr, n, BLOCK: nl.constexpr):
        offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
        m = offs < n
        nl.store(y_ptr + offs, nl.load(x_ptr + offs, mask=m) + 1.0, mask=m)
''')


@pytest.mark.parametrize("name,in_workers", [("__main__", False), ("tutorial_03", False), ("kmod_tune_s15", True)])
def test_which_kernels_the_autotuner_sends_to_workers(tmp_path, monkeypatch, name, in_workers):
    """Eight configs and an executor at hand: a script's kernel compiles in this process (``_precompile``), an
    importable module's in the workers (``compile_stream``)."""
    import torch

    import newt.tune as tune
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = sys.modules.get(name)
    try:
        mod = _module_from(tmp_path / ("kmod_tune_s15.py" if in_workers else "tut_like.py"), name, KERNEL)
        k = mod.add_one
        seen = {"stream": 0, "local": 0}

        def stream(tasks, ex, timeout=None):
            seen["stream"] = len(tasks)
            return iter(())
        monkeypatch.setattr(tune, "compile_stream", stream)
        monkeypatch.setattr(k, "_executor", lambda n: object())
        monkeypatch.setattr(k, "_precompile", lambda cs, a, kw: seen.__setitem__("local", len(cs)))
        x = torch.zeros(1000)
        list(k._compiled(k.configs, (x, x, 1000), {}))
        assert seen == ({"stream": 8, "local": 0} if in_workers else {"stream": 0, "local": 8})
    finally:
        if saved is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved
