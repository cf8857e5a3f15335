"""Named tuples in kernels (arguments, construction, field access, through constexpr functions), isinstance on
run-time values, split/interleave down to scalars, and pointers stored as 64-bit integers (``nl.pi32_t``)."""

from __future__ import annotations

from typing import NamedTuple

import pytest
import torch

import newt
import newt.language as nl


class View(NamedTuple):
    ptr: object
    shape: tuple
    stride: tuple


class Scaled(NamedTuple):
    fn: nl.constexpr
    args: tuple


class Pair(NamedTuple):
    lo: object
    hi: object = 7


@newt.jit
def _make_view(ptr, shape, stride):
    return View(shape=shape, ptr=ptr, stride=stride)


@newt.jit
def _inside(v, BM: nl.constexpr, BN: nl.constexpr):
    return (nl.arange(0, BM)[:, None] < v.shape[0]) & (nl.arange(0, BN)[None, :] < v.shape[1])


@newt.jit
def _times(x, s_ptr):
    return x * nl.load(s_ptr)


@newt.jit
def _copy_scaled(src, dst, op, BM: nl.constexpr, BN: nl.constexpr):
    s = _make_view(src.ptr, src.shape, src.stride)  # a named tuple built in a kernel, returned by a helper
    rm = nl.arange(0, BM)[:, None]
    rn = nl.arange(0, BN)[None, :]
    x = nl.load(s.ptr + rm * s.stride[0] + rn * s.stride[1], mask=_inside(s, BM, BN), other=0.0)
    y = op.fn(x, *op.args)
    nl.store(dst.ptr + rm * dst.stride[0] + rn * dst.stride[1], y, mask=_inside(dst, BM, BN))


def test_namedtuple_arguments_fields_and_construction(backend):
    x = torch.randn(24, 20)
    y = torch.zeros(12, 8)
    s = torch.tensor([2.5])
    xd, yd, sd = backend.put(x, y, s)
    src = View(xd, tuple(xd.shape), tuple(xd.stride()))
    dst = View(yd, tuple(yd.shape), tuple(yd.stride()))
    backend.launch(_copy_scaled, (1,), src, dst, Scaled(_times, (sd,)), BM=32, BN=32)
    assert torch.equal(backend.get(yd), x[:12, :8] * 2.5)


@newt.constexpr_function
def _passthrough(t):
    return t


@newt.jit
def _defaults_and_constexpr(out_ptr):
    p = Pair(3)  # the class's default fills hi
    q = _passthrough(Pair(lo=1, hi=2))  # a named tuple through a constexpr function keeps its fields
    nl.static_assert(q.hi == 2)
    nl.store(out_ptr + nl.arange(0, 2), nl.join(nl.full((), p.lo, nl.int32), nl.full((), p.hi + q.lo, nl.int32)))


def test_namedtuple_defaults_and_constexpr_functions(backend):
    out = backend.zeros(2, dtype=torch.int32)
    backend.launch(_defaults_and_constexpr, (1,), out)
    assert backend.get(out).tolist() == [3, 8]


@newt.jit
def _typo(o_ptr):
    p = Pair(o_ptr, 4)
    nl.store(p.low, p.hi)


def test_unknown_field_is_an_error():
    from newt.frontend import CompilationError, build_ir
    with pytest.raises(CompilationError, match=r"N004.*has no field 'low' \(its fields: lo, hi\)") as ei:
        build_ir(_typo, dict(o_ptr=nl.pointer_type(nl.int32)), {})
    d = ei.value.diagnostics[0]
    assert "did you mean .lo" in d.hint and d.span.col == 14


@newt.jit
def _split_join_scalars(x_ptr, a, b, o1, o2, o3):
    x = nl.load(x_ptr + nl.arange(0, 2))
    u, v = nl.split(x)
    nl.static_assert(isinstance(u, nl.tensor) and not isinstance(u, tuple))
    nl.static_assert(u.shape == () and v.shape == ())
    nl.store(o1, u)
    nl.store(o2, v)
    z = nl.interleave(a, b)  # two scalars give a block of two
    nl.static_assert(z.shape == (2,))
    nl.store(o3 + nl.arange(0, 2), z)


def test_split_and_interleave_scalars(backend):
    x = torch.tensor([5.0, 9.0])
    o1, o2, o3 = backend.zeros(1), backend.zeros(1), backend.zeros(2, dtype=torch.int32)
    backend.launch(_split_join_scalars, (1,), backend.put(x), 10, 20, o1, o2, o3)
    assert backend.get(o1).item() == 5.0 and backend.get(o2).item() == 9.0
    assert backend.get(o3).tolist() == [10, 20]


@newt.jit
def _isinstance_kernel(x_ptr, t, out_ptr):
    x = nl.load(x_ptr)
    nl.static_assert(isinstance(x, nl.tensor))
    nl.static_assert(isinstance(t, tuple) and isinstance(t, (nl.tensor, tuple)))
    nl.static_assert(isinstance(t, Pair) and not isinstance(x, Pair))
    nl.store(out_ptr, x + t.lo + t.hi)


def test_isinstance_on_run_time_values(backend):
    out = backend.zeros(1)
    backend.launch(_isinstance_kernel, (1,), backend.put(torch.tensor([1.0])), Pair(2, 3), out)
    assert backend.get(out).item() == 6.0


@newt.jit
def _select_pointers(c_ptr, a_ptr, b_ptr, out_ptr, N: nl.constexpr):
    offs = nl.arange(0, N)
    a = nl.load(a_ptr + offs).to(nl.pi32_t)  # int64 addresses as pointers
    b = nl.load(b_ptr + offs).to(nl.pi32_t)
    nl.store(out_ptr + offs, nl.where(nl.load(c_ptr + offs) != 0, a, b))  # stored back as int64


def test_pointers_stored_as_int64(backend):
    assert nl.pi32_t == nl.pointer_type(nl.int32)
    a = torch.arange(8, dtype=torch.int64) * 4096
    b = -torch.arange(8, dtype=torch.int64)
    c = torch.tensor([1, 0] * 4, dtype=torch.int8)
    out = backend.zeros(8, dtype=torch.int64)
    backend.launch(_select_pointers, (1,), *backend.put(c, a, b), out, N=8)
    assert torch.equal(backend.get(out), torch.where(c != 0, a, b))


def test_storing_a_pointer_into_narrow_ints_is_an_error():
    from newt.frontend import CompilationError, build_ir
    P = nl.pointer_type
    with pytest.raises(CompilationError, match="cannot store a pointer into memory of nl.int32"):
        build_ir(_select_pointers, dict(c_ptr=P(nl.int8), a_ptr=P(nl.int64), b_ptr=P(nl.int64),
                                        out_ptr=P(nl.int32)), dict(N=8))


def test_surface_compiles_for_sm80_and_sm90a():
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.frontend import build_ir
    P = nl.pointer_type
    for target in ("sm_80", "sm_90a"):
        for fn, types, cx in (
                (_select_pointers, dict(c_ptr=P(nl.int8), a_ptr=P(nl.int64), b_ptr=P(nl.int64),
                                        out_ptr=P(nl.int64)), dict(N=8)),
                (_split_join_scalars, dict(x_ptr=P(nl.float32), a=nl.int32, b=nl.int32, o1=P(nl.float32),
                                           o2=P(nl.float32), o3=P(nl.int32)), {}),
                (_defaults_and_constexpr, dict(out_ptr=P(nl.int32)), {})):
            assert compile_cuda(generate_cuda(build_ir(fn, types, cx), target, 4, 3), target).cubin
