"""Rebinding what modules imported from a real foreign package before the drop-in was installed.

``install()`` forgets the real ``triton`` (or ``helion``) modules a process imported before it, so the next
``import triton`` comes from newt.  But a module imported earlier keeps its own references: torch's inductor
(``torch._inductor.runtime.triton_heuristics`` holds ``triton``, ``ASTSource``, ``GPUTarget``, ``Config``, ... at
module level) would go on compiling through the real package, whose backends newt does not register ("0
compatible backends for target (cpu)").  :func:`rebind` points such references at the served equivalents: a
module at the served module of the same name, any other object at the served attribute of the same name in the
module where the real package exposed it (its defining module first).  A reference with no served equivalent,
or whose served module cannot be imported, is left as it is; so are objects the real package created for the
importing module (a ``@triton.jit`` kernel of a library imported before ``install()``: that library has to be
imported after it, as ``python -m newt.dropin`` does).
"""

from __future__ import annotations

import importlib
import sys
import types

__all__ = ["rebind", "restore"]

#: modules whose own globals are never rewritten (newt's, and the interpreter's own machinery)
_SKIP = ("newt", "builtins", "sys", "importlib", "_frozen_importlib", "__main__")


def _index(real: dict[str, types.ModuleType]) -> dict[int, list[tuple[str, str]]]:
    """id(object) -> [(real module name, attribute name)], the defining module's entry first."""
    idx: dict[int, list[tuple[str, str]]] = {}
    for mname, mod in real.items():
        for attr, v in list(getattr(mod, "__dict__", {}).items()):
            if attr.startswith("__") or issubclass(type(v), _PLAIN):
                continue
            idx.setdefault(id(v), []).append((mname, attr))
    for places in idx.values():
        if len(places) > 1:
            # (the module that defines it first: where the served package most likely defines it too)
            places.sort(key=lambda p: 0 if _defined_in(real[p[0]], p[1]) else 1)
    return idx


def _defined_in(mod: types.ModuleType, attr: str) -> bool:
    v = mod.__dict__.get(attr)
    return getattr(v, "__module__", None) == mod.__name__


def _served(name: str, attr: str | None, cache: dict) -> object:
    """The served module ``name`` (attr None) or its attribute ``attr``; ``cache[...] = _MISSING`` on failure."""
    key = (name, attr)
    if key not in cache:
        try:
            mod = importlib.import_module(name)
            cache[key] = mod if attr is None else getattr(mod, attr)
        except Exception:  # (a served package that lacks the module or the name: keep the reference)
            cache[key] = _MISSING
    return cache[key]


_MISSING = object()
#: values shared by coincidence, never rebound (a small int or an interned string is the same object everywhere)
_PLAIN = (int, float, complex, str, bytes, bool, type(None))


def rebind(real: dict[str, types.ModuleType], tops: tuple[str, ...]) -> list:
    """Point the globals of every loaded module (newt's and the served packages' own excepted) that reference
    one of ``real``'s modules or their objects at the served equivalents.  ``real``: the forgotten real modules
    by name; ``tops``: the served top-level names.  Returns what :func:`restore` needs to undo it (one entry
    per reference rebound)."""
    if not real:
        return []
    real_ids = {id(m): n for n, m in real.items()}
    idx = _index(real)
    cache: dict = {}
    undo: list = []
    for mname, mod in list(sys.modules.items()):
        if mod is None or mname.split(".")[0] in tops or mname.split(".")[0] in _SKIP:
            continue
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for attr, v in list(d.items()):
            if attr.startswith("__"):
                continue
            new: object = _MISSING
            if issubclass(type(v), types.ModuleType):  # (type(), not isinstance: no object's __class__ runs)
                if id(v) in real_ids and real[real_ids[id(v)]] is v:
                    new = _served(real_ids[id(v)], None, cache)
            elif id(v) in idx and not issubclass(type(v), _PLAIN):
                for rmod, rattr in idx[id(v)]:
                    if real[rmod].__dict__.get(rattr) is not v:
                        continue
                    new = _served(rmod, rattr, cache)
                    if new is not _MISSING:
                        break
            if new is not _MISSING and new is not v:
                d[attr] = new
                undo.append((d, attr, v, new))
    return undo


def restore(undo: list) -> int:
    """Undo :func:`rebind` (``uninstall()``): each reference still holding what it was rebound to gets its
    real object back.  Returns how many."""
    n = 0
    for d, attr, old, new in reversed(undo):
        if d.get(attr) is new:
            d[attr] = old
            n += 1
    undo.clear()
    return n
