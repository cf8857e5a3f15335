"""The per-call fast path of a deuteron kernel (``Kernel.__call__``): the entry found by the binder's fast key,
the traced program by its generated guard check, the launch by the entry's cached launcher.  A change of what
the kernel specializes on (a shape, a dtype, a stride, a host value baked into the code, the source) takes the
full path; a repeated call retraces nothing, reads no file and hashes no source."""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import io
import os
import random
import sys
import textwrap

import pytest
import torch

import deuteron as dt
from deuteron import hostrun
from deuteron import runtime as drt
from deuteron.errors import DeuteronError

Kernel = dt.Kernel
kernel_mod = sys.modules["deuteron.kernel"]


@dt.kernel(config=dt.Config(block_sizes=[8]))
def scaled(x: torch.Tensor, s: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in dt.tile(x.size(0)):
        out[tile, :] = x[tile, :] * s
    return out


def _counting(monkeypatch, owner, name):
    calls = []
    real = getattr(owner, name)

    def counted(*a, **k):
        calls.append(a)
        return real(*a, **k)
    monkeypatch.setattr(owner, name, counted)
    return calls


def test_a_repeated_call_retraces_nothing_reads_no_file_and_hashes_no_source(monkeypatch):
    k = dt.kernel(config=dt.Config(block_sizes=[8]))(scaled.fn)
    x = torch.randn(32, 16)
    torch.testing.assert_close(k(x, 2.0), x * 2.0)  # first call: discovery, trace, generation, import
    traces = _counting(monkeypatch, hostrun._HostRun, "trace")
    discovers = _counting(monkeypatch, kernel_mod._Entry, "discover")
    loads = _counting(monkeypatch, drt, "load_module")
    hashes = _counting(monkeypatch, drt, "source_hash")
    keys = _counting(monkeypatch, Kernel, "_key")
    host = sys.modules["deuteron.host"]
    hosts = _counting(monkeypatch, host.KernelSource, "host_function")
    sources = _counting(monkeypatch, host, "KernelSource")
    io_calls = []
    for owner, name in [(builtins, "open"), (io, "open"), (os, "open"), (os, "stat"), (os, "replace"),
                        (os, "listdir"), (os, "scandir")]:
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *a, _r=real, _n=name, **kw: (io_calls.append((_n, a)), _r(*a, **kw))[1])
    for i in range(3):
        torch.testing.assert_close(k(x, 1.0 + i), x * (1.0 + i))  # s is a run-time scalar: no new program
    monkeypatch.undo()
    assert io_calls == []
    assert (traces, discovers, loads, hashes, keys, sources, hosts) == ([], [], [], [], [], [], [])


def test_a_repeated_call_launches_the_cached_launch_function(monkeypatch):
    k = dt.kernel(config=dt.Config(block_sizes=[8]))(scaled.fn)
    x = torch.randn(32, 16)
    k(x, 2.0)
    (e,) = k._entries.values()
    ((key, (fn, get_args, kw, prog, _go)),) = e.launchers.items()
    seen = []
    spy = lambda *a, **kws: (seen.append((a, kws)), fn(*a, **kws))[1]
    e.launchers[key] = (spy, get_args, kw, prog, hostrun.args_getter(e.generated[key][0], prog, (spy, kw)))
    out = k(x, 3.0)
    torch.testing.assert_close(out, x * 3.0)
    ((args, kws),) = seen
    assert args[0] is x and args[1] is out and args[-1] == 3.0
    assert kws["_BLOCK_0"] == 8 and kws["num_warps"] == e.config.num_warps


def test_runtime_launch_replaced_still_sees_every_launch(monkeypatch):
    k = dt.kernel(config=dt.Config(block_sizes=[8]))(scaled.fn)
    x = torch.randn(32, 16)
    k(x, 2.0)
    launches = _counting(monkeypatch, drt, "launch")
    for _ in range(2):
        torch.testing.assert_close(k(x, 2.0), x * 2.0)
    assert len(launches) == 2 and launches[0][2][0] is x


@pytest.mark.parametrize("change", ["shape", "dtype", "stride", "device-like type"])
def test_what_specializes_takes_the_full_path_and_compiles_again(change, monkeypatch):
    k = dt.kernel(config=dt.Config(block_sizes=[8]))(scaled.fn)
    x = torch.randn(32, 16)
    k(x, 2.0)
    k(x, 2.0)
    discovers = _counting(monkeypatch, kernel_mod._Entry, "discover")
    traces = _counting(monkeypatch, hostrun._HostRun, "trace")
    y = {"shape": torch.randn(24, 16), "dtype": torch.randn(32, 16, dtype=torch.float64),
         "stride": torch.randn(16, 32).t(), "device-like type": torch.nn.Parameter(torch.randn(32, 16),
                                                                                 requires_grad=False)}[change]
    for _ in range(2):
        torch.testing.assert_close(k(y, 0.5), y * 0.5)
    torch.testing.assert_close(k(x, 2.0), x * 2.0)  # the first signature is still cached
    if change == "device-like type":  # a Parameter has the same Kernel._key as its tensor: the same entry
        assert len(k._entries) == 1 and discovers == [] and traces == []
    else:
        assert len(k._entries) == 2 and len(discovers) == 1 and len(traces) == 2  # discovery + the run's trace
    assert len(k._fast) == 2


