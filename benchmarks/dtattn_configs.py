"""Issue 25 on the GPU: deuteron's attention at pinned configs against hand-written newt, same process, same card.

    python3 benchmarks/dtattn_configs.py [--helion-examples .ext/helion/examples] [--rounds 3]

Times (median of do_bench medians over interleaved rounds, 4x32x4096x64 fp16) the generated launches of
examples/deuteron/attention.py and, with ``--helion-examples``, of Helion's examples/attention.py through newt's
drop-in (``import helion`` served by deuteron), each at the configs below (block sizes [1, 128, 64]; warps 4/8;
stages 2/3; L2 grouping 1 -- the hand-written kernel's order, query blocks of one head side by side -- or 8, the
default), next to the hand-written newt attention of deuteron_bench.py at its autotuned best.  Each result is
checked against scaled_dot_product_attention first.  Prints one line per (kernel, config) and the best ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples" / "deuteron"))

CONFIGS = [dict(block_sizes=[1, 128, 64], num_warps=w, num_stages=s, l2_groupings=[g])
           for w in (8, 4) for s in (3, 2) for g in (1, 8)]


def _helion_attention(examples: Path):
    import deuteron.frontend
    import newt.dropin
    deuteron.frontend.register()
    newt.dropin.install()
    sys.path.insert(0, str(examples))
    spec = importlib.util.spec_from_file_location("_dtattn_helion_attention", examples / "attention.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.attention


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helion-examples", default=None, help="Helion's examples/ directory (unmodified)")
    ap.add_argument("--rounds", type=int, default=3)
    ns = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("dtattn_configs.py needs a CUDA GPU (it times deuteron's attention against hand-written newt); "
              "benchmarks/run_device.sh dtattn runs it on the device", file=sys.stderr)
        return 2
    from deuteron_bench import bench_ms, dt_kernel, instantiate, launch_only, make_case

    import deuteron as dt
    case = make_case("attention", small=False)
    args = case["args"]
    ref = case["ref"]()
    kernels = {"deuteron example": dt_kernel("attention")}
    if ns.helion_examples:
        kernels["Helion example (drop-in)"] = _helion_attention(Path(ns.helion_examples))
    hand = instantiate("newt").attention
    got = hand(*args)
    torch.testing.assert_close(got, ref, atol=2e-2, rtol=2e-2)
    fns = {("hand-written newt", "autotuned"): lambda: hand(*args)}
    for name, k in kernels.items():
        for c in CONFIGS:
            cfg = dt.Config(**c)
            out = k.run_with(cfg, *args)
            out = out[0] if isinstance(out, tuple) else out
            torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)
            fns[(name, f"nw{c['num_warps']} ns{c['num_stages']} l2g{c['l2_groupings'][0]}")] = launch_only(k, cfg, args)
    times = {key: [] for key in fns}
    for _ in range(ns.rounds):
        for key, fn in fns.items():
            times[key].append(bench_ms(fn))
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    hw = statistics.median(times[("hand-written newt", "autotuned")])
    for key, ts in times.items():
        ms = statistics.median(ts)
        print(f"{key[0]:26s} {key[1]:12s} {ms:8.4f} ms   hand-written/this {hw / ms:5.2f}x")
    for name in kernels:
        best = min((statistics.median(ts), key[1]) for key, ts in times.items() if key[0] == name)
        print(f"best {name}: {best[0]:.4f} ms at {best[1]} ({hw / best[0]:.2f}x hand-written newt {hw:.4f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
