"""Kernels of tests/ops/test_inline_asm.py (the asm, constraints and pack are constexpr parameters)."""

import newt
import newt.language as nl


@newt.jit
def asm1(x_ptr, o_ptr, ASM: nl.constexpr, CONS: nl.constexpr, PACK: nl.constexpr, N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    z = nl.inline_asm_elementwise(ASM, CONS, [x], dtype=o_ptr.dtype.element_ty, is_pure=True, pack=PACK)
    nl.store(o_ptr + offs, z)


@newt.jit
def asm2(x_ptr, y_ptr, o_ptr, ASM: nl.constexpr, CONS: nl.constexpr, PACK: nl.constexpr, N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    y = nl.load(y_ptr + offs)
    z = nl.inline_asm_elementwise(ASM, CONS, [x, y], dtype=o_ptr.dtype.element_ty, is_pure=True, pack=PACK)
    nl.store(o_ptr + offs, z)


@newt.jit
def asm3(x_ptr, y_ptr, w_ptr, o_ptr, ASM: nl.constexpr, CONS: nl.constexpr, PACK: nl.constexpr,
         N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    y = nl.load(y_ptr + offs)
    w = nl.load(w_ptr + offs)
    z = nl.inline_asm_elementwise(ASM, CONS, [x, y, w], dtype=o_ptr.dtype.element_ty, is_pure=True, pack=PACK)
    nl.store(o_ptr + offs, z)


@newt.jit
def asm_two_results(x_ptr, a_ptr, b_ptr, N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    a, b = nl.inline_asm_elementwise("""
    {
        .reg .pred p;
        setp.lt.f32 p, $2, 0f00000000;
        selp.b32 $1, 1, 0, p;
        abs.f32 $0, $2;
    }""", "=f,=r,f", [x], dtype=(nl.float32, nl.int32), is_pure=True, pack=1)
    nl.store(a_ptr + offs, a)
    nl.store(b_ptr + offs, b)


@newt.jit
def asm_scalar_broadcast(x_ptr, o_ptr, s, N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    z = nl.inline_asm_elementwise("mad.lo.s32 $0, $1, $2, 7;", "=r,r,r", [x, s], dtype=nl.int32, is_pure=False,
                                  pack=1)
    nl.store(o_ptr + offs, z)


@newt.jit
def asm_2d(x_ptr, o_ptr, M: nl.constexpr, N: nl.constexpr):
    offs = nl.arange(0, M)[:, None] * N + nl.arange(0, N)[None, :]
    x = nl.load(x_ptr + offs)
    # pack=4 bytes into one register, reversed by prmt: each group of four becomes (x3, x2, x1, x0)
    z = nl.inline_asm_elementwise("prmt.b32 $0, $1, 0, 0x0123;", "=r,r", [x], dtype=nl.uint8, is_pure=True,
                                  pack=4)
    nl.store(o_ptr + offs, z)


@newt.jit
def mul_f32x2(x_ptr, y_ptr, o_ptr, N: nl.constexpr):
    """Helion's blackwell_attention ``_mul_f32x2``: mul.f32x2 exists on sm_100+ only."""
    offs = nl.arange(0, N)
    a = nl.load(x_ptr + offs)
    b = nl.load(y_ptr + offs)
    z = nl.inline_asm_elementwise("""
        {
            .reg .b64 ra, rb, rc;
            mov.b64 ra, { $2, $3 };
            mov.b64 rb, { $4, $5 };
            mul.f32x2 rc, ra, rb;
            mov.b64 { $0, $1 }, rc;
        }
        """, "=r,=r,r,r,r,r", [a, b], dtype=nl.float32, is_pure=True, pack=2)
    nl.store(o_ptr + offs, z)


@newt.jit
def unknown_instruction(x_ptr, o_ptr, N: nl.constexpr):
    offs = nl.arange(0, N)
    x = nl.load(x_ptr + offs)
    z = nl.inline_asm_elementwise("""
    {
        .reg .b32 t;
        brev.b32 t, $1;
        mov.b32 $0, t;
    }""", "=r,r", [x], dtype=nl.int32, is_pure=True, pack=1)
    nl.store(o_ptr + offs, z)
