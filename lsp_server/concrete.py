"""One concrete specialization of a kernel, chosen from what the file says.

Compiling, showing CUDA and hover layouts need every parameter's type and
every constexpr's value.  From the text alone:

* constexpr values come from a specialization the front end discovered
  (an autotune config, a literal launch, defaults) or from parameter defaults;
* a parameter's type comes from its annotation (``x: "*fp16"``), else from a
  literal passed at a launch or its default (``eps=1e-5`` -> fp32), else a
  pointer parameter is assumed ``*fp32`` and a scalar ``i32`` — and the result
  says which parameters were assumed.

Pointers are assumed 16-byte aligned (as torch allocations are).
"""

from __future__ import annotations

import ast
import logging
import re
from dataclasses import dataclass, field

from newt.language import core as lc

from .textutil import spelling_of

__all__ = ["Concrete", "SpecError", "concrete_spec", "build_concrete", "backend", "encode_value", "decode_value",
           "display_name"]

log = logging.getLogger("newt-lsp")


class SpecError(Exception):
    """No concrete specialization can be formed (a constexpr has no value ...). ``data``: what the client
    may ask the user for (``missing``, ``suggestions``, ``why``)."""

    def __init__(self, message: str, data: dict | None = None):
        super().__init__(message)
        self.data = data


#: what a client offers for a constexpr nobody gave a value (block sizes are powers of two)
SUGGESTED_VALUES = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


def suggested_values(name: str) -> list:
    """Values to offer for constexpr ``name``, the likeliest first (by the usual Triton spellings)."""
    u = name.upper()
    if u.startswith(("IS_", "HAS_", "EVEN_", "USE_", "CAUSAL", "ENABLE_")) or u in ("CAUSAL", "TRANSPOSE"):
        return [False, True]
    if u in ("NUM_STAGES",):
        return [3, 2, 4, 1]
    if u.startswith("GROUP"):
        return [8, 4, 16, 32, 64]
    if "HEAD" in u or u.endswith("_DIM"):
        return [64, 128, 32, 16, 256]
    if u.startswith("BLOCK") or u.endswith("_SIZE"):
        return [64, 128, 256, 32, 512, 1024, 16, 2048]
    return [1, 2, 4, 8, 16, 32, 64, 128]


@dataclass
class Concrete:
    kernel: str
    spec_index: int  # the kernel.results entry it came from (0: generic + defaults)
    label: str
    arg_types: dict  # run-time parameter -> dtype
    constexprs: dict  # constexpr parameter -> value
    num_warps: int = 4
    num_stages: int = 3
    divisibility: dict = field(default_factory=dict)
    assumed: dict = field(default_factory=dict)  # parameter -> what was assumed

    def describe(self) -> str:
        parts = [f"{display_name(k)}={_fmt(v)}" for k, v in self.constexprs.items()]
        parts += [f"{k}: {t}" for k, t in self.arg_types.items()]
        for opt, v in (("num_warps", self.num_warps), ("num_stages", self.num_stages)):
            if self.constexprs.get(opt, object()) != v:  # a constexpr of that name is the option (once)
                parts.append(f"{opt}={v}")
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {
            "index": self.spec_index,
            "label": self.label,
            "constexprs": {k: encode_value(v) for k, v in self.constexprs.items()},
            "arg_types": {k: str(t) for k, t in self.arg_types.items()},
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
            "assumed": dict(self.assumed),
            "text": self.describe(),
        }


_DT_BLOCK = re.compile(r"_BLOCK_(\d+)$")
_DT_RBLOCK = re.compile(r"_RBLOCK_(\d+)$")


def display_name(name: str) -> str:
    """A constexpr's name as the user knows it: deuteron's generated ``_BLOCK_0`` is its config's
    ``block_sizes[0]``, ``_RBLOCK_1`` the block of its reduction #1; other names as they are."""
    m = _DT_BLOCK.match(name)
    if m:
        return f"block_sizes[{m.group(1)}]"
    m = _DT_RBLOCK.match(name)
    if m:
        return f"reduction block #{m.group(1)}"
    return name


def _fmt(v) -> str:
    return repr(v)


def encode_value(v):
    """A constexpr value as JSON."""
    if isinstance(v, lc.dtype):
        return {"dtype": str(v)}
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    name = getattr(v, "name", None)
    if isinstance(name, str):
        return {"jit": name}
    return {"repr": repr(v)}


