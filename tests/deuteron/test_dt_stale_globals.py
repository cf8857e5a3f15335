"""Module globals, closure cells of helpers and attributes of user modules read inside a tile loop: a changed
value is seen by the next call (it traces again, or a float is passed as a run-time argument), so the kernel
never disagrees with ``kernel.ref``; an unchanged value keeps the fast path (no retrace)."""

from __future__ import annotations

import sys

import pytest
import torch
from dt_helpers import write_module

from deuteron import hostrun

CFG = """
FACTOR = 2
OFFSET = 0.5
"""

BODY = """
import math
import {cfg} as cfgmod

SCALE = 2.0
NI = 3
MODE = "double"
DT = torch.float32
HSCALE = 10
PAIR = (1, 2)


def helper(v):
    return v * HSCALE + NI


def make(c):
    def inner(v):
        return v + c
    return inner


closure_helper = make(100)


def outer_helper(v):
    return helper(v) - 1


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_scale(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = x[t] * SCALE
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_int(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = x[t] * NI
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_mode(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        if MODE == "double":
            out[t] = (x[t] * 2).to(DT)
        else:
            out[t] = x[t].to(DT)
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_pair(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = x[t] * PAIR[0] + PAIR[1]
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_helper(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = helper(x[t])
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_nested(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = outer_helper(x[t])
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_closure(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = closure_helper(x[t])
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_modattr(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = x[t] * cfgmod.FACTOR + cfgmod.OFFSET
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_sqrt_arg(x, s: float):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = x[t] * math.sqrt(s)
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_sqrt(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = x[t] * math.sqrt(SCALE)
    return out
"""


@pytest.fixture
def mods(tmp_path, request):
    tag = "".join(ch if ch.isalnum() else "_" for ch in request.node.name)
    cfg = write_module(tmp_path, f"dt_stale_cfg_{tag}", CFG)
    mod = write_module(tmp_path, f"dt_stale_{tag}", BODY.format(cfg=cfg.__name__))
    yield mod, cfg
    sys.modules.pop(mod.__name__, None)
    sys.modules.pop(cfg.__name__, None)


CHANGES = {
    "float global": ("k_scale", lambda m, c: setattr(m, "SCALE", 3.0)),
    "int global": ("k_int", lambda m, c: setattr(m, "NI", 5)),
    "str global in an if": ("k_mode", lambda m, c: setattr(m, "MODE", "single")),
    "dtype global": ("k_mode", lambda m, c: setattr(m, "DT", torch.float16)),
    "tuple global": ("k_pair", lambda m, c: setattr(m, "PAIR", (3, 4))),
    "a helper's global": ("k_helper", lambda m, c: setattr(m, "HSCALE", 20)),
    "a helper's second global": ("k_helper", lambda m, c: setattr(m, "NI", 7)),
    "the helper replaced": ("k_helper", lambda m, c: setattr(m, "helper", m.make(-5))),
    "a global of a helper called by a helper": ("k_nested", lambda m, c: setattr(m, "HSCALE", 30)),
    "a helper's closure cell (same code)": ("k_closure", lambda m, c: setattr(m, "closure_helper", m.make(1000))),
    "an int attribute of a module": ("k_modattr", lambda m, c: setattr(c, "FACTOR", 4)),
    "a float attribute of a module": ("k_modattr", lambda m, c: setattr(c, "OFFSET", 1.5)),
    "a float through math.sqrt": ("k_sqrt", lambda m, c: setattr(m, "SCALE", 9.0)),
}


@pytest.mark.parametrize("what", list(CHANGES))
def test_a_changed_global_is_seen_by_the_next_call(what, mods):
    mod, cfg = mods
    name, change = CHANGES[what]
    k = getattr(mod, name)
    x = torch.arange(16, dtype=torch.float32) / 3  # not exact in float16 (the dtype change must show)
    before = k(x)
    torch.testing.assert_close(before, k.ref(x).to(before.dtype))
    change(mod, cfg)
    after = k(x)
    ref = k.ref(x)
    assert not torch.equal(before.to(ref.dtype), ref), "the change must matter for this test to mean anything"
    torch.testing.assert_close(after, ref.to(after.dtype))


def _count_traces(monkeypatch):
    calls = []
    real = hostrun._HostRun.trace

    def counted(self, *a, **kw):
        calls.append(a)
        return real(self, *a, **kw)
    monkeypatch.setattr(hostrun._HostRun, "trace", counted)
    return calls


def test_unchanged_globals_keep_the_fast_path(mods, monkeypatch):
    mod, _cfg = mods
    x = torch.arange(16, dtype=torch.float32)
    for name in ("k_scale", "k_int", "k_mode", "k_helper", "k_nested", "k_closure", "k_modattr", "k_sqrt"):
        getattr(mod, name)(x)
    traces = _count_traces(monkeypatch)
    for _ in range(3):
        for name in ("k_scale", "k_int", "k_mode", "k_helper", "k_nested", "k_closure", "k_modattr", "k_sqrt"):
            getattr(mod, name)(x)
    assert traces == []


