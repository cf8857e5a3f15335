"""What the workers run: compiling one specialization, timing one launch.

A :class:`CompileTask` names the kernel by reference (:class:`KernelRef`: the
module's file, its text's hash and the function's qualified name -- the
worker imports the file, so helpers and constants resolve as in the main
process) and carries the specialization the main process computed from the
real arguments (argument types, constexprs, divisibility hints), the target
and the options.  The worker compiles it with newt's pipeline (NVRTC; no GPU
needed), which also writes the content-addressed disk cache, and returns the
cache entry as bytes so that a worker on another machine needs no shared
directory: :func:`install` puts it into this process's caches.

A :class:`TimeTask` launches a function by reference on arguments made on the
worker (:class:`ArgSpec`: floating-point tensors from a seed, integer tensors
-- which may be indices -- shipped), screens it (one launch and a
synchronize: a fault stays in the worker) and times it
(:func:`newt.tune.bench.bench`: early stop for hopeless configs, optional CUDA
graph).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from typing import Any

__all__ = ["KernelRef", "CompileTask", "ArgSpec", "TimeTask", "compile_task", "time_task", "install",
           "compile_spec_for", "COMPILE", "TIME"]

COMPILE = "newt.tune.tasks:compile_task"
TIME = "newt.tune.tasks:time_task"


class KernelRef:
    """A module-level function of a ``.py`` file, findable from another process."""

    __slots__ = ("file", "qualname", "sha", "module", "text")

    def __init__(self, file: str, qualname: str, sha: str | None = None, module: str | None = None,
                 text: str | None = None):
        self.file = file
        self.qualname = qualname
        self.sha = sha
        self.module = module
        self.text = text  # shipped to workers that do not have the file (another machine)

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, d):
        for k in self.__slots__:
            setattr(self, k, d.get(k))

    def __repr__(self):
        return f"KernelRef({self.file}:{self.qualname})"

    @classmethod
    def of(cls, obj, with_text: bool = False) -> "KernelRef | None":
        """The reference of a jit function (or any function) defined at the top level of a file; None for
        closures, ``exec``'d code and the interactive prompt (those compile in the main process).  A script's
        kernel (``__main__``) gets one: a worker loads the file under a private name, so its ``if __name__ ==
        "__main__":`` block does not run -- but the rest of its top level does, which is why the autotuner sends
        only kernels of importable modules to workers (:func:`in_importable_module`)."""
        fn = getattr(obj, "fn", obj)
        qn = getattr(obj, "__qualname__", None) or getattr(fn, "__qualname__", None)
        modname = getattr(obj, "__module__", None) or getattr(fn, "__module__", None)
        if not qn or "<" in qn:
            return None
        mod: Any = sys.modules.get(modname) if modname else None
        file = getattr(mod, "__file__", None) or getattr(getattr(fn, "__code__", None), "co_filename", None)
        if not file or not file.endswith(".py") or not os.path.isfile(file):
            return None
        if mod is not None:  # the name must lead to this very object
            cur: Any = mod
            for part in qn.split("."):
                cur = getattr(cur, part, None)
            for _ in range(8):  # an @autotune / @heuristics wrapper over this jit function names it too
                if cur is obj or cur is None:
                    break
                cur = getattr(cur, "fn", None) if type(cur).__name__ in ("Autotuner", "Heuristics") else None
            if cur is not obj:
                return None
        try:
            with open(file, "rb") as f:
                data = f.read()
        except OSError:
            return None
        return cls(os.path.abspath(file), qn, hashlib.sha256(data).hexdigest(), modname,
                   data.decode("utf-8", "replace") if with_text else None)


def in_importable_module(obj) -> bool:
    """Whether the function behind ``obj`` (a jit function, an autotune / heuristics wrapper's ``fn``) belongs to a
    module that a fresh ``import`` finds by its name: not a script (``__main__``) and not a file loaded under a
    made-up name, as a harness loads Triton's tutorials.  The autotuner compiles other kernels in its own process:
    a worker finds a kernel by loading its file, and a script's top level is the program itself (tutorial 03
    runs its matmul, its checks and its whole benchmark there; on the H100 every worker ran them again and each
    of its 16 configs timed out at 120 s)."""
    fn = getattr(obj, "fn", obj)
    modname = getattr(obj, "__module__", None) or getattr(fn, "__module__", None)
    if not modname or modname == "__main__":
        return False
    mod = sys.modules.get(modname)
    file = getattr(mod, "__file__", None) or getattr(getattr(fn, "__code__", None), "co_filename", None)
    return isinstance(file, str) and _imports_as(modname, file)


def _imports_as(modname: str, file: str) -> bool:
    """Whether a fresh ``import modname`` finds ``file``: searched on ``sys.path`` (or the already imported
    parent package's ``__path__``), not read from ``sys.modules``, where a file loaded under a made-up name (a
    harness's ``types.ModuleType``, ``spec_from_file_location``) also sits.  Nothing is imported."""
    import importlib.machinery
    parent, _, last = modname.rpartition(".")
    path = None
    if parent:
        path = getattr(sys.modules.get(parent), "__path__", None)
        if path is None:
            return False
    try:
        spec = importlib.machinery.PathFinder.find_spec(last, path)
    except (ImportError, ValueError, AttributeError, OSError):
        return False
    origin = getattr(spec, "origin", None) if spec is not None else None
    return isinstance(origin, str) and os.path.abspath(origin) == os.path.abspath(file)


_MODULES: dict = {}
_SHIPPED_DIR: list = []  # this process's private directory for shipped kernel files


def _write_shipped(ref: KernelRef) -> str:
    """Write a shipped kernel text to a file of a private directory of this process (``mkdtemp``: mode 0700,
    an unpredictable name; removed at exit) and return its path.  The file is created exclusively and never
    through a symbolic link, so nothing another local user plants in the temporary directory is followed,
    overwritten or imported."""
    if not _SHIPPED_DIR:
        import atexit
        import shutil
        d = tempfile.mkdtemp(prefix="newt-tune-src-")
        atexit.register(shutil.rmtree, d, True)
        _SHIPPED_DIR.append(d)
    sub = tempfile.mkdtemp(prefix=(ref.sha or "x")[:16] + "-", dir=_SHIPPED_DIR[0])
    name = os.path.basename(ref.file)
    path = os.path.join(sub, name if name.endswith(".py") and not name.startswith(".") else "kernel.py")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(ref.text or "")
    return path


def _load_module(ref: KernelRef):
    key = (ref.file, ref.sha)
    mod = _MODULES.get(key)
    if mod is not None:
        return mod
    path = ref.file
    ok = False
    try:
        with open(path, "rb") as f:
            ok = ref.sha is None or hashlib.sha256(f.read()).hexdigest() == ref.sha
    except OSError:
        ok = False
    if not ok:
        if ref.text is None:
            raise FileNotFoundError(f"newt tuning worker: {path} is missing here or differs from the main "
                                    "process's (ship its text: KernelRef.of(fn, with_text=True))")
        path = _write_shipped(ref)
    # the module's own name when it imports cleanly as that file (so its imports of siblings work);
    # else a private name, so that ``if __name__ == "__main__":`` blocks do not run
    m = None
    if ref.module and ref.module != "__main__" and ok:
        try:
            m = importlib.import_module(ref.module)
            if os.path.abspath(getattr(m, "__file__", "") or "") != os.path.abspath(path):
                m = None
        except Exception:  # fall back to loading the file
            m = None
    if m is None:
        name = "__newt_tune__" + hashlib.sha256(path.encode()).hexdigest()[:12]
        d = os.path.dirname(path)
        if ok and d not in sys.path:  # (the shipped text's private directory holds no siblings to import)
            sys.path.insert(0, d)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"newt.tune: cannot load the kernel's file {path}")
        m = importlib.util.module_from_spec(spec)
        sys.modules[name] = m
        spec.loader.exec_module(m)
    _MODULES[key] = m
    return m


