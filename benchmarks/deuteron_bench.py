"""deuteron on the GPU: matmul, softmax, layer norm and attention against hand-written newt and Triton, in one run.

    python3 benchmarks/deuteron_bench.py --out DIR [--only matmul,softmax,layer_norm,attention] [--budget SECONDS]
                                          [--effort quick|full] [--full matmul] [--small] [--tma]
    python3 benchmarks/deuteron_bench.py --out DIR --plan [--tma] [--only matmul,attention]   (no GPU)

For each kernel:

* deuteron: the kernel of ``examples/deuteron`` is autotuned from scratch (an empty config cache and an
  empty newt compile cache) with the given effort; the wall time of that tuning is reported, then the
  winner is timed.
* newt and Triton: one hand-written kernel source (``TEMPLATE``, ``$P``/``$L`` become ``newt``/``nl``
  and ``triton``/``tl``) autotuned over the same config list by each package's own ``@autotune``.
* torch (cuBLAS / ATen / SDPA) for reference.
* ``--full KERNELS``: those kernels are also tuned with effort ``full`` from scratch in a fresh process
  (``autotune_scaling.py _row``: empty caches, its own worker pool); that winner and the quick winner are then
  timed here in interleaved rounds (full must be at least as fast as quick, in at most 90 s).

Each deuteron tune reports where its time went (``Tuner.phases``: the main process's phases -- oracle,
pool start, generating candidates, building tasks, checking, waiting on workers, re-timing the leaders --
the workers' compile and GPU seconds, and when the first results came back).

Every implementation is checked against torch first and timed by the same timer
(``newt.testing.do_bench``: CUDA events, L2 flushed, median).  Helion 1.4's quick-effort figures on
this H200 are the anchors (``shared/anchors/helion1.4_quick_h200_2026-11-30.json``): matmul 4096^3
fp16 tuned in 84.4 s to 476 TFLOP/s, softmax 8192x4096 fp16 tuned in 78.9 s to 3.59 TB/s.

``--tma`` sets ``NEWT_TMA=1`` for every implementation (newt's TMA copies on sm_90a; Triton ignores it): the
deuteron tunes then also try the descriptor form (``indexing="tensor_descriptor"``) and its warp-specialized
pipeline.  ``--plan`` needs no GPU: it lists the seeds and the first pattern-search batch of each kernel's
quick tune and compiles each for sm_90a (seconds, registers, spills, HGMMA, TMA maps).

Writes ``deuteron_results.json``, ``deuteron_results.md``, the autotuning logs and the generated newt
source of each winner to ``--out``.  Meant to take under ~6 minutes of device time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import string
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "deuteron"))
sys.path.insert(0, str(ROOT / "benchmarks"))

HELION_ANCHOR = {  # Helion 1.4, autotune_effort="quick", this H200 (used when the anchor file is not found)
    "matmul": {"shape": [4096, 4096, 4096], "tune_s": 84.4, "TFLOPs": 476.45},
    "softmax": {"shape": [8192, 4096], "tune_s": 78.9, "GBps": 3587.9},
}

TEMPLATE = r'''
import $P
import $P.language as $L


def _mm_configs():
    shapes = [(128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4),
              (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 256, 32, 3, 8), (64, 64, 32, 5, 2)]
    return [$P.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_stages=s, num_warps=w)
            for m, n, k, s, w in shapes]


@$P.autotune(configs=_mm_configs(), key=["M", "N", "K"])
@$P.jit
def matmul_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BLOCK_M: $L.constexpr, BLOCK_N: $L.constexpr,
                  BLOCK_K: $L.constexpr, GROUP_M: $L.constexpr):
    pid = $L.program_id(0)
    num_pid_m = $L.cdiv(M, BLOCK_M)
    num_pid_n = $L.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = $L.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + $L.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + $L.arange(0, BLOCK_N)) % N
    offs_k = $L.arange(0, BLOCK_K)
    a_ptrs = a + (offs_am[:, None] * sam + offs_k[None, :] * sak)
    b_ptrs = b + (offs_k[:, None] * sbk + offs_bn[None, :] * sbn)
    acc = $L.zeros((BLOCK_M, BLOCK_N), dtype=$L.float32)
    for k in range(0, $L.cdiv(K, BLOCK_K)):
        x = $L.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        y = $L.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = $L.dot(x, y, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    offs_cm = pid_m * BLOCK_M + $L.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + $L.arange(0, BLOCK_N)
    c_ptrs = c + scm * offs_cm[:, None] + scn * offs_cn[None, :]
    $L.store(c_ptrs, acc.to($L.float16), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    c = a.new_empty((M, N))
    grid = lambda meta: ($P.cdiv(M, meta["BLOCK_M"]) * $P.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1))
    return c


@$P.autotune(configs=[$P.Config({}, num_warps=w) for w in (4, 8, 16)], key=["n_cols"])
@$P.jit
def softmax_kernel(out, inp, in_stride, out_stride, n_cols, BLOCK: $L.constexpr):
    row = $L.program_id(0)
    offs = $L.arange(0, BLOCK)
    mask = offs < n_cols
    x = $L.load(inp + row * in_stride + offs, mask=mask, other=-float("inf")).to($L.float32)
    x = x - $L.max(x, axis=0)
    num = $L.exp(x)
    den = $L.sum(num, axis=0)
    $L.store(out + row * out_stride + offs, (num / den).to($L.float16), mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    out = x.new_empty(x.shape)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=$P.next_power_of_2(n_cols))
    return out


@$P.autotune(configs=[$P.Config({}, num_warps=w) for w in (4, 8, 16)], key=["N"])
@$P.jit
def layer_norm_kernel(X, Y, W, B, stride, N, eps, BLOCK: $L.constexpr):
    row = $L.program_id(0)
    offs = $L.arange(0, BLOCK)
    mask = offs < N
    x = $L.load(X + row * stride + offs, mask=mask, other=0.0).to($L.float32)
    mean = $L.sum(x, axis=0) / N
    xc = $L.where(mask, x - mean, 0.0)
    var = $L.sum(xc * xc, axis=0) / N
    rstd = 1.0 / $L.sqrt(var + eps)
    w = $L.load(W + offs, mask=mask).to($L.float32)
    b = $L.load(B + offs, mask=mask).to($L.float32)
    $L.store(Y + row * stride + offs, (xc * rstd * w + b).to($L.float16), mask=mask)


def layer_norm(x, w, b, eps=1e-5):
    M, N = x.shape
    y = x.new_empty(x.shape)
    layer_norm_kernel[(M,)](x, y, w, b, x.stride(0), N, eps, BLOCK=$P.next_power_of_2(N))
    return y


def attention(q, k, v):
    Z, H, N, D = q.shape
    o = q.new_empty(q.shape)
    grid = lambda meta: (N // meta["BLOCK_M"], Z * H)  # noqa: E731
    attn_fwd[grid](q, k, v, 1.0 / D ** 0.5, o, q.stride(2), k.stride(2), v.stride(2), o.stride(2), N,
                   HEAD_DIM=D, STAGE=1)
    return o
'''

_GEN = None


def instantiate(impl: str):
    global _GEN
    if _GEN is None:
        _GEN = Path(tempfile.mkdtemp(prefix="deuteron-bench-"))
    pkg, lang = {"newt": ("newt", "nl"), "triton": ("triton", "tl")}[impl]
    from backend_perf import ATTN_TEMPLATE  # the attention forward of bench.py (one source for both packages)
    src = string.Template(TEMPLATE + ATTN_TEMPLATE).substitute(P=pkg, L=lang)
    path = _GEN / f"handwritten_{impl}.py"
    path.write_text(src)
    name = f"_deuteron_bench_{impl}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def bench_ms(fn, rep=200) -> float:
    from newt.testing import do_bench
    return float(do_bench(fn, warmup=25, rep=rep, return_mode="median"))


def load_anchor(path: str | None) -> dict:
    cands = [Path(path)] if path else []
    cands += [ROOT / "shared" / "anchors", ROOT.parent / "shared" / "anchors", Path("/work/shared/anchors")]
    for d in cands:
        f = d / "helion1.4_quick_h200_2026-11-30.json" if d.is_dir() else d
        if f.is_file():
            try:
                rows = json.loads(f.read_text())
                out = {}
                for r in rows:
                    out[r["kernel"]] = r
                return {"source": str(f), **out}
            except (OSError, ValueError, KeyError):
                continue
    return {"source": "built-in", **HELION_ANCHOR}


# ---------------------------------------------------------------------------
# the cells
# ---------------------------------------------------------------------------


def make_case(kernel: str, small: bool):
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    if kernel == "matmul":
        n = 1024 if small else 4096
        a = torch.randn(n, n, device=dev, dtype=torch.float16)
        b = torch.randn(n, n, device=dev, dtype=torch.float16)
        return {"args": (a, b), "shape": [n, n, n], "flops": 2.0 * n ** 3, "bytes": None,
                "ref": lambda: (a @ b), "atol": 1e-1, "rtol": 1e-2}
    if kernel == "softmax":
        m, n = (1024, 4096) if small else (8192, 4096)
        x = torch.randn(m, n, device=dev, dtype=torch.float16)
        return {"args": (x,), "shape": [m, n], "flops": None, "bytes": 2.0 * x.numel() * x.element_size(),
                "ref": lambda: torch.softmax(x, -1), "atol": 1e-3, "rtol": 1e-2}
    if kernel == "layer_norm":
        m, n = (1024, 4096) if small else (8192, 4096)
        x = torch.randn(m, n, device=dev, dtype=torch.float16)
        w = torch.randn(n, device=dev, dtype=torch.float16)
        b = torch.randn(n, device=dev, dtype=torch.float16)
        return {"args": (x, w, b), "shape": [m, n], "flops": None,
                "bytes": 2.0 * x.numel() * x.element_size() + 2 * w.numel() * 2,
                "ref": lambda: torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5), "atol": 2e-2, "rtol": 2e-2}
    if kernel == "attention":
        z, h, s, d = (2, 8, 1024, 64) if small else (4, 32, 4096, 64)
        q, k, v = (torch.randn(z, h, s, d, device=dev, dtype=torch.float16) for _ in range(3))
        return {"args": (q, k, v), "shape": [z, h, s, d], "flops": 4.0 * z * h * s * s * d, "bytes": None,
                "ref": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v), "atol": 2e-2,
                "rtol": 2e-2}
    raise ValueError(kernel)


def dt_kernel(kernel: str):
    import importlib
    if kernel == "matmul":
        return importlib.import_module("matmul").matmul
    if kernel == "softmax":
        return importlib.import_module("softmax").softmax
    if kernel == "attention":
        return importlib.import_module("attention").attention
    return importlib.import_module("layer_norm").layer_norm


def launch_only(k, cfg, args):
    """A function that runs only deuteron's generated launch functions for ``cfg`` on ``args`` -- what the tuner
    times -- without the kernel's host code (binding, the trace guards, allocating outputs): the difference
    to a full call is deuteron's per-call host overhead."""
    from deuteron.hostrun import _HostRun, _runtime_args
    from deuteron.runtime import launch
    b = k._bind(tuple(args), {})
    e = k._entry(b)
    run = _HostRun(e, e.complete(cfg, where=None), "source")
    run.execute(b)
    calls = [(gen, mod, _runtime_args(gen, prog, loc, k.fn.__globals__)) for gen, mod, prog, loc in run.built]

    def fn():
        for gen, mod, rargs in calls:
            launch(gen, mod, rargs, gen.constexprs, e.device)
    return fn


