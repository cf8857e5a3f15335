"""What a quick tune starts with, worked out without a GPU: its seeds and its first pattern-search batch.

``quick_plan(kernel, args, tma=...)`` builds the kernel's config space from a trace of ``args`` (CPU tensors
of the real shapes do), then the seeds a GPU quick tune evaluates first (``Tuner.seed_configs``, the same
random draws) and the neighbours it evaluates next if ``leader`` (default: the first seed after the default)
leads, cut to the quick budget.  It plans as on an sm_90a GPU (``wgmma``: dot tiles newt lowers to wgmma
only); ``tma``: whether the target copies the descriptor form's tiles with TMA (the descriptor form and
warp-specialized seeds), by default what :func:`deuteron.space.tma_active` says for a CUDA device here (the GPU's
target, or ``NEWT_TARGET``'s without one, under the current ``NEWT_TMA``: on sm_90a true unless ``NEWT_TMA=0``).
``benchmarks/deuteron_bench.py --plan`` prints it and compiles every planned config for sm_90a; the CI tests
check its composition.
"""

from __future__ import annotations

import random

from ..config import Config
from . import EFFORT_BUDGETS, Tuner

__all__ = ["quick_plan"]


def quick_plan(kernel, args, kwargs=None, tma: bool | None = None, leader: Config | None = None,
               wgmma: bool = True) -> dict:
    """``{"space", "default", "seeds", "refine", "budget"}``: the seeds in the order they are submitted (the
    default first), then the first pattern-search batch (the unseen neighbours of ``leader``, then of the
    second seed), both within the quick config budget."""
    from ..space import count_tile_loops, tma_active
    if tma is None:
        tma = tma_active("cuda")
    b = kernel._bind(tuple(args), dict(kwargs or {}))
    entry = kernel._entry(b)
    space = entry.space
    max_configs, _seconds, n_seeds, width = EFFORT_BUDGETS["quick"]
    t = Tuner.__new__(Tuner)  # only what seed_configs and _neighbours read: no worker pool, no oracle
    t.space, t.rng, t.n_seeds, t.width, t.wide, t.results = space, random.Random(1234), n_seeds, width, False, {}
    old = space.tma_loops, space.wgmma
    space.tma_loops = (count_tile_loops(entry.discovered.values())
                       if (tma and space.has_dot and space.descriptor_tiles()) else 0)
    space.wgmma = wgmma and space.has_dot
    try:
        default = space.default()
        seeds = ([default] + t.seed_configs(default))[:min(n_seeds, max_configs)]
        seen = {c.key() for c in seeds}
        leaders = [leader] if leader is not None else []
        leaders += [c for c in seeds[1:] if leader is None or c.key() != leader.key()]
        refine = []
        for c in leaders[:width]:
            for nb in space.neighbors(c, wide=False):
                if nb.key() not in seen:
                    seen.add(nb.key())
                    refine.append(nb)
        refine = refine[:max(0, max_configs - len(seeds))]
    finally:
        space.tma_loops, space.wgmma = old
    return {"space": space.describe(), "default": default, "seeds": seeds, "refine": refine,
            "budget": max_configs}
