"""The typed tile IR shared by the interpreter, the CUDA backend and the language server."""

from .core import Function, Loc, Op, Param, Region, Value  # noqa: F401
from .types import ANY_DTYPE, BlockType, SymDim, SymDType, block_of, scalar_of, shape_of, type_str  # noqa: F401
from .verifier import IRVerificationError, verify  # noqa: F401
