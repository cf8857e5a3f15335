"""Triton code as people write it: each false-error class the front end once reported on valid library kernels
has a minimal kernel here (written for this test), which must analyze with no error, and, where the construct
has a wrong use, the error that use still gets."""

from __future__ import annotations

from triton_snippets import TRITON, _diags, _errors, _fmt  # noqa: F401


def test_python_min_max_on_run_time_scalars():
    ds = _diags("""
    @triton.jit
    def k(out_ptr, M, N, BM: tl.constexpr, G: tl.constexpr):
        pid = tl.program_id(0)
        n_m = tl.cdiv(M, BM)
        first = (pid // G) * G
        size = min(n_m - first, G)
        hi = max(size, N, 1, 2.0)
        tl.store(out_ptr + pid, hi)
    """)
    assert not ds, _fmt(ds)


def test_python_min_max_on_blocks_warns_only():
    ds = _diags("""
    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.store(x_ptr + offs, max(x, 0.0, x * 2))
    """)
    assert [(d.code, str(d.severity)) for d in ds] == [("N008", "warning")], _fmt(ds)
    assert "tl.maximum" in ds[0].message


def test_python_min_with_one_run_time_argument_is_an_error():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        tl.store(x_ptr, min(x))
    """)
    assert [d.code for d in ds] == ["N005"], _fmt(ds)


def test_dtype_called_as_a_constructor():
    ds = _diags("""
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        m = tl.float32(-float("inf"))
        d = tl.float32(0.0)
        c = tl.float32(n)
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        tl.store(x_ptr + tl.arange(0, BLOCK), tl.float16(x) + m + d + c)
    """)
    assert not ds, _fmt(ds)


def test_dtype_constructor_needs_one_value():
    ds = _errors("""
    @triton.jit
    def k(x_ptr):
        tl.store(x_ptr, tl.float32(1.0, 2.0))
    """)
    assert [d.code for d in ds] == ["N005"], _fmt(ds)


def test_names_from_relative_imports_are_not_undefined():
    ds = _diags("""
    from .utils import helper, scale as sc
    from . import activations
    from ..common.math import rsqrt_fn

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        y = helper(x) * sc + activations.relu(x) + rsqrt_fn(x)
        tl.store(x_ptr + offs, y)
    """)
    assert not ds, _fmt(ds)


def test_module_level_conditional_aliases_are_not_undefined():
    ds = _diags("""
    import os

    if os.environ.get("FAST"):
        fast_exp = tl.math.exp2
    else:
        fast_exp = tl.exp
    try:
        act = tl.math.tanh
    except AttributeError:
        act = tl.sigmoid
    chosen = tl.math.tanh if os.environ.get("X") else tl.sigmoid

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.store(x_ptr + offs, fast_exp(x) + act(x) + chosen(x))
    """)
    assert not ds, _fmt(ds)


def test_functions_imported_from_other_packages_are_silent():
    ds = _diags("""
    from mylib.kernels.utils import jit_helper

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, jit_helper(tl.load(x_ptr + offs)))
    """)
    assert not ds, _fmt(ds)


def test_a_truly_undefined_name_is_still_reported():
    ds = _errors("""
    from .utils import helper

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, helperr(tl.load(x_ptr + offs)))
    """)
    assert [d.code for d in ds] == ["N003"], _fmt(ds)


def test_if_elif_chain_over_a_constexpr_string_assigns_in_every_branch_taken():
    ds = _diags("""
    @triton.jit
    def act(x, ACT: tl.constexpr):
        if ACT == "relu":
            y = tl.maximum(x, 0.0)
        elif ACT == "sigmoid":
            y = tl.sigmoid(x)
        elif ACT == "gelu":
            y = 0.5 * x * (1 + tl.erf(x * 0.7071067811865476))
        return y

    @triton.jit
    def k(x_ptr, MODE: tl.constexpr, ACT: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        if MODE == 0:
            out = act(x, ACT)
        elif MODE == 1:
            out = x * 2
        tl.store(x_ptr + offs, out)
    """)
    assert not ds, _fmt(ds)


def test_maybe_undefined_is_still_reported_when_every_path_that_runs_can_miss_it():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        if n > 0:
            y = tl.load(x_ptr + offs)
        tl.store(x_ptr + offs, y)
    """)
    assert [d.code for d in ds] == ["N007"], _fmt(ds)


