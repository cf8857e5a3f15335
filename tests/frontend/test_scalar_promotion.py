"""Python scalars meeting blocks: Triton's rules (the scalar takes the block's type when its kind is not
higher; bool < integer < float, signed and unsigned being one kind), and the errors Triton raises."""

import pytest

import newt
import newt.language as nl
from newt.frontend import CompilationError, build_ir
from newt.ir.types import scalar_of


def _types(fn, name):
    return [str(scalar_of(op.results[0].type)) for op in fn.walk() if op.name == name]


@newt.jit
def _uint_and_int_literal(x_ptr, o_ptr):
    x = nl.load(x_ptr)
    nl.store(o_ptr, x // 4)
    nl.store(o_ptr, x % 3)
    nl.store(o_ptr, x + 7)
    nl.store(o_ptr, x >> 1)


@pytest.mark.parametrize("t", ["u8", "u16", "u32", "u64", "i8", "i64"])
def test_int_literal_takes_the_blocks_integer_type(t):
    # an int literal is of the integer kind, like the block: no signedness error for unsigned // 4
    fn = build_ir(_uint_and_int_literal, {"x_ptr": nl.str_to_ty("*" + t), "o_ptr": nl.str_to_ty("*" + t)}, {})
    for op in ("floordiv", "mod", "add", "shr"):
        assert _types(fn, op) == [t], op


@newt.jit
def _float_literal(x_ptr, o_ptr):
    x = nl.load(x_ptr)
    nl.store(o_ptr, x * 1.5)


def test_float_literal_promotes_an_integer_block():
    fn = build_ir(_float_literal, {"x_ptr": nl.pointer_type(nl.uint8), "o_ptr": nl.pointer_type(nl.float32)}, {})
    assert _types(fn, "mul") == ["fp32"]


def test_literal_out_of_range(expect):
    expect("""
    @newt.jit
    def k():
        huge: nl.constexpr = 0xFFFFFFFFFFFFFF
        x = nl.full((), 32, dtype=nl.int32)
        y = «x + huge
    """, "N023", contains="scalar 72057594037927935 is out of range for type nl.int32")


def test_literal_out_of_range_int8_compare(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*i8", o_ptr: "*i1"):
        x = nl.load(x_ptr)
        nl.store(o_ptr, «x < 300)
    """, "N023", contains="scalar 300 is out of range for type nl.int8")


def test_literal_out_of_range_in_bitwise_op(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*i32", o_ptr: "*i32"):
        x = nl.load(x_ptr)
        nl.store(o_ptr, «x & 0xFFFFFFFF)
    """, "N023", contains="out of range for type nl.int32")


def test_negative_literal_with_unsigned_block(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*u32", o_ptr: "*u32"):
        x = nl.load(x_ptr)
        nl.store(o_ptr, «x + -1)
    """, "N023", contains="negative scalar -1 with an unsigned nl.uint32")


def test_literal_in_range_wraps_nothing():
    @newt.jit
    def k(x_ptr, o_ptr):
        x = nl.load(x_ptr)
        nl.store(o_ptr, x & 0xFFFFFFFF)

    fn = build_ir(k, {"x_ptr": nl.pointer_type(nl.uint32), "o_ptr": nl.pointer_type(nl.uint32)}, {})
    consts = [op.attrs["value"] for op in fn.walk() if op.name == "constant"]
    assert 0xFFFFFFFF in consts


def test_signedness_message_names_both_types(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*i8", y_ptr: "*u64", o_ptr: "*fp32"):
        nl.store(o_ptr, «nl.load(x_ptr) / nl.load(y_ptr))
    """, "N020", contains="Cannot use / with nl.int8 and nl.uint64 because they have different signedness")


def test_bitwise_on_floats_names_operand_types(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*fp32", y_ptr: "*i32"):
        z = «nl.load(x_ptr) | nl.load(y_ptr)
    """, "N021", contains="invalid operands of type nl.float32 and nl.int32")


def test_compile_path_raises_out_of_range():
    @newt.jit
    def k(o_ptr):
        nl.store(o_ptr, nl.program_id(0) + 2 ** 40)

    with pytest.raises(CompilationError, match="out of range"):
        build_ir(k, {"o_ptr": nl.pointer_type(nl.int64)}, {})


def test_literal_out_of_range_in_where_and_minimum(expect):
    expect("""
    @newt.jit
    def k(x_ptr: "*i8", o_ptr: "*i8"):
        x = nl.load(x_ptr)
        nl.store(o_ptr, «nl.where(x > 0, x, 300))
        nl.store(o_ptr, «nl.minimum(x, -129))
    """, "N023", contains="is out of range for type nl.int8")
