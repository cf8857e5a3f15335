"""Open documents: their text (kept with LSP's own line rules), the log of edits since each was opened, and
positions of the current text mapped into an older analyzed text.

Both the protocol process (``server``) and the analysis engines (``engine``) hold one :class:`Documents`:
the server applies every ``didChange`` and forwards it, an engine applies the same changes to its copy, so
either side can map a request's position into the text of the last finished analysis.
"""

from __future__ import annotations

import collections
import logging
import os

from lsprotocol import types as lsp

from .positions import UTF32, LineIndex, _normalize, _unit_width, split_lines

__all__ = ["Documents"]

log = logging.getLogger("newt-lsp")

_TRACE_SYNC = os.environ.get("NEWT_LSP_TRACE_SYNC") == "1"


class Documents:
    """The text and version of every open document, and the line map of each edit since it was opened."""

    def __init__(self, encoding: str = "utf-16"):
        self.encoding = encoding
        self.texts: dict[str, tuple] = {}  # uri -> (text, version)
        #: uri -> (version, (start line, old end line, new line count) | None) of every change since it was opened
        self.edits: dict[str, collections.deque] = {}

    def get(self, uri: str):
        return self.texts.get(uri)

    def open(self, uri: str, text: str, version: int | None):
        self.texts[uri] = (text, version)
        self.edits[uri] = collections.deque([(version, None)], maxlen=20000)

    def change(self, uri: str, version: int | None, changes):
        """Apply LSP content changes (objects with ``range``/``text``, or dicts ``{"range": [l0, c0, l1, c1] |
        None, "text"}``) with LSP's own line rules (\\n, \\r\\n, \\r only) and position encoding."""
        text, _ = self.texts.get(uri, ("", None))
        edits = self.edits.get(uri)
        if edits is None:
            edits = self.edits[uri] = collections.deque(maxlen=20000)
        for ch in changes:
            rng, new = _range_and_text(ch)
            if rng is None:
                text = new
                edits.clear()  # no line map across a whole-document change
                edits.append((version, None))
                continue
            start_pos, end_pos = rng
            # which lines this change replaced: old lines start..end became start..start+newlines
            edits.append((version, (start_pos.line, end_pos.line,
                                    new.count("\n") + new.count("\r") - new.count("\r\n"))))
            start, end = text_offset(text, start_pos, self.encoding), text_offset(text, end_pos, self.encoding)
            if _TRACE_SYNC:
                log.warning("sync %s v%s: %s..%s -> chars %d..%d of %d (%s), %r", uri, version, start_pos, end_pos,
                            start, end, len(text), self.encoding, new)
            if end < start:
                start, end = end, start
            text = text[:start] + new + text[end:]
        self.texts[uri] = (text, version)

    def close(self, uri: str):
        self.texts.pop(uri, None)
        self.edits.pop(uri, None)

    # -- positions of the current text in an older analysis --------------------------------------------
    def stale_position(self, a, uri: str, pos: lsp.Position) -> tuple[lsp.Position, int] | None:
        """``pos`` of the current text as a position of ``a``'s text (``a`` has ``.text``, ``.version``,
        ``.index``), and the line shift back; None when the position is in lines that changed since ``a``
        (then only a fresh analysis can answer)."""
        text = (self.texts.get(uri) or ("", None))[0]
        if a.text == text:
            return pos, 0
        mapped = self.map_through_edits(a, uri, pos.line)
        if mapped is not None:
            old_line, changed = mapped
            if changed:
                return None
            return lsp.Position(old_line, pos.character), pos.line - old_line
        old, new = a.index.lines, split_lines(text)
        n_old, n_new = len(old), len(new)
        line = pos.line
        if line >= n_new:
            return None
        prefix = 0
        lim = min(n_old, n_new)
        while prefix < lim and old[prefix] == new[prefix]:
            if prefix == line:
                return pos, 0
            prefix += 1
        suffix = 0
        while suffix < lim - prefix and old[n_old - 1 - suffix] == new[n_new - 1 - suffix]:
            suffix += 1
        if line >= n_new - suffix:
            shift = n_new - n_old
            return lsp.Position(line - shift, pos.character), shift
        return None

    def _edits_since(self, a, uri: str) -> list | None:
        """The logged line changes newer than ``a``, newest first; None when the log does not reach back to it."""
        edits = self.edits.get(uri)
        if not edits or a.version is None:
            return None
        newer = []
        for version, change in reversed(edits):
            if version is None or version <= a.version:
                if change is None and version != a.version:
                    return None  # reopened or replaced after ``a``: no map
                break
            if change is None:
                return None  # a whole-document change after ``a``
            newer.append(change)
        else:
            return None  # the log starts after ``a``
        return newer

    def forward_lines(self, a, uri: str):
        """A function from a line of ``a``'s text to its line in the current text (None for a line edited since),
        by replaying the logged edits newer than ``a``; None when the log does not reach back to ``a``.  Answers
        that only place things on lines (inlay hints, code lenses) are moved with it while a new analysis runs."""
        newer = self._edits_since(a, uri)
        if newer is None:
            return None
        oldest_first = newer[::-1]

        def fwd(line: int) -> int | None:
            for start, end, new_lines in oldest_first:
                if line < start:
                    continue
                if line > end:
                    line += new_lines - (end - start)
                else:
                    return None  # in the lines this change replaced
            return line
        return fwd

    def map_through_edits(self, a, uri: str, line: int):
        """(line of ``a``'s text, whether that line was edited since) for ``line`` of the current text, by
        undoing the logged edits newer than ``a``; None when the log does not reach back to ``a``."""
        newer = self._edits_since(a, uri)
        if newer is None:
            return None
        changed = False
        for start, end, new_lines in newer:  # newest first: undo them one by one
            if line < start:
                continue
            if line > start + new_lines:
                line = line - new_lines + (end - start)
            else:
                changed = True
                line = start
        return line, changed

    def same_token_position(self, a, uri: str, pos: lsp.Position) -> tuple[lsp.Position, int] | None:
        """For ``pos`` in a line edited since ``a``: the same position in ``a``'s version of that line when
        the line is unchanged up to the end of the word at ``pos`` (an edit further right, as when typing on
        after a name); None otherwise.  ``a``'s answer about that word is then still the last good one."""
        mapped = self.map_through_edits(a, uri, pos.line)
        if mapped is None:
            return None
        old_line, _changed = mapped
        text = (self.texts.get(uri) or ("", None))[0]
        new = LineIndex(text, self.encoding)
        line = new.line(pos.line)
        old = a.index.line(old_line)
        _l, col1 = new.char_col(pos)
        end = col1 - 1
        while end < len(line) and (line[end].isalnum() or line[end] == "_"):
            end += 1
        end += 1  # the character after the word too: ``x`` and ``x2`` are different names
        if end > len(line) + 1 or line[:end] != old[:end] or (end > len(line) and len(old) != len(line)):
            return None
        return lsp.Position(old_line, pos.character), pos.line - old_line

    def completion_position(self, a, uri: str, pos: lsp.Position) -> lsp.Position:
        """Where ``pos`` is in ``a``'s text, or the start of the edited lines it falls in (completion and
        signature help only need the kernel and the names around the cursor; the line itself is read fresh)."""
        mapped = self.map_through_edits(a, uri, pos.line)
        if mapped is None:
            m = self.stale_position(a, uri, pos)
            return m[0] if m is not None else pos
        return lsp.Position(mapped[0], pos.character)


