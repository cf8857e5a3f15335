"""``fast_walk``: every descendant of an AST node, without ``ast.walk``'s generic-field overhead (the front end's
scans walk whole files of host code)."""

from __future__ import annotations

import ast

_FIELDS_CACHE: dict = {}


def fast_walk(node):
    """Like ``ast.walk`` (all descendants, any order) without the generic-field overhead."""
    stack = [node]
    pop, push = stack.pop, stack.append
    AST, lst = ast.AST, list
    cache = _FIELDS_CACHE
    while stack:
        n = pop()
        yield n
        cls = n.__class__
        fields = cache.get(cls)
        if fields is None:
            fields = cache[cls] = cls._fields
        for f in fields:
            v = getattr(n, f, None)
            if v.__class__ is lst:
                for x in v:
                    if isinstance(x, AST):
                        push(x)
            elif isinstance(v, AST):
                push(v)
