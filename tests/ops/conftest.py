"""The op-parity suite: every test takes a ``backend`` and runs once per backend.

* ``interpreter`` (always): ``newt.runtime.interpret.launch_jit`` on CPU tensors.
* ``cuda`` (``@pytest.mark.gpu``): ``kernel[grid](...)`` on CUDA tensors, the
  runtime's compile-and-launch path.

Tests build their inputs on the CPU, hand them to ``backend.put`` and read
results back with ``backend.get``, so the same body checks both backends
against the same torch reference.
"""

from __future__ import annotations

import pytest
import torch


class Backend:
    def __init__(self, name: str):
        self.name = name
        self.device = "cuda" if name == "cuda" else "cpu"

    def put(self, *ts):
        out = [t.to(self.device) if isinstance(t, torch.Tensor) else t for t in ts]
        return out[0] if len(out) == 1 else out

    def get(self, t):
        return t.cpu() if isinstance(t, torch.Tensor) else t

    def empty(self, *shape, dtype=torch.float32):
        return torch.empty(*shape, dtype=dtype, device=self.device)

    def zeros(self, *shape, dtype=torch.float32):
        # made on the CPU and copied: CUDA kernels for the unsigned and fp8 dtypes are sparse in torch
        return torch.zeros(*shape, dtype=dtype).to(self.device)

    def full(self, shape, value, dtype):
        return torch.full(shape, value, dtype=dtype).to(self.device)

    def launch(self, kernel, grid, *args, **kwargs):
        if self.name == "interpreter":
            from newt.runtime.interpret import launch_jit
            launch_jit(kernel, grid, args, kwargs)
        else:
            kernel[grid](*args, **kwargs)
            torch.cuda.synchronize()

    def __repr__(self):
        return self.name


@pytest.fixture(params=["interpreter", pytest.param("cuda", marks=pytest.mark.gpu)])
def backend(request, monkeypatch):
    if request.param == "cuda":
        monkeypatch.delenv("NEWT_INTERPRET", raising=False)
    return Backend(request.param)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)
    yield

