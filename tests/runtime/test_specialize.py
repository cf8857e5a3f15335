"""Specialization, argument binding and the TypeErrors of a bad launch (no GPU needed)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import newt
import newt.language as nl
from newt.runtime import specialize as sp
from newt.runtime.jit import build_fast_path

from . import kernels as K


def test_specialize_types_constexprs_and_hints():
    x = torch.empty(64)
    s = sp.specialize(K.add_kernel, (x, x, x, 64), {"BLOCK_SIZE": 32})
    assert s.arg_types == {"x_ptr": nl.pointer_type(nl.float32), "y_ptr": nl.pointer_type(nl.float32),
                           "out_ptr": nl.pointer_type(nl.float32), "n_elements": nl.int32}
    assert s.constexprs == {"BLOCK_SIZE": 32}
    assert s.divisibility == {"x_ptr": 16, "y_ptr": 16, "out_ptr": 16, "n_elements": 16}
    assert s.runtime_names == ["x_ptr", "y_ptr", "out_ptr", "n_elements"]


def test_int_equal_to_one_becomes_constexpr():
    x = torch.empty(4)
    s = sp.specialize(K.add_kernel, (x, x, x, 1), {"BLOCK_SIZE": 32})
    assert s.constexprs == {"n_elements": 1, "BLOCK_SIZE": 32}
    assert "n_elements" not in s.arg_types and "n_elements" not in s.runtime_names


def test_unaligned_pointer_and_odd_int_get_no_hint():
    x = torch.empty(64)
    s = sp.specialize(K.add_kernel, (x[1:], x, x, 63), {"BLOCK_SIZE": 32})
    assert "x_ptr" not in s.divisibility and "n_elements" not in s.divisibility
    assert s.divisibility == {"y_ptr": 16, "out_ptr": 16}


def test_int_widths():
    x = torch.empty(4)
    for v, ty in [(2 ** 31 - 1, nl.int32), (-(2 ** 31), nl.int32), (2 ** 31, nl.uint32), (2 ** 32, nl.int64),
                  (-(2 ** 31) - 1, nl.int64), (2 ** 63, nl.uint64)]:
        assert sp.specialize(K.add_kernel, (x, x, x, v), {"BLOCK_SIZE": 8}).arg_types["n_elements"] == ty
    with pytest.raises(TypeError, match="n_elements.*does not fit in 64 bits"):
        sp.specialize(K.add_kernel, (x, x, x, 2 ** 64), {"BLOCK_SIZE": 8})


def test_do_not_specialize():
    x = torch.empty(64)
    s = sp.specialize(K.dns_kernel, (x, 1), {"BLOCK": 16})
    assert s.arg_types["n"] == nl.int32 and "n" not in s.constexprs
    s = sp.specialize(K.dns_kernel, (x, 32), {"BLOCK": 16})
    assert "n" not in s.divisibility
    assert K.dns_kernel.do_not_specialize == {"n"}
    by_index = newt.jit(do_not_specialize=[1])(K.dns_kernel.fn)
    assert by_index.do_not_specialize == {"n"}
    with pytest.raises(ValueError, match="no parameter 'm'"):
        newt.jit(do_not_specialize=["m"])(K.dns_kernel.fn)


def test_scalar_kinds_and_defaults():
    x = torch.empty(16)
    s = sp.specialize(K.scalars_kernel, (x, 1.5, 3, True), {})
    assert s.arg_types["a"] == nl.float32 and s.arg_types["b"] == nl.int32 and s.arg_types["flag"] == nl.int1
    assert s.constexprs == {"BLOCK": 16}  # the default value


@pytest.mark.parametrize("dtype,nl_dtype", [(torch.float16, nl.float16), (torch.bfloat16, nl.bfloat16),
                                           (torch.int8, nl.int8), (torch.int64, nl.int64), (torch.bool, nl.int1),
                                           (torch.uint8, nl.uint8), (torch.float64, nl.float64)])
def test_tensor_dtypes(dtype, nl_dtype):
    x = torch.empty(16, dtype=dtype)
    s = sp.specialize(K.add_kernel, (x, x, x, 16), {"BLOCK_SIZE": 16})
    assert s.arg_types["x_ptr"] == nl.pointer_type(nl_dtype)


def test_unsupported_tensor_dtype_names_the_parameter():
    x = torch.empty(4, dtype=torch.complex64)
    y = torch.empty(4)
    with pytest.raises(TypeError, match="argument 'x_ptr'.*complex64"):
        sp.specialize(K.add_kernel, (x, y, y, 4), {"BLOCK_SIZE": 4})


def test_implicit_constexprs():
    x = torch.empty(16)
    s = sp.specialize(K.add_kernel, (x, x, x, nl.constexpr(16)), {"BLOCK_SIZE": 16})
    assert s.constexprs["n_elements"] == 16
    s = sp.specialize(K.add_kernel, (x, x, x, None), {"BLOCK_SIZE": 16})
    assert s.constexprs["n_elements"] is None


# --- the TypeErrors of a bad launch, raised before anything is compiled -------------------


@pytest.fixture
def no_compile(monkeypatch):
    from newt.runtime import compiler

    def boom(*a, **k):
        raise AssertionError("nothing may be compiled for a bad launch")
    monkeypatch.setattr(compiler, "build", boom)


def test_missing_argument_names_the_parameter(no_compile):
    x = torch.empty(16)
    with pytest.raises(TypeError, match=r"add_kernel\(\) missing 1 required argument: 'n_elements'"):
        K.add_kernel[(1,)](x, x, x, BLOCK_SIZE=16)


def test_too_many_arguments(no_compile):
    x = torch.empty(16)
    with pytest.raises(TypeError, match=r"add_kernel\(\) takes 5 arguments "
                                        r"\(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE\) but 6 were given"):
        K.add_kernel[(1,)](x, x, x, 16, 16, 3)


def test_unexpected_keyword(no_compile):
    x = torch.empty(16)
    with pytest.raises(TypeError, match=r"add_kernel\(\) got an unexpected keyword argument 'BLOCK' "
                                        r"\(did you mean 'BLOCK_SIZE'\?\)"):
        K.add_kernel[(1,)](x, x, x, 16, BLOCK=16)
    with pytest.raises(TypeError, match="got multiple values for argument 'n_elements'"):
        K.add_kernel[(1,)](x, x, x, 16, n_elements=16, BLOCK_SIZE=16)


def test_bad_argument_type_names_the_parameter(no_compile):
    x = torch.empty(16)
    with pytest.raises(TypeError, match=r"add_kernel\(\): argument 'n_elements': cannot pass a list"):
        K.add_kernel.warmup(x, x, x, [16], BLOCK_SIZE=16)
    with pytest.raises(TypeError, match=r"argument 'y_ptr': cannot pass a dict"):
        K.add_kernel.warmup(x, {}, x, 16, BLOCK_SIZE=16)


def test_cpu_tensor_is_refused_before_launch(no_compile, fake_gpu):
    x = torch.empty(16)
    with pytest.raises(ValueError, match="argument 'x_ptr' is a tensor on cpu.*NEWT_INTERPRET"):
        K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)


def test_bad_launch_options(no_compile):
    x = torch.empty(16)
    with pytest.raises(ValueError, match="num_warps must be a power of two"):
        K.add_kernel.warmup(x, x, x, 16, BLOCK_SIZE=16, num_warps=3)
    with pytest.raises(ValueError, match="num_stages must be an int >= 1"):
        K.add_kernel.warmup(x, x, x, 16, BLOCK_SIZE=16, num_stages=0)
    with pytest.raises(ValueError, match="thread-block clusters are not supported"):
        K.add_kernel.warmup(x, x, x, 16, BLOCK_SIZE=16, num_ctas=2)


def test_calling_a_kernel_directly_explains():
    with pytest.raises(nl.core.NewtUsageError, match=r"launch it with add_kernel\[grid\]"):
        K.add_kernel(1, 2)


def test_parameter_named_like_a_launch_option_is_both():
    """Triton's softmax tutorial has a constexpr named num_stages: the value serves both roles."""
    fast = build_fast_path(K.stages_kernel)
    assert "num_stages=None" not in fast.__newt_source__.split(":")[0]


