"""A PTX-subset evaluator: runs the asm of ``nl.inline_asm_elementwise`` on torch tensors.

Every register is an int64 tensor of bit patterns, one entry per asm invocation (per element, or per
``pack`` group): widths under 64 bits are kept zero-extended, 64-bit values as two's complement.  An
instruction decodes its operands by its type (``.f32``, ``.s32``, ``.f16x2``, ...), computes with torch
and encodes the result back to bits.  The subset is documented in docs/interpreter.md; anything outside
it raises ``PtxError`` naming the instruction and its line of the asm (the handler adds the kernel's
line).
"""

from __future__ import annotations

import functools
import re

import torch

from newt.ir.ops import asm_elems_per_reg
from newt.language import core as lc

from . import dtypes as D

__all__ = ["PtxError", "parse", "run", "Program", "run_elementwise", "inline_asm_torch"]


class PtxError(Exception):
    def __init__(self, msg: str, line: int | None = None, text: str = ""):
        self.line = line
        self.text = text
        where = f"asm line {line}: `{text.strip()}`: " if line is not None else ""
        super().__init__(where + msg)
        self.detail = msg


_INT_T = {"b8": 8, "b16": 16, "b32": 32, "b64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
          "s8": 8, "s16": 16, "s32": 32, "s64": 64}
_FLOAT_T = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "tf32": 32}
_VEC_T = {"f16x2": ("f16", 2), "bf16x2": ("bf16", 2), "f32x2": ("f32", 2),
          "e4m3x2": ("e4m3", 2), "e5m2x2": ("e5m2", 2)}
_ALL_T = set(_INT_T) | set(_FLOAT_T) | set(_VEC_T) | {"pred"}


def type_bits(t: str) -> int:
    if t in _INT_T:
        return _INT_T[t]
    if t in _FLOAT_T:
        return _FLOAT_T[t]
    if t in _VEC_T:
        e, n = _VEC_T[t]
        return n * (8 if e.startswith("e") else _FLOAT_T[e])
    if t == "pred":
        return 1
    raise KeyError(t)


# ---------------------------------------------------------------------------
# bits <-> values
# ---------------------------------------------------------------------------

_TORCH_F = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
            "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
_SINT = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}


def mask(x: torch.Tensor, w: int) -> torch.Tensor:
    return x if w >= 64 else x & ((1 << w) - 1)


def sext(x: torch.Tensor, w: int) -> torch.Tensor:
    if w >= 64:
        return x
    x = mask(x, w)
    return x - ((x >> (w - 1)) & 1) * (1 << w)


def fdecode(bits: torch.Tensor, ft: str) -> torch.Tensor:
    td = _TORCH_F[ft]
    w = torch.finfo(td).bits
    return sext(bits, w).to(_SINT[w]).view(td)


def fencode(v: torch.Tensor, ft: str) -> torch.Tensor:
    td = _TORCH_F[ft]
    w = torch.finfo(td).bits
    return mask(v.to(td).contiguous().view(_SINT[w]).to(torch.int64), w)


def to_narrow(v: torch.Tensor, ft: str, rnd: str = "rn", sat: bool = False) -> torch.Tensor:
    """A value (any float dtype) rounded once to float type ``ft`` (.rn or .rz), as bits."""
    td = _TORCH_F[ft]
    v = v.to(torch.float64)
    if ft == "f64":
        return fencode(v, ft)
    if sat and ft in ("e4m3", "e5m2"):  # .satfinite: the largest finite value instead of overflow; NaN stays
        m = torch.finfo(td).max
        v = torch.where(v.isnan(), v, v.clamp(-m, m))
    if rnd == "rz":
        r = D._to_narrow_float(v, _FakeDt(ft), "rtz")
    elif td == torch.float32:
        r = v.to(torch.float32)
    else:  # through fp32 rounded to odd: one rounding in all
        r = D.f64_to_f32_odd(v).to(td)
    return fencode(r, ft)


def _FakeDt(ft):
    """The newt dtype of a PTX float type (for ``D._to_narrow_float``)."""
    return {"f16": lc.float16, "bf16": lc.bfloat16, "f32": lc.float32, "e4m3": lc.float8e4nv,
            "e5m2": lc.float8e5}[ft]


# ---------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------


class Stmt:
    __slots__ = ("kind", "line", "text", "op", "mods", "types", "args", "guard", "names", "rtype")

    def __init__(self, kind, line, text):
        self.kind, self.line, self.text = kind, line, text
        self.op = ""
        self.mods: list[str] = []
        self.types: list[str] = []
        self.args: list = []
        self.guard = None
        self.names: list[str] = []
        self.rtype = ""


class Program:
    def __init__(self, stmts):
        self.stmts = stmts


def _strip_comments(s: str) -> str:
    s = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), s, flags=re.S)
    return re.sub(r"//[^\n]*", "", s)


