"""What the editor shows about the language itself: ``nl.*``, ``nl.math.*``,
``dt.*``, ``newt.*`` and block methods — names, signatures and docstrings.

``newt.language`` is imported (it is stdlib-only by contract).  Everything else
(``newt.*`` runtime pieces, ``deuteron``) is read statically from its source
files, so hovering over ``dt.tile`` can never import torch into the server.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import os
from dataclasses import dataclass

from newt.language import core as lc

__all__ = ["Member", "lookup", "members", "tensor_methods", "tensor_method", "format_signature", "respelled"]


@dataclass(frozen=True)
class Member:
    name: str
    qualname: str
    kind: str  # "function" | "dtype" | "class" | "module" | "constant" | "method" | "attribute"
    signature: str  # "load(pointer, mask=None, ...)" or "" for non-callables
    doc: str
    params: tuple = ()  # parameter names (for signature help)
    param_texts: tuple = ()  # "mask=None" ...

    def header(self, prefix: str = "") -> str:
        if self.kind in ("function", "method", "class") and self.signature:
            return f"{prefix}{self.signature}"
        if self.kind == "dtype":
            return f"{prefix}{self.name}: dtype"
        if self.kind == "module":
            return f"module {self.qualname}"
        return f"{prefix}{self.name}"


def respelled(m: Member | None, spelling) -> Member | None:
    """``m`` as a file with another spelling reads it (``tl.float32`` defaults and ``tl.`` in the docs of a
    Triton file; ``newt.frontend.spelling``)."""
    if m is None or spelling.identity:
        return m
    r = spelling.respell
    return Member(m.name, m.qualname, m.kind, r(m.signature), r(m.doc), m.params, tuple(r(t) for t in m.param_texts))


# ---------------------------------------------------------------------------
# signatures
# ---------------------------------------------------------------------------


def _param_texts(sig: inspect.Signature, skip_first: bool = False) -> tuple[tuple, tuple]:
    names, texts = [], []
    params = list(sig.parameters.values())
    if skip_first and params:
        params = params[1:]
    for p in params:
        t = p.name
        if p.kind is p.VAR_POSITIONAL:
            t = "*" + t
        elif p.kind is p.VAR_KEYWORD:
            t = "**" + t
        if p.default is not p.empty:
            t += "=" + _default_repr(p.default)
        names.append(p.name)
        texts.append(t)
    return tuple(names), tuple(texts)


def _default_repr(v) -> str:
    if isinstance(v, lc.dtype):
        return repr(v)
    if isinstance(v, lc.PropagateNan):
        return f"nl.PropagateNan.{v.name}"
    return repr(v)


def format_signature(name: str, texts: tuple) -> str:
    return f"{name}({', '.join(texts)})"


def _doc(obj) -> str:
    d = inspect.getdoc(getattr(obj, "__wrapped__", obj)) or ""
    return d.strip()


def _member_from_object(name: str, qualname: str, obj, method: bool = False) -> Member | None:
    if isinstance(obj, lc.dtype):
        return Member(name, qualname, "dtype", "", f"The `{obj}` element type ({obj!r}).")
    if inspect.ismodule(obj):
        return Member(name, qualname, "module", "", _doc(obj))
    if obj is lc.constexpr or obj is lc.pointer_type or obj is lc.block_type or obj is lc.tensor or obj is lc.dtype:
        try:
            sig = inspect.signature(obj)
            names, texts = _param_texts(sig)
        except (TypeError, ValueError):
            names, texts = (), ()
        return Member(name, qualname, "class", format_signature(name, texts), _doc(obj), names, texts)
    if inspect.isclass(obj):
        return Member(name, qualname, "class", name, _doc(obj))
    if callable(obj):
        target = getattr(obj, "__wrapped__", obj)
        try:
            sig = lc.public_signature(target)  # a builtin's signature without the front end's _semantic
        except (TypeError, ValueError):
            return Member(name, qualname, "function", f"{name}(...)", _doc(obj))
        names, texts = _param_texts(sig, skip_first=method)
        return Member(name, qualname, "method" if method else "function", format_signature(name, texts),
                      _doc(obj), names, texts)
    if isinstance(obj, (int, float, str, bool)):
        return Member(name, qualname, "constant", "", f"`{name} = {obj!r}`")
    return None


# ---------------------------------------------------------------------------
# newt.language (imported: stdlib only)
# ---------------------------------------------------------------------------

_NL_HIDDEN = {"annotations", "builtins", "core", "standard", "builtin", "inline_jit", "BUILTINS", "TENSOR_METHODS",
              "ALL_DTYPES", "dtype_from_name"}


@functools.cache
def _nl_members(modname: str) -> dict[str, Member]:
    mod = importlib.import_module(modname)
    out = {}
    for name in dir(mod):
        if name.startswith("_") or name in _NL_HIDDEN:
            continue
        obj = getattr(mod, name)
        if inspect.ismodule(obj) and not obj.__name__.startswith("newt.language"):
            continue
        m = _member_from_object(name, f"{modname}.{name}", obj)
        if m is not None:
            out[name] = m
    return out


@functools.cache
def _tensor_methods() -> dict[str, Member]:
    table = lc.tensor_methods()  # every block method, as the front end resolves them
    out = {}
    import newt.language as nl
    for meth, builtin in sorted(table.items()):
        obj = lc.BUILTINS.get(builtin) or getattr(nl, builtin, None)
        if obj is None:
            continue
        m = _member_from_object(meth, f"tensor.{meth}", obj, method=True)
        if m is None:
            continue
        doc = m.doc
        if meth != builtin:
            doc = f"Same as `nl.{builtin}(x, ...)`.\n\n{doc}"
        else:
            doc = f"Same as `nl.{builtin}(x, ...)`.\n\n{doc}"
        out[meth] = Member(meth, m.qualname, "method", m.signature, doc, m.params, m.param_texts)
    out["dtype"] = Member("dtype", "tensor.dtype", "attribute", "", "The element type of the block (a constexpr).")
    out["shape"] = Member("shape", "tensor.shape", "attribute", "",
                          "The shape of the block: a tuple of constexpr ints (empty for a scalar).")
    out["T"] = Member("T", "tensor.T", "attribute", "", "The transpose of a 2-D block (same as `nl.trans(x)`).")
    out["numel"] = Member("numel", "tensor.numel", "attribute", "", "The number of elements of the block (constexpr).")
    return out


def tensor_methods() -> list[Member]:
    return list(_tensor_methods().values())


def tensor_method(name: str) -> Member | None:
    return _tensor_methods().get(name)


# ---------------------------------------------------------------------------
# other packages: read statically
# ---------------------------------------------------------------------------


def _package_root(top: str) -> str | None:
    """Directory (or file) of a top-level package, found without executing it."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return spec.origin


