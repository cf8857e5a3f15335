"""Shape ops: reshape/view, permute/trans, expand_dims, broadcast, join/split/interleave, cat, ravel."""

from __future__ import annotations

import torch

import newt
import newt.language as nl

from .util import assert_same


@newt.jit
def shape_kernel(x_ptr, out_ptr, OP: nl.constexpr):
    i = nl.arange(0, 4)
    j = nl.arange(0, 8)
    k = nl.arange(0, 2)
    x3 = nl.load(x_ptr + i[:, None, None] * 16 + j[None, :, None] * 2 + k[None, None, :])  # (4, 8, 2)
    if OP == "reshape":
        y = nl.reshape(x3, (8, 8))
        nl.store(out_ptr + nl.arange(0, 8)[:, None] * 8 + nl.arange(0, 8)[None, :], y)
    elif OP == "permute":
        y = nl.permute(x3, (2, 0, 1))  # (2, 4, 8)
        nl.store(out_ptr + k[:, None, None] * 32 + i[None, :, None] * 8 + j[None, None, :], y)
    elif OP == "trans":
        x2 = nl.reshape(x3, (4, 16))
        y = nl.trans(x2)  # (16, 4)
        a = nl.arange(0, 16)
        nl.store(out_ptr + a[:, None] * 4 + i[None, :], y)
    elif OP == "T":
        x2 = nl.reshape(x3, (8, 8))
        y = x2.T
        a = nl.arange(0, 8)
        nl.store(out_ptr + a[:, None] * 8 + a[None, :], y)
    elif OP == "ravel":
        nl.store(out_ptr + nl.arange(0, 64), nl.ravel(x3))
    elif OP == "split":
        a, b = nl.split(x3)  # (4, 8) each
        nl.store(out_ptr + i[:, None] * 8 + j[None, :], a)
        nl.store(out_ptr + 32 + i[:, None] * 8 + j[None, :], b)
    elif OP == "join":
        a, b = nl.split(x3)
        y = nl.join(b, a)  # (4, 8, 2) with halves swapped
        nl.store(out_ptr + i[:, None, None] * 16 + j[None, :, None] * 2 + k[None, None, :], y)
    elif OP == "interleave":
        a, b = nl.split(x3)
        y = nl.interleave(a * 10, b)  # (4, 16)
        a16 = nl.arange(0, 16)
        nl.store(out_ptr + i[:, None] * 16 + a16[None, :], y)
    elif OP == "cat":
        a, b = nl.split(x3)
        y = nl.cat(a, b, can_reorder=True)  # (8, 8)
        a8 = nl.arange(0, 8)
        nl.store(out_ptr + a8[:, None] * 8 + a8[None, :], y)
    elif OP == "broadcast":
        row = nl.load(x_ptr + j)  # (8,)
        y = nl.broadcast_to(row[None, :], (8, 8)) + nl.expand_dims(j, 1) * 100
        a8 = nl.arange(0, 8)
        nl.store(out_ptr + a8[:, None] * 8 + a8[None, :], y)
    elif OP == "expand_dims":
        e = nl.expand_dims(nl.expand_dims(j, 0), 2)  # (1, 8, 1)
        y = x3 + e * 1000
        nl.store(out_ptr + i[:, None, None] * 16 + j[None, :, None] * 2 + k[None, None, :], y)


def run(backend, op):
    x = torch.arange(64, dtype=torch.int32)
    out = backend.zeros(64, dtype=torch.int32)
    backend.launch(shape_kernel, (1,), backend.put(x), out, OP=op)
    return x, backend.get(out)


def test_reshape(backend):
    x, got = run(backend, "reshape")
    assert_same(got, x)


def test_permute(backend):
    x, got = run(backend, "permute")
    assert_same(got, x.view(4, 8, 2).permute(2, 0, 1).reshape(-1))


def test_trans(backend):
    x, got = run(backend, "trans")
    assert_same(got, x.view(4, 16).t().reshape(-1))


def test_dot_T(backend):
    x, got = run(backend, "T")
    assert_same(got, x.view(8, 8).t().reshape(-1))


def test_ravel(backend):
    x, got = run(backend, "ravel")
    assert_same(got, x)


def test_split(backend):
    x, got = run(backend, "split")
    v = x.view(4, 8, 2)
    assert_same(got, torch.cat([v[..., 0].reshape(-1), v[..., 1].reshape(-1)]))


def test_join(backend):
    x, got = run(backend, "join")
    v = x.view(4, 8, 2)
    assert_same(got, torch.stack([v[..., 1], v[..., 0]], -1).reshape(-1))


def test_interleave(backend):
    x, got = run(backend, "interleave")
    v = x.view(4, 8, 2)
    want = torch.stack([v[..., 0] * 10, v[..., 1]], -1).reshape(4, 16)
    assert_same(got, want.reshape(-1))


def test_cat(backend):
    x, got = run(backend, "cat")
    v = x.view(4, 8, 2)
    # can_reorder=True lets a backend order the rows freely: compare as a multiset of rows
    want = torch.cat([v[..., 0], v[..., 1]], 0)
    got_rows = sorted(map(tuple, got.view(8, 8).tolist()))
    assert got_rows == sorted(map(tuple, want.tolist()))


def test_broadcast(backend):
    x, got = run(backend, "broadcast")
    want = x[:8][None, :].expand(8, 8) + torch.arange(8, dtype=torch.int32)[:, None] * 100
    assert_same(got, want.reshape(-1))


def test_expand_dims(backend):
    x, got = run(backend, "expand_dims")
    want = x.view(4, 8, 2) + torch.arange(8, dtype=torch.int32)[None, :, None] * 1000
    assert_same(got, want.reshape(-1))
