"""``dt.signal`` / ``dt.wait`` (Helion's signal pads) on the CPU interpreter against eager PyTorch.

The interpreter runs these kernels sequentially (their atomics' results are used), so a program may wait for an
earlier one; waiting for a later one is the interpreter's located DeadlockError (on a GPU it would run)."""

from __future__ import annotations

import re

import pytest
import torch
from dt_helpers import needs_nvrtc, raises_at, write_module

import deuteron as dt


@dt.kernel
def chained_cumsum(x: torch.Tensor, flags: torch.Tensor, carry: torch.Tensor) -> torch.Tensor:
    """Each tile waits for the previous tile's total (a chained scan), then passes its own on."""
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0), block_size=8):
        dt.wait(flags, [t.id], signal=1)
        base = carry[t.id]
        out[t] = torch.cumsum(x[t], 0) + base
        carry[t.id + 1] = x[t].sum() + base
        dt.signal(flags, [t.id + 1], signal=1)
    return out


def _pads(n_tiles):
    flags = torch.zeros(n_tiles + 1, dtype=torch.int32)
    flags[0] = 1
    return flags, torch.zeros(n_tiles + 1)


@pytest.mark.parametrize("n", [37, 64])
def test_chained_scan_against_eager(n):
    x = torch.randn(n)
    nt = (n + 7) // 8
    flags, carry = _pads(nt)
    torch.testing.assert_close(chained_cumsum(x, flags, carry), x.cumsum(0), atol=1e-5, rtol=1e-5)
    assert flags.tolist() == [1] * (nt + 1)
    torch.testing.assert_close(carry[-1], x.sum(), atol=1e-5, rtol=1e-5)
    flags, carry = _pads(nt)
    torch.testing.assert_close(chained_cumsum.ref(x, flags, carry), x.cumsum(0), atol=1e-5, rtol=1e-5)


def test_generated_code_orders_the_block_around_the_flags():
    x = torch.randn(37)
    src = chained_cumsum.to_newt_source(x, *_pads(5))
    body = [ln.strip() for ln in src.splitlines()]
    w = next(i for i, ln in enumerate(body) if ln.startswith("while (nl.atomic_cas(flags"))
    assert "sem='acquire'" in body[w] and body[w + 2].startswith("nl.debug_barrier()")
    s = next(i for i, ln in enumerate(body) if ln.startswith("nl.atomic_xchg(flags"))
    assert "sem='release'" in body[s] and body[s - 1].startswith("nl.debug_barrier()")


@dt.kernel
def claim_then_release(x: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0), block_size=8):
        old = dt.signal(flags, [t], signal=2, wait_for=0)  # a block of flags; ragged lanes stay off memory
        out[t] = x[t] + old.to(x.dtype)
        dt.wait(flags, [t], signal=2, update=3, hasSubsequentMemAccess=False)
    return out


def test_block_of_flags_with_wait_for_and_update():
    x = torch.randn(37)
    flags = torch.zeros(40, dtype=torch.int32)
    flags[37:] = 7  # past the tile loop's end: never touched
    torch.testing.assert_close(claim_then_release(x, flags), x)
    assert flags[:37].tolist() == [3] * 37 and flags[37:].tolist() == [7] * 3
    f2 = torch.zeros(40, dtype=torch.int32)
    f2[37:] = 7
    torch.testing.assert_close(claim_then_release.ref(x, f2), x)
    assert torch.equal(f2, flags)
    src = claim_then_release.to_newt_source(x, flags)
    assert src.count("mask=pending") == 2, src  # both loops keep the ragged lanes off memory
    assert src.count("nl.debug_barrier()") == 1, src  # before the signal; the wait has no later access


