"""The base protocol's framing: a reader of ``Content-Length`` frames as the LSP specification gives them.

pygls 2.1's reader matches exactly ``b"Content-Length: <n>\\r\\n"``: a frame whose header is spelled
``content-length`` (header names are case-insensitive, and vscode-jsonrpc accepts any case) or ends its lines
with a bare LF was never recognized, and its body was then read as header lines, so every later frame was lost
too (issue 22, item 5).  :func:`run_async` replaces that loop for stdio and TCP:

* a header block is a run of ``name: value`` lines ended by an empty line; names are case-insensitive, a line
  may end with CRLF or a bare LF, unknown headers (``Content-Type``) are ignored, and stray empty lines
  between frames are skipped;
* a header block without a valid ``Content-Length`` is skipped (nothing says where its body ends) and logged;
  the reader goes on with the next line, so the server is never left deaf;
* a body that is not JSON (or not UTF-8) is answered with a ``-32700`` Parse error, a JSON value that is not a
  message object (an array, a number...) with ``-32600`` Invalid Request, both with ``"id": null``, as
  JSON-RPC 2.0 says;
* header lines longer than :data:`MAX_HEADER_LINE` bytes are dropped without being kept in memory; a body
  is read in pieces (a ``Content-Length`` larger than what follows costs only what arrives), and one over
  :data:`MAX_BODY` bytes is read and dropped.

Everything else -- the lifecycle (``-32002`` before ``initialize``, ``-32600`` after ``shutdown``, the exit
code) -- is ``server.NewtProtocol``'s.  docs/lsp-protocol.md describes both.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable

__all__ = ["MAX_HEADER_LINE", "PARSE_ERROR", "INVALID_REQUEST", "StdinReader", "parse_headers", "run_async"]

log = logging.getLogger("newt-lsp")

#: the longest header line kept (longer lines are skipped: a header is ``Content-Length: <digits>``)
MAX_HEADER_LINE = 8192
#: the largest body handled; a larger one is read and dropped (logged): no editor sends a message that large
MAX_BODY = 512 << 20
PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class StdinReader:
    """A binary stream (stdin) read on an executor thread: ``readline`` with a length limit, ``readexactly``.

    What one read returns (all the bytes there are, up to 64 KiB) is kept, and lines and bodies are served from
    it: a frame costs one hand-over from the reading thread to the event loop, not one per header line and body
    (three), each a wake-up that waits for a CPU on a busy machine (issue 23)."""

    CHUNK = 1 << 16

    def __init__(self, stream, executor=None):
        self.stream = stream
        self.executor = executor
        self.buf = bytearray()
        self.eof = False
        self._read1 = getattr(stream, "read1", None) or stream.read

    async def _more(self) -> bool:
        """Read what is there (at least one byte, or the end of the stream); False at the end."""
        if self.eof:
            return False
        got = await asyncio.get_running_loop().run_in_executor(self.executor, self._read1, self.CHUNK)
        if not got:
            self.eof = True
            return False
        self.buf += got
        return True

    async def readline(self, limit: int = MAX_HEADER_LINE + 1) -> bytes:
        """Up to and including the next ``\n``, at most ``limit`` bytes (fewer at the end of the stream)."""
        start = 0
        while True:
            nl = self.buf.find(b"\n", start, limit)
            if nl >= 0:
                return self._take(nl + 1)
            if len(self.buf) >= limit:
                return self._take(limit)
            start = len(self.buf)
            if not await self._more():
                return self._take(len(self.buf))

    async def readexactly(self, n: int) -> bytes:
        """``n`` bytes (fewer at the end of the stream), read in pieces: a ``Content-Length`` far larger than
        what follows costs only what really arrives."""
        while len(self.buf) < n:
            if not await self._more():
                break
        return self._take(min(n, len(self.buf)))

    def _take(self, n: int) -> bytes:
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


async def _readline(reader, limit: int) -> bytes:
    if isinstance(reader, asyncio.StreamReader):
        try:
            return await reader.readline()
        except ValueError:  # over the stream's limit: the rest of the line is dropped by the next call
            return b"x" * (limit + 1)
    try:
        return await reader.readline(limit)
    except TypeError:  # a reader whose readline takes no limit
        return await reader.readline()


async def _read_line(reader) -> bytes | None:
    """One header line without its line end (CRLF or LF); None at the end of the stream.  A line longer than
    ``MAX_HEADER_LINE`` is read to its end and returned as ``b"\\0"`` (not a valid header)."""
    line = await _readline(reader, MAX_HEADER_LINE + 1)
    if not line:
        return None
    if len(line) > MAX_HEADER_LINE and not line.endswith(b"\n"):
        while True:  # skip the rest of the overlong line
            more = await _readline(reader, MAX_HEADER_LINE + 1)
            if not more or more.endswith(b"\n"):
                break
        log.warning("skipped a header line longer than %d bytes", MAX_HEADER_LINE)
        return b"\0"
    if line.endswith(b"\n"):
        line = line[:-1]
    if line.endswith(b"\r"):
        line = line[:-1]
    return line


def parse_headers(lines: list[bytes]) -> dict[str, str]:
    """``{lower-case name: value}`` of a frame's header lines (a line without ``:`` is ignored)."""
    out = {}
    for raw in lines:
        name, sep, value = raw.partition(b":")
        if not sep:
            continue
        try:
            out[name.decode("ascii").strip().lower()] = value.decode("ascii").strip()
        except UnicodeDecodeError:
            continue
    return out


