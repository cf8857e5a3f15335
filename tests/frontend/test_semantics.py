"""Typing rules on concrete specializations (the compile path), through real @newt.jit functions."""

import pytest

import newt
import newt.language as nl
from newt.frontend import CompilationError, build_ir
from newt.ir import verify
from newt.ir.types import scalar_of, shape_of

P32 = nl.pointer_type(nl.float32)
P16 = nl.pointer_type(nl.float16)


def ops(fn, name=None):
    return [op for op in fn.walk() if name is None or op.name == name]


def result_types(fn, name):
    return [str(scalar_of(op.results[0].type)) for op in ops(fn, name)]


@newt.jit
def literals(out_ptr: "*i64", f_ptr: "*fp64"):
    nl.store(out_ptr, nl.program_id(0).to(nl.int64) + 2 ** 40)
    nl.store(f_ptr, nl.program_id(0) * 1e50)


@newt.jit
def literal_overflow(out_ptr: "*i64"):
    nl.store(out_ptr, nl.program_id(0) + 2 ** 40)


def test_int_literal_out_of_range_is_an_error():
    # Triton: a Python int takes the block's integer type and must fit it (no promotion to int64)
    with pytest.raises(CompilationError, match=r"N023.*scalar 1099511627776 is out of range for type nl.int32"):
        build_ir(literal_overflow, {}, {})


def test_literal_typing():
    fn = build_ir(literals, {}, {})
    consts = {op.attrs["value"]: str(op.results[0].type) for op in ops(fn, "constant")}
    assert consts[2 ** 40] == "i64"
    assert consts[1e50] == "fp64"
    adds = [op for op in ops(fn, "add")]
    assert str(adds[0].results[0].type) == "i64"


@newt.jit
def fp16_int(x_ptr, y_ptr):
    x = nl.load(x_ptr)
    nl.store(y_ptr, x * 3 + 1)
    nl.store(y_ptr, x / 2)


def test_fp16_op_int_is_fp16_and_division_promotes():
    fn = build_ir(fp16_int, {"x_ptr": P16, "y_ptr": P16}, {})
    assert result_types(fn, "mul") == ["fp16"]
    assert result_types(fn, "add") == ["fp16"]
    assert result_types(fn, "truediv") == ["fp32"]


@newt.jit
def c_division(a_ptr, b_ptr, o_ptr):
    a = nl.load(a_ptr)
    b = nl.load(b_ptr)
    nl.store(o_ptr, a // b)
    nl.store(o_ptr, a % b)


def test_c_style_division_ops():
    I32 = nl.pointer_type(nl.int32)
    fn = build_ir(c_division, {"a_ptr": I32, "b_ptr": I32, "o_ptr": I32}, {})
    assert result_types(fn, "floordiv") == ["i32"] and result_types(fn, "mod") == ["i32"]


def test_mixed_signedness_division_is_an_error_with_location():
    U32 = nl.pointer_type(nl.uint32)
    I32 = nl.pointer_type(nl.int32)
    with pytest.raises(CompilationError) as ei:
        build_ir(c_division, {"a_ptr": I32, "b_ptr": U32, "o_ptr": I32}, {})
    msg = str(ei.value)
    assert "test_semantics.py:" in msg and "N020" in msg and "a // b" in msg and "^" in msg
    assert ei.value.diagnostics[0].span.col == 21


@newt.jit
def promote(a_ptr, b_ptr, o_ptr):
    nl.store(o_ptr, nl.load(a_ptr) + nl.load(b_ptr))


@pytest.mark.parametrize("a,b,expected", [
    (nl.int8, nl.int16, "i16"), (nl.int32, nl.uint32, "u32"), (nl.int64, nl.uint32, "i64"),
    (nl.float16, nl.bfloat16, "fp32"), (nl.float16, nl.int64, "fp16"), (nl.bfloat16, nl.bfloat16, "bf16"),
    (nl.float32, nl.float64, "fp64"), (nl.uint8, nl.int8, "u8"), (nl.int1, nl.int32, "i32"),
])
def test_promotion_table(a, b, expected):
    fn = build_ir(promote, {"a_ptr": nl.pointer_type(a), "b_ptr": nl.pointer_type(b),
                            "o_ptr": nl.pointer_type(nl.float32)}, {})
    assert result_types(fn, "add") == [expected]


@newt.jit
def shapes(x_ptr, o_ptr, BLOCK: nl.constexpr):
    r = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + r[:, None] * BLOCK + r[None, :])
    t = x.T
    y = nl.sum(t, axis=1, keep_dims=True)
    z = x.to(nl.int32, bitcast=True)
    e = x_ptr.dtype.element_ty
    w = nl.zeros((BLOCK,), dtype=e)
    nl.store(o_ptr + r[:, None] * BLOCK + r[None, :], t + y + w[None, :] + z.to(nl.float32))


