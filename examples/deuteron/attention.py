"""Attention forward (flash-attention style): online softmax over key tiles, batched dots."""

from __future__ import annotations

import math

import torch

import deuteron as dt
import newt.harness as nh


@dt.kernel
def attention(q_in: torch.Tensor, k_in: torch.Tensor, v_in: torch.Tensor) -> torch.Tensor:
    m_dim = q_in.size(-2)
    n_dim = k_in.size(-2)
    head_dim = dt.specialize(q_in.size(-1))
    q_view = q_in.reshape([-1, m_dim, head_dim])
    v_view = v_in.reshape([-1, n_dim, head_dim])
    k_view = k_in.reshape([-1, n_dim, head_dim]).transpose(1, 2)
    out = torch.empty_like(q_view)
    qk_scale = 1.0 / math.sqrt(head_dim) * 1.44269504  # log2(e): exp2 below
    for tile_b, tile_m in dt.tile([q_view.size(0), m_dim]):
        m_i = dt.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        l_i = torch.full_like(m_i, 1.0)
        acc = dt.zeros([tile_b, tile_m, head_dim], dtype=torch.float32)
        q = q_view[tile_b, tile_m, :]
        for tile_n in dt.tile(n_dim):
            k = k_view[tile_b, :, tile_n]
            qk = dt.dot(q, k)  # fp32 scores (torch.bmm would round them to fp16)
            m_ij = torch.maximum(m_i, torch.amax(qk, -1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, :, None]
            p = torch.exp2(qk)
            l_ij = torch.sum(p, -1)
            alpha = torch.exp2(m_i - m_ij)
            l_i = l_i * alpha + l_ij
            acc = acc * alpha[:, :, None]
            v = v_view[tile_b, tile_n, :]
            acc = torch.baddbmm(acc, p.to(v.dtype), v)
            m_i = m_ij
        acc = acc / l_i[:, :, None]
        out[tile_b, tile_m, :] = acc.to(out.dtype)
    return out.view(q_in.size())


def make_args(device: str, size: str = "small"):
    b, h, s, d = (2, 3, 200, 64) if size == "small" else (4, 32, 4096, 64)
    mk = lambda: torch.randn(b, h, s, d, device=device, dtype=torch.float16)
    return (mk(), mk(), mk())


@nh.reference(attention)
def reference(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(q.dtype)


@nh.example(attention)
def small(device):
    return nh.Case(grid=None, args=make_args(device))


def main(device: str | None = None) -> None:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    args = make_args(device)
    torch.testing.assert_close(attention(*args), reference(*args), atol=2e-2, rtol=2e-2)
    print(f"attention: ok on {device}")


if __name__ == "__main__":
    main()
