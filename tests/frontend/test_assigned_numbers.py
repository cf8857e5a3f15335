"""Numbers assigned to names inside a kernel are 0-d tensors in Triton (``to_tensor`` in its code generator's
``visit_Assign``): typed by value (``1 << 31`` is uint32), promoted as tensors, with tensor methods.  newt keeps
them compile-time constants that carry that dtype (newt/frontend/typedconst.py).  Found on FlagGems'
``randperm.py`` (a radix sort's look-back masks), where ``newt check`` reported three false errors."""

from __future__ import annotations

import torch
from triton_snippets import _errors, _fmt

import newt
import newt.language as nl

_LOOKBACK = """
@triton.jit
def lookback(flags, out, n, BLOCK: tl.constexpr):
    PARTIAL = 1 << 30
    GLOBAL = 1 << 31
    KIND = PARTIAL | GLOBAL
    VALUE = ~KIND
    offs = tl.arange(0, BLOCK)
    f = tl.load(flags + offs, mask=offs < n, other=0)
    v = (f & VALUE).to(tl.int32)
    g = tl.where((f & GLOBAL) != 0, v, -v)
    tl.store(out + offs, g | GLOBAL, mask=offs < n)

def run():
    flags = torch.zeros(64, dtype=torch.int32, device="cuda")
    out = torch.empty(64, dtype=torch.int32, device="cuda")
    lookback[(1,)](flags, out, 64, BLOCK=64)
"""


def test_a_mask_above_int32_assigned_in_the_kernel_is_no_out_of_range_error():
    ds = _errors(_LOOKBACK)
    assert not ds, _fmt(ds)


def test_the_same_mask_written_as_a_literal_is_still_out_of_range():
    # a literal adapts to the int32 block and must fit it (Triton: "out of range"); only a name makes it a tensor
    ds = _errors(_LOOKBACK.replace("(f & GLOBAL) != 0", "(f & (1 << 31)) != 0"))
    assert any(d.code == "N023" and "out of range" in d.message for d in ds), _fmt(ds)


def test_a_constexpr_bound_to_a_name_has_tensor_methods():
    ds = _errors("""
    @triton.jit
    def shuffle(x, out, BLOCK: tl.constexpr):
        r = tl.load(x + tl.arange(0, BLOCK)).to(tl.uint32)
        bs = BLOCK
        tl.store(out + tl.arange(0, BLOCK), r % bs.to(tl.uint32))

    def run():
        x = torch.zeros(64, dtype=torch.int32, device="cuda")
        shuffle[(1,)](x, x, BLOCK=64)
    """)
    assert not ds, _fmt(ds)


def test_a_literal_still_has_no_tensor_methods():
    ds = _errors("""
    @triton.jit
    def k(out):
        tl.store(out, (5).to(tl.uint32))

    def run():
        x = torch.zeros(1, dtype=torch.int32, device="cuda")
        k[(1,)](x)
    """)
    assert any(d.code == "N004" for d in ds), _fmt(ds)


def test_look_back_masks_compute_as_unsigned_32_bit_values():
    @newt.jit(interpret=True)
    def k(flags, out, BLOCK: nl.constexpr):
        PARTIAL = 1 << 30
        GLOBAL = 1 << 31
        VALUE = ~(PARTIAL | GLOBAL)
        offs = nl.arange(0, BLOCK)
        f = nl.load(flags + offs)
        nl.store(out + offs, (f & VALUE).to(nl.int32))
        nl.store(out + BLOCK + offs, ((f & GLOBAL) != 0).to(nl.int32))

    vals = [0, 5, (1 << 30) | 7, -(1 << 31) + 9, -1, 0x3FFFFFFF, 1 << 29, -(1 << 30)]
    f = torch.tensor(vals, dtype=torch.int32)
    out = torch.zeros(16, dtype=torch.int32)
    k[(1,)](f, out, BLOCK=8)
    assert out[:8].tolist() == [v & 0x3FFFFFFF for v in vals]
    assert out[8:].tolist() == [int(v < 0) for v in vals]


def test_an_assigned_number_promotes_a_narrow_block_as_a_tensor_does():
    # Triton: ``n = 2`` is an int32 tensor, so ``x_int8 * n`` is int32 (200, not -56); the literal keeps int8
    @newt.jit(interpret=True)
    def k(x, out):
        n = 2
        v = nl.load(x + nl.arange(0, 4))
        nl.store(out + nl.arange(0, 4), (v * n).to(nl.int32))
        nl.store(out + 4 + nl.arange(0, 4), (v * 2).to(nl.int32))

    x = torch.tensor([100, -100, 3, 127], dtype=torch.int8)
    out = torch.zeros(8, dtype=torch.int32)
    k[(1,)](x, out)
    assert out[:4].tolist() == [200, -200, 6, 254]
    assert out[4:].tolist() == [-56, 56, 6, -2]


def test_an_assigned_number_is_still_a_compile_time_size():
    # newt is more lenient than Triton here (Triton refuses a tensor as an arange bound): never an error
    @newt.jit(interpret=True)
    def k(out):
        N = 8
        H = N // 2
        nl.store(out + nl.arange(0, H), nl.arange(0, H) * N)

    out = torch.zeros(4, dtype=torch.int32)
    k[(1,)](out)
    assert out.tolist() == [0, 8, 16, 24]


def test_folded_typed_arithmetic_wraps_like_the_tensor_it_is():
    @newt.jit(interpret=True)
    def k(out):
        a = 0x7FFFFFFF
        b = a + 1            # int32 tensor arithmetic wraps
        c = 1 << 31          # uint32
        d = c + c            # uint32 wraps to 0
        m = -7
        nl.store(out, b)
        nl.store(out + 1, d.to(nl.int32))
        nl.store(out + 2, m // 2)   # C division on int32 tensors: -3 (Python's would be -4)
        nl.store(out + 3, m % 2)    # C remainder: -1 (Python's would be 1)

    out = torch.zeros(4, dtype=torch.int32)
    k[(1,)](out)
    assert out.tolist() == [-(1 << 31), 0, -3, -1]
