"""Inlay hints, completion, signature help, code lenses and quick fixes, as plain functions."""

from __future__ import annotations

import ast
import logging
import re

from lsprotocol import types as lsp

from newt.diagnostics import Span
from newt.frontend.values import Const, Opaque, TensorV

from . import language
from .analysis import Analysis
from .hover import value_parts
from .textutil import call_context, dotted_before, in_string_or_comment, spelling_of

__all__ = ["inlay_hints", "completion", "signature_help", "code_lenses", "code_actions", "nl_alias",
           "LENS_COMMANDS"]

log = logging.getLogger("newt-lsp")


# ---------------------------------------------------------------------------
# inlay hints
# ---------------------------------------------------------------------------


def _assign_targets(fdef):
    """Name nodes bound by assignments, augmented assignments and for loops in a function body."""
    for node in ast.walk(fdef):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.For):
            targets = [node.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    yield n


def inlay_hints(a: Analysis, rng: lsp.Range | None = None, shapes: bool = True, dtypes: bool = True
                ) -> list[lsp.InlayHint]:
    """``: fp32[BLOCK_M, BLOCK_N]`` after names assigned in kernels (the generic check's types, which
    name the constexprs; the first specialization's where the generic check has none; an element type the
    generic check does not know from the file's launches or examples, as hover's "from the launches" row)."""
    if not (shapes or dtypes):
        return []
    lo, hi = (0, 10 ** 9) if rng is None else (rng.start.line + 1, rng.end.line + 1)
    src = a.file.source
    out = []
    for ka in a.kernels:
        if not ka.results or ka.def_span.end_line < lo or ka.def_span.line > hi:
            continue
        seen = set()
        for name in _assign_targets(ka.node):
            if not lo <= name.lineno <= hi:
                continue
            span = src.span(name)
            if span in seen:
                continue
            seen.add(span)
            av = None
            for r in ka.results:
                v = (r.notes or {}).get(span)
                if v is not None and not isinstance(v, Opaque):
                    av = v
                    break
            # (the generic check has the launches' / examples' pointer dtypes: newt.frontend.hostvalues)
            label = _hint_label(av, shapes, dtypes)
            if label is None:
                continue
            out.append(lsp.InlayHint(position=a.index.position(span.end_line, span.end_col), label=label,
                                     kind=lsp.InlayHintKind.Type, padding_left=False, padding_right=False))
    out.sort(key=lambda h: (h.position.line, h.position.character))
    return out




def _hint_label(av, shapes: bool, dtypes: bool) -> str | None:
    parts = value_parts(av) if isinstance(av, TensorV) else None
    if parts is None:
        return None
    dts, shp = parts
    if "?" in dts or "T[" in dts:  # element type unknown in the generic check: show the shape only
        dts = None
    if shapes and dtypes:
        if dts is None:
            return f": {shp}" if shp else None
        return f": {dts}{shp or ''}"
    if shapes:
        return f": {shp}" if shp else None
    return f": {dts}" if dts else None


# ---------------------------------------------------------------------------
# completion
# ---------------------------------------------------------------------------

_KIND = {
    "function": lsp.CompletionItemKind.Function, "method": lsp.CompletionItemKind.Method,
    "dtype": lsp.CompletionItemKind.Constant, "class": lsp.CompletionItemKind.Class,
    "module": lsp.CompletionItemKind.Module, "constant": lsp.CompletionItemKind.Constant,
    "attribute": lsp.CompletionItemKind.Property,
}


def _resolve_base(a: Analysis | None, parts: list[str]) -> str | None:
    if a is None or not parts or not parts[0]:
        return None
    base = a.aliases.get(parts[0])
    if base is None:
        return None
    q = ".".join([base] + parts[1:])
    return q if q.split(".")[0] in ("newt", "deuteron") else None


def _is_compile_time_name(a: Analysis, ka, name: str) -> bool:
    """Whether ``name`` is only ever a compile-time value (a constexpr, a dtype ...) in the kernel."""
    if ka is None:
        return False
    seen_const = False
    for r in ka.results:
        for span, av in (r.notes or {}).items():
            if span.line == span.end_line and span.end_col - span.col == len(name) and \
                    a.index.line(span.line - 1)[span.col - 1:span.end_col - 1] == name:
                if isinstance(av, TensorV):
                    return False
                if isinstance(av, Const):
                    seen_const = True
    return seen_const


def completion(a: Analysis | None, pos: lsp.Position, line_text: str | None = None,
               markdown: bool = True, snippets: bool = False) -> lsp.CompletionList | None:
    """Members after ``nl.``, ``nl.math.``, ``dt.``, ``newt.``, and block methods after ``x.`` in kernels."""
    if a is None:
        return None
    line1, col1 = a.index.char_col(pos)
    line = line_text if line_text is not None else a.index.line(line1 - 1)
    col0 = min(col1 - 1, len(line))
    if in_string_or_comment(line, col0):
        return None
    got = dotted_before(line, col0)
    if not got:
        return None
    parts, prefix, _start = got
    if not parts:
        return None
    q = _resolve_base(a, parts)
    items: list[lsp.CompletionItem] = []
    sp = spelling_of(a)
    if q is not None:
        for m in language.members(q):
            items.append(_item(language.respelled(m, sp), markdown, "0"))
    else:
        ka = a.kernel_at(line1)
        if ka is None:
            return None
        if parts[0] and (parts[0] in a.aliases or a.kernel_named(parts[0]) is not None):
            return None  # a module we do not document, or a kernel object
        if len(parts) == 1 and _is_compile_time_name(a, ka, parts[0]):
            return None
        for m in language.tensor_methods():
            items.append(_item(language.respelled(m, sp), markdown, "1"))
    if not items:
        return None
    return lsp.CompletionList(is_incomplete=False, items=items)


def _item(m, markdown: bool, group: str) -> lsp.CompletionItem:
    doc = None
    if m.doc:
        doc = lsp.MarkupContent(kind=lsp.MarkupKind.Markdown if markdown else lsp.MarkupKind.PlainText,
                                value=m.doc)
    detail = m.signature or (f"dtype {m.qualname}" if m.kind == "dtype" else m.qualname)
    return lsp.CompletionItem(label=m.name, kind=_KIND.get(m.kind, lsp.CompletionItemKind.Text), detail=detail,
                              documentation=doc, sort_text=f"{group}{'1' if m.name.startswith('_') else '0'}{m.name}")


# ---------------------------------------------------------------------------
# signature help
# ---------------------------------------------------------------------------


def signature_help(a: Analysis | None, text: str, pos: lsp.Position, markdown: bool = True
                   ) -> lsp.SignatureHelp | None:
    """Signature of the ``nl.*`` / ``dt.*`` function, block method or jit function being called."""
    if a is None:
        return None
    from .positions import LineIndex
    idx = LineIndex(text, a.index.encoding) if text is not a.text else a.index
    offset = idx.offset(pos)
    ctx = call_context(text, offset)
    if ctx is None:
        return None
    callee, arg_index, keyword, _used = ctx
    parts = callee.split(".")
    member = None
    q = _resolve_base(a, parts)
    if q is not None:
        member = language.lookup(q)
    elif len(parts) == 1 and a.kernel_named(parts[0]) is not None:
        k = a.kernel_named(parts[0])
        names, texts = language._args_texts(k.node.args)
        member = language.Member(k.name, k.name, "function", language.format_signature(k.name, texts), "", names,
                                 texts)
    elif len(parts) >= 2:
        line1 = idx.char_col(pos)[0]
        if a.kernel_at(line1) is not None:
            member = language.tensor_method(parts[-1])
    if member is None or member.kind not in ("function", "method", "class") or not member.signature:
        return None
    member = language.respelled(member, spelling_of(a))
    label = member.signature
    params = []
    pos_in = label.index("(") + 1
    for t in member.param_texts:
        start = label.index(t, pos_in)
        params.append(lsp.ParameterInformation(label=(start, start + len(t))))
        pos_in = start + len(t)
    active = arg_index
    if keyword is not None and keyword in member.params:
        active = list(member.params).index(keyword)
    elif active >= len(params):
        star = next((i for i, t in enumerate(member.param_texts) if t.startswith("*") and not t.startswith("**")),
                    None)
        active = star if star is not None else len(params) - 1
    doc = None
    if member.doc:
        doc = lsp.MarkupContent(kind=lsp.MarkupKind.Markdown if markdown else lsp.MarkupKind.PlainText,
                                value=member.doc)
    sig = lsp.SignatureInformation(label=label, documentation=doc, parameters=params,
                                   active_parameter=max(active, 0) if params else None)
    return lsp.SignatureHelp(signatures=[sig], active_signature=0, active_parameter=max(active, 0) if params else None)


# ---------------------------------------------------------------------------
# code lenses
# ---------------------------------------------------------------------------

LENS_COMMANDS = (("Compile", "newt.compileKernel"), ("Verify", "newt.verifyKernel"),
                 ("Autotune", "newt.autotuneKernel"), ("Show CUDA", "newt.showCuda"))


def code_lenses(a: Analysis) -> list[lsp.CodeLens]:
    """``Compile · Verify · Autotune · Show CUDA`` on each kernel's ``def`` line (not on the helpers it inlines).

    The commands are the client commands of docs/lsp-protocol.md with ``[uri, {line, character}]`` (the
    kernel name's position); the server accepts them as ``workspace/executeCommand`` too.
    """
    out = []
    for ka in a.kernels:
        if ka.helper:
            continue
        pos = a.index.position(ka.span.line, ka.span.col)
        rng = a.index.range(ka.span)
        # Autotune only where there is something to tune: @newt.autotune kernels, deuteron kernels, and plain
        # kernels with a newt.harness example (their launch options: newt.harness.autotune)
        tunable = (ka.kind != "jit" or (ka.kernel_def is not None and ka.kernel_def.autotune is not None)
                   or has_harness_example(a.text, ka.name))
        for title, cmd in LENS_COMMANDS:
            if cmd == "newt.autotuneKernel" and not tunable:
                continue
            args = [a.uri, {"line": pos.line, "character": pos.character}]
            out.append(lsp.CodeLens(range=rng, command=lsp.Command(title=title, command=cmd, arguments=args)))
    return out


# ---------------------------------------------------------------------------
# quick fixes
# ---------------------------------------------------------------------------


def nl_alias(a: Analysis) -> tuple[str, lsp.TextEdit | None]:
    """How the file spells ``newt.language`` (``nl``, ``tl`` ...), and an import edit when it does not."""
    for name, q in a.aliases.items():
        if q == "newt.language":
            return name, None
    if a.aliases.get("newt") == "newt":
        return "newt.language", None  # `import newt` makes newt.language reachable
    return "nl", _import_edit(a, "import newt.language as nl\n")


def _import_edit(a: Analysis, text: str) -> lsp.TextEdit:
    last = 0
    for i, ln in enumerate(a.index.lines):
        if re.match(r"(import |from \S+ import )", ln):
            last = i + 1
    p = lsp.Position(last, 0)
    return lsp.TextEdit(lsp.Range(p, p), text)


def _text_of(a: Analysis, span: Span) -> str:
    if span.line != span.end_line:
        return ""
    return a.index.line(span.line - 1)[span.col - 1:span.end_col - 1]


def _int_literal(s: str):
    try:
        v = ast.literal_eval(s.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _overlaps(r1: lsp.Range, r2: lsp.Range) -> bool:
    a1, b1 = (r1.start.line, r1.start.character), (r1.end.line, r1.end.character)
    a2, b2 = (r2.start.line, r2.start.character), (r2.end.line, r2.end.character)
    return a1 <= b2 and a2 <= b1


def code_actions(a: Analysis, rng: lsp.Range, only: list[str] | None = None) -> list[lsp.CodeAction]:
    """Quick fixes for the diagnostics that touch ``rng``."""
    if only and not any(k == "quickfix" or k.startswith("quickfix") or k == "" for k in only):
        return []
    from .analysis import lsp_diagnostics
    out = []
    for d, ld in zip(a.file.diagnostics, lsp_diagnostics(a, related=False)):
        if not _overlaps(ld.range, rng):
            continue
        try:
            if d.code == "N011":
                out.extend(_fix_pow2(a, d, ld))
            elif d.code == "N010":
                out.extend(_fix_constexpr(a, d, ld))
            elif d.code in ("N020", "N031", "N022", "N021"):
                out.extend(_fix_cast(a, d, ld))
            if d.code in ("N006", "N008", "N023"):
                out.extend(_fix_mechanical(a, d, ld))
            if d.code == "N080" and d.data.get("construct") == "make_block_ptr":
                from .blockptr_fix import block_ptr_fix
                out.extend(block_ptr_fix(a, d, ld))
            if d.hint and "did you mean " in d.hint:
                out.extend(_fix_did_you_mean(a, d, ld))
        except Exception:  # a quick fix that cannot be computed is just not offered
            log.debug("quick fix for %s failed", d.code, exc_info=True)
    try:
        out.extend(_kernel_actions(a, rng))
    except Exception:
        log.debug("kernel code actions failed", exc_info=True)
    return out


def has_harness_example(text: str, kernel: str) -> bool:
    """Whether the file declares a ``newt.harness`` example for ``kernel`` (``@nh.example(kernel ...)``)."""
    return re.search(rf"\bexample\(\s*{re.escape(kernel)}\b", text) is not None


def _kernel_actions(a: Analysis, rng: lsp.Range) -> list[lsp.CodeAction]:
    """On a kernel's def line: insert a ``newt.harness`` example when it has none (Verify and Autotune need
    example inputs), and give each constexpr that nothing gives a value a default (what Compile asks for)."""
    out = []
    for ka in a.kernels:
        if ka.helper:
            continue
        name_line = ka.span.line - 1
        if not (rng.start.line <= name_line <= rng.end.line):
            continue
        if ka.kind == "jit" and not has_harness_example(a.text, ka.name):
            out.append(_add_example(a, ka))
        if ka.kind == "jit":
            out.extend(_constexpr_defaults(a, ka))
    return out


def _output_params(fdef, params: set) -> list[str]:
    """The parameters a kernel writes through (the pointer of ``store`` and the atomics), in order."""
    out: list[str] = []
    for node in ast.walk(fdef):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                and (node.func.attr == "store" or node.func.attr.startswith("atomic_"))):
            for n in ast.walk(node.args[0]):
                if isinstance(n, ast.Name) and n.id in params and n.id not in out:
                    out.append(n.id)
                    break
    return out


def _harness_alias(a: Analysis) -> tuple[str, lsp.TextEdit | None]:
    for name, q in a.aliases.items():
        if q == "newt.harness":
            return name, None
    return "nh", _import_edit(a, "import newt.harness as nh\n")


def _add_example(a: Analysis, ka) -> lsp.CodeAction:
    from .concrete import SpecError, concrete_spec, suggested_values
    nh, imp = _harness_alias(a)
    node = ka.node
    params = list(node.args.posonlyargs) + list(node.args.args)
    try:
        conc = concrete_spec(a, ka)
        cx, types = dict(conc.constexprs), dict(conc.arg_types)
    except SpecError as e:
        cx = {m: suggested_values(m)[0] for m in (e.data or {}).get("missing", [])}
        types = {}
    except Exception:
        cx, types = {}, {}
    n = 4096
    body, args, kwargs = [], [], []
    for p in params:
        ann = ast.unparse(p.annotation) if p.annotation is not None else ""
        if ann.endswith("constexpr") or p.arg in cx:
            if p.arg in cx:
                kwargs.append(f"{p.arg!r}: {cx[p.arg]!r}")
            continue
        t = str(types.get(p.arg, ""))
        if t.startswith("*") or p.arg.endswith("_ptr") or p.arg[:1].isupper() and len(p.arg) <= 4:
            dtype = {"*fp16": "torch.float16", "*bf16": "torch.bfloat16", "*i32": "torch.int32"}.get(t, "torch.float32")
            body.append(f"    {p.arg} = torch.randn({n}, device=device).to({dtype})")
            args.append(p.arg)
        elif t.startswith("fp"):
            args.append("1.0")
        else:
            args.append(str(n))
    block = next((v for k, v in cx.items() if isinstance(v, int) and not isinstance(v, bool) and
                  ("BLOCK" in k.upper() or k.upper().endswith("_SIZE"))), None)
    grid = f"(({n} + {block} - 1) // {block},)" if block else "(1,)"
    end = ka.def_span.end_line
    outs = _output_params(node, {p.arg for p in params})
    pnames = ", ".join(p.arg for p in params)
    expected = ", ".join(f"{o!r}: ..." for o in outs) or "'out_ptr': ..."
    reference = (f"\n\n@{nh}.reference({ka.name})\ndef {ka.name}_reference({pnames}):\n"
                 "    # called with copies of the example's arguments before the launch: return the expected value\n"
                 f"    # of each output the kernel writes, by parameter name ({{{expected}}}), computed with torch\n"
                 f"    raise NotImplementedError(\"{ka.name}_reference: return {{{expected}}} computed from the "
                 "inputs\")\n")
    text = reference + (f"\n\n@{nh}.example({ka.name})\ndef {ka.name}_example(device):\n"
            f"    # inputs like real ones: Verify compares the launch with @{nh}.reference({ka.name}),\n"
            "    # Autotune times it\n"
            "    import torch\n" + "\n".join(body) + ("\n" if body else "")
            + f"    return {nh}.Case(grid={grid}, args=({', '.join(args)}{',' if len(args) == 1 else ''}), "
            f"kwargs={{{', '.join(kwargs)}}})\n")
    p = lsp.Position(end, 0)
    at_end = end >= len(a.index.lines)
    edits = [lsp.TextEdit(lsp.Range(p, p), text.lstrip("\n") if not at_end else text)]
    if not at_end:
        edits[0] = lsp.TextEdit(lsp.Range(p, p), text[1:] + "\n")
    if imp is not None:
        edits.insert(0, imp)
    return lsp.CodeAction(title=f"Add a newt.harness example and reference for {ka.name} (Verify and Autotune "
                                "need inputs and expected outputs)",
                          kind=lsp.CodeActionKind.QuickFix, edit=lsp.WorkspaceEdit(changes={a.uri: edits}))


def _constexpr_defaults(a: Analysis, ka) -> list[lsp.CodeAction]:
    from .concrete import SpecError, concrete_spec, suggested_values
    try:
        concrete_spec(a, ka)
        return []
    except SpecError as e:
        missing = (e.data or {}).get("missing", [])
    node = ka.node
    params = list(node.args.posonlyargs) + list(node.args.args)
    n_plain = len(params) - len(node.args.defaults)  # the first parameters without a default
    idx = [i for i, p in enumerate(params) if p.arg in missing and p.annotation is not None]
    # defaults must be trailing: every parameter from the first missing one on either is missing or has one
    if not idx or any(params[j].arg not in missing for j in range(idx[0], n_plain)):
        return []
    edits, shown = [], []
    for i in idx:
        p = params[i]
        v = suggested_values(p.arg)[0]
        ann = a.file.source.span(p.annotation)
        at = a.index.position(ann.end_line, ann.end_col)
        edits.append(lsp.TextEdit(lsp.Range(at, at), f" = {v!r}"))
        shown.append(f"{p.arg} = {v!r}")
    return [lsp.CodeAction(
        title=f"Give {', '.join(shown)} as defaults for Compile (launches still pass their own values)",
        kind=lsp.CodeActionKind.QuickFix, edit=lsp.WorkspaceEdit(changes={a.uri: edits}))]


def _edit_action(a: Analysis, title: str, ld: lsp.Diagnostic, edits: list[lsp.TextEdit], preferred=False):
    return lsp.CodeAction(title=title, kind=lsp.CodeActionKind.QuickFix, diagnostics=[ld],
                          edit=lsp.WorkspaceEdit(changes={a.uri: edits}), is_preferred=preferred)


def _fix_pow2(a: Analysis, d, ld) -> list[lsp.CodeAction]:
    rep = d.data.get("replace")
    if rep is None:
        return []
    value = d.data.get("value")
    param = d.data.get("param")
    targets: list[tuple[Span, str]] = []
    owner = a.spec_of(d)
    if param and owner is not None:
        ka, idx = owner
        origin = (ka.results[idx].spec.origins or {}).get(param)
        if origin is not None and _int_literal(_text_of(a, origin)) is not None:
            targets.append((origin, f"set {param}={rep} at line {origin.line}"))
    if not targets:
        txt = _text_of(a, d.span)
        lit = _int_literal(txt)
        if lit is not None and (value is None or lit == value):
            targets.append((d.span, f"round {lit} up to {rep}"))
    if not targets and owner is not None:
        # the block size names a constexpr whose value came from a launch or a config
        ka, idx = owner
        name = _text_of(a, d.span).strip()
        origin = (ka.results[idx].spec.origins or {}).get(name)
        if origin is not None and _int_literal(_text_of(a, origin)) is not None:
            targets.append((origin, f"set {name}={rep} at line {origin.line}"))
    out = []
    for span, what in targets:
        title = f"Round to a power of two: {what}"
        out.append(_edit_action(a, title, ld, [lsp.TextEdit(a.index.range(span), str(rep))], preferred=True))
    return out


def _fix_constexpr(a: Analysis, d, ld) -> list[lsp.CodeAction]:
    param = d.data.get("param")
    if not param:
        return []
    ka = a.kernel_at(d.span.line)
    if ka is None:
        return []
    fdefs = [ka.node]
    # the name may be a parameter of a helper inlined at this line
    for k in a.kernels:
        if k is not ka and k.def_span.line <= d.span.line <= k.def_span.end_line:
            fdefs.append(k.node)
    alias, imp = nl_alias(a)
    src = a.file.source
    for fdef in fdefs:
        for arg in list(fdef.args.posonlyargs) + list(fdef.args.args):
            if arg.arg != param:
                continue
            line = arg.lineno
            col = src.char_col(line, arg.col_offset) + 1
            name_end = Span(line, col + len(param), line, col + len(param))
            if arg.annotation is not None:
                ann = src.span(arg.annotation)
                edit = lsp.TextEdit(a.index.range(Span(line, col + len(param), ann.end_line, ann.end_col)),
                                    f": {alias}.constexpr")
            else:
                edit = lsp.TextEdit(a.index.range(name_end), f": {alias}.constexpr")
            edits = [edit] + ([imp] if imp is not None else [])
            return [_edit_action(a, f"Declare {param} as {param}: {alias}.constexpr", ld, edits, preferred=True)]
    return []


def _operand_nodes(a: Analysis, d):
    """The operand expressions of the binary operation or nl.dot call a diagnostic points at."""
    text = _text_of(a, d.span)
    if not text:
        return None, []
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None, []
    lead = len(text) - len(text.lstrip())
    base = d.span.col + lead  # 1-based char column of the expression's start

    def span_of(node) -> Span:
        sp = Span.from_ast(node, [text.strip()])
        return Span(d.span.line, base + sp.col - 1, d.span.line, base + sp.end_col - 1)

    if isinstance(tree, ast.BinOp):
        return tree, [(tree.left, span_of(tree.left)), (tree.right, span_of(tree.right))]
    if isinstance(tree, ast.Call):
        args = list(tree.args[:2])
        kws = {k.arg: k.value for k in tree.keywords}
        while len(args) < 2:
            name = ("input", "other")[len(args)]
            if name in kws:
                args.append(kws[name])
            else:
                break
        return tree, [(n, span_of(n)) for n in args]
    return tree, []


def _dtype_at(a: Analysis, d, span: Span):
    owner = a.spec_of(d)
    results = []
    if owner is not None:
        ka, idx = owner
        results = [ka.results[idx]] + [r for r in ka.results if r is not ka.results[idx]]
    for r in results:
        av = (r.notes or {}).get(span)
        if isinstance(av, TensorV):
            try:
                return av.dtype
            except Exception:
                return None
        if isinstance(av, Const) and isinstance(av.value, (int, float)):
            return None
    return None


def _cast_text(src_text: str, node, dtype_text: str, bitcast: bool = False) -> str:
    # already a value cast (x.to(nl.float16)): change it instead of stacking a second one (a bitcast of the
    # converted value is another thing: that one is stacked)
    if not bitcast and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "to" and not any(k.arg == "bitcast" for k in node.keywords) \
            and src_text.rstrip().endswith(")") and ".to(" in src_text:
        base = src_text[:src_text.rfind(".to(")]
        if base:
            return f"{base}.to({dtype_text}{', bitcast=True' if bitcast else ''})"
    atom = isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.Tuple))
    base = src_text if atom else f"({src_text})"
    return f"{base}.to({dtype_text}{', bitcast=True' if bitcast else ''})"