def _content_length(headers: dict[str, str]) -> int | None:
    v = headers.get("content-length")
    if v is None or not v.isdigit():  # (isdigit: no sign, no spaces inside, no "1e3")
        return None
    return int(v)


def _error(protocol, code: int, message: str, msg_id=None) -> None:
    protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


async def run_async(stop_event, reader, protocol, logger: logging.Logger | None = None,
                    error_handler: Callable[[Exception, Any], Any] | None = None) -> None:
    """Read frames from ``reader`` until the end of the stream (or ``stop_event``) and hand each message to
    ``protocol.handle_message`` (pygls's ``JsonRPCProtocol``: ``structure_message`` is the JSON object hook)."""
    from pygls.exceptions import JsonRpcException

    logger = logger or log
    while not stop_event.is_set():
        lines: list[bytes] = []
        while True:
            line = await _read_line(reader)
            if line is None:
                return
            if not line:
                if lines:
                    break
                continue  # empty lines before a header block
            lines.append(line)
        headers = parse_headers(lines)
        n = _content_length(headers)
        if n is None:
            logger.warning("a frame without a valid Content-Length header was skipped (headers: %s)",
                           b" | ".join(lines)[:200])
            continue
        if n > MAX_BODY:
            logger.warning("dropped a frame of %d bytes (more than %d)", n, MAX_BODY)
            left = n
            while left > 0:  # (read and dropped in pieces: the next frame starts after it)
                try:
                    got = await reader.readexactly(min(left, 1 << 24))
                except asyncio.IncompleteReadError:
                    return
                if not got:
                    return
                left -= len(got)
            continue
        try:
            body = await reader.readexactly(n) if n else b""
        except asyncio.IncompleteReadError:
            return
        if len(body) < n:
            return  # the stream ended inside the body
        try:
            message = json.loads(body, object_hook=protocol.structure_message)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            logger.warning("a frame whose body is not JSON: %s", e)
            _error(protocol, PARSE_ERROR, f"Parse error: the body is not JSON text in UTF-8 ({e})")
            continue
        except Exception as exc:  # pygls's own handling of a message it cannot structure
            logger.exception("Unable to handle message")
            if error_handler:
                error_handler(exc, JsonRpcException)
            continue
        if isinstance(message, dict) or not hasattr(message, "jsonrpc"):
            # not a JSON-RPC message object: a JSON array (batch), number, string, or an object without
            # "jsonrpc" (structure_message leaves those as they are)
            msg_id = message.get("id") if isinstance(message, dict) else None
            if not isinstance(msg_id, (int, str)) or isinstance(msg_id, bool):
                msg_id = None
            if isinstance(message, dict) and "method" in message and "id" not in message:
                logger.warning("dropped a notification that is not JSON-RPC 2.0: %s", str(message)[:200])
                continue
            _error(protocol, INVALID_REQUEST, "Invalid Request: a message must be a JSON object with "
                   '"jsonrpc": "2.0"', msg_id)
            continue
        try:
            protocol.handle_message(message)
        except Exception as exc:  # as pygls: one message never ends the loop
            logger.exception("Unable to handle message")
            if error_handler:
                error_handler(exc, JsonRpcException)
