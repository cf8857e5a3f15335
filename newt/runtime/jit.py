"""``@newt.jit``: the kernel object users decorate functions with.

``kernel[grid](*args, num_warps=4, num_stages=3, **constexprs)`` launches it.
The front end reads the function's source through ``jit_source()``.

The launch fast path is Python code generated once per kernel (on its first
launch) with the kernel's own parameter list, so binding the arguments is
Python's own call (a wrong count raises ``TypeError: kernel() missing 1
required positional argument: 'n'``).  For each argument it computes the
specialization key entries inline (tensors: dtype and 16-byte alignment; ints:
equal to 1, 32/64-bit, divisible by 16; see ``specialize.py``), looks the flat
key tuple up in one dict and calls the specialization's launcher, which packs
the run-time arguments with one ``struct`` call into a prebuilt parameter
block.  Misses go to the slow path: specialize, compile (memory and disk
caches), load onto the device.

Where the compiled extension builds (``clauncher``), ``c_fast_path`` puts its
``Dispatcher`` in front of that generated function: for a cached
specialization it does the same binding, key and lookup in C and calls the
compiled launcher directly, and hands every other call (a miss, warmup, an
argument it does not key itself) to the generated function, which stays the
reference (tests/runtime/test_clauncher_dispatch.py compares their keys).

Interpretation (``NEWT_INTERPRET=1`` or ``@newt.jit(interpret=True)``; the
environment is read at a kernel's first launch) builds the IR and runs
``newt.interpreter.launch`` instead.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import re
import sys
import textwrap
import threading
import types

from newt.language import core as lc

from . import specialize as sp
from .grid import check_grid, normalize_grid
from .grid import check_options as _check_options

#: launch options accepted by ``kernel[grid](...)`` besides the kernel's own parameters
LAUNCH_OPTIONS = ("grid", "num_warps", "num_stages", "num_ctas", "maxnreg", "stream", "warmup",
                  "launch_cooperative_grid")
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3


def default_target() -> str:
    """The target used to compile when there is no GPU (``NEWT_TARGET``, default ``sm_90a``)."""
    return os.environ.get("NEWT_TARGET") or "sm_90a"


def interpret_env() -> bool:
    """``NEWT_INTERPRET`` is one of 1, true, yes, on (any case)."""
    return os.environ.get("NEWT_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")


class JITFunction:
    """A ``@newt.jit`` function."""

    __newt_jit__ = True

    def __init__(self, fn, *, do_not_specialize=(), interpret=None, debug=None, noinline=False, **options):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        self.__module__ = getattr(fn, "__module__", None)
        functools.update_wrapper(self, fn)
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self.constexpr_names = {n for n, p in self.signature.parameters.items() if _is_constexpr(p.annotation)}
        self.scalar_annotations = {n: a for n, p in self.signature.parameters.items()
                                   if n not in self.constexpr_names and (a := _scalar_annotation(p.annotation))}
        dns = set()
        for d in do_not_specialize:
            if isinstance(d, int):
                if not 0 <= d < len(self.arg_names):
                    raise ValueError(f"do_not_specialize: {fn.__name__} has no parameter number {d}")
                dns.add(self.arg_names[d])
            else:
                if d not in self.arg_names:
                    raise ValueError(f"do_not_specialize: {fn.__name__} has no parameter {d!r}")
                dns.add(d)
        self.do_not_specialize = dns
        self.interpret = interpret
        self.debug = bool(debug) if debug is not None else None
        self.noinline = noinline
        self.options = options
        self._jit_source = None
        self._fingerprint = None
        self._code = getattr(fn, "__code__", None)
        self._src_fn = fn  # the function object whose text the front end reads (a copy after a source update)
        if self._code is not None:
            fname = self._code.co_filename
            if fname not in linecache.cache and not os.path.exists(fname):
                # exec() of a string: while the decorator runs, the string is alive in a caller's frame
                from newt.frontend.source import recover_source
                recover_source(fn, sys._getframe(1))
        self._cache: dict = {}  # specialization key -> Launcher
        self._ir_cache: dict = {}  # interpreter: specialization -> ir.Function
        self._lock = threading.RLock()
        self.nonconst_names = [n for n in self.arg_names if n not in self.constexpr_names]

    # -- the front end's view ------------------------------------------------------
    def jit_source(self):
        """The front end's view of this function (source text, AST, globals)."""
        if self._code is not None and self.fn.__code__ is not self._code:
            self._code_changed()
        if self._jit_source is None:
            from newt.frontend.source import NoSourceError
            from newt.frontend.values import jit_source_from_function
            try:
                self._jit_source = jit_source_from_function(self._src_fn)
            except NoSourceError as e:
                raise NoSourceError(f"newt cannot read the source of kernel {self.__name__!r}: {e}") from None
        return self._jit_source

    @property
    def src(self) -> str:
        """The kernel's source from its ``def`` line on, dedented (Triton's ``JITFunction.src``)."""
        from newt.frontend.source import function_source
        if self._code is not None and self.fn.__code__ is not self._code:
            self._code_changed()
        _, lines, _ = function_source(self._src_fn)
        text = textwrap.dedent("".join(lines))
        m = re.search(r"^def\s+\w+\s*\(", text, re.MULTILINE)
        return text[m.start():] if m else text

    @src.setter
    def src(self, value):
        raise AttributeError("cannot set JITFunction.src directly: use kernel._unsafe_update_src(new_src) (and clear "
                             "the caches of kernels that call this one)")

    def _unsafe_update_src(self, new_src: str):
        """Compile this kernel from ``new_src`` from now on (Triton's hook; the tests patch kernels this way).

        ``new_src`` is the text of one function definition (decorators optional) whose globals are the
        original function's.  Compiled specializations of this kernel are forgotten; kernels that call
        it keep theirs until their own ``clear_cache()``, as in Triton.
        """
        import ast as _ast
        text = textwrap.dedent(new_src)
        tree = _ast.parse(text)
        defs = [n for n in tree.body if isinstance(n, (_ast.FunctionDef, _ast.AsyncFunctionDef))]
        if len(defs) != 1:
            raise ValueError(f"{self.__name__}: the new source must define exactly one function, got {len(defs)}")
        from newt.frontend.source import register_source
        fn = self.fn
        copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__qualname__ = fn.__qualname__
        start = defs[0].decorator_list[0].lineno if defs[0].decorator_list else defs[0].lineno
        register_source(copy, text, start=start)
        self._src_fn = copy
        self._forget_compiled()

    def _code_changed(self):
        """``fn.__code__`` was replaced: read the new code's source and forget what was compiled."""
        self._code = self.fn.__code__
        fn = self.fn
        copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__qualname__ = fn.__qualname__
        self._src_fn = copy
        self._forget_compiled()

    def _forget_compiled(self):
        self._jit_source = None
        self._fingerprint = None
        self.clear_cache()

    def fingerprint(self) -> str:
        """Hash of this kernel's source and of every jit function / constant it uses (for the disk cache)."""
        if self._fingerprint is None:
            from .compiler import source_fingerprint
            self._fingerprint = source_fingerprint(self)
        return self._fingerprint

    def __call__(self, *args, **kwargs):
        raise lc.NewtUsageError(
            f"{self.__name__} is a @newt.jit function: launch it with {self.__name__}[grid](...) "
            "or call it from another @newt.jit function")

    def __repr__(self):
        return f"JITFunction({self.__module__}:{self.__qualname__})"

    # -- launching ----------------------------------------------------------------------
    def is_interpreted(self) -> bool:
        return self.interpret if self.interpret is not None else interpret_env()

    def _getitem_py(self, grid):
        """``kernel[grid]``: a launcher for ``grid`` (a tuple of up to 3 ints, or ``callable(meta)``).

        Once the compiled extension is loaded, ``install_c_getitem`` makes the class's ``__getitem__`` its
        C equivalent (``_launch.c``'s ``GridGetItem``), which comes here whenever ``_fast`` is not
        installed yet or the function's code was replaced."""
        if self.fn.__code__ is not self._code:
            self._code_changed()
        return functools.partial(self.__dict__.get("_fast") or self._install_fast(), grid)

    __getitem__ = _getitem_py

    def run(self, *args, grid=None, **kwargs):
        """``kernel.run(*args, grid=..., num_warps=, num_stages=, warmup=False, **constexprs)``."""
        if self.fn.__code__ is not self._code:
            self._code_changed()
        return self.grid_launcher()(grid, *args, **kwargs)

    def grid_launcher(self):
        """The launch function ``f(grid, *args, **options)`` behind ``kernel[grid](...)``."""
        return self.__dict__.get("_fast") or self._install_fast()

    def warmup(self, *args, grid=None, **kwargs):
        """Compile (and load, when there is a GPU) without launching; returns the CompiledKernel.

        Tensors may be replaced by their ``torch.dtype``.  Without a GPU it compiles for
        ``NEWT_TARGET`` (default ``sm_90a``).  An interpreted kernel compiles too (for ``n_regs`` & co.) and
        its compiled kernel launches through the interpreter.
        """
        if self.is_interpreted():
            if self.fn.__code__ is not self._code:
                self._code_changed()
            return self._run_interpreted(*args, grid=grid, warmup="compiled", **kwargs)
        return self.run(*args, grid=grid, warmup=True, **kwargs)

    def _install_fast(self):
        with self._lock:
            fast = self.__dict__.get("_fast")
            if fast is None:
                if self.is_interpreted():
                    interp = self._run_interpreted

                    def fast(grid, /, *args, **kwargs):
                        return interp(*args, grid=grid, **kwargs)
                else:
                    fast = c_fast_path(self, build_fast_path(self))
                    if type(fast).__name__ == "Dispatcher":
                        install_c_getitem(JITFunction, "_fast", True)
                self._fast = fast
        return fast

    def preset_launcher(self, preset: dict):
        """The launch function ``f(grid, *args, **options)`` with ``preset`` (constexpr values and
        ``num_warps`` / ``num_stages``, an autotune config's) as the defaults of those parameters and
        options: the autotuner's launch after tuning passes no keyword arguments.  It shares this kernel's
        specializations; None when interpreted (the autotuner then passes the config as keywords)."""
        if self.is_interpreted():
            return None
        try:
            key = tuple(sorted(preset.items()))
            hash(key)
        except TypeError:
            return c_fast_path(self, build_fast_path(self, preset), preset)
        presets = self.__dict__.setdefault("_presets", {})
        fast = presets.get(key)
        if fast is None:
            with self._lock:
                fast = presets.get(key)
                if fast is None:
                    fast = presets[key] = c_fast_path(self, build_fast_path(self, preset), preset)
        return fast

    def clear_cache(self):
        """Forget compiled specializations (the disk cache is untouched)."""
        self._cache.clear()
        self._ir_cache.clear()
        self.__dict__.pop("_fast", None)
        self.__dict__.pop("_presets", None)

    # -- the slow path ---------------------------------------------------------------------
    def _miss(self, key, dev, values, num_warps, num_stages, num_ctas, warmup, cooperative=False, maxnreg=None):
        """Specialize, compile and load; remember the launcher under ``key``."""
        from . import compiler, driver
        _check_options(self.__name__, num_warps, num_stages, num_ctas, maxnreg)
        entries, cvals = {}, {}
        if self.scalar_annotations:
            _check_scalar_annotations(self, values)
        for n, v in zip(self.arg_names, values):
            if n in self.constexpr_names:
                cvals[n] = v
                continue
            _, a, b = sp.key_entries(self.__name__, n, v, n in self.do_not_specialize,
                                     check_cuda=dev >= 0 and not warmup)
            if not warmup and (leaf := sp.dtype_leaf(v, n)):
                raise TypeError(f"{self.__name__}(): argument {leaf!r} is a dtype; pass a tensor to launch "
                                "(dtypes are accepted by warmup only)")
            entries[n] = (a, b)
        spec = sp.spec_from_entries(self, entries, cvals)
        if dev >= 0:
            target = driver.device_info(dev).target
        else:
            target = default_target()
        ck = compiler.compile_specialization(self, spec.arg_types, spec.constexprs, spec.divisibility, target,
                                             num_warps, num_stages, bool(self.debug), fingerprint=self.fingerprint(),
                                             maxnreg=maxnreg)
        rt = [p.name for p in ck.params]
        if rt != spec.runtime_names:
            raise RuntimeError(f"{self.__name__}: the compiled kernel's parameters {rt} differ from the "
                               f"specialization's {spec.runtime_names}")
        if dev >= 0:
            sel = [(self.nonconst_names.index(spec.leaf_paths[n][0]),) + spec.leaf_paths[n][1]
                   if n in spec.leaf_paths else self.nonconst_names.index(n) for n in rt]
            launcher = driver.Launcher(ck, dev, n_values=len(self.nonconst_names), select=sel,
                                       blocking=bool(self.debug), cooperative=bool(cooperative))
        else:
            launcher = driver.NoDeviceLauncher(ck)
        if key is not None:
            self._cache[key] = launcher
        return launcher

    # -- the interpreter ---------------------------------------------------------------------
    def _run_interpreted(self, *args, grid=None, num_warps=None, num_stages=None, num_ctas=1, stream=None,
                         warmup=False, launch_cooperative_grid=False, maxnreg=None, **kwargs):
        for opt, val in (("num_warps", num_warps), ("num_stages", num_stages), ("maxnreg", maxnreg)):
            if opt in self.arg_names and val is not None:
                kwargs[opt] = val
        if "maxnreg" in self.arg_names:
            maxnreg = None
        values = sp.bind(self, args, kwargs)
        named = dict(zip(self.arg_names, values))
        if num_warps is None:
            num_warps = named.get("num_warps", DEFAULT_NUM_WARPS) if "num_warps" in named else DEFAULT_NUM_WARPS
        if num_stages is None:
            num_stages = named.get("num_stages", DEFAULT_NUM_STAGES) if "num_stages" in named else \
                DEFAULT_NUM_STAGES
        _check_options(self.__name__, num_warps, num_stages, num_ctas, maxnreg)  # (checked; no effect when interpreted)
        if self.scalar_annotations:
            _check_scalar_annotations(self, values)
        spec = sp.specialize(self, tuple(values), {})
        key = (spec.key, num_warps, num_stages)
        irfn = self._ir_cache.get(key)
        if irfn is None:
            from newt.frontend import build_ir
            irfn = build_ir(self, spec.arg_types, spec.constexprs, spec.divisibility, num_warps=num_warps,
                            num_stages=num_stages)
            self._ir_cache[key] = irfn
        if warmup:
            if warmup == "compiled":  # the public kernel.warmup(...): what Triton's host code inspects
                return _interpreted_warmup(self, spec, irfn, num_warps, num_stages, maxnreg) or irfn
            return irfn
        for n, v in zip(spec.runtime_names, spec.runtime_args):
            if sp._is_torch_dtype(v):  # (tuple elements are named x.0.1 here)
                raise TypeError(f"{self.__name__}(): argument {n!r} is a dtype ({v}); pass a tensor to launch")
        meta = dict(named)
        meta["num_warps"] = num_warps
        meta["num_stages"] = num_stages
        g = normalize_grid(grid, meta, self.__name__)
        if len(g) < 3:  # a callable's short tuple
            g = normalize_grid(tuple(g), meta, self.__name__)
        check_grid(g, self.__name__)
        from newt import interpreter
        interpreter.launch(irfn, g, [sp.unwrap(v) for v in spec.runtime_args], num_warps=num_warps)
        return irfn


