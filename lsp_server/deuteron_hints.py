"""Inlay hints for deuteron (and Helion) kernels: ``: fp32[tile_m, tile_n]`` after names assigned in tile loops.

They come from deuteron's static tile-shape inference (``deuteron.shape_check``), whose value notes
(kind ``"value"``, with ``dims`` and ``dtype``) the front end keeps in the kernel's ``SpecResult.notes``; the same
notes are the value hovers.  Read by duck typing: nothing of deuteron is imported here.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from .analysis import Analysis
from .features import _assign_targets  # (one walker of assigned names for newt's and deuteron's hints)

__all__ = ["deuteron_inlay_hints", "hint_label"]


def hint_label(note, shapes: bool = True, dtypes: bool = True) -> str | None:
    """``: fp32[tile_m, tile_n]`` (``: [tile_m]`` where the dtype is unknown) of a deuteron value note."""
    dims = getattr(note, "dims", None)
    if getattr(note, "kind", None) != "value" or dims is None:
        return None
    dtype = getattr(note, "dtype", None) if dtypes else None
    shape = "[" + ", ".join(dims) + "]" if shapes else ""
    if not dtype and not shape:
        return None
    return f": {dtype or ''}{shape}"


def deuteron_inlay_hints(a: Analysis, rng: lsp.Range | None = None, shapes: bool = True, dtypes: bool = True
                         ) -> list[lsp.InlayHint]:
    if not (shapes or dtypes):
        return []
    lo, hi = (0, 10 ** 9) if rng is None else (rng.start.line + 1, rng.end.line + 1)
    src = a.file.source
    out = []
    for ka in a.kernels:
        if getattr(ka, "kind", None) != "deuteron" or not ka.results:
            continue
        if ka.def_span.end_line < lo or ka.def_span.line > hi:
            continue
        notes = ka.results[0].notes or {}
        seen = set()
        for name in _assign_targets(ka.node):
            if not lo <= name.lineno <= hi:
                continue
            span = src.span(name)
            if span in seen:
                continue
            seen.add(span)
            label = hint_label(notes.get(span), shapes, dtypes)
            if label is None:
                continue
            out.append(lsp.InlayHint(position=a.index.position(span.end_line, span.end_col), label=label,
                                     kind=lsp.InlayHintKind.Type, padding_left=False, padding_right=False))
    out.sort(key=lambda h: (h.position.line, h.position.character))
    return out
