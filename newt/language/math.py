"""``nl.math``: the elementwise math functions, under the namespace Triton users know."""

from .builtins import (  # noqa: F401
    abs,
    ceil,
    cos,
    div_rn,
    erf,
    exp,
    exp2,
    fdiv,
    floor,
    fma,
    log,
    log2,
    pow,
    rsqrt,
    sin,
    sqrt,
    sqrt_rn,
    tanh,
    umulhi,
)
from .standard import cdiv, sigmoid  # noqa: F401
