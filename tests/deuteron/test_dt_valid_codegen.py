"""Property: a random tile program from the supported surface either traces to newt that newt accepts (front end,
and CUDA C++ -> cubin through NVRTC offline for sm_80), or gets a D-error at the user's line -- never a newt error
on generated code, never a crash (issue 12)."""

from __future__ import annotations

import itertools

import pytest
import torch
from dt_helpers import write_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import newt
from deuteron.kernel import Kernel, binaries_for, build_ir_for

_count = itertools.count()

ELEMENTWISE = ["torch.exp({a})", "torch.sigmoid({a})", "({a}) * ({b})", "({a}) + ({b})", "torch.maximum({a}, {b})",
               "torch.where(({a}) > 0, {a}, {b})", "torch.nn.functional.silu({a})", "({a}).to(torch.float16)",
               "torch.tanh({a}) - ({b})", "({a}) / (torch.abs({b}) + 1.0)"]

PROGRAMS = {
    # an elementwise map over a 2-D tile grid
    "map": ("""
@dt.kernel
def k(x, y):
    m, n = x.shape
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tm, tn in dt.tile([m, n]):
        a = x[tm, tn]
        b = y[tm, tn]
        out[tm, tn] = ({e}).to(torch.float32)
    return out
""", lambda m, n, k, dt: (torch.randn(m, n).to(dt), torch.randn(m, n).to(dt))),
    # random numbers next to loaded values
    "random": ("""
@dt.kernel
def k(x, y):
    m, n = x.shape
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tm, tn in dt.tile([m, n]):
        a = x[tm, tn]
        b = dt.rand([tm, tn], seed=3) - dt.randint([tm, tn], 0, 5, seed=4).to(torch.float32) + y[tm, tn]
        out[tm, tn] = ({e}).to(torch.float32)
    return out
""", lambda m, n, k, dt: (torch.randn(m, n).to(dt), torch.randn(m, n).to(dt))),
    # dt.load of a column tile running past x's end (Helion's masked concatenation), over a 4-D grid
    "concat4d": ("""
@dt.kernel
def k(x, y):
    m, n = x.shape
    x4 = x.view(1, 1, m, n)
    y4 = y.view(1, 1, m, n)
    out = torch.empty([1, 1, m, 2 * n], dtype=torch.float32, device=x.device)
    for tp, tq, tm, tn in dt.tile(out.size()):
        a = dt.load(x4, [tp, tq, tm, tn], extra_mask=(tn.index < n)[None, None, None, :]).to(torch.float32)
        b = dt.load(y4, [tp, tq, tm, tn.index - n], extra_mask=(tn.index >= n)[None, None, None, :]).to(torch.float32)
        out[tp, tq, tm, tn] = ({e}).to(torch.float32)
    return out
""", lambda m, n, k, dt: (torch.randn(m, n).to(dt), torch.randn(m, n).to(dt))),
    # a batched score matmul through torch.bmm's out_dtype
    "bmm_out": ("""
@dt.kernel
def k(x, y):
    m, kk = x.shape
    _, n = y.shape
    x3 = x.view(1, m, kk)
    y3 = y.view(1, kk, n)
    out = torch.empty([1, m, n], dtype=torch.float32, device=x.device)
    for tb, tm, tn in dt.tile([1, m, n], block_size=[1, None, None]):
        a = torch.bmm(x3[tb, tm, :], y3[tb, :, tn], torch.float32)
        b = a * 0.25
        out[tb, tm, tn] = ({e}).to(torch.float32)
    return out
""", lambda m, n, k, dt: (torch.randn(m, k).to(dt), torch.randn(k, n).to(dt))),
    # a user combine function: a tuple reduce and a scan over whole rows
    "combine": ("""
def _add(p, q):
    return p + q


def _pick(v0, w0, v1, w1):
    keep = v1 > v0
    return torch.where(keep, v1, v0), torch.where(keep, w1, w0)


@dt.kernel
def k(x, y):
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        a = x[tm, :].to(torch.float32)
        b = dt.associative_scan(_add, y[tm, :].to(torch.float32), dim=1)
        hi, w = dt.reduce(_pick, ({e}, b), dim=1, other=(float("-inf"), 0.0))
        out[tm] = hi + w
    return out
""", lambda m, n, k, dt: (torch.randn(m, n).to(dt), torch.randn(m, n).to(dt))),
    # halves of a row split by a reshape, recombined by dt.join (Helion's rope)
    "halves": ("""
@dt.kernel
def k(x, y):
    m, n = x.shape
    out = torch.zeros([m, n], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        a, b = dt.split(x[tm, :32].to(torch.float32).reshape([tm, 2, 16]).permute(0, 2, 1))
        c = dt.join(({e}), a * b).permute(0, 2, 1).reshape([tm, 32])
        out[tm, :32] = c + y[tm, :32].to(torch.float32)
    return out
""", lambda m, n, k, dt: (torch.randn(m, n).to(dt), torch.randn(m, n).to(dt))),
    # whole rows, reduced
    "rows": ("""
@dt.kernel
def k(x, y):
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        a = x[tm, :].to(torch.float32)
        b = y[tm, :].to(torch.float32)
        v = {e}
        out[tm] = torch.amax(v, dim=1) + v.sum(dim=1)
    return out
""", lambda m, n, k, dt: (torch.randn(m, n).to(dt), torch.randn(m, n).to(dt))),
    # a GEMM with an elementwise epilogue
    "gemm": ("""
@dt.kernel
def k(x, y):
    m, kk = x.shape
    _, n = y.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in dt.tile([m, n]):
        acc = dt.zeros([tm, tn], dtype=torch.float32)
        for tk in dt.tile(kk):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        a = acc
        b = acc * 0.5
        out[tm, tn] = ({e}).to(out.dtype)
    return out
""", lambda m, n, k, dt: (torch.randn(m, k).to(dt), torch.randn(k, n).to(dt))),
    # bounded slices: shifted windows of two rows, stored into the middle of the output
    "slices": ("""
@dt.kernel
def k(x, y):
    m, n = x.shape
    out = torch.zeros([m, n], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        a = x[tm, 2:].to(torch.float32)
        b = y[tm, :-2].to(torch.float32)
        out[tm, 1:n - 1] = ({e}).to(torch.float32)
    return out
""", lambda m, n, k, dt: (torch.randn(m, n).to(dt), torch.randn(m, n).to(dt))),
    # a gather-GEMV: rows picked by an index vector, times a vector
    "gemv": ("""
@dt.kernel
def k(x, y):
    m, n = x.shape
    idx = torch.arange(m, device=x.device).flip(0)
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        rows = x[idx[tm], :].to(torch.float32)
        a = rows * y[0, :].to(torch.float32)[None, :]
        b = rows
        out[tm] = ({e}).sum(dim=1)
    return out
""", lambda m, n, k, dt: (torch.randn(m, n).to(dt), torch.randn(2, n).to(dt))),
    # rows of per-row lengths (dt.jagged_tile): masked loads, stores and a reduction along the jagged tile
    "jagged": ("""
@dt.kernel
def k(x, y):
    m, n = x.shape
    lengths = (torch.arange(m, device=x.device) * 7) % (n + 1)
    out = torch.zeros([m, n], dtype=torch.float32, device=x.device)
    tot = torch.zeros([m], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        ln = lengths[tm]
        s = dt.zeros([tm], dtype=torch.float32)
        hi = dt.full([tm], float("-inf"), dtype=torch.float32)
        for tk in dt.jagged_tile(ln):
            a = x[tm, tk].to(torch.float32)
            b = y[tm, tk].to(torch.float32)
            v = ({e}).to(torch.float32)
            out[tm, tk] = v
            s = s + v.sum(dim=1)
            hi = torch.maximum(hi, torch.amax(v, dim=1))
        tot[tm] = torch.where(ln > 0, s + hi, 0.0)
    return out, tot
""", lambda m, n, k, dt: (torch.randn(m, n).to(dt), torch.randn(m, n).to(dt))),
    # a registered block size as a dimension before its tile, and a tile in index arithmetic (reversed columns)
    "blockdim": ("""
@dt.kernel
def k(x, y):
    m, n = x.shape
    bn = dt.register_block_size(n)
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        acc = dt.zeros([tm, bn], dtype=torch.float32)
        for tn in dt.tile(n, block_size=bn):
            a = x[tm, tn].to(torch.float32)
            b = y[tm, n - 1 - tn].to(torch.float32)
            acc = acc + ({e}).to(torch.float32)
        out[tm] = acc.sum(-1)
    return out
""", lambda m, n, k, dt: (torch.randn(m, n).to(dt), torch.randn(m, n).to(dt))),
}


