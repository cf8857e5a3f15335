"""Timing for the tuner: ``newt.testing.do_bench`` plus early stop and CUDA-graph timing."""

from __future__ import annotations

import time

__all__ = ["bench"]


def bench(fn, warmup: float = 25, rep: float = 100, cutoff_ms: float | None = None, use_cuda_graph: bool = False,
          quantiles=(0.5, 0.2, 0.8)) -> dict:
    """``{"status": "ok", "ms", "quantiles"}``, or ``{"status": "hopeless", "ms"}`` when a first estimate
    (five runs) is already above ``cutoff_ms`` -- such a config cannot win, and its full measurement is
    skipped.  ``use_cuda_graph``: time replays of a CUDA graph of the launches (launch-bound kernels: the
    host's launch overhead is left out)."""
    from newt.testing import cuda_available, do_bench
    gpu = cuda_available()
    est = _estimate(fn, gpu)
    if cutoff_ms is not None and est > cutoff_ms:
        return {"status": "hopeless", "ms": est,
                "message": f"a first estimate of {est:.4g} ms is above the cut-off {cutoff_ms:.4g} ms"}
    if use_cuda_graph and gpu:
        q = _graph_bench(fn, rep, quantiles, est)
    else:
        q = do_bench(fn, warmup=warmup, rep=rep, quantiles=list(quantiles))
    q = [float(x) for x in (q if isinstance(q, (list, tuple)) else [q] * len(quantiles))]
    return {"status": "ok", "ms": q[0], "quantiles": q}


def _estimate(fn, gpu: bool) -> float:
    if not gpu:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    import torch

    from newt.runtime.driver import synchronize
    synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(5):
        fn()
    e.record()
    synchronize()
    return max(s.elapsed_time(e) / 5, 1e-4)


def _graph_bench(fn, rep: float, quantiles, est_ms: float) -> list:
    import torch

    from newt.runtime.driver import synchronize
    from newt.testing import summarize
    n_inner = max(1, min(100, int(1.0 / max(est_ms, 1e-4))))  # ~1 ms of work per replay
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # the launcher's first use (argument packing) outside the capture
    synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for _ in range(n_inner):
            fn()
    g.replay()
    synchronize()
    n_rep = max(3, int(rep / max(est_ms * n_inner, 1e-3)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        starts[i].record()
        g.replay()
        ends[i].record()
    synchronize()
    times = [s.elapsed_time(e) / n_inner for s, e in zip(starts, ends)]
    return summarize(times, list(quantiles), "median")
