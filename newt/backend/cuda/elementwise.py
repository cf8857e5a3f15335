"""Elementwise ops as C++ expressions: one table, one entry per op.

``scalar_expr(op_name, args, arg_types, result_type, attrs)`` turns C++
expressions for one element of each operand into a C++ expression for one
element of the result.  Blocks apply it per register; scalars use it once.
fp16/bf16/fp8 arithmetic happens in fp32 and rounds back (exact for
+ - * / sqrt, which is what the interpreter does too).
"""

from __future__ import annotations

from newt.ir.ops import ELEMENTWISE, OPS
from newt.ir.types import scalar_of

from .ctypes import compute_ctype, const_literal, ctype, from_compute, is_lowp_float, to_compute

__all__ = ["ELEMENTWISE", "scalar_expr", "cast_expr", "is_elementwise", "libdevice_declaration"]


def _unsigned_of(t) -> str:
    return {8: "unsigned char", 16: "unsigned short", 32: "unsigned int", 64: "unsigned long long"}[
        t.primitive_bitwidth]


def _wrap_int(t, expr_u: str) -> str:
    """Signed arithmetic done in the unsigned type (wraps, no UB), cast back."""
    return f"({ctype(t)})({expr_u})"


def _arith(opsym):
    def f(a, b, t, attrs):
        if t.is_int() and not t.is_bool():
            if t.is_int_signed() or t.primitive_bitwidth < 32:
                u = _unsigned_of(t)
                return _wrap_int(t, f"({u})({a}) {opsym} ({u})({b})")
            return f"({a} {opsym} {b})"
        if t.is_bool():
            return f"(bool)(({1} & ((int)({a}) {opsym} (int)({b}))))"
        return f"({a} {opsym} {b})"
    return f


def _float_fn(f32, f64):
    def f(a, t, attrs=None):
        if t.name == "fp64":
            return f"{f64}({a})"
        return f"{f32}({a})".replace("{x}", a) if "{x}" in f32 else f"{f32}({a})"
    return f


# unary float math: (fp32 expression template, fp64 function)
_UNARY_FLOAT = {
    "exp": ("ex2_approx({x} * 1.44269504088896341f)", "exp"),
    # exp2 as Triton lowers it (ex2.approx.ftz.f32): results under 2**-126 flush to 0, which spares the
    # FSETP + two FMUL that scale a subnormal result around the non-ftz MUFU.EX2 (attention's softmax)
    "exp2": ("ex2_approx_ftz({x})", "exp2"),
    # log and log2 as Triton lowers them: CUDA's logf/log2f (libdevice's __nv_logf/__nv_log2f, within 1 ulp),
    # not lg2.approx (2**-22 absolute near 1): the approximation's error adds up where a kernel sums
    # p * log(p) terms that nearly cancel (Liger's fp32 JSD loss missed its rtol=1e-6 on the H100, Triton's did not)
    "log": ("logf({x})", "log"),
    "log2": ("log2f({x})", "log2"),
    "sqrt": ("sqrt_approx({x})", "sqrt"),
    "sqrt_rn": ("sqrt_rn({x})", "sqrt"),
    "rsqrt": ("rsqrt_approx({x})", "rsqrt"),
    "sin": ("sinf({x})", "sin"),
    "cos": ("cosf({x})", "cos"),
    "tanh": ("tanhf({x})", "tanh"),
    "erf": ("erff({x})", "erf"),
    "floor": ("floorf({x})", "floor"),
    "ceil": ("ceilf({x})", "ceil"),
}

_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}



_CAST_ROUNDING = OPS["cast"].default("rounding")


def is_elementwise(name: str) -> bool:
    return name in ELEMENTWISE


def scalar_expr(name: str, args: list, arg_types: list, result_type, attrs: dict) -> str:
    rt = scalar_of(result_type)
    if name == "cast":
        return cast_expr(args[0], scalar_of(arg_types[0]), rt, attrs.get("rounding") or _CAST_ROUNDING)
    if name == "bitcast":
        st = scalar_of(arg_types[0])
        if st == rt:
            return args[0]
        if st.is_ptr() and rt.is_ptr():
            return f"(({ctype(rt)})({args[0]}))"
        return f"bit_cast<{ctype(rt)}>({args[0]})"
    if name == "addptr":
        return f"({args[0]} + {args[1]})"
    if name == "libdevice":
        variant = _libdevice_variant(attrs["fn"], arg_types)
        xs = ", ".join(f"({ctype(scalar_of(t))})({a})" for a, t in zip(args, arg_types))
        return f"(({ctype(rt)}){variant[2]}({xs}))"
    if name == "where":
        return f"({args[0]} ? {args[1]} : {args[2]})"
    if name in _CMP:
        t = scalar_of(arg_types[0])
        a, b = (to_compute(x, t) for x in args)
        return f"({a} {_CMP[name]} {b})"
    t = scalar_of(arg_types[0])
    lowp = is_lowp_float(t)
    computed = [to_compute(x, t) for x in args]
    e = _compute(name, computed, t, attrs)
    return from_compute(e, t) if lowp else e


