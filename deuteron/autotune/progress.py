"""Autotuning progress: newt's :class:`newt.tune.TuneProgress` with deuteron's text bar and event keys.

Events are dicts: ``{"kind": "begin", "kernel", "budget", "space"}``, one
``{"kind": "report", "index", "config", "ms", "status", "error", "best_ms",
"best_config", "elapsed"}`` per config evaluated, and ``{"kind": "end",
"best_config", "best_ms", "tested", "elapsed", "failed", "message"}`` (and
newt's keys: ``name``, ``total``, ``worker``).  The language server turns them
into ``$/progress`` notifications.
"""

from __future__ import annotations

from newt.tune import TuneProgress

__all__ = ["Progress"]


class Progress(TuneProgress):
    def __init__(self, kernel_name: str, budget: int, callback=None, bar: bool | None = None, stream=None):
        super().__init__(kernel_name, max(1, budget), callback, bar=bar, stream=stream, style="text",
                         label=f"[deuteron] autotune {kernel_name}", env="DEUTERON_PROGRESS")

    @property
    def budget(self) -> int:
        return self.total

    def begin(self, space_desc: str):  # type: ignore[override]
        super().begin(kernel=self.name, budget=self.total, space=space_desc)

    def report(self, config, ms, status: str, error: str | None = None):  # type: ignore[override]
        super().report(config, status, ms, kernel=self.name, budget=self.total, error=error)

    def end(self, config, ms, message: str | None = None, **extra):  # type: ignore[override]
        super().end(kernel=self.name, best_config=str(config) if config else None, best_ms=ms, message=message,
                    **extra)
