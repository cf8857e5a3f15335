"""The modules and attributes torch and Triton libraries probe, as the drop-in serves them."""

from __future__ import annotations

import inspect

import pytest


def test_version_is_the_api_level_newt_implements(dropin):
    import triton
    assert triton.__version__ == dropin.TRITON_API_VERSION == "3.4.0"
    # the gates libraries write (`triton.__version__ >= "3.0"`, packaging-style tuples) take the 3.x branch
    assert tuple(int(p) for p in triton.__version__.split(".")[:2]) >= (3, 0)
    import torch.utils._triton as tu
    tu.get_triton_version.cache_clear()
    assert tu.has_triton_package() and tu.get_triton_version() == (3, 4)


def test_backends_compiler_gpu_target_and_base_backend(dropin):
    from triton.backends.compiler import BaseBackend, GPUTarget
    t = GPUTarget("cuda", 90, 32)
    assert (t.backend, t.arch, t.warp_size) == ("cuda", 90, 32)
    assert BaseBackend.supports_target(t)
    import triton.backends
    assert triton.backends.GPUTarget is GPUTarget


def test_compiler_modules(dropin):
    from triton.compiler.compiler import CompiledKernel, triton_key
    from triton.compiler.errors import CompilationError

    import newt
    from newt.runtime.compiler import CompiledKernel as NCK
    assert CompiledKernel is NCK and CompilationError is newt.CompilationError
    assert "newt" in triton_key()


def test_driver_active_answers_without_a_gpu(dropin, monkeypatch):
    import torch

    import newt.runtime.driver as drv
    monkeypatch.setattr(drv, "has_gpu", lambda: False)
    import triton
    from triton.runtime import driver
    act = triton.runtime.driver.active
    assert driver.active is act
    assert act.get_current_device() == 0
    assert act.get_active_torch_device() == torch.device("cpu")
    t = act.get_current_target()
    assert t.backend == "cuda" and isinstance(t.arch, int) and t.warp_size == 32
    props = act.utils.get_device_properties(act.get_current_device())
    for k in ("multiprocessor_count", "max_num_regs", "max_shared_mem", "warpSize"):
        assert isinstance(props[k], int) and props[k] > 0
    assert act.get_device_interface() is torch.cpu
    assert act.get_current_stream() == 0
    from triton.runtime.driver import driver as registry
    assert registry.active is act


def test_runtime_jit_and_params_as_torch_reads_them(dropin):
    import triton
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        pass

    assert isinstance(k, JITFunction)
    assert k.arg_names == ["x_ptr", "n", "BLOCK"]
    assert [(p.num, p.name, p.is_constexpr) for p in k.params] == [(0, "x_ptr", False), (1, "n", False),
                                                                   (2, "BLOCK", True)]
    assert k.fn.__name__ == "k" and k.constexprs == [2]
    from triton.runtime.autotuner import Autotuner, Config, Heuristics
    assert Autotuner.__module__ == "newt.tune.autotuner" and Heuristics and Config


def test_top_level_names(dropin):
    import triton
    for name in ("jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "JITFunction",
                 "KernelInterface", "CompilationError", "OutOfResources", "set_allocator", "constexpr_function"):
        assert getattr(triton, name) is not None, name
    assert "pre_hook" in inspect.signature(triton.Config.__init__).parameters
    with pytest.raises(AttributeError, match="no attribute"):
        triton.no_such_name  # noqa: B018


def test_libdevice_is_newts_where_newt_has_it(dropin):
    import importlib.util

    import triton.language as tl
    if importlib.util.find_spec("newt.language.extra") is None:
        assert not hasattr(tl.extra, "libdevice") and not hasattr(tl.extra, "cuda")
        with pytest.raises(ModuleNotFoundError):
            import triton.language.extra.libdevice  # noqa: F401
    else:
        from triton.language.extra import libdevice

        import newt.language.extra.libdevice as nld
        assert libdevice is nld


def test_testing_module(dropin, tmp_path, capsys):
    import torch
    import triton.testing as tt
    ms = tt.do_bench(lambda: torch.ones(4).sum(), warmup=1, rep=2)
    assert isinstance(ms, float) and ms > 0
    q = tt.do_bench(lambda: None, warmup=0, rep=1, quantiles=[0.5, 0.2, 0.8])
    assert len(q) == 3
    tt.assert_close(torch.ones(3), torch.ones(3))
    with pytest.raises(AssertionError):
        tt.assert_close(torch.ones(3), torch.zeros(3))

    @tt.perf_report(tt.Benchmark(x_names=["n"], x_vals=[2, 4], line_arg="p", line_vals=["a", "b"],
                                 line_names=["A", "B"], plot_name="demo", args={"k": 10}))
    def bench(n, p, k):
        return n * k + (1 if p == "b" else 0), 0, 0

    bench.run(print_data=True, save_path=str(tmp_path))
    out = capsys.readouterr().out
    assert "demo:" in out and "41" in out
    assert (tmp_path / "demo.csv").read_text().splitlines() == ["n,A,B", "2,20,21", "4,40,41"]


def test_testing_peak_figure_helpers(dropin, monkeypatch):
    # ml-cross-entropy imports these at import time (its autotuner's pruning): Triton 3.6 has them
    import torch

    import newt.runtime.driver as drv
    monkeypatch.setattr(drv, "has_gpu", lambda: False)
    from triton.testing import get_dram_gbps, get_max_simd_tflops, get_max_tensorcore_tflops, nvsmi
    assert callable(nvsmi)
    # the H100 SXM figures the drop-in answers with no GPU: 2,619 MHz HBM3 on a 5,120-bit bus, 132 SMs
    assert get_dram_gbps() == pytest.approx(2619000 * 5120 * 2 / 8 / 1e6)
    assert get_max_tensorcore_tflops(torch.float16, 1980000) == pytest.approx(132 * 4 * 1980000 * 512 * 1e-9)
    assert get_max_tensorcore_tflops(torch.float8_e4m3fn, 1000) == 2 * get_max_tensorcore_tflops(torch.bfloat16, 1000)
    assert get_max_simd_tflops(torch.float32, 1000) == get_max_tensorcore_tflops(torch.float32, 1000) / 8
    with pytest.raises(RuntimeError, match="dtype not supported"):
        get_max_simd_tflops(torch.int8, 1000)


def test_modules_have_a_file(dropin):
    """Scripts print or probe ``triton.__file__`` (tutorial 06's profile printed it and stopped on the H100)."""
    import triton
    import triton.language as tl
    assert triton.__file__.endswith(".py") and tl.__file__ == triton.__file__
