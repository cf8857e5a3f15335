"""The launch path against a fake driver: packing, grids, caching, errors (no GPU needed)."""

from __future__ import annotations

import struct
import threading

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import driver
from newt.runtime.errors import KernelFaultError, LaunchError, OutOfResources

from . import kernels as K
from .fakes import install_fake_c_launcher


@pytest.fixture(params=["python", "compiled"])
def gpu(request, fake_gpu, fake_backend, cuda_ok, monkeypatch):
    """The fake GPU, launched through the pure-Python launcher and through the compiled one."""
    if request.param == "compiled" and install_fake_c_launcher(monkeypatch, fake_gpu) is None:
        pytest.skip("the compiled launcher cannot be built here (no C compiler)")
    K.add_kernel.clear_cache()
    K.stages_kernel.clear_cache()
    K.scalars_kernel.clear_cache()
    K.grid3_kernel.clear_cache()
    yield fake_gpu
    for k in (K.add_kernel, K.stages_kernel, K.scalars_kernel, K.grid3_kernel):
        k.clear_cache()


def test_launch_packs_runtime_arguments(gpu, fake_backend):
    x, y, out = torch.randn(1000), torch.randn(1000), torch.empty(1000)
    ck = K.add_kernel[(4,)](x, y, out, 1000, BLOCK_SIZE=256)
    (ln,) = gpu.launches
    assert ln.values == (x.data_ptr(), y.data_ptr(), out.data_ptr(), 1000)
    assert ln.grid == (4, 1, 1) and ln.block == (128, 1, 1) and ln.stream == 1234 and ln.shared == 0
    assert ln.function[2] == ck.metadata.name
    assert isinstance(ck, newt.runtime.CompiledKernel)
    assert driver.last_launched().name == "add_kernel"


def test_int_equal_to_one_is_not_passed(gpu):
    x = torch.randn(16)
    K.add_kernel[(1,)](x, x, x, 1, BLOCK_SIZE=16)
    assert gpu.launches[-1].values == (x.data_ptr(),) * 3


def test_num_warps_sets_the_block(gpu):
    x = torch.randn(16)
    K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16, num_warps=8)
    assert gpu.launches[-1].block == (256, 1, 1)


def test_second_launch_reuses_the_kernel(gpu, fake_backend):
    x = torch.randn(64)
    K.add_kernel[(1,)](x, x, x, 64, BLOCK_SIZE=64)
    K.add_kernel[(2,)](x, x, x, 48, BLOCK_SIZE=64)
    assert fake_backend.compiled == 1
    assert len(gpu.loaded) == 1
    K.add_kernel[(1,)](x, x, x, 64, BLOCK_SIZE=32)  # new constexpr
    K.add_kernel[(1,)](x, x, x, 63, BLOCK_SIZE=64)  # no longer divisible by 16
    K.add_kernel[(1,)](x.half(), x.half(), x.half(), 64, BLOCK_SIZE=64)  # new dtype
    K.add_kernel[(1,)](x, x, x, 64, BLOCK_SIZE=64, num_stages=2)  # new option
    assert fake_backend.compiled == 5
    assert [ln.values[3] for ln in gpu.launches] == [64, 48, 64, 63, 64, 64]


def test_warmup_compiles_without_launching(gpu, fake_backend):
    x = torch.randn(64)
    ck = K.add_kernel.warmup(torch.float32, torch.float32, torch.float32, 64, BLOCK_SIZE=64, grid=(1,))
    assert fake_backend.compiled == 1 and not gpu.launches
    assert ck.metadata.signature == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
    assert K.add_kernel[(1,)](x, x, x, 64, BLOCK_SIZE=64) is ck
    assert fake_backend.compiled == 1 and len(gpu.launches) == 1


def test_launching_with_a_dtype_is_refused(gpu):
    with pytest.raises(TypeError, match="argument 'x_ptr' is a dtype"):
        K.add_kernel[(1,)](torch.float32, torch.float32, torch.float32, 64, BLOCK_SIZE=64)


def test_callable_grid_gets_every_argument(gpu):
    x = torch.randn(1000)
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (newt.cdiv(meta["n_elements"], meta["BLOCK_SIZE"]),)
    K.add_kernel[grid](x, x, x, 1000, BLOCK_SIZE=128, num_warps=2)
    assert set(seen) == {"x_ptr", "y_ptr", "out_ptr", "n_elements", "BLOCK_SIZE", "num_warps", "num_stages"}
    assert seen["x_ptr"] is x and seen["BLOCK_SIZE"] == 128 and seen["num_warps"] == 2 and seen["num_stages"] == 3
    assert gpu.launches[-1].grid == (8, 1, 1)


