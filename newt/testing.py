"""Benchmarking and checking helpers: ``do_bench`` and ``assert_close``.

``do_bench`` times a callable on the GPU with CUDA events, after warm-up,
flushing the L2 cache (writing a 256 MB buffer) before every repetition, and
returns the median (or quantiles, or another statistic) in milliseconds.
Without a GPU it times on the CPU with ``time.perf_counter`` (no flush).
"""

from __future__ import annotations

import math
import time

__all__ = ["do_bench", "assert_close", "cuda_available", "l2_flush_buffer", "summarize"]

L2_FLUSH_BYTES = 256 * 1024 * 1024
_FLUSH: dict = {}


def _torch():
    import torch
    return torch


def cuda_available() -> bool:
    try:
        return bool(_torch().cuda.is_available())
    except Exception:
        return False


def l2_flush_buffer(device=None):
    """The 256 MB buffer written between repetitions to evict the L2 cache (one per device)."""
    torch = _torch()
    dev = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    buf = _FLUSH.get(dev)
    if buf is None:
        buf = _FLUSH[dev] = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=dev)
    return buf


def summarize(times, quantiles=None, return_mode: str = "median"):
    """Reduce a list of times (ms): ``quantiles`` wins over ``return_mode``."""
    if return_mode not in ("min", "max", "mean", "median", "all"):
        raise ValueError(f"return_mode must be one of min, max, mean, median, all; got {return_mode!r}")
    ts = sorted(float(t) for t in times)
    if not ts:
        raise ValueError("no timings")
    if quantiles is not None:
        out = [_quantile(ts, q) for q in quantiles]
        return out[0] if len(out) == 1 else out
    if return_mode == "all":
        return [float(t) for t in times]
    if return_mode == "min":
        return ts[0]
    if return_mode == "max":
        return ts[-1]
    if return_mode == "mean":
        return sum(ts) / len(ts)
    return _quantile(ts, 0.5)


