"""Specialization: from the Python arguments of a launch to the front end's view.

``specialize(kernel, args, kwargs)`` binds the arguments to the kernel's
parameters and returns what the compiler keys on: the type of every run-time
parameter, the constexpr values (including ints equal to 1, like Triton), the
divisibility-by-16 hints, and the run-time argument values in order.

Torch is imported lazily (only to recognise tensors).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from newt.language import core as lc

_TORCH_TO_NL = None


def torch_dtype_map() -> dict:
    global _TORCH_TO_NL
    if _TORCH_TO_NL is None:
        import torch
        m = {
            torch.bool: lc.int1, torch.int8: lc.int8, torch.int16: lc.int16, torch.int32: lc.int32,
            torch.int64: lc.int64, torch.uint8: lc.uint8, torch.float16: lc.float16, torch.bfloat16: lc.bfloat16,
            torch.float32: lc.float32, torch.float64: lc.float64,
        }
        for name, nd in (("uint16", lc.uint16), ("uint32", lc.uint32), ("uint64", lc.uint64),
                         ("float8_e4m3fn", lc.float8e4nv), ("float8_e5m2", lc.float8e5)):
            t = getattr(torch, name, None)
            if t is not None:
                m[t] = nd
        _TORCH_TO_NL = m
    return _TORCH_TO_NL


def nl_dtype_of_tensor(t) -> lc.dtype:
    try:
        return torch_dtype_map()[t.dtype]
    except KeyError:
        raise TypeError(f"tensors of dtype {t.dtype} cannot be passed to a newt kernel") from None


@dataclass
class Specialization:
    arg_types: dict  # run-time parameter -> dtype
    constexprs: dict  # constexpr parameter -> value (includes ints specialized to 1)
    divisibility: dict  # parameter -> 16
    runtime_args: list  # values of the run-time parameters, in order
    runtime_names: list
    key: tuple = field(default=())  # hashable summary for caches


def _is_tensor_like(v) -> bool:
    return hasattr(v, "data_ptr") and hasattr(v, "dtype")


def classify_scalar(name: str, v, do_not_specialize: bool):
    """(dtype, specialized constexpr value or None, divisible_by_16) for a Python scalar."""
    if isinstance(v, bool):
        return lc.int1, None, False
    if isinstance(v, int):
        if v == 1 and not do_not_specialize:
            return None, 1, False
        if -(2 ** 31) <= v < 2 ** 31:
            ty = lc.int32
        elif 2 ** 31 <= v < 2 ** 32:
            ty = lc.uint32
        elif -(2 ** 63) <= v < 2 ** 63:
            ty = lc.int64
        elif 2 ** 63 <= v < 2 ** 64:
            ty = lc.uint64
        else:
            raise TypeError(f"argument {name!r}: integer {v} does not fit in 64 bits")
        return ty, None, (v % 16 == 0 and not do_not_specialize)
    if isinstance(v, float):
        return lc.float32, None, False
    raise TypeError(f"argument {name!r}: cannot pass {type(v).__name__} to a newt kernel")


def specialize(kernel, args: tuple, kwargs: dict) -> Specialization:
    """Bind launch arguments to ``kernel``'s parameters (a ``JITFunction``).

    Raises ``TypeError`` naming the parameter for a missing, extra or badly
    typed argument.
    """
    names = kernel.arg_names
    if len(args) > len(names):
        raise TypeError(f"{kernel.__name__}() takes {len(names)} arguments but {len(args)} were given")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{kernel.__name__}() got an unexpected keyword argument {k!r}")
        if k in bound:
            raise TypeError(f"{kernel.__name__}() got multiple values for argument {k!r}")
        bound[k] = v
    sig = kernel.signature
    for n in names:
        if n not in bound:
            d = sig.parameters[n].default
            if d is sig.parameters[n].empty:
                raise TypeError(f"{kernel.__name__}() missing required argument {n!r}")
            bound[n] = d
    arg_types, constexprs, div = {}, {}, {}
    rt_args, rt_names = [], []
    key = []
    for n in names:
        v = bound[n]
        if n in kernel.constexpr_names:
            if isinstance(v, lc.constexpr):
                v = v.value
            constexprs[n] = v
            key.append((n, "c", _key_of(v)))
            continue
        if isinstance(v, lc.constexpr):
            constexprs[n] = v.value
            key.append((n, "c", _key_of(v.value)))
            continue
        if v is None:
            constexprs[n] = None
            key.append((n, "c", None))
            continue
        if _is_tensor_like(v):
            ty = lc.pointer_type(nl_dtype_of_tensor(v))
            arg_types[n] = ty
            aligned = (v.data_ptr() % 16 == 0) and n not in kernel.do_not_specialize
            if aligned:
                div[n] = 16
            rt_args.append(v)
            rt_names.append(n)
            key.append((n, str(ty), aligned))
            continue
        ty, cval, d16 = classify_scalar(n, v, n in kernel.do_not_specialize)
        if ty is None:
            constexprs[n] = cval
            key.append((n, "c", cval))
            continue
        arg_types[n] = ty
        if d16:
            div[n] = 16
        rt_args.append(v)
        rt_names.append(n)
        key.append((n, str(ty), d16))
    return Specialization(arg_types, constexprs, div, rt_args, rt_names, tuple(key))


def _key_of(v):
    if isinstance(v, (int, float, bool, str, type(None))):
        return (type(v).__name__, v)
    if isinstance(v, lc.dtype):
        return ("dtype", str(v))
    if getattr(v, "__newt_jit__", False):
        return ("jit", v.__qualname__, id(v))
    if isinstance(v, tuple):
        return tuple(_key_of(x) for x in v)
    return (type(v).__name__, repr(v))