def _interpreted_warmup(kernel, spec, irfn, num_warps, num_stages, maxnreg):
    """``kernel.warmup(...)`` of an interpreted kernel: the compiled kernel Triton's host code inspects
    (``n_regs`` from NVRTC's ptxas report, ``metadata.shared``, ``_init_handles()``), whose ``[grid](...)``
    runs through the interpreter.  None where the CUDA build cannot be had (no NVRTC, or a kernel the
    interpreter runs but the backend refuses, e.g. too much shared memory for the target): the caller then
    returns the IR, as before."""
    import copy

    from . import compiler
    try:
        ck = compiler.compile_specialization(kernel, spec.arg_types, spec.constexprs, spec.divisibility,
                                             default_target(), num_warps, num_stages, bool(kernel.debug),
                                             fingerprint=kernel.fingerprint(), maxnreg=maxnreg)
    except Exception:  # the interpreter does not need the CUDA build
        return None
    ck = copy.copy(ck)  # (the cached one stays as it is: only this one is bound to the interpreter)
    ck.interpreted = True
    ck.ir = irfn
    return ck



def _scalar_annotation(ann) -> str | None:
    """The scalar type a parameter annotation declares (``n: int``, ``n: nl.int32``, ``n: "i64"``), else None."""
    if ann in (int, float, bool):
        return ann.__name__
    if isinstance(ann, lc.dtype):
        return repr(ann)
    if isinstance(ann, str):
        s = ann.strip()
        if s in ("int", "float", "bool"):
            return s
        if s.startswith("*"):
            return None
        for pre in ("nl.", "tl.", "newt.language.", "triton.language."):
            if s.startswith(pre):
                s = s[len(pre):]
        try:
            return repr(lc.dtype_from_name(s))
        except (ValueError, AttributeError):
            return None
    return None


