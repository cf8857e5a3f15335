"""Argument tensors: CPU tensors in place (views, strides, aliasing); other devices staged."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt import interpreter as ni
from newt.interpreter import memory
from newt.runtime import interpret as nri


@newt.jit
def scale_kernel(x_ptr, out_ptr, n, sx, so, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    m = offs < n
    nl.store(out_ptr + offs * so, nl.load(x_ptr + offs * sx, mask=m) * 2, mask=m)


def test_cpu_views_are_used_in_place():
    base = torch.arange(40, dtype=torch.float32)
    x = base[1::3]  # strided view with an offset
    out = base[::2]  # overlapping view of the same storage, written in place
    n = 10
    want = base.clone()
    want[::2][:n] = base[1::3][:n] * 2
    nri.launch_jit(scale_kernel, (1,), (x, out, n, x.stride(0), out.stride(0)), {"BLOCK": 16})
    assert torch.equal(base, want)


@pytest.fixture
def fake_device(monkeypatch):
    """Treat every tensor as living on another device: staged through host copies."""
    calls = {"to_host": 0, "copy_back": []}
    real_to_host = memory._to_host

    def to_host(flat):
        calls["to_host"] += 1
        h = real_to_host(flat)
        assert h.data_ptr() != flat.data_ptr()
        return h

    def copy_back(dst, src):
        calls["copy_back"].append(dst.data_ptr())
        dst.copy_(src)

    monkeypatch.setattr(memory, "needs_host_copy", lambda t: True)
    monkeypatch.setattr(memory, "_to_host", to_host)
    monkeypatch.setattr(memory, "_copy_back", copy_back)
    return calls


def test_staged_tensors_copy_in_and_back(fake_device):
    x = torch.arange(16, dtype=torch.float32)
    out = torch.zeros(16)
    nri.launch_jit(scale_kernel, (1,), (x, out, 16, 1, 1), {"BLOCK": 16})
    assert torch.equal(out, x * 2)
    assert fake_device["to_host"] == 2
    # only the storage the kernel wrote goes back
    assert fake_device["copy_back"] == [out.untyped_storage().data_ptr()]


def test_staging_keeps_aliasing(fake_device):
    base = torch.arange(40, dtype=torch.float32)
    x, out = base[1::3], base[::2]
    want = base.clone()
    want[::2][:10] = base[1::3][:10] * 2
    nri.launch_jit(scale_kernel, (1,), (x, out, 10, 3, 2), {"BLOCK": 16})
    assert fake_device["to_host"] == 1  # one storage, staged once for both views
    assert torch.equal(base, want)


def test_staged_writes_survive_an_error(fake_device):
    @newt.jit
    def partial_kernel(out_ptr):
        nl.store(out_ptr, 5.0)
        nl.store(out_ptr + 100, 1.0)  # out of bounds
    out = torch.zeros(4)
    with pytest.raises(ni.OutOfBoundsError):
        nri.launch_jit(partial_kernel, (1,), (out,), {})
    assert out[0] == 5.0  # what ran before the error is visible, as on the GPU


@pytest.mark.gpu
def test_cuda_tensors_round_trip():
    x = torch.arange(16, dtype=torch.float32, device="cuda")
    out = torch.zeros(16, device="cuda")
    nri.launch_jit(scale_kernel, (1,), (x, out, 16, 1, 1), {"BLOCK": 16})
    assert out.device.type == "cuda"
    assert torch.equal(out.cpu(), x.cpu() * 2)


@newt.jit
def empty_kernel(x_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, 1.0, mask=offs < n)


def test_empty_tensor_argument():
    x = torch.zeros(0)
    nri.launch_jit(empty_kernel, (1,), (x, 0), {"BLOCK": 8})
    with pytest.raises(ni.OutOfBoundsError, match="a float32 tensor of 0 elements"):
        nri.launch_jit(empty_kernel, (1,), (x, 1), {"BLOCK": 8})
