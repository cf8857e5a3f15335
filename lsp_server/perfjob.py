"""The worker's side of the performance diagnostics (``lsp_server/perf.py`` is the server's).

``run(params, ctx)`` (the compile worker's ``perf`` method): analyze the text statically (the same
analysis as the editor's; nothing of the file runs), list every specialization the file reveals for each
kernel (autotune configs, launches with literal constexprs, defaults), and compile each one through the
backend and NVRTC for the target: registers, spills, shared memory, occupancy and the SASS instruction mix
of its hottest source lines.  Events, so the editor shows each figure as soon as it exists:

* ``plan``: ``{"entries": [{key, kernel, spec, label, line, col, end_col, num_warps, num_stages}]}`` once the
  specializations are known (``line`` 1-based, columns 1-based characters of the config or launch);
* ``perf``: ``{key, n_regs, n_spills, spill_stores, spill_loads, shared, ..., occupancy, hottest}`` per
  compiled specialization (or ``{key, error}`` when it cannot be generated: ``resource`` data for one that
  cannot launch).

``params["known"]`` lists keys the server has figures for: they are not compiled again.  A key is the hash
of what changes the figures: the kernel's text and its jit callees', the specialization, the target and
the compiler.  The worker lowers its CPU priority once (``_nice``): the editor's requests come first.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import time

__all__ = ["run", "plan", "compile_entry", "cached_compile"]

_NICED = False
_CONFIG = re.compile(r"config #(\d+)")
_AT_LINE = re.compile(r"\bat line (\d+)")


def _nice():
    """The worker's background priority, once (``lsp_server/priority.py``: a nice value one above the server's and
    ``SCHED_BATCH``, as the analysis forks): a request of the editor that wakes up takes the CPU from a compile,
    and on a busy machine the compile still gets its share (at nice +10 it waited behind every other user's
    process: 2.7 s of CPU took 8 s at load 9 on two cores).  Threads NVRTC starts inherit it."""
    global _NICED
    if not _NICED:
        _NICED = True
        from .priority import lower_process
        lower_process(os.getpid())


def _fingerprint() -> str:
    try:
        from newt.backend.cuda.compiler import nvrtc_version
        nv = nvrtc_version()
    except Exception:
        nv = None
    import newt
    return f"{getattr(newt, '__version__', '?')}/{nv}"


def _segment(text: str, node) -> str:
    return ast.get_source_segment(text, node) or ""


def _jit_sources(a) -> str:
    """The text of every jit function of the file (callees are inlined: any of them may change a kernel)."""
    return "\n".join(_segment(a.text, ka.node) for ka in a.kernels if ka.kind == "jit")


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace")) + 1


def _where(a, ka, spec) -> tuple:
    """(line, col, end_col) of a specialization's source: its ``Config(...)`` call, its launch, else the
    kernel's name."""
    lines = a.text.splitlines()
    node = None
    kd = ka.kernel_def
    m = _CONFIG.search(spec.label or "")
    if m and kd is not None and 0 < int(m.group(1)) <= len(kd.configs or ()):
        node = kd.configs[int(m.group(1)) - 1].node
    elif spec.label.startswith("launch at line"):
        at = _AT_LINE.search(spec.label)
        ln = int(at.group(1)) if at is not None else 0
        scan = a.file.scan
        node = next((ls.node for ls in (scan.launches if scan is not None else ()) if ls.kernel == ka.name
                     and ls.node.lineno == ln), None)
    if node is not None and getattr(node, "lineno", None):
        text = lines[node.lineno - 1] if node.lineno <= len(lines) else ""
        end = node.end_col_offset if node.end_lineno == node.lineno else len(text.encode("utf-8"))
        return node.lineno, _char_col(text, node.col_offset), _char_col(text, end)
    sp = ka.span
    return sp.line, sp.col, sp.end_col


def plan(a, target: str) -> list:
    """Every (kernel, specialization) of analysis ``a`` that can be compiled, as plan entries (with
    ``_conc``, the ``Concrete``, for :func:`compile_entry`)."""
    from .concrete import SpecError, concrete_spec
    out = []
    jit_text = _jit_sources(a)
    fp = _fingerprint()
    for ka in a.kernels:
        if ka.kind != "jit" or ka.helper or not ka.results:
            continue
        indices = list(range(1, len(ka.results))) or [0]
        for i in indices:
            r = ka.results[i]
            if any(int(d.severity) == 1 for d in r.diagnostics):
                continue  # the front end reports it; a build would fail
            try:
                conc = concrete_spec(a, ka, i)
            except SpecError:
                continue  # a constexpr the file does not give: nothing to compile (silent)
            except Exception:
                continue
            line, col, end_col = _where(a, ka, r.spec) if i > 0 else (ka.span.line, ka.span.col, ka.span.end_col)
            ident = json.dumps([_segment(a.text, ka.node), jit_text, conc.to_json(), target, fp], sort_keys=True,
                               default=str)
            out.append({"key": hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()[:32],
                        "kernel": ka.name, "spec": i, "label": conc.label if i > 0 else "defaults",
                        "line": line, "col": col, "end_col": end_col, "num_warps": conc.num_warps,
                        "num_stages": conc.num_stages, "target": target, "_conc": conc, "_ka": ka})
    return out