def _check_scalar_annotations(kernel, values):
    """A scalar-annotated parameter given None, a tensor or a non-number: a TypeError naming it."""
    for n, v in zip(kernel.arg_names, values):
        ann = kernel.scalar_annotations.get(n)
        if ann is None or isinstance(v, (int, float)) or (hasattr(v, "__index__") and not hasattr(v, "data_ptr")):
            continue
        if isinstance(v, lc.constexpr) and isinstance(v.value, (int, float)):
            continue
        what = "None" if v is None else ("a tensor" if sp._is_tensor_like(v) else f"a {type(v).__name__}")
        raise TypeError(f"{kernel.__name__}(): argument {n!r} is declared a scalar ({ann}) but got {what}")


def _is_constexpr(ann) -> bool:
    if ann is lc.constexpr:
        return True
    if isinstance(ann, str):
        return ann.strip() in ("constexpr", "nl.constexpr", "tl.constexpr", "newt.language.constexpr",
                               "triton.language.constexpr")
    return False


# ---------------------------------------------------------------------------
# the generated fast path
# ---------------------------------------------------------------------------

_P = "_nwt_"  # prefix of every local of the generated function


class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()


def build_fast_path(kernel: JITFunction, preset: dict | None = None):
    """Generate ``launch(grid, <the kernel's parameters>, *, num_warps, num_stages, num_ctas, stream, warmup)``.

    ``kernel[grid]`` is ``functools.partial(launch, grid)`` (positional, so a
    launch merges no keyword dictionaries); ``kernel.run(..., grid=g)`` calls it
    with ``g``.  ``preset`` (``JITFunction.preset_launcher``) gives parameters and the options
    ``num_warps`` / ``num_stages`` / ``num_ctas`` new defaults; such a function also checks that the
    kernel's code was not replaced (``kernel[grid]`` checks that for the plain one).
    """
    preset = dict(preset or {})
    import torch

    from . import driver
    name = kernel.__name__
    params = kernel.signature.parameters
    for n in params:
        if n.startswith(_P):
            raise ValueError(f"{name}: parameter names must not start with {_P!r}")
        if n in ("grid", "stream", "warmup"):
            raise ValueError(f"{name}: a parameter named {n!r} clashes with the launch option of that name")
        if params[n].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD,
                              inspect.Parameter.KEYWORD_ONLY):
            raise TypeError(f"{name}: kernels take plain positional parameters only (no *args, **kwargs or "
                            "keyword-only parameters)")
    g = {
        f"{_P}Tensor": torch.Tensor, f"{_P}device": driver.current_device_fn(), f"{_P}type": type,
        f"{_P}cache": kernel._cache, f"{_P}miss": kernel._miss, f"{_P}norm_grid": normalize_grid,
        f"{_P}stream_handle": driver.stream_handle, f"{_P}name": name,
    }
    g[f"{_P}stream"] = driver.current_stream_fn() if driver.has_gpu() else (lambda dev: 0)

    def bad_kwargs(extra):
        import difflib
        k = next(iter(extra))
        hint = ""
        if k == "grid":
            raise TypeError(f"{name}(): the grid is given by {name}[grid](...) (or {name}.run(..., grid=...)); "
                            "do not pass grid= to the launch as well")
        if k in ("enable_fp_fusion", "num_buffers_warp_spec"):
            hint = " (this launch option is not supported by newt)"
        else:
            close = difflib.get_close_matches(k, kernel.arg_names + list(LAUNCH_OPTIONS), n=1)
            if close:
                hint = f" (did you mean {close[0]!r}?)"
        raise TypeError(f"{name}() got an unexpected keyword argument {k!r}{hint}")

    def missing(values):
        absent = [n for n, v in zip(kernel.arg_names, values) if v is _MISSING]
        s = "s" if len(absent) > 1 else ""
        raise TypeError(f"{name}() missing {len(absent)} required argument{s}: "
                        + ", ".join(repr(n) for n in absent))

    def entries(i, v, warmup):
        n = kernel.nonconst_names[i]
        p, a, b = sp.key_entries(name, n, v, n in kernel.do_not_specialize, check_cuda=not warmup)
        if not warmup and (leaf := sp.dtype_leaf(v, n)):
            raise TypeError(f"{name}(): argument {leaf!r} is a dtype; pass a tensor to launch "
                            "(dtypes are accepted by warmup only)")
        return p, a, b

    def intkey(v, i):
        n = kernel.nonconst_names[i]
        kind = sp.int_kind(v, n)
        return kind, (n not in kernel.do_not_specialize and v % 16 == 0)

    def not_cuda(i, v, sub=""):  # (sub: "[0]" for a descriptor's base, the compiled dispatcher's check of it)
        n = kernel.nonconst_names[i] + sub
        sp.tensor_entry(name, n, v)  # a meta tensor: its own message, naming the parameter
        if not sub and not driver.has_gpu():
            raise RuntimeError(f"{name}: no CUDA GPU is available to launch this kernel; run it through the "
                               "interpreter with NEWT_INTERPRET=1 (or @newt.jit(interpret=True)), or use "
                               "kernel.warmup(...) / newt.compile(...) to compile without launching")
        sp.raise_not_cuda(name, n, v)

    g[f"{_P}bad_kwargs"] = bad_kwargs
    g[f"{_P}missing"] = missing

    def too_many(extra):
        n = len(kernel.arg_names)
        raise TypeError(f"{name}() takes {n} argument{'s' if n != 1 else ''} ({', '.join(kernel.arg_names)}) "
                        f"but {n + extra} were given")
    g[f"{_P}too_many"] = too_many
    g[f"{_P}M"] = _MISSING
    g[f"{_P}entries"] = entries
    g[f"{_P}intkey"] = intkey
    g[f"{_P}not_cuda"] = not_cuda

    for k in preset:
        if k not in params and k not in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
            raise TypeError(f"{name}(): a preset names {k!r}, which is neither a parameter nor a launch option")
    sig = []
    required = []
    for n, p in params.items():
        if n in preset:
            g[f"{_P}d_{n}"] = preset[n]
            sig.append(f"{n}={_P}d_{n}")
        elif p.default is inspect.Parameter.empty:
            sig.append(f"{n}={_P}M")
            required.append(n)
        else:
            g[f"{_P}d_{n}"] = p.default
            sig.append(f"{n}={_P}d_{n}")
    opts = []
    nw_expr = "num_warps" if "num_warps" in params else None
    ns_expr = "num_stages" if "num_stages" in params else None
    for opt, dflt in (("num_warps", "None"), ("num_stages", "None"), ("num_ctas", "1"), ("maxnreg", "None")):
        if opt not in params:
            if opt in preset:
                g[f"{_P}o_{opt}"] = preset[opt]
                dflt = f"{_P}o_{opt}"
            opts.append(f"{opt}={dflt}")
    coop = "launch_cooperative_grid" if "launch_cooperative_grid" not in params else f"{_P}coop"
    opts += ["stream=None", "warmup=False", f"{coop}=False", f"**{_P}extra"]
    L = [f"def {name}({_P}grid, {', '.join(sig)}{', ' if sig else ''}*{_P}more, {', '.join(opts)}):"]
    if preset:  # the kernel's code replaced (kernel.fn.__code__ = ...): the plain path re-reads it
        g[f"{_P}fn"], g[f"{_P}code"] = kernel.fn, kernel._code

        def regen(grid, named, options):
            return kernel.run(grid=grid, **named, **options)
        g[f"{_P}regen"] = regen
        named = ", ".join(f"{n!r}: {n}" for n in kernel.arg_names)
        optnames = [o for o in ("num_warps", "num_stages", "num_ctas", "maxnreg") if o not in params]
        options = ", ".join([f"{o!r}: {o}" for o in optnames] + ["'stream': stream", "'warmup': warmup",
                                                                  f"'launch_cooperative_grid': {coop}"])
        L.append(f"    if {_P}fn.__code__ is not {_P}code:")
        L.append(f"        return {_P}regen({_P}grid, {{{named}}}, {{{options}}})")
    L.append(f"    if {_P}more:")
    L.append(f"        {_P}too_many(len({_P}more))")
    L.append(f"    if {_P}extra:")
    L.append(f"        {_P}bad_kwargs({_P}extra)")
    if required:
        L.append(f"    if {' or '.join(f'{n} is {_P}M' for n in required)}:")
        L.append(f"        {_P}missing(({', '.join(kernel.arg_names)},))")
    if nw_expr is None:
        L.append("    if num_warps is None:")
        L.append(f"        num_warps = {DEFAULT_NUM_WARPS}")
    if ns_expr is None:
        L.append("    if num_stages is None:")
        L.append(f"        num_stages = {DEFAULT_NUM_STAGES}")
    key = []
    for i, n in enumerate(kernel.nonconst_names):
        dns = n in kernel.do_not_specialize
        p, a, b = f"{_P}p{i}", f"{_P}a{i}", f"{_P}b{i}"
        L.append(f"    if {_P}type({n}) is {_P}Tensor:")
        L.append(f"        {p} = {n}.data_ptr()")
        L.append(f"        {a} = {n}.dtype")
        L.append(f"        {b} = False" if dns else f"        {b} = not ({p} & 15)")
        L.append(f"        if not {n}.is_cuda and not warmup:")
        L.append(f"            {_P}not_cuda({i}, {n})")
        L.append(f"    elif {_P}type({n}) is int:")
        L.append(f"        {p} = {n}")
        if dns:
            L.append(f"        if -2147483648 <= {n} <= 2147483647:")
            L.append(f"            {a} = 'i32'")
            L.append(f"            {b} = False")
        else:
            L.append(f"        if {n} == 1:")
            L.append(f"            {a} = 'c1'")
            L.append(f"            {b} = None")
            L.append(f"        elif -2147483648 <= {n} <= 2147483647:")
            L.append(f"            {a} = 'i32'")
            L.append(f"            {b} = not ({n} & 15)")
        L.append("        else:")
        L.append(f"            {a}, {b} = {_P}intkey({n}, {i})")
        L.append("    else:")
        L.append(f"        {p}, {a}, {b} = {_P}entries({i}, {n}, warmup)")
        key += [a, b]
    for n in kernel.arg_names:
        if n in kernel.constexpr_names:
            key += [n, f"{_P}type({n})"]
    key += ["num_warps", "num_stages", "num_ctas", coop, f"{_P}dev"]
    allvals = ", ".join(kernel.arg_names) + ("," if len(kernel.arg_names) == 1 else "")
    L.append(f"    {_P}dev = {_P}device()")
    L.append(f"    {_P}key = ({', '.join(key)})")
    mx = "maxnreg" if "maxnreg" not in params else "None"  # (a parameter of that name: no such launch option)
    if mx != "None":
        L.append("    if maxnreg is not None:  # a register cap: another build (the C dispatcher leaves it here)")
        L.append(f"        {_P}key = {_P}key + (maxnreg,)")
    L.append("    try:")
    L.append(f"        {_P}k = {_P}cache[{_P}key]")
    L.append("    except KeyError:")
    L.append(f"        {_P}k = {_P}miss({_P}key, {_P}dev, ({allvals}), num_warps, num_stages, num_ctas, "
             f"warmup, {coop}, {mx})")
    L.append("    except TypeError:  # an unhashable constexpr value: no caching by key")
    L.append(f"        {_P}k = {_P}miss(None, {_P}dev, ({allvals}), num_warps, num_stages, num_ctas, "
             f"warmup, {coop}, {mx})")
    L.append("    if warmup:")
    L.append(f"        return {_P}k.kernel")
    meta = ", ".join([f"{n!r}: {n}" for n in kernel.arg_names] + ["'num_warps': num_warps",
                                                                   "'num_stages': num_stages"])
    L.append(f"    if {_P}type({_P}grid) is not tuple or not 0 < len({_P}grid) < 4:")
    L.append(f"        {_P}grid = {_P}norm_grid({_P}grid, {{{meta}}}, {_P}name)")
    L.append(f"    if len({_P}grid) == 1:")
    L.append(f"        {_P}gx = {_P}grid[0]")
    L.append(f"        {_P}gy = {_P}gz = 1")
    L.append(f"    elif len({_P}grid) == 2:")
    L.append(f"        {_P}gx, {_P}gy = {_P}grid")
    L.append(f"        {_P}gz = 1")
    L.append("    else:")
    L.append(f"        {_P}gx, {_P}gy, {_P}gz = {_P}grid")
    L.append("    if stream is None:")
    L.append(f"        {_P}s = {_P}stream({_P}dev)")
    L.append("    else:")
    L.append(f"        {_P}s = {_P}stream_handle(stream)")
    pvals = "".join(f", {_P}p{i}" for i in range(len(kernel.nonconst_names)))
    L.append(f"    {_P}k.launch({_P}gx, {_P}gy, {_P}gz, {_P}s{pvals})")
    L.append(f"    return {_P}k.kernel")
    src = "\n".join(L) + "\n"
    filename = f"<newt launch fast path of {name}>"
    exec(compile(src, filename, "exec"), g)
    fn = g[name]
    fn.__qualname__ = name
    fn.__newt_source__ = src
    return fn