@pytest.mark.parametrize("grid,expect", [((3, 2, 5), (3, 2, 5)), ((3, 2), (3, 2, 1)), ([7], (7, 1, 1)),
                                         (9, (9, 1, 1)), (lambda m: [2, 3], (2, 3, 1)),
                                         (lambda m: (m["X"], m["Y"], 2), (4, 8, 2))])
def test_grid_forms(gpu, grid, expect):
    out = torch.empty(64, dtype=torch.int32)
    K.grid3_kernel[grid](out, X=4, Y=8)
    assert gpu.launches[-1].grid == expect


def test_empty_grid_launches_nothing(gpu):
    out = torch.empty(64, dtype=torch.int32)
    K.grid3_kernel[(0,)](out, X=4, Y=8)
    K.grid3_kernel[(4, 0, 1)](out, X=4, Y=8)
    assert gpu.launches == []


@pytest.mark.parametrize("grid,msg", [((-1,), "invalid grid"), ((1.5,), "invalid grid"), ((1, 2, 3, 4), "1 to 3"),
                                      (None, "no grid given"), (("a",), "invalid grid"),
                                      (lambda m: "x", "grid dimensions must be ints")])
def test_bad_grids_name_the_kernel(gpu, grid, msg):
    out = torch.empty(64, dtype=torch.int32)
    with pytest.raises((LaunchError, TypeError), match=f"grid3_kernel.*{msg}|{msg}") as ei:
        K.grid3_kernel[grid](out, X=4, Y=8)
    assert "grid3_kernel" in str(ei.value)


def test_scalar_arguments_are_packed_by_type(gpu):
    out = torch.empty(16)
    K.scalars_kernel[(1,)](out, 2.5, 7, True)
    ln = gpu.launches[-1]
    assert ln.values == (out.data_ptr(), 2.5, 7, True)
    buf = [b for b in gpu.buffers.values()][-1]
    assert buf.fmt == "<Qf4xi4x?7x"


def test_parameter_named_num_stages_is_option_and_constexpr(gpu, fake_backend):
    out = torch.empty(16, dtype=torch.int32)
    ck = K.stages_kernel[(1,)](out, 16, BLOCK=16, num_stages=2)
    assert ck.metadata.num_stages == 2 and ck.metadata.constexprs["num_stages"] == "int:2"


def test_stream_argument(gpu):
    out = torch.empty(64, dtype=torch.int32)

    class S:
        cuda_stream = 777
    K.grid3_kernel[(1,)](out, X=4, Y=8, stream=S())
    K.grid3_kernel[(1,)](out, X=4, Y=8, stream=55)
    assert [ln.stream for ln in gpu.launches] == [777, 55]


def test_launch_error_names_the_kernel(gpu):
    x = torch.randn(16)
    K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)
    gpu.results = [1]
    with pytest.raises(LaunchError, match=r"launching 'add_kernel' \(.*kernels.py:\d+\) with grid \(1, 1, 1\).*"
                                          r"CUDA_ERROR_INVALID_VALUE.*grids up to") as ei:
        K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)
    assert ei.value.kernel == "add_kernel" and not ei.value.sticky


def test_sticky_fault_at_the_next_launch_names_the_previous_kernel(gpu):
    x = torch.randn(16)
    out = torch.empty(64, dtype=torch.int32)
    K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)
    gpu.results = [700]
    with pytest.raises(KernelFaultError) as ei:
        K.grid3_kernel[(1,)](out, X=4, Y=8)
    msg = str(ei.value)
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in msg and "grid3_kernel" in msg
    assert "the newt kernel launched most recently (oldest first): 'add_kernel'" in msg
    assert "NEWT_LAUNCH_BLOCKING=1" in msg and ei.value.sticky


def test_synchronize_names_the_last_kernel(gpu):
    x = torch.randn(16)
    K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)
    gpu.sync_result = 710
    with pytest.raises(KernelFaultError, match=r"kernel 'add_kernel' \(.*\) failed on the device: CUDA_ERROR_ASSERT"):
        driver.synchronize()
    out = torch.empty(64, dtype=torch.int32)
    K.grid3_kernel[(1,)](out, X=4, Y=8)
    with pytest.raises(KernelFaultError, match=r"a kernel failed on the device: CUDA_ERROR_ASSERT.*most recently "
                                               r"\(oldest first\): 'add_kernel' \(.*\), 'grid3_kernel'"):
        driver.synchronize()
    gpu.sync_result = 0
    driver.synchronize()
    assert driver.last_launched() is None


