"""``newt.language.extra.cuda.libdevice``: NVIDIA's libdevice math functions, as Triton exposes them.

``from newt.language.extra.libdevice import rsqrt, tanh`` (or ``triton.language.extra.libdevice`` in a
Triton file) gives the same functions.  Each takes blocks or scalars of exactly the dtypes of one of its
variants (no implicit promotion: an fp16 block must be converted first, as in Triton), broadcasts their
shapes and computes elementwise with the libdevice function of that variant (``__nv_tanhf`` for fp32,
``__nv_tanh`` for fp64).

The table below is the one definition: the front end's type rule, the IR verifier, the interpreter's
torch references and the CUDA backend's calls all read ``LIBDEVICE``.
"""

from __future__ import annotations

from newt.language.core import builtin as _builtin

__all__ = ["LIBDEVICE", "Variant", "variants", "variant_for"]

_F32, _F64, _I32, _I64, _U32, _U64 = "fp32", "fp64", "int32", "int64", "uint32", "uint64"

#: one variant of a function: (argument dtypes, result dtype, libdevice symbol)
Variant = tuple  # tuple[tuple[str, ...], str, str]

LIBDEVICE: dict[str, tuple[Variant, ...]] = {}


def _add(name: str, *variants: Variant) -> None:
    assert name not in LIBDEVICE, name
    assert len({len(v[0]) for v in variants}) == 1, name
    LIBDEVICE[name] = tuple(variants)


def _fl(name: str, nargs: int = 1, f32: str | None = None, f64: str | None = None, ret=None) -> None:
    """A float function with an fp32 variant ``__nv_<name>f`` and an fp64 one ``__nv_<name>``."""
    r32, r64 = ret or (_F32, _F64)
    _add(name, ((_F32,) * nargs, r32, f32 or f"__nv_{name}f"), ((_F64,) * nargs, r64, f64 or f"__nv_{name}"))


def _rounded(op: str, nargs: int, f32: str, f64: str) -> None:
    """An IEEE operation in each rounding mode: ``<op>_rn``, ``_rz``, ``_rd``, ``_ru``."""
    for m in ("rn", "rz", "rd", "ru"):
        _fl(f"{op}_{m}", nargs, f32.format(m=m), f64.format(m=m))


# -- integers -----------------------------------------------------------------------------------------
_add("clz", ((_I32,), _I32, "__nv_clz"), ((_I64,), _I32, "__nv_clzll"))
_add("popc", ((_I32,), _I32, "__nv_popc"), ((_I64,), _I32, "__nv_popcll"))
_add("ffs", ((_I32,), _I32, "__nv_ffs"), ((_I64,), _I32, "__nv_ffsll"))
_add("brev", ((_I32,), _I32, "__nv_brev"), ((_I64,), _I64, "__nv_brevll"))
_add("byte_perm", ((_I32, _I32, _I32), _I32, "__nv_byte_perm"))
_add("mulhi", ((_I32, _I32), _I32, "__nv_mulhi"), ((_U32, _U32), _U32, "__nv_umulhi"),
     ((_I64, _I64), _I64, "__nv_mul64hi"), ((_U64, _U64), _U64, "__nv_umul64hi"))
_add("mul24", ((_I32, _I32), _I32, "__nv_mul24"), ((_U32, _U32), _U32, "__nv_umul24"))
_add("sad", ((_I32, _I32, _U32), _I32, "__nv_sad"), ((_U32, _U32, _U32), _U32, "__nv_usad"))
_add("hadd", ((_I32, _I32), _I32, "__nv_hadd"), ((_U32, _U32), _U32, "__nv_uhadd"))
_add("rhadd", ((_I32, _I32), _I32, "__nv_rhadd"), ((_U32, _U32), _U32, "__nv_urhadd"))
_add("abs", ((_I32,), _I32, "__nv_abs"), ((_I64,), _I64, "__nv_llabs"), ((_F32,), _F32, "__nv_fabsf"),
     ((_F64,), _F64, "__nv_fabs"))

