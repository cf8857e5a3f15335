"""What can appear inside a tile loop: the torch functions, tensor methods and
``dt.*`` calls deuteron compiles, by name.  Torch-free: the static checker
(``deuteron.frontend``) and the tracer (``deuteron.trace``) both read these
tables, so the editor and the compiler agree on what is supported.
"""

from __future__ import annotations

#: elementwise unary math (their newt spelling: ``deuteron.codegen_expr.UNARY_RENDER``)
UNARY = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "floor", "ceil", "abs", "neg",
         "sigmoid", "relu", "reciprocal", "square", "silu", "log1p", "expm1", "logical_not")

#: unary ops that only make sense on floating point (ints are converted like torch does)
FLOAT_UNARY = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid",
               "reciprocal", "silu", "log1p", "expm1", "gelu"}

#: reductions: canonical name -> (identity kind, accumulator)
REDUCTIONS = {"sum": "sum", "amax": "max", "amin": "min", "mean": "sum", "var": "sum", "std": "sum",
              "max": "max", "min": "min", "prod": "prod", "logsumexp": "max", "softmax": "max",
              "log_softmax": "max", "argmax": "max", "argmin": "min"}

#: ``torch.<name>`` functions supported inside tile loops -> canonical op
TORCH_FUNCTIONS = {
    **{n: n for n in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "floor", "ceil",
                      "abs", "neg", "sigmoid", "relu", "reciprocal", "square", "log1p", "expm1", "logical_not")},
    "negative": "neg",
    "where": "where", "maximum": "maximum", "minimum": "minimum", "clamp": "clamp", "clip": "clamp",
    "pow": "pow", "add": "add", "sub": "sub", "subtract": "sub", "mul": "mul", "multiply": "mul",
    "div": "truediv", "divide": "truediv", "true_divide": "truediv", "fmod": "fmod", "remainder": "mod",
    "floor_divide": "floordiv", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
    "logical_and": "logical_and", "logical_or": "logical_or",
    "sum": "sum", "amax": "amax", "amin": "amin", "mean": "mean", "var": "var", "std": "std",
    "max": "max", "min": "min", "prod": "prod", "softmax": "softmax", "log_softmax": "log_softmax",
    "logsumexp": "logsumexp", "argmax": "argmax", "argmin": "argmin",
    "matmul": "matmul", "mm": "mm", "bmm": "mm", "addmm": "addmm", "baddbmm": "addmm",
    "zeros_like": "zeros_like", "ones_like": "ones_like", "full_like": "full_like", "empty_like": "zeros_like",
    "zeros": "zeros", "ones": "ones", "full": "full", "empty": "zeros", "arange": "arange",
    "cat": "cat", "stack": "stack", "einsum": "einsum",
    "repeat_interleave": "repeat_interleave", "sort": None, "cumsum": "cumsum", "cumprod": "cumprod",
    "lerp": "lerp", "addcmul": "addcmul", "fma": "fma", "sign": "sign", "isnan": "isnan", "isinf": "isinf",
    "nan_to_num": None, "rand": None, "randn": None,
}

#: ``torch.nn.functional.<name>`` supported inside tile loops -> canonical op
FUNCTIONAL = {
    "relu": "relu", "sigmoid": "sigmoid", "silu": "silu", "gelu": "gelu", "tanh": "tanh",
    "softmax": "softmax", "log_softmax": "log_softmax", "leaky_relu": "leaky_relu", "relu6": "relu6",
    "softplus": "softplus", "mish": None, "elu": "elu", "hardtanh": "hardtanh",
}

#: tensor methods supported on values inside tile loops -> canonical op
TENSOR_METHODS = {
    **{n: n for n in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "floor", "ceil",
                      "abs", "neg", "sigmoid", "relu", "reciprocal", "square", "log1p", "expm1", "logical_not",
                      "sum", "amax", "amin", "mean", "var", "std", "max", "min", "prod", "softmax", "log_softmax",
                      "logsumexp", "argmax", "argmin", "clamp", "pow", "add", "sub", "mul", "div", "where",
                      "maximum", "minimum", "lerp", "cumsum", "cumprod", "sign", "isnan", "isinf")},
    "clip": "clamp", "negative": "neg", "fmod": "fmod", "remainder": "mod",
    "to": "to", "float": "float", "half": "half", "bfloat16": "bfloat16", "double": "double", "int": "int",
    "long": "long", "bool": "bool", "type_as": "type_as",
    "t": "t", "transpose": "transpose", "permute": "permute", "reshape": "reshape", "view": "reshape",
    "unsqueeze": "unsqueeze", "squeeze": "squeeze", "expand": "expand", "expand_as": "expand_as",
    "broadcast_to": "expand", "matmul": "matmul", "mm": "mm", "bmm": "mm",
    "size": "size", "dim": "dim", "numel": "numel", "contiguous": "identity", "clone": "identity",
    "detach": "identity", "zero_": None, "fill_": None, "masked_fill": "masked_fill",
    "new_zeros": "new_zeros", "new_full": "new_full", "new_ones": "new_ones", "new_empty": "new_zeros",
    "repeat_interleave": "repeat_interleave",
}

#: ``dt.<name>`` callable inside tile loops
DT_DEVICE = {"zeros", "full", "arange", "rand", "randint", "reduce", "associative_scan", "split", "join",
             "dot", "load", "store", "static_range", "atomic_add", "jagged_tile", "tile_begin", "tile_end",
             "tile_index", "tile_id", "tile_block_size", "cumsum", "cumprod",
             "atomic_and", "atomic_cas", "signal", "wait",
             "atomic_or", "atomic_xor", "atomic_max", "atomic_min", "atomic_xchg", "relu", "sigmoid", "silu", "gelu",
             "tanh", "exp", "cdiv", "next_power_of_2", "tile", "grid",
             "inline_asm_elementwise", "subscript"}

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
