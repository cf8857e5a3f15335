"""nl.atomic_poll: returns whether the expected value was seen; CUDA polls with relaxed scoped loads."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt.interpreter import InterpreterError


@newt.jit
def poll_kernel(flag_ptr, out_ptr, expected, BLOCK: nl.constexpr, SEM: nl.constexpr, SCOPE: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    seen = nl.atomic_poll(flag_ptr + offs, expected, sem=SEM, scope=SCOPE)
    nl.store(out_ptr + offs, seen.to(nl.int32) + 1)


@newt.jit
def poll_timeout_kernel(flag_ptr, out_ptr, timeout_ns):
    seen = nl.atomic_poll(flag_ptr, 1, timeout_ns=timeout_ns)
    nl.store(out_ptr, seen)


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("sem,scope", [("acquire", "gpu"), ("relaxed", "cta"), ("acquire", "sys")])
def test_atomic_poll_sees_the_value(backend, dtype, sem, scope):
    flag = backend.full((16,), 5, dtype)
    out = backend.zeros(16, dtype=torch.int32)
    backend.launch(poll_kernel, (1,), flag, out, 5, BLOCK=16, SEM=sem, SCOPE=scope)
    assert backend.get(out).tolist() == [2] * 16


@pytest.mark.parametrize("initial,expected", [(1, True), (0, False)])
def test_atomic_poll_timeout(backend, initial, expected):
    flag = backend.full((1,), initial, torch.int32)
    out = backend.zeros(1, dtype=torch.bool)
    backend.launch(poll_timeout_kernel, (1,), flag, out, 0)
    assert bool(backend.get(out)[0]) is expected


def test_atomic_poll_that_cannot_finish_is_an_interpreter_error():
    from newt.runtime.interpret import launch_jit
    flag = torch.zeros(16, dtype=torch.int32)
    with pytest.raises(InterpreterError, match="wait forever"):
        launch_jit(poll_kernel, (1,), (flag, torch.zeros(16, dtype=torch.int32), 5),
                   dict(BLOCK=16, SEM="acquire", SCOPE="gpu"))


def test_atomic_poll_rules():
    from newt.frontend import analyze_source
    src = '''
import newt
import newt.language as nl

@newt.jit
def k(f_ptr):
    a = nl.atomic_poll(f_ptr.to(nl.pointer_type(nl.float32)), 1)
    b = nl.atomic_poll(f_ptr, 1, sem="release")
'''
    fa = analyze_source(src, "k.py")
    got = {(d.code, d.span.line, d.span.col) for d in fa.diagnostics if d.severity <= 2}
    assert ("N023", 7, 24) in got and any(c[1] == 8 for c in got), got


def test_atomic_poll_ptx():
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.backend.cuda import compile_cuda, generate_cuda
    from newt.frontend import build_ir
    P = nl.pointer_type
    for target in ("sm_80", "sm_90a"):
        f = build_ir(poll_kernel, dict(flag_ptr=P(nl.int64), out_ptr=P(nl.int32), expected=nl.int64),
                     dict(BLOCK=16, SEM="acquire", SCOPE="sys"))
        m = generate_cuda(f, target, 4, 3)
        assert "ld.relaxed.sys.global.b64" in m.source and "fence.acq_rel.sys" in m.source
        assert "globaltimer" not in m.source
        assert compile_cuda(m, target).cubin
        f = build_ir(poll_timeout_kernel, dict(flag_ptr=P(nl.int32), out_ptr=P(nl.int1), timeout_ns=nl.int64), {})
        m = generate_cuda(f, target, 4, 3)
        assert m.source.count("globaltimer") == 2
        assert compile_cuda(m, target).cubin
