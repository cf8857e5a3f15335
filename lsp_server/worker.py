"""The worker process: everything that compiles with NVRTC or runs the user's code.

A worker of a ``newt.tune.workers.ProcessPool`` (one per server worker, see
``lsp_server/workers.py``): started as ``<python> -m newt.tune.worker FD
lsp_server.worker:handle`` (the ``python`` setting, default the server's
interpreter) in an empty folder with ``PYTHONSAFEPATH=1``; it changes to the
workspace folder once started.  Every request is a payload ``{"method":
"compile" | "compile_dt" | "verify" | "autotune" | "configs" | "dt_newt" | "perf" | "perf_warm" | "hello",
"params": {...}}`` for :func:`handle`; while it runs, events (``"config"`` per
autotune config, ``"case"`` per verify case) go to the server
(``newt.tune.worker.emit``) and autotune polls the server's cancel between
configs (``newt.tune.worker.cancelled``).  The user's ``print`` and C-level
output go to the pool's output tail, which the server logs.  After a fatal
error (a faulted CUDA context) the worker answers and exits, so the next
command gets a fresh process.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

__all__ = ["handle"]


def _json_default(o):
    if isinstance(o, float) and (o != o or o in (float("inf"), float("-inf"))):
        return None
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return repr(o)


def _clean(obj):
    """JSON-safe copy: NaN/inf become None, unknown objects their repr."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return repr(obj)


class UserError(Exception):
    """A failure the user can fix (their file does not import, no such kernel ...)."""

    def __init__(self, message: str, kind: str = "user"):
        super().__init__(message)
        self.kind = kind


# ---------------------------------------------------------------------------
# methods
# ---------------------------------------------------------------------------


def _hello(params, ctx):
    return {"pid": os.getpid(), "python": sys.version.split()[0], "executable": sys.executable,
            "newt": _newt_path()}


def _newt_path():
    try:
        import newt
        return os.path.dirname(os.path.abspath(newt.__file__))
    except ImportError:
        return None


def _compile(params, ctx):
    from .analysis import analyze
    from .concrete import SpecError, backend, build_concrete, concrete_spec, generate
    text, uri, kname = params["text"], params["uri"], params["kernel"]
    target = params.get("target") or "sm_90a"
    a = analyze(text, uri)
    ka = a.kernel_named(kname)
    if ka is None:
        raise UserError(f"no kernel named {kname!r} in {a.path}")
    try:
        conc = concrete_spec(a, ka, params.get("spec"), params.get("constexprs") or None)
    except SpecError as e:
        raise UserError(str(e), "spec") from None
    built = build_concrete(a, ka, conc)
    if built.fn is None or built.errors:
        from newt.diagnostics import render
        msg = "\n".join(render(d, text) for d in built.errors[:10]) or "the kernel could not be built"
        raise UserError(f"{kname} ({conc.label}) does not compile:\n{msg}", "compile")
    be = backend()
    if be is None:
        raise UserError("the CUDA backend (newt.backend.cuda) is not available in this installation", "backend")
    t0 = time.perf_counter()
    try:
        mod = generate(built, target)
    except SpecError as e:
        raise UserError(str(e), "compile") from None
    gen_ms = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    from .perfjob import cached_compile  # the performance figures' compile of this configuration, if it ran
    binary = cached_compile(be, mod, target)
    nvrtc_ms = (time.perf_counter() - t1) * 1e3
    sass_text, sass_error = None, None
    cubin = getattr(binary, "cubin", None)
    if cubin:
        try:
            sass_text = be.sass(cubin)
        except Exception as e:  # cuobjdump may be missing; the rest is still useful
            sass_error = f"{type(e).__name__}: {e}"
    ir_text = built.fn.format() if hasattr(built.fn, "format") else str(built.fn)
    return {
        "kernel": kname,
        "specialization": conc.to_json(),
        "target": target,
        "n_regs": getattr(binary, "n_regs", None),
        "n_spills": getattr(binary, "n_spills", None),
        "shared": getattr(binary, "shared", None),
        "compile_ms": round(gen_ms + nvrtc_ms, 3),
        "codegen_ms": round(gen_ms, 3),
        "nvrtc_ms": round(nvrtc_ms, 3),
        "texts": {"cuda": getattr(mod, "source", ""), "ptx": _text(getattr(binary, "ptx", None)),
                  "sass": sass_text if sass_text is not None else f"// SASS unavailable: {sass_error}",
                  "ir": ir_text},
        "log": _text(getattr(binary, "log", None)),
        "maps": _maps(mod, binary, sass_text),
    }


