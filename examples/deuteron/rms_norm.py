"""RMS norm: ``x / sqrt(mean(x**2) + eps) * weight``."""

from __future__ import annotations

import torch

import deuteron as dt
import newt.harness as nh


@dt.kernel
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in dt.tile(m):
        row = x[tile_m, :].to(torch.float32)
        inv_rms = torch.rsqrt(torch.mean(row * row, dim=-1, keepdim=True) + eps)
        out[tile_m, :] = (row * inv_rms * weight[None, :].to(torch.float32)).to(out.dtype)
    return out


def make_args(device: str, size: str = "small"):
    m, n = (300, 1000) if size == "small" else (8192, 4096)
    x = torch.randn(m, n, device=device, dtype=torch.float16)
    w = torch.randn(n, device=device, dtype=torch.float16)
    return (x, w)


@nh.reference(rms_norm)
def reference(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


@nh.example(rms_norm)
def small(device):
    return nh.Case(grid=None, args=make_args(device))


def main(device: str | None = None) -> None:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    args = make_args(device)
    torch.testing.assert_close(rms_norm(*args), reference(*args), atol=1e-2, rtol=1e-2)
    print(f"rms_norm: ok on {device}")


if __name__ == "__main__":
    main()