def _fix_mechanical(a: Analysis, d, ld) -> list[lsp.CodeAction]:
    """The hints that name a mechanical replacement: ``min(a, b)`` -> ``nl.minimum(a, b)``, ``int(x)`` ->
    ``x.to(nl.int32)``, ``math.exp(x)`` -> ``nl.math.exp(x)``, ``a // b`` on floats -> ``nl.floor(a / b)``."""
    sp = d.span
    text = _text_of(a, sp)
    if not text:
        return []
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return []
    alias, imp = nl_alias(a)
    seg = lambda n: ast.get_source_segment(text, n)
    new = title = None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        f, args = node.func.id, node.args
        if f in ("min", "max") and len(args) == 2:
            new = f"{alias}.{'minimum' if f == 'min' else 'maximum'}({seg(args[0])}, {seg(args[1])})"
        elif f in ("min", "max") and len(args) == 1:
            new = f"{alias}.{f}({seg(args[0])}, axis=0)"
        elif f in ("int", "float", "bool") and len(args) == 1:
            dt = {"int": "int32", "float": "float32", "bool": "int1"}[f]
            new = _cast_text(seg(args[0]), args[0], f"{alias}.{dt}")
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            isinstance(node.func.value, ast.Name) and a.aliases.get(node.func.value.id) == "math":
        import newt.language as nl
        name = node.func.attr
        if hasattr(nl.math, name):
            new = f"{alias}.math.{name}" + text[len(seg(node.func)):]
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and d.code == "N023":
        new = f"{alias}.floor({seg(node.left)} / {seg(node.right)})"
    if new is None or new == text:
        return []
    title = title or f"Replace {text} with {new}"
    edits = [lsp.TextEdit(a.index.range(sp), new)] + ([imp] if imp is not None else [])
    return [_edit_action(a, title, ld, edits, preferred=True)]


