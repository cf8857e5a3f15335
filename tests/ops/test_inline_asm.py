"""nl.inline_asm_elementwise: the interpreter's PTX evaluator against torch, per instruction family and for
pack = 1, 2, 4; on a GPU (``backend`` cuda, skipped without one) the same kernels run the real asm."""

from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from asm_kernels import asm1, asm2, asm3, asm_2d, asm_scalar_broadcast, asm_two_results, mul_f32x2, unknown_instruction

N = 256
F32, F16, BF16, I32, U32, I64 = torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.uint32, torch.int64


def _rand(dt, n=N, lo=-1000, hi=1000):
    if dt.is_floating_point:
        x = torch.randn(n) * 3
        x[:4] = torch.tensor([0.0, -0.0, 1.5, -2.25])
        return x.to(dt)
    if dt == torch.uint8:
        return torch.randint(0, 256, (n,), dtype=torch.int32).to(torch.uint8)
    return torch.randint(lo, hi, (n,), dtype=torch.int64).to(dt)


def _u32(x):
    return x.to(torch.int64) & 0xFFFFFFFF


def _rn32(f):
    """A float64 computation rounded to fp32 once."""
    return lambda *a: f(*(t.double() for t in a)).float()


# (asm, constraints, pack, input dtypes, output dtype, reference)
F32_CASES = [
    ("add.f32 $0, $1, $2;", "=f,f,f", [F32, F32], F32, lambda a, b: a + b),
    ("sub.rn.f32 $0, $1, $2;", "=f,f,f", [F32, F32], F32, lambda a, b: a - b),
    ("mul.rn.f32 $0, $1, $2;", "=f,f,f", [F32, F32], F32, lambda a, b: a * b),
    ("div.rn.f32 $0, $1, $2;", "=f,f,f", [F32, F32], F32, _rn32(lambda a, b: a / b)),
    ("min.f32 $0, $1, $2;", "=f,f,f", [F32, F32], F32, torch.fmin),
    ("max.f32 $0, $1, $2;", "=f,f,f", [F32, F32], F32, torch.fmax),
    ("neg.f32 $0, $1;", "=f,f", [F32], F32, torch.neg),
    ("abs.f32 $0, $1;", "=f,f", [F32], F32, torch.abs),
    ("sqrt.rn.f32 $0, $1;", "=f,f", [F32], F32, _rn32(torch.sqrt)),
    ("rcp.rn.f32 $0, $1;", "=f,f", [F32], F32, _rn32(lambda a: 1 / a)),
    ("fma.rn.f32 $0, $1, $2, $3;", "=f,f,f,f", [F32, F32, F32], F32, None),  # reference: exact in float64
    ("add.f64 $0, $1, $2;", "=d,d,d", [torch.float64, torch.float64], torch.float64, lambda a, b: a + b),
    ("mul.rn.f16 $0, $1, $2;", "=h,h,h", [F16, F16], F16, lambda a, b: a * b),
    ("add.rn.bf16 $0, $1, $2;", "=h,h,h", [BF16, BF16], BF16, lambda a, b: a + b),
    ("add.sat.f32 $0, $1, $2;", "=f,f,f", [F32, F32], F32, lambda a, b: (a + b).clamp(0, 1)),
]

