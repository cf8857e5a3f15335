"""Autotuning progress: a bar on the terminal and events for a callback.

Events are dicts: ``{"kind": "begin", "kernel", "budget", "space"}``, one
``{"kind": "report", "index", "config", "ms", "status", "error", "best_ms",
"best_config", "elapsed"}`` per config evaluated, and ``{"kind": "end",
"best_config", "best_ms", "tested", "elapsed", "failed"}``.  The language
server turns them into ``$/progress`` notifications.
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["Progress"]


class Progress:
    def __init__(self, kernel_name: str, budget: int, callback=None, bar: bool | None = None, stream=None):
        self.name = kernel_name
        self.budget = max(1, budget)
        self.callback = callback
        self.stream = stream or sys.stderr
        if bar is None:
            env = os.environ.get("DEUTERON_PROGRESS")
            bar = env == "1" if env in ("0", "1") else bool(getattr(self.stream, "isatty", lambda: False)())
        self.bar = bar
        self.t0 = time.perf_counter()
        self.n = 0
        self.best_ms = None
        self.best_config = None
        self.failed = 0

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def _emit(self, ev: dict):
        if self.callback is not None:
            try:
                self.callback(ev)
            except Exception:  # noqa: BLE001 - a broken callback must not stop tuning
                pass

    def begin(self, space_desc: str):
        self._emit({"kind": "begin", "kernel": self.name, "budget": self.budget, "space": space_desc})
        self._draw()

    def report(self, config, ms, status: str, error: str | None = None):
        self.n += 1
        if ms is not None and (self.best_ms is None or ms < self.best_ms):
            self.best_ms = ms
            self.best_config = config
        if status not in ("ok",):
            self.failed += 1
        self._emit({"kind": "report", "kernel": self.name, "index": self.n, "budget": self.budget,
                    "config": str(config), "ms": ms, "status": status, "error": error, "best_ms": self.best_ms,
                    "best_config": str(self.best_config) if self.best_config is not None else None,
                    "elapsed": self.elapsed()})
        self._draw()

    def _draw(self):
        if not self.bar:
            return
        width = 24
        frac = min(1.0, self.n / self.budget)
        filled = int(frac * width)
        best = f"best {self.best_ms:.4f} ms" if self.best_ms is not None else "best -"
        line = (f"\r[deuteron] autotune {self.name} [{'#' * filled}{'.' * (width - filled)}] {self.n}/{self.budget} "
                f"{best}  {self.elapsed():.1f}s")
        try:
            self.stream.write(line)
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def end(self, config, ms, message: str | None = None):
        self._emit({"kind": "end", "kernel": self.name, "best_config": str(config) if config else None,
                    "best_ms": ms, "tested": self.n, "failed": self.failed, "elapsed": self.elapsed(),
                    "message": message})
        if self.bar:
            try:
                self.stream.write("\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass
