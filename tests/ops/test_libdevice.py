"""newt.language.extra.libdevice: every function of the table, every dtype variant, against references
computed here independently of the interpreter (Python's math, scipy.special, exact fractions with the
rounding mode applied by hand); the CUDA run checks the GPU's libdevice against the same references.

The kernels are generated (one per function variant) into a module file: the front end reads kernels from
their source, as it does for every file.
"""

from __future__ import annotations

import importlib.util
import math
import struct
import sys
import zlib
from fractions import Fraction

import numpy as np
import pytest
import torch

import newt
import newt.language as nl
from newt.language.extra import libdevice as libdevice_mod
from newt.language.extra.cuda.libdevice import LIBDEVICE
from newt.language.extra.libdevice import erf as ld_erf
from newt.language.extra.libdevice import tanh as ld_tanh

scipy_special = pytest.importorskip("scipy.special")

_TORCH = {"fp32": torch.float32, "fp64": torch.float64, "int32": torch.int32, "int64": torch.int64,
          "uint32": torch.uint32, "uint64": torch.uint64}
N = 64
CASES = [(name, i) for name, vs in sorted(LIBDEVICE.items()) for i in range(len(vs))]


def _module_source() -> str:
    out = ["import newt", "import newt.language as nl", "from newt.language.extra import libdevice", ""]
    for name, i in CASES:
        args = LIBDEVICE[name][i][0]
        ps = ", ".join(f"a{k}" for k in range(len(args)))
        loads = ", ".join(f"nl.load(a{k} + i)" for k in range(len(args)))
        out += ["@newt.jit", f"def k_{name}_{i}(out, {ps}, N: nl.constexpr):", "    i = nl.arange(0, N)",
                f"    nl.store(out + i, libdevice.{name}({loads}))", ""]
    return "\n".join(out)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("libdevice") / "libdevice_kernels.py"
    path.write_text(_module_source())
    spec = importlib.util.spec_from_file_location("libdevice_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["libdevice_kernels"] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("libdevice_kernels", None)


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------

_DOMAIN = {
    "pos": ("log", "log1p", "log2", "log10", "rsqrt", "sqrt", "y0", "y1", "yn", "tgamma", "lgamma", "fast_log2f",
            "fast_logf", "fast_log10f", "rsqrt_rn", "fast_powf", "sqrt_rn", "sqrt_rz", "sqrt_rd", "sqrt_ru", "pow"),
    "unit": ("asin", "acos", "atanh", "erfinv"),
    "ge1": ("acosh",),
    "two": ("erfcinv",),
    "prob": ("normcdfinv",),
    "small": ("exp", "exp2", "exp10", "expm1", "cosh", "sinh", "fast_expf", "fast_exp10f", "erfcx", "cyl_bessel_i0",
              "cyl_bessel_i1"),
}
_DOMAIN_OF = {n: d for d, ns in _DOMAIN.items() for n in ns}
_RANGES = {"pos": (0.1, 4.0), "unit": (-0.95, 0.95), "ge1": (1.0, 4.0), "two": (0.05, 1.95), "prob": (0.02, 0.98),
           "small": (-3.0, 3.0), None: (-4.0, 4.0)}


def _inputs(name, args):
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()) % 1000)  # (str hashes vary per process)
    out = []
    for k, t in enumerate(args):
        if t in ("fp32", "fp64"):
            lo, hi = _RANGES[_DOMAIN_OF.get(name)]
            if "2int" in name or "2uint" in name or "2ll" in name or "2ull" in name or name in ("llrint", "llround",
                                                                                                  "rint", "round",
                                                                                                  "nearbyint"):
                lo, hi = -300.0, 300.0
            x = lo + (hi - lo) * torch.rand(N, generator=g, dtype=torch.float64)
            if name in ("rint", "round", "nearbyint", "llrint", "llround") or "2int" in name or "2ll" in name:
                x[:8] = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.0, -7.0], dtype=torch.float64)
            if name in ("div_rn", "div_rz", "div_rd", "div_ru", "fmod", "remainder", "fast_dividef") and k == 1:
                x = torch.where(x.abs() < 0.1, torch.full_like(x, 0.37), x)
            if name == "double2float_rn" or name.startswith("double2float"):
                x = x * math.pi  # not representable in fp32
            out.append(x.to(_TORCH[t]))
        else:
            if name in ("yn", "jn"):
                v = torch.randint(0, 6, (N,), generator=g, dtype=torch.int64)
            elif name in ("ldexp", "scalbn"):
                v = torch.randint(-20, 21, (N,), generator=g, dtype=torch.int64)
            elif name == "pow":
                v = torch.randint(-4, 5, (N,), generator=g, dtype=torch.int64)
            elif t in ("int64", "uint64"):
                v = torch.randint(-(2 ** 62), 2 ** 62, (N,), generator=g, dtype=torch.int64) * 2 + \
                    torch.randint(0, 2, (N,), generator=g, dtype=torch.int64)
                if t == "int64":
                    v[:4] = torch.tensor([0, -1, 2 ** 63 - 1, -(2 ** 63)])
            else:
                v = torch.randint(-(2 ** 31), 2 ** 31, (N,), generator=g, dtype=torch.int64)
                v[:4] = torch.tensor([0, -1, 2 ** 31 - 1, -(2 ** 31)])
                if t == "uint32":
                    v = v & 0xFFFFFFFF
            if t == "uint64":
                out.append(v.view(torch.uint64))
            else:
                out.append(v.to(_TORCH[t]))
    return out


