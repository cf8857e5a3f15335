"""Where tutorial 06's time goes, one side at a time: run under real Triton (``python3 benchmarks/tut06_profile.py
DIR``) or newt's drop-in (``python3 -m newt.dropin benchmarks/tut06_profile.py DIR``).  For each case: the host
wall time per call (synchronized), then torch.profiler's list of the GPU kernels one call launches with their
durations (so an extra copy or memset, or a slow kernel, shows by name), then the host's top functions by
cumulative time (cProfile).  A diagnostic for issue 28's tutorial-06 gaps; the ratios come from
triton_tutorial_timings.py."""
from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


CASES = [(4, 32, 1024, 64, False, "fwd", "fp16"), (4, 32, 4096, 64, False, "fwd", "fp16"),
         (4, 32, 4096, 64, False, "fwd", "fp8"), (4, 32, 1024, 64, False, "bwd", "fp16"),
         (4, 32, 4096, 64, True, "bwd", "fp16")]


def make_case(mod, z, h, n, d, causal, mode, prec):
    """The call the case times (tutorial 06's ``attention``, or its backward)."""
    import torch
    q, k, v = (torch.randn((z, h, n, d), dtype=torch.float16, device="cuda", requires_grad=True) for _ in range(3))
    if prec == "fp8":
        q, k = q.to(torch.float8_e5m2), k.to(torch.float8_e5m2)
        v = v.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)

    def fwd():
        return mod.attention(q, k, v, causal, 1.3, False)
    if mode == "fwd":
        return fwd
    o = fwd()
    do = torch.randn_like(o)
    return lambda: o.backward(do, retain_graph=True)


def profile_case(fn, label: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / 20 * 1e3
    t0 = time.perf_counter()
    for _ in range(20):
        fn()
    host = (time.perf_counter() - t0) / 20 * 1e3
    torch.cuda.synchronize()
    print(f"\n== {label}: {wall:.4f} ms per synchronized call, {host:.4f} ms host per call (unsynchronized)",
          flush=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8, max_name_column_width=60), flush=True)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(14)
    print("\n".join(s.getvalue().splitlines()[:40]), flush=True)


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="the folder with Triton's tutorial files (06-fused-attention.py)")
    a = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("tut06_profile.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    import triton
    from triton_tutorial_timings import load
    dir_ = os.path.abspath(a.dir)
    os.environ.setdefault("PYTEST_VERSION", "profile")  # the tutorial's one config, as the timings use
    sys.path.insert(0, dir_)
    mod = load(dir_, "06")
    print("triton", triton.__version__, triton.__file__, flush=True)
    for z, h, n, d, causal, mode, prec in CASES:
        label = f"{mode} {prec} N{n} d{d}{' causal' if causal else ''}"
        profile_case(make_case(mod, z, h, n, d, causal, mode, prec), label)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
