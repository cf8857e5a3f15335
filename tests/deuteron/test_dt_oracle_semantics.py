"""deuteron's kernel computes what its oracle ``kernel.ref`` (eager PyTorch) computes (issue 22, items 8-12):
NaN propagates through relu / clamp / maximum / amax / .min() / argmax; bool + bool is a logical or; integer ``//``
and ``%`` floor; a whole-dimension slice of a dimension of 0 elements is read masked; an output whose elements
share memory is refused at the call.  A property test runs random programs over NaN, +-inf, bools and negative
integers on the interpreter against ``kernel.ref``: no disagreement."""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import textwrap

import pytest
import torch
from dt_helpers import HEADER, raises_at, write_module
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import deuteron as dt

NAN, INF = float("nan"), float("inf")


def _same(got, want):
    if isinstance(got, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    if got.dtype.is_floating_point:
        torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-6)
    else:
        assert torch.equal(got, want), (got, want)


def _special_rows():
    x = torch.randn(6, 20, generator=torch.Generator().manual_seed(1))
    x[0, 3] = NAN
    x[1, 0], x[1, 19] = NAN, NAN
    x[2, 5] = INF
    x[3, 7], x[3, 8] = -INF, NAN
    x[4, :] = NAN
    return x


@dt.kernel
def nan_ops(x):
    m, n = x.size()
    ew = torch.empty_like(x)
    rows = torch.empty([m, 4], dtype=x.dtype, device=x.device)
    idx = torch.empty([m, 3], dtype=torch.int64, device=x.device)
    for t in dt.tile(m):
        r = x[t, :]
        ew[t, :] = torch.relu(r) + torch.clamp(r, -0.5, 0.5) + torch.maximum(r, r * 0.5) + torch.minimum(r, r * 0.25)
        rows[t, 0] = torch.amax(r, dim=1)
        rows[t, 1] = r.min(dim=1).values
        rows[t, 2] = torch.amin(r, dim=1)
        rows[t, 3] = r.max(dim=1).values
        idx[t, 0] = torch.argmax(r, dim=1)
        idx[t, 1] = torch.argmin(r, dim=1)
        idx[t, 2] = r.max(dim=1).indices
    return ew, rows, idx


@pytest.mark.parametrize("cfg", [None, dict(block_sizes=[2]), dict(block_sizes=[4])])
def test_nan_propagates_like_pytorch(cfg):
    x = _special_rows()
    got = nan_ops(x) if cfg is None else nan_ops.run_with(cfg, x)
    _same(got, nan_ops.ref(x))
    assert torch.isnan(got[1][0, 0]) and int(got[2][0, 0]) == 3  # NaN wins amax; argmax points at it
    src = nan_ops.to_newt_source(x)
    assert "propagate_nan=nl.PropagateNan.ALL" in src and "_dt_max_nan" in src


@dt.kernel
def looped_minmax(x):
    m, n = x.size()
    hi = torch.empty([m], dtype=x.dtype, device=x.device)
    lo = torch.empty([m], dtype=x.dtype, device=x.device)
    for t in dt.tile(m):
        r = x[t, :]
        hi[t] = torch.amax(r, dim=1)
        lo[t] = torch.amin(r, dim=1)
    return hi, lo


def test_nan_propagates_through_a_looped_reduction():
    x = torch.randn(8, 100)
    x[1, 3], x[2, 99], x[5, 50] = NAN, NAN, INF
    cfg = dict(block_sizes=[4], reduction_loops=[16])
    _same(looped_minmax.run_with(cfg, x), looped_minmax.ref(x))
    src = looped_minmax.to_newt_source(x, config=cfg)
    assert "for roff_r0 in range(0, 100, _RBLOCK_0)" in src and "_dt_min_nan" in src


def test_integers_keep_their_semantics():
    """No NaN for ints: maximum / amax / argmax of ints generate what they did (no propagate_nan)."""
    @dt.kernel
    def ints(x):
        out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
        for t in dt.tile(x.size(0)):
            out[t] = torch.amax(torch.relu(x[t, :]), dim=1) + torch.argmax(x[t, :], dim=1).to(x.dtype)
        return out
    x = torch.randint(-9, 9, (8, 16), dtype=torch.int32)
    _same(ints(x), ints.ref(x))
    src = ints.to_newt_source(x)
    assert "propagate_nan" not in src and "nl.max(" in src and "nl.argmax(" in src


@dt.kernel
def bools(a, b):
    s = torch.empty_like(a)
    p = torch.empty_like(a)
    for t in dt.tile(a.size(0)):
        s[t] = a[t] + b[t]
        p[t] = a[t] * b[t]
    return s, p