def throughput(case, ms):
    if ms is None or not math.isfinite(ms) or ms <= 0:
        return None
    if case["flops"]:
        return {"TFLOPs": case["flops"] / ms / 1e9}
    return {"GBps": case["bytes"] / ms / 1e6}


def run_cell(kernel, args_ns, out_dir: Path, log) -> dict:
    import torch
    case = make_case(kernel, args_ns.small)
    ref = case["ref"]()
    res = {"kernel": kernel, "shape": case["shape"], "impls": {}}

    def check(name, got):
        torch.testing.assert_close(got.float(), ref.float(), atol=case["atol"], rtol=case["rtol"],
                                   msg=lambda m: f"{kernel}/{name}: {m}")

    # deuteron: tune from scratch, then time the winner
    k = dt_kernel(kernel)
    try:
        k.reset()
        events = []
        logf = out_dir / f"autotune_{kernel}.jsonl"
        k.autotune_log = str(logf)
        t0 = time.perf_counter()
        cfg = k.autotune(*case["args"], effort=args_ns.effort, callback=events.append, force=True)
        tune_s = time.perf_counter() - t0
        got = k(*case["args"])
        check("deuteron", got)
        ms = bench_ms(lambda: k(*case["args"]))
        launch_ms = bench_ms(launch_only(k, cfg, case["args"]))
        reports = [e for e in events if e["kind"] == "report"]
        status = {}
        for r in reports:
            status[r["status"]] = status.get(r["status"], 0) + 1
        end = next((e for e in events if e["kind"] == "end"), {})
        phases = end.get("phases") or {}
        res["impls"]["deuteron"] = {"ms": ms, "launch_only_ms": launch_ms, **(throughput(case, ms) or {}),
                                    "tune_s": tune_s,
                                    "configs_tested": len(reports), "status_counts": status, "config": str(cfg),
                                    "phases": phases, "before_tuner_s": round(tune_s - phases.get("total", 0), 3)}
        (out_dir / f"deuteron_{kernel}.py").write_text(k.to_newt_source(*case["args"], config=cfg))
        log(f"  deuteron   {ms:8.4f} ms  tuned in {tune_s:5.1f} s over {len(reports)} configs {status}; "
            f"its launch functions alone {launch_ms:.4f} ms")
        log(f"             {cfg}")
        log(f"             phases {phases} (tracing before the tuner: {tune_s - phases.get('total', 0):.2f} s)")
        if kernel in args_ns.full_kernels:
            res["full"] = full_vs_quick(kernel, case, k, cfg, args_ns, log)
    except Exception as e:  # report and go on
        res["impls"]["deuteron"] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        log(f"  deuteron   FAILED {type(e).__name__}: {str(e)[:300]}")
    # hand-written newt and Triton
    for impl in ("newt", "triton"):
        try:
            mod = instantiate(impl)
            fn = getattr(mod, kernel)
            t0 = time.perf_counter()
            got = fn(*case["args"])
            torch.cuda.synchronize()
            tune_s = time.perf_counter() - t0
            check(impl, got)
            ms = bench_ms(lambda fn=fn: fn(*case["args"]))
            res["impls"][impl] = {"ms": ms, **(throughput(case, ms) or {}), "tune_s": tune_s}
            log(f"  {impl:10s} {ms:8.4f} ms  (first call incl. autotune {tune_s:5.1f} s)")
        except Exception as e:
            res["impls"][impl] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
            log(f"  {impl:10s} FAILED {type(e).__name__}: {str(e)[:300]}")
    try:
        fn = case["ref"]
        ms = bench_ms(fn)
        res["impls"]["torch"] = {"ms": ms, **(throughput(case, ms) or {})}
        log(f"  torch      {ms:8.4f} ms")
    except Exception as e:
        res["impls"]["torch"] = {"error": str(e)}
    d = res["impls"].get("deuteron", {}).get("ms")
    for other in ("newt", "triton", "torch"):
        o = res["impls"].get(other, {}).get("ms")
        if d and o:
            res[f"deuteron_vs_{other}"] = o / d  # > 1: deuteron is faster
    return res


