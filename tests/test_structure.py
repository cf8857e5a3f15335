"""No class of newt/, deuteron/ or lsp_server/ over 800 lines, counted across all of its files.

A class's size is its own body plus the bodies of every class it inherits from inside the project (mixins
included, however many files they are spread over): a class cut into mixins of 400 lines each is still one
class of their sum.  ``python tests/test_structure.py`` prints the largest classes.
"""

from __future__ import annotations

import ast
import functools
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("newt", "deuteron", "lsp_server")
LIMIT = 800

#: classes over the limit: a debt list that only shrinks (remove an entry once its class is within the limit;
#: never add one).  Each maps to its size when it was listed, which it must not grow past.  Empty since
#: 2026-12-06: the front end's Builder became parts (newt/frontend/context.py) and deuteron's tracer a core
#: plus per-op entries (deuteron/ops/); the largest classes then were deuteron.codegen._Gen (775 lines, with
#: its ExprRenderer mixin), deuteron.autotune.Tuner (740) and deuteron.trace.Tracer (725).
DEBT: dict[str, int] = {}


def modules(root: str, packages: tuple[str, ...]) -> dict[str, str]:
    """Module name -> file, for every module of the packages."""
    out = {}
    for pkg in packages:
        for dp, _, fs in os.walk(os.path.join(root, pkg)):
            if "__pycache__" in dp:
                continue
            for f in fs:
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dp, f), root)[:-3].split(os.sep)
                    if rel[-1] == "__init__":
                        rel = rel[:-1]
                    out[".".join(rel)] = os.path.join(dp, f)
    return out


class _Module:
    def __init__(self, name: str, path: str):
        self.name = name
        self.is_pkg = path.endswith("__init__.py")
        self.tree = ast.parse(open(path, encoding="utf-8").read(), path)
        self.classes = {n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}
        #: local name -> (module, name) it was imported as, from ``from X import Y [as Z]`` anywhere in the file
        self.imported: dict[str, tuple[str, str]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if self.is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                for a in node.names:
                    self.imported[a.asname or a.name] = (src, a.name)


@functools.cache
def class_sizes(root: str = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, tuple[int, list[str]]]:
    """``module.Class`` -> (lines across its files, the project classes counted), for every class."""
    mods = {m: _Module(m, p) for m, p in modules(root, packages).items()}

    def resolve(mod: _Module, base: ast.expr, depth: int = 0) -> tuple[str, ast.ClassDef] | None:
        if depth > 20:
            return None
        if isinstance(base, ast.Name):
            if base.id in mod.classes:
                return f"{mod.name}.{base.id}", mod.classes[base.id]
            if base.id in mod.imported:
                src, name = mod.imported[base.id]
                target = mods.get(src)
                if target is not None:
                    if name in target.classes:
                        return f"{src}.{name}", target.classes[name]
                    return resolve(target, ast.Name(name), depth + 1)  # re-exported
        elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
            src = mod.imported.get(base.value.id)
            target = mods.get(f"{src[0]}.{src[1]}" if src else "")
            if target is not None and base.attr in target.classes:
                return f"{target.name}.{base.attr}", target.classes[base.attr]
        return None

    def lines(node: ast.ClassDef) -> int:
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        return node.end_lineno - start + 1

    out = {}
    for mod in mods.values():
        for cname, cls in mod.classes.items():
            seen: dict[str, int] = {}
            todo = [(mod, f"{mod.name}.{cname}", cls)]
            while todo:
                m, qual, node = todo.pop()
                if qual in seen:
                    continue
                seen[qual] = lines(node)
                for b in node.bases:
                    r = resolve(m, b)
                    if r is not None:
                        todo.append((mods[r[0].rpartition(".")[0]], r[0], r[1]))
            out[f"{mod.name}.{cname}"] = (sum(seen.values()), sorted(seen))
    return out


def test_no_class_over_the_limit():
    sizes = class_sizes()
    over = {q: s for q, (s, _) in sizes.items() if s > LIMIT and q not in DEBT}
    assert not over, (f"classes over {LIMIT} lines (own body plus project base classes): "
                      + ", ".join(f"{q} ({s}: {' + '.join(sizes[q][1])})" for q, s in sorted(over.items())))


def test_the_debt_list_only_shrinks():
    sizes = class_sizes()
    for q, listed in DEBT.items():
        assert q in sizes, f"{q} is gone: remove it from DEBT"
        size = sizes[q][0]
        assert size > LIMIT, f"{q} is {size} lines now, within the limit: remove it from DEBT"
        assert size <= listed, f"{q} grew from {listed} to {size} lines"


def test_the_front_end_builder_is_parts_each_within_the_limit():
    """The front end's builder is collaborating objects, not one class of mixins: no part inherits another."""
    sizes = class_sizes()
    parts = ["newt.frontend.builder.Builder", "newt.frontend.context.BuildContext",
             "newt.frontend.exprs.ExpressionBuilder", "newt.frontend.stmts.StatementBuilder",
             "newt.frontend.loops.LoopBuilder", "newt.frontend.calls.CallBinder"]
    for q in parts:
        size, counted = sizes[q]
        assert size <= LIMIT, (q, size)
        assert [c for c in counted if c != q] in ([], ["newt.frontend.context.BuilderPart"]), (q, counted)


def test_mixins_are_counted_with_their_class(tmp_path):
    """The measure adds the bodies of project base classes, across files and re-exports."""
    pkg = tmp_path / "newt"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("class A:\n" + "    x = 1\n" * 500)
    (pkg / "b.py").write_text("from .a import A\n\n\nclass B:\n" + "    y = 2\n" * 400)
    (pkg / "c.py").write_text("from .b import A, B\nfrom . import b\n\n\nclass C(A, b.B, object):\n    pass\n")
    sizes = class_sizes(str(tmp_path), ("newt",))
    assert sizes["newt.a.A"] == (501, ["newt.a.A"])
    assert sizes["newt.c.C"] == (2 + 501 + 401, ["newt.a.A", "newt.b.B", "newt.c.C"])


if __name__ == "__main__":
    for q, (s, counted) in sorted(class_sizes().items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"{s:6d}  {q}" + (f"  ({' + '.join(counted)})" if len(counted) > 1 else ""))
