"""Per-config times of the row kernels (softmax, layer norm), newt and Triton interleaved.

    python3 benchmarks/config_sweep.py [--cells layernorm:8192x2048:float32,...] [--warps 2,4,8,16,32]
                                       [--rounds 3] [--out DIR]

``bench.py`` reports each implementation at the config its autotuner picked;
when a cell is close, that hides whether the two compilers differ per config
or only in the pick.  This script times every ``num_warps`` of the same
kernel source (``bench.TEMPLATE``) for both, alternating newt and Triton
inside each round so clock and thermal drift hit both alike, and reports the
median over rounds of each config's ``do_bench`` median (L2 flushed) and the
spread between rounds.  Writes ``config_sweep.md`` / ``config_sweep.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
from common import environment, instantiate, write_json

DEFAULT_CELLS = "layernorm:8192x2048:float32,layernorm:8192x1024:float32,softmax:8192x2048:float32"


def parse_cells(text: str) -> list:
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        kind, shape, dtype = item.split(":")
        if kind not in ("softmax", "layernorm"):
            raise SystemExit(f"config_sweep.py: {kind!r}: only softmax and layernorm are row kernels")
        out.append((kind, tuple(int(s) for s in shape.split("x")), dtype))
    return out


def launcher(kind, m, x, out, extra):
    """A call of the un-tuned kernel (the autotuner's ``.fn``) at a given num_warps."""
    rows, cols = x.shape
    block = bench.next_pow2(cols)
    if kind == "softmax":
        k = m.softmax_kernel.fn
        return lambda nw: k[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=block, num_warps=nw)
    w, b, mean, rstd = extra
    k = m.layernorm_kernel.fn
    return lambda nw: k[(rows,)](x, out, w, b, mean, rstd, x.stride(0), cols, 1e-5, BLOCK=block, num_warps=nw)


def sweep(cell, modules, warps, rounds) -> dict:
    import torch

    from newt.testing import do_bench
    kind, shape, dtype = cell
    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    M, N = shape
    if kind == "softmax":  # the inputs of bench.make_case
        x = torch.randn(M, N, device="cuda", dtype=dt)
        extra = None
    else:
        x = -2.3 + 0.5 * torch.randn(M, N, device="cuda", dtype=dt)
        extra = (torch.rand(N, device="cuda", dtype=dt), torch.rand(N, device="cuda", dtype=dt),
                 torch.empty(M, device="cuda"), torch.empty(M, device="cuda"))
    work = 2 * x.numel() * x.element_size()
    runs = {impl: launcher(kind, m, x, torch.empty_like(x), extra) for impl, m in modules.items()}
    times = {impl: {w: [] for w in warps} for impl in modules}
    for run in runs.values():  # compile everything first
        for w in warps:
            run(w)
    torch.cuda.synchronize()
    for _ in range(rounds):
        for w in warps:
            for impl, run in runs.items():
                times[impl][w].append(do_bench(lambda run=run, w=w: run(w), warmup=10, rep=50))
    res = {"kind": kind, "shape": list(shape), "dtype": dtype, "configs": {}}
    for w in warps:
        row = {}
        for impl in modules:
            ts = times[impl][w]
            row[impl] = {"ms": statistics.median(ts), "spread": (max(ts) - min(ts)) / statistics.median(ts),
                         "rounds": ts, "GBps": work / statistics.median(ts) * 1e-6}
        res["configs"][w] = row
    best = {impl: min(warps, key=lambda w: res["configs"][w][impl]["ms"]) for impl in modules}
    res["best"] = {impl: {"num_warps": w, "ms": res["configs"][w][impl]["ms"]} for impl, w in best.items()}
    return res


def report(results, info, warps) -> str:
    lines = [f"# Row kernels, per num_warps — {info.get('gpu', '?')}", "",
             f"{info.get('date')}; torch {info.get('torch')}, Triton {info.get('triton')}, "
             f"NVRTC {info.get('nvrtc')}. Median over rounds of each config's `do_bench` median (L2 flushed); "
             "spread = (max - min) / median over the rounds. Ratio = Triton ms / newt ms.", ""]
    for r in results:
        lines += [f"## {r['kind']} {'x'.join(map(str, r['shape']))} {r['dtype']}", "",
                  "| num_warps | newt ms | spread | Triton ms | spread | Triton / newt |", "|---|---|---|---|---|---|"]
        for w in warps:
            c = r["configs"][w]
            n, t = c.get("newt"), c.get("triton")
            ratio = f"{t['ms'] / n['ms']:.3f}x" if n and t else "—"
            lines.append(f"| {w} | {n['ms']:.4f} | {n['spread']:.1%} | " + (f"{t['ms']:.4f} | {t['spread']:.1%} | "
                         if t else "— | — | ") + ratio + " |")
        b = r["best"]
        if "triton" in b:
            lines += ["", f"best: newt {b['newt']['ms']:.4f} ms (num_warps {b['newt']['num_warps']}), Triton "
                      f"{b['triton']['ms']:.4f} ms (num_warps {b['triton']['num_warps']}): "
                      f"{b['triton']['ms'] / b['newt']['ms']:.3f}x"]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cells", default=DEFAULT_CELLS)
    p.add_argument("--warps", default="2,4,8,16,32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).resolve().parent))
    args = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("config_sweep.py needs a CUDA GPU", file=sys.stderr)
        return 2
    cells = parse_cells(args.cells)
    warps = [int(w) for w in args.warps.split(",")]
    modules = {"newt": instantiate(bench.TEMPLATE, "newt", "sweep")}
    try:
        modules["triton"] = instantiate(bench.TEMPLATE, "triton", "sweep")
    except Exception as e:
        print(f"Triton unavailable: {type(e).__name__}: {e}")
    results = []
    for cell in cells:
        r = sweep(cell, modules, warps, args.rounds)
        results.append(r)
        print(report([r], {}, warps).split("\n", 4)[-1], flush=True)
    info = environment()
    out = Path(args.out)
    write_json(out / "config_sweep.json", {"info": info, "results": results})
    (out / "config_sweep.md").write_text(report(results, info, warps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
