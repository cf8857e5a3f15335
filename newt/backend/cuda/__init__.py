"""The CUDA backend: tile IR -> CUDA C++ -> NVRTC -> PTX / cubin.

* ``generate_cuda(fn, target, num_warps, num_stages) -> CudaModule`` is pure
  Python (the language server shows its output); it imports neither torch nor
  the CUDA bindings.
* ``compile_cuda(module, target) -> CompiledBinary`` runs NVRTC through
  ``cuda.bindings.nvrtc`` (imported only there).
* ``sass(cubin) -> str`` disassembles with cuobjdump.
* ``targets.TARGETS`` holds what each architecture offers.

See docs/backend.md for the design (layouts, vectorization, reductions, the
dot lowerings and the cp.async pipeline).
"""

from .codegen import CudaModule, CudaParam, generate_cuda
from .targets import TARGETS, Target, get_target


def compile_cuda(module, target=None, **kw):
    """NVRTC: ``CudaModule`` -> ``CompiledBinary`` (see ``compiler.compile_cuda``)."""
    from .compiler import compile_cuda as _c
    return _c(module, target, **kw)


def sass(cubin: bytes) -> str:
    """SASS text of a cubin (cuobjdump)."""
    from .disasm import sass as _s
    return _s(cubin)


def compile_ir(fn, target="sm_90a", num_warps=4, num_stages=3, **kw):
    """``generate_cuda`` then ``compile_cuda``: returns the ``CompiledBinary`` (``.module`` is the CudaModule)."""
    return compile_cuda(generate_cuda(fn, target, num_warps, num_stages, **kw), target)


__all__ = ["generate_cuda", "compile_cuda", "compile_ir", "sass", "CudaModule", "CudaParam", "TARGETS", "Target",
           "get_target"]