def test_bool_plus_bool_is_or():
    a = torch.tensor([True, True, False, False] * 4)
    b = torch.tensor([True, False, True, False] * 4)
    got = bools(a, b)
    _same(got, bools.ref(a, b))
    assert bool(got[0][0])  # True + True is True, as in PyTorch


def test_bool_minus_bool_is_refused_like_pytorch(tmp_path):
    mod = write_module(tmp_path, "bool_sub", """
        @dt.kernel
        def k(a, b):
            out = torch.empty_like(a)
            for t in dt.tile(a.size(0)):
                out[t] = a[t] - b[t]
            return out
        """)
    a = torch.tensor([True, False])
    e = raises_at(mod, lambda: mod.k(a, a), "D004", "out[t] = a[t] - b[t]")
    assert "bool" in e.diagnostics[0].message
    with pytest.raises(RuntimeError):
        mod.k.ref(a, a)  # PyTorch refuses it too


@dt.kernel
def divmod_(x, y):
    q = torch.empty_like(x)
    r = torch.empty_like(x)
    c = torch.empty_like(x)
    f = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        a, b = x[t], y[t]
        q[t] = a // b
        r[t] = a % b
        c[t] = torch.remainder(a, 3) + torch.floor_divide(a, -4) + torch.div(a, b, rounding_mode="floor")
        f[t] = torch.fmod(a, b) + t.index // 3 + t.begin % 5
    return q, r, c, f


def test_integer_floor_division_and_remainder_floor():
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-50, 50, (96,), generator=g, dtype=torch.int32)
    y = torch.randint(1, 9, (96,), generator=g, dtype=torch.int32) * (torch.randint(0, 2, (96,), generator=g) * 2 - 1)
    y = y.to(torch.int32)
    _same(divmod_(x, y), divmod_.ref(x, y))
    src = divmod_.to_newt_source(x, y)
    assert "(offs_t // 3)" in src and "(begin_t % 5)" in src  # provably non-negative: C's // is floor there


def test_a_whole_slice_of_a_zero_size_dimension_is_masked():
    @dt.kernel
    def rowsum(x):
        out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
        for t in dt.tile(x.size(0)):
            out[t] = x[t, :].sum(dim=1)
        return out
    x = torch.empty(8, 0)
    _same(rowsum(x), rowsum.ref(x))
    src = rowsum.to_newt_source(x)
    assert "mask_r0 = offs_r0 < 0" in src and "mask=mask_r0[None, :]" in src


def test_an_output_whose_elements_share_memory_is_refused(tmp_path):
    mod = write_module(tmp_path, "aliased_out", """
        @dt.kernel
        def fill(x, out):
            for t in dt.tile(x.size(0)):
                out[t, :] = x[t, :]
            return out

        @dt.kernel
        def count(x, hist):
            for t in dt.tile(x.size(0)):
                dt.atomic_add(hist, [t], 1)
            return hist
        """)
    x = torch.randn(4, 8)
    e = raises_at(mod, lambda: mod.fill(x, torch.zeros(4, 1).expand(4, 8)), "D004", "out[t, :] = x[t, :]")
    assert "share memory" in e.diagnostics[0].message and "strides (1, 0)" in e.diagnostics[0].message
    raises_at(mod, lambda: mod.count(x, torch.zeros(1, dtype=torch.int32).expand(4)), "D004",
              "dt.atomic_add(hist, [t], 1)")
    assert torch.equal(mod.fill(x, torch.zeros(4, 8)), x)  # a tensor of its own is fine, stride 0 of size 1 too
    mod.fill(x[:1], torch.zeros(1, 8).expand(1, 8))


# ---------------------------------------------------------------------------- the property test

_counter = itertools.count()
_DIR = tempfile.mkdtemp(prefix="dt_semantics_")

FLOAT_LEAVES = ["x[t, :]", "y[t, :]", "0.5", "-2.0"]
FLOAT_UNARY = ["torch.relu({})", "torch.clamp({}, -1.0, 1.0)", "torch.abs({})", "-({})", "torch.clamp({}, min=0.0)",
               "torch.nn.functional.relu({})", "({}).clamp(max=0.5)"]
FLOAT_BINARY = ["({}) + ({})", "({}) - ({})", "({}) * ({})", "torch.maximum({}, {})", "torch.minimum({}, {})",
                "torch.where(({}) > 0, {}, {})", "torch.max({}, {})"]
FLOAT_REDUCE = ["torch.amax({}, dim=1)", "torch.amin({}, dim=1)", "({}).max(dim=1).values", "({}).min(dim=1).values",
                "({}).sum(dim=1)", "torch.argmax({}, dim=1).to(torch.float32)",
                "torch.argmin({}, dim=1).to(torch.float32)", "({}).max(dim=1).indices.to(torch.float32)"]
