"""deuteron kernels with mistakes the front end reports (the e2e test asserts each line and code)."""
import torch

import deuteron as dt


@dt.kernel
def scaled(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    y = x * 2.0
    for tile in dt.tile(out.size()):
        out[tile] = y[tile]
    return out


@dt.kernel
def tiles_misused(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    tiles = dt.tile(out.size())  # noqa: F841 (the D003 the e2e test expects)
    for tile in dt.tile(out.size(), block_size=[100]):
        out[tile] = x[tile] + 1
    return out
