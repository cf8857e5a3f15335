"""How autotuning scales with workers: the figures of benchmarks/autotune_scaling.md.

    PYTHONPATH=. python benchmarks/autotune_scaling.py cpu [--configs 200] [--workers 1,2] [--no-dask]
    PYTHONPATH=. python benchmarks/autotune_scaling.py gpu-single [--max-configs 60] [--size 4096] [--repeat 2]
    PYTHONPATH=. python benchmarks/autotune_scaling.py quick [--fresh] [--kernels matmul,softmax,layer_norm]
    PYTHONPATH=. python benchmarks/autotune_scaling.py gpu-multi --gpus 1,2,4,8 [--max-configs 60]

``cpu``: compile ``--configs`` fp16 matmul configs for sm_90a (no GPU needed)
with each ``--workers`` count of local worker processes, in that order, then
through a Dask cluster on loopback (``distributed`` missing: that row says so
and is skipped), each with an empty cache and warm workers; the compiled
kernels must be identical.  Each row records the main process's CPU time, the
median task time and the load average.

``gpu-single``: a deuteron matmul tune (fp16, ``--size``³) over one fixed list
of configs (the tuner's seeds, then random points from a fixed seed), each row
in a fresh process with empty caches: serially in the main process (compile,
then check and time, config after config: the path before newt.tune) and
through the executor (compile workers on every core, screening and timing on
the GPU worker, overlapped); both winners are timed again in one process.
``quick``: deuteron quick tunes from scratch (deuteron_bench.py's shapes).
``gpu-multi``: the executor path on 1, 2, 4, 8 GPUs (``DEUTERON_AUTOTUNE_GPUS``).

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
        t0, c0 = time.perf_counter(), time.process_time()
        res = compile_all(tasks, ex)
        wall, parent = time.perf_counter() - t0, time.process_time() - c0
    finally:
        ex.close()
        shutil.rmtree(d, ignore_errors=True)
    status = {}
    for r in res:
        status[r["status"]] = status.get(r["status"], 0) + 1
    sig = [(r["status"], r.get("installed"), r.get("n_regs"), r.get("n_spills")) for r in res]
    row = {"run": label, "configs": len(tasks), "compile_slots": ex.compile_slots, "seconds": round(wall, 2),
           "configs_per_s": round(len(tasks) / wall, 2), "status": status,
           # the serial part: this process's CPU time (submitting, unpickling, installing the cubins)
           "parent_cpu_s": round(parent, 2),
           "task_median_s": round(sorted(r.get("seconds", 0) for r in res)[len(res) // 2], 3),
           "load": round(os.getloadavg()[0], 2)}
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
    print("| run | seconds | configs/s | speed-up vs the first | main process CPU s | median task s | load |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    base = rows[0]["seconds"]
    for r in rows:
        if "skipped" in r:
            print(f"| {r['run']} | skipped | | |")
        else:
            print(f"| {r['run']} | {r['seconds']:.1f} | {r['configs_per_s']:.2f} | {base / r['seconds']:.2f}x | "
                  f"{r['parent_cpu_s']:.2f} | {r['task_median_s']:.3f} | {r['load']:.2f} |")
    return 0 if same else 1


# -- GPU: deuteron matmul -------------------------------------------------------------------------------
#
# Every tuning row runs in a fresh process (``_row``) with empty newt and deuteron caches, on the same list of
# configs (written by the parent): nothing one row compiled or imported helps the next.

KERNELS = {"matmul": ("matmul", "matmul"), "softmax": ("softmax", "softmax"),
           "layer_norm": ("layer_norm", "layer_norm"), "attention": ("attention", "attention")}


def _dt_kernel(name):
    sys.path.insert(0, str(ROOT / "examples" / "deuteron"))
    import importlib
    mod, attr = KERNELS[name]
    return getattr(importlib.import_module(mod), attr)


def _inputs(name, size):
    """The kernel's inputs (deuteron_bench.py's shapes): matmul size^3 fp16, softmax / layer norm 8192x4096,
    attention 4x32x4096x64."""
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("autotune_scaling.py gpu-*/quick: no CUDA GPU here (the cpu mode needs none)")
    torch.manual_seed(0)
    if name == "matmul":
        return (torch.randn(size, size, device="cuda", dtype=torch.float16),
                torch.randn(size, size, device="cuda", dtype=torch.float16))
    if name == "attention":  # deuteron_bench.py's attention: 4 x 32 heads x 4096 x 64, fp16
        return tuple(torch.randn(4, 32, 4096, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    x = torch.randn(8192, 4096, device="cuda", dtype=torch.float16)
    if name == "softmax":
        return (x,)
    return (x, torch.randn(4096, device="cuda", dtype=torch.float16), torch.randn(4096, device="cuda",
                                                                                    dtype=torch.float16))


def _config_list(name, size, n):
    """``n`` distinct configs, fixed by a seed (no GPU time spent choosing them): the tuner's own seeds (the
    heuristic default, classic tile shapes), then random points of the space."""
    import random

    from deuteron.autotune import Tuner
    k = _dt_kernel(name)
    args = _inputs(name, size)
    b = k._bind(args, {})
    e = k._entry(b)
    t = Tuner(k, e, b, "full", None, None)
    default = e.space.default()
    out, seen = [], set()
    rng = random.Random(2026)
    pool = [default] + t.seed_configs(default)
    while len(out) < n and (pool or len(seen) < 50 * n):
        c = pool.pop(0) if pool else e.space.random(rng)
        if c.key() not in seen and e.space.feasible(c):
            seen.add(c.key())
            out.append(c)
        elif not pool:
            seen.add(("miss", len(seen)))
    return out


def _row(args):
    """One tuning in this (fresh) process: prints a JSON line."""
    from deuteron.config import Config
    cfgs = [Config.from_dict(d) for d in json.loads(Path(args.configs_file).read_text())] if args.configs_file else None
    k = _dt_kernel(args.kernel)
    x = _inputs(args.kernel, args.size)
    k.print_config = False
    ev: list = []
    t0 = time.perf_counter()
    best = k.autotune(*x, effort=args.effort, configs=cfgs, callback=ev.append, force=True)
    wall = time.perf_counter() - t0
    status: dict = {}
    for e in ev:
        if e["kind"] == "report":
            status[e["status"]] = status.get(e["status"], 0) + 1
    end = next((e for e in ev if e["kind"] == "end"), {})
    print("ROW " + json.dumps({"seconds": round(wall, 2), "configs": sum(status.values()), "status": status,
                               "best": best.to_dict(), "best_ms": end.get("best_ms"),
                               "phases": end.get("phases")}), flush=True)
    return 0


def _run_row(kernel, size, env: dict, configs_file=None, effort="full", timeout=None) -> dict:
    """``_row`` in a fresh process with empty caches and ``env``."""
    import subprocess
    d = tempfile.mkdtemp(prefix="newt-tune-row-")
    e = {**os.environ, "NEWT_CACHE_DIR": d + "/newt", "DEUTERON_CACHE_DIR": d + "/deuteron",
         "DEUTERON_AUTOTUNE_CACHE": "0", "DEUTERON_PROGRESS": "0", **{k: str(v) for k, v in env.items()}}
    cmd = [sys.executable, str(Path(__file__).resolve()), "_row", "--kernel", kernel, "--size", str(size),
           "--effort", effort]
    if configs_file:
        cmd += ["--configs-file", str(configs_file)]
    try:
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    finally:
        shutil.rmtree(d, ignore_errors=True)
    for line in p.stdout.splitlines():
        if line.startswith("ROW "):
            return json.loads(line[4:])
    return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout)[-1500:]}"}


def _cross_time(kernel, size, winners) -> list:
    """Each winner's time in one process, interleaved rounds (median of rounds, do_bench medians)."""
    from deuteron.config import Config
    from newt.testing import do_bench
    k = _dt_kernel(kernel)
    x = _inputs(kernel, size)
    cfgs = [Config.from_dict(w) for w in winners]
    times: list = [[] for _ in cfgs]
    for _ in range(3):
        for i, c in enumerate(cfgs):
            times[i].append(do_bench(lambda c=c: k.run_with(c, *x), warmup=25, rep=100))
    return [sorted(t)[1] for t in times]