INT_LEAVES = ["x[t, :]", "y[t, :]", "3", "-2"]
INT_DIVISORS = ["y[t, :]", "3", "-4", "(torch.abs(y[t, :]) + 1)"]
INT_UNARY = ["torch.abs({})", "-({})", "torch.clamp({}, -5, 5)", "torch.relu({})"]
INT_BINARY = ["({}) + ({})", "({}) - ({})", "({}) * ({})", "torch.maximum({}, {})", "torch.minimum({}, {})"]
INT_DIV = ["({}) // {}", "({}) % {}", "torch.remainder({}, {})", "torch.floor_divide({}, {})",
           "torch.fmod({}, {})", "torch.div({}, {}, rounding_mode='floor')"]
INT_REDUCE = ["torch.amax({}, dim=1)", "torch.amin({}, dim=1)", "({}).sum(dim=1).to(torch.int32)",
              "torch.argmax({}, dim=1).to(torch.int32)", "({}).min(dim=1).values"]
BOOL_LEAVES = ["a[t, :]", "b[t, :]", "(x[t, :] > 0)"]
BOOL_BINARY = ["({}) + ({})", "({}) * ({})", "({}) & ({})", "({}) | ({})", "({}) ^ ({})",
               "torch.logical_and({}, {})", "torch.logical_or({}, {})", "({}) == ({})"]
BOOL_UNARY = ["~({})", "torch.logical_not({})"]


@st.composite
def _expr(draw, kind, depth):
    leaves, unary, binary = {"float": (FLOAT_LEAVES, FLOAT_UNARY, FLOAT_BINARY),
                             "int": (INT_LEAVES, INT_UNARY, INT_BINARY),
                             "bool": (BOOL_LEAVES, BOOL_UNARY, BOOL_BINARY)}[kind]
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(leaves[:2]))
    r = draw(st.integers(0, 9))
    if r < 3:
        return draw(st.sampled_from(unary)).format(draw(_expr(kind, depth - 1)))
    if kind == "int" and r < 5:
        return draw(st.sampled_from(INT_DIV)).format(draw(_expr(kind, depth - 1)), draw(st.sampled_from(INT_DIVISORS)))
    tmpl = draw(st.sampled_from(binary))
    tensors_only = tmpl.startswith(("torch.maximum", "torch.minimum", "torch.max(", "torch.logical"))
    args = [draw(_expr(kind, depth - 1)) if tensors_only or draw(st.booleans()) else draw(st.sampled_from(leaves))
            for _ in range(tmpl.count("{}"))]
    args[0] = draw(_expr(kind, depth - 1))  # a value of the kernel first (torch.maximum(0.5, -2.0) is no program)
    return tmpl.format(*args)


@st.composite
def _program(draw, kind, reduced=False):
    e = draw(_expr(kind, 3))
    reduce_ = {"float": FLOAT_REDUCE, "int": INT_REDUCE, "bool": ()}[kind]
    red = draw(st.sampled_from(reduce_)).format(e) if reduced else None
    return kind, e, red


def _inputs(kind, seed):
    g = torch.Generator().manual_seed(seed)
    if kind == "int":
        x = torch.randint(-20, 20, (8, 16), generator=g, dtype=torch.int32)
        y = torch.randint(1, 7, (8, 16), generator=g, dtype=torch.int32) * (torch.randint(0, 2, (8, 16), generator=g,
                                                                                          dtype=torch.int32) * 2 - 1)
        return {"x": x, "y": y.to(torch.int32)}
    x = torch.randn(8, 16, generator=g)
    y = torch.randn(8, 16, generator=g)
    specials = torch.tensor([NAN, INF, -INF, 0.0, -0.0])
    for t in (x, y):
        pos = torch.randint(0, 8 * 16, (12,), generator=g)
        t.view(-1)[pos] = specials[torch.randint(0, 5, (12,), generator=g)]
    if kind == "float":
        return {"x": x, "y": y}
    return {"a": torch.rand(8, 16, generator=g) > 0.5, "b": torch.rand(8, 16, generator=g) > 0.5, "x": x}


def _build(kind, e, red):
    """The program as a module: the expression's value stored row by row (a block, or a reduction per row)."""
    params = {"float": "x, y", "int": "x, y", "bool": "a, b, x"}[kind]
    first = params.split(",")[0].strip()
    value = e if red is None else red
    out_shape = "[m, n]" if red is None else "[m]"
    index = "out[t, :]" if red is None else "out[t]"
    # the output's dtype: what eager PyTorch gives for the expression on the inputs (kernel.ref decides it too)
    src = HEADER + textwrap.dedent(f"""
        def _dtype({params}):
            t = slice(None)
            m, n = {first}.size()

            return ({value.replace('[t, :]', '[:, :]')}).dtype

        @dt.kernel
        def k({params}):
            m, n = {first}.size()
            out = torch.empty({out_shape}, dtype=_dtype({params}), device={first}.device)
            for t in dt.tile(m):
                {index} = {value}
            return out
        """)
    name = f"dt_sem_{next(_counter)}"
    path = os.path.join(_DIR, name + ".py")
    with open(path, "w") as f:
        f.write(src)
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod, src


