"""Launch a compiled cubin with ``cuda.bindings.driver`` directly (no newt runtime):
module load, optional shared-memory opt-in, launch on torch's current stream."""

from __future__ import annotations

import ctypes

_MODULES = {}


def _check(res, what="CUDA call"):
    from cuda.bindings import driver as cu
    err = res[0] if isinstance(res, tuple) else res
    if err != cu.CUresult.CUDA_SUCCESS:
        _, s = cu.cuGetErrorString(err)
        raise RuntimeError(f"{what} failed: {err} {s}")
    if isinstance(res, tuple):
        return res[1] if len(res) == 2 else res[1:]
    return None


def load(binary):
    """(module, function) for a CompiledBinary, cached by cubin."""
    import torch
    from cuda.bindings import driver as cu
    torch.cuda.init()
    torch.empty(1, device="cuda")  # make torch's primary context current
    key = (binary.cubin, binary.name)
    hit = _MODULES.get(key)
    if hit is not None:
        return hit
    mod = _check(cu.cuModuleLoadData(binary.cubin), "cuModuleLoadData")
    fn = _check(cu.cuModuleGetFunction(mod, binary.name.encode()), "cuModuleGetFunction")
    if binary.dynamic_shared > 48 * 1024:
        _check(cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     binary.dynamic_shared), "cuFuncSetAttribute")
    _MODULES[key] = (mod, fn)
    return mod, fn


def _ctype_of(p):
    ct = p.ctype
    if ct.endswith("*"):
        return ctypes.c_void_p
    return {"int": ctypes.c_int32, "unsigned int": ctypes.c_uint32, "long long": ctypes.c_int64,
            "unsigned long long": ctypes.c_uint64, "float": ctypes.c_float, "double": ctypes.c_double,
            "bool": ctypes.c_bool}[ct]


def launch(binary, grid, *args, sync=True):
    """Launch ``binary`` over ``grid`` with ``args`` (torch tensors for pointers, Python numbers)."""
    import torch
    from cuda.bindings import driver as cu
    _, fn = load(binary)
    params = binary.module.params
    if len(args) != len(params):
        raise TypeError(f"{binary.name} takes {len(params)} arguments ({[p.name for p in params]}), "
                        f"got {len(args)}")
    vals, types = [], []
    for p, a in zip(params, args):
        t = _ctype_of(p)
        types.append(t)
        if t is ctypes.c_void_p:
            vals.append(a.data_ptr() if hasattr(a, "data_ptr") else int(a))
        else:
            vals.append(a)
    g = tuple(grid) + (1,) * (3 - len(grid))
    stream = torch.cuda.current_stream().cuda_stream
    kparams = (tuple(vals), tuple(types))
    maps = (getattr(binary.module, "metadata", None) or {}).get("tensormaps") or []
    if maps:  # TMA tensor maps (newt/runtime/tensormap.py): 128-byte parameters after the ordinary ones
        from newt.runtime.tensormap import TensorMapMaker

        def val(e):
            return vals[e[1]] if e[0] == "p" else e[1]
        objs = [t(v) for t, v in zip(types, vals)]
        for rec in maps:
            raw = TensorMapMaker(rec, binary.name)(vals[rec["base"]], *map(val, rec["dims"]),
                                                   *map(val, rec["strides"]))
            objs.append((ctypes.c_uint64 * 16).from_buffer_copy(raw))
        ptrs = (ctypes.c_void_p * len(objs))(*[ctypes.addressof(o) for o in objs])
        kparams = ctypes.addressof(ptrs)
    _check(cu.cuLaunchKernel(fn, g[0], g[1], g[2], 32 * binary.num_warps, 1, 1, binary.dynamic_shared,
                             cu.CUstream(stream), kparams, 0), "cuLaunchKernel")
    if sync:
        torch.cuda.synchronize()


def compile_fn(fn, arg_types, constexprs, div=None, num_warps=4, num_stages=3, target=None):
    """build_ir + generate_cuda + compile_cuda for the current GPU (or ``target``)."""
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.frontend import build_ir
    if target is None:
        import torch
        major, minor = torch.cuda.get_device_capability()
        target = {(9, 0): "sm_90a", (8, 0): "sm_80", (8, 9): "sm_89", (12, 0): "sm_120"}.get(
            (major, minor), f"sm_{major}{minor}")
    f = build_ir(fn, arg_types, constexprs, divisibility=div, num_warps=num_warps, num_stages=num_stages)
    return compile_cuda(generate_cuda(f, target, num_warps, num_stages), target)
