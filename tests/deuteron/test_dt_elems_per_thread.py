"""Issue 25 (session 14), no GPU: the search proposes at most ``ELEMS_PER_THREAD`` (128) elements of one value a
thread, in kernels without a matmul too (deuteron/space.py).

newt gives each thread its elements of a block value as registers and renders every op as a fully unrolled loop
over them, so a config with 1024 elements a thread (Helion's layer_norm_bwd ``block_sizes=[8, 8]`` at 2 warps:
an 8x8192 tile over 64 threads) is 30,000 lines of PTX that ptxas spends 10-90 s on and spills 100+ KB from; the
offline sweep found such configs among the search's own proposals (about half of them for layer_norm_bwd).  The
kernel below is that backward pass in small form (rows of 2048): at 2 warps a tile of 32 rows is 1024 elements a
thread, 28,000 lines of PTX, 60-80 KB of spills, about 20 s to compile; the same tile at 16 warps, 128 a thread.
"""

from __future__ import annotations

import random
import re

import pytest
import torch
from dt_helpers import needs_nvrtc, write_module

import deuteron as dt
from deuteron.autotune import Tuner
from deuteron.space import ELEMS_PER_THREAD

BODY = """
@dt.kernel
def rows_bwd(x: torch.Tensor, dy: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    dx = torch.empty_like(x)
    for tile_m in dt.tile(m):
        xr = x[tile_m, :].to(torch.float32)
        wdy = w[None, :].to(torch.float32) * dy[tile_m, :].to(torch.float32)
        c1 = torch.sum(xr * wdy, dim=-1) / n
        c2 = torch.sum(wdy, dim=-1) / n
        dx[tile_m, :] = (wdy - (xr * c1[:, None] + c2[:, None])).to(dx.dtype)
    return dx
"""


@pytest.fixture
def rows_bwd(tmp_path):
    k = write_module(tmp_path, "k_rows_bwd_ept", BODY).rows_bwd
    x = torch.randn(64, 2048, dtype=torch.float16)
    b = k._bind((x, torch.randn_like(x), torch.randn(2048, dtype=torch.float16)), {})
    return k, b, k._entry(b)


def _per_thread(space, cfg) -> int:
    return space.elems(cfg) // (32 * cfg.num_warps)


def _proposals(k, b, e) -> list:
    """What a tune proposes: the default, the tuner's seeds, every neighbour of those (the wide space's too) and
    random configs."""
    space = e.space
    t = Tuner(k, e, b, "full", None, None)
    t.rng = random.Random(0)
    d = space.default()
    out = [d] + t.seed_configs(d)
    for c in list(out):
        out += space.neighbors(c, wide=True)
    rng = random.Random(0)
    out += [space.random(rng, wide=bool(i % 2)) for i in range(100)]
    return out


def test_search_proposes_at_most_128_elements_a_thread_without_a_matmul(rows_bwd):
    k, b, e = rows_bwd
    sp = e.space
    assert not sp.has_dot and ELEMS_PER_THREAD == 128
    one = dt.Config(block_sizes=[32], reduction_loops=[None])
    assert not sp.feasible(sp.complete(one.replace(num_warps=2)))   # 32x2048 over 64 threads: 1024 a thread
    assert not sp.feasible(sp.complete(one.replace(num_warps=8)))   # 256 a thread
    assert sp.feasible(sp.complete(one.replace(num_warps=16)))      # the tile itself stays: 128 a thread
    assert sp.feasible(sp.complete(one.replace(block_sizes=[4], num_warps=2)))
    props = _proposals(k, b, e)
    assert len(props) > 100
    assert max(_per_thread(sp, c) for c in props) == ELEMS_PER_THREAD
    sp.complete(one.replace(num_warps=2))  # a user's config is still valid (no ConfigError)


@needs_nvrtc
def test_the_largest_proposal_compiles_to_bounded_code(rows_bwd):
    """The proposal with the most elements a thread (whole rows, fewest warps) compiles to per-element loops of at
    most 128 iterations and under 6,000 lines of PTX with under 4 KB of spills (before the rule: 1024, about
    28,000 lines and 60 KB)."""
    from deuteron.compile import compile_binary
    from deuteron.kernel import _HostRun, _runtime_args
    k, b, e = rows_bwd
    sp = e.space
    props = _proposals(k, b, e)
    top = max(_per_thread(sp, c) for c in props)
    worst = min((c for c in props if _per_thread(sp, c) == top),
                key=lambda c: (any(r is not None for r in c.reduction_loops or []), c.num_warps, c.key()))
    run = _HostRun(e, worst, "source")
    run.execute(b)
    (gen, m, prog, loc), = run.built
    ck = compile_binary(gen, m, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a")
    cuda, ptx = ck.asm["cuda"], ck.asm["ptx"]
    unrolled = [int(n) for n in re.findall(r"#pragma unroll\n\s*for \(int (\w+) = 0; \1 < (\d+); \+\+\1\)", cuda)
                for n in [n[1]]]
    assert unrolled and max(unrolled) <= ELEMS_PER_THREAD, (worst, max(unrolled))
    assert ptx.count("\n") < 6000, (worst, ptx.count("\n"))
    assert ck.metadata["n_spills"] < 4096, (worst, ck.metadata["n_spills"])
