"""Triton's ahead-of-time compile API as the drop-in serves it: what torch.compile (inductor) asks for.

Inductor does not launch its generated kernels through ``kernel[grid](...)``: its autotuner
(``torch._inductor.runtime.triton_heuristics.CachingAutotuner``) compiles each config itself with
``triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget(...), options={...})`` and
launches the result through ``binary.run(grid_x, grid_y, grid_z, stream, function, packed_metadata,
launch_metadata, enter_hook, exit_hook, *args)``.  This module answers those calls with newt's one front end:

* :class:`ASTSource` -- a kernel with Triton's signature strings (``"*fp32"``, ``"i32"``, ``"constexpr"``),
  its constexpr values (keyed by name or by ``(index,)``) and its attributes (``{(i,): [["tt.divisibility",
  16]]}``);
* :func:`compile` -- a ``"cuda"`` target builds the cubin through newt's CUDA backend (NVRTC; no GPU needed);
  a ``"cpu"`` target builds the IR only (the kernel runs on newt's interpreter);
* :class:`DropinCompiledKernel` -- what :func:`compile` returns, with the fields inductor reads (``metadata``
  with ``name``, ``num_warps``, ``num_stages``, ``shared``; ``packed_metadata``, ``asm``, ``hash``,
  ``n_regs``, ``n_spills``, ``function``, ``run``, ``launch_metadata``, ``_init_handles``);
* :func:`make_backend` -- :class:`NewtBackend` (``hash()``, ``parse_options``, ``get_codegen_implementation``,
  ``get_module_map``, ``binary_ext``, ``pack_metadata``);
* :data:`knobs` -- the ``triton.knobs`` settings torch reads (launch hooks, the cache directory ...).

The kernel runs on newt's interpreter when the target is ``"cpu"`` or when there is no GPU (a cubin built
for ``"cuda"`` is then still there to inspect); otherwise through newt's CUDA launcher.  The cubin's
parameters are the kernel's run-time parameters only (no global/profile scratch pointers, unlike Triton's
ABI): inductor's static CUDA launcher, which assumes Triton's, is turned off under the drop-in
(:func:`newt.dropin.inductor.configure`).
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import hashlib
import os
import types
from typing import Any

__all__ = ["ASTSource", "compile", "make_backend", "NewtBackend", "NewtOptions", "DropinCompiledKernel",
           "Backend", "knobs", "triton_key"]


# ---- shared with newt.dropin.triton (which imports them from here) ----------------------------------------

def _flag(name: str) -> bool | None:
    v = os.environ.get(name)
    if v is None or not v.strip():
        return None
    return v.strip().lower() in ("1", "true", "yes", "on")


def interpret_rule() -> bool:
    """Whether a drop-in kernel runs on newt's interpreter: ``NEWT_INTERPRET`` when set (1 or 0), else
    ``TRITON_INTERPRET=1``, else when torch sees no CUDA device."""
    n = _flag("NEWT_INTERPRET")
    if n is not None:
        return n
    if _flag("TRITON_INTERPRET"):
        return True
    from newt.runtime.driver import has_gpu
    return not has_gpu()


@dataclasses.dataclass(frozen=True)
class GPUTarget:
    """``triton.backends.compiler.GPUTarget``: the backend (``"cuda"``), the compute capability as one int
    (90 for sm_90) and the warp size."""
    backend: str
    arch: int | str
    warp_size: int


class BaseBackend:
    """``triton.backends.compiler.BaseBackend``: newt has one backend (CUDA through NVRTC); this class
    exists for the ``issubclass``/``isinstance`` probes of code written against Triton."""

    def __init__(self, target: GPUTarget):
        self.target = target

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "cuda"


#: the driver ``triton.runtime.driver.set_active`` chose (None: the default one)
_DRIVER_STATE: dict = {"active": None, "default": None}


def set_default_driver(factory) -> None:
    """The drop-in's default driver (newt.dropin.triton hands its ``driver.active`` factory down here)."""
    _DRIVER_STATE["default"] = factory


def current_driver():
    """``triton.runtime.driver.active``: the driver made active (inductor's ``set_driver_to_cpu``) or the
    default one."""
    active = _DRIVER_STATE["active"]
    if active is not None:
        return active
    default = _DRIVER_STATE["default"]
    if default is None:
        raise RuntimeError("no Triton driver: the drop-in's triton package is not loaded (newt.dropin.install(), "
                           "then import triton)")
    return default()