INT_CASES = [
    ("add.s32 $0, $1, $2;", "=r,r,r", [I32, I32], I32, lambda a, b: a + b),
    ("sub.u32 $0, $1, $2;", "=r,r,r", [I32, I32], I32, lambda a, b: a - b),
    ("mul.lo.s32 $0, $1, $2;", "=r,r,r", [I32, I32], I32, lambda a, b: a * b),
    ("mul.hi.s32 $0, $1, $2;", "=r,r,r", [I32, I32], I32, lambda a, b: ((a.long() * b.long()) >> 32).int()),
    ("mul.hi.u32 $0, $1, $2;", "=r,r,r", [I32, I32], I32,
     lambda a, b: ((_u32(a) * _u32(b)) >> 32).to(torch.int32)),
    ("div.s32 $0, $1, $2;", "=r,r,r", [I32, I32], I32,
     lambda a, b: torch.div(a, torch.where(b == 0, 1, b), rounding_mode="trunc")),
    ("rem.s32 $0, $1, $2;", "=r,r,r", [I32, I32], I32,
     lambda a, b: torch.fmod(a, torch.where(b == 0, 1, b))),
    ("min.s32 $0, $1, $2;", "=r,r,r", [I32, I32], I32, torch.minimum),
    ("max.u32 $0, $1, $2;", "=r,r,r", [I32, I32], I32,
     lambda a, b: torch.maximum(_u32(a), _u32(b)).to(torch.int32)),
    ("and.b32 $0, $1, $2;", "=r,r,r", [I32, I32], I32, torch.bitwise_and),
    ("or.b32 $0, $1, $2;", "=r,r,r", [I32, I32], I32, torch.bitwise_or),
    ("xor.b32 $0, $1, $2;", "=r,r,r", [I32, I32], I32, torch.bitwise_xor),
    ("not.b32 $0, $1;", "=r,r", [I32], I32, torch.bitwise_not),
    ("shl.b32 $0, $1, 3;", "=r,r", [I32], I32, lambda a: a << 3),
    ("shr.s32 $0, $1, 2;", "=r,r", [I32], I32, lambda a: a >> 2),
    ("shr.u32 $0, $1, 2;", "=r,r", [I32], I32, lambda a: (_u32(a) >> 2).to(torch.int32)),
    ("shf.l.wrap.b32 $0, $1, $2, 8;", "=r,r,r", [I32, I32], I32,
     lambda lo, hi: ((((_u32(hi) << 32) | _u32(lo)) << 8) >> 32).to(torch.int32)),
    ("shf.r.clamp.b32 $0, $1, $2, 4;", "=r,r,r", [I32, I32], I32,
     lambda lo, hi: ((((_u32(hi) << 32) | _u32(lo)) >> 4) & 0xFFFFFFFF).to(torch.int32)),
    ("lop3.b32 $0, $1, $2, $3, 0xE8;", "=r,r,r,r", [I32, I32, I32], I32,  # majority(a, b, c)
     lambda a, b, c: (a & b) | (a & c) | (b & c)),
    ("prmt.b32 $0, $1, $2, 0x5140;", "=r,r,r", [I32, I32], I32,  # bytes a0 b0 a1 b1 interleaved
     lambda a, b: (_u32(a) & 0xFF | (_u32(b) & 0xFF) << 8 | ((_u32(a) >> 8) & 0xFF) << 16
                   | ((_u32(b) >> 8) & 0xFF) << 24).to(torch.int32)),
    ("{ .reg .pred p; setp.gt.s32 p, $1, $2; selp.s32 $0, $1, $2, p; }", "=r,r,r", [I32, I32], I32,
     torch.maximum),
    ("{ .reg .pred p; setp.lo.u32 p, $1, $2; @p mov.b32 $0, 1; @!p mov.b32 $0, 2; }", "=r,r,r", [I32, I32], I32,
     lambda a, b: torch.where(_u32(a) < _u32(b), 1, 2).to(torch.int32)),
    ("mul.wide.s32 $0, $1, $2;", "=l,r,r", [I32, I32], I64, lambda a, b: a.long() * b.long()),
    ("add.s64 $0, $1, $2;", "=l,l,l", [I64, I64], I64, lambda a, b: a + b),
    ("mad.lo.s32 $0, $1, $2, $3;", "=r,r,r,r", [I32, I32, I32], I32, lambda a, b, c: a * b + c),
    ("add.sat.s32 $0, $1, $2;", "=r,r,r", [I32, I32], I32,
     lambda a, b: (a.long() + b.long()).clamp(-2 ** 31, 2 ** 31 - 1).int()),
]

CVT_CASES = [
    ("cvt.rn.f16.f32 $0, $1;", "=h,f", [F32], F16, lambda a: a.half()),
    ("cvt.f32.f16 $0, $1;", "=f,h", [F16], F32, lambda a: a.float()),
    ("cvt.rn.bf16.f32 $0, $1;", "=h,f", [F32], BF16, lambda a: a.bfloat16()),
    ("cvt.rzi.s32.f32 $0, $1;", "=r,f", [F32], I32, lambda a: a.trunc().int()),
    ("cvt.rni.s32.f32 $0, $1;", "=r,f", [F32], I32, lambda a: torch.round(a).int()),
    ("cvt.rmi.s32.f32 $0, $1;", "=r,f", [F32], I32, lambda a: torch.floor(a).int()),
    ("cvt.rn.f32.s32 $0, $1;", "=f,r", [I32], F32, lambda a: a.float()),
    ("cvt.s64.s32 $0, $1;", "=l,r", [I32], I64, lambda a: a.long()),
    ("cvt.u16.u32 $0, $1;", "=h,r", [I32], torch.int16, lambda a: (_u32(a) & 0xFFFF).to(torch.int16)),
    ("cvt.f64.f32 $0, $1;", "=d,f", [F32], torch.float64, lambda a: a.double()),
]


