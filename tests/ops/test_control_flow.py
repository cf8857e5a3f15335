"""Control flow: for/while/if with conditions and trip counts that differ between programs,
break/continue/early return, static_range, nested loops."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def divergent_for_kernel(n_ptr, out_ptr):
    pid = nl.program_id(0)
    n = nl.load(n_ptr + pid)
    acc = 0
    for i in range(pid, n, 2):
        acc += i
    nl.store(out_ptr + pid, acc)


def test_for_trip_count_per_program(backend):
    n = torch.tensor([0, 5, 10, 3, 17, 8, 1, 30], dtype=torch.int32)
    out = backend.zeros(8, dtype=torch.int32)
    backend.launch(divergent_for_kernel, (8,), backend.put(n), out)
    want = [sum(range(p, int(n[p]), 2)) for p in range(8)]
    assert backend.get(out).tolist() == want


@newt.jit
def negative_step_kernel(out_ptr, lo, hi):
    pid = nl.program_id(0)
    acc = 0
    cnt = 0
    for i in range(hi + pid, lo, -3):
        acc = acc * 3 + i
        cnt += 1
    nl.store(out_ptr + 2 * pid, acc)
    nl.store(out_ptr + 2 * pid + 1, cnt)


def test_for_negative_step(backend):
    out = backend.zeros(8, dtype=torch.int32)
    backend.launch(negative_step_kernel, (4,), out, 2, 20)
    want = []
    for p in range(4):
        acc = cnt = 0
        for i in range(20 + p, 2, -3):
            acc = acc * 3 + i
            cnt += 1
        want += [acc, cnt]
    assert backend.get(out).tolist() == want


@newt.jit
def while_kernel(x_ptr, out_ptr, limit):
    pid = nl.program_id(0)
    x = nl.load(x_ptr + pid)
    steps = 0
    while x != 1 and steps < limit:
        if x % 2 == 0:
            x = x // 2
        else:
            x = 3 * x + 1
        steps += 1
    nl.store(out_ptr + pid, steps)


def collatz(v, limit):
    s = 0
    while v != 1 and s < limit:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        s += 1
    return s


def test_data_dependent_while(backend):
    x = torch.arange(1, 65, dtype=torch.int32)
    out = backend.zeros(64, dtype=torch.int32)
    backend.launch(while_kernel, (64,), backend.put(x), out, 50)
    assert backend.get(out).tolist() == [collatz(v, 50) for v in range(1, 65)]


@newt.jit
def break_continue_kernel(x_ptr, out_ptr, n):
    pid = nl.program_id(0)
    acc = 0
    for i in range(0, n):
        v = nl.load(x_ptr + pid * n + i)
        if v < 0:
            break
        if v % 3 == 0:
            continue
        acc += v
    nl.store(out_ptr + pid, acc)


def test_break_and_continue(backend):
    n = 12
    x = torch.randint(-2, 20, (6, n), dtype=torch.int32)
    x[0] = torch.arange(n, dtype=torch.int32)
    out = backend.zeros(6, dtype=torch.int32)
    backend.launch(break_continue_kernel, (6,), backend.put(x), out, n)
    want = []
    for row in x.tolist():
        acc = 0
        for v in row:
            if v < 0:
                break
            if v % 3 == 0:
                continue
            acc += v
        want.append(acc)
    assert backend.get(out).tolist() == want


@newt.jit
def while_break_kernel(x_ptr, out_ptr, n):
    pid = nl.program_id(0)
    i = 0
    found = -1
    while i < n:
        if nl.load(x_ptr + pid * n + i) == 7:
            found = i
            break
        i += 1
    nl.store(out_ptr + pid, found)


def test_while_break(backend):
    n = 16
    x = torch.randint(0, 10, (8, n), dtype=torch.int32)
    x[3] = 0
    out = backend.zeros(8, dtype=torch.int32)
    backend.launch(while_break_kernel, (8,), backend.put(x), out, n)
    want = [row.index(7) if 7 in row else -1 for row in x.tolist()]
    assert backend.get(out).tolist() == want


@newt.jit
def early_return_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    if pid * BLOCK >= n:
        return
    x = nl.load(x_ptr + offs, mask=offs < n)
    if nl.sum(x, axis=0) > 0:
        nl.store(out_ptr + offs, x * 2, mask=offs < n)
        return
    nl.store(out_ptr + offs, -x, mask=offs < n)


def test_early_return(backend):
    n = 100
    x = torch.randn(n)
    out = backend.zeros(n + 64)
    backend.launch(early_return_kernel, (6,), backend.put(x), out, n, BLOCK=32)
    got = backend.get(out)
    for p in range(4):
        s = slice(p * 32, min(n, p * 32 + 32))
        want = x[s] * 2 if float(x[s].sum()) > 0 else -x[s]
        torch.testing.assert_close(got[s], want)
    assert not got[n:].any()


@newt.jit
def static_range_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr, STEPS: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    acc = nl.zeros([BLOCK], dtype=nl.float32)
    for s in nl.static_range(STEPS):
        acc += x * (s + 1)
        if s % 2 == 1:
            acc = acc - 1.0
    nl.store(out_ptr + offs, acc)


def test_static_range(backend):
    x = torch.randn(16)
    out = backend.empty(16)
    backend.launch(static_range_kernel, (1,), backend.put(x), out, BLOCK=16, STEPS=5)
    want = torch.zeros(16)
    for s in range(5):
        want = want + x * (s + 1)
        if s % 2 == 1:
            want = want - 1
    torch.testing.assert_close(backend.get(out), want)


@newt.jit
def nested_kernel(out_ptr, n):
    pid = nl.program_id(0)
    total = 0
    for i in range(0, pid + 1):
        j = 0
        while j < i:
            if (i + j) % 2 == 0:
                total += i * j
            else:
                total -= 1
            j += 1
    nl.store(out_ptr + pid, total + n)


def test_nested_loops_and_ifs(backend):
    out = backend.zeros(10, dtype=torch.int32)
    backend.launch(nested_kernel, (10,), out, 1000)
    want = []
    for p in range(10):
        t = 0
        for i in range(p + 1):
            for j in range(i):
                t += i * j if (i + j) % 2 == 0 else -1
        want.append(t + 1000)
    assert backend.get(out).tolist() == want


@newt.jit
def block_if_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    m = nl.max(x, axis=0)
    if m > 0.5:
        y = x - m
    elif m > 0.0:
        y = x * 2.0
    else:
        y = nl.zeros([BLOCK], dtype=nl.float32) + pid
    nl.store(out_ptr + offs, y)


def test_if_elif_else_blocks(backend):
    x = torch.rand(8, 16) - torch.tensor([0, 0.6, 1, 0.95, 2, 0.9, 1.5, 0.2])[:, None]
    out = backend.empty(8, 16)
    backend.launch(block_if_kernel, (8,), backend.put(x), out, BLOCK=16)
    want = []
    for p in range(8):
        m = float(x[p].max())
        want.append(x[p] - m if m > 0.5 else x[p] * 2 if m > 0 else torch.full((16,), float(p)))
    torch.testing.assert_close(backend.get(out), torch.stack(want))


@newt.jit
def ternary_kernel(x_ptr, out_ptr, n):
    pid = nl.program_id(0)
    v = nl.load(x_ptr + pid)
    r = v * 2 if v > 0 else -v
    nl.store(out_ptr + pid, r if pid < n else 0)


@pytest.mark.parametrize("n", [3, 8])
def test_conditional_expression(backend, n):
    x = torch.tensor([1, -2, 3, -4, 5, -6, 7, -8], dtype=torch.int32)
    out = backend.zeros(8, dtype=torch.int32)
    backend.launch(ternary_kernel, (8,), backend.put(x), out, n)
    want = [(v * 2 if v > 0 else -v) if p < n else 0 for p, v in enumerate(x.tolist())]
    assert backend.get(out).tolist() == want
