"""The on-disk cache: content-addressed, atomic, checksummed, shared by processes.

Location: ``$NEWT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/newt`` or
``~/.cache/newt``.  ``NEWT_CACHE_DIR=""`` or ``NEWT_DISABLE_CACHE=1`` turns
the disk cache off.

An entry is one file ``<root>/<kind>/<key[:2]>/<key>.bin``::

    b"NEWT-CACHE-1\\n" + sha256(body).hexdigest() + b"\\n" + body
    body = len(header) as 8 bytes (little-endian) + header (JSON) + blobs

The header names the key, the metadata and each blob (name, text or bytes,
length).  Writers build the file under a unique temporary name in the same
directory and ``os.replace`` it into place, so readers see either nothing or
a complete entry; many processes may write the same key at once (the last
rename wins; the contents are identical).  A reader that finds a truncated
or corrupt file (bad magic, checksum or header) deletes it and reports a
miss, so the entry is rebuilt.  A right checksum says only that the file is
whole: ``get(..., validate=)`` also checks the entry against its kind's schema
(``compiler.check_entry`` for kernels: metadata fields, parameters, blobs and
the build options; ``autotuner._check_tuning_entry`` for tuning results), and
an entry that fails it is treated the same way (removed, a miss, rebuilt).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
import threading
import warnings
from pathlib import Path

MAGIC = b"NEWT-CACHE-1\n"


class UnsafePathError(PermissionError):
    """A directory or file that code is built in or loaded from is not private to this user."""


def _check_private(st: os.stat_result, path, what: str) -> None:
    if st.st_uid != os.geteuid():
        raise UnsafePathError(f"{what} {path} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafePathError(f"{what} {path} is writable by its group or by others "
                              f"(mode {stat.S_IMODE(st.st_mode):o})")


def private_dir(path: str | os.PathLike, tighten: bool = True) -> Path:
    """``path`` as a directory that only this user can change: created with its missing parents (mode 0700)
    when it does not exist; an existing one must be a real directory (not a symbolic link) owned by this
    user and not writable by its group or others -- with ``tighten``, one of ours that they may write (made
    by an older newt under umask 002) loses those write bits here.  ``UnsafePathError`` otherwise: another
    local user who creates the directory first (in a shared temporary directory) must not get to plant files
    in it.  (Files already in such a directory are checked one by one where they are used:
    ``check_private_file``.)"""
    p = Path(path)
    try:
        os.makedirs(p, mode=0o700, exist_ok=True)
    except FileExistsError:
        pass  # a non-directory (or a dangling link) there: reported below
    st = os.lstat(p)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{p} is not a directory" + (" (a symbolic link)" if stat.S_ISLNK(st.st_mode)
                                                           else ""))
    if tighten and st.st_uid == os.geteuid() and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:  # (through the descriptor: the very directory checked above)
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))
            st = os.fstat(fd)
        finally:
            os.close(fd)
    _check_private(st, p, "the directory")
    return p


def check_private_file(path: str | os.PathLike) -> None:
    """``UnsafePathError`` unless ``path`` is a regular file (not a symbolic link) owned by this user and not
    writable by its group or others: checked before a shared object is loaded from it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePathError(f"{path} is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{path} is not a regular file")
    _check_private(st, path, "the file")


def default_cache_dir() -> Path | None:
    if os.environ.get("NEWT_DISABLE_CACHE", "0") not in ("", "0"):
        return None
    env = os.environ.get("NEWT_CACHE_DIR")
    if env is not None:
        return Path(env).expanduser() if env.strip() else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "newt"


class CacheStats:
    __slots__ = ("hits", "misses", "writes", "corrupt", "write_errors")

    def __init__(self):
        self.hits = self.misses = self.writes = self.corrupt = self.write_errors = 0

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


