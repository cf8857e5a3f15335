"""Example inputs and references for kernels: what *Verify* and *Autotune* run.

This is the one convention newt uses to know how to call a kernel on real data
and what the right answer is.  The editor's **Verify** and **Autotune**
commands (the language server), ``python -m newt verify`` style tooling and
your own tests all read it.

Declare examples next to the kernel::

    import newt
    import newt.harness as nh
    import newt.language as nl


    @newt.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
        ...


    @nh.reference(add_kernel)
    def add_reference(x, y, out, n, BLOCK):
        return {"out_ptr": x + y}            # expected value of each output, by parameter name


    @nh.example(add_kernel)
    def small(device):
        import torch
        x = torch.randn(1000, device=device)
        y = torch.randn(1000, device=device)
        out = torch.empty_like(x)
        return nh.Case(grid=(4,), args=(x, y, out, 1000), kwargs={"BLOCK": 256})

The rules:

* ``@nh.example(kernel, name=None, atol=None, rtol=None)`` registers a function
  ``fn(device) -> Case | list[Case]``.  ``device`` is ``"cuda"`` when a GPU is
  used, else ``"cpu"`` (the kernel then runs through the interpreter).  Build
  tensors on that device; import torch *inside* the function (this module,
  and the kernel's module, stay importable without torch).
* A :class:`Case` is one launch: ``grid`` (a tuple, or ``callable(meta)`` as at
  ``kernel[grid]``), ``args``/``kwargs`` exactly as passed to
  ``kernel[grid](*args, **kwargs)``, and optionally its own ``reference``,
  ``outputs``, ``atol``/``rtol``.  ``grid=None`` means the kernel is called like
  a function (``kernel(*args, **kwargs)``, deuteron kernels) and its return
  value is the output named ``"return"``.
* The reference (``Case.reference``, else the one registered with
  ``@nh.reference(kernel)``) is called **before** the launch with clones of the
  tensor arguments and the same ``*args, **kwargs``; it returns the expected
  outputs: a dict ``{parameter name: tensor}`` (the parameter's tensor is
  compared after the launch), or a tensor / tuple of tensors matched with
  ``Case.outputs`` (parameter names, in order).  Without ``outputs``, a dict's
  keys name the outputs.  For a function-style kernel a bare tensor is the
  expected return value.  A deuteron kernel without a reference is compared
  with its eager oracle.
* Tolerances: ``Case.atol/rtol``, else the example's, else by dtype like
  ``newt.testing.assert_close`` (fp32 1e-4, fp16 1e-2, bf16 2e-2; integers and
  booleans exactly).  ``NaN`` equals ``NaN``.
* For ``@newt.autotune`` kernels, leave out the tuned constexprs (the configs set
  them) and give ``grid`` as ``lambda meta: ...``.

:func:`verify` runs every example of a kernel and compares with the reference;
:func:`autotune` times every config of an autotuned kernel on the first example
(checking each config's result against the reference) and stores the winner in
the runtime's autotune cache.  Both return plain dicts (JSON-ready).
"""

from __future__ import annotations

import math
import time
import traceback
from dataclasses import dataclass, field

__all__ = ["Case", "example", "reference", "examples_for", "reference_for", "verify", "autotune", "device",
           "clear", "Example"]


@dataclass
class Case:
    """One launch of a kernel with its expected outputs (see the module docstring)."""

    grid: object = None
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    reference: object = None
    outputs: tuple | None = None
    atol: float | None = None
    rtol: float | None = None
    name: str | None = None


@dataclass
class Example:
    kernel: object
    fn: object
    name: str
    atol: float | None = None
    rtol: float | None = None


_EXAMPLES: list[Example] = []
_REFERENCES: list[tuple] = []  # (kernel, fn)


def _same_kernel(a, b) -> bool:
    """``a`` is ``b``, or one wraps the other (``@newt.autotune`` / ``@newt.heuristics`` around ``@newt.jit``)."""
    seen = 0
    x = a
    while x is not None and seen < 8:
        if x is b:
            return True
        x = getattr(x, "fn", None) if getattr(x, "__newt_jit__", False) or hasattr(x, "configs") else None
        seen += 1
    x = b
    seen = 0
    while x is not None and seen < 8:
        if x is a:
            return True
        x = getattr(x, "fn", None) if getattr(x, "__newt_jit__", False) or hasattr(x, "configs") else None
        seen += 1
    return False


