"""The search's config space (issue 12), no GPU needed: which moves the search makes, the wide space of effort
``full`` (each tile loop's unroll factor), and that every knob searched changes what newt compiles."""

from __future__ import annotations

import importlib
import random

import torch
from dt_helpers import needs_nvrtc

from deuteron.autotune.search import Genome
from deuteron.kernel import _HostRun, _runtime_args
from deuteron.space import RANGE_CHOICES, count_tile_loops, normalize_ranges


def _entry(name, *args):
    mod = importlib.import_module(name)
    k = getattr(mod, name)
    args = args or mod.make_args("cpu")
    b = k._bind(args, {})
    return k, b, k._entry(b)


def _matmul(k_dim=1024):
    x = torch.randn(256, k_dim, dtype=torch.float16)
    y = torch.randn(k_dim, 256, dtype=torch.float16)
    return _entry("matmul", x, y)


def _newt_source(k, b, e, cfg) -> str:
    run = _HostRun(e, cfg, "source")
    run.execute(b)
    return "\n".join(gen.source for gen, _m, _p, _l in run.built)


def test_tile_loops_are_counted_per_kernel():
    assert count_tile_loops(_matmul()[2].discovered.values()) == 1  # the K loop
    assert count_tile_loops(_entry("attention")[2].discovered.values()) == 1  # the key-tile loop
    assert count_tile_loops(_entry("softmax")[2].discovered.values()) == 0  # a whole-row reduction, no loop


def test_persistent_under_two_names_is_one_neighbour():
    _k, _b, e = _matmul()
    d = e.space.default()
    pids = [c.pid_type for c in e.space.neighbors(d) if c.block_sizes == d.block_sizes and
            c.num_warps == d.num_warps and c.num_stages == d.num_stages and c.l2_groupings == d.l2_groupings
            and c.loop_orders == d.loop_orders]
    assert sorted(pids) == ["persistent", "persistent_blocked", "xyz"]
    nb = e.space.neighbors(d.replace(pid_type="persistent"))
    assert not any(c.pid_type == "persistent_interleaved" for c in nb)


def test_the_wide_space_moves_each_loops_unroll_factor():
    _k, _b, e = _matmul()
    space = e.space
    d = space.default()
    space.range_loops = 0
    assert not any(c.range_unroll_factors for c in space.neighbors(d, wide=True))  # no loops known: none
    space.range_loops = count_tile_loops(e.discovered.values())
    narrow = space.neighbors(d)
    wide = space.neighbors(d, wide=True)
    assert not any(c.range_unroll_factors for c in narrow)
    unrolls = sorted(c.range_unroll_factors[0] for c in wide if c.range_unroll_factors)
    assert unrolls == [1]  # from the default (0 = the compiler's choice) one step: unroll 1
    two = d.replace(range_unroll_factors=[2])
    moves = {tuple(c.range_unroll_factors or [0]) for c in space.neighbors(two, wide=True)
             if c.block_sizes == two.block_sizes and c.num_warps == two.num_warps and c.pid_type == two.pid_type
             and c.num_stages == two.num_stages and c.l2_groupings == two.l2_groupings and
             c.loop_orders == two.loop_orders and c.maxnreg == two.maxnreg}
    assert moves == {(1,), (4,)}
    rng = random.Random(0)
    seen = {tuple(space.random(rng, wide=True).range_unroll_factors or [0]) for _ in range(60)}
    assert seen == {(v,) for v in RANGE_CHOICES["range_unroll_factors"]}
    assert all(space.random(rng).range_unroll_factors is None for _ in range(10))


def test_a_range_list_that_sets_nothing_is_dropped():
    _k, _b, e = _matmul()
    d = e.space.default()
    assert normalize_ranges(d.replace(range_unroll_factors=[0])).key() == d.key()
    assert normalize_ranges(d.replace(range_unroll_factors=[2])).range_unroll_factors == [2]


