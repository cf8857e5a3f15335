"""The runtime on a real GPU: launches, grids, scalars, faults that name the kernel, autotune, the disk cache
across processes, large shared memory, streams, do_bench.  ``python3 -m pytest tests -m gpu``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import driver

from . import kernels as K

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def run_script(tmp_path, body: str, env_extra=None, timeout=600):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=str(tmp_path))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("n", [1, 15, 16, 1000, 98432])
def test_vector_add(dtype, n):
    x = (torch.randn(n, device="cuda") * 10).to(dtype)
    y = (torch.randn(n, device="cuda") * 10).to(dtype)
    out = torch.empty_like(x)
    K.add_kernel[lambda m: (newt.cdiv(n, m["BLOCK_SIZE"]),)](x, y, out, n, BLOCK_SIZE=256)
    torch.testing.assert_close(out, x + y)


def test_unaligned_views_and_non_multiple_sizes():
    base = torch.randn(4099, device="cuda")
    x, y, out = base[1:4000], base[3:4002], torch.empty(4001, device="cuda")[1:4000]
    K.add_kernel[(newt.cdiv(3999, 128),)](x, y, out, 3999, BLOCK_SIZE=128)
    torch.testing.assert_close(out, x + y)


def test_grid_3d():
    out = torch.zeros(4 * 3 * 2, dtype=torch.int32, device="cuda")
    K.grid3_kernel[(4, 3, 2)](out, X=4, Y=3)
    expect = torch.tensor([i + 10 * j + 100 * k for k in range(2) for j in range(3) for i in range(4)],
                          dtype=torch.int32)
    assert out.cpu().tolist() == expect.tolist()


def test_scalar_arguments():
    out = torch.empty(16, device="cuda")
    K.scalars_kernel[(1,)](out, 1.5, 3, True)
    assert torch.all(out == 5.5)
    K.scalars_kernel[(1,)](out, -2.0, 1, False)
    assert torch.all(out == -2.0)


def test_large_int_arguments_are_64_bit():
    @newt.jit
    def put(out_ptr, v):
        nl.store(out_ptr, v)
    out = torch.zeros(1, dtype=torch.int64, device="cuda")
    put[(1,)](out, 2 ** 40 + 5)
    assert out.item() == 2 ** 40 + 5
    put[(1,)](out, -(2 ** 35))
    assert out.item() == -(2 ** 35)


def test_warmup_then_launch_and_compiled_kernel_launch():
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    ck = K.add_kernel.warmup(torch.float32, torch.float32, torch.float32, 4096, BLOCK_SIZE=1024, grid=(4,))
    assert K.add_kernel[(4,)](x, y, out, 4096, BLOCK_SIZE=1024) is ck
    torch.testing.assert_close(out, x + y)
    out.zero_()
    ck[(4,)](x, y, out, 4096)
    torch.testing.assert_close(out, x + y)


def test_non_default_stream():
    x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    out = torch.empty_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        K.add_kernel[(newt.cdiv(1 << 20, 1024),)](x, y, out, 1 << 20, BLOCK_SIZE=1024)
    s.synchronize()
    torch.testing.assert_close(out, x + y)
    out.zero_()
    torch.cuda.synchronize()
    K.add_kernel[(newt.cdiv(1 << 20, 1024),)](x, y, out, 1 << 20, BLOCK_SIZE=1024, stream=s)
    s.synchronize()
    torch.testing.assert_close(out, x + y)


def test_cpu_tensor_is_refused():
    x = torch.randn(16)
    with pytest.raises(ValueError, match="argument 'x_ptr' is a tensor on cpu"):
        K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)


def test_large_dynamic_shared_memory_and_autotune():
    """Configs above 48 KB of shared memory need cuFuncSetAttribute; the autotuner picks one and it is correct."""
    from .test_examples import load_example
    ex = load_example("matmul")
    a = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 768, device="cuda", dtype=torch.float16)
    c = ex.matmul(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.5, rtol=2e-2)
    assert ex.matmul_kernel.best_config in ex.matmul_kernel.configs
    big = [ck for ck in (ln.kernel for ln in ex.matmul_kernel.base._cache.values()) if ck.metadata.shared > 48 * 1024]
    assert big, "expected at least one config above 48 KB of shared memory"
    timings = {c: t for c, t in ex.matmul_kernel.configs_timings.items() if t is not None}
    assert all(t[0] > 0 for t in timings.values())


def test_heuristics_on_gpu():
    @newt.heuristics({"BLOCK_SIZE": lambda a: min(1024, newt.next_power_of_2(a["n_elements"]))})
    @newt.jit
    def k(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr):
        offs = nl.program_id(0) * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
        m = offs < n_elements
        nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m) - nl.load(y_ptr + offs, mask=m), mask=m)
    x, y = torch.randn(3000, device="cuda"), torch.randn(3000, device="cuda")
    out = torch.empty_like(x)
    k[lambda m: (newt.cdiv(3000, m["BLOCK_SIZE"]),)](x, y, out, 3000)
    torch.testing.assert_close(out, x - y)


def test_do_bench_on_gpu():
    x = torch.randn(1 << 22, device="cuda")
    t = newt.testing.do_bench(lambda: x.mul_(1.0))
    assert 0 < t < 10
    q = newt.testing.do_bench(lambda: x.mul_(1.0), quantiles=[0.2, 0.5, 0.8])
    assert len(q) == 3 and q[0] <= q[1] <= q[2]
    assert len(newt.testing.do_bench(lambda: x.mul_(1.0), rep=5, return_mode="all")) >= 1


def test_interpreter_with_cuda_tensors():
    k = newt.jit(interpret=True)(K.add_kernel.fn)
    x, y = torch.randn(300, device="cuda"), torch.randn(300, device="cuda")
    out = torch.empty_like(x)
    k[(3,)](x, y, out, 300, BLOCK_SIZE=128)
    torch.testing.assert_close(out, x + y)


def test_launch_overhead_is_small():
    """A loose guard (the real measurement is benchmarks/launch_overhead.py)."""
    x = torch.randn(1024, device="cuda")
    k = K.add_kernel
    k[(1,)](x, x, x, 1024, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        k[(1,)](x, x, x, 1024, BLOCK_SIZE=1024)
    per_launch = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    assert per_launch < 40, f"{per_launch:.1f} us per launch"


# --- faults name the kernel (each in its own process: a fault kills the CUDA context) ----------------

FAULTY = '''
    import time, torch, newt, newt.language as nl
    from newt.runtime import KernelFaultError

    @newt.jit
    def scribble(x_ptr, far, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        nl.store(x_ptr + far + offs, offs.to(nl.float32))

    @newt.jit
    def innocent(x_ptr, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        nl.store(x_ptr + offs, offs.to(nl.float32))

    x = torch.zeros(128, device="cuda")
    innocent[(1,)](x, BLOCK=128)
    torch.cuda.synchronize()
'''


def test_fault_is_reported_at_synchronize_naming_the_kernel(tmp_path):
    r = run_script(tmp_path, FAULTY + '''
    scribble[(1,)](x, 1 << 40, BLOCK=128)
    try:
        newt.runtime.synchronize()
    except KernelFaultError as e:
        print("FAULT:", e)
    ''')
    assert "FAULT:" in r.stdout, r.stdout + r.stderr
    assert "'scribble'" in r.stdout and "CUDA_ERROR_ILLEGAL_ADDRESS" in r.stdout and "script.py" in r.stdout


def test_fault_is_reported_at_the_next_launch(tmp_path):
    r = run_script(tmp_path, FAULTY + '''
    scribble[(1,)](x, 1 << 40, BLOCK=128)
    time.sleep(1.0)
    try:
        innocent[(1,)](x, BLOCK=128)
        newt.runtime.synchronize()
    except KernelFaultError as e:
        print("FAULT:", e)
    ''')
    assert "FAULT:" in r.stdout, r.stdout + r.stderr
    assert "scribble" in r.stdout and "CUDA_ERROR_ILLEGAL_ADDRESS" in r.stdout


def test_launch_blocking_names_the_faulting_kernel(tmp_path):
    r = run_script(tmp_path, FAULTY + '''
    try:
        scribble[(1,)](x, 1 << 40, BLOCK=128)
    except KernelFaultError as e:
        print("FAULT:", e)
    ''', {"NEWT_LAUNCH_BLOCKING": "1"})
    assert "FAULT:" in r.stdout, r.stdout + r.stderr
    assert "'scribble'" in r.stdout and "failed on the device" in r.stdout


# --- the disk cache across processes -----------------------------------------------------------------

CACHED = '''
    import sys, torch, newt
    sys.path.insert(0, {root!r})
    from tests.runtime import kernels as K
    if sys.argv[-1] == "no-compile":
        from newt.backend import cuda as backend
        def refuse(*a, **k):
            raise AssertionError("compiled although the disk cache holds the kernel")
        backend.compile_cuda = refuse
    x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    out = torch.empty_like(x)
    K.add_kernel[(newt.cdiv(5000, 512),)](x, y, out, 5000, BLOCK_SIZE=512)
    torch.testing.assert_close(out, x + y)
    print("OK", newt.runtime.cache_dir())
'''


def test_disk_cache_is_reused_by_another_process(tmp_path):
    cache = tmp_path / "cache"
    body = CACHED.format(root=str(ROOT))
    script = tmp_path / "cached.py"
    script.write_text(textwrap.dedent(body))
    env = dict(os.environ, NEWT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    r1 = subprocess.run([sys.executable, str(script), "first"], capture_output=True, text=True, env=env, timeout=600)
    assert r1.returncode == 0 and "OK" in r1.stdout, r1.stderr
    r2 = subprocess.run([sys.executable, str(script), "no-compile"], capture_output=True, text=True, env=env,
                        timeout=600)
    assert r2.returncode == 0 and "OK" in r2.stdout, r2.stderr
    assert len(list(cache.rglob("*.bin"))) == 1


def test_device_info_and_target():
    info = driver.device_info(torch.cuda.current_device())
    major, minor = torch.cuda.get_device_capability()
    assert (info.major, info.minor) == (major, minor)
    assert info.sm_count == torch.cuda.get_device_properties(0).multi_processor_count
    assert info.target.startswith(f"sm_{major}")
