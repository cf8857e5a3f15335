"""Row softmax: a whole-row (``:``) reduction, persistent or looped by config.

``x[tile_m, :]`` loads whole rows; the config's ``reduction_loops`` entry says
whether a row is one block (persistent) or is walked in chunks (looped: the
max, the sum and the output each take a pass).
"""

from __future__ import annotations

import torch

import deuteron as dt
import newt.harness as nh


@dt.kernel
def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in dt.tile(m):
        row = x[tile_m, :].to(torch.float32)
        row_max = torch.amax(row, dim=1, keepdim=True)
        num = torch.exp(row - row_max)
        den = torch.sum(num, dim=1, keepdim=True)
        out[tile_m, :] = (num / den).to(out.dtype)
    return out


@dt.kernel
def softmax_short(x: torch.Tensor) -> torch.Tensor:
    """The same with torch.softmax inside the tile loop."""
    out = torch.empty_like(x)
    for tile_m in dt.tile(x.size(0)):
        out[tile_m, :] = torch.softmax(x[tile_m, :], dim=-1)
    return out


def make_args(device: str, size: str = "small"):
    m, n = (128, 1000) if size == "small" else (8192, 4096)
    return (torch.randn(m, n, device=device, dtype=torch.float16),)


@nh.reference(softmax)
def reference(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


nh.reference(softmax_short)(reference)  # the same oracle for the short-row variant


@nh.example(softmax)
def small(device):
    return nh.Case(grid=None, args=make_args(device))


@nh.example(softmax_short)
def small_short(device):
    return nh.Case(grid=None, args=make_args(device))


def main(device: str | None = None) -> None:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    (x,) = make_args(device)
    expected = reference(x)
    for k in (softmax, softmax_short):
        torch.testing.assert_close(k(x), expected, atol=1e-3, rtol=1e-2)
        looped = dict(reduction_loops=[256])
        torch.testing.assert_close(k.run_with(looped, x), expected, atol=1e-3, rtol=1e-2)
    print(f"softmax: ok on {device} (persistent and looped)")


if __name__ == "__main__":
    main()
