"""Differential fuzzing: random elementwise/reduction expressions over mixed dtypes, the generated kernel
(through the interpreter) against kernel.ref and against plain torch."""

from __future__ import annotations

import random

import pytest
import torch
from dt_helpers import write_module

UNARY = ["torch.exp({})", "torch.abs({})", "torch.sigmoid({})", "torch.relu({})", "({}).to(torch.float32)",
         "torch.tanh({})", "-({})", "torch.sqrt(torch.abs({}) + 1.0)", "({}) * 0.5", "torch.floor({})",
         "({}) + 3", "({}) * s", "({}) - 2.5", "torch.clamp({}, -1.0, 2.0)", "({}).to(torch.float16)"]
BINARY = ["({}) + ({})", "({}) - ({})", "({}) * ({})", "torch.maximum({}, {})", "torch.minimum({}, {})",
          "torch.where(({}) > 0, {}, 2.0)", "({}) / (torch.abs({}) + 1.0)"]
LEAVES = ["x[t, :]", "y[t, :]", "w[None, :]", "t.index[:, None]"]
REDUCE = ["({}).sum(dim=1, keepdim=True)", "torch.amax({}, dim=1, keepdim=True)", "torch.amin({}, 1, keepdim=True)",
          "({}).mean(dim=-1, keepdim=True)"]


def expr(rng, depth):
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(LEAVES)
    r = rng.random()
    if r < 0.35:
        return rng.choice(UNARY).format(expr(rng, depth - 1))
    if r < 0.85:
        tmpl = rng.choice(BINARY)
        n = tmpl.count("{}")
        return tmpl.format(*[expr(rng, depth - 1) for _ in range(n)])
    return rng.choice(REDUCE).format(expr(rng, depth - 1))


@pytest.mark.parametrize("seed", range(80))
def test_random_expression(tmp_path, seed):
    rng = random.Random(seed)
    e = expr(rng, 4)
    body = f"""
    @dt.kernel
    def k(x, y, w, s: float):
        m, n = x.shape
        out = torch.empty([m, n], dtype=torch.float32, device=x.device)
        for t in dt.tile(m):
            out[t, :] = ({e}).to(torch.float32)
        return out
    """
    mod = write_module(tmp_path, f"fuzz_{seed}", body)
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.int32]
    dx, dy, dw = rng.choice(dtypes), rng.choice(dtypes), rng.choice(dtypes[:3])

    def make(shape, dt):
        t = torch.randn(shape) * 3
        return t.to(dt) if dt.is_floating_point else t.round().to(dt)

    x, y, w = make((13, 37), dx), make((13, 37), dy), make((37,), dw)
    try:
        ref = mod.k.ref(x, y, w, 1.5)
    except (RuntimeError, TypeError):
        # torch rejects the expression (e.g. mean of ints): the compiler must reject it too
        with pytest.raises(Exception):  # noqa: B017
            mod.k(x, y, w, 1.5)
        return
    got = mod.k(x, y, w, 1.5)
    low = any(d in (torch.float16, torch.bfloat16) for d in (dx, dy, dw))
    tol = 3e-2 if low else 1e-4
    finite = torch.isfinite(ref)
    assert torch.equal(finite, torch.isfinite(got)), e
    torch.testing.assert_close(got[finite], ref[finite], atol=tol, rtol=tol, msg=lambda m: f"{e}\n{m}")
    cfg = dict(block_sizes=[4], reduction_loops=[16])
    if mod.k.config_space(x, y, w, 1.5).rspecs:
        got2 = mod.k.run_with(cfg, x, y, w, 1.5)
        torch.testing.assert_close(got2[finite], ref[finite], atol=tol, rtol=tol, msg=lambda m: f"{e}\n{m}")