def _libdevice_variant(fn: str, arg_types):
    from newt.language.extra.cuda.libdevice import variant_for
    v = variant_for(fn, [scalar_of(t) for t in arg_types])
    if v is None:  # the front end and the verifier accept only the table's variants
        raise ValueError(f"libdevice.{fn} has no variant for {[str(scalar_of(t)) for t in arg_types]}")
    return v


def libdevice_declaration(fn: str, arg_types) -> tuple[str, str]:
    """(symbol, C++ declaration) of the libdevice function a ``libdevice`` op calls: NVRTC links libdevice,
    whose ``__nv_*`` functions need only a declaration."""
    from newt.language import core as lc
    args, ret, sym = _libdevice_variant(fn, arg_types)
    cargs = ", ".join(ctype(lc.dtype_from_name(a)) for a in args)
    return sym, f'extern "C" __device__ {ctype(lc.dtype_from_name(ret))} {sym}({cargs});'


def _compute(name, xs, t, attrs):
    ct = compute_ctype(t)
    is_float = t.is_floating()
    is_f64 = t.name == "fp64"
    if name in ("add", "sub", "mul"):
        sym = {"add": "+", "sub": "-", "mul": "*"}[name]
        if is_float:
            return f"({xs[0]} {sym} {xs[1]})"
        return _arith(sym)(xs[0], xs[1], t, attrs)
    if name == "truediv":
        if is_f64:
            return f"({xs[0]} / {xs[1]})"
        return f"div_full({xs[0]}, {xs[1]})"
    if name == "div_rn":
        if is_f64:
            return f"({xs[0]} / {xs[1]})"
        return f"div_rn({xs[0]}, {xs[1]})"
    if name == "floordiv":
        return f"({ctype(t)})({xs[0]} / {xs[1]})"
    if name == "mod":
        if is_float:
            return f"{'fmod' if is_f64 else 'fmodf'}({xs[0]}, {xs[1]})"
        return f"({ctype(t)})({xs[0]} % {xs[1]})"
    if name in ("and", "or", "xor"):
        sym = {"and": "&", "or": "|", "xor": "^"}[name]
        if t.is_bool():
            return f"(bool)({xs[0]} {sym} {xs[1]})"
        return f"({ctype(t)})({xs[0]} {sym} {xs[1]})"
    if name == "shl":
        u = _unsigned_of(t)
        return f"({ctype(t)})(({u})({xs[0]}) << ({xs[1]}))"
    if name == "shr":
        return f"({ctype(t)})({xs[0]} >> ({xs[1]}))"
    if name in ("minimum", "maximum"):
        if is_float:
            nan = attrs.get("propagate_nan", False)
            nan = getattr(nan, "value", nan)
            nan = bool(nan) and str(nan) not in ("NONE", "PropagateNan.NONE")
            if is_f64:
                f = {"minimum": "dmin_nan" if nan else "fmin", "maximum": "dmax_nan" if nan else "fmax"}[name]
            else:
                f = {"minimum": "fmin_nan" if nan else "fminf", "maximum": "fmax_nan" if nan else "fmaxf"}[name]
            return f"{f}({xs[0]}, {xs[1]})"
        op = "<" if name == "minimum" else ">"
        return f"(({xs[0]}) {op} ({xs[1]}) ? ({xs[0]}) : ({xs[1]}))"
    if name == "umulhi":
        # like Triton's tl.umulhi: the high half of the *unsigned* product, whatever the signedness
        if t.primitive_bitwidth == 64:
            return f"({ctype(t)})__umul64hi((unsigned long long)({xs[0]}), (unsigned long long)({xs[1]}))"
        return f"({ctype(t)})__umulhi((unsigned int)({xs[0]}), (unsigned int)({xs[1]}))"
    if name == "pow":
        return f"{'pow' if is_f64 else 'powf'}({xs[0]}, {xs[1]})"
    if name == "fma":
        return f"{'fma' if is_f64 else 'fmaf'}({xs[0]}, {xs[1]}, {xs[2]})"
    if name == "neg":
        if is_float:
            return f"(-{xs[0]})"
        if t.is_bool():
            return xs[0]
        u = _unsigned_of(t)
        return _wrap_int(t, f"({u})0 - ({u})({xs[0]})")
    if name == "invert":
        if t.is_bool():
            return f"(!{xs[0]})"
        return f"({ctype(t)})(~{xs[0]})"
    if name == "abs":
        if is_float:
            return f"{'fabs' if is_f64 else 'fabsf'}({xs[0]})"
        if not t.is_int_signed():
            return xs[0]
        u = _unsigned_of(t)
        return f"(({xs[0]}) < 0 ? " + _wrap_int(t, f"({u})0 - ({u})({xs[0]})") + f" : ({xs[0]}))"
    if name in _UNARY_FLOAT:
        f32, f64 = _UNARY_FLOAT[name]
        if is_f64:
            return f"{f64}({xs[0]})"
        return "(" + f32.replace("{x}", f"({xs[0]})") + ")"
    del ct
    raise NotImplementedError(f"elementwise op {name} on {t}")