_DID_YOU_MEAN = re.compile(r"did you mean '?\.?([A-Za-z_][\w.]*)'?\?")
_WORD = re.compile(r"[A-Za-z_]\w*")


def _fix_did_you_mean(a: Analysis, d, ld) -> list[lsp.CodeAction]:
    """``did you mean 'arange'?`` (an undefined name, an unknown attribute, keyword, launch parameter, config
    entry or kernel option): replace the misspelled word of the diagnostic's span with the suggestion."""
    m = _DID_YOU_MEAN.search(d.hint or "")
    if m is None or d.span.line != d.span.end_line:
        return []
    sugg = m.group(1).rsplit(".", 1)[-1]
    text = _text_of(a, d.span)
    if not text:
        return []
    import difflib
    best, score = None, 0.0
    for w in _WORD.finditer(text):
        r = difflib.SequenceMatcher(None, w.group(), sugg).ratio()
        if w.group() != sugg and r > score:
            best, score = w, r
    if best is None or score < 0.6:
        return []
    line0 = d.span.line
    col = d.span.col + best.start()
    from newt.diagnostics import Span as _S
    rng = a.index.range(_S(line0, col, line0, col + len(best.group())))
    return [_edit_action(a, f"Replace {best.group()} with {sugg}", ld, [lsp.TextEdit(rng, sugg)], preferred=True)]


