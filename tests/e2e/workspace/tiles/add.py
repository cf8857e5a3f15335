"""A correct deuteron kernel: PyTorch-like code over tiles, compiled to one newt kernel."""
import torch

import deuteron as dt


@dt.kernel
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in dt.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


# What Verify runs (newt.harness): example inputs; deuteron compares with the eager PyTorch version.
import newt.harness as nh  # noqa: E402


@nh.example(add)
def vectors(device):
    x = torch.randn(1000, device=device)
    y = torch.randn(1000, device=device)
    return nh.Case(grid=None, args=(x, y))
