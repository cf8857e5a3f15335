"""Random numbers: nl.randint/rand are bit-identical to a plain-Python Philox; dropout."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl

from . import philox_ref as ref


@newt.jit
def randint_kernel(out_ptr, seed, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    r = nl.randint(seed, offs)
    nl.store(out_ptr + offs, r, mask=offs < n)


@pytest.mark.parametrize("seed", [0, 42, 123456789, 2 ** 40 + 17])
def test_randint_bit_exact(backend, seed):
    n = 1000
    out = backend.zeros(n, dtype=torch.uint32)
    backend.launch(randint_kernel, (newt.cdiv(n, 256),), out, seed, n, BLOCK=256)
    assert backend.get(out).tolist() == ref.randint(seed, range(n))


@newt.jit
def randint4x_kernel(out_ptr, seed, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    r0, r1, r2, r3 = nl.randint4x(seed, offs + 1000)
    nl.store(out_ptr + offs * 4, r0)
    nl.store(out_ptr + offs * 4 + 1, r1)
    nl.store(out_ptr + offs * 4 + 2, r2)
    nl.store(out_ptr + offs * 4 + 3, r3)


def test_randint4x_bit_exact(backend):
    out = backend.zeros(64 * 4, dtype=torch.uint32)
    backend.launch(randint4x_kernel, (1,), out, 7, BLOCK=64)
    want = [v for quad in ref.randint4x(7, range(1000, 1064)) for v in quad]
    assert backend.get(out).tolist() == want


@newt.jit
def rand_kernel(out_ptr, seed, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.rand(seed, offs), mask=offs < n)


def test_rand_bit_exact_and_uniform(backend):
    n = 4096
    out = backend.empty(n)
    backend.launch(rand_kernel, (n // 512,), out, 2024, n, BLOCK=512)
    got = backend.get(out)
    assert torch.equal(got, ref.rand(2024, range(n)))
    assert 0.0 <= float(got.min()) and float(got.max()) < 1.0
    assert abs(float(got.mean()) - 0.5) < 0.02


@newt.jit
def randn_kernel(out_ptr, seed, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.randn(seed, offs))


def test_randn(backend):
    n = 8192
    out = backend.empty(n)
    backend.launch(randn_kernel, (1,), out, 11, BLOCK=n)
    got = backend.get(out)
    # Box-Muller of the first two Philox outputs
    quads = ref.randint4x(11, range(n))
    u1 = ref.uniform([q[0] for q in quads]).clamp(min=1e-7)
    u2 = ref.uniform([q[1] for q in quads])
    want = torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(6.283185307179586 * u2)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert abs(float(got.mean())) < 0.05 and abs(float(got.std()) - 1) < 0.05


@newt.jit
def dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    r = nl.rand(seed, offs)
    keep = r > p
    nl.store(out_ptr + offs, nl.where(keep, x / (1 - p), 0.0), mask=mask)


def test_dropout(backend):
    n, p, seed = 10_000, 0.3, 77
    x = torch.randn(n)
    out = backend.empty(n)
    backend.launch(dropout_kernel, (newt.cdiv(n, 1024),), backend.put(x), out, n, p, seed, BLOCK=1024)
    keep = ref.rand(seed, range(n)) > p
    want = torch.where(keep, x / (1 - p), torch.zeros(()))
    torch.testing.assert_close(backend.get(out), want, rtol=1e-6, atol=0)
    assert abs(float(keep.float().mean()) - 0.7) < 0.02
