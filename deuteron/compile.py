"""Checking and compiling generated kernels without launching them.

``build_ir`` runs newt's front end on a generated kernel (no GPU needed): the
test that every config of every example produces a valid newt kernel.
``compile_binary`` goes on to CUDA C++ and a cubin through ``newt.compile``
(the autotuner's worker processes use it).
"""

from __future__ import annotations

import newt.language as nl

from .codegen import NL_DTYPE

__all__ = ["signature_of", "build_ir", "compile_binary"]


def _nl(dtype):
    name = NL_DTYPE[dtype].split(".", 1)[1]
    return getattr(nl, name)


def signature_of(gen, args: list) -> dict:
    """Parameter -> newt type for the generated kernel's run-time parameters (from the launch's values)."""
    sig = {}
    for (name, kind, _payload), v in zip(gen.runtime_params, args):
        if kind == "tensor":
            sig[name] = nl.pointer_type(_nl(v.dtype))
        elif kind == "scalar":
            if isinstance(v, bool):
                sig[name] = nl.int1
            elif isinstance(v, int):
                sig[name] = nl.int32 if -2 ** 31 <= v < 2 ** 31 else nl.int64
            else:
                sig[name] = nl.float32
        else:
            sig[name] = nl.int32 if -2 ** 31 <= v < 2 ** 31 else nl.int64
    return sig


def build_ir(gen, module, args: list):
    """The newt IR of a generated kernel for these run-time arguments (raises newt.CompilationError)."""
    from newt.frontend import build_ir as _build_ir
    kernel = getattr(module, gen.kernel_name)
    sig = signature_of(gen, args)
    constexprs = dict(gen.constexprs)
    # ints equal to 1 are specialized by newt's runtime: mirror it
    for (name, kind, _), v in zip(gen.runtime_params, args):
        if kind != "tensor" and isinstance(v, int) and not isinstance(v, bool) and v == 1:
            constexprs[name] = 1
            sig.pop(name, None)
    return _build_ir(kernel, sig, constexprs, num_warps=gen.num_warps, num_stages=gen.num_stages)


def compile_binary(gen, module, args: list, target: str):
    """newt.compile on the generated kernel: CUDA C++ -> cubin (no GPU needed)."""
    import newt
    kernel = getattr(module, gen.kernel_name)
    sig = signature_of(gen, args)
    constexprs = dict(gen.constexprs)
    hints = {}
    for (name, kind, _), v in zip(gen.runtime_params, args):
        if kind != "tensor" and isinstance(v, int) and not isinstance(v, bool) and v == 1:
            constexprs[name] = 1
            sig.pop(name, None)
        elif _divisible_by_16(kind, v):
            hints[name] = 16
    return newt.compile(kernel, signature=sig, constexprs=constexprs, target=target, num_warps=gen.num_warps,
                        num_stages=gen.num_stages, maxnreg=getattr(gen, "maxnreg", None), hints=hints)


def _divisible_by_16(kind, v) -> bool:
    """The divisibility newt's runtime specializes a launch on (a tensor's address, an integer), so the cubin
    compiled here is the one a launch with these arguments runs (16-byte aligned operands get cp.async / TMA
    loads; without the hint every tile load was a plain LDG)."""
    if kind == "tensor":
        return hasattr(v, "data_ptr") and v.data_ptr() % 16 == 0
    return isinstance(v, int) and not isinstance(v, bool) and v % 16 == 0