# ---------------------------------------------------------------------------
# references (Python scalars)
# ---------------------------------------------------------------------------


def _f32(x):
    return float(np.float32(x))


def _neighbors(q: Fraction, c: float, wide: bool):
    nxt = (lambda v, d: float(np.nextafter(v, d))) if wide else \
        (lambda v, d: float(np.nextafter(np.float32(v), np.float32(d))))
    fc = Fraction(c)
    if fc == q:
        return c, c
    if fc > q:
        return nxt(c, -math.inf), c
    return c, nxt(c, math.inf)


def _round_exact(q: Fraction, mode: str, wide: bool, cmp=None) -> float:
    """``q`` rounded to fp64 (wide) or fp32 in ``mode``; ``cmp(c)`` compares a candidate with an
    irrational exact value (sqrt) instead of ``q``."""
    c = float(q) if cmp is None else q
    if not wide:
        c = _f32(c)
    if cmp is None:
        lo, hi = _neighbors(q, c, wide)
        exact_lo, exact_hi = Fraction(lo) == q, Fraction(hi) == q
        d_lo, d_hi = q - Fraction(lo), Fraction(hi) - q
    else:
        s = cmp(c)  # sign of c - exact
        nxt = (lambda v, d: float(np.nextafter(v, d))) if wide else \
            (lambda v, d: float(np.nextafter(np.float32(v), np.float32(d))))
        lo, hi = (c, c) if s == 0 else ((nxt(c, -math.inf), c) if s > 0 else (c, nxt(c, math.inf)))
        exact_lo = exact_hi = s == 0
        d_lo = d_hi = None
    if lo == hi or exact_lo or exact_hi:
        return lo if exact_lo else hi
    positive = lo >= 0
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    if mode == "rz":
        return lo if positive else hi
    if d_lo is None:  # sqrt: the midpoint is never the exact root of a float
        mid = (Fraction(lo) + Fraction(hi)) / 2
        return lo if cmp(mid) > 0 else hi
    if d_lo != d_hi:
        return lo if d_lo < d_hi else hi
    bits = struct.unpack("<Q", struct.pack("<d", lo))[0] if wide else struct.unpack("<I", struct.pack("<f", lo))[0]
    return lo if bits % 2 == 0 else hi


def _sqrt_cmp(x):
    fx = Fraction(x)

    def cmp(c):
        v = Fraction(c) * Fraction(c)
        return (v > fx) - (v < fx)
    return cmp


def _round_int(x: float, mode: str) -> int:
    if mode == "rn":
        return round(x)  # Python rounds half to even
    return {"rz": math.trunc, "rd": math.floor, "ru": math.ceil}[mode](x)