def resolve_ref(ref: KernelRef):
    obj = _load_module(ref)
    for part in ref.qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _jit_base(fn):
    from newt.runtime.compiler import _unwrap
    return _unwrap(fn)


class CompileTask:
    """One specialization of one kernel to compile (picklable)."""

    def __init__(self, ref: KernelRef, arg_types: dict, constexprs: dict, hints: dict, target: str,
                 num_warps: int, num_stages: int, debug: bool = False, key: str | None = None, label=None,
                 maxnreg: int | None = None):
        self.ref = ref
        self.arg_types = arg_types
        self.constexprs = constexprs
        self.hints = hints
        self.target = target
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.debug = debug
        self.key = key  # the main process's cache key
        self.label = label
        self.maxnreg = maxnreg  # the register cap (the maxnreg launch option), None: the compiler's choice

    def __repr__(self):
        return f"CompileTask({self.ref.qualname} {self.constexprs} w{self.num_warps} s{self.num_stages})"


def compile_spec_for(kernel, args, kwargs, num_warps: int, num_stages: int, target: str | None = None,
                     ref: KernelRef | None = None, label=None, with_text: bool = False,
                     maxnreg: int | None = None) -> CompileTask | None:
    """The :class:`CompileTask` of launching ``kernel(*args, **kwargs)`` with these options (``kwargs`` holds
    constexpr values; ``@newt.heuristics`` wrappers are applied like at launch).  None when the kernel cannot
    be found from another process."""
    from newt.runtime import compiler
    from newt.runtime import specialize as sp
    kwargs = dict(kwargs)
    fn = kernel
    nargs = None
    while type(fn).__name__ in ("Autotuner", "Heuristics"):
        if type(fn).__name__ == "Heuristics":
            nargs = fn.apply(args, kwargs, nargs)  # as at launch
        fn = fn.fn
    base = _jit_base(fn)
    if "maxnreg" in kwargs and "maxnreg" not in base.arg_names:
        maxnreg = kwargs.pop("maxnreg")
    for opt in ("num_warps", "num_stages"):
        if opt in kwargs and opt not in base.arg_names:
            v = kwargs.pop(opt)
            if opt == "num_warps":
                num_warps = v
            else:
                num_stages = v
    ref = ref or KernelRef.of(base, with_text=with_text)
    if ref is None:
        return None
    spec = sp.specialize(base, tuple(args), kwargs)
    if target is None:
        target = default_target()
    debug = bool(getattr(base, "debug", False))
    key = compiler.cache_key(base, spec.arg_types, spec.constexprs, spec.divisibility, target, num_warps,
                             num_stages, debug, fingerprint=base.fingerprint(), maxnreg=maxnreg)
    return CompileTask(ref, dict(spec.arg_types), dict(spec.constexprs), dict(spec.divisibility), target,
                       int(num_warps), int(num_stages), debug, key, label, maxnreg=maxnreg)


