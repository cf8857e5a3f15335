"""Hover: types, shapes and layouts inside kernels; kernels; the language's own names."""

from __future__ import annotations

import ast
import logging
import re
from collections import OrderedDict

from lsprotocol import types as lsp

from newt.frontend.values import Const, JitRef, Opaque, PyFunc, Sym, TensorV, TupleV

from . import language
from .analysis import Analysis
from .concrete import SpecError, backend, build_concrete, concrete_spec, generate
from .textutil import dotted_at, spelling_of
from .vdocs import make_uri

__all__ = ["hover", "describe_value", "value_parts", "kernel_summary", "MAX_LAYOUT_SPECS", "layout_table",
           "warm_layouts", "LAYOUT_TABLES"]

log = logging.getLogger("newt-lsp")

MAX_LAYOUT_SPECS = 4
CUDA_PREVIEW_LINES = 40


# ---------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------


def _dim(d) -> str:
    return str(d)


def value_parts(av):
    """(dtype text, shape text or None) of an abstract value; None for values without a type."""
    if isinstance(av, TensorV):
        try:
            dt = av.dtype
            shape = av.shape
        except Exception:
            return None
        dts = f"*{dt.element_ty}" if getattr(dt, "is_ptr", lambda: False)() else str(dt)
        shp = "[" + ", ".join(_dim(d) for d in shape) + "]" if shape else None
        return dts, shp
    return None


def describe_value(av) -> str:
    """One short line: ``fp32[BLOCK_M, BLOCK_N]``, ``constexpr 1024``, ``*fp16`` ..."""
    parts = value_parts(av)
    if parts is not None:
        dts, shp = parts
        if shp:
            return f"{dts}{shp}"
        return dts if dts.startswith("*") else f"{dts} scalar"
    if isinstance(av, Const):
        v = av.value
        if hasattr(v, "short_name") and hasattr(v, "name"):
            return f"dtype {v!r}"
        if getattr(v, "__newt_builtin__", None):
            return f"nl.{v.__newt_builtin__}"
        if hasattr(v, "__name__") and type(v).__name__ == "module":
            return f"module {v.__name__}"
        return f"constexpr {v!r}"
    if isinstance(av, Sym):
        return f"constexpr {av.expr}"
    if isinstance(av, TupleV):
        if av.fields and len(av.fields) == len(av.items):  # a named tuple: Stats(mean=fp32[64], var=...)
            name = getattr(av.ntype, "__name__", "") if av.ntype is not None else ""
            return f"{name}(" + ", ".join(f"{f}={describe_value(x)}" for f, x in zip(av.fields, av.items)) + ")"
        return "(" + ", ".join(describe_value(x) for x in av.items) + (",)" if len(av.items) == 1 else ")")
    if isinstance(av, JitRef):
        return f"jit function {av.fn.name}"
    if isinstance(av, PyFunc):
        return f"Python function {av.name} (not callable in a kernel)"
    if isinstance(av, Opaque):
        return "unknown"
    d = getattr(av, "describe", None)
    if callable(d):  # other front ends' notes (deuteron)
        try:
            return str(d())
        except Exception:
            pass
    name = type(av).__name__
    if name == "Method":
        return f"method .{getattr(av, 'name', '?')}"
    if name == "Undef":
        return "possibly undefined"
    return name


def _layout_of(layouts, v) -> str | None:
    if layouts is None or v is None:
        return None
    lay = None
    try:
        lay = layouts.get(v)
    except Exception:  # unhashable keys: the backend keys on value names
        lay = None
    if lay is None and getattr(v, "id", -1) is not None and getattr(v, "id", -1) >= 0:
        lay = layouts.get(f"%{v.id}")
    if lay is None:
        return None
    d = getattr(lay, "describe", None)
    try:
        return d() if callable(d) else str(lay)
    except Exception:
        return None


# ---------------------------------------------------------------------------
# hover
# ---------------------------------------------------------------------------


_SHOW_COMMANDS = {"cuda": "newt.showCuda", "ptx": "newt.showPtx", "sass": "newt.showSass", "ir": "newt.showIr"}


