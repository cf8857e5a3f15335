"""The ``helion`` package served by deuteron in newt's drop-in mode (``python -m newt.dropin``).

deuteron registers the module alias ``helion`` -> ``deuteron`` with newt's front end (the editor reads
Helion files through it); newt's drop-in import hook serves ``import helion`` from this module's
:func:`module_for` (newt finds it as ``<own package>.dropin``).  So a Helion file runs as it is:

=================================  =============================================================================
``helion``                         deuteron's top level: ``kernel`` (``config=``, ``configs=``,
                                   ``static_shapes=``, ``autotune_effort=`` and Helion's other settings),
                                   ``Kernel``, ``Config``, ``exc``, ``cdiv``, ``next_power_of_2``, ``language``,
                                   ``runtime``, ``autotuner``
``helion.language`` (``hl``)       ``deuteron.language``: every ``hl.*`` name deuteron implements
``helion.exc``                     ``deuteron.exc``
``helion.runtime``                 ``get_num_sm``; ``helion.runtime.settings._get_backend()`` is ``"triton"``
                                   (deuteron generates newt, the Triton language)
``helion.autotuner``               the config fragments (``PowerOfTwoFragment``, ``EnumFragment`` ...);
(``.config_fragment``,             ``benchmarking.do_bench_generic`` times a function (newt's ``do_bench``)
``.benchmarking``)
``helion._testing``                Helion's example harness: ``DEVICE`` (cuda when torch sees a GPU, else cpu),
                                   ``HALF_DTYPE``, ``LONG_INT_TYPE``, ``run_example`` (each kernel against the
                                   first baseline that runs, at the example's tolerances, forward and with
                                   ``bwd=True`` backward; timed with ``do_bench`` only on a GPU), ``do_bench``
``helion._compat``                 ``use_tileir_tunables()`` is False
=================================  =============================================================================

Anything else of Helion is a ``ModuleNotFoundError`` / ``AttributeError`` naming what is missing.
"""

from __future__ import annotations

import importlib
import types

__all__ = ["module_for", "has_module", "run_example", "HELION_NAMES"]

#: deuteron's top-level names Helion has under ``helion.`` (the rest of Helion's API is ``hl.``)
HELION_NAMES = ("kernel", "Kernel", "Config", "ConfigError", "cdiv", "next_power_of_2", "exc")


def _facade(name: str, doc: str, attrs: dict, fallback=None) -> types.ModuleType:
    m = types.ModuleType(name, doc)
    m.__dict__.update(__newt_dropin__=True, __path__=[])
    m.__dict__.update(attrs)

    def getattr_(attr):
        if f"{name}.{attr}" in _MODULES:
            val = importlib.import_module(f"{name}.{attr}")
        elif fallback is not None and hasattr(fallback, attr):
            val = getattr(fallback, attr)
        else:
            raise AttributeError(f"module {name!r} has no attribute {attr!r} (deuteron serves Helion's API; "
                                 "this name has no deuteron counterpart)")
        setattr(m, attr, val)
        return val

    m.__dict__["__getattr__"] = getattr_
    return m


def _make_helion():
    import deuteron
    from deuteron._version import __version__
    attrs = {n: getattr(deuteron, n) for n in HELION_NAMES}
    attrs["__version__"] = __version__
    return _facade("helion", "Helion's API served by deuteron (newt's drop-in mode).", attrs)


def _make_language():
    import deuteron.language as dl
    return dl


def _make_exc():
    return importlib.import_module("deuteron.exc")


def _make_runtime():
    from deuteron.runtime import get_num_sm
    return _facade("helion.runtime", "helion.runtime (deuteron).", {"get_num_sm": get_num_sm})


def _make_settings():
    return _facade("helion.runtime.settings", "helion.runtime.settings (deuteron).",
                   {"_get_backend": lambda: "triton"})


def _make_autotuner():
    import deuteron
    frags = {n: getattr(deuteron, n) for n in ("PowerOfTwoFragment", "IntegerFragment", "EnumFragment",
                                               "BooleanFragment", "Config")}
    return _facade("helion.autotuner", "helion.autotuner (deuteron): the config fragments.", frags)


def _make_config_fragment():
    import deuteron
    frags = {n: getattr(deuteron, n) for n in ("PowerOfTwoFragment", "IntegerFragment", "EnumFragment",
                                               "BooleanFragment")}
    return _facade("helion.autotuner.config_fragment", "helion.autotuner.config_fragment (deuteron).", frags)


def do_bench(fn, *args, **kwargs) -> float:
    """Time ``fn()`` in milliseconds (newt's ``do_bench``; Helion's ``warmup``/``rep`` keywords pass on)."""
    from newt.testing import do_bench as nb
    keep = {k: v for k, v in kwargs.items() if k in ("warmup", "rep", "quantiles", "return_mode", "grad_to_none")}
    return nb(fn, **keep)


def _make_benchmarking():
    return _facade("helion.autotuner.benchmarking", "helion.autotuner.benchmarking (deuteron).",
                   {"do_bench": do_bench, "do_bench_generic": do_bench})


def _as_tensors(x) -> tuple:
    import torch
    if isinstance(x, torch.Tensor):
        return (x,)
    if isinstance(x, (tuple, list)):
        return tuple(t for t in x if isinstance(t, torch.Tensor))
    return ()