class DiskCache:
    """One cache directory.  ``get``/``put`` whole entries; all methods are thread- and process-safe."""

    def __init__(self, root: str | os.PathLike | None):
        self.root = Path(root) if root is not None else None
        self.stats = CacheStats()
        self._warned = False
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def path(self, key: str, kind: str = "kernels") -> Path:
        if self.root is None:
            raise RuntimeError("the on-disk cache is disabled (NEWT_CACHE_DIR is empty)")
        return self.root / kind / key[:2] / f"{key}.bin"

    # -- reading ------------------------------------------------------------
    def get(self, key: str, kind: str = "kernels", validate=None):
        """``(meta, blobs)`` for ``key``, or None (missing, or corrupt and now removed).  ``validate(meta,
        blobs)``: the schema of this kind's entries; an entry it refuses (``ValueError``, ``TypeError``,
        ``KeyError``) counts as corrupt: removed, and a miss."""
        if self.root is None:
            return None
        p = self.path(key, kind)
        try:
            data = p.read_bytes()
        except OSError:
            self.stats.misses += 1
            return None
        try:
            entry = decode(data, key)
            if validate is not None:
                try:
                    validate(*entry)
                except (TypeError, KeyError) as e:
                    raise ValueError(f"malformed metadata: {e}") from None
        except ValueError as e:
            self.stats.corrupt += 1
            self.stats.misses += 1
            warnings.warn(f"newt: the cache entry {p} is corrupt ({e}); rebuilding it", RuntimeWarning, stacklevel=3)
            try:
                # remove it only if it is still the same bad file (a writer may have just replaced it)
                if p.read_bytes() == data:
                    p.unlink()
            except OSError:
                pass
            return None
        self.stats.hits += 1
        try:
            os.utime(p)  # the entry's last use, for ``trim`` (least recently used first)
        except OSError:
            pass
        return entry

    # -- writing ------------------------------------------------------------
    def put(self, key: str, meta: dict, blobs: dict | None = None, kind: str = "kernels") -> bool:
        if self.root is None:
            return False
        data = encode(key, meta, blobs or {})
        p = self.path(key, kind)
        tmp = None
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=p.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, p)
            tmp = None
            self.stats.writes += 1
            return True
        except OSError as e:
            self.stats.write_errors += 1
            if not self._warned:
                self._warned = True
                warnings.warn(f"newt: cannot write to the cache directory {self.root} ({e}); continuing without "
                              "saving compiled kernels (set NEWT_CACHE_DIR to a writable directory)",
                              RuntimeWarning, stacklevel=3)
            return False
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def get_json(self, key: str, kind: str, validate=None):
        """The JSON value stored by ``put_json``; ``validate(value)`` as ``get``'s."""
        e = self.get(key, kind, None if validate is None else (lambda meta, blobs: validate(meta)))
        return None if e is None else e[0]

    def put_json(self, key: str, value, kind: str) -> bool:
        return self.put(key, value, {}, kind)

    def trim(self, kind: str, max_bytes: int) -> int:
        """Keep the entries of ``kind`` within ``max_bytes``: remove the least recently used (written or read)
        until they fill at most three quarters of it.  Returns the number removed.  Safe against concurrent
        writers (a vanished file is skipped; a reader of a removed entry sees a miss)."""
        if self.root is None:
            return 0
        files = []
        total = 0
        for dirpath, _dirs, names in os.walk(self.root / kind):
            for n in names:
                if not n.endswith(".bin"):
                    continue
                f = os.path.join(dirpath, n)
                try:
                    st = os.stat(f)
                except OSError:
                    continue
                files.append((st.st_mtime, st.st_size, f))
                total += st.st_size
        if total <= max_bytes:
            return 0
        removed = 0
        goal = max_bytes * 3 // 4
        for _mt, size, f in sorted(files):
            if total <= goal:
                break
            try:
                os.unlink(f)
            except OSError:
                continue
            total -= size
            removed += 1
        return removed

    def clear(self):
        """Remove every entry (used by tests and ``newt.runtime.clear_cache``)."""
        import shutil
        if self.root is not None and self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)


def encode(key: str, meta: dict, blobs: dict) -> bytes:
    names, parts = [], []
    for name, value in blobs.items():
        if isinstance(value, str):
            b, kind = value.encode("utf-8"), "s"
        elif isinstance(value, (bytes, bytearray, memoryview)):
            b, kind = bytes(value), "b"
        else:
            raise TypeError(f"cache blob {name!r} must be str or bytes")
        names.append([name, kind, len(b)])
        parts.append(b)
    header = json.dumps({"key": key, "meta": meta, "blobs": names}, sort_keys=True).encode("utf-8")
    body = len(header).to_bytes(8, "little") + header + b"".join(parts)
    return MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def decode(data: bytes, key: str | None = None):
    """``(meta, blobs)`` from an entry's bytes; ValueError if it is truncated or corrupt."""
    if not data.startswith(MAGIC):
        raise ValueError("bad magic" if data else "empty file")
    head = len(MAGIC)
    digest, body = data[head:head + 64], data[head + 65:]
    if len(data) < head + 65 or data[head + 64:head + 65] != b"\n":
        raise ValueError("truncated header")
    if hashlib.sha256(body).hexdigest().encode() != digest:
        raise ValueError("checksum mismatch (truncated or modified)")
    n = int.from_bytes(body[:8], "little")
    try:
        header = json.loads(body[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"bad header: {e}") from None
    _check_header(header)
    if key is not None and header.get("key") != key:
        raise ValueError("the entry belongs to another key")
    blobs = {}
    off = 8 + n
    for name, kind, length in header["blobs"]:
        b = body[off:off + length]
        if len(b) != length:
            raise ValueError("truncated blob")
        blobs[name] = b.decode("utf-8") if kind == "s" else b
        off += length
    if off != len(body):
        raise ValueError("trailing bytes")
    return header["meta"], blobs


def _check_header(header):
    """ValueError unless the header is ``{"key": str, "meta": dict, "blobs": [[name, "s"|"b", length], ...]}``
    (an entry whose checksum is right can still have been written by a different newt)."""
    if not isinstance(header, dict):
        raise ValueError(f"malformed header: a JSON {type(header).__name__}, not an object")
    if not isinstance(header.get("key"), str) or not isinstance(header.get("meta"), dict):
        raise ValueError("malformed header: no key or no metadata object")
    blobs = header.get("blobs")
    if not isinstance(blobs, list):
        raise ValueError("malformed header: no blob list")
    for b in blobs:
        if not (isinstance(b, list) and len(b) == 3 and isinstance(b[0], str) and b[1] in ("s", "b")
                and type(b[2]) is int and b[2] >= 0):
            raise ValueError(f"malformed header: bad blob record {b!r}")


_DEFAULT: DiskCache | None = None
_DEFAULT_ROOT = object()


def get_cache() -> DiskCache:
    """The process's disk cache (re-reads ``NEWT_CACHE_DIR`` when it changes)."""
    global _DEFAULT, _DEFAULT_ROOT
    root = default_cache_dir()
    if _DEFAULT is None or root != _DEFAULT_ROOT:
        _DEFAULT = DiskCache(root)
        _DEFAULT_ROOT = root
    return _DEFAULT


def hash_key(obj) -> str:
    """sha256 of a JSON-able object (sorted keys): the content address of an entry."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode("utf-8")).hexdigest()
