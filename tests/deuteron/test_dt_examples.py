"""Every example runs through the interpreter and checks itself; the front end accepts the newt kernel
generated for many configs of each (default, every neighbour of it, random points of the space)."""

from __future__ import annotations

import importlib
import random

import pytest
import torch

from deuteron.kernel import Kernel, build_ir_for

EXAMPLES = ["add", "softmax", "layer_norm", "rms_norm", "matmul", "matmul_epilogue", "attention", "column_sum"]


def kernels_of(mod):
    return [v for v in vars(mod).values() if isinstance(v, Kernel)]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_and_checks_itself(name):
    mod = importlib.import_module(name)
    mod.main("cpu")


@pytest.mark.parametrize("name", EXAMPLES)
def test_reference_matches_torch(name):
    mod = importlib.import_module(name)
    args = mod.make_args("cpu")
    k = kernels_of(mod)[0]
    got = k.ref(*[a.clone() for a in args])
    torch.testing.assert_close(got, mod.reference(*args), atol=5e-2, rtol=2e-2)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_sampled_config_builds(name):
    mod = importlib.import_module(name)
    args = mod.make_args("cpu")
    rng = random.Random(7)
    for k in kernels_of(mod):
        space = k.config_space(*args)
        default = space.default()
        configs = [default] + space.neighbors(default) + [space.random(rng) for _ in range(6)]
        seen = set()
        for cfg in configs:
            if cfg.key() in seen:
                continue
            seen.add(cfg.key())
            fns = build_ir_for(k, *args, config=cfg)
            assert fns and all(f is not None for f in fns), (k.__name__, cfg)


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "matmul", "attention"])
def test_random_configs_compute_the_same(name):
    """Configs change the mapping, never the result (checked through the interpreter)."""
    mod = importlib.import_module(name)
    args = mod.make_args("cpu")
    k = kernels_of(mod)[0]
    expected = mod.reference(*args)
    space = k.config_space(*args)
    rng = random.Random(11)
    for cfg in [space.random(rng) for _ in range(3)]:
        got = k.run_with(cfg, *[a.clone() for a in args])
        torch.testing.assert_close(got, expected, atol=5e-2, rtol=2e-2, msg=lambda m, c=cfg: f"{c}: {m}")
