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


def _verify_all(path, device: str):
    import newt.harness as nh
    mod = _load(path)
    names = _kernels(path)
    assert names, path
    for name in names:
        report = nh.verify(getattr(mod, name), device, name=name)
        assert report["device"] == ("cuda" if device == "cuda" else "interpreter")
        assert report["ok"], (name, report["message"], [(c["name"], c["message"]) for c in report["cases"]])


@pytest.mark.gpu
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_every_example_kernel_verifies_on_the_gpu(path):
    _verify_all(path, "cuda")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_autotune_runs_on_every_example_kernel(path, device):
    """Autotune (newt.harness.autotune, what the editor's command runs) on every kernel of every example:
    @newt.autotune kernels over their configs, plain kernels over their launch options, deuteron kernels over
    their own search; every config timed and checked against the reference, a best one chosen."""
    import newt.harness as nh
    mod = _load(path)
    for name in _kernels(path):
        report = nh.autotune(getattr(mod, name), device, name=name)
        assert report["device"] == ("cuda" if device == "cuda" else "interpreter")
        assert report["best"] is not None, (name, report.get("message"))
        assert report["results"] and all(r.get("error") is None for r in report["results"]), (name, report["results"])
        # a config stopped early because a first estimate already lost (deuteron's "hopeless") is not an error
        assert all((r["ms"] is None) == bool(r.get("pruned")) for r in report["results"]), (name, report["results"])


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


KERNEL_NO_REFERENCE = '''import torch
import newt
import newt.harness as nh
import newt.language as nl


@newt.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@nh.example(double_kernel)
def small(device):
    x = torch.randn(100, device=device)
    return nh.Case(grid=(1,), args=(x, torch.empty_like(x), 100), kwargs={"BLOCK": 128})
'''


def test_a_missing_reference_is_reported_as_no_reference(tmp_path):
    """Not "FAILED ... max abs err 0": the report says no reference, and what to add."""
    import newt.harness as nh
    from lsp_server.worker import mark_missing_reference
    p = tmp_path / "no_reference_kernel.py"
    p.write_text(KERNEL_NO_REFERENCE)
    mod = _load_path(p)
    report = mark_missing_reference(nh.verify(mod.double_kernel, "cpu", name="double_kernel"))
    assert not report["ok"] and report["reason"] == "no_reference"
    assert report["message"].startswith("no reference for double_kernel: 1 of 1 example case(s)")
    assert "@newt.harness.reference(double_kernel)" in report["message"]
    assert all(c["max_abs_err"] is None for c in report["cases"])


def test_the_inserted_example_and_reference_say_what_is_left_to_write(tmp_path):
    """The light bulb's example and reference, inserted into a file without them: Verify runs the example and
    reports that the reference is still to be written (not a comparison with nothing)."""
    from lsprotocol import types as lsp

    import newt.harness as nh
    from lsp_server.features import code_actions
    from lsp_server.positions import LineIndex
    text = KERNEL_NO_REFERENCE[:KERNEL_NO_REFERENCE.index("@nh.example")]
    p = tmp_path / "inserted_kernel.py"
    a = analyze(text, p.as_uri())
    line = a.kernel_named("double_kernel").span.line - 1
    act = next(x for x in code_actions(a, lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)))
               if x.title.startswith("Add a newt.harness example and reference"))
    idx = LineIndex(text)
    for e in sorted(act.edit.changes[p.as_uri()], key=lambda e: idx.offset(e.range.start), reverse=True):
        text = text[:idx.offset(e.range.start)] + e.new_text + text[idx.offset(e.range.end):]
    p.write_text(text)
    mod = _load_path(p)
    report = nh.verify(mod.double_kernel, "cpu", name="double_kernel")
    assert not report["ok"]
    assert report["cases"] and all(c["message"].startswith("the reference failed: NotImplementedError")
                                   for c in report["cases"]), report
    assert "return {'out_ptr': ...}" in report["cases"][0]["message"]


def _load_path(p):
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[p.stem] = mod
    spec.loader.exec_module(mod)
    return mod