def decode_value(v):
    if isinstance(v, dict):
        if "dtype" in v:
            return lc.dtype_from_name(v["dtype"])
        if "jit" in v:
            from newt.frontend.source import JitName  # only when the front end has it
            return JitName(v["jit"])
        raise ValueError(f"cannot decode constexpr {v!r}")
    return v


# ---------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------


def _annotation(ann, aliases: dict):
    """(is_constexpr, dtype or None) of a parameter annotation, read statically."""
    if ann is None:
        return False, None
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        s = ann.value.strip()
        if s in ("constexpr", "nl.constexpr", "tl.constexpr", "newt.language.constexpr"):
            return True, None
        try:
            return False, lc.dtype_from_name(s)
        except ValueError:
            return False, None
    from newt.frontend.source import qualname_of
    q = qualname_of(ann, aliases)
    if q in ("newt.language.constexpr", "newt.language.core.constexpr"):
        return True, None
    if q and q.startswith("newt.language."):
        import newt.language as nl
        obj = getattr(nl, q.rsplit(".", 1)[1], None)
        if isinstance(obj, lc.dtype):
            return False, obj
    return False, None


def _scalar_type(v):
    """The type a Python scalar takes as a launch argument (the front end's ``literal_type``), or None."""
    from newt.frontend.semantic import SemError, literal_type
    try:
        return literal_type(v, argument=True)
    except SemError:
        return None


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _NOPE


_NOPE = object()


def concrete_spec(analysis, ka, spec_index: int | None = None, given: dict | None = None) -> Concrete:
    """The concrete specialization of ``ka`` to compile (``spec_index`` into ``ka.results``, default: the first
    one the file reveals). ``given``: constexpr values the user picked (they win)."""
    if ka.kind != "jit":
        return _concrete_from_result(ka, spec_index)
    node = ka.node
    aliases = analysis.aliases
    params = list(node.args.posonlyargs) + list(node.args.args)
    defaults = dict(zip([p.arg for p in params][len(params) - len(node.args.defaults):], node.args.defaults))
    results = ka.results
    if spec_index is None:
        spec_index = 1 if len(results) > 1 else 0
    if not 0 <= spec_index < max(len(results), 1):
        raise SpecError(f"{ka.name} has no specialization #{spec_index} (it has {len(results) - 1})")
    spec = results[spec_index].spec if results else None
    generic = results[0].spec if results else None
    pointer_params = set(getattr(generic, "pointer_params", None) or ())
    cx_given = dict(spec.constexprs) if spec is not None else {}
    launch_values = _launch_values(analysis, ka, spec)

    arg_types, constexprs, assumed, div = {}, {}, {}, {}
    missing = []
    host: dict | None = None
    host_why: dict = {}
    for p in params:
        is_cx, ann_ty = _annotation(p.annotation, aliases)
        name = p.arg
        if is_cx or (name in cx_given and ann_ty is None):
            if given and name in given:
                constexprs[name] = given[name]
                assumed[name] = f"{given[name]!r} (picked)"
            elif name in cx_given:
                constexprs[name] = cx_given[name]
            elif name in defaults and _literal(defaults[name]) is not _NOPE:
                constexprs[name] = _literal(defaults[name])
            elif is_cx:
                if host is None:
                    host, host_why = _host_values(analysis, ka, [q.arg for q in params])
                if name in host:
                    constexprs[name] = host[name]
                    assumed[name] = f"{host[name]!r} (from the host code: {host_why[name]})"
                else:
                    missing.append(name)
            continue
        if ann_ty is not None:
            arg_types[name] = ann_ty
            if ann_ty.is_ptr():
                div[name] = 16
            continue
        lit = launch_values.get(name, _NOPE)
        if lit is _NOPE and name in defaults:
            lit = _literal(defaults[name])
        if lit is not _NOPE and _scalar_type(lit) is not None and name not in pointer_params:
            arg_types[name] = _scalar_type(lit)
            continue
        if lit is None and name in defaults:
            constexprs[name] = None  # a None default becomes a constexpr, like at a launch
            continue
        if name in pointer_params:
            # the launches' dtypes, as the front end's analysis read them (newt.frontend.hostvalues): this
            # specialization's own launch first, else the ones every launch agrees on
            ty = (spec.arg_types.get(name) if spec is not None else None) or \
                (generic.arg_types.get(name) if generic is not None else None)
            if ty is not None:
                arg_types[name] = ty
                why = (ka.host_types.get(name) or (None, getattr(spec, "context", None) or "its launch"))[1]
                assumed[name] = f"{ty} (from the host code: {why})"
            else:
                arg_types[name] = lc.pointer_type(lc.float32)
                assumed[name] = "*fp32 (assumed: the file does not say which dtype this pointer has)"
            div[name] = 16
        else:
            arg_types[name] = lc.int32
            assumed[name] = "i32 (assumed)"
    if missing:
        reasons = "; ".join(host_why[m] for m in missing if m in host_why)
        raise SpecError(spelling_of(analysis).respell(
            f"{ka.name}: no value for constexpr parameter(s) {', '.join(missing)}"
            + (f" ({reasons})" if reasons else "")
            + f"; pick one, or give it a value at a launch (kernel[grid](..., {missing[0]}=128)), in an autotune "
            f"config or as a default ({missing[0]}: nl.constexpr = 128)"),
            {"missing": missing, "suggestions": {m: suggested_values(m) for m in missing},
             "why": {m: host_why.get(m, "no launch, config or default gives it") for m in missing},
             "kernel": ka.name})
    num_warps = (spec.num_warps if spec is not None and spec.num_warps else None) or \
        _jit_option(ka, "num_warps") or 4
    num_stages = (spec.num_stages if spec is not None and spec.num_stages else None) or \
        _jit_option(ka, "num_stages") or 3
    # a constexpr parameter named like a launch option is that option too (Triton passes it to both)
    if isinstance(constexprs.get("num_warps"), int) and not isinstance(constexprs["num_warps"], bool):
        num_warps = constexprs["num_warps"]
    if isinstance(constexprs.get("num_stages"), int) and not isinstance(constexprs["num_stages"], bool):
        num_stages = constexprs["num_stages"]
    label = spec.label if spec is not None and spec_index > 0 else "defaults"
    return Concrete(ka.name, spec_index, label, arg_types, constexprs, int(num_warps), int(num_stages), div, assumed)