@functools.lru_cache(maxsize=256)
def _parse_file(path: str, mtime: float):
    from .files import read_document
    try:  # (a regular file under the size cap only: an imported ``x.py`` of the workspace may be a FIFO)
        return ast.parse(read_document(path), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None


def _module_file(qual: str) -> str | None:
    parts = qual.split(".")
    origin = _package_root(parts[0])
    if origin is None:
        return None
    path = origin
    for p in parts[1:]:
        base = os.path.dirname(path)
        if os.path.basename(path) != "__init__.py":
            return None
        cand_pkg = os.path.join(base, p, "__init__.py")
        cand_mod = os.path.join(base, p + ".py")
        if os.path.isfile(cand_pkg):
            path = cand_pkg
        elif os.path.isfile(cand_mod):
            path = cand_mod
        else:
            return None
    return path


def _tree(path: str):
    try:
        mtime = os.path.getmtime(path)
    except OSError:
        return None
    return _parse_file(path, mtime)


def _args_texts(a: ast.arguments, skip_first: bool = False) -> tuple[tuple, tuple]:
    pos = list(a.posonlyargs) + list(a.args)
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    names, texts = [], []
    for p, d in zip(pos, defaults):
        names.append(p.arg)
        texts.append(p.arg + ("=" + ast.unparse(d) if d is not None else ""))
    if a.vararg:
        names.append(a.vararg.arg)
        texts.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        texts.append("*")
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        names.append(p.arg)
        texts.append(p.arg + ("=" + ast.unparse(d) if d is not None else ""))
    if a.kwarg:
        names.append(a.kwarg.arg)
        texts.append("**" + a.kwarg.arg)
    if skip_first and names:
        names, texts = names[1:], texts[1:]
    return tuple(names), tuple(texts)


def _static_member(qual: str, depth: int = 0) -> Member | None:
    if depth > 8:
        return None
    if "." not in qual:
        mod_file = _module_file(qual)
        if mod_file is None:
            return None
        tree = _tree(mod_file)
        return Member(qual, qual, "module", "", (ast.get_docstring(tree) if tree is not None else "") or "")
    modq, name = qual.rsplit(".", 1)
    mod_file = _module_file(modq)
    if mod_file is None:
        return None
    tree = _tree(mod_file)
    if tree is None:
        return None
    found = None
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node
        elif isinstance(node, ast.ClassDef) and node.name == name:
            found = node
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            for al in node.names:
                if (al.asname or al.name.split(".")[0]) == name:
                    if isinstance(node, ast.ImportFrom):
                        src_mod = _resolve_relative(modq, mod_file, node)
                        if src_mod is not None:
                            found = ("alias", f"{src_mod}.{al.name}")
                    else:
                        found = ("alias", al.name)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = node
    if found is None:
        lazy = _lazy_target(tree, name)
        if lazy:
            return _static_member(lazy, depth + 1)
        sub = _module_file(qual)
        if sub is not None:
            subtree = _tree(sub)
            return Member(name, qual, "module", "", (ast.get_docstring(subtree) if subtree is not None else "") or "")
        return None
    if isinstance(found, tuple):
        target = found[1]
        if target == qual or _module_file(target) is not None:
            sub = _module_file(target)
            if sub is None:
                return None
            subtree = _tree(sub)
            return Member(name, target, "module", "", (ast.get_docstring(subtree) if subtree is not None else "") or "")
        return _static_member(target, depth + 1)
    if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
        names, texts = _args_texts(found.args)
        return Member(name, qual, "function", format_signature(name, texts), ast.get_docstring(found) or "",
                      names, texts)
    if isinstance(found, ast.ClassDef):
        init = next((n for n in found.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        names, texts = _args_texts(init.args, skip_first=True) if init else ((), ())
        return Member(name, qual, "class", format_signature(name, texts), ast.get_docstring(found) or "",
                      names, texts)
    try:
        value = ast.literal_eval(found.value)
        return Member(name, qual, "constant", "", f"`{name} = {value!r}`")
    except (ValueError, SyntaxError, TypeError):
        return Member(name, qual, "constant", "", f"`{name} = {ast.unparse(found.value)[:80]}`")


def _lazy_target(tree, name: str) -> str | None:
    """``_LAZY = {"jit": ("newt.runtime", "jit")}`` + a module ``__getattr__``: where the name really lives."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and k.value == name and isinstance(v, ast.Tuple) and len(v.elts) == 2:
                    try:
                        mod, attr = ast.literal_eval(v)
                    except (ValueError, SyntaxError):
                        continue
                    if isinstance(mod, str):
                        return mod if attr is None else f"{mod}.{attr}"
    return None


def _resolve_relative(modq: str, mod_file: str, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        return node.module
    pkg_parts = modq.split(".")
    if os.path.basename(mod_file) != "__init__.py":
        pkg_parts = pkg_parts[:-1]
    if node.level > 1:
        pkg_parts = pkg_parts[:len(pkg_parts) - (node.level - 1)]
    base = ".".join(pkg_parts)
    return f"{base}.{node.module}" if node.module else base


def _top_level(body):
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            for attr in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(node, attr, []) or [])
            for h in getattr(node, "handlers", []) or []:
                yield from _top_level(h.body)


def _static_members(modq: str) -> dict[str, Member]:
    mod_file = _module_file(modq)
    if mod_file is None:
        return {}
    tree = _tree(mod_file)
    if tree is None:
        return {}
    names: list[str] = []
    explicit = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                explicit = list(ast.literal_eval(node.value))
            except (ValueError, SyntaxError):
                explicit = None
    if explicit is not None:
        names = explicit
    else:
        for node in _top_level(tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
            elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
                names.extend(al.asname or al.name for al in node.names if al.name != "*")
            elif isinstance(node, ast.Assign):
                names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
        lazy = _lazy_names(tree)
        names.extend(lazy)
        # sub-modules on disk
        if os.path.basename(mod_file) == "__init__.py":
            d = os.path.dirname(mod_file)
            try:
                for entry in os.listdir(d):
                    if entry.endswith(".py") and entry != "__init__.py":
                        names.append(entry[:-3])
                    elif os.path.isfile(os.path.join(d, entry, "__init__.py")):
                        names.append(entry)
            except OSError:
                pass
    out = {}
    for n in dict.fromkeys(names):
        if n.startswith("_"):
            continue
        m = _static_member(f"{modq}.{n}")
        if m is not None:
            out[n] = Member(n, m.qualname, m.kind, m.signature, m.doc, m.params, m.param_texts)
    return out


def _lazy_names(tree) -> list[str]:
    has_getattr = any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)
    if not has_getattr:
        return []
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for k in node.value.keys:
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    out.append(k.value)
    return out


# ---------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------


def _is_nl(modq: str) -> bool:
    return modq == "newt.language" or modq.startswith("newt.language.")


def lookup(qualname: str) -> Member | None:
    """The member a fully qualified name denotes (``newt.language.load``, ``deuteron.tile``)."""
    if not qualname:
        return None
    if qualname == "newt.language" or qualname in ("newt.language.math", "newt.language.random"):
        mod = importlib.import_module(qualname)
        return Member(qualname.rsplit(".", 1)[-1], qualname, "module", "", _doc(mod))
    if "." in qualname:
        modq, name = qualname.rsplit(".", 1)
        if _is_nl(modq):
            try:
                return _nl_members(modq).get(name)
            except ImportError:
                return None
    try:
        found = _static_member(qualname)
    except RecursionError:  # pragma: no cover
        return None
    if found is None and qualname.startswith("deuteron.") and qualname.count(".") == 1:
        return _deuteron_ops().get(qualname.split(".", 1)[1])
    return found


def members(modq: str) -> list[Member]:
    """Completion candidates after ``<alias>.`` where the alias names module ``modq``."""
    if _is_nl(modq):
        try:
            return list(_nl_members(modq).values())
        except ImportError:
            return []
    out = _static_members(modq)
    if modq == "deuteron":
        out = {**_deuteron_ops(), **out}
    return list(out.values())


@functools.cache
def _deuteron_ops() -> dict[str, Member]:
    """``dt.<name>`` of every ``dt.*`` op, from deuteron's op table (``deuteron/ops/``; importing it never imports
    torch): an op added there is completed and hovered with no list of names kept here."""
    try:
        from deuteron.ops import dt_stubs
    except ImportError:  # pragma: no cover (deuteron not installed)
        return {}
    out = {}
    for name, stub in sorted(dt_stubs().items()):
        m = _member_from_object(name, f"deuteron.{name}", stub)
        if m is not None:
            out[name] = m
    return out
