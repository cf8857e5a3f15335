"""Small text helpers for features that must work on half-typed code."""

from __future__ import annotations

import re

__all__ = ["dotted_at", "dotted_before", "call_context", "is_ident_char", "in_string_or_comment", "spelling_of"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def is_ident_char(c: str) -> bool:
    return c == "_" or c.isalnum()


def dotted_at(line: str, col0: int):
    """The dotted name under a 0-based character column: ``(start, end, parts, k)``.

    ``parts`` is the chain up to and including the word under the cursor
    (``nl.math.exp`` with the cursor on ``math`` gives ``["nl", "math"]``);
    ``start``/``end`` are the 0-based columns of that word.  None when the
    cursor is not on an identifier.
    """
    n = len(line)
    if n == 0:
        return None
    c = min(col0, n - 1) if col0 < n else n - 1
    if not is_ident_char(line[c]) and c > 0 and is_ident_char(line[c - 1]) and col0 >= 1:
        c -= 1
    if not is_ident_char(line[c]):
        return None
    s = c
    while s > 0 and is_ident_char(line[s - 1]):
        s -= 1
    e = c + 1
    while e < n and is_ident_char(line[e]):
        e += 1
    word = line[s:e]
    if not word or word[0].isdigit():
        return None
    parts = [word]
    i = s
    while True:
        j = i - 1
        while j >= 0 and line[j] == " ":
            j -= 1
        if j < 0 or line[j] != ".":
            break
        j -= 1
        while j >= 0 and line[j] == " ":
            j -= 1
        e2 = j + 1
        while j >= 0 and is_ident_char(line[j]):
            j -= 1
        w = line[j + 1:e2]
        if not w or w[0].isdigit():
            parts.insert(0, "")  # something that is not a name: x[0].foo, f().foo
            break
        parts.insert(0, w)
        i = j + 1
    return s, e, parts


def dotted_before(line: str, col0: int):
    """For completion: ``(base_parts, prefix, prefix_start)`` of ``a.b.pre|`` at the cursor.

    ``base_parts`` is ``["a", "b"]`` (empty when there is no dot before the
    word); ``prefix`` the partial word before the cursor.
    """
    text = line[:col0]
    m = re.search(r"([A-Za-z_][A-Za-z_0-9]*)?$", text)
    prefix = m.group(1) or ""
    start = col0 - len(prefix)
    j = start - 1
    while j >= 0 and text[j] == " ":
        j -= 1
    if j < 0 or text[j] != ".":
        return [], prefix, start
    parts = []
    j -= 1
    while True:
        while j >= 0 and text[j] == " ":
            j -= 1
        e = j + 1
        while j >= 0 and is_ident_char(text[j]):
            j -= 1
        w = text[j + 1:e]
        if not w:
            if e > 0 and text[e - 1] in ")]":
                parts.insert(0, "")
            break
        if w[0].isdigit():
            return None
        parts.insert(0, w)
        k = j
        while k >= 0 and text[k] == " ":
            k -= 1
        if k >= 0 and text[k] == ".":
            j = k - 1
            continue
        break
    return parts, prefix, start


def in_string_or_comment(line: str, col0: int) -> bool:
    """Whether a column is inside a string literal or a comment of one line (a good-enough test)."""
    q = None
    i = 0
    while i < min(col0, len(line)):
        c = line[i]
        if q:
            if c == "\\":
                i += 2
                continue
            if line.startswith(q, i):
                i += len(q)
                q = None
                continue
        else:
            if c == "#":
                return True
            if line.startswith('"""', i) or line.startswith("'''", i):
                q = line[i:i + 3]
                i += 3
                continue
            if c in "\"'":
                q = c
        i += 1
    return q is not None


def call_context(text: str, offset: int, max_back: int = 4000):
    """The innermost unclosed call before ``offset``: ``(callee_text, arg_index, keyword or None, used_keywords)``.

    ``callee_text`` is the dotted expression before the ``(`` (``nl.load``,
    ``x.to``).  None when the offset is not inside a call's parentheses.
    """
    start = max(0, offset - max_back)
    s = text[start:offset]
    depth = 0
    arg_index = 0
    keyword = None
    current = []
    used = []
    i = len(s) - 1
    # a simple backwards scan; strings are skipped when they are balanced on the line
    while i >= 0:
        c = s[i]
        if c in ")]}":
            depth += 1
        elif c in "([{":
            if depth == 0:
                if c != "(":
                    return None
                callee = _callee_before(s, i)
                if callee is None:
                    return None
                seg = "".join(reversed(current))
                km = re.match(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*=(?!=)", seg)
                keyword = km.group(1) if km else None
                return callee, arg_index, keyword, used
            depth -= 1
        elif c in "\"'":
            j = s.rfind(c, 0, i)
            if j >= 0:
                i = j
        elif c == "\n" and depth == 0 and _ends_statement(s, i):
            return None
        elif c == "," and depth == 0:
            seg = "".join(reversed(current))
            km = re.match(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*=(?!=)", seg)
            if km:
                used.append(km.group(1))
            arg_index += 1
            current = []
            i -= 1
            continue
        if depth == 0:
            current.append(c)
        i -= 1
    return None


def _ends_statement(s: str, i: int) -> bool:
    # a newline followed by a line that starts a new statement (def/@/return ...) at column 0
    rest = s[i + 1:i + 40]
    return bool(re.match(r"(def |class |@)", rest))


def _callee_before(s: str, i: int):
    j = i - 1
    while j >= 0 and s[j] == " ":
        j -= 1
    e = j + 1
    while j >= 0 and (is_ident_char(s[j]) or s[j] == "."):
        j -= 1
    callee = s[j + 1:e]
    if not callee or callee[0].isdigit() or callee.startswith("."):
        return None
    return callee


def spelling_of(a):
    """How the analyzed file spells newt's names (``newt.frontend.spelling``): ``tl.`` for a Triton file.
    What the editor says (hovers, quick fixes, Compile's messages) goes through it."""
    from newt.frontend.spelling import NEWT_SPELLING
    scan = getattr(getattr(a, "file", None), "scan", None)
    sp = getattr(scan, "spelling", None)
    return sp if sp is not None else NEWT_SPELLING