def gpu_single(args):
    tmp = Path(tempfile.mkdtemp(prefix="newt-tune-bench-"))
    cfgs = _config_list("matmul", args.size, args.max_configs)
    f = tmp / "configs.json"
    f.write_text(json.dumps([c.to_dict() for c in cfgs]))
    n = len(cfgs)
    modes = (("serial: compile then time, in the main process", {"DEUTERON_AUTOTUNE_ISOLATE": "0"}),
             ("executor: compile workers + GPU worker, overlapped", {"DEUTERON_AUTOTUNE_ISOLATE": "1"}))
    rows = []
    for rep in range(args.repeat):
        for label, env in (modes if rep % 2 == 0 else modes[::-1]):  # A/B, then B/A
            r = _run_row("matmul", args.size, {**env, "DEUTERON_AUTOTUNE_MAX_CONFIGS": n,
                                               "DEUTERON_AUTOTUNE_SECONDS": 3600}, f, timeout=args.row_timeout)
            r["run"] = label
            rows.append(r)
            print(json.dumps(r), flush=True)
    good = [r for r in rows if "error" not in r]
    winners = []
    for r in good:
        if r["best"] not in winners:
            winners.append(r["best"])
    ms = _cross_time("matmul", args.size, winners) if winners else []
    spread = (max(ms) / min(ms) - 1) * 100 if ms else float("nan")
    print(f"\n{datetime.date.today()}  deuteron matmul {args.size}^3 fp16, the same {n} configs, each row a fresh "
          f"process with empty caches; {cpu_count_str()}\n")
    print("| run | seconds | configs | statuses | winner | winner's time (same process) |")
    print("|---|---:|---:|---|---|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['run']} | failed: {r['error'][:200]} | | | | |")
            continue
        w = winners.index(r["best"])
        print(f"| {r['run']} | {r['seconds']:.1f} | {r['configs']} | {r['status']} | `{r['best']}` | "
              f"{ms[w]:.4f} ms |")
    ser = [r["seconds"] for r in good if r["run"].startswith("serial")]
    exe = [r["seconds"] for r in good if r["run"].startswith("executor")]
    if ser and exe:
        print(f"\nspeed-up (median serial / median executor): {_median(ser) / _median(exe):.2f}x; "
              f"{len(winners)} distinct winner(s), their times within {spread:.1f} %")
    return 0