# -- rounding, classification, bits --------------------------------------------------------------------
for _n in ("floor", "ceil", "trunc", "rint", "nearbyint", "round", "exp2", "rsqrt", "sqrt", "sin", "cos", "tan",
           "sinpi", "cospi", "log2", "exp", "exp10", "cosh", "sinh", "tanh", "atan", "asin", "acos", "log",
           "log10", "log1p", "acosh", "asinh", "atanh", "expm1", "cbrt", "rcbrt", "j0", "j1", "y0", "y1",
           "cyl_bessel_i0", "cyl_bessel_i1", "erf", "erfinv", "erfc", "erfcx", "erfcinv", "normcdfinv", "normcdf",
           "lgamma", "tgamma", "logb"):
    _fl(_n)
for _n in ("atan2", "hypot", "rhypot", "copysign", "nextafter", "fmod", "remainder", "fdim"):
    _fl(_n, 2)
_fl("norm3d", 3)
_fl("rnorm3d", 3)
_fl("norm4d", 4)
_fl("rnorm4d", 4)
_fl("fma", 3)
_fl("llrint", ret=(_I64, _I64))
_fl("llround", ret=(_I64, _I64))
_fl("ilogb", ret=(_I32, _I32))
_fl("isnan", f64="__nv_isnand", ret=(_I32, _I32))
_fl("isinf", f64="__nv_isinfd", ret=(_I32, _I32))
_fl("signbit", f64="__nv_signbitd", ret=(_I32, _I32))
_add("finitef", ((_F32,), _I32, "__nv_finitef"))
_add("isfinited", ((_F64,), _I32, "__nv_isfinited"))
_add("saturatef", ((_F32,), _F32, "__nv_saturatef"))
_add("rcp64h", ((_F64,), _F64, "__nv_rcp64h"))
_add("rsqrt_rn", ((_F32,), _F32, "__nv_frsqrt_rn"))
_add("yn", ((_I32, _F32), _F32, "__nv_ynf"), ((_I32, _F64), _F64, "__nv_yn"))
_add("jn", ((_I32, _F32), _F32, "__nv_jnf"), ((_I32, _F64), _F64, "__nv_jn"))
_add("ldexp", ((_F32, _I32), _F32, "__nv_ldexpf"), ((_F64, _I32), _F64, "__nv_ldexp"))
_add("scalbn", ((_F32, _I32), _F32, "__nv_scalbnf"), ((_F64, _I32), _F64, "__nv_scalbn"))
_add("pow", ((_F32, _I32), _F32, "__nv_powif"), ((_F64, _I32), _F64, "__nv_powi"), ((_F32, _F32), _F32, "__nv_powf"),
     ((_F64, _F64), _F64, "__nv_pow"))

# -- IEEE operations with a rounding mode ----------------------------------------------------------------
_rounded("fma", 3, "__nv_fmaf_{m}", "__nv_fma_{m}")
_rounded("div", 2, "__nv_fdiv_{m}", "__nv_ddiv_{m}")
_rounded("rcp", 1, "__nv_frcp_{m}", "__nv_drcp_{m}")
_rounded("sqrt", 1, "__nv_fsqrt_{m}", "__nv_dsqrt_{m}")
_rounded("add", 2, "__nv_fadd_{m}", "__nv_dadd_{m}")
_rounded("sub", 2, "__nv_fsub_{m}", "__nv_dsub_{m}")
_rounded("mul", 2, "__nv_fmul_{m}", "__nv_dmul_{m}")

# -- fast approximations (fp32 only) --------------------------------------------------------------------
for _n in ("sinf", "cosf", "log2f", "logf", "expf", "tanf", "exp10f", "log10f"):
    _add(f"fast_{_n}", ((_F32,), _F32, f"__nv_fast_{_n}"))
_add("fast_powf", ((_F32, _F32), _F32, "__nv_fast_powf"))
_add("fast_dividef", ((_F32, _F32), _F32, "__nv_fast_fdividef"))

