"""Specialization: from the Python arguments of a launch to the front end's view.

Every parameter that is not annotated ``nl.constexpr`` contributes two entries
to the specialization key, computed by :func:`key_entries` (and, for tensors
and ints, inlined by the launch fast path in ``jit.py`` and by its compiled
dispatcher in ``_launch.c`` — tests check that they agree):

==========================  ===========================  ==========================
argument                    key entries ``(a, b)``       becomes
==========================  ===========================  ==========================
tensor (``data_ptr``)       ``(torch dtype, aligned)``   ``*dtype``; hint 16 if aligned
``torch.dtype`` (warmup)    ``(torch dtype, True)``      ``*dtype`` (cannot be launched)
``int`` equal to 1          ``("c1", None)``             constexpr 1
other ``int``               ``("i32"|"u32"|"i64"|"u64",  that int type; hint 16 when
                            divisible_by_16)``           divisible by 16
``bool``                    ``("i1", False)``            ``i1``
``float``                   ``("fp32", False)``          ``fp32``
``None``, ``nl.constexpr``,  ``("cx", value)``            constexpr
dtype, str, jit function
==========================  ===========================  ==========================

Parameters in ``do_not_specialize`` never become constexpr 1 and get no hint.
Constexpr parameters are keyed on their value and its type.

Torch is imported lazily (only to recognise tensors).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

from newt.language import core as lc
from newt.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor
from newt.tools.tensor_descriptor import descriptor_parts

from .dtypes import torch_dtype_map  # (re-exported: its users import it from here)

INT_KINDS = {"i1": lc.int1, "i32": lc.int32, "u32": lc.uint32, "i64": lc.int64, "u64": lc.uint64,
             "fp32": lc.float32}


@dataclass
class Specialization:
    arg_types: dict  # run-time parameter -> dtype
    constexprs: dict  # constexpr parameter -> value (includes ints specialized to 1)
    divisibility: dict  # parameter -> 16
    runtime_args: list  # values of the run-time parameters, in order
    runtime_names: list
    key: tuple = field(default=())  # hashable summary for caches
    leaf_paths: dict = field(default_factory=dict)  # run-time tuple element name -> (parameter, index path)


def _is_tensor_like(v) -> bool:
    return hasattr(v, "data_ptr") and hasattr(v, "dtype")


def _is_torch_dtype(v) -> bool:
    t = type(v)
    return t.__name__ == "dtype" and t.__module__ == "torch"


def int_kind(v: int, name: str = "?") -> str:
    """The newt integer type of a Python int argument (``i32``, ``u32``, ``i64``, ``u64``)."""
    if -(2 ** 31) <= v < 2 ** 31:
        return "i32"
    if 2 ** 31 <= v < 2 ** 32:
        return "u32"
    if -(2 ** 63) <= v < 2 ** 63:
        return "i64"
    if 2 ** 63 <= v < 2 ** 64:
        return "u64"
    raise TypeError(f"argument {name!r}: integer {v} does not fit in 64 bits")


def _implicit_constexpr(v) -> bool:
    return (v is None or isinstance(v, (lc.constexpr, lc.dtype, str)) or getattr(v, "__newt_jit__", False)
            or getattr(v, "__newt_inline__", False))


class TupleArg:
    """The specialization of a tuple argument (plain or named, nested): one entry per element.

    An element is a nested ``TupleArg``, ``("rt", type, divisible_by_16)`` for a value passed at run
    time (a tensor's pointer, a scalar) or ``("cx", value)`` for one that became constexpr (``None``,
    ``nl.constexpr(v)``, an int equal to 1, a dtype ...).  The front end binds the parameter to a tuple
    of those values; each run-time element is a kernel parameter of its own, named ``name.i.j``.
    """

    __newt_tuple_arg__ = True

    def __init__(self, leaves: list, fields: tuple | None = None):
        self.leaves = leaves
        self.fields = fields  # a namedtuple's field names, or None

    def runtime_leaves(self, name: str, path: tuple = ()):
        """``(parameter name, path, type, divisible)`` of every run-time element, depth first."""
        for i, leaf in enumerate(self.leaves):
            pth = path + (i,)
            if isinstance(leaf, TupleArg):
                yield from leaf.runtime_leaves(name, pth)
            elif leaf[0] == "rt":
                yield name + "".join(f".{k}" for k in pth), pth, leaf[1], leaf[2]

    def __repr__(self):
        parts = []
        for leaf in self.leaves:
            if isinstance(leaf, TupleArg):
                parts.append(repr(leaf))
            elif leaf[0] == "rt":
                parts.append(str(leaf[1]) + (":16" if leaf[2] else ""))
            else:
                parts.append(f"constexpr {leaf[1]!r}")
        if self.fields:
            parts = [f"{f}={p}" for f, p in zip(self.fields, parts)]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, TupleArg) and repr(self) == repr(other)

    def __hash__(self):
        return hash(repr(self))


def tuple_arg(entries, fields=None) -> TupleArg:
    """The ``TupleArg`` of a tuple's key entries ``(("tuple", ((a, b), ...)))``'s element list."""
    leaves: list = []
    for a, b in entries:
        if isinstance(a, tuple) and a and a[0] == "tuple":
            leaves.append(tuple_arg(a[1], a[2] if len(a) > 2 else None))
        elif isinstance(a, tuple) and a and a[0] == "desc":
            leaves.append(DescArg(tuple_arg(a[1]).leaves, a[2], a[3]))
        elif a == "c1":
            leaves.append(("cx", 1))
        elif a == "cx":
            leaves.append(("cx", b))
        else:
            leaves.append(("rt", type_of_entry(a, b), bool(b)))
    return TupleArg(leaves, fields)


class DescArg(TupleArg):
    """The specialization of a host-side ``TensorDescriptor``: the tuple ``(base, *shape, *strides)``
    specialized element by element, plus the compile-time ``block_shape`` and ``padding``.  The front end
    binds the parameter to the descriptor those values make (``newt/frontend/tuple_params.py``)."""

    __newt_desc_arg__ = True

    def __init__(self, leaves: list, block_shape: tuple, padding: str):
        super().__init__(leaves)
        self.block_shape = tuple(block_shape)
        self.padding = padding

    def __repr__(self):
        return (f"desc[{', '.join(map(str, self.block_shape))}]" + (f"/{self.padding}" if self.padding != "zero"
                                                                   else "") + super().__repr__())

    __str__ = __repr__


def _as_desc(v):
    """``(parts tuple, block_shape, padding)`` for a host-side descriptor, else None."""
    from newt.tools.tensor_descriptor import descriptor_parts, is_descriptor
    return descriptor_parts(v) if is_descriptor(v) else None


def dtype_leaf(v, name: str):
    """The name (``x[1][0]``) of a ``torch.dtype`` standing for a tensor in argument ``v``, or None."""
    if _is_torch_dtype(v):
        return name
    if isinstance(v, tuple):
        for i, x in enumerate(v):
            r = dtype_leaf(x, f"{name}[{i}]")
            if r:
                return r
    return None


def value_at(v, path):
    for k in path:
        if not isinstance(v, tuple) and (desc := _as_desc(v)) is not None:
            v = desc[0]
        v = v[k]
    return v


def key_entries(kernel_name: str, name: str, v, dns: bool, check_cuda: bool = False):
    """``(value to pass, key entry a, key entry b)`` of one non-constexpr argument.

    The value to pass is the pointer (an int) for tensors, the number for
    scalars, ``None`` for arguments that become constexpr or cannot be launched
    (a ``torch.dtype`` given to ``warmup``).  Raises ``TypeError`` naming the
    parameter for values that cannot be passed.
    """
    if isinstance(v, bool):
        return v, "i1", False
    if type(v) is _TensorDescriptor and (r := _desc_entries(kernel_name, name, v, dns, check_cuda)) is not None:
        return r  # newt's own descriptor (the drop-in's TensorDescriptor) on a tensor: no recursion
    if isinstance(v, int):
        if v == 1 and not dns:
            return 1, "c1", None
        kind = int_kind(v, name)
        return v, kind, (not dns and v % 16 == 0)
    if isinstance(v, float):
        return v, "fp32", False
    if _is_tensor_like(v):
        a = tensor_entry(kernel_name, name, v)
        if check_cuda and not getattr(v, "is_cuda", True):
            raise_not_cuda(kernel_name, name, v)
        p = v.data_ptr()
        return p, a, (not dns and p % 16 == 0)
    if _is_torch_dtype(v):
        if v not in torch_dtype_map():
            raise TypeError(f"{kernel_name}(): argument {name!r}: dtype {v} is not supported by newt")
        return None, v, not dns
    if _implicit_constexpr(v):
        cv = v.value if isinstance(v, lc.constexpr) else v
        return None, "cx", cv
    if not isinstance(v, tuple) and (desc := _as_desc(v)) is not None:  # a TensorDescriptor
        parts, block, padding = desc
        ps_t, (_, es_t), _ = key_entries(kernel_name, name, parts, dns, check_cuda)
        if isinstance(es_t[0][0], (str, tuple)):  # not a tensor (or a wrapper, or a dtype for warmup)
            raise TypeError(f"{kernel_name}(): argument {name!r}: a TensorDescriptor's base must be a tensor, "
                            f"got {type(parts[0]).__name__}")
        return ps_t, ("desc", es_t, block, padding), None
    if isinstance(v, tuple):  # tuples and namedtuples, nested: every element specialized like an argument
        ps, es = [], []
        for i, x in enumerate(v):
            p, a, b = key_entries(kernel_name, f"{name}[{i}]", x, dns, check_cuda)
            ps.append(p)
            es.append((a, b))
        fields = getattr(type(v), "_fields", None)  # a namedtuple's field names: x.field in the kernel
        return tuple(ps), ("tuple", tuple(es)) + ((tuple(fields),) if isinstance(fields, tuple) else ()), None
    if isinstance(v, numbers.Integral):  # numpy integers ...
        return key_entries(kernel_name, name, int(v), dns, check_cuda)
    if isinstance(v, numbers.Real):
        return key_entries(kernel_name, name, float(v), dns, check_cuda)
    raise TypeError(f"{kernel_name}(): argument {name!r}: cannot pass a {type(v).__name__} to a newt kernel "
                    "(expected a tensor, int, float, bool or None)")


def desc_type() -> type:
    """The descriptor class whose launches are keyed in one pass (``_desc_entries``; the compiled dispatcher's
    ``desc_entry`` likewise): newt's own ``TensorDescriptor``, which the drop-in serves as Triton's."""
    return _TensorDescriptor


def _desc_entries(kernel_name: str, name: str, v, dns: bool, check_cuda: bool):
    """``key_entries`` of a ``newt.tools.tensor_descriptor.TensorDescriptor``, in one pass: the same values and
    entries as the generic path (the tuple ``(base, *shape, *strides)`` element by element), which a launch with
    descriptors (tutorial 06's forward: four a call) otherwise reaches after six failed type tests and a
    recursion per element.  None where the base is not a tensor (a dtype for warmup, anything else): the
    generic path handles and reports those."""
    parts, block, padding = descriptor_parts(v)
    base = parts[0]
    if not _is_tensor_like(base):
        return None
    a = tensor_entry(kernel_name, f"{name}[0]", base)
    if check_cuda and not getattr(base, "is_cuda", True):
        raise_not_cuda(kernel_name, f"{name}[0]", base)
    p = base.data_ptr()
    es = [(a, not dns and p % 16 == 0)]
    for i, x in enumerate(parts[1:], start=1):  # ints (descriptor_parts made them so)
        es.append(("c1", None) if x == 1 and not dns else (int_kind(x, f"{name}[{i}]"), not dns and x % 16 == 0))
    return (p, *parts[1:]), ("desc", tuple(es), block, padding), None


def tensor_entry(kernel_name: str, name: str, v):
    """Key entry ``a`` of a tensor-like argument: its torch dtype, or for a wrapper (``newt.reinterpret``,
    any object with ``data_ptr()`` and a non-torch ``dtype``) the newt dtype it is seen as."""
    dev = getattr(v, "device", None)
    if getattr(dev, "type", None) == "meta":
        raise TypeError(f"{kernel_name}(): argument {name!r} is a tensor on the meta device, which has no memory "
                        "to read or write; pass a tensor on the GPU (or the CPU with NEWT_INTERPRET=1)")
    dt = v.dtype
    if _is_torch_dtype(dt):
        if dt not in torch_dtype_map():
            raise TypeError(f"{kernel_name}(): argument {name!r}: tensors of dtype {dt} cannot be passed "
                            "to a newt kernel")
        return dt
    from .wrappers import wrapped_dtype
    try:
        return wrapped_dtype(dt)
    except TypeError as e:
        raise TypeError(f"{kernel_name}(): argument {name!r}: {e}") from None


def unwrap(v):
    """The torch tensor behind a wrapper argument (the interpreter reads its memory as the wrapper's dtype)."""
    if _is_tensor_like(v) and not _is_torch_dtype(v.dtype) and hasattr(v, "base"):
        return v.base
    return v


def raise_not_cuda(kernel_name: str, name: str, v):
    tensor_entry(kernel_name, name, v)  # a meta tensor gets its own message
    dev = getattr(v, "device", "?")
    raise ValueError(f"{kernel_name}(): argument {name!r} is a tensor on {dev}, but newt kernels read CUDA memory; "
                     "move it with .cuda() (or run the kernel through the interpreter: NEWT_INTERPRET=1)")


def type_of_entry(a, b):
    """The parameter's newt type for key entries ``(a, b)``; None when it becomes constexpr."""
    if isinstance(a, str):
        if a in ("c1", "cx"):
            return None
        return INT_KINDS[a]
    if isinstance(a, lc.dtype):
        return lc.pointer_type(a)
    return lc.pointer_type(torch_dtype_map()[a])


def spec_from_entries(kernel, entries: dict, constexpr_values: dict) -> Specialization:
    """Build the Specialization of ``kernel`` from the key entries of its non-constexpr
    parameters (name -> (a, b)) and the values of its constexpr parameters."""
    arg_types, constexprs, div = {}, {}, {}
    rt_names, leaf_paths = [], {}
    for n in kernel.arg_names:
        if n in kernel.constexpr_names:
            v = constexpr_values[n]
            constexprs[n] = v.value if isinstance(v, lc.constexpr) else v
            continue
        a, b = entries[n]
        if isinstance(a, tuple) and a[:1] in (("tuple",), ("desc",)):
            ta = (tuple_arg(a[1], a[2] if len(a) > 2 else None) if a[0] == "tuple"
                  else DescArg(tuple_arg(a[1]).leaves, a[2], a[3]))
            arg_types[n] = ta
            for leaf, path, _ty, d in ta.runtime_leaves(n):
                if d:
                    div[leaf] = 16
                rt_names.append(leaf)
                leaf_paths[leaf] = (n, path)
            continue
        if a == "c1":
            constexprs[n] = 1
            continue
        if a == "cx":
            constexprs[n] = b
            continue
        arg_types[n] = type_of_entry(a, b)
        if b:
            div[n] = 16
        rt_names.append(n)
    return Specialization(arg_types, constexprs, div, [], rt_names, leaf_paths=leaf_paths)


def bind(kernel, args: tuple, kwargs: dict) -> list:
    """Values of every parameter of ``kernel``, in order (defaults filled in).

    Raises ``TypeError`` naming the parameter for a missing, extra or repeated argument.
    """
    names = kernel.arg_names
    kname = kernel.__name__
    if len(args) > len(names):
        raise TypeError(f"{kname}() takes {len(names)} arguments but {len(args)} were given")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{kname}() got an unexpected keyword argument {k!r}")
        if k in bound:
            raise TypeError(f"{kname}() got multiple values for argument {k!r}")
        bound[k] = v
    sig = kernel.signature
    out = []
    for n in names:
        if n not in bound:
            d = sig.parameters[n].default
            if d is sig.parameters[n].empty:
                raise TypeError(f"{kname}() missing required argument {n!r}")
            bound[n] = d
        out.append(bound[n])
    return out


def specialize(kernel, args: tuple, kwargs: dict, check_cuda: bool = False) -> Specialization:
    """Bind launch arguments to ``kernel``'s parameters (a ``JITFunction``) and specialize.

    Raises ``TypeError`` naming the parameter for a missing, extra or badly
    typed argument.
    """
    values = bind(kernel, args, kwargs)
    entries, cvals, rt_vals, key = {}, {}, {}, []
    dns = kernel.do_not_specialize
    for n, v in zip(kernel.arg_names, values):
        if n in kernel.constexpr_names:
            cvals[n] = v
            cv = v.value if isinstance(v, lc.constexpr) else v
            key.append((n, "c", _key_of(cv)))
            continue
        p, a, b = key_entries(kernel.__name__, n, v, n in dns, check_cuda)
        entries[n] = (a, b)
        rt_vals[n] = v
        key.append((n, str(a), _key_of(b)))
    spec = spec_from_entries(kernel, entries, cvals)
    spec.runtime_args = [value_at(rt_vals[spec.leaf_paths[n][0]], spec.leaf_paths[n][1]) if n in spec.leaf_paths
                         else rt_vals[n] for n in spec.runtime_names]
    spec.key = tuple(key)
    return spec


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
