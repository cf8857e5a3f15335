"""Small programs written against Triton's and Helion's APIs, as their users write them: run through
``python -m newt.dropin`` (tests/dropin/test_cli.py) and read by the editor (tests/lsp/test_triton_helion.py)."""

import textwrap

SCRIPT = '''
import sys
import torch
import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


x = torch.rand(1000, device=DEVICE)
y = torch.rand(1000, device=DEVICE)
out = torch.empty_like(x)
add_kernel[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, y, out, 1000, BLOCK=256)
print("max diff", (out - (x + y)).abs().max().item(), "argv", sys.argv[1:], "version", triton.__version__)
'''

TEST_FILE = '''
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


@pytest.mark.parametrize("n", [7, 300])
def test_relu(n):
    x = torch.randn(n)
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128)
    torch.testing.assert_close(out, torch.relu(x))


def test_wrong_on_purpose():
    x = torch.randn(8)
    out = torch.empty_like(x)
    relu_kernel[(1,)](x, out, 8, BLOCK=8)
    torch.testing.assert_close(out, x.abs())
'''


HELION = textwrap.dedent('''
    import torch
    import helion
    import helion.language as hl


    @helion.kernel(config=helion.Config(block_sizes=[32]), static_shapes=True)
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(out.size(0)):
            out[tile] = x[tile] + y[tile]
        return out


    @helion.kernel(autotune_effort="none")
    def row_sum(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty([m], dtype=x.dtype, device=x.device)
        for tile_m in hl.tile(m):
            acc = hl.zeros([tile_m], dtype=torch.float32)
            for tile_n in hl.tile(n):
                acc += x[tile_m, tile_n].to(torch.float32).sum(-1)
            out[tile_m] = acc.to(x.dtype)
        return out


    x, y = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(add(x, y), x + y)
    a = torch.randn(16, 70)
    torch.testing.assert_close(row_sum(a), a.sum(-1), rtol=1e-5, atol=1e-5)
    print("helion ok", helion.__name__)
''')


