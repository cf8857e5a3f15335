"""``@newt.autotune``, ``newt.Config`` and ``@newt.heuristics``.

The autotuner benchmarks every config (after pruning) the first time it sees
a tuning key (the values of the ``key`` arguments plus the dtypes of the
tensor arguments), keeps the fastest and launches it from then on.  The
configs compile in parallel -- in worker processes of the tuning executor
(``newt.tune``) from 8 configs on, else in threads (NVRTC releases the GIL) --
and each is timed as soon as it is compiled;
configs that fail to compile (e.g. out of shared memory) or to run are
skipped with the reason logged (logger ``newt.autotune``) and kept in
``kernel.failed_configs``.  ``NEWT_PRINT_AUTOTUNING=1`` prints each tuning
result.  ``cache_results=True`` also stores the winner on disk.

Through the interpreter (``NEWT_INTERPRET=1``) each config runs once and the
CPU wall-clock time decides, so autotuned kernels work without a GPU.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import time

from newt.diagnostics import CompilationError
from newt.runtime.errors import LaunchError, OutOfResources

log = logging.getLogger("newt.autotune")



def _check_tuning_entry(value) -> None:
    """``ValueError`` unless a disk-cached tuning result is ``{"index": int >= 0, "config": str, "timings":
    {str: number | None}}`` (what ``_tune`` writes); anything else is removed from the cache and tuned again."""
    if not isinstance(value, dict):
        raise ValueError("malformed tuning entry: not an object")
    idx = value.get("index")
    if type(idx) is not int or idx < 0 or not isinstance(value.get("config"), str):
        raise ValueError("malformed tuning entry: no index or no config")
    t = value.get("timings", {})
    if not isinstance(t, dict) or not all(v is None or type(v) in (int, float) for v in t.values()):
        raise ValueError("malformed tuning entry: bad timings")

class Config:
    """One autotuning configuration: constexpr values plus launch options.

    ``pre_hook(nargs)`` runs before each launch with this config (``nargs``: the
    kernel's arguments by name, config values included).
    """

    def __init__(self, kwargs: dict, num_warps: int = 4, num_stages: int = 3, num_ctas: int = 1,
                 maxnreg=None, pre_hook=None):
        if not isinstance(kwargs, dict):
            raise TypeError(f"newt.Config: kwargs must be a dict of constexpr values, got {type(kwargs).__name__}")
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self) -> dict:
        d = dict(self.kwargs)
        d["num_warps"] = self.num_warps
        d["num_stages"] = self.num_stages
        if self.num_ctas != 1:
            d["num_ctas"] = self.num_ctas
        if self.maxnreg is not None:
            d["maxnreg"] = self.maxnreg
        return d

    def _ident(self):
        return (tuple(sorted((k, repr(v)) for k, v in self.kwargs.items())), self.num_warps, self.num_stages,
                self.num_ctas, self.maxnreg)

    def __eq__(self, other):
        return isinstance(other, Config) and self._ident() == other._ident()

    def __hash__(self):
        return hash(self._ident())

    def __str__(self):
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps: {self.num_warps}", f"num_stages: {self.num_stages}"]
        if self.num_ctas != 1:
            parts.append(f"num_ctas: {self.num_ctas}")
        if self.maxnreg is not None:
            parts.append(f"maxnreg: {self.maxnreg}")
        return ", ".join(parts)

    def __repr__(self):
        return f"Config({self})"


def _base(fn):
    while not hasattr(fn, "_miss") and hasattr(fn, "fn"):
        fn = fn.fn
    return fn


class KernelInterface:
    """What ``@newt.autotune`` / ``@newt.heuristics`` objects share with ``JITFunction``."""

    __newt_jit__ = True

    def _init_from(self, fn):
        self.fn = fn
        self.base = _base(fn)
        b = self.base
        self.__name__ = getattr(b, "__name__", "kernel")
        self.__qualname__ = getattr(b, "__qualname__", self.__name__)
        self.__module__ = getattr(b, "__module__", None)
        self.__doc__ = getattr(b, "__doc__", None)
        self.arg_names = list(b.arg_names)
        self.signature = b.signature
        self.constexpr_names = set(b.constexpr_names)

    def jit_source(self):
        return self.base.jit_source()

    def fingerprint(self) -> str:
        return self.base.fingerprint()

    def is_interpreted(self) -> bool:
        return self.base.is_interpreted()

    def __getitem__(self, grid):
        return functools.partial(self._launch, grid)

    def grid_launcher(self):
        """The launch function ``f(grid, *args, **options)`` behind ``kernel[grid](...)``."""
        return self._launch

    def run(self, *args, grid=None, **kwargs):
        return self._launch(grid, *args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self.base(*args, **kwargs)

    def warmup(self, *args, grid=None, **kwargs):
        return self.run(*args, grid=grid, warmup=True, **kwargs)


def _check_names(kind: str, fn, names, where: str):
    for n in names:
        if n not in fn.arg_names and not (kind == "heuristics" and n in ("num_warps", "num_stages")):
            raise ValueError(f"@newt.{kind} on {fn.__name__}: {where} {n!r} is not a parameter of {fn.__name__} "
                             f"(parameters: {', '.join(fn.arg_names)})")


class Autotuner(KernelInterface):
    def __init__(self, fn, arg_names, configs, key, reset_to_zero=None, restore_value=None, pre_hook=None,
                 post_hook=None, prune_configs_by=None, warmup=25, rep=100, do_bench=None, cache_results=False,
                 use_cuda_graph=False, executor=None):
        self._init_from(fn)
        if not configs:
            configs = [Config({})]
        configs = list(configs)
        for c in configs:
            if not isinstance(c, Config):
                raise TypeError(f"@newt.autotune on {self.__name__}: configs must be newt.Config objects, got {c!r}")
            _check_names("autotune", self, [k for k in c.kwargs if k not in ("num_warps", "num_stages")],
                         f"config {{{c}}} sets")
        self.configs = configs
        self.keys = list(key or [])
        _check_names("autotune", self, self.keys, "key")
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        _check_names("autotune", self, self.reset_to_zero, "reset_to_zero")
        _check_names("autotune", self, self.restore_value, "restore_value")
        self.user_pre_hook = pre_hook
        self.user_post_hook = post_hook
        prune_configs_by = prune_configs_by or {}
        self.perf_model = prune_configs_by.get("perf_model")
        self.top_k = prune_configs_by.get("top_k", 1.0)
        self.early_config_prune = prune_configs_by.get("early_config_prune")
        self.num_warmup = 25 if warmup is None else warmup
        self.num_rep = 100 if rep is None else rep
        self.user_do_bench = do_bench
        self.cache_results = cache_results
        self.use_cuda_graph = bool(use_cuda_graph)
        self.executor = executor  # None: "auto" (see _executor)
        self.cache: dict = {}  # tuning key -> Config
        self._launch_kw: dict = {}  # tuning key -> (Config, its launch kwargs)
        self.best_config: Config | None = None
        self.configs_timings: dict | None = None
        self.failed_configs: dict = {}  # Config -> reason (last tuning)
        self.bench_time = 0.0
        self._benchmarked = False  # the last tuning ran benchmarks (reset_to_zero arguments are dirty)
        self._key_pos = [(self.arg_names.index(k), k) for k in self.keys]
        self._defaults = {n: p.default for n, p in self.signature.parameters.items()
                          if p.default is not p.empty}
        self._key_fn = None  # args -> tuning key, for launches with the argument types seen first
        self._c_launch = None  # the compiled TuneDispatcher of those launches (_launch.c), where it can be had
        self._config_names = set()
        for c in configs:
            self._config_names.update(c.kwargs)

    # -- the launch path ----------------------------------------------------------------
    def _tuning_key(self, args, kwargs):
        n = len(args)
        key = []
        for i, name in self._key_pos:
            if i < n:
                key.append(args[i])
            else:
                key.append(kwargs.get(name, self._defaults.get(name)))
        for a in args:
            dt = getattr(a, "dtype", None)
            if dt is not None:
                key.append(dt)
        for a in kwargs.values():
            dt = getattr(a, "dtype", None)
            if dt is not None:
                key.append(dt)
        return tuple(key)

    def _getitem_py(self, grid):
        return functools.partial(self._c_launch or self._launch, grid)

    __getitem__ = _getitem_py  # the compiled GridGetItem once a TuneDispatcher is made (_c_tuner)

    def grid_launcher(self):
        """The launch function ``f(grid, *args, **options)`` behind ``kernel[grid](...)``."""
        return self._c_launch or self._launch

    def _launch(self, grid, /, *args, **kwargs):
        if not kwargs:  # the hot path: a known tuning key (see _key_function)
            kf = self._key_fn
            if kf is not None:
                key = kf(args)
                if key is not None:
                    hit = self._launch_kw.get(key)
                    if hit is not None:
                        config, ckw, fast = hit
                        self.best_config = config
                        if config.pre_hook is not None:
                            config.pre_hook(self._nargs(args, kwargs, config))
                        if fast is not None:  # the config's launch function: no keyword arguments to pass
                            return fast(grid, *args)
                        return self.fn.grid_launcher()(grid, *args, **ckw)
        return self._launch_general(grid, args, kwargs)

    def _launch_general(self, grid, args, kwargs):
        if "grid" in kwargs:
            raise TypeError(f"{self.__name__}(): the grid is given by {self.__name__}[grid](...) (or "
                            f"{self.__name__}.run(..., grid=...)); do not pass grid= to the launch as well")
        warmup = kwargs.pop("warmup", False)
        if kwargs and not self._config_names.isdisjoint(kwargs):
            clash = sorted(self._config_names.intersection(kwargs))
            raise ValueError(f"{self.__name__}: {', '.join(map(repr, clash))} "
                             f"{'is' if len(clash) == 1 else 'are'} set by the autotune configs and must not be "
                             "passed at launch (conflicting meta-parameters)")
        if warmup:
            return self.warmup_all(args, kwargs)
        key = self._tuning_key(args, kwargs)
        try:
            hit = self._launch_kw.get(key)
        except TypeError:  # an unhashable key value
            key = tuple(map(repr, key))
            hit = self._launch_kw.get(key)
        if hit is None:
            config = self.cache.get(key)
            if config is None:
                config = self._tune(key, args, kwargs, grid)
                if self.reset_to_zero and self._benchmarked:
                    # the tuning runs accumulated into these: the real launch starts from zero (as Triton)
                    nargs = self._nargs(args, kwargs)
                    for n in self.reset_to_zero:
                        nargs[n].zero_()
            ckw = config.all_kwargs()
            preset = getattr(self.fn, "preset_launcher", None)  # a JITFunction's (not a Heuristics')
            hit = self._launch_kw[key] = (config, ckw, preset(ckw) if preset is not None else None)
            if not kwargs and self._key_fn is None:
                self._key_fn = _key_function(self._key_pos, args)
                if self._key_fn is not None:
                    self._c_launch = _c_tuner(self, args)
        config, ckw, _ = hit
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook(self._nargs(args, kwargs, config))
        return self.fn.grid_launcher()(grid, *args, **ckw, **kwargs)

    def _nargs(self, args, kwargs, config=None) -> dict:
        d = dict(zip(self.arg_names, args))
        d.update(kwargs)
        if config is not None:
            d.update(config.all_kwargs())
        return d

    # -- tuning -------------------------------------------------------------------------
    def prune_configs(self, kwargs: dict, nargs: dict | None = None) -> list:
        pruned = list(self.configs)
        nargs = nargs if nargs is not None else {}
        if self.early_config_prune is not None:
            pruned = list(self.early_config_prune(self.configs, nargs, **kwargs))
            if not pruned:
                raise RuntimeError(f"{self.__name__}: early_config_prune removed every config")
        if self.perf_model is not None:
            top_k = self.top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(pruned) * top_k))
            if len(pruned) > top_k:
                est = {c: self.perf_model(**nargs, **kwargs, **c.all_kwargs()) for c in pruned}
                pruned = sorted(est, key=lambda c: est[c])[:top_k]
        return pruned

    def _disk_key(self, key) -> str:
        from newt.runtime import cache, compiler, driver
        from newt.runtime.jit import default_target
        target = default_target()
        if driver.has_gpu() and not self.is_interpreted():
            info = driver.device_info(driver.current_device_fn()())
            target = f"{info.name}/{info.target}"
        return cache.hash_key({
            "kernel": self.fingerprint(), "newt": compiler.package_fingerprint(), "device": target,
            "configs": [str(c) for c in self.configs], "key": [compiler.stable_repr(_plain(k)) for k in key],
            "interpret": self.is_interpreted(),
        })

    def _tune(self, key, args, kwargs, grid):
        from newt.runtime import cache
        self._benchmarked = False
        if self.cache_results:
            dk = self._disk_key(key)
            hit = cache.get_cache().get_json(dk, "autotune", validate=_check_tuning_entry)
            if hit is not None:
                idx = hit.get("index")
                if isinstance(idx, int) and 0 <= idx < len(self.configs) and str(self.configs[idx]) == hit.get(
                        "config"):
                    cfg = self.configs[idx]
                    self.cache[key] = cfg
                    if _print_autotuning():
                        print(f"newt autotuning: {self.__name__} key {key}: best config {{{cfg}}} (from the disk "
                              "cache)")
                    return cfg
        nargs = self._nargs(args, kwargs)
        pruned = self.prune_configs(kwargs, nargs)
        t0 = time.perf_counter()
        self.failed_configs = {}
        if len(pruned) == 1:
            best = pruned[0]
            timings = {best: None}
        else:
            timings = {}
            self._benchmarked = True
            for c in self._compiled(pruned, args, kwargs):  # as they compile: timing overlaps compilation
                if c in self.failed_configs:
                    continue
                timings[c] = self._bench(c, args, kwargs, grid)
            timings = {c: timings.get(c, [math.inf] * 3) for c in pruned}  # the configs' order, for ties
            ok = {c: t for c, t in timings.items() if math.isfinite(t[0])}
            if not ok:
                reasons = "; ".join(f"{{{c}}}: {r}" for c, r in self.failed_configs.items())
                raise RuntimeError(f"{self.__name__}: no autotune config could run for key {key}: {reasons}")
            best = min(ok, key=lambda c: ok[c][0])
        self.bench_time = time.perf_counter() - t0
        self.configs_timings = timings
        self.cache[key] = best
        if self.cache_results and len(pruned) > 1:
            cache.get_cache().put_json(self._disk_key(key), {
                "index": self.configs.index(best), "config": str(best),
                "timings": {str(c): (t[0] if t else None) for c, t in timings.items()},
            }, "autotune")
        if _print_autotuning():
            print(f"newt autotuning: {self.__name__} key {key}: {len(pruned)} configs in {self.bench_time:.2f}s; "
                  f"best config {{{best}}}" + (f" ({timings[best][0]:.4f} ms)" if timings.get(best) else ""))
            for c, t in timings.items():
                if t is not None:
                    extra = f"  skipped: {self.failed_configs[c]}" if c in self.failed_configs else ""
                    print(f"    {{{c}}}: {t[0]:.4f} ms{extra}")
        return best

    def _skip(self, config, exc):
        reason = f"{type(exc).__name__}: {exc}".strip()
        first = reason.splitlines()[0] if reason else type(exc).__name__
        self.failed_configs[config] = reason
        level = logging.INFO if isinstance(exc, OutOfResources) else logging.WARNING
        log.log(level, "newt autotune: %s: skipping config {%s}: %s", self.__name__, config, first)

    def _executor(self, n: int):
        """The tuning executor for ``n`` configs, or None to compile in threads of this process.

        ``executor=`` of ``@newt.autotune`` (an executor, ``"local"``, ``"dask"``, ``"serial"``,
        ``"threads"``); by default (``"auto"``) worker processes once there are ``NEWT_TUNE_MIN_CONFIGS``
        (8) configs, or whenever ``NEWT_TUNE_CLUSTER`` / ``NEWT_TUNE_EXECUTOR`` ask for them."""
        ex = self.executor if self.executor is not None else os.environ.get("NEWT_TUNE_AUTOTUNE", "auto")
        if ex == "threads" or os.environ.get("NEWT_TUNE_WORKER") == "1":
            return None
        if ex == "auto":
            explicit = os.environ.get("NEWT_TUNE_CLUSTER") or os.environ.get("NEWT_TUNE_EXECUTOR")
            if not explicit and n < int(os.environ.get("NEWT_TUNE_MIN_CONFIGS", "8")):
                return None
            from newt.tune import shared_executor
            return shared_executor()
        from newt.tune import get_executor
        if isinstance(ex, str):
            self.executor = ex = get_executor(ex)
        return ex

    def _compiled(self, configs, args, kwargs):
        """Yield the configs as they are compiled (failures recorded in ``failed_configs``, yielded too)."""
        ex = None if self.is_interpreted() or len(configs) < 2 else self._executor(len(configs))
        if ex is not None:
            from newt.tune.tasks import in_importable_module
            if not in_importable_module(self.fn):  # a script's kernel: compiled here (in_importable_module)
                ex = None
        tasks = None
        if ex is not None:
            from newt.tune import compile_spec_for
            tasks = []
            for c in configs:
                try:
                    a, kw = self._config_descriptors(c, args, kwargs)
                    tasks.append(compile_spec_for(self.fn, a, {**c.kwargs, **kw}, c.num_warps, c.num_stages,
                                                  maxnreg=c.maxnreg))
                except Exception:  # a bad call: the in-process warm-up below raises it
                    tasks.append(None)
            if sum(t is not None for t in tasks) < 2:
                tasks = None
        if tasks is None:
            self._precompile(configs, args, kwargs)
            yield from configs
            return
        from newt.tune import AdaptiveTimeout, compile_stream
        for i, res in compile_stream(tasks, ex, timeout=AdaptiveTimeout()):
            c = configs[i]
            st = res.get("status")
            if st == "timeout":
                self._skip(c, TimeoutError(f"compiling took longer than {res.get('seconds', 0):.3g} s"))
            elif st == "crashed":
                self._skip(c, RuntimeError(f"the compiler crashed: {res.get('message')}"))
            else:
                # compiled (now in the caches: this loads it), or failed there: compiling here reproduces the
                # very exception the serial path raises, and classifies it the same way
                self._precompile([c], args, kwargs)
            yield c

    def _precompile(self, configs, args, kwargs):
        """Compile every config (threads: NVRTC runs outside the GIL); failures are recorded."""
        def one(c):
            try:
                a, kw = self._config_descriptors(c, args, kwargs)
                self.fn.run(*a, grid=None, warmup=True, **c.all_kwargs(), **kw)
                return None
            except Exception as e:
                return e

        # through the interpreter this builds each config's IR, so the timed runs do not include it
        nthreads = 1 if self.is_interpreted() else \
            int(os.environ.get("NEWT_COMPILE_THREADS", "0") or 0) or min(8, os.cpu_count() or 1)
        if nthreads > 1 and len(configs) > 1:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(min(nthreads, len(configs))) as ex:
                errs = list(ex.map(one, configs))
        else:
            errs = [one(c) for c in configs]
        for c, e in zip(configs, errs):
            if e is not None:
                if _is_fatal(e):
                    raise e
                self._skip(c, e)

    def _config_descriptors(self, config, args, kwargs):
        """The arguments a config compiles with.  A tensor descriptor's block is part of the specialization, and
        libraries make the descriptor with a placeholder block that each config's ``pre_hook`` replaces before
        its launch (Liger's ``mlp.py``: ``block_shape=[1, 1, 1]``, then ``nargs["desc_input"].block_shape =
        [1, BLOCK_M, BLOCK_K]``); compiling ahead of the launch must see that config's block too.  So where a
        config with a ``pre_hook`` meets a descriptor argument, the hook runs on copies of the descriptors
        (the caller's are untouched, and configs compiled in parallel do not share them)."""
        if config.pre_hook is None:
            return args, kwargs
        from newt.tools.tensor_descriptor import is_descriptor
        if not any(is_descriptor(v) for v in (*args, *kwargs.values())):
            return args, kwargs
        import copy
        a = [copy.copy(v) if is_descriptor(v) else v for v in args]
        kw = {k: copy.copy(v) if is_descriptor(v) else v for k, v in kwargs.items()}
        nargs = dict(zip(self.arg_names, a))
        nargs.update(kw)
        nargs.update(config.all_kwargs())
        config.pre_hook(nargs)
        return ([nargs.get(n, v) for n, v in zip(self.arg_names, a)] + a[len(self.arg_names):],
                {k: nargs.get(k, v) for k, v in kw.items()})

    def _bench(self, config, args, kwargs, grid):
        nargs = self._nargs(args, kwargs, config)
        launch_kwargs = dict(config.all_kwargs(), **kwargs)

        def call():
            if config.pre_hook is not None:
                config.pre_hook(nargs)
            self._pre_hook(nargs)
            try:
                self.fn.grid_launcher()(grid, *args, **launch_kwargs)
            finally:
                self._post_hook(nargs)

        try:
            if self.user_do_bench is not None:
                t = self.user_do_bench(call, quantiles=(0.5, 0.2, 0.8))
            elif self.is_interpreted():
                t = _cpu_time(call)
            elif self.use_cuda_graph:
                from newt.tune.bench import bench
                t = bench(call, warmup=self.num_warmup, rep=self.num_rep, use_cuda_graph=True)["quantiles"]
            else:
                from newt.testing import do_bench
                t = do_bench(call, warmup=self.num_warmup, rep=self.num_rep, quantiles=(0.5, 0.2, 0.8))
        except Exception as e:
            if _is_fatal(e):
                raise
            self._skip(config, e)
            return [math.inf] * 3
        if isinstance(t, (int, float)):
            t = [float(t)] * 3
        return list(t)

    def _pre_hook(self, nargs):
        if self.reset_to_zero:
            for n in self.reset_to_zero:
                nargs[n].zero_()
        if self.restore_value:
            self._restore_copies = [nargs[n].clone() for n in self.restore_value]
        if self.user_pre_hook is not None:
            self.user_pre_hook(nargs)

    def _post_hook(self, nargs):
        if self.restore_value:
            for n, saved in zip(self.restore_value, self._restore_copies):
                nargs[n].copy_(saved)
            self._restore_copies = []
        if self.user_post_hook is not None:
            self.user_post_hook(nargs, None)

    def warmup_all(self, args, kwargs):
        """Compile every (pruned) config; returns the compiled kernels of those that compiled."""
        nargs = self._nargs(args, kwargs)
        out = []
        for c in self.prune_configs(kwargs, nargs):
            try:
                a, kw = self._config_descriptors(c, args, kwargs)
                out.append(self.fn.run(*a, grid=None, warmup=True, **c.all_kwargs(), **kw))
            except Exception as e:
                if _is_fatal(e):
                    raise
                self._skip(c, e)
        return out


_SCALARS = (int, float, bool, type(None))


def _key_function(key_pos, args):
    """A generated ``key(args)`` equal to ``Autotuner._tuning_key(args, {})`` for arguments of the same
    types as ``args`` (tensors, ints, floats, bools, None), returning None for any other call."""
    import sys
    torch = sys.modules.get("torch")
    tensor = getattr(torch, "Tensor", None)
    n = len(args)
    if any(i >= n for i, _ in key_pos):
        return None
    g = {"T": tensor}
    checks, parts = [f"len(a) == {n}"], [f"a[{i}]" for i, _ in key_pos]
    for j, a in enumerate(args):
        if tensor is not None and type(a) is tensor:
            checks.append(f"type(a[{j}]) is T")
            parts.append(f"a[{j}].dtype")
        elif type(a) in _SCALARS:
            g[f"t{j}"] = type(a)
            checks.append(f"type(a[{j}]) is t{j}")
        else:
            return None
    src = (f"def key(a):\n    if {' and '.join(checks)}:\n        return ({', '.join(parts)}{',' if parts else ''})\n"
           "    return None\n")
    exec(compile(src, "<newt autotune key>", "exec"), g)
    return g["key"]


def _c_tuner(tuner, args):
    """The compiled ``TuneDispatcher`` for launches with the argument types of ``args`` (those
    ``_key_function`` was made for): ``_key_function``'s key, ``_launch``'s lookup in C, the rest handed
    to ``tuner._launch``; None without the extension (``NEWT_C_LAUNCHER=0``, no C compiler)."""
    import sys

    from newt.runtime import clauncher
    torch = sys.modules.get("torch")
    m = clauncher.module() if clauncher.enabled() and torch is not None else None
    if m is None or not hasattr(m, "TuneDispatcher") or len(args) > 128:
        return None
    from newt.runtime.jit import install_c_getitem
    install_c_getitem(Autotuner, "_c_launch", False)
    return m.TuneDispatcher(tuner, tuner._launch, tuner._launch_kw, tuple(type(a) for a in args),
                            tuple(i for i, _ in tuner._key_pos), torch.Tensor)


def _plain(v):
    """Tuning key values for the disk key: dtypes by name."""
    if type(v).__name__ == "dtype":
        return str(v)
    return v


def _is_fatal(e) -> bool:
    """Errors that must not be swallowed by the autotuner: the context is dead, or the call itself is wrong."""
    if isinstance(e, LaunchError) and e.sticky:
        return True
    return isinstance(e, (TypeError, KeyboardInterrupt)) and not isinstance(e, (CompilationError, OutOfResources))


def _cpu_time(call):
    t0 = time.perf_counter()
    call()
    ms = (time.perf_counter() - t0) * 1e3
    return [ms, ms, ms]


def _print_autotuning() -> bool:
    return os.environ.get("NEWT_PRINT_AUTOTUNING", "0") not in ("", "0", "false", "False")


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None, pre_hook=None,
             post_hook=None, warmup=None, rep=None, do_bench=None, cache_results=False, use_cuda_graph=False,
             executor=None):
    """Decorate a ``@newt.jit`` kernel to autotune it over ``configs`` per value of the ``key`` arguments.

    ``prune_configs_by={"perf_model": f, "top_k": k, "early_config_prune": g}``;
    ``reset_to_zero``/``restore_value``: argument names zeroed before / restored
    after each benchmark run (``reset_to_zero`` ones are zeroed again before the launch that follows
    tuning); ``cache_results=True`` keeps the winners on disk; ``use_cuda_graph=True`` times replays of a
    CUDA graph (launch-bound kernels); ``executor``: where configs compile (see :mod:`newt.tune`).
    """
    def decorator(fn):
        if not getattr(fn, "__newt_jit__", False):
            raise TypeError("@newt.autotune must decorate a @newt.jit function (put @newt.jit below it)")
        return Autotuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value, pre_hook=pre_hook,
                         post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         do_bench=do_bench, cache_results=cache_results, use_cuda_graph=use_cuda_graph,
                         executor=executor)
    return decorator