def _fix_cast(a: Analysis, d, ld) -> list[lsp.CodeAction]:
    _tree, ops = _operand_nodes(a, d)
    if len(ops) != 2:
        return []
    alias, imp = nl_alias(a)
    types = [_dtype_at(a, d, sp) for _, sp in ops]
    out = []

    def action(i, target_dtype, bitcast=False, what=""):
        node, sp = ops[i]
        txt = _text_of(a, sp)
        line = a.index.line(sp.line - 1)
        if sp.col >= 2 and line[sp.col - 2:sp.col - 1] == "(" and line[sp.end_col - 1:sp.end_col] == ")" \
                and not isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)):
            sp = Span(sp.line, sp.col - 1, sp.end_line, sp.end_col + 1)  # already parenthesized: reuse them
            txt = _text_of(a, sp)
            node = ast.Tuple()  # treated as an atom below: no second pair of parentheses
        new = _cast_text(txt, node, f"{alias}.{target_dtype.lang_name}", bitcast)
        edits = [lsp.TextEdit(a.index.range(sp), new)] + ([imp] if imp is not None else [])
        title = what or f"Cast {_text_of(a, ops[i][1])} to {alias}.{target_dtype.lang_name}"
        return _edit_action(a, title, ld, edits, preferred=(i == 1))

    import newt.language as nl
    if d.code == "N020" and all(t is not None for t in types):
        # mixed signedness: make the unsigned side signed (or the other way round)
        for i in (1, 0):
            other = types[1 - i]
            if types[i] != other and not getattr(other, "is_ptr", lambda: False)():
                out.append(action(i, other))
    elif d.code == "N031" and all(t is not None for t in types) and types[0] != types[1]:
        out.append(action(1, types[0]))
        out.append(action(0, types[1]))
    elif d.code == "N022":
        for i, t in enumerate(types):
            if t is not None and t.is_floating():
                out.append(action(i, nl.int32, what=f"Cast the offset {_text_of(a, ops[i][1])} to "
                                                     f"{alias}.int32"))
    elif d.code == "N021":
        for i, t in enumerate(types):
            if t is not None and t.is_floating():
                it = {16: nl.int16, 32: nl.int32, 64: nl.int64}.get(t.primitive_bitwidth)
                if it is not None:
                    out.append(action(i, it, bitcast=True,
                                      what=f"Reinterpret {_text_of(a, ops[i][1])} as {alias}.{it.lang_name} "
                                           "(bitcast)"))
    return out


