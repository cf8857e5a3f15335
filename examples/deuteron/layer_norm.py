"""Layer norm over the last dimension (mean, biased variance, affine)."""

from __future__ import annotations

import torch

import deuteron as dt
import newt.harness as nh


@dt.kernel
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in dt.tile(m):
        row = x[tile_m, :].to(torch.float32)
        mean = torch.mean(row, dim=-1, keepdim=True)
        var = torch.var(row, dim=-1, keepdim=True, unbiased=False)
        normed = (row - mean) * torch.rsqrt(var + eps)
        y = normed * weight[:].to(torch.float32) + bias[:].to(torch.float32)
        out[tile_m, :] = y.to(out.dtype)
    return out


def make_args(device: str, size: str = "small"):
    m, n = (200, 768) if size == "small" else (8192, 4096)
    x = torch.randn(m, n, device=device, dtype=torch.float16)
    w = torch.randn(n, device=device, dtype=torch.float16)
    b = torch.randn(n, device=device, dtype=torch.float16)
    return (x, w, b)


@nh.reference(layer_norm)
def reference(x, w, b, eps=1e-5):
    return torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), eps).to(x.dtype)


@nh.example(layer_norm)
def small(device):
    return nh.Case(grid=None, args=make_args(device))


def main(device: str | None = None) -> None:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    args = make_args(device)
    expected = reference(*args)
    torch.testing.assert_close(layer_norm(*args), expected, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(layer_norm.run_with(dict(reduction_loops=[128]), *args), expected, atol=1e-2,
                               rtol=1e-2)
    print(f"layer_norm: ok on {device} (persistent and looped)")


if __name__ == "__main__":
    main()
