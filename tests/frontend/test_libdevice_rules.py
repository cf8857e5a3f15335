"""The libdevice functions in the front end: importable as Triton spells them, exact dtype variants (a
located N023 otherwise), shapes broadcast, silence where the generic analysis cannot know a dtype."""

from __future__ import annotations

import textwrap

import pytest

import newt.language as nl
from newt.frontend import analyze_source, build_ir


def _errors(src):
    fa = analyze_source(textwrap.dedent(src), "k.py")
    return [d for d in fa.diagnostics if d.severity.name == "ERROR"]


def test_triton_spellings_resolve():
    import newt.language.extra.cuda.libdevice as cuda_ld
    import newt.language.extra.libdevice as ld
    assert ld.tanh is cuda_ld.tanh and nl.extra.cuda.libdevice.rsqrt is ld.rsqrt
    src = '''
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice
    from triton.language.extra.libdevice import rsqrt
    from triton.language.extra.cuda.libdevice import tanh as cuda_tanh

    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + i)
        y = libdevice.erf(x) + rsqrt(x) + cuda_tanh(x) + tl.extra.cuda.libdevice.exp(x)
        tl.store(y_ptr + i, y)

    k[(1,)](None, None, BLOCK=32)
    '''
    assert _errors(src) == []


def test_a_dtype_without_variant_is_a_located_error():
    src = '''
    import newt
    import newt.language as nl
    from newt.language.extra import libdevice

    @newt.jit
    def k(x_ptr, y_ptr, BLOCK: nl.constexpr):
        i = nl.arange(0, BLOCK)
        x = nl.load(x_ptr + i)
        nl.store(y_ptr + i, libdevice.tanh(x))

    k[(1,)](None, None, BLOCK=32)
    '''
    fa = analyze_source(textwrap.dedent(src), "k.py")
    spec = [d for d in fa.diagnostics if d.code == "N023"]
    assert spec == []  # the generic analysis does not know x's dtype
    with pytest.raises(Exception) as ei:
        build_ir(_compile(src), {"x_ptr": nl.pointer_type(nl.float16), "y_ptr": nl.pointer_type(nl.float16)},
                 {"BLOCK": 32})
    msg = str(ei.value)
    assert "N023" in msg and "libdevice.tanh has no variant for (fp16); it takes (fp32) or (fp64)" in msg
    assert "k.py:10:40:" in msg  # the argument x


def _compile(src):
    import importlib.util
    import sys
    import tempfile
    d = tempfile.mkdtemp()
    path = f"{d}/k.py"
    with open(path, "w") as f:
        f.write("\n".join(ln for ln in textwrap.dedent(src).splitlines() if not ln.startswith("k[")))
    spec = importlib.util.spec_from_file_location("ld_k", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ld_k"] = mod
    spec.loader.exec_module(mod)
    return mod.k


def test_literals_take_triton_types_and_shapes_broadcast():
    src = '''
    import newt
    import newt.language as nl
    from newt.language.extra.libdevice import pow, ldexp, fmod

    @newt.jit
    def k(x_ptr, y_ptr, BLOCK: nl.constexpr):
        i = nl.arange(0, BLOCK)
        x = nl.load(x_ptr + i[:, None] * BLOCK + i[None, :])
        row = nl.load(x_ptr + i)
        y = pow(x, 2) + pow(x, 0.5) + ldexp(row[None, :], 3) + fmod(x, row[:, None])
        nl.store(y_ptr + i[:, None] * BLOCK + i[None, :], y)
    '''
    fn = build_ir(_compile(src), {"x_ptr": nl.pointer_type(nl.float32), "y_ptr": nl.pointer_type(nl.float32)},
                  {"BLOCK": 16})
    ops = [op for op in fn.walk() if op.name == "libdevice"]
    assert [op.attrs["fn"] for op in ops] == ["pow", "pow", "ldexp", "fmod"]
    assert str(ops[0].operands[1].type).endswith("i32>") or "i32" in str(ops[0].operands[1].type)
    assert all("16x16" in str(op.results[0].type) for op in ops[:2])


def test_wrong_arity_and_pointer_arguments():
    src = '''
    import newt
    import newt.language as nl
    from newt.language.extra import libdevice

    @newt.jit
    def k(x_ptr, y_ptr):
        a = nl.load(x_ptr)
        nl.store(y_ptr, libdevice.atan2(a))
        nl.store(y_ptr, libdevice.sin(x_ptr))

    k[(1,)](None, None)
    '''
    errs = _errors(src)
    assert any(d.code == "N005" and "arg1" in d.message and d.span.line == 9 for d in errs), errs
    with pytest.raises(Exception, match="libdevice.sin takes numbers, not pointers"):
        build_ir(_compile(src.replace("libdevice.atan2(a)", "a")), {"x_ptr": nl.pointer_type(nl.float32),
                                                                   "y_ptr": nl.pointer_type(nl.float32)}, {})


def test_the_table_matches_the_installed_triton():
    """Names, argument dtypes, result dtypes and __nv_ symbols, against Triton's own libdevice module (read as
    text where Triton is installed: the yardstick, not a dependency)."""
    import ast
    import importlib.util

    from newt.language.extra.cuda.libdevice import LIBDEVICE
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("Triton is not installed")
    import os
    path = os.path.join(spec.submodule_search_locations[0], "language", "extra", "cuda", "libdevice.py")
    if not os.path.exists(path):
        pytest.skip("this Triton has no extra/cuda/libdevice.py")
    ref = {}
    for f in ast.parse(open(path, encoding="utf-8").read()).body:
        if not isinstance(f, ast.FunctionDef):
            continue
        call = next(c for c in ast.walk(f) if isinstance(c, ast.Call) and getattr(c.func, "attr", "") ==
                    "extern_elementwise")
        table = call.args[3]
        ref[f.name] = sorted((tuple(e.args[0].value for e in k.elts), v.elts[1].args[0].value, v.elts[0].value)
                             for k, v in zip(table.keys, table.values))
    assert set(ref) == set(LIBDEVICE)
    assert {k: sorted(v) for k, v in LIBDEVICE.items()} == ref
