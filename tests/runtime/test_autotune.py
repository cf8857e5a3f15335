"""@newt.autotune / newt.Config / @newt.heuristics against the fake GPU (no GPU needed).

The same decorators run through the interpreter in test_interpret.py and on
the H200 in test_gpu.py.
"""

from __future__ import annotations

import logging

import pytest
import torch

import newt
import newt.language as nl
from newt.frontend import build_ir
from newt.frontend.values import JitRef, from_python
from newt.runtime.errors import OutOfResources

from . import kernels as K

SPEED = {64: 3.0, 128: 1.0, 256: 2.0, 512: 5.0}


class Bench:
    """A do_bench double: runs the call once and reports the time of the config it ran."""

    def __init__(self):
        self.current = None
        self.calls = 0

    def hook(self, nargs):
        self.current = nargs["BLOCK_SIZE"]

    def __call__(self, fn, quantiles=None):
        self.calls += 1
        fn()
        t = SPEED[self.current]
        return [t, t * 0.9, t * 1.1]


def make(bench, configs=None, **kw):
    configs = configs or [newt.Config({"BLOCK_SIZE": b}, num_warps=4, pre_hook=bench.hook) for b in SPEED]
    return newt.autotune(configs, key=["n_elements"], do_bench=bench, **kw)(newt.jit(K.add_kernel.fn))


def grid(meta):
    return (newt.cdiv(meta["n_elements"], meta["BLOCK_SIZE"]),)


@pytest.fixture
def gpu(fake_gpu, fake_backend, cuda_ok):
    return fake_gpu


def test_picks_the_fastest_and_caches_per_key(gpu, fake_backend):
    b = Bench()
    k = make(b)
    x = torch.randn(1024)
    k[grid](x, x, x, 1024)
    assert k.best_config.kwargs == {"BLOCK_SIZE": 128}
    assert b.calls == 4 and fake_backend.compiled == 4
    assert gpu.launches[-1].grid == (8, 1, 1)
    k[grid](x, x, x, 1024)
    assert b.calls == 4  # cached for this key
    k[grid](x, x, x, 512)  # new key value
    assert b.calls == 8
    k[grid](x.half(), x.half(), x.half(), 1024)  # new dtype
    assert b.calls == 12
    assert set(k.configs_timings) == set(k.configs)


def test_print_autotuning(gpu, monkeypatch, capsys):
    monkeypatch.setenv("NEWT_PRINT_AUTOTUNING", "1")
    x = torch.randn(1024)
    make(Bench())[grid](x, x, x, 1024)
    out = capsys.readouterr().out
    assert "newt autotuning: add_kernel" in out and "best config {BLOCK_SIZE: 128, num_warps: 4, num_stages: 3}" \
        in out


def test_failing_configs_are_skipped_with_the_reason_logged(gpu, fake_backend, caplog):
    def fail(fn, nw, ns):
        block = fn.constexprs["BLOCK_SIZE"]
        if block == 128:
            return OutOfResources("add_kernel", "shared memory", 300000, 232448)
        if block == 256:
            return RuntimeError("ptxas exploded")
        return None
    fake_backend.fail = fail
    b = Bench()
    k = make(b)
    x = torch.randn(1024)
    with caplog.at_level(logging.INFO, logger="newt.autotune"):
        k[grid](x, x, x, 1024)
    assert k.best_config.kwargs == {"BLOCK_SIZE": 64}
    assert set(c.kwargs["BLOCK_SIZE"] for c in k.failed_configs) == {128, 256}
    assert b.calls == 2
    text = caplog.text
    assert "skipping config {BLOCK_SIZE: 128" in text and "out of shared memory" in text
    assert "ptxas exploded" in text


def test_no_config_runs(gpu, fake_backend):
    fake_backend.fail = lambda fn, nw, ns: RuntimeError(f"nope {fn.constexprs['BLOCK_SIZE']}")
    k = make(Bench())
    x = torch.randn(1024)
    with pytest.raises(RuntimeError, match="no autotune config could run.*nope 64.*nope 512"):
        k[grid](x, x, x, 1024)