class _Out:
    def __init__(self, markdown: bool, command_links: bool = False):
        self.md = markdown
        #: VS Code renders only http(s)/file/command links in hovers: there the links run the client's
        #: newt.show* commands (the extension marks them trusted); other clients get the newt: URIs
        self.command_links = command_links and markdown
        self.lines: list[str] = []

    def doc_link(self, a: Analysis, ka, spec_index: int, kind: str, title: str) -> str:
        uri = make_uri(a.uri, ka.name, spec_index, kind)
        if self.command_links:
            import json
            from urllib.parse import quote
            pos = a.index.position(ka.span.line, ka.span.col)
            args = [a.uri, {"line": pos.line, "character": pos.character}]
            if spec_index > 0:
                args.append({"spec": spec_index})
            tip = f"Open the {title} of {ka.name}"
            return f"[{title}](command:{_SHOW_COMMANDS[kind]}?{quote(json.dumps(args))} \"{tip}\")"
        return f"[{title}]({uri})" if self.md else f"{title}: {uri}"

    def code(self, text: str, lang: str = "python"):
        if self.md:
            self.lines.append(f"```{lang}\n{text}\n```")
        else:
            self.lines.append(text)

    def text(self, s: str):
        self.lines.append(s)

    def render(self) -> str:
        return ("\n\n" if self.md else "\n").join(x for x in self.lines if x is not None)


def hover(a: Analysis, pos: lsp.Position, markdown: bool = True, target: str = "sm_90a",
          command_links: bool = False, cached_layouts: bool = False) -> lsp.Hover | None:
    """The hover at ``pos``.  ``cached_layouts``: show only layouts generated already (warmed while the user
    paused), never run the backend now (the engine answers so while edits stream in).  In the names the
    file uses: ``tl.`` and ``@triton.jit`` in a Triton file (``newt.frontend.spelling``)."""
    h = _hover(a, pos, markdown, target, command_links, cached_layouts)
    sp = spelling_of(a)
    if h is not None and not sp.identity and isinstance(h.contents, lsp.MarkupContent):
        h.contents.value = sp.respell(h.contents.value)
    return h


def _hover(a: Analysis, pos: lsp.Position, markdown: bool, target: str, command_links: bool,
           cached_layouts: bool) -> lsp.Hover | None:
    line1, col1 = a.index.char_col(pos)
    line = a.index.line(line1 - 1)
    at = dotted_at(line, col1 - 1)
    ka = a.kernel_at(line1)
    out = _Out(markdown, command_links)
    rng = None
    if at is not None:
        s, e, parts = at
        rng = a.index.range(_span(line1, s + 1, e + 1))
        # a kernel's name (its def, a call, a launch)
        kname = parts[-1] if len(parts) == 1 else None
        k = a.kernel_named(kname) if kname else None
        if k is not None and (k.span.line == line1 or ka is None or ka is not k):
            kernel_summary(a, k, out, target)
            return _result(out, rng, markdown)
        # the language: nl.load, nl.math.exp, dt.tile, newt.jit
        q = _qualname(a, parts)
        if q is not None:
            m = language.lookup(q)
            if m is not None:
                _member(out, m, parts)
                return _result(out, rng, markdown)
            if _helion_name(a, parts):  # hl.jagged_tile: Helion has it, deuteron does not
                out.code(".".join(parts))
                out.text(f"Helion's `{'.'.join(parts)}`: deuteron, which the editor checks Helion kernels with, "
                         "does not cover it, so it has no signature or checks here.")
                return _result(out, rng, markdown)
    if ka is not None and ka.results:
        if _value_hover(a, ka, line1, col1, out, target, at, cached_layouts):
            sp = out.span if hasattr(out, "span") else None
            return _result(out, a.index.range(sp) if sp is not None else rng, markdown)
    return None


def _span(line1, c1, c2):
    from newt.diagnostics import Span
    return Span(line1, c1, line1, c2)


def _result(out: _Out, rng, markdown: bool) -> lsp.Hover | None:
    text = out.render()
    if not text.strip():
        return None
    kind = lsp.MarkupKind.Markdown if markdown else lsp.MarkupKind.PlainText
    return lsp.Hover(contents=lsp.MarkupContent(kind=kind, value=text), range=rng)


def _qualname(a: Analysis, parts: list[str]) -> str | None:
    if not parts or not parts[0]:
        return None
    base = a.aliases.get(parts[0])
    if base is None:
        return None
    q = ".".join([base] + parts[1:])
    if q.split(".")[0] not in ("newt", "deuteron"):
        return None
    return q