def test_the_genome_carries_the_unroll_gene():
    _k, _b, e = _matmul()
    e.space.range_loops = 1
    g = Genome(e.space, random.Random(3), samples=80, wide=True)
    gene = ("range_unroll_factors", 0)
    assert gene in g.genes and g.domains[gene] == [0, 1, 2, 4]
    d = e.space.default()
    for c in (d, d.replace(range_unroll_factors=[4]), d.replace(range_unroll_factors=[1], num_warps=4)):
        assert g.decode(g.encode(c)).key() == c.key()
    assert g.decode(g.encode(d)).range_unroll_factors is None



def test_the_unroll_factor_changes_the_generated_newt():
    k, b, e = _matmul()
    d = e.space.default()
    base = _newt_source(k, b, e, d)
    assert "loop_unroll_factor" not in base
    for v in (1, 2, 4):
        src = _newt_source(k, b, e, d.replace(range_unroll_factors=[v]))
        assert f"loop_unroll_factor={v})" in src and src != base


@needs_nvrtc
def test_the_unroll_factor_changes_the_cuda_and_the_cubin():
    from deuteron.compile import compile_binary
    k, b, e = _matmul()
    d = e.space.default()
    out = {}
    for v in (0, 1, 2):
        run = _HostRun(e, d.replace(range_unroll_factors=[v]) if v else d, "source")
        run.execute(b)
        gen, mod, prog, loc = run.built[0]
        out[v] = compile_binary(gen, mod, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a").asm
    assert "#pragma unroll 1\n" not in out[0]["cuda"] and "#pragma unroll 2\n" not in out[0]["cuda"]
    assert "#pragma unroll 1\n" in out[1]["cuda"] and "#pragma unroll 2\n" in out[2]["cuda"]
    assert len({out[v]["cubin"] for v in out}) == 3


@needs_nvrtc
def test_range_num_stages_is_not_searched_because_num_stages_covers_it():
    """The fact behind leaving ``range_num_stages`` out of the space: newt's pipeliner honors a loop's own depth
    (different depths, different cubins, once the offline compile has the launch's 16-byte divisibility and the
    tiles are loaded by cp.async), but with one tile loop ``range_num_stages=[s]`` compiles to the very cubin of
    ``num_stages=s``, which the space searches."""
    from deuteron.compile import compile_binary
    assert "range_num_stages" not in RANGE_CHOICES
    k, b, e = _matmul()
    d = e.space.default()

    def cubin(cfg):
        run = _HostRun(e, cfg, "source")
        run.execute(b)
        gen, mod, prog, loc = run.built[0]
        assert ("num_stages=" in gen.source.split("for begin_k in")[1].splitlines()[0]) == bool(cfg.range_num_stages)
        return compile_binary(gen, mod, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a").asm["cubin"]
    by_loop = {s: cubin(d.replace(range_num_stages=[s])) for s in (2, 4)}
    assert by_loop[2] != by_loop[4]
    for s, c in by_loop.items():
        assert c == cubin(d.replace(num_stages=s)), s


def test_a_doubled_matmul_block_is_also_tried_with_one_stage_fewer():
    """On the H200 (2026-12-02) attention's best key tile, 128x128, ran 1.80 ms at 4 stages and 1.25 ms at 3: a
    search moving one knob at a time from 128x64 at 4 stages never reached it."""
    _k, _b, e = _entry("attention")
    space = e.space
    d = space.default().replace(num_stages=4)
    nb = space.neighbors(d)
    dot = [s for s in space.slots if s.used_in_dot]
    assert dot
    for s in dot:
        if d.block_sizes[s.index] * 2 <= s.hi:
            bs = list(d.block_sizes)
            bs[s.index] *= 2
            assert any(c.block_sizes == bs and c.num_stages == 3 for c in nb), s
            assert any(c.block_sizes == bs and c.num_stages == 4 for c in nb), s
    two = space.default().replace(num_stages=2)  # never below two stages
    assert not any(c.num_stages == 1 and c.block_sizes != two.block_sizes for c in space.neighbors(two))
    _k, _b, e = _entry("softmax")  # no matmul: no such move
    d = e.space.default()
    assert all(c.num_stages == d.num_stages or c.block_sizes == d.block_sizes for c in e.space.neighbors(d))
