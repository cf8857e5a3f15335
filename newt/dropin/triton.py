"""The ``triton`` package as newt serves it in drop-in mode (``newt.dropin.install()``).

The modules below ``triton.language`` and ``triton.tools`` are newt's own modules under Triton's names
(``triton.language.extra.libdevice`` is ``newt.language.extra.libdevice`` where newt has it, ``triton.tools.
tensor_descriptor`` is ``newt.tools.tensor_descriptor``); ``triton.language`` itself holds newt.language's
objects (``tl.constexpr is nl.constexpr``) in Triton's layout (``tl.core``, ``tl.extra``).  The other
modules are small facades built here, each answering what Triton code, torch and libraries ask of it:

========================================  ===================================================================
``triton``                                ``__version__`` (:data:`~newt.dropin.TRITON_API_VERSION`), ``jit``,
                                          ``autotune``, ``heuristics``, ``Config``, ``cdiv``,
                                          ``next_power_of_2``, ``JITFunction``, ``KernelInterface``,
                                          ``CompilationError``, ``OutOfResources``, ``set_allocator``,
                                          ``constexpr_function``, ``TensorWrapper``, ``reinterpret``
``triton.runtime`` (``.jit``,             ``driver.active`` (``get_current_device``, ``get_current_target``,
``.autotuner``, ``.driver``,              ``get_active_torch_device``, ``utils.get_device_properties`` ...),
``.errors``)                              ``JITFunction`` (with Triton's ``params``), ``Autotuner``,
                                          ``Heuristics``, ``Config``
``triton.testing``                        ``do_bench``, ``do_bench_cudagraph``, ``assert_close``,
                                          ``perf_report``, ``Benchmark``, ``Mark``, and the peak-figure
                                          helpers ``nvsmi``, ``get_dram_gbps``,
                                          ``get_max_tensorcore_tflops``, ``get_max_simd_tflops``
``triton.compiler`` (``.compiler``,       ``CompiledKernel``, ``CompilationError``, and what torch.compile
``.errors``)                              calls (newt.dropin.compiler): ``ASTSource``, ``compile``,
                                          ``make_backend``, ``triton_key``
``triton.backends`` (``.compiler``,       ``GPUTarget``, ``BaseBackend`` (no ``AttrsDescriptor``: Triton
``.driver``)                              3.4 has none, and torch picks its code path by that probe),
                                          ``backends`` (``"nvidia"``, ``"cpu"``), ``DriverBase``
``triton.knobs``, ``triton.runtime.cache``  the settings and keys inductor reads (``knobs.runtime`` launch
                                          hooks, ``knobs.cache.dir``, ``triton_key``, ``_base32``)
========================================  ===================================================================

A module Triton has and newt does not (``triton._C``, ``triton.runtime.interpreter``) is a
``ModuleNotFoundError``, so the ``try: import ... except ImportError`` probes of torch and libraries take
their no-such-feature branch.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import types

from .compiler import (
    _DRIVER_STATE,
    BaseBackend,
    GPUTarget,
    current_driver,
    interpret_rule,
    reset_driver,
    set_default_driver,
)

__all__ = ["module_for", "has_module", "interpret_rule", "GPUTarget", "KernelParam", "jit", "ActiveDriver",
           "BaseBackend", "current_driver", "reset_driver"]

#: Triton module prefixes served by newt's module of the same path (``triton.language.x`` -> ``newt.language.x``)
_ALIASED = ("triton.language", "triton.tools")


def _newt_name(fullname: str) -> str:
    return "newt" + fullname[len("triton"):]


def _aliased(fullname: str) -> bool:
    return any(fullname == p or fullname.startswith(p + ".") for p in _ALIASED)


def _newt_has(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _make_extra():
    """``triton.language.extra``: newt's ``newt.language.extra`` where newt has it, else an empty package
    (Triton always has one; code probes ``hasattr(tl.extra, "cuda")``)."""
    if _newt_has("newt.language.extra"):
        return importlib.import_module("newt.language.extra")
    return _facade("triton.language.extra", "triton.language.extra (newt drop-in; newt has no extra modules)", {})


def has_module(fullname: str) -> bool:
    """Whether the drop-in serves module ``fullname`` (a ``triton`` module)."""
    if fullname in _FACADES:
        return True
    return _aliased(fullname) and _newt_has(_newt_name(fullname))


def module_for(fullname: str) -> types.ModuleType:
    """The module served as ``fullname``."""
    make = _FACADES.get(fullname)
    if make is not None:
        return make()
    if _aliased(fullname) and _newt_has(_newt_name(fullname)):
        return importlib.import_module(_newt_name(fullname))
    raise ModuleNotFoundError(f"No module named {fullname!r} (newt's drop-in for Triton does not provide it)",
                              name=fullname)


def _facade(name: str, doc: str, attrs: dict, lazy: dict | None = None) -> types.ModuleType:
    m = types.ModuleType(name, doc)
    m.__dict__.update(__newt_dropin__=True, __path__=[])  # a package: its submodules come through the drop-in's finder
    m.__file__ = __file__  # (scripts print or probe ``triton.__file__``: this file serves the module)
    m.__dict__.update(attrs)
    lazy = dict(lazy or {})

    def __getattr__(attr):
        target = lazy.get(attr)
        if target is None:
            if f"{name}.{attr}" in _FACADES or (_aliased(f"{name}.{attr}") and _newt_has(_newt_name(f"{name}.{attr}"))):
                target = (f"{name}.{attr}", None)
            else:
                raise AttributeError(f"module {name!r} has no attribute {attr!r} (newt's drop-in for Triton)")
        modname, member = target
        mod = importlib.import_module(modname)
        val = mod if member is None else getattr(mod, member)
        setattr(m, attr, val)
        return val

    m.__dict__["__getattr__"] = __getattr__
    return m


def _make_language():
    """``triton.language``: newt's language namespace (the same objects: ``tl.constexpr is nl.constexpr``)
    under Triton's module layout: ``tl.core`` is the whole language as in Triton, ``tl.extra`` is there
    without an import; anything else newt.language has (its submodules included) is looked up there."""
    import newt.language as nl
    attrs = {k: v for k, v in vars(nl).items() if not k.startswith("__")}
    m = _facade("triton.language", nl.__doc__, attrs)
    m.core = m
    m.extra = importlib.import_module("triton.language.extra")
    lazy_get = m.__dict__["__getattr__"]

    from newt.language import core as lc

    def getattr_(attr):
        if hasattr(nl, attr):
            return getattr(nl, attr)
        if not attr.startswith("_") and hasattr(lc, attr):
            # ``tl.core.get_int_dtype`` (inductor's sort helpers), the core module's own functions
            return getattr(lc, attr)
        return lazy_get(attr)

    m.__dict__["__getattr__"] = getattr_
    return m


# ---- where kernels run ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class KernelParam:
    """One parameter of a kernel, as Triton's ``JITFunction.params`` lists them (torch reads ``name``,
    ``num`` and ``is_constexpr``)."""
    num: int
    name: str
    is_constexpr: bool
    do_not_specialize: bool
    annotation: object

    @property
    def do_not_specialize_on_alignment(self) -> bool:
        return self.do_not_specialize


_JIT_CLASS = None


def _jit_class():
    """``DropinJITFunction``: newt's ``JITFunction`` with the drop-in's interpretation rule and Triton's
    ``params``; a subclass, so ``isinstance(k, triton.runtime.jit.JITFunction)`` (newt's class) holds."""
    global _JIT_CLASS
    if _JIT_CLASS is None:
        from newt.runtime.jit import JITFunction

        class DropinJITFunction(JITFunction):
            __doc__ = JITFunction.__doc__

            def is_interpreted(self) -> bool:
                return self.interpret if self.interpret is not None else interpret_rule()

            @property
            def params(self) -> list:
                return [KernelParam(i, n, n in self.constexpr_names, n in self.do_not_specialize, p.annotation)
                        for i, (n, p) in enumerate(self.signature.parameters.items())]

            @property
            def constexprs(self) -> list:
                return [i for i, n in enumerate(self.arg_names) if n in self.constexpr_names]

        _JIT_CLASS = DropinJITFunction
    return _JIT_CLASS


def __getattr__(name):
    if name == "DropinJITFunction":
        return _jit_class()
    raise AttributeError(name)


def jit(fn=None, *, version=None, repr=None, launch_metadata=None, do_not_specialize=None,
        do_not_specialize_on_alignment=None, debug=None, noinline=None, interpret=None):
    """``@triton.jit`` in drop-in mode: a newt kernel (``repr``, ``launch_metadata`` and
    ``do_not_specialize_on_alignment`` are profiling/specialization hints newt does not need)."""
    def deco(f):
        cls = _jit_class()
        return cls(f, do_not_specialize=tuple(do_not_specialize or ()), interpret=interpret, debug=debug,
                   noinline=bool(noinline))
    return deco(fn) if fn is not None else deco


# ---- triton.runtime.driver ------------------------------------------------------------------------------------

def _torch():
    import torch
    return torch


def _target_arch() -> int:
    """The compute capability kernels are built for: the current device's, else ``NEWT_TARGET``'s
    (default sm_90a)."""
    from newt.runtime.driver import has_gpu
    if has_gpu():
        major, minor = _torch().cuda.get_device_capability()
        return major * 10 + minor
    from newt.runtime.jit import default_target
    digits = "".join(ch for ch in default_target() if ch.isdigit())
    return int(digits) if digits else 90


#: what a device of the default target (an H100 SXM, sm_90) reports, used when there is no GPU
_NO_GPU_PROPERTIES = {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132,
                      "warpSize": 32, "sm_clock_rate": 1980000, "mem_clock_rate": 2619000, "mem_bus_width": 5120,
                      "max_threads_per_sm": 2048}


class _Utils:
    """``driver.active.utils``."""

    def get_device_properties(self, device=None) -> dict:
        from newt.runtime.driver import has_gpu
        if not has_gpu():
            return dict(_NO_GPU_PROPERTIES)
        torch = _torch()
        idx = torch.cuda.current_device() if device is None else int(device)
        p = torch.cuda.get_device_properties(idx)
        out = dict(_NO_GPU_PROPERTIES)
        out.update(multiprocessor_count=p.multi_processor_count, warpSize=getattr(p, "warp_size", 32),
                   max_shared_mem=getattr(p, "shared_memory_per_block_optin", out["max_shared_mem"]),
                   max_num_regs=getattr(p, "regs_per_multiprocessor", out["max_num_regs"]),
                   max_threads_per_sm=getattr(p, "max_threads_per_multi_processor", out["max_threads_per_sm"]))
        clock = getattr(p, "clock_rate", None)
        if clock:
            out["sm_clock_rate"] = clock
        return out


class ActiveDriver:
    """``triton.runtime.driver.active``: the CUDA driver when torch sees a GPU, else one that answers
    for the default target (device ``cpu``, where kernels run on the interpreter)."""

    backend = "cuda"

    def __init__(self):
        self.utils = _Utils()

    @staticmethod
    def is_active() -> bool:
        return True

    def _gpu(self) -> bool:
        from newt.runtime.driver import has_gpu
        return has_gpu()

    def get_current_device(self) -> int:
        return _torch().cuda.current_device() if self._gpu() else 0

    def set_current_device(self, device) -> None:
        if self._gpu():
            _torch().cuda.set_device(device)

    def get_current_stream(self, device=None) -> int:
        if not self._gpu():
            return 0
        torch = _torch()
        return torch.cuda.current_stream(device).cuda_stream

    def get_active_torch_device(self):
        torch = _torch()
        return torch.device("cuda", torch.cuda.current_device()) if self._gpu() else torch.device("cpu")

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cuda", _target_arch(), 32)

    def get_device_interface(self):
        torch = _torch()
        return torch.cuda if self._gpu() else torch.cpu

    def get_benchmarker(self):
        return _do_bench

    def get_empty_cache_for_benchmark(self):
        from newt.testing import l2_flush_buffer
        return l2_flush_buffer() if self._gpu() else _torch().empty(0)

    def clear_cache(self, cache) -> None:
        cache.zero_()

    def __repr__(self):
        return "<newt drop-in driver (cuda)>"


class CudaDriver(ActiveDriver):
    """The driver of ``triton.backends.backends["nvidia"]`` (what ``set_driver_to_gpu`` makes active): the
    default driver's answers."""


class CpuDriver(ActiveDriver):
    """The driver of ``triton.backends.backends["cpu"]`` (inductor's ``set_driver_to_cpu``): device 0 of the
    CPU, kernels compiled for target ``GPUTarget("cpu", 0, 1)`` run on newt's interpreter."""

    backend = "cpu"

    def _gpu(self) -> bool:
        return False

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cpu", 0, 1)

    def get_active_torch_device(self):
        return _torch().device("cpu")

    def get_device_interface(self):
        return _torch().cpu

    def get_empty_cache_for_benchmark(self):
        return _torch().empty(0)

    def __repr__(self):
        return "<newt drop-in driver (cpu: the interpreter)>"


def _driver_class(kind: str) -> type:
    return CpuDriver if kind == "cpu" else CudaDriver


_ACTIVE = None


def _active():
    global _ACTIVE
    if _ACTIVE is None:
        _ACTIVE = ActiveDriver()
    return _ACTIVE


set_default_driver(_active)


def _make_driver():
    m = _facade("triton.runtime.driver", "Triton's driver registry (newt drop-in): ``driver.active``.", {})
    state = _DRIVER_STATE

    def set_active(drv):
        state["active"] = drv

    def reset_active():
        state["active"] = None

    def getattr_(attr):
        if attr in ("active", "default"):
            return current_driver()
        raise AttributeError(f"module 'triton.runtime.driver' has no attribute {attr!r}")

    m.set_active, m.reset_active = set_active, reset_active
    m.driver = m  # ``from triton.runtime.driver import driver``: the registry is this module
    m.__dict__["__getattr__"] = getattr_
    return m


# ---- triton.testing -------------------------------------------------------------------------------------------

def _do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """``triton.testing.do_bench`` (Triton's default statistic is the mean)."""
    from newt.testing import do_bench
    return do_bench(fn, warmup=warmup, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                    return_mode=return_mode)


def _do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    return _do_bench(fn, warmup=0, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                     return_mode=return_mode)


def _nvsmi(attrs):
    """``triton.testing.nvsmi(["clocks.max.sm", ...])``: GPU 0's integer readings from ``nvidia-smi``."""
    import subprocess
    out = subprocess.check_output(["nvidia-smi", "-i", "0", f"--query-gpu={','.join(attrs)}",
                                   "--format=csv,noheader,nounits"], text=True)
    return [int(v) for v in out.strip().split(",")]


def _get_dram_gbps(device=None):
    """Peak DRAM bandwidth in GB/s (memory clock in kHz x bus width x 2 for DDR)."""
    p = _Utils().get_device_properties(device)
    return p["mem_clock_rate"] * p["mem_bus_width"] * 2 / 8 / 1e6


def _ops_per_subcore(dtype, table) -> int:
    name = str(dtype).replace("torch.", "")
    for names, ops in table:
        if name in names or "float8" in name and "fp8" in names:
            return ops
    raise RuntimeError("dtype not supported")


def _peak_tflops(dtype, clock_rate_khz, device, table) -> float:
    subcores = _Utils().get_device_properties(device)["multiprocessor_count"] * 4
    return subcores * clock_rate_khz * _ops_per_subcore(dtype, table) * 1e-9


def _get_max_tensorcore_tflops(dtype, clock_rate, device=None):
    """Peak tensor-core TFLOP/s at ``clock_rate`` kHz (sm_80 and later: 256 fp32/tf32 / int32, 512 fp16 /
    bf16, 1024 int8 / fp8 operations per sub-core and clock)."""
    return _peak_tflops(dtype, clock_rate, device, [(("float32", "int32"), 256),
                                                    (("float16", "bfloat16", "int16"), 512),
                                                    (("int8", "fp8", "fp8e4nv", "fp8e5", "fp8e4b15"), 1024)])


def _get_max_simd_tflops(dtype, clock_rate, device=None):
    """Peak FMA-unit TFLOP/s at ``clock_rate`` kHz (32 fp32, 64 fp16 / bf16 per sub-core and clock)."""
    return _peak_tflops(dtype, clock_rate, device, [(("float32",), 32), (("float16", "bfloat16"), 64)])


def _make_testing():
    from newt import testing as nt

    from . import perf
    attrs = {"do_bench": _do_bench, "do_bench_cudagraph": _do_bench_cudagraph, "assert_close": nt.assert_close,
             "perf_report": perf.perf_report, "Benchmark": perf.Benchmark, "Mark": perf.Mark,
             "nvsmi": _nvsmi, "get_dram_gbps": _get_dram_gbps, "get_max_tensorcore_tflops": _get_max_tensorcore_tflops,
             "get_max_simd_tflops": _get_max_simd_tflops}
    return _facade("triton.testing", "triton.testing (newt drop-in): timing, checks, benchmark reports.", attrs)


# ---- the other facades ----------------------------------------------------------------------------------------

def _runtime_attrs() -> dict:
    from newt.runtime import errors as er
    from newt.runtime.jit import JITFunction
    from newt.tune import autotuner as at
    return {"JITFunction": JITFunction, "KernelInterface": at.KernelInterface, "Autotuner": at.Autotuner,
            "Heuristics": at.Heuristics, "Config": at.Config, "autotune": at.autotune,
            "heuristics": at.heuristics, "OutOfResources": er.OutOfResources}


def _make_triton():
    import newt
    from newt.dropin import TRITON_API_VERSION
    ra = _runtime_attrs()
    attrs = {"__version__": TRITON_API_VERSION, "jit": jit, "cdiv": newt.cdiv,
             "next_power_of_2": newt.next_power_of_2, "CompilationError": newt.CompilationError, **ra}
    lazy = {"set_allocator": ("newt.runtime.allocator", "set_allocator"),
            "constexpr_function": ("newt.runtime.jit", "constexpr_function"),
            "TensorWrapper": ("newt.runtime.wrappers", "TensorWrapper"),
            "reinterpret": ("newt.runtime.wrappers", "reinterpret"),
            "MockTensor": ("newt.runtime.wrappers", "MockTensor"),
            "compile": ("newt.dropin.compiler", "compile"), "knobs": ("newt.dropin.compiler", "knobs")}
    return _facade("triton", "Triton's API served by newt (drop-in mode: ``python -m newt.dropin``).", attrs,
                   lazy)


def _make_runtime():
    lazy = {"driver": ("triton.runtime.driver", None)}
    return _facade("triton.runtime", "triton.runtime (newt drop-in).", _runtime_attrs(), lazy)


def _make_runtime_jit():
    from newt.runtime.jit import ConstexprFunction, JITFunction, constexpr_function
    from newt.tune.autotuner import KernelInterface
    attrs = {"JITFunction": JITFunction, "KernelInterface": KernelInterface, "jit": jit,
             "constexpr_function": constexpr_function, "ConstexprFunction": ConstexprFunction,
             "KernelParam": KernelParam}
    lazy = {"TensorWrapper": ("newt.runtime.wrappers", "TensorWrapper"),
            "reinterpret": ("newt.runtime.wrappers", "reinterpret")}
    return _facade("triton.runtime.jit", "triton.runtime.jit (newt drop-in).", attrs, lazy)


def _make_autotuner():
    return _facade("triton.runtime.autotuner", "triton.runtime.autotuner (newt drop-in).", _runtime_attrs())


def _make_runtime_errors():
    from newt.runtime import errors as er
    return _facade("triton.runtime.errors", "triton.runtime.errors (newt drop-in).",
                   {"OutOfResources": er.OutOfResources})


def triton_key() -> str:
    """``triton.compiler.compiler.triton_key()``: what compiled code depends on (torch keys its caches on it)."""
    from .compiler import triton_key as key
    return key()


def _compiler_attrs() -> dict:
    import newt
    from newt.runtime.compiler import CompiledKernel

    from . import compiler as dc
    return {"CompiledKernel": CompiledKernel, "CompilationError": newt.CompilationError, "triton_key": triton_key,
            "ASTSource": dc.ASTSource, "compile": dc.compile, "make_backend": dc.make_backend,
            "GPUTarget": GPUTarget, "knobs": dc.knobs}


def _make_compiler():
    return _facade("triton.compiler", "triton.compiler (newt drop-in).", _compiler_attrs())


def _make_compiler_compiler():
    return _facade("triton.compiler.compiler", "triton.compiler.compiler (newt drop-in).", _compiler_attrs())


def _make_compiler_errors():
    import newt
    return _facade("triton.compiler.errors", "triton.compiler.errors (newt drop-in).",
                   {"CompilationError": newt.CompilationError})


class DriverBase:
    """``triton.backends.driver.DriverBase``."""


def _backends() -> dict:
    """``triton.backends.backends``: newt's one compiler under the names torch looks for, ``"nvidia"`` (torch
    refuses to compile for CUDA without it) and ``"cpu"`` (inductor's ``cpu_backend="triton"``: the
    interpreter), each with its driver class (``triton_helpers.set_driver_to_cpu/gpu`` switch
    ``driver.active`` between them)."""
    from . import compiler as dc
    nb = dc.NewtBackend
    return {"nvidia": dc.Backend(nb, _driver_class("cuda")), "cpu": dc.Backend(nb, _driver_class("cpu"))}


def _make_backends():
    return _facade("triton.backends", "triton.backends (newt drop-in).",
                   {"BaseBackend": BaseBackend, "GPUTarget": GPUTarget, "backends": _backends(),
                    "DriverBase": DriverBase})


def _make_backends_compiler():
    return _facade("triton.backends.compiler", "triton.backends.compiler (newt drop-in).",
                   {"BaseBackend": BaseBackend, "GPUTarget": GPUTarget})


def _make_backends_driver():
    return _facade("triton.backends.driver", "triton.backends.driver (newt drop-in).", {"DriverBase": DriverBase})


def _make_knobs():
    from .compiler import knobs
    return knobs


def _make_runtime_cache():
    from . import compiler as dc
    return _facade("triton.runtime.cache", "triton.runtime.cache (newt drop-in): the keys torch reads.",
                   {"triton_key": dc.triton_key, "knobs": dc.knobs, "_base32": dc._base32})


_CACHE: dict[str, types.ModuleType] = {}


def _once(make):
    def get():
        key = make.__name__
        m = _CACHE.get(key)
        if m is None:
            m = _CACHE[key] = make()
        return m
    return get


_FACADES = {
    "triton": _once(_make_triton),
    "triton.language": _once(_make_language),
    "triton.language.core": _once(_make_language),
    "triton.language.extra": _make_extra,
    "triton.runtime": _once(_make_runtime),
    "triton.runtime.jit": _once(_make_runtime_jit),
    "triton.runtime.autotuner": _once(_make_autotuner),
    "triton.runtime.driver": _once(_make_driver),
    "triton.runtime.errors": _once(_make_runtime_errors),
    "triton.testing": _once(_make_testing),
    "triton.compiler": _once(_make_compiler),
    "triton.compiler.compiler": _once(_make_compiler_compiler),
    "triton.compiler.errors": _once(_make_compiler_errors),
    "triton.backends": _once(_make_backends),
    "triton.backends.compiler": _once(_make_backends_compiler),
    "triton.backends.driver": _once(_make_backends_driver),
    "triton.knobs": _once(_make_knobs),
    "triton.runtime.cache": _once(_make_runtime_cache),
}
