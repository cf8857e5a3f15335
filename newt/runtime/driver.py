"""The CUDA driver side of the runtime: contexts, module loading, the launch fast path, errors.

Everything goes through ``cuda.bindings.driver`` (no hand-written ctypes) on
torch's context (the device's primary context) and torch's current stream.

Launching: a :class:`Launcher` is one compiled kernel loaded on one device.
Its ``launch(gx, gy, gz, stream, *values)`` is generated Python code that
packs the run-time arguments with one precompiled ``struct`` call into a
buffer whose ``void*[]`` parameter array was built once, and calls
``cuLaunchKernel`` with integer addresses — no per-launch allocation.

Errors: a failed launch raises :class:`LaunchError` naming the kernel.  Kernels
run asynchronously, so a fault inside a kernel (illegal address, device
assert) poisons the context and shows up at the next synchronisation or
launch; :func:`synchronize` and the launch path then raise
:class:`KernelFaultError` naming the last newt kernel launched.
``NEWT_LAUNCH_BLOCKING=1`` (or ``@newt.jit(debug=True)``) synchronises after
every launch so the error names the kernel that faulted.
"""

from __future__ import annotations

import collections
import os
import struct
import threading

from .errors import KernelFaultError, LaunchError, OutOfResources
from .grid import GRID_LIMITS, grid_limit_error  # noqa: F401  (re-exported)

_torch = None
_drv = None

#: the newt Launchers launched most recently (successfully), oldest first; cleared by a successful
#: ``synchronize()``.  Fault messages name them.
HISTORY: collections.deque = collections.deque(maxlen=8)


def last_launched():
    return HISTORY[-1] if HISTORY else None

#: errors after which the context is unusable (the kernel faulted)
STICKY = {
    700: "an illegal memory access was encountered",
    702: "the launch timed out",
    709: "the context was destroyed",
    710: "a device-side assert was triggered",
    714: "a hardware stack error",
    715: "an illegal instruction was encountered",
    716: "a misaligned address was accessed",
    717: "an address outside the global address space was accessed",
    718: "an invalid program counter",
    719: "an exception occurred on the device while executing a kernel",
}


def torch():
    global _torch
    if _torch is None:
        import torch as t
        _torch = t
    return _torch


def cu():
    """``cuda.bindings.driver`` (imported on first use)."""
    global _drv
    if _drv is None:
        from cuda.bindings import driver as d
        _drv = d
    return _drv


_HAS_GPU = None


def has_gpu() -> bool:
    global _HAS_GPU
    if _HAS_GPU is None:
        try:
            _HAS_GPU = bool(torch().cuda.is_available())
        except Exception:
            _HAS_GPU = False
    return _HAS_GPU


def _no_device() -> int:
    return -1


def current_device_fn():
    """A fast callable returning torch's current CUDA device index (-1 without a GPU)."""
    if not has_gpu():
        return _no_device
    t = torch()
    t.cuda.init()  # after this, the raw getter is safe and skips torch's lazy-init checks on every launch
    raw = getattr(t._C, "_cuda_getDevice", None)
    return raw if raw is not None else t.cuda.current_device


