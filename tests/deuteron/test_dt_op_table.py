"""deuteron's op table holds together: every op and node kind is declared once in ``deuteron/ops/<family>.py``
with every hook; the name tables the tracer, the static checker and the editor read are derived from it; no
module keeps a list of node-kind names of its own; the tracer is a small core plus collaborating objects."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys

import pytest
from dt_helpers import ROOT

DEUTERON = ROOT / "deuteron"


def _table():
    import deuteron.ops as ops
    from deuteron.optable import NODE_KINDS, OPS
    return ops, OPS, NODE_KINDS


def test_every_op_has_every_hook():
    ops, OPS, NODE_KINDS = _table()
    assert len(OPS) > 100
    for name, o in OPS.items():
        where = f"op {name!r}"
        assert o.family in ops.FAMILIES, where
        # findable by name: the hook lives in its family's module
        assert o.trace.fn.__module__ == f"deuteron.ops.{o.family}", (where, o.trace.fn.__module__)
        assert isinstance(o.signature, inspect.Signature), where
        assert o.spellings, f"{where} has no spelling (torch=, functional=, methods= or a dt stub)"
        assert callable(o.check), where
        for k in o.nodes:
            assert k in NODE_KINDS, f"{where} builds an undeclared node kind {k!r}"
        if o.stub is not None:  # a dt.* op: its stub is what users see and what kernel.ref runs
            assert name == f"dt.{o.stub.__name__}", where
            assert (o.stub.__doc__ or "").strip(), f"{where}: its stub has no docstring"
            assert o.ref is o.stub, where
        else:  # a torch op: the oracle is the torch function itself (where this torch has it: torch.fma is newer)
            import torch
            ref = o.resolve_ref()
            assert callable(ref) or (o.torch and not any(hasattr(torch, n) for n in o.torch)), (where, o.ref)


def test_every_node_kind_has_a_renderer():
    from deuteron.optable import EFFECT, TRAITS
    ops, OPS, NODE_KINDS = _table()
    assert len(NODE_KINDS) >= 33
    for k, nk in NODE_KINDS.items():
        assert nk.traits <= set(TRAITS), k
        assert nk.family in ops.FAMILIES, k
        if EFFECT in nk.traits:
            assert callable(nk.emit) and nk.render is None, k
        else:
            assert callable(nk.render), f"node kind {k!r} has no renderer"
        assert nk.doc, k


def test_node_kinds_built_and_compared_are_declared():
    """Every ``Node("kind", ...)`` and every ``n.op == "kind"`` in deuteron names a declared kind, and every declared
    kind is built somewhere."""
    _, _, NODE_KINDS = _table()
    built, compared = set(), set()
    for dp, _, fs in os.walk(DEUTERON):
        for f in fs:
            if not f.endswith(".py"):
                continue
            tree = ast.parse(open(os.path.join(dp, f), encoding="utf-8").read())
            for n in ast.walk(tree):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Node" and n.args and \
                        isinstance(n.args[0], ast.Constant):
                    built.add((f, n.args[0].value))
                if isinstance(n, ast.Compare) and isinstance(n.left, ast.Attribute) and n.left.attr == "op":
                    for c in n.comparators:
                        for s in (c.elts if isinstance(c, (ast.Tuple, ast.List, ast.Set)) else [c]):
                            if isinstance(s, ast.Constant) and isinstance(s.value, str):
                                compared.add((f, s.value))
    for f, k in built | compared:
        assert k in NODE_KINDS, f"{f} names node kind {k!r}, which no op family declares"
    kinds_built = {k for _, k in built}
    tile_attrs = {k for k in NODE_KINDS if k.startswith("tile_")}  # built as Node(f"tile_{attr}")
    assert set(NODE_KINDS) - kinds_built - tile_attrs == set(), "declared but never built"


def test_no_hand_kept_lists_of_node_kinds():
    """Passes ask a node kind's traits: no ``n.op in (...)`` with several kinds outside the op entries."""
    _, _, NODE_KINDS = _table()
    offenders = []
    for dp, _, fs in os.walk(DEUTERON):
        if os.path.basename(dp) == "ops":
            continue
        for f in fs:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dp, f)
            for n in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(n, ast.Compare) and isinstance(n.left, ast.Attribute) and n.left.attr == "op":
                    for c in n.comparators:
                        if isinstance(c, (ast.Tuple, ast.List, ast.Set)):
                            names = [e.value for e in c.elts if isinstance(e, ast.Constant) and e.value in NODE_KINDS]
                            if len(names) > 2:
                                offenders.append(f"{f}:{n.lineno} {names}")
    assert not offenders, offenders