def test_a_launch_with_a_value_no_branch_takes_reports_it_for_that_launch():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, MODE: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        if MODE == 0:
            out = tl.load(x_ptr + offs)
        elif MODE == 1:
            out = tl.load(x_ptr + offs) * 2
        tl.store(x_ptr + offs, out)

    def run(x):
        k[(1,)](x, MODE=0, BLOCK=16)
        k[(1,)](x, MODE=2, BLOCK=16)
    """)
    assert [d.code for d in ds] == ["N003"] and "MODE=2" in ds[0].context, _fmt(ds)


def test_a_scalar_subtracted_inside_a_pointer_expression_is_not_taken_for_a_pointer():
    ds = _diags("""
    @triton.jit
    def k(x_ptr, idx_ptr, start, n_cols, out_ptr):
        pid = tl.program_id(0)
        y = tl.load(idx_ptr + pid)
        off_rank = (y < start) | (y >= start + n_cols)
        local = y - start
        v = tl.load(x_ptr + local)
        tl.store(out_ptr + pid, tl.where(off_rank, 0.0, v))
    """)
    assert not ds, _fmt(ds)


def test_misuse_of_a_guessed_pointer_is_not_certain():
    # `a` flows into a load, so the generic check takes it for a pointer; it could be an integer offset
    # (`tl.load(base + a)`), so comparing it with a scalar or negating it is not reported
    ds = _diags("""
    @triton.jit
    def k(base, a, out_ptr):
        v = tl.load(base + a)
        tl.store(out_ptr, tl.where(a > 3, v, 0.0))
        tl.store(out_ptr + 1, v * (10 - a))
    """)
    assert not ds, _fmt(ds)


def test_misuse_of_an_annotated_pointer_is_still_an_error():
    ds = _errors("""
    @triton.jit
    def k(x_ptr: "*fp32", n):
        tl.store(x_ptr, tl.load(x_ptr + 1.5))
    """)
    assert [d.code for d in ds] == ["N022"], _fmt(ds)


def test_attributes_of_a_parameter_of_unknown_kind_are_unknown():
    # a host-side TensorDescriptor arrives as a parameter the file does not annotate
    ds = _diags("""
    @triton.jit
    def k(desc_in, desc_out, M, BLOCK_M: tl.constexpr):
        pid = tl.program_id(0)
        tile = desc_in.load([pid * BLOCK_M, 0])
        desc_out.store([pid * BLOCK_M, 0], tile.to(desc_out.dtype))
        z = tl.zeros([BLOCK_M], dtype=desc_in.dtype.element_ty)
    """)
    assert not ds, _fmt(ds)


def test_an_unknown_attribute_of_a_block_is_still_reported():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        tl.store(x_ptr, x.lod())
    """)
    assert [d.code for d in ds] == ["N004"], _fmt(ds)


def test_plain_python_functions_run_on_compile_time_values():
    ds = _diags("""
    def pow2_at_least(n):
        return 1 << (n - 1).bit_length()

    @triton.jit
    def k(x_ptr, H, K: tl.constexpr, BLOCK_H: tl.constexpr):
        for h in tl.static_range(triton.cdiv(K, BLOCK_H)):
            offs = h * BLOCK_H + tl.arange(0, BLOCK_H)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) * triton.next_power_of_2(K))
        P: tl.constexpr = pow2_at_least(K)
        tl.store(x_ptr + tl.arange(0, P), tl.zeros([P], dtype=tl.float32))
    """)
    assert not ds, _fmt(ds)


def test_plain_python_function_on_a_block_is_still_an_error():
    ds = _errors("""
    def double(x):
        return x * 2

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, double(tl.load(x_ptr + offs)))
    """)
    assert [d.code for d in ds] == ["N006"], _fmt(ds)


def test_python_range_keywords_are_ignored_with_a_warning():
    ds = _diags("""
    @triton.jit
    def k(x_ptr, N: tl.constexpr, FLAT: tl.constexpr):
        for i in range(N, flatten=FLAT):
            tl.store(x_ptr + i, 1.0)
        for j in tl.range(0, N, flatten=FLAT, disable_licm=True, warp_specialize=False):
            tl.store(x_ptr + j, 2.0)
    """)
    assert [(d.code, str(d.severity)) for d in ds] == [("N005", "warning")], _fmt(ds)
    assert "flatten" in ds[0].message


