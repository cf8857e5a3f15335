"""``dt.atomic_cas(target, index, expected, value, sem=, scope=)`` on the CPU interpreter against eager PyTorch,
ragged tiles included (newt's masked ``atomic_cas`` keeps the lanes past the end off memory)."""

from __future__ import annotations

import re

import pytest
import torch
from dt_helpers import needs_nvrtc, raises_at, write_module

import deuteron as dt


@dt.kernel
def cas_rows(mem: torch.Tensor, expected: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    old = torch.empty_like(mem)
    for tm, tn in dt.tile(mem.size()):
        old[tm, tn] = dt.atomic_cas(mem, [tm, tn], expected[tm, tn], value[tm, tn], sem="acq_rel", scope="gpu")
    return old


def _eager(mem, expected, value):
    return torch.where(mem == expected, value, mem), mem.clone()


@pytest.mark.parametrize("shape,blocks", [((33, 17), [16, 8]), ((32, 16), [16, 8]), ((5, 3), [4, 4])])
def test_cas_against_eager_with_ragged_tiles(shape, blocks):
    g = torch.Generator().manual_seed(shape[0])
    mem = torch.randint(0, 3, shape, generator=g, dtype=torch.int32)
    exp = torch.randint(0, 3, shape, generator=g, dtype=torch.int32)
    val = torch.randint(10, 99, shape, generator=g, dtype=torch.int32)
    want_mem, want_old = _eager(mem, exp, val)
    m1 = mem.clone()
    old = cas_rows.run_with(dict(block_sizes=blocks), m1, exp, val)
    assert torch.equal(m1, want_mem) and torch.equal(old, want_old)
    m2 = mem.clone()
    assert torch.equal(cas_rows.ref(m2, exp, val), want_old) and torch.equal(m2, want_mem)


def test_ragged_tile_generates_a_masked_cas():
    mem = torch.zeros(33, 17, dtype=torch.int32)
    src = cas_rows.to_newt_source(mem, mem, mem)
    call = next(ln for ln in src.splitlines() if "nl.atomic_cas(" in ln)
    assert "mask=" in call and "sem='acq_rel'" in call, call


def test_cas_on_a_slice_of_a_bigger_tensor_leaves_the_rest():
    """The tile's off lanes would point at the next row's elements: the mask keeps them untouched."""
    @dt.kernel(config=dt.Config(block_sizes=[8]))
    def first_five(mem: torch.Tensor, n: int) -> torch.Tensor:
        for t in dt.tile(n):
            dt.atomic_cas(mem, [t], 0, 1)
        return mem

    mem = torch.zeros(16, dtype=torch.int32)
    first_five(mem, 5)
    assert mem.tolist() == [1] * 5 + [0] * 11


def test_scalar_expected_and_value_and_the_old_values_float():
    @dt.kernel
    def claim(x: torch.Tensor) -> torch.Tensor:
        old = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            old[t] = dt.atomic_cas(x, [t], 0.0, -1.0, sem="relaxed")
        return old

    x = torch.tensor([0.0, 2.0, 0.0, 3.5, 0.0, 0.0, 7.0])
    want_x, want_old = _eager(x, torch.zeros_like(x), torch.full_like(x, -1.0))
    x1 = x.clone()
    assert torch.equal(claim.run_with(dict(block_sizes=[4]), x1), want_old) and torch.equal(x1, want_x)
    x2 = x.clone()
    assert torch.equal(claim.ref(x2), want_old) and torch.equal(x2, want_x)


def test_cas_through_a_gather_with_repeats_claims_each_slot_once():
    """Many lanes race for the same slots: exactly one wins each free slot, in the kernel and in the oracle."""
    @dt.kernel
    def claim_slots(slots: torch.Tensor, who: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        for t in dt.tile(who.size(0)):
            dt.atomic_cas(slots, [who[t]], -1, ids[t])
        return slots

    who = torch.tensor([0, 1, 0, 2, 1, 0, 3, 3, 2], dtype=torch.int64)
    ids = torch.arange(100, 109, dtype=torch.int32)
    for run in (lambda s: claim_slots.run_with(dict(block_sizes=[4]), s, who, ids), lambda s: claim_slots.ref(
            s, who, ids)):
        s = torch.full((5,), -1, dtype=torch.int32)
        run(s)
        assert s[4].item() == -1  # nobody asked for slot 4
        for k in range(4):
            winners = ids[who == k].tolist()
            assert s[k].item() in winners, (k, s)


def test_cas_spin_counter_in_a_loop():
    """A compare-and-swap increment loop per element (each tile bumps its own elements ``reps`` times)."""
    @dt.kernel
    def bump(x: torch.Tensor, reps: int) -> torch.Tensor:
        for t in dt.tile(x.size(0)):
            for _ in range(reps):
                cur = x[t]
                dt.atomic_cas(x, [t], cur, cur + 1)
        return x

    x = torch.arange(10, dtype=torch.int64)
    got = bump.run_with(dict(block_sizes=[4]), x.clone(), 3)
    assert torch.equal(got, torch.arange(10) + 3)
    assert torch.equal(bump.ref(x.clone(), 3), torch.arange(10) + 3)


def test_unknown_sem_and_scope_and_bad_dtype_are_d004(tmp_path):
    mod = write_module(tmp_path, "k_cas_sem", """
    @dt.kernel
    def f(acc):
        for t in dt.tile(acc.size(0)):
            dt.atomic_cas(acc, [t], 0, 1, sem="seq_cst")
        return acc

    @dt.kernel
    def g(acc):
        for t in dt.tile(acc.size(0)):
            dt.atomic_cas(acc, [t], 0, 1, scope="device")
        return acc

    @dt.kernel
    def h(acc):
        for t in dt.tile(acc.size(0)):
            dt.atomic_cas(acc, [t], 2, 3)
        return acc
    """)
    z = torch.zeros(8, dtype=torch.int32)
    raises_at(mod, lambda: mod.f(z), "D004", 'sem="seq_cst"', contains="unknown sem")
    raises_at(mod, lambda: mod.g(z), "D004", 'scope="device"', contains="unknown scope")
    raises_at(mod, lambda: mod.h(torch.zeros(8, dtype=torch.int8)), "D004", "dt.atomic_cas(acc, [t], 2, 3)",
              contains="16-, 32- or 64-bit")


def test_value_of_the_wrong_shape_is_an_error_at_the_call(tmp_path):
    mod = write_module(tmp_path, "k_cas_shape", """
    @dt.kernel
    def f(acc, v):
        for tm, tn in dt.tile(acc.size()):
            dt.atomic_cas(acc, [tm, tn], 0, v[tm, :])
        return acc
    """)
    with pytest.raises(Exception) as ei:
        mod.f(torch.zeros(8, 4, dtype=torch.int32), torch.ones(8, 6, dtype=torch.int32))
    assert "k_cas_shape.py" in str(ei.value) and re.search(r"D00\d", str(ei.value)), str(ei.value)



@needs_nvrtc
def test_generated_cas_compiles_for_sm90a_with_the_cas_behind_the_mask():
    from deuteron.compile import compile_binary
    from deuteron.kernel import _HostRun, _runtime_args
    mem = torch.zeros(33, 17, dtype=torch.int32)
    args = (mem, mem.clone(), mem.clone())
    b = cas_rows._bind(args, {})
    e = cas_rows._entry(b)
    run = _HostRun(e, dt.Config(block_sizes=[16, 8]), "source")
    run.execute(b)
    (gen, m, prog, loc), = run.built
    ck = compile_binary(gen, m, _runtime_args(gen, prog, loc, cas_rows.fn.__globals__), "sm_90a")
    ptx = ck.asm["ptx"].splitlines()
    at = [i for i, ln in enumerate(ptx) if "atom.acq_rel.gpu.global.cas.b32" in ln]
    assert at, ck.asm["ptx"]
    assert all(any(re.search(r"@!?%p\d+ bra", ln) for ln in ptx[i - 16:i]) for i in at), ck.asm["ptx"]


@pytest.mark.gpu
def test_cas_on_the_gpu_matches_eager():
    shape = (33, 17)
    g = torch.Generator().manual_seed(7)
    mem = torch.randint(0, 3, shape, generator=g, dtype=torch.int32)
    exp = torch.randint(0, 3, shape, generator=g, dtype=torch.int32)
    val = torch.randint(10, 99, shape, generator=g, dtype=torch.int32)
    want_mem, want_old = _eager(mem, exp, val)
    m = mem.cuda()
    old = cas_rows(m, exp.cuda(), val.cuda())
    assert torch.equal(m.cpu(), want_mem) and torch.equal(old.cpu(), want_old)
