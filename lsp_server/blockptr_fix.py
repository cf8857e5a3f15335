"""The quick fix of N080 (a deprecated block pointer): rewrite the common form to a tensor descriptor.

The common form, in one function::

    p = tl.make_block_ptr(base, shape=(s0, s1), strides=(t0, t1), offsets=(o0, o1), block_shape=(B0, B1),
                          order=(1, 0))
    x = tl.load(p, boundary_check=(0, 1), padding_option="zero")
    tl.store(p, v, boundary_check=(0, 1))
    p = tl.advance(p, (d0, d1))

becomes::

    p = tl.make_tensor_descriptor(base, shape=[s0, s1], strides=[t0, t1], block_shape=[B0, B1])
    p_off0, p_off1 = o0, o1
    x = p.load([p_off0, p_off1])
    p.store([p_off0, p_off1], v)
    p_off0, p_off1 = p_off0 + d0, p_off1 + d1

It is offered only when that is all the function does with ``p`` (its order is row-major, ``(1, 0)`` or
``(0,)``, as a descriptor's last stride must be 1; shapes, strides, offsets and block shape are literal
tuples of one rank; loads and stores pass no other options): anything else keeps the warning without a fix.
A descriptor checks every dimension's bounds and pads with zeros (or NaN, kept from ``padding_option``).
"""

from __future__ import annotations

import ast

from lsprotocol import types as lsp

from newt.diagnostics import Span

from .analysis import Analysis

_PARAMS = ("base", "shape", "strides", "offsets", "block_shape", "order")


def _called(node, name: str) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Attribute) and f.attr == name) or (isinstance(f, ast.Name) and f.id == name)


def _bind(call: ast.Call) -> dict | None:
    if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(_PARAMS):
        return None
    out = dict(zip(_PARAMS, call.args))
    for kw in call.keywords:
        if kw.arg not in _PARAMS or kw.arg in out:
            return None
        out[kw.arg] = kw.value
    return out if len(out) == len(_PARAMS) else None


def _items(node) -> list | None:
    return list(node.elts) if isinstance(node, (ast.Tuple, ast.List)) else None


def _enclosing_function(tree, line: int):
    best = None
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= (n.end_lineno or n.lineno):
            if best is None or n.lineno >= best.lineno:
                best = n
    return best


def block_ptr_fix(a: Analysis, d, ld) -> list[lsp.CodeAction]:
    try:
        tree = ast.parse(a.text)
    except SyntaxError:
        return []
    fn = _enclosing_function(tree, d.span.line)
    if fn is None:
        return []
    lines = a.text.splitlines()

    def span(n):
        return Span.from_ast(n, lines)

    def src(n):
        return ast.get_source_segment(a.text, n)

    # the assignment whose value is the flagged make_block_ptr call
    define = None
    for st in ast.walk(fn):
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) and \
                _called(st.value, "make_block_ptr"):
            sp = span(st.value)
            if (sp.line, sp.col) == (d.span.line, d.span.col):
                define = st
    if define is None:
        return []
    p = define.targets[0].id
    args = _bind(define.value)
    if args is None:
        return []
    shape, strides, offsets, block = (_items(args[k]) for k in ("shape", "strides", "offsets", "block_shape"))
    order = _items(args["order"])
    if None in (shape, strides, offsets, block, order):
        return []
    rank = len(block)
    if not (len(shape) == len(strides) == len(offsets) == len(order) == rank) or rank == 0:
        return []
    if [getattr(o, "value", None) for o in order] != list(range(rank - 1, -1, -1)):
        return []  # column-major: the descriptor's last stride would not be 1
    offs = [f"{p}_off{i}" for i in range(rank)]
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    if names & set(offs):
        return []
    prefix = src(define.value.func)[: -len("make_block_ptr")]

    # every other use of p: loads, stores, advances
    edits: list[tuple] = []
    used = set()
    pads = set()
    for st in ast.walk(fn):
        if isinstance(st, ast.Assign) and st is not define and any(isinstance(t, ast.Name) and t.id == p
                                                                  for t in st.targets):
            v = st.value
            if not (len(st.targets) == 1 and _called(v, "advance") and len(v.args) == 2 and not v.keywords and
                    isinstance(v.args[0], ast.Name) and v.args[0].id == p):
                return []
            deltas = _items(v.args[1])
            if deltas is None or len(deltas) != rank:
                return []
            moved = [(o, src(dl)) for o, dl in zip(offs, deltas) if not (isinstance(dl, ast.Constant) and
                                                                          dl.value == 0)]
            text = (", ".join(o for o, _ in moved) + " = " + ", ".join(f"{o} + {t}" for o, t in moved)) if moved \
                else "pass"
            edits.append((span(st), text))
            used.add(id(v.args[0]))
            used.add(id(st.targets[0]))
        elif isinstance(st, ast.Call) and (_called(st, "load") or _called(st, "store")) and st.args and \
                isinstance(st.args[0], ast.Name) and st.args[0].id == p and isinstance(st.func, ast.Attribute) and \
                isinstance(st.func.value, ast.Name):
            store = _called(st, "store")
            if len(st.args) != (2 if store else 1):
                return []
            for kw in st.keywords:
                if kw.arg == "padding_option" and not store and isinstance(kw.value, ast.Constant):
                    pads.add(kw.value.value or "zero")
                elif kw.arg != "boundary_check":
                    return []
            where = "[" + ", ".join(offs) + "]"
            text = f"{p}.store({where}, {src(st.args[1])})" if store else f"{p}.load({where})"
            edits.append((span(st), text))
            used.add(id(st.args[0]))
    used.add(id(define.targets[0]))
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id == p and id(n) not in used:
            return []  # another use (a helper call, an expression): not the common form
    if len(pads) > 1:
        return []
    pad = ", padding_option=\"nan\"" if pads == {"nan"} else ""
    indent = " " * define.col_offset
    head = (f"{p} = {prefix}make_tensor_descriptor({src(args['base'])}, "
            f"shape=[{', '.join(src(x) for x in shape)}], strides=[{', '.join(src(x) for x in strides)}], "
            f"block_shape=[{', '.join(src(x) for x in block)}]{pad})\n"
            f"{indent}{', '.join(offs)} = {', '.join(src(x) for x in offsets)}")
    edits.append((span(define), head))
    text_edits = [lsp.TextEdit(a.index.range(sp), new) for sp, new in edits]
    return [lsp.CodeAction(title=f"Rewrite the block pointer {p} as a tensor descriptor",
                           kind=lsp.CodeActionKind.QuickFix, diagnostics=[ld],
                           edit=lsp.WorkspaceEdit(changes={a.uri: text_edits}), is_preferred=True)]