_F2I = {  # (float kind, int name) -> helper
    ("f", "int32"): "f2i32", ("f", "uint32"): "f2u32", ("f", "int64"): "f2i64", ("f", "uint64"): "f2u64",
    ("d", "int32"): "d2i32", ("d", "uint32"): "d2u32", ("d", "int64"): "d2i64", ("d", "uint64"): "d2u64",
}
_NARROW = {"int8": (-128, 127), "int16": (-32768, 32767), "uint8": (0, 255), "uint16": (0, 65535)}


def cast_expr(x: str, st, dt, rounding: str = "rtne") -> str:
    """C++ converting ``x`` (of dtype st) to dtype dt with newt's cast semantics."""
    if st == dt:
        return x
    if st.is_ptr() or dt.is_ptr():
        if st.is_ptr() and dt.is_ptr():
            return f"(({ctype(dt)})({x}))"
        if st.is_ptr():
            return f"(({ctype(dt)})(unsigned long long)({x}))"
        return f"(({ctype(dt)})(unsigned long long)({x}))"
    if dt.is_bool():
        return f"(({to_compute(x, st)}) != 0)"
    if st.is_bool():
        if dt.is_floating():
            return from_compute(f"({x} ? 1.0f : 0.0f)", dt) if is_lowp_float(dt) else f"({ctype(dt)})({x} ? 1 : 0)"
        return f"({ctype(dt)})({x} ? 1 : 0)"
    if st.is_int() and dt.is_int():
        return f"({ctype(dt)})({x})"
    if st.is_int() and dt.is_floating():
        if dt.name == "fp64":
            return f"(double)({x})"
        if is_lowp_float(dt):
            if st.primitive_bitwidth == 64 and dt.name in ("fp16", "bf16"):
                return from_compute(f"(float)({x})", dt, rounding)
            return from_compute(f"(float)({x})", dt, rounding)
        return f"(float)({x})"
    if st.is_floating() and dt.is_int():
        kind = "d" if st.name == "fp64" else "f"
        v = x if st.name in ("fp32", "fp64") else to_compute(x, st)
        if dt.name in _F2I.__class__.__dict__ or (kind, dt.name) in _F2I:
            return f"{_F2I[(kind, dt.name)]}({v})"
        lo, hi = _NARROW[dt.name]
        helper = "d2i32" if kind == "d" else "f2i32"
        return f"({ctype(dt)})sat_i({helper}({v}), {lo}, {hi})"
    # float -> float
    if dt.name == "fp32":
        if st.name == "fp64":
            return f"f64_to_f32_rz({x})" if rounding == "rtz" else f"(float)({x})"
        return to_compute(x, st)
    if dt.name == "fp64":
        return f"(double)({to_compute(x, st)})"
    # to a low-precision float
    if st.name == "fp64":
        if dt.name == "fp16":
            return f"f64_to_half{'_rz' if rounding == 'rtz' else ''}({x})"
        # fp64 -> bf16/fp8 through fp32: toward zero twice is toward zero once; to nearest it can round
        # twice (round to odd would be exact; fp32 keeps 13+ more bits than these formats)
        if rounding == "rtz":
            return from_compute(f"f64_to_f32_rz({x})", dt, rounding)
        return from_compute(f"(float)({x})", dt, rounding)
    return from_compute(to_compute(x, st), dt, rounding)


def literal(value, ty) -> str:
    return const_literal(value, ty)
