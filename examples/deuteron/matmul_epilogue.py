"""Matmul with a fused epilogue: ``act(x @ y + bias)``, the activation chosen by a tunable-free flag."""

from __future__ import annotations

import torch

import deuteron as dt
import newt.harness as nh


@dt.kernel
def matmul_bias_act(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, activation: str = "gelu") -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in dt.tile([m, n]):
        acc = dt.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in dt.tile(k):
            acc = dt.dot(x[tile_m, tile_k], y[tile_k, tile_n], acc=acc)
        acc = acc + bias[tile_n].to(torch.float32)
        if activation == "gelu":
            acc = torch.nn.functional.gelu(acc, approximate="tanh")
        elif activation == "relu":
            acc = torch.relu(acc)
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


def make_args(device: str, size: str = "small"):
    m, k, n = (160, 64, 200) if size == "small" else (4096, 4096, 4096)
    x = torch.randn(m, k, device=device, dtype=torch.float16)
    y = torch.randn(k, n, device=device, dtype=torch.float16)
    b = torch.randn(n, device=device, dtype=torch.float16)
    return (x, y, b)


@nh.reference(matmul_bias_act)
def reference(x, y, b, activation="gelu"):
    acc = x.float() @ y.float() + b.float()
    if activation == "gelu":
        acc = torch.nn.functional.gelu(acc, approximate="tanh")
    elif activation == "relu":
        acc = torch.relu(acc)
    return acc.to(x.dtype)


@nh.example(matmul_bias_act)
def small(device):
    return nh.Case(grid=None, args=make_args(device))


def main(device: str | None = None) -> None:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    args = make_args(device)
    for act in ("gelu", "relu", "none"):
        torch.testing.assert_close(matmul_bias_act(*args, act), reference(*args, act), atol=1e-1, rtol=1e-2)
    print(f"matmul_bias_act: ok on {device} (gelu, relu, none)")


if __name__ == "__main__":
    main()
