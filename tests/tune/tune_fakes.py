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


def steps(n):
    """Emit one event per step, stopping between steps when the pool cancels."""
    from newt.tune.worker import cancelled, emit
    done = 0
    for i in range(n):
        if cancelled():
            return {"status": "ok", "value": done, "stopped": True}
        emit("step", {"i": i})
        done += 1
        time.sleep(0.2)
    return {"status": "ok", "value": done, "stopped": False}


def ignore_cancel(_):
    while True:
        time.sleep(0.1)


def slow_steps(n):
    """Each step takes 1 s: with a 2 s timeout it lives on only because every step sends an event."""
    from newt.tune.worker import emit
    for i in range(n):
        time.sleep(1.0)
        emit("step", i)
    return {"status": "ok", "value": n}


def noisy_crash(_):
    import sys
    print("a line on stdout", flush=True)
    sys.stderr.write("the reason it is about to die\n")
    sys.stderr.flush()
    os._exit(9)


def where(_):
    import sys
    return {"status": "ok", "cwd": os.getcwd(), "executable": sys.executable,
            "slot": os.environ.get("NEWT_TEST_SLOT"), "path0": sys.path[0] if sys.path else None,
            "json": __import__("json").__file__}


def handle(payload):
    """A pool handler: the payload is the whole task."""
    from newt.tune.worker import emit
    emit("got", payload)
    return {"status": "ok", "value": payload}


def killed(_):
    import signal
    os.kill(os.getpid(), signal.SIGKILL)
