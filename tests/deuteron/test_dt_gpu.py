"""On the GPU: the examples, config sweeps, the autotuner's oracle gate, fault isolation, out-of-resources.

Run with ``PYTHONPATH=. python3 -m pytest tests/deuteron -m gpu``.
"""

from __future__ import annotations

import importlib
import random
import textwrap
import time

import pytest
import torch

import deuteron as dt
from deuteron.kernel import Kernel
from newt.runtime.errors import OutOfResources

pytestmark = pytest.mark.gpu

EXAMPLES = ["add", "softmax", "layer_norm", "rms_norm", "matmul", "matmul_epilogue", "attention", "column_sum"]


@pytest.fixture(autouse=True)
def _effort_none(monkeypatch):
    monkeypatch.setenv("DEUTERON_AUTOTUNE_EFFORT", "none")
    monkeypatch.setenv("DEUTERON_PROGRESS", "0")


def kernels_of(mod):
    return [v for v in vars(mod).values() if isinstance(v, Kernel)]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_on_gpu(name):
    mod = importlib.import_module(name)
    mod.main("cuda")


@pytest.mark.parametrize("name", EXAMPLES)
def test_random_configs_on_gpu(name):
    mod = importlib.import_module(name)
    args = mod.make_args("cuda")
    expected = mod.reference(*args)
    rng = random.Random(3)
    for k in kernels_of(mod)[:1]:
        space = k.config_space(*args)
        cfgs = [space.default()] + [space.random(rng) for _ in range(4)]
        cfgs += [c for c in space.neighbors(space.default()) if c.pid_type != "flat"][:2]
        ran = 0
        for cfg in cfgs:
            try:
                got = k.run_with(cfg, *[a.clone() for a in args])
            except OutOfResources:
                continue  # a random config may need more shared memory than the GPU has: the tuner skips those
            ran += 1
            torch.testing.assert_close(got, expected, atol=5e-2, rtol=2e-2, msg=lambda m, c=cfg: f"{c}: {m}")
        assert ran >= 3


@dt.kernel(configs=[dt.Config(block_sizes=[1024], bug=True), dt.Config(block_sizes=[256], bug=False),
                    dt.Config(block_sizes=[512], skip=True, bug=False)])
def buggy(x):
    out = torch.empty_like(x)
    bug = dt.register_tunable("bug", dt.Bool())
    skip = dt.register_tunable("skip", dt.Bool())
    for tile in dt.tile(x.size(0)):
        if not skip:
            out[tile] = x[tile] * (2.01 if bug else 2.0)
    return out


def test_autotuner_never_picks_a_wrong_config(monkeypatch):
    monkeypatch.setenv("DEUTERON_AUTOTUNE_CACHE", "0")
    ev = []
    x = torch.randn(1 << 20, device="cuda")
    cfg = buggy.autotune(x, callback=ev.append, force=True)
    status = [e["status"] for e in ev if e["kind"] == "report"]
    # the no-store config is the fastest and must be caught by the oracle; the 2.01x one is caught too, or cut
    # off unchecked by the hopeless rule (a timing over 2x the best verified one: it is never picked either;
    # seen on the H200 at 09:27, where the 1024-lane block of this ~5 us kernel timed over twice the 256-lane one)
    assert status.count("ok") == 1 and status.count("wrong") >= 1, ev
    assert set(status) <= {"ok", "wrong", "hopeless"}, ev
    assert cfg.tunables == {"bug": False, "skip": False}
    torch.testing.assert_close(buggy(x), x * 2)


def test_quick_autotune_of_a_matmul(monkeypatch):
    monkeypatch.setenv("DEUTERON_AUTOTUNE_CACHE", "0")
    monkeypatch.setenv("DEUTERON_AUTOTUNE_MAX_CONFIGS", "16")
    mod = importlib.import_module("matmul")
    x = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
    y = torch.randn(512, 768, device="cuda", dtype=torch.float16)
    ev = []
    t0 = time.perf_counter()
    cfg = mod.matmul.autotune(x, y, callback=ev.append, force=True)
    assert time.perf_counter() - t0 < 300
    reports = [e for e in ev if e["kind"] == "report"]
    assert 2 <= len(reports) <= 16
    assert any(r["status"] == "ok" for r in reports)
    torch.testing.assert_close(mod.matmul(x, y), mod.reference(x, y), atol=1e-1, rtol=1e-2)
    assert isinstance(cfg, dt.Config)


@dt.kernel(configs=[dt.Config(block_sizes=[256, 256, 256], num_stages=6, num_warps=4),
                    dt.Config(block_sizes=[64, 64, 32], num_stages=2, num_warps=4)])