def _helion_name(a: Analysis, parts: list[str]) -> bool:
    scan = a.file.scan
    raw = (getattr(scan, "imports", None) or {}).get(parts[0], "") if scan is not None else ""
    return len(parts) > 1 and (raw == "helion" or raw.startswith("helion."))


def _member(out: _Out, m, parts):
    prefix = ".".join(parts[:-1]) + "." if len(parts) > 1 else ""
    if m.kind in ("function", "class", "method"):
        out.code(f"{prefix}{m.signature}" if m.signature else f"{prefix}{m.name}")
    elif m.kind == "dtype":
        out.code(f"{prefix}{m.name}  # dtype")
    elif m.kind == "module":
        out.code(f"module {m.qualname}")
    else:
        out.code(f"{prefix}{m.name}")
    if m.doc:
        out.text(m.doc)


def _value_hover(a: Analysis, ka, line1, col1, out: _Out, target, at, cached_layouts: bool = False) -> bool:
    best = None
    for r in ka.results:
        hit = a.notes_at(r, line1, col1)
        if hit is not None and (best is None or _size(hit[0]) < _size(best)):
            best = hit[0]
    if best is None:
        return False
    rows = []
    for i, r in enumerate(ka.results):
        av = a.note_for_span(r, best)
        if av is not None:
            rows.append((i, r, av))
    if not rows:
        return False
    first_av = rows[0][2]
    # a method (x.to): its documentation
    if type(first_av).__name__ == "Method":
        m = language.tensor_method(getattr(first_av, "name", ""))
        if m is not None:
            out.code(f"(method) {m.signature}")
            if m.doc:
                out.text(m.doc)
            out.span = best
            return True
    if isinstance(first_av, Const) and getattr(first_av.value, "__newt_builtin__", None):
        return False
    expr = _span_text(a, best)
    layouts = _layouts(a, ka, best, rows, target, cached_layouts)
    head = f"{expr}" if len(expr) <= 60 else expr[:57] + "..."
    pm = re.match(r"\s*([A-Za-z_]\w*)\s*:", expr)
    if pm and isinstance(getattr(ka, "node", None), ast.FunctionDef) and any(
            p.arg == pm.group(1) for p in ka.node.args.args + ka.node.args.posonlyargs + ka.node.args.kwonlyargs):
        head = pm.group(1)  # a parameter with its annotation: the name (not "BLOCK: nl.constexpr: ...")
    descs = [(i, r, av, describe_value(av), layouts.get(i)) for i, r, av in rows]
    distinct = {d for _, _, _, d, _ in descs}
    first = descs[0][3]
    if first == f"constexpr {head}":
        first = "constexpr"  # the generic check's unknown value of this very constexpr: its name once
    if len(distinct) == 1 and not any(lay for *_, lay in descs):
        out.code(f"{head}: {first}")
        if len(descs) > 1:
            out.text(f"the same in all {len(descs)} specializations (generic and "
                     + ", ".join(_label(r, i) for i, r, *_ in descs[1:]) + ")")
    else:
        out.code(f"{head}: {first}")
        if out.md:
            with_layout = any(lay for *_, lay in descs)
            table = ["| specialization | type |" + (" layout (threads, registers, warps) |" if with_layout else ""),
                     "|---|---|" + ("---|" if with_layout else "")]
            for i, r, _av, d, lay in descs:
                row = f"| {_md_cell(_label(r, i))} | `{d}` |"
                if with_layout:
                    row += f" {_md_cell(lay or '—')} |"
                table.append(row)
            out.text("\n".join(table))
        else:
            for i, r, _av, d, lay in descs:
                out.text(f"- {_label(r, i)}: {d}" + (f"  layout: {lay}" if lay else ""))
    if ka.host_types and ka.results and ka.results[0].spec.context:
        out.text(ka.results[0].spec.context)  # unannotated pointers: the dtypes the file's launches pass
    _links(a, ka, out)
    out.span = best
    return True


def _links(a: Analysis, ka, out: _Out):
    """The generated code of the kernel's first concrete specialization, as virtual documents."""
    if ka.helper:
        return
    try:
        idx = concrete_spec(a, ka, None).spec_index
    except Exception:
        return
    links = [out.doc_link(a, ka, idx, kind, title)
             for kind, title in (("cuda", "CUDA"), ("ptx", "PTX"), ("sass", "SASS"), ("ir", "IR"))]
    label = ka.results[idx].spec.label if 0 < idx < len(ka.results) else "defaults"
    out.text(f"Show the generated code of {ka.name} ({label}): " + " · ".join(links) if out.md
             else f"Generated code of {ka.name} ({label}):\n" + "\n".join(links))


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _label(r, i) -> str:
    return "generic" if i == 0 else r.spec.label


