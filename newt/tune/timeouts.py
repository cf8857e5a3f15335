"""Compile timeouts that adapt to the kernel (as Helion's autotuner does).

Until ``min_samples`` compile times are known (the first population), the
timeout is ``initial`` seconds.  From then on it is ``factor`` times the
``quantile`` of the times seen, never below ``floor`` nor above ``initial``:
a config that compiles ten times slower than most is cut off instead of
holding a worker for two minutes.
"""

from __future__ import annotations

import os

__all__ = ["AdaptiveTimeout"]


class AdaptiveTimeout:
    def __init__(self, initial: float | None = None, quantile: float = 0.9, factor: float = 5.0,
                 floor: float | None = None, min_samples: int = 8):
        env = os.environ.get("NEWT_TUNE_COMPILE_TIMEOUT")
        self.initial = float(initial if initial is not None else (env or 120.0))
        self.fixed = env is not None and initial is None  # an explicit setting never adapts
        self.quantile = quantile
        self.factor = factor
        self.floor = float(floor if floor is not None else os.environ.get("NEWT_TUNE_MIN_TIMEOUT", 15.0))
        self.min_samples = max(1, min_samples)
        self.samples: list[float] = []

    def observe(self, seconds: float | None):
        if seconds is not None and seconds >= 0:
            self.samples.append(float(seconds))

    @property
    def adapted(self) -> bool:
        return not self.fixed and len(self.samples) >= self.min_samples

    def current(self) -> float:
        if not self.adapted:
            return self.initial
        xs = sorted(self.samples)
        i = min(len(xs) - 1, max(0, int(round(self.quantile * (len(xs) - 1)))))
        return max(self.floor, min(self.initial, self.factor * xs[i]))

    def __repr__(self):
        return f"AdaptiveTimeout({self.current():.3g} s from {len(self.samples)} samples)"
