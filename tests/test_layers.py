"""The layering of docs/architecture.md (imports only point down), checked on the source: every import
in a layer's modules -- import statements at module level or inside functions, and imports by string
(``importlib.import_module("x")``, ``__import__("x")``) -- names only what the layer may use; and newt
never names the packages built on it (deuteron, lsp_server), not even in a string."""

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
    "newt/backend": ("newt.frontend", "newt.interpreter", "newt.runtime", "torch", "deuteron", "lsp_server"),
    # diagnostics and located errors, below every layer: the standard library only
    "newt/diagnostics.py": ("newt", "torch", "cuda", "deuteron", "lsp_server"),
    # the runtime compiles and launches one kernel; tuning (newt.tune, with the autotuner) drives it from above
    "newt/runtime": ("newt.tune", "deuteron", "lsp_server"),
    "newt/tune": ("deuteron", "lsp_server"),
}


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _imports(path: str, tree: ast.Module | None = None):
    """(line, module) of every import and string import of the file at ``path`` (``tree``: its parse, if made)."""
    if tree is None:
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
        elif isinstance(node, ast.Call) and _is_string_import(node.func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield node.lineno, arg.value


def _is_string_import(func) -> bool:
    """``importlib.import_module``, ``import_module`` and ``__import__``."""
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name in ("import_module", "__import__")


def _files(pkg_dir):
    if pkg_dir.endswith(".py"):  # one module
        yield os.path.join(ROOT, pkg_dir)
        return
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


#: newt's public API: the only newt modules deuteron may import (each package's own names, never its submodules)
NEWT_PUBLIC = ("newt", "newt.language", "newt.diagnostics", "newt.testing", "newt.frontend", "newt.runtime",
               "newt.tune", "newt.interpreter", "newt.dropin")


def _newt_modules_imported(path: str):
    """(line, module) of every newt module a file imports: ``import a.b`` and ``from a.b import x`` name ``a.b``
    (``from newt import runtime`` names ``newt.runtime``, a module reached by attribute)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.lineno, node.module
            if node.module == "newt":
                for a in node.names:
                    yield node.lineno, f"newt.{a.name}"


def test_deuteron_uses_only_newts_public_api():
    bad = []
    for path in _files("deuteron"):
        for line, name in _newt_modules_imported(path):
            if name.split(".")[0] != "newt":
                continue
            if name not in NEWT_PUBLIC and not name.startswith("newt.language."):
                bad.append(f"{os.path.relpath(path, ROOT)}:{line}: imports {name}")
    assert not bad, "\n".join(bad)


def test_the_public_api_check_sees_a_submodule_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from newt.tune.workers import ProcessPool\nfrom newt.tune import ProcessPool\nimport newt.ir.core\n")
    assert [n for _, n in _newt_modules_imported(str(f))] == ["newt.tune.workers", "newt.tune", "newt.ir.core"]


#: packages built on newt: newt must not know them (they register themselves, see newt.frontend.kinds)
ABOVE_NEWT = ("deuteron", "lsp_server")


def _docstrings(tree) -> set:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _names_above(path: str):
    """(line, text) of every import, string import and string constant (docstrings aside) naming a
    package built on newt."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    docs = _docstrings(tree)
    for line, name in _imports(path, tree):  # (the same parse: newt's every file, once)
        if name.split(".")[0] in ABOVE_NEWT:
            yield line, f"imports {name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            for word in ABOVE_NEWT:
                if word in node.value:
                    yield node.lineno, f"names {word} in {node.value[:60]!r}"
                    break


def test_newt_never_names_the_packages_built_on_it():
    bad = [f"{os.path.relpath(p, ROOT)}:{line}: {what}" for p in _files("newt") for line, what in _names_above(p)]
    assert not bad, "\n".join(bad)


def test_string_imports_are_seen(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import importlib\n\ndef f():\n    importlib.import_module('lsp_server.server')\n"
                 "    __import__('torch')\n    x = 'deuteron.kernel'\n")
    names = [n for _, n in _imports(str(p))]
    assert "lsp_server.server" in names and "torch" in names
    found = {w for _, w in _names_above(str(p))}
    assert {"imports lsp_server.server", "names deuteron in 'deuteron.kernel'"} <= found