def test_launch_blocking_pins_the_fault_on_the_kernel(gpu, monkeypatch):
    monkeypatch.setenv("NEWT_LAUNCH_BLOCKING", "1")
    x = torch.randn(16)
    gpu.sync_result = 700
    with pytest.raises(KernelFaultError, match=r"'add_kernel' \(.*\) failed on the device: CUDA_ERROR_ILLEGAL_ADDRESS"):
        K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)


def test_debug_kernel_synchronises_after_launch(gpu, fake_backend):
    k = newt.jit(debug=True)(K.add_kernel.fn)
    x = torch.randn(16)
    gpu.sync_result = 710
    with pytest.raises(KernelFaultError, match="CUDA_ERROR_ASSERT"):
        k[(1,)](x, x, x, 16, BLOCK_SIZE=16)


def test_large_shared_memory_opts_in(gpu, fake_backend):
    fake_backend.shared = lambda fn, nw, ns: 100 * 1024
    x = torch.randn(16)
    K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)
    ((f, attr, value),) = gpu.attributes
    assert attr == gpu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES and value == 100 * 1024
    assert gpu.launches[-1].shared == 100 * 1024


def test_small_shared_memory_needs_no_attribute(gpu, fake_backend):
    fake_backend.shared = lambda fn, nw, ns: 16 * 1024
    x = torch.randn(16)
    K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)
    assert gpu.attributes == [] and gpu.launches[-1].shared == 16 * 1024


def test_too_much_shared_memory_is_out_of_resources(gpu, fake_backend):
    fake_backend.shared = lambda fn, nw, ns: 300 * 1024
    x = torch.randn(16)
    with pytest.raises(OutOfResources, match="add_kernel: out of shared memory: required 307200, hardware limit"):
        K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)


def test_too_many_registers_is_out_of_resources(gpu):
    gpu.max_threads = 256
    x = torch.randn(16)
    with pytest.raises(OutOfResources, match="only 256 threads per block, num_warps=16 needs 512"):
        K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16, num_warps=16)


def test_concurrent_launches_pack_consistently(gpu):
    x = torch.randn(4096)
    K.add_kernel[(1,)](x, x, x, 4096, BLOCK_SIZE=64)
    gpu.launches.clear()
    errors = []

    def worker(tid):
        try:
            for i in range(200):
                n = 16 * (tid * 1000 + i) + 32
                K.add_kernel[(n,)](x, x, x, n, BLOCK_SIZE=64)
        except Exception as e:
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(gpu.launches) == 800
    assert all(ln.grid[0] == ln.values[3] for ln in gpu.launches)


def test_compiled_kernel_launch_like_triton(gpu):
    """``ck = kernel.warmup(...)`` then ``ck[grid](all args)`` or ``ck[grid](run-time args)``."""
    x = torch.randn(64)
    ck = K.add_kernel.warmup(x, x, x, 64, BLOCK_SIZE=64, grid=(1,))
    ck[(1, 1, 1)](x, x, x, 64, 64)
    ck[(2,)](x, x, x, 64)
    assert [ln.values for ln in gpu.launches] == [(x.data_ptr(),) * 3 + (64,)] * 2
    with pytest.raises(TypeError, match="takes 4 run-time arguments"):
        ck[(1,)](x, x)


