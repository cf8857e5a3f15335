"""Vector addition: the smallest useful newt kernel.

Each program instance adds one BLOCK_SIZE-wide slice of ``x`` and ``y``; the
mask keeps the last, partial slice inside the arrays.  The launch grid is a
function of the meta-parameters, so changing BLOCK_SIZE keeps it right.

    python examples/vector_add.py            # check against torch (and time it with --bench)

Without a GPU the kernel runs through newt's interpreter (``NEWT_INTERPRET=1``
is set for you) on small sizes.
"""

from __future__ import annotations

import argparse
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("NEWT_INTERPRET", "1")

import newt
import newt.harness as nh
import newt.language as nl

INTERPRET = os.environ.get("NEWT_INTERPRET", "").lower() in ("1", "true", "yes", "on")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr):
    pid = nl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
    in_bounds = offsets < n_elements
    x = nl.load(x_ptr + offsets, mask=in_bounds)
    y = nl.load(y_ptr + offsets, mask=in_bounds)
    nl.store(out_ptr + offsets, x + y, mask=in_bounds)


def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    assert x.shape == y.shape and x.is_contiguous() and y.is_contiguous()
    out = torch.empty_like(x)
    n = out.numel()
    add_kernel[lambda meta: (newt.cdiv(n, meta["BLOCK_SIZE"]),)](x, y, out, n, BLOCK_SIZE=block_size)
    return out


@nh.reference(add_kernel)
def add_reference(x, y, out, n_elements, BLOCK_SIZE):
    return {"out_ptr": x + y}


@nh.example(add_kernel)
def ragged(device):
    """What the editor's Verify and Autotune run: a size that is no multiple of the block, fp32 and fp16."""
    cases = []
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(1000, device=device, dtype=dtype)
        y = torch.randn(1000, device=device, dtype=dtype)
        out = torch.empty_like(x)
        cases.append(nh.Case(grid=(4,), args=(x, y, out, 1000), kwargs={"BLOCK_SIZE": 256},
                             name=f"n=1000 {str(dtype).removeprefix('torch.')}"))
    return cases


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", action="store_true", help="time newt against torch (GPU only)")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    sizes = [1, 17, 1000, 4096] if INTERPRET else [1, 17, 98432, 1 << 20, (1 << 24) + 3]
    for n in sizes:
        for dtype in (torch.float32, torch.float16):
            x = torch.randn(n, device=DEVICE, dtype=dtype)
            y = torch.randn(n, device=DEVICE, dtype=dtype)
            newt.testing.assert_close(add(x, y), x + y, err_msg=f"add n={n} {dtype}")
    print(f"vector_add: newt matches torch on {len(sizes) * 2} cases"
          f" ({'interpreter' if INTERPRET else torch.cuda.get_device_name()})")
    if args.bench and DEVICE == "cuda" and not INTERPRET:
        for n in (1 << 20, 1 << 24, 1 << 28):
            bench(n)
    return 0


def bench(n: int) -> None:
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    t_newt = newt.testing.do_bench(lambda: add(x, y))
    t_torch = newt.testing.do_bench(lambda: x + y)
    gbps = lambda ms: 3 * n * 4 / ms * 1e-6
    print(f"  n=2^{n.bit_length() - 1}: newt {gbps(t_newt):7.0f} GB/s   torch {gbps(t_torch):7.0f} GB/s")


if __name__ == "__main__":
    raise SystemExit(main())
