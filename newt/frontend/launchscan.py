"""Finding the launches ``kernel[grid](...)`` of a module's host code (``source.ModuleScan._launches``): where the
text names a kernel, the statements to walk, and walks of a statement's expressions without a generator step per
node.  Linear in the file: a 5 MB file of 31,600 launches is scanned in a fraction of its parse (issue 22, item 6).
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Any

_NEWLINE = re.compile(r"\r\n|\r|\n")  # (the line ends of ``source.SourceFile``)


#: the statements that bind names other than by ``name = value`` (a name they bind is not "assigned once")
_OTHER_BINDINGS = frozenset({ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith})
#: per node class, the fields that may hold a node (not its operators and load/store contexts, which hold nothing,
#: nor its names and flags)
_NODE_FIELDS: dict = {}
_NOT_NODES = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "name", "type_comment", "kind", "level",
                        "conversion", "is_async", "simple", "module"})
#: nodes with no expression inside (a walk for calls does not visit them, a walk for names takes a name's id)
_LEAVES = frozenset({ast.Name, ast.Constant})


def _node_fields(cls) -> tuple:
    got = _NODE_FIELDS.get(cls)
    if got is None:
        got = _NODE_FIELDS[cls] = tuple(f for f in cls._fields if f not in _NOT_NODES)
    return got


def _launch_calls(node, names, out: list) -> None:
    """Append to ``out`` the calls ``name[...](...)`` (``name`` in ``names``) in ``node``, in ``fast_walk``'s
    order (its walk less the nodes that cannot hold a call, and without a generator step per node)."""
    stack = [node]
    pop, push = stack.pop, stack.append
    AST, Call, Subscript, Name, lst = ast.AST, ast.Call, ast.Subscript, ast.Name, list
    leaves, fields_of = _LEAVES, _NODE_FIELDS
    while stack:
        n = pop()
        cls = n.__class__
        if cls is Call:
            f = n.func
            if isinstance(f, Subscript) and isinstance(f.value, Name) and f.value.id in names:
                out.append(n)
        fields = fields_of.get(cls)
        if fields is None:
            fields = _node_fields(cls)
        for fld in fields:
            v = getattr(n, fld, None)
            if v.__class__ is lst:
                for x in v:
                    if x.__class__ not in leaves and isinstance(x, AST):
                        push(x)
            elif v.__class__ not in leaves and isinstance(v, AST):
                push(v)


def _names_in(node, out: list) -> None:
    """Append to ``out`` the ids of the ``Name`` nodes in ``node`` (in no particular order)."""
    cls = node.__class__
    if cls is ast.Name:
        out.append(node.id)
        return
    if cls is ast.Constant:
        return
    stack = [node]
    pop, push, add = stack.pop, stack.append, out.append
    AST, Name, Constant, lst = ast.AST, ast.Name, ast.Constant, list
    fields_of = _NODE_FIELDS
    while stack:
        n = pop()
        fields = fields_of.get(n.__class__)
        if fields is None:
            fields = _node_fields(n.__class__)
        for fld in fields:
            v: Any = getattr(n, fld, None)
            x: Any
            for x in (v if v.__class__ is lst else (v,)):
                c = x.__class__
                if c is Name:
                    add(x.id)
                elif c is not Constant and isinstance(x, AST):
                    push(x)


def _kernel_names_in(text: str, kernel_names) -> tuple[list[int], list[int], list[int]]:
    """Where ``text`` names a kernel, by one search of the whole text: (the sorted lines that name one followed by
    ``[`` on that line, the column of the first such name on each of them, the line of every name, a line once
    per name on it).  ``hits`` are the lines of the launches ``kernel[grid](...)`` (and of any index of a kernel's
    name); ``words`` counts every other mention too (comments and strings included).  The word boundary before
    a name is checked by hand: a pattern that starts with ``\\b`` is searched ten times slower (and no match it
    rejects, inside a longer word, hides another: it ends where that word ends)."""
    pattern = re.compile("(?:" + "|".join(re.escape(k) for k in sorted(kernel_names)) + r")(?!\w)")
    bracket = _BRACKET
    word = _WORD_CHAR
    hits: list[int] = []
    at: list[int] = []
    words: list[int] = []
    line, pos = 1, 0
    cr = "\r" in text
    for m in pattern.finditer(text):
        start = m.start()
        if start and word(text, start - 1):
            continue  # the end of a longer name (``xk0``)
        # lines end at \r\n, \r or \n, as SourceFile splits them (a match starts at a word character: never
        # between the \r and \n of one line end)
        line += len(_NEWLINE.findall(text, pos, start)) if cr else text.count("\n", pos, start)
        pos = start
        words.append(line)
        if bracket(text, m.end()) and (not hits or hits[-1] != line):
            hits.append(line)
            line_start = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start) if cr else -1) + 1
            at.append(start - line_start)
    return hits, at, words


_BRACKET = re.compile(r"[^\S\r\n]*\[").match
_PLAIN = (ast.Expr, ast.Assign, ast.Return)


def _plain_launch(top, line: int, col: int, kernel_names):
    """The launch ``kernel[grid](...)`` whose kernel's name is at (``line``, ``col``), when it is the value of a
    plain statement (an expression, an assignment, a return) in ``top``, or None (the caller walks ``top``)."""
    st = top
    while True:
        if isinstance(st, _PLAIN):
            v = st.value
            if v.__class__ is ast.Call:
                f = v.func
                if f.__class__ is ast.Subscript:
                    n = f.value
                    if (n.__class__ is ast.Name and n.lineno == line and n.col_offset == col
                            and n.id in kernel_names):
                        return v
            return None
        inner = None
        for fld in _BLOCK_FIELDS:
            for sub in getattr(st, fld, None) or ():
                lo = getattr(sub, "lineno", None)
                if lo is not None and lo <= line <= (getattr(sub, "end_lineno", lo) or lo):
                    if inner is not None:
                        return None  # (two statements on that line)
                    inner = sub
        if inner is None or not isinstance(inner, ast.stmt):
            return None
        st = inner


_WORD_CHAR = re.compile(r"\w").match


_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(node):
    """``node`` and every statement (and except handler, match case) nested in it, in no particular order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for f in _BLOCK_FIELDS:
            sub = getattr(n, f, None)
            if sub.__class__ is list:
                stack.extend(x for x in sub if isinstance(x, (ast.stmt, ast.excepthandler, ast.match_case)))


def _parts_with_lines(top, hits: list):
    """The pieces of statement ``top`` to walk for expressions on the ``hits`` lines: a simple statement
    whole; of a compound one, its own expressions (header, decorators: everything but its nested blocks) and
    the nested statements that contain a hit."""
    todo = [top]
    while todo:
        st = todo.pop()
        blocks = [getattr(st, f, None) for f in _BLOCK_FIELDS]
        blocks = [b for b in blocks if b.__class__ is list and b]
        if not blocks:
            yield st
            continue
        for f in st._fields:
            if f in _BLOCK_FIELDS:
                continue
            v = getattr(st, f, None)
            for x in (v if v.__class__ is list else [v]):
                if isinstance(x, ast.AST):
                    yield x
        for b in blocks:
            for sub in b or ():
                lo = getattr(sub, "lineno", None)
                hi = getattr(sub, "end_lineno", lo)
                if lo is None:  # a match case: its pattern and guard have lines, the case does not
                    todo.append(sub)
                    continue
                i = bisect.bisect_left(hits, lo)
                if i < len(hits) and hits[i] <= (hi or lo):
                    todo.append(sub)
