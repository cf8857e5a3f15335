"""A correct deuteron kernel: PyTorch-like code over tiles, compiled to one newt kernel."""
import torch

import deuteron as dt


@dt.kernel
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in dt.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out