def _maps(mod, binary, sass_text) -> dict:
    """Per line of the CUDA, PTX and SASS texts, the user's line (``lsp_server/sourcemap.py``)."""
    from . import sourcemap
    cuda = sourcemap.cuda_lines(getattr(mod, "line_locs", None) or [])
    out = {"cuda": cuda, "ptx": sourcemap.ptx_lines(_text(getattr(binary, "ptx", None)) or "", cuda)}
    cubin = getattr(binary, "cubin", None)
    info = sourcemap.nvdisasm_line_info(cubin) if cubin and sass_text else None
    if info is not None:
        out["sass"] = sourcemap.sass_lines(sass_text, sourcemap.sass_addresses(info), cuda)
        out["hottest"] = sourcemap.hottest_lines(sourcemap.instruction_mix(sass_text, out["sass"]))
    return out


def _perf_warm(params, ctx):
    """Import what the performance figures need (the analysis, the backend, NVRTC) before the first text comes."""
    from .perfjob import warm
    return warm()


def _perf(params, ctx):
    """Registers, spills, shared memory and occupancy of every specialization the text reveals
    (``lsp_server/perfjob.py``)."""
    from .perfjob import run
    return run(params, ctx)


def _compile_dt(params, ctx):
    """A deuteron kernel: trace it on its first example's inputs (newt.harness), then compile what it generates."""
    dev = _device()
    import newt.harness as harness
    from newt.backend import cuda as be

    from .concrete import display_name
    mod = _load_user_module(params["path"], params.get("text"))
    kname = params["kernel"]
    kernel = _kernel_object(mod, kname)
    target = params.get("target") or "sm_90a"
    exs = harness.examples_for(kernel)
    if not exs:
        raise UserError(f"{kname} is a deuteron kernel: its code depends on the inputs, so Compile needs an example "
                        f"(@newt.harness.example({kname})) to trace it on", "spec")
    case = harness._cases_of(exs[0], dev)[0]
    try:
        from deuteron.kernel import build_ir_for
    except ImportError as e:
        raise UserError(f"this deuteron has no build_ir_for: {e}", "backend") from None
    t0 = time.perf_counter()
    fns = build_ir_for(kernel, *case.args, **case.kwargs)
    if not fns:
        raise UserError(f"{kname} generated no kernel for example {case.name}", "compile")
    texts = {"cuda": [], "ptx": [], "sass": [], "ir": []}
    first = None
    for fn in fns:
        nw, ns = getattr(fn, "num_warps", None) or 4, getattr(fn, "num_stages", None) or 3
        cm = be.generate_cuda(fn, target=target, num_warps=nw, num_stages=ns)
        binary = be.compile_cuda(cm, target)
        try:
            sass_text = be.sass(binary.cubin)
        except Exception as e:
            sass_text = f"// SASS unavailable: {type(e).__name__}: {e}"
        texts["cuda"].append(cm.source)
        texts["ptx"].append(_text(binary.ptx) or "")
        texts["sass"].append(sass_text)
        texts["ir"].append(fn.format())
        if first is None:
            first = (fn, binary, nw, ns)
    fn, binary, nw, ns = first
    sep = {"cuda": "\n// ----- next generated kernel -----\n\n", "ptx": "\n// ----- next generated kernel -----\n\n",
           "sass": "\n# ----- next generated kernel -----\n\n", "ir": "\n// ----- next generated kernel -----\n\n"}
    return {
        "kernel": kname,
        "specialization": {"label": f"example {case.name}", "constexprs": {display_name(k): repr(v) if not isinstance(
            v, (int, float, str, bool)) else v for k, v in (fn.constexprs or {}).items()},
            "num_warps": nw, "num_stages": ns, "arg_types": {p.name: str(p.type) for p in fn.params if not p.constexpr},
            "assumed": {}},
        "target": target,
        "n_regs": getattr(binary, "n_regs", None),
        "n_spills": getattr(binary, "n_spills", None),
        "shared": getattr(binary, "shared", None),
        "compile_ms": round((time.perf_counter() - t0) * 1e3, 3),
        "kernels": len(fns),
        "texts": {k: sep[k].join(v) for k, v in texts.items()},
    }