def test_dynamic_shapes_share_a_bucket_through_the_fast_path(monkeypatch):
    k = dt.kernel(config=dt.Config(block_sizes=[8]), static_shapes=False)(scaled.fn)
    for n in (20, 24, 32, 20, 24):
        x = torch.randn(n, 16)
        torch.testing.assert_close(k(x, 1.5), x * 1.5)
    assert len(k._entries) == 1  # 20, 24 and 32 share a power-of-two bucket
    assert len(k._fast) == 3  # one exact fast key per shape seen


def test_autotune_runs_once_per_signature(monkeypatch):
    k = dt.kernel(configs=[dt.Config(block_sizes=[8]), dt.Config(block_sizes=[16])])(scaled.fn)
    chosen = []
    monkeypatch.setattr(Kernel, "_choose_config", lambda self, e, b: (chosen.append(e.key),
                                                                      e.complete(self.configs[1], "configs"))[1])
    x, y = torch.randn(32, 16), torch.randn(48, 16)
    for _ in range(3):
        torch.testing.assert_close(k(x, 2.0), x * 2.0)
    assert len(chosen) == 1
    torch.testing.assert_close(k(y, 2.0), y * 2.0)
    torch.testing.assert_close(k(x, 2.0), x * 2.0)
    assert len(chosen) == 2 and chosen[0] != chosen[1]
    # Kernel.autotune(...) replaces the entry's config: the fast path launches the new one
    cfg = dt.Config(block_sizes=[4])
    monkeypatch.setattr(importlib.import_module("deuteron.autotune"), "autotune", lambda *a, **kw: k._entries[chosen[0]]
                        .complete(cfg, "configs"))
    k.autotune(x, 2.0)
    k(x, 2.0)
    (e,) = [e for e in k._entries.values() if e.key == chosen[0]]
    assert e.config.block_sizes == [4] and any(key[1] == e.config.key() for key in e.launchers)


def test_reset_forgets_the_fast_path(monkeypatch):
    k = dt.kernel(config=dt.Config(block_sizes=[8]))(scaled.fn)
    x = torch.randn(32, 16)
    k(x, 2.0)
    k.reset()
    discovers = _counting(monkeypatch, kernel_mod._Entry, "discover")
    torch.testing.assert_close(k(x, 2.0), x * 2.0)
    assert len(discovers) == 1


def test_bad_calls_raise_the_same_errors_before_and_after_the_fast_path():
    k = dt.kernel(config=dt.Config(block_sizes=[8]))(scaled.fn)
    with pytest.raises(TypeError, match=r"scaled\(\): missing a required argument: 's'"):
        k(torch.randn(8, 4))
    k(torch.randn(8, 4), 1.0)
    with pytest.raises(TypeError, match=r"scaled\(\): missing a required argument: 's'"):
        k(torch.randn(8, 4))
    with pytest.raises(TypeError, match=r"scaled\(\): got an unexpected keyword argument 'z'"):
        k(torch.randn(8, 4), 1.0, z=1)


KERNEL_FILE = '''
import torch
import deuteron as dt

SCALE = 2


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k(x: torch.Tensor) -> torch.Tensor:
    scale = dt.specialize(SCALE)
    out = torch.empty_like(x)
    for tile in dt.tile(x.size(0)):
        out[tile, :] = x[tile, :] {op} scale
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def add2(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in dt.tile(x.size(0)):
        out[tile, :] = x[tile, :] + y[tile, :]
    return out
'''


