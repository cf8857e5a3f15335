"""Counter-based random numbers (Philox 4x32) written in the newt language.

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
N_ROUNDS_DEFAULT: constexpr = constexpr(10)


@inline_jit
def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Run ``n_rounds`` Philox rounds on four uint32 counters with a 64-bit key ``(k0, k1)``."""
    for _ in _b.static_range(n_rounds):
        a0 = c0
        a2 = c2
        c0 = _b.umulhi(PHILOX_ROUND_B, a2) ^ c1 ^ k0
        c2 = _b.umulhi(PHILOX_ROUND_A, a0) ^ c3 ^ k1
        c1 = PHILOX_ROUND_B * a2
        c3 = PHILOX_ROUND_A * a0
        k0 = k0 + PHILOX_KEY_A
        k1 = k1 + PHILOX_KEY_B
    return c0, c1, c2, c3


@inline_jit
def philox(seed, c0, c1, c2, c3, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Philox 4x32 of the counters ``c0..c3`` keyed by the 64-bit ``seed``; returns four uint32 blocks."""
    seed = _b.cast(seed, _c.uint64)
    k0 = _b.cast(seed & 0xFFFFFFFF, _c.uint32)
    k1 = _b.cast((seed >> 32) & 0xFFFFFFFF, _c.uint32)
    c0 = _b.cast(c0, _c.uint32, bitcast=True)
    c1 = _b.cast(c1, _c.uint32, bitcast=True)
    c2 = _b.cast(c2, _c.uint32, bitcast=True)
    c3 = _b.cast(c3, _c.uint32, bitcast=True)
    return philox_impl(c0, c1, c2, c3, k0, k1, n_rounds)


@inline_jit
def randint4x(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """Four blocks of random uint32 for each element of ``offset`` (an int32 block)."""
    offset = _b.cast(offset, _c.uint32, bitcast=True)
    z = offset * 0
    return philox(seed, offset, z, z, z, n_rounds)


@inline_jit
def randint(seed, offset, n_rounds: constexpr = N_ROUNDS_DEFAULT):
    """A block of random uint32, one for each element of ``offset``."""
    r0, r1, r2, r3 = randint4x(seed, offset, n_rounds)
    return r0


@inline_jit
def uint_to_uniform_float(x):
    """Map random uint32 bits to a float32 in [0, 1)."""
    x = _b.cast(x, _c.int32, bitcast=True)
    x = _b.where(x < 0, -x - 1, x)
    return x * 4.6566127342e-10


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