def _dt_newt(params, ctx):
    """The generated newt of every deuteron kernel of the file, by the user's line it comes from (the hover's
    "generated newt" section, ``lsp_server.deuteron_newt``): each kernel traced on its first ``newt.harness``
    example, else on tensors of the shapes and dtypes of its first launch in the file that gives them all
    (``deuteron.frontend.launch_shapes``; a dtype the text does not say is fp32, and the hover says so)."""
    dev = _device()
    path, text = params["path"], params.get("text")
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    served = _serve_helion(text)
    try:
        return _trace_newt_lines(_load_user_module(path, text), path, text, dev)
    finally:
        if served:
            import newt.dropin
            newt.dropin.uninstall()


def _serve_helion(text: str) -> bool:
    """A Helion file, with no Helion installed: ``import helion`` served from deuteron by newt's drop-in hook
    while the file is traced (True: the hook was put in for this, and goes again after)."""
    import importlib.util
    import re

    import newt.dropin
    if not re.search(r"^\s*(import|from)\s+helion\b", text, re.M) or newt.dropin.is_installed():
        return False
    if "helion" not in sys.modules and importlib.util.find_spec("helion") is not None:
        return False  # Helion itself: its kernels are not deuteron's, and get no newt lines
    newt.dropin.install()
    return True


def _trace_newt_lines(mod, path: str, text: str, dev: str) -> dict:
    from .deuteron_newt import newt_lines_by_user_line
    lines: dict = {}
    errors: dict = {}
    for name, kernel in _dt_kernels_of(mod, path):
        try:
            got = _dt_inputs(kernel, name, text, path, dev)
            if got is None:
                errors[name] = "no example and no launch in the file that gives every argument's shape"
                continue
            args, kwargs, how = got
            source = kernel.to_newt_source(*args, **kwargs)
        except Exception as e:  # a kernel that does not trace: no newt lines for it, the others go on
            errors[name] = f"{type(e).__name__}: {e}"
            continue
        for ln, newt_lines in newt_lines_by_user_line(source).items():
            lines.setdefault(str(ln), {"kernel": name, "with": how, "newt": newt_lines})
    return {"lines": lines, "errors": errors}


def _dt_kernels_of(mod, path: str) -> list:
    """(name, kernel) of the deuteron kernels the file defines at module level."""
    out = []
    for name, v in list(vars(mod).items()):
        fn = getattr(v, "fn", None)
        if callable(getattr(v, "to_newt_source", None)) and getattr(getattr(fn, "__code__", None), "co_filename",
                                                                    None) == path:
            out.append((name, v))
    return out


_TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "i8": "int8",
                 "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "i1": "bool"}


