"""One located error base, one AST->span conversion, one caret renderer, one literal_type."""

from __future__ import annotations

import ast

import pytest

import newt.language as nl
from newt.diagnostics import CODES, Diagnostic, LocatedError, Severity, caret_excerpt
from newt.frontend import Analyzer, Span, render
from newt.frontend.semantic import (
    AxisOutOfRange,
    DifferentSignedness,
    NotPowerOfTwo,
    SemError,
    ShapesDoNotBroadcast,
    broadcast_shapes,
    check_block_shape,
    literal_type,
    normalize_axis,
)
from newt.frontend.source import SourceFile
from newt.ir import IRVerificationError


def _node(text: str, cls):
    return next(n for n in ast.walk(ast.parse(text)) if isinstance(n, cls))


# --- Span.from_ast ----------------------------------------------------------------------------------

def test_from_ast_counts_characters_on_both_ends_of_a_non_ascii_line():
    text = "s = 'é😀' + name_after\n"
    lines = text.splitlines()
    name = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name) and n.id == "name_after")
    sp = Span.from_ast(name, lines)
    col = lines[0].index("name_after")  # characters, not bytes (é is 2 bytes, 😀 is 4)
    assert sp == Span(1, col + 1, 1, col + 1 + len("name_after"))
    # the string literal: both ends after non-ASCII characters
    lit = _node(text, ast.Constant)
    assert Span.from_ast(lit, lines) == Span(1, 5, 1, 9)  # 'é😀' is 4 characters


def test_from_ast_converts_the_end_column_on_its_own_line():
    text = "x = f(\n    'ü', 'ü')\n"
    call = _node(text, ast.Call)
    sp = Span.from_ast(call, text.splitlines())
    assert (sp.line, sp.end_line) == (1, 2)
    assert sp.end_col == len("    'ü', 'ü')") + 1  # the end line has non-ASCII characters too


def test_from_ast_col_shift_indexes_the_original_lines():
    original = ["class C:", "    def f(self):", "        return 'é' + y"]
    snippet = "def f(self):\n    return 'é' + y\n"  # dedented by 4
    y = next(n for n in ast.walk(ast.parse(snippet)) if isinstance(n, ast.Name) and n.id == "y")
    y.lineno += 1
    y.end_lineno += 1
    sp = Span.from_ast(y, original, col_shift=4)
    assert original[sp.line - 1][sp.col - 1:sp.end_col - 1] == "y"


def test_source_file_span_and_def_name_agree_with_from_ast():
    text = "# é\n@newt.jit\ndef ké(x):  # 😀\n    return x\n"
    src = SourceFile(text, "k.py")
    fdef = _node(text, ast.FunctionDef)
    assert src.span(fdef) == Span.from_ast(fdef, src.lines)
    assert Span.of_def_name(fdef, src.lines) == Span(3, 5, 3, 7)


def test_the_analyzer_reports_after_non_ascii_text_at_character_columns():
    text = ("import newt\nimport newt.language as nl\n\n@newt.jit\ndef k(x_ptr):\n"
            "    s = 'é😀'; nl.store(x_ptr, undefined_name)\n")
    fa = Analyzer().analyze(text, "k.py")
    d = next(d for d in fa.diagnostics if d.code == "N003")
    line = text.splitlines()[5]
    assert line[d.span.col - 1:d.span.end_col - 1] == "undefined_name"


# --- the caret renderer --------------------------------------------------------------------------------

def test_caret_excerpt_plain_and_numbered():
    assert caret_excerpt("    offs = nl.arange(0, 1000)\n", 25, 29) == (
        "        offs = nl.arange(0, 1000)\n" + " " * 28 + "^~~~")
    assert caret_excerpt("x = 1", 5, None, line=12) == "   12 | x = 1\n      | " + " " * 4 + "^"


def test_render_uses_the_one_renderer():
    d = Diagnostic("N011", Severity.ERROR, Span(1, 5, 1, 8), "msg", file="k.py")
    assert render(d, "x = abc\n").splitlines()[1:] == ["    x = abc", "        ^~~"]


# --- the error base ----------------------------------------------------------------------------------

