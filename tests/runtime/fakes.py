"""Test doubles for the runtime's own logic on a machine without a GPU.

``FakeBackend`` stands in for ``newt.backend.cuda`` (deterministic "CUDA" and
"cubin" derived from the IR, counting compiles, optional failures), and
``FakeCU`` for ``cuda.bindings.driver`` (module loading and launches are
recorded; each launch decodes the packed kernel-parameter block so tests see
exactly what the GPU would receive).  The real backend and driver are tested
by the GPU suite and the offline compile tests.
"""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass

from newt.backend.cuda.codegen import CudaModule, CudaParam
from newt.backend.cuda.compiler import CompiledBinary
from newt.ir.types import type_str
from newt.runtime import driver

_CT = {"int1": "bool", "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
       "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
       "uint64": "unsigned long long", "fp16": "half_t", "bf16": "bf16_t", "fp32": "float", "fp64": "double"}


def fake_ctype(ty) -> str:
    if ty.is_ptr():
        return fake_ctype(ty.element_ty) + "*"
    return _CT[ty.name]


def FakeModule(fn, target, num_warps, num_stages, shared) -> CudaModule:
    """The backend's real ``CudaModule`` type with fake CUDA source (the IR's text)."""
    src = f"// fake CUDA: {fn.name} target={target} num_warps={num_warps} num_stages={num_stages}\n" + str(fn)
    params = [CudaParam(p.name, p.name, fake_ctype(p.type), type_str(p.type), 8 if p.type.is_ptr() else 4)
              for p in fn.params if not p.constexpr]
    return CudaModule(source=src, name=fn.name, params=params, shared_bytes=shared, num_warps=num_warps,
                      num_stages=num_stages, target=target, layouts={}, kernel=fn.name)


def FakeBinary(module, target) -> CompiledBinary:
    """The backend's real ``CompiledBinary`` type with a fake PTX and cubin."""
    digest = hashlib.sha256(module.source.encode()).hexdigest()
    return CompiledBinary(name=module.name, target=target, ptx=f"// fake PTX {target} {digest}",
                          cubin=b"FAKECUBIN" + digest.encode(), log="", n_regs=32, n_spills=0, spill_stores=0,
                          spill_loads=0, stack_frame=0, shared=module.shared_bytes, static_shared=0,
                          dynamic_shared=module.shared_bytes, num_warps=module.num_warps, module=module)


class FakeBackend:
    def __init__(self):
        self.generated = 0
        self.compiled = 0
        self.shared = lambda fn, num_warps, num_stages: 0
        self.fail = None  # callable(ir_fn, num_warps, num_stages) -> exception to raise, or None

    def generate_cuda(self, fn, target="sm_90a", num_warps=4, num_stages=3):
        self.generated += 1
        if self.fail is not None:
            e = self.fail(fn, num_warps, num_stages)
            if e is not None:
                raise e
        return FakeModule(fn, target, num_warps, num_stages, self.shared(fn, num_warps, num_stages))

    def compile_cuda(self, module, target):
        self.compiled += 1
        return FakeBinary(module, target)


@dataclass
class Launch:
    function: object
    grid: tuple
    block: tuple
    shared: int
    stream: int
    values: tuple
    cooperative: bool = False


class FakeDeviceInfo:
    index = 0
    major, minor = 9, 0
    max_shared_optin = 227 * 1024
    max_shared_default = 48 * 1024
    sm_count = 132
    max_grid = (2 ** 31 - 1, 65535, 65535)
    name = "Fake GPU"
    target = "sm_90a"


class FakeStream:
    def __init__(self, h):
        self.h = int(h)

    def __int__(self):
        return self.h


