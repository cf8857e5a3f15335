"""Host side of TMA: ``CUtensorMap`` objects for ``cp.async.bulk.tensor`` (sm_90a).

The CUDA backend lowers a tile access whose addresses and bounds it can read off the IR (a tensor
descriptor's ``load``/``store``; ``newt/backend/cuda/tma.py``) to TMA and records, per tensor map, a
*recipe* in the kernel's metadata (``metadata["tensormaps"]``, JSON)::

    {"arg": "a_desc",              # the user's parameter (for error messages)
     "dtype": "fp16", "elem_bytes": 2,
     "base": 0,                    # index of the run-time parameter holding the base pointer
     "dims": [["p", 1], ["c", 64]],     # per dimension, outermost first: a run-time parameter or a constant
     "strides": [["p", 3], ["c", 1]],   # in elements, outermost first (the last one 1)
     "box": [128, 64],             # the shared-memory box, outermost first
     "swizzle": 128,               # 0 (none), 32, 64 or 128 bytes
     "fill": "zero"}               # out-of-bounds elements: "zero" or "nan"

The launch (``driver.Launcher``) passes one ``const __grid_constant__ CUtensorMap`` (128 bytes, 64-byte
aligned) per recipe after the ordinary parameters, encoded here with ``cuTensorMapEncodeTiled``
(``cuda.bindings.driver``) from that launch's values and cached by them.  :func:`encode_arguments` is
the pure-Python part (TMA's order -- innermost dimension first --, byte strides, enums, validation); it
needs no GPU.  Bad values raise :class:`TensorMapError` naming the kernel and the argument.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

__all__ = ["TensorMapError", "TensorMapArgs", "encode_arguments", "encode", "TensorMapMaker", "TMAP_BYTES",
           "DATA_TYPES", "SWIZZLES"]

#: bytes of one ``CUtensorMap`` (the kernel parameter), and its alignment
TMAP_BYTES = 128
TMAP_ALIGN = 64

#: newt element type -> ``CUtensorMapDataType`` (8-bit floats and ints move as bytes)
DATA_TYPES = {"fp16": 6, "bf16": 9, "fp32": 7, "fp64": 8, "int32": 3, "uint32": 2, "int64": 5, "uint64": 4,
              "int16": 1, "uint16": 1, "int8": 0, "uint8": 0, "fp8e4nv": 0, "fp8e5": 0, "fp8e4b15": 0,
              "fp8e4b8": 0, "fp8e5b16": 0}
_FLOATS = {"fp16", "bf16", "fp32", "fp64"}
#: swizzle bytes -> ``CUtensorMapSwizzle``
SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
_L2_128B = 2           # CU_TENSOR_MAP_L2_PROMOTION_L2_128B
_FILL_NAN = 1          # CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA


class TensorMapError(ValueError):
    """A launch's values cannot make the tensor map a kernel's TMA access needs (``kernel``, ``arg``)."""

    def __init__(self, message: str, kernel: str = "", arg: str = ""):
        self.kernel = kernel
        self.arg = arg
        super().__init__(message)


@dataclass(frozen=True)
class TensorMapArgs:
    """The arguments of ``cuTensorMapEncodeTiled``, in TMA's order (dimension 0 innermost)."""
    data_type: int
    rank: int
    address: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]   # bytes, dimensions 1 .. rank-1
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


def _where(kernel: str, arg: str) -> str:
    who = f"{kernel}: " if kernel else ""
    return who + (f"argument {arg!r}: " if arg else "")


