"""Messages in the names the user's file uses (issue 15, item 6).

The front end's messages and hints name the language the way newt's own files spell it: ``nl.arange``,
``x.to(nl.int32)``, ``@newt.jit``.  A Triton file (``import triton.language as tl``, ``@triton.jit``) is
analyzed as it is, so its messages should say ``tl.arange`` and ``@triton.jit``, and a Helion file
(``import helion.language as hl``, checked by deuteron) ``hl.tile``.  :class:`Spelling` is that renaming,
read from the file's own import statements; :meth:`Spelling.respell` applies it to one message.

Only whole dotted names are renamed (``nl.`` not preceded by a letter, digit or dot), and only the prefixes
the file's imports decide: a file that imports ``newt.language as nl`` keeps every ``nl.``.
"""

from __future__ import annotations

import re

from .kinds import module_aliases

__all__ = ["Spelling", "NEWT_SPELLING"]

#: newt's top-level names that Triton spells the same under ``triton.`` (``@newt.jit`` -> ``@triton.jit``)
_TRITON_TOP = ("jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "testing")
#: deuteron's top-level names that Helion has under ``helion.`` (``dt.kernel`` -> ``helion.kernel``), not ``hl.``
_HELION_TOP = ("kernel", "Config", "exc", "runtime")


def _aliases_of(imports: dict, targets: tuple) -> list:
    return [a for a, q in imports.items() if q in targets]


class Spelling:
    """``nl.`` / ``newt.`` / ``dt.`` as the file spells them (``tl.`` / ``triton.`` / ``hl.``)."""

    __slots__ = ("lang", "top", "dt", "dt_top", "_subs")

    def __init__(self, lang: str = "nl", top: str = "newt", dt: str = "dt", dt_top: str | None = None):
        self.lang, self.top, self.dt, self.dt_top = lang, top, dt, dt_top or dt
        subs: list[tuple[re.Pattern, str]] = []
        if lang != "nl":
            subs.append((re.compile(r"(?<![\w./])nl\.(?=[A-Za-z_])"), lang + "."))
        if top != "newt":
            subs.append((re.compile(r"(?<![\w./])newt\.(?=(?:" + "|".join(_TRITON_TOP) + r")\b)"), top + "."))
        if self.dt_top != dt:
            subs.append((re.compile(r"(?<![\w./])dt\.(?=(?:" + "|".join(_HELION_TOP) + r")\b)"), self.dt_top + "."))
        if dt != "dt":
            subs.append((re.compile(r"(?<![\w./])dt\.(?=[A-Za-z_])"), dt + "."))
        self._subs = tuple(subs)

    @property
    def identity(self) -> bool:
        return not self._subs

    @classmethod
    def of_imports(cls, imports: dict) -> "Spelling":
        """From ``{alias: module or name as written}`` (``{"tl": "triton.language", "triton": "triton"}``):
        the language is named by the file's alias of ``newt.language`` / ``triton.language`` (``nl`` when
        the file binds ``nl`` or has none; ``triton.language`` for a file that imports ``triton`` only);
        ``newt.jit`` and the other shared top-level names become ``triton.jit`` in a file that imports
        triton and not newt; ``dt.`` becomes the alias of ``helion.language`` (``hl.``) and ``dt.kernel``
        ``helion.kernel`` in a Helion file."""
        if not imports:
            return NEWT_SPELLING
        written = set(imports.values())
        imports_newt = any(q == "newt" or q.startswith("newt.") for q in written)
        triton_top = _aliases_of(imports, ("triton",))
        lang_aliases = _aliases_of(imports, ("newt.language", "triton.language"))
        if lang_aliases:
            lang = "nl" if "nl" in lang_aliases else lang_aliases[0]
        elif triton_top and not imports_newt:
            lang = f"{triton_top[0]}.language"
        else:
            lang = "nl"
        top = "newt"
        if not imports_newt and any(q == "triton" or q.startswith("triton.") for q in written):
            top = triton_top[0] if triton_top else "triton"
        dt, dt_top = "dt", None
        for foreign, own in module_aliases().items():  # the tile-language kind and the project it reads
            dt_aliases = _aliases_of(imports, (own, own + ".language", foreign + ".language"))
            foreign_top = _aliases_of(imports, (foreign,))
            if foreign_top and not any(q == own or q.startswith(own + ".") for q in written):
                dt = dt_aliases[0] if dt_aliases else f"{foreign_top[0]}.language"
                dt_top = foreign_top[0]
                break
            if dt_aliases and "dt" not in dt_aliases:
                dt = dt_aliases[0]
                break
        return cls(lang, top, dt, dt_top)

    def respell(self, text: str | None) -> str | None:
        """``text`` with newt's prefixes in the file's spelling (None stays None)."""
        if not text or not self._subs:
            return text
        for pat, rep in self._subs:
            text = pat.sub(rep, text)
        return text

    def __repr__(self) -> str:
        return f"Spelling(lang={self.lang!r}, top={self.top!r}, dt={self.dt!r}, dt_top={self.dt_top!r})"


NEWT_SPELLING = Spelling()