def _split_args(text: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    res: list = []
    for a in out:
        if a.startswith("{"):
            if not a.endswith("}"):
                raise ValueError(f"unbalanced braces in operand {a!r}")
            res.append([x.strip() for x in a[1:-1].split(",")])
        else:
            res.append(a)
    return res


@functools.lru_cache(maxsize=256)
def parse(asm: str) -> Program:
    src = _strip_comments(asm)
    stmts: list[Stmt] = []
    i, line, n = 0, 1, len(src)
    while i < n:
        ch = src[i]
        if ch == "\n":
            line += 1
            i += 1
            continue
        if ch.isspace():
            i += 1
            continue
        if ch in "{}":
            stmts.append(Stmt("open" if ch == "{" else "close", line, ch))
            i += 1
            continue
        j = src.find(";", i)
        if j < 0:
            raise PtxError("statement without a closing ';'", line, src[i:].split("\n")[0])
        text = src[i:j]
        start_line = line
        line += text.count("\n")
        i = j + 1
        stmts.append(_parse_stmt(" ".join(text.split()), start_line))
    return Program(stmts)


def _parse_stmt(text: str, line: int) -> Stmt:
    if text.endswith(":") or re.match(r"^[A-Za-z_$][\w$]*:", text):
        raise PtxError("labels and branches are outside the interpreter's PTX subset", line, text)
    if text.startswith(".reg"):
        st = Stmt("reg", line, text)
        m = re.match(r"^\.reg\s+(?:\.v\d\s+)?\.(\w+)\s+(.*)$", text)
        if not m or m.group(1) not in _ALL_T:
            raise PtxError("unsupported register declaration", line, text)
        if re.match(r"^\.reg\s+\.v\d", text):
            raise PtxError("vector registers (.v2/.v4) are outside the interpreter's PTX subset", line, text)
        st.rtype = m.group(1)
        for nm in (x.strip() for x in m.group(2).split(",")):
            mm = re.match(r"^([%\w$]+)<(\d+)>$", nm)
            if mm:
                st.names += [f"{mm.group(1)}{k}" for k in range(int(mm.group(2)))]
            elif re.match(r"^[%\w$]+$", nm):
                st.names.append(nm)
            else:
                raise PtxError(f"bad register name {nm!r}", line, text)
        return st
    if text.startswith("."):
        raise PtxError(f"directive {text.split()[0]} is outside the interpreter's PTX subset", line, text)
    st = Stmt("ins", line, text)
    m = re.match(r"^@(!?)([%\w$]+)\s+(.*)$", text)
    if m:
        st.guard = (m.group(1) == "!", m.group(2))
        text = m.group(3)
    parts = text.split(None, 1)
    opc = parts[0].split(".")
    st.op = opc[0]
    for p in opc[1:]:
        (st.types if p in _ALL_T else st.mods).append(p)
    try:
        st.args = _split_args(parts[1]) if len(parts) > 1 else []
    except ValueError as e:
        raise PtxError(str(e), line, st.text) from None
    return st


# ---------------------------------------------------------------------------
# execution
# ---------------------------------------------------------------------------


class _Ctx:
    def __init__(self, shape, device):
        self.shape = shape
        self.device = device
        self.scopes: list[dict] = [{}]  # name -> [width]
        self.vals: dict = {}            # (scope id, name) -> tensor

    def lookup(self, name):
        for k in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[k]:
                return k
        return None


def _imm(tok: str, t: str, st: Stmt, ctx: _Ctx):
    tok = tok.strip()
    m = re.match(r"^0([fF])([0-9a-fA-F]{8})$", tok)
    if m:
        return torch.full(ctx.shape, int(m.group(2), 16), dtype=torch.int64)
    m = re.match(r"^0([dD])([0-9a-fA-F]{16})$", tok)
    if m:
        v = int(m.group(2), 16)
        return torch.full(ctx.shape, v - (1 << 64) if v >= 1 << 63 else v, dtype=torch.int64)
    m = re.match(r"^(-?)(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)[uU]?$", tok)
    if m and not (t in _FLOAT_T and "." in tok):
        v = int(m.group(2), 0) * (-1 if m.group(1) else 1)
        if t in _FLOAT_T:  # an integer literal where a float is expected: its value
            return fencode(torch.full(ctx.shape, float(v), dtype=torch.float64), t)
        w = type_bits(t) if t in _INT_T or t in _VEC_T else 64
        v &= (1 << w) - 1 if w < 64 else (1 << 64) - 1
        if w == 64 and v >= 1 << 63:
            v -= 1 << 64
        return torch.full(ctx.shape, v, dtype=torch.int64)
    if re.match(r"^-?\d+\.\d*(e[+-]?\d+)?$|^-?\d*\.\d+(e[+-]?\d+)?$", tok) and t in _FLOAT_T:
        return fencode(torch.full(ctx.shape, float(tok), dtype=torch.float64), t)
    return None


def _read(ctx: _Ctx, st: Stmt, tok, t: str) -> torch.Tensor:
    """Bits of operand ``tok`` read as type ``t``."""
    if isinstance(tok, list):
        w = type_bits(t) // len(tok)
        acc = torch.zeros(ctx.shape, dtype=torch.int64)
        for k, e in enumerate(tok):
            if e == "_":
                raise PtxError("'_' can only be a destination", st.line, st.text)
            acc = acc | (mask(_read_reg(ctx, st, e), w) << (k * w))
        return acc
    v = _imm(tok, t, st, ctx)
    if v is not None:
        return v
    if tok.startswith("%") and tok.split(".")[0] in ("%tid", "%ntid", "%laneid", "%warpid", "%ctaid", "%nctaid",
                                                      "%clock", "%clock64", "%smid", "%globaltimer"):
        raise PtxError(f"special register {tok} is outside the interpreter's PTX subset", st.line, st.text)
    return _read_reg(ctx, st, tok)


def _read_reg(ctx, st, name):
    k = ctx.lookup(name)
    if k is None:
        raise PtxError(f"undeclared register {name!r}", st.line, st.text)
    v = ctx.vals.get((k, name))
    if v is None:
        raise PtxError(f"register {name!r} is read before it is written", st.line, st.text)
    return v


def _write(ctx: _Ctx, st: Stmt, tok, bits: torch.Tensor, t: str, guard):
    if isinstance(tok, list):
        w = type_bits(t) // len(tok)
        for k, e in enumerate(tok):
            if e != "_":
                _write(ctx, st, e, mask(bits >> (k * w), w), f"b{w}", guard)
        return
    k = ctx.lookup(tok)
    if k is None:
        raise PtxError(f"undeclared register {tok!r} as a destination", st.line, st.text)
    w = ctx.scopes[k][tok]
    bits = mask(bits, w) if w > 1 else (bits != 0).to(torch.int64)
    if guard is not None:
        old = ctx.vals.get((k, tok))
        bits = torch.where(guard, bits, old if old is not None else torch.zeros_like(bits))
    ctx.vals[(k, tok)] = bits


def run(prog: Program, inputs: list, in_widths: list, out_widths: list, shape, device="cpu") -> list:
    """Run ``prog``: ``$0..`` are the outputs (``out_widths`` bits each), then the inputs (bit tensors)."""
    ctx = _Ctx(shape, device)
    names = [f"${i}" for i in range(len(out_widths) + len(inputs))]
    for i, w in enumerate(out_widths):
        ctx.scopes[0][names[i]] = w
    for j, (x, w) in enumerate(zip(inputs, in_widths)):
        nm = names[len(out_widths) + j]
        ctx.scopes[0][nm] = w
        ctx.vals[(0, nm)] = mask(x, w)
    for st in prog.stmts:
        if st.kind == "open":
            ctx.scopes.append({})
            continue
        if st.kind == "close":
            if len(ctx.scopes) == 1:
                raise PtxError("'}' without a matching '{'", st.line, st.text)
            k = len(ctx.scopes) - 1
            for nm in ctx.scopes.pop():
                ctx.vals.pop((k, nm), None)
            continue
        if st.kind == "reg":
            for nm in st.names:
                ctx.scopes[-1][nm] = type_bits(st.rtype)
            continue
        guard = None
        if st.guard is not None:
            neg, p = st.guard
            g = _read_reg(ctx, st, p) != 0
            guard = ~g if neg else g
        fn = _INSTR.get(st.op)
        if fn is None:
            raise PtxError(f"instruction {st.op!r} is outside the interpreter's PTX subset", st.line, st.text)
        try:
            fn(ctx, st, guard)
        except PtxError:
            raise
        except (KeyError, IndexError, ValueError, RuntimeError) as e:
            raise PtxError(f"cannot run this form of {st.op!r} ({type(e).__name__}: {e})", st.line, st.text) \
                from None
    outs = []
    for i in range(len(out_widths)):
        v = ctx.vals.get((0, names[i]))
        if v is None:
            raise PtxError(f"the asm never writes its output ${i}")
        outs.append(v)
    return outs


# ---------------------------------------------------------------------------
# instructions
# ---------------------------------------------------------------------------

_INSTR: dict = {}


def _ins(*names):
    def deco(f):
        for n in names:
            _INSTR[n] = f
        return f
    return deco


def _one_type(st, allowed=None) -> str:
    if len(st.types) != 1 or (allowed is not None and st.types[0] not in allowed):
        raise PtxError(f"unsupported type for {st.op}: .{'.'.join(st.types) or '?'}", st.line, st.text)
    return st.types[0]


_ROUND = {"rn", "rz", "rm", "rp"}


def _check_mods(st, allowed):
    bad = [m for m in st.mods if m not in allowed]
    if bad:
        raise PtxError(f"modifier .{bad[0]} of {st.op} is outside the interpreter's PTX subset", st.line, st.text)


def _fvals(bits, t):
    """Float lanes of a float or float-vector type: list of (tensor, lane type)."""
    if t in _VEC_T:
        e, n = _VEC_T[t]
        w = type_bits(t) // n
        return [(fdecode(mask(bits >> (k * w), w), e), e) for k in range(n)]
    return [(fdecode(bits, t), t)]


def _ftz(x, on, ft):
    if not on:
        return x
    tiny = torch.finfo(_TORCH_F[ft]).tiny
    return torch.where(x.abs() < tiny, torch.zeros_like(x) * x.sign(), x)


def _sat(x, on):
    if not on:
        return x
    return torch.where(x.isnan(), torch.zeros_like(x), x.clamp(0.0, 1.0))


def _float_op(st, t, fn, nargs, ctx, guard):
    """Lane-wise float arithmetic: computed in float64 then rounded once (exact for + - * /, sqrt, fma)."""
    _check_mods(st, {"rn", "ftz", "sat", "approx", "full", "f32"})
    ins = [_fvals(_read(ctx, st, a, t), t) for a in st.args[1:1 + nargs]]
    lanes = []
    for k in range(len(ins[0])):
        ft = ins[0][k][1]
        xs = [_ftz(i[k][0], "ftz" in st.mods, ft).to(torch.float64) for i in ins]
        r = fn(*xs)
        r = _sat(r, "sat" in st.mods)
        r = _ftz(r, "ftz" in st.mods, ft)
        lanes.append(r)
    _write(ctx, st, st.args[0], _fjoin_rounded(lanes, t), t, guard)


def _fjoin_rounded(lanes, t):
    if t in _VEC_T:
        e, n = _VEC_T[t]
        w = type_bits(t) // n
        acc = None
        for k, v in enumerate(lanes):
            b = to_narrow(v, e) << (k * w)
            acc = b if acc is None else acc | b
        return acc
    return to_narrow(lanes[0], t)


def _signed(t):
    return t.startswith("s")


def _ival(bits, t):
    w = type_bits(t)
    return sext(bits, w) if _signed(t) else mask(bits, w)


_FARITH = {
    "add": (2, lambda a, b: a + b), "sub": (2, lambda a, b: a - b), "mul": (2, lambda a, b: a * b),
    "div": (2, lambda a, b: a / b), "min": (2, torch.fmin), "max": (2, torch.fmax),
    "neg": (1, lambda a: -a), "abs": (1, torch.abs), "rcp": (1, lambda a: 1.0 / a), "sqrt": (1, torch.sqrt),
    "rsqrt": (1, torch.rsqrt), "ex2": (1, torch.exp2), "lg2": (1, torch.log2), "sin": (1, torch.sin),
    "cos": (1, torch.cos), "tanh": (1, torch.tanh),
}


def _fma64(a, b, c):
    return D.add_f64_odd(a * b, c)  # a*b is exact in float64 for inputs of up to 26 bits; round to odd once


@_ins("add", "sub", "mul", "div", "min", "max", "neg", "abs", "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos",
      "tanh", "mad", "fma", "rem")
def _arith(ctx, st, guard):
    t = _one_type(st)
    if t in _FLOAT_T or t in _VEC_T:
        if t == "f64" and st.op in ("mul", "fma", "mad", "div", "sqrt", "rcp", "rsqrt") or t == "tf32":
            return _f64_op(ctx, st, t, guard)
        bad = [m for m in st.mods if m in ("rz", "rm", "rp")]
        if bad:
            raise PtxError(f"rounding .{bad[0]} of {st.op}.{t} is outside the interpreter's subset (only .rn)",
                           st.line, st.text)
        if st.op in ("fma", "mad"):
            return _float_op(st, t, _fma64, 3, ctx, guard)
        if st.op == "rem":
            raise PtxError("rem is integer-only", st.line, st.text)
        n, fn = _FARITH[st.op]
        return _float_op(st, t, fn, n, ctx, guard)
    if t not in _INT_T:
        raise PtxError(f"unsupported type .{t} for {st.op}", st.line, st.text)
    _check_mods(st, {"lo", "hi", "wide", "sat"} if st.op in ("mul", "mad", "add", "sub") else set())
    w = type_bits(t)
    if "sat" in st.mods and not (t == "s32" and st.op in ("add", "sub")):
        raise PtxError(".sat on integers is supported for add/sub.s32 only", st.line, st.text)
    a = [_ival(_read(ctx, st, x, t), t) for x in st.args[1:]]
    op = st.op
    rt = t
    if op in ("mul", "mad"):
        if "wide" in st.mods:
            rt = ("s" if _signed(t) else "u") + str(2 * w)
            if w > 32:
                raise PtxError("mul.wide of 64-bit values", st.line, st.text)
            r = a[0] * a[1]
        elif "hi" in st.mods:
            if w == 64:
                r = D.mulhi_s64(a[0], a[1]) if _signed(t) else D.mulhi_u64(a[0], a[1])
            else:
                r = (a[0] * a[1]) >> w
        else:
            r = a[0] * a[1]
        if op == "mad":
            c = _ival(_read(ctx, st, st.args[3], rt), rt)
            r = r + c
    elif op == "add":
        r = a[0] + a[1]
    elif op == "sub":
        r = a[0] - a[1]
    elif op in ("div", "rem"):
        if w == 64 and not _signed(t):
            q = D.udiv64(a[0], a[1])
        else:
            q = torch.where(a[1] == 0, torch.full_like(a[0], -1), torch.div(a[0], torch.where(a[1] == 0, 1, a[1]),
                                                                             rounding_mode="trunc"))
        r = q if op == "div" else a[0] - q * a[1]
    elif op in ("min", "max"):
        if w == 64 and not _signed(t):
            ka, kb = D.ucmp_key(a[0]), D.ucmp_key(a[1])
            r = torch.where((ka < kb) == (op == "min"), a[0], a[1])
        else:
            r = torch.minimum(a[0], a[1]) if op == "min" else torch.maximum(a[0], a[1])
    elif op == "neg":
        r = -a[0]
    elif op == "abs":
        r = a[0].abs()
    else:
        raise PtxError(f"{op}.{t} is outside the interpreter's PTX subset", st.line, st.text)
    if "sat" in st.mods:
        r = r.clamp(-(1 << 31), (1 << 31) - 1)
    _write(ctx, st, st.args[0], mask(r, type_bits(rt)), rt, guard)


def _f64_op(ctx, st, t, guard):
    if t == "tf32":
        raise PtxError("tf32 arithmetic is outside the interpreter's PTX subset", st.line, st.text)
    _check_mods(st, {"rn", "approx", "ftz", "full"})
    a = [fdecode(_read(ctx, st, x, t), t) for x in st.args[1:]]
    if st.op in ("fma", "mad"):
        raise PtxError("fma.rn.f64 needs more than float64 precision to emulate exactly", st.line, st.text)
    r = {"mul": lambda: a[0] * a[1], "div": lambda: a[0] / a[1], "sqrt": lambda: torch.sqrt(a[0]),
         "rcp": lambda: 1.0 / a[0], "rsqrt": lambda: torch.rsqrt(a[0])}[st.op]()
    _write(ctx, st, st.args[0], fencode(r, t), t, guard)


@_ins("mov")
def _mov(ctx, st, guard):
    t = _one_type(st)
    _check_mods(st, set())
    _write(ctx, st, st.args[0], _read(ctx, st, st.args[1], t), t, guard)


@_ins("and", "or", "xor", "not", "cnot")
def _logic(ctx, st, guard):
    t = _one_type(st, {"b16", "b32", "b64", "pred", "b8"})
    a = [_read(ctx, st, x, t) for x in st.args[1:]]
    w = type_bits(t)
    if st.op == "and":
        r = a[0] & a[1]
    elif st.op == "or":
        r = a[0] | a[1]
    elif st.op == "xor":
        r = a[0] ^ a[1]
    elif st.op == "not":
        r = ~a[0] if w > 1 else 1 - a[0]
    else:
        r = (a[0] == 0).to(torch.int64)
    _write(ctx, st, st.args[0], mask(r, w), t, guard)


@_ins("shl", "shr")
def _shift(ctx, st, guard):
    t = _one_type(st)
    w = type_bits(t)
    a = _read(ctx, st, st.args[1], t)
    s = mask(_read(ctx, st, st.args[2], "u32"), 32).clamp(max=w)
    if st.op == "shl":
        r = torch.where(s >= w, torch.zeros_like(a), a << s.clamp(max=63))
    elif _signed(t):
        r = sext(a, w) >> s.clamp(max=63)
    else:
        r = torch.where(s >= w, torch.zeros_like(a), D.lshr64(a, s.clamp(max=63)) if w == 64 else a >> s)
    _write(ctx, st, st.args[0], mask(r, w), t, guard)


@_ins("shf")
def _shf(ctx, st, guard):
    _one_type(st, {"b32"})
    _check_mods(st, {"l", "r", "wrap", "clamp"})
    lo, hi = (_read(ctx, st, x, "b32") for x in st.args[1:3])
    s = mask(_read(ctx, st, st.args[3], "u32"), 32)
    s = s & 31 if "wrap" in st.mods else s.clamp(max=32)
    both = (hi << 32) | lo
    if "l" in st.mods:
        r = mask(D.lshr64(both << s, 32), 32)
    else:
        r = mask(D.lshr64(both, s), 32)
    _write(ctx, st, st.args[0], r, "b32", guard)


@_ins("prmt")
def _prmt(ctx, st, guard):
    _one_type(st, {"b32"})
    if st.mods:
        raise PtxError(f"prmt mode .{st.mods[0]} is outside the interpreter's subset (the default mode only)",
                       st.line, st.text)
    a, b, c = (_read(ctx, st, x, "b32") for x in st.args[1:4])
    src = (b << 32) | a
    r = torch.zeros_like(a)
    for k in range(4):
        sel = (c >> (4 * k)) & 0xF
        byte = D.lshr64(src, (sel & 7) * 8) & 0xFF
        byte = torch.where((sel & 8) != 0, torch.where((byte & 0x80) != 0, 0xFF, 0), byte)
        r = r | (byte << (8 * k))
    _write(ctx, st, st.args[0], r, "b32", guard)


@_ins("lop3")
def _lop3(ctx, st, guard):
    _one_type(st, {"b32"})
    a, b, c = (_read(ctx, st, x, "b32") for x in st.args[1:4])
    lut = _imm(st.args[4], "b32", st, ctx)
    if lut is None:
        raise PtxError("lop3 needs an immediate truth table", st.line, st.text)
    lut_v = int(lut.flatten()[0]) if lut.numel() else 0
    r = torch.zeros_like(a)
    m = 0xFFFFFFFF
    for k in range(8):
        if lut_v >> k & 1:
            ta = a if k & 4 else (~a & m)
            tb = b if k & 2 else (~b & m)
            tc = c if k & 1 else (~c & m)
            r = r | (ta & tb & tc)
    _write(ctx, st, st.args[0], r, "b32", guard)


@_ins("selp")
def _selp(ctx, st, guard):
    t = _one_type(st)
    a, b = (_read(ctx, st, x, t) for x in st.args[1:3])
    p = _read_reg(ctx, st, st.args[3]) != 0
    _write(ctx, st, st.args[0], torch.where(p, a, b), t, guard)


_CMP_I = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
          "lo": torch.lt, "ls": torch.le, "hi": torch.gt, "hs": torch.ge}


