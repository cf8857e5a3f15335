"""Backend errors are located values with structured data: the runtime reads a too-large shared-memory
footprint from ``Diagnostic.data``, never from the message text."""

from __future__ import annotations

import os
import sys

import pytest

import newt
from newt.backend.cuda import generate_cuda
from newt.backend.cuda.emitter import BackendError
from newt.diagnostics import LocatedError

sys.path.insert(0, os.path.dirname(__file__))
from kernels import corpus_configs, ir


def _big_matmul():
    cfg = next(c for c in corpus_configs() if c[0] == "matmul.py")
    cx = dict(cfg[3], BLOCK_M=256, BLOCK_N=256, BLOCK_K=128)
    return ir(cfg[0], cfg[1], cfg[2], cx, cfg[4], 8, 4)


def test_shared_memory_overflow_carries_its_numbers():
    with pytest.raises(newt.CompilationError) as ei:
        generate_cuda(_big_matmul(), "sm_89", 8, 4)
    (d,) = ei.value.diagnostics
    assert d.code == "B002"
    assert d.data["resource"] == "shared memory" and d.data["target"] == "sm_89"
    assert d.data["required"] > d.data["limit"] == 101376
    assert d.span.line > 1  # placed in the user's file


def test_backend_error_is_a_located_error():
    e = BackendError("cannot lower it", None, data={"x": 1})
    assert isinstance(e, LocatedError) and e.code == "B002" and e.data == {"x": 1} and e.location is None
    assert str(e) == "cannot lower it"


def test_the_runtime_turns_it_into_out_of_resources():
    from newt.runtime.compiler import _as_out_of_resources
    with pytest.raises(newt.CompilationError) as ei:
        generate_cuda(_big_matmul(), "sm_89", 8, 4)
    oor = _as_out_of_resources(ei.value, "matmul_kernel", "sm_89")
    assert oor is not None and oor.resource == "shared memory" and oor.limit == 101376


def test_a_ptxas_resource_failure_is_data_on_the_diagnostic():
    # the backend reads ptxas' text; the runtime reads the numbers from the diagnostic's data (no regex above)
    from newt.backend.cuda.compiler import resource_failure
    log = ("ptxas error   : Entry function 'k' uses too many registers\n"
           "ptxas fatal   : Insufficient registers (64) to satisfy the register target of 168 for a wgmma\n")
    assert resource_failure(log) == {"resource": "registers", "needed": 168, "limit": 64}
    assert resource_failure("nvrtc: error: identifier x is undefined") == {}
    # a cap below what the kernel's live values need (no single instruction named): a resource refusal too,
    # with the need unknown (helper-39's sweep of deuteron configs found it labelled a compile error, B001)
    log = ("ptxas error   : (C7600) Register allocation failed with register count of '64'. "
           "Compile the program with a higher register target\n")
    assert resource_failure(log) == {"resource": "registers", "needed": None, "limit": 64}