def _run(backend, case, pack=1):
    asm, cons, ins, out, ref = case
    xs = [_rand(d) for d in ins]
    if asm.startswith(("div", "rem", "rcp")):  # no zero divisors: the hardware's x/0 is its own story
        xs[-1] = torch.where(xs[-1] == 0, torch.ones_like(xs[-1]), xs[-1])
    if asm.startswith("sqrt"):
        xs[0] = xs[0].abs()
    kernel = {1: asm1, 2: asm2, 3: asm3}[len(ins)]
    o = backend.zeros(N, dtype=out)
    backend.launch(kernel, (1,), *[backend.put(x) for x in xs], o, ASM=asm, CONS=cons, PACK=pack, N=N)
    got = backend.get(o)
    if ref is None:  # fma: a*b exact in float64, then one rounding of the sum (round to odd first)
        from newt.interpreter.dtypes import add_f64_odd
        want = add_f64_odd(xs[0].double() * xs[1].double(), xs[2].double()).float()
    else:
        want = ref(*xs).to(out)
    return got, want


@pytest.mark.parametrize("case", F32_CASES, ids=lambda c: c[0].split()[0])
def test_float_arithmetic(backend, case):
    got, want = _run(backend, case)
    assert torch.equal(got, want), (got[:8], want[:8])


@pytest.mark.parametrize("case", INT_CASES, ids=lambda c: c[0].split(" $")[0][:40])
def test_integer_and_logic(backend, case):
    got, want = _run(backend, case)
    assert torch.equal(got, want), (got[:8], want[:8])


@pytest.mark.parametrize("case", CVT_CASES, ids=lambda c: c[0].split()[0])
def test_cvt(backend, case):
    got, want = _run(backend, case)
    assert torch.equal(got, want), (got[:8], want[:8])


def test_cvt_rz_to_f16_rounds_toward_zero(backend):
    x = torch.tensor([1.0 + 2.0 ** -11 + 2.0 ** -20, -(1.0 + 2.0 ** -11 + 2.0 ** -20), 65519.0, 1e-8] * 64)
    o = backend.zeros(N, dtype=F16)
    backend.launch(asm1, (1,), backend.put(x), o, ASM="cvt.rz.f16.f32 $0, $1;", CONS="=h,f", PACK=1, N=N)
    got = backend.get(o)[:4].float().tolist()
    assert got == [1.0, -1.0, 65504.0, 0.0]


@pytest.mark.parametrize("pack", [2, 4])
def test_packed_f16x2(backend, pack):
    """pack=2: two fp16 in one b32 register per operand; pack=4: two registers each."""
    x, y = _rand(F16), _rand(F16)
    regs = pack // 2
    cons = ",".join(["=r"] * regs + ["r"] * 2 * regs)
    asm = " ".join(f"add.f16x2 ${k}, ${regs + k}, ${2 * regs + k};" for k in range(regs))
    o = backend.zeros(N, dtype=F16)
    backend.launch(asm2, (1,), *backend.put(x, y), o, ASM=asm, CONS=cons, PACK=pack, N=N)
    assert torch.equal(backend.get(o), x + y)


