"""The rest of the language surface: full/zeros_like/full_like, view, broadcast, nl.range options,
rand4x/randn4x, softmax/sigmoid/cdiv/swizzle2d helpers, boolean logic, max with indices."""

from __future__ import annotations

import torch

import newt
import newt.language as nl

from . import philox_ref as ref


@newt.jit
def creation_kernel(out_ptr, v, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    a = nl.full([BLOCK], 3, nl.int32)
    b = nl.full([BLOCK], v, nl.float32)
    c = nl.zeros_like(b) + nl.full_like(b, 0.5)
    nl.store(out_ptr + offs, a.to(nl.float32) + b + c)
    nl.store(out_ptr + BLOCK + offs, nl.zeros([BLOCK], dtype=nl.float16).to(nl.float32) + nl.cdiv(offs, 3))


def test_creation(backend):
    out = backend.empty(32)
    backend.launch(creation_kernel, (1,), out, 1.25, BLOCK=16)
    got = backend.get(out)
    assert got[:16].tolist() == [4.75] * 16
    assert got[16:].tolist() == [float((i + 2) // 3) for i in range(16)]


@newt.jit
def view_broadcast_kernel(x_ptr, out_ptr):
    i = nl.arange(0, 4)
    j = nl.arange(0, 8)
    x = nl.load(x_ptr + i[:, None] * 8 + j[None, :])
    col = nl.load(x_ptr + i)
    a, b = nl.broadcast(x, col[:, None])
    v = nl.view(a + b, (32,))  # the element order of a view is free: store the sum of all
    nl.store(out_ptr, nl.sum(v, axis=0))
    nl.store(out_ptr + 1, nl.sum(b, axis=None))


def test_view_and_broadcast(backend):
    x = torch.arange(32, dtype=torch.float32)
    out = backend.empty(2)
    backend.launch(view_broadcast_kernel, (1,), backend.put(x), out)
    col = x[:4][:, None].expand(4, 8)
    assert backend.get(out).tolist() == [float((x.view(4, 8) + col).sum()), float(col.sum())]


@newt.jit
def range_options_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    acc = nl.zeros([BLOCK], dtype=nl.float32)
    for start in nl.range(0, n, BLOCK, num_stages=3, loop_unroll_factor=2):
        offs = start + nl.arange(0, BLOCK)
        acc += nl.load(x_ptr + offs, mask=offs < n, other=0.0)
    nl.store(out_ptr + nl.arange(0, BLOCK), acc)


def test_range_with_pipelining_options(backend):
    x = torch.randn(1000)
    out = backend.empty(64)
    backend.launch(range_options_kernel, (1,), backend.put(x), out, 1000, BLOCK=64)
    want = torch.cat([x, torch.zeros(1024 - 1000)]).view(-1, 64).sum(0)
    torch.testing.assert_close(backend.get(out), want, rtol=1e-5, atol=1e-5)


@newt.jit
def rand4x_kernel(out_ptr, seed, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    a, b, c, d = nl.rand4x(seed, offs)
    nl.store(out_ptr + offs, a)
    nl.store(out_ptr + BLOCK + offs, d)
    n1, n2, n3, n4 = nl.randn4x(seed, offs)
    nl.store(out_ptr + 2 * BLOCK + offs, n3)


def test_rand4x_randn4x(backend):
    B = 128
    out = backend.empty(3 * B)
    backend.launch(rand4x_kernel, (1,), out, 99, BLOCK=B)
    got = backend.get(out)
    quads = ref.randint4x(99, range(B))
    assert torch.equal(got[:B], ref.uniform([q[0] for q in quads]))
    assert torch.equal(got[B:2 * B], ref.uniform([q[3] for q in quads]))
    u3 = ref.uniform([q[2] for q in quads]).clamp(min=1e-7)
    u4 = ref.uniform([q[3] for q in quads])
    want = torch.sqrt(-2.0 * torch.log(u3)) * torch.cos(6.283185307179586 * u4)
    torch.testing.assert_close(got[2 * B:], want, rtol=1e-4, atol=1e-4)


@newt.jit
def softmax_rows_kernel(x_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :])
    nl.store(out_ptr + rm[:, None] * N + rn[None, :], nl.softmax(x, 1, keep_dims=True))
    nl.store(out_ptr + M * N + rm[:, None] * N + rn[None, :], nl.sigmoid(x))


def test_softmax_and_sigmoid_helpers(backend):
    x = torch.randn(4, 32) * 4
    out = backend.empty(2 * 4 * 32)
    backend.launch(softmax_rows_kernel, (1,), backend.put(x), out, M=4, N=32)
    got = backend.get(out)
    torch.testing.assert_close(got[:128].view(4, 32), torch.softmax(x, 1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[128:].view(4, 32), torch.sigmoid(x), rtol=1e-5, atol=1e-6)


@newt.jit
def swizzle_kernel(out_ptr, GROUP: nl.constexpr):
    i = nl.program_id(0)
    j = nl.program_id(1)
    a, b = nl.swizzle2d(i, j, nl.num_programs(0), nl.num_programs(1), GROUP)
    lin = i * nl.num_programs(1) + j
    nl.store(out_ptr + lin * 2, a)
    nl.store(out_ptr + lin * 2 + 1, b)


def test_swizzle2d(backend):
    gi, gj, g = 7, 5, 3
    out = backend.zeros(gi * gj * 2, dtype=torch.int32)
    backend.launch(swizzle_kernel, (gi, gj), out, GROUP=g)
    want = []
    for i in range(gi):
        for j in range(gj):
            ij = i * gj + j
            group = ij // (g * gj)
            off_i = group * g
            size_g = min(gi - off_i, g)
            ij %= g * gj
            want += [off_i + ij % size_g, ij // size_g]
    assert backend.get(out).tolist() == want


@newt.jit
def bool_logic_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    a = (x > 0) & (x < 5)
    b = (x == 3) | (x == -3)
    c = a ^ b
    d = not (x > 100)
    t = x.to(nl.int1)
    r = a.to(nl.int32) + 2 * b.to(nl.int32) + 4 * c.to(nl.int32) + 8 * d.to(nl.int32) + 16 * t.to(nl.int32)
    nl.store(out_ptr + offs, r)


def test_boolean_logic(backend):
    x = torch.tensor([-3, 0, 1, 3, 4, 5, 200, 7], dtype=torch.int32)
    out = backend.zeros(8, dtype=torch.int32)
    backend.launch(bool_logic_kernel, (1,), backend.put(x), out, BLOCK=8)
    want = []
    for v in x.tolist():
        a = 0 < v < 5
        b = v in (3, -3)
        want.append(a + 2 * b + 4 * (a ^ b) + 8 * (not v > 100) + 16 * (v != 0))
    assert backend.get(out).tolist() == want


@newt.jit
def max_indices_kernel(x_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :])
    v, i = nl.max(x, axis=1, return_indices=True, keep_dims=True)
    w, k = nl.min(x, axis=0, return_indices=True)
    nl.store(out_ptr + rm[:, None], v)
    nl.store(out_ptr + M + rm[:, None], i.to(nl.float32))
    nl.store(out_ptr + 2 * M + rn, w)
    nl.store(out_ptr + 2 * M + N + rn, k.to(nl.float32))


def test_max_min_with_indices(backend):
    M, N = 8, 16
    x = torch.randn(M, N)
    out = backend.empty(2 * M + 2 * N)
    backend.launch(max_indices_kernel, (1,), backend.put(x), out, M=M, N=N)
    got = backend.get(out)
    assert got[:M].tolist() == x.max(1).values.tolist()
    assert got[M:2 * M].tolist() == x.argmax(1).float().tolist()
    assert got[2 * M:2 * M + N].tolist() == x.min(0).values.tolist()
    assert got[2 * M + N:].tolist() == x.argmin(0).float().tolist()
