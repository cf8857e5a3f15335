"""Helion's own examples, unmodified, through newt's drop-in mode (``import helion`` is deuteron), on the CPU.

    python benchmarks/helion_examples.py MIRROR [--only add,softmax] [--json out.json] [--timeout 240]
                                         [--device cpu|cuda] [--impl deuteron|helion --helion-site SITE]
                                         [--compile sm_90a]
    python benchmarks/helion_examples.py --compare deuteron.json helion.json [--md table.md]

``--device cuda`` (issue 25) compiles and runs every kernel on the GPU, each at its default config (deuteron's
``DEUTERON_AUTOTUNE_EFFORT=none``, Helion's ``HELION_AUTOTUNE_EFFORT=none``: no tuning, so the whole set takes
minutes), with the same drivers, sizes and tolerances as on the CPU (drivers that name ``device='cpu'`` take
``DEVICE``).  ``--impl helion`` runs the same files under the real Helion package (installed with ``pip
--target SITE``; ``--helion-site SITE`` puts it first on ``sys.path``; no drop-in), recorded by the same harness,
so ``--compare`` can say which kernels Helion runs correctly and whether deuteron runs each of them
(``benchmarks/run_device.sh helionex``).  On the GPU the files run in supervised child processes (``supervise``):
a crash, a lost GPU context or a hang costs the file it happened in, not the rest.  ``--compile sm_90a``
(deuteron on the CPU, no GPU) also compiles each call's generated kernels for that target with NVRTC: a kernel
counts only if they compile too.

MIRROR is a local copy of github.com/pytorch/helion: a checkout (a folder with ``examples/``) or a bare git
directory (read with ``git show HEAD:examples/<file>``). Nothing is fetched and none of Helion's code is kept.
This script turns the drop-in mode on (``newt.dropin.install()``, what ``python -m newt.dropin`` does) and
imports each example file as it is (from the checkout, or its text written unchanged to a temporary folder):
``import helion``, ``import helion.language as hl``, ``helion.kernel(...)``, ``hl.*``,
``from helion._testing import run_example, DEVICE`` all come from deuteron's drop-in module
(``deuteron/dropin.py``). Nothing is renamed.

What this script adds is instrumentation only: it records which kernels each check calls (a wrapper on
``deuteron.Kernel.__call__``) and replaces ``helion._testing.run_example`` by a recording version that
compares every kernel with the first baseline that runs at the example's own tolerances (Helion's defaults
rtol 1e-2, atol 1e-1), forward and, with ``bwd=True``, backward, and times nothing; the timers the examples
call (``helion._testing.do_bench``, ``helion.autotuner.benchmarking.do_bench_generic``,
``triton.testing.do_bench``) run the function once.

Sizes: each example's ``check(...)``/``test(...)`` is called with small sizes (``DRIVERS``) since the CPU
interpreter runs every program; where an example builds its inputs inline in ``main()``, the driver runs the
text of ``main()`` with the size literals replaced (``SIZES``) in the example module's namespace (the module
itself, its kernels and references, is imported unmodified). Kernels, references and tolerances are the
example's own.

Counted: each ``@helion.kernel`` function an example's checks call. It runs correctly when every check that
called it passed; a check that raises blames the kernel that raised (or every kernel it called, for a wrong
result). Kernels no check calls (disabled in the example) are listed apart. Every failure gets a cause: the
error class, its D-code and the first line of its message; the summary groups them by frequency.
"""

from __future__ import annotations

import argparse
import ast
import collections
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback

# example file -> the statements its check runs, in the module's namespace (small sizes; see the docstring)
DRIVERS: dict[str, list[str]] = {
    "add.py": ["check(100, 200)"],
    "attention.py": ["test(1, 2, 128, 64, HALF_DTYPE, device=DEVICE)"],
    "batch_softmax.py": ["check(4, 32, 100)"],
    "bf16xint16_gemm.py": ["check(64, 64, 64)"],
    # the kernel's own config has block_sizes=[256, 128] and asserts M % block_m == 0: n_ctx 256
    "blackwell_attention.py": ["test(1, 2, 256, 64, torch.bfloat16, device='cpu')"],
    "bmm.py": ["check(2, 64, 48, 80)"],
    "broadcast_matmul.py": ["check(2, 64, 48, 80)"],
    "concatenate.py": ["main()"],
    "cross_entropy.py": ["main()"],
    "embedding.py": ["main()"],
    "epilogue_subtiling.py": ["check(64, 64, 64)"],
    "exp.py": ["check(10000)"],
    "flex_attention.py": ["test(1, 2, 128, 64, HALF_DTYPE, device='cpu')",
                          "test(1, 2, 128, 64, HALF_DTYPE, lambda score, *_: torch.tanh(score), device='cpu')"],
    "fp8_attention.py": ["check(1, 2, 128, 64)"],
    "fp8_gemm.py": ["check(64, 64, 64, b_col_major=True)", "check(64, 64, 64, b_col_major=False)"],
    "fp8_matmul.py": ["check(64, 128, 128)"],
    "fused_linear_jsd.py": ["check(32, 64, 500)"],
    "gather_gemv.py": ["check(8, 128, 2)"],
    "gdn_fwd_h.py": ["test(1, 2, 256, 64, 64, 64)"],
    "geglu.py": ["check_geglu_kernel((2, 16, 64))", "check_geglu_mlp(2, 16, 64, 96)"],
    "grouped_gemm.py": ["main()"],
    "grpo_loss.py": ["test_grpo_loss(B=2, L=16, V=500)"],
    "int4_gemm.py": ["check(16, 128, 64)"],
    "jagged_dense_add.py": ["main()"],
    "jagged_dense_bmm.py": ["main()"],
    "jagged_hstu_attn.py": ["test(batch_size=4, max_seq_len=64, heads=2, head_dim=32, dtype=torch.bfloat16, "
                            "device=DEVICE)"],
    "jagged_hstu_attn_2.py": ["main()"],
    "jagged_layer_norm.py": ["main()"],
    "jagged_mean.py": ["main()"],
    "jagged_softmax.py": ["main()"],
    "jagged_sum.py": ["main()"],
    "jsd.py": ["check_jsd_kernel(2, 8, 1000, 0.5, -100, False)", "check_jsd_kernel(2, 8, 1000, 0.5, -100, True)"],
    "kl_div.py": ["check_kl_div_kernel(2, 8, 1000, 'batchmean', False, 1e-10)"],
    "layer_norm.py": ["main()"],
    "long_sum.py": ["check(4, 13000)"],
    "low_mem_dropout.py": ["check(0.25, 8192)"],
    "mamba2_chunk_scan.py": ["main()"],
    "mamba2_chunk_state.py": ["main()"],
    "matmul.py": ["check(128, 64, 96)"],
    "matmul_layernorm.py": ["check(32, 64, 200)"],
    "matmul_split_k.py": ["check(64, 1024, 64)"],
    "moe_matmul_ogs.py": ["check(100, 64, 32, 4)"],
    "nvfp4_gemm.py": ["check_w4a16(64, 128, 64)", "check_w4a4(64, 128, 64)", "check_scaled(128, 256, 256)"],
    "nvfp4_gemv.py": ["check_bf16in(64, 128, 'triton')", "check_fp4in(64, 128, 'triton')"],
    "rms_norm.py": ["check(64, 200)"],
    "rope.py": ["main()"],
    "se_block.py": ["check(64, 64)"],
    "segment_reduction.py": ["main()"],
    "softmax.py": ["check(64, 200)"],
    "split_k_barrier.py": ["check(16, 1024, 16)"],
    "squeeze_and_excitation_net.py": ["check(64, 64, 64)"],
    "sum.py": ["check(64, 200)"],
    "swiglu.py": ["check_swiglu_kernel((2, 16, 64))", "check_swiglu_mlp(2, 16, 64, 96)"],
    "welford.py": ["check(64, 200)"],
    "xsa.py": ["check(1, 2, 64, 32, HALF_DTYPE)", "check_near_zero_v(1, 2, 64, 32)"],
}

# example file -> (text, replacement) applied to its main(): the size literals of inputs built inline
SIZES: dict[str, list[tuple[str, str]]] = {
    "concatenate.py": [("[1500, 400]", "[150, 40]"), ("[1500, 600]", "[150, 60]")],
    "cross_entropy.py": [("8, 2048, 131072", "2, 8, 1000")],
    "jagged_dense_add.py": [("rows, cols = 256, 5000", "rows, cols = 32, 300")],
    "jagged_hstu_attn_2.py": [("num_sequences = 16", "num_sequences = 3"), ("max_seq_len = 512", "max_seq_len = 48"),
                              ("heads = 32", "heads = 2"), ("head_dim = 128", "head_dim = 32")],
    "jagged_layer_norm.py": [("range(5, 16, 3)", "range(5, 6, 3)"), ("range(5, 10, 3)", "range(5, 6, 3)"),
                             ("max_seqlen_list = [128]", "max_seqlen_list = [16]")],
    "jagged_softmax.py": [("num_rows, max_cols = 512, 64", "num_rows, max_cols = 32, 16"),
                          ("M = 128", "M = 24")],
    "layer_norm.py": [("batch_size = 4096", "batch_size = 64"), ("dim = 10240", "dim = 200")],
    "mamba2_chunk_scan.py": [("8, 80, 1, 4096, 256, 64, 128", "1, 2, 1, 128, 64, 16, 16")],
    "mamba2_chunk_state.py": [("8, 80, 1, 4096, 256, 64, 128", "1, 2, 1, 128, 64, 16, 16")],
}

