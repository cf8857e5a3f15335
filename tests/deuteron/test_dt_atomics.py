"""Every atomic (add, and, or, xor, max, min, xchg) with sem and scope, against its eager oracle."""

from __future__ import annotations

import pytest
import torch
from dt_helpers import raises_at, write_module

import deuteron as dt


@dt.kernel
def bucket_max(x, bucket, nb: int):
    out = torch.full([nb], float("-inf"), dtype=torch.float32, device=x.device)
    cnt = torch.zeros([nb], dtype=torch.int32, device=x.device)
    for t in dt.tile(x.size(0)):
        dt.atomic_max(out, [bucket[t]], x[t], sem="relaxed", scope="gpu")
        dt.atomic_add(cnt, [bucket[t]], 1, sem="acq_rel", scope="cta")
    return out, cnt


def test_atomic_max_and_add_through_gathers():
    x = torch.randn(300)
    b = torch.randint(0, 7, (300,))
    got, cnt = bucket_max(x, b, 7)
    exp = torch.full([7], float("-inf")).scatter_reduce(0, b, x, "amax")
    torch.testing.assert_close(got, exp)
    torch.testing.assert_close(cnt, torch.bincount(b, minlength=7).int())
    ref_out, ref_cnt = bucket_max.ref(x, b, 7)
    torch.testing.assert_close(ref_out, exp)
    torch.testing.assert_close(ref_cnt, cnt)
    src = bucket_max.to_newt_source(x, b, 7)
    assert "nl.atomic_max(" in src and "scope='cta'" in src and "sem='acq_rel'" in src


@pytest.mark.parametrize("op,fn", [("and", lambda a, b: a & b), ("or", lambda a, b: a | b),
                                   ("xor", lambda a, b: a ^ b), ("min", torch.minimum), ("max", torch.maximum),
                                   ("xchg", lambda a, b: b)])
def test_elementwise_atomics_match_torch(tmp_path, op, fn):
    mod = write_module(tmp_path, f"k_atomic_{op}", f"""
    @dt.kernel
    def f(acc, v):
        for tm, tn in dt.tile(acc.size()):
            dt.atomic_{op}(acc, [tm, tn], v[tm, tn], sem="release", scope="sys")
        return acc
    """)
    acc = torch.randint(0, 1 << 20, (33, 17), dtype=torch.int32)
    v = torch.randint(0, 1 << 20, (33, 17), dtype=torch.int32)
    exp = fn(acc.clone(), v)
    torch.testing.assert_close(mod.f(acc.clone(), v), exp)
    torch.testing.assert_close(mod.f.ref(acc.clone(), v), exp)


def test_bitwise_atomic_on_floats_is_d004(tmp_path):
    mod = write_module(tmp_path, "k_atomic_float_or", """
    @dt.kernel
    def f(acc, v):
        for t in dt.tile(acc.size(0)):
            dt.atomic_or(acc, [t], v[t])
        return acc
    """)
    raises_at(mod, lambda: mod.f(torch.zeros(8), torch.ones(8)), "D004", "dt.atomic_or(acc, [t], v[t])",
              contains="integer")


def test_unknown_scope_and_bad_arguments_are_d004(tmp_path):
    mod = write_module(tmp_path, "k_atomic_scope", """
    @dt.kernel
    def f(acc, v):
        for t in dt.tile(acc.size(0)):
            dt.atomic_add(acc, [t], v[t], scope="device")
        return acc
    """)
    raises_at(mod, lambda: mod.f(torch.zeros(8), torch.ones(8)), "D004", "dt.atomic_add(acc, [t]",
              contains="unknown scope")
    mod2 = write_module(tmp_path, "k_atomic_kw", """
    @dt.kernel
    def f(acc, v):
        for t in dt.tile(acc.size(0)):
            dt.atomic_add(acc, [t], v[t], order="relaxed")
        return acc
    """)
    raises_at(mod2, lambda: mod2.f(torch.zeros(8), torch.ones(8)), "D004", "dt.atomic_add(acc, [t]",
              contains="order")


def test_atomics_return_the_old_values():
    @dt.kernel
    def bump(counts: torch.Tensor, inc: torch.Tensor) -> torch.Tensor:
        before = torch.empty_like(counts)
        for t in dt.tile(counts.size(0)):
            before[t] = dt.atomic_add(counts, [t], inc[t])
        return before

    @dt.kernel
    def bump_discard(counts: torch.Tensor, inc: torch.Tensor) -> torch.Tensor:
        for t in dt.tile(counts.size(0)):
            dt.atomic_max(counts, [t], inc[t])
        return counts

    c = torch.arange(50, dtype=torch.int32)
    inc = torch.randint(0, 9, (50,), dtype=torch.int32)
    c1, c2 = c.clone(), c.clone()
    assert torch.equal(bump.run_with(dict(block_sizes=[16]), c1, inc), c)
    assert torch.equal(c1, c + inc)
    assert torch.equal(bump.ref(c2, inc), c) and torch.equal(c2, c + inc)
    assert "old_counts = nl.atomic_add(" in bump.to_newt_source(c, inc)
    src = bump_discard.to_newt_source(c, inc)
    assert "old_" not in src and "nl.atomic_max(" in src  # an unused old value is not assigned