def test_shapes_methods_and_element_ty():
    fn = build_ir(shapes, {"x_ptr": P32, "o_ptr": P32}, {"BLOCK": 32})
    verify(fn)
    assert [op.attrs["order"] for op in ops(fn, "permute")] == [[1, 0]]
    red = ops(fn, "reduce")[0]
    assert shape_of(red.results[0].type) == (32,) and red.attrs == {"axis": 1, "combine": "add"}
    assert len(ops(fn, "bitcast")) == 1
    assert shape_of(ops(fn, "store")[0].operands[1].type) == (32, 32)


@newt.jit
def pair(a, b):
    return a + b, a * b


@newt.jit
def act_relu(x):
    return nl.maximum(x, 0.0)


@newt.jit
def uses_helpers(x_ptr, o_ptr, ACT: nl.constexpr):
    r = nl.arange(0, 16)
    x = nl.load(x_ptr + r)
    s, p = pair(x, x)
    nl.store(o_ptr + r, ACT(s + p))


def test_inlining_tuple_returns_and_jit_as_constexpr():
    fn = build_ir(uses_helpers, {"x_ptr": P32, "o_ptr": P32}, {"ACT": act_relu})
    names = [op.name for op in fn.walk()]
    assert "maximum" in names and names.count("add") >= 2 and "mul" in names


@newt.jit
def flow(x_ptr, n):
    pid = nl.program_id(0)
    if pid >= n:
        return
    acc = 0.0
    for i in range(n):
        if i == 3:
            continue
        v = nl.load(x_ptr + i)
        if v < 0:
            break
        acc += v
    k = 0
    while k < n:
        k += 2
    nl.store(x_ptr + pid, acc + k)


def test_break_continue_early_return_lower_to_structured_ops():
    fn = build_ir(flow, {"x_ptr": P32, "n": nl.int32}, {})
    verify(fn)
    names = [op.name for op in fn.walk()]
    assert "scf.while" in names  # the loop with a break
    assert "scf.if" in names
    assert names.count("store") == 1
    assert "break" not in str(fn)


@newt.jit
def static_unroll(x_ptr, N: nl.constexpr):
    acc = nl.zeros((16,), dtype=nl.float32)
    for i in nl.static_range(N):
        if i % 2 == 0:
            acc += nl.load(x_ptr + i * 16 + nl.arange(0, 16))
    nl.store(x_ptr + nl.arange(0, 16), acc)


def test_static_range_unrolls_with_constexpr_index():
    fn = build_ir(static_unroll, {"x_ptr": P32}, {"N": 6})
    assert len(ops(fn, "load")) == 3
    assert "scf.for" not in [op.name for op in fn.walk()]


def test_divisibility_hints_and_specialized_ones_reach_the_ir():
    import torch

    from newt.runtime.specialize import specialize

    @newt.jit
    def k(x_ptr, n, stride):
        nl.store(x_ptr + nl.program_id(0) * stride, n)

    sp = specialize(k, (torch.zeros(4), 32, 1), {})
    assert sp.constexprs == {"stride": 1}
    assert sp.divisibility == {"x_ptr": 16, "n": 16}
    fn = build_ir(k, sp.arg_types, sp.constexprs, sp.divisibility)
    assert fn.hints == {"x_ptr": 16, "n": 16}
    assert [p.name for p in fn.params if p.constexpr] == ["stride"]


