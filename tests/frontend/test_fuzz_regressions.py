"""Front-end findings of the fuzzing in issue 22 (items 14, 15, 16): each a located diagnostic where the input
is wrong, silence where the generic check cannot know, never an internal error (N001) or a bare Python
exception."""

from __future__ import annotations

import textwrap

import pytest

import newt
import newt.language as nl
from newt.frontend import analyze_source

HEADER = "import newt\nimport newt.language as nl\n"

pytest.importorskip("cuda.bindings.nvrtc")  # (the compile-path checks build to cubin)

INF = float("inf")
NAN = float("nan")


def _module(tmp_path, src: str, name: str):
    import importlib.util
    path = tmp_path / f"{name}.py"
    path.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _errors(fa, *, including_internal=True):
    return [d for d in fa.diagnostics if str(d.severity) == "error" or (including_internal and d.code == "N001")]


# -- item 14: nl.cumsum / nl.cumprod of pointers is N023, as nl.sum of pointers ---------------------------------

@pytest.mark.parametrize("op", ["cumsum", "cumprod", "xor_sum", "argmax", "argmin"])
def test_scans_and_arg_reductions_of_pointers_are_n023(expect, op):
    arg = "«p" if op in ("cumsum", "cumprod") else "p"
    call = f"nl.{op}({arg}, 0)" if op in ("cumsum", "cumprod") else f"«nl.{op}(p, 0)"
    expect(f"""
    @newt.jit
    def k(x_ptr: "*fp32", y_ptr: "*i64"):
        offs = nl.arange(0, 16)
        p = x_ptr + offs
        q = {call}
    """, "N023", contains="pointers")


