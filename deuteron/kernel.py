"""``@dt.kernel``: the kernel object.

Calling a kernel runs its host code eagerly; each outermost tile loop becomes
one generated newt kernel, compiled once per (argument signature, config) and
launched.  The config comes from ``config=``, the autotuner (``configs=`` or
a search over the kernel's space) or the on-disk config cache.

Importing this module does not import torch.
"""

from __future__ import annotations

import functools
import inspect
import os

from . import language as L
from .config import Config, ConfigError
from .errors import DeuteronError
from .hostrun import (  # noqa: F401  (re-exported)
    _CallRun,
    _guards_hold,
    _HostRun,
    _np2,
    _runtime_args,
    args_getter,
    constexpr_params,
    guard_checker,
)
from .structure import EFFORTS

__all__ = ["Kernel", "kernel"]


def kernel(fn=None, *, config=None, configs=None, autotune_effort=None, static_shapes=True, print_config=None,
           autotune_callback=None, autotune_log=None, autotune_baseline_fn=None, autotune_baseline_atol=None,
           autotune_baseline_rtol=None, autotune_accuracy_check=True, autotune_config_overrides=None,
           ignore_warnings=None, dot_precision=None, backend=None, **helion_settings):
    """Make a deuteron kernel: ``@dt.kernel`` or ``@dt.kernel(config=dt.Config(...))``.

    ``config``           use this config (no autotuning).
    ``configs``          autotune among these configs only.
    ``autotune_effort``  ``"none"`` (the default config), ``"quick"`` (a short search) or ``"full"``.
    ``static_shapes``    specialize on every tensor shape and stride (default True); False compiles once
                         per power-of-two size bucket and passes sizes at run time.
    ``print_config``     print the chosen config after autotuning (default: when stderr is a terminal).
    ``autotune_callback`` called with progress events ({"kind": "begin"|"report"|"end", ...}).
    ``autotune_baseline_fn`` the autotuner's oracle instead of ``kernel.ref`` (called with the same arguments);
                         ``autotune_baseline_atol`` / ``_rtol`` its tolerances (default: by dtype).
    ``autotune_accuracy_check`` False: the autotuner times configs without comparing them with the oracle.
    ``autotune_config_overrides`` config fields put on top of every config this kernel runs with (a dict or
                         dt.Config): the given configs, the default and the autotuner's winner.
    ``ignore_warnings``  ``dt.exc`` warning classes not reported for this kernel (``dt.exc.TensorOperationInWrapper``
                         is D001).
    ``dot_precision``    ``"tf32"``, ``"tf32x3"`` or ``"ieee"``: the ``input_precision`` of every fp32 matmul.
    ``backend``          ``"newt"`` (or ``"triton"``, the language newt implements): the generated code.

    Helion's autotuner and debugging settings (``autotune_compile_timeout=``, ``print_output_code=``, ...:
    ``deuteron.structure_base.HELION_IGNORED_OPTIONS``) are accepted with no effect; any other name is a ConfigError.
    """
    from .structure_base import HELION_IGNORED_OPTIONS, KERNEL_OPTIONS
    for name in helion_settings:
        if name not in HELION_IGNORED_OPTIONS:
            import difflib
            sugg = difflib.get_close_matches(name, KERNEL_OPTIONS + HELION_IGNORED_OPTIONS, n=1)
            raise ConfigError(f"@dt.kernel has no option {name!r}" + (f" (did you mean {sugg[0]!r}?)" if sugg else ""))

    def wrap(f):
        return Kernel(f, config=config, configs=configs, autotune_effort=autotune_effort,
                      static_shapes=static_shapes, print_config=print_config, autotune_callback=autotune_callback,
                      autotune_log=autotune_log, autotune_baseline_fn=autotune_baseline_fn,
                      autotune_baseline_atol=autotune_baseline_atol, autotune_baseline_rtol=autotune_baseline_rtol,
                      autotune_accuracy_check=autotune_accuracy_check,
                      autotune_config_overrides=autotune_config_overrides, ignore_warnings=ignore_warnings,
                      dot_precision=dot_precision, backend=backend)
    return wrap(fn) if fn is not None else wrap


DOT_PRECISIONS = ("tf32", "tf32x3", "ieee")
BACKENDS = ("newt", "triton")


