"""Occupancy of a compiled kernel from its registers, shared memory and threads, with no GPU.

The limits are NVIDIA's documented per-architecture figures (CUDA C++ Programming Guide, "Technical
Specifications per Compute Capability"; the CUDA occupancy calculator's allocation rules):

* registers: 64 K 32-bit registers per SM, split over 4 sub-partitions of 16 K; a warp's registers are
  allocated 256 at a time (a thread's count rounded up to a multiple of 8), and a warp lives in one
  sub-partition; at most 255 registers a thread;
* shared memory: per SM 228 KB on sm_90 (164 KB sm_80, 100 KB sm_89 / sm_120), at most 227 KB a block
  (163 / 99 KB), and the system reserves 1 KB per resident block;
* at most 1024 threads a block, 64 warps (2048 threads) and 32 blocks per SM on sm_80 / sm_90 (48 warps and
  24 blocks on sm_89, 48 warps and 32 blocks on sm_120).

Pure Python and data only: the server, the worker and the tests share it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SmLimits", "LIMITS", "limits_for", "occupancy"]


@dataclass(frozen=True)
class SmLimits:
    regs_per_sm: int = 65536
    sub_partitions: int = 4
    reg_alloc_unit: int = 256  # registers per warp, allocated at a time
    max_regs_per_thread: int = 255
    shared_per_sm: int = 228 * 1024
    max_shared_per_block: int = 227 * 1024
    reserved_shared_per_block: int = 1024
    max_threads_per_block: int = 1024
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32


LIMITS = {
    "sm_90a": SmLimits(),
    "sm_90": SmLimits(),
    "sm_80": SmLimits(shared_per_sm=164 * 1024, max_shared_per_block=163 * 1024),
    "sm_89": SmLimits(shared_per_sm=100 * 1024, max_shared_per_block=99 * 1024, max_warps_per_sm=48,
                      max_blocks_per_sm=24),
    "sm_120": SmLimits(shared_per_sm=100 * 1024, max_shared_per_block=99 * 1024, max_warps_per_sm=48),
}


def limits_for(target: str) -> SmLimits:
    return LIMITS.get(target) or LIMITS["sm_90a"]


def occupancy(n_regs: int, shared: int, threads: int, target: str = "sm_90a") -> dict:
    """Resident blocks and warps per SM of a kernel using ``n_regs`` registers a thread, ``shared`` bytes of
    shared memory a block and ``threads`` threads a block: ``{"blocks_per_sm", "warps_per_sm", "occupancy"
    (warps / the SM's maximum), "limiter" ("registers", "shared memory", "threads", "blocks"), "launchable",
    "why" (when it cannot launch)}``."""
    lim = limits_for(target)
    warps = max(1, -(-threads // 32))
    why = None
    if threads > lim.max_threads_per_block:
        why = f"{threads} threads a block (at most {lim.max_threads_per_block})"
    elif shared > lim.max_shared_per_block:
        why = f"{shared} bytes of shared memory a block (at most {lim.max_shared_per_block} on {target})"
    elif n_regs > lim.max_regs_per_thread:
        why = f"{n_regs} registers a thread (at most {lim.max_regs_per_thread})"
    by = {"blocks": lim.max_blocks_per_sm, "threads": lim.max_warps_per_sm // warps}
    if n_regs > 0:
        per_warp = -(-n_regs * 32 // lim.reg_alloc_unit) * lim.reg_alloc_unit
        warps_by_regs = lim.sub_partitions * ((lim.regs_per_sm // lim.sub_partitions) // per_warp)
        by["registers"] = warps_by_regs // warps
        if by["registers"] == 0 and why is None:
            why = (f"{n_regs} registers x {threads} threads = {n_regs * threads} registers a block (the SM has "
                   f"{lim.regs_per_sm}, allocated {lim.reg_alloc_unit} a warp)")
    if shared > 0:
        by["shared memory"] = lim.shared_per_sm // (shared + lim.reserved_shared_per_block)
    limiter = min(by, key=lambda k: (by[k], k != "registers"))
    blocks = 0 if why is not None else by[limiter]
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * warps,
            "occupancy": round(blocks * warps / lim.max_warps_per_sm, 4), "limiter": limiter,
            "launchable": why is None, "why": why, "threads": threads}
