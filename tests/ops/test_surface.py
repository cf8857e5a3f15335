"""Triton surface ops written once (stub + rule) and lowered through existing IR ops:
flip, squeeze, unsqueeze, item, math.fdiv, getattr/hasattr, conditional expressions with calls."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def surface_kernel(x_ptr, out_ptr, OP: nl.constexpr, DIM: nl.constexpr):
    i = nl.arange(0, 4)
    j = nl.arange(0, 8)
    x = nl.load(x_ptr + i[:, None] * 8 + j[None, :])  # (4, 8)
    if OP == "flip":
        nl.store(out_ptr + i[:, None] * 8 + j[None, :], nl.flip(x, DIM))
    elif OP == "flip_method":
        nl.store(out_ptr + i[:, None] * 8 + j[None, :], x.flip())
    elif OP == "squeeze":
        y = nl.reshape(x, (4, 1, 8))
        nl.store(out_ptr + i[:, None] * 8 + j[None, :], nl.squeeze(y, DIM))
    elif OP == "unsqueeze":
        y = nl.unsqueeze(x, DIM)
        nl.store(out_ptr + nl.arange(0, 32), nl.ravel(y))
    elif OP == "item":
        first = nl.load(x_ptr + nl.arange(0, 1))
        nl.store(out_ptr, first.item() * 2)
    elif OP == "fdiv":
        nl.store(out_ptr + i[:, None] * 8 + j[None, :], nl.math.fdiv(x, 3.0, ieee_rounding=DIM == 1))
    elif OP == "getattr":
        f = getattr(nl, "maximum" if DIM else "minimum")
        g = getattr(nl, "no_such_op", nl.abs)
        if hasattr(nl, "flip") and not hasattr(nl, "no_such_op"):
            nl.store(out_ptr + i[:, None] * 8 + j[None, :], g(f(x, 0.0)))
    elif OP == "ifexp":
        pid = nl.program_id(0)
        nl.store(out_ptr + j, x.sum(0)) if pid == 0 else nl.store(out_ptr + j, x.max(0))
        v = nl.load(x_ptr + j) if pid == 0 else nl.load(x_ptr + 8 + j)
        nl.store(out_ptr + 8 + j, v)


def _run(backend, op, dim=0, dtype=torch.float32, n_out=32):
    x = (torch.arange(32) - 9.5).to(dtype)
    xd = backend.put(x)
    out = backend.zeros(n_out, dtype=dtype)
    backend.launch(surface_kernel, (1,), xd, out, OP=op, DIM=dim)
    return x.reshape(4, 8), backend.get(out)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int8])
def test_flip(backend, dim, dtype):
    x, got = _run(backend, "flip", dim, dtype)
    assert torch.equal(got.reshape(4, 8), x.flip(dim))


def test_flip_default_is_the_last_dimension(backend):
    x, got = _run(backend, "flip_method")
    assert torch.equal(got.reshape(4, 8), x.flip(1))


@pytest.mark.parametrize("dim", [1, -2])
def test_squeeze(backend, dim):
    x, got = _run(backend, "squeeze", dim)
    assert torch.equal(got.reshape(4, 8), x)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_unsqueeze(backend, dim):
    x, got = _run(backend, "unsqueeze", dim)
    assert torch.equal(got, x.unsqueeze(dim).reshape(-1))


def test_item(backend):
    x, got = _run(backend, "item")
    assert got[0] == x[0, 0] * 2


@pytest.mark.parametrize("ieee", [0, 1])
def test_fdiv(backend, ieee):
    x, got = _run(backend, "fdiv", ieee)
    want = x / 3.0
    if ieee:
        assert torch.equal(got.reshape(4, 8), want)
    else:
        torch.testing.assert_close(got.reshape(4, 8), want, rtol=2e-7, atol=0)


@pytest.mark.parametrize("dim", [0, 1])
def test_getattr_hasattr(backend, dim):
    x, got = _run(backend, "getattr", dim)
    want = (x.clamp(min=0) if dim else x.clamp(max=0)).abs()
    assert torch.equal(got.reshape(4, 8), want)


def test_conditional_expression_runs_one_branch(backend):
    x, got = _run(backend, "ifexp")
    assert torch.equal(got[:8], x.sum(0))  # program 0 stores the sum only; the max store did not run
    assert torch.equal(got[8:16], x.reshape(-1)[:8])


def test_the_new_ops_compile_for_sm80_and_sm90a():
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.frontend import build_ir
    P = nl.pointer_type
    for op, dim in [("flip", 0), ("squeeze", 1), ("unsqueeze", 2), ("item", 0), ("fdiv", 1), ("getattr", 1),
                    ("ifexp", 0)]:
        for target in ("sm_80", "sm_90a"):
            f = build_ir(surface_kernel, dict(x_ptr=P(nl.float32), out_ptr=P(nl.float32)), dict(OP=op, DIM=dim))
            assert compile_cuda(generate_cuda(f, target, 4, 3), target).cubin