def _warning_codes(classes) -> frozenset:
    """The D-codes of ``ignore_warnings=[dt.exc.TensorOperationInWrapper, ...]``."""
    if not classes:
        return frozenset()
    from .exc import DeuteronWarning
    codes = set()
    for c in classes:
        if not (isinstance(c, type) and issubclass(c, DeuteronWarning)):
            raise ConfigError(f"ignore_warnings takes dt.exc warning classes, not {c!r}")
        codes.add(c.code)
    return frozenset(codes)


def _as_config(c, what):
    if c is None or isinstance(c, Config):
        return c
    if isinstance(c, dict):
        return Config.from_dict(c)
    raise ConfigError(f"{what} must be a dt.Config or a dict, not {type(c).__name__}")


class Kernel:
    """A ``@dt.kernel`` function.  Call it like the function; ``.ref(...)`` runs the eager reference."""

    MAX_FAST_KEYS = 1024

    def __init__(self, fn, *, config=None, configs=None, autotune_effort=None, static_shapes=True,
                 print_config=None, autotune_callback=None, autotune_log=None, autotune_baseline_fn=None,
                 autotune_baseline_atol=None, autotune_baseline_rtol=None, autotune_accuracy_check=True,
                 autotune_config_overrides=None, ignore_warnings=None, dot_precision=None, backend=None):
        if isinstance(fn, Kernel):
            fn = fn.fn
        self.fn = fn
        functools.update_wrapper(self, fn)
        self.config = _as_config(config, "config")
        self.configs = [_as_config(c, "configs[i]") for c in (configs or [])]
        if autotune_effort is not None and autotune_effort not in EFFORTS:
            raise ConfigError(f"autotune_effort must be one of {', '.join(map(repr, EFFORTS))}, "
                              f"not {autotune_effort!r}")
        self.autotune_effort = autotune_effort
        self.static_shapes = bool(static_shapes)
        self.print_config = print_config
        self.autotune_callback = autotune_callback
        self.autotune_log = autotune_log
        if autotune_baseline_fn is not None and not callable(autotune_baseline_fn):
            raise ConfigError(f"autotune_baseline_fn must be callable, not {type(autotune_baseline_fn).__name__}")
        self.autotune_baseline_fn = autotune_baseline_fn
        self.autotune_tolerance = None
        if autotune_baseline_atol is not None or autotune_baseline_rtol is not None:
            self.autotune_tolerance = (float(autotune_baseline_atol if autotune_baseline_atol is not None else 0.0),
                                       float(autotune_baseline_rtol if autotune_baseline_rtol is not None else 0.0))
        self.autotune_accuracy_check = bool(autotune_accuracy_check)
        self.config_overrides = _as_config(autotune_config_overrides, "autotune_config_overrides")
        self.ignore_warnings = _warning_codes(ignore_warnings)
        if dot_precision is not None and dot_precision not in DOT_PRECISIONS:
            raise ConfigError(f"dot_precision must be one of {', '.join(map(repr, DOT_PRECISIONS))}, "
                              f"not {dot_precision!r}")
        self.dot_precision = dot_precision
        if backend is not None and backend not in BACKENDS:
            raise ConfigError(f"backend {backend!r} is not available: deuteron generates newt "
                              f"(backend one of {', '.join(map(repr, BACKENDS))})")
        self.backend = backend or "newt"
        self.signature = inspect.signature(fn)
        self._source = None
        self._entries: dict = {}
        self._fast: dict = {}  # the binder's fast key -> the entry (Kernel.__call__)
        self._host = None
        self._binder = None
        self._fast_binder = None
        self._host_closure = None  # (the closure's values, the host function made with them)

    # ------------------------------------------------------------------ source and structure
    @property
    def source(self):
        if self._source is None:
            from .host import KernelSource
            self._source = KernelSource(self.fn)
            self._source.raise_errors()
        return self._source

    @property
    def structure(self):
        return self.source.structure

    def _host_fn(self):
        if self._host is not None:
            return self._host
        closure = self.fn.__closure__
        if closure:
            # the host function takes the closure's values when it is made: made again only when one of them
            # is another object than last time (not on every call)
            values = tuple(_cell_value(c) for c in closure)
            last = self._host_closure
            if last is not None and all(a is b for a, b in zip(last[0], values)):
                return last[1]
        f = self.source.host_function(_dispatch_launch)
        if not self.fn.__code__.co_freevars:
            self._host = f
        elif closure:
            self._host_closure = (values, f)
        return f

    def __repr__(self):
        return f"<deuteron kernel {self.__qualname__}>"

    # ------------------------------------------------------------------ binding
    def _bind(self, args, kwargs):
        fast = self._binder
        if fast is None:
            fast = self._binder = _make_binder(self.signature) or False
        if fast:
            try:
                return _Bound(*fast(*args, **kwargs), self.signature)
            except TypeError:
                pass  # the same call through inspect, for its error message
        try:
            b = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}(): {e}") from None
        b.apply_defaults()
        return b

    def _key(self, bound) -> tuple:
        import torch
        parts = []
        tensor = torch.Tensor
        static = self.static_shapes

        def add(v):
            if isinstance(v, tensor):
                dt = _DTYPE_NAMES.get(v.dtype) or _DTYPE_NAMES.setdefault(v.dtype, str(v.dtype))
                dev = "cuda" if v.is_cuda else v.device.type
                if static:
                    parts.append(("T", dt, tuple(v.shape), v.stride(), dev))
                else:  # the strides' 16-byte alignment and the last size's power-of-two divisor up to 16 too: what
                    es = v.element_size()  # the descriptor form chose on (deuteron/codegen_desc.py)
                    parts.append(("T", dt, v.dim(), tuple(_np2(s) if s > 1 else s for s in v.shape),
                                  tuple(st == 1 for st in v.stride()),
                                  tuple(st > 0 and st * es % 16 == 0 for st in v.stride()),
                                  min(16, v.shape[-1] & -v.shape[-1]) if v.dim() and v.shape[-1] else 16, dev))
            elif isinstance(v, (list, tuple)):
                parts.append(("L", len(v)))
                for x in v:
                    add(x)
            elif isinstance(v, bool):
                parts.append(("b", v))
            elif isinstance(v, (int, float)):
                parts.append((type(v).__name__,))
            elif isinstance(v, (str, type(None), torch.dtype)):
                parts.append(("v", str(v)))
            else:
                parts.append(("o", type(v).__name__))

        for v in bound.arguments.values():
            add(v)
        return tuple(parts)

    def _device(self, bound):
        import torch
        for v in bound.arguments.values():
            if isinstance(v, torch.Tensor):
                return v.device
            if isinstance(v, (list, tuple)):
                for x in v:
                    if isinstance(x, torch.Tensor):
                        return x.device
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")

    def bind(self, *args, **kwargs) -> "_Entry":
        """The compiled state for this argument signature (discovered, config not yet chosen)."""
        b = self._bind(args, kwargs)
        return self._entry(b)

    def _entry(self, bound) -> "_Entry":
        key = self._key(bound)
        e = self._entries.get(key)
        if e is None:
            e = _Entry(self, key, self._device(bound))
            e.discover(bound)
            self._entries[key] = e
        return e

    def reset(self):
        """Forget compiled programs and chosen configs (the disk cache stays)."""
        self._entries.clear()
        self._fast.clear()

    # ------------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        binder = self._fast_binder
        if binder is None:
            binder = self._fast_binder = _make_binder(self.signature, fast_key=True) or False
        if binder:
            try:
                a, kw, arguments, fkey = binder(*args, **kwargs)
            except TypeError:
                pass  # the slow path below, for inspect's error message
            else:
                # the fast path: the entry straight from a key of what the call's arguments are (finer than
                # Kernel._key, so it always means one entry); a miss takes the full lookup once
                e = self._fast.get(fkey)
                if e is None:
                    e = self._entry(_Bound(a, kw, arguments, self.signature))
                    if len(self._fast) >= self.MAX_FAST_KEYS:
                        self._fast.clear()
                    self._fast[fkey] = e
                if e.config is None:
                    e.config = self._choose_config(e, _Bound(a, kw, arguments, self.signature))
                return _CallRun(e, e.config).call(a, kw, arguments)
        b = self._bind(args, kwargs)
        e = self._entry(b)
        if e.config is None:
            e.config = self._choose_config(e, b)
        return e.run(b, e.config)

    def _effort(self, entry) -> str:
        if self.autotune_effort is not None:
            return self.autotune_effort
        env = os.environ.get("DEUTERON_AUTOTUNE_EFFORT")
        if env in EFFORTS:
            return env
        if entry.device.type != "cuda":
            return "none"
        return "quick"

    def _override(self, cfg: Config, e) -> Config:
        """``cfg`` with ``autotune_config_overrides`` on top."""
        if self.config_overrides is None:
            return cfg
        return e.complete(self.config_overrides.merged_over(cfg), where="autotune_config_overrides")

    def _choose_config(self, e, b) -> Config:
        if self.config is not None:
            return self._override(e.complete(self.config, where="config"), e)
        if len(self.configs) == 1:
            return self._override(e.complete(self.configs[0], where="configs"), e)
        effort = self._effort(e)
        if not self.configs and effort == "none":
            return self._override(e.space.default(), e)
        from .autotune import autotune
        configs = [self._override(e.complete(c, where="configs"), e) for c in self.configs] or None
        return self._override(autotune(self, e, b, effort=effort, configs=configs), e)

    def autotune(self, *args, effort: str | None = None, configs=None, callback=None, force: bool = False,
                 **kwargs) -> Config:
        """Autotune for these arguments now and use the winner for later calls; returns it."""
        from .autotune import autotune
        b = self._bind(args, kwargs)
        e = self._entry(b)
        if configs is None:
            configs = self.configs  # like the implicit tuning: @dt.kernel(configs=[...]) limits the search
        cfgs = [e.complete(_as_config(c, "configs[i]"), where="configs") for c in configs] if configs else None
        cfg = autotune(self, e, b, effort=effort or self.autotune_effort or "quick", configs=cfgs,
                       callback=callback, force=force)
        e.config = cfg
        return cfg

    def run_with(self, config, *args, **kwargs):
        """Run once with ``config`` (a dt.Config or dict), without changing the kernel's chosen config."""
        b = self._bind(args, kwargs)
        e = self._entry(b)
        return e.run(b, e.complete(_as_config(config, "config"), where=None))

    def ref(self, *args, **kwargs):
        """The same function run eagerly in PyTorch, tiles as slices: the oracle every config is checked against.

        A kernel that decides on where a tile of tunable block size starts or ends (``if tile.begin < n``) has no
        eager oracle (the kernel decides per tile of the config's size, ``ref`` would run the loop as one tile):
        ``ref`` raises that D004 (``TileBoundDecision``) at the decision's line."""
        gap = self.oracle_gap(*args, **kwargs)
        if gap is not None:
            raise gap
        from .ref import run_ref
        return run_ref(self.fn, args, kwargs, structure=self.structure)

    def oracle_gap(self, *args, **kwargs):
        """Why ``ref`` cannot be the oracle of a call with these arguments (the D004 ``TileBoundDecision`` error,
        located), or None.  Traces the kernel for them (what the first call does anyway); a kernel that does not
        trace, or fake / meta tensors (``newt.library``'s shapes), give None: ``ref`` runs as it is."""
        if _fake_args(args, kwargs):
            return None
        try:
            b = self._bind(args, kwargs)
        except Exception:
            return None
        e = self._traced(b)
        return None if e is None else e.oracle_gap

    def _traced(self, b):
        """The traced entry of bound arguments ``b``, or None for a kernel that does not trace for them (its
        own call reports why)."""
        try:
            return self._entry(b)
        except Exception:
            return None

    def autotune_reference(self, *args, **kwargs):
        """What the autotuner checks configs against: ``autotune_baseline_fn`` if given, else ``ref`` (for a
        kernel with no eager oracle, ``oracle_gap``, the autotuner uses the default config's output instead)."""
        if self.autotune_baseline_fn is not None:
            return self.autotune_baseline_fn(*args, **kwargs)
        return self.ref(*args, **kwargs)

    def verify_reference(self, *args, **kwargs):
        """What a check of a call (the editor's Verify, ``newt.harness``) compares with: ``ref``, or for a kernel
        with no eager oracle (``oracle_gap``) the default config's output (Helion's rule), said once
        (``dt.exc.NoEagerOracle``)."""
        b = self._bind(args, kwargs)
        e = self._traced(b)
        if e is None or e.oracle_gap is None:
            from .ref import run_ref
            return run_ref(self.fn, args, kwargs, structure=self.structure)
        e.warn_no_oracle("the check compares it with the default config's output")
        from .oracle import nan_allocations
        with nan_allocations():
            return e.run(b, e.baseline_config())

    @property
    def __dt_eager__(self):
        """The eager oracle (``newt.harness`` uses it to verify deuteron kernels)."""
        return self.ref

    def to_newt_source(self, *args, config=None, **kwargs) -> str:
        """The generated newt source for these arguments (and ``config``, default: the kernel's)."""
        b = self._bind(args, kwargs)
        e = self._entry(b)
        cfg = _as_config(config, "config")
        if cfg is not None:
            cfg = e.complete(cfg, where=None)
        else:
            cfg = e.config or (e.complete(self.config, where="config") if self.config is not None else
                               (e.complete(self.configs[0], where="configs") if self.configs else e.space.default()))
        sources = e.sources(b, cfg)
        return "\n\n".join(sources)

    def default_config(self, *args, **kwargs) -> Config:
        return self.bind(*args, **kwargs).space.default()

    def config_space(self, *args, **kwargs):
        return self.bind(*args, **kwargs).space