def _sat(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def _wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


def _u(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def _f32_bits(x):
    return struct.unpack("<i", struct.pack("<f", x))[0]


def _f64_bits(x):
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _float_ref(name):
    m = math
    sp = scipy_special
    table = {
        "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint,
        "round": lambda x: float(m.copysign(m.floor(abs(x) + 0.5), x)),
        "exp2": lambda x: 2.0 ** x, "rsqrt": lambda x: 1 / m.sqrt(x), "sqrt": m.sqrt, "sin": m.sin, "cos": m.cos,
        "tan": m.tan, "sinpi": lambda x: m.sin(m.pi * x), "cospi": lambda x: m.cos(m.pi * x), "log2": m.log2,
        "exp": m.exp, "exp10": lambda x: 10.0 ** x, "cosh": m.cosh, "sinh": m.sinh, "tanh": m.tanh, "atan": m.atan,
        "asin": m.asin, "acos": m.acos, "log": m.log, "log10": m.log10, "log1p": m.log1p, "acosh": m.acosh,
        "asinh": m.asinh, "atanh": m.atanh, "expm1": m.expm1, "cbrt": lambda x: float(np.cbrt(x)),
        "rcbrt": lambda x: 1 / float(np.cbrt(x)), "j0": sp.j0, "j1": sp.j1, "y0": sp.y0, "y1": sp.y1,
        "cyl_bessel_i0": sp.i0, "cyl_bessel_i1": sp.i1, "erf": m.erf, "erfinv": sp.erfinv, "erfc": m.erfc,
        "erfcx": sp.erfcx, "erfcinv": sp.erfcinv, "normcdfinv": sp.ndtri, "normcdf": sp.ndtr, "lgamma": m.lgamma,
        "tgamma": m.gamma, "logb": lambda x: float(m.frexp(x)[1] - 1), "abs": abs,
        "saturatef": lambda x: min(1.0, max(0.0, x)), "atan2": m.atan2, "hypot": m.hypot,
        "rhypot": lambda x, y: 1 / m.hypot(x, y), "copysign": m.copysign, "nextafter": None, "fmod": m.fmod,
        "remainder": m.remainder, "fdim": lambda x, y: x - y if x > y else 0.0, "pow": lambda x, y: x ** y,
        "norm3d": lambda *a: m.sqrt(sum(v * v for v in a)), "norm4d": lambda *a: m.sqrt(sum(v * v for v in a)),
        "rnorm3d": lambda *a: 1 / m.sqrt(sum(v * v for v in a)),
        "rnorm4d": lambda *a: 1 / m.sqrt(sum(v * v for v in a)),
        "ldexp": lambda x, n: m.ldexp(x, n), "scalbn": lambda x, n: m.ldexp(x, n), "jn": lambda n, x: sp.jv(n, x),
        "yn": lambda n, x: sp.yv(n, x), "fast_dividef": lambda x, y: x / y, "rcp64h": None, "rsqrt_rn": None,
    }
    for f in ("sinf", "cosf", "log2f", "logf", "expf", "tanf", "exp10f", "log10f", "powf"):
        table[f"fast_{f}"] = table[f[:-1]] if f[:-1] in table else None
    return table.get(name, "missing")


def reference(name: str, variant, xs):
    """The expected results, as a tensor of the variant's result dtype."""
    args, ret, _ = variant
    wide = ret == "fp64"
    cols = [x.view(torch.int64).tolist() if t == "uint64" else x.tolist() for x, t in zip(xs, args)]
    if any(t == "uint64" for t in args):
        cols = [[_u(v, 64) for v in c] if t == "uint64" else c for c, t in zip(cols, args)]
    rows = list(zip(*cols))
    base, _, mode = name.rpartition("_")
    if mode not in ("rn", "rz", "rd", "ru"):
        base, mode = name, ""
    out = []
    for r in rows:
        out.append(_ref_one(name, base, mode, args, ret, wide, r))
    if ret in ("fp32", "fp64"):
        return torch.tensor(out, dtype=_TORCH[ret])
    if ret == "uint64":
        return torch.tensor([_wrap(v, 64, True) for v in out], dtype=torch.int64).view(torch.uint64)
    if ret == "uint32":
        return torch.tensor(out, dtype=torch.int64).to(torch.uint32)
    return torch.tensor(out, dtype=_TORCH[ret])


def _ref_one(name, base, mode, args, ret, wide, r):
    a0 = args[0]
    fr = [Fraction(v) for v in r] if all(t in ("fp32", "fp64") for t in args) else None
    if mode and base in ("add", "sub", "mul", "div", "rcp", "fma"):
        q = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "div": lambda a, b: a / b, "rcp": lambda a: 1 / a, "fma": lambda a, b, c: a * b + c}[base](*fr)
        return _round_exact(q, mode, wide)
    if name == "fma":
        return _round_exact(fr[0] * fr[1] + fr[2], "rn", wide)
    if mode and base == "sqrt":
        return _round_exact(math.sqrt(r[0]), mode, wide, cmp=_sqrt_cmp(r[0]))
    if mode and base == "double2float":
        return _round_exact(Fraction(r[0]), mode, False)
    if mode and (base.startswith("double2") or base.startswith("float2")):
        to = base.split("2", 1)[1]
        v = _round_int(r[0], mode)
        lo, hi, bits, signed = {"int": (-(2 ** 31), 2 ** 31 - 1, 32, True), "uint": (0, 2 ** 32 - 1, 32, True),
                                "ll": (-(2 ** 63), 2 ** 63 - 1, 64, True), "ull": (0, 2 ** 64 - 1, 64, True)}[to]
        return _wrap(_sat(v, lo, hi), bits, signed)
    if mode and base.split("2")[0] in ("int", "uint", "ll", "ull"):
        return _round_exact(Fraction(r[0]), mode, wide)
    if name == "hiloint2double":
        return struct.unpack("<d", struct.pack("<Q", (_u(r[0], 32) << 32) | _u(r[1], 32)))[0]
    if name == "double2loint":
        return _wrap(_f64_bits(r[0]), 32, True)
    if name == "double2hiint":
        return _wrap(_f64_bits(r[0]) >> 32, 32, True)
    if name in ("int_as_float", "uint_as_float"):
        return struct.unpack("<f", struct.pack("<I", _u(r[0], 32)))[0]
    if name in ("float_as_int", "float_as_uint"):
        return _f32_bits(r[0])
    if name == "longlong_as_double":
        return struct.unpack("<d", struct.pack("<q", r[0]))[0]
    if name == "double_as_longlong":
        return _f64_bits(r[0])
    if a0 in ("int32", "int64", "uint32", "uint64") and ret not in ("fp32", "fp64"):
        bits = 64 if a0 in ("int64", "uint64") else 32
        signed = a0.startswith("int")
        x = r[0]
        if name == "clz":
            return bits - _u(x, bits).bit_length()
        if name == "popc":
            return bin(_u(x, bits)).count("1")
        if name == "ffs":
            u = _u(x, bits)
            return (u & -u).bit_length()
        if name == "brev":
            return _wrap(int(format(_u(x, bits), f"0{bits}b")[::-1], 2), bits, True)
        if name == "byte_perm":
            src = _u(r[0], 32) | (_u(r[1], 32) << 32)
            v = sum(((src >> (8 * ((r[2] >> (4 * n)) & 7))) & 0xFF) << (8 * n) for n in range(4))
            return _wrap(v, 32, True)
        if name == "abs":
            return _wrap(abs(x), bits, True)
        if name == "mulhi":
            return _wrap((r[0] * r[1]) >> bits, bits, signed) if signed else (r[0] * r[1]) >> bits
        if name == "mul24":
            def s24(v):
                v &= 0xFFFFFF
                return v - (1 << 24) if signed and v >= 1 << 23 else v
            v = s24(r[0]) * s24(r[1])
            return _wrap(v, 32, True) if signed else _u(v, 32)
        if name == "sad":
            v = abs(r[0] - r[1]) + r[2]
            return _wrap(v, 32, True) if signed else _u(v, 32)
        if name in ("hadd", "rhadd"):
            v = (r[0] + r[1] + (name == "rhadd")) >> 1
            return _wrap(v, 32, True) if signed else _u(v, 32)
        raise AssertionError(name)
    if name in ("isnan", "isinf", "signbit", "finitef", "isfinited"):
        x = r[0]
        return int({"isnan": math.isnan, "isinf": math.isinf, "signbit": lambda v: math.copysign(1, v) < 0,
                    "finitef": math.isfinite, "isfinited": math.isfinite}[name](x))
    if name == "ilogb":
        return math.frexp(r[0])[1] - 1 if r[0] != 0 else -(2 ** 31)
    if name == "llrint":
        return round(r[0])
    if name == "llround":
        return int(math.copysign(math.floor(abs(r[0]) + 0.5), r[0]))
    if name == "nextafter":
        if wide:
            return float(np.nextafter(r[0], r[1]))
        return float(np.nextafter(np.float32(r[0]), np.float32(r[1])))
    if name == "rcp64h":
        hi = struct.unpack("<d", struct.pack("<Q", _u(_f64_bits(r[0]), 64) >> 32 << 32))[0]
        return struct.unpack("<d", struct.pack("<Q", _u(_f64_bits(1 / hi), 64) >> 32 << 32))[0]
    if name == "rsqrt_rn":
        return _f32(1 / math.sqrt(r[0]))
    f = _float_ref(name)
    assert callable(f), f"no reference for {name}"
    v = float(f(*r))
    return v if wide else _f32(v)


# ---------------------------------------------------------------------------
# tolerances: exact where the operation is exact
# ---------------------------------------------------------------------------

_EXACT_BASES = {"add", "sub", "mul", "div", "rcp", "sqrt", "fma", "double2float"}


def _exact(name, variant) -> bool:
    args, ret, _ = variant
    base, _, mode = name.rpartition("_")
    if mode in ("rn", "rz", "rd", "ru") and (base in _EXACT_BASES or "2" in base):
        return True
    if ret not in ("fp32", "fp64") or name in ("fma", "floor", "ceil", "trunc", "rint", "nearbyint", "round", "abs",
                                               "copysign", "fmod", "remainder", "fdim", "nextafter", "saturatef",
                                               "ldexp", "scalbn", "logb", "hiloint2double", "int_as_float",
                                               "uint_as_float", "longlong_as_double", "rcp64h"):
        return True
    return False


def _check(name, variant, got, want, gpu: bool):
    args, ret, _ = variant
    if _exact(name, variant) and not (gpu and name == "rcp64h"):
        if ret in ("fp32", "fp64"):
            bits = torch.int32 if ret == "fp32" else torch.int64
            same = (got.view(bits) == want.view(bits)) | (torch.isnan(got) & torch.isnan(want))
            assert bool(same.all()), f"{name}: {got[~same][:4].tolist()} != {want[~same][:4].tolist()}"
        else:
            assert torch.equal(got, want), f"{name}: {got.tolist()[:8]} != {want.tolist()[:8]}"
        return
    if ret == "fp64":
        rtol, atol = (1e-13, 1e-14) if not gpu else (2e-14, 1e-14)
    else:
        rtol, atol = (2e-7, 1e-30) if not gpu else (3e-6, 1e-6)
    if gpu and (name.startswith("fast_") or name == "rcp64h"):
        rtol, atol = 2e-3, 1e-4
    if name in ("lgamma", "tgamma", "y0", "y1", "yn", "j0", "j1", "jn", "erfcinv", "erfinv") and gpu:
        rtol, atol = rtol * 4, atol * 4
    if name in ("yn", "jn") and not gpu:  # the recurrences lose a few ulp
        rtol, atol = (1e-11, 1e-13) if ret == "fp64" else (1e-6, 1e-7)
    if name in ("j0", "j1", "y0", "y1", "jn", "yn") and ret == "fp64" and gpu:
        rtol, atol = 1e-12, 1e-12  # CUDA's fp64 Bessel functions: a few ulp, or ~1e-12 absolute near zeros
    if name in ("j0", "j1", "y0", "y1", "jn", "yn") and not gpu:
        # torch.special's fp64 Bessel functions (documented in docs/libdevice.md)
        rtol, atol = (1e-7, 2e-9) if ret == "fp64" else (max(rtol, 2e-7), 1e-8)
    if name in ("sinpi", "cospi", "tgamma", "cbrt", "rcbrt", "erfcx", "normcdfinv", "erfcinv") and ret == "fp64":
        rtol, atol = max(rtol, 1e-12), max(atol, 1e-13)
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("name,vi", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_libdevice_function(backend, kernels, name, vi):
    variant = LIBDEVICE[name][vi]
    args, ret, _ = variant
    xs = _inputs(name, args)
    out = backend.zeros(N, dtype=_TORCH[ret])
    backend.launch(getattr(kernels, f"k_{name}_{vi}"), (1,), out, *backend.put(*xs) if len(xs) > 1 else
                   [backend.put(xs[0])], N=N)
    got = backend.get(out)
    _check(name, variant, got, reference(name, variant, xs), backend.name == "cuda")


def _nvrtc() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return False
    return True


def _all_variants_source() -> str:
    """One kernel calling every variant once (a store per call, so none is dead code)."""
    kinds = list(_TORCH)
    lines = ["import newt", "import newt.language as nl", "from newt.language.extra import libdevice", "",
             "@newt.jit",
             "def all_variants(" + ", ".join(f"x_{k}" for k in kinds) + ", " + ", ".join(f"o_{k}" for k in kinds)
             + "):", "    i = nl.arange(0, 32)"]
    lines += [f"    v_{k} = nl.load(x_{k} + i)" for k in kinds]
    for j, (name, vi) in enumerate(CASES):
        args, ret, _ = LIBDEVICE[name][vi]
        lines.append(f"    nl.store(o_{ret} + {j} * 32 + i, libdevice.{name}({', '.join(f'v_{a}' for a in args)}))")
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(not _nvrtc(), reason="needs NVRTC (cuda-python)")
@pytest.mark.parametrize("target", ["sm_90a", pytest.param("sm_80", marks=pytest.mark.slow)])
def test_every_variant_compiles_to_cubin(tmp_path, target):
    """Each variant's ``__nv_*`` function is declared and NVRTC links its libdevice definition: the cubin
    and the generated CUDA declares and calls each symbol once."""
    path = tmp_path / "libdevice_all.py"
    path.write_text(_all_variants_source())
    spec = importlib.util.spec_from_file_location("libdevice_all", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sig = {f"x_{k}": f"*{t}" for k, t in (("fp32", "fp32"), ("fp64", "fp64"), ("int32", "i32"), ("int64", "i64"),
                                           ("uint32", "u32"), ("uint64", "u64"))}
    sig.update({k.replace("x_", "o_"): v for k, v in sig.items()})
    c = newt.compile(mod.all_variants, signature=sig, target=target, cache=False)
    assert c.asm["cubin"][:4] == b"\x7fELF"
    cuda = c.asm["cuda"]
    for name, vi in CASES:
        sym = LIBDEVICE[name][vi][2]
        assert cuda.count(f" {sym}(") == 1, sym  # declared once
        assert f"{sym}((" in cuda, sym  # and called
    assert c.metadata["n_regs"] > 0


# ---------------------------------------------------------------------------
# kernels in the style of published code (GELU with libdevice's tanh / erf, fp16 storage, fp32 math)
# ---------------------------------------------------------------------------

@newt.jit
def gelu_fwd(x_ptr, y_ptr, n, APPROX: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask, other=0.0).to(nl.float32)
    if APPROX:
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        y = 0.5 * x * (1 + ld_tanh(inner))
    else:
        y = 0.5 * x * (1 + ld_erf(x * 0.7071067811865476))
    nl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@pytest.mark.parametrize("approx", [True, False])
def test_gelu_with_libdevice(backend, approx):
    n = 1000
    x = torch.randn(n, dtype=torch.float16)
    y = backend.zeros(n, dtype=torch.float16)
    backend.launch(gelu_fwd, (newt.cdiv(n, 256),), backend.put(x), y, n, APPROX=approx, BLOCK=256)
    want = torch.nn.functional.gelu(x.float(), approximate="tanh" if approx else "none").half()
    torch.testing.assert_close(backend.get(y), want, rtol=2e-3, atol=2e-3)


@newt.jit
def mixed_uniform(x_ptr, out_ptr, y, sel, BLOCK: nl.constexpr):
    # per-program operands meet uniform ones (scalar arguments): the interpreter holds those with one row
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    r = libdevice_mod.remainder(x, y.to(nl.float64))
    nl.store(out_ptr + offs, r + libdevice_mod.byte_perm(offs, 0x01020304, sel).to(nl.float64))


def test_uniform_and_per_program_operands(backend):
    x = torch.randn(3 * 16, dtype=torch.float64) * 10
    out = backend.zeros(48, dtype=torch.float64)
    backend.launch(mixed_uniform, (3,), backend.put(x), out, 2.5, 0x3210 + 0x4000, BLOCK=16)
    variant_r = LIBDEVICE["remainder"][1]
    want_r = reference("remainder", variant_r, [x, torch.full((48,), 2.5, dtype=torch.float64)])
    offs = torch.arange(48, dtype=torch.int32)
    want_b = reference("byte_perm", LIBDEVICE["byte_perm"][0],
                       [offs, torch.full((48,), 0x01020304, dtype=torch.int32),
                        torch.full((48,), 0x7210, dtype=torch.int32)])
    torch.testing.assert_close(backend.get(out), want_r + want_b.to(torch.float64))