@newt.jit
def cumsum_of_pointers(x_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    p = nl.cumsum(x_ptr + offs, 0)
    nl.store(out_ptr + offs, nl.load(p))


def test_cumsum_of_pointers_fails_in_the_front_end_at_the_users_line():
    with pytest.raises(newt.CompilationError) as ei:
        newt.compile(cumsum_of_pointers, signature={"x_ptr": "*fp32", "out_ptr": "*fp32"},
                     constexprs={"BLOCK": 32}, target="sm_90a", cache=False)
    (d,) = ei.value.diagnostics
    assert d.code == "N023" and "pointers" in d.message
    assert d.span.line == cumsum_of_pointers.fn.__code__.co_firstlineno + 3  # the nl.cumsum line, not line 1


# -- item 15: nl.flip of a block loaded through an unannotated pointer -----------------------------------------

@pytest.mark.parametrize("load", ["nl.load(x_ptr + nl.arange(0, 16))",
                                  "nl.load(x_ptr + nl.arange(0, 16)[:, None] * 16 + nl.arange(0, 16)[None, :])",
                                  "nl.load(x_ptr + offs)"], ids=["1-D", "2-D", "BLOCK"])
@pytest.mark.parametrize("flip", ["nl.flip(x)", "nl.flip(x, 0)", "x.flip(0)"])
def test_flip_in_the_generic_check_is_silent(load, flip):
    fa = analyze_source(HEADER + textwrap.dedent(f"""
    @newt.jit
    def k(x_ptr, y_ptr, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        x = {load}
        y = {flip}
        nl.store(y_ptr, nl.sum(y))
        z = y + "s"
    """), "flip.py")
    # no internal error, no false error about the flip; the rest of the kernel is still checked
    assert [d.code for d in fa.diagnostics if d.code == "N001"] == []
    assert not [d for d in fa.diagnostics if "flip" in d.message]
    assert [d.code for d in _errors(fa)] == ["N023"]  # the string added below


@newt.jit
def flip_then_store(x_ptr, y_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    nl.store(y_ptr + offs, nl.flip(x, 0))


@pytest.mark.parametrize("dt", ["*fp32", "*fp16", "*i32", "*i1"])
def test_flip_still_compiles_for_each_type(dt):
    newt.compile(flip_then_store, signature={"x_ptr": dt, "y_ptr": dt}, constexprs={"BLOCK": 64}, target="sm_90a",
                 cache=False)


def test_flip_result_matches_torch_in_the_interpreter():
    import torch

    from newt.runtime.interpret import launch_jit
    x = torch.arange(64, dtype=torch.float32)
    y = torch.empty_like(x)
    launch_jit(flip_then_store, (1,), (x, y), {"BLOCK": 64})
    assert torch.equal(y, x.flip(0))


# -- item 16: a non-finite constant where an integer is needed is a located error --------------------------------

@newt.jit
def full_of_inf(x_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, nl.full([BLOCK], INF, nl.int32))


@newt.jit
def store_nan_to_int(x_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, NAN)


@pytest.mark.parametrize("kernel, line", [(full_of_inf, 2), (store_nan_to_int, 2)])
def test_a_non_finite_constant_for_an_integer_is_located(kernel, line):
    with pytest.raises(newt.CompilationError) as ei:
        newt.compile(kernel, signature={"x_ptr": "*i32"}, constexprs={"BLOCK": 16}, target="sm_90a", cache=False)
    (d,) = ei.value.diagnostics
    assert d.code == "N023" and "an integer is needed" in d.message
    assert d.span.line == kernel.fn.__code__.co_firstlineno + 1 + line
    assert f"in kernel {kernel.__name__!r}" in str(ei.value)


def test_a_non_finite_constant_in_the_static_check_is_located(expect):
    expect("""
    INF = float("inf")

    @newt.jit
    def k(x_ptr: "*i32"):
        offs = nl.arange(0, 16)
        nl.store(x_ptr + offs, «nl.full([16], INF, nl.int32))
    """, "N023", contains="an integer is needed")


# -- item 16: an error inside a @jit helper says which calls led there -------------------------------------------

SRC_HELPERS = '''
@newt.jit
def inner(x):
    return x << 1.5


@newt.jit
def helper(x):
    return inner(x) + 1


@newt.jit
def kern(x_ptr: "*i32", BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    nl.store(x_ptr + offs, helper(x))
'''


def test_an_error_in_a_helper_carries_the_call_chain(tmp_path):
    src = HEADER + textwrap.dedent(SRC_HELPERS)
    fa = analyze_source(src, "chain.py")
    (d,) = _errors(fa)
    lines = src.splitlines()
    assert d.code == "N021" and "<<" in lines[d.span.line - 1]
    chain = d.data["call_chain"]
    assert [(c["callee"], c["caller"]) for c in chain] == [("inner", "helper"), ("helper", "kern")]
    assert "inner(x)" in lines[chain[0]["line"] - 1] and "helper(x)" in lines[chain[1]["line"] - 1]
    assert d.to_json()["notes"] == [f"inner() was called from helper() at chain.py:{chain[0]['line']}:12",
                                    f"helper() was called from kern() at chain.py:{chain[1]['line']}:28"]
    # the compile error says it too
    mod = _module(tmp_path, src, "chain_mod")
    path = tmp_path / "chain_mod.py"
    with pytest.raises(newt.CompilationError) as ei:
        newt.compile(mod.kern, signature={"x_ptr": "*i32"}, constexprs={"BLOCK": 16}, target="sm_90a", cache=False)
    text = str(ei.value)
    assert f"note: inner() was called from helper() at {path}:{chain[0]['line']}:12" in text
    assert f"note: helper() was called from kern() at {path}:{chain[1]['line']}:28" in text


def test_no_chain_for_an_error_in_the_kernel_itself(expect):
    fa = expect("""
    @newt.jit
    def k(x_ptr: "*i32"):
        x = nl.load(x_ptr)
        y = «x << 1.5
    """, "N021")
    assert all("call_chain" not in d.data for d in fa.diagnostics)


# -- item 16: N042 only for shapes that differ at every launch ---------------------------------------------------

DOT_LOOP = '''
@newt.jit
def k(a_ptr: "*fp16", b_ptr: "*fp16", c_ptr: "*fp32", M: nl.constexpr, N: nl.constexpr, K: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    rk = nl.arange(0, K)
    acc = nl.zeros([M, N], dtype=nl.float32)
    for _ in range(4):
        a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = nl.load(b_ptr + rk[:, None] * N + rn[None, :])
        acc += nl.dot(b, a)
    nl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)
'''


def test_shapes_that_depend_on_unknown_constexprs_are_not_n042():
    fa = analyze_source(HEADER + textwrap.dedent(DOT_LOOP), "dot.py")
    assert _errors(fa) == []


def test_shapes_that_agree_at_the_launch_compile(tmp_path):
    mod = _module(tmp_path, HEADER + textwrap.dedent(DOT_LOOP), "dot_loop_mod")
    newt.compile(mod.k, signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"},
                 constexprs={"M": 16, "N": 16, "K": 16}, target="sm_90a", cache=False)
    with pytest.raises(newt.CompilationError) as ei:  # a launch where they differ: the error, at that launch
        newt.compile(mod.k, signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"},
                     constexprs={"M": 16, "N": 32, "K": 16}, target="sm_90a", cache=False)
    assert str(ei.value.diagnostics[0].severity) == "error" and ei.value.diagnostics[0].code == "N031"


@pytest.mark.parametrize("body, code", [
    # concrete shapes that differ: still N042 (in a loop) and on branches
    ("""
    @newt.jit
    def k(x_ptr: "*fp32"):
        acc = nl.zeros([16, 16], dtype=nl.float32)
        for _ in range(4):
            «acc = nl.zeros([16, 32], dtype=nl.float32)
        nl.store(x_ptr, nl.sum(nl.sum(acc, 1), 0))
    """, "N042"),
    ("""
    @newt.jit
    def k(x_ptr: "*fp32", M: nl.constexpr):
        acc = nl.zeros([M, 16], dtype=nl.float32)
        for _ in range(4):
            «acc = nl.zeros([M, 16], dtype=nl.float16)
        nl.store(x_ptr, nl.sum(nl.sum(acc, 1), 0))
    """, "N042"),
])
def test_real_type_changes_are_still_n042(expect, body, code):
    expect(body, code)