class Heuristics(KernelInterface):
    """Computes constexpr values from the other arguments at each launch."""

    def __init__(self, fn, arg_names, values: dict):
        self._init_from(fn)
        if not isinstance(values, dict):
            raise TypeError("@newt.heuristics expects a dict {parameter name: function(args) -> value}")
        _check_names("heuristics", self, list(values), "heuristic for")
        self.values = dict(values)

    def apply(self, args, kwargs: dict, nargs: dict | None = None) -> dict:
        """Put every heuristic's value into ``kwargs`` (and into ``nargs``, the arguments by name, made from
        ``args`` and ``kwargs`` when None, which the heuristics read); returns ``nargs``.  The launch and the
        tuning executor's specialization (``newt.tune.compile_spec_for``) both apply them here."""
        if nargs is None:
            nargs = dict(zip(self.arg_names, args))
            nargs.update(kwargs)
        for name, heur in self.values.items():
            v = heur(nargs)
            kwargs[name] = v
            nargs[name] = v
        return nargs

    def _launch(self, grid, /, *args, **kwargs):
        self.apply(args, kwargs)
        return self.fn.grid_launcher()(grid, *args, **kwargs)


def heuristics(values: dict):
    """``@newt.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})``."""
    def decorator(fn):
        if not getattr(fn, "__newt_jit__", False):
            raise TypeError("@newt.heuristics must decorate a @newt.jit function (or an autotuned one)")
        return Heuristics(fn, fn.arg_names, values)
    return decorator
