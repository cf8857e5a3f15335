"""``nl.tensor_descriptor`` / ``nl.tensor_descriptor_base`` as types: ``isinstance`` tells a descriptor argument
from a pointer when the kernel is compiled (the pattern of Triton's fused-attention tutorial), and the same kernel
runs with a host ``TensorDescriptor`` and with a plain tensor."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt.frontend import analyze_source
from newt.tools.tensor_descriptor import TensorDescriptor


@newt.jit
def as_desc(desc_or_ptr, shape, strides, block_shape):
    if isinstance(desc_or_ptr, nl.tensor_descriptor):
        return desc_or_ptr
    else:
        return nl.make_tensor_descriptor(desc_or_ptr, shape, strides, block_shape)


@newt.jit
def copy_scaled(x, y_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr, KIND: nl.constexpr):
    xd = as_desc(x, [M, N], [N, 1], [BM, BN])
    m = nl.program_id(0) * BM
    n = nl.program_id(1) * BN
    t = xd.load([m, n])
    yd = nl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    is_desc = isinstance(x, nl.tensor_descriptor_base)
    is_tensor = isinstance(x, nl.tensor)
    if KIND == 1:
        nl.static_assert(is_desc and not is_tensor)
    else:
        nl.static_assert(is_tensor and not is_desc)
    yd.store([m, n], t * 2 + KIND)


def _run(k, device, use_desc):
    M, N, BM, BN = 32, 48, 16, 16
    x = torch.randn(M, N).to(device)
    y = torch.zeros(M, N).to(device)
    arg = TensorDescriptor.from_tensor(x, [BM, BN]) if use_desc else x
    k[(M // BM, N // BN)](arg, y, M, N, BM=BM, BN=BN, KIND=1 if use_desc else 0)
    torch.testing.assert_close(y.cpu(), x.cpu() * 2 + (1 if use_desc else 0))


@pytest.mark.parametrize("use_desc", [True, False])
def test_isinstance_picks_the_descriptor_or_the_pointer(use_desc):
    _run(newt.jit(interpret=True)(copy_scaled.fn), "cpu", use_desc)


@pytest.mark.gpu
@pytest.mark.parametrize("use_desc", [True, False])
def test_isinstance_picks_the_descriptor_or_the_pointer_on_the_gpu(use_desc, monkeypatch):
    monkeypatch.delenv("NEWT_INTERPRET", raising=False)
    _run(copy_scaled, "cuda", use_desc)


def test_the_editor_resolves_the_types_and_stays_silent_on_an_unknown_argument():
    src = '''
import triton
import triton.language as tl


@triton.jit
def pick(desc_or_ptr, shape, strides, block_shape):
    if isinstance(desc_or_ptr, tl.tensor_descriptor):
        return desc_or_ptr
    else:
        return tl.make_tensor_descriptor(desc_or_ptr, shape, strides, block_shape)


@triton.jit
def k(desc_q, out_ptr, N, B: tl.constexpr):
    d = pick(desc_q, [N, N], [N, 1], [B, B])
    t = d.load([0, 0])
    o = tl.make_tensor_descriptor(out_ptr, [N, N], [N, 1], [B, B])
    o.store([0, 0], t)
    ok = isinstance(o, tl.tensor_descriptor_base)
    tl.static_assert(ok)
'''
    fa = analyze_source(src, "attn.py")
    assert not fa.diagnostics, "\n".join(d.format() for d in fa.diagnostics)
