"""Elementwise add with broadcasting: the smallest deuteron kernel.

``dt.tile(out.size())`` tiles every dimension of the output; the grid and the
masks for the ragged edges are generated.  Run it: ``python examples/deuteron/add.py``.
"""

from __future__ import annotations

import torch

import deuteron as dt
import newt.harness as nh


@dt.kernel
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x, y = torch.broadcast_tensors(x, y)
    out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile in dt.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def make_args(device: str, size: str = "small"):
    m, n = (1000, 300) if size == "small" else (8192, 8192)
    x = torch.randn(m, n, device=device, dtype=torch.float16)
    y = torch.randn(n, device=device, dtype=torch.float16)  # broadcast along the rows
    return (x, y)


@nh.reference(add)
def reference(x, y):
    return x + y


@nh.example(add)
def small(device):
    return nh.Case(grid=None, args=make_args(device))


def main(device: str | None = None) -> None:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    args = make_args(device)
    out = add(*args)
    torch.testing.assert_close(out, reference(*args))
    print(f"add: ok on {device} ({tuple(out.shape)}, {out.dtype})")


if __name__ == "__main__":
    main()