# AOT tooling demos (build/deploy workflow, no correctness check of a kernel)
SKIPPED = {"__init__.py": "package marker", "aot_compile_example.py": "AOT tooling demo",
           "aot_example.py": "AOT tooling demo"}


# ---- reading and renaming -------------------------------------------------------------------------------------

def list_examples(mirror: str) -> dict[str, str]:
    """file name -> source text of every examples/*.py in the mirror."""
    out: dict[str, str] = {}
    if os.path.isdir(os.path.join(mirror, "examples")):  # (a checkout: run_file imports the files in place)
        folder = os.path.join(mirror, "examples")
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    out[name] = f.read()
        return out
    names = subprocess.run(["git", f"--git-dir={mirror}", "ls-tree", "--name-only", "HEAD", "examples/"],
                           capture_output=True, text=True, check=True).stdout.split()
    for path in names:
        if path.endswith(".py"):
            out[os.path.basename(path)] = subprocess.run(
                ["git", f"--git-dir={mirror}", "show", f"HEAD:{path}"], capture_output=True, text=True,
                check=True).stdout
    return out


# ---- the instrumentation: a recording run_example and one-shot timers ------------------------------------

class Recorder:
    def __init__(self):
        self.checks: list[dict] = []       # {kernels: [...], ok, cause, blamed}
        self.called: list[str] = []        # kernels called since the last mark
        self.raised_in: str | None = None  # the innermost kernel an exception left

    def mark(self):
        self.called = []
        self.raised_in = None


REC = Recorder()


def _as_tensors(x):
    from deuteron.dropin import _as_tensors as tensors  # the drop-in's run_example reads results the same way
    return tensors(x)


def _clone(args):
    from deuteron.dropin import _clone as clone
    return clone(args)


def run_example(kernel_fn, baseline_fn, args, kernel_name="helion", baseline_name="torch", rtol=1e-2, atol=1e-1,
                max_mismatch_pct=None, max_mismatched_abs_diff=None, bwd=False, **_ignored):
    kernels = kernel_fn if isinstance(kernel_fn, dict) else {kernel_name: kernel_fn}
    baselines = baseline_fn if isinstance(baseline_fn, dict) else {baseline_name: baseline_fn}
    expected = None
    for base in baselines.values():  # the first baseline that runs here (a Triton one cannot on the CPU)
        try:
            expected = _as_tensors(base(*args))
            break
        except Exception:
            if base is list(baselines.values())[-1]:
                raise
    for name, fn in kernels.items():
        REC.mark()
        entry = {"check": name, "ok": False, "cause": None, "kernels": []}
        try:
            got = _as_tensors(fn(*_clone(args)))
            if len(got) != len(expected):
                raise AssertionError(f"{len(got)} outputs, the reference has {len(expected)}")
            for r, e in zip(got, expected):
                _compare(r, e, rtol, atol, max_mismatch_pct)
            if bwd:
                _check_backward(fn, base, args, rtol, atol)
            entry["ok"] = True
        except Exception as exc:  # every failure is recorded with its cause
            entry["cause"] = cause_of(exc)
            entry["trace"] = traceback.format_exc(limit=-6)
            entry["blamed"] = [REC.raised_in] if REC.raised_in else None
        entry["kernels"] = sorted(set(REC.called))
        REC.checks.append(entry)
    return {}


def _compare(r, e, rtol, atol, max_mismatch_pct):
    import torch
    r, e = r.detach().to(torch.float32), e.detach().to(torch.float32)
    if max_mismatch_pct is not None and r.shape == e.shape:
        bad = ~torch.isclose(r, e, rtol=rtol, atol=atol, equal_nan=True)
        if bad.float().mean().item() <= max_mismatch_pct:
            return
    torch.testing.assert_close(r, e, rtol=rtol, atol=atol)


def _check_backward(fn, base, args, rtol, atol):
    """The same backward check the drop-in's ``run_example(bwd=True)`` makes (one definition, in deuteron)."""
    from deuteron.dropin import _check_backward as check
    check(fn, base, args, rtol, atol)


def cause_of(exc: BaseException) -> str:
    code = ""
    diags = getattr(exc, "diagnostics", None)
    if diags:
        d = diags[0]
        code = f"{d.code} "
        msg = d.message
    else:
        msg = str(exc)
    msg = (msg.strip().splitlines() or [""])[0]
    msg = re.sub(r"\d+", "N", msg)[:110]
    return f"{type(exc).__name__}: {code}{msg}"