@_ins("setp")
def _setp(ctx, st, guard):
    t = _one_type(st)
    cmp = [m for m in st.mods if m not in ("ftz",)]
    if len(cmp) != 1:
        raise PtxError("setp with a boolean combine (.and/.or/.xor) or without a comparison is outside the subset",
                       st.line, st.text)
    c = cmp[0]
    if isinstance(st.args[0], str) and "|" in st.args[0]:
        raise PtxError("setp with two destinations (p|q) is outside the subset", st.line, st.text)
    a, b = (_read(ctx, st, x, t) for x in st.args[1:3])
    if t in _FLOAT_T:
        x, y = fdecode(a, t), fdecode(b, t)
        nan = x.isnan() | y.isnan()
        if c == "num":
            r = ~nan
        elif c == "nan":
            r = nan
        elif c.endswith("u") and c[:-1] in _CMP_I:
            r = _CMP_I[c[:-1]](x, y) | nan
        elif c in ("eq", "ne", "lt", "le", "gt", "ge"):
            r = _CMP_I[c](x, y) & ~nan
        else:
            raise PtxError(f"comparison .{c} on .{t}", st.line, st.text)
    else:
        x, y = _ival(a, t), _ival(b, t)
        if type_bits(t) == 64 and not _signed(t):
            x, y = D.ucmp_key(x), D.ucmp_key(y)
        if c not in _CMP_I:
            raise PtxError(f"comparison .{c} on .{t}", st.line, st.text)
        r = _CMP_I[c](x, y)
    _write(ctx, st, st.args[0], r.to(torch.int64), "pred", guard)


