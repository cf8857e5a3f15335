"""dt.inline_asm_elementwise: Helion's helpers traced to nl.inline_asm_elementwise; the kernel (CPU: newt's
interpreter) and kernel.ref (newt's PTX evaluator, eagerly) against torch; on sm_90a the f32x2 helpers are a
located ptxas error (B003), the nvfp4 decode compiles; errors of the call are D004 at the user's line."""

from __future__ import annotations

import importlib
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
import asm_helpers_dt as K
from dt_helpers import needs_nvrtc

from deuteron.errors import DeuteronError

HELPERS = os.path.join(os.path.dirname(__file__), "asm_helpers_dt.py")
SRC = open(HELPERS).read().splitlines()


def _line_of(text: str) -> int:
    return next(i for i, ln in enumerate(SRC, 1) if text in ln)


def test_mul_f32x2_kernel_and_ref_match_torch():
    x, y = torch.randn(40, 96), torch.randn(40)
    want = x * y[:, None] + 1.0
    assert torch.equal(K.scale_rows.ref(x, y), want)
    assert torch.equal(K.scale_rows(x, y), want)
    src = K.scale_rows.to_newt_source(x, y)
    assert "nl.inline_asm_elementwise(" in src and "mul.f32x2 rc, ra, rb;" in src and "'=r,=r,r,r,r,r'" in src


def test_fma_f32x2_fixed_is_one_rounding():
    a, b, c = torch.randn(300), torch.randn(300), torch.randn(300)
    from newt.interpreter.dtypes import add_f64_odd
    want = add_f64_odd(a.double() * b.double(), c.double()).float()
    assert torch.equal(K.fma_fixed(a, b, c), want)
    assert torch.equal(K.fma_fixed.ref(a, b, c), want)


def test_fma_f32x2_as_helion_wrote_it_is_a_located_constraint_error():
    a = torch.randn(128)
    with pytest.raises(DeuteronError) as ei:
        K.fma_as_helion_wrote_it(a, a, a)
    d = ei.value.diagnostics[0]
    assert d.code == "D004" and "need 2 output and 6 input registers" in d.message, d.message
    assert d.file == HELPERS and d.span.line == _line_of("def _fma_f32x2(") + 3  # the dt.inline_asm_elementwise(
    with pytest.raises(Exception, match="need 2 output and 6 input registers"):  # the eager reference agrees
        K.fma_as_helion_wrote_it.ref(a, a, a)


def test_nvfp4_scale_decode():
    s = torch.randint(0, 256, (1000,), dtype=torch.int32).to(torch.uint8)
    w = torch.randn(1000)
    dec = s.view(torch.float8_e4m3fn).float()
    fin = ~dec.isnan()
    for got in (K.decode_scales(s, w), K.decode_scales.ref(s, w)):
        assert torch.equal(got[fin], (w * dec)[fin]) and got[~fin].isnan().all()


def test_tuple_dtype_gives_two_results():
    x = torch.randn(200)
    for a, b in (K.sign_and_abs(x), K.sign_and_abs.ref(x)):
        assert torch.equal(a, x.abs()) and torch.equal(b, (x < 0).int())


def test_pack_must_be_known_when_compiling():
    with pytest.raises(DeuteronError) as ei:
        K.asm_not_constant(torch.randn(64), 2)
    d = ei.value.diagnostics[0]
    assert d.code == "D004" and "pack must be a int known when compiling" in d.message
    assert d.span.line == _line_of('"mov.b32 $0, $1;", "=r,r", [x[t]], torch.float32, True, k)')


def test_outside_the_ptx_subset_in_ref_and_interpreter():
    x = torch.randint(-5, 5, (64,), dtype=torch.int32)
    with pytest.raises(Exception, match=r"'brev' is outside the interpreter's PTX subset"):
        K.asm_outside_subset.ref(x)
    with pytest.raises(Exception, match=r"'brev' is outside the interpreter's PTX subset"):
        K.asm_outside_subset(x)



@needs_nvrtc
@pytest.mark.parametrize("kernel, args, ok", [
    ("scale_rows", (torch.randn(40, 96), torch.randn(40)), False),   # mul.f32x2: sm_100+
    ("fma_fixed", (torch.randn(64),) * 3, False),                     # fma.rn.f32x2: sm_100+
    ("decode_scales", (torch.zeros(256, dtype=torch.uint8), torch.randn(256)), True),  # e4m3x2: sm_89+
])
def test_sm90a_compile(kernel, args, ok):
    from deuteron.compile import compile_binary
    from deuteron.kernel import _HostRun, _runtime_args
    from newt.diagnostics import CompilationError
    k = getattr(K, kernel)
    b = k._bind(args, {})
    e = k._entry(b)
    run = _HostRun(e, e.space.default(), "source")
    run.execute(b)
    (gen, m, prog, loc), = run.built
    if ok:
        assert compile_binary(gen, m, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a").asm["cubin"]
        return
    with pytest.raises(CompilationError) as ei:
        compile_binary(gen, m, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a")
    d = ei.value.diagnostics[0]
    assert d.code == "B003" and "f32x2" in d.message and "sm_100" in d.message
    gen_src = open(d.file).read().splitlines()
    assert "nl.inline_asm_elementwise(" in gen_src[d.span.line - 1]


def test_no_longer_unsupported():
    ops = importlib.import_module("deuteron.ops")
    assert "inline_asm_elementwise" not in ops.HELION_UNSUPPORTED
    assert "inline_asm_elementwise" in ops.DT_DEVICE
