"""One definition per op on the language side: each stub calls its rule, methods are registered once."""

import glob
import inspect
import os
import types

import pytest

import newt.language as nl
from newt.frontend import analyze_source
from newt.frontend.ops import RULES, Semantic
from newt.language import core as lc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _stubs():
    return {k: v for k, v in nl.BUILTINS.items() if not getattr(v, "__newt_inline__", False)}


def test_every_stub_calls_its_rule_and_every_rule_has_a_stub():
    stubs = _stubs()
    assert set(stubs) == set(RULES)
    for name, stub in stubs.items():
        raw = stub.__wrapped__
        assert getattr(raw, "__newt_rule_stub__", False), name
        assert "_semantic" in inspect.signature(raw).parameters, name
        assert "_semantic" not in lc.public_signature(stub).parameters, name


def test_the_stub_body_is_what_runs():
    calls = []

    class Probe:
        def __getattr__(self, op):
            def f(*args, **kwargs):
                calls.append((op, args, kwargs))
                return "ok"
            return f

    assert nl.load.__wrapped__("p", "m", _semantic=Probe()) == "ok"
    assert calls[-1][0] == "load" and calls[-1][1][:2] == ("p", "m")
    nl.exp2.__wrapped__("x", _semantic=Probe())
    assert calls[-1][0] == "exp2"
    nl.static_print.__wrapped__(1, 2, sep=",", _semantic=Probe())
    assert calls[-1][1] == (1, 2) and calls[-1][2]["sep"] == ","


def test_semantic_rebinds_what_a_stub_passes():
    """A stub may hand other values to a rule; the rule sees those, with the call's nodes found by identity."""
    from newt.frontend.ops import bind
    from newt.frontend.values import Const
    x, y, n1, n2, call = Const(1.0), Const(2.0), object(), object(), object()
    bound = bind("maximum", [x, y], {}, [n1, n2], {}, call)
    sem = Semantic(None, bound, call)
    assert sem._rebind("maximum", (x, y, bound["propagate_nan"]), {}) is bound  # forwarded unchanged
    swapped = sem._rebind("minimum", (y, x), {})
    assert swapped.name == "minimum" and swapped["x"] is y and swapped["y"] is x
    assert swapped.node("x") is n2 and swapped.node("y") is n1
    assert swapped.given("x") and not swapped.given("propagate_nan")


def test_tensor_methods_are_registered_once_and_public():
    methods = lc.tensor_methods()
    assert methods["to"] == "cast" and methods["cast"] == "cast"
    for m in ("sigmoid", "softmax", "ravel", "interleave", "where", "sum", "reshape"):
        assert m in methods, m
    methods["sum"] = "changed"
    assert lc.tensor_methods()["sum"] == "sum"  # a copy


def test_inline_method_resolves_in_a_kernel():
    src = '''
import newt
import newt.language as nl

@newt.jit
def k(x_ptr, BLOCK: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, BLOCK))
    nl.store(x_ptr + nl.arange(0, BLOCK), x.sigmoid().to(nl.float16).softmax().ravel())
'''
    fa = analyze_source(src, "k.py")
    assert not [d.format() for d in fa.diagnostics if d.severity <= 2]


def test_no_front_end_or_language_file_over_1000_lines():
    for pkg in ("frontend", "language", "interpreter"):
        for p in glob.glob(os.path.join(ROOT, "newt", pkg, "**", "*.py"), recursive=True):
            with open(p) as fh:
                n = sum(1 for _ in fh)
            assert n <= 1000, f"{os.path.relpath(p, ROOT)} has {n} lines"


fake = types.ModuleType("fake")
fake.language = nl
other = types.ModuleType("other")


def test_nothing_is_dropped_through_module_objects():
    """A call through a module the front end did not know compiles to that call, or is an error."""
    import torch

    import newt
    from newt.runtime.interpret import launch_jit

    @newt.jit
    def k(buf):
        fake.language.store(buf, 1)

    @newt.jit
    def k2(buf):
        other.nothing(buf)

    buf = torch.zeros(1, dtype=torch.int32)
    launch_jit(k, (1,), (buf,), {})
    assert buf.item() == 1
    with pytest.raises(newt.CompilationError, match="N004"):
        launch_jit(k2, (1,), (buf,), {})


def test_dtype_attributes_and_predicates():
    assert nl.float16.exponent_bias == 15 and nl.bfloat16.exponent_bias == 127 and nl.float64.exponent_bias == 1023
    assert nl.float8e4nv.exponent_bias == 7 and nl.float8e5.exponent_bias == 15
    assert nl.int8.get_int_max_value() == 127 and nl.uint16.get_int_max_value() == 65535
    assert nl.int32.get_int_min_value() == -2 ** 31 and nl.uint8.get_int_min_value() == 0
    assert nl.float32.is_standard_floating() and not nl.float8e5.is_standard_floating()
    assert nl.int16.is_int16() and nl.uint64.is_uint64() and nl.float8e4nv.is_fp8e4nv() and nl.float8e5.is_fp8()
    assert nl.str_to_ty("*fp16") == nl.pointer_type(nl.float16) and nl.str_to_ty("B") == nl.int1
    assert nl.str_to_ty(("i32", "u8")) == (nl.int32, nl.uint8)
    src = '''
import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    x = nl.full((16,), 1.0, nl.float16)
    nl.static_assert(x.dtype.exponent_bias == 15)
    nl.static_assert(x.dtype.is_fp16() and x.dtype.is_standard_floating())
    nl.static_assert(nl.int8.get_int_max_value() == 127)
    b = nl.int32.exponent_bias
'''
    from newt.frontend import analyze_source as _an
    fa = _an(src, "k.py")
    errs = [d for d in fa.diagnostics if d.severity <= 2]
    assert [(d.code, d.span.line) for d in errs] == [("N023", 11)], [d.format() for d in errs]
