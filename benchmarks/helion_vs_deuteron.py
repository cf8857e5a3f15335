"""deuteron against Helion itself, on Helion's own example files, the same card and the same shapes (issue 25).

    python3 benchmarks/helion_vs_deuteron.py --examples HELION/examples --out DIR [--helion-site SITE]
        [--only matmul,softmax,...] [--full matmul,attention] [--budget SECONDS] [--parallel N] [--smoke]

Each kernel is a function of one of Helion's example files (pytorch/helion ef091f41), unmodified. Two
implementations run it: ``helion``, the real package (its wheels installed into SITE, which only Helion's
processes get on ``PYTHONPATH``), and ``deuteron``, the same file through newt's drop-in (``import helion`` is
deuteron). One call, four phases, all under one deadline (``--budget``):

1. **deuteron quick tunes**, one fresh process per kernel, one after the other (the GPU to itself): an empty
   config cache of its own; the first call's wall time is the tuning time; the result is checked against torch.
2. **Helion quick tunes**, the same, ``--parallel`` processes at a time (Helion's autotuner compiles on the CPU;
   each process gets ``HELION_AUTOTUNE_PRECOMPILE_JOBS`` = cores / parallel). Its tuning wall times are then an
   upper bound (the GPU and CPU were shared), its picks may be slightly worse than alone; the report says so.
   A kernel starts only while its expected time fits before the deadline (minus phase 4's reserve).
3. **deuteron full tunes** of the ``--full`` kernels, alone, if they fit.
4. **measurement**: one long-lived process per (implementation, effort), started as soon as its tunes are done,
   loads every kernel from the config caches they wrote (Helion with ``HELION_ASSERT_CACHE_HIT=1``: no tuning
   here), checks it again, then the parent asks each process in turn to time kernel k (``newt.testing.do_bench``:
   CUDA events, L2 flushed, median) for ``--rounds`` rounds, alternating the order; each figure is the median
   over the rounds.

Writes ``helion_vs_deuteron.json``, ``.md`` (the table: Helion/deuteron speed per kernel at quick effort, the
tuning wall times, correctness of both, the geomean over the kernels both ran correctly) and ``.log`` (every
child's output). ``--smoke`` runs the whole orchestration on the CPU with tiny shapes: deuteron on newt's
interpreter, Helion (where SITE imports) in its eager interpret mode, a wall-clock timer instead of CUDA events.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Inputs:
    args: tuple
    ref: Callable  # () -> reference tensor (float32)
    pick: Callable  # kernel output -> the tensor compared with ref
    flops: float | None = None
    nbytes: float | None = None
    rtol: float = 1e-2
    atol: float = 1e-1


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _same(out):
    return out


# ---- inputs per kernel: (mod, device, small) -> Inputs; shapes as in Helion's own examples/benchmarks -----------

def _rn(dev, *shape, dtype=None):
    import torch
    return torch.randn(*shape, device=dev, dtype=dtype or torch.float16)


def _matmul(mod, dev, small):
    n = 64 if small else 4096
    a, b = _rn(dev, n, n), _rn(dev, n, n)
    return Inputs((a, b), lambda: a.float() @ b.float(), _same, flops=2 * n ** 3)


def _softmax(mod, dev, small):
    import torch
    m, n = (32, 256) if small else (8192, 4096)
    x = _rn(dev, m, n)
    return Inputs((x,), lambda: torch.softmax(x.float(), -1), _same, nbytes=2 * x.numel() * 2, atol=1e-2)


def _layer_norm(mod, dev, small):
    import torch
    m, n = (32, 256) if small else (4096, 8192)
    x, w, b = _rn(dev, m, n), _rn(dev, n), _rn(dev, n)
    return Inputs((x, [n], w, b, 1e-5),
                  lambda: torch.nn.functional.layer_norm(x.float(), [n], w.float(), b.float(), 1e-5), _first,
                  nbytes=2 * x.numel() * 2)


def _attention(mod, dev, small):
    import torch
    z, h, s, d = (1, 2, 128, 64) if small else (4, 32, 4096, 64)
    q, k, v = _rn(dev, z, h, s, d), _rn(dev, z, h, s, d), _rn(dev, z, h, s, d)
    return Inputs((q, k, v), lambda: torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float()),
                  _first, flops=4 * z * h * s * s * d, atol=5e-2)


def _rms_norm(mod, dev, small):
    import torch
    m, n = (32, 256) if small else (4096, 8192)
    x, w = _rn(dev, m, n), _rn(dev, n)

    def ref():
        xf = x.float()
        return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()
    return Inputs((x, w, 1e-5), ref, _first, nbytes=2 * x.numel() * 2)


def _add(mod, dev, small):
    m, n = (64, 128) if small else (8192, 8192)
    x, y = _rn(dev, m, n), _rn(dev, m, n)
    return Inputs((x, y), lambda: x.float() + y.float(), _same, nbytes=3 * x.numel() * 2)


def _cross_entropy(mod, dev, small):
    import torch
    n, v = (16, 512) if small else (4096, 32768)
    logits = _rn(dev, n, v, dtype=torch.float32)
    labels = torch.randint(0, v, (n,), device=dev, dtype=torch.int64)
    return Inputs((logits, labels), lambda: torch.nn.functional.cross_entropy(logits, labels), _same,
                  nbytes=logits.numel() * 4, rtol=1e-4, atol=1e-4)


def _sum(mod, dev, small):
    import torch
    m, n = (32, 512) if small else (8192, 8192)
    x = _rn(dev, m, n, dtype=torch.float32)
    return Inputs((x,), lambda: x.sum(-1), _same, nbytes=x.numel() * 4)


def _embedding(mod, dev, small):
    import torch
    rows, (b, s), d = (64, (8, 16), 64) if small else (16384, (1024, 128), 1024)
    x = torch.randint(0, rows, (b, s), device=dev, dtype=torch.int32)
    w = _rn(dev, rows, d)
    return Inputs((x, w), lambda: torch.nn.functional.embedding(x.long(), w).float(), _same,
                  nbytes=2 * b * s * d * 2, rtol=0.0, atol=0.0)


def _glu(kind):
    def build(mod, dev, small):
        import torch
        shape = (2, 16, 128) if small else (8, 2048, 4096)
        a, b = _rn(dev, *shape), _rn(dev, *shape)

        def ref():
            act = (torch.nn.functional.gelu(a.float(), approximate="tanh") if kind == "geglu"
                   else torch.nn.functional.silu(a.float()))
            return act.to(b.dtype).float() * b.float()
        return Inputs((a, b), ref, _same, nbytes=3 * a.numel() * 2)
    return build


def _exp(mod, dev, small):
    import torch
    x = _rn(dev, 4096 if small else 1 << 26, dtype=torch.float32)
    return Inputs((x,), lambda: torch.exp(x), _same, nbytes=2 * x.numel() * 4)


def _welford(mod, dev, small):
    import torch
    s, d = (32, 256) if small else (8192, 4096)
    w, b, x = (torch.rand(d, device=dev), torch.rand(d, device=dev), torch.rand(s, d, device=dev))
    return Inputs((w, b, x), lambda: torch.nn.functional.layer_norm(x, [d], w, b, 1e-5), _same,
                  nbytes=2 * x.numel() * 4)


def _kl_div(mod, dev, small):
    import torch
    bt, v = (16, 256) if small else (4096, 32000)
    y_pred = torch.randn(bt, v, device=dev).log_softmax(-1)
    y_true = torch.randn(bt, v, device=dev).softmax(-1)
    return Inputs((y_pred, y_true),
                  lambda: torch.nn.functional.kl_div(y_pred, y_true, reduction="batchmean", log_target=False),
                  _same, nbytes=2 * y_pred.numel() * 4, rtol=1e-3, atol=1e-4)


def _jagged(ref_name):
    def build(mod, dev, small):
        import torch
        b, m, max_seqlen = (4, 32, 16) if small else (512, 1024, 512)
        torch.manual_seed(0)
        x_data, x_offsets = mod.create_test_jagged_tensor(b, m, max_seqlen, dev, dtype=torch.float32)
        ref_fn = getattr(mod, ref_name)
        return Inputs((x_data, x_offsets), lambda: ref_fn(x_data, x_offsets).float(), _same,
                      nbytes=x_data.numel() * 4)
    return build


# kernel -> (example file, function, shape, inputs); the order is the priority when the budget runs short
CASES: dict[str, tuple[str, str, str, Callable]] = {
    "matmul": ("matmul.py", "matmul", "4096x4096x4096 fp16", _matmul),
    "attention": ("attention.py", "attention", "4x32x4096x64 fp16", _attention),
    "softmax": ("softmax.py", "softmax", "8192x4096 fp16", _softmax),
    "layer_norm": ("layer_norm.py", "layer_norm_fwd", "4096x8192 fp16", _layer_norm),
    "rms_norm": ("rms_norm.py", "rms_norm_fwd", "4096x8192 fp16", _rms_norm),
    "cross_entropy": ("cross_entropy.py", "cross_entropy", "4096x32768 fp32", _cross_entropy),
    "add": ("add.py", "add", "8192x8192 fp16", _add),
    "sum": ("sum.py", "sum_kernel", "8192x8192 fp32", _sum),
    "geglu": ("geglu.py", "_geglu", "8x2048x4096 fp16", _glu("geglu")),
    "swiglu": ("swiglu.py", "_swiglu_fwd", "8x2048x4096 fp16", _glu("swiglu")),
    "embedding": ("embedding.py", "embedding", "1024x128 of 16384x1024 fp16", _embedding),
    "exp": ("exp.py", "exp_fwd", "2^26 fp32", _exp),
    "welford": ("welford.py", "welford", "8192x4096 fp32", _welford),
    "kl_div": ("kl_div.py", "kl_div_forward", "4096x32000 fp32", _kl_div),
    "jagged_sum": ("jagged_sum.py", "jagged_sum_kernel", "512 rows, 1024 wide, <=512 long fp32",
                   _jagged("reference_jagged_sum_kernel_pytorch")),
}
DEFAULT_ONLY = "matmul,attention,softmax,layer_norm,rms_norm,cross_entropy,add,sum"
DEFAULT_FULL = "matmul,attention"
#: expected wall seconds of one tune (an H100, from scratch; the Helion figures from its 2026-12-06 run)
EXPECT = {("helion", "quick"): 110.0, ("deuteron", "quick"): 20.0, ("deuteron", "full"): 100.0}
MEASURE_RESERVE = 75.0  # seconds kept for phase 4 (Helion's timing process compiling its winners, the rounds)


# ---- the child processes ----------------------------------------------------------------------------------------

def _device(ns) -> str:
    return "cpu" if ns.smoke else "cuda"


def _import_helion(impl: str):
    if impl == "deuteron":
        import deuteron.frontend
        import newt.dropin
        # from a source tree no installed entry point advertises deuteron's kernel kind: register it here
        deuteron.frontend.register()
        newt.dropin.install()
    import helion
    if impl == "deuteron" and not getattr(helion, "__newt_dropin__", False):
        raise RuntimeError(f"the drop-in did not serve helion (imported {getattr(helion, '__file__', '?')})")
    if impl == "helion" and getattr(helion, "__newt_dropin__", False):
        raise RuntimeError("the real Helion package is not on the path (the drop-in served it)")
    return helion


def _helion_version(impl: str, helion) -> str:
    """The real package's version from its metadata (Helion 1.4 has no ``__version__``); deuteron's drop-in
    says its own."""
    if impl == "helion":
        import importlib.metadata
        try:
            return importlib.metadata.version("helion")
        except importlib.metadata.PackageNotFoundError:
            pass
    return str(getattr(helion, "__version__", "?"))


def _chosen_config(impl: str, fn, args) -> str:
    """The config the first call chose (for the report; '?' where the kernel does not say)."""
    try:
        cfg = fn.bind(args)._config if impl == "helion" else fn.bind(*args).config
        return str(cfg)[:400]
    except Exception as e:
        return f"? ({type(e).__name__})"


def _load(examples: Path, file: str, fn: str):
    mod_name = f"_helion_example_{file[:-3]}"
    if mod_name in sys.modules:
        mod = sys.modules[mod_name]
    else:
        spec = importlib.util.spec_from_file_location(mod_name, examples / file)
        mod = importlib.util.module_from_spec(spec)
        if str(examples) not in sys.path:
            sys.path.insert(0, str(examples))
        sys.modules[mod_name] = mod
        spec.loader.exec_module(mod)
    return mod, getattr(mod, fn)


def _sync(dev: str):
    if dev == "cuda":
        import torch
        torch.cuda.synchronize()


def _check(inp: Inputs, out) -> dict:
    import torch
    got = inp.pick(out).float()
    ref = inp.ref().float()
    if tuple(got.shape) != tuple(ref.shape):
        return {"ok": False, "max_err": None, "why": f"shape {tuple(got.shape)} != {tuple(ref.shape)}"}
    err = (got - ref).abs()
    bad = err > inp.atol + inp.rtol * ref.abs()
    nan = bool(torch.isnan(got).any()) and not bool(torch.isnan(ref).any())
    return {"ok": not bool(bad.any()) and not nan, "max_err": float(err.max()) if err.numel() else 0.0}


def _timer(dev: str):
    if dev == "cuda":
        from newt.testing import do_bench
        return lambda f: do_bench(f, warmup=25, rep=100)

    def wall(f):  # the CPU smoke: one warm call, then the median of three
        f()
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            f()
            ts.append((time.perf_counter() - t0) * 1e3)
        return sorted(ts)[1]
    return wall


def _prepare(ns, kernel: str):
    """The kernel's function and inputs (the same seed in every process)."""
    import torch
    torch.manual_seed(0)
    file, fn_name, _, build = CASES[kernel]
    mod, fn = _load(Path(ns.examples), file, fn_name)
    return fn, build(mod, _device(ns), ns.small or ns.smoke)


