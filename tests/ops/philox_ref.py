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
