"""The on-disk config cache: the best config per (kernel source, argument signature, GPU, versions).

One JSON file per key under ``<deuteron cache>/configs/``, written atomically
(temporary file + ``os.replace``), so concurrent processes never see half a
file.  Delete the directory (or pass ``force=True`` to ``kernel.autotune``)
to tune again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from ..config import Config

__all__ = ["ConfigCache", "cache_key", "versions"]


def _package_hash() -> str:
    """Hash of deuteron's code generator: a new generator invalidates tuned configs."""
    h = hashlib.sha256()
    base = Path(__file__).resolve().parent.parent
    for name in ("trace.py", "codegen.py", "space.py", "program.py"):
        try:
            h.update((base / name).read_bytes())
        except OSError:
            pass
    return h.hexdigest()[:16]


def versions(device) -> dict:
    import torch

    import newt

    from .._version import __version__
    out = {"deuteron": __version__, "deuteron_code": _package_hash(), "newt": newt.__version__,
           "torch": torch.__version__}
    try:
        from newt.runtime import nvrtc_version
        out["nvrtc"] = nvrtc_version()
    except Exception:  # no NVRTC (CPU): not part of the key
        out["nvrtc"] = None
    from ..runtime import device_name
    out["device"] = device_name(device)
    return out


def cache_key(kernel, entry, effort: str, configs) -> str:
    import ast
    import inspect
    import types
    h = hashlib.sha256()
    fdef = kernel.source.fdef
    h.update(ast.dump(fdef, include_attributes=False).encode())
    # helper functions the kernel calls are compiled into it: their source is part of the key
    g = kernel.fn.__globals__
    seen = set()
    for n in ast.walk(fdef):
        if isinstance(n, ast.Name) and n.id not in seen:
            seen.add(n.id)
            obj = g.get(n.id)
            if isinstance(obj, types.FunctionType) and (obj.__module__ or "").split(".")[0] not in (
                    "torch", "deuteron", "newt"):
                try:
                    h.update(inspect.getsource(obj).encode())
                except (OSError, TypeError):
                    pass
    h.update(repr(entry.key).encode())
    h.update(json.dumps(versions(entry.device), sort_keys=True).encode())
    h.update(effort.encode())
    h.update(repr(kernel.static_shapes).encode())
    if configs:
        h.update(json.dumps([c.to_dict() for c in configs], sort_keys=True).encode())
    return h.hexdigest()[:32]


class ConfigCache:
    def __init__(self, root: Path | None = None):
        if root is None:
            from ..runtime import cache_dir
            root = cache_dir() / "configs"
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str) -> dict | None:
        p = self.path(key)
        try:
            with open(p, encoding="utf-8") as f:
                d = json.load(f)
            d["config"] = Config.from_dict(d["config"])
            return d
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, config: Config, ms: float | None, meta: dict):
        from ..runtime import atomic_write
        d = {"config": config.to_dict(), "ms": ms, "created": time.time(), **meta}
        atomic_write(self.path(key), json.dumps(d, indent=1, sort_keys=True, default=str))

    def clear(self):
        if self.root.exists():
            for p in self.root.glob("*.json"):
                try:
                    os.unlink(p)
                except OSError:
                    pass