def test_pack4_fp32_one_register_each(backend):
    x = _rand(F32)
    asm = "mul.f32 $0, $4, 0f40000000; mul.f32 $1, $5, 0f40400000; mul.f32 $2, $6, 0f40800000; " \
          "mul.f32 $3, $7, 0f40A00000;"
    o = backend.zeros(N, dtype=F32)
    backend.launch(asm1, (1,), backend.put(x), o, ASM=asm, CONS="=f,=f,=f,=f,f,f,f,f", PACK=4, N=N)
    want = x * torch.tensor([2.0, 3.0, 4.0, 5.0]).repeat(N // 4)
    assert torch.equal(backend.get(o), want)


def test_pack4_bytes_in_one_register_2d(backend):
    x = _rand(torch.uint8, 16 * 32).reshape(16, 32)
    o = backend.zeros(16, 32, dtype=torch.uint8)
    backend.launch(asm_2d, (1,), backend.put(x), o, M=16, N=32)
    want = x.reshape(-1, 4).flip(-1).reshape(16, 32)
    assert torch.equal(backend.get(o), want)


def test_pack2_int8_share_an_h_register(backend):
    x = _rand(torch.int8, lo=-128, hi=128)
    # two int8 in a b16: swap them (rotate by 8)
    asm = "{ .reg .b16 lo, hi; .reg .b32 w; cvt.u32.u16 w, $1; shr.b32 w, w, 8; cvt.u16.u32 lo, w; " \
          "shl.b16 hi, $1, 8; or.b16 $0, lo, hi; }"
    o = backend.zeros(N, dtype=torch.int8)
    backend.launch(asm1, (1,), backend.put(x), o, ASM=asm, CONS="=h,h", PACK=2, N=N)
    assert torch.equal(backend.get(o), x.reshape(-1, 2).flip(-1).reshape(-1))


def test_e4m3x2_to_f16x2_and_back(backend):
    """cvt.rn.f16x2.e4m3x2 (the low byte to the low half) and cvt.rn.satfinite.e4m3x2.f16x2."""
    x = _rand(torch.uint8)
    asm = ("{ .reg .b16 lo, hi, bytes, back; .reg .b32 h2; mov.b16 bytes, $1; cvt.rn.f16x2.e4m3x2 h2, bytes; "
           "cvt.rn.satfinite.e4m3x2.f16x2 back, h2; mov.b16 $0, back; }")
    o = backend.zeros(N, dtype=torch.uint8)
    backend.launch(asm1, (1,), backend.put(x), o, ASM=asm, CONS="=h,h", PACK=2, N=N)
    fin = ~x.view(torch.float8_e4m3fn).float().isnan()
    assert torch.equal(backend.get(o)[fin], x[fin])  # every finite e4m3 survives the round trip
    # the decoded values themselves
    asm = ("{ .reg .b16 lo, hi; .reg .b32 h2; cvt.rn.f16x2.e4m3x2 h2, $2; mov.b32 {lo, hi}, h2; "
           "cvt.f32.f16 $0, lo; cvt.f32.f16 $1, hi; }")
    o = backend.zeros(N, dtype=F32)
    backend.launch(asm1, (1,), backend.put(x), o, ASM=asm, CONS="=f,=f,h", PACK=2, N=N)
    want = x.view(torch.float8_e4m3fn).float()
    got = backend.get(o)
    assert torch.equal(got[fin], want[fin]) and got[~fin].isnan().all()


def test_nvfp4_e4m3_scale_decode(backend):
    """Helion's nvfp4_gemv ``_e4m3_byte_to_f32``: one byte in an r register, pack=1."""
    x = _rand(torch.uint8)
    asm = """
        {
          .reg .b16 sc, scale_lo, scale_hi;
          .reg .b32 scale_h2;
          mov.b32 {sc, _}, $1;
          cvt.rn.f16x2.e4m3x2 scale_h2, sc;
          mov.b32 {scale_lo, scale_hi}, scale_h2;
          cvt.f32.f16 $0, scale_lo;
        }
        """
    o = backend.zeros(N, dtype=F32)
    backend.launch(asm1, (1,), backend.put(x), o, ASM=asm, CONS="=f,r", PACK=1, N=N)
    want = x.view(torch.float8_e4m3fn).float()
    got = backend.get(o)
    fin = ~want.isnan()
    assert torch.equal(got[fin], want[fin]) and got[~fin].isnan().all()


def test_cvt_f32_pair_to_f16x2_puts_the_first_source_high(backend):
    x = _rand(F32)
    asm = "{ .reg .b32 h2; .reg .b16 lo, hi; cvt.rn.f16x2.f32 h2, $1, $2; mov.b32 {lo, hi}, h2; " \
          "cvt.f32.f16 $0, hi; }"
    y = _rand(F32)
    o = backend.zeros(N, dtype=F32)
    backend.launch(asm2, (1,), *backend.put(x, y), o, ASM=asm, CONS="=f,f,f", PACK=1, N=N)
    assert torch.equal(backend.get(o), x.half().float())


def test_two_results(backend):
    x = _rand(F32)
    a, b = backend.zeros(N, dtype=F32), backend.zeros(N, dtype=I32)
    backend.launch(asm_two_results, (1,), backend.put(x), a, b, N=N)
    assert torch.equal(backend.get(a), x.abs())
    assert torch.equal(backend.get(b), (x < 0).int())


def test_scalar_argument_broadcasts(backend):
    x = _rand(I32)
    o = backend.zeros(N, dtype=I32)
    backend.launch(asm_scalar_broadcast, (1,), backend.put(x), o, 5, N=N)
    assert torch.equal(backend.get(o), x * 5 + 7)


def test_helion_mul_f32x2_runs_in_the_interpreter():
    from newt.runtime.interpret import launch_jit
    x, y = _rand(F32), _rand(F32)
    o = torch.zeros(N)
    launch_jit(mul_f32x2, (1,), (x, y, o), {"N": N})
    assert torch.equal(o, x * y)


def test_outside_the_subset_names_instruction_asm_line_and_kernel_line():
    from newt.interpreter.errors import InterpreterError
    from newt.runtime.interpret import launch_jit
    x = _rand(I32)
    with pytest.raises(InterpreterError) as ei:
        launch_jit(unknown_instruction, (1,), (x, torch.zeros(N, dtype=I32)), {"N": N})
    msg = str(ei.value)
    assert "'brev'" in msg and "asm line 4" in msg and "brev.b32 t, $1" in msg
    assert "asm_kernels.py" in str(ei.value.loc.file)
    src = open(os.path.join(os.path.dirname(__file__), "asm_kernels.py")).read().splitlines()
    assert "inline_asm_elementwise" in src[ei.value.loc.line - 1]
    assert ei.value.code == "I001"
