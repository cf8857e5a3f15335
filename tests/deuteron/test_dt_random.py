"""dt.rand / dt.randint: Philox keyed by a seed, offsets from the element's place in the full logical shape; every
config and kernel.ref draw the same numbers (the eager oracle uses deuteron.rng, checked against newt's
nl.rand / nl.randint here)."""

from __future__ import annotations

import pytest
import torch

import deuteron as dt
import newt
import newt.language as nl
from deuteron.rng import philox_uint32, uniform

DEV = "cuda" if torch.cuda.is_available() else "cpu"


@newt.jit(interpret=True)
def _newt_rand(out_f, out_i, seed, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(out_f + offs, nl.rand(seed, offs), mask=m)
    nl.store(out_i + offs, nl.randint(seed, offs).to(nl.int64, bitcast=False) & 0xFFFFFFFF, mask=m)


def test_the_eager_philox_gives_newts_bits():
    n = 1000
    out_f = torch.empty(n)
    out_i = torch.empty(n, dtype=torch.int64)
    for seed in (0, 123, 2**40 + 7):
        _newt_rand[(4,)](out_f, out_i, seed, n, BLOCK=256)
        offs = torch.arange(n)
        assert torch.equal(philox_uint32(seed, offs), out_i)
        assert torch.equal(uniform(philox_uint32(seed, offs)), out_f)


@dt.kernel
def noise(x: torch.Tensor, seed: int) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = x[tm, tn] + dt.rand([tm, tn], seed=seed)
    return out


@pytest.mark.parametrize("cfg", [None, dict(block_sizes=[8, 16]), dict(block_sizes=[1, 32], pid_type="xyz")])
def test_rand_is_the_same_in_every_config_and_in_ref(cfg):
    x = torch.zeros(37, 50, device=DEV)
    got = noise(x, 7) if cfg is None else noise.run_with(cfg, x, 7)
    assert torch.equal(got, noise.ref(x, 7))
    assert 0.0 <= float(got.min()) and float(got.max()) < 1.0
    assert abs(float(got.mean()) - 0.5) < 0.03
    assert not torch.equal(got, noise(x, 8))  # another seed, other numbers
    want = uniform(philox_uint32(7, torch.arange(37 * 50))).reshape(37, 50)  # row-major offsets
    assert torch.equal(got.cpu(), want)


def test_randint_range_and_ref():
    @dt.kernel
    def dice(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.shape, dtype=torch.int32, device=x.device)
        for t in dt.tile(x.size(0)):
            out[t] = dt.randint([t], -3, 4, seed=99)
        return out
    x = torch.zeros(500, device=DEV)
    got = dice(x)
    assert torch.equal(got, dice.ref(x))
    assert int(got.min()) == -3 and int(got.max()) == 3
    assert torch.equal(got.cpu(), (philox_uint32(99, torch.arange(500)) % 7 - 3).to(torch.int32))


def test_a_float_seed_is_d004_at_the_line(tmp_path):
    from dt_helpers import write_module
    mod = write_module(tmp_path, "rnd_bad", """
@dt.kernel
def f(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = dt.rand([t], seed=0.5)
    return out
""")
    with pytest.raises(newt.CompilationError) as ei:
        mod.f(torch.zeros(10, device=DEV))
    d = ei.value.diagnostics[0]
    assert d.code == "D004" and d.data["cause"] == "RandomShape" and d.span.line == 9