def install_c_getitem(cls, fast_attr: str, check_code: bool):
    """Make ``cls.__getitem__`` (``kernel[grid]``) the extension's ``GridGetItem``: ``Bound(getattr(kernel,
    fast_attr), grid)`` in C where that attribute is set (and, with ``check_code``, ``kernel.fn.__code__`` is
    still ``kernel._code``), else ``kernel._getitem_py(grid)``, the Python ``__getitem__``, which it
    replaces.  Done once, when the first compiled dispatcher of such a kernel is made."""
    if type(cls.__dict__.get("__getitem__")).__name__ == "GridGetItem":
        return
    from . import clauncher
    m = clauncher.module()
    if m is not None and hasattr(m, "GridGetItem"):
        cls.__getitem__ = m.GridGetItem(fast_attr, "_getitem_py", check_code)


def c_fast_path(kernel: JITFunction, py_fast, preset: dict | None = None):
    """The compiled dispatcher (``_launch.c``'s ``Dispatcher``) in front of ``py_fast`` (what
    ``build_fast_path(kernel, preset)`` made): for a cached specialization it binds the arguments, computes
    the same key as ``py_fast``, finds the launcher in ``kernel._cache`` and launches, all in C; every other
    call (a miss, warmup, arguments it does not key itself) goes to ``py_fast`` unchanged.  Returns
    ``py_fast`` itself where the extension cannot be had (``NEWT_C_LAUNCHER=0``, no C compiler) or the
    kernel is outside what the dispatcher handles (a parameter named ``launch_cooperative_grid``, more than
    128 parameters)."""
    from . import clauncher
    params = kernel.signature.parameters
    if "launch_cooperative_grid" in params or len(params) > 128 or not clauncher.enabled():
        return py_fast
    if (preset or {}).get("maxnreg") is not None and "maxnreg" not in params:
        return py_fast  # the dispatcher keys num_warps / num_stages / num_ctas only (a maxnreg= keyword: py_fast)
    m = clauncher.module()
    torch = sys.modules.get("torch")
    if m is None or not hasattr(m, "Dispatcher") or torch is None:
        return py_fast
    preset = dict(preset or {})
    g = py_fast.__globals__
    names = tuple(sys.intern(n) for n in params)
    kinds = bytes((1 if n in kernel.constexpr_names else 0) | (2 if n in kernel.do_not_specialize else 0)
                  for n in names)
    defaults = tuple(preset[n] if n in preset else (p.default if p.default is not inspect.Parameter.empty
                                                    else _MISSING) for n, p in params.items())
    opt_defaults = (preset.get("num_warps"), preset.get("num_stages"), preset.get("num_ctas", 1))
    opt_params = tuple(names.index(o) if o in params else -1 for o in ("num_warps", "num_stages", "num_ctas"))
    fn, code = (kernel.fn, kernel._code) if preset else (None, None)
    from .grid import normalize_grid_value
    return m.Dispatcher(py_fast, g[f"{_P}cache"], names, kinds, defaults, _MISSING, opt_defaults, opt_params,
                        torch.Tensor, g[f"{_P}device"], g[f"{_P}stream"], g[f"{_P}stream_handle"],
                        g[f"{_P}not_cuda"], normalize_grid_value, kernel.__name__, fn, code, sp.desc_type())


class ConstexprFunction:
    """``@newt.constexpr_function``: a plain Python function a kernel may call on compile-time values.

    In a kernel, its arguments must be known at compile time (constexprs, literals, dtypes, shapes);
    it runs in Python while the kernel is compiled and its result is a compile-time value.  Called
    outside a kernel it is the plain function.
    """

    __newt_constexpr_function__ = True

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"newt.constexpr_function expects a function, got {type(fn).__name__}")
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        args = [a.value if isinstance(a, lc.constexpr) else a for a in args]
        kwargs = {k: v.value if isinstance(v, lc.constexpr) else v for k, v in kwargs.items()}
        return self.fn(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self):
        return f"constexpr_function({getattr(self.fn, '__qualname__', self.fn)})"


def constexpr_function(fn):
    """Decorate a Python function so kernels can call it on compile-time values (Triton's ``constexpr_function``)."""
    return ConstexprFunction(fn)


def jit(fn=None, **kwargs):
    """Decorate a kernel: ``@newt.jit`` or ``@newt.jit(do_not_specialize=[...], interpret=True, debug=True)``."""
    if fn is None:
        return lambda f: JITFunction(f, **kwargs)
    return JITFunction(fn, **kwargs)
