"""Kernels over every op family, whose generated newt source tests/deuteron/test_dt_golden_source.py pins (the
files under golden/ were generated before deuteron's op table existed: the table changed no byte)."""

from __future__ import annotations

import torch

import deuteron as dt


@dt.kernel(config=dt.Config(block_sizes=[16, 32]))
def elementwise(x, y):
    out = torch.empty_like(x)
    for tm, tn in dt.tile(x.size()):
        a, b = x[tm, tn], y[tm, tn]
        g = torch.nn.functional.gelu(a) + torch.nn.functional.silu(b) * torch.sigmoid(a)
        c = torch.where(a > b, torch.clamp(a, -1.0, 1.0), torch.pow(b, 3.0))
        d = torch.floor_divide(a, 2.0) + torch.lerp(a, b, 0.25) + torch.sign(b) + torch.relu(-a)
        e = torch.isnan(a).to(torch.float32) + (a // 3.0) + torch.exp2(b).to(torch.float16).float()
        out[tm, tn] = (g + c + d + e).to(out.dtype)
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def reductions(x):
    m, n = x.size()
    sm = torch.empty_like(x)
    stats = torch.empty([m, 4], dtype=torch.float32, device=x.device)
    idx = torch.empty([m], dtype=torch.int64, device=x.device)
    for tm in dt.tile(m):
        row = x[tm, :].to(torch.float32)
        sm[tm, :] = torch.softmax(row, dim=-1).to(sm.dtype)
        stats[tm, 0] = row.var(dim=1)
        stats[tm, 1] = torch.logsumexp(row, dim=1)
        stats[tm, 2] = torch.amax(row, dim=1)
        stats[tm, 3] = row.mean(dim=1)
        idx[tm] = torch.argmax(row, dim=1)
    return sm, stats, idx


def _add(a, b):
    return a + b


def _max(a, b):
    return torch.maximum(a, b)


@dt.kernel(config=dt.Config(block_sizes=[4]))
def combine_scan(x):
    m, n = x.size()
    cs = torch.empty_like(x)
    sc = torch.empty_like(x)
    red = torch.empty([m, 1], dtype=x.dtype, device=x.device)
    for tm in dt.tile(m):
        row = x[tm, :]
        cs[tm, :] = torch.cumsum(row, dim=1)
        sc[tm, :] = dt.associative_scan(_max, row, dim=1)
        red[tm, :] = dt.reduce(_add, row, dim=1, keep_dims=True)
    return cs, sc, red


@dt.kernel(config=dt.Config(block_sizes=[16, 16, 16]))
def matmul(x, y, bias):
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tm, tn in dt.tile([m, n]):
        acc = dt.zeros([tm, tn], dtype=torch.float32)
        for tk in dt.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = acc + bias[tn]
    return out


@dt.kernel(config=dt.Config(block_sizes=[32]))
def memory_atomics(x, counts, hist):
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in dt.tile(n):
        v = dt.load(x, [t], extra_mask=x[t] > 0.0)
        out[t] = v
        dt.store(out, [t], v * 2.0, extra_mask=v > 1.0)
        dt.atomic_add(counts, [t], 1)
        dt.atomic_max(hist, [t], v)
    return out


@dt.kernel(config=dt.Config(block_sizes=[8, 16]))
def random_numbers(x):
    m, n = x.size()
    r = torch.empty_like(x)
    ri = torch.empty([m, n], dtype=torch.int32, device=x.device)
    for tm, tn in dt.tile([m, n]):
        r[tm, tn] = dt.rand([tm, tn], seed=7) * x[tm, tn]
        ri[tm, tn] = dt.randint([tm, tn], 3, 11, seed=5)
    return r, ri


@dt.kernel(config=dt.Config(block_sizes=[8]))
def shapes(x, y):
    m, n = x.size()
    out = torch.empty([m, n, 2], dtype=x.dtype, device=x.device)
    t_out = torch.empty([n, m], dtype=x.dtype, device=x.device)
    for tm in dt.tile(m):
        a, b = x[tm, :], y[tm, :]
        j = dt.join(a, b)
        lo, hi = dt.split(j)
        out[tm, :, :] = torch.stack([lo + 1.0, hi], dim=2)
        t_out[:, tm] = a.t() + b.unsqueeze(0).squeeze(0).transpose(0, 1)
    return out, t_out


@dt.kernel(config=dt.Config(block_sizes=[64]))
def asm(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = dt.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x[t]], dtype=torch.int32, is_pure=True,
                                           pack=1)
    return out


def cases():
    """(name, kernel, args) of every pinned kernel."""
    g = torch.Generator().manual_seed(0)

    def r(*s, dtype=torch.float32):
        return torch.randn(*s, generator=g).to(dtype)
    return [
        ("elementwise", elementwise, (r(64, 64), r(64, 64))),
        ("reductions", reductions, (r(32, 128, dtype=torch.float16),)),
        ("combine_scan", combine_scan, (r(16, 32),)),
        ("matmul", matmul, (r(64, 48, dtype=torch.float16), r(48, 32, dtype=torch.float16), r(32))),
        ("memory_atomics", memory_atomics, (r(100), torch.zeros(100, dtype=torch.int32), torch.zeros(100))),
        ("random_numbers", random_numbers, (r(16, 32),)),
        ("shapes", shapes, (r(16, 32), r(16, 32))),
        ("asm", asm, (torch.arange(128, dtype=torch.int32),)),
    ]