_EMPTY_CELL = object()


def _fake_args(args, kwargs) -> bool:
    """Any tensor argument on the meta device or a FakeTensor (shape propagation, not a run)."""
    for v in list(args) + list(kwargs.values()):
        for t in (v if isinstance(v, (list, tuple)) else (v,)):
            dev = getattr(t, "device", None)
            if dev is not None and (getattr(dev, "type", None) == "meta" or type(t).__name__ == "FakeTensor"):
                return True
    return False


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY_CELL


_DTYPE_NAMES: dict = {}  # torch.dtype -> str(dtype) (str() of a dtype is slow enough to matter per call)


class _Bound:
    """The arguments of one call, by position, by keyword and by name (like ``inspect.BoundArguments``
    after ``apply_defaults``)."""

    __slots__ = ("args", "kwargs", "arguments", "signature")

    def __init__(self, args, kwargs, arguments, signature):
        self.args = args
        self.kwargs = kwargs
        self.arguments = arguments
        self.signature = signature


def _fast_part(v):
    """One argument's part of the fast key (``Kernel.__call__``): never coarser than its part of
    ``Kernel._key`` (the same kinds, in the same order, with the exact type added), so a fast key names one
    entry.  Exact ``torch.Tensor`` arguments do not come here: the binder computes their part inline."""
    if isinstance(v, _TORCH[0]):
        return (type(v), v.dtype, v.shape, v.stride(), v.device)
    if isinstance(v, (list, tuple)):
        return (type(v), tuple(_fast_part(x) for x in v))
    if isinstance(v, bool):
        return (bool, v)
    if isinstance(v, (int, float)):
        return type(v)
    if v is None or isinstance(v, (str, _TORCH[1])):
        return (type(v), v)
    return type(v)


