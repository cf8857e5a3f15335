"""Tasks and kernels for the executor tests (imported by the worker processes by name)."""

from __future__ import annotations

import os
import time

import newt
import newt.language as nl


def ok(x):
    return {"status": "ok", "value": x * 2, "pid": os.getpid()}


def sleep(s):
    time.sleep(s)
    return {"status": "ok", "value": s}


def hang(_):
    while True:
        time.sleep(0.1)


def crash(_):
    os._exit(7)


def compile_error(_):
    from newt import CompilationError
    raise CompilationError([], extra="kernel.py:3:5: error: undefined name 'q'")


def oor(_):
    from newt.runtime.errors import OutOfResources
    raise OutOfResources("k", "shared memory", 300000, 232448)


def fault(_):
    from newt.runtime.errors import KernelFaultError
    raise KernelFaultError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access", kernel="k",
                           code="CUDA_ERROR_ILLEGAL_ADDRESS", sticky=True)


def wrong(x):
    return {"status": "ok", "value": x * 2 + 1}


def boom(_):
    raise ValueError("something else")


@newt.jit
def scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(y_ptr + offs, nl.load(x_ptr + offs, mask=m) * alpha, mask=m)


def configs():
    return [newt.Config({"BLOCK": b}, num_warps=w) for b in (128, 256, 512, 1024) for w in (2, 4)]


@newt.autotune(configs(), key=["n"], executor="local")
@newt.jit
def tuned_scale(x_ptr, y_ptr, n, alpha, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(y_ptr + offs, nl.load(x_ptr + offs, mask=m) * alpha, mask=m)


def env(name):
    """The worker's value of an environment variable (and whether the preload mark is set)."""
    return {"status": "ok", "value": os.environ.get(name), "marked": _MARK.get("preloaded", False)}


_MARK: dict = {}


def mark():
    """A NEWT_TUNE_PRELOAD target: runs before the worker's first task."""
    _MARK["preloaded"] = True
