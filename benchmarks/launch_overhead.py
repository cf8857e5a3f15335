"""Host-side launch overhead: newt vs Triton in the same process, same kernel source.

    python3 benchmarks/launch_overhead.py [--out DIR] [--launches 200] [--windows 50]

For each way of launching (a tuple grid, a ``callable(meta)`` grid, an
autotuned kernel after tuning) it times only the Python side: windows of
``--launches`` launches of a one-block kernel are timed with
``time.perf_counter`` and the GPU is synchronised between windows (untimed),
so the launch queue never fills and the figure is the host cost per launch.
Median over the windows.  The floor (``cuLaunchKernel`` through
cuda-bindings with pre-packed arguments) and ``torch.add(out=)`` are shown for
scale.  Target: newt under 8 us per launch (Triton: ~11 us plain, ~16 us
autotuned on the H200 host).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, instantiate, write_json  # noqa: E402

TEMPLATE = r'''
import $P
import $P.language as $L


@$P.jit
def small_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: $L.constexpr):
    offs = $L.program_id(0) * BLOCK + $L.arange(0, BLOCK)
    mask = offs < n
    $L.store(out_ptr + offs, $L.load(x_ptr + offs, mask=mask) + $L.load(y_ptr + offs, mask=mask), mask=mask)


@$P.autotune(configs=[$P.Config({"BLOCK": 128}, num_warps=4), $P.Config({"BLOCK": 256}, num_warps=4)], key=["n"])
@$P.jit
def tuned_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: $L.constexpr):
    offs = $L.program_id(0) * BLOCK + $L.arange(0, BLOCK)
    mask = offs < n
    $L.store(out_ptr + offs, $L.load(x_ptr + offs, mask=mask) + $L.load(y_ptr + offs, mask=mask), mask=mask)
'''


def per_launch_us(launch, launches: int, windows: int) -> dict:
    import gc

    import torch
    for _ in range(20):
        launch()
    torch.cuda.synchronize()
    samples = []
    gc0 = [g["collections"] for g in gc.get_stats()]
    for _ in range(windows):
        t0 = time.perf_counter()
        for _ in range(launches):
            launch()
        samples.append((time.perf_counter() - t0) / launches * 1e6)
        torch.cuda.synchronize()
    gcs = [g["collections"] - c for g, c in zip(gc.get_stats(), gc0)]
    return {"median_us": statistics.median(samples), "min_us": min(samples),
            "p90_us": sorted(samples)[int(0.9 * (len(samples) - 1))],
            "samples_us": [round(x, 3) for x in samples], "gc_collections": gcs}


def cases(modules):
    import torch
    n = 128
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    grid_fn = lambda meta: ((n + meta["BLOCK"] - 1) // meta["BLOCK"],)  # noqa: E731
    out_cases = {}
    for impl, m in modules.items():
        k, t = m.small_kernel, m.tuned_kernel
        out_cases[f"{impl}: tuple grid"] = lambda k=k: k[(1,)](x, y, out, n, BLOCK=128)
        out_cases[f"{impl}: callable grid"] = lambda k=k: k[grid_fn](x, y, out, n, BLOCK=128)
        out_cases[f"{impl}: autotuned"] = lambda t=t: t[grid_fn](x, y, out, n)
    out_cases["torch.add(out=)"] = lambda: torch.add(x, y, out=out)
    if "newt" in modules:
        ck = modules["newt"].small_kernel.warmup(x, y, out, n, BLOCK=128, grid=(1,))
        dev = torch.cuda.current_device()
        launcher = ck.launcher(dev)
        stream = torch.cuda.current_stream().cuda_stream
        vals = (x.data_ptr(), y.data_ptr(), out.data_ptr(), n)
        out_cases["floor: packed cuLaunchKernel (newt Launcher)"] = lambda: launcher.launch(1, 1, 1, stream, *vals)
        from cuda.bindings import driver
        buf = launcher.buffer
        buf.packer.pack_into(buf.view, 0, *vals)
        f, bx, addr = launcher.function, launcher.block, buf.params_addr
        out_cases.update(deuteron_cases())
        out_cases["floor: bare cuda.bindings cuLaunchKernel"] = lambda: driver.cuLaunchKernel(f, 1, 1, 1, bx, 1, 1, 0,
                                                                                              stream, addr, 0)
    return out_cases


def deuteron_cases() -> dict:
    """The examples' deuteron softmax and layer norm on small inputs, at a fixed config (no tuning): what a
    deuteron call costs on the host (binding, the entry and program lookups, the host code, the launch)."""
    import torch
    try:
        import deuteron as dt
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "deuteron"))
        import layer_norm
        import softmax
    except ImportError as e:
        print(f"deuteron cases skipped: {e}")
        return {}
    cfg = dt.Config(block_sizes=[1], reduction_loops=[None], num_warps=4)
    sm = dt.kernel(config=cfg)(softmax.softmax.fn)
    ln = dt.kernel(config=cfg)(layer_norm.layer_norm.fn)
    x = torch.randn(4, 128, device="cuda", dtype=torch.float16)
    w, b = torch.randn(128, device="cuda", dtype=torch.float16), torch.randn(128, device="cuda", dtype=torch.float16)
    return {"deuteron: softmax call": lambda: sm(x), "deuteron: layer_norm call": lambda: ln(x, w, b)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).resolve().parent))
    p.add_argument("--launches", type=int, default=200, help="launches per timed window")
    p.add_argument("--windows", type=int, default=50)
    args = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("launch_overhead.py needs a CUDA GPU", file=sys.stderr)
        return 2
    modules = {"newt": instantiate(TEMPLATE, "newt", "overhead")}
    try:
        modules["triton"] = instantiate(TEMPLATE, "triton", "overhead")
    except Exception as e:  # noqa: BLE001
        print(f"Triton unavailable: {type(e).__name__}: {e}")
    results = {}
    for name, launch in cases(modules).items():
        results[name] = per_launch_us(launch, args.launches, args.windows)
        print(f"{name:48s} {results[name]['median_us']:7.2f} us (min {results[name]['min_us']:.2f})", flush=True)
    ratios = {}
    for mode in ("tuple grid", "callable grid", "autotuned"):
        a, b = results.get(f"newt: {mode}"), results.get(f"triton: {mode}")
        if a and b:
            ratios[mode] = b["median_us"] / a["median_us"]
    data = {"info": environment(), "launches_per_window": args.launches, "windows": args.windows,
            "results": results, "triton_over_newt": ratios,
            "target_met": all(results.get(f"newt: {m}", {}).get("median_us", 1e9) < 8.0 for m in
                              ("tuple grid", "autotuned"))}
    out = Path(args.out)
    write_json(out / "launch_overhead.json", data)
    lines = [f"# Launch overhead — {data['info'].get('gpu', '?')}", "",
             f"{data['info'].get('date')}; torch {data['info'].get('torch')}, Triton {data['info'].get('triton')}, "
             f"cuda-bindings {data['info'].get('cuda_bindings')}. Host time per launch of a one-block kernel "
             f"(median of {args.windows} windows of {args.launches} launches, GPU synchronised between windows).", "",
             "| launch | median µs | min µs |", "|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['median_us']:.2f} | {r['min_us']:.2f} |")
    lines += ["", "Triton / newt: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()),
              f"Target (newt < 8 µs plain and autotuned): {'met' if data['target_met'] else 'not met'}.", ""]
    (out / "launch_overhead.md").write_text("\n".join(lines))
    print("\n".join(lines[-3:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
