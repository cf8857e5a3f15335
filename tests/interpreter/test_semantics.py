"""Behaviour the interpreter defines where the GPU leaves it open, and exact rounding details."""

from __future__ import annotations

import io

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import interpret as nri


@newt.jit
def intops_kernel(x_ptr, y_ptr, out_ptr, OP: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    y = nl.load(y_ptr + offs)
    if OP == "div":
        z = x // y
    elif OP == "mod":
        z = x % y
    elif OP == "shl":
        z = x << y
    else:
        z = x >> y
    nl.store(out_ptr + offs, z)


def run(op, x, y):
    out = torch.empty_like(x)
    nri.launch_jit(intops_kernel, (1,), (x, y, out), {"OP": op, "BLOCK": x.numel()})
    return out.tolist()


def test_division_by_zero_and_overflow():
    mn = -2 ** 31
    x = torch.tensor([7, -7, mn, mn], dtype=torch.int32)
    y = torch.tensor([0, 0, -1, 2], dtype=torch.int32)
    assert run("div", x, y) == [-1, -1, mn, mn // 2]  # x // 0 = -1 (all bits), MIN // -1 wraps to MIN
    assert run("mod", x, y) == [7, -7, 0, 0]  # x % 0 = x
    u = torch.tensor([7, 0, 2 ** 32 - 1, 5], dtype=torch.uint32)
    v = torch.tensor([0, 0, 2, 0], dtype=torch.uint32)
    assert run("div", u, v) == [2 ** 32 - 1, 2 ** 32 - 1, 2 ** 31 - 1, 2 ** 32 - 1]
    assert run("mod", u, v) == [7, 0, 1, 5]


def test_wide_shifts():
    x = torch.tensor([1, -8, 5, -1], dtype=torch.int32)
    s = torch.tensor([32, 33, 40, 31], dtype=torch.int32)
    assert run("shl", x, s) == [0, 0, 0, -2 ** 31]
    assert run("shr", x, s) == [0, -1, 0, -1]  # arithmetic: the sign fills
    u = torch.tensor([2 ** 63 + 5, 2 ** 64 - 1, 12, 1], dtype=torch.uint64)
    t = torch.tensor([1, 64, 70, 0], dtype=torch.uint64)
    assert run("shr", u, t) == [(2 ** 63 + 5) >> 1, 0, 0, 1]  # logical for unsigned


@newt.jit
def nan_reduce_kernel(x_ptr, out_ptr, N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    nl.store(out_ptr, nl.max(x, axis=0))
    nl.store(out_ptr + 1, nl.min(x, axis=0))
    nl.store(out_ptr + 2, nl.argmax(x, axis=0).to(nl.float32))
    nl.store(out_ptr + 3, nl.argmin(x, axis=0).to(nl.float32))


def test_reductions_ignore_nan():
    x = torch.tensor([1.0, float("nan"), 5.0, -2.0, float("nan"), 5.0, 0.0, -2.0])
    out = torch.zeros(4)
    nri.launch_jit(nan_reduce_kernel, (1,), (x, out), {"N": 8})
    assert out.tolist() == [5.0, -2.0, 2.0, 3.0]
    x = torch.full((8,), float("nan"))
    nri.launch_jit(nan_reduce_kernel, (1,), (x, out), {"N": 8})
    assert torch.isnan(out[0]) and torch.isnan(out[1])


@newt.jit
def tie_kernel(x_ptr, out_ptr, N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    nl.store(out_ptr, nl.argmax(x, axis=0, tie_break_left=False))
    v, i = nl.max(x, axis=0, return_indices=True, return_indices_tie_break_left=True)
    nl.store(out_ptr + 1, i)


def test_argmax_right_tie_break():
    x = torch.tensor([1, 9, 3, 9, 9, 2, 0, 1], dtype=torch.int32)
    out = torch.zeros(2, dtype=torch.int32)
    nri.launch_jit(tie_kernel, (1,), (x, out), {"N": 8})
    assert out.tolist() == [4, 1]


@newt.jit
def tf32_kernel(a_ptr, b_ptr, out_ptr, N: nl.constexpr):
    r = nl.arange(0, N)
    a = nl.load(a_ptr + r[:, None] * N + r[None, :])
    b = nl.load(b_ptr + r[:, None] * N + r[None, :])
    nl.store(out_ptr + r[:, None] * N + r[None, :], nl.dot(a, b))


def test_tf32_rounds_inputs_to_nearest_ties_away():
    a = torch.randn(16, 16)
    b = torch.randn(16, 16)
    out = torch.zeros(16, 16)
    nri.launch_jit(tf32_kernel, (1,), (a, b, out), {"N": 16})

    def rna(x):  # 10 mantissa bits, ties away from zero
        return ((x.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)
    assert torch.equal(out, rna(a) @ rna(b))
    # a value exactly halfway between two tf32 values rounds away from zero
    half = torch.tensor([1.0 + 2 ** -11, -(1.0 + 2 ** -11)])
    assert rna(half).tolist() == [1.0 + 2 ** -10, -(1.0 + 2 ** -10)]


@newt.jit
def print_kernel(x_ptr, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    x = nl.load(x_ptr + pid * BLOCK + nl.arange(0, BLOCK))
    if pid == 1:
        nl.device_print("x: ", x)
    nl.device_print("pid ", pid, hex=True)


def test_device_print_one_line_per_element():
    x = torch.tensor([0.5, 1.0, 2.25, -3.0])
    buf = io.StringIO()
    nri.launch_jit(print_kernel, (2,), (x,), {"BLOCK": 2}, stdout=buf)
    assert buf.getvalue().splitlines() == [
        "pid (0, 0, 0) idx () pid 0x00000000",
        "pid (1, 0, 0) idx (0) x: 2.25",
        "pid (1, 0, 0) idx (1) x: -3",
        "pid (1, 0, 0) idx () pid 0x00000001",
    ]


def test_device_print_compact(monkeypatch, capsys):
    monkeypatch.setenv("NEWT_INTERPRET_PRINT", "compact")
    x = torch.tensor([0.5, 1.0, 2.25, -3.0])
    nri.launch_jit(print_kernel, (2,), (x,), {"BLOCK": 2})
    assert capsys.readouterr().out.splitlines() == [
        "pid (0, 0, 0) pid 0x00000000",
        "pid (1, 0, 0) x: [2.25, -3]",
        "pid (1, 0, 0) pid 0x00000001",
    ]


@newt.jit
def static_print_kernel(x_ptr, BLOCK: nl.constexpr):
    nl.static_print("BLOCK is", BLOCK)
    nl.store(x_ptr + nl.arange(0, BLOCK), 1.0)


def test_static_print_once_per_specialization(capsys):
    x = torch.zeros(8)
    nri.launch_jit(static_print_kernel, (1,), (x,), {"BLOCK": 8})
    nri.launch_jit(static_print_kernel, (1,), (x,), {"BLOCK": 8})
    assert capsys.readouterr().out.count("BLOCK is 8") == 1


@newt.jit
def hints_kernel(x_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    offs = nl.max_contiguous(nl.multiple_of(offs, BLOCK), BLOCK)
    nl.debug_barrier()
    x = nl.load(x_ptr + offs, mask=offs < n)
    nl.store(x_ptr + offs, x * 2, mask=offs < n)


def test_hints_and_barrier_change_nothing():
    x = torch.arange(20, dtype=torch.float32)
    nri.launch_jit(hints_kernel, (3,), (x, 20), {"BLOCK": 8})
    assert x.tolist() == [2.0 * i for i in range(20)]


@newt.jit
def fp8_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.load(x_ptr + offs).to(nl.float8e5))


def test_fp8_conversion_saturates():
    x = torch.tensor([1e6, -1e6, float("inf"), float("-inf"), float("nan"), 57344.0, 61440.0, 1.0])
    out = torch.zeros(8, dtype=torch.float8_e5m2)
    nri.launch_jit(fp8_kernel, (1,), (x, out), {"BLOCK": 8})
    got = out.float().tolist()
    assert got[:4] == [57344.0, -57344.0, 57344.0, -57344.0]
    assert got[4] != got[4] and got[5:] == [57344.0, 57344.0, 1.0]


@pytest.mark.parametrize("value,want", [(0.1, 0.0999755859375), (65520.0, float("inf")), (65519.99, 65504.0),
                                        (2.0 ** -25, 0.0), (2.0 ** -25 + 2.0 ** -40, 2.0 ** -24)])
def test_fp16_constants_round_once(value, want):
    from newt.interpreter.dtypes import python_constant
    assert python_constant(value, nl.float16).item() == want