def _quantile(sorted_ts, q: float) -> float:
    """Linear interpolation between closest ranks (like ``torch.quantile``)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantiles must lie in [0, 1], got {q}")
    pos = q * (len(sorted_ts) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_ts) - 1)
    return sorted_ts[lo] + (sorted_ts[hi] - sorted_ts[lo]) * (pos - lo)


def do_bench(fn, warmup: float = 25, rep: float = 100, grad_to_none=None, quantiles=None, return_mode="median",
             device: str | None = None, flush_l2: bool = True):
    """Time ``fn()`` in milliseconds.

    ``warmup``/``rep``: milliseconds of warm-up and of measured repetitions (the
    counts come from a first estimate).  ``grad_to_none``: tensors whose
    ``.grad`` is reset before each repetition.  ``quantiles`` (e.g. ``[0.5,
    0.2, 0.8]``) returns those quantiles; otherwise ``return_mode`` picks the
    statistic (``median`` by default, ``min``, ``max``, ``mean``, ``all``).
    ``device``: ``"cuda"`` (default when a GPU is present) or ``"cpu"``.
    """
    if return_mode not in ("min", "max", "mean", "median", "all"):
        raise ValueError(f"return_mode must be one of min, max, mean, median, all; got {return_mode!r}")
    use_cuda = (device is None and cuda_available()) or (device is not None and str(device).startswith("cuda"))
    if not use_cuda:
        return _do_bench_cpu(fn, warmup, rep, grad_to_none, quantiles, return_mode)
    torch = _torch()
    from newt.runtime.driver import synchronize
    fn()
    synchronize()
    cache = l2_flush_buffer() if flush_l2 else None
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        if cache is not None:
            cache.zero_()
        fn()
    end.record()
    synchronize()
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-4)
    n_warmup = max(1, int(warmup / estimate_ms))
    n_repeat = max(1, int(rep / estimate_ms))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        if cache is not None:
            cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return summarize(times, quantiles, return_mode)


def _do_bench_cpu(fn, warmup, rep, grad_to_none, quantiles, return_mode):
    t0 = time.perf_counter()
    fn()
    first = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    fn()
    estimate_ms = max(min(first, (time.perf_counter() - t0) * 1e3), 1e-4)
    n_warmup = max(0, int(warmup / estimate_ms))
    n_repeat = max(1, int(rep / estimate_ms))
    for _ in range(n_warmup):
        fn()
    times = []
    for _ in range(n_repeat):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return summarize(times, quantiles, return_mode)


_DEFAULT_TOL = {  # dtype name -> (atol, rtol)
    "float64": (1e-7, 1e-7), "float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2),
    "float8_e4m3fn": (1e-1, 1e-1), "float8_e5m2": (2e-1, 2e-1),
}


def _as_tensor(x):
    torch = _torch()
    if isinstance(x, torch.Tensor):
        return x.detach()
    try:
        import numpy as np
        if isinstance(x, np.ndarray):
            return torch.from_numpy(x)
    except ImportError:
        pass
    return torch.as_tensor(x)


def assert_close(actual, expected, atol: float | None = None, rtol: float | None = None, err_msg: str = "",
                 equal_nan: bool = True, check_dtype: bool = False):
    """Assert ``|actual - expected| <= atol + rtol * |expected|`` elementwise (NaN == NaN by default).

    Accepts tensors (any device), numpy arrays and numbers.  Default tolerances
    follow the less precise dtype (fp32: 1e-4, fp16: 1e-2, bf16: 2e-2; ints and
    bools must match exactly).  The message reports how many elements differ
    and the worst one.
    """
    torch = _torch()
    a, e = _as_tensor(actual), _as_tensor(expected)
    prefix = f"{err_msg}: " if err_msg else ""
    if check_dtype and a.dtype != e.dtype:
        raise AssertionError(f"{prefix}dtypes differ: {a.dtype} vs {e.dtype}")
    if a.shape != e.shape:
        if a.numel() == e.numel() == 1:
            a, e = a.reshape(()), e.reshape(())
        else:
            raise AssertionError(f"{prefix}shapes differ: {tuple(a.shape)} vs {tuple(e.shape)}")
    a, e = a.cpu(), e.cpu()
    exact = not (a.dtype.is_floating_point or e.dtype.is_floating_point or a.is_complex() or e.is_complex())
    if atol is None or rtol is None:
        names = [str(t).replace("torch.", "") for t in (a.dtype, e.dtype)]
        tols = [_DEFAULT_TOL[n] for n in names if n in _DEFAULT_TOL]
        dat, drt = (max(t[0] for t in tols), max(t[1] for t in tols)) if tols else (0.0, 0.0)
        atol = dat if atol is None else atol
        rtol = drt if rtol is None else rtol
    if exact and atol == 0 and rtol == 0:
        bad = a.to(torch.int64) != e.to(torch.int64) if a.dtype != torch.bool or e.dtype != torch.bool else a != e
        if bool(bad.any()):
            idx = tuple(int(i) for i in bad.nonzero()[0])
            raise AssertionError(f"{prefix}{int(bad.sum())} / {bad.numel()} elements differ; first at index "
                                 f"{idx}: {a[idx].item()} vs {e[idx].item()}")
        return
    a64, e64 = a.to(torch.float64), e.to(torch.float64)
    diff = (a64 - e64).abs()
    tol = atol + rtol * e64.abs()
    close = (diff <= tol) | (a64 == e64)
    if equal_nan:
        close |= a64.isnan() & e64.isnan()
    if bool(close.all()):
        return
    bad = ~close
    nbad = int(bad.sum())
    d = torch.where(bad, diff.nan_to_num(nan=math.inf), torch.zeros_like(diff))
    flat = int(d.reshape(-1).argmax())
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape)) if a.dim() else ()
    av, ev = a64[idx].item(), e64[idx].item()
    rel = abs(av - ev) / abs(ev) if ev not in (0.0,) and math.isfinite(ev) else math.inf
    raise AssertionError(
        f"{prefix}tensors are not close: {nbad} / {bad.numel()} elements ({100.0 * nbad / bad.numel():.3g}%) exceed "
        f"atol={atol:g}, rtol={rtol:g}; the worst is at index {idx}: {av!r} vs {ev!r} "
        f"(absolute difference {abs(av - ev):.4g}, relative {rel:.4g})")