def _check_program(prog, seed, blocks):
    kind, e, red = prog
    mod, src = _build(kind, e, red)
    args = _inputs(kind, seed)
    vals = [args[p] for p in ("x", "y") if kind != "bool"] or [args["a"], args["b"], args["x"]]
    try:
        want = mod.k.ref(*vals)
    except (RuntimeError, TypeError):  # eager PyTorch refuses the program itself: nothing to agree with
        event("refused by eager PyTorch")
        return
    event(f"{kind} program" + (" with a reduction" if red else ""))
    got = mod.k(*vals) if blocks is None else mod.k.run_with(dict(block_sizes=blocks), *vals)
    try:
        _same(got, want)
    except AssertionError as ex:
        raise AssertionError(f"the kernel and kernel.ref disagree on\n{src}\n{ex}") from None


# 40 random programs per test where the slow tests run (`-m slow`, `./dev test`), 20 in the default run
_SETTINGS = settings(max_examples=40 if os.environ.get("NEWT_TESTS_EXAMPLES", "full") == "full" else 20,
                     deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_BLOCKS = st.sampled_from([None, [2], [8]])


@_SETTINGS
@given(_program("float"), st.integers(0, 2**16), _BLOCKS)
def test_random_float_programs_with_nan_and_inf_agree_with_kernel_ref(prog, seed, blocks):
    _check_program(prog, seed, blocks)


@_SETTINGS
@given(_program("int"), st.integers(0, 2**16), _BLOCKS)
def test_random_integer_programs_with_negative_values_agree_with_kernel_ref(prog, seed, blocks):
    _check_program(prog, seed, blocks)


@_SETTINGS
@given(_program("bool"), st.integers(0, 2**16), _BLOCKS)
def test_random_bool_programs_agree_with_kernel_ref(prog, seed, blocks):
    _check_program(prog, seed, blocks)


@_SETTINGS
@given(_program("float", reduced=True), st.integers(0, 2**16), _BLOCKS)
def test_random_float_reductions_with_nan_and_inf_agree_with_kernel_ref(prog, seed, blocks):
    _check_program(prog, seed, blocks)


@_SETTINGS
@given(_program("int", reduced=True), st.integers(0, 2**16), _BLOCKS)
def test_random_integer_reductions_agree_with_kernel_ref(prog, seed, blocks):
    _check_program(prog, seed, blocks)


# ---------------------------------------------------------------------------- on the device


@pytest.mark.gpu
def test_the_same_on_cuda():
    """The generated CUDA agrees with kernel.ref too (fmax_nan, the NaN combine of nl.reduce, the floor fix-up)."""
    x = _special_rows().cuda()
    _same(nan_ops(x), nan_ops.ref(x))
    xl = torch.randn(8, 100, device="cuda")
    xl[1, 3], xl[2, 99] = NAN, NAN
    _same(looped_minmax.run_with(dict(block_sizes=[4], reduction_loops=[16]), xl), looped_minmax.ref(xl))
    g = torch.Generator().manual_seed(3)
    xi = torch.randint(-50, 50, (96,), generator=g, dtype=torch.int32).cuda()
    yi = (torch.randint(1, 9, (96,), generator=g, dtype=torch.int32) * -1).cuda()
    _same(divmod_(xi, yi), divmod_.ref(xi, yi))
    a = (torch.rand(64, device="cuda") > 0.5)
    _same(bools(a, ~a | a), bools.ref(a, ~a | a))


@pytest.mark.gpu
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["float", "int", "bool"]).flatmap(lambda k: _program(k, reduced=k != "bool")),
       st.integers(0, 2**16))
def test_random_programs_agree_with_kernel_ref_on_cuda(prog, seed):
    kind, e, red = prog
    mod, src = _build(kind, e, red)
    vals = [v.cuda() for v in _inputs(kind, seed).values()]
    vals = vals if kind == "bool" else vals[:2]
    try:
        want = mod.k.ref(*vals)
    except (RuntimeError, TypeError):
        return
    try:
        _same(mod.k(*vals), want)
    except AssertionError as ex:
        raise AssertionError(f"the kernel and kernel.ref disagree on CUDA on\n{src}\n{ex}") from None
