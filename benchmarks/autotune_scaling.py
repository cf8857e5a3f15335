"""How autotuning scales with workers: the figures of benchmarks/autotune_scaling.md.

    PYTHONPATH=. python benchmarks/autotune_scaling.py cpu [--configs 200] [--workers 1,2] [--no-dask]
    PYTHONPATH=. python benchmarks/autotune_scaling.py gpu-single [--max-configs 120] [--size 4096]
    PYTHONPATH=. python benchmarks/autotune_scaling.py gpu-multi --gpus 1,2,4,8 [--max-configs 120]

``cpu``: compile ``--configs`` fp16 matmul configs for sm_90a (no GPU needed)
with 1 and 2 local worker processes, then through a Dask cluster on loopback
(``distributed`` missing: that row says so and is skipped), each with an
empty cache and warm workers; the compiled kernels must be identical.

``gpu-single``: a deuteron matmul tune (fp16, ``--size``³) -- first a search
(effort full, at most ``--max-configs``) fixes the list of configs; then the
same list is tuned serially in the main process (compile, then time, config
after config: the path before newt.tune) and through the executor (compile
workers on every core, screening and timing on the GPU worker, overlapped).
Same winner expected, and the speed-up.  ``gpu-multi``: the executor path on
1, 2, 4, 8 GPUs (``DEUTERON_AUTOTUNE_GPUS``).

Runs from the source tree without network; prints one JSON line per run and a
Markdown table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import newt  # noqa: E402
import newt.language as nl  # noqa: E402


@newt.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, BLOCK_K: nl.constexpr, GROUP_M: nl.constexpr):
    pid = nl.program_id(0)
    tiles_m = nl.cdiv(M, BLOCK_M)
    tiles_n = nl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows = nl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % rows
    tile_n = (pid % per_group) // rows
    rm = tile_m * BLOCK_M + nl.arange(0, BLOCK_M)
    rn = tile_n * BLOCK_N + nl.arange(0, BLOCK_N)
    rk = nl.arange(0, BLOCK_K)
    a_t = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :] * stride_ak
    b_t = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :] * stride_bn
    acc = nl.zeros((BLOCK_M, BLOCK_N), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = nl.load(a_t, mask=rk[None, :] < left, other=0.0)
        b = nl.load(b_t, mask=rk[:, None] < left, other=0.0)
        acc = nl.dot(a, b, acc)
        a_t += BLOCK_K * stride_ak
        b_t += BLOCK_K * stride_bk
    c_t = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    nl.store(c_t, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_configs(n: int) -> list:
    """``n`` distinct fp16 matmul configs (tile shapes, warps, stages, grouping), in a fixed order."""
    out = []
    for bm in (64, 128, 256, 32):
        for bn in (64, 128, 256, 32):
            for bk in (32, 64, 16, 128):
                for w in (4, 8):
                    for st in (3, 4, 2, 5):
                        for g in (8, 4):
                            out.append(({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, w, st))
    # interleave so that any prefix has every tile shape
    out.sort(key=lambda c: (c[0]["GROUP_M"] != 8, c[2] != 3 and c[2] != 4, c[0]["BLOCK_K"] == 128))
    return out[:n]


def _tasks(configs):
    import torch

    from newt.tune import compile_spec_for
    a = torch.empty(4096, 4096, dtype=torch.float16)
    args = (a, a, a, 4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1)
    return [compile_spec_for(matmul_kernel, args, kw, w, st, target="sm_90a", with_text=True) for kw, w, st in configs]


def _fresh_cache():
    d = tempfile.mkdtemp(prefix="newt-tune-bench-")
    os.environ["NEWT_CACHE_DIR"] = d
    from newt.runtime import compiler
    compiler.clear_memory_cache()
    return d


def _compile_run(label, make_executor, tasks, warm):
    from newt.runtime import compiler
    from newt.tune import compile_all
    d = _fresh_cache()
    ex = make_executor()
    try:
        compile_all(warm[:max(1, ex.compile_slots)], ex)  # start every worker (imports not counted)
        compiler.clear_memory_cache()
        t0 = time.perf_counter()
        res = compile_all(tasks, ex)
        wall = time.perf_counter() - t0
    finally:
        ex.close()
        shutil.rmtree(d, ignore_errors=True)
    status = {}
    for r in res:
        status[r["status"]] = status.get(r["status"], 0) + 1
    sig = [(r["status"], r.get("installed"), r.get("n_regs"), r.get("n_spills")) for r in res]
    row = {"run": label, "configs": len(tasks), "compile_slots": ex.compile_slots, "seconds": round(wall, 2),
           "configs_per_s": round(len(tasks) / wall, 2), "status": status}
    print(json.dumps(row), flush=True)
    return row, sig


def cpu(args):
    from newt.tune import LocalExecutor, cpu_count
    configs = matmul_configs(args.configs + 4)
    tasks, warm = _tasks(configs[4:]), _tasks(configs[:4])
    rows, sigs = [], []
    for n in [int(x) for x in args.workers.split(",")]:
        row, sig = _compile_run(f"local, {n} worker process{'es' if n > 1 else ''}",
                                lambda n=n: LocalExecutor(compile_workers=n), tasks, warm)
        rows.append(row)
        sigs.append(sig)
    if not args.no_dask:
        n = max(int(x) for x in args.workers.split(","))
        try:
            from newt.tune.cluster import DaskExecutor, require_distributed
            require_distributed()
        except ImportError as e:
            print(f"dask: skipped: {e}", flush=True)
            rows.append({"run": "dask loopback", "skipped": str(e)})
        else:
            row, sig = _compile_run(f"dask loopback cluster, {n} workers", lambda: DaskExecutor(n_workers=n), tasks,
                                    warm)
            rows.append(row)
            sigs.append(sig)
    same = all(s == sigs[0] for s in sigs)
    print(f"\n{datetime.date.today()}  {len(tasks)} fp16 matmul configs for sm_90a, {cpu_count()} CPU cores, "
          f"load average {os.getloadavg()[0]:.2f}; compiled kernels identical across runs: {same}\n")
    print("| run | seconds | configs/s | speed-up vs the first |")
    print("|---|---:|---:|---:|")
    base = rows[0]["seconds"]
    for r in rows:
        if "skipped" in r:
            print(f"| {r['run']} | skipped | | |")
        else:
            print(f"| {r['run']} | {r['seconds']:.1f} | {r['configs_per_s']:.2f} | {base / r['seconds']:.2f}x |")
    return 0 if same else 1


# -- GPU: deuteron matmul -------------------------------------------------------------------------------


def _deuteron_tune(x, y, configs, env: dict, log: Path | None = None, effort="full"):
    sys.path.insert(0, str(ROOT / "examples" / "deuteron"))
    import importlib
    mm = importlib.import_module("matmul").matmul
    old = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    d = _fresh_cache()
    os.environ["DEUTERON_CACHE_DIR"] = d + "/deuteron"
    try:
        mm.autotune_log = str(log) if log else None
        mm.print_config = False
        t0 = time.perf_counter()
        best = mm.autotune(x, y, effort=effort, configs=configs, force=True)
        wall = time.perf_counter() - t0
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(d, ignore_errors=True)
    return best, wall


def _gpu_inputs(size):
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("autotune_scaling.py gpu-*: no CUDA GPU here (the cpu mode needs none)")
    torch.manual_seed(0)
    x = torch.randn(size, size, device="cuda", dtype=torch.float16)
    y = torch.randn(size, size, device="cuda", dtype=torch.float16)
    return x, y


def _search_configs(x, y, max_configs, tmp):
    from deuteron.config import Config
    log = Path(tmp) / "search.jsonl"
    best, wall = _deuteron_tune(x, y, None, {"DEUTERON_AUTOTUNE_MAX_CONFIGS": max_configs}, log)
    cfgs = []
    for line in log.read_text().splitlines():
        e = json.loads(line)
        cfgs.append(Config.from_dict(e["config"]))
    print(json.dumps({"run": "search (effort full, executor)", "configs": len(cfgs), "seconds": round(wall, 2),
                      "best": str(best)}), flush=True)
    return cfgs


def gpu_single(args):
    x, y = _gpu_inputs(args.size)
    tmp = tempfile.mkdtemp(prefix="newt-tune-bench-")
    cfgs = _search_configs(x, y, args.max_configs, tmp)
    n = len(cfgs)
    rows = []
    for label, env in (("serial: compile then time, in the main process", {"DEUTERON_AUTOTUNE_ISOLATE": "0"}),
                       ("executor: compile workers + GPU worker, overlapped", {})):
        best, wall = _deuteron_tune(x, y, cfgs, {**env, "DEUTERON_AUTOTUNE_MAX_CONFIGS": n,
                                                 "DEUTERON_AUTOTUNE_SECONDS": 3600})
        rows.append({"run": label, "configs": n, "seconds": round(wall, 2), "best": str(best)})
        print(json.dumps(rows[-1]), flush=True)
    same = rows[0]["best"] == rows[1]["best"]
    print(f"\n{datetime.date.today()}  deuteron matmul {args.size}^3 fp16, {n} configs; same winner: {same}\n")
    print("| run | seconds | speed-up | winner |\n|---|---:|---:|---|")
    for r in rows:
        print(f"| {r['run']} | {r['seconds']:.1f} | {rows[0]['seconds'] / r['seconds']:.2f}x | `{r['best']}` |")
    return 0


def gpu_multi(args):
    from newt.tune import visible_gpus
    x, y = _gpu_inputs(args.size)
    tmp = tempfile.mkdtemp(prefix="newt-tune-bench-")
    cfgs = _search_configs(x, y, args.max_configs, tmp)
    have = len(visible_gpus())
    rows = []
    for g in [int(v) for v in args.gpus.split(",")]:
        if g > have:
            print(f"{g} GPUs: skipped ({have} visible)")
            continue
        best, wall = _deuteron_tune(x, y, cfgs, {"DEUTERON_AUTOTUNE_GPUS": g,
                                                 "DEUTERON_AUTOTUNE_MAX_CONFIGS": len(cfgs),
                                                 "DEUTERON_AUTOTUNE_SECONDS": 3600})
        rows.append({"run": f"{g} GPU(s)", "gpus": g, "configs": len(cfgs), "seconds": round(wall, 2),
                     "best": str(best)})
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{datetime.date.today()}  deuteron matmul {args.size}^3 fp16, {len(cfgs)} configs\n")
    print("| GPUs | seconds | speed-up | winner |\n|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['gpus']} | {r['seconds']:.1f} | {rows[0]['seconds'] / r['seconds']:.2f}x | `{r['best']}` |")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("cpu")
    c.add_argument("--configs", type=int, default=200)
    c.add_argument("--workers", default="1,2")
    c.add_argument("--no-dask", action="store_true")
    for name in ("gpu-single", "gpu-multi"):
        g = sub.add_parser(name)
        g.add_argument("--max-configs", type=int, default=120)
        g.add_argument("--size", type=int, default=4096)
        if name == "gpu-multi":
            g.add_argument("--gpus", default="1,2,4,8")
    args = p.parse_args(argv)
    return {"cpu": cpu, "gpu-single": gpu_single, "gpu-multi": gpu_multi}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
