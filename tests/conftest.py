"""Test configuration: the ``gpu`` marker skips without a CUDA device."""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _environment_restored(request):
    """Every test leaves ``os.environ`` as it found it.  Code under test may set variables for its own
    process (the editor worker sets ``NEWT_INTERPRET=1`` when it finds no GPU); inside the pytest process
    that would change every later test and every subprocess they start (a benchmark smoke run, seen in CI,
    ran its kernels through the interpreter because an earlier test had called the worker's code)."""
    import os
    import warnings
    before = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}  # (pytest's own, per phase)
    yield
    after = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        for k in changed:
            if k in before:
                os.environ[k] = before[k]
            else:
                os.environ.pop(k, None)
        warnings.warn(f"{request.node.nodeid} left the environment changed ({', '.join(changed)}); restored",
                      stacklevel=1)