def _host_values(analysis, ka, names) -> tuple[dict, dict]:
    scan = analysis.file.scan
    if scan is None:
        return {}, {}
    from newt.frontend.hostvalues import example_launches, host_constexprs, host_index
    key = ("host-constexprs", ka.name, tuple(names))
    extra = getattr(analysis, "extra", None)
    if extra is not None and key in extra:
        return extra[key]
    launches = [ls for ls in scan.launches if ls.kernel == ka.name]
    try:
        launches += example_launches(analysis.text, ka.name, scan.resolve, host_index(scan))  # harness cases
        got = host_constexprs(analysis.text, launches, names)
    except Exception:  # a static evaluation problem must not stop Compile
        log.debug("host values of %s failed", ka.name, exc_info=True)
        got = ({}, {})
    if extra is not None:
        extra[key] = got
    return got


def _jit_option(ka, name):
    kd = ka.kernel_def
    v = (kd.jit_options or {}).get(name) if kd is not None else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _launch_values(analysis, ka, spec) -> dict:
    """Literal run-time argument values at the launches of the kernel (the spec's own launch first)."""
    scan = analysis.file.scan
    if scan is None:
        return {}
    node = ka.node
    pnames = [a.arg for a in list(node.args.posonlyargs) + list(node.args.args)]
    out: dict = {}
    launches = [ls for ls in scan.launches if ls.kernel == ka.name]
    ctx = getattr(spec, "context", None) or ""
    launches.sort(key=lambda ls: 0 if f"line {ls.node.lineno}" in ctx else 1)
    for ls in launches:
        for i, v in enumerate(ls.args[:len(pnames)]):
            if _scalar_type(v) is not None:
                out.setdefault(pnames[i], v)
        for k, v in ls.kwargs.items():
            if k in pnames and _scalar_type(v) is not None:
                out.setdefault(k, v)
    try:  # the file's newt.harness examples: their literal arguments (sm_scale=0.25 is an fp32)
        from newt.frontend.hostvalues import example_launches, host_index
        for ex in example_launches(analysis.text, ka.name, scan.resolve, host_index(scan)):
            pairs = list(zip(pnames, ex.node.args)) + [(k.arg, k.value) for k in ex.node.keywords]
            for name, arg in pairs:
                v = _literal(arg)
                if v is not _NOPE and _scalar_type(v) is not None:
                    out.setdefault(name, v)
    except Exception:  # only a better guess of a scalar's type is lost
        log.debug("example values of %s failed", ka.name, exc_info=True)
    return out


