"""Matrix multiply: a 2-D grid of output tiles, an inner loop over K, an fp32 accumulator."""

from __future__ import annotations

import torch

import deuteron as dt
import newt.harness as nh


@dt.kernel
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.empty([m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile_m, tile_n in dt.tile([m, n]):
        acc = dt.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in dt.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


def make_args(device: str, size: str = "small"):
    m, k, n = (200, 96, 160) if size == "small" else (4096, 4096, 4096)
    x = torch.randn(m, k, device=device, dtype=torch.float16)
    y = torch.randn(k, n, device=device, dtype=torch.float16)
    return (x, y)


@nh.reference(matmul)
def reference(x, y):
    return (x.float() @ y.float()).to(x.dtype)


@nh.example(matmul)
def small(device):
    return nh.Case(grid=None, args=make_args(device))


def main(device: str | None = None) -> None:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    args = make_args(device)
    torch.testing.assert_close(matmul(*args), reference(*args), atol=1e-1, rtol=1e-2)
    print(f"matmul: ok on {device}")


if __name__ == "__main__":
    main()
