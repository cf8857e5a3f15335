"""nl.dot beyond the tensor-core tiles: M, N or K under 16 (lowered by FMA on the GPU), int8 operands with
``out_dtype=nl.int8`` (Triton's rule: the product stays int32), and the fp8 formats without tensor-core
support (e4b15, e4b8, e5b16: the product is computed from fp16 copies, exactly)."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def _dot(a_ptr, b_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr, PREC: nl.constexpr,
         OUT: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    rk = nl.arange(0, K)
    a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = nl.load(b_ptr + rk[:, None] * N + rn[None, :])
    nl.store(out_ptr + rm[:, None] * N + rn[None, :], nl.dot(a, b, input_precision=PREC, out_dtype=OUT))


def _tf32(x):
    bits = x.view(torch.int32)
    r = (bits + 0x1000) & ~0x1FFF
    return torch.where(torch.isfinite(x), r.view(torch.float32), x)


SMALL = [  # M, N, K, dtype, precision
    (2, 4, 32, torch.float16, None), (1, 2, 32, torch.float8_e5m2, None), (8, 8, 8, torch.float32, "tf32"),
    (8, 8, 8, torch.float32, "ieee"), (64, 8, 16, torch.float16, None), (16, 16, 8, torch.bfloat16, None),
    (4, 1, 1, torch.float32, "ieee"), (16, 2, 4, torch.float64, None),
]


@pytest.mark.parametrize("M,N,K,dt,prec", SMALL, ids=lambda v: str(v).replace("torch.", ""))
def test_small_dot(backend, M, N, K, dt, prec):
    a = torch.randn(M, K).to(dt)
    b = torch.randn(K, N).to(dt)
    od = torch.float64 if dt == torch.float64 else torch.float32
    out = backend.empty(M, N, dtype=od)
    ad, bd = backend.put(a, b)
    backend.launch(_dot, (1,), ad, bd, out, M=M, N=N, K=K, PREC=prec, OUT=nl.float64 if od == torch.float64
                   else nl.float32)
    got = backend.get(out).double()
    if prec == "tf32":
        want = _tf32(a).double() @ _tf32(b).double()
    else:
        want = a.double() @ b.double()  # low-precision products are exact in fp32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * K)


@pytest.mark.parametrize("M,N,K", [(16, 16, 8), (32, 32, 64), (4, 8, 32)])
def test_int8_dot_with_int8_out_dtype_is_int32(backend, M, N, K):
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
    b = torch.randint(-128, 128, (K, N), dtype=torch.int8)
    out = backend.zeros(M, N, dtype=torch.int32)
    ad, bd = backend.put(a, b)
    backend.launch(_dot, (1,), ad, bd, out, M=M, N=N, K=K, PREC=None, OUT=nl.int8)
    assert torch.equal(backend.get(out), a.int() @ b.int())  # no wrap to int8


def test_int8_out_dtype_result_type():
    from newt.frontend import build_ir
    P = nl.pointer_type
    f = build_ir(_dot, dict(a_ptr=P(nl.int8), b_ptr=P(nl.int8), out_ptr=P(nl.int32)),
                 dict(M=16, N=16, K=32, PREC=None, OUT=nl.int8))
    (dot,) = [op for op in f.walk() if op.name == "dot"]
    assert str(dot.results[0].type.element_ty) == "i32"


@newt.jit
def _int8_fp32_out(a_ptr, o_ptr):
    r = nl.arange(0, 16)
    a = nl.load(a_ptr + r[:, None] * 16 + r[None, :])
    nl.store(o_ptr + r[:, None] * 16 + r[None, :], nl.dot(a, a, out_dtype=nl.float32))


def test_int8_dot_rejects_a_float_out_dtype():
    from newt.frontend import CompilationError, build_ir
    P = nl.pointer_type
    with pytest.raises(CompilationError, match=r"N031.*accumulates in int32"):
        build_ir(_int8_fp32_out, dict(a_ptr=P(nl.int8), o_ptr=P(nl.int32)), {})


FP8X = {"e4b15": (nl.float8e4b15, 2.0 ** -8), "e4b8": (nl.float8e4b8, 1.0), "e5b16": (nl.float8e5b16, 1.0)}


def _fp8x_tensor(name, shape, gen):
    """Random finite bit patterns of the format and their exact values (through the interpreter's decoding)."""
    from newt.interpreter import dtypes as D
    dt = FP8X[name][0]
    bits = torch.randint(0, 256, shape, generator=gen, dtype=torch.int32).to(torch.uint8)
    vals = D.to_f32(D.from_bits(bits.view(torch.int8), dt), dt)
    bad = ~torch.isfinite(vals)
    bits = torch.where(bad, torch.zeros_like(bits), bits)
    return bits, torch.where(bad, torch.zeros_like(vals), vals)


@pytest.mark.parametrize("name", list(FP8X))
@pytest.mark.parametrize("M,N,K", [(16, 16, 16), (32, 16, 64), (4, 8, 8)])
def test_fp8_variant_dot(backend, name, M, N, K):
    gen = torch.Generator().manual_seed(3)
    ab, av = _fp8x_tensor(name, (M, K), gen)
    bb, bv = _fp8x_tensor(name, (K, N), gen)
    dt = FP8X[name][0]
    out = backend.empty(M, N)
    ad, bd = backend.put(ab, bb)
    backend.launch(_dot, (1,), newt.reinterpret(ad, dt), newt.reinterpret(bd, dt), out, M=M, N=N, K=K, PREC=None,
                   OUT=nl.float32)
    want = av.double() @ bv.double()
    torch.testing.assert_close(backend.get(out).double(), want, rtol=1e-5, atol=1e-6 * want.abs().max().item())


@newt.jit
def _bdot(a_ptr, b_ptr, out_ptr, B: nl.constexpr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr):
    rb = nl.arange(0, B)
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    rk = nl.arange(0, K)
    a = nl.load(a_ptr + rb[:, None, None] * M * K + rm[None, :, None] * K + rk[None, None, :])
    b = nl.load(b_ptr + rb[:, None, None] * K * N + rk[None, :, None] * N + rn[None, None, :])
    nl.store(out_ptr + rb[:, None, None] * M * N + rm[None, :, None] * N + rn[None, None, :],
             nl.dot(a, b, input_precision="ieee"))


@pytest.mark.parametrize("B,M,N,K", [(4, 8, 8, 8), (2, 1, 16, 4)])
def test_small_batched_dot(backend, B, M, N, K):
    a = torch.randn(B, M, K)
    b = torch.randn(B, K, N)
    out = backend.empty(B, M, N)
    ad, bd = backend.put(a, b)
    backend.launch(_bdot, (1,), ad, bd, out, B=B, M=M, N=N, K=K)
    torch.testing.assert_close(backend.get(out).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)


def test_small_and_variant_dots_compile_for_sm80_and_sm90a():
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.backend.cuda.dot import FmaLowering, select_dot_lowering
    from newt.backend.cuda.targets import TARGETS
    from newt.frontend import build_ir
    P = nl.pointer_type
    cases = [(2, 4, 32, nl.float16, nl.float32, None), (8, 8, 8, nl.float32, nl.float32, "tf32"),
             (16, 16, 8, nl.int8, nl.int8, None), (4, 8, 8, nl.float8e4b15, nl.float32, None),
             (16, 16, 16, nl.float8e5b16, nl.float32, None)]
    for M, N, K, dt, od, prec in cases:
        ot = nl.int32 if dt.is_int() else od
        for target in ("sm_80", "sm_90a"):
            f = build_ir(_dot, dict(a_ptr=P(dt), b_ptr=P(dt), out_ptr=P(ot)),
                         dict(M=M, N=N, K=K, PREC=prec, OUT=od))
            (dot,) = [op for op in f.walk() if op.name == "dot"]
            if min(M, N, K) < 16:
                assert isinstance(select_dot_lowering(dot, TARGETS[target], 4), FmaLowering)
            assert compile_cuda(generate_cuda(f, target, 4, 3), target).cubin