def _once(fn, *a, **k):
    """A timer that runs ``fn`` once: the CPU time in ms (never 0: examples divide by it for TFLOPS)."""
    t0 = time.perf_counter()
    fn()
    return max((time.perf_counter() - t0) * 1e3, 1e-6)


def instrument(impl: str = "deuteron", device: str = "cpu"):
    """Turn the drop-in mode on (``impl`` deuteron; with ``helion`` the real package, first on ``sys.path``,
    is used as it is) and put the recording ``run_example`` and the one-shot timers in place of the served
    ones (before any example imports them).  ``device``: what ``helion._testing.DEVICE`` says (the examples
    allocate their inputs there)."""
    if impl == "deuteron":
        import deuteron.frontend  # noqa: F401  (registers the helion alias: from a source tree no entry point does)
        import newt.dropin
        newt.dropin.install()
    import helion._testing
    import helion.autotuner.benchmarking
    import torch
    helion._testing.run_example = run_example
    helion._testing.do_bench = _once
    helion._testing.DEVICE = torch.device(device)
    helion.autotuner.benchmarking.do_bench = _once
    helion.autotuner.benchmarking.do_bench_generic = _once
    try:
        import triton.testing
        triton.testing.do_bench = _once
    except ImportError:  # (real Helion on a machine without Triton: nothing to replace)
        pass


def _kernel_class(impl: str):
    if impl == "helion":
        from helion.runtime.kernel import Kernel
        return Kernel
    import deuteron
    return deuteron.Kernel


class CompileCheckError(Exception):
    """``--compile TARGET``: a kernel that ran on the interpreter whose generated code does not compile."""


#: ``--compile``: the target, and the generated kernels compiled so far (source, constexprs, warps, stages)
COMPILE: dict = {"target": None, "done": set(), "seconds": 0.0, "kernels": 0}


def compile_check(kernel, a, k):
    """The generated kernels of this call (the config it ran with), compiled for ``COMPILE["target"]`` with
    NVRTC, no GPU; raises CompileCheckError naming the failure."""
    from deuteron.compile import compile_binary
    from deuteron.hostrun import _HostRun, _runtime_args
    b = kernel._bind(a, k)
    e = kernel._entry(b)
    run = _HostRun(e, e.config or e.space.default(), "source")
    run.execute(b)
    for gen, mod, prog, loc in run.built:
        key = (gen.source, tuple(sorted((n, repr(v)) for n, v in gen.constexprs.items())), gen.num_warps,
               gen.num_stages)
        if key in COMPILE["done"]:
            continue
        t0 = time.perf_counter()
        try:
            compile_binary(gen, mod, _runtime_args(gen, prog, loc, kernel.fn.__globals__), COMPILE["target"])
        except Exception as exc:
            lines = str(exc).strip().splitlines() or [""]
            why = next((ln.strip() for ln in lines[1:] if "error" in ln.lower()), lines[0])  # ptxas's own line
            raise CompileCheckError(f"{COMPILE['target']}: {type(exc).__name__}: {why}") from exc
        finally:
            COMPILE["seconds"] += time.perf_counter() - t0
        COMPILE["done"].add(key)
        COMPILE["kernels"] += 1


def watch_kernels(impl: str = "deuteron"):
    """Wrap the kernel class's ``__call__`` (deuteron's, or real Helion's) to record which kernels a check
    calls and which one raised; with ``--compile`` (deuteron) each call's generated code is also compiled."""
    cls = _kernel_class(impl)
    original = cls.__call__

    def call(self, *a, **k):
        name = getattr(self, "__name__", None) or getattr(getattr(self, "fn", None), "__name__", "?")
        REC.called.append(name)
        saved = (_clone(a), {n: _clone((v,))[0] for n, v in k.items()}) if COMPILE["target"] else None
        try:
            out = original(self, *a, **k)
            if saved is not None:
                compile_check(self, *saved)
            return out
        except BaseException:
            if REC.raised_in is None:
                REC.raised_in = name
            raise
    cls.__call__ = call


def kernel_names(src: str) -> list[str]:
    """The functions an example decorates with @helion.kernel (or assigns from helion.kernel(...))."""
    names = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                text = ast.unparse(d)
                if text.startswith(("helion.kernel", "helion.aot_kernel")):
                    names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            text = ast.unparse(node.value.func)
            if text.startswith("helion.kernel"):
                tgt = node.targets[0] if isinstance(node, ast.Assign) else node.target
                if isinstance(tgt, ast.Name):
                    names.append(tgt.id)
    return names


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout("the check ran past the time limit")