def default_target() -> str:
    """The current GPU's target, else ``NEWT_TARGET`` (default sm_90a)."""
    from newt.runtime import driver
    from newt.runtime.jit import default_target as dt
    if driver.has_gpu():
        return driver.device_info(driver.current_device_fn()()).target
    return dt()


def target_features(target: str | None = None) -> dict:
    """What newt's CUDA backend does on ``target`` (default :func:`default_target`), for tuners above newt:
    ``{"target", "wgmma", "tma"}`` -- ``tma`` the mode descriptor tiles compile to (``"off"``, ``"desc"``,
    ``"all"``: ``NEWT_TMA``).  Raises ``ValueError`` for an unknown target or a bad ``NEWT_TMA``."""
    from newt.backend.cuda.targets import get_target
    from newt.backend.cuda.tma import tma_mode
    t = get_target(target or default_target())
    return {"target": t.name, "wgmma": bool(getattr(t, "wgmma", False)), "tma": tma_mode(t)}


def compile_task(task: CompileTask) -> dict:
    """Worker side: compile and return the cache entry (``key``, ``entry`` bytes, registers, spills)."""
    from newt.dropin import install_inherited
    from newt.runtime import cache, compiler
    install_inherited(task.target)  # the main process runs a Triton project through the drop-in: so do we
    base = _jit_base(resolve_ref(task.ref))
    ck = compiler.compile_specialization(base, task.arg_types, task.constexprs, task.hints, task.target,
                                         task.num_warps, task.num_stages, task.debug,
                                         fingerprint=base.fingerprint(), maxnreg=getattr(task, "maxnreg", None))
    meta, blobs = ck.to_entry()
    md = ck.metadata
    return {"status": "ok", "key": ck.cache_key, "entry": cache.encode(ck.cache_key, meta, blobs),
            "n_regs": md.get("n_regs"), "n_spills": md.get("n_spills"), "shared": md.get("shared"),
            "compile_seconds": md.get("compile_seconds")}


