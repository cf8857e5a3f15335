"""A run-time early ``return`` followed by code that gives a variable another dtype (ml-cross-entropy's
``_cce_backward_kernel``: ``if _block_is_filtered(...): return`` and later ``d_accum = d_accum.to(fp16)``).

Triton leaves the path that returned out of the join, so the variable's type after the ``if`` is the one the
remaining code gives it; the path that returned carries no value.  A ``continue`` is different: that path's
value is carried into the next iteration, so there the types must still agree."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt.diagnostics import CompilationError


@newt.jit
def early_return_then_cast_kernel(x_ptr, out_ptr, limit, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    v = nl.load(x_ptr + offs) * 2.0
    if nl.max(nl.abs(v), 0) > limit:  # a run-time condition: some programs return here
        return
    v = v.to(nl.float16)  # fp32 on the path that returned, fp16 on this one
    v = v + 1
    nl.store(out_ptr + offs, v)


@newt.jit
def _filtered(v, eps):
    return nl.max(nl.abs(v), 0) < eps


@newt.jit
def early_return_in_helper_condition_kernel(x_ptr, out_ptr, eps, BLOCK: nl.constexpr, OUT_DTYPE: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    acc = nl.load(x_ptr + offs)
    skip = False
    if _filtered(acc, eps):
        return
    else:
        skip = nl.sum(acc, 0) > 1e30
    acc = acc.to(OUT_DTYPE)
    if not skip:
        nl.store(out_ptr + offs, acc)


def test_a_variable_retyped_after_an_early_return(backend):
    x = torch.randn(4, 32)
    x[1] *= 100  # program 1 returns early
    out = backend.zeros(4, 32, dtype=torch.float16)
    backend.launch(early_return_then_cast_kernel, (4,), backend.put(x), out, 50.0, BLOCK=32)
    got = backend.get(out)
    want = ((x * 2).half() + 1)
    want[1] = 0
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_early_return_on_a_helper_result_then_a_cast(backend, dtype):
    x = torch.randn(3, 64)
    x[2] *= 1e-6  # program 2: every value under eps -> returns
    out = backend.zeros(3, 64, dtype=dtype)
    nl_dtype = {torch.float16: nl.float16, torch.bfloat16: nl.bfloat16}[dtype]
    backend.launch(early_return_in_helper_condition_kernel, (3,), backend.put(x), out, 1e-3, BLOCK=64,
                   OUT_DTYPE=nl_dtype)
    want = x.to(dtype)
    want[2] = 0
    torch.testing.assert_close(backend.get(out), want)


@newt.jit
def continue_then_cast_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    v = nl.load(x_ptr + offs)
    for i in range(n):
        if nl.max(v, 0) > i:
            continue
        v = v.to(nl.float16)  # the `continue` path carries fp32 into the next iteration: a real conflict
    nl.store(out_ptr + offs, v)


def test_a_continue_path_still_needs_one_type():
    x = torch.randn(16)
    out = torch.zeros(16)
    with pytest.raises(CompilationError, match="N042"):
        from newt.runtime.interpret import launch_jit
        launch_jit(continue_then_cast_kernel, (1,), (x, out, 3), {"BLOCK": 16})
