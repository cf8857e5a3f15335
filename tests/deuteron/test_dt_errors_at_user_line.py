"""Errors point at the user's line, never only into the generated file: a host value a kernel cannot compute with
(a string, None, a dtype, a list) is a D004 ``HostValueOperand`` raised while tracing; an error newt raises from
a generated kernel (its compiler, the interpreter's out-of-bounds, deadlock...) is reported at the user's line its
generated line comes from, newt's message kept and the generated location given as well."""

from __future__ import annotations

import os
import sys

import pytest
import torch
from dt_helpers import needs_nvrtc, raises_at, write_module

import deuteron as dt
from deuteron import codegen
from deuteron.errors import GeneratedKernelError

BAD_HOST = """
MODE = "fast"


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_where(x, s):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = torch.where(x[t] > 0, x[t], s)
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_minimum(x, s):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = torch.minimum(x[t], s)
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_clamp(x, s):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = x[t].clamp(max=s)
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_full(x, s):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = torch.full_like(x[t], s)
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def k_global(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = torch.where(x[t] > 0, MODE, x[t])
    return out
"""

CALLS = {
    "k_where": ("torch.where(x[t] > 0, x[t], s)", "torch.where("),
    "k_minimum": ("torch.minimum(x[t], s)", "torch.minimum("),
    "k_clamp": ("x[t].clamp(max=s)", "x[t].clamp("),
    "k_full": ("torch.full_like(x[t], s)", "torch.full_like("),
}


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    mod = write_module(tmp_path_factory.mktemp("dt_bad_host"), "dt_bad_host_values", BAD_HOST)
    yield mod
    sys.modules.pop(mod.__name__, None)


@pytest.mark.parametrize("value", ["a string", None, torch.float16, [1, 2]], ids=["str", "None", "dtype", "list"])
@pytest.mark.parametrize("name", list(CALLS))
def test_a_bad_host_value_is_d004_at_the_op_while_tracing(bad, name, value):
    line_text, col_text = CALLS[name]
    x = torch.randn(16)
    if name == "k_clamp" and value is None:  # clamp(max=None) is no bound, as in torch
        torch.testing.assert_close(bad.k_clamp(x, None), x)
        return
    e = raises_at(bad, lambda: getattr(bad, name)(x, value), "D004", line_text, col_text,
                  contains="is a host value the kernel cannot compute with")
    d = e.diagnostics[0]
    assert d.data["cause"] == "HostValueOperand"
    assert "/gen/" not in str(e)  # nothing of the generated file: it was never written for this call


def test_a_bad_module_global_is_d004_at_its_use(bad):
    e = raises_at(bad, lambda: bad.k_global(torch.randn(16)), "D004", "MODE, x[t])", "torch.where(")
    assert "'fast'" in e.diagnostics[0].message


GEN_ERRORS = """
@dt.kernel(config=dt.Config(block_sizes=[8]))
def gather(x, s: int):
    # (a window whose start is below 0: a computed index, x[i] with i = idx[t], reads 0 past x since issue 25)
    out = torch.empty(x.size(0), 8, dtype=x.dtype)
    for t in dt.tile(x.size(0)):
        out[t, :] = x[t, s:s + 8] * 2
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def twice(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        y = x[t] + 1
        out[t] = y * 2
    return out


@dt.kernel
def waits(x, flags):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0), block_size=8):
        dt.wait(flags, [t.id + 1], signal=1)
        out[t] = x[t]
        dt.signal(flags, [t.id], signal=1)
    return out
"""


@pytest.fixture(scope="module")
def gen_mod(tmp_path_factory):
    mod = write_module(tmp_path_factory.mktemp("dt_gen_errors"), "dt_gen_errors", GEN_ERRORS)
    yield mod
    sys.modules.pop(mod.__name__, None)


def _user_line(mod, text):
    return next(i for i, t in enumerate(open(mod.__file__).read().splitlines(), 1) if text in t)


