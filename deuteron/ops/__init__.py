"""What can appear inside a tile loop, by name: the ``torch.*`` functions, tensor methods and ``dt.*`` calls
deuteron compiles.  The op tables are derived from the op entries of ``deuteron/ops/<family>.py`` (each op declared
once, with ``deuteron.optable.op``); the rest (host-side names, tile attributes, Helion names deuteron lacks) are
plain data below.  Torch-free: the static checker (``deuteron.frontend``), the editor and the tracer read these
tables, so they agree on what is supported.

Families: ``elementwise``, ``shape``, ``creation``, ``reduce``, ``scan``, ``matmul``, ``memory``, ``atomics``,
``random``, ``asm``, ``tiles``.  ``find("torch.sum")`` / ``find("Tensor.sum")`` / ``find("dt.load")`` give an
op's entry.
"""

from __future__ import annotations

from ..optable import NODE_KINDS, OPS, Op
from . import (
    asm,  # noqa: F401
    atomics,  # noqa: F401
    creation,  # noqa: F401
    elementwise,  # noqa: F401  (the families declare their ops and node kinds on import)
    matmul,  # noqa: F401
    memory,  # noqa: F401
    random,  # noqa: F401
    reduce,  # noqa: F401
    scan,  # noqa: F401
    shape,  # noqa: F401
    tiles,  # noqa: F401
)
from .elementwise import FLOAT_UNARY, UNARY

__all__ = ["OPS", "NODE_KINDS", "Op", "find", "FAMILIES", "TORCH_FUNCTIONS", "FUNCTIONAL", "TENSOR_METHODS",
           "DT_DEVICE", "DT_HOST_ONLY", "HELION_UNSUPPORTED", "TILE_ATTRS", "VALUE_ATTRS", "HOST_TORCH_OK",
           "HOST_METHOD_OK", "HOST_ATTR_OK", "UNARY", "FLOAT_UNARY", "supported", "dt_stubs"]

FAMILIES = ("elementwise", "shape", "creation", "reduce", "scan", "matmul", "memory", "atomics", "random", "asm",
            "tiles")

#: names torch has that deuteron knows but does not compile inside a tile loop (a D004 names them)
KNOWN_UNSUPPORTED = {
    "torch": ("sort", "nan_to_num", "rand", "randn"),
    "functional": ("mish",),
    "methods": ("zero_", "fill_"),  # in-place: assign the result instead
}


def _spellings(kind: str) -> dict:
    out: dict = {}
    for o in OPS.values():
        for n in getattr(o, kind):
            if n in out:
                raise ValueError(f"{kind} spelling {n!r} names both {out[n]!r} and {o.name!r}")
            out[n] = o.name
    for n in KNOWN_UNSUPPORTED[kind]:
        out.setdefault(n, None)
    return out


#: ``torch.<name>`` functions supported inside tile loops -> op (None: known, not supported)
TORCH_FUNCTIONS = _spellings("torch")
#: ``torch.nn.functional.<name>`` supported inside tile loops -> op
FUNCTIONAL = _spellings("functional")
#: tensor methods supported on values inside tile loops -> op
TENSOR_METHODS = _spellings("methods")
#: ``dt.<name>`` callable inside tile loops: every ``dt.*`` op, and the loops
DT_DEVICE = {o.stub.__name__ for o in OPS.values() if o.stub is not None} | {"tile", "grid", "jagged_tile"}


def find(spelling: str) -> Op | None:
    """The op a spelling names: ``"torch.sum"``, ``"torch.nn.functional.relu"``, ``"Tensor.sum"``, ``"dt.load"``,
    or an op's own name."""
    if spelling in OPS:
        return OPS[spelling]
    for prefix, table in (("torch.nn.functional.", FUNCTIONAL), ("F.", FUNCTIONAL), ("torch.", TORCH_FUNCTIONS),
                          ("Tensor.", TENSOR_METHODS)):
        if spelling.startswith(prefix):
            name = table.get(spelling[len(prefix):])
            return OPS.get(name) if name is not None else None
    return None


def dt_stubs() -> dict:
    """``dt.<name>`` -> its stub, for every ``dt.*`` op (what ``import deuteron as dt`` exports)."""
    return {o.stub.__name__: o.stub for o in OPS.values() if o.stub is not None}


#: ``dt.<name>`` callable only in host code
DT_HOST_ONLY = {"register_block_size", "register_tunable", "specialize", "barrier"}

#: Helion language functions deuteron does not have, and why (a located D004 ``UnsupportedConstruct`` names them)
HELION_UNSUPPORTED = {
    "inline_triton": "deuteron generates newt, not Triton source snippets",
    "triton_kernel": "deuteron generates newt, not calls of @triton.jit functions",
    "dot_scaled": "newt has no block-scaled (microscaling) dot",
    "stacktensor_like": "tensors on several devices (stack tensors) are not supported",
    "make_async_remote_copy": "multi-device (distributed) kernels are not supported",
    "remote_barrier": "multi-device (distributed) kernels are not supported",
    "breakpoint": "the generated kernel cannot stop in a debugger (run kernel.ref to step through eagerly)",
    "device_print": "the generated kernel does not print (run kernel.ref to print eagerly)",
    "load_bfloat": "quantized loads are not supported", "load_float": "quantized loads are not supported",
}

#: tile attributes
TILE_ATTRS = {"index": "the 1-D int32 indices the tile covers", "begin": "the first index (a scalar)",
              "end": "one past the last index, clipped to the loop's end (a scalar)",
              "block_size": "the tile size (a compile-time constant)", "id": "the tile's number along its loop",
              "count": "the number of tiles along its loop"}

#: attributes of a value inside a tile loop
VALUE_ATTRS = {"dtype", "shape", "T", "ndim", "mT", "device"}

#: host-side torch calls that allocate or describe tensors (no tensor work: no D001)
HOST_TORCH_OK = {
    "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "empty_strided",
    "broadcast_tensors", "broadcast_shapes", "Size", "device", "finfo", "iinfo", "promote_types",
    "result_type", "is_tensor", "is_floating_point", "get_default_dtype", "tensor", "as_strided",
    "randn", "rand", "randint", "manual_seed",
}

#: tensor methods that are metadata, views or allocations (no D001 on the host)
HOST_METHOD_OK = {
    "size", "stride", "dim", "numel", "view", "reshape", "contiguous", "t", "transpose", "permute", "expand",
    "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten", "new_empty", "new_zeros", "new_full",
    "new_ones", "new_empty_strided", "data_ptr", "is_contiguous", "element_size", "storage_offset",
    "as_strided", "view_as", "reshape_as", "dim_order", "get_device", "nelement", "is_floating_point",
    "movedim", "narrow", "select", "unbind", "chunk", "split", "squeeze_", "unsqueeze_", "fill_", "zero_",
}

#: tensor attributes that are metadata (never tensor work)
HOST_ATTR_OK = {"shape", "dtype", "device", "ndim", "is_cuda", "layout", "T", "mT", "itemsize", "requires_grad",
                "is_contiguous", "names"}


def supported(table: dict, name: str) -> bool:
    return table.get(name) is not None
