"""Each Triton tutorial kernel's time, newt (through the drop-in) against Triton, in the same run.

    python benchmarks/triton_tutorial_timings.py DIR [--rounds 5] [--rep-ms 30] [--tune pytest|full]
                                                     [--only 01,03] [--json out.json] [--budget 220]
    python benchmarks/triton_tutorial_timings.py --smoke [DIR]    # tiny sizes, CPU interpreter, plumbing only

DIR holds Triton's tutorial files as Triton ships them (``01-vector-add.py`` ... ``06-fused-attention.py``;
nothing of them is kept in this project).  Two server processes load the same files: one under ``python``
(``import triton`` is the real Triton), one under ``python -m newt.dropin`` (``import triton`` is newt).
Each server executes a tutorial's *definitions* only -- its imports, functions, classes, and the module-level
assignments before its first module-level call statement (so its configs, ``DEVICE``, ``NUM_SM`` ...) --
never its checks or its ``benchmark.run``; the kernels and host wrappers are the file's own, and the timed
callables are the tutorial's wrappers at the tutorial's benchmark shapes (a few per tutorial), built the way
its benchmark function builds them.

Timing is do_bench-style and the same code on both sides: CUDA events around each call, the L2 flushed (a
256 MB buffer zeroed) before each, ``grad_to_none`` as the tutorial's benchmark passes it.  The parent
interleaves: for each round and each case it asks one server for one round (a fixed number of repetitions,
the same for both, the median of which is the round's figure), then the other, alternating which goes
first; a case's time is the median of its rounds.  Compile caches start empty: each server's setup calls
every case once (compiling, and autotuning where the tutorial autotunes) before any round.

``--tune pytest`` (default) sets ``PYTEST_VERSION`` for tutorial 06, as the tutorial's own test does, so its
autotuner has the one config the tutorial tests with (both sides then time the same config); ``--tune full``
keeps the tutorial's whole config list (36 configs per key: minutes of compiling on each side).  Tutorial 03
always autotunes over its own list; each side keeps its own pick (printed).

``--smoke``: the same plumbing on the CPU at tiny sizes: where real Triton cannot be imported (this project's
CPU machines) both servers run the drop-in, which tests the runner, not the ratio.  Without DIR it runs on
the stand-in for tutorial 01 that ``triton_tutorials.py --smoke`` uses (its check and benchmark sections
must not run: the benchmark raises).
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.abspath(__file__)

FILES = {"01": "01-vector-add.py", "02": "02-fused-softmax.py", "03": "03-matrix-multiplication.py",
         "04": "04-low-memory-dropout.py", "05": "05-layer-norm.py", "06": "06-fused-attention.py"}


# ---- the server side: load a tutorial's definitions, build the timed cases ---------------------------------------

def _is_main_guard(node) -> bool:
    return isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)


def definitions(src: str) -> ast.Module:
    """The tutorial's definitions: imports, functions and classes wherever they are (not its
    ``@perf_report`` benchmark functions); other statements (assignments, ``if``/``try``/``for`` blocks) only
    before the first module-level call statement (the module docstring aside); never an
    ``if __name__ == "__main__"`` block."""
    tree = ast.parse(src)
    body, before_checks = [], True
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Expr, ast.Assert)):
            before_checks = False
            continue
        if isinstance(node, ast.FunctionDef) and any("perf_report" in ast.unparse(d) for d in node.decorator_list):
            continue  # the tutorial's own benchmark function (its configs come after its checks)
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            body.append(node)
        elif before_checks and not _is_main_guard(node):
            body.append(node)
    tree.body = body
    return tree


def load(dir_: str, key: str) -> types.ModuleType:
    path = os.path.join(dir_, FILES[key])
    name = f"tutorial_{key}"
    mod = types.ModuleType(name)
    mod.__file__ = path
    sys.modules[name] = mod
    code = compile(definitions(open(path, encoding="utf-8").read()), path, "exec")  # real lines: inspect works
    exec(code, mod.__dict__)
    return mod


def cases(dir_: str, only: list[str] | None, smoke: bool, device) -> list[dict]:
    """[{id, tutorial, label, make}] where make() -> (fn, grad_to_none); the same list on both sides."""
    import torch
    out = []

    def add(key, label, make):
        if only is None or key in only:
            out.append({"id": f"{key}:{label}", "tutorial": key, "label": label, "make": make})

    mods: dict = {}

    def mod(key):
        if key not in mods:
            mods[key] = load(dir_, key)
        return mods[key]

    # 01: the benchmark's fp32 vectors
    for size in ([4096] if smoke else [2 ** 16, 2 ** 22, 2 ** 26]):
        def make(size=size):
            x = torch.rand(size, device=device, dtype=torch.float32)
            y = torch.rand(size, device=device, dtype=torch.float32)
            return (lambda: mod("01").add(x, y)), None
        add("01", f"add n=2^{int(math.log2(size))}", make)
    # 02: M=4096 rows of fp32, N columns
    for m, n in ([(16, 128)] if smoke else [(4096, 512), (4096, 2048), (4096, 8192)]):
        def make(m=m, n=n):
            x = torch.randn(m, n, device=device, dtype=torch.float32)
            return (lambda: mod("02").softmax(x)), None
        add("02", f"softmax {m}x{n}", make)
    # 03: square fp16, and fp8 e5m2 with b transposed as the benchmark makes it
    for s in ([64] if smoke else [1024, 4096, 8192]):
        for fp8 in (False, True):
            def make(s=s, fp8=fp8):
                a = torch.randn((s, s), device=device, dtype=torch.float16)
                b = torch.randn((s, s), device=device, dtype=torch.float16)
                if fp8:
                    a = a.to(torch.float8_e5m2)
                    b = b.T.to(torch.float8_e5m2)
                return (lambda: mod("03").matmul(a, b)), None
            add("03", f"matmul {'fp8' if fp8 else 'fp16'} {s}^3", make)
    # 04 (no benchmark in the tutorial): fp32 vectors, p = 0.5
    for size in ([4096] if smoke else [2 ** 20, 2 ** 24]):
        def make_d(size=size):
            x = torch.randn(size, device=device)
            keep = (torch.rand(size, device=device) > 0.5).to(torch.int32)
            return (lambda: mod("04").dropout(x, x_keep=keep, p=0.5)), None

        def make_s(size=size):
            x = torch.randn(size, device=device)
            return (lambda: mod("04").seeded_dropout(x, p=0.5, seed=123)), None
        add("04", f"dropout n=2^{int(math.log2(size))}", make_d)
        add("04", f"seeded dropout n=2^{int(math.log2(size))}", make_s)
    # 05: bench_layer_norm's data, M=4096 fp16, forward and backward
    for m, n in ([(16, 256)] if smoke else [(4096, 1024), (4096, 4096), (4096, 8192)]):
        for mode in ("fwd", "bwd"):
            def make(m=m, n=n, mode=mode):
                w_shape = (n,)
                weight = torch.rand(w_shape, dtype=torch.float16, device=device, requires_grad=True)
                bias = torch.rand(w_shape, dtype=torch.float16, device=device, requires_grad=True)
                x = -2.3 + 0.5 * torch.randn((m, n), dtype=torch.float16, device=device)
                dy = .1 * torch.randn_like(x)
                x.requires_grad_(True)
                fwd = lambda: mod("05").layer_norm(x, w_shape, weight, bias, 1e-5)
                if mode == "fwd":
                    return fwd, None
                y = fwd()
                return (lambda: y.backward(dy, retain_graph=True)), [x]
            add("05", f"layer norm {mode} {m}x{n}", make)
    # 06: bench_flash_attention's data (BATCH 4, H 32), fwd fp16 / fp8, bwd fp16
    att = [(1, 2, 128, 64, False, "fwd", "fp16"), (1, 2, 128, 64, True, "bwd", "fp16"),
           (1, 2, 128, 64, False, "fwd", "fp8")] if smoke else \
        [(4, 32, n, d, causal, mode, prec) for d in (64, 128) for n in (1024, 4096)
         for causal, mode, prec in ((False, "fwd", "fp16"), (True, "fwd", "fp16"), (False, "fwd", "fp8"),
                                    (False, "bwd", "fp16"), (True, "bwd", "fp16"))
         if n == 4096 or (not causal and prec == "fp16")]
    for z, h, n, d, causal, mode, prec in att:
        def make(z=z, h=h, n=n, d=d, causal=causal, mode=mode, prec=prec):
            q, k, v = (torch.randn((z, h, n, d), dtype=torch.float16, device=device, requires_grad=True)
                       for _ in range(3))
            if prec == "fp8":
                q, k = q.to(torch.float8_e5m2), k.to(torch.float8_e5m2)
                v = v.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)
            fn = lambda: mod("06").attention(q, k, v, causal, 1.3, False)
            if mode == "bwd":
                o = fn()
                do = torch.randn_like(o)
                return (lambda: o.backward(do, retain_graph=True)), None
            return fn, None
        add("06", f"attention {mode} {prec} Z{z} H{h} N{n} d{d}{' causal' if causal else ''}", make)
    return out


class Timer:
    """One round: ``reps`` calls, each after an L2 flush, timed by CUDA events (perf_counter on the CPU)."""

    def __init__(self, device):
        import torch
        self.torch = torch
        self.cuda = device.type == "cuda"
        self.cache = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device=device) if self.cuda else None

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def round(self, fn, grads, reps: int) -> float:
        torch = self.torch
        fn()  # one warm call, untimed
        self.sync()
        times = []
        if self.cuda:
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
            for s, e in ev:
                for g in grads or ():
                    g.grad = None
                self.cache.zero_()
                s.record()
                fn()
                e.record()
            torch.cuda.synchronize()
            times = [s.elapsed_time(e) for s, e in ev]
        else:
            for _ in range(reps):
                for g in grads or ():
                    g.grad = None
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)


def _reply(obj):
    sys.__stdout__.write("@@" + json.dumps(obj) + "\n")
    sys.__stdout__.flush()


def serve(impl: str, dir_: str, only, smoke: bool, tune: str) -> int:
    """Answer the parent's requests, one JSON line each: setup, time, quit.  What the tutorials print goes to
    stderr (stdout carries the replies)."""
    sys.stdout = sys.stderr
    import torch
    import triton
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if tune == "pytest":
        os.environ["PYTEST_VERSION"] = "timings"
    sys.path.insert(0, dir_)
    timer = Timer(device)
    built: dict = {}
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "setup":
            res = []
            group = [req["tutorial"]] if req.get("tutorial") else only
            for c in cases(dir_, group, smoke, device):
                t0 = time.time()
                r = {"id": c["id"], "tutorial": c["tutorial"], "label": c["label"]}
                try:
                    fn, grads = c["make"]()
                    fn()  # compiles (and autotunes) here
                    timer.sync()
                    t1 = time.perf_counter()
                    fn()
                    timer.sync()
                    r["estimate_ms"] = (time.perf_counter() - t1) * 1e3
                    built[c["id"]] = (fn, grads)
                except Exception as e:  # a case that fails on one side is reported, not fatal
                    r["error"] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"
                    traceback.print_exc()
                r["setup_s"] = round(time.time() - t0, 2)
                res.append(r)
            _reply({"impl": impl, "triton": getattr(triton, "__version__", "?"),
                    "triton_file": getattr(triton, "__file__", "?"), "device": str(device),
                    "gpu": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "cases": res,
                    "picks": _autotune_picks()})
        elif req["cmd"] == "time":
            fn, grads = built[req["id"]]
            try:
                _reply({"ms": timer.round(fn, grads, req["reps"])})
            except Exception as e:
                _reply({"error": f"{type(e).__name__}: {str(e)[:200]}"})
        elif req["cmd"] == "quit":
            _reply({"bye": True})
            return 0
    return 0


def _autotune_picks() -> dict:
    """The config each autotuned tutorial kernel settled on (03's matmul_kernel, 06's _attn_fwd)."""
    out = {}
    for key, names in (("03", ("matmul_kernel",)), ("06", ("_attn_fwd",))):
        m = sys.modules.get(f"tutorial_{key}")
        for n in names:
            k = getattr(m, n, None) if m else None
            cache = getattr(k, "cache", None)
            if isinstance(cache, dict) and cache:
                out[f"{key}:{n}"] = sorted({str(v) for v in cache.values()})[:6]
    return out


# ---- the parent: start both servers, interleave rounds, print the table ------------------------------------------

class Server:
    def __init__(self, impl: str, cmd: list[str], log: str):
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env["PYTHONUNBUFFERED"] = "1"
        self.impl = impl
        self.log = open(log, "w", encoding="utf-8")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                  env=env, cwd=ROOT)

    def send(self, obj):
        self.p.stdin.write(json.dumps(obj) + "\n")
        self.p.stdin.flush()

    def recv(self, timeout: float):
        box: list = []

        def read():
            for line in self.p.stdout:
                if line.startswith("@@"):
                    box.append(json.loads(line[2:]))
                    return
        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        if not box:
            raise RuntimeError(f"the {self.impl} server gave no answer in {timeout:.0f} s (see its log "
                               f"{self.log.name}; exit code {self.p.poll()})")
        return box[0]

    def close(self):
        try:
            self.send({"cmd": "quit"})
            self.recv(10)
        except Exception:
            pass
        if self.p.poll() is None:
            self.p.kill()
        self.log.close()


def real_triton_importable() -> bool:
    return subprocess.run([sys.executable, "-c", "import triton, triton.language"], capture_output=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).returncode == 0


def run(a) -> dict:
    dir_ = os.path.abspath(a.dir)
    only = a.only.split(",") if a.only else None
    common = [HERE, "--serve", dir_, "--tune", a.tune] + (["--only", a.only] if a.only else []) + \
        (["--smoke"] if a.smoke else [])
    logdir = a.logdir or os.path.join(os.environ.get("TMPDIR", "/tmp"), "tutorial_timings")
    os.makedirs(logdir, exist_ok=True)
    dropin = [sys.executable, "-m", "newt.dropin"] + (["--capability", "9.0"] if a.smoke else [])
    triton_ok = real_triton_importable()
    if not triton_ok and not a.smoke:
        raise SystemExit("triton_tutorial_timings: real Triton is not importable here (use --smoke on a CPU)")
    tcmd = ([sys.executable] if triton_ok else dropin) + common + ["--impl", "triton" if triton_ok else
                                                                    "newt-as-triton"]
    ncmd = dropin + common + ["--impl", "newt"]
    t_start = time.time()
    stopped_keys: list = []
    servers = {"triton": Server("triton", tcmd, os.path.join(logdir, "triton_server.log")),
               "newt": Server("newt", ncmd, os.path.join(logdir, "newt_server.log"))}
    try:
        # tutorial by tutorial, both servers at once (compiling is CPU-bound, separate processes), the cheap
        # ones first; the progress goes to the log as it comes
        setup: dict = {k: {"cases": [], "picks": {}, "triton": "?", "gpu": "?"} for k in servers}
        keys = [k for k in ("01", "02", "04", "05", "03", "06") if only is None or k in only]
        usable = True  # False once a server died or is still busy past its deadline: no timing rounds then
        for key in keys:
            t0 = time.time()
            for s in servers.values():
                s.send({"cmd": "setup", "tutorial": key})
            left = max(10.0, a.setup_timeout - (time.time() - t_start))
            got = {}
            for k, s in servers.items():
                try:
                    got[k] = s.recv(left if not got else max(10.0, a.setup_timeout - (time.time() - t_start)))
                except RuntimeError as e:
                    print(f"setup {key}: {e}", flush=True)
            if len(got) < len(servers):
                # the tutorial that broke a server is left out; a late answer is waited for once more, so the
                # servers can still time what was set up
                for k, s in servers.items():
                    if k not in got:
                        try:
                            if s.p.poll() is not None:
                                raise RuntimeError("exited")
                            s.recv(a.round_timeout)
                        except RuntimeError:
                            usable = False
                stopped = f"tutorial {key} not set up on {sorted(set(servers) - set(got))}"
                print(stopped, flush=True)
                stopped_keys.append(key)
                if not usable:
                    break
                continue
            for k, g in got.items():
                cases_, picks = setup[k]["cases"], setup[k]["picks"]
                setup[k] = dict(g, cases=cases_ + g["cases"], picks={**picks, **(g.get("picks") or {})})
            errs = [f"{k} {c['label']}: {c['error']}" for k, g in got.items() for c in g["cases"] if "error" in c]
            print(f"setup {key}: {time.time() - t0:.0f} s, {len(got['newt']['cases'])} cases"
                  + (f"; errors: {errs}" if errs else ""), flush=True)
        t_setup = time.time() - t_start
        print(f"setup: {t_setup:.0f} s; triton {setup['triton']['triton']} ({setup['triton']['gpu']}), "
              f"newt's drop-in ({setup['newt']['gpu']})", flush=True)
        for k in servers:
            if setup[k].get("picks"):
                print(f"  {k} autotune picks: {setup[k]['picks']}")
        by = {k: {c["id"]: c for c in setup[k]["cases"]} for k in servers}
        ids = [c["id"] for c in setup["triton"]["cases"]]
        ok = [i for i in ids if "error" not in by["triton"][i] and "error" not in by["newt"].get(i, {"error": 1})]
        reps = {}
        for i in ok:
            est = max(min(by["triton"][i]["estimate_ms"], by["newt"][i]["estimate_ms"]), 1e-3)
            reps[i] = max(3, min(a.max_reps, int(a.rep_ms / est)))
        times: dict = {i: {"triton": [], "newt": []} for i in ok}
        rounds_done = 0
        for r in range(a.rounds if usable else 0):
            if r > 0 and time.time() - t_start > a.budget:
                print(f"budget: stopped after {r} rounds")
                break
            for j, i in enumerate(ok):
                order = ("triton", "newt") if (r + j) % 2 == 0 else ("newt", "triton")
                for k in order:
                    servers[k].send({"cmd": "time", "id": i, "reps": reps[i]})
                    try:
                        ans = servers[k].recv(a.round_timeout)
                    except RuntimeError as e:  # a server gone: the rounds so far are the result
                        print(f"round {r}: {e}", flush=True)
                        usable = False
                        break
                    if "ms" in ans:
                        times[i][k].append(ans["ms"])
                if not usable:
                    break
            if not usable:
                break
            rounds_done = r + 1
    finally:
        for s in servers.values():
            s.close()
    rows = []
    for i in ids:
        t, n = by["triton"][i], by["newt"].get(i, {})
        row = {"id": i, "tutorial": t["tutorial"], "case": t["label"], "setup_s": {"triton": t.get("setup_s"),
                                                                                   "newt": n.get("setup_s")}}
        if "error" in t or "error" in n:
            row["error"] = {"triton": t.get("error"), "newt": n.get("error")}
        elif times[i]["triton"] and times[i]["newt"]:
            tm, nm = statistics.median(times[i]["triton"]), statistics.median(times[i]["newt"])
            row.update(triton_ms=tm, newt_ms=nm, ratio=nm / tm, reps=reps[i], rounds=len(times[i]["newt"]))
        rows.append(row)
    return {"rows": rows, "rounds": rounds_done, "setup_s": round(t_setup, 1), "not_set_up": stopped_keys,
            "seconds": round(time.time() - t_start, 1), "triton": setup["triton"]["triton"],
            "triton_impl": "real" if triton_ok else "newt's drop-in (smoke: real Triton not importable)",
            "gpu": setup["newt"]["gpu"], "picks": {k: setup[k].get("picks") for k in setup}}


def table(res: dict) -> str:
    lines = [f"Device: {res['gpu']}; Triton {res['triton']} ({res['triton_impl']}); {res['rounds']} interleaved "
             f"rounds; setup (compile + autotune, both sides at once) {res['setup_s']} s; total {res['seconds']} s.",
             "", "| tutorial | case | Triton ms | newt ms | newt / Triton |", "|---|---|---:|---:|---:|"]
    if res.get("not_set_up"):
        lines.insert(1, f"Not set up (a server died or ran past the setup deadline): tutorials {res['not_set_up']}.")
    ratios = []
    for r in res["rows"]:
        if "ratio" in r:
            ratios.append(r["ratio"])
            flag = "" if r["ratio"] <= 1.05 else " (over 5 %)"
            lines.append(f"| {r['tutorial']} | {r['case']} | {r['triton_ms']:.4f} | {r['newt_ms']:.4f} | "
                         f"{r['ratio']:.3f}{flag} |")
        else:
            err = r.get("error") or {}
            lines.append(f"| {r['tutorial']} | {r['case']} | {err.get('triton') or 'ok'} | "
                         f"{err.get('newt') or 'ok'} | not timed |")
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        within = sum(1 for x in ratios if x <= 1.05)
        lines += ["", f"{len(ratios)} cases timed; geometric mean newt/Triton {geo:.3f}; {within} of {len(ratios)} "
                      f"within 5 % (ratio <= 1.05)."]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", help="folder with Triton's tutorial files")
    ap.add_argument("--only", help="comma-separated tutorial numbers (01,03)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rep-ms", type=float, default=30.0, help="target milliseconds of one case's round")
    ap.add_argument("--max-reps", type=int, default=200)
    ap.add_argument("--tune", choices=("pytest", "full"), default="pytest")
    ap.add_argument("--budget", type=float, default=210, help="no new round starts after this many seconds")
    ap.add_argument("--setup-timeout", type=float, default=200, help="seconds for compiling every case, all tutorials")
    ap.add_argument("--round-timeout", type=float, default=60)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--md", help="write the markdown table here")
    ap.add_argument("--logdir", help="the servers' logs (default $TMPDIR/tutorial_timings)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU; the runner, not the ratio")
    ap.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--impl", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    only = a.only.split(",") if a.only else None
    if a.serve:
        return serve(a.impl, a.serve, only, a.smoke, a.tune)
    if a.smoke:
        a.rounds, a.rep_ms, a.max_reps = min(a.rounds, 2), 1.0, 3
    if a.smoke and not a.dir:  # no tutorial files: the stand-in for 01 that triton_tutorials.py's smoke runs
        import tempfile
        sys.path.insert(0, os.path.dirname(HERE))
        from triton_tutorials import _SMOKE_TUTORIAL
        with tempfile.TemporaryDirectory(prefix="tut_timing_smoke_") as d:
            with open(os.path.join(d, FILES["01"]), "w", encoding="utf-8") as f:
                f.write(_SMOKE_TUTORIAL)
            a.dir, a.only = d, "01"
            return report(a, run(a))
    if not a.dir or not os.path.isdir(a.dir):
        print(f"triton_tutorial_timings: no tutorial folder at {a.dir!r}; nothing measured")
        return 0
    return report(a, run(a))


def report(a, res: dict) -> int:
    md = table(res)
    print(md)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
    if a.md:
        with open(a.md, "w", encoding="utf-8") as f:
            f.write(md + "\n")
    timed = [r for r in res["rows"] if "ratio" in r]
    if a.smoke:
        bad = [r for r in res["rows"] if "ratio" not in r]
        print("smoke:", "ok" if not bad else f"{len(bad)} cases not timed: {[r['case'] for r in bad]}")
        return 0 if not bad else 1
    return 0 if timed else 1


if __name__ == "__main__":
    sys.exit(main())
