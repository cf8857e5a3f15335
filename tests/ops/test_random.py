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


@newt.jit
def randint_offsets64_kernel(out_ptr, seed, base, BLOCK: nl.constexpr):
    i = nl.arange(0, BLOCK)
    offs = base + i.to(nl.int64)  # int64 offsets: a 64-bit Philox counter
    nl.store(out_ptr + i, nl.randint(seed, offs))


@pytest.mark.parametrize("base", [0, 2 ** 32 - 3, 5 * 2 ** 40 + 11])
def test_randint_int64_offsets_bit_exact(backend, base):
    seed = 2 ** 35 + 99
    out = backend.zeros(64, dtype=torch.uint32)
    backend.launch(randint_offsets64_kernel, (1,), out, seed, base, BLOCK=64)
    assert backend.get(out).tolist() == ref.randint64_offsets(seed, range(base, base + 64))


@newt.jit
def philox64_kernel(out_ptr, seed, BLOCK: nl.constexpr):
    i = nl.arange(0, BLOCK).to(nl.uint64) + 7
    z = i * 0
    r0, r1, r2, r3 = nl.philox(seed, i, z, z, z)
    nl.store(out_ptr + nl.arange(0, BLOCK) * 2, r0.to(nl.int64, bitcast=True))
    nl.store(out_ptr + nl.arange(0, BLOCK) * 2 + 1, nl.uint_to_uniform_float(r3).to(nl.float64).to(nl.int64,
                                                                                                    bitcast=True))


def test_philox_64bit_counters(backend):
    seed = 12345
    out = backend.zeros(2 * 32, dtype=torch.int64)
    backend.launch(philox64_kernel, (1,), out, seed, BLOCK=32)
    got = backend.get(out).view(32, 2)
    for j in range(32):
        r = ref.philox64(seed, 7 + j)
        assert int(got[j, 0]) & ref.M64 == r[0]
        x = r[3] - (1 << 64) if r[3] >= 1 << 63 else r[3]
        x = -x - 1 if x < 0 else x
        want = torch.tensor(x, dtype=torch.int64).to(torch.float32) * torch.tensor(1.0842020432385337e-19)
        assert got[j, 1].view(torch.float64).item() == pytest.approx(float(want), rel=1e-6)


def test_64bit_philox_compiles_for_sm80_and_sm90a():
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.frontend import build_ir
    P = nl.pointer_type
    kernels = [(randint_offsets64_kernel, dict(out_ptr=P(nl.uint32), seed=nl.int64, base=nl.int64)),
               (philox64_kernel, dict(out_ptr=P(nl.int64), seed=nl.int32))]
    for k, types in kernels:
        for target in ("sm_80", "sm_90a"):
            f = build_ir(k, types, dict(BLOCK=64))
            assert compile_cuda(generate_cuda(f, target, 4, 3), target).cubin
