"""@jit helpers that live in another module of the user's package (``from .utils import helper``): the kernel
runs through the interpreter, a helper's constexpr-annotated parameter takes the run-time block it is given,
and an error inside the helper names the helper's file and line and quotes that file's line."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
import torch

from newt import CompilationError
from newt.runtime.interpret import launch_jit

UTILS = '''
import newt
import newt.language as nl

# lines so that the helper's error is at a line number the kernel file also has


@newt.jit
def scaled_iota(x, offs: nl.constexpr, n: nl.constexpr):
    iota = nl.arange(0, n).to(nl.float32)
    return x * 2 + iota + offs * 0
'''

KERN = '''
import newt
import newt.language as nl

from .utils import scaled_iota


@newt.jit
def kernel(x_ptr, BLOCK: nl.constexpr, N: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    out = scaled_iota(x, offs, N)
    nl.store(x_ptr + offs, out)
'''


@pytest.fixture
def pkg(tmp_path, monkeypatch):
    name = f"tfront_pkg_{tmp_path.name.replace('-', '_')}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "utils.py").write_text(textwrap.dedent(UTILS).lstrip("\n"))
    (root / "kern.py").write_text(textwrap.dedent(KERN).lstrip("\n"))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module(f"{name}.kern")
    yield mod, root
    for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[m]


def test_a_helper_imported_by_relative_import_runs(pkg):
    mod, _ = pkg
    x = torch.arange(16, dtype=torch.float32)
    launch_jit(mod.kernel, (1,), (x,), {"BLOCK": 16, "N": 16})
    assert x.tolist() == [3.0 * i for i in range(16)]


def test_an_error_in_the_helper_quotes_the_helpers_file(pkg):
    mod, root = pkg
    x = torch.zeros(16)
    with pytest.raises(CompilationError) as ei:
        launch_jit(mod.kernel, (1,), (x,), {"BLOCK": 16, "N": 12})
    text = str(ei.value)
    utils_lines = (root / "utils.py").read_text().splitlines()
    where = next(i for i, ln in enumerate(utils_lines, 1) if "nl.arange(0, n)" in ln)
    assert f"{root / 'utils.py'}:{where}:" in text, text
    assert "iota = nl.arange(0, n)" in text, text          # the helper's own line
    kern_line = (root / "kern.py").read_text().splitlines()[where - 1].strip()
    assert kern_line and kern_line not in text, text       # not the kernel file's line of that number
    loc = ei.value.__cause__.location
    assert (loc.file, loc.line) == (str(root / "utils.py"), where)
