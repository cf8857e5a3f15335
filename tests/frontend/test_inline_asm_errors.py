"""nl.inline_asm_elementwise's type rule: each bad call is one located error (N070 inline-asm, N010 for a
value that must be constexpr, N023 for a bad dtype), at the argument it is about."""

from __future__ import annotations

import pytest

from newt.frontend import analyze_source

HEAD = '''
import newt
import newt.language as nl

@newt.jit
def k(x_ptr: "*fp32", h_ptr: "*fp16", d_ptr: "*fp64", s: "i32", SAFE: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, 16))
    h = nl.load(h_ptr + nl.arange(0, 16))
    d = nl.load(d_ptr + nl.arange(0, 16))
'''
# x: fp32, h: fp16, d: fp64 (the kernel's annotations); the call is on line 10


def _diag(call: str):
    src = HEAD + "    z = " + call + "\n"
    fa = analyze_source(src, "k.py")
    errs = [d for d in fa.diagnostics if d.severity <= 1]
    assert errs, [str(d) for d in fa.diagnostics]
    line = src.splitlines()[errs[0].span.line - 1]
    return errs[0], line[errs[0].span.col - 1:]


@pytest.mark.parametrize("call, code, at, words", [
    # constraints: one per register, outputs first, known letters
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [x], nl.float32, True, 1)', "N070", '"=r,r,r"',
     ["1 output and 2 input constraints", "need 1 output and 1 input"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=q,r", [x], nl.float32, True, 1)', "N070", '"=q,r"',
     ["unknown constraint '=q'"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "r,=r", [x], nl.float32, True, 1)', "N070", '"r,=r"',
     ["outputs come first"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x, h], nl.float32, True, 1)', "N070", '"=r,r"',
     ["2 arguments", "need 1 output and 2 input"]),
    # pack: two fp32 need two registers each side; two fp16 share one
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], nl.float32, True, 2)', "N070", '"=r,r"',
     ["pack=2 need 2 output and 2 input registers"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], nl.float32, True, 3)', "N070", "3)",
     ["power of two"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], nl.float32, True, 32)', "N070", "32)",
     ["pack=32 does not divide the 16 elements"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], nl.float32, True, s)', "N010", "s)",
     ["pack must be a constexpr int"]),
    # widths: an fp64 in a 32-bit register, two fp16 in an h register
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [d], nl.float32, True, 1)', "N070", '"=r,r"',
     ["argument 0 (nl.float64, 64 bits per register) does not fit constraint r (32 bits)"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=h,h", [h], nl.float16, True, 2)', "N070", '"=h,h"',
     ["result 0 (nl.float16, 32 bits per register) does not fit constraint =h (16 bits)"]),
    # operands named in the asm must exist
    ('nl.inline_asm_elementwise("mov.b32 $0, $2;", "=r,r", [x], nl.float32, True, 1)', "N070", '"mov.b32',
     ["names $2 but there are only 2 operands"]),
    # constexpr strings and flags
    ('nl.inline_asm_elementwise(x, "=r,r", [x], nl.float32, True, 1)', "N010", "x, ",
     ["the asm must be a constexpr string"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", s, [x], nl.float32, True, 1)', "N010", "s, ",
     ["the constraints must be a constexpr string"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], nl.float32, s, 1)', "N010", "s, 1)",
     ["is_pure must be a constexpr bool"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], 3, True, 1)', "N023", "3, True",
     ["dtype must be a dtype"]),
    ('nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x_ptr], nl.float32, True, 1)', "N070", "x_ptr]",
     ["an argument has dtype nl.pointer_type(", "not pointers"]),
])
def test_located_errors(call, code, at, words):
    d, rest = _diag(call)
    assert d.code == code, d
    assert d.span.line == 10
    assert rest.startswith(at), (rest, d.message)
    for w in words:
        assert w in d.message, d.message


def test_a_good_call_has_no_error_and_tuple_dtype_gives_two_values():
    src = HEAD + '''    a, b = nl.inline_asm_elementwise("mov.b32 $0, $2; mov.b32 $1, $2;", "=r,=r,r", [x],
                                     (nl.float32, nl.int32), True, 1)
    c = a + b
'''
    fa = analyze_source(src, "k.py")
    assert [d for d in fa.diagnostics if d.severity <= 1] == []