def test_launch_failures_during_benchmarking_are_skipped(gpu):
    b = Bench()
    k = make(b)
    x = torch.randn(1024)
    gpu.results = [0, 1]  # the second config's launch fails (not sticky)
    k[grid](x, x, x, 1024)
    assert len(k.failed_configs) == 1
    (bad,) = k.failed_configs
    assert bad.kwargs["BLOCK_SIZE"] == 128 and "CUDA_ERROR_INVALID_VALUE" in k.failed_configs[bad]
    assert k.best_config.kwargs == {"BLOCK_SIZE": 256}


def test_sticky_fault_during_benchmarking_is_raised(gpu):
    k = make(Bench())
    x = torch.randn(1024)
    gpu.results = [700]
    with pytest.raises(newt.runtime.KernelFaultError):
        k[grid](x, x, x, 1024)


def test_prune_configs_by(gpu):
    b = Bench()
    seen = {}

    def early(configs, nargs, **kwargs):
        seen["nargs"] = set(nargs)
        return [c for c in configs if c.kwargs["BLOCK_SIZE"] >= 128]

    def perf_model(**kw):
        return -kw["BLOCK_SIZE"]  # "predicts" big blocks are fastest
    k = make(b, prune_configs_by={"early_config_prune": early, "perf_model": perf_model, "top_k": 2})
    x = torch.randn(1024)
    k[grid](x, x, x, 1024)
    assert b.calls == 2  # 512 and 256 survive
    assert k.best_config.kwargs == {"BLOCK_SIZE": 256}
    assert {"x_ptr", "n_elements"} <= seen["nargs"]


def test_reset_to_zero_and_restore_value(gpu):
    b = Bench()
    x = torch.randn(1024)
    out = torch.full((1024,), 7.0)
    acc = torch.full((1024,), 5.0)

    def bump(nargs):
        nargs["y_ptr"].add_(1)
    k = make(b, reset_to_zero=["out_ptr"], restore_value=["y_ptr"], pre_hook=bump)
    k[grid](x, acc, out, 1024)
    assert torch.all(out == 0)
    assert torch.all(acc == 5.0)


def test_conflicting_meta_parameters(gpu):
    k = make(Bench())
    x = torch.randn(1024)
    with pytest.raises(ValueError, match="'BLOCK_SIZE' is set by the autotune configs"):
        k[grid](x, x, x, 1024, BLOCK_SIZE=64)


def test_decoration_errors():
    with pytest.raises(ValueError, match="key 'm' is not a parameter of add_kernel"):
        newt.autotune([newt.Config({"BLOCK_SIZE": 64})], key=["m"])(K.add_kernel)
    with pytest.raises(ValueError, match="config {BLOCK: 64, num_warps: 4, num_stages: 3} sets 'BLOCK'"):
        newt.autotune([newt.Config({"BLOCK": 64})], key=["n_elements"])(K.add_kernel)
    with pytest.raises(ValueError, match="reset_to_zero 'z'"):
        newt.autotune([newt.Config({"BLOCK_SIZE": 64})], key=[], reset_to_zero=["z"])(K.add_kernel)
    with pytest.raises(TypeError, match="must decorate a @newt.jit function"):
        newt.autotune([newt.Config({"BLOCK_SIZE": 64})], key=[])(K.add_kernel.fn)
    with pytest.raises(ValueError, match="heuristic for 'Q'"):
        newt.heuristics({"Q": lambda a: 1})(K.add_kernel)


def test_cache_results_on_disk(gpu):
    b1 = Bench()
    x = torch.randn(1024)
    make(b1, cache_results=True)[grid](x, x, x, 1024)
    assert b1.calls == 4
    b2 = Bench()
    k2 = make(b2, cache_results=True)  # as in a new process
    k2[grid](x, x, x, 1024)
    assert b2.calls == 0 and k2.best_config.kwargs == {"BLOCK_SIZE": 128}
    k2[grid](x, x, x, 2048)  # another key: tuned
    assert b2.calls == 4