def full_vs_quick(kernel, case, k, quick_cfg, args_ns, log) -> dict:
    """Tune ``kernel`` with effort ``full`` from scratch in a fresh process, then time both winners here."""
    from autotune_scaling import _run_row

    from deuteron.config import Config
    from newt.testing import do_bench
    size = case["shape"][0]
    env = {"DEUTERON_AUTOTUNE_SECONDS": args_ns.full_budget} if args_ns.full_budget else {}
    r = _run_row(kernel, size, env, effort="full", timeout=(args_ns.full_budget or 90) * 2 + 60)
    if "error" in r:
        err = r["error"]  # "exit N: <the stderr's tail>": its last lines hold the exception
        log(f"  full       FAILED {err.split(':', 1)[0]}: ..." + "\n    ".join(err.splitlines()[-12:]))
        return r
    full_cfg = Config.from_dict(r["best"])
    times: list = [[], []]
    for _ in range(3):
        for i, c in enumerate((quick_cfg, full_cfg)):
            times[i].append(do_bench(lambda c=c: k.run_with(c, *case["args"]), warmup=25, rep=100))
    q_ms, f_ms = sorted(times[0])[1], sorted(times[1])[1]
    out = {"seconds": r["seconds"], "configs": r["configs"], "status": r["status"], "config": str(full_cfg),
           "ms": f_ms, "quick_ms_same_rounds": q_ms, "full_vs_quick": q_ms / f_ms, "phases": r.get("phases")}
    log(f"  full       {f_ms:8.4f} ms  tuned in {r['seconds']:5.1f} s over {r['configs']} configs {r['status']} "
        f"(fresh process); quick's winner {q_ms:.4f} ms in the same rounds: full/quick speed {q_ms / f_ms:.3f}x")
    log(f"             {full_cfg}")
    log(f"             phases {r.get('phases')}")
    return out


