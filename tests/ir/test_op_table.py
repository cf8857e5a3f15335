"""The op table (newt/ir/ops.py) is the one definition of every IR op: each op has a type rule, an
interpreter handler and a CUDA lowering, and no pass, handler or front-end emit names an op it lacks."""

from __future__ import annotations

import ast
import os

import pytest

import newt.language as nl
from newt.ir import Op, Value
from newt.ir.ops import (
    BINARY,
    ELEMENTWISE,
    MEMORY,
    OPS,
    PURE,
    TERMINATORS,
    VIEW,
    Trait,
    is_commutative_combine,
    names_with,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NEWT = os.path.join(ROOT, "newt")


def test_every_op_has_a_type_rule():
    missing = [d.name for d in OPS.values() if d.verify is None]
    assert missing == []


def test_every_op_has_an_interpreter_handler():
    from newt.interpreter.ops import OPS as HANDLERS
    missing = sorted(n for n in OPS if n not in HANDLERS and n not in TERMINATORS)
    assert missing == [], "ops without an interpreter handler (newt/interpreter/ops.py @op)"
    # terminators are consumed by the executor's region runner, never dispatched
    assert not TERMINATORS & set(HANDLERS)


def test_every_op_has_a_cuda_lowering():
    import newt.backend.cuda  # noqa: F401  (registers the lowerings)
    from newt.backend.cuda.emitter import LOWERINGS
    missing = sorted(n for n in OPS if n not in LOWERINGS)
    assert missing == [], "ops without a CUDA lowering (newt/backend/cuda @lowers)"


def test_dispatch_tables_name_only_table_ops():
    import newt.backend.cuda  # noqa: F401
    from newt.backend.cuda.emitter import LOWERINGS
    from newt.interpreter.ops import OPS as HANDLERS
    assert sorted(set(HANDLERS) - set(OPS)) == []
    assert sorted(set(LOWERINGS) - set(OPS)) == []


def test_elementwise_ops_render_as_scalar_expressions():
    from newt.backend.cuda.elementwise import scalar_expr
    f32, i1 = nl.float32, nl.int1
    for name in sorted(ELEMENTWISE):
        d = OPS[name]
        n = d.max_operands or 1  # libdevice: variadic, one operand for tanh
        types = [f32] * n
        if name == "where":
            types = [i1, f32, f32]
        if name == "addptr":
            types = [nl.pointer_type(f32), nl.int32]
        if name in ("and", "or", "xor", "shl", "shr", "floordiv", "mod", "invert", "umulhi"):
            types = [nl.int32] * n
        rt = i1 if Trait.COMPARISON in d.traits else types[1] if name == "where" else types[0]
        attrs = {"fn": "tanh"} if name == "libdevice" else {}
        expr = scalar_expr(name, [f"a{i}" for i in range(n)], types, rt, attrs)
        assert isinstance(expr, str) and "a0" in expr, name


def _literals(node):
    """String constants of a literal, tuple/list/set of literals."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value, node)]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [x for e in node.elts for x in _literals(e)]
    return []


def _op_name_uses(path):
    """String literals the file uses as IR op names: ``@op("x")`` / ``@lowers("x")`` registrations,
    ``emit("x", ...)`` calls, and comparisons of an op's ``.name`` (or a local ``nm``/``name`` bound
    from one) with literals."""
    tree = ast.parse(open(path).read(), path)
    op_vars: set = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "name" \
                and isinstance(node.value.value, ast.Name) and node.value.value.id in ("op", "o", "u", "lop", "d"):
            op_vars.update(t.id for t in node.targets if isinstance(t, ast.Name))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if fname in ("op", "lowers") and all(isinstance(a, ast.Constant) for a in node.args):
                out += [x for a in node.args for x in _literals(a)]
            if fname == "emit" and node.args:
                out += _literals(node.args[0])
        elif isinstance(node, ast.Compare):
            left = node.left
            is_op_name = (isinstance(left, ast.Attribute) and left.attr == "name" and isinstance(left.value, ast.Name)
                          and left.value.id in ("op", "o", "u", "lop", "d", "t", "inner", "x", "owner")) or \
                         (isinstance(left, ast.Name) and left.id in op_vars)
            if is_op_name:
                for c in node.comparators:
                    out += _literals(c)
    return out


_CONSUMERS = [os.path.join(dp, f) for sub in ("ir", "interpreter", "backend", "frontend")
              for dp, _, fs in os.walk(os.path.join(NEWT, sub)) for f in fs if f.endswith(".py")]


@pytest.mark.parametrize("path", sorted(_CONSUMERS), ids=lambda p: os.path.relpath(p, NEWT))
def test_no_pass_names_an_op_the_table_lacks(path):
    # dtype and lowering names compared with ``.name`` are not op names
    dtypes = {t.name for t in vars(nl).values() if isinstance(t, nl.dtype)} | {"fp8e4nv", "fp8e5", "int1"}
    other = {"mma.sync", "wgmma"}
    unknown = sorted({s for s, _ in _op_name_uses(path)} - set(OPS) - dtypes - other)
    assert unknown == [], f"{os.path.relpath(path, ROOT)} names ops missing from newt/ir/ops.py"


def test_the_scanner_sees_op_names():
    uses = {s for s, _ in _op_name_uses(os.path.join(NEWT, "backend", "cuda", "emitter.py"))}
    assert {"constant", "splat", "broadcast"} <= uses
    files = ("stmts.py", "loops.py", "exprs.py")
    uses = {s for f in files for s, _ in _op_name_uses(os.path.join(NEWT, "frontend", f))}
    assert {"scf.for", "yield", "cast"} <= uses


def test_trait_sets():
    assert {"add", "lt", "where", "cast", "addptr", "exp"} <= ELEMENTWISE
    assert "load" not in PURE and "dot" in PURE and "scf.for" not in PURE
    assert MEMORY == {"load", "store", "atomic_rmw", "atomic_cas"}
    assert VIEW == {"expand_dims", "broadcast", "reshape", "permute", "hint"}
    assert TERMINATORS == {"yield", "condition", "return"}
    assert "fma" not in BINARY and "addptr" not in BINARY and {"add", "ne"} <= BINARY
    assert names_with(Trait.ELEMENTWISE, without=[Trait.SAME_TYPE, Trait.COMPARISON]) == {
        "where", "cast", "bitcast", "addptr", "libdevice"}
    assert [k for k in ("add", "mul", "max", "min", "xor", "argmax", "region") if is_commutative_combine(k)] == [
        "add", "mul", "max", "min", "xor"]


def _load(n_operands, attrs=None):
    ptr = Value(nl.pointer_type(nl.float32))
    ops = [ptr, Value(nl.int1), Value(nl.float32)][:n_operands]
    return Op("load", ops, [nl.float32], attrs)


def test_named_optional_operands():
    op = _load(1)
    assert op.operand("ptr") is op.operands[0] and op.operand("mask") is None and op.operand("other") is None
    op = _load(2)
    assert op.operand("mask") is op.operands[1] and op.operand("other") is None
    op = _load(3)
    assert op.operand("other") is op.operands[2]
    with pytest.raises(KeyError, match="no operand 'msk'"):
        op.operand("msk")


def test_variadic_operands():
    lb, ub, st, a, b = (Value(nl.int32) for _ in range(5))
    from newt.ir import Region
    op = Op("scf.for", [lb, ub, st, a, b], [nl.int32, nl.int32], {}, [Region()])
    assert op.operand("step") is st and op.variadic("init") == [a, b]
    with pytest.raises(TypeError):
        op.operand("init")


def test_attribute_defaults_come_from_the_table():
    op = Op("atomic_rmw", [Value(nl.pointer_type(nl.int32)), Value(nl.int32)], [nl.int32], {"kind": "add"})
    assert op.attr("sem") == "acq_rel" and op.attr("scope") == "gpu" and op.attr("kind") == "add"
    op.attrs["sem"] = "relaxed"
    assert op.attr("sem") == "relaxed"
    with pytest.raises(KeyError, match="no attribute 'semantics'"):
        op.attr("semantics")
    with pytest.raises(KeyError, match="required"):
        Op("reduce", [], [], {}).attr("axis")


def _fn(*ops):
    from newt.ir import Function, Region
    body = Region([])
    body.ops = list(ops) + [Op("return", [], [])]
    return Function("k", [], body)


def test_verifier_checks_signatures_and_type_rules():
    from newt.ir import IRVerificationError, verify
    c = Op("constant", [], [nl.float32], {"value": 1.0})
    i = Op("constant", [], [nl.int32], {"value": 1})
    cases = [
        (Op("add", [c.result, i.result], [nl.float32]), "operand types differ"),
        (Op("lt", [c.result, c.result], [nl.float32]), "not int1"),
        (Op("exp", [c.result, c.result], [nl.float32]), "2 operands, expected 1"),
        (Op("cast", [c.result], [nl.int32], {"round": "rtz"}), "unknown attribute 'round'"),
        (Op("program_id", [], [nl.int32]), "missing attribute 'axis'"),
        (Op("frobnicate", [], []), "no op 'frobnicate' in the op table"),
    ]
    for bad, msg in cases:
        with pytest.raises(IRVerificationError, match=msg):
            verify(_fn(c, i, bad))
    verify(_fn(c, i, Op("add", [c.result, c.result], [nl.float32])))