def example(kernel, name: str | None = None, atol: float | None = None, rtol: float | None = None):
    """Register ``fn(device) -> Case | list[Case]`` as example inputs of ``kernel``."""
    if kernel is None or isinstance(kernel, (str, int, float)):
        raise TypeError("@newt.harness.example(kernel): pass the kernel object (a @newt.jit or @dt.kernel function)")

    def deco(fn):
        if not callable(fn):
            raise TypeError("@newt.harness.example decorates a function fn(device) -> Case")
        _EXAMPLES.append(Example(kernel, fn, name or getattr(fn, "__name__", "example"), atol, rtol))
        return fn
    return deco


def reference(kernel):
    """Register ``fn(*args, **kwargs) -> expected outputs`` as the reference of ``kernel``."""
    def deco(fn):
        if not callable(fn):
            raise TypeError("@newt.harness.reference decorates a function")
        _REFERENCES.append((kernel, fn))
        return fn
    return deco


def examples_for(kernel) -> list[Example]:
    return [e for e in _EXAMPLES if _same_kernel(e.kernel, kernel)]


def reference_for(kernel):
    for k, fn in reversed(_REFERENCES):
        if _same_kernel(k, kernel):
            return fn
    return None


def clear():
    """Forget every registered example and reference (the language server's worker does this between files)."""
    _EXAMPLES.clear()
    _REFERENCES.clear()


def device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    try:
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------


def _torch():
    import torch
    return torch


def _is_tensor(x) -> bool:
    return hasattr(x, "data_ptr") and hasattr(x, "dtype") and hasattr(x, "clone")


def _clone(x):
    if _is_tensor(x):
        return x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _param_names(kernel) -> list[str]:
    names = getattr(kernel, "arg_names", None)
    if names:
        return list(names)
    import inspect
    fn = getattr(kernel, "fn", kernel)
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _bind(kernel, args, kwargs) -> dict:
    names = _param_names(kernel)
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


_DEFAULT_TOL = {"float64": (1e-7, 1e-7), "float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2),
                "bfloat16": (2e-2, 2e-2), "float8_e4m3fn": (1e-1, 1e-1), "float8_e5m2": (2e-1, 2e-1)}


def _tolerances(a, e, atol, rtol):
    if atol is not None and rtol is not None:
        return atol, rtol
    try:
        from newt.testing import _DEFAULT_TOL as table
    except ImportError:  # pragma: no cover
        table = _DEFAULT_TOL
    names = [str(t).replace("torch.", "") for t in (a.dtype, e.dtype)]
    tols = [table[n] for n in names if n in table]
    dat, drt = (max(t[0] for t in tols), max(t[1] for t in tols)) if tols else (0.0, 0.0)
    return (dat if atol is None else atol), (drt if rtol is None else rtol)


def compare(actual, expected, atol=None, rtol=None) -> dict:
    """``{ok, max_abs_err, max_rel_err, message}`` for two tensors (any device; compared on the CPU in fp64)."""
    torch = _torch()
    a = actual.detach() if _is_tensor(actual) else torch.as_tensor(actual)
    e = expected.detach() if _is_tensor(expected) else torch.as_tensor(expected)
    if a.shape != e.shape:
        if a.numel() == e.numel() == 1:
            a, e = a.reshape(()), e.reshape(())
        else:
            return {"ok": False, "max_abs_err": None, "max_rel_err": None,
                    "message": f"shapes differ: {tuple(a.shape)} (kernel) vs {tuple(e.shape)} (reference)"}
    a, e = a.cpu(), e.cpu()
    atol, rtol = _tolerances(a, e, atol, rtol)
    if a.numel() == 0:
        return {"ok": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "message": None}
    a64, e64 = a.to(torch.float64), e.to(torch.float64)
    diff = (a64 - e64).abs()
    both_nan = a64.isnan() & e64.isnan()
    same = (a64 == e64) | both_nan
    diff = torch.where(same, torch.zeros_like(diff), diff.nan_to_num(nan=math.inf))
    rel = diff / e64.abs().clamp_min(1e-30)
    rel = torch.where(same, torch.zeros_like(rel), rel)
    max_abs = float(diff.max())
    max_rel = float(rel.max())
    close = same | (diff <= atol + rtol * e64.abs())
    if bool(close.all()):
        return {"ok": True, "max_abs_err": max_abs, "max_rel_err": max_rel, "message": None}
    bad = ~close
    nbad = int(bad.sum())
    worst = torch.where(bad, diff, torch.zeros_like(diff))
    flat = int(worst.reshape(-1).argmax())
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape)) if a.dim() else ()
    msg = (f"{nbad} / {bad.numel()} elements differ beyond atol={atol:g}, rtol={rtol:g}; worst at index "
           f"{list(idx)}: {a64[idx].item()!r} (kernel) vs {e64[idx].item()!r} (reference)")
    return {"ok": False, "max_abs_err": max_abs, "max_rel_err": max_rel, "message": msg}