_FRND = {"rni": "round", "rzi": "trunc", "rmi": "floor", "rpi": "ceil"}


@_ins("cvt")
def _cvt(ctx, st, guard):
    if len(st.types) != 2:
        raise PtxError("cvt needs a destination and a source type", st.line, st.text)
    dt, at = st.types
    _check_mods(st, {"rn", "rz", "rni", "rzi", "rmi", "rpi", "ftz", "sat", "satfinite", "relu"})
    rnd = next((m for m in st.mods if m in _ROUND), "rn")
    if rnd in ("rm", "rp"):
        raise PtxError(f"cvt rounding .{rnd} is outside the interpreter's subset (.rn, .rz)", st.line, st.text)
    sat = "satfinite" in st.mods
    if "relu" in st.mods:
        raise PtxError("cvt .relu is outside the interpreter's subset", st.line, st.text)
    if dt in _VEC_T and at in ("f32",):  # two f32 -> a pair: the first source goes to the upper half
        e, _ = _VEC_T[dt]
        hi, lo = (fdecode(_read(ctx, st, x, "f32"), "f32") for x in st.args[1:3])
        w = type_bits(dt) // 2
        r = (to_narrow(hi.to(torch.float64), e, rnd, sat) << w) | to_narrow(lo.to(torch.float64), e, rnd, sat)
        return _write(ctx, st, st.args[0], r, f"b{2 * w}", guard)
    if dt in _VEC_T and at in _VEC_T:  # pair -> pair (e4m3x2 <-> f16x2): lane by lane, low lane stays low
        ins = _fvals(_read(ctx, st, st.args[1], at), at)
        e, _ = _VEC_T[dt]
        w = type_bits(dt) // 2
        r = None
        for k, (v, _lt) in enumerate(ins):
            b = to_narrow(v.to(torch.float64), e, rnd, sat) << (k * w)
            r = b if r is None else r | b
        return _write(ctx, st, st.args[0], r, f"b{2 * w}", guard)
    if dt in _VEC_T or at in _VEC_T:
        raise PtxError(f"cvt.{dt}.{at} is outside the interpreter's subset", st.line, st.text)
    src = _read(ctx, st, st.args[1], at)
    if at in _FLOAT_T:
        v = _ftz(fdecode(src, at), "ftz" in st.mods, at).to(torch.float64)
        if dt in _FLOAT_T:
            if "sat" in st.mods:
                v = _sat(v, True)
            r = to_narrow(v, dt, rnd if type_bits(dt) < type_bits(at) else "rn")
        else:  # float -> int: round as asked (default: to zero for .rzi), saturate, NaN -> 0
            mode = next((_FRND[m] for m in st.mods if m in _FRND), None)
            if mode is None:
                raise PtxError("cvt from float to int needs .rni/.rzi/.rmi/.rpi", st.line, st.text)
            v = getattr(torch, mode)(v) if mode != "round" else torch.round(v)
            w = type_bits(dt)
            lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if _signed(dt) else (0, (1 << w) - 1)
            v = torch.where(v.isnan(), torch.zeros_like(v), v.clamp(float(lo), float(hi)))
            if w == 64 and not _signed(dt):
                big = v >= 2.0 ** 63
                iv = torch.where(big, (v - 2.0 ** 64).to(torch.int64), v.to(torch.int64))
                iv = torch.where(v >= 2.0 ** 64 - 2048, torch.full_like(iv, -1), iv)
            else:
                iv = v.clamp(-(2.0 ** 63), 2.0 ** 63 - 1024).to(torch.int64)
            r = mask(iv, w)
        return _write(ctx, st, st.args[0], r, dt, guard)
    iv = _ival(src, at)
    if dt in _FLOAT_T:  # int -> float
        if rnd == "rz":
            raise PtxError("cvt.rz from int to float is outside the interpreter's subset", st.line, st.text)
        if type_bits(at) == 64:
            fv = D._u64_to_f64(iv) if not _signed(at) else iv.to(torch.float64)
            if dt != "f64":  # two roundings through f64 can differ from one: go through round to odd
                fv = D.f64_to_f32_odd(fv) if dt == "f32" else fv
        else:
            fv = iv.to(torch.float64)
        return _write(ctx, st, st.args[0], to_narrow(fv, dt, "rn"), dt, guard)
    w = type_bits(dt)
    if "sat" in st.mods:
        lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if _signed(dt) else (0, (1 << w) - 1)
        iv = iv.clamp(lo, hi)
    _write(ctx, st, st.args[0], mask(iv, w), dt, guard)