def current_stream_fn():
    """A fast callable ``device -> raw CUstream int`` for torch's current stream."""
    t = torch()
    raw = getattr(t._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda dev: t.cuda.current_stream(dev).cuda_stream


def stream_handle(stream) -> int:
    """An int CUstream from an int, a ``torch.cuda.Stream`` or a ``CUstream``."""
    if isinstance(stream, int):
        return stream
    s = getattr(stream, "cuda_stream", None)
    if s is not None:
        return int(s)
    return int(stream)


_STREAMS: dict = {}  # raw stream handle -> CUstream (saves a conversion per launch)


def stream_object(handle):
    """The ``CUstream`` for a raw stream handle (cached)."""
    try:
        h = int(handle)
    except TypeError:
        raise TypeError(f"stream must be an int handle, a torch.cuda.Stream or a CUstream, got {handle!r}") from None
    s = _STREAMS.get(h)
    if s is None:
        if len(_STREAMS) > 1024:
            _STREAMS.clear()
        s = _STREAMS[h] = cu().CUstream(h)
    return s


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------


def error_name(code) -> str:
    try:
        return cu().CUresult(int(code)).name
    except Exception:
        return f"CUDA error {int(code)}"


def error_string(code) -> str:
    try:
        err, s = cu().cuGetErrorString(cu().CUresult(int(code)))
        if not err and s:
            return s.decode() if isinstance(s, bytes) else str(s)
    except Exception:
        pass
    return STICKY.get(int(code), "")


def check(result, what: str, kernel: str | None = None):
    """Raise a LaunchError if a cuda.bindings call failed; return its value(s)."""
    err = result[0]
    if err:
        code = int(err)
        msg = f"{what} failed: {error_name(code)} ({error_string(code)})"
        if kernel:
            msg = f"{kernel}: {msg}"
        if code in STICKY:
            raise KernelFaultError(msg + _fault_context(), kernel=kernel, code=error_name(code), sticky=True)
        raise LaunchError(msg, kernel=kernel, code=error_name(code))
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]


def _recent(exclude=None) -> list:
    """Distinct recently launched kernels, oldest first (by their last launch)."""
    out: list = []
    for ln in HISTORY:
        if ln is exclude:
            continue
        if ln in out:
            out.remove(ln)
        out.append(ln)
    return out


def _fault_context(current=None) -> str:
    recent = _recent(exclude=current)
    parts = []
    if recent:
        what = "newt kernel launched" if len(recent) == 1 else "newt kernels launched"
        parts.append(f"the {what} most recently (oldest first): " + ", ".join(ln.describe() for ln in recent))
    parts.append("the fault may also come from a non-newt kernel launched meanwhile; kernels run asynchronously, so "
                 "run with NEWT_LAUNCH_BLOCKING=1 to synchronise after each launch and name the faulting kernel. "
                 "The CUDA context is now unusable: restart the process")
    return ". " + "; ".join(parts) + "."


def synchronize(device=None):
    """Wait for all work on the device; a kernel fault raises KernelFaultError naming the kernel(s)."""
    if not has_gpu():
        return
    cur = current_device_fn()()
    if device is not None:
        t = torch()
        dev = t.device(device).index if not isinstance(device, int) else device
        if dev is not None and dev != cur:
            with t.cuda.device(dev):
                return synchronize()
    ensure_context(cur)
    err = cu().cuCtxSynchronize()[0]
    if not err:
        HISTORY.clear()
        return
    code = int(err)
    recent = _recent()
    who = ", ".join(ln.name for ln in recent) or None
    if len(recent) == 1:
        msg = f"kernel {recent[0].describe()} failed on the device: {error_name(code)} ({error_string(code)})"
    else:
        msg = f"a kernel failed on the device: {error_name(code)} ({error_string(code)})"
    if code in STICKY:
        ctx = _fault_context(recent[0] if len(recent) == 1 else None)
        raise KernelFaultError(msg + ctx, kernel=who, code=error_name(code), sticky=True)
    raise LaunchError(msg, kernel=who, code=error_name(code))


# ---------------------------------------------------------------------------
# devices and contexts
# ---------------------------------------------------------------------------

_CTX: dict = {}
_DEVINFO: dict = {}
_ctx_lock = threading.Lock()


