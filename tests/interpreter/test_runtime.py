"""The interpreter behind ``kernel[grid](...)``: switches, launch_jit, autotune and heuristics on the CPU."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt import interpreter as ni
from newt.runtime import interpret as nri


def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m) + nl.load(y_ptr + offs, mask=m), mask=m)


add_interp = newt.jit(interpret=True)(_add)
add_plain = newt.jit(_add)
add_never = newt.jit(interpret=False)(_add)


def test_is_enabled(monkeypatch):
    monkeypatch.delenv("NEWT_INTERPRET", raising=False)
    assert ni.is_enabled(add_interp) and not ni.is_enabled(add_plain) and not ni.is_enabled()
    for v in ("1", "true", "on", "YES"):
        monkeypatch.setenv("NEWT_INTERPRET", v)
        assert ni.is_enabled(add_plain) and ni.is_enabled()
    assert not ni.is_enabled(add_never)  # the decorator's explicit choice wins
    monkeypatch.setenv("NEWT_INTERPRET", "0")
    assert not ni.is_enabled(add_plain)


def test_kernel_launch_goes_to_the_interpreter():
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.empty(1000)
    add_interp[(newt.cdiv(1000, 256),)](x, y, out, 1000, BLOCK=256)
    assert torch.equal(out, x + y)


def test_environment_switch(monkeypatch):
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    k = newt.jit(_add)  # decided when the kernel is first launched
    x, y = torch.randn(300), torch.randn(300)
    out = torch.empty(300)
    k[lambda meta: (newt.cdiv(300, meta["BLOCK"]),)](x, y, out, 300, BLOCK=128, num_warps=2)
    assert torch.equal(out, x + y)


def test_launch_jit_grid_callable_and_options():
    x, y = torch.randn(100), torch.randn(100)
    out = torch.empty(100)
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (newt.cdiv(meta["n"], meta["BLOCK"]),)
    fn = nri.launch_jit(add_plain, grid, (x, y, out, 100), {"BLOCK": 32, "num_warps": 8, "num_stages": 2})
    assert torch.equal(out, x + y)
    assert seen["BLOCK"] == 32 and seen["n"] == 100 and seen["num_warps"] == 8
    assert fn.name == "_add"


def test_ir_is_cached_per_specialization():
    x, y = torch.randn(64), torch.randn(64)
    out = torch.empty(64)
    f1, _ = nri.build(add_plain, (x, y, out, 64), {"BLOCK": 32})
    f2, _ = nri.build(add_plain, (x, y, out, 64), {"BLOCK": 32})
    f3, _ = nri.build(add_plain, (x, y, out, 64), {"BLOCK": 64})
    assert f1 is f2 and f1 is not f3


@newt.autotune(configs=[newt.Config({"BLOCK": 32}, num_warps=2), newt.Config({"BLOCK": 128}, num_warps=4)],
               key=["n"])
@newt.jit(interpret=True)
def tuned_add(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m) + nl.load(y_ptr + offs, mask=m), mask=m)


def test_autotune_runs_without_a_gpu():
    x, y = torch.randn(500), torch.randn(500)
    out = torch.empty(500)
    tuned_add[lambda meta: (newt.cdiv(500, meta["BLOCK"]),)](x, y, out, 500)
    assert torch.equal(out, x + y)


@newt.heuristics({"BLOCK": lambda args: 64 if args["n"] < 1000 else 256})
@newt.jit(interpret=True)
def heur_add(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m) + nl.load(y_ptr + offs, mask=m), mask=m)


def test_heuristics_run_without_a_gpu():
    x, y = torch.randn(700), torch.randn(700)
    out = torch.empty(700)
    heur_add[lambda meta: (newt.cdiv(700, meta["BLOCK"]),)](x, y, out, 700)
    assert torch.equal(out, x + y)


def test_no_cuda_needed(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the interpreter must not touch CUDA")
    monkeypatch.setattr(torch.cuda, "is_available", boom)
    monkeypatch.setattr(torch.cuda, "synchronize", boom)
    x, y = torch.randn(64), torch.randn(64)
    out = torch.empty(64)
    nri.launch_jit(add_plain, (1,), (x, y, out, 64), {"BLOCK": 64})
    assert torch.equal(out, x + y)


def test_compile_errors_surface_unchanged():
    @newt.jit
    def bad(x_ptr, BLOCK: nl.constexpr):
        nl.store(x_ptr + nl.arange(0, BLOCK), 1.0)
    with pytest.raises(newt.CompilationError, match="power of two"):
        nri.launch_jit(bad, (1,), (torch.zeros(3),), {"BLOCK": 3})
