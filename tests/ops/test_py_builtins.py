"""Python builtins inside kernels, as Triton's code generator reads them: ``min``/``max`` on run-time scalars and
blocks (any arity, constants mixed in), ``print``, ``len``/``int``/``float``/``bool`` on compile-time values,
``isinstance``/``getattr``/``hasattr``, and a dtype called as a constructor (``nl.float32(x)``)."""

from __future__ import annotations

import math

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def grouped_ids_kernel(out_ptr, M, N, BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, GROUP_M: nl.constexpr):
    # the grouped ordering of a tiled matmul: the group at the bottom edge is shorter than GROUP_M
    pid = nl.program_id(0)
    num_pid_m = nl.cdiv(M, BLOCK_M)
    num_pid_n = nl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    nl.store(out_ptr + 2 * pid, pid_m)
    nl.store(out_ptr + 2 * pid + 1, pid_n)


def _grouped_ref(M, N, bm, bn, g):
    npm, npn = -(-M // bm), -(-N // bn)
    out = []
    for pid in range(npm * npn):
        first = (pid // (g * npn)) * g
        size = min(npm - first, g)
        out += [first + (pid % (g * npn)) % size, (pid % (g * npn)) // size]
    return out


def test_min_of_a_run_time_scalar_and_a_constexpr(backend):
    M, N, bm, bn, g = 80, 48, 16, 16, 3  # 5 x 3 tiles: the last group has 2 rows, not 3
    grid = 15
    out = backend.zeros(2 * grid, dtype=torch.int32)
    backend.launch(grouped_ids_kernel, (grid,), out, M, N, BLOCK_M=bm, BLOCK_N=bn, GROUP_M=g)
    assert backend.get(out).tolist() == _grouped_ref(M, N, bm, bn, g)


@newt.jit
def min_max_blocks_kernel(x_ptr, y_ptr, out_ptr, lo, hi, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    y = nl.load(y_ptr + offs)
    nl.store(out_ptr + offs, max(x, y))                      # two blocks
    nl.store(out_ptr + BLOCK + offs, min(x, y, 0.25))        # three arguments, a constant among them
    nl.store(out_ptr + 2 * BLOCK + offs, max(lo, min(x, hi)))  # run-time scalars around a block (a clamp)
    nl.store(out_ptr + 3 * BLOCK + offs, min(x, y, propagate_nan=nl.PropagateNan.ALL))
    s = nl.sum(y, axis=0)
    nl.store(out_ptr + 4 * BLOCK, max(s, lo, 0.0))            # scalars only, one of them a reduction
    nl.store(out_ptr + 4 * BLOCK + 1, min(3, 7) + max(2.5, 1))  # constants: folded at compile time


def test_min_max_on_blocks_and_scalars(backend):
    B = 16
    x = torch.randn(B)
    y = torch.randn(B)
    x[3] = math.nan
    out = backend.zeros(5 * B)
    backend.launch(min_max_blocks_kernel, (1,), *backend.put(x, y), out, -0.5, 0.5, BLOCK=B)
    got = backend.get(out)
    finite = ~torch.isnan(x)
    assert torch.equal(got[:B][finite], torch.maximum(x, y)[finite])
    # NaN not propagated (Triton's default for builtin min/max): the other operand wins
    assert got[3].item() == y[3].item()
    assert torch.equal(got[B:2 * B][finite], torch.minimum(torch.minimum(x, y), torch.tensor(0.25))[finite])
    assert torch.equal(got[2 * B:3 * B][finite], x.clamp(-0.5, 0.5)[finite])
    assert math.isnan(got[3 * B + 3].item())  # propagate_nan=ALL
    assert torch.equal(got[3 * B:4 * B][finite], torch.minimum(x, y)[finite])
    assert got[4 * B].item() == pytest.approx(max(y.sum().item(), 0.0), abs=1e-5)
    assert got[4 * B + 1].item() == 3 + 2.5


@newt.jit
def int_min_max_kernel(a_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    a = nl.load(a_ptr + offs)
    nl.store(out_ptr + offs, max(a, n - 10, -3))
    nl.store(out_ptr + BLOCK + offs, min(a, 2))


def test_integer_min_max_keep_the_block_type(backend):
    a = torch.arange(-8, 8, dtype=torch.int32)
    out = backend.zeros(32, dtype=torch.int32)
    backend.launch(int_min_max_kernel, (1,), backend.put(a), out, 9, BLOCK=16)
    got = backend.get(out)
    assert got[:16].tolist() == [max(v, -1, -3) for v in a.tolist()]
    assert got[16:].tolist() == [min(v, 2) for v in a.tolist()]


@newt.jit
def dtype_ctor_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    m = nl.float32(-float("inf"))  # a scalar of the dtype
    acc = nl.float32(0.0)
    for start in range(0, n, BLOCK):
        x = nl.load(x_ptr + start + offs, mask=start + offs < n, other=-float("inf"))
        m = nl.maximum(m, nl.max(x, axis=0))
    for start in range(0, n, BLOCK):
        x = nl.load(x_ptr + start + offs, mask=start + offs < n, other=-float("inf"))
        acc += nl.sum(nl.exp(x - m), axis=0)
    nl.store(out_ptr, m)
    nl.store(out_ptr + 1, acc)
    nl.store(out_ptr + 2, nl.float32(n) / 2)  # a run-time int converted


def test_dtype_called_as_a_constructor(backend):
    x = torch.randn(40)
    out = backend.zeros(3)
    backend.launch(dtype_ctor_kernel, (1,), backend.put(x), out, 40, BLOCK=16)
    got = backend.get(out)
    assert got[0].item() == x.max().item()
    assert got[1].item() == pytest.approx(torch.exp(x - x.max()).sum().item(), rel=1e-5)
    assert got[2].item() == 20.0


@newt.jit
def compile_time_builtins_kernel(out_ptr, SHAPE: nl.constexpr, SCALE: nl.constexpr):
    n = len(SHAPE)                      # len of a constexpr tuple
    f = float(SCALE) * int(2.9)         # float/int on compile-time values
    flag = bool(SCALE)
    has = hasattr(out_ptr, "dtype")
    dt = getattr(out_ptr, "dtype", None)
    is_blk = isinstance(nl.arange(0, 4), nl.tensor)
    total = 0
    for i in nl.static_range(n):        # unrolled: SHAPE[i] needs a compile-time index
        total += SHAPE[i]
    nl.store(out_ptr, total * f)
    nl.store(out_ptr + 1, n + flag + has + is_blk + (dt == nl.pointer_type(nl.float32)))


def test_builtins_on_compile_time_values(backend):
    out = backend.zeros(2)
    backend.launch(compile_time_builtins_kernel, (1,), out, SHAPE=(2, 3, 4), SCALE=1.5)
    assert backend.get(out).tolist() == [9 * 3.0, 3 + 1 + 1 + 1 + 1]


@newt.jit
def print_abs_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    print("v=", min(x, 1.0))  # Python's print is nl.device_print, as in Triton
    nl.store(out_ptr + offs, abs(x))


def test_print_and_abs_through_the_interpreter():
    import io

    from newt.runtime.interpret import launch_jit
    x = torch.tensor([0.5, -2.0, 3.0, -0.25])
    out = torch.zeros(4)
    buf = io.StringIO()
    launch_jit(print_abs_kernel, (1,), (x, out), {"BLOCK": 4}, stdout=buf)
    assert out.tolist() == [0.5, 2.0, 3.0, 0.25]
    assert buf.getvalue().splitlines() == [f"pid (0, 0, 0) idx ({i}) v={v}" for i, v in
                                           enumerate(["0.5", "-2", "1", "-0.25"])]
