"""newt.harness: the example-input / reference convention, run through the interpreter."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

from .conftest import FIXTURES, ROOT

torch = pytest.importorskip("torch")
nh = pytest.importorskip("newt.harness")


def _interpreter_ready() -> bool:
    try:
        import newt.interpreter as interp
    except Exception:
        return False
    return hasattr(interp, "launch")


needs_interpreter = pytest.mark.skipif(not _interpreter_ready(), reason="newt.interpreter.launch is not there yet")


@pytest.fixture(autouse=True)
def _interpret(monkeypatch, tmp_path):
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "cache"))
    nh.clear()
    yield
    nh.clear()


def _load(path, name=None):
    spec = importlib.util.spec_from_file_location(name or f"harness_mod_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _module(tmp_path, source: str, name="m"):
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent(source))
    return _load(p, f"harness_{name}_{abs(hash(source))}")


def test_import_is_torch_free():
    code = "import sys, newt.harness; assert 'torch' not in sys.modules, 'newt.harness imported torch'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})


def test_registration_and_lookup_follow_wrappers():
    mod = _load(FIXTURES / "kernels.py")
    names = [e.name for e in nh.examples_for(mod.add_kernel)]
    assert names == ["ragged", "tiny"]
    # the autotuner and the jit function under it are the same kernel
    assert [e.name for e in nh.examples_for(mod.scale_kernel.fn)] == ["vector"]
    assert nh.reference_for(mod.scale_kernel) is mod.scale_reference
    assert nh.examples_for(mod.scale_rows) == []
    nh.clear()
    assert nh.examples_for(mod.add_kernel) == []


def test_bad_registration_is_a_clear_error():
    with pytest.raises(TypeError, match="pass the kernel object"):
        nh.example("add_kernel")
    with pytest.raises(TypeError):
        nh.example(object())(42)


@needs_interpreter
def test_verify_runs_every_case_and_compares():
    mod = _load(FIXTURES / "kernels.py")
    rep = nh.verify(mod.add_kernel, "cpu")
    assert rep["ok"] is True and rep["device"] == "interpreter"
    assert [c["name"] for c in rep["cases"]] == ["ragged", "tiny"]
    assert all(c["ok"] and c["max_abs_err"] == 0.0 for c in rep["cases"])
    assert rep["message"] == "2/2 case(s) match the reference on interpreter"
    seen = []
    rep = nh.verify(mod.scale_kernel, "cpu", on_case=seen.append)
    assert rep["ok"] and len(seen) == 1


@needs_interpreter
def test_verify_reports_a_wrong_result_with_the_worst_element():
    mod = _load(FIXTURES / "crashy.py")
    rep = nh.verify(mod.wrong_kernel, "cpu")
    assert rep["ok"] is False
    case = rep["cases"][0]
    assert case["ok"] is False and case["max_abs_err"] == 1.0 and case["max_rel_err"] == pytest.approx(0.5)
    assert "x_ptr: 64 / 64 elements differ" in case["message"] and "1.0 (kernel) vs 2.0 (reference)" in case["message"]


def test_verify_without_examples_or_reference_says_what_to_do(tmp_path):
    mod = _load(FIXTURES / "crashy.py")
    rep = nh.verify(mod.lonely_kernel, "cpu")
    assert rep["ok"] is False and "@newt.harness.example(lonely_kernel)" in rep["message"]
    nh.example(mod.lonely_kernel)(lambda device: nh.Case(grid=(1,), args=(torch.zeros(64),)))
    rep = nh.verify(mod.lonely_kernel, "cpu")
    assert rep["cases"][0]["ok"] is False and "no reference" in rep["cases"][0]["message"]


def test_an_example_that_returns_garbage_is_reported():
    mod = _load(FIXTURES / "crashy.py")
    nh.example(mod.lonely_kernel, name="bad")(lambda device: 42)
    rep = nh.verify(mod.lonely_kernel, "cpu")
    assert rep["ok"] is False
    assert "must return newt.harness.Case" in rep["cases"][0]["message"]


def test_fatal_errors_are_flagged():
    mod = _load(FIXTURES / "crashy.py")
    rep = nh.verify(mod.fault_kernel, "cpu")
    assert rep["fatal"] is True and "illegal memory access" in rep["cases"][0]["message"]


class _FnKernel:
    """A function-style kernel (like a deuteron kernel): called directly, with an eager oracle."""

    __name__ = "fn_kernel"

    def __init__(self, fn, eager=None):
        self.fn = fn
        if eager is not None:
            self.eager = eager

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def test_function_style_kernels_compare_their_return_value_with_the_oracle():
    k = _FnKernel(lambda x: x * 2, eager=lambda x: x + x)
    nh.example(k)(lambda device: nh.Case(args=(torch.arange(8.0),)))
    rep = nh.verify(k, "cpu")
    assert rep["ok"], rep
    bad = _FnKernel(lambda x: x * 3, eager=lambda x: x + x)
    nh.example(bad)(lambda device: nh.Case(args=(torch.arange(8.0),)))
    rep = nh.verify(bad, "cpu")
    assert not rep["ok"] and "return:" in rep["cases"][0]["message"]


def test_reference_results_by_name_tuple_or_tensor():
    def kern(x, y):
        x.add_(1)
        y.mul_(2)
    k = _FnKernel(kern)
    k.arg_names = ["x_ptr", "y_ptr"]

    def case(device, **kw):
        return nh.Case(args=(torch.ones(4), torch.ones(4)), **kw)

    nh.example(k, name="tuple")(lambda d: case(d, outputs=("x_ptr", "y_ptr"),
                                              reference=lambda x, y: (x + 1, y * 2)))
    nh.example(k, name="dict")(lambda d: case(d, reference=lambda x, y: {"y_ptr": y * 2}))
    nh.example(k, name="missing")(lambda d: case(d, reference=lambda x, y: x + 1))
    rep = nh.verify(k, "cpu")
    by = {c["name"]: c for c in rep["cases"]}
    assert by["tuple"]["ok"] and by["dict"]["ok"]
    assert not by["missing"]["ok"]


def test_reference_sees_inputs_before_the_launch():
    def kern(x):
        x.mul_(10)  # in place: the reference must see the original values
    k = _FnKernel(kern)
    k.arg_names = ["x_ptr"]
    nh.example(k)(lambda d: nh.Case(args=(torch.ones(3),), reference=lambda x: {"x_ptr": x * 10}))
    assert nh.verify(k, "cpu")["ok"]


def test_compare_tolerances_and_nan():
    a, e = torch.tensor([1.0, float("nan")]), torch.tensor([1.001, float("nan")])
    assert not nh.compare(a, e)["ok"]  # fp32 default 1e-4
    r = nh.compare(a, e, atol=1e-2, rtol=0)
    assert r["ok"] and r["max_abs_err"] == pytest.approx(0.001, rel=1e-3)
    assert nh.compare(torch.tensor([1, 2]), torch.tensor([1, 3]))["ok"] is False  # integers: exact
    assert nh.compare(torch.tensor([1.0, 2.0]).half(), torch.tensor([1.0, 2.001]).half())["ok"]  # fp16: 1e-2
    assert "shapes differ" in nh.compare(torch.zeros(2), torch.zeros(3))["message"]


@needs_interpreter
def test_autotune_times_every_config_and_stores_the_winner():
    mod = _load(FIXTURES / "kernels.py")
    seen = []
    rep = nh.autotune(mod.scale_kernel, "cpu", on_config=seen.append)
    assert rep["device"] == "interpreter" and not rep["cancelled"]
    assert [r["config"]["BLOCK"] for r in rep["results"]] == [128, 256, 512]
    assert all(isinstance(r["ms"], float) and r["error"] is None for r in rep["results"])
    assert seen == rep["results"]
    best = rep["best"]
    assert best["ms"] == min(r["ms"] for r in rep["results"])
    # the runtime launches the winner from now on
    at = mod.scale_kernel
    assert at.cache and str(next(iter(at.cache.values()))) .startswith(f"BLOCK: {best['config']['BLOCK']}")
    assert rep["cache"]["memory"] is True
    assert rep["cache"]["disk"] is None or rep["cache"]["disk"]["key"]


@needs_interpreter
def test_autotune_rejects_configs_that_compute_wrong_results(tmp_path):
    mod = _module(tmp_path, """
        import newt
        import newt.harness as nh
        import newt.language as nl

        @newt.autotune(configs=[newt.Config({"BLOCK": 32}), newt.Config({"BLOCK": 64})], key=["n"])
        @newt.jit
        def k(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
            offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
            x = nl.load(x_ptr + offs, mask=offs < n)
            if BLOCK == 64:
                x = x * 0.0
            nl.store(out_ptr + offs, x, mask=offs < n)

        @nh.example(k)
        def ex(device):
            import torch
            x = torch.randn(256, device=device)
            return nh.Case(grid=lambda m: (newt.cdiv(256, m["BLOCK"]),), args=(x, torch.empty_like(x), 256),
                           reference=lambda x, out, n: {"out_ptr": x})
    """)
    rep = nh.autotune(mod.k, "cpu")
    by = {r["config"]["BLOCK"]: r for r in rep["results"]}
    assert by[32]["ms"] is not None and by[32]["error"] is None
    assert by[64]["ms"] is None and by[64]["error"].startswith("wrong result: out_ptr")
    assert rep["best"]["config"]["BLOCK"] == 32


@needs_interpreter
def test_autotune_stops_when_asked():
    mod = _load(FIXTURES / "kernels.py")
    rep = nh.autotune(mod.scale_kernel, "cpu", should_stop=lambda: True)
    assert rep["cancelled"] is True and rep["results"] == [] and rep["cache"] is None


def test_autotune_of_a_plain_kernel_without_examples_explains(tmp_path):
    mod = _module(tmp_path, """
        import newt
        import newt.language as nl

        @newt.jit
        def k(x_ptr, n, BLOCK: nl.constexpr):
            pass
    """)
    rep = nh.autotune(mod.k, "cpu")
    assert rep["best"] is None and rep["results"] == [] and "no example inputs" in rep["message"]


@needs_interpreter
def test_autotune_of_a_plain_kernel_tunes_its_launch_options():
    """A plain @newt.jit kernel with an example (add_kernel: a fixed grid) is tuned over num_warps x num_stages,
    its constexprs as the example gives them; each config checked against the reference; nothing stored."""
    mod = _load(FIXTURES / "kernels.py")
    rep = nh.autotune(mod.add_kernel, "cpu")
    got = {(r["config"]["num_warps"], r["config"]["num_stages"]) for r in rep["results"]}
    assert got == {(w, s) for w in nh.PLAIN_NUM_WARPS for s in nh.PLAIN_NUM_STAGES}
    assert all(r["error"] is None and r["ms"] is not None for r in rep["results"]), rep["results"]
    assert {r["config"]["BLOCK_SIZE"] for r in rep["results"]} == {1024}
    assert rep["best"]["ms"] == min(r["ms"] for r in rep["results"])
    assert rep["cache"]["plain_kernel"] is True and rep["cache"]["memory"] is False
    assert "plain @newt.jit kernel" in rep["message"]


@needs_interpreter
def test_autotune_of_a_plain_kernel_with_a_meta_grid_tries_block_sizes_and_rejects_wrong_ones(tmp_path):
    """With ``grid=lambda meta: ...`` the grid follows the block size, so BLOCK is tried at half and twice the
    example's value; a block size the kernel computes wrongly with (here: any BLOCK under 64) is rejected; a
    kernel whose own parameter is ``num_stages`` (Triton's softmax tutorial) keeps the example's value."""
    mod = _module(tmp_path, """
        import newt
        import newt.harness as nh
        import newt.language as nl

        @newt.jit
        def k(x_ptr, out_ptr, n, BLOCK: nl.constexpr, num_stages: nl.constexpr):
            offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
            x = nl.load(x_ptr + offs, mask=offs < n)
            if BLOCK < 64:
                x = x + 1.0
            nl.store(out_ptr + offs, x, mask=offs < n)

        @nh.example(k)
        def ex(device):
            import torch
            x = torch.randn(256, device=device)
            return nh.Case(grid=lambda m: (newt.cdiv(256, m["BLOCK"]),), args=(x, torch.empty_like(x), 256),
                           kwargs={"BLOCK": 64, "num_stages": 2}, reference=lambda x, out, n, **kw: {"out_ptr": x})
    """)
    rep = nh.autotune(mod.k, "cpu")
    blocks = {r["config"]["BLOCK"] for r in rep["results"]}
    assert blocks == {32, 64, 128}
    assert {r["config"]["num_stages"] for r in rep["results"]} == {2}
    assert {r["config"]["num_warps"] for r in rep["results"]} == set(nh.PLAIN_NUM_WARPS)
    for r in rep["results"]:
        if r["config"]["BLOCK"] == 32:
            assert r["ms"] is None and r["error"].startswith("wrong result: out_ptr"), r
        else:
            assert r["error"] is None, r
    assert rep["best"]["config"]["BLOCK"] in (64, 128)


@needs_interpreter
def test_autotune_checks_each_config_from_the_inputs_before_any_timing_run(tmp_path):
    """A kernel that accumulates into its output: the timing runs add up, the check of each config starts
    from the example's inputs as they were (a plain kernel has no reset_to_zero to declare)."""
    mod = _module(tmp_path, """
        import newt
        import newt.harness as nh
        import newt.language as nl

        @newt.jit
        def acc(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
            offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
            m = offs < n
            nl.store(out_ptr + offs, nl.load(out_ptr + offs, mask=m) + nl.load(x_ptr + offs, mask=m), mask=m)

        @nh.example(acc)
        def ex(device):
            import torch
            x = torch.randn(100, device=device)
            return nh.Case(grid=(1,), args=(x, torch.zeros_like(x), 100), kwargs={"BLOCK": 128},
                           reference=lambda x, out, n, **kw: {"out_ptr": x})
    """)
    rep = nh.autotune(mod.acc, "cpu")
    assert rep["results"] and all(r["error"] is None for r in rep["results"]), rep["results"]


class _SelfTuning:
    """A kernel that tunes itself (the shape of deuteron's ``Kernel.autotune``)."""

    __name__ = "self_tuning"
    config_space = object()

    def __init__(self, fail_second=False):
        self.fail_second = fail_second
        self.calls = 0

    def __call__(self, x):
        return x + 1

    def autotune(self, *args, callback=None, force=False, **kwargs):
        self.calls += 1
        for i, ms in enumerate((0.5, 0.25, 0.75)):
            status = "error" if (self.fail_second and i == 1) else "ok"
            callback({"kind": "report", "index": i + 1, "config": {"block": 2 ** (i + 4)}, "ms": ms, "status": status,
                      "error": "boom" if status != "ok" else None})
        return {"block": 64 if self.fail_second else 32}


def test_self_tuning_kernels_report_each_config():
    k = _SelfTuning(fail_second=True)
    nh.example(k)(lambda device: nh.Case(args=(torch.ones(2),)))
    seen = []
    rep = nh.autotune(k, "cpu", on_config=seen.append)
    assert [r["config"] for r in rep["results"]] == [{"block": 16}, {"block": 32}, {"block": 64}]
    assert rep["results"][1] == {"config": {"block": 32}, "ms": None, "error": "boom"}
    assert seen == rep["results"]
    assert rep["best"] == {"config": {"block": 64}, "ms": 0.75}


def test_self_tuning_kernels_stop_when_asked():
    k = _SelfTuning()
    nh.example(k)(lambda device: nh.Case(args=(torch.ones(2),)))
    rep = nh.autotune(k, "cpu", should_stop=lambda: True)
    assert rep["cancelled"] is True and len(rep["results"]) == 1 and rep["best"] is None


@pytest.mark.skipif(importlib.util.find_spec("deuteron") is None, reason="deuteron is not installed")
@needs_interpreter
def test_deuteron_kernels_verify_against_their_eager_oracle():
    mod = _load(FIXTURES / "dt_kernels.py")
    rep = nh.verify(mod.scaled_add, "cpu")
    assert rep["ok"] is True and rep["cases"][0]["name"] == "small"


def test_a_config_the_tuner_stopped_early_is_pruned_not_an_error():
    """deuteron's tuner stops timing a config whose first estimate already lost ("hopeless"): that config ran and
    was correct, so Autotune reports it as pruned (the progress line says "skipped"), never as a rejection."""

    class SelfTuning:  # the shape of a deuteron kernel as the harness sees it (its own search, a config space)
        __name__ = "self_tuning"
        config_space = ()

        def autotune(self, *args, callback=None, force=False, **kw):
            callback({"kind": "report", "status": "ok", "ms": 0.5, "config": {"block": 64}})
            callback({"kind": "report", "status": "hopeless", "ms": 9.0, "config": {"block": 16},
                      "error": "a first estimate of 9 ms is above the cut-off 1 ms"})
            callback({"kind": "report", "status": "error", "error": "wrong result", "config": {"block": 8}})
            return {"block": 64}

    k = SelfTuning()
    nh.example(k)(lambda device: nh.Case(args=(torch.zeros(4),)))
    try:
        rep = nh.autotune(k, "cpu", name="self_tuning")
    finally:
        nh.clear()
    ok, pruned, bad = rep["results"]
    assert ok["ms"] == 0.5 and ok["error"] is None and "pruned" not in ok
    assert pruned["ms"] is None and pruned["error"] is None and "cut-off" in pruned["pruned"]
    assert bad["error"] == "wrong result" and "pruned" not in bad
    assert rep["best"] is not None and rep["best"]["ms"] == 0.5
