"""Reading a file an editor (or a workspace) names: regular files only, under a size cap.

A ``file:`` uri from the client -- ``newt.show`` and the other requests on a document that is not open read
it from disk -- may name a FIFO, ``/dev/stdin`` or ``/dev/zero``: a plain ``open().read()`` would block the
server for good or read until memory runs out.  :func:`read_document` opens without blocking
(``O_NONBLOCK``), checks with ``fstat`` that it has a regular file, and reads at most
:data:`MAX_DOCUMENT_BYTES`; anything else raises :class:`UnreadableDocument` with the reason."""

from __future__ import annotations

import os
import stat

__all__ = ["MAX_DOCUMENT_BYTES", "UnreadableDocument", "read_document"]

#: the largest file read from disk (an open document's text comes from the editor and has no such cap)
MAX_DOCUMENT_BYTES = 32 << 20

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class UnreadableDocument(OSError):
    """The file is not a regular file, is too large or is not UTF-8 text."""


def _not_regular(path, st) -> UnreadableDocument:
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    return UnreadableDocument(f"{path} is {kind}: newt reads only regular files")


def read_document(path: str | os.PathLike, max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """The UTF-8 text of the regular file ``path`` (line ends kept as they are).  ``UnreadableDocument`` for
    a FIFO, device, socket or directory, a file over ``max_bytes`` or one that is not UTF-8; ``OSError`` when
    it cannot be opened."""
    st = os.stat(path)  # (devices are refused before they are opened: opening one can have effects)
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)  # what was opened (the name may have been replaced since the check)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st)
        if st.st_size > max_bytes:
            raise UnreadableDocument(f"{path} is {st.st_size} bytes, more than newt reads ({max_bytes} bytes)")
        chunks, total = [], 0
        while total <= max_bytes:
            b = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
        if total > max_bytes:
            raise UnreadableDocument(f"{path} grew past {max_bytes} bytes while it was read")
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnreadableDocument(f"{path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