_TORCH: list = []  # [torch.Tensor, torch.dtype], filled when a binder is made (this module does not import torch)


def _make_binder(signature, fast_key: bool = False):
    """A generated ``bind(*args, **kwargs) -> (args, kwargs, arguments)`` for ``signature`` (with
    ``fast_key``: ``(args, kwargs, arguments, fast key)``, the key ``Kernel.__call__`` finds the entry by), or
    None when it has ``*args``/``**kwargs`` (those go through ``inspect``).  Binding with ``inspect`` costs
    more than the rest of a launch."""
    P = inspect.Parameter
    params = list(signature.parameters.values())
    if any(p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD) for p in params):
        return None
    if not _TORCH:
        import torch
        _TORCH[:] = [torch.Tensor, torch.dtype]
    g = {"__dt_T": _TORCH[0], "__dt_k": _fast_part}
    sig, pos, kw = [], [], []
    seen_kw_only = False
    for i, p in enumerate(params):
        if p.kind is P.KEYWORD_ONLY and not seen_kw_only:
            sig.append("*")
            seen_kw_only = True
        if p.default is P.empty:
            sig.append(p.name)
        else:
            g[f"__dt_default{i}"] = p.default
            sig.append(f"{p.name}=__dt_default{i}")
        if p.kind is P.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind is not P.POSITIONAL_ONLY):
            sig.append("/")
        (kw if p.kind is P.KEYWORD_ONLY else pos).append(p.name)
    names = [p.name for p in params]
    key = "".join(f"({n}.dtype, {n}.shape, {n}.stride(), {n}.device) if type({n}) is __dt_T else "
                  f"type({n}) if type({n}) is int or type({n}) is float else __dt_k({n}), " for n in names)
    src = (f"def bind({', '.join(sig)}):\n"
           f"    return ({''.join(n + ', ' for n in pos)}), {{{', '.join(f'{n!r}: {n}' for n in kw)}}}, "
           f"{{{', '.join(f'{n!r}: {n}' for n in names)}}}" + (f", ({key})\n" if fast_key else "\n"))
    exec(compile(src, "<deuteron binder>", "exec"), g)
    return g["bind"]