def _expected_outputs(kernel, case: Case, ref_fn) -> dict:
    """Run the reference on clones of the inputs: ``{output name: expected}``."""
    args = _clone(tuple(case.args))
    kwargs = _clone(dict(case.kwargs))
    got = ref_fn(*args, **kwargs)
    if isinstance(got, dict):
        if case.outputs:
            missing = [o for o in case.outputs if o not in got]
            if missing:
                raise ValueError(f"the reference returned no value for output(s) {', '.join(missing)}")
            return {o: got[o] for o in case.outputs}
        return dict(got)
    if case.grid is None and (not case.outputs or list(case.outputs) == ["return"]):
        return {"return": got}
    if not case.outputs:
        raise ValueError("the reference returned a tensor: name the output parameter(s) with Case(outputs=(...)) "
                         "or return a dict {parameter name: expected}")
    vals = list(got) if isinstance(got, (tuple, list)) else [got]
    if len(vals) != len(case.outputs):
        raise ValueError(f"the reference returned {len(vals)} value(s) for {len(case.outputs)} output(s)")
    return dict(zip(case.outputs, vals))


def _oracle(kernel):
    """A deuteron kernel's eager oracle, when it has one (``verify_reference``: its ``ref``, or for a kernel whose
    ``ref`` cannot stand for it -- an `if` on where a tile of tunable size starts -- its default config's output)."""
    for attr in ("verify_reference", "ref", "eager", "reference", "__dt_eager__", "run_eager"):
        fn = getattr(kernel, attr, None)
        if callable(fn):
            return fn
    return None


def _synchronize(dev: str):
    if dev == "cuda":
        try:
            from newt.runtime import synchronize
            synchronize()
        except ImportError:  # pragma: no cover
            _torch().cuda.synchronize()


def _launch(kernel, case: Case):
    if case.grid is None:
        return kernel(*case.args, **case.kwargs)
    return kernel[case.grid](*case.args, **case.kwargs)


def is_fatal(exc) -> bool:
    """Errors after which the process must not touch the GPU again (a faulted CUDA context)."""
    if getattr(exc, "sticky", False):
        return True
    text = f"{type(exc).__name__}: {exc}"
    return any(s in text for s in ("illegal memory access", "CUDA_ERROR_ILLEGAL", "misaligned address",
                                   "unspecified launch failure", "device-side assert", "CUDA error: an illegal"))


def _cases_of(ex: Example, dev: str) -> list[Case]:
    got = ex.fn(dev)
    cases = list(got) if isinstance(got, (list, tuple)) else [got]
    for i, c in enumerate(cases):
        if not isinstance(c, Case):
            raise TypeError(f"example {ex.name} must return newt.harness.Case objects, got {type(c).__name__}")
        if c.name is None:
            c.name = ex.name if len(cases) == 1 else f"{ex.name}[{i}]"
        if c.atol is None:
            c.atol = ex.atol
        if c.rtol is None:
            c.rtol = ex.rtol
    return cases


def _short_error(exc) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 4000 else text[:4000] + " ..."