def child_tune(ns) -> int:
    """Phase 1-3: one implementation, one kernel, tuned from the empty caches the parent gave; one JSON line."""
    rec = {"impl": ns.impl, "kernel": ns.kernel, "effort": ns.effort}
    try:
        helion = _import_helion(ns.impl)
        rec["helion_module"] = getattr(helion, "__file__", "?")
        rec["helion_version"] = _helion_version(ns.impl, helion)
        fn, inp = _prepare(ns, ns.kernel)
        dev = _device(ns)
        _sync(dev)
        t0 = time.perf_counter()
        out = fn(*inp.args)
        _sync(dev)
        rec["tune_s"] = round(time.perf_counter() - t0, 2)
        rec.update(_check(inp, out))
        rec["config"] = _chosen_config(ns.impl, fn, inp.args)
        if ns.impl == "deuteron" and ns.effort == "full":  # the full winner, timed alone (phase 4 times it again)
            rec["ms_alone"] = _timer(dev)(lambda: fn(*inp.args))
    except Exception as e:  # a failure is a row of the table, not the end of the run
        rec["error"] = f"{type(e).__name__}: {e}"[:500]
        rec["traceback"] = traceback.format_exc()[-3000:]
    print("RESULT " + json.dumps(rec), flush=True)
    return 0


