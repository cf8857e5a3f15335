"""Run by Python at the start of every process that a test run starts (tests/conftest.py puts this folder first on
``PYTHONPATH``): where ``NEWT_TESTS_NVRTC_MEMO`` names the run's memo folder, the process's first import of
``newt.backend.cuda.compiler`` installs the run's NVRTC / cuobjdump memo (newt_tests_memo.py), so that a language
server or a worker compiling what another process of the run compiled gets that result. Nothing is imported
before then: a process that never compiles pays for one entry on ``sys.meta_path``. A ``sitecustomize`` further
down ``sys.path`` (the environment's own) still runs."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_TARGET = "newt.backend.cuda.compiler"


class _MemoOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the compiler module, wraps the spec the other finders give so that the memo is
    installed right after the module has run, then leaves ``sys.meta_path``."""

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        real_exec = loader.exec_module

        def exec_module(module):
            real_exec(module)
            folder = os.environ.get("NEWT_TESTS_NVRTC_MEMO", "off")
            if folder != "off" and os.path.isdir(folder):
                memo = _memo()
                if memo is not None:
                    memo.install_nvrtc_memo(folder)

        loader.exec_module = exec_module
        return spec


def _memo():
    try:
        spec = importlib.util.spec_from_file_location("newt_tests_memo", os.path.join(_HERE, "newt_tests_memo.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules["newt_tests_memo"] = mod
        spec.loader.exec_module(mod)
        return mod
    except Exception:  # (the memo only saves time: a process without it compiles for real)
        return None


def _chain():
    """The next ``sitecustomize`` on ``sys.path`` (this one hides it)."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and spec.origin != os.path.abspath(__file__):
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)


if os.environ.get("NEWT_TESTS_NVRTC_MEMO", "off") != "off":
    sys.meta_path.insert(0, _MemoOnImport())
_chain()
