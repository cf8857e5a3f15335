"""Interpreting a ``@newt.jit`` kernel from its Python launch arguments (tests and tools).

``launch_jit(kernel, grid, args, kwargs, mode=None)`` does what ``kernel[grid](*args, **kwargs)`` does on
the GPU: specialize on the arguments like the JIT, build the IR (cached per specialization), and run it
through ``newt.interpreter.launch`` (``mode``: ``"vectorized"``/``"sequential"``, default automatic).
``build(kernel, args, kwargs)`` returns the ``(ir.Function, Specialization)`` it would run.  It lives in
the runtime layer because it specializes; the interpreter itself only runs IR.
"""

from __future__ import annotations

import inspect
import sys
import weakref

from newt import interpreter

from .specialize import specialize, unwrap

_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "stream", "warmup", "enable_fp_fusion",
                   "debug", "launch_cooperative_grid")

_IR_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def build(kernel, args=(), kwargs=None):
    """Specialize ``kernel`` on launch arguments and build its IR (cached per specialization).

    Returns ``(ir.Function, Specialization)``.  Launch options (``num_warps``,
    ``num_stages`` ...) in ``kwargs`` are taken out first.
    """
    from newt.frontend import build_ir

    kwargs = dict(kwargs or {})
    opts = {k: kwargs.pop(k) for k in list(kwargs) if k in _LAUNCH_OPTIONS}
    num_warps = opts.get("num_warps")
    num_stages = opts.get("num_stages")
    from .grid import check_options  # (the GPU launch's checks: num_warps=3 is refused here too)
    check_options(getattr(kernel, "__name__", "kernel"), 4 if num_warps is None else num_warps,
                  3 if num_stages is None else num_stages, 1 if opts.get("num_ctas") is None else opts["num_ctas"],
                  opts.get("maxnreg"))
    spec = specialize(kernel, tuple(args), kwargs)
    key = (spec.key, num_warps, num_stages)
    try:
        per_kernel = _IR_CACHE.setdefault(kernel, {})
    except TypeError:  # not weak-referenceable
        per_kernel = {}
    fn = per_kernel.get(key)
    if fn is None:
        fn = build_ir(kernel, spec.arg_types, spec.constexprs, spec.divisibility, num_warps=num_warps,
                      num_stages=num_stages)
        for line in getattr(fn, "static_prints", ()) or ():
            print(line, file=sys.stdout)
        per_kernel[key] = fn
    return fn, spec


def _meta(kernel, args, kwargs):
    sig = getattr(kernel, "signature", None)
    if sig is None:
        sig = inspect.signature(kernel.fn)
    kw = {k: v for k, v in kwargs.items() if k not in _LAUNCH_OPTIONS}
    ba = sig.bind_partial(*args, **kw)
    ba.apply_defaults()
    meta = dict(ba.arguments)
    for k in _LAUNCH_OPTIONS:
        if k in kwargs:
            meta[k] = kwargs[k]
    return meta


def launch_jit(kernel, grid, args=(), kwargs=None, *, mode: str | None = None, stdout=None):
    """Interpret ``kernel[grid](*args, **kwargs)``: specialize, build the IR, run it on the CPU."""
    kwargs = dict(kwargs or {})
    args = tuple(args)
    if callable(grid):
        grid = grid(_meta(kernel, args, kwargs))
    fn, spec = build(kernel, args, kwargs)
    from .grid import check_grid
    g = (grid,) if isinstance(grid, int) else tuple(grid)
    check_grid(tuple(int(d) for d in g) + (1,) * (3 - len(g)), getattr(kernel, "__name__", "kernel"))
    interpreter.launch(fn, grid, [unwrap(v) for v in spec.runtime_args], num_warps=kwargs.get("num_warps") or 4,
                       mode=mode, stdout=stdout)
    return fn