def test_single_config_is_not_benchmarked(gpu):
    b = Bench()
    k = make(b, configs=[newt.Config({"BLOCK_SIZE": 256}, num_warps=8)])
    x = torch.randn(1024)
    k[grid](x, x, x, 1024)
    assert b.calls == 0 and gpu.launches[-1].block == (256, 1, 1) and gpu.launches[-1].grid == (4, 1, 1)


def test_warmup_compiles_every_config(gpu, fake_backend):
    k = make(Bench())
    x = torch.randn(1024)
    cks = k.warmup(x, x, x, 1024, grid=grid)
    assert len(cks) == 4 and fake_backend.compiled == 4 and not gpu.launches


def test_heuristics_compute_constexprs(gpu):
    seen = []

    @newt.heuristics({"BLOCK_SIZE": lambda a: newt.next_power_of_2(a["n_elements"]) // 4,
                      "num_warps": lambda a: 8 if a["BLOCK_SIZE"] >= 256 else 2})
    @newt.jit
    def k(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr):
        offs = nl.program_id(0) * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
        nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=offs < n_elements), mask=offs < n_elements)

    x = torch.randn(1000)
    k[lambda m: (seen.append(m) or newt.cdiv(m["n_elements"], m["BLOCK_SIZE"]),)](x, x, x, 1000)
    assert seen[0]["BLOCK_SIZE"] == 256 and seen[0]["num_warps"] == 8
    assert gpu.launches[-1].grid == (4, 1, 1) and gpu.launches[-1].block == (256, 1, 1)


def test_autotune_over_heuristics(gpu):
    b = Bench()

    @newt.autotune([newt.Config({"BLOCK_SIZE": 64}, pre_hook=b.hook), newt.Config({"BLOCK_SIZE": 128},
                                                                                     pre_hook=b.hook)],
                   key=["n_elements"], do_bench=b)
    @newt.heuristics({"EVEN": lambda a: a["n_elements"] % a["BLOCK_SIZE"] == 0})
    @newt.jit
    def k(x_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr, EVEN: nl.constexpr):
        offs = nl.program_id(0) * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
        if EVEN:
            nl.store(out_ptr + offs, nl.load(x_ptr + offs))
        else:
            nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=offs < n_elements), mask=offs < n_elements)

    x = torch.randn(1000)
    k[grid](x, x, 1000)
    assert k.best_config.kwargs == {"BLOCK_SIZE": 128}
    ck = k.base._cache[next(iter(k.base._cache))].kernel
    assert ck.metadata.constexprs["EVEN"] == "False"


def test_wrappers_look_like_jit_functions():
    k = newt.autotune([newt.Config({"BLOCK_SIZE": 64})], key=["n_elements"])(
        newt.heuristics({"BLOCK_SIZE": lambda a: 64})(K.add_kernel))
    assert k.__newt_jit__ and k.fn.__newt_jit__
    assert k.arg_names == K.add_kernel.arg_names and k.constexpr_names == {"BLOCK_SIZE"}
    assert k.signature == K.add_kernel.signature and k.__name__ == "add_kernel"
    assert k.jit_source() is K.add_kernel.jit_source()
    assert isinstance(from_python(k), JitRef)
    irfn = build_ir(k, {"x_ptr": nl.pointer_type(nl.float32), "y_ptr": nl.pointer_type(nl.float32),
                        "out_ptr": nl.pointer_type(nl.float32), "n_elements": nl.int32}, {"BLOCK_SIZE": 64})
    assert irfn.name == "add_kernel"


def test_config_api():
    c = newt.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=4)
    assert c.all_kwargs() == {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 4}
    assert str(c) == "BLOCK_M: 128, BLOCK_N: 64, num_warps: 8, num_stages: 4"
    assert c == newt.Config({"BLOCK_N": 64, "BLOCK_M": 128}, num_warps=8, num_stages=4)
    assert len({c, newt.Config({"BLOCK_N": 64, "BLOCK_M": 128}, num_warps=8, num_stages=4)}) == 1
    assert newt.Config({}).num_warps == 4 and newt.Config({}).num_stages == 3


