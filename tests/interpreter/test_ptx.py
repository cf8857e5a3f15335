"""newt/interpreter/ptx.py on its own: parsing (scopes, declarations, comments, vectors) and the errors for
PTX outside the subset, each naming the instruction and its line in the asm."""

from __future__ import annotations

import pytest
import torch

from newt.interpreter import PtxError, inline_asm_torch
from newt.interpreter.ptx import parse


def _i32(*v):
    return torch.tensor(v, dtype=torch.int32)


def test_scopes_declarations_and_comments():
    asm = """
    // a comment
    {
        .reg .b32 r<3>;          /* r0, r1, r2 */
        add.s32 r0, $1, 1;
        {
            .reg .b32 r0;        // shadows the outer r0
            mov.b32 r0, 100;
            add.s32 r1, r0, 0;
        }
        add.s32 r2, r0, r1;
        mov.b32 $0, r2;
    }"""
    (out,) = inline_asm_torch(asm, "=r,r", [_i32(1, 2, 3)], [torch.int32], 1)
    assert out.tolist() == [102, 103, 104]


def test_hex_binary_and_float_immediates():
    (out,) = inline_asm_torch("add.f32 $0, $1, 0f3F800000;", "=f,f", [torch.tensor([0.5, 2.0])], [torch.float32], 1)
    assert out.tolist() == [1.5, 3.0]
    (out,) = inline_asm_torch("or.b32 $0, $1, 0b101;", "=r,r", [_i32(0, 8)], [torch.int32], 1)
    assert out.tolist() == [5, 13]
    (out,) = inline_asm_torch("xor.b32 $0, $1, 0xFFFFFFFF;", "=r,r", [_i32(0, 1)], [torch.int32], 1)
    assert out.tolist() == [-1, -2]


def test_vector_unpack_skips_underscore_and_pack_order():
    (lo, hi) = inline_asm_torch("{ .reg .b16 a, b; mov.b32 {a, b}, $2; cvt.u32.u16 $0, a; cvt.u32.u16 $1, b; }",
                                "=r,=r,r", [_i32(0x12345678)], [torch.int32, torch.int32], 1)
    assert (lo.item(), hi.item()) == (0x5678, 0x1234)
    (out,) = inline_asm_torch("{ .reg .b16 a; mov.b32 {_, a}, $1; cvt.u32.u16 $0, a; }", "=r,r", [_i32(0x12345678)],
                              [torch.int32], 1)
    assert out.item() == 0x1234


def test_python_numbers_broadcast_as_int32_and_float32():
    (out,) = inline_asm_torch("mad.lo.s32 $0, $1, $2, $3;", "=r,r,r,r", [_i32(1, 2, 3), 10, 5], [torch.int32], 1)
    assert out.tolist() == [15, 25, 35]


@pytest.mark.parametrize("asm, words", [
    ("brev.b32 $0, $1;", ["instruction 'brev' is outside", "asm line 1", "`brev.b32 $0, $1`"]),
    ("\n\n  bra.uni L1;", ["instruction 'bra'", "asm line 3"]),
    ("L1: mov.b32 $0, $1;", ["labels and branches"]),
    ("mov.u32 $0, %tid.x;", ["special register %tid.x"]),
    ("mov.b32 $0, nothere;", ["undeclared register 'nothere'"]),
    ("{ .reg .b32 t; mov.b32 $0, t; }", ["register 't' is read before it is written"]),
    ("mov.b32 $0, $1", ["statement without a closing ';'"]),
    ("{ mov.b32 $0, $1; }}", ["'}' without a matching '{'"]),
    ("add.rm.f32 $0, $1, $1;", ["rounding .rm of add.f32"]),
    ("prmt.b32.f4e $0, $1, $1, 0;", ["prmt mode .f4e"]),
    ("setp.lt.and.s32 p, $1, $1, q;", ["boolean combine"]),
    ("ld.global.b32 $0, [$1];", ["instruction 'ld'"]),
    ("{ .reg .b32 t; }", ["never writes its output $0"]),
])
def test_outside_the_subset(asm, words):
    with pytest.raises(PtxError) as ei:
        inline_asm_torch(asm, "=r,r", [_i32(1, 2)], [torch.int32], 1)
    for w in words:
        assert w in str(ei.value), str(ei.value)


def test_constraints_must_match_the_registers():
    with pytest.raises(PtxError, match="need 1 output and 2 input registers"):
        inline_asm_torch("mov.b32 $0, $1;", "=r,r", [_i32(1), _i32(2)], [torch.int32], 1)


def test_parse_is_cached_and_counts_lines():
    p = parse("\nmov.b32 $0, $1;\n\nadd.s32 $0, $0, 1;")
    assert [s.line for s in p.stmts] == [2, 4]
    assert parse("\nmov.b32 $0, $1;\n\nadd.s32 $0, $0, 1;") is p