def test_compile_api_kernel_packs_half_and_bfloat16_scalars(gpu):
    @newt.jit
    def fill(out_ptr, a, b, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        nl.store(out_ptr + offs, a.to(nl.float32) + b.to(nl.float32))
    ck = newt.compile(fill, signature={"out_ptr": "*fp32", "a": "fp16", "b": "bf16"}, constexprs={"BLOCK": 16})
    assert [p.code for p in ck.params] == ["Q", "e", "bf16"]
    out = torch.empty(16)
    ck[(1,)](out, 1.5, 3.0)
    ln = gpu.launches[-1]
    assert ln.values[0] == out.data_ptr() and ln.values[1] == 1.5
    assert ln.values[2] == struct.unpack("<H", torch.tensor([3.0], dtype=torch.bfloat16).view(torch.int16)
                                         .numpy().tobytes())[0]


def test_bf16_bits_rounding():
    for v in (0.0, 1.0, -2.5, 3.14159, 1e-30, 65504.0, float("inf"), -float("inf")):
        expect = torch.tensor([v], dtype=torch.bfloat16).view(torch.int16).item() & 0xFFFF
        assert driver.bf16_bits(v) == expect, v
    assert driver.bf16_bits(float("nan")) & 0x7F80 == 0x7F80


def test_without_a_gpu_warmup_works_and_launch_explains(fake_backend, monkeypatch):
    monkeypatch.setattr(driver, "_HAS_GPU", False)
    k = newt.jit(K.add_kernel.fn)
    x = torch.randn(16)
    ck = k.warmup(x, x, x, 16, BLOCK_SIZE=16)
    assert ck.metadata.target == "sm_90a"
    monkeypatch.setenv("NEWT_TARGET", "sm_80")
    assert newt.jit(K.add_kernel.fn).warmup(x, x, x, 16, BLOCK_SIZE=16).metadata.target == "sm_80"
    with pytest.raises(RuntimeError, match="no CUDA GPU.*NEWT_INTERPRET=1"):
        k[(1,)](x, x, x, 16, BLOCK_SIZE=16)


def test_target_for_capability(monkeypatch):
    monkeypatch.setattr(driver, "known_targets", lambda: {"sm_80": 1, "sm_89": 1, "sm_90a": 1, "sm_90": 1,
                                                           "sm_120": 1})
    assert driver.target_for_capability(9, 0) == "sm_90a"
    assert driver.target_for_capability(8, 0) == "sm_80"
    assert driver.target_for_capability(8, 6) == "sm_80"
    assert driver.target_for_capability(8, 9) == "sm_89"
    assert driver.target_for_capability(12, 1) == "sm_120"
    with pytest.raises(RuntimeError, match="no target for compute capability 10.0"):
        driver.target_for_capability(10, 0)
    monkeypatch.setenv("NEWT_TARGET", "sm_80")
    assert driver.target_for_capability(9, 0) == "sm_80"


def test_param_layout():
    fmt, offsets, size = driver.param_layout(["Q", "i", "f", "?", "bf16", "d"])
    assert fmt == "<Qi4xf4x?7xH6xd" and offsets == [0, 8, 16, 24, 32, 40] and size == 48
    assert driver.struct_code("const float* __restrict__") == "Q"
    assert driver.struct_code("unsigned long long") == "Q"
    assert driver.struct_code(None, nl.int64) == "q"
    with pytest.raises(TypeError):
        driver.struct_code("struct foo")


def test_the_compiled_launcher_is_the_one_used(gpu, request):
    x = torch.randn(16)
    K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)
    (ln,) = K.add_kernel._cache.values()
    if request.node.callspec.params["gpu"] == "compiled":
        assert type(ln.launch).__name__ == "Launcher" and ln.launch is ln.compiled
    else:
        assert ln.compiled is None and ln.launch is ln.py_launch
    assert gpu.launches[-1].values == (x.data_ptr(),) * 3 + (16,)


@newt.jit
def nested_tuple_kernel(ptrs, sizes, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    a, (b, c) = ptrs
    n, m = sizes
    v = nl.load(a + offs, mask=offs < n) + nl.load(b + offs, mask=offs < m) + nl.load(c + offs)
    nl.store(out_ptr + offs, v)


def test_tuple_elements_are_picked_by_path(gpu):
    x, y, z, out = (torch.randn(16) for _ in range(4))
    nested_tuple_kernel[(2,)]((x, (y, z)), (16, 48), out, BLOCK=16)
    ck = nested_tuple_kernel[(2,)]((x, (y, z)), (16, 48), out, BLOCK=16)
    assert [p.name for p in ck.params] == ["ptrs.0", "ptrs.1.0", "ptrs.1.1", "sizes.0", "sizes.1", "out_ptr"]
    assert gpu.launches[-1].values == (x.data_ptr(), y.data_ptr(), z.data_ptr(), 16, 48, out.data_ptr())
    assert gpu.launches[-1].grid == (2, 1, 1) and len(gpu.launches) == 2
    nested_tuple_kernel.clear_cache()


def test_a_value_that_does_not_pack_raises_the_same_on_both_launchers(gpu):
    x = torch.randn(64)
    ck = K.add_kernel.warmup(x, x, x, 64, BLOCK_SIZE=64, grid=(1,))
    for bad in (2 ** 40, 1.5, "7"):  # n is an i32 parameter: out of range, a float, a str
        with pytest.raises(struct.error):
            ck[(1,)](x, x, x, bad)
    assert gpu.launches == []
    ck[(1,)](x, x, x, True)  # struct packs a bool as an int: both launchers do
    assert gpu.launches[-1].values == (x.data_ptr(),) * 3 + (1,)
