"""Host time of one call of tutorial 06's forward through newt's drop-in, with no GPU (issue 28).

    python benchmarks/host_dispatch_offline.py [TUT_DIR] [--calls N] [--rounds R] [--profile] [--smoke]

On the H200 (2026-12-07, session 14) tutorial 06's forward at N=1024 timed 2.97x (d=64) and 2.01x (d=128)
Triton's time while N=4096 was 0.79-0.93x: a host-bound call (the kernel takes ~0.11 ms; the timer's L2 flush
leaves the host that long to enqueue the next one).  On the H100 (session 12) the same cells were 1.02-1.06x.
This script measures the host side alone: the tutorial's own ``attention`` (its TensorDescriptors, the
autotuner and its ``pre_hook``, the JIT's binding and specialization key, the launcher's parameter packing),
with the CUDA driver replaced by the test doubles of ``tests/runtime/fakes.py`` and, where ``_launch.c`` builds,
the compiled launch path over its null driver entry points (``--python-launch``: the pure-Python one), and
tensor-map encoding stubbed (cached per tensor at a real launch anyway).  Small CPU tensors stand for the GPU's:
read differences between runs of this script, not absolute figures against the device.  On the 2-core CI
machine (2026-12-07): 159-191 us a call when descriptors took the Python path, 112-119 us since the compiled
dispatcher keys them and the compiled launcher encodes the tensor maps.  ``--profile``: cProfile's top
functions by cumulative time."""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?", default=os.path.join(ROOT, ".ext", "triton-tutorials"))
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n-ctx", type=int, default=1024)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="one round of 5 calls")
    ap.add_argument("--python-launch", action="store_true", help="the pure-Python launch path (no _launch.c)")
    a = ap.parse_args(argv)
    if a.smoke:
        a.calls, a.rounds = 5, 1
    if not os.path.exists(os.path.join(a.dir, "06-fused-attention.py")):
        print(f"no 06-fused-attention.py in {a.dir}: nothing to time (fetch Triton's tutorials into .ext)")
        return 0
    os.environ.setdefault("NEWT_TARGET", "sm_90a")
    if a.python_launch:
        os.environ["NEWT_C_LAUNCHER"] = "0"  # neither the compiled dispatcher nor the compiled launcher
    os.environ["PYTEST_VERSION"] = "1"  # the tutorial's single forward config
    sys.path[:0] = [HERE, os.path.join(ROOT, "tests")]
    import newt.dropin
    newt.dropin.install(capability=(9, 0))
    import torch
    import triton_tutorial_timings as T
    from _pytest.monkeypatch import MonkeyPatch
    mod = T.load(a.dir, "06")  # (before the fake GPU: the tutorial asks the driver for its device at import)
    from runtime.fakes import install_fake_gpu

    from newt.runtime import driver, specialize, tensormap
    mp = MonkeyPatch()
    cu = install_fake_gpu(mp)
    cu.cuLaunchKernel = lambda *a: (0,)  # (the Python launch's driver call: returns success, records nothing)
    launcher = "Python"
    if not a.python_launch:
        from runtime.fakes import install_fake_c_launcher
        m = install_fake_c_launcher(mp, cu)
        if m is not None:  # the compiled launch path over null driver entry points (return 0, do nothing)
            entries = m.fake_driver(None)
            mp.setattr(driver, "launch_entry", lambda cooperative=False: entries[1 if cooperative else 0])
            launcher = "compiled"
    mp.setattr(specialize, "raise_not_cuda", lambda *x: None)
    mp.setattr(tensormap, "encode", lambda args, kernel, arg: b"\0" * 128)
    mp.setattr(torch.cuda, "get_device_capability", lambda *x: (9, 0))
    q, k, v = (torch.randn(1, 1, a.n_ctx, 64, dtype=torch.float16) for _ in range(3))  # (small: CPU allocations)

    def call():
        return mod.attention(q, k, v, False, 0.5, False)
    call()
    call()  # compiled (for sm_90a, through NVRTC) and cached by now
    rounds = []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        for _ in range(a.calls):
            call()
        rounds.append((time.perf_counter() - t0) / a.calls * 1e6)
    rounds.sort()
    print(f"tutorial 06 forward, Z1 H1 N{a.n_ctx} d64, {launcher} launch path: host time per call min "
          f"{rounds[0]:.1f} us, median {rounds[len(rounds) // 2]:.1f} us ({a.rounds} rounds of {a.calls} calls)")
    if a.profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(100):
            call()
        pr.disable()
        pstats.Stats(pr).sort_stats("cumtime").print_stats(25)
    mp.undo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
