"""Kernels written against Triton's API run through the drop-in: on the interpreter without a GPU."""

import pytest
import torch  # (module scope: triton_op reads the annotations ``torch.Tensor`` of the op below)


def test_interpretation_rule(dropin, monkeypatch):
    import newt.runtime.driver as drv
    from newt.dropin.triton import interpret_rule
    monkeypatch.delenv("NEWT_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(drv, "has_gpu", lambda: False)
    assert interpret_rule() is True
    monkeypatch.setattr(drv, "has_gpu", lambda: True)
    assert interpret_rule() is False
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert interpret_rule() is True
    monkeypatch.setenv("NEWT_INTERPRET", "0")
    assert interpret_rule() is False
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    monkeypatch.delenv("TRITON_INTERPRET")
    assert interpret_rule() is True

    import triton

    @triton.jit
    def k(x):
        pass

    monkeypatch.setenv("NEWT_INTERPRET", "0")
    assert k.is_interpreted() is False
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    assert k.is_interpreted() is True


KERNELS = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64}, num_warps=2)], key=["n"])
@triton.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)
    else:
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)
"""


def _kernels(tmp_path, name="dropin_kernels"):
    """The kernels above, imported (after the drop-in is on) from a file of their own."""
    import importlib.util
    import sys
    path = tmp_path / f"{name}.py"
    path.write_text(KERNELS)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _add_kernel(tmp_path):
    return _kernels(tmp_path).add_kernel


@pytest.fixture
def cpu_dropin(dropin, monkeypatch):
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    return dropin


def test_launch_on_cpu_tensors(cpu_dropin, tmp_path):
    import triton
    k = _add_kernel(tmp_path)
    x, y = torch.randn(300), torch.randn(300)
    out = torch.empty_like(x)
    k[lambda meta: (triton.cdiv(300, meta["BLOCK"]),)](x, y, out, 300, BLOCK=128)
    assert torch.equal(out, x + y)


def test_autotune_and_heuristics(cpu_dropin, tmp_path):
    import triton
    scale = _kernels(tmp_path, "dropin_kernels2").scale
    x = torch.randn(100)
    out = torch.empty_like(x)
    scale[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
    assert torch.equal(out, x * 2)
    assert scale.best_config is not None


def test_wrap_triton_triton_op_and_compiler_disable_on_cpu(cpu_dropin, tmp_path, monkeypatch):
    """torch 2.13's ``torch.library.triton_op``/``wrap_triton`` (eager and ``make_fx``) and
    ``torch.compiler.disable`` with a drop-in kernel, on the CPU build of torch."""
    import triton
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.library import triton_op, wrap_triton
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # (torch's inductor sets it)
    k = _add_kernel(tmp_path)

    @triton_op("newt_dropin_test::add", mutates_args={})
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = out.numel()
        wrap_triton(k)[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)
        return out

    x, y = torch.randn(100), torch.randn(100)
    assert torch.equal(add(x, y), x + y)
    assert torch.equal(torch.ops.newt_dropin_test.add(x, y), x + y)

    def f(x, y):
        out = torch.empty_like(x)
        n = out.numel()
        wrap_triton(k)[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=64)
        return out

    assert torch.equal(f(x, y), x + y)
    gm = make_fx(f)(x, y)
    assert "triton_kernel_wrapper" in gm.code
    assert torch.equal(gm(x, y), x + y)

    @torch.compiler.disable
    def g(x, y):
        out = torch.empty_like(x)
        k[(2,)](x, y, out, 100, BLOCK=64)
        return out

    compiled = torch.compile(lambda a, b: g(a, b) * 2, backend="eager")
    assert torch.equal(compiled(x, y), (x + y) * 2)


def test_capability_emulation_without_a_gpu(monkeypatch):

    import newt.dropin as nd
    import newt.runtime.driver as drv
    monkeypatch.setattr(drv, "has_gpu", lambda: False)
    original = torch.cuda.get_device_capability
    nd.install(capability=(9, 0))
    try:
        assert torch.cuda.get_device_capability() == (9, 0)
        assert torch.cuda.is_available() is False
    finally:
        nd.uninstall()
    assert torch.cuda.get_device_capability is original


@pytest.mark.gpu
def test_with_a_gpu_kernels_compile_and_the_driver_is_cuda(dropin, tmp_path, monkeypatch):
    import triton
    monkeypatch.delenv("NEWT_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    act = triton.runtime.driver.active
    dev = act.get_active_torch_device()
    assert dev.type == "cuda"
    major, minor = torch.cuda.get_device_capability()
    assert act.get_current_target().arch == major * 10 + minor
    assert act.utils.get_device_properties(dev.index)["multiprocessor_count"] == \
        torch.cuda.get_device_properties(dev.index).multi_processor_count
    k = _add_kernel(tmp_path)
    assert k.is_interpreted() is False
    x, y = torch.randn(5000, device=dev), torch.randn(5000, device=dev)
    out = torch.empty_like(x)
    k[(triton.cdiv(5000, 1024),)](x, y, out, 5000, BLOCK=1024)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)