def plan_offline(kernels: list, tma: bool, compile_them: bool, log, only_seeds: bool = False) -> list:
    """No GPU: what a quick tune of each kernel starts with at the benchmark's full sizes (its seeds and its
    first pattern-search batch, ``deuteron.autotune.plan``), each config compiled for sm_90a (seconds in this
    process, one after the other; registers, spills, shared bytes, HGMMA, TMA maps, the warp-specialized
    producer).  ``tma``: as on an H100/H200 with ``NEWT_TMA=1`` (set it here too, so the compiles use TMA)."""
    import torch

    from deuteron.autotune.plan import quick_plan
    from deuteron.compile import compile_binary
    from deuteron.hostrun import _HostRun, _runtime_args
    shapes = {"matmul": lambda: (torch.randn(4096, 4096, dtype=torch.float16),) * 2,
              "attention": lambda: tuple(torch.randn(4, 32, 4096, 64, dtype=torch.float16) for _ in range(3)),
              "softmax": lambda: (torch.randn(8192, 4096, dtype=torch.float16),),
              "layer_norm": lambda: (torch.randn(8192, 4096, dtype=torch.float16),
                                     torch.randn(4096, dtype=torch.float16), torch.randn(4096, dtype=torch.float16))}
    rows = []
    for kernel in kernels:
        k = dt_kernel(kernel)
        args = shapes[kernel]()
        p = quick_plan(k, args, tma=tma)
        todo = [("seed", c) for c in p["seeds"]] + ([] if only_seeds else [("refine", c) for c in p["refine"]])
        log(f"{kernel}: {p['space']}; quick budget {p['budget']} configs; {len(p['seeds'])} seeds, "
            f"{len(p['refine'])} more in the first pattern-search batch (around the first seed after the default)")
        b = k._bind(args, {})
        e = k._entry(b)
        total = 0.0
        for i, (phase, cfg) in enumerate(todo):
            row = {"kernel": kernel, "phase": phase, "config": str(cfg)}
            if compile_them:
                try:
                    run = _HostRun(e, e.complete(cfg, where=None), "source")
                    run.execute(b)
                    t0 = time.perf_counter()
                    for gen, mod, prog, loc in run.built:
                        ck = compile_binary(gen, mod, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a")
                        md = ck.metadata
                        sass = ck.asm.get("sass", "") or ""
                        row.update(regs=md.get("n_regs"), spills=md.get("n_spills"), shared=md.get("shared"),
                                   hgmma=sass.count("HGMMA"), tma_maps=len(md.get("tensormaps") or []),
                                   producer_warps=md.get("producer_warps") or 0)
                    row["compile_s"] = round(time.perf_counter() - t0, 2)
                    total += row["compile_s"]
                except Exception as ex:  # a config that does not build or compile: reported, not fatal
                    row["error"] = f"{type(ex).__name__}: {str(ex).splitlines()[0][:160] if str(ex) else ''}"
            rows.append(row)
            log(f"  {i:2d} {phase:6s} " + (f"{row['compile_s']:5.1f} s regs {row['regs']:3d} spills {row['spills']} "
                                           f"HGMMA {row['hgmma']:2d} TMA maps {row['tma_maps']} producer "
                                           f"{row['producer_warps']}  " if "compile_s" in row else
                                           (f"ERROR {row['error']}  " if "error" in row else "")) + row["config"])
        if compile_them:
            log(f"  {kernel}: {len(todo)} configs, {total:.1f} s of compiling one after the other here")
    return rows


def report_md(results: list, anchor: dict, env: dict) -> str:
    lines = ["# deuteron on the GPU", "", f"{env.get('gpu')}; torch {env.get('torch')}, triton {env.get('triton')}, "
             f"effort `{env.get('effort')}`; ratios are other time / deuteron time (above 1: deuteron faster), "
             "deuteron timed as a user calls it; \"launch only\": its generated launch functions alone (what the tuner "
             "times; the difference is deuteron's per-call host overhead).", ""]
    lines += ["| kernel | shape | deuteron ms | launch only ms | tune s | configs | newt ms | Triton ms | torch ms "
              "| vs newt | vs Triton | throughput (deuteron) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def ms(im, name):
        v = im.get(name, {}).get("ms")
        return f"{v:.4f}" if v else ("error" if "error" in im.get(name, {}) else "-")

    for r in results:
        im = r["impls"]
        d = im.get("deuteron", {})
        thr = d.get("TFLOPs") and f"{d['TFLOPs']:.0f} TFLOP/s" or d.get("GBps") and f"{d['GBps']:.0f} GB/s" or "-"
        lo = d.get("launch_only_ms")
        lines.append(f"| {r['kernel']} | {'x'.join(map(str, r['shape']))} | {ms(im, 'deuteron')} | "
                     f"{f'{lo:.4f}' if lo else '-'} | "
                     f"{d.get('tune_s', float('nan')):.1f} | {d.get('configs_tested', '-')} | {ms(im, 'newt')} | "
                     f"{ms(im, 'triton')} | {ms(im, 'torch')} | {r.get('deuteron_vs_newt', float('nan')):.2f} | "
                     f"{r.get('deuteron_vs_triton', float('nan')):.2f} | {thr} |")
    fulls = [r for r in results if r.get("full") and "ms" in r["full"]]
    if fulls:
        lines += ["", "effort `full` from scratch (a fresh process), against quick's winner timed in the same rounds:",
                  "", "| kernel | full tune s | configs | full ms | quick's winner ms | full / quick speed | config |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for r in fulls:
            f = r["full"]
            lines.append(f"| {r['kernel']} | {f['seconds']:.1f} | {f['configs']} | {f['ms']:.4f} | "
                         f"{f['quick_ms_same_rounds']:.4f} | {f['full_vs_quick']:.3f}x | `{f['config']}` |")
    lines += ["", "Where the quick tunes' time went (seconds; main process: oracle, pool start, generate, tasks, "
              "check, wait, retime; workers: compile_worker, time_worker):", ""]
    for r in results:
        ph = r["impls"].get("deuteron", {}).get("phases")
        if ph:
            lines.append(f"- {r['kernel']}: " + ", ".join(f"{k} {v}" for k, v in ph.items()))
    lines += ["", f"Helion 1.4 quick anchors ({anchor.get('source')}):", ""]
    for r in results:
        a = anchor.get(r["kernel"])
        d = r["impls"].get("deuteron", {})
        if not a or "ms" not in d:
            continue
        if "TFLOPs" in a and d.get("TFLOPs"):
            lines.append(f"- {r['kernel']}: Helion {a['TFLOPs']:.0f} TFLOP/s tuned in {a['tune_s']:.0f} s; "
                         f"deuteron {d['TFLOPs']:.0f} TFLOP/s ({d['TFLOPs'] / a['TFLOPs']:.2f}x) tuned in "
                         f"{d['tune_s']:.0f} s")
        if "GBps" in a and d.get("GBps"):
            lines.append(f"- {r['kernel']}: Helion {a['GBps']:.0f} GB/s tuned in {a['tune_s']:.0f} s; "
                         f"deuteron {d['GBps']:.0f} GB/s ({d['GBps'] / a['GBps']:.2f}x) tuned in {d['tune_s']:.0f} s")
    for r in results:
        for name, v in r["impls"].items():
            if "error" in v:
                lines.append(f"- {r['kernel']}/{name} failed: {v['error'][:300]}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for the results")
    ap.add_argument("--only", default="matmul,softmax,layer_norm,attention")
    ap.add_argument("--full", default="", help="kernels also tuned with effort full (fresh process), e.g. matmul")
    ap.add_argument("--full-budget", type=float, default=0.0,
                    help="DEUTERON_AUTOTUNE_SECONDS of the full tunes (0: effort full's own budget)")
    ap.add_argument("--effort", default="quick", choices=["quick", "full"])
    ap.add_argument("--budget", type=float, default=0.0,
                    help="DEUTERON_AUTOTUNE_SECONDS per deuteron kernel (0: the effort's own budget, quick 15 s)")
    ap.add_argument("--small", action="store_true", help="smaller shapes (a smoke run)")
    ap.add_argument("--anchors", default=None, help="directory or file with the Helion anchor figures")
    ap.add_argument("--plan", action="store_true",
                    help="no GPU: list what each kernel's quick tune starts with and compile it for sm_90a")
    ap.add_argument("--plan-seeds", action="store_true", help="with --plan: the seeds only")
    ap.add_argument("--no-compile", action="store_true", help="with --plan: list the configs only")
    ap.add_argument("--tma", action="store_true",
                    help="NEWT_TMA=1 (newt's TMA copies on sm_90a): the tunes also try the descriptor form")
    ns = ap.parse_args(argv)
    if ns.tma:
        os.environ["NEWT_TMA"] = "1"
    if ns.plan:
        os.environ.setdefault("NEWT_CACHE_DIR", tempfile.mkdtemp(prefix="deuteron-plan-cache-"))
        out = Path(ns.out)
        out.mkdir(parents=True, exist_ok=True)
        rows = plan_offline([k.strip() for k in ns.only.split(",") if k.strip()], ns.tma, not ns.no_compile,
                            lambda m: print(m, flush=True), only_seeds=ns.plan_seeds)
        (out / "deuteron_plan.json").write_text(json.dumps({"tma": ns.tma, "rows": rows}, indent=1))
        return 0
    ns.full_kernels = {k.strip() for k in ns.full.split(",") if k.strip()}
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    # tune from scratch: fresh deuteron and newt caches inside the output directory
    cache = Path(tempfile.mkdtemp(prefix="deuteron-bench-cache-"))
    os.environ["DEUTERON_CACHE_DIR"] = str(cache / "deuteron")
    os.environ["NEWT_CACHE_DIR"] = str(cache / "newt")
    os.environ["TRITON_CACHE_DIR"] = str(cache / "triton")
    if ns.budget:
        os.environ["DEUTERON_AUTOTUNE_SECONDS"] = str(ns.budget)
    os.environ.setdefault("DEUTERON_PROGRESS", "0")
    logf = open(out / "deuteron_bench.log", "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    import torch
    if not torch.cuda.is_available():
        log("no CUDA GPU: this benchmark runs on the device")
        return 2
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "effort": ns.effort,
           "budget_s": ns.budget, "small": ns.small}
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    anchor = load_anchor(ns.anchors)
    results = []
    t_all = time.perf_counter()
    for kernel in [k.strip() for k in ns.only.split(",") if k.strip()]:
        log(f"{kernel}:")
        results.append(run_cell(kernel, ns, out, log))
        (out / "deuteron_results.json").write_text(json.dumps({"env": env, "anchor": anchor, "results": results},
                                                              indent=1, default=str))
    env["wall_s"] = time.perf_counter() - t_all
    (out / "deuteron_results.json").write_text(json.dumps({"env": env, "anchor": anchor, "results": results},
                                                          indent=1, default=str))
    md = report_md(results, anchor, env)
    (out / "deuteron_results.md").write_text(md)
    log(md)
    log(f"total {env['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