def install(result: dict, key: str | None = None) -> str | None:
    """Main side: put a compile result's entry into the memory and disk caches under ``key`` (default the
    worker's).  Returns the key, or None if the entry does not decode."""
    from newt.runtime import cache, compiler
    data = result.get("entry")
    if not data:
        return None
    try:
        meta, blobs = cache.decode(data)
    except Exception:  # a damaged entry: the main process compiles instead
        return None
    key = key or result.get("key")
    if key is None:
        return None
    if key not in compiler._MEMORY:
        try:
            ck = compiler.CompiledKernel.from_entry(key, meta, blobs)
        except (ValueError, TypeError, KeyError):  # not a kernel entry (compiler.check_entry): compile here
            return None
        compiler._MEMORY[key] = ck
        d = cache.get_cache()
        if d.enabled and not d.path(key).exists():
            d.put(key, meta, blobs)
    return key


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------


class ArgSpec:
    """A launch argument as the worker makes it: a tensor of this shape/strides/dtype filled from ``seed``
    (floating point) or with ``data`` (integers and booleans, e.g. indices), or a plain value."""

    __slots__ = ("kind", "dtype", "shape", "stride", "offset", "storage", "seed", "data", "value", "fill")

    def __init__(self, kind, value=None, dtype=None, shape=None, stride=None, offset=0, storage=0, seed=0,
                 data=None, fill=None):
        self.kind = kind
        self.value = value
        self.dtype = dtype
        self.shape = shape
        self.stride = stride
        self.offset = offset
        self.storage = storage
        self.seed = seed
        self.data = data
        self.fill = fill

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, d):
        for k in self.__slots__:
            setattr(self, k, d.get(k))

    @classmethod
    def of(cls, v, seed: int = 0, poison: bool = False):
        import torch
        if not isinstance(v, torch.Tensor):
            return cls("value", value=v)
        dt = str(v.dtype).replace("torch.", "")
        n = v.untyped_storage().nbytes() // max(1, v.element_size())
        spec = cls("tensor", dtype=dt, shape=tuple(v.shape), stride=tuple(v.stride()), offset=v.storage_offset(),
                   storage=n, seed=seed)
        if poison:
            spec.fill = "poison"
        elif not v.dtype.is_floating_point and not v.dtype.is_complex:
            spec.data = v.detach().cpu().clone()
        return spec

    def key(self):
        """What the made tensor depends on (the worker keeps made tensors under it), or None when its
        shipped data is too large to hash cheaply."""
        if self.kind != "tensor":
            return None
        data = None
        if self.data is not None:
            if self.data.numel() > (1 << 20):
                return None
            data = hashlib.sha256(self.data.contiguous().numpy().tobytes()).hexdigest()
        return (self.dtype, self.shape, self.stride, self.offset, self.storage, self.seed, self.fill, data)

    def make(self, device):
        """The tensor, made on ``device`` (random values drawn there: a 4096x4096 fp16 input takes
        milliseconds on a GPU, a quarter of a second on the CPU)."""
        import torch
        if self.kind != "tensor":
            return self.value
        dtype = getattr(torch, self.dtype)
        if self.data is not None:
            t = self.data.to(device)
            return t
        n = max(1, self.storage)
        if self.fill == "poison":
            flat = torch.full((n,), float("nan"), dtype=dtype, device=device)
        else:
            g = torch.Generator(device=device).manual_seed(int(self.seed))
            direct = dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
            flat = torch.randn((n,), generator=g, device=device, dtype=dtype if direct else torch.float32)
            if not direct:
                flat = flat.to(dtype)
        return torch.as_strided(flat, self.shape, self.stride, self.offset)


#: tensors made for timing tasks, kept for the next tasks of the same shapes (a tuning run launches many
#: configs on the same inputs): (device, ArgSpec.key()) -> tensor, oldest first
_MADE: dict = {}
_MADE_BYTES = [0]


def forget_made_args() -> None:
    """Drop the tensors kept by :func:`made_arg` (an in-process executor's tune is over)."""
    _MADE.clear()
    _MADE_BYTES[0] = 0


def made_arg(spec: "ArgSpec", device):
    """``spec.make(device)``, from the worker's cache when the same argument was made before (bounded by
    ``NEWT_TUNE_ARG_CACHE_MB``, default 8192 on a GPU; timing does not depend on the values, and the caller
    checks results on its own tensors)."""
    key = spec.key()
    if key is None:
        return spec.make(device)
    k = (str(device), key)
    t = _MADE.pop(k, None)
    if t is None:
        t = spec.make(device)
        nbytes = t.untyped_storage().nbytes()
        limit = int(os.environ.get("NEWT_TUNE_ARG_CACHE_MB", "8192")) << 20
        while _MADE and _MADE_BYTES[0] + nbytes > limit:
            old = _MADE.pop(next(iter(_MADE)))
            _MADE_BYTES[0] -= old.untyped_storage().nbytes()
        if nbytes > limit:
            return t
        _MADE_BYTES[0] += nbytes
    _MADE[k] = t  # most recently used last
    return t