class FakeCU:
    """The parts of ``cuda.bindings.driver`` the runtime uses."""

    def __init__(self):
        from cuda.bindings import driver as real
        self.CUresult = real.CUresult
        self.CUfunction_attribute = real.CUfunction_attribute
        self.CUdevice_attribute = real.CUdevice_attribute
        self.launches: list[Launch] = []
        self.loaded: list[bytes] = []
        self.attributes: list = []
        self.buffers: dict = {}
        self.results: list = []  # results returned by the next launches (default 0)
        self.sync_result = 0
        self.max_threads = 1024

    def cuModuleLoadData(self, image):
        self.loaded.append(bytes(image))
        return (0, f"module{len(self.loaded)}")

    def cuModuleGetFunction(self, module, name):
        return (0, ("function", module, name.decode() if isinstance(name, bytes) else name))

    def cuFuncSetAttribute(self, f, attr, value):
        self.attributes.append((f, attr, value))
        return (0,)

    def cuFuncGetAttribute(self, attr, f):
        return (0, self.max_threads)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shm, stream, params, extra):
        for v in (gx, gy, gz, bx, by, bz, shm):  # like the Cython "unsigned int" conversions
            if operator.index(v) < 0:
                raise OverflowError("can't convert negative value to unsigned int")
        buf = self.buffers.get(params)
        values = buf.packer.unpack_from(buf.view) if buf is not None else ()
        self.launches.append(Launch(f, (gx, gy, gz), (bx, by, bz), shm, int(stream), tuple(values)))
        return (self.results.pop(0) if self.results else 0,)

    def cuLaunchCooperativeKernel(self, f, gx, gy, gz, bx, by, bz, shm, stream, params):
        r = self.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shm, stream, params, None)
        self.launches[-1].cooperative = True
        return r

    def CUstream(self, handle):
        return FakeStream(handle)

    def cuCtxSynchronize(self):
        return (self.sync_result,)

    def cuGetErrorString(self, err):
        return (0, f"fake description of {int(err)}".encode())


def install_fake_gpu(monkeypatch) -> FakeCU:
    cu = FakeCU()

    class RecordingParamBuffer(driver.ParamBuffer):
        def __init__(self, codes):
            super().__init__(codes)
            cu.buffers[self.params_addr] = self

    monkeypatch.setattr(driver, "_drv", cu)
    monkeypatch.setattr(driver, "_HAS_GPU", True)
    monkeypatch.setattr(driver, "current_device_fn", lambda: (lambda: 0))
    monkeypatch.setattr(driver, "current_stream_fn", lambda: (lambda dev: 1234))
    monkeypatch.setattr(driver, "ensure_context", lambda dev: None)
    monkeypatch.setattr(driver, "device_info", lambda dev: FakeDeviceInfo())
    monkeypatch.setattr(driver, "ParamBuffer", RecordingParamBuffer)
    monkeypatch.setattr(driver, "_LOADED", {})
    monkeypatch.setattr(driver, "_STREAMS", {})
    driver.HISTORY.clear()
    return cu


class FakeFunction(tuple):
    """A CUfunction stand-in the compiled launcher can take (``int()`` gives its handle)."""

    def __int__(self):
        return self[3]


def install_fake_c_launcher(monkeypatch, cu: FakeCU):
    """Launch through the compiled launcher (``newt/runtime/_launch.c``) with ``cu`` behind it: the
    extension's stand-in for ``cuLaunchKernel`` calls back here, and each launch is recorded in
    ``cu.launches`` decoded from the very parameter array the extension built.  Returns the module, or
    None when it cannot be built here (no C compiler)."""
    import ctypes

    from newt.runtime import clauncher
    mod = clauncher.module()
    if mod is None:
        return None
    functions: dict = {}
    packers: dict = {}

    def get_function(module, name):
        f = FakeFunction(("function", module, name.decode() if isinstance(name, bytes) else name,
                          0x1000 + 16 * len(functions)))
        functions[int(f)] = f
        return (0, f)

    def callback(func, gx, gy, gz, bx, by, bz, shm, stream, params, has_extra, cooperative):
        packer, offsets, sizes = packers[func]
        n = len(offsets)
        ptrs = (ctypes.c_void_p * max(n, 1)).from_address(params) if n else []
        raw = bytearray(packer.size + 8)
        for i in range(n):  # each parameter from its own pointer, placed where the Python launch packs it
            raw[offsets[i]:offsets[i] + sizes[i]] = ctypes.string_at(ptrs[i], sizes[i])
        cu.launches.append(Launch(functions[func], (gx, gy, gz), (bx, by, bz), shm, stream,
                                  tuple(packer.unpack_from(bytes(raw))), bool(cooperative)))
        assert not has_extra
        return cu.results.pop(0) if cu.results else 0

    entries = mod.fake_driver(callback)
    real_compiled = driver.Launcher._compiled_launch

    def compiled(self, n_values, codes):
        packers[int(self.function)] = (self.buffer.packer, self.buffer.offsets,
                                       [128 if c == driver.TMAP_CODE else 8 for c in codes])
        ln = real_compiled(self, n_values, codes)
        return ln

    cu.cuModuleGetFunction = get_function
    monkeypatch.setattr(driver, "launch_entry", lambda cooperative=False: entries[1 if cooperative else 0])
    monkeypatch.setattr(driver.Launcher, "_compiled_launch", compiled)
    return mod