def _size(span):
    return (span.end_line - span.line, span.end_col - span.col if span.end_line == span.line else 10 ** 6)


def _span_text(a: Analysis, span) -> str:
    if span.line == span.end_line:
        return a.index.line(span.line - 1)[span.col - 1:span.end_col - 1]
    first = a.index.line(span.line - 1)[span.col - 1:]
    return first + " ..."


class _LayoutTables:
    """Layout descriptions of a kernel specialization's values, by span relative to the kernel's first line.

    Keyed by what the kernel's code depends on (its text, its helpers', the module names it reads), the
    specialization and the target, so they survive edits elsewhere in the file and lines inserted above.
    """

    def __init__(self, max_entries: int = 512):
        self.max_entries = max_entries
        self._d: OrderedDict = OrderedDict()

    def get(self, key):
        t = self._d.get(key)
        if t is not None:
            self._d.move_to_end(key)
        return t

    def put(self, key, table):
        self._d[key] = table
        self._d.move_to_end(key)
        while len(self._d) > self.max_entries:
            self._d.popitem(last=False)


LAYOUT_TABLES = _LayoutTables()


def _rel(span, base_line: int):
    return (span.line - base_line, span.col, span.end_line - base_line, span.end_col)


def layout_table(a: Analysis, ka, spec_index: int, target: str, cached_only: bool = False) -> dict | None:
    """relative span -> layout text for one specialization (None when it cannot be generated, or with
    ``cached_only`` when it was not generated yet)."""
    try:
        conc = concrete_spec(a, ka, spec_index)
    except Exception:  # no concrete specialization
        return None
    ckey = getattr(ka, "content_key", None)
    key = (ckey, conc.describe(), target) if ckey is not None else None
    if key is not None:
        hit = LAYOUT_TABLES.get(key)
        if hit is not None:
            return hit
    local = a.extra.get(("layouts", ka.name, spec_index, target))
    if local is not None or cached_only:
        return local
    table: dict = {}
    try:
        built = build_concrete(a, ka, conc)
        mod = generate(built, target)
        layouts = getattr(mod, "layouts", None)
        base = ka.def_span.line
        for span, av in built.notes.items():
            if isinstance(av, TensorV):
                lay = _layout_of(layouts, av.v)
                if lay:
                    table[_rel(span, base)] = lay
    except SpecError:
        table = {}
    except Exception:  # the backend is optional here; hover must still answer
        log.debug("layouts of %s failed", ka.name, exc_info=True)
        table = {}
    a.extra[("layouts", ka.name, spec_index, target)] = table
    if key is not None:
        LAYOUT_TABLES.put(key, table)
    return table


def warm_layouts(a: Analysis, target: str, kernels=None, should_stop=None) -> int:
    """Compute the layout tables of every kernel ahead of hovers (the server does this when idle)."""
    if backend() is None:
        return 0
    n = 0
    for ka in (kernels if kernels is not None else a.kernels):
        if ka.helper or ka.kind != "jit":
            continue
        for i in range(1, min(len(ka.results), MAX_LAYOUT_SPECS + 1)):
            if should_stop is not None and should_stop():
                return n
            layout_table(a, ka, i, target)
            n += 1
    return n


def _layouts(a: Analysis, ka, span, rows, target, cached_only: bool = False) -> dict:
    """index -> layout text, for the concrete specializations (when the backend exists)."""
    out: dict = {}
    if backend() is None or ka.kind != "jit":
        return out
    rel = _rel(span, ka.def_span.line)
    done = 0
    for i, _r, av in rows:
        if i == 0 or not isinstance(av, TensorV):
            continue
        if done >= MAX_LAYOUT_SPECS:
            break
        done += 1
        table = layout_table(a, ka, i, target, cached_only)
        if table and rel in table:
            out[i] = table[rel]
    return out


# ---------------------------------------------------------------------------
# a kernel
# ---------------------------------------------------------------------------