def _main_with_sizes(name: str, src: str) -> str | None:
    """The text of the example's ``main()`` with its inline size literals made small (``SIZES``), or None."""
    if name not in SIZES:
        return None
    node = next((n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "main"), None)
    if node is None:
        raise SystemExit(f"{name}: no main() (the example changed)")
    text = ast.get_source_segment(src, node)
    for old, new in SIZES[name]:
        if old not in text:
            raise SystemExit(f"{name}: size literal {old!r} not found in main() (the example changed)")
        text = text.replace(old, new)
    return text


def drivers_for(name: str, device: str) -> list[str]:
    """The check statements of example ``name``; on the GPU the drivers that name the CPU take ``DEVICE``."""
    stmts = DRIVERS.get(name, ["main()"])
    if device != "cpu":
        stmts = [st.replace("device='cpu'", "device=DEVICE") for st in stmts]
    return stmts


def run_file(name: str, src: str, path: str, tmp: str, timeout: int, device: str = "cpu") -> dict:
    """Import the example at ``path`` as it is and run its checks."""
    small_main = _main_with_sizes(name, src)
    declared = kernel_names(src)
    checks_before = len(REC.checks)
    file_errors = []
    t0 = time.time()
    mod = None
    try:
        spec = importlib.util.spec_from_file_location("helion_example_" + name[:-3], path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    except Exception as exc:
        file_errors.append({"stmt": "import", "cause": cause_of(exc), "trace": traceback.format_exc(limit=-4),
                            "kernels": []})
    if mod is not None:
        for i, stmt in enumerate(drivers_for(name, device)):
            # from a file of its own, so that a lambda the statement passes (a score modifier) has source to read
            drv = os.path.join(tmp, f"drv_{name[:-3]}_{i}.py")
            with open(drv, "w", encoding="utf-8") as f:
                f.write(stmt + "\n")
            ns = vars(mod)
            if small_main is not None and stmt == "main()":  # main() with small sizes, in the module's globals
                ns = dict(vars(mod))
                main_file = os.path.join(tmp, f"main_{name[:-3]}.py")
                with open(main_file, "w", encoding="utf-8") as f:
                    f.write(small_main + "\n")
                exec(compile(small_main + "\n", main_file, "exec"), ns)
            REC.mark()
            n_before = len(REC.checks)
            signal.signal(signal.SIGALRM, _alarm)
            signal.alarm(timeout)
            try:
                exec(compile(stmt + "\n", drv, "exec"), ns)
                if len(REC.checks) == n_before:   # a check with its own asserts (no run_example)
                    REC.checks.append({"check": stmt, "ok": True, "cause": None, "kernels": sorted(set(REC.called))})
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                file_errors.append({"stmt": stmt, "cause": cause_of(exc), "trace": traceback.format_exc(limit=-6),
                                    "kernels": sorted(set(REC.called)),
                                    "blamed": [REC.raised_in] if REC.raised_in else None})
            finally:
                signal.alarm(0)
    checks = REC.checks[checks_before:] + [dict(e, check=e["stmt"], ok=False) for e in file_errors]
    # per kernel: passes when every check that called it passed
    status: dict[str, dict] = {}
    for k in declared:
        status[k] = {"ok": None, "cause": None}
    for c in checks:
        called = c.get("kernels") or []
        blamed = c.get("blamed") or (called if called else None)
        if c["ok"]:
            for k in called:
                if k in status and status[k]["ok"] is None:
                    status[k]["ok"] = True
            continue
        targets = blamed if blamed else [k for k in declared if status[k]["ok"] is None] or declared
        for k in targets:
            if k in status:
                if status[k]["ok"] is not False:
                    status[k] = {"ok": False, "cause": c["cause"]}
        for k in called:
            if k in status and k not in targets and status[k]["ok"] is None:
                status[k]["ok"] = True
    return {"file": name, "seconds": round(time.time() - t0, 1), "kernels": status,
            "checks": [{k: v for k, v in c.items() if k != "trace"} for c in checks],
            "traces": [c.get("trace") for c in checks if not c["ok"]]}


# a two-kernel example in Helion's spelling (written for this script) for --smoke: one right, one wrong
_SMOKE_EXAMPLE = '''
import torch
import helion
from helion._testing import DEVICE, run_example
import helion.language as hl


@helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])
def double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2
    return out


@helion.kernel()
def off_by_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2 + 1
    return out


def check(n: int) -> None:
    x = torch.randn(n, device=DEVICE)
    run_example({"double": double, "off_by_one": off_by_one}, lambda x: x * 2, (x,))
'''


def smoke() -> int:
    """Port and run the built-in example through the whole harness: 1 of 2 kernels must come out right."""
    with tempfile.TemporaryDirectory(prefix="helion_smoke_") as mirror:
        os.makedirs(os.path.join(mirror, "examples"))
        with open(os.path.join(mirror, "examples", "smoke.py"), "w", encoding="utf-8") as f:
            f.write(_SMOKE_EXAMPLE)
        DRIVERS["smoke.py"] = ["check(100)"]
        out = os.path.join(mirror, "result.json")
        main([mirror, "--json", out])
        with open(out, encoding="utf-8") as f:
            r = json.load(f)
    ks = r["results"][0]["kernels"]
    ok = r["passed"] == 1 and r["counted"] == 2 and ks["double"]["ok"] and ks["off_by_one"]["ok"] is False \
        and "AssertionError" in ks["off_by_one"]["cause"]
    print("smoke:", "ok" if ok else f"unexpected {r['passed']}/{r['counted']} {ks}")
    return 0 if ok else 1


def compare(paths: list[str]) -> str:
    """A table from two ``--json`` results (one per ``--impl``): per kernel, whether each implementation ran
    it correctly, and the kernels Helion runs that deuteron does not."""
    runs = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
        runs[r.get("impl", "deuteron")] = r
    if set(runs) != {"deuteron", "helion"}:
        raise SystemExit(f"--compare needs one deuteron and one helion result, got {sorted(runs)}")
    status = {impl: {(x["file"], k): s for x in r["results"] for k, s in x["kernels"].items()}
              for impl, r in runs.items()}
    keys = sorted(set(status["deuteron"]) | set(status["helion"]))

    def cell(impl, key):
        s = status[impl].get(key)
        if s is None:
            return "not run"
        return "ok" if s["ok"] else ("not called" if s["ok"] is None else "FAIL: " + (s["cause"] or "")[:70])
    dev = {impl: r.get("env", {}) for impl, r in runs.items()}
    where = dev["deuteron"].get("device_name") or dev["deuteron"].get("device") or "cpu"
    lines = [f"# Helion's examples on {where}: "
             "deuteron (drop-in) and Helion, default configs", "",
             f"deuteron: {runs['deuteron']['passed']} of {runs['deuteron']['counted']} kernels; Helion "
             f"{dev['helion'].get('helion', '?')}: {runs['helion']['passed']} of {runs['helion']['counted']} "
             "(a kernel counts when every check that calls it passed; sizes and tolerances as in "
             "benchmarks/helion_examples.py)", ""]
    h_ok = [k for k in keys if status["helion"].get(k, {}).get("ok")]
    both = [k for k in h_ok if status["deuteron"].get(k, {}).get("ok")]
    lines.append(f"**Of the {len(h_ok)} kernels Helion runs correctly, deuteron runs {len(both)}.**")
    missing = [k for k in h_ok if k not in both]
    if missing:
        lines.append("Helion runs them, deuteron does not: " + ", ".join(f"{f}:{k}" for f, k in missing))
    extra = [k for k in keys if status["deuteron"].get(k, {}).get("ok") and not status["helion"].get(k, {}).get("ok")]
    if extra:
        lines.append("deuteron runs them, Helion does not: " + ", ".join(f"{f}:{k}" for f, k in extra))
    lines += ["", "| file | kernel | Helion | deuteron |", "|---|---|---|---|"]
    for key in keys:
        lines.append(f"| {key[0]} | {key[1]} | {cell('helion', key)} | {cell('deuteron', key)} |")
    return "\n".join(lines) + "\n"


def _env_info(impl: str, device: str) -> dict:
    import importlib.metadata

    import torch
    env = {"impl": impl, "device": device, "torch": torch.__version__}
    if device != "cpu":
        env["device_name"] = torch.cuda.get_device_name()
    if impl == "helion":
        try:
            env["helion"] = importlib.metadata.version("helion")
        except importlib.metadata.PackageNotFoundError:
            env["helion"] = "?"
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mirror", nargs="?", help="a local copy of github.com/pytorch/helion (checkout or git dir)")
    ap.add_argument("--only", help="comma-separated example files (add,softmax or add.py,...)")
    ap.add_argument("--json", help="write every result here")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per check statement")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the trace of each failure")
    ap.add_argument("--smoke", action="store_true", help="run the harness on a built-in two-kernel example")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cpu: newt's interpreter; cuda: compiled and run on the GPU (each kernel at its default "
                         "config, no tuning)")
    ap.add_argument("--impl", default="deuteron", choices=["deuteron", "helion"],
                    help="deuteron through the drop-in, or the real Helion package (--helion-site) on the same files")
    ap.add_argument("--helion-site", help="where Helion's wheels are installed (pip --target); put first on sys.path")
    ap.add_argument("--compare", nargs=2, metavar="JSON", help="print the table of a deuteron and a helion --json")
    ap.add_argument("--md", help="with --compare: also write the table here")
    ap.add_argument("--supervise", action="store_true",
                    help="run the files in child processes that a crash or a hang does not end (the GPU default)")
    ap.add_argument("--child", metavar="MARKER", help=argparse.SUPPRESS)  # (a supervised child: writes its file here)
    ap.add_argument("--compile", metavar="TARGET",
                    help="deuteron on the CPU: also compile each call's generated kernels for TARGET (sm_90a) with "
                         "NVRTC, no GPU; a kernel counts only if that compiles too")
    a = ap.parse_args(argv)
    if a.smoke:
        return smoke()
    if a.compare:
        md = compare(a.compare)
        print(md)
        if a.md:
            with open(a.md, "w", encoding="utf-8") as f:
                f.write(md)
        return 0
    if not a.mirror or not os.path.exists(a.mirror):
        print(f"helion_examples: no Helion mirror at {a.mirror!r}; nothing measured")
        return 0
    if a.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            print("helion_examples: --device cuda needs a CUDA GPU (benchmarks/run_device.sh helionex runs it)")
            return 2
    if a.impl == "helion":
        if a.helion_site:
            sys.path.insert(0, os.path.abspath(a.helion_site))
        os.environ.setdefault("HELION_AUTOTUNE_EFFORT", "none")  # each kernel at its default config
        os.environ.setdefault("HELION_AUTOTUNE_PROGRESS_BAR", "0")
        if a.device == "cpu":
            os.environ.setdefault("HELION_INTERPRET", "1")
    os.environ.setdefault("DEUTERON_AUTOTUNE_EFFORT", "none")
    examples = list_examples(a.mirror)
    only = {n if n.endswith(".py") else n + ".py" for n in a.only.split(",")} if a.only else None
    t_all = time.time()
    todo = [n for n in examples if n not in SKIPPED and not (only and n not in only)]
    if (a.device != "cpu" or a.supervise) and not a.child:  # the files run in children; this one only watches
        summarize(a, supervise(a, todo, examples, t_all), t_all)
        return 0
    if a.compile and a.impl == "deuteron":
        COMPILE["target"] = a.compile
    instrument(a.impl, a.device)
    watch_kernels(a.impl)
    folder = os.path.join(a.mirror, "examples") if os.path.isdir(os.path.join(a.mirror, "examples")) else None
    results = []
    lost = False
    with tempfile.TemporaryDirectory(prefix="helion_examples_") as tmp:
        sys.path.insert(0, tmp)
        for name in todo:
            src = examples[name]
            if a.child:  # the supervisor reads which file this process is in (to blame a crash or a hang)
                with open(a.child, "w", encoding="utf-8") as f:
                    f.write(name)
            path = os.path.join(folder, name) if folder else os.path.join(tmp, name)
            if not folder:  # a bare git mirror: the file's text, unchanged, in a folder of its own
                with open(path, "w", encoding="utf-8") as f:
                    f.write(src)
            r = run_file(name, src, path, tmp, a.timeout, a.device)
            results.append(r)
            oks = sum(1 for s in r["kernels"].values() if s["ok"])
            tot = sum(1 for s in r["kernels"].values() if s["ok"] is not None)
            print(f"{name:32s} {oks}/{tot} kernels  ({r['seconds']} s)", flush=True)
            for k, s in r["kernels"].items():
                if s["ok"] is False:
                    print(f"    {k}: {s['cause']}")
            if a.verbose:
                for t in r["traces"]:
                    print("      " + (t or "").replace("\n", "\n      "))
            if a.json:  # after every file: a run cut short by its time limit still leaves its results
                summarize(a, results, t_all, partial=True, quiet=True)
            if a.device != "cpu" and not gpu_alive():
                print(f"the GPU context is lost after {name} (a fault is sticky): the rest runs in a fresh process",
                      flush=True)
                lost = True
                break
    summarize(a, results, t_all, quiet=bool(a.child))
    return GPU_LOST if lost else 0


