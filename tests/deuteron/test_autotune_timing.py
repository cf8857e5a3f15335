"""What the tuner times is what a call runs (issue 12): a call after tuning reuses the traced program.

A kernel whose host code passes a ``dt.specialize`` value into the tile loop (attention's ``head_dim``) was
traced again on every call: the guard recorded the value as an ``int`` and compared it with the
``SpecializedInt`` the host code hands over, so the guard never held.  On the H200 (2026-12-02) that made a
tuned attention call 3.25 ms where the tuner had timed its kernel at 1.39 ms (the trace and code generation,
~2 ms of Python per call, ran before every launch)."""

from __future__ import annotations

import torch

import deuteron as dt
import deuteron.runtime as drt


@dt.kernel(config=dt.Config(block_sizes=[16]))
def _scaled_rows(x: torch.Tensor) -> torch.Tensor:
    n = dt.specialize(x.size(1))
    out = torch.empty_like(x)
    for tile in dt.tile(x.size(0)):
        out[tile, :] = x[tile, :] * (1.0 / n)
    return out


def test_a_specialized_value_does_not_retrace_each_call(monkeypatch):
    x = torch.randn(40, 32)
    torch.testing.assert_close(_scaled_rows(x), x / 32)
    b = _scaled_rows._bind((x,), {})
    e = _scaled_rows._entry(b)
    traced = {k: list(v) for k, v in e.programs.items()}
    assert traced and all(len(v) == 1 for v in traced.values())
    launches = []
    real = drt.launch
    monkeypatch.setattr(drt, "launch", lambda *a, **k: (launches.append(1), real(*a, **k))[1])
    for _ in range(3):
        torch.testing.assert_close(_scaled_rows(x), x / 32)
    assert len(launches) == 3
    # the same program objects: nothing was traced again
    assert {k: list(v) for k, v in e.programs.items()} == traced


def test_another_specialized_value_is_a_new_program():
    x = torch.randn(40, 32)
    y = torch.randn(40, 64)
    torch.testing.assert_close(_scaled_rows(x), x / 32)
    torch.testing.assert_close(_scaled_rows(y), y / 64)
    torch.testing.assert_close(_scaled_rows(x), x / 32)
