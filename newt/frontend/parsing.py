"""Parsing a Python file with recovery: the file split into top-level statements, each parsed once per
(position, text) through a cache, broken statements repaired for hover and inlay data (``source`` re-exports
``ParsedChunk`` and ``parse_with_recovery``)."""

from __future__ import annotations

import ast
import contextlib
import gc
import re
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from newt.diagnostics import Diagnostic, Severity, Span


class SourceFile(Protocol):
    """What parsing reads of ``source.SourceFile`` (named structurally: ``source`` imports this module)."""

    text: str
    path: str
    lines: list[str]

    def char_col(self, line: int, byte_col: int) -> int: ...

__all__ = ["ParsedChunk", "parse_with_recovery", "no_gc"]


# ---------------------------------------------------------------------------
# parsing with recovery
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def no_gc():
    """The front end allocates many small objects (IR values and ops, the file's syntax tree); a cyclic GC pass
    in the middle of an analysis costs more than the analysis, so the collector is paused while it runs.

    What the analysis allocated and kept (its result: a 5 MB file's tree is ~3 million objects) would then be
    the collector's youngest generation: the first allocation after ``gc.enable()`` traversed all of it (1.2 s
    of a 5 MB file's analysis), and the next middle-generation pass all of it again.  It is the result the
    caller keeps, so it joins the oldest generation directly (``freeze`` + ``unfreeze``: two list splices,
    nothing traversed); it is collected, if ever it is cyclic garbage, by the next full collection, whose
    schedule counts it as long-lived data.  Skipped while something else has frozen objects (the language
    server's engines freeze their modules, with the collector off: ``unfreeze`` would thaw them)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


@dataclass
class ParsedChunk:
    tree: ast.Module | None
    first_line: int
    last_line: int
    repaired: bool = False


_TOP = re.compile(r"^[A-Za-z_@]")
_DEF = re.compile(r"^(?:@|def\s|async\s+def\s|class\s)")
_SPECIAL = re.compile(r"[()\[\]{}#'\"]").search


_INTERESTING = re.compile(r"[#\"'()\[\]{}]")
#: every line that may start a top-level statement (``_TOP`` at the start of a line), in one pass over the text
_TOP_LINES = re.compile(r"^[A-Za-z_@]", re.MULTILINE).findall


def _scan_line(s: str, in_triple: str | None) -> tuple[int, int, str | None]:
    """One line's effect on the chunk splitter's state: (bracket depth change, lowest depth change reached on
    the way, open triple quote at its end). Crude: strings, comments and triple quotes only. Jumps from one
    bracket, quote or ``#`` to the next (a character-by-character loop cost 1 s per 40k lines)."""
    depth = low = 0
    j = 0
    n = len(s)
    find = _INTERESTING.search
    while j < n:
        if in_triple:
            k = s.find(in_triple, j)
            if k < 0:
                break
            in_triple = None
            j = k + 3
            continue
        m = find(s, j)
        if m is None:
            break
        j = m.start()
        c = s[j]
        if c == "#":
            break
        if s.startswith('"""', j) or s.startswith("'''", j):
            in_triple = s[j:j + 3]
            j += 3
            continue
        if c in "\"'":
            k = j + 1
            while k < n and s[k] != c:
                k += 2 if s[k] == "\\" else 1
            j = k + 1
            continue
        if c in "([{":
            depth += 1
        else:
            depth -= 1
            low = min(low, depth)
        j += 1
    return depth, low, in_triple


#: (line, open triple quote before it) -> _scan_line's answer: a keystroke re-scans one line, not the file
_LINE_SCANS: dict = {}


def _split_chunks(lines: list[str]) -> list[tuple[int, int]]:
    """Split a file into top-level statements (decorators kept with their def)."""
    starts: list[int] = []
    depth = 0
    in_triple: str | None = None
    scans = _LINE_SCANS
    if len(scans) > 200_000:
        scans.clear()
    for i, line in enumerate(lines):
        if in_triple is None and depth and _DEF.match(line):
            depth = 0  # an unclosed bracket above (a half-typed line): a `def` at column 0 starts anew
        if in_triple is None and depth == 0 and _TOP.match(line):
            prev_is_decorator = bool(starts) and lines[starts[-1]].startswith("@") and all(
                lines[j].startswith("@") or not lines[j].strip() or lines[j][:1] in " \t)"
                for j in range(starts[-1], i))
            if not prev_is_decorator:
                starts.append(i)
        # crude bracket / triple-quote tracking so continuation lines stay in the chunk (a closing bracket
        # never takes the depth below 0: the depth after the line is its change from max(depth, -lowest))
        if in_triple is None and not _SPECIAL(line):
            delta = low = 0  # no bracket, quote or comment: nothing to track (most lines of a big file)
        else:
            key = (line, in_triple)
            got = scans.get(key)
            if got is None:
                got = scans[key] = _scan_line(line, in_triple)
            delta, low, in_triple = got
        depth = max(depth, -low) + delta
        if i == len(lines) - 1:
            break
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    bounds = []
    for k, first in enumerate(starts):
        bounds.append((first, starts[k + 1] if k + 1 < len(starts) else len(lines)))
    return bounds