def verify(kernel, dev: str | None = None, name: str | None = None, on_case=None) -> dict:
    """Run every example of ``kernel`` and compare with its reference.

    Returns ``{kernel, ok, device, cases: [{name, ok, max_abs_err, max_rel_err, message}], message, fatal}``;
    ``device`` is ``"cuda"`` or ``"interpreter"``.  ``on_case(case_result)`` is called after each case.
    """
    dev = dev or device()
    kname = name or getattr(kernel, "__name__", "kernel")
    exs = examples_for(kernel)
    report = {"kernel": kname, "ok": False, "device": "cuda" if dev == "cuda" else "interpreter", "cases": [],
              "message": None, "fatal": False}
    if not exs:
        report["message"] = (f"no example inputs for {kname}: add one with @newt.harness.example({kname}) "
                             "(see newt/harness.py)")
        report["reason"] = "no_examples"
        return report
    all_ok = True
    for ex in exs:
        try:
            cases = _cases_of(ex, dev)
        except Exception as e:
            report["cases"].append({"name": ex.name, "ok": False, "max_abs_err": None, "max_rel_err": None,
                                    "message": f"building the example failed: {_short_error(e)}",
                                    "traceback": traceback.format_exc(limit=8)})
            all_ok = False
            if is_fatal(e):
                report["fatal"] = True
                break
            continue
        for case in cases:
            res = _run_case(kernel, case, dev)
            report["cases"].append(res)
            if on_case is not None:
                on_case(res)
            all_ok &= bool(res["ok"])
            if res.get("fatal"):
                report["fatal"] = True
                break
        if report["fatal"]:
            break
    report["ok"] = all_ok and bool(report["cases"])
    n_ok = sum(1 for c in report["cases"] if c["ok"])
    report["message"] = f"{n_ok}/{len(report['cases'])} case(s) match the reference on {report['device']}"
    return report


def _run_case(kernel, case: Case, dev: str) -> dict:
    res = {"name": case.name, "ok": False, "max_abs_err": None, "max_rel_err": None, "message": None}
    ref_fn = case.reference or reference_for(kernel)
    if ref_fn is None and case.grid is None:
        ref_fn = _oracle(kernel)
    if ref_fn is None:
        res["message"] = ("no reference: pass Case(reference=...) or register one with "
                          "@newt.harness.reference(kernel)")
        return res
    try:
        expected = _expected_outputs(kernel, case, ref_fn)
    except Exception as e:
        res["message"] = f"the reference failed: {_short_error(e)}"
        res["traceback"] = traceback.format_exc(limit=8)
        res["fatal"] = is_fatal(e)
        return res
    t0 = time.perf_counter()
    try:
        ret = _launch(kernel, case)
        _synchronize(dev)
    except Exception as e:
        res["message"] = f"the kernel failed: {_short_error(e)}"
        res["traceback"] = traceback.format_exc(limit=8)
        res["fatal"] = is_fatal(e)
        return res
    res["ms"] = (time.perf_counter() - t0) * 1e3
    bound = _bind(kernel, case.args, case.kwargs)
    worst_abs, worst_rel, ok, msgs = 0.0, 0.0, True, []
    for out_name, exp in expected.items():
        if out_name == "return":
            actual = ret
        elif out_name in bound:
            actual = bound[out_name]
        else:
            ok = False
            msgs.append(f"{out_name!r} is not a parameter of the kernel")
            continue
        if actual is None:
            ok = False
            msgs.append(f"{out_name}: the kernel produced nothing")
            continue
        try:
            c = compare(actual, exp, case.atol, case.rtol)
        except Exception as e:
            ok = False
            msgs.append(f"{out_name}: cannot compare: {_short_error(e)}")
            continue
        if c["max_abs_err"] is not None:
            worst_abs = max(worst_abs, c["max_abs_err"])
            worst_rel = max(worst_rel, c["max_rel_err"])
        if not c["ok"]:
            ok = False
            msgs.append(f"{out_name}: {c['message']}")
    res.update(ok=ok, max_abs_err=worst_abs, max_rel_err=worst_rel, message="; ".join(msgs) or None)
    return res


# ---------------------------------------------------------------------------
# autotuning
# ---------------------------------------------------------------------------


def _autotuner(kernel):
    x = kernel
    for _ in range(8):
        if hasattr(x, "configs") and hasattr(x, "prune_configs"):
            return x
        x = getattr(x, "fn", None)
        if x is None:
            break
    return None


