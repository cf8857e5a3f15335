"""Counter-based random numbers for ``kernel.ref``: Philox 4x32 with 10 rounds in torch int64 arithmetic, the
bits newt's ``nl.rand`` / ``nl.randint`` give for the same seed and offsets (so the eager oracle and the kernel
draw the same numbers).  ``dt.rand``'s offsets are the element's row-major position in the full logical shape
(a tile counts as its whole loop)."""

from __future__ import annotations

import torch

__all__ = ["philox_uint32", "uniform", "offsets_for"]

_M32 = 0xFFFFFFFF
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57


def _mul32(a: int, b: torch.Tensor):
    """(high, low) 32-bit halves of ``a * b`` for a constant ``a`` and uint32 values ``b`` held in int64 (the
    full product does not fit: split ``b`` into 16-bit halves)."""
    bh, bl = b >> 16, b & 0xFFFF
    ph, pl = a * bh, a * bl  # each < 2**48
    hi = (ph + (pl >> 16)) >> 16
    lo = (((ph & 0xFFFF) << 16) + pl) & _M32
    return hi & _M32, lo


def philox_uint32(seed: int, offsets: torch.Tensor, rounds: int = 10) -> torch.Tensor:
    """The first uint32 block of Philox 4x32 for counters ``(offset low, offset high, 0, 0)``, keyed by the
    64-bit ``seed`` (as int64 values in [0, 2**32))."""
    off = offsets.to(torch.int64)
    c0, c1 = off & _M32, (off >> 32) & _M32
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    k0, k1 = seed & _M32, (seed >> 32) & _M32
    for _ in range(rounds):
        hb, lb = _mul32(_ROUND_B, c2)
        ha, la = _mul32(_ROUND_A, c0)
        c0, c1, c2, c3 = hb ^ c1 ^ k0, lb, ha ^ c3 ^ k1, la
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    return c0


def uniform(bits: torch.Tensor) -> torch.Tensor:
    """uint32 bits -> float32 in [0, 1), like newt's ``uint_to_uniform_float``."""
    x = torch.where(bits >= 2**31, bits - 2**32, bits)  # as int32
    x = torch.where(x < 0, -x - 1, x).to(torch.int32)
    return x.to(torch.float32) * torch.tensor(4.6566127342e-10, dtype=torch.float32, device=x.device)


def offsets_for(parts, device) -> torch.Tensor:
    """Row-major offsets of a block: ``parts`` is ``[(indices, extent), ...]`` per dimension."""
    if not parts:
        return torch.zeros((), dtype=torch.int64, device=device)
    stride, out = 1, None
    nd = len(parts)
    for d in range(nd - 1, -1, -1):
        idx, ext = parts[d]
        shape = [1] * nd
        shape[d] = idx.numel()
        term = idx.to(torch.int64).reshape(shape) * stride
        out = term if out is None else out + term
        stride *= ext
    return out
