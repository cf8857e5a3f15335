"""Spans (1-based characters) <-> LSP positions (UTF-16 by default), with non-ASCII text."""

from __future__ import annotations

from lsprotocol import types as lsp

from lsp_server.positions import UTF8, UTF16, UTF32, LineIndex, split_lines
from newt.diagnostics import Span


def test_ascii_identity():
    idx = LineIndex("abc\ndef\n")
    assert idx.position(2, 2) == lsp.Position(1, 1)
    assert idx.char_col(lsp.Position(1, 1)) == (2, 2)
    assert idx.range(Span(1, 1, 1, 4)) == lsp.Range(lsp.Position(0, 0), lsp.Position(0, 3))


def test_astral_characters_count_two_utf16_units():
    text = 'x = "😀é"; y = z\n'
    idx = LineIndex(text)
    col_y = text.index("y") + 1  # 1-based character column
    assert idx.position(1, col_y) == lsp.Position(0, col_y - 1 + 1)  # the emoji is two UTF-16 units
    assert idx.char_col(lsp.Position(0, col_y)) == (1, col_y)
    # UTF-8: the emoji is 4 bytes, é 2
    assert LineIndex(text, UTF8).position(1, col_y) == lsp.Position(0, col_y - 1 + 3 + 1)
    assert LineIndex(text, UTF32).position(1, col_y) == lsp.Position(0, col_y - 1)


def test_bmp_non_ascii_is_one_unit():
    text = "σ = cols < n\n"
    idx = LineIndex(text, UTF16)
    assert idx.position(1, 5) == lsp.Position(0, 4)
    assert idx.char_col(lsp.Position(0, 4)) == (1, 5)


def test_positions_inside_a_surrogate_pair_round_up():
    text = "😀x"
    idx = LineIndex(text)
    assert idx.char_col(lsp.Position(0, 1)) == (1, 2)  # between the two halves: after the emoji
    assert idx.char_col(lsp.Position(0, 2)) == (1, 2)
    assert idx.char_col(lsp.Position(0, 3)) == (1, 3)


def test_clamping():
    idx = LineIndex("ab\ncd")
    assert idx.position(0, 5) == lsp.Position(0, 0)
    assert idx.position(9, 1) == lsp.Position(1, 2)
    assert idx.position(1, 99) == lsp.Position(0, 2)
    assert idx.char_col(lsp.Position(0, 99)) == (1, 3)
    assert idx.char_col(lsp.Position(7, 0)) == (2, 3)


def test_lines_split_like_lsp_not_like_str_splitlines():
    text = "a\x0cb\r\nc\rd\u2028e\n"
    assert split_lines(text) == ["a\x0cb", "c", "d\u2028e", ""]
    idx = LineIndex(text)
    assert idx.position(3, 3) == lsp.Position(2, 2)
    # offsets count \r\n as two characters
    assert idx.offset(lsp.Position(1, 0)) == text.index("c")
    assert idx.offset(lsp.Position(2, 1)) == text.index("\u2028")
    assert idx.pos_of_offset(text.index("e")) == lsp.Position(2, 2)


def test_end_exclusive_span_at_end_of_line():
    idx = LineIndex("x = 1\n")
    r = idx.range(Span(1, 1, 1, 6))
    assert r.end == lsp.Position(0, 5)


def test_encoding_names():
    assert LineIndex("x", "utf-8").encoding == UTF8
    assert LineIndex("x", lsp.PositionEncodingKind.Utf32).encoding == UTF32
    assert LineIndex("x", None).encoding == UTF16
