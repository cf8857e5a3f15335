"""The cost of one analysis of an edited version (issue 15, item 5): no whole-file work repeated per kernel.

An analysis of the 1,000-line benchmark file used to spend ~1 s in the launch dtypes (hostvalues walked the
whole tree once per launch and once per host function, and parsed the text a second time). These tests pin
the fix down by what it does, not by a time: one parse per text, whole-tree walks bounded, and the same host
values as a plain walk over the tree finds.
"""

from __future__ import annotations

import ast
import os
import random
import sys

import pytest

from lsp_server.analysis import KernelCache, analyze, lsp_diagnostics
from newt.frontend import hostvalues

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _big_file() -> str:
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        from frontend import make_big_file
    finally:
        sys.path.pop(0)
    return make_big_file(20, 1000)


def _examples() -> list[str]:
    out = []
    for d in ("examples",):
        base = os.path.join(ROOT, d)
        for dirpath, _dirs, files in os.walk(base):
            for f in sorted(files):
                if f.endswith(".py"):
                    with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                        out.append(fh.read())
    return out


def _plain_enclosing(tree, line):
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0):
            if best is None or node.lineno > best.lineno:
                best = node
    return best


def _plain_calls(tree, name):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]


def _host_answers(text: str):
    from newt.frontend import analyze_source
    fa = analyze_source(text, "t.py")
    out = []
    for ka in fa.kernels:
        launches = [ls for ls in fa.scan.launches if ls.kernel == ka.name]
        params = [a.arg for a in ka.node.args.args]
        out.append(hostvalues.host_constexprs(text, launches, params))
        out.append(hostvalues.host_pointer_dtypes(text, launches, params, set(params)))
    return out


def test_host_values_equal_a_plain_walk(monkeypatch):
    """The indexed lookups (functions by statements, calls by name) answer what walking every node did."""
    texts = [_big_file(), *_examples()]
    # a wrapper called from another function, nested functions, a call inside an expression
    texts.append('''import newt
import newt.language as nl
import torch

@newt.jit
def k(x_ptr, n, BLOCK: nl.constexpr):
    pass

def outer(x, block=64):
    def inner(y):
        k[(1,)](y, y.numel(), BLOCK=block * 2)
    return inner(x)

def run(x, n):
    if n > 0:
        b = newt.next_power_of_2(n)
        k[(1,)](x.half(), n, BLOCK=b)

print(outer(torch.zeros(4), block=(32)))
run(torch.zeros(4), 100)
''')
    fast = [_host_answers(t) for t in texts]
    hostvalues._TREES.clear()
    monkeypatch.setattr(hostvalues, "_enclosing", _plain_enclosing)
    monkeypatch.setattr(hostvalues, "_calls", _plain_calls)
    plain = [_host_answers(t) for t in texts]
    assert fast == plain
    assert any(a[0] for answers in fast for a in answers)  # some constexpr was found at all


def test_one_parse_and_one_walk_per_analysis(monkeypatch):
    """Analyzing an edited version of the benchmark file (front end + launch dtypes) parses one statement and
    walks the whole tree a bounded number of times (the calls of host functions that the file calls)."""
    text = _big_file()
    cache = KernelCache(max_entries=4096)
    a = analyze(text, "file:///t.py", 1, cache=cache)
    lsp_diagnostics(a)
    parses, walked = [], [0]
    real_parse, real_walk = ast.parse, ast.walk

    def parse(src, *args, **kw):
        parses.append(len(src))
        return real_parse(src, *args, **kw)

    def walk(node):
        for n in real_walk(node):
            walked[0] += 1
            yield n

    monkeypatch.setattr(ast, "parse", parse)
    monkeypatch.setattr(ast, "walk", walk)
    nodes = sum(1 for _ in real_walk(real_parse(text)))
    rng = random.Random(3)
    lines = text.split("\n")
    for v in range(2, 6):
        i = rng.randrange(len(lines))
        lines[i] = lines[i] + "  # edited"
        parses.clear()
        walked[0] = 0
        a = analyze("\n".join(lines), "file:///t.py", v, cache=cache)
        lsp_diagnostics(a)
        # the front end parses the edited top-level statement only (its tree of the others is kept), and the
        # launch dtypes read the front end's tree: no parse of the whole text at all
        assert len(parses) == 1 and parses[0] < len(text) // 4, parses
        # the front end's own walks are per kernel (they visit each kernel's nodes a few times); what is
        # bounded here is the whole-file walking of the host code: it was ~60 walks of the tree
        assert walked[0] < 6 * nodes, (walked[0], nodes)


@pytest.mark.parametrize("broken", [False, True])
def test_remembered_tree_is_the_texts(broken):
    """A text that does not parse as a whole keeps hostvalues' own answer (it says the file does not parse)."""
    text = _big_file()
    if broken:
        text = text.replace("def softmax_0(x):", "def softmax_0(x:", 1)
    a = analyze(text, "file:///t2.py", 1)
    tree = getattr(a.file.scan, "tree", None)
    assert (tree is None) == broken
    if not broken:
        assert hostvalues._parse(text) is tree