@st.composite
def expressions(draw, depth=2):
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(["a", "b"]))
    tmpl = draw(st.sampled_from(ELEMENTWISE))
    return tmpl.format(a=draw(expressions(depth - 1)), b=draw(expressions(depth - 1)))


@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(PROGRAMS)), e=expressions(), m=st.sampled_from([16, 33, 64]),
       n=st.sampled_from([16, 48, 64]), k=st.sampled_from([16, 32]),
       dtype=st.sampled_from([torch.float16, torch.float32]), seed=st.integers(0, 3),
       pid=st.sampled_from([None, "flat", "xyz", "persistent_interleaved", "persistent_blocked"]),
       stages=st.sampled_from([None, 0, 2, 4]), unroll=st.sampled_from([None, 0, 2]),
       flatten=st.sampled_from([None, True]))
def test_random_tile_programs_compile(tmp_path, kind, e, m, n, k, dtype, seed, pid, stages, unroll, flatten):
    src, make = PROGRAMS[kind]
    mod = write_module(tmp_path, f"prop_{kind}_{next(_count)}", src.format(e=e))
    kern = next(v for v in vars(mod).values() if isinstance(v, Kernel))
    args = make(m, n, k, dtype)
    try:
        space = kern.config_space(*args)
    except newt.CompilationError as err:
        d = err.diagnostics[0]
        assert d.code.startswith("D") and d.file == mod.__file__, str(err)
        return
    import random
    cfg = space.random(random.Random(seed)) if seed else space.default()
    # Helion's loop and program-id fields (the gemm's k loop is the one tile loop inside a kernel here)
    cfg = cfg.replace(pid_type=pid, range_num_stages=None if stages is None else [stages],
                      range_unroll_factors=None if unroll is None else [unroll],
                      range_flattens=None if flatten is None else [flatten])
    try:
        fns = build_ir_for(kern, *args, config=cfg)  # newt's front end on the generated source
    except newt.CompilationError as err:  # only a D-error at the user's file (a config that does not fit: D005)
        d = err.diagnostics[0]
        assert d.code.startswith("D") and d.file == mod.__file__, str(err)
        return
    assert fns and all(f is not None for f in fns)
    if seed == 0:  # CUDA C++ and a cubin for sm_80 (NVRTC offline, no GPU needed)
        bins = binaries_for(kern, *args, config=cfg, target="sm_80")
        assert bins and all(b is not None for b in bins)