def autotune(kernel, dev: str | None = None, name: str | None = None, on_config=None, should_stop=None) -> dict:
    """Time every config of an ``@newt.autotune`` kernel on its first example case (a plain ``@newt.jit``
    kernel: the launch options of its example, see :func:`_launch_space`; a deuteron kernel: its own search).

    ``on_config(entry)`` is called after each config with ``{config, ms, error}``; ``should_stop()`` is polled
    between configs (cancellation).  Each config's output is checked against the reference (a config that
    computes a wrong result is rejected).  The winner is stored where the runtime looks for it: the
    autotuner's in-memory cache and the disk cache (read by kernels with ``cache_results=True``).

    Returns ``{kernel, device, best: {config, ms} | None, results: [...], cache, cancelled, message}``.
    """
    dev = dev or device()
    kname = name or getattr(kernel, "__name__", "kernel")
    out = {"kernel": kname, "device": "cuda" if dev == "cuda" else "interpreter", "best": None, "results": [],
           "cache": None, "cancelled": False, "message": None, "fatal": False}
    at = _autotuner(kernel)
    if at is None and callable(getattr(kernel, "autotune", None)) and hasattr(kernel, "config_space"):
        return _autotune_self_tuning(kernel, kname, dev, out, on_config, should_stop)
    plain = False
    if at is None:
        if not getattr(kernel, "__newt_jit__", False):
            out["message"] = f"{kname} is not autotuned: decorate it with @newt.autotune(configs=[...], key=[...])"
            return out
        plain = True  # a plain @newt.jit kernel: the search space comes from its example (see _launch_space)
    exs = examples_for(kernel) or (examples_for(at) if at is not None else [])
    if not exs:
        out["message"] = (f"no example inputs for {kname} to autotune on: add one with "
                          f"@newt.harness.example({kname}) (see newt/harness.py)")
        out["reason"] = "no_examples"
        return out
    try:
        case = _cases_of(exs[0], dev)[0]
    except Exception as e:
        out["message"] = f"building the example failed: {_short_error(e)}"
        out["fatal"] = is_fatal(e)
        return out
    args, kwargs, grid = tuple(case.args), dict(case.kwargs), case.grid
    if plain:
        at, kwargs = _launch_space(kernel, kwargs, grid)
    pristine = _clone(args)  # the timing runs may accumulate into outputs: each check starts from these
    ref_fn = case.reference or reference_for(kernel) or reference_for(at)
    expected = None
    if ref_fn is not None:
        try:
            expected = _expected_outputs(at, case, ref_fn)
        except Exception as e:
            out["message"] = f"the reference failed: {_short_error(e)}"
            return out
    nargs = _bind(at, args, kwargs)
    try:
        configs = list(at.prune_configs(kwargs, nargs))
    except Exception as e:
        out["message"] = f"pruning the configs failed: {_short_error(e)}"
        return out
    if dev == "cuda" and len(configs) > 1:  # compile them all first on newt.tune's workers (in parallel)
        try:
            for _ in at._compiled(configs, args, kwargs):
                if should_stop is not None and should_stop():
                    break  # closing the generator cancels every worker
        except Exception:  # each config's own error is reported by the loop below
            pass
    timings = {}
    for cfg in configs:
        if should_stop is not None and should_stop():
            out["cancelled"] = True
            break
        entry = {"config": _config_json(cfg), "ms": None, "error": None}
        try:
            ms = _bench_config(at, cfg, args, kwargs, grid, dev)
            if expected is not None:
                problems = _check_outputs(at, pristine, kwargs, grid, cfg, expected, case, dev)
                if problems:
                    entry["error"] = "wrong result: " + problems
            if entry["error"] is None:
                entry["ms"] = ms
                timings[cfg] = ms
        except Exception as e:
            entry["error"] = _short_error(e)
            if is_fatal(e):
                out["results"].append(entry)
                if on_config is not None:
                    on_config(entry)
                out["fatal"] = True
                out["message"] = f"a config crashed the GPU context: {entry['error']}"
                return out
        out["results"].append(entry)
        if on_config is not None:
            on_config(entry)
    if timings:
        best = min(timings, key=timings.get)
        out["best"] = {"config": _config_json(best), "ms": timings[best]}
        if plain:  # nothing to store it in: the kernel launches with what its call site passes
            out["cache"] = {"memory": False, "disk": None, "used_on_disk": False, "plain_kernel": True}
        elif not out["cancelled"]:
            out["cache"] = _store_best(at, args, kwargs, best, timings)
        out["message"] = f"best of {len(timings)} config(s): {best} ({timings[best]:.4g} ms)"
        if plain:
            out["message"] += (f"; {kname} is a plain @newt.jit kernel: pass these values at its launch, or "
                               f"decorate it with @newt.autotune to keep choosing")
    elif not out["cancelled"]:
        out["message"] = "no config ran successfully"
    return out


#: the launch options a plain kernel's Autotune tries (each config's result is checked against the reference)
PLAIN_NUM_WARPS = (2, 4, 8)
PLAIN_NUM_STAGES = (1, 2, 3)


