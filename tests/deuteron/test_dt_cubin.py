"""No GPU needed: the generated kernels of every example compile to a cubin for sm_90a (NVRTC), for the default
config and a few neighbours; reports registers and spills so regressions in the generated code show."""

from __future__ import annotations

import importlib

import pytest
from dt_helpers import needs_nvrtc

from deuteron.compile import compile_binary
from deuteron.kernel import Kernel, _HostRun, _runtime_args

pytestmark = needs_nvrtc

EXAMPLES = ["add", "softmax", "layer_norm", "rms_norm", "matmul", "matmul_epilogue", "attention", "column_sum"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_compiles_for_sm90a(name):
    mod = importlib.import_module(name)
    k = next(v for v in vars(mod).values() if isinstance(v, Kernel))
    args = mod.make_args("cpu")
    b = k._bind(args, {})
    e = k._entry(b)
    default = e.space.default()
    configs = [default] + [c for c in e.space.neighbors(default) if c.pid_type != default.pid_type][:1]
    configs += [c for c in e.space.neighbors(default) if c.reduction_loops != default.reduction_loops][:1]
    for cfg in configs:
        run = _HostRun(e, cfg, "source")
        run.execute(b)
        for gen, m, prog, loc in run.built:
            ck = compile_binary(gen, m, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a")
            assert ck.asm["cubin"], (name, cfg)
            if cfg is default and name in ("add", "softmax", "layer_norm", "rms_norm", "column_sum"):
                assert ck.metadata["n_spills"] == 0, (name, cfg, ck.metadata)


def test_config_maxnreg_caps_the_generated_kernel():
    """``dt.Config(maxnreg=N)``: the generated launch passes newt's ``maxnreg`` and the cubin holds at most N
    registers per thread; the wide space's neighbours step through the caps; bad values are ConfigErrors."""
    from deuteron.config import Config, ConfigError
    mod = importlib.import_module("matmul")
    k = next(v for v in vars(mod).values() if isinstance(v, Kernel))
    args = mod.make_args("cpu")
    b = k._bind(args, {})
    e = k._entry(b)
    default = e.space.default()
    free_run = _HostRun(e, default, "source")
    free_run.execute(b)
    capped = default.replace(maxnreg=104)
    run = _HostRun(e, capped, "source")
    run.execute(b)
    for (g0, m0, p0, l0), (gen, m, prog, loc) in zip(free_run.built, run.built):
        assert "maxnreg=104)" in gen.source and "maxnreg" not in g0.source
        free = compile_binary(g0, m0, _runtime_args(g0, p0, l0, k.fn.__globals__), "sm_90a")
        ck = compile_binary(gen, m, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a")
        assert ck.metadata["n_regs"] <= 104 < free.metadata["n_regs"], (ck.metadata["n_regs"], free.metadata["n_regs"])
        # below what the kernel's wgmma needs: out of resources (the autotuner skips it quietly), naming the cap
        from newt.runtime.errors import OutOfResources
        low = default.replace(maxnreg=32)
        run32 = _HostRun(e, low, "source")
        run32.execute(b)
        g32, m32, p32, l32 = run32.built[0]
        with pytest.raises(OutOfResources, match="out of registers.*maxnreg=32"):
            compile_binary(g32, m32, _runtime_args(g32, p32, l32, k.fn.__globals__), "sm_90a")
    wide = {c.maxnreg for c in e.space.neighbors(default, wide=True)}
    assert 64 in wide and all(c.maxnreg is None for c in e.space.neighbors(default))
    assert Config(maxnreg=0).maxnreg is None and "maxnreg" not in Config(maxnreg=0).to_dict()
    with pytest.raises(ConfigError, match="maxnreg must be from 1 to 255"):
        Config(maxnreg=300)


def test_a_row_a_program_squeeze_compiles_for_sm90a():
    """A [tile, 1] block squeezed to [tile] at one row a program is a one-element block read as a scalar in the
    generated newt (``nl.reshape(x, ())``), as in Helion's cross_entropy at Helion's own best config there (a row
    a program, 32 warps); it stopped newt's CUDA backend with an internal error (B002), so the tune never had it
    and settled for two rows a program, which spills."""
    import torch

    import deuteron as dt

    @dt.kernel
    def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
        n, v = x.shape
        out = torch.empty([n], dtype=x.dtype, device=x.device)
        for tile_n in dt.tile(n):
            rows = x[tile_n, :]
            top = torch.amax(rows, dim=-1, keepdim=True)
            total = torch.sum(torch.exp(rows - top), dim=-1, keepdim=True)
            out[tile_n] = top.squeeze(-1) + torch.log(total.squeeze(-1))
        return out

    x = torch.randn(64, 8192)
    b = row_logsumexp._bind((x,), {})
    e = row_logsumexp._entry(b)
    for rows, warps in ((1, 32), (1, 16), (2, 16)):
        cfg = e.complete(dt.Config(block_sizes=[rows], num_warps=warps, num_stages=1), where=None)
        run = _HostRun(e, cfg, "source")
        run.execute(b)
        for gen, m, prog, loc in run.built:
            if rows == 1:
                assert "nl.reshape(" in gen.source and ", ())" in gen.source, gen.source
            ck = compile_binary(gen, m, _runtime_args(gen, prog, loc, row_logsumexp.fn.__globals__), "sm_90a")
            assert ck.asm["cubin"] and ck.metadata["n_spills"] == 0, (cfg, ck.metadata)
    torch.testing.assert_close(row_logsumexp(x), torch.logsumexp(x, dim=1))


def test_a_register_cap_ptxas_cannot_allocate_within_is_out_of_resources():
    """``maxnreg=64`` on the attention example at [1, 128, 64], 4 warps, 4 stages: ptxas fails register allocation
    (C7600) without naming an instruction that needs more; that is a resource refusal the autotuner skips quietly
    (OutOfResources), not a compile error (B001), as a cap below an instruction's need already was (maxnreg=40)."""
    import deuteron as dt
    from newt.runtime.errors import OutOfResources
    mod = importlib.import_module("attention")
    k = mod.attention
    b = k._bind(mod.make_args("cpu"), {})
    e = k._entry(b)
    for cap, says in ((64, "cannot allocate"), (40, "needs at least")):
        cfg = e.complete(dt.Config(block_sizes=[1, 128, 64], num_warps=4, num_stages=4, maxnreg=cap), where=None)
        run = _HostRun(e, cfg, "source")
        run.execute(b)
        (gen, m, prog, loc), = run.built
        with pytest.raises(OutOfResources, match=says) as ei:
            compile_binary(gen, m, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a")
        assert ei.value.resource == "registers" and ei.value.limit == cap
