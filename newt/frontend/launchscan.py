"""Finding the launches ``kernel[grid](...)`` of a module's host code (``source.ModuleScan._launches``): where the
text names a kernel, the statements to walk, and walks of a statement's expressions without a generator step per
node.  Linear in the file: a 5 MB file of 31,600 launches is scanned in a fraction of its parse (issue 22, item 6).
"""

from __future__ import annotations

import ast
import bisect
import re
import threading
import weakref
from typing import Any

from .astwalk import fast_walk

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
        cls = st.__class__
        fields = _BLOCKS_OF.get(cls)
        if fields is None:
            fields = _BLOCKS_OF[cls] = tuple(f for f in _BLOCK_FIELDS if f in cls._fields)
        for fld in fields:
            for sub in getattr(st, fld, None) or ():
                lo = getattr(sub, "lineno", None)
                if lo is None:
                    continue
                if lo > line:
                    break  # (a block's statements are in the order of their lines)
                if line <= (getattr(sub, "end_lineno", lo) or lo):
                    if inner is not None:
                        return None  # (two statements on that line)
                    inner = sub
        if inner is None or not isinstance(inner, ast.stmt):
            return None
        st = inner


_WORD_CHAR = re.compile(r"\w").match


_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_BLOCKS_OF: dict = {}  # node class -> the ones of _BLOCK_FIELDS it has


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


# -------------------------------------------------------------------------------------------------------------------
# the values of the launches' arguments, evaluated when first read
# -------------------------------------------------------------------------------------------------------------------


class _NotStaticMarker:
    def __repr__(self):
        return "<not static>"


NOT_STATIC = _NotStaticMarker()
_NOT_STATIC = NOT_STATIC


class LaunchSite:
    """``kernel[grid](args..., KW=...)`` found in the file.

    ``args`` (each positional argument's static value, or ``NOT_STATIC``) and ``kwargs`` (keyword -> value) are
    evaluated when first read: for all the launches of one statement at once, in their order, as the scan did
    before it deferred them (issue 22, item 6: the 31,000 launches of a 5 MB file pass tensors whose values no
    diagnostic asks for; evaluating them was a third of its analysis).  ``arg(i)`` and ``kwarg(name)`` give one
    value, a literal's without evaluating anything."""

    __slots__ = ("kernel", "node", "kw_nodes", "nargs", "_args", "_kwargs", "_pending", "__weakref__")

    def __init__(self, kernel: str, node: ast.Call, args: list | None, kwargs: dict | None, kw_nodes: dict,
                 nargs: int, pending: "_PendingValues | None" = None):
        self.kernel, self.node, self.kw_nodes, self.nargs = kernel, node, kw_nodes, nargs
        self._args, self._kwargs, self._pending = args, kwargs, pending

    @property
    def args(self) -> list:
        """The evaluated positional arguments (``NOT_STATIC`` where not static)."""
        if self._pending is not None:
            self._pending.evaluate()
        return self._args  # type: ignore[return-value]

    @property
    def kwargs(self) -> dict:
        """Keyword -> evaluated value (``NOT_STATIC`` where not static); ``**kw`` left out."""
        if self._pending is not None:
            self._pending.evaluate()
        return self._kwargs  # type: ignore[return-value]

    def arg(self, i: int):
        """``args[i]``; a literal's value without evaluating the launch's other arguments."""
        a = self.node.args[i]
        if self._pending is not None and a.__class__ is ast.Constant:
            return a.value
        return self.args[i]

    def kwarg(self, name: str):
        """``kwargs[name]``; a literal's value without evaluating the launch's other arguments."""
        v = self.kw_nodes[name].value
        if self._pending is not None and v.__class__ is ast.Constant:
            return v.value
        return self.kwargs[name]

    def __repr__(self) -> str:
        return f"LaunchSite({self.kernel!r}, line {self.node.lineno}, col {self.node.col_offset})"


class _ScanFacts:
    """What ``StaticEval`` reads of a ``ModuleScan`` (the same dicts): held by the launches' pending values
    instead of the scan, which holds them (no reference cycle: an analysis is freed by reference counts)."""

    __slots__ = ("constants", "assigned", "simple_functions", "kernels", "aliases", "evaluator", "no_value")

    def __init__(self, scan: Any, evaluator: Any, no_value: object):
        self.constants, self.assigned, self.simple_functions = scan.constants, scan.assigned, scan.simple_functions
        self.kernels, self.aliases = scan.kernels, scan.aliases
        #: ``source.StaticEval`` and its "no static value" marker, given by the scan (this module sits below it)
        self.evaluator, self.no_value = evaluator, no_value


_EVALUATING = threading.RLock()