def ensure_context(dev: int):
    """Make the device's primary context (the one torch uses) current in this thread."""
    d = cu()
    ctx = _CTX.get(dev)
    if ctx is None:
        with _ctx_lock:
            ctx = _CTX.get(dev)
            if ctx is None:
                torch().cuda.init()
                check(d.cuInit(0), "cuInit")
                cudev = check(d.cuDeviceGet(dev), "cuDeviceGet")
                ctx = check(d.cuDevicePrimaryCtxRetain(cudev), "cuDevicePrimaryCtxRetain")
                _CTX[dev] = ctx
    cur = check(d.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(cur) != int(ctx):
        check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


class DeviceInfo:
    def __init__(self, dev: int):
        d = cu()
        ensure_context(dev)
        cudev = check(d.cuDeviceGet(dev), "cuDeviceGet")
        A = d.CUdevice_attribute

        def attr(a):
            return check(d.cuDeviceGetAttribute(a, cudev), "cuDeviceGetAttribute")

        self.index = dev
        self.major = attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        self.minor = attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        self.max_shared_optin = attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.max_shared_default = attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)
        self.sm_count = attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.max_grid = (attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                         attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z))
        name = check(d.cuDeviceGetName(256, cudev), "cuDeviceGetName")
        self.name = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
        self.target = target_for_capability(self.major, self.minor)


def device_info(dev: int) -> DeviceInfo:
    info = _DEVINFO.get(dev)
    if info is None:
        info = _DEVINFO[dev] = DeviceInfo(dev)
    return info


def known_targets() -> dict:
    try:
        from newt.backend.cuda.targets import TARGETS
        return dict(TARGETS)
    except ImportError:
        return {}


def target_for_capability(major: int, minor: int) -> str:
    """The newt target for a device: ``NEWT_TARGET`` if set, else the best one it can run."""
    env = os.environ.get("NEWT_TARGET")
    if env:
        return env
    known = known_targets()
    if not known:  # no backend to ask: the plain name (Hopper gets its arch-specific features)
        return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")
    from newt.backend.cuda.targets import pick_target
    best = pick_target(major, minor)
    if best is not None:
        return best
    raise RuntimeError(f"newt has no target for compute capability {major}.{minor} (known: {sorted(known)}); "
                       "set NEWT_TARGET to override")


# ---------------------------------------------------------------------------
# packing
# ---------------------------------------------------------------------------

_CTYPE_CODES = {
    "bool": "?", "_Bool": "?",
    "char": "b", "signed char": "b", "int8_t": "b", "unsigned char": "B", "uint8_t": "B",
    "short": "h", "int16_t": "h", "unsigned short": "H", "uint16_t": "H",
    "int": "i", "int32_t": "i", "signed": "i", "unsigned": "I", "unsigned int": "I", "uint32_t": "I",
    "long long": "q", "int64_t": "q", "long": "q", "long int": "q", "long long int": "q",
    "unsigned long long": "Q", "uint64_t": "Q", "unsigned long": "Q", "size_t": "Q",
    "unsigned long long int": "Q",
    "float": "f", "double": "d", "half": "e", "__half": "e", "half_t": "e",
    "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16", "bfloat16": "bf16", "bf16_t": "bf16",
}

_NL_CODES = {"i1": "?", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "i64": "q",
             "u64": "Q", "fp32": "f", "fp64": "d", "fp16": "e", "bf16": "bf16"}


def struct_code(ctype: str | None, nl_type=None) -> str:
    """The ``struct`` code of a kernel parameter from its C type (or, failing that, its newt type)."""
    if ctype:
        c = " ".join(str(ctype).replace("const ", "").replace("__restrict__", "").split())
        if c.endswith("*"):
            return "Q"
        if c in _CTYPE_CODES:
            return _CTYPE_CODES[c]
    if nl_type is not None:
        if nl_type.is_ptr():
            return "Q"
        code = _NL_CODES.get(str(nl_type))
        if code:
            return code
    raise TypeError(f"cannot pass a kernel parameter of C type {ctype!r} / newt type {nl_type}")


def bf16_bits(x: float) -> int:
    """Round a Python float to bfloat16 (nearest even) and return its 16 bits."""
    (u,) = struct.unpack("<I", struct.pack("<f", float(x)))
    if (u & 0x7F800000) == 0x7F800000 and (u & 0x7FFFFF):
        return 0x7FC0
    u += 0x7FFF + ((u >> 16) & 1)
    return (u >> 16) & 0xFFFF