def big_tiles(x, y):
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], device=x.device, dtype=x.dtype)
    for tm, tn in dt.tile([m, n]):
        acc = dt.zeros([tm, tn])
        for tk in dt.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = acc.to(out.dtype)
    return out


def test_out_of_resources_is_skipped_quietly(monkeypatch):
    monkeypatch.setenv("DEUTERON_AUTOTUNE_CACHE", "0")
    x = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    ev = []
    cfg = big_tiles.autotune(x, x, callback=ev.append, force=True)
    reports = [e for e in ev if e["kind"] == "report"]
    first = next(r for r in reports if "256" in r["config"])
    assert first["status"] == "out_of_resources" and first["error"] is None
    assert cfg.block_sizes == [64, 64, 32]


FAULTY = '''
import newt
import newt.language as nl


@newt.jit
def _bad(out, n, B: nl.constexpr):
    offs = nl.program_id(0) * B + nl.arange(0, B)
    nl.store(out + offs * 1000000007, offs.to(nl.float32))


def launch(out, n, *, B, num_warps, num_stages):
    _bad[(1,)](out, n, B=B, num_warps=num_warps, num_stages=num_stages)
'''


def test_an_illegal_address_stays_in_its_worker(tmp_path):
    from deuteron.autotune.workers import WorkerPool, save_args
    mod = tmp_path / "faulty.py"
    mod.write_text(textwrap.dedent(FAULTY))
    args = tmp_path / "a.pt"
    save_args(args, [torch.zeros(128, device="cuda"), 128])
    pool = WorkerPool(1, "cuda", tmp_path / "w.log", timeout=120)
    pool.start()
    try:
        pool.submit({"module": str(mod), "launch": "launch", "kernel": "_bad", "constexprs": {"B": 128},
                     "num_warps": 4, "num_stages": 1, "needs_num_sms": False, "args": str(args)})
        res = []
        t0 = time.time()
        while not res and time.time() - t0 < 180:
            res = pool.poll(0.5)
        (_, _, r), = res
        assert r["status"] == "fault", r
        assert pool.restarts == 1
    finally:
        pool.close()
    # the main process's CUDA context is untouched
    x = torch.randn(1000, device="cuda")
    torch.testing.assert_close(importlib.import_module("add").add(x, x), x + x)


@dt.kernel(static_shapes=False)
def dyn(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t, :] = torch.softmax(x[t, :], dim=-1)
    return out


def test_dynamic_shapes_on_gpu():
    for m in (100, 128, 200):
        x = torch.randn(m, 700, device="cuda")
        torch.testing.assert_close(dyn(x), torch.softmax(x, -1))
    assert len(dyn._entries) == 2  # 100 and 128 share a power-of-two bucket; 200 does not


@dt.kernel
def gathered_gemv(w: torch.Tensor, idx: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Rows of ``w`` (``[groups * s, s]``) picked through ``idx`` times the vector ``x``: Helion's gather_gemv
    example in deuteron's words (a [tile, s] gathered block dotted with an [s, 1] column)."""
    rows_total, s = w.size()
    n = idx.size(0)
    col = x.view(s, 1)
    out = torch.empty([n * s, 1], dtype=x.dtype, device=x.device)
    for tile_r in dt.tile(n * s):
        acc = dt.zeros([tile_r, 1], dtype=torch.float32)
        base = idx[tile_r.index // s] * s
        for tile_k in dt.tile(s):
            acc += dt.dot(w[base + tile_r.index % s, tile_k], col[tile_k, :])
        out[tile_r, :] = acc
    return out.view(n, s)


@pytest.mark.parametrize("s", [128, 256, 1024])
def test_gathered_gemv_at_the_default_config(s):
    """Regression (H100, 2026-12-07): Helion's gather_gemv example (8 x 128 x 128 weights, 2 indices) gave 10 of 256
    wrong outputs through the drop-in at the default config (blocks 128 x 64, 4 warps, 3 stages) while passing on
    the interpreter; here with its shapes and larger ones, against eager PyTorch."""
    g = torch.Generator().manual_seed(s)
    groups = 8
    w = torch.randn(groups * s, s, generator=g).half().cuda()
    idx = torch.randint(0, groups, (2,), generator=g, dtype=torch.int32).cuda()
    x = torch.randn(s, generator=g).half().cuda()
    out = gathered_gemv(w, idx, x)
    ref = torch.stack([w.view(groups, s, s)[i].float() @ x.float() for i in idx.tolist()]).half()
    torch.testing.assert_close(out, ref, atol=0.1, rtol=0.01)
