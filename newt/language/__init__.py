"""``newt.language`` (``import newt.language as nl``): the kernel language.

It mirrors ``triton.language``: rename ``tl`` to ``nl`` and Triton kernels read
the same.  Everything here is a stub or a type; kernels are read by the front
end (``newt.frontend``), never executed as Python.
"""

from . import extra, math, random, standard  # noqa: F401
from .asm import inline_asm_elementwise  # noqa: F401
from .builtins import *  # noqa: F403
from .builtins import range, static_range  # noqa: F401
from .core import (  # noqa: F401
    ALL_DTYPES,
    BUILTINS,
    TENSOR_METHODS,
    PropagateNan,
    bfloat16,
    block_type,
    builtin,
    constexpr,
    dtype,
    dtype_from_name,
    float8e4b8,
    float8e4b15,
    float8e4nv,
    float8e5,
    float8e5b16,
    float16,
    float32,
    float64,
    inline_jit,
    int1,
    int8,
    int16,
    int32,
    int64,
    pi32_t,
    pointer_type,
    str_to_ty,
    tensor,
    tensor_descriptor,
    tensor_descriptor_base,
    uint8,
    uint16,
    uint32,
    uint64,
    void,
)
from .random import (  # noqa: F401
    pair_uniform_to_normal,
    philox,
    philox_impl,
    rand,
    rand4x,
    randint,
    randint4x,
    randn,
    randn4x,
    uint_to_uniform_float,
)
from .scaled import dot_scaled  # noqa: F401
from .standard import cdiv, full_like, interleave, ravel, sigmoid, softmax, swizzle2d, zeros_like  # noqa: F401
from .tuples import tuple  # noqa: F401

# Triton spells some of these differently; keep both spellings.
float8e4 = float8e4nv