def _dt_inputs(kernel, name: str, text: str, path: str, dev: str):
    """(args, kwargs, how they were chosen) for tracing ``kernel``, or None."""
    import newt.harness as harness
    exs = harness.examples_for(kernel)
    if exs:
        case = harness._cases_of(exs[0], dev)[0]
        return list(case.args), dict(case.kwargs or {}), f"the example {exs[0].name}"
    import torch

    from deuteron.frontend import launch_shapes
    from newt.frontend import analyze_source
    from newt.frontend.hostshapes import TensorFact
    fa = analyze_source(text, path)
    ka = next((k for k in fa.kernels if k.name == name and getattr(k, "structure", None) is not None), None)
    if ka is None:
        return None
    a = ka.node.args
    params = list(a.posonlyargs) + list(a.args)
    n_required = len(params) - len(a.defaults)
    for run in launch_shapes(fa.scan, ka.node, ka.structure):
        args: Any = []  # None once a parameter has no value
        said: list[str] = []
        for i, p in enumerate(params):
            f = run.facts.get(p.arg)
            if isinstance(f, TensorFact) and f.shape is not None and None not in f.shape:
                dt = getattr(torch, _TORCH_DTYPES.get(f.dtype or "fp32", "float32"))
                t = torch.zeros(f.shape, dtype=dt, device=dev) if not dt.is_floating_point else \
                    torch.randn(f.shape, dtype=dt, device=dev)
                args.append(t)
                said.append(f"{p.arg}: {f.dtype or 'fp32 (assumed)'}{list(f.shape)}")
            elif isinstance(f, int) and not isinstance(f, TensorFact):
                args.append(f)
                said.append(f"{p.arg}={f}")
            elif i >= n_required:
                break
            else:
                args = None
                break
        if args is not None:
            return args, {}, f"{run.what} ({', '.join(said)})"
    return None


def _text(x):
    if x is None:
        return None
    if isinstance(x, bytes):
        return x.decode("utf-8", "replace").rstrip("\x00")
    return str(x)


_DEVICE = None


def _device() -> str:
    """"cuda" when torch sees a GPU; else "cpu" and kernels run through the interpreter."""
    global _DEVICE
    if _DEVICE is None:
        forced = os.environ.get("NEWT_WORKER_DEVICE")
        if forced in ("cpu", "cuda"):
            _DEVICE = forced
        else:
            try:
                import torch
                _DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
            except ImportError:
                raise UserError(f"torch is not installed for {sys.executable}: Verify and Autotune run the kernel "
                                "on real tensors (set the newt `python` setting to an interpreter with torch)",
                                "environment") from None
        if _DEVICE == "cpu":
            os.environ["NEWT_INTERPRET"] = "1"
    return _DEVICE


def _load_user_module(path: str, text: str | None):
    """Execute the user's file as a module (``__name__`` is not ``"__main__"``: script blocks do not run)."""
    import linecache
    import re
    import types

    import newt.harness as harness
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    stem = os.path.splitext(os.path.basename(path))[0]
    name = stem if re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", stem) else "newt_user_module"
    d = os.path.dirname(os.path.abspath(path))
    if d not in sys.path:
        sys.path.insert(0, d)
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    harness.clear()
    mod = types.ModuleType(name)
    mod.__file__ = path
    sys.modules[name] = mod
    try:
        code = compile(text, path, "exec")
    except SyntaxError as e:
        raise UserError(f"{path}:{e.lineno}:{e.offset}: syntax error: {e.msg}", "import") from None
    try:
        exec(code, mod.__dict__)  # running the user's module is this process's purpose
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{fr.filename}:{fr.lineno}" for fr in reversed(tb) if fr.filename == path), path)
        raise UserError(f"importing {path} failed at {where}: {type(e).__name__}: {e}", "import") from e
    return mod


def _kernel_object(mod, kname: str):
    obj = getattr(mod, kname, None)
    if obj is None:
        raise UserError(f"{mod.__file__} defines no {kname!r} at module level", "import")
    return obj


def _verify(params, ctx):
    dev = _device()
    import newt.harness as harness
    mod = _load_user_module(params["path"], params.get("text"))
    kernel = _kernel_object(mod, params["kernel"])
    report = harness.verify(kernel, dev, name=params["kernel"], on_case=lambda c: ctx.event("case", _clean(c)))
    if report.get("fatal"):
        ctx.fatal = True
    return _clean(mark_missing_reference(report))


