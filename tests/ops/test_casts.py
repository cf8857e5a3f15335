"""Value conversions and bitcasts between every pair of dtypes, against exact references."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

import newt
import newt.language as nl

from .util import INT_DTYPES, NL, assert_same, bits, float_values, int_range, int_values, round_exact, signed, wrap

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
EVERY = [torch.bool] + INT_DTYPES + FLOATS + FP8


@newt.jit
def cast_kernel(x_ptr, out_ptr, n, DST: nl.constexpr, MODE: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    if MODE == "rtz":
        y = x.to(DST, fp_downcast_rounding="rtz")
    elif MODE == "bitcast":
        y = x.to(DST, bitcast=True)
    else:
        y = x.to(DST)
    nl.store(out_ptr + offs, y, mask=m)


def run_cast(backend, x, dst, mode=""):
    n = x.numel()
    out = backend.empty(n, dtype=dst)
    backend.launch(cast_kernel, (newt.cdiv(n, 128),), backend.put(x), out, n, DST=NL[dst], MODE=mode, BLOCK=128)
    return backend.get(out)


def source_values(src, n=300):
    if src == torch.bool:
        return torch.tensor([True, False, True, True, False] * 4)
    if src in INT_DTYPES:
        return torch.tensor(int_values(src, n), dtype=src)
    if src in FP8:
        allbits = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(src)
        return allbits
    vals = float_values(src, n)
    # midpoints between neighbouring fp16 / bf16 / fp8 values: ties must go to even
    extra = []
    for narrow in (torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        if bits(narrow) >= bits(src):
            continue
        a = (torch.randn(40, dtype=torch.float64) * 4).to(narrow)
        ib = torch.int8 if bits(narrow) == 8 else torch.int16
        b = (a.view(ib) + 1).view(narrow)
        extra.append((a.double() + b.double()) / 2)
        if src == torch.float64 and narrow != torch.float16:
            continue
        if src == torch.float64:
            # just above a midpoint by less than half an fp32 ulp: a double rounding through fp32 would tie
            mid = (a.double() + b.double()) / 2
            extra.append(mid + mid.abs() * 2.0 ** -40)
    if extra:
        e = torch.cat(extra).to(src)
        vals = torch.cat([vals, e[torch.isfinite(e)]])
    return vals


def reference(x: torch.Tensor, src, dst, mode="rtne"):
    if src == dst:
        return x.clone()
    vals = x.to(torch.float64).tolist() if src.is_floating_point else x.tolist()
    out = []
    for v in vals:
        if dst == torch.bool:
            out.append(v != 0)
        elif dst in INT_DTYPES:
            if isinstance(v, float):
                if math.isnan(v):
                    r = 0
                else:
                    lo, hi = int_range(dst)
                    r = lo if v == -math.inf else hi if v == math.inf else max(lo, min(hi, math.trunc(v)))
            else:
                r = wrap(int(v), dst)
            out.append(r)
        else:
            if isinstance(v, bool):
                v = int(v)
            out.append(round_exact(v if isinstance(v, float) else Fraction(v), dst, mode, saturate=dst in FP8))
    if dst in INT_DTYPES or dst == torch.bool:
        return torch.tensor(out, dtype=dst)
    return torch.tensor(out, dtype=torch.float64).to(dst)


@pytest.mark.parametrize("dst", EVERY, ids=str)
@pytest.mark.parametrize("src", EVERY, ids=str)
def test_cast(backend, src, dst):
    x = source_values(src)
    got = run_cast(backend, x, dst)
    assert_same(got, reference(x, src, dst), msg=f"{src} -> {dst}")


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.float16), (torch.float32, torch.bfloat16),
                                     (torch.float64, torch.float32), (torch.float64, torch.float16),
                                     (torch.float64, torch.bfloat16)], ids=str)
def test_cast_round_toward_zero(backend, src, dst):
    x = source_values(src)
    got = run_cast(backend, x, dst, mode="rtz")
    assert_same(got, reference(x, src, dst, mode="rtz"), msg=f"{src} -> {dst} rtz")


def test_fp16_subnormals(backend):
    # every fp16 subnormal and its neighbourhood, from fp32
    k = torch.arange(0, 1030, dtype=torch.float64)
    x = torch.cat([k * 2.0 ** -24, (k + 0.5) * 2.0 ** -24, -(k + 0.25) * 2.0 ** -24]).to(torch.float32)
    got = run_cast(backend, x, torch.float16)
    assert_same(got, reference(x, torch.float32, torch.float16))


def test_float_to_int_saturates(backend):
    x = torch.tensor([3e9, -3e9, float("inf"), float("-inf"), float("nan"), 2147483520.0, -2147483648.0, -0.9,
                      0.9, 1e20, -1e20, 255.9, 256.0, -1.5])
    for dst in (torch.int8, torch.int32, torch.int64, torch.uint8, torch.uint32, torch.uint64):
        assert_same(run_cast(backend, x, dst), reference(x, torch.float32, dst), msg=str(dst))


BITCAST_PAIRS = [(a, b) for a in EVERY for b in EVERY if a != torch.bool and b != torch.bool and bits(a) == bits(b)]


@pytest.mark.parametrize("src,dst", BITCAST_PAIRS, ids=str)
def test_bitcast(backend, src, dst):
    x = source_values(src)
    got = run_cast(backend, x, dst, mode="bitcast")
    want = x.view(dst)
    if dst.is_floating_point:
        assert_same(got.view({8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}[bits(dst)]),
                    want.view({8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}[bits(dst)]))
    else:
        assert_same(got, want)


def test_signed_unsigned_extension(backend):
    x = torch.tensor([-1, -128, 127, 0, 5], dtype=torch.int8)
    assert run_cast(backend, x, torch.uint32).tolist() == [2 ** 32 - 1, 2 ** 32 - 128, 127, 0, 5]
    u = torch.tensor([255, 128, 127, 0], dtype=torch.uint8)
    assert run_cast(backend, u, torch.int32).tolist() == [255, 128, 127, 0]
    assert run_cast(backend, u, torch.int8).tolist() == [-1, -128, 127, 0]
    assert signed(torch.int8)
