"""No import cycle between the modules of newt/, deuteron/ and lsp_server/, counting imports inside
functions (those only hide a cycle from Python's module loader, not from the design).

``python tests/test_import_cycles.py`` prints the import graph's cycles (strongly connected components).
"""

from __future__ import annotations

import ast
import functools
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("newt", "deuteron", "lsp_server")


def modules() -> dict[str, str]:
    """Module name -> file, for every module of the packages."""
    out = {}
    for pkg in PACKAGES:
        for dp, _, fs in os.walk(os.path.join(ROOT, pkg)):
            if "__pycache__" in dp:
                continue
            for f in fs:
                if not f.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(dp, f), ROOT)[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                out[".".join(rel)] = os.path.join(dp, f)
    return out


def _resolve(name: str, mods) -> str | None:
    """The most specific module of ``mods`` that ``name`` (a dotted import target) names."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(mod: str, path: str, mods) -> set[str]:
    """Modules of ``mods`` that ``mod`` imports anywhere in its file (module level or in functions)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_pkg = path.endswith("__init__.py")
    out = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets = [f"{prefix}.{a.name}" for a in node.names]
            if not any(t in mods for t in targets):
                targets = [prefix]
        for t in targets:
            r = _resolve(t, mods)
            if r is not None and r != mod:
                out.add(r)
    return out


def _ancestors(mod: str) -> set[str]:
    parts = mod.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


@functools.lru_cache(maxsize=1)  # one parse of the packages per test process (the tests only read the graph)
def graph() -> dict[str, set[str]]:
    """Import edges, plus the package ``__init__`` edges Python adds: importing ``a.b.c`` first runs ``a/b/__init__``
    (and ``a/__init__``), so a module importing ``newt.tune.tasks`` depends on ``newt.tune`` too. The packages the
    importer itself lives in are initialised before it runs, so those edges are not counted."""
    mods = modules()
    g = {}
    for m, p in mods.items():
        deps = imports_of(m, p, mods)
        mine = _ancestors(m)
        g[m] = deps | {a for d in deps for a in _ancestors(d) if a in mods and a not in mine and a != m}
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_graph_sees_function_local_and_relative_imports():
    g = graph()
    # newt/frontend/__init__ re-exports from .check (relative, module level)
    assert "newt.frontend.check" in g["newt.frontend"]
    assert len(g) > 50


def test_the_graph_counts_package_init_edges():
    # newt.tune.tasks imports newt.runtime's modules, so it runs newt/runtime/__init__.py first
    g = graph()
    assert "newt.runtime" in g["newt.tune.tasks"]
    # a module's own packages are initialised before it: no edge back to them
    assert "newt.tune" not in g["newt.tune.tasks"]


def test_the_init_edge_finds_a_cycle_through_a_package():
    # a.x imports b.y; b.z imports a.w: no module cycle, but a/__init__ importing a.x closes one through b/__init__
    g = {"a": {"a.x"}, "a.x": {"b.y", "b"}, "b": {"b.z"}, "b.y": set(), "b.z": {"a.w", "a"}, "a.w": set()}
    assert cycles(g) == [["a", "a.x", "b", "b.z"]]


#: cycles that remain (issue 14 removed all seven, counting function-local and string imports): a cycle may shrink or
#: go away, never grow, and no new one may appear.  Was 7 (one of them the CUDA backend's five modules).
KNOWN: list[set[str]] = []  # none left (2026-12-02); a cycle may be listed here only with its issue


def test_no_new_import_cycles():
    found = cycles(graph())
    new = [c for c in found if not any(set(c) <= k for k in KNOWN)]
    assert new == [], "new import cycles:\n" + "\n".join(" <-> ".join(c) for c in new)


def test_the_backend_has_no_import_cycle():
    assert not [c for c in cycles(graph()) if any(m.startswith("newt.backend") or m.startswith("newt.ir")
                                                  for m in c)]


if __name__ == "__main__":
    cs = cycles(graph())
    for c in cs:
        print(len(c), " ".join(c))
    print(len(cs), "cycles")
