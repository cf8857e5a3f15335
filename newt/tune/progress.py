"""Progress of a tuning run: one tqdm bar on a terminal, events for a callback.

``tqdm`` is optional: without it (or with ``NEWT_TUNE_PROGRESS=0``, or off a
terminal) no bar is drawn, and events still reach the callback.  Events are
dicts ``{"kind": "begin", "name", "total"}``, ``{"kind": "report", "name",
"index", "total", "config", "status", "ms", "worker", "best_ms",
"best_config", "elapsed"}`` and ``{"kind": "end", ...}``; the language
server turns them into ``$/progress``.
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["TuneProgress", "have_tqdm"]


def have_tqdm() -> bool:
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


class TuneProgress:
    def __init__(self, name: str, total: int, callback=None, bar: bool | None = None, stream=None,
                 unit: str = "config"):
        self.name = name
        self.total = max(0, int(total))
        self.callback = callback
        self.stream = stream or sys.stderr
        if bar is None:
            env = os.environ.get("NEWT_TUNE_PROGRESS")
            bar = env == "1" if env in ("0", "1") else bool(getattr(self.stream, "isatty", lambda: False)())
        self._bar = None
        if bar and have_tqdm():
            from tqdm import tqdm
            self._bar = tqdm(total=self.total or None, desc=f"tune {name}", unit=unit, file=self.stream,
                             leave=False, dynamic_ncols=True)
        self.t0 = time.perf_counter()
        self.n = 0
        self.failed = 0
        self.best_ms: float | None = None
        self.best_config = None

    def _emit(self, ev: dict):
        if self.callback is not None:
            try:
                self.callback(ev)
            except Exception:  # noqa: BLE001 - a broken callback must not stop tuning
                pass

    def begin(self, **extra):
        self._emit({"kind": "begin", "name": self.name, "total": self.total, **extra})

    def grow(self, total: int):
        self.total = max(self.total, int(total))
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()

    def report(self, config, status: str, ms: float | None = None, worker: str | None = None, **extra):
        self.n += 1
        if status == "ok" and ms is not None and (self.best_ms is None or ms < self.best_ms):
            self.best_ms, self.best_config = ms, config
        if status != "ok":
            self.failed += 1
        ev = {"kind": "report", "name": self.name, "index": self.n, "total": self.total, "config": str(config),
              "status": status, "ms": ms, "worker": worker, "best_ms": self.best_ms,
              "best_config": None if self.best_config is None else str(self.best_config),
              "elapsed": time.perf_counter() - self.t0, **extra}
        self._emit(ev)
        if self._bar is not None:
            post = {"best": f"{self.best_ms:.4g}ms" if self.best_ms is not None else "-", "failed": self.failed}
            if worker:
                post["last"] = worker
            self._bar.set_postfix(post, refresh=False)
            self._bar.update(1)

    def end(self, **extra):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._emit({"kind": "end", "name": self.name, "tested": self.n, "failed": self.failed,
                    "best_ms": self.best_ms, "best_config": None if self.best_config is None else
                    str(self.best_config), "elapsed": time.perf_counter() - self.t0, **extra})
