"""A correct newt kernel: element-wise add of two vectors."""
import torch

import newt
import newt.language as nl


@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr):
    pid = nl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = nl.load(x_ptr + offsets, mask=mask)
    y = nl.load(y_ptr + offsets, mask=mask)
    nl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    add_kernel[(newt.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out


# What Verify runs (newt.harness): example inputs and the expected result.
import newt.harness as nh  # noqa: E402


@nh.reference(add_kernel)
def add_reference(x, y, out, n, BLOCK_SIZE):
    return {"out_ptr": x + y}


@nh.example(add_kernel)
def ragged(device):
    x = torch.randn(3000, device=device)
    y = torch.randn(3000, device=device)
    return nh.Case(grid=(3,), args=(x, y, torch.empty_like(x), 3000), kwargs={"BLOCK_SIZE": 1024})
