"""A plain-Python Philox 4x32-10, the reference for newt.language.random (independent of newt)."""

from __future__ import annotations

import torch

M32 = 0xFFFFFFFF
ROUND_A, ROUND_B = 0xD2511F53, 0xCD9E8D57
KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85


def philox(seed: int, c0: int, c1=0, c2=0, c3=0, n_rounds=10):
    k0, k1 = seed & M32, (seed >> 32) & M32
    c0, c1, c2, c3 = c0 & M32, c1 & M32, c2 & M32, c3 & M32
    for _ in range(n_rounds):
        a0, a2 = c0, c2
        c0 = ((ROUND_B * a2) >> 32) ^ c1 ^ k0
        c2 = ((ROUND_A * a0) >> 32) ^ c3 ^ k1
        c1 = (ROUND_B * a2) & M32
        c3 = (ROUND_A * a0) & M32
        k0 = (k0 + KEY_A) & M32
        k1 = (k1 + KEY_B) & M32
    return c0, c1, c2, c3


def randint(seed, offsets):
    return [philox(seed, o)[0] for o in offsets]


def randint4x(seed, offsets):
    return [philox(seed, o) for o in offsets]


def uniform(xs) -> torch.Tensor:
    """uint32 bits -> fp32 in [0, 1) exactly as the kernel computes it (fp32 arithmetic)."""
    signed = [x - (1 << 32) if x >= 1 << 31 else x for x in xs]
    t = torch.tensor(signed, dtype=torch.int64)
    t = torch.where(t < 0, -t - 1, t).to(torch.int32)
    return t.to(torch.float32) * torch.tensor(4.6566127342e-10, dtype=torch.float32)


def rand(seed, offsets) -> torch.Tensor:
    return uniform(randint(seed, offsets))


M64 = 0xFFFFFFFFFFFFFFFF
ROUND64_A, ROUND64_B = 0xD2E7470EE14C6C93, 0xCA5A826395121157
KEY64_A, KEY64_B = 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B


def philox64(seed: int, c0: int, c1=0, c2=0, c3=0, n_rounds=10):
    """Philox 4x64-10 keyed by ``(seed, 0)``: 64-bit counters."""
    k0, k1 = seed & M64, 0
    c0, c1, c2, c3 = c0 & M64, c1 & M64, c2 & M64, c3 & M64
    for _ in range(n_rounds):
        a0, a2 = c0, c2
        c0 = ((ROUND64_B * a2) >> 64) ^ c1 ^ k0
        c2 = ((ROUND64_A * a0) >> 64) ^ c3 ^ k1
        c1 = (ROUND64_B * a2) & M64
        c3 = (ROUND64_A * a0) & M64
        k0 = (k0 + KEY64_A) & M64
        k1 = (k1 + KEY64_B) & M64
    return c0, c1, c2, c3


def randint64_offsets(seed, offsets):
    """``randint`` of 64-bit offsets: the counter is the offset's (low, high) 32-bit halves."""
    return [philox(seed, o & M32, (o >> 32) & M32)[0] for o in offsets]