def reset_driver() -> None:
    """Back to the default driver (``uninstall()`` does it: a later ``install()`` starts afresh)."""
    _DRIVER_STATE["active"] = None


def triton_key() -> str:
    """``triton.compiler.compiler.triton_key()``: what compiled code depends on (torch keys its caches on it)."""
    import newt
    from newt.dropin import TRITON_API_VERSION
    return f"newt-{newt.__version__}-triton-api-{TRITON_API_VERSION}"


def _base32(key: str) -> str:
    """``triton.runtime.cache._base32``: a hex digest as the directory name Triton's cache uses (inductor's
    ``triton_hash_to_path_key``)."""
    return base64.b32encode(bytes.fromhex(key)).decode("ascii").rstrip("=")


# ---- triton.knobs ---------------------------------------------------------------------------------------------

class _KnobGroup(types.SimpleNamespace):
    """One group of ``triton.knobs`` (``knobs.runtime``, ``knobs.cache`` ...): plain attributes; reading one
    newt has no use for gives None, as an unset Triton knob does."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def _cache_dir() -> str | None:
    from newt.runtime.cache import default_cache_dir
    d = default_cache_dir()
    return str(d) if d is not None else None


def _make_knobs() -> types.ModuleType:
    m = types.ModuleType("triton.knobs", "triton.knobs (newt drop-in): the settings torch and libraries read.")
    m.__dict__.update(
        __newt_dropin__=True,
        runtime=_KnobGroup(launch_enter_hook=None, launch_exit_hook=None, jit_post_compile_hook=None,
                           jit_cache_hook=None, kernel_load_start_hook=None, kernel_load_end_hook=None,
                           add_stages_inspection_hook=None, interpret=False, debug=False),
        cache=_KnobGroup(dir=_cache_dir(), dump_dir=None, override_dir=None, home_dir=None),
        compilation=_KnobGroup(always_compile=False, listener=None, dump_ir=False, override=False,
                               store_binary_only=False, front_end_debugging=False, use_ir_loc=None),
        nvidia=_KnobGroup(libdevice_path=None, ptxas_path=None),
        amd=_KnobGroup(),
        language=_KnobGroup(fp32_default=None, default_fp_fusion=True),
        autotuning=_KnobGroup(cache=False, print=False),
        CompileTimes=collections.namedtuple("CompileTimes", ["ir_initialization", "lowering_stages",
                                                             "store_results"]),
    )
    return m


knobs = _make_knobs()


# ---- backends -------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class NewtOptions:
    """The compile options ``backend.parse_options`` returns (Triton's ``CUDAOptions`` fields newt reads or
    reports; the others are accepted and kept with their defaults)."""
    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 3
    maxnreg: int | None = None
    cluster_dims: tuple = (1, 1, 1)
    debug: bool = False
    sanitize_overflow: bool = True
    enable_fp_fusion: bool = True
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False
    extern_libs: tuple | None = None
    backend_name: str = "cuda"
    arch: str = "sm_90a"

    def hash(self) -> str:
        key = "_".join(f"{k}-{v}" for k, v in sorted(self.__dict__.items()))
        return hashlib.sha256(key.encode()).hexdigest()


class Backend(collections.namedtuple("Backend", ["compiler", "driver"])):
    """An entry of ``triton.backends.backends`` (``{"nvidia": Backend(compiler, driver), ...}``)."""


class NewtBackend(BaseBackend):
    """newt's one compiler (its front end, then NVRTC for ``"cuda"``, nothing more for ``"cpu"``) behind
    Triton's ``BaseBackend`` interface (``make_backend(target)``)."""

    @staticmethod
    def supports_target(target) -> bool:
        return getattr(target, "backend", None) in ("cuda", "cpu")

    def __init__(self, target):
        super().__init__(target)
        self.name = "cpu" if target.backend == "cpu" else "cuda"
        self.binary_ext = "ir" if self.name == "cpu" else "cubin"

    def hash(self) -> str:
        from newt.runtime.compiler import nvrtc_version, package_fingerprint
        return f"newt-{package_fingerprint()}-nvrtc-{nvrtc_version()}-{self.name}-{_newt_target(self.target)}"

    def parse_options(self, opts: dict) -> NewtOptions:
        fields = NewtOptions.__dataclass_fields__
        args = {k: v for k, v in dict(opts or {}).items() if k in fields and v is not None}
        args["backend_name"] = self.name
        args["arch"] = _newt_target(self.target)
        if "cluster_dims" in args:
            args["cluster_dims"] = tuple(args["cluster_dims"])
        if "extern_libs" in args:
            args["extern_libs"] = tuple(args["extern_libs"].items()) if isinstance(args["extern_libs"], dict) \
                else tuple(args["extern_libs"])
        return NewtOptions(**args)

    def get_codegen_implementation(self, options) -> dict:
        return {"min_dot_size": lambda lhs_type, rhs_type: (16, 16, 16)}

    def get_module_map(self) -> dict:
        import importlib
        try:
            return {"triton.language.extra.libdevice": importlib.import_module("newt.language.extra.libdevice")}
        except ImportError:
            return {}

    def load_dialects(self, context) -> None:
        return None

    def pack_metadata(self, metadata) -> tuple:
        return (metadata.num_warps, metadata.num_ctas, metadata.shared, *metadata.cluster_dims)

    def add_stages(self, stages, options, language=None):
        raise NotImplementedError("newt's backend has no Triton MLIR stages: its kernels go through newt's "
                                  "front end (triton.compile(ASTSource(...)))")

    def __repr__(self):
        return f"<NewtBackend {self.name} {_newt_target(self.target)}>"