def test_sizes_from_unknown_constexprs_are_not_errors_in_the_generic_check():
    ds = _diags("""
    @triton.jit
    def k(x_ptr, K_POW2: tl.constexpr):
        offs = tl.arange(0, K_POW2)
        v = tl.sort(tl.load(x_ptr + offs), 0)
        tl.store(x_ptr + offs, v)
    """)
    assert not ds, _fmt(ds)


def test_a_run_time_block_passed_to_a_helper_parameter_annotated_constexpr():
    # tutorial 06 passes offs_m / offs_n (blocks) and N_CTX to parameters annotated tl.constexpr
    ds = _diags("""
    @triton.jit
    def inner(acc, q, k_ptr, offs_m: tl.constexpr, offs_n: tl.constexpr, N_CTX: tl.constexpr,
              BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
        for start_n in range(0, N_CTX, BLOCK_N):
            k = tl.load(k_ptr + start_n + offs_n)
            s = q * k[None, :]
            if CAUSAL:
                s = tl.where(offs_m[:, None] >= (start_n + offs_n[None, :]), s, -1.0e6)
            acc += s
        return acc

    @triton.jit
    def k(q_ptr, k_ptr, o_ptr, N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        q = tl.load(q_ptr + offs_m)[:, None]
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        acc = inner(acc, q, k_ptr, offs_m, offs_n, N_CTX, BLOCK_N, True)
        tl.store(o_ptr + offs_m[:, None] * BLOCK_N + offs_n[None, :], acc)
    """)
    assert not ds, _fmt(ds)


def test_a_block_used_as_a_compile_time_value_inside_the_helper_is_reported_there():
    ds = _errors("""
    @triton.jit
    def make(n: tl.constexpr):
        return tl.arange(0, n)

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, make(offs))
    """)
    assert [d.code for d in ds] == ["N010"] and ds[0].span.line == 5, _fmt(ds)


def test_the_rest_of_tritons_builtin_namespace_in_a_triton_file():
    ds = _diags("""
    @triton.jit
    def k(x_ptr, SHAPE: tl.constexpr, DEBUG: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        n = len(SHAPE) + int(2.5) + float(BLOCK)
        if isinstance(x, tl.tensor) and hasattr(x, "dtype"):
            x = x.to(getattr(x, "dtype"))
        if DEBUG:
            print("x", x)
        for i in range(len(SHAPE)):
            x += i
        tl.store(x_ptr + offs, x * n)
    """)
    assert not ds, _fmt(ds)


def test_compile_time_int_arguments_from_unknown_constexprs():
    ds = _diags("""
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr, VEC: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        offs = tl.max_contiguous(tl.multiple_of(offs, VEC), BLOCK)
        tl.store(x_ptr + offs, 1.0, mask=offs < n)
    """)
    assert not ds, _fmt(ds)


def test_a_run_time_value_as_a_compile_time_int_is_still_an_error():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.max_contiguous(tl.arange(0, BLOCK), n)
        tl.store(x_ptr + offs, 1.0)
    """)
    assert [d.code for d in ds] == ["N010"], _fmt(ds)


def test_a_torch_function_called_in_a_kernel_is_still_an_error():
    ds = _errors("""
    from torch import exp

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, exp(tl.load(x_ptr + offs)))
    """)
    assert [d.code for d in ds] == ["N006"], _fmt(ds)


def test_a_helper_parameter_of_unknown_kind_may_be_a_block_operand():
    # ml-cross-entropy's _mm_backward(do, ...): the caller passes a block as `do`; the generic check of the
    # helper alone does not know its kind, so tl.dot(do, b) is not an error there
    ds = _errors("""
    @triton.jit
    def mm_helper(do, b_ptrs, out_ptrs, BLOCK_D: tl.constexpr):
        d_inds = tl.arange(0, BLOCK_D)[None, :]
        b = tl.load(b_ptrs + d_inds)
        tl.store(out_ptrs + d_inds, tl.dot(do, b).to(out_ptrs.dtype.element_ty))
    """)
    assert not ds, _fmt(ds)


def test_a_scalar_parameter_as_a_dot_operand_is_still_an_error():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, s: tl.float32, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        b = tl.load(x_ptr + offs[:, None] * BLOCK + offs[None, :])
        tl.store(x_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(s, b))
    """)
    assert [d.code for d in ds] == ["N023"], _fmt(ds)