def quick(args):
    """deuteron quick tunes from scratch (empty caches), the way deuteron_bench.py runs them: one process, the
    kernels one after the other (the first pays the workers' start; ``--fresh``: each in its own process)."""
    env = {"DEUTERON_AUTOTUNE_SECONDS": args.budget}
    rows = []
    names = [k.strip() for k in args.kernels.split(",") if k.strip()]
    if args.fresh:
        for name in names:
            r = _run_row(name, args.size, env, effort="quick", timeout=args.row_timeout)
            r["kernel"] = name
            rows.append(r)
            print(json.dumps(r), flush=True)
    else:
        os.environ.update({k: str(v) for k, v in env.items()})
        d = tempfile.mkdtemp(prefix="newt-tune-quick-")
        os.environ.update({"NEWT_CACHE_DIR": d + "/newt", "DEUTERON_CACHE_DIR": d + "/deuteron",
                           "DEUTERON_AUTOTUNE_CACHE": "0", "DEUTERON_PROGRESS": "0"})
        for name in names:
            k = _dt_kernel(name)
            x = _inputs(name, args.size)
            k.print_config = False
            if args.log_dir:  # one JSON line per config evaluated (status, ms, elapsed)
                k.autotune_log = str(Path(args.log_dir) / f"autotune_{name}.jsonl")
            ev: list = []
            t0 = time.perf_counter()
            best = k.autotune(*x, effort="quick", callback=ev.append, force=True)
            wall = time.perf_counter() - t0
            end = next((e for e in ev if e["kind"] == "end"), {})
            rows.append({"kernel": name, "seconds": round(wall, 2), "configs": end.get("tested"),
                         "best": best.to_dict(), "best_ms": end.get("best_ms"), "phases": end.get("phases")})
            print(json.dumps(rows[-1]), flush=True)
    how = "a fresh process each" if args.fresh else "one process"
    print(f"\n{datetime.date.today()}  deuteron quick tunes from scratch ({how}, DEUTERON_AUTOTUNE_SECONDS="
          f"{args.budget}); {cpu_count_str()}\n")
    print("| kernel | seconds | configs | best ms |\n|---|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['kernel']} | failed: {r['error'][:200]} | | |")
        else:
            print(f"| {r['kernel']} | {r['seconds']:.1f} | {r['configs']} | {r['best_ms']:.4f} |")
    print("\nwhere the time went (seconds; Tuner.phases):")
    for r in rows:
        if r.get("phases"):
            print(f"- {r['kernel']}: " + ", ".join(f"{k} {v}" for k, v in r["phases"].items()))
    return 0