class TimeTask:
    """Launch ``fn`` (a :class:`KernelRef`; ``fn[grid](...)`` when ``grid`` is given, else ``fn(...)``) on
    arguments made from ``args`` (ArgSpecs) and time it.  ``entries``: compile results to install first
    (cubins from workers elsewhere).  ``cutoff_ms``: stop early when the first runs are slower."""

    def __init__(self, fn: KernelRef, args: list, kwargs: dict | None = None, grid=None, entries=(),
                 warmup: float = 5, rep: float = 25, cutoff_ms: float | None = None, use_cuda_graph: bool = False,
                 label=None, launches=None):
        self.fn = fn
        self.args = args
        self.kwargs = dict(kwargs or {})
        self.grid = grid
        self.entries = list(entries)
        self.warmup = warmup
        self.rep = rep
        self.cutoff_ms = cutoff_ms
        self.use_cuda_graph = use_cuda_graph
        self.label = label
        self.launches = launches  # several (fn, args, kwargs, grid) launches timed as one (deuteron)


def time_task(task: TimeTask) -> dict:
    """Worker side: install the cubins, make the arguments, launch once (screen), then time."""
    import torch

    from newt.dropin import install_inherited
    from newt.runtime.driver import synchronize

    from .bench import bench
    install_inherited()
    for e in task.entries:
        install(e)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    launches = task.launches or [(task.fn, task.args, task.kwargs, task.grid)]
    calls: list[Any] = []
    for ref, args, kwargs, grid in launches:
        fn = resolve_ref(ref)
        vals = [made_arg(a, device) if isinstance(a, ArgSpec) else a for a in args]
        if grid is not None:
            calls.append(lambda fn=fn, vals=vals, kw=kwargs, g=grid: fn[g](*vals, **kw))
        else:
            calls.append(lambda fn=fn, vals=vals, kw=kwargs: fn(*vals, **kw))

    def run():
        for c in calls:
            c()

    run()
    if device == "cuda":
        synchronize()
    r = bench(run, warmup=task.warmup, rep=task.rep, cutoff_ms=task.cutoff_ms, use_cuda_graph=task.use_cuda_graph)
    r["device"] = os.environ.get("CUDA_VISIBLE_DEVICES", device)
    return r


# ---------------------------------------------------------------------------
# worker start-up (``NEWT_TUNE_PRELOAD``): done while the main process is still generating the first configs
# ---------------------------------------------------------------------------


def warm_compile(target: str | None = None) -> None:
    """A compile worker's start: import the compiler and run NVRTC once on a kernel that includes newt's
    prelude (loading libnvrtc and its builtin headers takes a quarter of a second, once per process)."""
    from cuda.bindings import nvrtc

    from newt.backend.cuda import (
        codegen,  # noqa: F401 - the lowerings, imported by every compile
        prelude,
    )
    from newt.backend.cuda.compiler import cache_options
    from newt.backend.cuda.targets import get_target
    from newt.runtime import cache, compiler  # noqa: F401 - what every compile task needs
    tgt = get_target(target or os.environ.get("NEWT_TARGET") or "sm_90a")
    src = f'#include "{prelude.HEADER_NAME}"\nextern "C" __global__ void newt_tune_warm(float *p) {{ p[0] = 1.0f; }}\n'
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"newt_tune_warm.cu", 1, [prelude.PRELUDE.encode()],
                                         [prelude.HEADER_NAME.encode()])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return
    try:
        opts = [f"--gpu-architecture={tgt.name}", "-std=c++17", "-default-device", *cache_options()]
        nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def warm_time() -> None:
    """A timing worker's start: import torch and newt's runtime, create the CUDA context and the L2-flush
    buffer."""
    import torch

    from newt.runtime import cache, compiler, jit  # noqa: F401 - what every timing task needs
    if torch.cuda.is_available():
        from newt.testing import l2_flush_buffer
        torch.empty(1, device="cuda")
        l2_flush_buffer()
        from newt.runtime import driver  # noqa: F401