def _syntax_diag(src: SourceFile, e: SyntaxError, line_offset: int = 0) -> Diagnostic:
    line = (e.lineno or 1) + line_offset
    col = (e.offset or 1)
    if e.lineno is not None and e.offset is not None:
        col = src.char_col(line, max(0, e.offset - 1)) + 1
    end_col = col + 1
    end_offset = e.end_offset
    if e.end_lineno == e.lineno and end_offset:
        end_col = max(col + 1, src.char_col(line, end_offset - 1) + 1)
    msg = e.msg or "invalid syntax"
    return Diagnostic("N001", Severity.ERROR, Span(line, col, line, end_col), f"syntax error: {msg}",
                      file=src.path)


def parse_with_recovery(src: SourceFile) -> tuple[list[ParsedChunk], list[Diagnostic]]:
    """The file's statements (one chunk when the whole file parses) and its syntax errors.  The collector is
    paused while the tree is built (``no_gc``): every node survives, so its passes over them would find nothing
    (they made ``ast.parse`` of a 5 MB file 2-3 times slower than the parse)."""
    with no_gc(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings about the user's code are not ours to print
        return _parse_with_recovery(src)


#: (first line index, chunk text) -> (ParsedChunk or None, its SyntaxError or None), least recently used first.
#: A keystroke changes one top-level statement: the others' trees are reused (ASTs are never mutated), so an
#: analysis parses one chunk instead of the file (and, in a file with syntax errors, instead of every chunk
#: with its repairs).
_CHUNKS: OrderedDict = OrderedDict()
_CHUNKS_MAX = 256


def _bare(err: SyntaxError) -> SyntaxError:
    """``err`` without its traceback: the caches below keep errors, and a traceback keeps the frames that raised it
    alive, with their locals (the whole file's lines, the analysis that was running: a language server's memory
    grew by ~20 MB per 150 keystrokes through the errors cached while code was half typed)."""
    err.__traceback__ = None
    err.__context__ = None
    err.__cause__ = None
    return err


def _parse_at(path: str, text: str, s: int) -> ast.Module:
    """``text`` (the file's lines from index ``s`` on) parsed with the file's line numbers: parsed on its own and
    its nodes' lines moved by ``s`` (a prefix of ``s`` newlines made every statement cost the lines above it:
    quadratic in the number of top-level statements, 40k lines took 23 s); a SyntaxError's lines are moved too."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as err:
        if s:
            if err.lineno is not None:
                err.lineno += s
            end = getattr(err, "end_lineno", None)
            if end is not None:
                err.end_lineno = end + s
            err.args = (err.msg, (err.filename, err.lineno, err.offset, err.text, err.end_lineno, err.end_offset))
        raise
    if s:
        ast.increment_lineno(tree, s)
    return tree


def _parse_chunk(path: str, lines: list[str], s: int, stop: int) -> tuple:
    """(ParsedChunk or None, its SyntaxError or None, the repaired lines that parsed or None)."""
    text = "\n".join(lines[s:stop]) + "\n"
    try:
        return ParsedChunk(_parse_at(path, text, s), s + 1, stop), None, None
    except SyntaxError as err:
        bad = first = _bare(err)
    except (ValueError, RecursionError, MemoryError):
        return None, None, None
    # repair: blank the failing line (keep indentation, write `pass`), a few times
    work = list(lines[s:stop])
    tree: ast.Module | None = None
    for _ in range(6):
        ln = (bad.lineno or 1) - 1 - s
        if not (0 <= ln < len(work)):
            break
        indent = work[ln][:len(work[ln]) - len(work[ln].lstrip())]
        # an unclosed bracket on an earlier line: blank from the statement start
        work[ln] = indent + "pass" if work[ln].strip() else work[ln]
        if bad.msg and ("was never closed" in bad.msg or "unexpected EOF" in bad.msg):
            for k in range(ln + 1, len(work)):
                work[k] = ""
        try:
            tree = _parse_at(path, "\n".join(work) + "\n", s)
            break
        except SyntaxError as err2:
            if err2.lineno == bad.lineno and err2.msg == bad.msg:
                # same error: blank the whole rest of the statement
                for k in range(ln, len(work)):
                    work[k] = ""
            bad = _bare(err2)
        except (ValueError, RecursionError, MemoryError):
            break
    if tree is None:
        return None, first, None
    return ParsedChunk(tree, s + 1, stop, repaired=True), first, work


#: chunk text -> the repaired lines that parsed (None: no repair did): a broken statement that only moved (a line
#: added or removed above it) is parsed twice (for its error, whose message may name a line, and repaired), not
#: once per repair attempt
_REPAIRS: OrderedDict = OrderedDict()


def _chunk(path: str, lines: list[str], s: int, stop: int) -> tuple[ParsedChunk | None, SyntaxError | None]:
    text = "\n".join(lines[s:stop])
    key = (s, text)
    got = _CHUNKS.get(key)
    if got is not None:
        _CHUNKS.move_to_end(key)
        return got
    if text in _REPAIRS:
        _REPAIRS.move_to_end(text)
        got = _moved_chunk(path, lines, s, stop, _REPAIRS[text])
    else:
        ch, err, work = _parse_chunk(path, lines, s, stop)
        got = (ch, err)
        if err is not None:
            _REPAIRS[text] = work
            while len(_REPAIRS) > _CHUNKS_MAX:
                _REPAIRS.popitem(last=False)
    _CHUNKS[key] = got
    while len(_CHUNKS) > _CHUNKS_MAX:
        _CHUNKS.popitem(last=False)
    return got


def _moved_chunk(path: str, lines: list[str], s: int, stop: int, work) -> tuple[ParsedChunk | None, SyntaxError | None]:
    try:
        _parse_at(path, "\n".join(lines[s:stop]) + "\n", s)
        err = None
    except SyntaxError as e:
        err = _bare(e)
    except (ValueError, RecursionError, MemoryError):
        return None, None
    if err is None:  # cannot happen (the same text failed before): parse it as new
        ch, err, _work = _parse_chunk(path, lines, s, stop)
        return ch, err
    tree = None
    if work is not None:
        try:
            tree = _parse_at(path, "\n".join(work) + "\n", s)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
    return (ParsedChunk(tree, s + 1, stop, repaired=True) if tree is not None else None), err


def _parse_with_recovery(src: SourceFile) -> tuple[list[ParsedChunk], list[Diagnostic]]:
    """Parse the file; when it has syntax errors, parse each top-level statement on
    its own so the others are still analyzed, and try to repair a broken
    statement by blanking its bad lines (for hover/inlay data).

    Statements are parsed one by one through a cache (``_CHUNKS``): when every one parses, the file is
    their module (the same tree as parsing the whole text: a statement's grammar does not depend on the
    others'); otherwise the whole text is tried (the splitter may have cut a statement, e.g. a module-level
    ``else:``) before the recovery."""
    lines = src.lines
    parts: list[tuple[ParsedChunk | None, SyntaxError | None]] = []
    whole_error: Exception | None = None
    if len(_TOP_LINES(src.text)) > _CHUNKS_MAX:
        # more lines that may start a statement than the cache holds statements (every statement starts at such a
        # line): the cache cannot help the next analysis, and one parse of the whole text is several times faster
        # than one per statement (40k lines: 0.3 s against 1.7 s).  Counted by one regular expression over the
        # text: the splitter's pass over the lines cost ~10 % of a parse (a file of one-line statements)
        try:
            return [ParsedChunk(ast.parse(src.text, filename=src.path), 1, len(lines))], []
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            whole_error = _bare(e) if isinstance(e, SyntaxError) else e
    if not isinstance(whole_error, (RecursionError, MemoryError)):
        try:
            parts = [_chunk(src.path, lines, s, stop) for s, stop in _split_chunks(lines)]
        except (RecursionError, MemoryError):
            parts = []
    if parts and all(ch is not None and err is None for ch, err in parts):
        body = [st for ch, _err in parts for st in ch.tree.body]  # type: ignore[union-attr]
        return [ParsedChunk(ast.Module(body=body, type_ignores=[]), 1, len(lines))], []
    if whole_error is None:  # (a text that failed above is not parsed again)
        try:
            whole = ast.parse(src.text, filename=src.path, type_comments=False)
            return [ParsedChunk(whole, 1, len(src.lines))], []
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            whole_error = _bare(e) if isinstance(e, SyntaxError) else e
    if not isinstance(whole_error, SyntaxError):  # null bytes, absurd nesting
        return [], [Diagnostic("N001", Severity.ERROR, Span(1, 1, 1, 2), f"cannot parse file: {whole_error}",
                               file=src.path)]
    first_error = whole_error

    chunks: list[ParsedChunk] = []
    diags: list[Diagnostic] = []
    if not parts:
        parts = [_chunk(src.path, lines, s, stop) for s, stop in _split_chunks(lines)]
    for ch, err in parts:
        if err is not None:
            diags.append(_syntax_diag(src, err))
        if ch is not None:
            chunks.append(ch)
    if not diags:
        diags.append(_syntax_diag(src, first_error))
    return chunks, diags