def gpu_multi(args):
    from newt.tune import visible_gpus
    tmp = Path(tempfile.mkdtemp(prefix="newt-tune-bench-"))
    cfgs = _config_list("matmul", args.size, args.max_configs)
    f = tmp / "configs.json"
    f.write_text(json.dumps([c.to_dict() for c in cfgs]))
    have = len(visible_gpus())
    rows = []
    for g in [int(v) for v in args.gpus.split(",")]:
        if g > have:
            print(f"{g} GPUs: skipped ({have} visible)")
            continue
        r = _run_row("matmul", args.size, {"DEUTERON_AUTOTUNE_ISOLATE": "1", "DEUTERON_AUTOTUNE_GPUS": g,
                                           "DEUTERON_AUTOTUNE_MAX_CONFIGS": len(cfgs),
                                           "DEUTERON_AUTOTUNE_SECONDS": 3600}, f, timeout=args.row_timeout)
        r.update(run=f"{g} GPU(s)", gpus=g)
        rows.append(r)
        print(json.dumps(r), flush=True)
    good = [r for r in rows if "error" not in r]
    print(f"\n{datetime.date.today()}  deuteron matmul {args.size}^3 fp16, {len(cfgs)} configs; {cpu_count_str()}\n")
    print("| GPUs | seconds | speed-up | winner |\n|---:|---:|---:|---|")
    for r in good:
        print(f"| {r['gpus']} | {r['seconds']:.1f} | {good[0]['seconds'] / r['seconds']:.2f}x | `{r['best']}` |")
    return 0


def cpu_count_str() -> str:
    from newt.tune import cpu_count
    return f"{cpu_count()} CPU cores, load average {os.getloadavg()[0]:.2f}"


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("cpu")
    c.add_argument("--configs", type=int, default=200)
    c.add_argument("--workers", default="1,2")
    c.add_argument("--no-dask", action="store_true")
    for name in ("gpu-single", "gpu-multi"):
        g = sub.add_parser(name)
        g.add_argument("--max-configs", type=int, default=60)
        g.add_argument("--size", type=int, default=4096)
        g.add_argument("--row-timeout", type=float, default=600)
        if name == "gpu-multi":
            g.add_argument("--gpus", default="1,2,4,8")
        else:
            g.add_argument("--repeat", type=int, default=1, help="pairs of rows (A/B, then B/A)")
    q = sub.add_parser("quick")
    q.add_argument("--kernels", default="matmul,softmax,layer_norm")
    q.add_argument("--size", type=int, default=4096)
    q.add_argument("--budget", type=float, default=230, help="DEUTERON_AUTOTUNE_SECONDS (deuteron_bench: 230)")
    q.add_argument("--fresh", action="store_true")
    q.add_argument("--log-dir", default=None, help="write each tune's autotune log (JSON lines) here")
    q.add_argument("--row-timeout", type=float, default=300)
    r = sub.add_parser("_row")
    r.add_argument("--kernel", default="matmul")
    r.add_argument("--size", type=int, default=4096)
    r.add_argument("--effort", default="full")
    r.add_argument("--configs-file", default=None)
    args = p.parse_args(argv)
    return {"cpu": cpu, "gpu-single": gpu_single, "gpu-multi": gpu_multi, "quick": quick, "_row": _row}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
