"""An autotuned newt kernel: Autotune times each config (through the interpreter without a GPU)."""
import newt
import newt.harness as nh
import newt.language as nl


@newt.autotune(
    configs=[
        newt.Config({"BLOCK": 128}, num_warps=4),
        newt.Config({"BLOCK": 256}, num_warps=4),
        newt.Config({"BLOCK": 512}, num_warps=8),
    ],
    key=["n"],
)
@newt.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, x * alpha, mask=mask)


@nh.reference(scale_kernel)
def scale_reference(x, out, n, alpha):
    return {"out_ptr": x * alpha}


@nh.example(scale_kernel)
def vector(device):
    import torch

    x = torch.randn(2048, device=device)
    return nh.Case(grid=lambda meta: (newt.cdiv(2048, meta["BLOCK"]),), args=(x, torch.empty_like(x), 2048, 0.5))