def test_an_out_of_bounds_load_is_reported_at_the_users_line(gen_mod):
    from newt.interpreter.errors import OutOfBoundsError
    x = torch.arange(16, dtype=torch.float32).reshape(2, 8)
    for _ in range(2):  # the first call (compiled, launched the full way) and the fast path of the second
        with pytest.raises(OutOfBoundsError) as ei:
            gen_mod.gather(x, -2)
        e = ei.value
        line = _user_line(gen_mod, "out[t, :] = x[t, s:s + 8] * 2")
        assert e.location.file == gen_mod.__file__ and e.location.line == line
        assert e.loc == e.location
        msg = str(e)
        assert msg.startswith(f"{gen_mod.__file__}:{line}:"), msg
        assert "out[t, :] = x[t, s:s + 8] * 2" in msg and "^" in msg
        # newt's own message and the generated place, as secondary information
        assert "element offset -2 from 'x'" in msg and "before its first element" in msg
        gen_path, gen_line, _col = e.data["generated"].rsplit(":", 2)
        assert os.sep + "gen" + os.sep in gen_path and gen_path in msg
        assert "nl.load(" in open(gen_path).read().splitlines()[int(gen_line) - 1]
        assert isinstance(e, IndexError) and e.data["offset"] == -2


def test_a_deadlock_is_reported_at_the_wait(gen_mod):
    from newt.interpreter.errors import DeadlockError
    x = torch.randn(24)
    flags = torch.zeros(4, dtype=torch.int32)
    flags[3] = 1
    with pytest.raises(DeadlockError) as ei:
        gen_mod.waits(x, flags)
    e = ei.value
    line = _user_line(gen_mod, "dt.wait(flags, [t.id + 1], signal=1)")
    assert e.location.line == line and e.location.file == gen_mod.__file__
    msg = str(e)
    assert msg.startswith(f"{gen_mod.__file__}:{line}:") and "dt.wait(flags" in msg
    assert "while (nl.atomic_cas(flags" in msg  # the generated line stays in the message


def test_a_newt_compile_error_in_the_generated_file_is_d008_at_the_users_line(gen_mod, monkeypatch):
    """newt's front end rejecting a generated line (here: a failing static assert put after the origin comment
    of ``out[t] = y * 2``) is a GeneratedKernelError at that user line, newt's code and message kept."""
    real = codegen.generate
    user = _user_line(gen_mod, "out[t] = y * 2")

    def generate(prog, config, fn_name, defaults=None):
        g = real(prog, config, fn_name, defaults)
        lines = g.source.splitlines()
        at = next(i for i, t in enumerate(lines) if t.strip().startswith(f"# line {user}:"))
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines.insert(at + 1, f'{indent}nl.static_assert(False, "injected")')
        g.source = "\n".join(lines) + "\n"
        return g
    monkeypatch.setattr(codegen, "generate", generate)
    k = dt.kernel(config=dt.Config(block_sizes=[8]))(gen_mod.twice.fn)
    with pytest.raises(GeneratedKernelError) as ei:
        k(torch.randn(16))
    e = ei.value
    d = e.diagnostics[0]
    assert d.code == "D008" and d.data["newt_code"] == "N050" and d.data["cause"] == "GeneratedKernelError"
    assert d.file == gen_mod.__file__ and d.span.line == user
    assert d.span.col == open(gen_mod.__file__).read().splitlines()[user - 1].index("out[t]") + 1
    assert "injected" in d.message
    text = str(e)
    assert f"{gen_mod.__file__}:{user}:" in text
    gen_path = d.data["generated"].rsplit(":", 2)[0]
    assert gen_path in text and 'nl.static_assert(False, "injected")' in text
    import newt
    assert isinstance(e, newt.CompilationError) and isinstance(e.__cause__, newt.CompilationError)


