"""Cross-check with Triton's own interpreter (a benchmark-only dependency; skipped without it).

Triton runs in a subprocess with ``TRITON_INTERPRET=1``: the switch is read when
triton is imported and would otherwise leak into every other test of the session.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import interpret as nri

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")

TRITON_SCRIPT = textwrap.dedent('''
    import sys
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def random_kernel(out_ptr, out2_ptr, seed, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.randint(seed, offs))
        tl.store(out2_ptr + offs, tl.rand(seed, offs))

    @triton.jit
    def int_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        y = tl.load(y_ptr + offs)
        tl.store(out_ptr + offs * 3, x // y)
        tl.store(out_ptr + offs * 3 + 1, x % y)
        tl.store(out_ptr + offs * 3 + 2, (x.to(tl.float32) / y).to(tl.int32))

    data = torch.load(sys.argv[1])
    res = {}
    for seed in data["seeds"]:
        a, a2 = torch.zeros(512, dtype=torch.int32), torch.zeros(512)
        random_kernel[(1,)](a, a2, seed, BLOCK=512)
        res[seed] = (a, a2)
    out = torch.zeros(768, dtype=torch.int32)
    int_kernel[(1,)](data["x"], data["y"], out, BLOCK=256)
    res["int"] = out
    torch.save(res, sys.argv[2])
''')

SEEDS = [0, 42, 2 ** 40 + 3]


@pytest.fixture(scope="module")
def triton_results(tmp_path_factory):
    d = tmp_path_factory.mktemp("triton")
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-2 ** 31, 2 ** 31, (256,), dtype=torch.int64, generator=g).to(torch.int32)
    y = torch.randint(-2 ** 31, 2 ** 31, (256,), dtype=torch.int64, generator=g).to(torch.int32)
    y[y == 0] = 3
    y[:8] = torch.tensor([1, -1, 2, -2, 7, -7, 1000, -1000], dtype=torch.int32)
    x[(x == -2 ** 31) & (y == -1)] = 5
    torch.save({"seeds": SEEDS, "x": x, "y": y}, d / "in.pt")
    (d / "run.py").write_text(TRITON_SCRIPT)
    env = dict(os.environ, TRITON_INTERPRET="1")
    p = subprocess.run([sys.executable, str(d / "run.py"), str(d / "in.pt"), str(d / "out.pt")], env=env,
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        pytest.skip(f"Triton's interpreter does not run here: {p.stderr.strip().splitlines()[-1:]}")
    return x, y, torch.load(d / "out.pt")


@newt.jit
def random_kernel(out_ptr, out2_ptr, seed, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.randint(seed, offs))
    nl.store(out2_ptr + offs, nl.rand(seed, offs))


@newt.jit
def int_kernel(x_ptr, y_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    y = nl.load(y_ptr + offs)
    nl.store(out_ptr + offs * 3, x // y)
    nl.store(out_ptr + offs * 3 + 1, x % y)
    nl.store(out_ptr + offs * 3 + 2, (x.to(nl.float32) / y).to(nl.int32))


@pytest.mark.parametrize("seed", SEEDS)
def test_random_matches_triton(triton_results, seed):
    a, a2 = triton_results[2][seed]
    b, b2 = torch.zeros(512, dtype=torch.int32), torch.zeros(512)
    nri.launch_jit(random_kernel, (1,), (b, b2, seed), {"BLOCK": 512})
    assert torch.equal(a, b) and torch.equal(a2, b2)


def test_integer_semantics_match_triton(triton_results):
    x, y, res = triton_results
    b = torch.zeros(768, dtype=torch.int32)
    nri.launch_jit(int_kernel, (1,), (x, y, b), {"BLOCK": 256})
    assert torch.equal(res["int"], b)