def _likely_heavier(e) -> tuple:
    """Compile order: the largest tiles per thread first (the likeliest to spill, the warning users wait for)."""
    size = 1
    for k, v in e["_conc"].constexprs.items():
        if isinstance(v, int) and not isinstance(v, bool) and "BLOCK" in k.upper():
            size *= max(v, 1)
    return (-size / max(e["num_warps"], 1), e["kernel"], e["spec"])


def compile_entry(a, e: dict, target: str, mix: bool = True) -> dict:
    """Compile one plan entry: the figures (or ``error``); with ``mix``, the hottest lines' instruction mix too
    (else ``_mix()`` computes it later: the figures are sent first)."""
    from newt.diagnostics import CompilationError

    from .concrete import SpecError, backend, build_concrete, generate
    from .occupancy import occupancy
    be = backend()
    out = {"key": e["key"]}
    t0 = time.perf_counter()
    built = build_concrete(a, e["_ka"], e["_conc"])
    try:
        mod = generate(built, target)
        binary = cached_compile(be, mod, target)
    except SpecError as err:
        out["error"] = str(err)
        return out
    except CompilationError as err:
        res = next((d.data for d in err.diagnostics if "resource" in (d.data or {})), None)
        out["error"] = err.diagnostics[0].message if err.diagnostics else str(err)
        if res is not None:
            out["resource"] = {k: res.get(k) for k in ("resource", "required", "limit", "needed") if k in res}
        return out
    threads = 32 * binary.num_warps
    out.update(n_regs=binary.n_regs, n_spills=binary.n_spills, spill_stores=binary.spill_stores,
               spill_loads=binary.spill_loads, stack_frame=binary.stack_frame, shared=binary.shared,
               threads=threads, num_warps=binary.num_warps,
               occupancy=occupancy(binary.n_regs, binary.shared, threads, target),
               compile_ms=round((time.perf_counter() - t0) * 1e3, 1))
    if mix:
        out["hottest"] = hottest(binary, mod)
    else:
        out["_mix"] = lambda: hottest(binary, mod)
    return out


_KEPT_META = ("min_blocks", "launch_bounds", "min_blocks_dropped", "min_blocks_raised")
_BINARY_FIELDS = ("name", "target", "n_regs", "n_spills", "spill_stores", "spill_loads", "stack_frame", "shared",
                  "static_shared", "dynamic_shared", "num_warps", "compile_seconds")


def _cubin_key(mod, target: str) -> str:
    from newt.runtime.cache import hash_key
    return hash_key(["lsp-cubin/1", mod.source, mod.headers, target, mod.num_warps, mod.shared_bytes,
                     json.dumps(mod.metadata, sort_keys=True, default=str), _fingerprint()])


def cached_compile(be, mod, target: str):
    """``be.compile_cuda(mod, target)`` through the disk cache (``$NEWT_CACHE_DIR``, kind ``lsp-cubin``), keyed by
    the generated CUDA and what else NVRTC is given: the performance worker and the Compile / Show CUDA, PTX, SASS
    worker compile a configuration once between them (and once across server restarts).  A compile that chose
    another ``__launch_bounds__`` (``compile_cuda``'s second try) is rebuilt from the module's ``rerender`` on a
    hit, so ``mod`` describes what the cubin is, as after a compile."""
    from newt.runtime.cache import get_cache
    cache, key = get_cache(), None
    if cache.enabled:
        key = _cubin_key(mod, target)
        hit = cache.get(key, "lsp-cubin")
        if hit is not None:
            got = _restore(be, mod, *hit)
            if got is not None:
                return got
    binary = be.compile_cuda(mod, target)
    if key is not None:
        meta = {k: getattr(binary, k) for k in _BINARY_FIELDS}
        meta["module_meta"] = {k: mod.metadata[k] for k in _KEPT_META if k in mod.metadata}
        meta["source_sha"] = hashlib.sha256(mod.source.encode("utf-8", "surrogatepass")).hexdigest()
        if cache.put(key, meta, {"cubin": binary.cubin, "ptx": binary.ptx, "log": binary.log}, "lsp-cubin"):
            _trim_now_and_then(cache)
    return binary


#: the editor's cubin cache is bounded (``NEWT_LSP_CUBIN_CACHE_MB``, default 256 MB): every configuration of every
#: file the user opens lands there, where ``newt.jit``'s own cache holds only what ran
_TRIM_EVERY = 32
_puts = [0]


def cubin_cache_limit() -> int:
    try:
        mb = float(os.environ.get("NEWT_LSP_CUBIN_CACHE_MB", "256"))
    except ValueError:
        mb = 256.0
    return max(1, int(mb * 1024 * 1024))


