"""newt.testing: do_bench (CPU fallback here, CUDA events in the gpu suite) and assert_close."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from newt import testing


def test_summarize():
    ts = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert testing.summarize(ts) == 3.0
    assert testing.summarize(ts, return_mode="min") == 1.0
    assert testing.summarize(ts, return_mode="max") == 5.0
    assert testing.summarize(ts, return_mode="mean") == 3.0
    assert testing.summarize(ts, return_mode="all") == ts
    assert testing.summarize(ts, quantiles=[0.5]) == 3.0
    assert testing.summarize(ts, quantiles=[0.0, 0.25, 1.0]) == [1.0, 2.0, 5.0]
    assert testing.summarize([1.0, 2.0], quantiles=[0.5]) == 1.5
    assert testing.summarize(ts, quantiles=[0.2, 0.8]) == pytest.approx(
        torch.quantile(torch.tensor(ts, dtype=torch.float64), torch.tensor([0.2, 0.8], dtype=torch.float64)).tolist())
    with pytest.raises(ValueError):
        testing.summarize(ts, return_mode="p99")


def test_do_bench_on_the_cpu():
    calls = []

    def work():
        calls.append(1)
        time.sleep(0.002)
    t = testing.do_bench(work, warmup=5, rep=20, device="cpu")
    assert 1.5 < t < 50
    assert 5 <= len(calls) <= 40
    q = testing.do_bench(work, warmup=0, rep=10, quantiles=[0.1, 0.5, 0.9], device="cpu")
    assert q[0] <= q[1] <= q[2]


def test_do_bench_resets_grads():
    x = torch.ones(3, requires_grad=True)
    x.grad = torch.ones(3)
    seen = []
    testing.do_bench(lambda: seen.append(x.grad), warmup=0, rep=1, grad_to_none=[x], device="cpu")
    assert seen[-1] is None


def test_assert_close_passes_within_tolerance():
    a = torch.tensor([1.0, 2.0, float("nan")])
    testing.assert_close(a, a + 1e-6)
    testing.assert_close(a.half(), (a + 5e-3).half())
    testing.assert_close(np.array([1, 2, 3]), torch.tensor([1, 2, 3]))
    testing.assert_close(2.0, torch.tensor(2.0))
    testing.assert_close(torch.tensor([float("inf")]), torch.tensor([float("inf")]))


def test_assert_close_reports_the_worst_element():
    a = torch.zeros(4, 5)
    b = a.clone()
    b[2, 3] = 1.0
    b[0, 0] = 1e-3
    with pytest.raises(AssertionError) as ei:
        testing.assert_close(a, b, err_msg="my kernel")
    msg = str(ei.value)
    assert msg.startswith("my kernel: ")
    assert "2 / 20 elements" in msg and "index (2, 3)" in msg and "0.0 vs 1.0" in msg


def test_assert_close_exact_for_ints_and_shape_mismatch():
    with pytest.raises(AssertionError, match=r"1 / 3 elements differ; first at index \(1,\): 5 vs 2"):
        testing.assert_close(torch.tensor([1, 5, 3]), torch.tensor([1, 2, 3]))
    with pytest.raises(AssertionError, match="shapes differ"):
        testing.assert_close(torch.zeros(3), torch.zeros(4))
    with pytest.raises(AssertionError, match="dtypes differ"):
        testing.assert_close(torch.zeros(3), torch.zeros(3, dtype=torch.float64), check_dtype=True)
    with pytest.raises(AssertionError):
        testing.assert_close(torch.tensor([float("nan")]), torch.tensor([float("nan")]), equal_nan=False)
