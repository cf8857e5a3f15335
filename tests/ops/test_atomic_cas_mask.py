"""``nl.atomic_cas(..., mask=)``: newt's extension over Triton.  Masked-off lanes touch no memory (an
out-of-bounds pointer there is fine) and return 0, like the masked-off lanes of ``atomic_add``."""

from __future__ import annotations

import re

import pytest
import torch

import newt
import newt.language as nl


@newt.jit
def masked_cas_kernel(ptr, cmp_ptr, val_ptr, old_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    c = nl.load(cmp_ptr + offs, mask=m)
    v = nl.load(val_ptr + offs, mask=m)
    old = nl.atomic_cas(ptr + offs, c, v, mask=m)
    nl.store(old_ptr + offs, old, mask=m)


@newt.jit
def masked_cas_off_lanes_kernel(ptr, old_ptr, n, BLOCK: nl.constexpr):
    # every lane's result is stored: the off lanes' 0 is visible
    offs = nl.arange(0, BLOCK)
    old = nl.atomic_cas(ptr + offs, 0, 7, sem="relaxed", scope="gpu", mask=offs < n)
    nl.store(old_ptr + offs, old)


def _eager_cas(mem, cmp, val):
    old = mem.clone()
    new = torch.where(mem == cmp, val, mem)
    return new, old


@pytest.mark.parametrize("n", [37, 64])
def test_masked_cas_against_eager(backend, n):
    g = torch.Generator().manual_seed(n)
    mem0 = torch.randint(0, 3, (n,), generator=g, dtype=torch.int32)
    cmp = torch.randint(0, 3, (n,), generator=g, dtype=torch.int32)
    val = torch.randint(10, 20, (n,), generator=g, dtype=torch.int32)
    mem = backend.put(mem0.clone())
    old = backend.zeros(n, dtype=torch.int32)
    # the last program's tile is ragged when n = 37: its off lanes point past ``mem``
    backend.launch(masked_cas_kernel, ((n + 15) // 16,), mem, backend.put(cmp), backend.put(val), old, n,
                   BLOCK=16)
    want_mem, want_old = _eager_cas(mem0, cmp, val)
    assert torch.equal(backend.get(mem), want_mem)
    assert torch.equal(backend.get(old), want_old)


def test_masked_off_lanes_do_not_touch_memory_and_return_zero(backend):
    mem = backend.put(torch.tensor([0, 5, 0, 0, 9, 9, 9, 9], dtype=torch.int32))
    old = backend.put(torch.full((8,), -1, dtype=torch.int32))
    backend.launch(masked_cas_off_lanes_kernel, (1,), mem, old, 3, BLOCK=8)
    assert backend.get(mem).tolist() == [7, 5, 7, 0, 9, 9, 9, 9]
    assert backend.get(old).tolist() == [0, 5, 0, 0, 0, 0, 0, 0]


def test_interpreter_catches_an_unmasked_lane_past_the_end():
    """Without the mask the same ragged call reads past the tensor: the mask is what keeps it in bounds."""
    @newt.jit
    def unmasked(ptr, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        nl.atomic_cas(ptr + offs, 0, 1)

    from newt.runtime.interpret import launch_jit
    mem = torch.zeros(5, dtype=torch.int32)
    with pytest.raises(Exception, match="(?i)out of bounds"):
        launch_jit(unmasked, (1,), (mem,), {"BLOCK": 8})


def test_mask_must_broadcast_to_the_pointer():
    @newt.jit
    def bad(ptr, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        nl.atomic_cas(ptr + offs, 0, 1, mask=nl.arange(0, 2 * BLOCK) < 3)

    with pytest.raises(Exception, match="pointer and mask"):
        newt.compile(bad, signature={"ptr": "*i32"}, constexprs={"BLOCK": 8}, target="sm_90a", cache=False)


def _nvrtc() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
        return True
    except Exception:
        return False


@pytest.mark.skipif(not _nvrtc(), reason="NVRTC (cuda-bindings) is not installed")
@pytest.mark.parametrize("bits", [16, 32, 64])
def test_masked_cas_compiles_with_the_cas_under_a_predicate(bits):
    ty = {16: "i16", 32: "i32", 64: "i64"}[bits]
    sig = {"ptr": f"*{ty}:16", "cmp_ptr": f"*{ty}:16", "val_ptr": f"*{ty}:16", "old_ptr": f"*{ty}:16",
           "n": "i32"}
    ck = newt.compile(masked_cas_kernel, signature=sig, constexprs={"BLOCK": 128}, target="sm_90a", num_warps=4,
                      cache=False)
    ptx = ck.asm["ptx"]
    lines = ptx.splitlines()
    cas = [i for i, ln in enumerate(lines) if f"atom.acq_rel.gpu.global.cas.b{bits}" in ln]
    assert cas, ptx
    # the CAS sits behind a branch on the lane's mask: an ``@%p bra`` just before it (one element a thread:
    # nothing else is predicated there)
    assert any(re.search(r"@!?%p\d+ bra", ln) for ln in lines[cas[0] - 16:cas[0]]), ptx
    from newt.backend.cuda import sass
    try:
        s = sass(ck.asm["cubin"])
    except Exception as e:
        pytest.skip(f"cuobjdump unavailable: {e}")
    ins = [ln for ln in s.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", ln)]
    at = [i for i, ln in enumerate(ins) if re.search(r"\bATOMG?\.\S*CAS", ln)]
    assert at, s
    # the CAS is predicated (``@P0 ATOMG...``) or skipped by a predicated branch before it (16-bit: ptxas
    # makes a 32-bit CAS loop of it, so the branch is further up)
    assert re.search(r"@!?P\d", ins[at[0]]) or any(re.search(r"@!?P\d+ BRA", ln) for ln in ins[:at[0]]), s


@newt.jit
def xchg_unused_kernel(ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.atomic_xchg(ptr + offs, 1, sem="release")


@pytest.mark.skipif(not _nvrtc(), reason="NVRTC (cuda-bindings) is not installed")
def test_unused_release_xchg_is_an_atom_not_a_red():
    """PTX's ``red`` has no ``.exch``: an exchange whose old value nobody reads is still an ``atom``."""
    ck = newt.compile(xchg_unused_kernel, signature={"ptr": "*i32:16"}, constexprs={"BLOCK": 32}, target="sm_90a",
                      num_warps=1, cache=False)
    assert "atom.release.gpu.global.exch.b32" in ck.asm["ptx"]
    assert "red.release.gpu.global.exch" not in ck.asm["ptx"]
