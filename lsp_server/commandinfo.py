"""What the commands (Compile, Show, Verify, Autotune, the generated documents) need of an analysis, as JSON.

The commands never analyze in the protocol process: with the analysis engines the serving engine forks and the
fork answers :func:`command_info` on the analysis of the command's text (the engine's own when it is of that
text, else a fresh one through the incremental cache), so the server's event loop never waits for the front end
or for code generation (``NEWT_LSP_ENGINE=thread``: the same function on the server's query thread).
:class:`AnalysisRef`, :class:`KernelRef` and :class:`ConcreteRef` are what ``commands`` reads of the answer.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from .concrete import SpecError, backend, build_concrete, concrete_spec, generate
from .textutil import spelling_of

__all__ = ["command_info", "AnalysisRef", "KernelRef", "ConcreteRef", "header", "ir_text", "cuda_text"]


class AnalysisRef:
    """The analyzed document: ``uri``, ``path``, ``text`` (the text that was analyzed), ``version``, and
    ``spelling``: how the file names newt's language (``tl.`` / ``@triton.jit`` in a Triton file), for messages."""

    __slots__ = ("uri", "path", "text", "version", "spelling")

    def __init__(self, info: dict):
        from newt.frontend.spelling import Spelling
        self.uri, self.path, self.text, self.version = info["uri"], info["path"], info["text"], info.get("version")
        sp = info.get("spelling")
        self.spelling = Spelling(*sp) if isinstance(sp, (list, tuple)) and len(sp) == 4 else Spelling()


class KernelRef:
    """A kernel of that analysis: ``name``, ``kind`` ("jit" or another front end's), ``helper``, ``autotuned``,
    ``configs`` (how many autotune configs)."""

    __slots__ = ("name", "kind", "helper", "autotuned", "configs")

    def __init__(self, k: dict):
        self.name, self.kind, self.helper = k["name"], k["kind"], bool(k.get("helper"))
        self.autotuned, self.configs = bool(k.get("autotuned")), int(k.get("configs") or 0)


class ConcreteRef:
    """A concrete specialization (``concrete.Concrete.to_json``) with what the results and headers read of one."""

    __slots__ = ("json", "spec_index", "label", "assumed")

    def __init__(self, j: dict):
        self.json = j
        self.spec_index, self.label, self.assumed = int(j["index"]), j["label"], dict(j.get("assumed") or {})

    def describe(self) -> str:
        return self.json.get("text", "")

    def to_json(self) -> dict:
        return dict(self.json)


def command_info(a, msg: dict) -> dict:
    """The kernel at ``msg["position"]`` (or named ``msg["kernel"]``) of analysis ``a``, and what ``msg["want"]``
    asks: "concrete" (its specialization ``spec`` with the constexprs the user picked: ``given``, else
    ``given_by_kernel[name]``), "ir" or "cuda" (the document's text)."""
    out: dict = {"uri": a.uri, "path": a.path, "text": a.text, "version": a.version, "kernel": None}
    sp = spelling_of(a)
    out["spelling"] = [sp.lang, sp.top, sp.dt, sp.dt_top]
    ka = None
    pos = msg.get("position")
    if isinstance(pos, dict) and "line" in pos:
        line1, _ = a.index.char_col(lsp.Position(int(pos["line"]), int(pos.get("character", 0))))
        ka = a.kernel_at(line1)
    if ka is None and isinstance(msg.get("kernel"), str):
        ka = a.kernel_named(msg["kernel"])
    if ka is None:
        return out
    kd = ka.kernel_def
    out["kernel"] = {"name": ka.name, "kind": ka.kind, "helper": bool(ka.helper),
                     "autotuned": ka.kind != "jit" or (kd is not None and kd.autotune is not None),
                     "configs": len(kd.configs or ()) if ka.kind == "jit" and kd is not None else 0}
    want = msg.get("want") or ()
    if ka.kind != "jit" or not want:
        return out
    spec = msg.get("spec")
    given = msg.get("given") or (msg.get("given_by_kernel") or {}).get(ka.name)
    if "ir" in want:
        out["document"] = ir_text(a, ka, int(spec or 0))
        return out
    try:
        conc = concrete_spec(a, ka, spec, given)
    except SpecError as e:
        out["spec_error"] = {"message": str(e), "data": e.data}
        return out
    out["concrete"] = conc.to_json()
    if "cuda" in want:
        out["document"], out["map"] = cuda_document(a, ka, conc, msg.get("target") or "sm_90a")
    return out


def header(kname, conc, target, comment="//") -> str:
    lines = [f"{comment} {kname} — {conc.label}; target {target}", f"{comment} {conc.describe()}"]
    for p, what in conc.assumed.items():
        lines.append(f"{comment} {p}: {what}")
    return "\n".join(lines) + "\n\n"


def ir_text(a, ka, spec: int) -> str:
    if spec <= 0 or spec >= len(ka.results):
        r = ka.results[0] if ka.results else None
        if r is None or r.fn is None:
            return f"// {ka.name}: no IR (the generic check could not build it)\n"
        return f"// {ka.name} — generic check (symbolic shapes and dtypes)\n\n" + r.fn.format()
    try:
        conc = concrete_spec(a, ka, spec)
    except SpecError as e:
        return f"// {e}\n"
    built = build_concrete(a, ka, conc)
    if built.fn is None or built.errors:
        from newt.diagnostics import render
        return f"// {ka.name} ({conc.label}) has errors:\n" + "\n".join(
            "// " + ln for d in built.errors[:10] for ln in render(d, a.text).splitlines()) + "\n"
    return header(ka.name, conc, "(any)") + built.fn.format()


def cuda_text(a, ka, conc, target) -> str:
    return cuda_document(a, ka, conc, target)[0]


def cuda_document(a, ka, conc, target) -> tuple[str, list]:
    """The Show CUDA document and its source map (per line, the user's 1-based line or None)."""
    if backend() is None:
        return "// The CUDA backend (newt.backend.cuda) is not available in this installation.\n", []
    built = build_concrete(a, ka, conc)
    try:
        mod = generate(built, target)
    except SpecError as e:
        return f"// {e}\n", []
    except Exception as e:
        return f"// code generation failed: {type(e).__name__}: {e}\n", []
    from .sourcemap import cuda_lines, with_header
    head = header(ka.name, conc, target)
    return head + (getattr(mod, "source", "") or ""), with_header(head, cuda_lines(mod.line_locs))
