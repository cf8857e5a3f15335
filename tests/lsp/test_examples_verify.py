"""Every shipped example shows every command (issue 23): each kernel of examples/*.py and examples/deuteron/*
declares a ``newt.harness`` example and a reference, and Verify (``newt.harness.verify``, what the editor's
command runs in its worker) passes on each, here on the interpreter (no GPU)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from lsp_server.analysis import analyze

from .conftest import ROOT

pytestmark = pytest.mark.timeout(1200)

EXAMPLES = sorted((ROOT / "examples").glob("*.py")) + sorted((ROOT / "examples" / "deuteron").glob("*.py"))


def _load(path):
    name = "newt_example_" + "_".join(path.relative_to(ROOT).with_suffix("").parts)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _kernels(path) -> list[str]:
    a = analyze(path.read_text(encoding="utf-8"), path.as_uri())
    return [ka.name for ka in a.kernels if not ka.helper]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_every_example_kernel_has_an_example_and_a_reference_and_verifies(path):
    import newt.harness as nh
    mod = _load(path)
    names = _kernels(path)
    assert names, path
    for name in names:
        kernel = getattr(mod, name)
        assert nh.examples_for(kernel), f"{path.name}: {name} declares no @newt.harness.example"
        assert nh.reference_for(kernel) is not None, f"{path.name}: {name} declares no @newt.harness.reference"
        report = nh.verify(kernel, "cpu", name=name)
        assert report["device"] == "interpreter"
        assert report["ok"], (name, report["message"], [(c["name"], c["message"]) for c in report["cases"]])
        assert all(c["max_abs_err"] is not None for c in report["cases"])
