"""Choosing an executor: by argument, by ``NEWT_TUNE_CLUSTER`` / ``NEWT_TUNE_EXECUTOR``, or by a registered name.

Kept apart from ``executor.py`` so the executors (``executor.py``, ``cluster.py``) never import each other."""

from __future__ import annotations

import os

from .executor import Executor, LocalExecutor, SerialExecutor, ThreadExecutor

_FACTORIES: dict = {}


def register_executor(name: str, factory):
    """``get_executor(name)`` calls ``factory(**options)`` (e.g. a Ray executor)."""
    _FACTORIES[name] = factory


def get_executor(kind=None, **options) -> Executor:
    """An executor from an argument or the environment.

    ``kind``: an :class:`Executor` (returned as is), ``"serial"``, ``"threads"``, ``"local"``, ``"dask"`` (a local Dask
    cluster unless ``address=``), a scheduler address (``"tcp://host:8786"``) or a registered name.  Without
    one: ``NEWT_TUNE_CLUSTER`` (a scheduler address, or ``local`` for a local Dask cluster), else
    ``NEWT_TUNE_EXECUTOR`` (``serial`` / ``local``), else ``local``."""
    if isinstance(kind, Executor):
        return kind
    if kind is None:
        cl = os.environ.get("NEWT_TUNE_CLUSTER")
        if cl and os.environ.get("NEWT_TUNE_WORKER") != "1":
            kind = cl if "://" in cl else "dask"
            if "://" not in cl and cl not in ("local", "dask"):
                options.setdefault("address", cl)
        else:
            kind = os.environ.get("NEWT_TUNE_EXECUTOR", "local")
    if isinstance(kind, str) and "://" in kind:
        options.setdefault("address", kind)
        kind = "dask"
    if kind == "serial":
        return SerialExecutor()
    if kind == "threads":
        return ThreadExecutor(**options)
    if kind == "local":
        return LocalExecutor(**options)
    if kind == "dask":
        from .cluster import DaskExecutor
        return DaskExecutor(**options)
    if kind in _FACTORIES:
        return _FACTORIES[kind](**options)
    raise ValueError(f"newt.tune: unknown executor {kind!r} (serial, threads, local, dask, a tcp:// scheduler address"
                     + (", " + ", ".join(sorted(_FACTORIES)) if _FACTORIES else "") + ")")
