"""A tutorial-style TMA matmul (host ``TensorDescriptor`` arguments, ``desc.load``/``desc.store``): newt
against Triton on the same source, and against newt with ``NEWT_TMA=0`` (the descriptor lowered to
pointer loads), on the H200.  newt's column compiles with ``NEWT_TMA=1`` (TMA is opt-in for now).

    python3 benchmarks/bench_tma.py --out DIR [--quick]

The kernel is written once (``TEMPLATE``, ``$P``/``$L`` -> newt/nl or triton/tl); every config of
``CONFIGS`` is run by every implementation with the same descriptors; each result is checked against
torch first.  Times: ``newt.testing.do_bench`` (L2 flushed before every repetition, median), in
interleaved rounds (newt, Triton, newt without TMA, ...), a cell's time the median of its rounds.
Writes ``bench_tma.json`` and ``bench_tma.md`` to ``--out``; ratios are other time / newt time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, instantiate, median_ms, write_json

TEMPLATE = r'''
import $P
import $P.language as $L
from $P.tools.tensor_descriptor import TensorDescriptor


@$P.jit
def matmul_tma(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: $L.constexpr, BLOCK_N: $L.constexpr,
               BLOCK_K: $L.constexpr, GROUP_M: $L.constexpr):
    pid = $L.program_id(0)
    num_m = $L.cdiv(M, BLOCK_M)
    num_n = $L.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = $L.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    acc = $L.zeros((BLOCK_M, BLOCK_N), dtype=$L.float32)
    for k in range(0, $L.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = $L.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def run(a, b, c, cfg):
    bm, bn, bk, stages, warps = cfg
    M, K = a.shape
    N = b.shape[1]
    ad = TensorDescriptor.from_tensor(a, [bm, bk])
    bd = TensorDescriptor.from_tensor(b, [bk, bn])
    cd = TensorDescriptor.from_tensor(c, [bm, bn])
    grid = ($P.cdiv(M, bm) * $P.cdiv(N, bn),)

    def call():
        matmul_tma[grid](ad, bd, cd, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_stages=stages,
                         num_warps=warps)
    return call
'''

#: BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps
CONFIGS = [(128, 128, 64, 3, 8), (128, 256, 64, 3, 8), (128, 128, 64, 4, 4)]
SIZES = [2048, 4096, 8192]


def triton_alloc():
    """Triton's device-side descriptors need an allocator set; host descriptors do not, but be safe."""
    try:
        import torch
        import triton

        def alloc(size, alignment, stream):
            return torch.empty(size, device="cuda", dtype=torch.int8)
        triton.set_allocator(alloc)
    except Exception:
        pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="4096^3 only, two configs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="", help="M = N = K values, comma-separated (default: 2048,4096,8192; "
                    "4096 with --quick)")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("bench_tma.py needs a CUDA GPU", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    triton_alloc()
    mods = {"newt": instantiate(TEMPLATE, "newt", "tma_mm"), "triton": instantiate(TEMPLATE, "triton", "tma_mm"),
            "newt_no_tma": instantiate(TEMPLATE, "newt", "tma_mm_off")}
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else [4096] if args.quick else SIZES
    configs = CONFIGS[:2] if args.quick else CONFIGS
    results = []
    for dt in (torch.float16, torch.bfloat16):
        for n in sizes:
            torch.manual_seed(0)
            a = torch.randn(n, n, device="cuda", dtype=dt)
            b = torch.randn(n, n, device="cuda", dtype=dt)
            ref = (a @ b).float()
            for cfg in configs:
                cell = {"dtype": str(dt).replace("torch.", ""), "M": n, "N": n, "K": n, "config": list(cfg),
                        "impls": {}}
                calls = {}
                for impl, m in mods.items():
                    e = cell["impls"][impl] = {}
                    c = torch.empty(n, n, device="cuda", dtype=dt)
                    try:
                        if impl.startswith("newt"):  # read when the kernel compiles (its first call)
                            os.environ["NEWT_TMA"] = "0" if impl == "newt_no_tma" else "1"
                        call = m.run(a, b, c, cfg)
                        call()
                        torch.cuda.synchronize()
                        err = ((c.float() - ref).norm() / ref.norm()).item()
                        e["rel_error"] = err
                        if not err < 1e-2:
                            e["failed"] = f"wrong result: relative error {err:.3g}"
                            continue
                        calls[impl] = call
                    except Exception as ex:
                        e["failed"] = f"{type(ex).__name__}: {ex}".splitlines()[0][:300]
                        e["traceback"] = traceback.format_exc()[-2000:]
                    finally:
                        os.environ.pop("NEWT_TMA", None)
                flops = 2.0 * n ** 3
                for _ in range(args.rounds):
                    for impl, call in calls.items():
                        cell["impls"][impl].setdefault("rounds_ms", []).append(median_ms(call, warmup=10, rep=40))
                for impl in calls:
                    e = cell["impls"][impl]
                    e["ms"] = statistics.median(e["rounds_ms"])
                    e["TFLOPs"] = flops / e["ms"] * 1e-9
                nt = cell["impls"]["newt"].get("ms")
                for impl in ("triton", "newt_no_tma"):
                    o = cell["impls"][impl].get("ms")
                    if nt and o:
                        cell[f"vs_{impl}"] = o / nt
                results.append(cell)
                print(describe(cell), flush=True)
                write_json(out / "bench_tma.json", {"environment": {}, "results": results})  # (partial runs)
    data = {"environment": environment(), "results": results}
    write_json(out / "bench_tma.json", data)
    (out / "bench_tma.md").write_text(render_md(data))
    return 0


def describe(cell) -> str:
    parts = [f"{cell['dtype']} {cell['M']}^3 {tuple(cell['config'])}"]
    for impl, e in cell["impls"].items():
        parts.append(f"{impl}: " + (f"{e['TFLOPs']:.0f} TFLOP/s" if "TFLOPs" in e else e.get("failed", "?")))
    if "vs_triton" in cell:
        parts.append(f"newt/Triton {cell['vs_triton']:.2f}x")
    return " | ".join(parts)


def render_md(data) -> str:
    env = data["environment"]
    lines = ["# TMA matmul (TensorDescriptor), newt vs Triton, same source", "",
             f"{env.get('gpu', '?')}; " + ", ".join(f"{k} {v}" for k, v in env.items() if k != "gpu"), "",
             "| dtype | size | config (BM, BN, BK, stages, warps) | newt TFLOP/s | Triton TFLOP/s | newt / Triton | "
             "newt NEWT_TMA=0 TFLOP/s | TMA speed-up |", "|---|---|---|---|---|---|---|---|"]

    def tf(e):
        return f"{e['TFLOPs']:.0f}" if "TFLOPs" in e else "failed: " + e.get("failed", "?")[:80]
    for c in data["results"]:
        im = c["impls"]
        lines.append(f"| {c['dtype']} | {c['M']}³ | {tuple(c['config'])} | {tf(im['newt'])} | {tf(im['triton'])} | "
                     f"{c.get('vs_triton', float('nan')):.2f}x | {tf(im['newt_no_tma'])} | "
                     f"{c.get('vs_newt_no_tma', float('nan')):.2f}x |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