def test_hot_path_key_matches_the_general_key(gpu):
    """The generated key function (used once a launch pattern is known) computes _tuning_key exactly,
    and declines (None) for any other argument types, so such launches take the general path."""
    from newt.tune.autotuner import _key_function
    b = Bench()
    k = make(b)
    x, h = torch.randn(64), torch.randn(64).half()
    for args in [(x, x, x, 64), (h, x, h, 7), (x, h, x, 0)]:
        kf = _key_function(k._key_pos, args)
        assert kf(args) == k._tuning_key(args, {})
        assert kf((h, h, h, 3)) == k._tuning_key((h, h, h, 3), {})
        assert kf((x, x, x, 2.5)) is None  # a float where an int was seen
        assert kf((x, x, x)) is None and kf((x, x, x, 1, 2)) is None
        assert kf((1, x, x, 1)) is None
    assert _key_function(k._key_pos, (x, x, x)) is None  # the key argument is not positional


def test_hot_path_launches_like_the_general_path(gpu):
    b = Bench()
    k = make(b)
    x = torch.randn(1024)
    k[grid](x, x, x, 1024)
    assert k._key_fn is not None
    n = len(gpu.launches)
    k[grid](x, x, x, 1024)  # hot path: same config, the config's pre_hook still runs
    assert len(gpu.launches) == n + 1 and gpu.launches[-1].grid == (8, 1, 1) and b.current == 128
    k[grid](x, x, x, 1024, stream=0)  # keyword options take the general path
    assert len(gpu.launches) == n + 2 and b.calls == 4
    with pytest.raises(TypeError, match="the grid is given by"):
        k[grid](x, x, x, 1024, grid=(1,))


@newt.jit(interpret=True)
def _splitk_sum(x_ptr, out_ptr, n, BLOCK: nl.constexpr, SPLIT: nl.constexpr):
    # SPLIT programs each add their share of x into out[0] (split-K style accumulation)
    pid = nl.program_id(0)
    acc = nl.zeros((BLOCK,), dtype=nl.float32)
    for start in range(pid * BLOCK, n, BLOCK * SPLIT):
        offs = start + nl.arange(0, BLOCK)
        acc += nl.load(x_ptr + offs, mask=offs < n, other=0.0)
    nl.atomic_add(out_ptr, nl.sum(acc, axis=0))


def test_reset_to_zero_zeroes_again_before_the_launch_after_tuning():
    """The tuning runs accumulate into out; the launch that follows starts from zero (as Triton)."""
    k = newt.autotune([newt.Config({"BLOCK": 32, "SPLIT": s}) for s in (2, 4, 8)], key=["n"],
                      reset_to_zero=["out_ptr"])(_splitk_sum)
    x = torch.arange(1000, dtype=torch.float32) / 100
    out = torch.zeros(1, dtype=torch.float32)
    k[lambda m: (m["SPLIT"],)](x, out, 1000)
    assert len(k.configs_timings) == 3  # three configs ran (each adding the sum into out) before this launch
    torch.testing.assert_close(out, x.sum().reshape(1))
    # a tuned key: no tuning, no reset (reset_to_zero is for the tuning runs, as in Triton)
    k[lambda m: (m["SPLIT"],)](x, out, 1000)
    torch.testing.assert_close(out, 2 * x.sum().reshape(1))


def test_reset_to_zero_without_tuning_runs_leaves_the_argument_alone():
    k = newt.autotune([newt.Config({"BLOCK": 32, "SPLIT": 2})], key=["n"], reset_to_zero=["out_ptr"])(_splitk_sum)
    x = torch.ones(100)
    out = torch.full((1,), 5.0)
    k[lambda m: (m["SPLIT"],)](x, out, 100)
    torch.testing.assert_close(out, torch.tensor([105.0]))