def test_reserved_parameter_names():
    def k(grid):
        pass
    with pytest.raises(ValueError, match="'grid' clashes with the launch option"):
        build_fast_path(newt.jit(k))


# --- the inline fast path and key_entries agree ---------------------------------------------


def _fast_key(kernel, *args, **kwargs):
    """Run the generated fast path up to the cache lookup and return the key it computed."""
    seen = {}

    class Stop(Exception):
        pass

    fast = build_fast_path(kernel)

    def miss(key, dev, values, nw, ns, nc, warmup, cooperative=False, maxnreg=None):
        seen["key"] = key
        raise Stop
    fast.__globals__["_nwt_miss"] = miss
    fast.__globals__["_nwt_cache"] = {}
    with pytest.raises(Stop):
        fast((1,), *args, warmup=True, **kwargs)
    return seen["key"]


@given(st.one_of(st.integers(min_value=-(2 ** 64), max_value=2 ** 64 - 1), st.sampled_from([0, 1, -1, 16, -16])))
def test_inline_int_entries_match_key_entries(v):
    x = torch.empty(16)
    try:
        expect = sp.key_entries("add_kernel", "n_elements", v, False)
    except TypeError:
        with pytest.raises(TypeError, match="n_elements"):
            _fast_key(K.add_kernel, x, x, x, v, BLOCK_SIZE=16)
        return
    key = _fast_key(K.add_kernel, x, x, x, v, BLOCK_SIZE=16)
    assert key[6:8] == expect[1:]
    dkey = _fast_key(K.dns_kernel, x, v, BLOCK=16)
    assert dkey[2:4] == sp.key_entries("dns_kernel", "n", v, True)[1:]


def test_inline_tensor_entries_match_key_entries():
    x = torch.empty(64, dtype=torch.float16)
    for t in (x, x[1:], x[8:]):
        key = _fast_key(K.add_kernel, t, t, t, 16, BLOCK_SIZE=16)
        assert key[0:2] == sp.key_entries("k", "x", t, False)[1:]
    # a tensor subclass goes through key_entries and gets the same key as a plain tensor
    p = torch.nn.Parameter(torch.empty(64))
    assert _fast_key(K.add_kernel, p, p, p, 16, BLOCK_SIZE=16)[:2] == (torch.float32, True)


def test_key_distinguishes_constexpr_types_and_options():
    x = torch.empty(16)
    k1 = _fast_key(K.add_kernel, x, x, x, 16, BLOCK_SIZE=16)
    k2 = _fast_key(K.add_kernel, x, x, x, 16, BLOCK_SIZE=16.0)
    k3 = _fast_key(K.add_kernel, x, x, x, 16, BLOCK_SIZE=16, num_warps=8)
    k4 = _fast_key(K.add_kernel, x, x, x, 16, BLOCK_SIZE=16, num_stages=2)
    assert len({k1, k2, k3, k4}) == 4


def test_warmup_accepts_dtypes_like_aligned_tensors():
    x = torch.empty(16, dtype=torch.float16)
    assert _fast_key(K.add_kernel, torch.float16, x, x, 16, BLOCK_SIZE=16) == \
        _fast_key(K.add_kernel, x, x, x, 16, BLOCK_SIZE=16)