def _trim_now_and_then(cache) -> None:
    """Trim the ``lsp-cubin`` entries at the first write of a process and every ``_TRIM_EVERY`` writes after it (a
    walk of the folder costs milliseconds; doing it per write would cost more than the writes)."""
    n = _puts[0]
    _puts[0] = n + 1
    if n % _TRIM_EVERY == 0:
        cache.trim("lsp-cubin", cubin_cache_limit())


def _restore(be, mod, meta: dict, blobs: dict):
    """The ``CompiledBinary`` of a cache entry for ``mod`` (None when it cannot be rebuilt: a miss)."""
    from newt.backend.cuda.compiler import CompiledBinary
    try:
        kept = meta["module_meta"]
        final = mod
        if kept.get("min_blocks") != mod.metadata.get("min_blocks"):
            if mod.rerender is None:
                return None
            final = mod.rerender(min_blocks=kept["min_blocks"])
        if hashlib.sha256(final.source.encode("utf-8", "surrogatepass")).hexdigest() != meta["source_sha"]:
            return None
        cubin, ptx, log = blobs["cubin"], blobs["ptx"], blobs["log"]
        if not isinstance(cubin, bytes) or not isinstance(ptx, str) or not isinstance(log, str):
            return None
        fields = {k: meta[k] for k in _BINARY_FIELDS}
    except (KeyError, TypeError, ValueError):
        return None
    if final is not mod:
        mod.source, mod.line_locs = final.source, final.line_locs
    mod.metadata.update(kept)
    return CompiledBinary(cubin=cubin, ptx=ptx, log=log, module=mod, **fields)


def hottest(binary, mod) -> list | None:
    """The SASS instruction mix of the kernel's hottest source lines (None without nvdisasm / cuobjdump)."""
    from newt.backend.cuda import sass as disassemble

    from . import sourcemap
    info = sourcemap.nvdisasm_line_info(binary.cubin)
    if info is None:
        return None
    try:
        text = disassemble(binary.cubin)
    except Exception:
        return None
    cuda = sourcemap.cuda_lines(mod.line_locs)
    lines = sourcemap.sass_lines(text, sourcemap.sass_addresses(info), cuda)
    return sourcemap.hottest_lines(sourcemap.instruction_mix(text, lines))


def _public(e: dict) -> dict:
    return {k: v for k, v in e.items() if not k.startswith("_")}


def warm() -> dict:
    _nice()
    from . import analysis  # noqa: F401
    from .concrete import backend
    be = backend()
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        pass
    return {"backend": be is not None}


def run(params: dict, ctx) -> dict:
    """Analyze, plan, then compile every specialization not in ``params["known"]``, the likeliest to warn first.

    Each event carries ``timing`` (wall and CPU milliseconds of the worker's steps: the breakdown
    ``benchmarks/perf_first_warning.py`` prints).  ``params["shard"]`` = ``[i, n]``: this worker compiles the
    i-th of every n entries of that order (the server spreads one document over n workers)."""
    from .analysis import analyze
    _nice()
    w0, c0 = time.perf_counter(), time.process_time()
    text, uri = params["text"], params["uri"]
    target = params.get("target") or "sm_90a"
    known = set(params.get("known") or ())
    a = analyze(text, uri)
    w1, c1 = time.perf_counter(), time.process_time()
    entries = plan(a, target)
    w2, c2 = time.perf_counter(), time.process_time()
    ctx.event("plan", {"entries": [_public(e) for e in entries],
                       "timing": {"analysis_ms": _ms(w1 - w0), "analysis_cpu_ms": _ms(c1 - c0),
                                  "plan_ms": _ms(w2 - w1), "plan_cpu_ms": _ms(c2 - c1)}})
    shard, nshards = params.get("shard") or (0, 1)
    order = [e for j, e in enumerate(sorted(entries, key=_likely_heavier)) if j % nshards == shard]
    done, mixes = 0, []
    for e in order:
        if ctx.cancelled:
            return {"done": done, "cancelled": True}
        if e["key"] in known:
            continue
        w, c = time.perf_counter(), time.process_time()
        try:
            got = compile_entry(a, e, target, mix=False)
        except Exception as err:  # one specialization's failure is not the others'
            got = {"key": e["key"], "error": f"{type(err).__name__}: {err}"}
        known.add(e["key"])
        got["timing"] = {"compile_ms": _ms(time.perf_counter() - w), "compile_cpu_ms": _ms(time.process_time() - c),
                         "since_request_ms": _ms(time.perf_counter() - w0)}
        mix = got.pop("_mix", None)
        ctx.event("perf", got)  # the figures (and a warning) at once; the disassembly once every figure is out
        if mix is not None:
            mixes.append((got, mix))
        done += 1
    for got, mix in mixes:
        if ctx.cancelled:
            return {"done": done, "cancelled": True}
        w = time.perf_counter()
        try:
            hot = mix()
        except Exception:
            hot = None
        if hot is not None:
            ctx.event("perf", dict(got, hottest=hot, timing=dict(got["timing"], mix_ms=_ms(time.perf_counter() - w))))
    return {"done": done, "cancelled": False}


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 1)