# -- conversions ------------------------------------------------------------------------------------------
for _m in ("rn", "rz", "rd", "ru"):
    _add(f"double2float_{_m}", ((_F64,), _F32, f"__nv_double2float_{_m}"))
    for _src, _s, _sym in ((_F64, "double", "double"), (_F32, "float", "float")):
        _add(f"{_s}2int_{_m}", ((_src,), _I32, f"__nv_{_sym}2int_{_m}"))
        _add(f"{_s}2uint_{_m}", ((_src,), _I32, f"__nv_{_sym}2uint_{_m}"))
        _add(f"{_s}2ll_{_m}", ((_src,), _I64, f"__nv_{_sym}2ll_{_m}"))
        _add(f"{_s}2ull_{_m}", ((_src,), _I64, f"__nv_{_sym}2ull_{_m}"))
    _add(f"int2float_{_m}", ((_I32,), _F32, f"__nv_int2float_{_m}"))
    _add(f"uint2float_{_m}", ((_U32,), _F32, f"__nv_uint2float_{_m}"))
    _add(f"ll2float_{_m}", ((_I64,), _F32, f"__nv_ll2float_{_m}"))
    _add(f"ull2float_{_m}", ((_U64,), _F32, f"__nv_ull2float_{_m}"))
    _add(f"ll2double_{_m}", ((_I64,), _F64, f"__nv_ll2double_{_m}"))
    _add(f"ull2double_{_m}", ((_U64,), _F64, f"__nv_ull2double_{_m}"))
_add("int2double_rn", ((_I32,), _F64, "__nv_int2double_rn"))
_add("uint2double_rn", ((_U32,), _F64, "__nv_uint2double_rn"))
_add("hiloint2double", ((_I32, _I32), _F64, "__nv_hiloint2double"))
_add("double2loint", ((_F64,), _I32, "__nv_double2loint"))
_add("double2hiint", ((_F64,), _I32, "__nv_double2hiint"))
_add("int_as_float", ((_I32,), _F32, "__nv_int_as_float"))
_add("float_as_int", ((_F32,), _I32, "__nv_float_as_int"))
_add("uint_as_float", ((_U32,), _F32, "__nv_uint_as_float"))
_add("float_as_uint", ((_F32,), _I32, "__nv_float_as_uint"))
_add("longlong_as_double", ((_I64,), _F64, "__nv_longlong_as_double"))
_add("double_as_longlong", ((_F64,), _I64, "__nv_double_as_longlong"))


def variants(name: str) -> tuple[Variant, ...]:
    """The variants of libdevice function ``name`` (KeyError when there is none)."""
    return LIBDEVICE[name]


def variant_for(name: str, arg_dtypes) -> Variant | None:
    """The variant of ``name`` whose argument dtypes are exactly ``arg_dtypes`` (names or dtypes), or None."""
    key = tuple(getattr(t, "name", t) for t in arg_dtypes)
    return next((v for v in LIBDEVICE[name] if v[0] == key), None)


def _signature_text(v: Variant) -> str:
    return f"({', '.join(v[0])}) -> {v[1]}  [{v[2]}]"


def _stub_of_arity(n: int, opname: str):
    """The stub's body: its rule (``_semantic.<opname>``) on its arguments, named as Triton names them
    (``arg0``, ``arg1``, ...).  Written per arity: no ``inspect`` at import (``import newt`` stays light)."""
    def stub1(arg0, _semantic=None):
        return getattr(_semantic, opname)(arg0)

    def stub2(arg0, arg1, _semantic=None):
        return getattr(_semantic, opname)(arg0, arg1)

    def stub3(arg0, arg1, arg2, _semantic=None):
        return getattr(_semantic, opname)(arg0, arg1, arg2)

    def stub4(arg0, arg1, arg2, arg3, _semantic=None):
        return getattr(_semantic, opname)(arg0, arg1, arg2, arg3)

    assert 1 <= n <= 4, n
    return (stub1, stub2, stub3, stub4)[n - 1]


def _make(name: str, vs: tuple[Variant, ...]):
    opname = f"libdevice.{name}"
    stub = _stub_of_arity(len(vs[0][0]), opname)
    stub.__name__ = stub.__qualname__ = name
    stub.__module__ = __name__
    stub.__doc__ = (f"libdevice ``{name}``, elementwise over blocks or scalars of exactly one of these "
                    f"dtype combinations (convert others first, e.g. ``x.to(nl.float32)``):\n\n"
                    + "\n".join(f"* ``{_signature_text(v)}``" for v in vs))
    return _builtin(stub, name=opname)


for _name, _vs in LIBDEVICE.items():
    globals()[_name] = _make(_name, _vs)
    __all__.append(_name)

del _n, _m, _src, _s, _sym, _name, _vs