def _dispatch_launch(k, host_locals):
    ctx = L._CONTEXT.get()
    if ctx is None or not hasattr(ctx, "launch"):
        raise L.DeuteronUsageError("a deuteron host function ran outside its kernel")
    return ctx.launch(k, host_locals)


# ---------------------------------------------------------------------------
# one argument signature
# ---------------------------------------------------------------------------


class _Entry:
    """Everything compiled for one argument signature of a kernel."""

    MAX_PROGRAMS = 16

    def __init__(self, kernel: Kernel, key, device):
        self.kernel = kernel
        self.key = key
        self.device = device
        self.space = None
        self.config = None
        self.slot_map: dict = {}
        self.reg_slots: list = []
        self.rdim_slots: dict = {}
        self.multi_ordinal: dict = {}
        self.programs: dict = {}
        self.generated: dict = {}
        self.launchers: dict = {}  # (id(program), config key) -> Entry.launcher's tuple
        self.tunables: dict = {}
        self.discovered: dict = {}
        self.oracle_gap = None  # why kernel.ref is not this entry's oracle (a located D004), or None
        self._oracle_warned = False

    # -- discovery --------------------------------------------------------------------
    def discover(self, bound):
        run = _HostRun(self, None, "discover")
        run.execute(bound)
        self._build_space(run)
        for k in sorted(run.programs):
            self._note_gap(run.programs[k])

    def _note_gap(self, prog):
        if self.oracle_gap is None and prog.oracle_gaps:
            from .hostrun import located
            self.oracle_gap = located(self.kernel, prog.oracle_gaps[0])

    def baseline_config(self) -> Config:
        """The config whose output stands for the oracle where kernel.ref cannot (``oracle_gap``): the default,
        with ``autotune_config_overrides`` (Helion checks every config against its default config's output)."""
        return self.kernel._override(self.space.default(), self)

    def warn_no_oracle(self, what: str):
        """Say once per argument signature that ``kernel.ref`` is not the oracle here (``dt.exc.NoEagerOracle``,
        silenced by ``ignore_warnings=[dt.exc.NoEagerOracle]``)."""
        if self._oracle_warned or self.oracle_gap is None:
            return
        self._oracle_warned = True
        from .exc import NoEagerOracle
        if NoEagerOracle.code in self.kernel.ignore_warnings:
            return
        import warnings
        d = self.oracle_gap.diagnostics[0]
        where = f"{d.file}:{d.span.line}:{d.span.col}" if d.span is not None else d.file
        warnings.warn(NoEagerOracle(f"{self.kernel.__name__} has no eager oracle, kernel.ref is D004 at {where} "
                                    f"({d.message}): {what}, {self.baseline_config()}"), stacklevel=2)

    def _build_space(self, run):
        from .program import RInfo, TileInfo
        from .space import ConfigSpace, RSpec, SlotSpec, np2
        st = self.kernel.structure
        # order the tunable block sizes by their place in the source
        keys = []
        for pk, key in run.slot_keys.items():
            if key[0] == "tile":
                site = st.sites[key[1]]
                pos = (site.node.lineno, site.node.col_offset, key[2])
            else:
                pos = run.reg_pos[key[1]]
            keys.append((pos, pk, key))
        keys.sort()
        prov_to_final = {pk: i for i, (_, pk, _) in enumerate(keys)}
        self.slot_map = {key: prov_to_final[pk] for _, pk, key in keys if key[0] == "tile"}
        self.reg_slots = [prov_to_final[run.slot_ids[("reg", i)]] for i in range(len(run.reg_pos))]
        info: dict = {}
        for prog in run.programs.values():
            for t in prog.tiles:
                if t.slot is None:
                    continue
                fs = prov_to_final[t.slot]
                d = info.setdefault(fs, {"dot": False, "role": None, "ext": 0, "grid": False, "label": t.name})
                d["dot"] |= t.used_in_dot
                d["role"] = d["role"] or t.dot_role
                ext = t.extent
                d["ext"] = max(d["ext"], ext if ext is not None else 4096)
                d["grid"] |= t.depth == 0
        slots = []
        for i, (_, _pk, key) in enumerate(keys):
            d = info.get(i, {"dot": False, "role": None, "ext": 4096, "grid": False, "label": None})
            if key[0] == "reg":
                lo_arg, hi_arg = run.reg_bounds[key[1]]
                lo, hi = np2(max(1, lo_arg)), np2(max(1, hi_arg))
                label = d["label"] or f"register_block_size (line {run.reg_pos[key[1]][0]})"
            else:
                lo, hi = 1, np2(max(1, d["ext"]))
                label = d["label"] or f"tile {key[1]}"
            if d["dot"]:
                lo = max(lo, 16)
                hi = max(lo, min(hi, 256))
            else:
                hi = min(hi, 4096 if d["grid"] else 1024)
            hi = max(hi, lo)
            slots.append(SlotSpec(i, "register" if key[0] == "reg" else "tile", label, lo, hi, d["dot"], d["role"],
                                  d["grid"], d["ext"]))
        rspecs = []
        grid_loops = []
        value_dims = []
        has_dot = has_loops = False
        grid_extents = []
        for k in sorted(run.programs):
            prog = run.programs[k]
            self.rdim_slots[k] = {}
            for r in prog.rdims:
                if r.rollable:
                    self.rdim_slots[k][r.id] = len(rspecs)
                    rspecs.append(RSpec(len(rspecs), r.size, f"{r.size} (line {getattr(r.src, 'lineno', '?')})"))
            if len(prog.grid_tiles) > 1:
                self.multi_ordinal[k] = len(grid_loops)
                grid_loops.append(len(prog.grid_tiles))
            has_dot |= prog.has_dot
            has_loops |= _has_loops(prog.body)
            grid_extents.append([t.extent for t in prog.grid_tiles])
            for dims in prog.dims_used:
                vd = []
                for dd in dims:
                    if isinstance(dd, TileInfo):
                        if dd.kind == "grid":
                            continue
                        if dd.slot is not None:
                            vd.append(("s", prov_to_final[dd.slot]))
                        else:
                            vd.append(("c", dd.fixed or 1))
                    elif isinstance(dd, RInfo):
                        pad = max(np2(dd.size), 16 if dd.used_in_dot else 1)
                        if dd.rollable:
                            vd.append(("r", self.rdim_slots[k][dd.id], pad))
                        else:
                            vd.append(("c", pad))
                if vd:
                    value_dims.append(tuple(vd))
        self.tunables = dict(run.tunables)
        self.space = ConfigSpace(slots, rspecs, grid_loops, dict(run.tunables), has_dot, has_loops or bool(rspecs),
                                 sorted(set(value_dims)), 1, grid_extents)
        self.discovered = run.programs

    def complete(self, cfg: Config, where: str | None) -> Config:
        try:
            return self.space.complete(cfg)
        except ConfigError as e:
            raise self._config_error(str(e), where) from None

    def _config_error(self, message, where):
        src = self.kernel.source
        node = None
        if where is not None:
            for dec in src.fdef.decorator_list:
                if hasattr(dec, "keywords"):
                    for kw in dec.keywords:
                        if kw.arg == where:
                            node = kw.value
        if node is None:
            node = src.fdef
        return DeuteronError.at(src.src, node, "D005", message, kernel=self.kernel.__name__,
                                hint=f"this kernel's space: {self.space.describe()}")

    # -- running ------------------------------------------------------------------------
    def run(self, bound, config: Config, mode: str = "run", **opts):
        run = _HostRun(self, config, mode, **opts)
        return run.execute(bound)

    def sources(self, bound, config) -> list:
        run = _HostRun(self, config, "source")
        run.execute(bound)
        return run.sources

    def program(self, k, host_locals, run) -> object:
        progs = self.programs.get(k)
        if progs is None:
            progs = self.programs[k] = []
        for p, check in progs:
            if check(host_locals, run.fn_globals, run.arguments):
                return p
        p = run.trace(k, host_locals)
        self._note_gap(p)
        progs.insert(0, (p, guard_checker(p, self.kernel.static_shapes)))
        del progs[self.MAX_PROGRAMS:]
        return p

    def launcher(self, gen, mod, prog, config: Config):
        """What a launch of ``prog`` under ``config`` calls: ``(launch function, get_args(host_locals, g),
        keyword arguments, prog, go(host_locals, g))`` (``go``: the launch in one generated call), made on
        the first launch (the function looked up, the constexprs and the SM count filled in) and reused."""
        key = (id(prog), config.key())
        hit = self.launchers.get(key)
        if hit is not None and hit[3] is prog:
            return hit
        kw = dict(gen.constexprs)
        kw["num_warps"] = gen.num_warps
        kw["num_stages"] = gen.num_stages
        if gen.needs_num_sms:
            from .runtime import num_sms
            kw["_NUM_SMS"] = num_sms(self.device)
        fn = getattr(mod, gen.launch_name)
        hit = self.launchers[key] = (fn, args_getter(gen, prog), kw, prog, args_getter(gen, prog, (fn, kw)))
        if len(self.launchers) > 256:
            self.launchers.pop(next(iter(self.launchers)))
        return hit

    def compiled(self, prog, config: Config):
        key = (id(prog), config.key())
        hit = self.generated.get(key)
        if hit is not None:
            return hit
        from .codegen import generate
        from .runtime import load_module
        try:
            gen = generate(prog, config, self.kernel.__name__)
        except ConfigError as e:
            raise self._config_error(str(e), "config" if self.kernel.config is not None else None) from None
        mod = load_module(gen.source, stem=self.kernel.__name__, interpret=self.device.type != "cuda")
        from .errors import register_generated
        register_generated(mod.__file__, gen)  # errors raised from it are reported at the user's line
        self.generated[key] = (gen, mod, prog)
        if len(self.generated) > 256:
            self.generated.pop(next(iter(self.generated)))
        return gen, mod, prog


