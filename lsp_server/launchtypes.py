"""Dtypes of unannotated pointer parameters from the file's launches (issue 15, item 11).

Most kernels people write say nothing about their pointers' dtypes (``def k(x_ptr, out_ptr, n, BLOCK:
tl.constexpr)``): the front end's generic check sees ``?[BLOCK]`` loads, so hover cannot say ``fp16`` and
the dtype rules (a bitwise operator on floats, an int8 accumulator) have nothing to fire on.  The host code
usually does say it: ``x = torch.randn(n, dtype=torch.float16)`` ... ``k[grid](x, ...)``.  Compile already
reads that statically (``hostvalues.host_pointer_dtypes`` through ``concrete.concrete_spec``); here the same
concrete specialization is built once per kernel version, for hover (a row "from the launches") and for
diagnostics (the dtype checks, with the launch named as their context).  Nothing of the workspace runs.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from lsprotocol import types as lsp

from newt.frontend.diagnostics import Severity

__all__ = ["launch_typed", "launch_diagnostics"]

log = logging.getLogger("newt-lsp")

_CACHE: OrderedDict = OrderedDict()  # (kernel content key, specialization) -> (label, notes, diagnostics)
_MAX = 256
_SEVERITY = {Severity.ERROR: lsp.DiagnosticSeverity.Error, Severity.WARNING: lsp.DiagnosticSeverity.Warning,
             Severity.INFO: lsp.DiagnosticSeverity.Information, Severity.HINT: lsp.DiagnosticSeverity.Hint}


class LaunchTyped:
    """The kernel built with the dtypes its launches pass: ``label`` says which (``x_ptr: *fp16, ...``)."""

    __slots__ = ("label", "notes", "diagnostics", "complete")

    def __init__(self, label, notes, diagnostics, complete=True):
        self.label, self.notes, self.diagnostics = label, notes, diagnostics
        #: every pointer's dtype is known (annotated or from the host code); else the label names the ones
        #: assumed, and no diagnostic comes from this build (an assumed *fp32 would make up type errors)
        self.complete = complete


def launch_typed(a, ka) -> LaunchTyped | None:
    """The build of ``ka`` with its launches' pointer dtypes, or None when no unannotated pointer gets one
    from the host code (or the kernel needs values only the run time has)."""
    if ka.kind != "jit" or ka.helper or not ka.results:
        return None
    key_local = ("launch-typed", ka.name)
    if key_local in a.extra:
        return a.extra[key_local]
    got = None
    try:
        from .concrete import SpecError, build_concrete, concrete_spec
        try:
            conc = concrete_spec(a, ka)
        except SpecError:
            conc = None
        from_host = {n: why for n, why in (conc.assumed.items() if conc is not None else ())
                     if why.startswith("*") and "(from the host code" in why}
        guessed = sorted(n for n, why in (conc.assumed.items() if conc is not None else ())
                         if why.startswith("*") and "(assumed" in why)
        if from_host:
            key = (getattr(ka, "content_key", None), ka.def_span.line, conc.describe())
            hit = _CACHE.get(key) if key[0] is not None else None
            if hit is not None:
                _CACHE.move_to_end(key)
                got = hit
            else:
                built = build_concrete(a, ka, conc)
                srcs = {"examples" if "the example " in why else "launches" for why in from_host.values()}
                dtypes = ", ".join(f"{n}: {why.split(' ', 1)[0]}" for n, why in sorted(from_host.items()))
                label = "from the " + " and ".join(sorted(srcs, reverse=True)) + f" ({dtypes}"
                if guessed:
                    label += "; assumed " + ", ".join(f"{n}: *fp32" for n in guessed)
                label += ")"
                got = LaunchTyped(label, dict(built.notes), list(built.diagnostics), complete=not guessed)
                if key[0] is not None:
                    _CACHE[key] = got
                    while len(_CACHE) > _MAX:
                        _CACHE.popitem(last=False)
    except Exception:  # noqa: BLE001 - a hover or the diagnostics never fail for this
        log.debug("launch dtypes of %s failed", ka.name, exc_info=True)
        got = None
    a.extra[key_local] = got
    return got


def launch_diagnostics(a) -> list[lsp.Diagnostic]:
    """The diagnostics that only the launches' dtypes reveal (none that the analysis reports already)."""
    seen = {(d.code, d.span.line, d.span.col) for d in a.file.diagnostics}
    out = []
    for ka in a.kernels:
        lt = launch_typed(a, ka)
        if lt is None or not lt.complete:
            continue
        for d in lt.diagnostics:
            if d.code == "N001" or (d.code, d.span.line, d.span.col) in seen:
                continue
            seen.add((d.code, d.span.line, d.span.col))
            msg = d.message + f" [{ka.name} {lt.label}]"
            if d.hint:
                msg += f"\nhint: {d.hint}"
            out.append(lsp.Diagnostic(range=a.index.range(d.span), message=msg, code=d.code, source="newt",
                                      severity=_SEVERITY.get(d.severity, lsp.DiagnosticSeverity.Error),
                                      data={"code": d.code, "kernel": ka.name, "launch_dtypes": True}))
    return out
