"""Virtual documents: the generated CUDA, PTX, SASS and IR of a kernel specialization.

URIs (docs/lsp-protocol.md)::

    newt:/<file stem>/<kernel>.<ext>?src=<encoded file uri>&spec=<n>&kind=<cuda|ptx|sass|ir>[&target=sm_90a]

``spec`` indexes the kernel's specializations as the front end lists them
(0 is the generic check, 1.. the specializations the file reveals).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, urlparse

__all__ = ["VDoc", "make_uri", "parse_uri", "KINDS", "LANGUAGE_IDS"]

KINDS = ("cuda", "ptx", "sass", "ir")
EXT = {"cuda": "cu", "ptx": "ptx", "sass": "sass", "ir": "ir"}
LANGUAGE_IDS = {"cuda": "cuda-cpp", "ptx": "ptx", "sass": "sass", "ir": "plaintext"}


@dataclass(frozen=True)
class VDoc:
    src: str  # the file's URI
    kernel: str
    spec: int
    kind: str
    target: str | None = None


def _stem(uri: str) -> str:
    path = urlparse(uri).path or uri
    base = os.path.basename(path.rstrip("/")) or "file"
    stem = base[:-3] if base.endswith(".py") else base
    return quote(stem, safe="")


def make_uri(src: str, kernel: str, spec: int, kind: str, target: str | None = None) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown document kind {kind!r}")
    q = f"src={quote(src, safe='')}&spec={int(spec)}&kind={kind}"
    if target:
        q += f"&target={quote(target, safe='')}"
    return f"newt:/{_stem(src)}/{quote(kernel, safe='')}.{EXT[kind]}?{q}"


def parse_uri(uri: str) -> VDoc:
    """Raises ``ValueError`` for a URI that is not one of ours."""
    p = urlparse(uri)
    if p.scheme != "newt":
        raise ValueError(f"not a newt document: {uri}")
    q = parse_qs(p.query)
    try:
        src = q["src"][0]
    except (KeyError, IndexError):
        raise ValueError(f"newt document without src: {uri}") from None
    name = os.path.basename(p.path)
    kernel, _, ext = name.rpartition(".")
    if not kernel:
        kernel = name
    kind = (q.get("kind") or [None])[0]
    if kind is None:
        kind = {v: k for k, v in EXT.items()}.get(ext, "cuda")
    if kind not in KINDS:
        raise ValueError(f"unknown document kind {kind!r} in {uri}")
    try:
        spec = int((q.get("spec") or ["1"])[0])
    except ValueError:
        raise ValueError(f"bad spec in {uri}") from None
    target = (q.get("target") or [None])[0]
    from urllib.parse import unquote
    return VDoc(src, unquote(kernel), spec, kind, target)
