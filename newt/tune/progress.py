"""Progress of a tuning run: one bar on a terminal, events for a callback.

The bar is a ``tqdm`` bar (``style="tqdm"``; ``tqdm`` is optional: without it
the plain text line is drawn instead) or a plain text line (``style="text"``,
deuteron's ``[deuteron] autotune k [####....] 3/72 best 0.2 ms``).  It is
drawn on a terminal, or as ``NEWT_TUNE_PROGRESS=0/1`` (``env=``) says; events
reach the callback either way.  Events are dicts ``{"kind": "begin", "name",
"total"}``, ``{"kind": "report", "name", "index", "total", "config",
"status", "ms", "worker", "best_ms", "best_config", "elapsed"}`` and
``{"kind": "end", "name", "tested", "failed", "best_ms", "best_config",
"elapsed"}``, plus the caller's extra keys; the language server turns them
into ``$/progress``.
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
                 unit: str = "config", style: str = "tqdm", label: str | None = None,
                 env: str = "NEWT_TUNE_PROGRESS"):
        self.name = name
        self.total = max(0, int(total))
        self.callback = callback
        self.stream = stream or sys.stderr
        self.label = label or f"tune {name}"
        if bar is None:
            v = os.environ.get(env)
            bar = v == "1" if v in ("0", "1") else bool(getattr(self.stream, "isatty", lambda: False)())
        self._bar = None
        self._text = False
        if bar and style == "tqdm" and have_tqdm():
            from tqdm import tqdm
            self._bar = tqdm(total=self.total or None, desc=self.label, unit=unit, file=self.stream,
                             leave=False, dynamic_ncols=True)
        elif bar:
            self._text = True
        self.t0 = time.perf_counter()
        self.n = 0
        self.failed = 0
        self.best_ms: float | None = None
        self.best_config = None

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def _emit(self, ev: dict):
        if self.callback is not None:
            try:
                self.callback(ev)
            except Exception:  # a broken callback must not stop tuning
                pass

    def _write(self, text: str):
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def _draw_text(self):
        width = 24
        filled = int(min(1.0, self.n / max(1, self.total)) * width)
        best = f"best {self.best_ms:.4f} ms" if self.best_ms is not None else "best -"
        self._write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.n}/{self.total} {best}  "
                    f"{self.elapsed():.1f}s")

    def begin(self, **extra):
        self._emit({"kind": "begin", "name": self.name, "total": self.total, **extra})
        if self._text:
            self._draw_text()

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
              "elapsed": self.elapsed(), **extra}
        self._emit(ev)
        if self._bar is not None:
            post = {"best": f"{self.best_ms:.4g}ms" if self.best_ms is not None else "-", "failed": self.failed}
            if worker:
                post["last"] = worker
            self._bar.set_postfix(post, refresh=False)
            self._bar.update(1)
        elif self._text:
            self._draw_text()

    def end(self, **extra):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._emit({"kind": "end", "name": self.name, "tested": self.n, "failed": self.failed,
                    "best_ms": self.best_ms, "best_config": None if self.best_config is None else
                    str(self.best_config), "elapsed": self.elapsed(), **extra})
        if self._text:
            self._write("\n")