def _concrete_from_result(ka, spec_index) -> Concrete:
    """Kernels of other front ends (deuteron): their results' IR is already concrete."""
    results = [r for r in ka.results if r.fn is not None]
    if not results:
        raise SpecError(f"{ka.name}: no concrete specialization could be built from the file")
    idx = spec_index if spec_index is not None else (1 if len(ka.results) > 1 else 0)
    idx = min(max(idx, 0), len(ka.results) - 1)
    r = ka.results[idx] if ka.results[idx].fn is not None else results[0]
    fn = r.fn
    arg_types = {p.name: p.type for p in fn.params if not p.constexpr}
    constexprs = {p.name: p.const_value for p in fn.params if p.constexpr}
    return Concrete(ka.name, ka.results.index(r), r.spec.label if hasattr(r.spec, "label") else "concrete",
                    arg_types, constexprs, getattr(fn, "num_warps", None) or 4, getattr(fn, "num_stages", None) or 3)


# ---------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------


class Built:
    """The concrete IR of one specialization, with the notes (Span -> abstract value) of that build."""

    def __init__(self, conc: Concrete, fn, notes: dict, diagnostics: list):
        self.conc = conc
        self.fn = fn
        self.notes = notes
        self.diagnostics = diagnostics
        self._cuda: dict = {}

    @property
    def errors(self) -> list:
        from newt.diagnostics import Severity
        return [d for d in self.diagnostics if d.severity == Severity.ERROR]


def build_concrete(analysis, ka, conc: Concrete) -> Built:
    """Build the IR of ``conc`` (cached on the analysis)."""
    key = ("built", ka.name, conc.spec_index, conc.describe())
    hit = analysis.extra.get(key)
    if hit is not None:
        return hit
    if ka.kind != "jit":
        r = ka.results[conc.spec_index]
        built = Built(conc, r.fn, dict(r.notes or {}), list(r.diagnostics))
        analysis.extra[key] = built
        return built
    from newt.frontend import build_specialization
    r = build_specialization(ka.jit_source, constexprs=conc.constexprs, arg_types=conc.arg_types,
                             divisibility=conc.divisibility, num_warps=conc.num_warps, num_stages=conc.num_stages,
                             label=conc.label)
    fn, notes, diags = r.fn, dict(r.notes), list(r.diagnostics)
    sp = spelling_of(analysis)
    for d in diags:  # this build's own objects: tl.arange in a Triton file
        d.message, d.hint, d.context = sp.respell(d.message), sp.respell(d.hint), sp.respell(d.context)
    built = Built(conc, fn, notes, diags)
    if fn is not None and not built.errors:
        try:
            from newt.ir import verify
            verify(fn, concrete=True)
        except Exception as e:  # an IR the verifier rejects is reported, not fatal
            from newt.diagnostics import Diagnostic, Severity
            diags.append(Diagnostic("N001", Severity.ERROR, ka.span, f"IR verification failed: {e}",
                                    file=analysis.path, kernel=ka.name))
    analysis.extra[key] = built
    return built


def backend():
    """``newt.backend.cuda`` when it exists (pure-Python code generation only), else None."""
    try:
        import importlib
        mod = importlib.import_module("newt.backend.cuda")
    except Exception:  # absent or broken: degrade gracefully
        return None
    return mod if hasattr(mod, "generate_cuda") else None


def generate(built: Built, target: str):
    """The backend's ``CudaModule`` for a built specialization (cached), or raises."""
    hit = built._cuda.get(target)
    if hit is not None:
        return hit
    be = backend()
    if be is None:
        raise SpecError("the CUDA backend (newt.backend.cuda) is not available in this installation")
    if built.fn is None or built.errors:
        raise SpecError("the kernel has errors: " + "; ".join(d.message for d in built.errors[:3]))
    mod = be.generate_cuda(built.fn, target=target, num_warps=built.conc.num_warps,
                           num_stages=built.conc.num_stages)
    built._cuda[target] = mod
    return mod
