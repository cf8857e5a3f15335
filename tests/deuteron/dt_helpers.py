"""Helpers of the deuteron tests (a uniquely named module: ``deuteron`` itself must stay importable)."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "deuteron"
MARK = "\u00ab"  # « marks where a diagnostic must start


def locate(src: str):
    """Remove every « and return (clean source, [(line, col), ...]) 1-based."""
    out, marks = [], []
    for i, line in enumerate(src.split("\n"), start=1):
        while MARK in line:
            col = line.index(MARK)
            marks.append((i, col + 1))
            line = line[:col] + line[col + 1:]
        out.append(line)
    return "\n".join(out), marks


HEADER = "import torch\nimport deuteron as dt\n\n\n"


def check(body: str, path: str = "k.py"):
    from newt.frontend import analyze_source
    src, marks = locate(HEADER + textwrap.dedent(body).lstrip("\n"))
    return analyze_source(src, path), marks, src


def write_module(tmp_path, name: str, body: str):
    """A kernel module on disk (deuteron reads kernels' source from their files)."""
    import importlib.util
    p = tmp_path / f"{name}.py"
    p.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    spec = importlib.util.spec_from_file_location(name, str(p))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def raises_at(mod, call, code, line_text, col_text=None, contains=None):
    import pytest

    import newt
    with pytest.raises(newt.CompilationError) as ei:
        call()
    e = ei.value
    d = e.diagnostics[0]
    assert d.code == code, str(e)
    src = open(mod.__file__).read().splitlines()
    line = next(i for i, t in enumerate(src, 1) if line_text in t)
    assert d.span.line == line, str(e)
    if col_text is not None:
        assert d.span.col == src[line - 1].index(col_text) + 1, str(e)
    assert d.file == mod.__file__
    text = str(e)
    assert f"{mod.__file__}:{line}:" in text and "^" in text
    if contains:
        assert contains in d.message, d.message
    return e


def nvrtc_available() -> bool:
    """NVRTC (cuda-bindings) and newt's CUDA backend can be imported: the offline cubin / PTX / SASS tests run."""
    try:
        from cuda.bindings import nvrtc  # noqa: F401
        return hasattr(importlib.import_module("newt.backend.cuda"), "compile_cuda")
    except Exception:
        return False


needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC (cuda-bindings) is not installed")


def compile_config_sm90(kernel, args, cfg):
    """``(metadata, SASS)`` of ``kernel`` bound to ``args`` at ``cfg``, generated and compiled for sm_90a
    through deuteron's host run (no GPU: the launch is only planned)."""
    from deuteron.compile import compile_binary
    from deuteron.hostrun import _HostRun, _runtime_args
    b = kernel._bind(args, {})
    e = kernel._entry(b)
    run = _HostRun(e, e.complete(cfg, where=None), "source")
    run.execute(b)
    (gen, mod, prog, loc), = run.built
    ck = compile_binary(gen, mod, _runtime_args(gen, prog, loc, kernel.fn.__globals__), "sm_90a")
    return ck.metadata, ck.asm["sass"]
