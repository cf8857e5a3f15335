"""Counter-based random numbers (Philox 4x32, and 4x64 for 64-bit counters) written in the newt language.

Being ordinary newt code, the same IR runs on the GPU and in the interpreter,
so both produce the same bits for the same ``seed`` and ``offset``.
"""

from __future__ import annotations

from . import builtins as _b
from . import core as _c
from .core import constexpr, inline_jit

PHILOX_KEY_A: constexpr = constexpr(0x9E3779B9)
PHILOX_KEY_B: constexpr = constexpr(0xBB67AE85)
PHILOX_ROUND_A: constexpr = constexpr(0xD2511F53)
PHILOX_ROUND_B: constexpr = constexpr(0xCD9E8D57)
PHILOX64_KEY_A: constexpr = constexpr(0x9E3779B97F4A7C15)
PHILOX64_KEY_B: constexpr = constexpr(0xBB67AE8584CAA73B)
PHILOX64_ROUND_A: constexpr = constexpr(0xD2E7470EE14C6C93)
PHILOX64_ROUND_B: constexpr = constexpr(0xCA5A826395121157)
N_ROUNDS_DEFAULT: constexpr = constexpr(10)


@inline_jit
def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Run ``n_rounds`` Philox rounds on four counters with the key ``(k0, k1)``.

    uint32 counters use Philox 4x32's constants, uint64 counters Philox 4x64's (as Triton does).
    """
    if c0.dtype == _c.uint32:
        key_a: constexpr = PHILOX_KEY_A
        key_b: constexpr = PHILOX_KEY_B
        round_a: constexpr = PHILOX_ROUND_A
        round_b: constexpr = PHILOX_ROUND_B
    else:
        _b.static_assert(c0.dtype == _c.uint64, "philox_impl needs uint32 or uint64 counters")
        key_a: constexpr = PHILOX64_KEY_A
        key_b: constexpr = PHILOX64_KEY_B
        round_a: constexpr = PHILOX64_ROUND_A
        round_b: constexpr = PHILOX64_ROUND_B
    for _ in _b.static_range(n_rounds):
        a0 = c0
        a2 = c2
        c0 = _b.umulhi(round_b, a2) ^ c1 ^ k0
        c2 = _b.umulhi(round_a, a0) ^ c3 ^ k1
        c1 = round_b * a2
        c3 = round_a * a0
        k0 = k0 + key_a
        k1 = k1 + key_b
    return c0, c1, c2, c3


@inline_jit
def philox(seed, c0, c1, c2, c3, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Philox of the counters ``c0..c3`` keyed by the 64-bit ``seed``.

    32-bit counters give four uint32 blocks (Philox 4x32, the key split into two halves); 64-bit counters
    four uint64 blocks (Philox 4x64 keyed by ``(seed, 0)``).
    """
    seed = _b.cast(seed, _c.uint64)
    if c0.dtype.primitive_bitwidth == 32:
        k0 = _b.cast(seed & 0xFFFFFFFF, _c.uint32)
        k1 = _b.cast((seed >> 32) & 0xFFFFFFFF, _c.uint32)
        c0 = _b.cast(c0, _c.uint32, bitcast=True)
        c1 = _b.cast(c1, _c.uint32, bitcast=True)
        c2 = _b.cast(c2, _c.uint32, bitcast=True)
        c3 = _b.cast(c3, _c.uint32, bitcast=True)
    else:
        _b.static_assert(c0.dtype.primitive_bitwidth == 64, "philox needs 32- or 64-bit counters")
        k0 = seed
        k1 = _b.full((1,), 0, _c.uint64)
        c0 = _b.cast(c0, _c.uint64, bitcast=True)
        c1 = _b.cast(c1, _c.uint64, bitcast=True)
        c2 = _b.cast(c2, _c.uint64, bitcast=True)
        c3 = _b.cast(c3, _c.uint64, bitcast=True)
    return philox_impl(c0, c1, c2, c3, k0, k1, n_rounds)


@inline_jit
def randint4x(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Four blocks of random uint32 for each element of ``offset`` (an int32 or int64 block).

    A 64-bit offset is the 64-bit counter ``(low, high)`` halves; a 32-bit one has a zero high half.
    """
    if offset.dtype.primitive_bitwidth > 32:
        lo = _b.cast(offset, _c.uint32)
        z = lo * 0
        hi = _b.cast(offset >> 32, _c.uint32)
    else:
        lo = _b.cast(offset, _c.uint32, bitcast=True)
        z = lo * 0
        hi = z
    return philox(seed, lo, hi, z, z, n_rounds)


@inline_jit
def randint(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """A block of random uint32, one for each element of ``offset``."""
    r0, r1, r2, r3 = randint4x(seed, offset, n_rounds)
    return r0


@inline_jit
def uint_to_uniform_float(x):
    """Map random uint32 (or uint64) bits to a float in [0, 1)."""
    if x.dtype.primitive_bitwidth == 32:
        x = _b.cast(x, _c.int32, bitcast=True)
        scale = 4.6566127342e-10
    else:
        _b.static_assert(x.dtype.primitive_bitwidth == 64, "uint_to_uniform_float needs 32- or 64-bit ints")
        x = _b.cast(x, _c.int64, bitcast=True)
        scale = 1.0842020432385337e-19
    x = _b.where(x < 0, -x - 1, x)
    return x * scale


@inline_jit
def rand(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Uniform float32 in [0, 1) for each element of ``offset``, keyed by ``seed``."""
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


@inline_jit
def rand4x(seed, offsets, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Four independent uniform float32 blocks for each element of ``offsets``."""
    i1, i2, i3, i4 = randint4x(seed, offsets, n_rounds)
    return (uint_to_uniform_float(i1), uint_to_uniform_float(i2),
            uint_to_uniform_float(i3), uint_to_uniform_float(i4))


@inline_jit
def pair_uniform_to_normal(u1, u2):
    """Box-Muller: two uniform blocks to two standard normal blocks."""
    u1 = _b.maximum(1.0e-7, u1)
    th = 6.283185307179586 * u2
    r = _b.sqrt(-2.0 * _b.log(u1))
    return r * _b.cos(th), r * _b.sin(th)


@inline_jit
def randn(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Standard normal float32 for each element of ``offset``, keyed by ``seed``."""
    i1, i2, i3, i4 = randint4x(seed, offset, n_rounds)
    u1 = uint_to_uniform_float(i1)
    u2 = uint_to_uniform_float(i2)
    n1, n2 = pair_uniform_to_normal(u1, u2)
    return n1


@inline_jit
def randn4x(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Four standard normal float32 blocks for each element of ``offset``."""
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(u1, u2)
    n3, n4 = pair_uniform_to_normal(u3, u4)
    return n1, n2, n3, n4