def _has_loops(block) -> bool:
    from .program import IfStmt, LoopStmt
    for s in block.stmts:
        if isinstance(s, LoopStmt):
            return True
        if isinstance(s, IfStmt) and (_has_loops(s.then_block) or _has_loops(s.else_block)):
            return True
    return False


def build_ir_for(kernel: Kernel, *args, config=None, **kwargs) -> list:
    """newt IR of every generated kernel of this call (one per tile loop), for ``config`` (default: the default).

    Runs newt's front end only (no GPU, nothing launched): the check that a config produces a valid kernel.
    """
    from .compile import build_ir
    b = kernel._bind(args, kwargs)
    e = kernel._entry(b)
    cfg = e.complete(_as_config(config, "config"), where=None) if config is not None else e.space.default()
    run = _HostRun(e, cfg, "source")
    run.execute(b)
    out = []
    for gen, mod, prog, host_locals in run.built:
        out.append(_at_user_line(build_ir, kernel, gen, mod, _runtime_args(gen, prog, host_locals, run.fn_globals)))
    return out


def _at_user_line(fn, kernel, *args):
    """``fn(*args)`` on a generated kernel, its newt errors reported at the user's line (``errors.relocate``)."""
    from newt.diagnostics import CompilationError, LocatedError

    from .errors import relocate
    try:
        return fn(*args)
    except (CompilationError, LocatedError) as ex:
        out = relocate(ex, kernel.__name__)
        if out is None or out is ex:
            raise
        raise out from ex


def binaries_for(kernel: Kernel, *args, config=None, target: str = "sm_80", **kwargs) -> list:
    """newt.compile of every generated kernel of this call for ``target`` (CUDA C++ -> cubin through NVRTC, no
    GPU needed, nothing launched): the check that the generated newt goes all the way through the backend."""
    from .compile import compile_binary
    b = kernel._bind(args, kwargs)
    e = kernel._entry(b)
    cfg = e.complete(_as_config(config, "config"), where=None) if config is not None else e.space.default()
    run = _HostRun(e, cfg, "source")
    run.execute(b)
    return [_at_user_line(compile_binary, kernel, gen, mod, _runtime_args(gen, prog, host_locals, run.fn_globals),
                          target) for gen, mod, prog, host_locals in run.built]


def _register_public():
    from .host import PUBLIC_OBJECTS
    PUBLIC_OBJECTS.update(kernel=kernel, Kernel=Kernel)


_register_public()