def child_serve(ns) -> int:
    """Phase 4: load every kernel from the tuned caches, then time kernel k whenever the parent asks."""
    loaded, ready = {}, {}
    try:
        _import_helion(ns.impl)
    except Exception as e:
        print("READY " + json.dumps({"error": f"{type(e).__name__}: {e}"[:500]}), flush=True)
        return 0
    dev = _device(ns)
    bench = _timer(dev)
    for k in [k for k in ns.only.split(",") if k]:
        try:
            fn, inp = _prepare(ns, k)
            _sync(dev)
            t0 = time.perf_counter()
            out = fn(*inp.args)
            _sync(dev)
            r = {"load_s": round(time.perf_counter() - t0, 2)}
            r.update(_check(inp, out))
            loaded[k] = (fn, inp)
        except Exception as e:
            r = {"error": f"{type(e).__name__}: {e}"[:300], "traceback": traceback.format_exc()[-1500:]}
        ready[k] = r
    print("READY " + json.dumps(ready), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        k = cmd[1]
        rec = {"kernel": k}
        try:
            fn, inp = loaded[k]
            rec["ms"] = bench(lambda fn=fn, inp=inp: fn(*inp.args))
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {e}"[:300]
        print("RESULT " + json.dumps(rec), flush=True)
    return 0


# ---- the parent -------------------------------------------------------------------------------------------------

class Run:
    def __init__(self, ns, out: Path):
        self.ns = ns
        self.out = out
        self.t_end = time.time() + ns.budget
        self.work = Path(tempfile.mkdtemp(prefix="hvd-"))
        self.log = open(out / "helion_vs_deuteron.log", "w")
        self.lock = threading.Lock()
        self.tunes: dict = {}  # (impl, effort, kernel) -> record
        self.skipped: list[str] = []
        self.copied: dict = {}  # (impl, effort) -> the tuned-config files its timing process was given
        self.running: set = set()  # the tuning processes under way
        self.servers: dict = {}  # (impl, effort) -> (kernels, process, its READY/RESULT queue, its stderr lines)

    def say(self, msg: str):
        """A progress line, with the seconds since the start."""
        print(f"{msg} [at {time.time() - self.t_end + self.ns.budget:.0f} s]", flush=True)

    def left(self) -> float:
        return self.t_end - time.time()

    def cache(self, impl: str, effort: str, kernel: str | None) -> Path:
        return self.work / f"{impl}-{effort}" / (kernel or "merged")

    def env(self, impl: str, effort: str, cache: Path, jobs: int | None = None) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HELION_", "DEUTERON_"))}
        path = [str(ROOT)] + ([self.ns.helion_site] if impl == "helion" and self.ns.helion_site else [])
        env["PYTHONPATH"] = os.pathsep.join(path + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                     if p and p != self.ns.helion_site])
        env["PYTHONUNBUFFERED"] = "1"
        env["TRITON_CACHE_DIR"] = str(cache / "triton")
        env["NEWT_CACHE_DIR"] = str(cache / "newt")
        if impl == "helion":
            env.update({"HELION_AUTOTUNE_EFFORT": effort, "HELION_CACHE_DIR": str(cache / "helion"),
                        "HELION_AUTOTUNE_PROGRESS_BAR": "0"})
            if jobs:
                env["HELION_AUTOTUNE_PRECOMPILE_JOBS"] = str(jobs)
            if self.ns.smoke:
                env["HELION_INTERPRET"] = "1"
        else:
            # on the CPU (the smoke run) deuteron's tuner tries 4 configs on the interpreter
            env.update({"DEUTERON_AUTOTUNE_EFFORT": effort, "DEUTERON_CACHE_DIR": str(cache / "deuteron"),
                        "DEUTERON_PROGRESS": "0"})
        return env

    def argv(self, impl: str, effort: str, *extra: str) -> list[str]:
        return [sys.executable, str(Path(__file__).resolve()), "--examples", self.ns.examples, "--impl", impl,
                "--effort", effort] + (["--smoke"] if self.ns.smoke else []) + \
               (["--small"] if self.ns.small else []) + list(extra)

    def write_log(self, head: str, text: str):
        with self.lock:
            self.log.write(f"==== {head}\n{text[-8000:]}\n")
            self.log.flush()

    def tune(self, impl: str, effort: str, kernel: str, jobs: int | None = None) -> dict:
        cache = self.cache(impl, effort, kernel)
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        # a tune is stopped where it would eat into the measurement's reserve
        timeout = max(5.0, min(self.ns.per_run, self.left() - self.reserve()))
        t0 = time.time()
        # its own process group: a tune stopped at its timeout takes its compile and benchmark workers with it
        p = subprocess.Popen(self.argv(impl, effort, "--child", "--kernel", kernel), env=self.env(
            impl, effort, cache, jobs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT),
            start_new_session=True)
        with self.lock:
            self.running.add(p)
        try:
            out, err = p.communicate(timeout=timeout)
            text = out + err
        except subprocess.TimeoutExpired:
            _kill_group(p)
            out, err = p.communicate()
            text = (out or "") + (err or "") + f"\nTIMEOUT after {timeout:.0f} s"
        _kill_group(p)  # workers it left behind
        with self.lock:
            self.running.discard(p)
        wall = time.time() - t0
        self.write_log(f"tune {impl} {effort} {kernel} ({wall:.0f} s wall)", text)
        rec = _result(text) or {"impl": impl, "kernel": kernel, "effort": effort, "error": _last(text)}
        rec["process_s"] = round(wall, 1)
        with self.lock:
            self.tunes[(impl, effort, kernel)] = rec
        self.say(f"  tuned {impl:8s} {effort:5s} {kernel:14s} " + _brief(rec))
        return rec

    def reserve(self) -> float:
        return MEASURE_RESERVE * (0.2 if self.ns.smoke else 1.0)

    def fits(self, impl: str, effort: str, reserve: float) -> bool:
        return self.left() - reserve >= EXPECT[(impl, effort)] * (0.05 if self.ns.smoke else 1.0)

    def phase_tunes(self, kernels: list[str], full: list[str]):
        reserve = self.reserve()
        self.say(f"phase 1: deuteron quick tunes, one at a time ({len(kernels)} kernels)")
        for k in kernels:
            if self.fits("deuteron", "quick", reserve):
                self.tune("deuteron", "quick", k)
            else:
                self.skipped.append(f"deuteron quick {k}: did not fit the budget")
        # deuteron's timing process loads its tuned kernels while Helion tunes (it is idle afterwards)
        self.start_server("deuteron", "quick", kernels)
        if self.ns.helion_site is None and not self.ns.smoke:
            self.skipped.append("Helion: no --helion-site given")
        elif self.ns.no_helion:
            self.skipped.append("Helion: --no-helion")
        else:
            self.skipped.append("Helion's default (full) effort: not attempted (minutes per kernel, beyond one call)")
            par = max(1, self.ns.parallel)
            jobs = max(2, (os.cpu_count() or 2) // par)
            self.say(f"phase 2: Helion quick tunes, {par} processes at a time, {jobs} compile jobs each")
            queue = list(kernels)
            running: list[threading.Thread] = []
            while queue or running:
                running = [t for t in running if t.is_alive()]
                while queue and len(running) < par:
                    # Helion's tunes come before deuteron's full ones: only the measurement's room is kept
                    if not self.fits("helion", "quick", reserve):
                        self.skipped += [f"Helion quick {k}: did not fit the budget" for k in queue]
                        queue = []
                        break
                    t = threading.Thread(target=self.tune, args=("helion", "quick", queue.pop(0), jobs), daemon=True)
                    t.start()
                    running.append(t)
                time.sleep(0.2)
        self.start_server("helion", "quick", kernels)
        if full:
            self.say(f"phase 3: deuteron full tunes of {','.join(full)}, one at a time")
        for k in full:
            if self.fits("deuteron", "full", reserve):
                self.tune("deuteron", "full", k)
            else:
                self.skipped.append(f"deuteron full {k}: did not fit the budget")
        self.start_server("deuteron", "full", kernels)

    def serve(self, impl: str, effort: str, kernels: list[str]):
        """Start one measuring process; its tuned configs are the per-kernel caches, merged."""
        merged = self.cache(impl, effort, None)
        shutil.rmtree(merged, ignore_errors=True)
        sub = _CONFIGS[impl]
        (merged / sub).mkdir(parents=True)
        for k in kernels:
            for f in (self.cache(impl, effort, k) / sub).glob("*"):
                if f.is_file():
                    shutil.copy2(f, merged / sub / f.name)
        self.copied[(impl, effort)] = _entries(merged / sub)
        env = self.env(impl, effort, merged)
        if impl == "helion":
            env["HELION_ASSERT_CACHE_HIT"] = "1"
        p = subprocess.Popen(self.argv(impl, effort, "--serve", "--only", ",".join(kernels)), env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=str(ROOT), bufsize=1, start_new_session=True)
        errs: list[str] = []
        threading.Thread(target=lambda: errs.extend(p.stderr), daemon=True).start()
        return p, _reader(p), errs

    def start_server(self, impl: str, effort: str, kernels: list[str]):
        ks = [k for k in kernels if self.tunes.get((impl, effort, k), {}).get("ok")]
        if ks:
            self.servers[(impl, effort)] = (ks, *self.serve(impl, effort, ks))

    def phase_measure(self, kernels: list[str]) -> dict:
        groups = {g: v[0] for g, v in self.servers.items()}
        procs = {g: v[1:] for g, v in self.servers.items()}
        self.say(f"phase 4: timing, {self.ns.rounds} interleaved rounds: "
                 + "; ".join(f"{i} {e}: {','.join(ks)}" for (i, e), ks in groups.items()))
        ready, times = {}, {}
        for g, (_, q, errs) in procs.items():
            line = _readline(q, max(5.0, self.left()))
            ready[g] = json.loads(line[6:]) if line and line.startswith("READY ") else \
                {"error": "no READY line: " + (line or "".join(errs[-5:]))[-300:]}
        for r in range(self.ns.rounds):
            for k in kernels:
                order = [g for g in groups if k in groups[g] and ready[g].get(k, {}).get("ok")]
                for g in (order if r % 2 == 0 else order[::-1]):
                    if self.left() < 5:
                        break
                    p, q, _ = procs[g]
                    p.stdin.write(f"bench {k}\n")
                    p.stdin.flush()
                    line = _readline(q, max(5.0, self.left()))
                    if line and line.startswith("RESULT "):
                        rec = json.loads(line[7:])
                        if "ms" in rec:
                            times.setdefault((g, k), []).append(rec["ms"])
        for g, (p, _, errs) in procs.items():
            try:
                p.stdin.write("quit\n")
                p.stdin.flush()
                p.wait(timeout=20)
            except Exception:
                pass
            _kill_group(p)
            # a timing process that found no tuned config would have tuned again and written a new entry
            new = _entries(self.cache(*g, None) / _CONFIGS[g[0]]) - self.copied[g]
            ready[g]["_cache"] = "hit" if not new else f"miss: {len(new)} new entries (tuned again)"
            self.write_log(f"serve {g[0]} {g[1]}", json.dumps(ready[g]) + "\n" + "".join(errs))
        return {"ready": ready, "times": times}


def _kill_group(p: subprocess.Popen):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


#: where each implementation keeps its tuned configs, under the cache folder its processes get
_CONFIGS = {"helion": "helion", "deuteron": "deuteron/configs"}


def _entries(folder: Path) -> set:
    return {f.name for f in folder.glob("*") if f.is_file() and not f.name.startswith(".")}


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def _result(text: str) -> dict | None:
    for line in text.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return None


def _last(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def _brief(rec: dict) -> str:
    if rec.get("error"):
        return "error: " + rec["error"][:160]
    ok = "ok" if rec.get("ok") else f"WRONG (max err {rec.get('max_err')})"
    return f"tune {rec.get('tune_s')} s, {ok}"


def _reader(p: subprocess.Popen) -> queue.Queue:
    """A queue of the READY/RESULT lines of ``p``'s stdout (one reader thread per process)."""
    q: queue.Queue = queue.Queue()

    def read():
        for line in p.stdout:
            if line.startswith(("READY ", "RESULT ")):
                q.put(line.strip())
    threading.Thread(target=read, daemon=True).start()
    return q


def _readline(q: queue.Queue, timeout: float) -> str | None:
    try:
        return q.get(timeout=timeout)
    except queue.Empty:
        return None


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def _fmt(v, spec: str) -> str:
    return format(v, spec) if isinstance(v, (int, float)) else "—"


def table(rows: list[dict], env: str, skipped: list[str], parallel: int) -> str:
    """The report: one row per kernel; ratio = Helion ms / deuteron ms at quick effort (above 1.00x deuteron is
    faster); the geomean over the kernels both ran correctly."""
    lines = ["# deuteron vs Helion on Helion's own examples, same card, same run", "", env, "",
             "| kernel | shape | Helion quick ms | deuteron quick ms | Helion/deuteron | Helion tune s | "
             "deuteron tune s | deuteron full ms (tune s) | checks |",
             "|---|---|---|---|---|---|---|---|---|"]
    ratios = []
    for r in rows:
        if r["ratio"] is not None:
            ratios.append(r["ratio"])
        full = f"{_fmt(r['full_ms'], '.4f')} ({_fmt(r['full_tune_s'], '.1f')})" if r["full_tune_s"] else "—"
        lines.append(f"| {r['kernel']} | {r['shape']} | {_fmt(r['helion_ms'], '.4f')} | {_fmt(r['deuteron_ms'], '.4f')}"
                     f" | {_fmt(r['ratio'], '.2f')}x | {_fmt(r['helion_tune_s'], '.1f')} | "
                     f"{_fmt(r['deuteron_tune_s'], '.1f')} | {full} | {r['checks']} |")
    lines.append("")
    if ratios:
        g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        lines.append(f"Geomean Helion/deuteron over the {len(ratios)} kernels both ran correctly: **{g:.2f}x**.")
    else:
        lines.append("No kernel ran correctly on both: no geomean.")
    winners = [f"- {r['kernel']}: " + "; ".join(f"{n} `{c}`" for n, c in r["configs"].items())
               for r in rows if r.get("configs")]
    if winners:
        lines += ["", "Configs chosen:", ""] + winners
    lines += ["", f"Helion's tunes ran {parallel} at a time (their tuning wall times are upper bounds); deuteron's "
              "one at a time. Each ms is the median over the interleaved rounds of do_bench medians."]
    if skipped:
        lines += ["", "Not run, or to note: " + "; ".join(skipped) + "."]
    return "\n".join(lines) + "\n"


def _checks(tune: dict, ready: dict | None) -> str:
    if not tune:
        return "not run"
    if tune.get("error"):
        return tune["error"][:70]
    if not tune.get("ok"):
        return f"wrong (max err {_fmt(tune.get('max_err'), '.3g')})"
    if ready is not None and not ready.get("ok"):
        return "timing process: " + (ready.get("error") or "wrong")[:60]
    return "ok"


def collect(run: Run, kernels: list[str], m: dict) -> list[dict]:
    rows = []
    for k in kernels:
        h, d, f = (run.tunes.get((i, e, k), {}) for i, e in
                   (("helion", "quick"), ("deuteron", "quick"), ("deuteron", "full")))
        hm = _median(m["times"].get((("helion", "quick"), k), []))
        dm = _median(m["times"].get((("deuteron", "quick"), k), []))
        fm = _median(m["times"].get((("deuteron", "full"), k), []))
        hr = m["ready"].get(("helion", "quick"), {}).get(k)
        dr = m["ready"].get(("deuteron", "quick"), {}).get(k)
        rows.append({"kernel": k, "shape": CASES[k][2], "helion_ms": hm, "deuteron_ms": dm, "full_ms": fm,
                     "ratio": hm / dm if hm and dm else None, "helion_tune_s": h.get("tune_s"),
                     "deuteron_tune_s": d.get("tune_s"), "full_tune_s": f.get("tune_s"),
                     "checks": f"Helion {_checks(h, hr)}, deuteron {_checks(d, dr)}",
                     "configs": {n: r["config"] for n, r in (("Helion", h), ("deuteron quick", d), ("deuteron full", f))
                                 if r.get("config")}})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", required=True, help="Helion's examples/ directory (unmodified)")
    ap.add_argument("--helion-site", default=None, help="where Helion's wheels are installed (pip --target)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=DEFAULT_ONLY)
    ap.add_argument("--full", default=DEFAULT_FULL, help="kernels deuteron also tunes at full effort ('' for none)")
    ap.add_argument("--budget", type=float, default=540.0, help="seconds for the whole run")
    ap.add_argument("--parallel", type=int, default=4, help="Helion tunes at a time")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-run", type=float, default=300.0, help="seconds allowed to one tuning process")
    ap.add_argument("--no-helion", action="store_true", help="deuteron only")
    ap.add_argument("--small", action="store_true", help="small shapes (on the GPU)")
    ap.add_argument("--smoke", action="store_true", help="the CPU: tiny shapes, interpreters, a wall-clock timer")
    ap.add_argument("--effort", default="quick", choices=["quick", "full"], help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl", choices=["helion", "deuteron"], help=argparse.SUPPRESS)
    ap.add_argument("--kernel", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.child:
        return child_tune(ns)
    if ns.serve:
        return child_serve(ns)
    kernels = [k for k in ns.only.split(",") if k]
    full = [k for k in ns.full.split(",") if k and k in kernels]
    unknown = [k for k in kernels + full if k not in CASES]
    if unknown:
        ap.error(f"unknown kernels {unknown}; known: {','.join(CASES)}")
    import torch
    if not ns.smoke and not torch.cuda.is_available():
        print("helion_vs_deuteron.py needs a CUDA GPU (it times both packages on the device); --smoke runs the "
              "orchestration on the CPU", file=sys.stderr)
        return 2
    missing = [CASES[k][0] for k in kernels if not Path(ns.examples, CASES[k][0]).is_file()]
    if missing:
        ap.error(f"--examples {ns.examples}: no {', '.join(missing)} there (Helion's examples/ directory expected)")
    ns.examples = str(Path(ns.examples).resolve())
    if ns.helion_site:
        ns.helion_site = str(Path(ns.helion_site).resolve())
    out = Path(ns.out or tempfile.mkdtemp(prefix="hvd-out-"))
    out.mkdir(parents=True, exist_ok=True)
    run = Run(ns, out)
    t0 = time.time()
    m: dict = {"ready": {}, "times": {}}

    def stop(signum, frame):  # `timeout` stopping this run: report what was measured
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    try:
        run.phase_tunes(kernels, full)
        m = run.phase_measure(kernels)
        run.skipped += [f"{g[0]} {g[1]}'s timing process: {r['_cache']}" for g, r in m["ready"].items()
                        if r.get("_cache", "hit") != "hit"]
    except KeyboardInterrupt:
        run.skipped.append(f"the run was stopped after {time.time() - t0:.0f} s (what it had measured is above)")
        for p in [v[1] for v in run.servers.values()] + list(run.running):
            _kill_group(p)
    finally:
        shutil.rmtree(run.work, ignore_errors=True)
    rows = collect(run, kernels, m)
    dev = "CPU (smoke run: tiny shapes, interpreters)" if ns.smoke else torch.cuda.get_device_name()
    hv = sorted({r.get("helion_version") for (i, _, _), r in run.tunes.items() if i == "helion"} - {None})
    env = (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {dev}, torch {torch.__version__}, "
           f"{_versions()}, Helion {'/'.join(hv) or '(not run)'}; quick effort for both, tuned from empty caches; "
           f"{time.time() - t0:.0f} s in all.")
    md = table(rows, env, run.skipped, ns.parallel)
    (out / "helion_vs_deuteron.json").write_text(json.dumps(
        {"env": env, "rows": rows, "skipped": run.skipped,
         "tunes": {" ".join(k): v for k, v in run.tunes.items()},
         "times": {f"{g[0]} {g[1]} {k}": v for (g, k), v in m["times"].items()},
         "ready": {" ".join(g): v for g, v in m["ready"].items()}}, indent=1, default=str))
    (out / "helion_vs_deuteron.md").write_text(md)
    run.log.close()
    print(md)
    return 0


def _versions() -> str:
    out = []
    for name in ("triton",):
        try:
            out.append(f"Triton {__import__(name).__version__}")
        except Exception:
            pass
    return ", ".join(out) or "no Triton"


if __name__ == "__main__":
    sys.exit(main())
