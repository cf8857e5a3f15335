"""newt kernels with mistakes the front end reports (the e2e test asserts each line and code)."""
import torch

import newt
import newt.language as nl


@newt.jit
def scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, 1000)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, x * scale, mask=mask)


@newt.jit
def bits_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    y = x.to(nl.float32) & 1
    nl.store(out_ptr + offs, y + undefined_thing, mask=offs < n)  # noqa: F821 (the N003 the e2e test expects)


def run(x: torch.Tensor):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(1,)](x, out, n, 2.0, BLOCK=1024)
    bits_kernel[(1,)](x, out, n, BLOCK=256)
    return out
