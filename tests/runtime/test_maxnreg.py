"""``maxnreg`` (Triton's launch option and ``Config`` field): a registers-per-thread cap, compiled with no GPU.

CUDA allows ``__maxnreg__(n)`` or ``__launch_bounds__`` on a kernel, not both: with a cap the kernel is declared
``__maxnreg__`` and ptxas honours it (the cubin's register count says so).  It was accepted by ``newt.Config`` and
silently dropped before, and refused as a launch keyword.
"""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import driver

from .conftest import needs_backend

pytestmark = needs_backend


@newt.jit
def busy(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = nl.exp(x) * nl.sin(x) + nl.cos(x * x)
    nl.store(out_ptr + offs, y / (1.0 + nl.sum(y, axis=0)), mask=offs < n)


SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_compile_with_maxnreg_caps_the_registers(target, isolated_cache):
    free = newt.compile(busy, signature=SIG, constexprs={"BLOCK": 8192}, target=target, num_warps=4)
    capped = newt.compile(busy, signature=SIG, constexprs={"BLOCK": 8192}, target=target, num_warps=4, maxnreg=32)
    assert free.metadata.n_regs > 32, free.metadata.n_regs  # (else the test shows nothing)
    assert capped.metadata.n_regs <= 32 and capped.metadata.maxnreg == 32
    assert "__maxnreg__(32)" in capped.asm["cuda"] and "__launch_bounds__" not in capped.asm["cuda"]
    assert "__launch_bounds__(128" in free.asm["cuda"] and free.metadata.maxnreg is None
    assert capped.cache_key != free.cache_key


@pytest.mark.parametrize("bad", [0, 256, 3.5, True, "32"])
def test_maxnreg_out_of_range_is_a_clear_error(bad):
    with pytest.raises(ValueError, match=r"busy: maxnreg must be an int from 1 to 255"):
        newt.compile(busy, signature=SIG, constexprs={"BLOCK": 256}, maxnreg=bad)


def test_launch_keyword_maxnreg_is_its_own_specialization(monkeypatch, isolated_cache):
    monkeypatch.setattr(driver, "_HAS_GPU", False)
    k = newt.jit(busy.fn)
    a = k.warmup(torch.float32, torch.float32, 8192, BLOCK=8192, grid=(1,))
    b = k.warmup(torch.float32, torch.float32, 8192, BLOCK=8192, grid=(1,), maxnreg=40)
    c = k.warmup(torch.float32, torch.float32, 8192, BLOCK=8192, grid=(1,), maxnreg=40)
    assert a is not b and b is c  # cached under a key with the cap
    assert b.metadata.maxnreg == 40 and b.metadata.n_regs <= 40 < a.metadata.n_regs
    with pytest.raises(ValueError, match="maxnreg must be an int"):
        k.warmup(torch.float32, torch.float32, 8192, BLOCK=8192, grid=(1,), maxnreg=-1)


def test_config_maxnreg_reaches_the_launch():
    cfg = newt.Config({"BLOCK": 1024}, num_warps=4, maxnreg=64)
    assert cfg.all_kwargs() == {"BLOCK": 1024, "num_warps": 4, "num_stages": 3, "maxnreg": 64}
    assert "maxnreg: 64" in str(cfg)
    assert "maxnreg" not in newt.Config({"BLOCK": 1024}).all_kwargs()


def test_preset_with_maxnreg_keeps_the_python_dispatch(monkeypatch, isolated_cache):
    """The compiled dispatcher keys num_warps / num_stages / num_ctas only: a preset with a cap is launched by
    the generated Python path (whose key has the cap), never by a dispatcher that would find the uncapped build."""
    monkeypatch.setattr(driver, "_HAS_GPU", False)
    k = newt.jit(busy.fn)
    fast = k.preset_launcher({"BLOCK": 8192, "num_warps": 4, "maxnreg": 48})
    assert fast is not None and type(fast).__name__ != "Dispatcher"
    ck = fast((1,), torch.float32, torch.float32, 8192, warmup=True)
    assert ck.metadata.maxnreg == 48 and ck.metadata.n_regs <= 48


def test_interpreter_accepts_and_checks_maxnreg():
    k = newt.jit(busy.fn, interpret=True)
    x = torch.linspace(-1, 1, 100)
    out = torch.empty_like(x)
    k[(1,)](x, out, 100, BLOCK=128, maxnreg=32)
    y = torch.exp(x) * torch.sin(x) + torch.cos(x * x)
    total = y.sum() + 28  # the 28 lanes past n load 0.0: exp(0) * sin(0) + cos(0) = 1 each
    torch.testing.assert_close(out, y / (1 + total), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="maxnreg must be an int"):
        k[(1,)](x, out, 100, BLOCK=128, maxnreg=1000)


@pytest.mark.gpu
def test_capped_kernel_runs_and_agrees_on_the_gpu():
    x = torch.linspace(-1, 1, 5000, device="cuda")
    out, ref = torch.empty_like(x), torch.empty_like(x)
    busy[(1,)](x, ref, 5000, BLOCK=8192)
    busy[(1,)](x, out, 5000, BLOCK=8192, maxnreg=32)
    torch.testing.assert_close(out, ref)