def test_sem_error_is_a_located_error_and_keeps_its_constructor():
    node = ast.parse("x").body[0]
    e = SemError("N023", "bad", "do this", {"k": 1}, node)
    assert isinstance(e, LocatedError)
    assert (e.code, e.message, e.hint, e.data, e.node, e.location) == ("N023", "bad", "do this", {"k": 1}, node, None)
    assert str(e) == "bad"
    e2 = SemError("N010", "m", hint="h", node=node)
    assert (e2.hint, e2.data, e2.node) == ("h", {}, node)


def test_causes_render_their_templates_and_carry_their_fields():
    with pytest.raises(AxisOutOfRange) as ei:
        normalize_axis(3, 2)
    e = ei.value
    assert (e.code, e.message) == ("N032", "axis 3 is out of range for a block of rank 2")
    assert e.hint == "use an axis in 0..1"
    assert e.data == {"what": "axis", "axis": 3, "rank": 2}
    with pytest.raises(NotPowerOfTwo) as ei:
        check_block_shape((1000,))
    assert ei.value.data["replace"] == "1024" and ei.value.data["value"] == 1000  # what the quick fix reads
    assert ei.value.hint == "round 1000 up to 1024 and mask the extra elements"
    with pytest.raises(ShapesDoNotBroadcast) as ei:
        broadcast_shapes((4, 8), (4, 16))
    assert ei.value.message == "shapes [4, 8] and [4, 16] of the operands do not broadcast (dimension 1: 8 vs 16)"
    e = DifferentSignedness(op="/", a=nl.int32, b=nl.uint32)
    assert e.message == "Cannot use / with nl.int32 and nl.uint32 because they have different signedness"
    assert all(c in CODES for c in ("N011", "N020", "N030", "N032", "N090"))


def test_ir_verification_error_is_located_with_every_problem_as_data():
    from newt import ir
    from newt.ir.core import Loc
    i32 = nl.int32
    region = ir.Region()
    fn = ir.Function("k", [], region)
    bad = ir.Op("add", [], [i32], None, None, Loc("k.py", 7, 9, 7, 14))
    region.ops.append(bad)
    region.ops.append(ir.Op("return", [], [], None, None, None))
    with pytest.raises(IRVerificationError) as ei:
        ir.verify(fn)
    e = ei.value
    assert isinstance(e, LocatedError) and e.code == "N090"
    assert e.location == bad.loc and e.data["errors"] and all("add at 7:9" in x for x in e.data["errors"])


# --- literal_type ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("v,kernel,arg", [
    (True, nl.int1, nl.int1), (7, nl.int32, nl.int32), (2 ** 31, nl.uint32, nl.uint32), (-2 ** 40, nl.int64, nl.int64),
    (2 ** 63, nl.uint64, nl.uint64), (1.5, nl.float32, nl.float32), (1e300, nl.float64, nl.float32)])
def test_literal_type_in_kernel_code_and_as_a_launch_argument(v, kernel, arg):
    assert literal_type(v) == kernel
    assert literal_type(v, argument=True) == arg


def test_literal_type_rejects_what_has_no_type():
    for v in (2 ** 64, "s", None):
        with pytest.raises(SemError):
            literal_type(v)


def test_the_language_server_types_launch_literals_with_literal_type():
    from lsp_server.concrete import _scalar_type
    assert _scalar_type(1e300) == nl.float32 and _scalar_type(2 ** 32) == nl.int64 and _scalar_type(2 ** 64) is None


def test_a_compile_error_carries_its_first_cause_as_a_located_sem_error():
    from newt.frontend import CompilationError, build_ir
    text = ("import newt\nimport newt.language as nl\n\n@newt.jit\ndef k(x_ptr, B: nl.constexpr):\n"
            "    nl.store(x_ptr + nl.arange(0, B), 1)\n")
    js = Analyzer().analyze(text, "k.py").kernel_named("k").jit_source
    with pytest.raises(CompilationError) as ei:
        build_ir(js, {"x_ptr": nl.pointer_type(nl.float32)}, {"B": 1000})
    cause = ei.value.__cause__
    assert isinstance(cause, SemError) and cause.code == "N011"
    assert cause.data["replace"] == "1024"
    col = text.splitlines()[5].index("B)") + 1  # the length argument
    assert (cause.location.file, cause.location.line, cause.location.col) == ("k.py", 6, col)
