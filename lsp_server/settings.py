"""The server's settings: ``initializationOptions`` and the ``newt`` section of
``workspace/didChangeConfiguration`` (docs/lsp-protocol.md).

Unknown keys are ignored; a value of the wrong type is ignored with a warning
(the previous value stays), so a bad setting never stops the server.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

__all__ = ["Settings", "TARGET_CHOICES", "convert_args", "apply_log_level"]

log = logging.getLogger("newt-lsp")

TARGET_CHOICES = ("auto", "sm_80", "sm_89", "sm_90a", "sm_120")
LOG_LEVELS = ("error", "warning", "info", "debug")


@dataclass
class Settings:
    trusted: bool = False
    target: str = "auto"
    diagnostics_on: str = "type"  # "type" | "save"
    inlay_shapes: bool = True
    inlay_dtypes: bool = True
    cache_dir: str | None = None
    python: str | None = None
    log_level: str = "info"
    #: seconds a worker command (compile, verify, one autotune config) may run before the worker is killed
    worker_timeout: float = 300.0
    #: milliseconds between the last keystroke and the analysis
    debounce_ms: int = 150
    #: compile each specialization in the background for its registers, spills and occupancy (lsp_server/perf.py)
    perf_diagnostics: bool = True
    warnings: list = field(default_factory=list)

    def update(self, obj) -> list[str]:
        """Merge a settings object; returns the names of the settings that changed."""
        changed: list[str] = []
        if not isinstance(obj, dict):
            return changed
        if "newt" in obj and isinstance(obj["newt"], dict) and not any(k in obj for k in ("trusted", "target")):
            obj = obj["newt"]

        def setv(attr, key, value):
            if getattr(self, attr) != value:
                setattr(self, attr, value)
                changed.append(key)

        def bad(key, value, expected):
            msg = f"ignoring setting {key}={value!r}: expected {expected}"
            self.warnings.append(msg)
            log.warning(msg)

        for key, value in obj.items():
            if key == "trusted":
                if isinstance(value, bool):
                    setv("trusted", key, value)
                else:
                    bad(key, value, "true or false")
            elif key == "target":
                if value in TARGET_CHOICES:
                    setv("target", key, value)
                elif isinstance(value, str) and value.startswith("sm_"):
                    setv("target", key, value)  # a newer target the backend may know
                else:
                    bad(key, value, " | ".join(TARGET_CHOICES))
            elif key == "diagnosticsOn":
                if value in ("type", "save"):
                    setv("diagnostics_on", key, value)
                else:
                    bad(key, value, '"type" or "save"')
            elif key == "inlayHints":
                if isinstance(value, dict):
                    for sub, attr in (("shapes", "inlay_shapes"), ("dtypes", "inlay_dtypes")):
                        if sub in value:
                            if isinstance(value[sub], bool):
                                setv(attr, f"inlayHints.{sub}", value[sub])
                            else:
                                bad(f"inlayHints.{sub}", value[sub], "true or false")
                elif value is not None:
                    bad(key, value, "an object {shapes, dtypes}")
            elif key == "cacheDir":
                if value is None or isinstance(value, str):
                    setv("cache_dir", key, value or None)
                else:
                    bad(key, value, "a path or null")
            elif key == "python":
                if value is None or isinstance(value, str):
                    setv("python", key, value or None)
                else:
                    bad(key, value, "a path or null")
            elif key == "logLevel":
                if value in LOG_LEVELS:
                    setv("log_level", key, value)
                else:
                    bad(key, value, " | ".join(LOG_LEVELS))
            elif key == "workerTimeout":
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                    setv("worker_timeout", key, float(value))
                else:
                    bad(key, value, "a positive number of seconds")
            elif key == "perfDiagnostics":
                if isinstance(value, bool):
                    setv("perf_diagnostics", key, value)
                else:
                    bad(key, value, "true or false")
            elif key == "debounceMs":
                if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 5000:
                    setv("debounce_ms", key, value)
                else:
                    bad(key, value, "milliseconds between 0 and 5000")
        return changed

    def python_level(self) -> int:
        return {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO,
                "debug": logging.DEBUG}[self.log_level]


# -- helpers shared by the server and the commands (here, so neither imports the other) ------------
def convert_args(obj):
    """pygls hands custom params over as namedtuples: back to plain dicts."""
    if hasattr(obj, "_asdict"):
        return {k: convert_args(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {k: convert_args(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [convert_args(v) for v in obj]
    return obj


def apply_log_level(settings: Settings):
    install_log_filters()
    level = settings.python_level()
    log.setLevel(level)
    # pygls logs every message body at INFO: keep it quiet unless debugging
    logging.getLogger("pygls").setLevel(logging.DEBUG if level <= logging.DEBUG else logging.WARNING)


_convert_args = convert_args  # the names the server's modules used
_apply_log_level = apply_log_level


#: error codes meant for the user (docs/lsp-protocol.md): -32001 untrusted, -32002 the kernel/the file says no
USER_ERROR_CODES = (-32001, -32002)
_MAX_LOGGED_BODY = 2000


class QuietUserErrors(logging.Filter):
    """On pygls's loggers: an expected user error (``-32001``/``-32002``, e.g. "no value for constexpr") is one
    INFO line, not an ERROR with a traceback; message bodies (``Sending data: {...}``, which hold whole PTX or
    SASS documents at debug level) are cut to their first 2,000 characters."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        code = getattr(exc, "code", None)
        if exc is not None and code in USER_ERROR_CODES:
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg, record.args = "request answered with a user error %s: %s", (code, str(exc).splitlines()[0])
            record.exc_info = record.exc_text = None
            return logging.getLogger("newt-lsp").isEnabledFor(logging.INFO)
        try:
            text = record.getMessage()
        except Exception:
            return True
        if len(text) > _MAX_LOGGED_BODY:
            record.msg, record.args = "%s ... (%d more characters)", (text[:_MAX_LOGGED_BODY],
                                                                       len(text) - _MAX_LOGGED_BODY)
        return True


_QUIET = QuietUserErrors()


def install_log_filters():
    for name in ("pygls", "pygls.protocol", "pygls.protocol.json_rpc", "pygls.protocol.language_server",
                 "pygls.server", "pygls.io_", "pygls.feature_manager"):
        lg = logging.getLogger(name)
        if _QUIET not in lg.filters:
            lg.addFilter(_QUIET)