#: a child's exit status when the GPU context was lost after its last file (the supervisor goes on)
GPU_LOST = 3


def gpu_alive() -> bool:
    """Whether this process can still use the GPU (after an illegal address every later launch fails)."""
    import torch
    try:
        torch.cuda.synchronize()
        return torch.ones(1, device="cuda").add_(1).item() == 2.0
    except Exception:
        return False


def _read_results(path: str) -> list:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)["results"]
    except (OSError, ValueError, KeyError):  # not written yet, or being written
        return []


def supervise(a, todo: list[str], examples: dict, t_all: float) -> list:
    """Run the example files in child processes, one after the other, each going on where the last stopped: a
    child that crashes (a segfault, a lost GPU context) or stops making progress -- a GPU kernel that never
    finishes blocks the interpreter's per-check alarm -- is killed, the file it was in is recorded as failed
    with that cause, and a new child takes the files after it.  ``--json`` is rewritten (``partial``) whenever
    a child finishes a file, so a run stopped by its time limit keeps what it did.  The default on the GPU
    (``--supervise`` elsewhere)."""
    results: list = []
    rest = list(todo)
    while rest:
        with tempfile.TemporaryDirectory(prefix="helion_examples_part_") as d:
            out, marker = os.path.join(d, "part.json"), os.path.join(d, "current")
            cmd = [sys.executable, os.path.abspath(__file__), a.mirror, "--device", a.device, "--impl", a.impl,
                   "--timeout", str(a.timeout), "--only", ",".join(rest), "--json", out, "--child", marker]
            cmd += (["--helion-site", a.helion_site] if a.helion_site else []) + (
                ["--compile", a.compile] if a.compile else []) + (["-v"] if a.verbose else [])
            proc = subprocess.Popen(cmd)
            current, since, hung, seen = None, time.time(), False, None
            while proc.poll() is None:
                time.sleep(0.2)
                stamp = os.path.getmtime(out) if os.path.exists(out) else None
                if a.json and stamp != seen:  # the child finished a file: the results so far, on disk
                    seen = stamp
                    summarize(a, results + _read_results(out), t_all, partial=True, quiet=True)
                try:
                    with open(marker, encoding="utf-8") as f:
                        now = f.read().strip() or None
                except OSError:
                    now = None
                if now != current:
                    current, since = now, time.time()
                # a file's checks each have the alarm's time; past all of them and a margin, the child is stuck
                margin = float(os.environ.get("HELION_EXAMPLES_HANG_MARGIN", "120"))
                limit = a.timeout * max(1, len(drivers_for(current, a.device))) + margin if current else 600
                if time.time() - since > limit:
                    proc.kill()
                    proc.wait()
                    hung = True
            done = _read_results(out)
        results += done
        finished = {r["file"] for r in done}
        left = [n for n in rest if n not in finished]
        if proc.returncode not in (0, GPU_LOST) and current in left:
            why = (f"no progress for {int(time.time() - since)} s (a kernel that never finishes?); the process was "
                   "stopped" if hung else f"the process died in this file (exit status {proc.returncode})")
            print(f"{current:32s} {why}", flush=True)
            results.append({"file": current, "seconds": None, "checks": [], "traces": [],
                            "kernels": {k: {"ok": False, "cause": f"ProcessDied: {why}"}
                                        for k in kernel_names(examples[current])}})
            left.remove(current)
        if left == rest:  # no progress at all: stop rather than loop
            print(f"stopped: {len(left)} files never started (exit status {proc.returncode})", flush=True)
            break
        rest = left
    return results