def _newt_target(target) -> str:
    """newt's target name for a ``GPUTarget`` (``("cuda", 90)`` -> ``"sm_90a"``); the default target for
    ``"cpu"`` (what a cubin would be built for)."""
    from newt.runtime.jit import default_target
    arch = getattr(target, "arch", None)
    if getattr(target, "backend", None) != "cuda" or not isinstance(arch, int):
        return default_target()
    from newt.backend.cuda.targets import pick_target
    return pick_target(arch // 10, arch % 10) or f"sm_{arch}"


def make_backend(target):
    """``triton.compiler.compiler.make_backend(target)``: the backend compiling for ``target``."""
    cls = NewtBackend
    if not cls.supports_target(target):
        raise RuntimeError(f"0 compatible backends for target ({getattr(target, 'backend', target)}): newt's "
                           "drop-in compiles for 'cuda' (and 'cpu', its interpreter)")
    return cls(target)


# ---- sources --------------------------------------------------------------------------------------------------

class ASTSource:
    """``triton.compiler.ASTSource(fn, signature, constexprs=None, attrs=None)``: a ``@triton.jit`` kernel
    with Triton's signature (``{"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}``), its constexpr values
    (``{"BLOCK": 1024}`` or ``{(2,): 1024}``) and its attributes (``{(0,): [["tt.divisibility", 16]]}``)."""

    ext = "ttir"

    def __init__(self, fn, signature, constexprs=None, attrs=None):
        self.fn = fn
        self.name = fn.__name__
        self.signature = dict(signature)
        for k in self.signature:
            if not isinstance(k, str):
                raise TypeError("Signature keys must be string")
        self.constants: dict = {}
        for k, v in dict(constexprs or {}).items():
            self.constants[(fn.arg_names.index(k),) if isinstance(k, str) else tuple(k)] = v
        self.attrs = dict(attrs or {})

    def hash(self) -> str:
        def key(v):
            return getattr(v, "cache_key", None) or str(v)
        sig = [v for _, v in sorted(self.signature.items())]
        consts = "-".join(key(v) for _, v in sorted(self.constants.items()))
        fp = getattr(self.fn, "fingerprint", None)
        fn_key = fp() if callable(fp) else getattr(self.fn, "cache_key", self.name)
        return hashlib.sha256(f"{fn_key}-{self.attrs}-{sig}-{consts}".encode()).hexdigest()

    def parse_options(self) -> dict:
        return {}

    def specialization(self):
        """``(arg_types, constexprs, hints)`` for newt's compiler: the run-time parameters' dtypes, the
        constexpr (and specialized) values by name, the divisibility hints by name."""
        from newt.language import core as lc
        names = list(self.fn.arg_names)
        consts = {}
        for k, v in self.constants.items():
            if len(k) != 1:
                raise NotImplementedError(f"{self.name}: a constexpr inside a tuple argument ({k}) is not "
                                          "supported by newt's triton.compile")
            consts[names[k[0]]] = v.value if isinstance(v, lc.constexpr) else v
        arg_types, cvals = {}, {}
        sig_params = self.fn.signature.parameters
        for n in names:
            ty = self.signature.get(n)
            if n in consts:
                cvals[n] = consts[n]
                continue
            if ty is None or (isinstance(ty, str) and ty.strip() == "constexpr"):
                default = sig_params[n].default
                if default is not sig_params[n].empty:
                    cvals[n] = default.value if isinstance(default, lc.constexpr) else default
                    continue
                raise TypeError(f"{self.name}: no type and no value for parameter {n!r}")
            arg_types[n] = lc.dtype_from_name(ty) if isinstance(ty, str) else ty
        hints = {}
        for k, specs in self.attrs.items():
            if len(k) != 1 or names[k[0]] not in arg_types:
                continue
            for spec in specs:
                if spec and spec[0] == "tt.divisibility":
                    hints[names[k[0]]] = int(spec[1])
        return arg_types, cvals, hints


# ---- compiled kernels -----------------------------------------------------------------------------------------

class DropinCompiledKernel:
    """What ``triton.compile`` returns under the drop-in: a newt build (``.newt``, a
    ``newt.runtime.compiler.CompiledKernel``, for a ``"cuda"`` target; ``.ir``, the kernel's IR, always)
    with Triton's fields.  ``run(gx, gy, gz, stream, function, packed_metadata, launch_metadata,
    enter_hook, exit_hook, *args)`` launches it (``args``: all the kernel's arguments, constexprs included,
    as Triton's launcher takes them); ``kernel[grid](*args)`` too."""

    def __init__(self, src: ASTSource, target, options: NewtOptions, hash_: str, ir, newt_kernel=None):
        self.src = src
        self.hash = hash_
        self.ir = ir
        self.newt = newt_kernel
        self.name = newt_kernel.metadata.name if newt_kernel is not None else ir.name
        md = newt_kernel.metadata if newt_kernel is not None else {}
        fields = dict(options.__dict__)
        fields.update(name=self.name, hash=hash_, target=target, shared=int(md.get("shared", 0)),
                      triton_version=_api_version(), n_regs=md.get("n_regs"), n_spills=md.get("n_spills"))
        meta_cls = collections.namedtuple("KernelMetadata", sorted(fields))  # type: ignore[misc]
        self.metadata: Any = meta_cls(**fields)
        self.packed_metadata = make_backend(target).pack_metadata(self.metadata)
        self.asm = dict(newt_kernel.asm) if newt_kernel is not None else {"ir": str(ir)}
        self.kernel = self.asm.get("cubin")
        self.metadata_group: dict = {}
        names = list(src.fn.arg_names)
        rt = [p.name for p in ir.params if not getattr(p, "constexpr", False)]
        self._rt_index = [names.index(n) for n in rt]
        self._num_args = len(names)
        self.module = None
        self.function = None
        self.n_regs = md.get("n_regs", 0)
        self.n_spills = md.get("n_spills", 0)
        self.n_max_threads = newt_kernel.n_max_threads if newt_kernel is not None else 1024
        self._interpreted: bool | None = None

    # -- Triton's runtime surface -----------------------------------------------------------------------------
    def interpreted(self) -> bool:
        """Whether launches run on newt's interpreter: a ``"cpu"`` target, no GPU, or the drop-in's rule
        (``NEWT_INTERPRET`` / ``TRITON_INTERPRET``)."""
        if self._interpreted is None:
            self._interpreted = self.newt is None or interpret_rule()
        return self._interpreted

    def _init_handles(self) -> None:
        """Load the cubin on the current device (once); nothing to load for the interpreter."""
        if self.module is not None or self.interpreted():
            return
        from newt.runtime.errors import OutOfResources
        dev = current_driver().get_current_device()
        max_shared = current_driver().utils.get_device_properties(dev)["max_shared_mem"]
        if self.metadata.shared > max_shared:
            raise OutOfResources(self.name, "shared memory", self.metadata.shared, max_shared)
        self.newt._init_handles()
        self.module, self.function = self.newt.module, self.newt.function

    @property
    def run(self):
        self._init_handles()
        return self._launch

    def _launch(self, gx, gy, gz, stream, function, packed_metadata, launch_metadata, enter_hook, exit_hook,
                *args):
        if enter_hook is not None:
            enter_hook(launch_metadata)
        if len(args) == self._num_args:
            args = tuple(args[i] for i in self._rt_index)
        elif len(args) != len(self._rt_index):
            raise TypeError(f"{self.name}: the compiled kernel takes {self._num_args} arguments "
                            f"({len(self._rt_index)} at run time), got {len(args)}")
        if self.interpreted():
            from newt import interpreter
            from newt.runtime.specialize import unwrap
            interpreter.launch(self.ir, (gx, gy, gz), [unwrap(a) for a in args],
                               num_warps=int(self.metadata.num_warps))
        else:
            self.newt.run((gx, gy, gz), *args, stream=stream)
        if exit_hook is not None:
            exit_hook(launch_metadata)

    def launch_metadata(self, grid, stream, *args):
        if knobs.runtime.launch_enter_hook is None:
            return None
        self._init_handles()
        ret = {"name": self.name, "function": self.function, "stream": stream}
        hook = getattr(self.src.fn, "launch_metadata", None)
        if callable(hook):
            ret.update(hook(grid, self.metadata, dict(zip(self.src.fn.arg_names, args))) or {})
        return _Lazy(ret)

    def __getitem__(self, grid):
        self._init_handles()

        def runner(*args, stream=None):
            if stream is None:
                stream = current_driver().get_current_stream()
            g = tuple(grid) + (1,) * (3 - len(grid))
            md = self.launch_metadata(g, stream, *args)
            self.run(g[0], g[1], g[2], stream, self.function, self.packed_metadata, md,
                     knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *args)
        return runner

    def __repr__(self):
        where = "interpreter" if self.newt is None else self.metadata.arch
        return f"<triton.compile'd {self.name} ({where}) num_warps={self.metadata.num_warps}>"


class _Lazy:
    """Triton's ``LazyDict``: ``get()`` gives the launch metadata a launch hook reads."""

    def __init__(self, data: dict):
        self.data = data

    def get(self) -> dict:
        return self.data


def _api_version() -> str:
    from newt.dropin import TRITON_API_VERSION
    return TRITON_API_VERSION


#: hash -> DropinCompiledKernel, the process's most recent ``_COMPILED_MAX`` (the newt build itself is cached on
#: disk too): a long torch.compile session compiles thousands of kernels, and holding every one's cubin and IR
#: would grow without bound
_COMPILED: collections.OrderedDict = collections.OrderedDict()
_COMPILED_MAX = 512


def compile(src, target=None, options=None, _env_vars=None):
    """``triton.compile(src, target=None, options=None)`` for an :class:`ASTSource`: newt's front end builds
    the kernel's IR; for a ``"cuda"`` target newt's backend compiles it to a cubin (NVRTC: no GPU needed).
    Returns a :class:`DropinCompiledKernel`."""
    if not isinstance(src, ASTSource):
        raise TypeError("newt's triton.compile takes an ASTSource (a @triton.jit kernel); Triton IR files "
                        f"(ttir/ttgir/ptx) have no meaning for newt, got {type(src).__name__}")
    if target is None:
        target = current_driver().get_current_target()
    if not isinstance(target, GPUTarget):
        target = GPUTarget(*target) if isinstance(target, (tuple, list)) and len(target) == 3 else target
    backend = make_backend(target)
    opts = backend.parse_options(dict(options or {}, **src.parse_options()))
    hash_ = hashlib.sha256(f"{triton_key()}-{src.hash()}-{backend.hash()}-{opts.hash()}".encode()).hexdigest()
    hit = _COMPILED.get(hash_)
    if hit is not None:
        _COMPILED.move_to_end(hash_)
        return hit
    from newt.frontend import build_ir
    from newt.runtime.grid import check_options
    arg_types, cvals, hints = src.specialization()
    fn = src.fn
    check_options(src.name, opts.num_warps, opts.num_stages, opts.num_ctas, opts.maxnreg)
    nk = None
    if backend.name == "cuda":
        from newt.runtime.compiler import compile_specialization
        nk = compile_specialization(fn, arg_types, cvals, hints, opts.arch, opts.num_warps, opts.num_stages,
                                    bool(opts.debug), maxnreg=opts.maxnreg)
    ir = nk.ir if nk is not None and nk.ir is not None else \
        build_ir(fn, arg_types, cvals, hints, num_warps=opts.num_warps, num_stages=opts.num_stages)
    ck = DropinCompiledKernel(src, target, opts, hash_, ir, nk)
    _COMPILED[hash_] = ck
    while len(_COMPILED) > _COMPILED_MAX:
        _COMPILED.popitem(last=False)
    return ck