def kernel_summary(a: Analysis, ka, out: _Out, target: str):
    node = ka.node
    try:
        import ast
        sig = f"{ka.name}({ast.unparse(node.args)})"
    except Exception:
        sig = ka.name
    deco = "@dt.kernel" if ka.kind != "jit" else "@newt.jit"
    out.code(f"{deco}\ndef {sig}")
    errors = sum(1 for d in ka.diagnostics if int(d.severity) == 1)
    warnings = sum(1 for d in ka.diagnostics if int(d.severity) == 2)
    if ka.helper:
        out.text("Helper (called from other kernels and inlined there).")
    if ka.kind != "jit":
        if spelling_of(a).dt_top != spelling_of(a).dt:  # a @helion.kernel
            out.text("A Helion kernel, checked through deuteron (newt's Helion-like tile language): what deuteron "
                     "covers gets its diagnostics; what it does not cover is noted, not checked.")
        out.text("A deuteron kernel: its newt code depends on the shapes it is called with, so the CUDA comes from "
                 "tracing it on its first `newt.harness` example (Compile / Show CUDA, in a trusted workspace).")
        links = [out.doc_link(a, ka, 0, kind, title)
                 for kind, title in (("cuda", "CUDA"), ("ptx", "PTX"), ("sass", "SASS"), ("ir", "IR"))]
        out.text(" · ".join(links) if out.md else "\n".join(links))
        return
    specs = ka.results[1:]
    if specs:
        lines = [f"{len(specs)} specialization{'s' if len(specs) > 1 else ''} found in this file:"]
        for i, r in enumerate(specs, start=1):
            extra = []
            if r.spec.num_warps:
                extra.append(f"num_warps={r.spec.num_warps}")
            if r.spec.num_stages:
                extra.append(f"num_stages={r.spec.num_stages}")
            bad = sum(1 for d in r.diagnostics if int(d.severity) == 1)
            tail = (" — " + ", ".join(extra) if extra else "") + (f" — {bad} error{'s' * (bad != 1)}" if bad else "")
            lines.append(f"{i}. {r.spec.label}{tail}")
        out.text("\n".join(lines))
    elif not ka.helper:
        out.text("No specialization found in this file (no launch with literal constexprs, autotune config "
                 "or constexpr defaults): only the generic check ran.")
    if errors or warnings:
        out.text(f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}")
    if ka.helper:
        return
    try:
        conc = concrete_spec(a, ka, None)
    except SpecError as e:
        out.text(f"CUDA: {e}")
        return
    except Exception as e:
        out.text(f"CUDA: cannot form a specialization ({type(e).__name__}: {e})")
        return
    links = [out.doc_link(a, ka, conc.spec_index, kind, title)
             for kind, title in (("cuda", "CUDA"), ("ptx", "PTX"), ("sass", "SASS"), ("ir", "IR"))]
    if backend() is None:
        out.text("CUDA: the CUDA backend (newt.backend.cuda) is not available in this installation.")
        out.text(" · ".join(links[3:]) if out.md else "\n".join(links[3:]))
        return
    try:
        built = build_concrete(a, ka, conc)
        mod = generate(built, target)
        src = getattr(mod, "source", "") or ""
    except SpecError as e:
        out.text(f"CUDA ({conc.label}): {e}")
        out.text(" · ".join(links) if out.md else "\n".join(links))
        return
    except Exception as e:
        out.text(f"CUDA ({conc.label}): code generation failed: {type(e).__name__}: {e}")
        out.text(" · ".join(links) if out.md else "\n".join(links))
        return
    assumed = f" (assumed: {', '.join(conc.assumed)})" if conc.assumed else ""
    out.text(f"Generated CUDA for {conc.label}, {target}{assumed}:")
    lines = src.splitlines()
    body = _kernel_part(lines)
    preview = body[:CUDA_PREVIEW_LINES]
    if len(body) > CUDA_PREVIEW_LINES:
        preview.append(f"// ... {len(body) - CUDA_PREVIEW_LINES} more lines")
    out.code("\n".join(preview), "cuda")
    out.text(" · ".join(links) if out.md else "\n".join(links))


def _kernel_part(lines: list[str]) -> list[str]:
    """From the ``extern "C"`` kernel on (helpers and includes above it are less interesting)."""
    for i, ln in enumerate(lines):
        if "__global__" in ln:
            j = i
            while j > 0 and lines[j - 1].strip().startswith(("extern", "__launch_bounds__", "//")):
                j -= 1
            return lines[j:]
    return lines