def test_ir_text_form_is_stable():
    @newt.jit
    def tiny(x_ptr, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        nl.store(x_ptr + offs, offs.to(nl.float32) * 2.0)

    fn = build_ir(tiny, {"x_ptr": P32}, {"BLOCK": 8})
    assert str(fn) == (
        "func @tiny(%x_ptr: *fp32, BLOCK: constexpr = 8) {\n"
        "  %1 = arange  {end=8, start=0} : <8xi32>\n"
        "  %2 = splat %x_ptr : <8x*fp32>\n"
        "  %3 = addptr %2, %1 : <8x*fp32>\n"
        "  %4 = cast %1 : <8xfp32>\n"
        "  %5 = constant  {value=2.0} : <8xfp32>\n"
        "  %6 = mul %4, %5 : <8xfp32>\n"
        "  store %3, %6 {cache='', evict=''}\n"
        "  return\n"
        "}\n")


def test_verifier_catches_bad_ir():
    from newt import ir
    from newt.ir import IRVerificationError
    fn = build_ir(promote, {"a_ptr": P32, "b_ptr": P16, "o_ptr": P32}, {})
    add = ops(fn, "add")[0]
    add.operands[1] = ops(fn, "load")[1].results[0]  # fp16 operand into an fp32 add
    with pytest.raises(IRVerificationError, match="operand types differ"):
        verify(fn)
    bad = ir.Function("f", [], ir.Region([], [ir.Op("add", [ir.Value(nl.int32)], [nl.int32])]))
    with pytest.raises(IRVerificationError, match="not defined before use"):
        verify(bad)


def test_compilation_error_has_no_compiler_frames():
    import traceback
    U32 = nl.pointer_type(nl.uint32)
    I32 = nl.pointer_type(nl.int32)
    try:
        build_ir(c_division, {"a_ptr": I32, "b_ptr": U32, "o_ptr": I32}, {})
    except CompilationError as e:
        text = "".join(traceback.format_exception_only(type(e), e))
        assert "builder.py" not in text and "error[N020]" in text


@newt.jit
def first_negative(x_ptr, out_ptr, n):
    i = 0
    found = -1
    while i < n:
        v = nl.load(x_ptr + i)
        if v < 0:
            found = i
            break
        i += 1
    nl.store(out_ptr, found)


def test_values_assigned_before_break_leave_the_loop():
    """Regression: the branch that breaks used to be treated as 'don't care' for carried values."""
    import torch

    from newt.runtime.interpret import launch_jit
    x = torch.ones(40)
    x[17] = -1.0
    out = torch.zeros(1, dtype=torch.int32)
    launch_jit(first_negative, (1,), (x, out, 40), {})
    assert out.item() == 17
    x[17] = 1.0
    launch_jit(first_negative, (1,), (x, out, 40), {})
    assert out.item() == -1


def test_softmax_keeps_the_shape():
    """Regression: nl.softmax with the default keep_dims used to reshape its result away."""
    import torch

    from newt.runtime.interpret import launch_jit

    @newt.jit
    def sm(x_ptr, out_ptr, N: nl.constexpr):
        r = nl.arange(0, N)
        x = nl.load(x_ptr + r[:, None] * N + r[None, :])
        nl.store(out_ptr + r[:, None] * N + r[None, :], nl.softmax(x, 1))
        nl.store(out_ptr + r, nl.softmax(nl.load(x_ptr + r)), mask=r < 0)

    x = torch.randn(16, 16)
    out = torch.empty(16, 16)
    launch_jit(sm, (1,), (x, out), {"N": 16})
    torch.testing.assert_close(out, torch.softmax(x, 1))
