"""The layering of docs/architecture.md (imports only point down), checked on the source: every import
statement in a layer's modules, at module level or inside functions, names only what the layer may use."""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: package directory -> prefixes its modules must never import
NEVER = {
    "newt/language": ("newt.frontend", "newt.ir", "newt.interpreter", "newt.backend", "newt.runtime", "torch",
                      "cuda", "deuteron", "lsp_server"),
    "newt/ir": ("newt.frontend", "newt.interpreter", "newt.backend", "newt.runtime", "torch", "cuda", "deuteron",
                "lsp_server"),
    "newt/frontend": ("newt.interpreter", "newt.backend", "newt.runtime", "torch", "cuda", "deuteron",
                      "lsp_server"),
    "newt/interpreter": ("newt.backend", "newt.runtime", "cuda", "deuteron", "lsp_server"),
    "newt/backend": ("newt.interpreter", "newt.runtime", "torch", "deuteron", "lsp_server"),
}


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _imports(path: str):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    mod = _module_name(path)
    pkg = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            yield node.lineno, name
            for a in node.names:  # ``from newt import runtime``
                yield node.lineno, f"{name}.{a.name}"


def _files(pkg_dir):
    for dirpath, _dirs, files in os.walk(os.path.join(ROOT, pkg_dir)):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


@pytest.mark.parametrize("pkg_dir", sorted(NEVER))
def test_layer_imports_only_point_down(pkg_dir):
    bad = []
    for path in _files(pkg_dir):
        for line, name in _imports(path):
            for p in NEVER[pkg_dir]:
                if name == p or name.startswith(p + "."):
                    bad.append(f"{os.path.relpath(path, ROOT)}:{line}: imports {name}")
    assert not bad, "\n".join(bad)
