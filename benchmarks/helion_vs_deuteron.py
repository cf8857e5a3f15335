"""deuteron against Helion itself, on the same kernel source, the same card and the same shapes (issue 25).

    python3 benchmarks/helion_vs_deuteron.py --examples HELION/examples --out DIR [--only matmul,softmax,...]
                                             [--effort quick] [--budget SECONDS]

Each kernel is one of Helion's own example files, unmodified. It runs twice, each time in a fresh process with
empty caches:

* ``helion``: the real Helion package (its wheel carried to the device and put on ``PYTHONPATH``), with
  ``autotune_effort`` set through ``HELION_AUTOTUNE_EFFORT`` and ``HELION_SKIP_CACHE=1``;
* ``deuteron``: the same file through newt's drop-in (``import helion`` is deuteron), with deuteron's effort of the
  same name and empty ``DEUTERON_CACHE_DIR``/``NEWT_CACHE_DIR``.

In each process the first call is timed with a wall clock (it autotunes from scratch: the tuning wall time), the
result is checked against the torch reference, then the tuned kernel is timed with ``newt.testing.do_bench`` (CUDA
events, L2 flushed, median). The parent writes ``helion_vs_deuteron.json`` and ``.md`` with the ratio
helion_ms / deuteron_ms per kernel (above 1.00x deuteron is faster), its geomean over the kernels both ran, and the
two tuning times.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# kernel -> (example file, function, shape description)
CASES = {
    "matmul": ("matmul.py", "matmul", "4096x4096x4096 fp16"),
    "softmax": ("softmax.py", "softmax", "8192x4096 fp16"),
    "layer_norm": ("layer_norm.py", "layer_norm_fwd", "4096x8192 fp16"),
    "attention": ("attention.py", "attention", "4x32x4096x64 fp16"),
}


def _args(kernel: str, small: bool):
    import torch
    g = torch.Generator(device="cuda").manual_seed(0)
    dev, f16 = "cuda", torch.float16

    def rn(*shape):
        return torch.randn(*shape, device=dev, dtype=f16, generator=g)

    if kernel == "matmul":
        n = 1024 if small else 4096
        a, b = rn(n, n), rn(n, n)
        return (a, b), {}, lambda out: (out, a.float() @ b.float()), 2 * n ** 3, None
    if kernel == "softmax":
        m, n = (1024, 1024) if small else (8192, 4096)
        x = rn(m, n)
        return (x,), {}, lambda out: (out, torch.softmax(x.float(), dim=-1)), None, 2 * x.numel() * 2
    if kernel == "layer_norm":
        m, n = (1024, 1024) if small else (4096, 8192)
        x, w, b = rn(m, n), rn(n), rn(n)
        ref = torch.nn.functional.layer_norm(x.float(), [n], w.float(), b.float(), 1e-5)
        return (x, [n], w, b, 1e-5), {}, lambda out: (out[0] if isinstance(out, tuple) else out, ref), None, \
            2 * x.numel() * 2
    if kernel == "attention":
        z, h, s, d = (1, 4, 512, 64) if small else (4, 32, 4096, 64)
        q, k, v = rn(z, h, s, d), rn(z, h, s, d), rn(z, h, s, d)
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
        return (q, k, v), {}, lambda out: (out[0] if isinstance(out, tuple) else out, ref), 4 * z * h * s * s * d, None
    raise ValueError(kernel)


def _load(examples: Path, file: str, fn: str):
    spec = importlib.util.spec_from_file_location(f"_helion_example_{file[:-3]}", examples / file)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(examples))
    spec.loader.exec_module(mod)
    return getattr(mod, fn)


def child(ns) -> int:
    """One implementation, one kernel, in this (fresh) process; prints one JSON line."""
    import torch
    if ns.impl == "deuteron":
        import deuteron.frontend
        import newt.dropin
        # run from a source tree (no installed entry point advertises deuteron's kernel kind): register it here,
        # so the drop-in serves ``helion`` from deuteron even where the real package is on the path too
        deuteron.frontend.register()
        newt.dropin.install()
    import helion  # noqa: F401  (the real package or deuteron through the drop-in)

    from newt.testing import do_bench
    file, fn_name, _ = CASES[ns.kernel]
    rec = {"impl": ns.impl, "kernel": ns.kernel, "helion_module": getattr(sys.modules["helion"], "__file__", "?")}
    if ns.impl == "deuteron" and not getattr(sys.modules["helion"], "__newt_dropin__", False):
        rec["error"] = "the drop-in did not serve helion (the real package was imported)"
        print("RESULT " + json.dumps(rec), flush=True)
        return 0
    try:
        fn = _load(Path(ns.examples), file, fn_name)
        args, kwargs, check, flops, nbytes = _args(ns.kernel, ns.small)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        torch.cuda.synchronize()
        rec["tune_s"] = round(time.perf_counter() - t0, 2)
        got, ref = check(out)
        err = (got.float() - ref).abs().max().item()
        rec["max_err"] = err
        rec["ok"] = bool(err < (5e-2 if ns.kernel != "matmul" else 1.0))
        ms = do_bench(lambda: fn(*args, **kwargs), warmup=25, rep=200)
        rec["ms"] = ms
        if flops:
            rec["TFLOPs"] = flops / ms / 1e9
        if nbytes:
            rec["GBps"] = nbytes / ms / 1e6
    except Exception as e:  # a failure is a row of the table, not the end of the run
        rec["error"] = f"{type(e).__name__}: {e}"[:500]
        rec["traceback"] = traceback.format_exc()[-2000:]
    print("RESULT " + json.dumps(rec), flush=True)
    return 0


def run_one(impl: str, kernel: str, ns, log) -> dict:
    env = dict(os.environ)
    tmp = tempfile.mkdtemp(prefix=f"hvd-{impl}-{kernel}-")
    env.update({"HELION_AUTOTUNE_EFFORT": ns.effort, "HELION_SKIP_CACHE": "1", "DEUTERON_CACHE_DIR": tmp + "/dt",
                "NEWT_CACHE_DIR": tmp + "/newt", "TRITON_CACHE_DIR": tmp + "/triton",
                "DEUTERON_AUTOTUNE_EFFORT": ns.effort, "PYTHONUNBUFFERED": "1"})
    cmd = [sys.executable, __file__, "--child", "--impl", impl, "--kernel", kernel, "--examples", ns.examples,
           "--effort", ns.effort] + (["--small"] if ns.small else [])
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=ns.per_run)
        out = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += f"\nTIMEOUT after {ns.per_run} s"
    log.write(f"==== {impl} {kernel} ({time.time() - t0:.0f} s)\n{out[-6000:]}\n")
    log.flush()
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"impl": impl, "kernel": kernel, "error": out.strip().splitlines()[-1][:300] if out.strip() else "no output"}


def report(rows: dict, env: str) -> str:
    lines = ["# deuteron vs Helion, same example source, same card", "", env, "",
             "| kernel | shape | Helion ms | deuteron ms | Helion/deuteron | Helion tune s | deuteron tune s | "
             "checks |", "|---|---|---|---|---|---|---|---|"]
    ratios = []
    for k, (h, d) in rows.items():
        hm, dm = h.get("ms"), d.get("ms")
        r = hm / dm if hm and dm else None
        if r and h.get("ok") and d.get("ok"):
            ratios.append(r)

        def f(v, fmt):
            return format(v, fmt) if isinstance(v, (int, float)) else "—"
        checks = f"Helion {'ok' if h.get('ok') else h.get('error', 'wrong')[:60]}, " \
                 f"deuteron {'ok' if d.get('ok') else d.get('error', 'wrong')[:60]}"
        lines.append(f"| {k} | {CASES[k][2]} | {f(hm, '.4f')} | {f(dm, '.4f')} | {f(r, '.2f')}x | "
                     f"{f(h.get('tune_s'), '.1f')} | {f(d.get('tune_s'), '.1f')} | {checks} |")
    if ratios:
        g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        lines += ["", f"Geomean Helion/deuteron over the {len(ratios)} kernels both ran correctly: **{g:.2f}x**."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", required=True, help="Helion's examples/ directory (unmodified)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--effort", default="quick", choices=["quick", "full"])
    ap.add_argument("--per-run", type=float, default=200.0, help="seconds allowed to one process")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl", choices=["helion", "deuteron"], help=argparse.SUPPRESS)
    ap.add_argument("--kernel", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.child:
        return child(ns)
    import torch
    if not torch.cuda.is_available():
        print("helion_vs_deuteron.py needs a CUDA GPU (it times both packages on the device)", file=sys.stderr)
        return 2
    out = Path(ns.out or ".")
    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    with open(out / "helion_vs_deuteron.log", "w") as log:
        for k in [k for k in ns.only.split(",") if k]:
            h = run_one("helion", k, ns, log)
            d = run_one("deuteron", k, ns, log)
            rows[k] = (h, d)
            print(f"{k}: helion {h.get('ms', h.get('error'))} (tune {h.get('tune_s')} s), "
                  f"deuteron {d.get('ms', d.get('error'))} (tune {d.get('tune_s')} s)", flush=True)
    try:
        import torch
        import triton
        env = (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {torch.cuda.get_device_name()}, torch "
               f"{torch.__version__}, Triton {triton.__version__}, effort {ns.effort} for both, fresh caches.")
    except Exception:
        env = time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())
    (out / "helion_vs_deuteron.json").write_text(json.dumps({k: {"helion": h, "deuteron": d}
                                                             for k, (h, d) in rows.items()}, indent=1))
    md = report(rows, env)
    (out / "helion_vs_deuteron.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
