"""Block pointers in the front end: an N080 warning (not an error) at each make_block_ptr call, with its
line and column; located errors for misuse; silence where the generic analysis cannot know the kind."""

from __future__ import annotations

import textwrap

from newt.frontend import analyze_source

HEAD = '''import triton
import triton.language as tl

'''


def _diags(src):
    fa = analyze_source(HEAD + textwrap.dedent(src), "bp.py")
    return fa.diagnostics


def test_deprecation_warning_is_located_and_not_an_error():
    src = '''
    @triton.jit
    def k(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
        bp = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BLOCK, BLOCK), (1, 0))
        v = tl.load(bp, boundary_check=(0, 1))
        out = tl.make_block_ptr(base=y_ptr, shape=(M, N), strides=(N, 1), offsets=(0, 0),
                                block_shape=(BLOCK, BLOCK), order=(1, 0))
        tl.store(out, v, boundary_check=(0, 1))

    k[(1,)](None, None, 4, 4, BLOCK=16)
    '''
    ds = _diags(src)
    assert [d for d in ds if d.severity.name == "ERROR"] == []
    warns = [d for d in ds if d.code == "N080"]
    assert [(d.span.line, d.span.col) for d in warns] == [(7, 10), (9, 11)]
    assert all(d.severity.name == "WARNING" and "deprecated" in d.message for d in warns)
    assert "make_tensor_descriptor" in warns[0].hint


def test_misuse_is_a_located_error(tmp_path):
    import importlib.util

    import pytest

    import newt.language as nl
    from newt.frontend import build_ir
    src = "import newt\nimport newt.language as tl\n\n" + textwrap.dedent('''
    @newt.jit
    def k(x_ptr, M, BLOCK: tl.constexpr):
        bp = tl.make_block_ptr(x_ptr, (M,), (1,), (0,), (BLOCK,), (0,))
        a = tl.load(bp, boundary_check=(1,))
        b = tl.load(bp, mask=a > 0)
        bp = tl.advance(bp, (1, 2))
        c = tl.load(x_ptr + tl.arange(0, BLOCK), boundary_check=(0,))
        d = tl.make_block_ptr(x_ptr, (M,), (1,), (0,), (BLOCK,), (1,))
    ''')
    path = tmp_path / "bp_misuse.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("bp_misuse", path)
    mod = importlib.util.module_from_spec(spec)
    import sys
    sys.modules["bp_misuse"] = mod
    spec.loader.exec_module(mod)
    with pytest.raises(Exception) as ei:
        build_ir(mod.k, {"x_ptr": nl.pointer_type(nl.float32), "M": nl.int32}, {"BLOCK": 16})
    got = {(d.span.line, d.code) for d in ei.value.diagnostics if d.severity.name == "ERROR"}
    assert (8, "N032") in got  # boundary_check dimension 1 of a rank-1 block pointer
    assert (9, "N023") in got  # mask= with a block pointer
    assert (10, "N030") in got  # advance by two offsets
    assert (11, "N023") in got  # boundary_check on a block of pointers
    assert (12, "N023") in got  # order (1,) is not a permutation of (0,)


def test_a_helper_taking_a_block_pointer_is_silent_in_the_generic_analysis():
    src = '''
    @triton.jit
    def load_tile(p):
        return tl.load(p, boundary_check=(0, 1), padding_option="zero")

    @triton.jit
    def step(p, BK: tl.constexpr):
        return tl.advance(p, (0, BK))
    '''
    assert [d for d in _diags(src) if d.severity.name == "ERROR"] == []