def _launch_space(kernel, kwargs: dict, grid):
    """Autotune for a plain ``@newt.jit`` kernel (no ``@newt.autotune``): an autotuner over its example's launch.

    The options that never change what a kernel computes are searched: ``num_warps`` x ``num_stages``
    (``PLAIN_NUM_WARPS`` x ``PLAIN_NUM_STAGES``, plus the example's own values).  When the example's grid is a
    function of the meta-parameters (``grid=lambda meta: ...``), every power-of-two constexpr of the example
    (a block size) is also tried at half and twice its value, since the grid follows it; with a fixed grid the
    constexprs stay as the example gives them.  Returns the autotuner and the example's keyword arguments
    without the ones the configs now set.
    """
    from newt.tune.autotuner import Autotuner, Config
    constexprs = set(getattr(kernel, "constexpr_names", ()) or ())
    fixed = {k: v for k, v in kwargs.items() if k in constexprs}
    # a kernel with a parameter of that name (Triton's softmax tutorial: ``num_stages: tl.constexpr``) keeps it
    warps = [int(kwargs.get("num_warps", 4))] if "num_warps" in constexprs else sorted(
        {*PLAIN_NUM_WARPS, int(kwargs.get("num_warps", 4))})
    stages = [int(kwargs.get("num_stages", 3))] if "num_stages" in constexprs else sorted(
        {*PLAIN_NUM_STAGES, int(kwargs.get("num_stages", 3))})
    choices = [dict(fixed)]
    if callable(grid):
        for k, v in fixed.items():
            if type(v) is int and v >= 2 and v & (v - 1) == 0 and k not in ("num_warps", "num_stages"):
                choices = [{**c, k: x} for c in choices for x in (v // 2, v, v * 2)]
        choices = choices[:27]  # three block sizes at most are varied (3**3 value sets)
    configs = [Config({k: v for k, v in c.items() if k not in ("num_warps", "num_stages")}, num_warps=w, num_stages=s)
               for c in choices for w in warps for s in stages]
    rest = {k: v for k, v in kwargs.items() if k not in constexprs and k not in ("num_warps", "num_stages")}
    at = Autotuner(kernel, kernel.arg_names, configs, key=[])
    return at, rest


class _Stop(Exception):
    pass


def _autotune_self_tuning(kernel, kname, dev, out, on_config, should_stop) -> dict:
    """Kernels that tune themselves (deuteron: ``kernel.autotune(*args, callback=...)`` over their config space,
    each config checked against the eager oracle); their progress events become ``on_config`` entries."""
    exs = examples_for(kernel)
    if not exs:
        out["message"] = (f"no example inputs for {kname} to autotune on: add one with "
                          f"@newt.harness.example({kname}) (see newt/harness.py)")
        out["reason"] = "no_examples"
        return out
    try:
        case = _cases_of(exs[0], dev)[0]
    except Exception as e:
        out["message"] = f"building the example failed: {_short_error(e)}"
        out["fatal"] = is_fatal(e)
        return out

    def callback(ev):
        if not isinstance(ev, dict) or ev.get("kind") != "report":
            return
        ok = ev.get("status") == "ok" and ev.get("ms") is not None
        pruned = ev.get("status") == "hopeless"  # correct, but a first estimate already lost: not an error
        entry = {"config": _config_text(ev.get("config")), "ms": float(ev["ms"]) if ok else None,
                 "error": None if ok or pruned else (ev.get("error") or ev.get("status") or "failed")}
        if pruned:
            entry["pruned"] = ev.get("error") or "stopped early: slower than the best so far"
        out["results"].append(entry)
        if on_config is not None:
            on_config(entry)
        if should_stop is not None and should_stop():
            out["cancelled"] = True
            raise _Stop()

    try:
        best = kernel.autotune(*case.args, callback=callback, force=True, **case.kwargs)
    except _Stop:
        return out
    except Exception as e:
        out["message"] = f"autotuning failed: {_short_error(e)}"
        out["fatal"] = is_fatal(e)
        return out
    if out["cancelled"]:
        return out
    timed = [r for r in out["results"] if r["ms"] is not None]
    best_cfg = _config_text(best)
    best_ms = next((r["ms"] for r in timed if r["config"] == best_cfg), None)
    if best_ms is None and timed:
        best_ms = min(r["ms"] for r in timed)
    out["best"] = {"config": best_cfg, "ms": best_ms}
    out["cache"] = {"memory": True, "disk": None, "used_on_disk": True}
    out["message"] = f"best of {len(timed)} config(s): {best} ({best_ms:.4g} ms)" if best_ms is not None else \
        f"best config: {best}"
    return out


def _config_text(cfg) -> dict:
    """A config as a JSON object: dicts (and objects with ``to_dict``) as they are, else ``{"config": str}``."""
    if cfg is None:
        return {}
    if isinstance(cfg, dict):
        return {str(k): (v if isinstance(v, (int, float, str, bool)) or v is None else repr(v)) for k, v in cfg.items()}
    for attr in ("to_dict", "as_dict"):
        f = getattr(cfg, attr, None)
        if callable(f):
            try:
                return _config_text(f())
            except Exception:
                break
    return {"config": str(cfg)}


def _config_json(cfg) -> dict:
    d = {k: (v if isinstance(v, (int, float, str, bool)) or v is None else repr(v))
         for k, v in getattr(cfg, "kwargs", {}).items()}
    for k in ("num_warps", "num_stages"):
        v = getattr(cfg, k, None)
        if v is not None:
            d[k] = v
    return d


def _call_config(at, cfg, args, kwargs, grid):
    nargs = _bind(at, args, kwargs)
    nargs.update(cfg.all_kwargs())
    if getattr(cfg, "pre_hook", None) is not None:
        cfg.pre_hook(nargs)
    for n in getattr(at, "reset_to_zero", []) or []:
        if _is_tensor(nargs.get(n)):
            nargs[n].zero_()
    at.fn.run(*args, grid=grid, **cfg.all_kwargs(), **kwargs)


def _bench_config(at, cfg, args, kwargs, grid, dev) -> float:
    saved = [(n, _clone(_bind(at, args, kwargs).get(n))) for n in (getattr(at, "restore_value", []) or [])]

    def call():
        _call_config(at, cfg, args, kwargs, grid)
        for n, v in saved:
            b = _bind(at, args, kwargs)
            if _is_tensor(b.get(n)):
                b[n].copy_(v)

    if dev == "cuda" and not _interpreted(at):
        call()  # compile (and surface launch errors) outside the timing
        _synchronize(dev)
        from newt.testing import do_bench
        t = do_bench(call, warmup=getattr(at, "num_warmup", 25), rep=getattr(at, "num_rep", 100),
                     quantiles=(0.5,))
        return float(t[0] if isinstance(t, (list, tuple)) else t)
    call()  # the interpreter: first run includes building the IR
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1e3


def _interpreted(at) -> bool:
    f = getattr(at, "is_interpreted", None)
    try:
        return bool(f()) if callable(f) else False
    except Exception:
        return False


def _check_outputs(at, args, kwargs, grid, cfg, expected, case, dev) -> str:
    fresh = _clone(tuple(args))
    fkw = _clone(dict(kwargs))
    _call_config(at, cfg, fresh, fkw, grid)
    _synchronize(dev)
    bound = _bind(at, fresh, fkw)
    msgs = []
    for out_name, exp in expected.items():
        actual = bound.get(out_name)
        if actual is None:
            continue
        c = compare(actual, exp, case.atol, case.rtol)
        if not c["ok"]:
            msgs.append(f"{out_name}: {c['message']}")
    return "; ".join(msgs)


def _store_best(at, args, kwargs, best, timings) -> dict:
    """Store the winner where the runtime finds it: in memory, and on disk (``cache_results=True`` kernels)."""
    info = {"memory": False, "disk": None, "used_on_disk": bool(getattr(at, "cache_results", False))}
    try:
        key = at._tuning_key(args, kwargs)
        at.cache[key] = best
        getattr(at, "_launch_kw", {}).pop(key, None)
        info["memory"] = True
    except Exception:
        return info
    try:
        from newt.runtime import cache as rcache
        dk = at._disk_key(key)
        rcache.get_cache().put_json(dk, {"index": at.configs.index(best), "config": str(best),
                                         "timings": {str(c): t for c, t in timings.items()}}, "autotune")
        root = getattr(rcache.get_cache(), "root", None)
        info["disk"] = {"key": dk, "dir": str(root) if root is not None else None}
    except Exception as e:  # the disk cache may be off; the in-memory winner still counts
        info["disk_error"] = _short_error(e)
    return info
