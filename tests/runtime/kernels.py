"""Kernels shared by the runtime tests."""

import newt
import newt.language as nl

SCALE = 2.0


@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr):
    pid = nl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = nl.load(x_ptr + offsets, mask=mask)
    y = nl.load(y_ptr + offsets, mask=mask)
    nl.store(out_ptr + offsets, x + y, mask=mask)


@newt.jit(do_not_specialize=["n"])
def dns_kernel(x_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, nl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@newt.jit
def scalars_kernel(out_ptr, a, b, flag, BLOCK: nl.constexpr = 16):
    offs = nl.arange(0, BLOCK)
    v = nl.full((BLOCK,), a, nl.float32) * b
    if flag:
        v = v + 1.0
    nl.store(out_ptr + offs, v)


@newt.jit
def stages_kernel(out_ptr, n, BLOCK: nl.constexpr, num_stages: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, offs + num_stages, mask=offs < n)


@newt.jit
def twice(x):
    return x * 2


@newt.jit
def scale_by_global(x):
    return x * SCALE


@newt.jit
def relu(x):
    return nl.where(x > 0, x, 0.0)


@newt.jit
def helper_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr, ACT: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    y = scale_by_global(twice(x))
    if ACT is not None:
        y = ACT(y)
    nl.store(out_ptr + offs, y, mask=m)


@newt.jit
def grid3_kernel(out_ptr, X: nl.constexpr, Y: nl.constexpr):
    i = nl.program_id(0)
    j = nl.program_id(1)
    k = nl.program_id(2)
    nl.store(out_ptr + (k * Y + j) * X + i, i + 10 * j + 100 * k)
