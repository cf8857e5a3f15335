"""Column sums: the grid tiles the columns, an inner tile loop walks the rows."""

from __future__ import annotations

import torch

import deuteron as dt
import newt.harness as nh


@dt.kernel
def column_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tile_n in dt.tile(n):
        acc = dt.zeros([tile_n], dtype=torch.float32)
        for tile_m in dt.tile(m):
            acc += x[tile_m, tile_n].to(torch.float32).sum(dim=0)
        out[tile_n] = acc
    return out


def make_args(device: str, size: str = "small"):
    m, n = (1000, 300) if size == "small" else (8192, 8192)
    return (torch.randn(m, n, device=device, dtype=torch.float16),)


@nh.reference(column_sum)
def reference(x):
    return x.float().sum(dim=0)


@nh.example(column_sum)
def small(device):
    return nh.Case(grid=None, args=make_args(device))


def main(device: str | None = None) -> None:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    args = make_args(device)
    torch.testing.assert_close(column_sum(*args), reference(*args), atol=1e-2, rtol=1e-3)
    print(f"column_sum: ok on {device}")


if __name__ == "__main__":
    main()