def test_a_float_global_is_a_runtime_argument_not_a_retrace(mods, monkeypatch):
    mod, _cfg = mods
    x = torch.arange(16, dtype=torch.float32)
    mod.k_scale(x)
    traces = _count_traces(monkeypatch)
    for s in (3.0, 4.5, -1.0):
        mod.SCALE = s
        torch.testing.assert_close(mod.k_scale(x), x * s)
    assert traces == []
    src = mod.k_scale.to_newt_source(x)
    assert "SCALE" in src  # a parameter of the generated kernel, not the number baked in
    assert "4.5" not in src.split("# launched as")[0] and "-1.0" not in src.split("# launched as")[0]


def test_an_int_global_retraces_once_per_new_value(mods, monkeypatch):
    mod, _cfg = mods
    x = torch.arange(16, dtype=torch.float32)
    mod.k_int(x)
    traces = _count_traces(monkeypatch)
    mod.NI = 11
    torch.testing.assert_close(mod.k_int(x), x * 11)
    torch.testing.assert_close(mod.k_int(x), x * 11)
    assert len(traces) == 1
    mod.NI = 3  # back to the first value: its program is still there
    torch.testing.assert_close(mod.k_int(x), x * 3)
    assert len(traces) == 1


def test_guard_checker_agrees_with_guards_hold_on_global_sources(mods):
    mod, cfg = mods
    x = torch.arange(16, dtype=torch.float32)
    for name in ("k_int", "k_mode", "k_helper", "k_nested", "k_closure", "k_modattr"):
        k = getattr(mod, name)
        k(x)
        (e,) = k._entries.values()
        (progs,) = e.programs.values()
        for prog, check in progs:
            assert any(key[0] in ("local", "fnglobal", "cell", "attr") for key, _ in prog.guards), name
            g = k.fn.__globals__
            loc = {"x": x, "out": torch.empty_like(x)}
            assert check(loc, g, {}) is hostrun._guards_hold(prog, loc, g, True) is True
    # a change flips both
    cfg.FACTOR = 9
    k = mod.k_modattr
    (e,) = k._entries.values()
    (progs,) = e.programs.values()
    prog, check = progs[0]
    g = k.fn.__globals__
    loc = {"x": x, "out": torch.empty_like(x)}
    assert check(loc, g, {}) is hostrun._guards_hold(prog, loc, g, True) is False


CLOSURES = """
def make(scale, n):
    @dt.kernel(config=dt.Config(block_sizes=[8]))
    def k(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = x[t] * scale + n
        return out
    return k


def make_settable():
    scale, n = 1.5, 2

    @dt.kernel(config=dt.Config(block_sizes=[8]))
    def k(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = x[t] * scale + n
        return out

    def set_(s, m):
        nonlocal scale, n
        scale, n = s, m
    return k, set_
"""


@pytest.fixture
def closures(tmp_path, request):
    tag = "".join(ch if ch.isalnum() else "_" for ch in request.node.name)
    mod = write_module(tmp_path, f"dt_stale_closures_{tag}", CLOSURES)
    yield mod
    sys.modules.pop(mod.__name__, None)


def test_closure_variables_used_only_inside_the_tile_loop(closures):
    x = torch.arange(16, dtype=torch.float32)
    k1, k2 = closures.make(2.0, 1), closures.make(3.0, 5)
    torch.testing.assert_close(k1(x), x * 2.0 + 1)
    torch.testing.assert_close(k2(x), x * 3.0 + 5)
    torch.testing.assert_close(k1(x), k1.ref(x))


def test_a_changed_closure_cell_is_seen_by_the_next_call(closures, monkeypatch):
    x = torch.arange(16, dtype=torch.float32)
    k, set_ = closures.make_settable()
    torch.testing.assert_close(k(x), x * 1.5 + 2)
    traces = _count_traces(monkeypatch)
    set_(4.0, 2)  # the float: a run-time argument
    torch.testing.assert_close(k(x), x * 4.0 + 2)
    assert traces == []
    set_(4.0, 7)  # the int: baked in, so traced again
    torch.testing.assert_close(k(x), x * 4.0 + 7)
    torch.testing.assert_close(k(x), k.ref(x))
    assert len(traces) == 1


def test_a_host_function_of_a_float_argument_is_evaluated_and_guarded(mods):
    mod, _cfg = mods
    x = torch.arange(16, dtype=torch.float32)
    for s in (4.0, 9.0, 4.0):
        torch.testing.assert_close(mod.k_sqrt_arg(x, s), x * s ** 0.5)
    (e,) = mod.k_sqrt_arg._entries.values()
    (progs,) = e.programs.values()
    assert len(progs) == 2  # one program per value math.sqrt was called on