#: the code of a ``const __grid_constant__ CUtensorMap`` parameter (128 bytes, 64-byte aligned; the
#: launch encodes it from other parameters' values: ``tensormap.py``)
TMAP_CODE = "tmap"


def param_layout(codes):
    """(struct format, slot offsets, total bytes): each parameter in its own 8-byte slot (a tensor map
    in 128 bytes on a 64-byte boundary)."""
    fmt = ["<"]
    offsets = []
    off = 0
    for c in codes:
        if c == TMAP_CODE:
            pad = (-off) % 64
            if pad:
                fmt.append(f"{pad}x")
            off += pad
            offsets.append(off)
            fmt.append("128s")
            off += 128
            continue
        pc = "H" if c == "bf16" else c
        size = struct.calcsize("<" + pc)
        offsets.append(off)
        fmt.append(pc)
        pad = (-size) % 8
        if pad:
            fmt.append(f"{pad}x")
        off += size + pad
    return "".join(fmt), offsets, off


class ParamBuffer:
    """A reusable kernel-parameter block and its ``void*[]`` array (numpy-owned memory)."""

    def __init__(self, codes):
        import numpy as np
        self.fmt, self.offsets, size = param_layout(codes)
        self.packer = struct.Struct(self.fmt)
        raw = np.zeros(max(size, 8) + 64, dtype=np.uint8)
        skip = (-raw.__array_interface__["data"][0]) % 64  # tensor maps are 64-byte aligned
        self.data = raw[skip:skip + max(size, 8)]
        base = self.data.__array_interface__["data"][0]
        self.ptrs = np.array([base + o for o in self.offsets] or [0], dtype=np.uint64)
        self.params_addr = self.ptrs.__array_interface__["data"][0] if self.offsets else 0
        self.view = memoryview(self.data)


# ---------------------------------------------------------------------------
# launchers
# ---------------------------------------------------------------------------

_LOADED: dict = {}  # (id(compiled), dev) -> (module, function)


