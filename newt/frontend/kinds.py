"""Kernel kinds other than ``@newt.jit``, registered by the packages that define them.

newt's front end knows ``@newt.jit`` kernels only.  Another tile language built on newt marks its
kernels with its own decorator and checks them with its own analyzer; it registers both here, from
its own package, so newt never has to know it exists::

    from newt.frontend import register_kernel_kind
    register_kernel_kind("mylang.kernel", analyze_kernel, codes={"M001": ("my-error", "what it means")})

``Analyzer.analyze`` (and ``analyze_source``) then treats every function decorated with ``@mylang.kernel``
(under any import alias) as a kernel of kind ``"mylang"`` and calls ``analyze_kernel(scan, src, kernel_def)``
for it, which returns a ``KernelAnalysis`` (an analyzer that raises gives one ``N001`` warning instead).
The static resolver may import modules of the kind's top-level package (``mylang``) to resolve names such
as ``mylang.tile``.

Composition roots (``python -m newt``, a language server) find the kinds installed in the
environment through the ``newt.kernel_kinds`` entry-point group: each entry point names a function
that calls ``register_kernel_kind`` (:func:`load_installed_kinds`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

__all__ = ["KernelKind", "register_kernel_kind", "unregister_kernel_kind", "kind_of_decorator", "analyzer_for",
           "trusted_roots", "load_installed_kinds", "ENTRY_POINT_GROUP", "register_module_alias",
           "module_aliases"]

ENTRY_POINT_GROUP = "newt.kernel_kinds"


@dataclass(frozen=True)
class KernelKind:
    name: str
    #: whether a decorator (its resolved qualified name, e.g. ``"mylang.kernel"``) marks this kind
    matches: Callable[[str], bool]
    #: ``analyzer(scan, src, kernel_def) -> KernelAnalysis``
    analyzer: Callable
    #: top-level packages the static resolver may import for this kind's names
    roots: tuple[str, ...]
    #: the diagnostic codes it added to ``CODES``
    codes: tuple[str, ...] = ()


_KINDS: dict[str, KernelKind] = {}


def register_kernel_kind(qualname_or_predicate: str | Callable[[str], bool], analyzer: Callable, *,
                         name: str | None = None, roots: tuple[str, ...] | None = None,
                         codes: dict | None = None) -> KernelKind:
    """Register a kernel kind (registering the same name again replaces it).

    ``qualname_or_predicate``: the decorator's qualified name (``"mylang.kernel"``) or a predicate over
    resolved decorator names.  ``name`` (default: the qualname's top-level package) labels the kind in
    ``KernelDef.kind``; ``roots`` (default: that package) are the packages the resolver may import;
    ``codes`` adds the kind's diagnostic codes to ``newt.diagnostics.CODES``."""
    if isinstance(qualname_or_predicate, str):
        q = qualname_or_predicate
        top = q.split(".")[0]
        kind = KernelKind(name or top, q.__eq__, analyzer, tuple(roots or (top,)))
    else:
        if name is None:
            raise TypeError("register_kernel_kind: a predicate needs name=")
        kind = KernelKind(name, qualname_or_predicate, analyzer, tuple(roots or ()))
    if kind.name == "jit":
        raise ValueError("'jit' is newt's own kernel kind")
    if codes:
        from newt.diagnostics import register_codes
        register_codes(codes)
        kind = replace(kind, codes=tuple(codes))
    _KINDS[kind.name] = kind
    return kind


def unregister_kernel_kind(name: str) -> KernelKind | None:
    """Remove a registered kind and the codes it added; returns it, or None if it was not there."""
    kind = _KINDS.pop(name, None)
    if kind is not None and kind.codes:
        from newt.diagnostics import CODES
        for c in kind.codes:
            CODES.pop(c, None)
    return kind


def kind_of_decorator(qualname: str) -> str | None:
    """The registered kind a decorator marks, or None."""
    for k in _KINDS.values():
        if k.matches(qualname):
            return k.name
    return None


def analyzer_for(kind: str) -> Callable | None:
    k = _KINDS.get(kind)
    return k.analyzer if k is not None else None


def trusted_roots() -> tuple[str, ...]:
    """The top-level packages of the registered kinds."""
    return tuple(r for k in _KINDS.values() for r in k.roots)


#: another project's top-level package read as a registered kind's own (``{"helion": "deuteron"}``)
_MODULE_ALIASES: dict[str, str] = {}


def register_module_alias(foreign: str, own: str) -> None:
    """Read the top-level package ``foreign`` (and its submodules) as ``own`` when resolving a file's names:
    a kind that implements another project's language (``helion`` for a Helion-like one) registers this so
    files written for that project are analyzed as they are, with messages in their own spelling."""
    if "." in foreign or "." in own or not foreign or not own:
        raise ValueError(f"register_module_alias: top-level package names expected, got {foreign!r} -> {own!r}")
    _MODULE_ALIASES[foreign] = own


def module_aliases() -> dict[str, str]:
    """The registered ``{foreign: own}`` package aliases (a copy)."""
    return dict(_MODULE_ALIASES)


_loaded = False


def load_installed_kinds() -> list[str]:
    """Register the kinds that installed packages advertise (entry-point group ``newt.kernel_kinds``);
    once per process.  Returns the entry points that failed to load, as ``"name: error"``."""
    global _loaded
    if _loaded:
        return []
    _loaded = True
    from importlib.metadata import entry_points
    failed = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()()
        except Exception as e:  # a broken plugin must not take the checker down
            failed.append(f"{ep.name}: {type(e).__name__}: {e}")
    return failed
