"""Atomics under contention, with and without their return values."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def atomic_kernel(ptr, val_ptr, old_ptr, n, KIND: nl.constexpr, KEEP_OLD: nl.constexpr, NBINS: nl.constexpr,
                  BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    v = nl.load(val_ptr + offs, mask=m)
    p = ptr + offs % NBINS
    if KIND == "add":
        old = nl.atomic_add(p, v, mask=m)
    elif KIND == "max":
        old = nl.atomic_max(p, v, mask=m)
    elif KIND == "min":
        old = nl.atomic_min(p, v, mask=m)
    elif KIND == "and":
        old = nl.atomic_and(p, v, mask=m)
    elif KIND == "or":
        old = nl.atomic_or(p, v, mask=m)
    elif KIND == "xor":
        old = nl.atomic_xor(p, v, mask=m)
    else:
        old = nl.atomic_xchg(p, v, mask=m)
    if KEEP_OLD:
        nl.store(old_ptr + offs, old, mask=m)


def run_atomic(backend, kind, init, vals, nbins, keep_old):
    n = vals.numel()
    mem = backend.put(init.clone())
    old = backend.zeros(n, dtype=vals.dtype)
    backend.launch(atomic_kernel, (newt.cdiv(n, 32),), mem, backend.put(vals), old, n, KIND=kind, KEEP_OLD=keep_old,
                   NBINS=nbins, BLOCK=32)
    return backend.get(mem), backend.get(old)


def serial(kind, init, vals, nbins):
    mem = list(init)
    for i, v in enumerate(vals):
        b = i % nbins
        cur = mem[b]
        mem[b] = {"add": lambda a, c: a + c, "max": max, "min": min, "and": lambda a, c: a & c,
                  "or": lambda a, c: a | c, "xor": lambda a, c: a ^ c, "xchg": lambda a, c: c}[kind](cur, v)
    return mem


@pytest.mark.parametrize("kind", ["add", "max", "min", "and", "or", "xor"])
@pytest.mark.parametrize("dt", [torch.int32, torch.int64, torch.uint32], ids=str)
@pytest.mark.parametrize("keep_old", [False, True])
def test_int_atomics_final_memory(backend, kind, dt, keep_old):
    n, nbins = 300, 7
    hi = 1000 if dt != torch.uint32 else 3_000_000_000
    lo = -1000 if dt != torch.uint32 else 0
    vals = torch.randint(lo, hi, (n,), dtype=torch.int64)
    init = torch.randint(lo, hi, (nbins,), dtype=torch.int64)
    mem, old = run_atomic(backend, kind, init.to(dt), vals.to(dt), nbins, keep_old)
    want = serial(kind, init.tolist(), vals.tolist(), nbins)
    if kind == "add" and dt == torch.uint32:
        want = [w % 2 ** 32 for w in want]
    assert mem.tolist() == want
    if keep_old:
        for b in range(nbins):
            lanes = list(range(b, n, nbins))
            assert_chain(kind, init[b].item(), [vals[i].item() for i in lanes], [old[i].item() for i in lanes],
                         mem[b].item(), dt)


OPS = {"add": lambda a, c: a + c, "max": max, "min": min, "and": lambda a, c: a & c, "or": lambda a, c: a | c,
       "xor": lambda a, c: a ^ c, "xchg": lambda a, c: c}


def assert_chain(kind, init, vals, olds, final, dt):
    """The old values must be what some serial order of the lanes saw, ending in ``final``.

    A depth-first search over the lanes whose old value equals the running value (several lanes may see the
    same value when an operation returns to an earlier state, so a greedy choice is not enough)."""
    import sys

    f = OPS[kind]
    wrap = (lambda x: x % 2 ** 32) if dt == torch.uint32 else (lambda x: x)
    n = len(olds)
    seen = set()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * n + 100))

    def search(cur, remaining):
        if not remaining:
            return cur == final
        if (cur, remaining) in seen:
            return False
        seen.add((cur, remaining))
        # a lane that saw this value and leaves it unchanged can always go now (it commutes with the rest)
        for i in range(n):
            if remaining >> i & 1 and olds[i] == cur and wrap(f(cur, vals[i])) == cur:
                return search(cur, remaining & ~(1 << i))
        for i in range(n):
            if remaining >> i & 1 and olds[i] == cur:
                if search(wrap(f(cur, vals[i])), remaining & ~(1 << i)):
                    return True
        return False

    assert search(init, (1 << n) - 1), f"{kind}: no serial order of the lanes explains the old values " \
        f"{olds[:10]}... ending in {final}"


def test_atomic_add_float_contention(backend):
    n, nbins = 4096, 16
    vals = torch.randn(n)
    mem, _ = run_atomic(backend, "add", torch.zeros(nbins), vals, nbins, False)
    want = vals.view(-1, nbins).double().sum(0).float()
    torch.testing.assert_close(mem, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_atomic_add_other_floats(backend, dt):
    n, nbins = 256, 4
    vals = (torch.rand(n) * 2).round().to(dt)  # small integers: exact in any order
    mem, _ = run_atomic(backend, "add", torch.zeros(nbins, dtype=dt), vals, nbins, False)
    assert mem.tolist() == vals.view(-1, nbins).double().sum(0).tolist()


def test_atomic_max_min_float(backend):
    n, nbins = 500, 5
    vals = torch.randn(n)
    mem, _ = run_atomic(backend, "max", torch.full((nbins,), -1e9), vals, nbins, False)
    assert mem.tolist() == vals.view(-1, nbins).amax(0).tolist()
    mem, _ = run_atomic(backend, "min", torch.full((nbins,), 1e9), vals, nbins, False)
    assert mem.tolist() == vals.view(-1, nbins).amin(0).tolist()


@newt.jit
def ticket_kernel(counter_ptr, out_ptr, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = nl.arange(0, BLOCK)
    t = nl.atomic_add(counter_ptr + offs * 0, 1)  # every lane of every program takes a ticket
    nl.store(out_ptr + pid * BLOCK + offs, t)


def test_atomic_tickets_are_unique(backend):
    counter = backend.zeros(1, dtype=torch.int32)
    out = backend.zeros(8 * 16, dtype=torch.int32)
    backend.launch(ticket_kernel, (8,), counter, out, BLOCK=16)
    assert sorted(backend.get(out).tolist()) == list(range(128))
    assert backend.get(counter).item() == 128


@newt.jit
def xchg_chain_kernel(ptr, out_ptr):
    pid = nl.program_id(0)
    old = nl.atomic_xchg(ptr, pid + 1)
    nl.store(out_ptr + pid, old)


def test_atomic_xchg_chain(backend):
    ptr = backend.zeros(1, dtype=torch.int32)
    out = backend.zeros(20, dtype=torch.int32)
    backend.launch(xchg_chain_kernel, (20,), ptr, out)
    got = backend.get(out).tolist()
    final = backend.get(ptr).item()
    # the exchanges form one chain 0 -> a -> b -> ... -> final through every program's value
    assert sorted(got + [final]) == list(range(21))


@newt.jit
def cas_counter_kernel(ptr, n_iter):
    for _ in range(n_iter):
        done = False
        while not done:
            cur = nl.load(ptr, volatile=True)
            done = nl.atomic_cas(ptr, cur, cur + 1) == cur


def test_atomic_cas_loop(backend):
    ptr = backend.zeros(1, dtype=torch.int32)
    backend.launch(cas_counter_kernel, (16,), ptr, 5)
    assert backend.get(ptr).item() == 80


@newt.jit
def spin_lock_kernel(lock_ptr, data_ptr, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    while nl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    offs = nl.arange(0, BLOCK)
    x = nl.load(data_ptr + offs)
    nl.store(data_ptr + offs, x + pid)
    nl.atomic_xchg(lock_ptr, 0)


def test_spin_lock(backend):
    lock = backend.zeros(1, dtype=torch.int32)
    data = backend.zeros(32)
    backend.launch(spin_lock_kernel, (10,), lock, data, BLOCK=32)
    assert backend.get(data).tolist() == [45.0] * 32
    assert backend.get(lock).item() == 0


@newt.jit
def masked_atomic_kernel(ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.atomic_add(ptr + offs, 1.0, mask=offs < n)


def test_masked_atomic_never_touches_memory(backend):
    ptr = backend.zeros(10)
    backend.launch(masked_atomic_kernel, (3,), ptr, 10, BLOCK=16)  # lanes 10..15 would be out of bounds
    assert backend.get(ptr).tolist() == [3.0] * 10