def load_function(compiled, dev: int):
    """Load a CompiledKernel's cubin on a device; returns (CUmodule, CUfunction)."""
    key = (compiled.cache_key, dev)
    hit = _LOADED.get(key)
    if hit is not None:
        return hit
    d = cu()
    ensure_context(dev)
    info = device_info(dev)
    md = compiled.metadata
    name = md.name
    dyn = md.dynamic_shared
    total_shared = md.shared
    if total_shared > info.max_shared_optin:
        raise OutOfResources(md.kernel_name, "shared memory", total_shared, info.max_shared_optin,
                             f"on {info.name}; try smaller blocks or fewer num_stages")
    module = check(d.cuModuleLoadData(compiled.asm["cubin"]), "cuModuleLoadData", md.kernel_name)
    func = check(d.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})", md.kernel_name)
    FA = d.CUfunction_attribute
    if total_shared > info.max_shared_default:  # more than 48 KB: opt in
        check(d.cuFuncSetAttribute(func, FA.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", md.kernel_name)
    max_threads = check(d.cuFuncGetAttribute(FA.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, func),
                        "cuFuncGetAttribute", md.kernel_name)
    threads = (md.num_warps + md.get("producer_warps", 0)) * 32  # (+ a warp-specialized loop's producer)
    if max_threads < threads:
        raise OutOfResources(md.kernel_name, "registers", md.n_regs * threads, 65536,
                             f"{md.n_regs} registers per thread allow only {max_threads} threads per block, "
                             f"num_warps={md.num_warps} needs {threads}")
    _LOADED[key] = (module, func)
    return module, func


def launch_blocking_env() -> bool:
    return os.environ.get("NEWT_LAUNCH_BLOCKING", "0") not in ("", "0", "false", "False")


_ENTRY_CACHE: dict = {}


def launch_entry(cooperative: bool = False) -> int | None:
    """The address of ``cuLaunchKernel`` (``cuLaunchCooperativeKernel``) for the compiled launcher, or None
    where the driver binding cannot give it (then launches go through ``cuda.bindings``)."""
    name = "cuLaunchCooperativeKernel" if cooperative else "cuLaunchKernel"
    d = cu()
    key = (id(d), name)
    if key not in _ENTRY_CACHE:
        addr = None
        try:
            r = d.cuGetProcAddress(name.encode(), 12000, 0)  # CU_GET_PROC_ADDRESS_DEFAULT
            if not int(r[0]) and r[1]:
                addr = int(r[1])
        except Exception:  # an older binding, a stand-in driver: the pure-Python launch
            addr = None
        _ENTRY_CACHE[key] = addr
    return _ENTRY_CACHE[key]


class Launcher:
    """A compiled kernel loaded on one device, with a generated ``launch`` function.

    ``launch(gx, gy, gz, stream, v0, ..., vN)`` takes the values of the
    caller's argument list (``select`` picks the run-time ones: the JIT passes
    every non-constexpr parameter, some of which became constexpr).
    """

    def __init__(self, compiled, dev: int, n_values: int | None = None, select=None, blocking: bool = False,
                 cooperative: bool = False):
        self.kernel = compiled
        self.cooperative = cooperative  # launch_cooperative_grid=True: cuLaunchCooperativeKernel
        self.dev = dev
        md = compiled.metadata
        self.name = md.kernel_name
        self.module, self.function = load_function(compiled, dev)
        codes = [p.code for p in compiled.params]
        if select is None:
            select = list(range(len(codes)))
        if n_values is None:
            n_values = len(codes)
        self.select = list(select)
        #: TMA tensor maps (``tensormap.py``): parameters after the ordinary ones, encoded per launch
        self.tensormaps = [dict(r) for r in (md.get("tensormaps") or [])]
        self._tmap_specs = self._tensormap_specs()
        codes = codes + [TMAP_CODE] * len(self.tensormaps)
        self.buffer = ParamBuffer(codes)
        self.block = (md.num_warps + md.get("producer_warps", 0)) * 32  # (+ the producer warpgroup)
        self.blocking = blocking or launch_blocking_env()
        self._lock = threading.Lock()
        #: the pure-Python launch (cuda.bindings); ``launch`` is the compiled one where it can be had
        self.py_launch = self._generate(n_values, codes)
        self.compiled = self._compiled_launch(n_values, codes)
        self.launch = self.compiled or self.py_launch

    def describe(self) -> str:
        return self.kernel.describe()

    def _generate(self, n_values: int, codes):
        d = cu()
        names = [f"a{i}" for i in range(n_values)]
        sel = []
        raw = []
        for j, i in enumerate(self.select):
            # an int: that argument; (i, k, ...): element [k]... of tuple argument i
            v = f"a{i}" if isinstance(i, int) else f"a{i[0]}" + "".join(f"[{k}]" for k in i[1:])
            raw.append(v)
            sel.append(f"_cvt{j}({v})" if codes[j] == "bf16" else v)
        tmaps = {}
        for k, (maker, ins) in enumerate(self._tmap_specs):
            tmaps[f"_tm{k}"] = maker
            sel.append(f"_tm{k}({', '.join(raw[x] if isinstance(x, int) else repr(x[0]) for x in ins)})")
        g = {
            "_lock": self._lock, "_pack": self.buffer.packer.pack_into, "_buf": self.buffer.view,
            "_cuLaunchKernel": d.cuLaunchKernel, "_func": self.function, "_bx": self.block,
            "_cuLaunchCooperativeKernel": getattr(d, "cuLaunchCooperativeKernel", None),
            "_shm": self.kernel.metadata.dynamic_shared, "_params": self.buffer.params_addr, "_hist": HISTORY.append,
            "_me": self, "_failed": self._failed, "_grid_error": self._grid_error, "_sync": self._sync_after,
            "_streams": _STREAMS, "_stream_object": stream_object,
        }
        for j, c in enumerate(codes):
            if c == "bf16":
                g[f"_cvt{j}"] = bf16_bits
        g.update(tmaps)
        args = ", ".join(["gx", "gy", "gz", "stream"] + names)
        packed = ", ".join(sel)
        body = [f"def launch({args}):"]
        body.append("    try:")
        body.append("        if gx <= 0 or gy <= 0 or gz <= 0 or gx > 2147483647 or gy > 65535 or gz > 65535:")
        body.append("            if gx == 0 or gy == 0 or gz == 0:")
        body.append("                return")
        body.append("            _grid_error(gx, gy, gz)")
        body.append("    except TypeError as e:")
        body.append("        _grid_error(gx, gy, gz, e)")
        body.append("    _st = _streams.get(stream)")
        body.append("    if _st is None:")
        body.append("        _st = _stream_object(stream)")
        body.append("    with _lock:")
        if sel:
            body.append(f"        _pack(_buf, 0, {packed})")
        body.append("        try:")
        if self.cooperative:  # every block co-resident (grid-wide synchronisation); CUDA rejects a grid too large
            body.append("            _r = _cuLaunchCooperativeKernel(_func, gx, gy, gz, _bx, 1, 1, _shm, _st, _params)")
        else:
            body.append("            _r = _cuLaunchKernel(_func, gx, gy, gz, _bx, 1, 1, _shm, _st, _params, 0)")
        body.append("        except (TypeError, OverflowError) as e:")
        body.append("            _grid_error(gx, gy, gz, e)")
        body.append("    if _r[0]:")
        body.append(f"        _failed(_r[0], gx, gy, gz, stream, ({packed}{',' if sel else ''}))")
        body.append("    _hist(_me)")
        if self.blocking:
            body.append("    _sync()")
        src = "\n".join(body) + "\n"
        exec(compile(src, f"<newt launcher {self.name}>", "exec"), g)
        return g["launch"]

    def _tensormap_specs(self) -> list:
        """Per tensor map: ``(maker, inputs)``, the maker (``tensormap.TensorMapMaker``, which caches by its
        inputs) and its inputs in order (base, sizes, strides), each a parameter index or a 1-tuple
        ``(constant,)``; both launchers encode from these."""
        from .tensormap import TensorMapMaker
        out = []
        for rec in self.tensormaps:
            ins = [("p", rec["base"]), *rec["dims"], *rec["strides"]]
            out.append((TensorMapMaker(rec, self.name),
                        tuple(int(x) if kind == "p" else (int(x),) for kind, x in ins)))
        return out

    def _tensormap_values(self, values) -> list:
        """The tensor maps' bytes for a launch's parameter values (the ordinary parameters, in order)."""
        return [maker(*(values[x] if isinstance(x, int) else x[0] for x in ins)) for maker, ins in self._tmap_specs]

    def _compiled_launch(self, n_values: int, codes):
        """The extension's launcher (``clauncher``) for this kernel, or None: blocking launches, no C
        compiler, no driver entry point, a parameter it cannot pack, ``NEWT_C_LAUNCHER=0``."""
        from . import clauncher
        if self.blocking or not clauncher.enabled():
            return None
        n_tm = len(self._tmap_specs)  # (tensor maps: 128-byte blobs after the ordinary parameters, encoded in C
        codes = list(codes[:len(codes) - n_tm]) + ["128s"] * n_tm  # by the makers from the launch's values)
        m = clauncher.module()
        entry = launch_entry(self.cooperative) if m is not None else None
        if entry is None:
            return None
        try:
            return m.Launcher(entry, self.cooperative, int(self.function), self.block,
                              self.kernel.metadata.dynamic_shared, bytes(clauncher.CODES[c] for c in codes),
                              tuple(tuple(i) if isinstance(i, (tuple, list)) else i for i in self.select), n_values,
                              self._c_failed, self.py_launch, HISTORY.append, self, tuple(self._tmap_specs))
        except (KeyError, TypeError, ValueError, OverflowError):
            return None

    def _c_failed(self, err, gx, gy, gz, stream, values):
        """The compiled launcher's error path: the same report (and context recovery) as the Python one."""
        codes = [p.code for p in self.kernel.params]
        picked = []
        for i in self.select:
            if isinstance(i, int):
                v = values[i]
            else:  # (argument, k, ...): an element of a tuple argument
                v = values[i[0]]
                for k in i[1:]:
                    v = v[k]
            picked.append(v)
        tmaps = self._tensormap_values(picked)
        sel = tuple(bf16_bits(v) if c == "bf16" else v for v, c in zip(picked, codes)) + tuple(tmaps)
        return self._failed(err, gx, gy, gz, stream, sel)

    def _grid_error(self, gx, gy, gz, exc=None):
        msg = grid_limit_error(self.name, (gx, gy, gz)) if exc is None else None
        raise LaunchError(msg or f"{self.name}: invalid grid ({gx!r}, {gy!r}, {gz!r}): grid dimensions must be "
                          f"non-negative ints" + (f" ({exc})" if exc else ""), kernel=self.name,
                          code="CUDA_ERROR_INVALID_VALUE")

    def _failed(self, err, gx, gy, gz, stream, values):
        code = int(err)
        d = cu()
        if code == 201:  # CUDA_ERROR_INVALID_CONTEXT: this thread has no current context yet
            ensure_context(self.dev)
            with self._lock:
                if values:
                    self.buffer.packer.pack_into(self.buffer.view, 0, *values)
                r = d.cuLaunchKernel(self.function, gx, gy, gz, self.block, 1, 1, self.kernel.metadata.dynamic_shared,
                                     stream, self.buffer.params_addr, 0)
            if not r[0]:
                HISTORY.append(self)
                return
            code = int(r[0])
        what = (f"launching {self.describe()} with grid ({gx}, {gy}, {gz}), {self.block} threads per block, "
                f"{self.kernel.metadata.dynamic_shared} bytes of dynamic shared memory")
        msg = f"{what} failed: {error_name(code)} ({error_string(code)})"
        if code in STICKY:
            raise KernelFaultError(f"{self.name}: a kernel launched earlier faulted, so launching this one failed: "
                                   f"{error_name(code)} ({error_string(code)})" + _fault_context(self),
                                   kernel=self.name, code=error_name(code), sticky=True)
        if code == 1:  # invalid value: usually the grid
            info = device_info(self.dev)
            msg += f"; the device allows grids up to {info.max_grid}"
        raise LaunchError(msg, kernel=self.name, code=error_name(code))

    def _sync_after(self):
        err = cu().cuCtxSynchronize()[0]
        if err:
            code = int(err)
            raise KernelFaultError(f"{self.describe()} failed on the device: {error_name(code)} "
                                   f"({error_string(code)}) (NEWT_LAUNCH_BLOCKING / debug=True: synchronised right "
                                   "after the launch, so this kernel is the one that failed). The CUDA context is "
                                   "now unusable: restart the process.", kernel=self.name, code=error_name(code),
                                   sticky=code in STICKY)


class NoDeviceLauncher:
    """Stands in for a Launcher when there is no GPU: warmup works, launching explains."""

    def __init__(self, compiled):
        self.kernel = compiled
        self.name = compiled.metadata.kernel_name

    def launch(self, gx=1, gy=1, gz=1, *args):
        msg = grid_limit_error(self.name, (gx, gy, gz))
        if msg:
            raise LaunchError(msg, kernel=self.name, code="CUDA_ERROR_INVALID_VALUE")
        raise RuntimeError(f"{self.name}: no CUDA GPU is available to launch this kernel; run it through the "
                           "interpreter with NEWT_INTERPRET=1 (or @newt.jit(interpret=True)), or use "
                           "kernel.warmup(...) / newt.compile(...) to compile without launching")

    def describe(self) -> str:
        return self.kernel.describe()