def _clone(args):
    import torch
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            c = a.detach().clone()
            c.requires_grad_(a.requires_grad)
            out.append(c)
        elif isinstance(a, list):
            out.append([t.clone() if isinstance(t, torch.Tensor) else t for t in a])
        else:
            out.append(a)
    return out


def _compare(r, e, rtol, atol, max_mismatch_pct=None, max_mismatched_abs_diff=None):
    import torch
    r, e = r.detach().to(torch.float32), e.detach().to(torch.float32)
    if max_mismatch_pct is not None and r.shape == e.shape:
        bad = ~torch.isclose(r, e, rtol=rtol, atol=atol, equal_nan=True)
        within = max_mismatched_abs_diff is None or not bad.any() or \
            float((r - e).abs()[bad].max()) <= max_mismatched_abs_diff
        if bad.float().mean().item() <= max_mismatch_pct and within:
            return
    torch.testing.assert_close(r, e, rtol=rtol, atol=atol)


def _check_backward(fn, base, args, rtol, atol):
    import torch
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    if not leaves:
        raise AssertionError("run_example(bwd=True): no argument requires grad")
    out = base(*args)
    grad = torch.randn_like(out)
    out.backward(grad, retain_graph=True)
    want = [t.grad.clone() if t.grad is not None else None for t in leaves]
    for t in leaves:
        t.grad = None
    fn(*args).backward(grad, retain_graph=True)
    for t, w in zip(leaves, want):
        if (w is None) != (t.grad is None):
            raise AssertionError("run_example(bwd=True): a gradient is missing")
        if w is not None:
            torch.testing.assert_close(t.grad.float(), w.float(), rtol=rtol, atol=atol)
        t.grad = None


def run_example(kernel_fn, baseline_fn, args, kernel_name="helion", baseline_name="torch", rtol=1e-2, atol=1e-1,
                max_mismatch_pct=None, max_mismatched_abs_diff=None, bwd=False, **_unused) -> dict:
    """Helion's ``run_example``: every kernel (one, or a dict of them) against the first baseline that runs
    (a baseline that needs a GPU library fails on the CPU; the next one is used), at ``rtol``/``atol``
    (``max_mismatch_pct``: the fraction of elements allowed outside them), forward and with ``bwd=True``
    backward; an ``AssertionError`` on a mismatch.  Returns each implementation's ``do_bench`` time in ms when
    torch sees a GPU, else ``{}`` (timing the interpreter says nothing)."""
    kernels = kernel_fn if isinstance(kernel_fn, dict) else {kernel_name: kernel_fn}
    baselines = baseline_fn if isinstance(baseline_fn, dict) else {baseline_name: baseline_fn}
    expected, base = None, None
    items = list(baselines.items())
    for i, (_, b) in enumerate(items):
        try:
            expected = _as_tensors(b(*args))
            base = b
            break
        except Exception:
            if i == len(items) - 1:
                raise
    for _, fn in kernels.items():
        got = _as_tensors(fn(*_clone(args)))
        if len(got) != len(expected):
            raise AssertionError(f"{len(got)} outputs, the baseline has {len(expected)}")
        for r, e in zip(got, expected):
            _compare(r, e, rtol, atol, max_mismatch_pct, max_mismatched_abs_diff)
        if bwd:
            _check_backward(fn, base, args, rtol, atol)
    from newt.runtime import has_gpu
    if not has_gpu():
        return {}
    return {name: do_bench(lambda f=f: f(*args)) for name, f in {**kernels, **baselines}.items()}


def _make_testing():
    import torch

    from newt.runtime import has_gpu
    attrs = {"DEVICE": torch.device("cuda") if has_gpu() else torch.device("cpu"), "HALF_DTYPE": torch.float16,
             "LONG_INT_TYPE": torch.int64, "run_example": run_example, "do_bench": do_bench}
    return _facade("helion._testing", "Helion's example harness (deuteron).", attrs)


def _make_compat():
    return _facade("helion._compat", "helion._compat (deuteron).", {"use_tileir_tunables": lambda: False})


_CACHE: dict = {}


def _once(make):
    def get():
        m = _CACHE.get(make.__name__)
        if m is None:
            m = _CACHE[make.__name__] = make()
        return m
    return get


_MODULES = {
    "helion": _once(_make_helion),
    "helion.language": _make_language,
    "helion.exc": _make_exc,
    "helion.runtime": _once(_make_runtime),
    "helion.runtime.settings": _once(_make_settings),
    "helion.autotuner": _once(_make_autotuner),
    "helion.autotuner.config_fragment": _once(_make_config_fragment),
    "helion.autotuner.benchmarking": _once(_make_benchmarking),
    "helion._testing": _once(_make_testing),
    "helion._compat": _once(_make_compat),
}


def has_module(fullname: str) -> bool:
    return fullname in _MODULES


def module_for(fullname: str) -> types.ModuleType:
    make = _MODULES.get(fullname)
    if make is None:
        raise ModuleNotFoundError(f"No module named {fullname!r} (deuteron serves Helion's API; it has no such "
                                  "module)", name=fullname)
    return make()