# ---------------------------------------------------------------------------
# nl.inline_asm_elementwise on interpreter values (and on plain torch tensors, for deuteron's kernel.ref)
# ---------------------------------------------------------------------------

_REG_BITS = {"h": 16, "r": 32, "l": 64, "f": 32, "d": 64}
_SINT_OF = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}


def _to_bits(x, dt):
    """Bit patterns (int64, zero-extended) of interpreter values of newt dtype ``dt``."""
    w = dt.primitive_bitwidth
    if dt.is_floating():
        return mask(D.to_storage(x, dt).contiguous().view(_SINT_OF[w]).to(torch.int64), w)
    return mask(x.to(torch.int64), w)


def _from_bits(bits, dt):
    """Interpreter values of newt dtype ``dt`` from zero-extended bit patterns."""
    w = dt.primitive_bitwidth
    if dt.is_floating():
        return D.from_storage(sext(bits, w).to(_SINT_OF[w]).view(D.storage_dtype(dt)), dt)
    if dt.is_int_signed():
        bits = sext(bits, w)
    return bits.to(D.rep_dtype(dt))


def run_elementwise(asm: str, constraints: str, pack: int, args: list, in_types: list, out_types: list,
                    shape: tuple) -> list:
    """Run ``asm`` on interpreter values ``args`` (newt dtypes ``in_types``, leading program dimension, block
    ``shape``), ``pack`` consecutive row-major elements per invocation; the results, of ``out_types``.

    Registers are formed as Triton does: values under 32 bits share a register (four of 8 bits, two of 16, at
    most ``pack``), the lower element in the lower bits; a value alone in a wider register is extended the way
    C converts it (signed integers sign-extend), as the CUDA lowering does.
    """
    prog = parse(asm)
    letters = [c.strip().lstrip("=") for c in constraints.split(",")]
    if any(c not in _REG_BITS for c in letters):
        raise PtxError(f"unknown constraint in {constraints!r} (one of h, r, l, f, d; '=' before an output)")
    bits_of = [_REG_BITS[c] for c in letters]
    xs = list(torch.broadcast_tensors(*args)) if len(args) > 1 else list(args)
    p = xs[0].shape[0] if xs else 1
    n = 1
    for d in shape:
        n *= d
    groups = n // pack
    n_out = sum(pack // asm_elems_per_reg(dt.primitive_bitwidth, pack) for dt in out_types)
    n_in = sum(pack // asm_elems_per_reg(dt.primitive_bitwidth, pack) for dt in in_types)
    n_cons_out = sum(1 for c in constraints.split(",") if c.strip().startswith("="))
    if n_cons_out != n_out or len(letters) - n_cons_out != n_in:
        raise PtxError(f"{n_cons_out} output and {len(letters) - n_cons_out} input constraints, but the results and "
                       f"arguments with pack={pack} need {n_out} output and {n_in} input registers")
    regs, widths = [], []
    k = n_out
    for x, dt in zip(xs, in_types):
        w = dt.primitive_bitwidth
        per = asm_elems_per_reg(w, pack)
        bits = _to_bits(x.reshape((x.shape[0],) + tuple(shape)), dt).reshape(p, groups, pack)
        for j in range(pack // per):
            acc = None
            for e in range(per):
                b = bits[:, :, j * per + e]
                if per == 1 and dt.is_int() and dt.is_int_signed() and w < bits_of[k]:
                    b = mask(sext(b, w), bits_of[k])
                b = b << (e * w)
                acc = b if acc is None else acc | b
            regs.append(acc)
            widths.append(bits_of[k])
            k += 1
    outs = run(prog, regs, widths, bits_of[:n_out], (p, groups))
    res, r = [], 0
    for dt in out_types:
        w = dt.primitive_bitwidth
        per = asm_elems_per_reg(w, pack)
        lanes = []
        for _j in range(pack // per):
            for e in range(per):
                lanes.append(mask(outs[r] >> (e * w), w))
            r += 1
        res.append(_from_bits(torch.stack(lanes, dim=-1).reshape((p,) + tuple(shape)), dt))
    return res


def _newt_dtype(td):
    table = {torch.float16: lc.float16, torch.bfloat16: lc.bfloat16, torch.float32: lc.float32,
             torch.float64: lc.float64, torch.int8: lc.int8, torch.int16: lc.int16, torch.int32: lc.int32,
             torch.int64: lc.int64, torch.uint8: lc.uint8, torch.float8_e4m3fn: lc.float8e4nv,
             torch.float8_e5m2: lc.float8e5}
    for name in ("uint16", "uint32", "uint64"):
        if hasattr(torch, name):
            table[getattr(torch, name)] = getattr(lc, name)
    if td not in table:
        raise PtxError(f"dtype {td} cannot be an inline asm operand")
    return table[td]


def inline_asm_torch(asm: str, constraints: str, args: list, dtypes: list, pack: int) -> list:
    """``nl.inline_asm_elementwise`` on plain torch tensors (any shape; Python numbers are int32 / fp32 like
    Triton's): the results as torch tensors of ``dtypes``.  Raises ``PtxError`` outside the PTX subset."""
    ts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            ts.append(a)
        elif isinstance(a, bool) or not isinstance(a, (int, float)):
            raise PtxError(f"an inline asm argument must be a tensor or a number, not {type(a).__name__}")
        else:
            ts.append(torch.tensor(a, dtype=torch.int32 if isinstance(a, int) else torch.float32))
    shape = tuple(torch.broadcast_shapes(*(t.shape for t in ts)))
    dev = ts[0].device if ts else torch.device("cpu")
    in_t = [_newt_dtype(t.dtype) for t in ts]
    vals = []
    for t, dt in zip(ts, in_t):
        v = t.to("cpu").expand(shape).reshape((1,) + shape)
        if dt.name in ("uint16", "uint32", "uint64"):
            v = v.to(torch.int64) & ((1 << dt.primitive_bitwidth) - 1 if dt.primitive_bitwidth < 64 else -1)
        vals.append(v)
    out_t = [_newt_dtype(d) for d in dtypes]
    n = 1
    for d in shape:
        n *= d
    if pack < 1 or n % pack:
        raise PtxError(f"pack={pack} does not divide the {n} elements of the arguments")
    res = run_elementwise(asm, constraints, pack, vals, in_t, out_t, shape)
    return [r.reshape(shape).to(d).to(dev) for r, d in zip(res, dtypes)]
