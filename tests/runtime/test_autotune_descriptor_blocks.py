"""Autotune configs whose ``pre_hook`` sets a host descriptor's block (Liger-Kernel's ``mlp.py``: descriptors
made with ``block_shape=[1, 1, 1]``, each config's hook writes ``[1, BLOCK_M, BLOCK_K]``): compiling a config
ahead of its launch uses that config's block, so no config is refused for the placeholder's 4-byte block."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt.tools.tensor_descriptor import TensorDescriptor


def _set_blocks(nargs):
    nargs["x_desc"].block_shape = [nargs["BM"], nargs["BN"]]
    nargs["y_desc"].block_shape = [nargs["BM"], nargs["BN"]]


CONFIGS = [newt.Config({"BM": 16, "BN": 16}, num_warps=1, pre_hook=_set_blocks),
           newt.Config({"BM": 32, "BN": 16}, num_warps=2, pre_hook=_set_blocks)]


def _scale_kernel(x_desc, y_desc, BM: nl.constexpr, BN: nl.constexpr):
    m = nl.program_id(0) * BM
    n = nl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]) * 3.0)


def _launch(kernel, device):
    M, N = 64, 32
    x = torch.randn(M, N).to(device)
    y = torch.zeros(M, N).to(device)
    dummy = [1, 1]  # the library's placeholder, replaced by each config's pre_hook
    xd = TensorDescriptor.from_tensor(x, dummy)
    yd = TensorDescriptor.from_tensor(y, dummy)
    kernel[lambda meta: (M // meta["BM"], N // meta["BN"])](xd, yd)
    torch.testing.assert_close(y.cpu(), x.cpu() * 3.0)
    return xd


def test_every_config_compiles_with_the_block_its_hook_sets():
    tuned = newt.autotune(CONFIGS, key=[])(newt.jit(interpret=True)(_scale_kernel))
    xd = _launch(tuned, "cpu")
    assert tuned.failed_configs == {}
    assert len(tuned.configs_timings or {}) == 2
    # the launch itself used the chosen config's block (its hook ran on the caller's descriptor)
    assert list(xd.block_shape) == [tuned.best_config.kwargs["BM"], tuned.best_config.kwargs["BN"]]


def test_warmup_of_every_config_sees_its_block():
    tuned = newt.autotune(CONFIGS, key=[])(newt.jit(interpret=True)(_scale_kernel))
    xd = TensorDescriptor.from_tensor(torch.randn(64, 32), [1, 1])
    yd = TensorDescriptor.from_tensor(torch.zeros(64, 32), [1, 1])
    out = tuned.warmup(xd, yd, grid=(1,))
    assert len(out) == 2
    assert list(xd.block_shape) == [1, 1]  # compiling ahead left the caller's descriptors alone


@pytest.mark.gpu
def test_configs_with_descriptor_hooks_on_the_gpu(monkeypatch):
    monkeypatch.delenv("NEWT_INTERPRET", raising=False)
    _launch(newt.autotune(CONFIGS, key=[])(newt.jit(_scale_kernel)), "cuda")