@pytest.mark.parametrize("kind", sorted(PROGRAMS))
def test_each_program_kind_runs_against_its_oracle(tmp_path, kind):
    src, make = PROGRAMS[kind]
    mod = write_module(tmp_path, f"oracle_{kind}", src.format(e="torch.sigmoid(a) * (b)"))
    kern = next(v for v in vars(mod).values() if isinstance(v, Kernel))
    args = make(33, 48, 32, torch.float32)
    torch.testing.assert_close(kern(*args), kern.ref(*args), atol=1e-3, rtol=1e-3)


def test_gather_gemv_with_a_block_of_one_row(tmp_path):
    """Found by the property test: with block size 1 the row tile is a scalar in the generated code, and a
    [None, :] operand broadcast against it must lose its size-1 dim (it stored a [16] block through a scalar
    pointer, N030)."""
    src, make = PROGRAMS["gemv"]
    mod = write_module(tmp_path, "gemv_unit", src.format(e="a"))
    kern = next(v for v in vars(mod).values() if isinstance(v, Kernel))
    x, y = make(16, 16, 16, torch.float16)
    assert build_ir_for(kern, x, y, config=dict(block_sizes=[1]))
    exp = (x.float().flip(0) * y[0].float()[None, :]).sum(1)
    torch.testing.assert_close(kern.run_with(dict(block_sizes=[1]), x, y), exp, atol=1e-3, rtol=1e-3)


def test_store_through_a_size_one_whole_dimension_padded_for_a_dot(tmp_path):
    """Found by Helion's gather_gemv: ``x[tile_k, :]`` of an ``[S, 1]`` x is padded to 16 columns for the dot, so
    ``out[tile, :] = acc`` stores a ``[B, 16]`` block; the pointer (stride 0 along the size-1 dimension) must keep
    that shape (it was ``[B, 1]``, N030)."""
    mod = write_module(tmp_path, "gemv_col", """
@dt.kernel
def k(w, x):
    m, s = w.shape
    out = torch.empty([m, 1], dtype=x.dtype, device=x.device)
    for tm in dt.tile(m):
        acc = dt.zeros([tm, 1], dtype=torch.float32)
        for tk in dt.tile(s):
            acc += dt.dot(w[tm, tk], x[tk, :])
        out[tm, :] = acc
    return out
""")
    w, x = torch.randn(48, 32), torch.randn(32, 1)
    torch.testing.assert_close(mod.k(w, x), w @ x, atol=1e-3, rtol=1e-3)
    assert "nl.broadcast_to(out + " in mod.k.to_newt_source(w, x)