def _load(tmp_path, name, op):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(KERNEL_FILE.format(op=op)))
    spec = importlib.util.spec_from_file_location(name, str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


def test_a_changed_source_is_new_code(tmp_path):
    x = torch.randn(16, 8)
    mod, path = _load(tmp_path, "dt_fast_src", "*")
    torch.testing.assert_close(mod.k(x), x * 2.0)
    torch.testing.assert_close(mod.k(x), x * 2.0)
    mod2, _ = _load(tmp_path, "dt_fast_src", "+")  # the file edited and imported again
    torch.testing.assert_close(mod2.k(x), x + 2.0)
    torch.testing.assert_close(mod.k(x), x * 2.0)  # the old kernel object keeps its own code


def test_a_changed_global_fails_the_guard_and_retraces(tmp_path):
    x = torch.randn(16, 8)
    mod, path = _load(tmp_path, "dt_fast_glob", "*")
    torch.testing.assert_close(mod.k(x), x * 2.0)
    torch.testing.assert_close(mod.k(x), x * 2.0)
    mod.SCALE = 3  # a host value baked into the generated code: the guard check fails, traced again
    torch.testing.assert_close(mod.k(x), x * 3.0)
    torch.testing.assert_close(mod.k(x), x * 3.0)
    assert len(mod.k._entries) == 1 and len(next(iter(mod.k._entries.values())).programs[0]) == 2


def test_an_error_after_the_fast_path_is_still_located(tmp_path):
    mod, path = _load(tmp_path, "dt_fast_err", "*")
    x = torch.randn(16, 8)
    for _ in range(2):
        torch.testing.assert_close(mod.add2(x, x), x + x)
    with pytest.raises(DeuteronError) as ei:  # another shape of y: the full path, and its error
        mod.add2(x, torch.randn(16, 5))
    d = ei.value.diagnostics[0]
    assert (d.code, d.file, d.span.line, d.span.col) == ("D006", str(path), 21, 24), (d.code, d.file, d.span)
    torch.testing.assert_close(mod.add2(x, x), x + x)


def test_closure_kernels_make_their_host_function_once_per_closure_value(monkeypatch):
    hosts = _counting(monkeypatch, sys.modules["deuteron.host"].KernelSource, "host_function")

    def make():
        n_rows = 8

        @dt.kernel(config=dt.Config(block_sizes=[8]))
        def rows(x: torch.Tensor) -> torch.Tensor:
            add = n_rows
            out = torch.empty_like(x)
            for tile in dt.tile(x.size(0)):
                out[tile, :] = x[tile, :] + add
            return out

        def set_rows(v):
            nonlocal n_rows
            n_rows = v
        return rows, set_rows

    rows, set_rows = make()
    x = torch.randn(16, 4)
    for _ in range(3):
        torch.testing.assert_close(rows(x), x + 8)
    made = len(hosts)
    assert made <= 2  # discovery and the first run may make it; the repeated calls do not
    set_rows(5)
    torch.testing.assert_close(rows(x), x + 5)
    torch.testing.assert_close(rows(x), x + 5)
    assert len(hosts) == made + 1


# --- the generated pieces agree with the generic ones ---------------------------------------------------


def test_the_fast_key_is_never_coarser_than_the_entry_key():
    import collections
    Pair = collections.namedtuple("Pair", "a b")
    t = torch.randn(4, 6)
    values = [t, t.t(), t[:2], t.double(), torch.randn(4, 6, dtype=torch.float16), torch.nn.Parameter(t.clone()),
              1, 2, True, False, 1.5, None, "a", "b", torch.float32, torch.float16, [t, t], [t, t[:2]], (t,),
              Pair(t, t), Pair(t, t[:1]), [1, 2], [1], object(), 3 + 0j]

    def f(x):
        pass
    import inspect
    sig = inspect.signature(f)
    for static in (True, False):
        k = dt.kernel(static_shapes=static)(scaled.fn)
        bind = kernel_mod._make_binder(sig, fast_key=True)
        pairs = []
        for v in values:
            a, kw, arguments, fkey = bind(v)
            hash(fkey)
            pairs.append((fkey, k._key(kernel_mod._Bound(a, kw, arguments, sig))))
        by_fast: dict = {}
        for fkey, key in pairs:
            assert by_fast.setdefault(fkey, key) == key, (fkey, key)


def test_generated_guard_checks_agree_with_guards_hold():
    rng = random.Random(0)
    k = dt.kernel(config=dt.Config(block_sizes=[8]))(scaled.fn)
    x = torch.randn(32, 16)
    k(x, 2.0)
    (e,) = k._entries.values()
    ((prog, check),) = e.programs[0]
    g = k.fn.__globals__
    base = {"x": x, "s": 2.0, "out": torch.empty_like(x)}
    variants = [torch.empty_like(x), torch.empty(32, 16, dtype=torch.float64), torch.empty(16, 32).t(),
                torch.empty(31, 16), "not a tensor", 2.0, 3, None]
    for _ in range(60):
        loc = dict(base)
        name = rng.choice(["x", "out", "s"])
        if rng.random() < 0.2:
            loc.pop(name)
        else:
            loc[name] = rng.choice(variants)
        args = rng.choice([{"x": x, "s": 2.0}, {"x": loc.get("x"), "s": 2.0}, {}])
        for static in (True, False):
            want = hostrun._guards_hold(prog, loc, g, static, args)
            got = hostrun.guard_checker(prog, static)(loc, g, args)
            assert got == want, (name, loc.get(name), static)
    assert check(base, g, {"x": x, "s": 2.0}) is True


def test_a_persistent_kernel_gets_its_sm_count_on_the_fast_path(monkeypatch):
    import matmul
    k = dt.kernel(config=dt.Config(block_sizes=[16, 16, 16], pid_type="persistent_blocked"))(matmul.matmul.fn)
    x, y = torch.randn(40, 32), torch.randn(32, 48)
    torch.testing.assert_close(k(x, y), x @ y, atol=1e-4, rtol=1e-4)
    (e,) = k._entries.values()
    ((_, _, kw, _, _),) = e.launchers.values()
    assert kw["_NUM_SMS"] == drt.num_sms(e.device)
    for _ in range(2):
        torch.testing.assert_close(k(x, y), x @ y, atol=1e-4, rtol=1e-4)
