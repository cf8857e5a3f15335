"""Host-side launch overhead: newt vs Triton in the same process, same kernel source.

    python3 benchmarks/launch_overhead.py [--out DIR] [--launches 200] [--windows 60] [--rounds 6]
    python3 benchmarks/launch_overhead.py --cpu     # no GPU: newt's host path over a stand-in driver

For each way of launching (a tuple grid, a ``callable(meta)`` grid, an
autotuned kernel after tuning) it times only the Python side: windows of
``--launches`` launches of a one-block kernel are timed with
``time.perf_counter`` and the GPU is synchronised between windows (untimed),
so the launch queue never fills and the figure is the host cost per launch.
The cases run in interleaved rounds (each round times every case for
windows/rounds windows), so drift of the host hits all of them alike; median
over all windows.  newt's launches go through the compiled dispatcher (``_launch.c``: binding, the
specialization key, the cache lookup and the launch in C; its counters are printed); the row "Python fast
path (before)" is the same kernel through the generated Python fast path that computes the key in Python,
the path before it.  Shown for scale: the floors (the compiled launcher alone,
newt's ``Launcher`` through cuda.bindings, and a bare ``cuLaunchKernel``
through cuda-bindings with pre-packed arguments) and ``torch.add(out=)``.
newt's launches go through the compiled launcher (``newt/runtime/_launch.c``)
where it builds; the "Python launcher" row is the same kernel through the
pure-Python one.  Target: newt's autotuned launch under 8 us.

``--cpu`` (the CI smoke run; it writes no result files) times newt's host path
with CPU tensors over the test suite's stand-in driver: what the Python side
costs with a driver call that does nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, instantiate, write_json

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


def time_cases(cases: dict, launches: int, windows: int, rounds: int, sync) -> dict:
    """Per-launch host time of every case, in interleaved rounds; median over all windows."""
    samples: dict = {name: [] for name in cases}
    for launch in cases.values():
        for _ in range(20):
            launch()
    sync()
    per_round = max(1, windows // rounds)
    for _ in range(rounds):
        for name, launch in cases.items():
            for _ in range(per_round):
                t0 = time.perf_counter()
                for _ in range(launches):
                    launch()
                samples[name].append((time.perf_counter() - t0) / launches * 1e6)
                sync()
    return {name: {"median_us": statistics.median(xs), "min_us": min(xs),
                   "p90_us": sorted(xs)[int(0.9 * (len(xs) - 1))], "samples_us": [round(x, 3) for x in xs]}
            for name, xs in samples.items()}


def cases(modules):
    import torch
    n = 128
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    grid_fn = lambda meta: ((n + meta["BLOCK"] - 1) // meta["BLOCK"],)
    out_cases = {}
    for impl, m in modules.items():
        k, t = m.small_kernel, m.tuned_kernel
        out_cases[f"{impl}: tuple grid"] = lambda k=k: k[(1,)](x, y, out, n, BLOCK=128)
        out_cases[f"{impl}: callable grid"] = lambda k=k: k[grid_fn](x, y, out, n, BLOCK=128)
        out_cases[f"{impl}: autotuned"] = lambda t=t: t[grid_fn](x, y, out, n)
    out_cases["torch.add(out=)"] = lambda: torch.add(x, y, out=out)
    if "newt" in modules:
        import newt
        py_kernel = newt.jit(modules["newt"].small_kernel.fn)  # the same kernel, through the Python launcher
        py_kernel[(1,)](x, y, out, n, BLOCK=128)
        for ln in py_kernel._cache.values():
            ln.launch = ln.py_launch
        out_cases["newt: tuple grid, Python launcher"] = lambda: py_kernel[(1,)](x, y, out, n, BLOCK=128)
        # the path before the compiled dispatcher: Python __getitem__, functools.partial, the generated Python
        # fast path (it computes the key), then the compiled Launcher
        pf_kernel = newt.jit(modules["newt"].small_kernel.fn)
        pf_kernel[(1,)](x, y, out, n, BLOCK=128)
        if hasattr(pf_kernel._fast, "py_fast"):
            pf_kernel._fast = pf_kernel._fast.py_fast
            out_cases["newt: tuple grid, Python fast path (before)"] = \
                lambda: pf_kernel._getitem_py((1,))(x, y, out, n, BLOCK=128)
        # where a tensor's pointer comes from: data_ptr() (what newt and Triton's launcher call), the method
        # descriptor, and __cuda_array_interface__
        out_cases["data_ptr: x.data_ptr()"] = lambda: x.data_ptr()
        dp = torch.Tensor.data_ptr
        out_cases["data_ptr: Tensor.data_ptr(x)"] = lambda: dp(x)
        out_cases["data_ptr: __cuda_array_interface__"] = lambda: x.__cuda_array_interface__["data"][0]
        ck = modules["newt"].small_kernel.warmup(x, y, out, n, BLOCK=128, grid=(1,))
        dev = torch.cuda.current_device()
        launcher = ck.launcher(dev)
        stream = torch.cuda.current_stream().cuda_stream
        vals = (x.data_ptr(), y.data_ptr(), out.data_ptr(), n)
        if launcher.compiled is not None:
            out_cases["floor: newt compiled launcher"] = lambda: launcher.compiled(1, 1, 1, stream, *vals)
        py = launcher.py_launch
        out_cases["floor: packed cuLaunchKernel (newt Launcher)"] = lambda: py(1, 1, 1, stream, *vals)
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


def _skip_not_cuda(kernels):
    """CPU tensors over the stand-in driver: newt's "not on the GPU" check of these kernels passes (a builtin:
    no Python frame in the timing)."""
    for k in kernels:
        for f in [k.__dict__.get("_fast"), *k.__dict__.get("_presets", {}).values()]:
            if f is not None:
                getattr(f, "py_fast", f).__globals__["_nwt_not_cuda"] = {}.get


def deuteron_cpu_cases(mp, newt_kernels) -> dict:
    """The examples' deuteron softmax, layer norm, matmul and attention (small inputs, the default config) as a
    user calls them, each next to the same generated newt kernel launched directly (its launch function with
    the call's arguments, plus the output allocation the host code makes): CPU tensors over the stand-in
    driver, deuteron told the tensors are on the GPU, so the generated kernels launch through newt's runtime
    (not the interpreter).  Two more rows split the call: the generated launch alone, and the user's host
    code alone (the function with its tile loop a no-op: the reshapes and allocations the user wrote).  The
    call minus those two is what deuteron itself adds per call."""
    import torch

    import deuteron as dt
    from deuteron import hostrun, runtime
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "deuteron"))
    import attention
    import layer_norm
    import matmul
    import softmax
    gpu = torch.device("cuda")
    mp.setattr(dt.Kernel, "_device", lambda self, bound: gpu)
    mp.setattr(runtime, "num_sms", lambda device: 132)
    f16 = dict(dtype=torch.float16)
    x = torch.randn(4, 128, **f16)
    w, b = torch.randn(128, **f16), torch.randn(128, **f16)
    a, bm = torch.randn(64, 32, **f16), torch.randn(32, 48, **f16)
    q, k, v = (torch.randn(1, 2, 64, 32, **f16) for _ in range(3))
    todo = {"softmax": (softmax.softmax, (x,)), "layer_norm": (layer_norm.layer_norm, (x, w, b)),
            "matmul": (matmul.matmul, (a, bm)), "attention": (attention.attention, (q, k, v))}
    out = {}
    for name, (kern, call_args) in todo.items():
        dk = dt.kernel(autotune_effort="none")(kern.fn)
        dk(*call_args)  # discovery, trace, code generation, newt's compile (NVRTC), first launch
        e = dk._entry(dk._bind(call_args, {}))
        run = hostrun._HostRun(e, e.config, "source")
        run.execute(dk._bind(call_args, {}))
        (gen, mod, prog, host_locals), = run.built
        launch_fn = getattr(mod, gen.launch_name)
        rt = hostrun._runtime_args(gen, prog, host_locals, run.fn_globals)
        kw = dict(gen.constexprs, num_warps=gen.num_warps, num_stages=gen.num_stages)
        if gen.needs_num_sms:
            kw["_NUM_SMS"] = 132
        result = dk(*call_args)
        shape, dtype = result.shape, result.dtype
        newt_kernels.append(getattr(mod, gen.kernel_name))
        host_only = dk.source.host_function(lambda k, host_locals: None)  # the user's host code, no launch
        out[f"deuteron: {name} call"] = lambda dk=dk, ca=call_args: dk(*ca)
        out[f"newt direct: {name} (alloc + generated launch)"] = \
            lambda f=launch_fn, rt=rt, kw=kw, s=shape, d=dtype: (torch.empty(s, dtype=d), f(*rt, **kw))
        out[f"  {name}: generated launch alone"] = lambda f=launch_fn, rt=rt, kw=kw: f(*rt, **kw)
        out[f"  {name}: host code alone (launch a no-op)"] = lambda h=host_only, ca=call_args: h(*ca)
    _skip_not_cuda(newt_kernels)
    return out


def cpu_run(args) -> int:
    """newt's host path over the test suite's stand-in driver, CPU tensors (no result files)."""
    import pytest
    import torch
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from newt.runtime import clauncher, driver, specialize
    from tests.runtime.fakes import install_fake_c_launcher, install_fake_gpu
    jit_mod = sys.modules["newt.runtime.jit"]
    mp = pytest.MonkeyPatch()
    cu = install_fake_gpu(mp)
    mp.setattr(specialize, "raise_not_cuda", lambda *a: None)
    mod = install_fake_c_launcher(mp, cu)
    compiled = mod is not None
    if compiled:
        entries = mod.fake_driver(None)  # stand-ins for cuLaunchKernel that return 0 and do nothing else
        mp.setattr(driver, "launch_entry", lambda cooperative=False: entries[1 if cooperative else 0])
        real = jit_mod.c_fast_path

        def c_fast_path(kernel, py_fast, preset=None):  # CPU tensors: a "not on the GPU" check that passes
            py_fast.__globals__["_nwt_not_cuda"] = {}.get  # (a builtin: no Python frame in the timing)
            return real(kernel, py_fast, preset)
        mp.setattr(jit_mod, "c_fast_path", c_fast_path)
    else:
        cu.cuLaunchKernel = lambda *a: (0,)
    m = instantiate(TEMPLATE, "newt", "overhead_cpu")
    n = 128
    x, y = torch.randn(n), torch.randn(n)
    out = torch.empty_like(x)
    grid_fn = lambda meta: ((n + meta["BLOCK"] - 1) // meta["BLOCK"],)
    cases = {"newt: tuple grid": lambda: m.small_kernel[(1,)](x, y, out, n, BLOCK=128),
             "newt: callable grid": lambda: m.small_kernel[grid_fn](x, y, out, n, BLOCK=128),
             "newt: autotuned": lambda: m.tuned_kernel[grid_fn](x, y, out, n)}
    m.tuned_kernel.user_do_bench = lambda f, quantiles: (f(), [1.0] * 3)[1]
    for c in cases.values():
        c()
    _skip_not_cuda([m.small_kernel, m.tuned_kernel.base])  # CPU tensors: skip the "not on the GPU" check
    if args.deuteron:
        cases.update(deuteron_cpu_cases(mp, [m.small_kernel]))
    results = time_cases(cases, args.launches, args.windows, args.rounds, lambda: cu.launches.clear())
    print(f"stand-in driver, CPU tensors; newt's launcher: {clauncher.status() if compiled else 'pure Python'}; "
          "host-path figures only (the stand-in driver call does nothing)")
    if compiled:
        print(f"compiled dispatcher: plain {m.small_kernel._fast.stats()}, autotuned "
              f"{m.tuned_kernel._c_launch.stats() if m.tuned_kernel._c_launch is not None else None}")
    for name, r in results.items():
        print(f"{name:48s} {r['median_us']:7.2f} us (min {r['min_us']:.2f})")
    if args.deuteron:
        print("deuteron's own per-call cost (the call - the generated launch alone - the host code alone):")
        for name in ("softmax", "layer_norm", "matmul", "attention"):
            rows = [results[n] for n in (f"deuteron: {name} call", f"  {name}: generated launch alone",
                                         f"  {name}: host code alone (launch a no-op)")]
            own = {q: rows[0][q] - rows[1][q] - rows[2][q] for q in ("median_us", "min_us")}
            print(f"  {name:12s} {own['median_us']:6.2f} us from the medians, {own['min_us']:6.2f} us from the minima")
    mp.undo()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).resolve().parent))
    p.add_argument("--launches", type=int, default=200, help="launches per timed window")
    p.add_argument("--windows", type=int, default=60)
    p.add_argument("--rounds", type=int, default=6, help="interleaved rounds over the cases")
    p.add_argument("--cpu", action="store_true", help="no GPU: the host path over a stand-in driver")
    p.add_argument("--deuteron", action="store_true",
                   help="with --cpu: also deuteron calls against their generated newt kernels launched directly")
    args = p.parse_args(argv)
    if args.cpu:
        return cpu_run(args)
    import torch
    if not torch.cuda.is_available():
        print("launch_overhead.py needs a CUDA GPU (or --cpu)", file=sys.stderr)
        return 2
    modules = {"newt": instantiate(TEMPLATE, "newt", "overhead")}
    try:
        modules["triton"] = instantiate(TEMPLATE, "triton", "overhead")
    except Exception as e:
        print(f"Triton unavailable: {type(e).__name__}: {e}")
    from newt.runtime import clauncher
    results = time_cases(cases(modules), args.launches, args.windows, args.rounds, torch.cuda.synchronize)
    for name, r in results.items():
        print(f"{name:48s} {r['median_us']:7.2f} us (min {r['min_us']:.2f})", flush=True)
    ratios = {}
    for mode in ("tuple grid", "callable grid", "autotuned"):
        a, b = results.get(f"newt: {mode}"), results.get(f"triton: {mode}")
        if a and b:
            ratios[mode] = b["median_us"] / a["median_us"]
    nk = modules["newt"]
    stats = {"plain": getattr(nk.small_kernel.grid_launcher(), "stats", lambda: None)(),
             "autotuned": nk.tuned_kernel._c_launch.stats() if nk.tuned_kernel._c_launch is not None else None}
    print(f"compiled dispatcher counters: {stats}")
    data = {"info": environment(), "launches_per_window": args.launches, "windows": args.windows,
            "rounds": args.rounds, "newt_launcher": clauncher.status(), "dispatcher_stats": stats,
            "results": results, "triton_over_newt": ratios,
            "target_met": all(results.get(f"newt: {m}", {}).get("median_us", 1e9) < 8.0 for m in
                              ("tuple grid", "autotuned"))}
    out = Path(args.out)
    write_json(out / "launch_overhead.json", data)
    lines = [f"# Launch overhead — {data['info'].get('gpu', '?')}", "",
             f"{data['info'].get('date')}; torch {data['info'].get('torch')}, Triton {data['info'].get('triton')}, "
             f"cuda-bindings {data['info'].get('cuda_bindings')}. Host time per launch of a one-block kernel "
             f"(median of {args.windows} windows of {args.launches} launches in {args.rounds} interleaved rounds, GPU "
             f"synchronised between windows). newt's launcher: {data['newt_launcher']}.", "",
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