# ---------------------------------------------------------------------------
# document symbols (the outline)
# ---------------------------------------------------------------------------


def document_symbols(a: Analysis) -> list[lsp.DocumentSymbol]:
    """Kernels (functions; helpers say so), with their parameters (constexprs as constants) as children."""
    out = []
    for ka in a.kernels:
        node = ka.node
        full = a.index.range(ka.def_span)
        sel = a.index.range(ka.span)
        if (sel.start.line, sel.start.character) < (full.start.line, full.start.character):
            full = lsp.Range(sel.start, full.end)
        children = []
        params = list(node.args.posonlyargs) + list(node.args.args) + list(node.args.kwonlyargs)
        for p in params:
            psp = a.file.source.span(p)
            prange = a.index.range(psp)
            psel = a.index.range(_Span(psp.line, psp.col, psp.line, psp.col + len(p.arg)))
            ann = ast.unparse(p.annotation) if p.annotation is not None else None
            is_cx = ann is not None and ann.split(".")[-1] == "constexpr"
            children.append(lsp.DocumentSymbol(name=p.arg, kind=lsp.SymbolKind.Constant if is_cx
                                               else lsp.SymbolKind.Variable,
                                               range=prange, selection_range=psel,
                                               detail="constexpr" if is_cx else ann))
        kind_text = "deuteron kernel" if ka.kind != "jit" else ("helper" if ka.helper else "kernel")
        if ka.kernel_def is not None and ka.kernel_def.autotune is not None:
            kind_text = "autotuned " + kind_text
        out.append(lsp.DocumentSymbol(name=ka.name, kind=lsp.SymbolKind.Function, range=full, selection_range=sel,
                                      detail=kind_text, children=children))
    return out


class _Span:
    __slots__ = ("line", "col", "end_line", "end_col")

    def __init__(self, line, col, end_line, end_col):
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
