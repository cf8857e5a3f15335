"""Grids of up to three dimensions: program_id, num_programs, program order."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def grid_kernel(out_ptr):
    x = nl.program_id(0)
    y = nl.program_id(1)
    z = nl.program_id(2)
    nx = nl.num_programs(0)
    ny = nl.num_programs(1)
    nz = nl.num_programs(2)
    lin = x + nx * (y + ny * z)
    nl.store(out_ptr + lin * 6 + 0, x)
    nl.store(out_ptr + lin * 6 + 1, y)
    nl.store(out_ptr + lin * 6 + 2, z)
    nl.store(out_ptr + lin * 6 + 3, nx)
    nl.store(out_ptr + lin * 6 + 4, ny)
    nl.store(out_ptr + lin * 6 + 5, nz)


@pytest.mark.parametrize("grid", [(5,), (3, 4), (2, 3, 4), (1, 1, 7), (7, 1, 2)])
def test_program_ids(backend, grid):
    g = tuple(grid) + (1,) * (3 - len(grid))
    n = g[0] * g[1] * g[2]
    out = backend.zeros(n * 6, dtype=torch.int32)
    backend.launch(grid_kernel, grid, out)
    got = backend.get(out).view(n, 6).tolist()
    want = [[x, y, z, *g] for z in range(g[2]) for y in range(g[1]) for x in range(g[0])]
    assert got == want


@newt.jit
def block_grid_kernel(x_ptr, out_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    pm = nl.program_id(0)
    pn = nl.program_id(1)
    b = nl.program_id(2)
    rm = pm * BM + nl.arange(0, BM)
    rn = pn * BN + nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = b * M * N + rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, x * (b + 1) + pm * 1000 + pn, mask=mask)


def test_3d_grid_blocks(backend):
    B, M, N = 3, 37, 45
    x = torch.randn(B, M, N)
    out = backend.empty(B, M, N)
    backend.launch(block_grid_kernel, (newt.cdiv(M, 16), newt.cdiv(N, 16), B), backend.put(x), out, M, N, BM=16,
                   BN=16)
    pm = (torch.arange(M) // 16).float()[None, :, None]
    pn = (torch.arange(N) // 16).float()[None, None, :]
    want = x * torch.arange(1, B + 1).float()[:, None, None] + pm * 1000 + pn
    torch.testing.assert_close(backend.get(out), want)


def test_empty_grid_runs_nothing(backend):
    out = backend.zeros(6, dtype=torch.int32)
    backend.launch(grid_kernel, (0,), out)
    assert not backend.get(out).any()