def text_offset(text: str, pos: lsp.Position, encoding: str = "utf-16") -> int:
    """``LineIndex(text, encoding).offset(pos)`` without indexing every line: a change is applied in the protocol
    process, the answering engine and the analysis fork, at the rate the client types (a paste, a formatter: 50/s),
    and the index of a 1,000-line text cost ~2-4 ms each time; this scans to the one line it needs."""
    if "\r" in text:  # \r and \r\n end lines too: the full index
        return LineIndex(text, encoding).offset(pos)
    start = 0
    for _ in range(max(pos.line, 0)):
        nl = text.find("\n", start)
        if nl < 0:
            return len(text)  # past the end of the text: its end
        start = nl + 1
    end = text.find("\n", start)
    line = text[start:] if end < 0 else text[start:end]
    ch = max(pos.character, 0)
    enc = _normalize(encoding)
    if enc == UTF32 or line.isascii():
        return start + min(ch, len(line))
    units = 0
    for i, c in enumerate(line):
        if units >= ch:
            return start + i
        units += _unit_width(c, enc)
    return start + len(line)


def _range_and_text(ch):
    if isinstance(ch, dict):
        r = ch.get("range")
        new = ch.get("text", "")
        if r is None:
            return None, new
        return (lsp.Position(r[0], r[1]), lsp.Position(r[2], r[3])), new
    rng = getattr(ch, "range", None)
    if rng is None:
        return None, ch.text
    return (rng.start, rng.end), ch.text


def change_json(changes) -> list:
    """LSP content changes as the plain lists the engines receive."""
    out = []
    for ch in changes:
        rng = getattr(ch, "range", None)
        out.append({"range": None if rng is None else [rng.start.line, rng.start.character, rng.end.line,
                                                        rng.end.character], "text": ch.text})
    return out