def test_name_tables_are_derived_from_the_entries():
    ops, OPS, _ = _table()
    for kind in ("torch", "functional", "methods"):
        table = {"torch": ops.TORCH_FUNCTIONS, "functional": ops.FUNCTIONAL, "methods": ops.TENSOR_METHODS}[kind]
        spelled = {n: o.name for o in OPS.values() for n in getattr(o, kind)}
        assert {n: v for n, v in table.items() if v is not None} == spelled
        assert {n for n, v in table.items() if v is None} == set(ops.KNOWN_UNSUPPORTED[kind])
    stubs = ops.dt_stubs()
    assert ops.DT_DEVICE == set(stubs) | {"tile", "grid", "jagged_tile"}
    assert not set(stubs) & ops.DT_HOST_ONLY
    assert ops.find("torch.sum") is OPS["sum"] and ops.find("Tensor.view") is OPS["reshape"]
    assert ops.find("torch.nn.functional.gelu") is OPS["gelu"] and ops.find("dt.load") is OPS["dt.load"]
    assert ops.find("torch.sort") is None


def test_every_dt_op_is_public_and_seen_by_the_editor():
    import deuteron
    from lsp_server import language
    ops, _, _ = _table()
    members = {m.name: m for m in language.members("deuteron")}
    for name, stub in ops.dt_stubs().items():
        assert getattr(deuteron, name) is stub, name
        m = members.get(name) or language.lookup(f"deuteron.{name}")
        assert m is not None and m.kind == "function", name
        assert m.doc.strip().split("\n")[0] == (stub.__doc__ or "").strip().split("\n")[0], name


def test_static_check_binds_the_arguments():
    """The editor reports a call that cannot bind to its op's signature, as tracing would (D004)."""
    from dt_helpers import check
    fa, marks, _ = check("""
        @dt.kernel
        def k(x):
            out = torch.empty_like(x)
            for t in dt.tile(x.size(0)):
                v = x[t]
                out[t] = «torch.clamp(v, 0.0, 1.0, 2.0) + «v.sum(0, True, 3) + «dt.load(x, [t], None, None, 1)
            return out
        """)
    found = sorted((d.span.line, d.span.col) for d in fa.diagnostics if d.code == "D004")
    assert found == sorted(marks), [(d.code, d.span.line, d.span.col, d.message) for d in fa.diagnostics]
    ok, _, _ = check("""
        @dt.kernel
        def k(x):
            out = torch.empty_like(x)
            for t in dt.tile(x.size(0)):
                v = x[t]
                out[t] = torch.clamp(v, min=0.0) + v.sum(0, keepdim=True) + dt.load(x, [t], extra_mask=None)
            return out
        """)
    assert not [d for d in ok.diagnostics if d.code == "D004"], [d.message for d in ok.diagnostics]


def _class_sizes():
    """Lines of each deuteron class, counted with the deuteron classes it inherits from (mixins count)."""
    classes = {}
    for dp, _, fs in os.walk(DEUTERON):
        for f in fs:
            if f.endswith(".py"):
                for n in ast.walk(ast.parse(open(os.path.join(dp, f), encoding="utf-8").read())):
                    if isinstance(n, ast.ClassDef):
                        bases = [b.id for b in n.bases if isinstance(b, ast.Name)]
                        classes.setdefault(n.name, []).append((n.end_lineno - n.lineno + 1, bases))

    def size(name, seen=()):
        if name not in classes or name in seen:
            return 0
        lines, bases = max(classes[name])
        return lines + sum(size(b, seen + (name,)) for b in bases)
    return {c: size(c) for c in classes}


def test_no_class_over_800_lines():
    sizes = _class_sizes()
    assert sizes["Tracer"] < 800 and sizes["Evaluator"] < 800
    big = {c: s for c, s in sizes.items() if s > 800}
    assert not big, big


def test_importing_the_table_does_not_import_torch():
    code = ("import sys, deuteron.ops, deuteron.optable; "
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:5]")
    r = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("trait,kinds", [
    ("pure", {"binary", "unary", "cast", "where", "expand_dims", "reshape", "permute", "expand", "reduce", "full",
              "arange", "scan"}),
    ("effect", {"store", "atomic"}),
    ("memory", {"load", "store", "atomic"}),
])
def test_traits_keep_the_passes_behaviour(trait, kinds):
    """The traits say what the passes' old name lists said (the CSE's pure kinds, the statements, the accesses)."""
    _, _, NODE_KINDS = _table()
    assert {k for k, nk in NODE_KINDS.items() if trait in nk.traits} == kinds