def test_signal_returns_the_old_flags():
    @dt.kernel
    def bump(flags: torch.Tensor) -> torch.Tensor:
        old = torch.empty_like(flags)
        for t in dt.tile(flags.size(0), block_size=4):
            old[t] = dt.signal(flags, [t], signal=5, hasPreviousMemAccess=False)
        return old

    f = torch.arange(10, dtype=torch.int32)
    assert bump(f.clone()).tolist() == list(range(10))
    g = f.clone()
    bump(g)
    assert g.tolist() == [5] * 10
    assert "sem='relaxed'" in bump.to_newt_source(f.clone())


@dt.kernel
def waits_for_a_later_program(x: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0), block_size=8):
        dt.wait(flags, [t.id + 1], signal=1)
        out[t] = x[t]
        dt.signal(flags, [t.id], signal=1)
    return out


def test_waiting_for_a_later_program_is_a_located_deadlock_in_the_interpreter():
    from newt.interpreter.errors import DeadlockError
    x = torch.randn(24)
    flags = torch.zeros(4, dtype=torch.int32)
    flags[3] = 1
    with pytest.raises(DeadlockError) as ei:
        waits_for_a_later_program(x, flags)
    msg = str(ei.value)
    assert "while (nl.atomic_cas(flags" in msg and "later one" in msg, msg
    flags = torch.zeros(4, dtype=torch.int32)
    flags[3] = 1
    with pytest.raises(dt.DeuteronUsageError, match="dt.wait in kernel.ref"):
        waits_for_a_later_program.ref(x, flags)


def test_bad_arguments_are_d004_at_the_call(tmp_path):
    mod = write_module(tmp_path, "k_sig_bad", """
    @dt.kernel
    def float_pad(x, pad):
        for t in dt.tile(x.size(0), block_size=8):
            dt.signal(pad, [t.id], signal=1)
        return x

    @dt.kernel
    def cta_scope(x, pad):
        for t in dt.tile(x.size(0), block_size=8):
            dt.wait(pad, [t.id], signal=1, scope="cta")
        return x
    """)
    x = torch.randn(16)
    raises_at(mod, lambda: mod.float_pad(x, torch.zeros(2)), "D004", "dt.signal(pad, [t.id], signal=1)",
              contains="int32")
    raises_at(mod, lambda: mod.cta_scope(x, torch.ones(2, dtype=torch.int32)), "D004", 'scope="cta"',
              contains="unknown scope")



@needs_nvrtc
@pytest.mark.parametrize("which", ["chained", "block"])
def test_signal_wait_compile_for_sm90a(which):
    from deuteron.compile import compile_binary
    from deuteron.kernel import _HostRun, _runtime_args
    x = torch.randn(37)
    k, args = (chained_cumsum, (x, *_pads(5))) if which == "chained" else (claim_then_release,
                                                                          (x, torch.zeros(40, dtype=torch.int32)))
    b = k._bind(args, {})
    e = k._entry(b)
    run = _HostRun(e, e.space.default(), "source")
    run.execute(b)
    (gen, m, prog, loc), = run.built
    ck = compile_binary(gen, m, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a")
    ptx = ck.asm["ptx"]
    if which == "chained":  # the wait: acquire CAS spins; the signal: a release exchange
        want = [r"atom\.acquire\.gpu\.global\.cas\.b32", r"atom\.release\.gpu\.global\.exch\.b32"]
    else:  # signal(wait_for=): release CAS spins; wait(update=, no later access): relaxed ones
        want = [r"atom\.release\.gpu\.global\.cas\.b32", r"atom\.relaxed\.gpu\.global\.cas\.b32"]
    for w in want:
        assert re.search(w, ptx), (w, ptx)
    assert "bar.sync" in ptx or "barrier.sync" in ptx, ptx


@pytest.mark.gpu
def test_chained_scan_on_the_gpu():
    x = torch.randn(4096, device="cuda")
    nt = 4096 // 8
    flags, carry = _pads(nt)
    out = chained_cumsum(x, flags.cuda(), carry.cuda())
    torch.testing.assert_close(out.cpu(), x.cpu().cumsum(0), atol=1e-3, rtol=1e-4)