def encode_arguments(recipe: dict, base: int, dims, strides, kernel: str = "") -> TensorMapArgs:
    """The ``cuTensorMapEncodeTiled`` arguments for ``recipe`` with a launch's ``base`` (an address),
    ``dims`` and ``strides`` (in elements, outermost first, as in the kernel); validated."""
    arg = str(recipe.get("arg", ""))
    at = _where(kernel, arg)
    dtype = str(recipe["dtype"])
    if dtype not in DATA_TYPES:
        raise TensorMapError(f"{at}TMA cannot move {dtype} elements", kernel, arg)
    eb = int(recipe["elem_bytes"])
    box = [int(b) for b in recipe["box"]]
    dims = [int(d) for d in dims]
    strides = [int(s) for s in strides]
    rank = len(box)
    if not 1 <= rank <= 5:
        raise TensorMapError(f"{at}a tensor map has 1 to 5 dimensions, not {rank}", kernel, arg)
    if len(dims) != rank or len(strides) != rank:
        raise TensorMapError(f"{at}the tensor map needs {rank} sizes and strides, got {len(dims)} and "
                             f"{len(strides)}", kernel, arg)
    swz = int(recipe.get("swizzle", 0))
    if swz not in SWIZZLES:
        raise TensorMapError(f"{at}swizzle must be 0, 32, 64 or 128 bytes, not {swz}", kernel, arg)
    fill = recipe.get("fill", "zero")
    if fill == "nan" and dtype not in _FLOATS:
        raise TensorMapError(f"{at}NaN padding needs a 16-, 32- or 64-bit float tensor, not {dtype}", kernel, arg)
    base = int(base)
    if base % 16:
        raise TensorMapError(f"{at}TMA needs a 16-byte aligned base address, got 0x{base:x} "
                             f"(offset {base % 16} bytes); set NEWT_TMA=0 to use plain loads", kernel, arg)
    for d, n in enumerate(dims):
        if not 0 < n <= 1 << 32:
            raise TensorMapError(f"{at}dimension {d} has size {n}; TMA needs sizes in 1 .. 2**32 (shape {dims})",
                                 kernel, arg)
    if strides[-1] != 1:
        raise TensorMapError(f"{at}the innermost stride must be 1, got {strides[-1]} (strides {strides})",
                             kernel, arg)
    byte_strides = []
    for d, s in enumerate(strides[:-1]):
        b = s * eb
        if b <= 0 or b % 16 or b >= 1 << 40:
            raise TensorMapError(f"{at}stride {s} of dimension {d} is {b} bytes; TMA needs positive multiples "
                                 f"of 16 bytes below 2**40 (strides {strides}, {eb}-byte elements); set NEWT_TMA=0 "
                                 "to use plain loads", kernel, arg)
        byte_strides.append(b)
    for d, b in enumerate(box):
        if not 0 < b <= 256:
            raise TensorMapError(f"{at}box dimension {d} is {b}; TMA boxes are 1 .. 256 elements per dimension "
                                 f"(box {box})", kernel, arg)
    inner = box[-1] * eb
    if inner % 16:
        raise TensorMapError(f"{at}the box's inner dimension is {inner} bytes; TMA needs a multiple of 16",
                             kernel, arg)
    if swz and inner > swz:
        raise TensorMapError(f"{at}the box's inner dimension is {inner} bytes, more than the {swz}-byte swizzle "
                             "allows", kernel, arg)
    return TensorMapArgs(
        data_type=DATA_TYPES[dtype], rank=rank, address=base, global_dim=tuple(reversed(dims)),
        global_strides=tuple(reversed(byte_strides)), box_dim=tuple(reversed(box)), element_strides=(1,) * rank,
        interleave=0, swizzle=SWIZZLES[swz], l2_promotion=_L2_128B, oob_fill=_FILL_NAN if fill == "nan" else 0)


def encode(a: TensorMapArgs, kernel: str = "", arg: str = "") -> bytes:
    """The 128 bytes of the ``CUtensorMap`` (``cuTensorMapEncodeTiled``; needs the CUDA driver)."""
    from cuda.bindings import driver as d
    u64, u32 = d.cuuint64_t, d.cuuint32_t  # (cuda-bindings 13.3 takes these, not ints)
    r = d.cuTensorMapEncodeTiled(
        d.CUtensorMapDataType(a.data_type), a.rank, a.address, [u64(x) for x in a.global_dim],
        [u64(x) for x in a.global_strides], [u32(x) for x in a.box_dim], [u32(x) for x in a.element_strides],
        d.CUtensorMapInterleave(a.interleave),
        d.CUtensorMapSwizzle(a.swizzle), d.CUtensorMapL2promotion(a.l2_promotion),
        d.CUtensorMapFloatOOBfill(a.oob_fill))
    if int(r[0]):
        code = int(r[0])
        try:
            name = d.CUresult(code).name
        except ValueError:
            name = f"CUDA error {code}"
        raise TensorMapError(f"{_where(kernel, arg)}cuTensorMapEncodeTiled failed: {name} for {a}", kernel, arg)
    return map_bytes(r[1])


def map_bytes(tmap) -> bytes:
    """The 128 bytes of a ``cuda.bindings.driver.CUtensorMap``: read from its own storage (its ``opaque``
    words are ``cuuint64_t`` objects, which ``struct`` does not take)."""
    return ctypes.string_at(int(tmap.getPtr()), 128)


class TensorMapMaker:
    """``maker(base, *dims, *strides) -> bytes``: the tensor map of one recipe for a launch's values,
    cached by those values (a launch with the same tensors encodes nothing)."""

    def __init__(self, recipe: dict, kernel: str = "", encoder=None):
        self.recipe = recipe
        self.kernel = kernel
        self.rank = len(recipe["box"])
        self.encoder = encoder or (lambda a, kernel, arg: encode(a, kernel, arg))
        self.cache: dict = {}

    def __call__(self, *values) -> bytes:
        hit = self.cache.get(values)
        if hit is not None:
            return hit
        r = self.rank
        base, dims, strides = values[0], values[1:1 + r], values[1 + r:1 + 2 * r]
        a = encode_arguments(self.recipe, base, dims, strides, self.kernel)
        out = self.encoder(a, self.kernel, str(self.recipe.get("arg", "")))
        if len(self.cache) > 256:
            self.cache.clear()
        self.cache[values] = out
        return out