def test_relocate_leaves_errors_of_other_files_alone():
    from deuteron.errors import relocate
    from newt.diagnostics import CompilationError, Diagnostic, Severity, Span
    from newt.interpreter.errors import DeadlockError
    d = Diagnostic("N022", Severity.ERROR, Span(1, 1, 1, 2), "x", file="/elsewhere/k.py")
    assert relocate(CompilationError([d], "x\n")) is None
    assert relocate(DeadlockError("x", kernel="k", loc=None)) is None
    assert relocate(ValueError("x")) is None



@needs_nvrtc
def test_a_backend_error_of_binaries_for_is_d008_at_the_asm_call():
    """ptxas rejecting inline asm for the target (B003, located in the generated file) is reported at the user's
    ``dt.inline_asm_elementwise`` call (in a helper of the kernel's file)."""
    import asm_helpers_dt as K

    from deuteron.kernel import binaries_for
    with pytest.raises(GeneratedKernelError) as ei:
        binaries_for(K.scale_rows, torch.randn(40, 96), torch.randn(40), target="sm_90a")
    d = ei.value.diagnostics[0]
    assert d.code == "D008" and d.data["newt_code"] == "B003" and "mul.f32x2" in d.message
    src = open(K.__file__).read().splitlines()
    assert d.file == K.__file__ and "dt.inline_asm_elementwise(" in src[d.span.line - 1]
    gen_path, gen_line, _ = d.data["generated"].rsplit(":", 2)
    assert "nl.inline_asm_elementwise(" in open(gen_path).read().splitlines()[int(gen_line) - 1]
    assert ei.value.__cause__.diagnostics[0].code == "B003"


HELPERS = """


def pick(v, mode):
    return torch.where(v > 0, v, mode)


def take(x, t, s):
    return x[t, s:s + 8] * 2
"""

USES_HELPERS = """
import {helpers} as H


@dt.kernel(config=dt.Config(block_sizes=[8]))
def uses_pick(x, mode):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        y = x[t] + 1
        out[t] = H.pick(y, mode)
    return out


@dt.kernel(config=dt.Config(block_sizes=[8]))
def uses_take(x, s: int):
    out = torch.empty(x.size(0), 8, dtype=x.dtype)
    for t in dt.tile(x.size(0)):
        out[t, :] = H.take(x, t.index, s)
    return out
"""


@pytest.fixture(scope="module")
def two_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("dt_two_files")
    helpers = write_module(d, "dt_err_helpers_other_file", HELPERS)
    mod = write_module(d, "dt_err_uses_helpers", USES_HELPERS.format(helpers=helpers.__name__))
    yield mod, helpers
    sys.modules.pop(mod.__name__, None)
    sys.modules.pop(helpers.__name__, None)


def test_an_error_in_a_helper_of_another_file_is_at_the_call_naming_the_helper(two_files):
    mod, helpers = two_files
    e = raises_at(mod, lambda: mod.uses_pick(torch.randn(16), "fast"), "D004", "H.pick(y, mode)", "H.pick(")
    helper_line = next(i for i, t in enumerate(open(helpers.__file__).read().splitlines(), 1) if "torch.where" in t)
    assert f"(in pick, {helpers.__file__}:{helper_line})" in e.diagnostics[0].message


def test_code_of_a_helper_of_another_file_is_placed_at_the_call(two_files):
    from newt.interpreter.errors import OutOfBoundsError
    mod, _helpers = two_files
    x = torch.arange(16, dtype=torch.float32).reshape(2, 8)
    src = mod.uses_take.to_newt_source(x, 0)
    line = _user_line(mod, "out[t, :] = H.take(x, t.index, s)")
    assert f"# line {line}: out[t, :] = H.take(x, t.index, s)" in src
    with pytest.raises(OutOfBoundsError) as ei:
        mod.uses_take(x, -3)  # (a window starting below 0; a computed index is masked by x's size, issue 25)
    assert ei.value.location.file == mod.__file__ and ei.value.location.line == line
