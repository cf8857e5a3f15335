"""Fixtures for the runtime tests: an isolated cache directory, a fake backend, a fake GPU."""

from __future__ import annotations

import importlib

import pytest

from newt.runtime import compiler

from .fakes import FakeBackend, install_fake_gpu


def backend_available() -> bool:
    try:
        return hasattr(importlib.import_module("newt.backend.cuda"), "compile_cuda")
    except ImportError:
        return False


def interpreter_available() -> bool:
    try:
        return hasattr(importlib.import_module("newt.interpreter"), "launch")
    except ImportError:
        return False

needs_backend = pytest.mark.skipif(not backend_available(), reason="newt.backend.cuda is not there yet")
needs_interpreter = pytest.mark.skipif(not interpreter_available(), reason="newt.interpreter is not there yet")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own empty disk cache and memory cache."""
    d = tmp_path / "newt-cache"
    monkeypatch.setenv("NEWT_CACHE_DIR", str(d))
    monkeypatch.delenv("NEWT_INTERPRET", raising=False)
    monkeypatch.delenv("NEWT_PRINT_AUTOTUNING", raising=False)
    monkeypatch.delenv("NEWT_LAUNCH_BLOCKING", raising=False)
    compiler.clear_memory_cache()
    yield d
    compiler.clear_memory_cache()


@pytest.fixture
def fake_backend(monkeypatch):
    fb = FakeBackend()
    monkeypatch.setattr(compiler, "_backend", lambda: fb)
    return fb


@pytest.fixture
def fake_gpu(monkeypatch):
    return install_fake_gpu(monkeypatch)


@pytest.fixture
def cuda_ok(monkeypatch):
    """CPU tensors pass the 'is it on the GPU' check (with the fake GPU)."""
    from newt.runtime import specialize
    monkeypatch.setattr(specialize, "raise_not_cuda", lambda *a: None)
