"""A kernel whose asked pipeline depth overflows newt's shared-memory plan is built with fewer stages, not
refused (ml-cross-entropy's ``_cce_backward_kernel`` at its ``num_stages=4``: 361 KB on sm_90a before).

The construct: a pipelined tf32 matmul loop whose fp32 accumulator is then the loop-invariant A operand of a
second loop's dot, whose B tile is N-contiguous (a K-major copy for wgmma).  newt keeps that staged operand,
the copy and the loop's scratch apart from the rings, where Triton's allocator overlaps them."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime.errors import OutOfResources

from .conftest import needs_backend

pytestmark = needs_backend


@newt.jit
def two_loops(a_ptr, b_ptr, c_ptr, out_ptr, K, D, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr,
              BD: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    rk = nl.arange(0, BK)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        a = nl.load(a_ptr + rm[:, None] * K + (k * BK + rk)[None, :])
        b = nl.load(b_ptr + (k * BK + rk)[:, None] + rn[None, :] * K)
        acc = nl.dot(a, b, acc)
    rd = nl.arange(0, BD)
    for d in range(0, nl.cdiv(D, BD)):
        c = nl.load(c_ptr + rn[:, None] * D + (d * BD + rd)[None, :])
        r = nl.dot(acc, c)
        nl.store(out_ptr + rm[:, None] * D + (d * BD + rd)[None, :], r)


SIG = {"a_ptr": "*fp32:16", "b_ptr": "*fp32:16", "c_ptr": "*fp32:16", "out_ptr": "*fp32:16", "K": "i32:16",
       "D": "i32:16"}
BIG = {"BM": 128, "BN": 128, "BK": 32, "BD": 64}


def test_an_overflowing_depth_is_built_shallower():
    ck = newt.compile(two_loops, signature=SIG, constexprs=BIG, num_warps=4, num_stages=4, target="sm_90a")
    assert ck.metadata.num_stages == 4  # what was asked (what Triton's metadata reports)
    assert 1 <= ck.metadata.pipeline_stages < 4
    assert ck.metadata.shared <= 232448
    assert f"num_stages={ck.metadata.pipeline_stages}," in ck.asm["cuda"]


def test_a_depth_that_fits_is_kept():
    small = {"BM": 64, "BN": 64, "BK": 32, "BD": 32}
    ck = newt.compile(two_loops, signature=SIG, constexprs=small, num_warps=4, num_stages=3, target="sm_90a")
    assert ck.metadata.pipeline_stages == 3 and "num_stages=3," in ck.asm["cuda"]


def test_what_fits_at_no_depth_is_still_out_of_resources():
    huge = {"BM": 256, "BN": 256, "BK": 128, "BD": 256}
    with pytest.raises(OutOfResources, match="out of shared memory"):
        newt.compile(two_loops, signature=SIG, constexprs=huge, num_warps=8, num_stages=4, target="sm_90a")


@pytest.mark.gpu
def test_the_shallower_build_computes_the_same():
    torch.manual_seed(0)
    K, D = 96, 128
    a = torch.randn(128, K, device="cuda")
    b = torch.randn(128, K, device="cuda")  # read transposed: B[k, n] = b[n, k]
    c = torch.randn(128, D, device="cuda")
    out = torch.empty(128, D, device="cuda")
    two_loops[(1,)](a, b, c, out, K, D, num_warps=4, num_stages=4, **BIG)
    want = (a.double() @ b.double().T) @ c.double()
    torch.testing.assert_close(out.double(), want, rtol=2e-2, atol=2e-1)  # tf32 twice