def mark_missing_reference(report: dict) -> dict:
    """A Verify report whose cases ran nothing because no reference says what to expect is not a failed
    comparison: ``reason: "no_reference"`` and a message that says what to add (clients showed "FAILED ...
    max abs err 0")."""
    cases = report.get("cases") or []
    failed = [c for c in cases if not c.get("ok")]
    if failed and all((c.get("message") or "").startswith("no reference") for c in failed):
        k = report.get("kernel", "the kernel")
        report["reason"] = "no_reference"
        report["message"] = (f"no reference for {k}: {len(failed)} of {len(cases)} example case(s) have nothing to "
                             f"compare with; register one with @newt.harness.reference({k}) (the expected value "
                             "of each output by parameter name) or give Case(reference=...)")
    return report


def run_autotune(kernel, device: str, *, name: str, on_config, should_stop) -> dict:
    """The one place the editor's Autotune times configs: ``on_config(entry)`` after each config (it is the
    progress), ``should_stop()`` polled between configs (cancel); returns the report of
    docs/lsp-protocol.md (``results``, ``best``, ``stored`` ...). Today ``newt.harness.autotune``; the
    autotuning executor (newt.tune) plugs in here, nowhere else."""
    import newt.harness as harness
    return harness.autotune(kernel, device, name=name, on_config=on_config, should_stop=should_stop)


def _autotune(params, ctx):
    dev = _device()
    mod = _load_user_module(params["path"], params.get("text"))
    kernel = _kernel_object(mod, params["kernel"])
    total = {"n": 0}

    def on_config(entry):
        total["n"] += 1
        ctx.event("config", _clean(entry))

    report = run_autotune(kernel, dev, name=params["kernel"], on_config=on_config,
                          should_stop=lambda: ctx.cancelled)
    if report.get("fatal"):
        ctx.fatal = True
    return _clean(report)


def _configs(params, ctx):
    """The number of configs an autotuned kernel will try (for the progress bar), without running it."""
    mod = _load_user_module(params["path"], params.get("text"))
    kernel = _kernel_object(mod, params["kernel"])
    import newt.harness as harness
    at = harness._autotuner(kernel)
    return {"count": len(at.configs) if at is not None else 0}


METHODS = {"hello": _hello, "compile": _compile, "compile_dt": _compile_dt, "verify": _verify, "autotune": _autotune,
           "configs": _configs, "dt_newt": _dt_newt, "perf": _perf, "perf_warm": _perf_warm}


class _Ctx:
    """What a method sees of its request: events to the server, the server's cancel, a fatal flag."""

    def __init__(self):
        self.fatal = False

    @property
    def cancelled(self) -> bool:
        from newt.tune.worker import cancelled
        return cancelled()

    def event(self, kind: str, data):
        from newt.tune.worker import emit
        emit(kind, _json(data))


def _json(obj):
    """What the server receives is what JSON carries (the answer goes on to the editor as it is)."""
    return json.loads(json.dumps(obj, default=_json_default))


def handle(payload) -> dict:
    """The pool handler (``newt.tune.worker`` runs it for every request): ``{"method", "params"}`` -> ``{"status",
    "result" | "error", "fatal"}``.  After a fatal error (a faulted CUDA context) the worker process ends and the
    next request gets a fresh one."""
    method = payload.get("method")
    fn = METHODS.get(method)
    if fn is None:
        return {"status": "error", "error": {"message": f"unknown worker method {method!r}", "kind": "protocol"},
                "fatal": False}
    ctx = _Ctx()
    try:
        result = fn(payload.get("params") or {}, ctx)
        return {"status": "ok", "result": _json(result), "fatal": ctx.fatal}
    except UserError as e:
        return {"status": "error", "error": {"message": str(e), "kind": e.kind}, "fatal": ctx.fatal}
    except BaseException as e:  # report everything, then decide whether to live on
        from newt.harness import is_fatal
        fatal = is_fatal(e) or isinstance(e, (MemoryError, SystemExit, KeyboardInterrupt))
        if fatal:
            sys.stderr.write("newt worker: exiting after a fatal error (the next command starts a fresh worker)\n")
        return {"status": "error", "error": {"message": f"{type(e).__name__}: {e}", "kind": "internal",
                                             "traceback": traceback.format_exc(limit=20)},
                "fatal": ctx.fatal or fatal}
