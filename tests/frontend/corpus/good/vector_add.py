import torch

import newt
import newt.language as nl


@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr):
    pid = nl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + nl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = nl.load(x_ptr + offsets, mask=mask)
    y = nl.load(y_ptr + offsets, mask=mask)
    nl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor):
    out = torch.empty_like(x)
    n = out.numel()
    grid = lambda meta: (newt.cdiv(n, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
    return out
