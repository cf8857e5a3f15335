"""Named tuple classes defined in the analyzed file, made from their literal field names.

A kernel may build and read a named tuple of its own module (``Stats(mean, var)``, ``s.mean``); the compile
path sees the real class in the function's globals.  The static analysis (the editor, ``newt check``) never
runs the file, so :class:`~newt.frontend.source.ModuleScan` makes an equivalent class here from what the text
says — ``class P(NamedTuple)`` with annotated fields and literal defaults, ``P = namedtuple("P", [...])``
(a list or a ``"a b"`` string, ``defaults=[...]``), ``P = NamedTuple("P", [("a", T), ...])`` — with
``collections.namedtuple``.  Anything else (methods aside, a computed field list or default) leaves the name
unknown, as before.
"""

from __future__ import annotations

import ast
import collections
import keyword

__all__ = ["namedtuple_class", "namedtuple_call"]

_TYPING_NAMEDTUPLE = ("typing.NamedTuple", "typing_extensions.NamedTuple")


class _NotLiteral(Exception):
    pass


def _default(evaluate, node):
    try:
        v = evaluate(node)
    except Exception:  # any failure means "not static"
        raise _NotLiteral() from None
    if v is not None and not isinstance(v, (bool, int, float, str)):
        raise _NotLiteral()
    return v


def _make(name: str, fields: list, defaults: list) -> type | None:
    if not fields or len(set(fields)) != len(fields) or len(defaults) > len(fields) or any(
            not isinstance(f, str) or not f.isidentifier() or keyword.iskeyword(f) or f.startswith("_")
            for f in fields):
        return None
    try:
        return collections.namedtuple(name, fields, defaults=defaults or None)
    except (TypeError, ValueError):
        return None


def namedtuple_class(resolve, evaluate, node: ast.ClassDef) -> type | None:
    """``class P(NamedTuple): a: T; b: T = 1`` (field names and literal defaults only). ``resolve``: the
    module scan's qualname of an expression; ``evaluate``: its static evaluation of a default."""
    if len(node.bases) != 1 or resolve(node.bases[0]) not in _TYPING_NAMEDTUPLE:
        return None
    fields: list = []
    defaults: list = []
    for st in node.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            fields.append(st.target.id)
            if st.value is not None:
                try:
                    defaults.append(_default(evaluate, st.value))
                except _NotLiteral:
                    return None
            elif defaults:
                return None  # a field without a default after one with: Python's TypeError
    return _make(node.name, fields, defaults)


def namedtuple_call(resolve, evaluate, name: str, value) -> type | None:
    """``P = namedtuple("P", ["a", "b"], defaults=[...])`` / ``"a b"``, ``P = NamedTuple("P", [("a", T)])``."""
    if not isinstance(value, ast.Call) or len(value.args) != 2:
        return None
    q = resolve(value.func)
    fields: list = []
    defaults: list = []
    try:
        if q == "collections.namedtuple":
            spec = ast.literal_eval(value.args[1])
            fields = spec.replace(",", " ").split() if isinstance(spec, str) else list(spec)
            for kw in value.keywords:
                if kw.arg != "defaults" or not isinstance(kw.value, (ast.List, ast.Tuple)):
                    return None
                defaults = [_default(evaluate, e) for e in kw.value.elts]
        elif q in _TYPING_NAMEDTUPLE and not value.keywords:
            lst = value.args[1]
            if not isinstance(lst, (ast.List, ast.Tuple)):
                return None
            for e in lst.elts:
                if not (isinstance(e, ast.Tuple) and len(e.elts) == 2 and isinstance(e.elts[0], ast.Constant)):
                    return None
                fields.append(e.elts[0].value)
        else:
            return None
    except (ValueError, SyntaxError, TypeError, _NotLiteral):
        return None
    return _make(name, fields, defaults)