class _PendingValues:
    """The launches of one module-level statement whose argument values are not evaluated yet (``LaunchSite``):
    evaluated together, in the order the scan found them, when one of them is first read.  In a function, the
    names its launches use are evaluated from the function's single assignments, by one evaluator whose
    environment grows from launch to launch (``_single_assignments``).  The launches are held by weak
    references (each holds this): no reference cycle, an analysis is freed by reference counts."""

    __slots__ = ("facts", "fdef", "items")

    def __init__(self, facts: _ScanFacts, fdef, sites: list):
        self.facts, self.fdef = facts, fdef
        self.items = [(ls.node, weakref.ref(ls)) for ls in sites]
        for ls in sites:
            ls._pending = self

    def evaluate(self) -> None:
        with _EVALUATING:  # (an analysis is read by the server's threads: the values are set once, by one)
            if self.items:
                self._evaluate()

    def _evaluate(self) -> None:
        items, self.items = self.items, []
        done = 0
        try:
            env_for = _single_assignments(self.facts, self.fdef) if self.fdef is not None else None
            for node, ref in items:
                if env_for is None:
                    env: dict = {}
                else:
                    used: list = []
                    for a in node.args:
                        _names_in(a, used)
                    for k in node.keywords:
                        _names_in(k.value, used)
                    env = env_for(used)  # (for a launch nobody holds too: the later ones' environment grows)
                values = _launch_values(self.facts, node, env)
                ls = ref()
                if ls is not None:
                    ls._args, ls._kwargs = values
                    ls._pending = None
                done += 1
        finally:
            for node, ref in items[done:]:  # (an internal error on the way: the rest say nothing, not retried)
                ls = ref()
                if ls is not None:
                    ls._args = [_NOT_STATIC] * len(node.args)
                    ls._kwargs = {k: _NOT_STATIC for k in ls.kw_nodes}
                    ls._pending = None


def _launch_values(facts, node, local_env) -> tuple[list, dict]:
    """The static values (or ``NOT_STATIC``) of the arguments of launch ``node``: (positional, keyword)."""
    ev = facts.evaluator(facts, local_env)
    _NO_VALUE = facts.no_value
    args = []
    for a in node.args:
        cls = a.__class__
        if cls is ast.Constant:  # (what eval gives, without its calls: most arguments are names and literals)
            args.append(a.value)
            continue
        if cls is ast.Name:
            v = ev.name_value(a.id)
            args.append(_NOT_STATIC if v is _NO_VALUE else v)
            continue
        if ev.never_static(a):
            args.append(_NOT_STATIC)
            continue
        try:
            args.append(ev.eval(a))
        except Exception:
            args.append(_NOT_STATIC)
    kwargs = {}
    for k in node.keywords:
        if k.arg is None:
            continue
        try:
            kwargs[k.arg] = ev.eval(k.value)
        except Exception:
            kwargs[k.arg] = _NOT_STATIC
    return args, kwargs


def _single_assignments(facts, fdef):
    """The static values of the names ``fdef`` assigns once, as a function of the names a launch uses:
    only those (and what their values use) are evaluated (a host function's other assignments, its
    ``torch.randn(...)`` calls, are never tried).  Each is evaluated at most once per function, by one
    evaluator whose environment grows."""
    counts: dict[str, int] = {}
    values: dict[str, ast.AST] = {}
    Name, Assign = ast.Name, ast.Assign
    stack = [fdef]
    while stack:  # fdef and every statement nested in it (``_statements``): no expression is visited
        node = stack.pop()
        cls = node.__class__
        if cls is Assign:
            for t in node.targets:
                if t.__class__ is Name:
                    counts[t.id] = counts.get(t.id, 0) + 1
                else:
                    for n in fast_walk(t):
                        if isinstance(n, Name):
                            counts[n.id] = counts.get(n.id, 0) + 1
            if len(node.targets) == 1 and node.targets[0].__class__ is Name:
                values[node.targets[0].id] = node.value
            continue  # (no nested statements)
        if cls in _OTHER_BINDINGS:
            tgts = [getattr(node, "target", None)] + [it.optional_vars for it in getattr(node, "items", ())]
            for tgt in tgts:
                if tgt is not None:
                    for n in fast_walk(tgt):
                        if isinstance(n, Name):
                            counts[n.id] = counts.get(n.id, 2) + 2
        for f in _BLOCK_FIELDS:
            sub = getattr(node, f, None)
            if sub.__class__ is list:
                stack.extend(x for x in sub if isinstance(x, (ast.stmt, ast.excepthandler, ast.match_case)))
    for a in fdef.args.args + fdef.args.kwonlyargs:
        counts[a.arg] = 99
    ev = facts.evaluator(facts, {})  # one evaluator whose environment grows (not a copy of it per assignment)
    tried: set = set()
    order = {name: i for i, name in enumerate(values)}

    def env_for(names=None) -> dict:
        todo = list(values) if names is None else [n for n in names if n in values]
        need: set = set()
        while todo:
            n = todo.pop()
            if n in need or n in tried or counts.get(n) != 1 or n not in values:
                continue
            need.add(n)
            _names_in(values[n], todo)
        for n in sorted(need, key=order.__getitem__):
            tried.add(n)
            if ev.never_static(values[n]):
                continue  # (what the evaluation would have said, at no cost)
            try:
                ev.env[n] = ev.eval(values[n])
            except Exception:
                pass
        return ev.env

    return env_for