def summarize(a, results: list, t_all: float, partial: bool = False, quiet: bool = False) -> dict:
    """Count the kernels, print the summary (unless ``quiet``) and write ``--json``."""
    kern = [(r["file"], k, s) for r in results for k, s in r["kernels"].items()]
    counted = [x for x in kern if x[2]["ok"] is not None]
    passed = [x for x in counted if x[2]["ok"]]
    files_ok = sum(1 for r in results if all(s["ok"] is not False for s in r["kernels"].values())
                   and any(s["ok"] for s in r["kernels"].values()))
    causes = collections.Counter(x[2]["cause"] for x in counted if not x[2]["ok"])
    env = _env_info(a.impl, a.device)
    env["seconds"] = round(time.time() - t_all, 1)
    if COMPILE["target"]:
        env["compiled_for"] = {"target": COMPILE["target"], "kernels": COMPILE["kernels"],
                               "seconds": round(COMPILE["seconds"], 1)}
    if not quiet:
        print(f"\n{a.impl} on {env.get('device_name', a.device)}: {len(passed)} of {len(counted)} kernels run "
              f"correctly ({files_ok} of {len(results)} example files entirely); {len(kern) - len(counted)} kernels "
              f"no check calls; {env['seconds']} s")
        if COMPILE["target"]:
            print(f"(each also compiled for {COMPILE['target']}: {COMPILE['kernels']} generated kernels, "
                  f"{COMPILE['seconds']:.1f} s)")
        print("causes by frequency:")
        for cause, n in causes.most_common():
            print(f"  {n:3d}  {cause}")
    out = {"impl": a.impl, "env": env, "partial": partial, "passed": len(passed), "counted": len(counted),
           "files_ok": files_ok, "causes": causes.most_common(), "results": results}
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    sys.exit(main())
