"""Core types of the newt language: dtypes, pointer and block types, constexpr.

This module is pure Python (stdlib only).  The same objects are used by user
kernels (``nl.float32``), by the front end and the IR (as element types) and by
the runtime (to map torch dtypes).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from enum import Enum
from typing import Any

__all__ = [
    "dtype", "pointer_type", "block_type", "constexpr", "tensor", "tensor_descriptor", "tensor_descriptor_base",
    "PropagateNan",
    "builtin", "inline_jit", "BUILTINS", "TENSOR_METHODS", "tensor_methods", "NewtUsageError",
]


class NewtUsageError(RuntimeError):
    """Raised when a newt language function is called outside a kernel."""


class dtype:
    """A scalar element type: ``int1 .. int64``, ``uint8 .. uint64``, floats and fp8.

    ``str(dtype)`` is the short name used in signatures (``"fp32"``, ``"i32"`` ...);
    ``repr`` is the language spelling (``nl.float32``).
    """

    SINT_TYPES = ("int8", "int16", "int32", "int64")
    UINT_TYPES = ("int1", "uint8", "uint16", "uint32", "uint64")
    FP_TYPES = ("fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32", "fp64")
    #: the fp8 formats: exponent bias and whether the top exponent holds inf/NaN ("ieee"), only NaN at
    #: S.1111.111 ("fn") or NaN is 0x80 with no negative zero ("fnuz", AMD's)
    FP8_FORMATS = {"fp8e4b15": (15, "fn"), "fp8e4nv": (7, "fn"), "fp8e4b8": (8, "fnuz"), "fp8e5": (15, "ieee"),
                   "fp8e5b16": (16, "fnuz")}
    OTHER_TYPES = ("void",)

    # name -> (kind, bitwidth, mantissa width, language name, short signature name)
    _INFO = {
        "int1": ("bool", 1, 0, "int1", "i1"),
        "int8": ("int", 8, 0, "int8", "i8"),
        "int16": ("int", 16, 0, "int16", "i16"),
        "int32": ("int", 32, 0, "int32", "i32"),
        "int64": ("int", 64, 0, "int64", "i64"),
        "uint8": ("uint", 8, 0, "uint8", "u8"),
        "uint16": ("uint", 16, 0, "uint16", "u16"),
        "uint32": ("uint", 32, 0, "uint32", "u32"),
        "uint64": ("uint", 64, 0, "uint64", "u64"),
        "fp8e4b15": ("float", 8, 3, "float8e4b15", "fp8e4b15"),
        "fp8e4nv": ("float", 8, 3, "float8e4nv", "fp8e4nv"),
        "fp8e4b8": ("float", 8, 3, "float8e4b8", "fp8e4b8"),
        "fp8e5": ("float", 8, 2, "float8e5", "fp8e5"),
        "fp8e5b16": ("float", 8, 2, "float8e5b16", "fp8e5b16"),
        "fp16": ("float", 16, 10, "float16", "fp16"),
        "bf16": ("float", 16, 7, "bfloat16", "bf16"),
        "fp32": ("float", 32, 23, "float32", "fp32"),
        "fp64": ("float", 64, 52, "float64", "fp64"),
        "void": ("void", 0, 0, "void", "void"),
    }

    def __init__(self, name: str):
        if name not in self._INFO:
            raise ValueError(f"unknown dtype {name!r}")
        self.name = name
        kind, bits, mant, lang, short = self._INFO[name]
        self._kind = kind
        self.primitive_bitwidth = bits
        self.fp_mantissa_width = mant
        self.lang_name = lang
        self.short_name = short

    # --- classification -------------------------------------------------
    def is_floating(self) -> bool:
        return self._kind == "float"

    def is_int(self) -> bool:
        return self._kind in ("int", "uint", "bool")

    def is_int_signed(self) -> bool:
        return self._kind == "int"

    def is_int_unsigned(self) -> bool:
        return self._kind in ("uint", "bool")

    def is_bool(self) -> bool:
        return self._kind == "bool"

    def is_ptr(self) -> bool:
        return False

    def is_void(self) -> bool:
        return self._kind == "void"

    def is_block(self) -> bool:
        return False

    def is_symbolic(self) -> bool:
        return False

    def is_fp8(self) -> bool:
        return self.name in self.FP8_FORMATS

    def is_fp16(self) -> bool:
        return self.name == "fp16"

    def is_bf16(self) -> bool:
        return self.name == "bf16"

    def is_fp32(self) -> bool:
        return self.name == "fp32"

    def is_fp64(self) -> bool:
        return self.name == "fp64"

    def is_standard_floating(self) -> bool:
        """fp16, bf16, fp32 or fp64 (not an fp8 format)."""
        return self.name in ("fp16", "bf16", "fp32", "fp64")

    def is_fp8e4nv(self) -> bool:
        return self.name == "fp8e4nv"

    def is_fp8e5(self) -> bool:
        return self.name == "fp8e5"

    def is_fp8e4b15(self) -> bool:
        return self.name == "fp8e4b15"

    def is_fp8e4b8(self) -> bool:
        return self.name == "fp8e4b8"

    def is_fp8e5b16(self) -> bool:
        return self.name == "fp8e5b16"

    def is_int1(self) -> bool:
        return self.name == "int1"

    def is_int8(self) -> bool:
        return self.name == "int8"

    def is_int16(self) -> bool:
        return self.name == "int16"

    def is_int32(self) -> bool:
        return self.name == "int32"

    def is_int64(self) -> bool:
        return self.name == "int64"

    def is_uint8(self) -> bool:
        return self.name == "uint8"

    def is_uint16(self) -> bool:
        return self.name == "uint16"

    def is_uint32(self) -> bool:
        return self.name == "uint32"

    def is_uint64(self) -> bool:
        return self.name == "uint64"

    def is_const(self) -> bool:
        return False

    @property
    def exponent_bias(self) -> int:
        """The exponent bias of a floating-point type (fp16: 15, fp32: 127 ...)."""
        if not self.is_floating():
            raise TypeError(f"{self!r} is not a floating-point type")
        if self.name in self.FP8_FORMATS:
            return self.FP8_FORMATS[self.name][0]
        return {"fp16": 15, "bf16": 127, "fp32": 127, "fp64": 1023}[self.name]

    def get_int_max_value(self) -> int:
        if self.is_bool():
            return 1
        if not self.is_int():
            raise TypeError(f"{self!r} is not an integer type")
        bits = self.primitive_bitwidth
        return (1 << (bits - 1)) - 1 if self.is_int_signed() else (1 << bits) - 1

    def get_int_min_value(self) -> int:
        if self.is_bool():
            return 0
        if not self.is_int():
            raise TypeError(f"{self!r} is not an integer type")
        return -(1 << (self.primitive_bitwidth - 1)) if self.is_int_signed() else 0

    @property
    def int_bitwidth(self) -> int:
        return self.primitive_bitwidth

    @property
    def int_signedness(self) -> str:
        return "signed" if self._kind == "int" else "unsigned"

    @property
    def itemsize(self) -> int:
        return max(1, self.primitive_bitwidth // 8)

    @property
    def scalar(self) -> "dtype":
        return self

    def kind_rank(self) -> int:
        """bool < integer (signed or unsigned) < float: the order of scalar-literal promotion (Triton's ``kind()``)."""
        return {"bool": 0, "uint": 1, "int": 1, "float": 2}.get(self._kind, -1)

    # --- language-level helpers ----------------------------------------
    def to(self, *args, **kwargs):  # pragma: no cover - surface only
        raise NewtUsageError("dtype.to is not a thing; use tensor.to(dtype)")

    def __eq__(self, other) -> bool:
        if isinstance(other, constexpr):
            other = other.value
        return type(other) is type(self) and self.name == getattr(other, "name", None)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    def __str__(self) -> str:
        return self.short_name

    def __repr__(self) -> str:
        return f"nl.{self.lang_name}"


class pointer_type(dtype):
    """A pointer to ``element_ty`` in global memory (``*fp32`` in signatures)."""

    def __init__(self, element_ty: dtype, address_space: int = 1, const: bool = False):
        if isinstance(element_ty, constexpr):
            element_ty = element_ty.value
        if not isinstance(element_ty, dtype):
            raise TypeError(f"pointer_type expects a dtype, got {element_ty!r}")
        self.element_ty = element_ty
        self.address_space = address_space
        self.const = const
        self.name = f"*{element_ty}"
        self._kind = "ptr"
        self.primitive_bitwidth = 64
        self.fp_mantissa_width = 0
        self.lang_name = f"pointer_type({element_ty!r})"
        self.short_name = self.name

    def is_ptr(self) -> bool:
        return True

    def is_int(self) -> bool:
        return False

    def is_symbolic(self) -> bool:
        return self.element_ty.is_symbolic()

    def __eq__(self, other) -> bool:
        return isinstance(other, pointer_type) and self.element_ty == other.element_ty

    def __hash__(self) -> int:
        return hash(("ptr", self.element_ty))

    def __repr__(self) -> str:
        return f"nl.pointer_type({self.element_ty!r})"


class block_type:
    """The type of a block: an element dtype and a shape (a tuple of powers of two)."""

    def __init__(self, element_ty: dtype, shape):
        self.element_ty = element_ty
        self.shape = tuple(shape)

    @property
    def scalar(self) -> dtype:
        return self.element_ty

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def is_block(self) -> bool:
        return True

    def is_ptr(self) -> bool:
        return False

    def __eq__(self, other) -> bool:
        return isinstance(other, block_type) and self.element_ty == other.element_ty and self.shape == other.shape

    def __hash__(self) -> int:
        return hash((self.element_ty, self.shape))

    def __str__(self) -> str:
        return "<" + "x".join(str(d) for d in self.shape) + f"x{self.element_ty}>"

    __repr__ = __str__


class constexpr:
    """A compile-time constant.

    As an annotation (``BLOCK: nl.constexpr``) it marks a kernel parameter whose
    value is known when the kernel is compiled; each distinct value gives a
    separate specialization.  ``nl.constexpr(128)`` wraps a value explicitly.
    """

    def __init__(self, value=None):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __eq__(self, other) -> bool:
        return self.value == (other.value if isinstance(other, constexpr) else other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __index__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)


class PropagateNan(Enum):
    """How ``minimum``/``maximum``/``clamp`` treat NaN: ``NONE`` ignores NaN operands, ``ALL`` propagates them."""

    NONE = 0
    ALL = 0xFFFF


# --------------------------------------------------------------------------
# Builtin registry: one entry per op.
# --------------------------------------------------------------------------

#: name -> stub function, for every ``nl.*`` builtin (including ``nl.math``).
BUILTINS: dict[str, Callable[..., Any]] = {}

#: tensor method name -> builtin name (``x.to`` -> ``cast`` ...), filled by ``builtin(method=...)`` and
#: ``inline_jit(method=...)``; read it through :func:`tensor_methods`.
TENSOR_METHODS: dict[str, str] = {}


def _register_methods(method, opname: str, default: str) -> None:
    if not method:
        return
    names = (method,) if isinstance(method, str) else tuple(method) if isinstance(method, (tuple, list)) else (default,)
    for m in names:
        TENSOR_METHODS[m] = opname


def public_signature(fn):
    """The signature of a builtin as users call it (without the ``_semantic`` the front end passes)."""
    import inspect
    sig = inspect.signature(getattr(fn, "__wrapped__", fn))
    return sig.replace(parameters=[p for p in sig.parameters.values() if p.name != "_semantic"])


def tensor_methods() -> dict[str, str]:
    """Every method of block values, ``{method name: op name}`` (``"to": "cast"``, ``"sum": "sum"`` ...)."""
    return dict(TENSOR_METHODS)


def builtin(fn=None, *, name: str | None = None, method: str | bool | tuple | None = None):
    """Register a language builtin.

    The decorated function is only a stub: its signature is checked by the
    front end and its docstring is what editors show.  Calling it from Python
    outside a kernel raises ``NewtUsageError``.  ``method=True`` (or a method
    name, or a tuple of names) also exposes it as a method of block values (``x.sum(axis=0)``).
    """

    def wrap(f):
        opname = name or f.__name__
        code = f.__code__
        if "_semantic" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
            # the stub's body calls its type rule: ``return _semantic.<op>(...)`` with the front end's rules as
            # ``_semantic`` (Triton's pattern); ``public_signature`` leaves ``_semantic`` out
            f.__newt_rule_stub__ = True

        @functools.wraps(f)
        def stub(*args, **kwargs):
            raise NewtUsageError(
                f"nl.{opname} can only be called inside a @newt.jit function "
                "(or run the kernel with NEWT_INTERPRET=1)"
            )

        stub.__newt_builtin__ = opname
        stub.__wrapped__ = f
        BUILTINS.setdefault(opname, stub)
        _register_methods(method, opname, f.__name__)
        return stub

    return wrap(fn) if fn is not None else wrap


def inline_jit(fn=None, *, method: str | bool | tuple | None = None):
    """Mark a function written in newt as part of the language.

    The front end inlines its source at the call site (like a user ``@newt.jit``
    helper); it never runs as Python.  Used for ops that are compositions of
    primitives (random numbers, softmax ...), so every backend agrees on them.
    ``method`` as for :func:`builtin`.
    """

    def wrap(f):
        f.__newt_inline__ = True
        BUILTINS.setdefault(f.__name__, f)
        _register_methods(method, f.__name__, f.__name__)
        return f

    return wrap(fn) if fn is not None else wrap


class tensor:
    """A block (or scalar) value inside a kernel.

    Attributes: ``dtype``, ``shape``, ``T``.  Methods mirror the free functions:
    ``to``, ``reshape``, ``view``, ``permute``, ``trans``, ``expand_dims``,
    ``broadcast_to``, ``split``, ``sum``, ``max``, ``min``, ``argmax``, ``argmin``,
    ``cumsum``, ``cumprod``, ``reduce``, ``associative_scan``, ``ravel``,
    ``exp``, ``log``, ``sqrt``, ``abs`` ...  Indexing accepts ``:`` and ``None``
    (``x[:, None]``).
    """

    def __init__(self, *args, **kwargs):  # pragma: no cover - surface only
        raise NewtUsageError("nl.tensor values only exist inside @newt.jit functions")


class tensor_descriptor_base:
    """A tensor descriptor inside a kernel (``nl.make_tensor_descriptor``, or a host-side ``TensorDescriptor``
    passed as an argument): the class ``isinstance`` tests, resolved when the kernel is compiled
    (``isinstance(desc_or_ptr, nl.tensor_descriptor)`` tells a descriptor argument from a pointer)."""

    def __init__(self, *args, **kwargs):  # pragma: no cover - surface only
        raise NewtUsageError("nl.tensor_descriptor values only exist inside @newt.jit functions")


class tensor_descriptor(tensor_descriptor_base):
    """A tensor descriptor with its block type (every descriptor a kernel holds is one); see
    :class:`tensor_descriptor_base`."""


def _mk(name: str) -> dtype:
    return dtype(name)


int1 = _mk("int1")
int8 = _mk("int8")
int16 = _mk("int16")
int32 = _mk("int32")
int64 = _mk("int64")
uint8 = _mk("uint8")
uint16 = _mk("uint16")
uint32 = _mk("uint32")
uint64 = _mk("uint64")
float8e4b15 = _mk("fp8e4b15")
float8e4nv = _mk("fp8e4nv")
float8e4b8 = _mk("fp8e4b8")
float8e5 = _mk("fp8e5")
float8e5b16 = _mk("fp8e5b16")
float16 = _mk("fp16")
bfloat16 = _mk("bf16")
float32 = _mk("fp32")
float64 = _mk("fp64")
void = _mk("void")



def get_int_dtype(bitwidth: int, signed: bool) -> dtype:
    """The integer dtype of ``bitwidth`` bits (``int1`` for 1), signed or not: Triton's
    ``triton.language.core.get_int_dtype``, which kernels call on compile-time values."""
    bitwidth = bitwidth.value if isinstance(bitwidth, constexpr) else bitwidth
    signed = signed.value if isinstance(signed, constexpr) else signed
    if bitwidth == 1:
        return int1
    table = {8: (int8, uint8), 16: (int16, uint16), 32: (int32, uint32), 64: (int64, uint64)}
    if bitwidth not in table:
        raise ValueError(f"no integer type of {bitwidth} bits")
    return table[bitwidth][0 if signed else 1]


#: Triton's name for a pointer to int32 (``x.to(tl.pi32_t)`` turns int64 addresses into pointers)
pi32_t = pointer_type(int32)

ALL_DTYPES = (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
              float8e4b15, float8e4nv, float8e4b8, float8e5, float8e5b16, float16, bfloat16, float32, float64)

_BY_NAME = {}
for _d in ALL_DTYPES + (void,):
    _BY_NAME[_d.name] = _d
    _BY_NAME[_d.lang_name] = _d
    _BY_NAME[_d.short_name] = _d
_BY_NAME.update({"bool": int1, "i1": int1, "half": float16, "float": float32, "double": float64,
                 "f16": float16, "f32": float32, "f64": float64, "b16": bfloat16})


def str_to_ty(name, c=None):
    """Triton's ``str_to_ty``: a signature string (``"fp16"``, ``"*i32"``, ``"u8"``) or a tuple of them as a type.

    ``"constexpr"`` gives ``constexpr(c)``.
    """
    if isinstance(name, tuple):
        return tuple(str_to_ty(x, c) for x in name)
    if isinstance(name, str) and name.startswith("constexpr"):
        return constexpr(c)
    return dtype_from_name({"B": "i1", "u1": "i1"}.get(name, name))


def dtype_from_name(name: str) -> dtype:
    """Parse a dtype or signature string: ``"fp16"``, ``"i32"``, ``"*fp32"``, ``"float32"``."""
    name = name.strip()
    if name.startswith("*"):
        inner = name[1:].strip()
        const = False
        if inner.startswith("k"):  # Triton's "*kfp32" (const pointer)
            inner, const = inner[1:], True
        return pointer_type(dtype_from_name(inner), const=const)
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown type {name!r}") from None
