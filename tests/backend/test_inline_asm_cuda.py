"""nl.inline_asm_elementwise through the CUDA backend, offline: NVRTC to cubin for sm_80 and sm_90a, the asm
visible in the generated CUDA, the PTX and the SASS; a ptxas error inside the asm is a B003 at the user's call."""

from __future__ import annotations

import os
import re
import sys

import pytest

import newt
from newt.diagnostics import CompilationError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "ops"))
from asm_kernels import asm1, asm2, asm_2d, asm_scalar_broadcast, asm_two_results, mul_f32x2

pytest.importorskip("cuda.bindings.nvrtc")

TARGETS = ["sm_80", "sm_90a"]

NVFP4_DECODE = """
        {
          .reg .b16 sc, scale_lo, scale_hi;
          .reg .b32 scale_h2;
          mov.b32 {sc, _}, $1;
          cvt.rn.f16x2.e4m3x2 scale_h2, sc;
          mov.b32 {scale_lo, scale_hi}, scale_h2;
          cvt.f32.f16 $0, scale_lo;
        }
        """


def _sass(cubin):
    from newt.backend.cuda import sass
    try:
        return sass(cubin)
    except Exception as e:
        pytest.skip(f"cuobjdump unavailable: {e}")


def _ops(s: str) -> set:
    return set(re.findall(r"\b([A-Z][A-Z0-9]+(?:\.[A-Z0-9_]+)*)\b", s))


@pytest.mark.parametrize("target", TARGETS)
def test_prmt_pack4_bytes_reaches_sass(target):
    ck = newt.compile(asm_2d, signature={"x_ptr": "*u8", "o_ptr": "*u8"}, constexprs={"M": 16, "N": 32},
                      target=target)
    cuda = ck.asm["cuda"]
    line = next(ln for ln in cuda.splitlines() if "/* nl.inline_asm_elementwise */" in ln)
    assert 'asm("prmt.b32 %0, %1, 0, 0x0123;" : "=r"(' in line  # pure: not volatile; $N -> %N
    assert "<< 24" in line  # four bytes packed into the one r register
    assert "prmt.b32" in ck.asm["ptx"] and "0x0123" in ck.asm["ptx"]
    assert "PRMT" in _ops(_sass(ck.asm["cubin"]))


@pytest.mark.parametrize("target", TARGETS)
def test_f16x2_pack2_one_register(target):
    ck = newt.compile(asm1, signature={"x_ptr": "*fp16", "o_ptr": "*fp16"},
                      constexprs={"ASM": "mul.rn.f16x2 $0, $1, $1;", "CONS": "=r,r", "PACK": 2, "N": 256},
                      target=target)
    assert re.search(r"mul\.rn\.f16x2\s+%r\d+, %r\d+, %r\d+;", ck.asm["ptx"])
    ops = _ops(_sass(ck.asm["cubin"]))
    assert any(o.startswith(("HMUL2", "HFMA2")) for o in ops), ops


@pytest.mark.parametrize("target", TARGETS)
def test_impure_scalar_operand_is_volatile_and_compiles(target):
    ck = newt.compile(asm_scalar_broadcast, signature={"x_ptr": "*i32", "o_ptr": "*i32", "s": "i32"},
                      constexprs={"N": 256}, target=target)
    assert "asm volatile(\"mad.lo.s32 %0, %1, %2, 7;\"" in ck.asm["cuda"]
    assert "mad.lo.s32" in ck.asm["ptx"]


@pytest.mark.parametrize("target", TARGETS)
def test_two_results_and_predicates(target):
    ck = newt.compile(asm_two_results, signature={"x_ptr": "*fp32", "a_ptr": "*fp32", "b_ptr": "*i32"},
                      constexprs={"N": 256}, target=target)
    assert '"=f"(' in ck.asm["cuda"] and '"=r"(' in ck.asm["cuda"]
    assert "setp.lt.f32" in ck.asm["ptx"] and "selp.b32" in ck.asm["ptx"]
    _sass(ck.asm["cubin"])


def test_percent_register_names_are_escaped():
    ck = newt.compile(asm2, signature={"x_ptr": "*i32", "y_ptr": "*i32", "o_ptr": "*i32"},
                      constexprs={"ASM": "{ .reg .b32 %t; add.s32 %t, $1, $2; mov.b32 $0, %t; }", "CONS": "=r,r,r",
                                  "PACK": 1, "N": 128}, target="sm_90a")
    assert "%%t" in ck.asm["cuda"] and "add.s32 %t," in ck.asm["ptx"]


def test_nvfp4_decode_needs_sm89_the_error_names_the_call():
    """cvt.rn.f16x2.e4m3x2 exists from sm_89: sm_90a compiles it (F2FP...E4M3), sm_80 is a located B003."""
    sig = {"x_ptr": "*u8", "o_ptr": "*fp32"}
    cx = {"ASM": NVFP4_DECODE, "CONS": "=f,r", "PACK": 1, "N": 256}
    ck = newt.compile(asm1, signature=sig, constexprs=cx, target="sm_90a")
    assert any("E4M3" in o for o in _ops(_sass(ck.asm["cubin"])))
    with pytest.raises(CompilationError) as ei:
        newt.compile(asm1, signature=sig, constexprs=cx, target="sm_80")
    d = ei.value.diagnostics[0]
    assert d.code == "B003"
    assert d.file.endswith("asm_kernels.py") and d.span.line == 11
    assert "cvt.f16x2.e4m3x2" in d.message and "sm_89" in d.message and "asm line 6" in d.message
    assert d.data["asm_line"] == 6 and d.data["target"] == "sm_80"


@pytest.mark.parametrize("target", TARGETS)
def test_helion_mul_f32x2_is_a_located_error_before_sm100(target):
    with pytest.raises(CompilationError) as ei:
        newt.compile(mul_f32x2, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "o_ptr": "*fp32"},
                     constexprs={"N": 256}, target=target)
    d = ei.value.diagnostics[0]
    src = open(d.file).read().splitlines()
    assert d.code == "B003" and "inline_asm_elementwise" in src[d.span.line - 1]
    assert "mul.f32x2" in d.message and "sm_100" in d.message
    assert "NVRTC could not compile" not in str(ei.value).splitlines()[1]
