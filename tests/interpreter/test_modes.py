"""Vectorized vs sequential execution: the rule, overrides, batching, program-order atomics."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt import interpreter as ni
from newt.interpreter import executor
from newt.runtime import interpret as nri


@newt.jit
def add_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@newt.jit
def hist_kernel(x_ptr, h_ptr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.atomic_add(h_ptr + nl.load(x_ptr + offs), 1)  # result unused


@newt.jit
def ticket_kernel(c_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    t = nl.atomic_add(c_ptr + offs * 0, 1)
    nl.store(out_ptr + offs, t)


@newt.jit
def volatile_kernel(flag_ptr, out_ptr):
    nl.store(out_ptr + nl.program_id(0), nl.load(flag_ptr, volatile=True))


def mode_of(kernel, args, kw=None):
    fn, _ = nri.build(kernel, args, kw or {})
    return ni.execution_mode(fn)


def test_the_rule():
    x = torch.zeros(64, dtype=torch.int32)
    assert mode_of(add_kernel, (x, x, 64), {"BLOCK": 32}) == "vectorized"
    assert mode_of(hist_kernel, (x, x), {"BLOCK": 32}) == "vectorized"
    assert mode_of(ticket_kernel, (x, x), {"BLOCK": 32}) == "sequential"
    assert mode_of(volatile_kernel, (x, x)) == "sequential"


def test_overrides(monkeypatch):
    x = torch.zeros(64, dtype=torch.int32)
    fn, _ = nri.build(ticket_kernel, (x, x), {"BLOCK": 32})
    assert ni.execution_mode(fn, "vectorized") == "vectorized"
    monkeypatch.setenv("NEWT_INTERPRET_MODE", "vectorized")
    assert ni.execution_mode(fn) == "vectorized"
    monkeypatch.setenv("NEWT_INTERPRET_MODE", "sequential")
    fn2, _ = nri.build(add_kernel, (x, x, 64), {"BLOCK": 32})
    assert ni.execution_mode(fn2) == "sequential"
    with pytest.raises(ValueError, match="mode must be"):
        ni.execution_mode(fn2, "parallel")


def test_atomics_apply_in_program_order():
    # per element, lanes apply one at a time in program order: program 0's lanes first, row-major
    c = torch.zeros(1, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    for mode in ("sequential", "vectorized"):
        c.zero_()
        nri.launch_jit(ticket_kernel, (4,), (c, out), {"BLOCK": 16}, mode=mode)
        assert out.tolist() == list(range(64)), mode


@newt.jit
def float_old_kernel(p_ptr, v_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    old = nl.atomic_add(p_ptr + offs % 3, nl.load(v_ptr + offs))
    nl.store(out_ptr + offs, old)


def test_float_atomics_round_each_step_in_order():
    v = torch.randn(96).half()
    p = torch.zeros(3, dtype=torch.float16)
    out = torch.zeros(96, dtype=torch.float16)
    nri.launch_jit(float_old_kernel, (3,), (p, v, out), {"BLOCK": 32}, mode="vectorized")
    acc = [torch.tensor(0.0, dtype=torch.float16)] * 3
    want = []
    for i, x in enumerate(v):
        want.append(acc[i % 3])
        acc[i % 3] = acc[i % 3] + x  # fp16 + fp16, rounded each time
    assert torch.equal(out, torch.stack(want)) and torch.equal(p, torch.stack(acc))


@newt.jit
def divergent_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + pid * BLOCK + offs)
    i = 0
    while nl.max(x, axis=0) > 1.0:
        if i % 2 == 0:
            x = x * 0.5
        else:
            x = x - 0.25
        i += 1
    for j in range(0, pid):
        x += j
    nl.store(out_ptr + pid * BLOCK + offs, x + i)


@pytest.mark.parametrize("lanes", [1 << 20, 64, 1])
def test_modes_and_batches_agree(monkeypatch, lanes):
    monkeypatch.setattr(executor, "LANE_BUDGET", lanes)
    x = torch.rand(10, 16) * torch.arange(1, 11)[:, None] * 5
    ref = torch.zeros(10, 16)
    nri.launch_jit(divergent_kernel, (10,), (x, ref), {"BLOCK": 16}, mode="sequential")
    out = torch.zeros(10, 16)
    nri.launch_jit(divergent_kernel, (10,), (x, out), {"BLOCK": 16}, mode="vectorized")
    assert torch.equal(out, ref)
    # and both match plain Python
    for p in range(10):
        r = x[p].clone()
        i = 0
        while float(r.max()) > 1.0:
            r = r * 0.5 if i % 2 == 0 else r - 0.25
            i += 1
        for j in range(p):
            r += j
        torch.testing.assert_close(ref[p], r + i)


def test_histogram_contention_vectorized():
    x = torch.randint(0, 5, (4096,), dtype=torch.int32)
    h = torch.zeros(5, dtype=torch.int32)
    nri.launch_jit(hist_kernel, (16,), (x, h), {"BLOCK": 256})
    assert torch.equal(h, torch.bincount(x, minlength=5).int())
