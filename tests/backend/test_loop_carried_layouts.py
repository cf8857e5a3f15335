"""A loop-carried block whose layout differs from the one its use in the body needs (issue 22, item 13): a
block of pointers computed from a reduction (``base + nl.max(m, axis=1)``: the reduction's slice layout)
and advanced in a loop (``p += 1``) is loaded in the body in the load's blocked layout.  The conversion was
emitted at the end of the body, after the load that reads it: NVRTC failed on an undefined identifier (an
internal error, B001).  The conversion now sits at the top of each iteration.  Compiled to cubin offline;
on the device the result is compared with PyTorch."""

from __future__ import annotations

import re

import pytest

import newt
import newt.language as nl

pytest.importorskip("cuda.bindings.nvrtc")

SIG = {"base": "*fp32", "m_ptr": "*i32", "out": "*fp32"}


@newt.jit
def gather_advance_for(base, m_ptr, out, N: nl.constexpr, STEPS: nl.constexpr):
    offs = nl.arange(0, N)
    m = nl.load(m_ptr + offs[:, None] * N + offs[None, :])
    p = base + nl.max(m, axis=1)
    acc = nl.zeros([N], dtype=nl.float32)
    for _ in range(STEPS):
        acc += nl.load(p)
        p += 1
    nl.store(out + offs, acc)


@newt.jit
def gather_advance_while(base, m_ptr, out, N: nl.constexpr, STEPS: nl.constexpr):
    offs = nl.arange(0, N)
    m = nl.load(m_ptr + offs[:, None] * N + offs[None, :])
    p = base + nl.max(m, axis=1)
    acc = nl.zeros([N], dtype=nl.float32)
    i = 0
    while i < STEPS:
        acc += nl.load(p)
        p += 1
        i += 1
    nl.store(out + offs, acc)


def _reference(base, m, steps):
    idx = m.max(dim=1).values.long()
    return sum(base[idx + s] for s in range(steps))


@pytest.mark.parametrize("kernel", [gather_advance_for, gather_advance_while], ids=["for", "while"])
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("n", [16, 64])
def test_a_carried_pointer_block_from_a_reduction_compiles(kernel, target, n):
    ck = newt.compile(kernel, signature=SIG, constexprs={"N": n, "STEPS": 3}, target=target, cache=False)
    assert len(ck.asm["cubin"]) > 0
    src = ck.asm["cuda"]
    # every converted copy of a carried variable is declared before it is read
    for name in set(re.findall(r"\b(v\d+_\d+)\[i\]", src)):
        decl = re.search(rf"\b{name}\[\d+\];", src)
        assert decl is not None and decl.start() < src.index(f"{name}[i]"), name


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [gather_advance_for, gather_advance_while], ids=["for", "while"])
def test_a_carried_pointer_block_from_a_reduction_runs(kernel):
    import torch
    n, steps = 64, 3
    base = torch.randn(n + steps + 8, device="cuda")
    m = torch.randint(0, n, (n, n), device="cuda", dtype=torch.int32)
    out = torch.empty(n, device="cuda")
    kernel[(1,)](base, m, out, N=n, STEPS=steps)
    torch.testing.assert_close(out, _reference(base, m, steps))
