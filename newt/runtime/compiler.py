"""The compile path: kernel -> IR -> CUDA C++ -> NVRTC -> cubin, with caches.

``newt.compile(fn, signature=..., constexprs=..., target=...)`` works with no
GPU.  The JIT calls :func:`compile_specialization` for each new
specialization.  Both go through two caches keyed on the same content address
(:func:`cache_key`): a process-wide dict, and the disk cache
(``newt.runtime.cache``).  The key holds newt's version and a fingerprint of
its compiler sources, the NVRTC version, the target, a fingerprint of the
kernel's source and of every jit function and module constant it refers to
(transitively), the specialization (argument types, constexpr values, hints)
and the options (num_warps, num_stages, debug).
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import threading
import types as pytypes
from dataclasses import dataclass
from pathlib import Path

import newt
from newt.diagnostics import CompilationError
from newt.language import core as lc

from . import cache as _cache
from .errors import OutOfResources

# ---------------------------------------------------------------------------
# fingerprints
# ---------------------------------------------------------------------------

_PKG_FP = None
_NVRTC = None
_FP_LOCK = threading.Lock()

#: the parts of newt whose code decides what a kernel compiles to
_COMPILER_PARTS = ("language", "frontend", "ir", "backend", "runtime/compiler.py", "runtime/specialize.py")


def package_fingerprint() -> str:
    """newt's version plus a hash of the compiler's own source files (so a changed compiler misses the cache)."""
    global _PKG_FP
    if _PKG_FP is None:
        root = Path(newt.__file__).parent
        h = hashlib.sha256(newt.__version__.encode())
        files = []
        for part in _COMPILER_PARTS:
            p = root / part
            if p.is_file():
                files.append(p)
            elif p.is_dir():
                files.extend(sorted(p.rglob("*.py")))
        for f in files:
            h.update(str(f.relative_to(root)).encode())
            try:
                h.update(f.read_bytes())
            except OSError:
                pass
        _PKG_FP = f"{newt.__version__}+{h.hexdigest()[:16]}"
    return _PKG_FP


def nvrtc_version() -> str:
    global _NVRTC
    if _NVRTC is None:
        try:
            from cuda.bindings import nvrtc
            r = nvrtc.nvrtcVersion()
            _NVRTC = f"{r[1]}.{r[2]}" if not r[0] else "unknown"
        except Exception:
            _NVRTC = "unavailable"
    return _NVRTC


def _referenced(node) -> set:
    """Global names (and attribute chains on them) a function body mentions: ``{("helpers", "act"), ("BLOCK",)}``."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            chain = []
            cur: ast.expr = n
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name):
                out.add(tuple([cur.id] + chain[::-1]))
        elif isinstance(n, ast.Name):
            out.add((n.id,))
    return out


_MISSING = object()
_SIMPLE = (int, float, bool, str, bytes, type(None))


def _resolve(g: dict, chain: tuple):
    obj = g.get(chain[0], _MISSING)
    for attr in chain[1:]:
        if obj is _MISSING or not isinstance(obj, (pytypes.ModuleType, type)):
            break
        obj = getattr(obj, attr, _MISSING)
    return obj


def _jit_source(obj):
    if getattr(obj, "__newt_jit__", False):
        return obj.jit_source()
    from newt.frontend.values import JitSource, jit_source_from_function
    if isinstance(obj, JitSource):
        return obj
    return jit_source_from_function(obj, lib=bool(getattr(obj, "__newt_inline__", False)))


def _fingerprint_into(js, h, seen: set):
    if id(js.node) in seen:
        return
    seen.add(id(js.node))
    h.update(f"fn {js.name} @ {js.src.path}\n".encode())
    h.update(ast.dump(js.node, include_attributes=True).encode())
    env = getattr(js, "env", None)
    g = getattr(env, "g", None)
    if g is None and js.obj is not None:
        g = getattr(js.obj, "__globals__", None)
    if not g:
        return
    for chain in sorted(_referenced(js.node)):
        obj = _resolve(g, chain)
        if obj is _MISSING or isinstance(obj, pytypes.ModuleType):
            continue
        name = ".".join(chain)
        if getattr(obj, "__newt_jit__", False) or getattr(obj, "__newt_inline__", False):
            if getattr(obj, "__newt_builtin__", None):
                continue
            h.update(f"dep {name}\n".encode())
            _fingerprint_into(_jit_source(obj), h, seen)
        elif isinstance(obj, _SIMPLE + (lc.constexpr, lc.dtype, tuple)):
            h.update(f"global {name} = {stable_repr(obj)}\n".encode())


def source_fingerprint(fn) -> str:
    """Hash of a kernel's source and, transitively, of the jit functions and module constants it uses."""
    js = _jit_source(fn)
    h = hashlib.sha256()
    _fingerprint_into(js, h, set())
    return h.hexdigest()


def stable_repr(v) -> str:
    """A representation of a constexpr value that is the same in every process."""
    if isinstance(v, lc.constexpr):
        return stable_repr(v.value)
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, _SIMPLE):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, lc.dtype):
        return f"dtype:{v}"
    if isinstance(v, tuple):
        return "(" + ",".join(stable_repr(x) for x in v) + ")"
    if getattr(v, "__newt_jit__", False) or getattr(v, "__newt_inline__", False):
        return f"jit:{getattr(v, '__qualname__', '?')}:{source_fingerprint(v)}"
    if isinstance(v, lc.PropagateNan):
        return f"PropagateNan.{v.name}"
    return f"{type(v).__module__}.{type(v).__qualname__}:{v!r}"


# ---------------------------------------------------------------------------
# compiled kernels
# ---------------------------------------------------------------------------


@dataclass
class Param:
    """One run-time parameter of a compiled kernel."""

    name: str
    type: str  # newt type: "*fp32", "i32" ...
    ctype: str | None  # C type in the generated CUDA
    code: str  # struct code used to pack it


class KernelMetadata(dict):
    """``metadata.n_regs`` or ``metadata["n_regs"]``: name, kernel_name, target, num_warps,
    num_stages, n_regs, n_spills, shared (bytes, static + dynamic), dynamic_shared,
    static_shared, file, line, signature, constexprs, hints; pipeline_stages (the software pipeline's depth:
    num_stages, or fewer where that overflowed shared memory)."""

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None


class AsmDict(dict):
    """``ir``, ``cuda``, ``ptx``, ``cubin``; ``sass`` is disassembled on first access (needs cuobjdump)."""

    def _sass_available(self) -> bool:
        try:
            from newt.backend.cuda.sass import find_cuobjdump
        except ImportError:
            return False
        return find_cuobjdump() is not None

    def __missing__(self, key):
        if key == "sass" and "cubin" in self:
            # (the submodule, not the package attribute: importing newt.backend.cuda.sass rebinds the latter)
            from newt.backend.cuda.sass import sass
            text = sass(dict.__getitem__(self, "cubin"))
            self["sass"] = text
            return text
        raise KeyError(key)

    def __contains__(self, key):
        if dict.__contains__(self, key):
            return True
        return key == "sass" and "cubin" in self.keys() and self._sass_available()

    def get(self, key, default=None):
        try:
            return self[key]
        except (KeyError, RuntimeError, OSError):
            return default


class CompiledKernel:
    """A kernel compiled for one specialization and target (device independent).

    ``asm`` (:class:`AsmDict`) and ``metadata`` (:class:`KernelMetadata`) describe it;
    ``kernel[grid](*args)`` launches it on the current device with the run-time
    arguments (or all of the kernel's arguments; constexpr ones are then skipped).
    """

    def __init__(self, asm: dict, metadata: dict, params: list, cache_key: str, arg_names=None):
        self.asm = asm if isinstance(asm, AsmDict) else AsmDict(asm)
        self.metadata = md = metadata if isinstance(metadata, KernelMetadata) else KernelMetadata(metadata)
        self.params = params
        self.cache_key = cache_key
        self.arg_names = list(arg_names or md.get("arg_names") or [p.name for p in params])
        self.name = md.get("name")
        self._launchers: dict[int, object] = {}
        self.ir = None                    # the ir.Function (set when built in this process)
        self.warnings: list = []          # front-end warnings of the build
        #: how to build ``ir`` again (kernel, arg types, constexprs, hints, num_warps, num_stages), set by
        #: ``compile_specialization``: a kernel from the disk cache has no IR, and interpreting it needs one
        self.rebuild: tuple | None = None
        self.module = None                # the loaded module and function handles (``_init_handles``)
        self.function = None
        #: launch through the interpreter even with a GPU (the warmup of an interpreted kernel)
        self.interpreted = False

    # Triton-compatible spellings
    @property
    def n_regs(self):
        return self.metadata.n_regs

    @property
    def n_spills(self):
        return self.metadata.n_spills

    @property
    def shared(self):
        return self.metadata.shared

    @property
    def num_warps(self):
        return self.metadata.num_warps

    @property
    def n_max_threads(self) -> int:
        """The most threads per block this kernel can launch with: its ``__launch_bounds__`` (32 x
        num_warps; 1024 under ``maxnreg``) and what its registers allow (64K per SM, allocated per warp in
        units of 256), as CUDA's ``MAX_THREADS_PER_BLOCK`` attribute reports it."""
        md = self.metadata
        bound = 1024 if md.get("maxnreg") else 32 * (int(md.num_warps) + int(md.get("producer_warps", 0)))
        per_warp = -(-max(int(md.n_regs or 0), 1) * 32 // 256) * 256
        return min(bound, 65536 // per_warp * 32, 1024)

    def _init_handles(self):
        """Triton's ``CompiledKernel._init_handles()``: load the cubin on the current device (once), so that
        ``module`` / ``function`` are set.  With no GPU there is nothing to load: ``n_regs``, ``n_spills``
        and ``metadata.shared`` come from the ptxas report of the NVRTC build either way, and
        ``kernel[grid](...)`` runs through the interpreter."""
        from . import driver
        if self.module is not None or self.interpreted or not driver.has_gpu():
            return
        ln = self.launcher(driver.current_device_fn()())
        self.module, self.function = getattr(ln, "module", None), getattr(ln, "function", None)

    def describe(self) -> str:
        md = self.metadata
        where = f" ({md.file}:{md.line})" if md.get("file") and md.get("line") else ""
        return f"'{md.kernel_name}'{where}"

    def __repr__(self):
        md = self.metadata
        return (f"<CompiledKernel {md.kernel_name} target={md.target} num_warps={md.num_warps} "
                f"num_stages={md.num_stages} regs={md.n_regs} spills={md.n_spills} shared={md.shared}>")

    # -- launching without the JIT -------------------------------------------
    def launcher(self, dev: int):
        from . import driver
        ln = self._launchers.get(dev)
        if ln is None:
            ln = self._launchers[dev] = driver.Launcher(self, dev)
        return ln

    def run(self, grid, *args, stream=None):
        from . import driver
        from .grid import normalize_grid
        rt = [p.name for p in self.params]
        if len(args) == len(self.arg_names) and len(args) != len(rt):
            args = [a for n, a in zip(self.arg_names, args) if n in rt]
        if len(args) != len(rt):
            raise TypeError(f"{self.metadata.kernel_name}: the compiled kernel takes {len(rt)} run-time arguments "
                            f"({', '.join(rt)}) but {len(args)} were given")
        if self.interpreted or not driver.has_gpu():
            return self._interpret(grid, args)
        vals = []
        for p, a in zip(self.params, args):
            if hasattr(a, "data_ptr"):
                if not getattr(a, "is_cuda", True):
                    from .specialize import raise_not_cuda
                    raise_not_cuda(self.metadata.kernel_name, p.name, a)
                a = a.data_ptr()
            vals.append(a)
        dev = driver.current_device_fn()()
        s = driver.stream_handle(stream) if stream is not None else driver.current_stream_fn()(dev)
        gx, gy, gz = normalize_grid(grid, None, self.metadata.kernel_name)
        self.launcher(dev).launch(gx, gy, gz, s, *vals)
        return self

    def __getitem__(self, grid):
        return lambda *args, stream=None: self.run(grid, *args, stream=stream)

    def _interpret(self, grid, args):
        """``kernel[grid](*args)`` with no GPU: this specialization's IR through the interpreter (CPU tensors)."""
        from newt import interpreter

        from .grid import check_grid, normalize_grid
        from .specialize import unwrap
        if self.ir is None:
            if self.rebuild is None:  # (a kernel made from a cache entry by hand): nothing to interpret
                from .driver import NoDeviceLauncher
                return NoDeviceLauncher(self).launch()
            from newt.frontend import build_ir
            fn, arg_types, constexprs, hints, num_warps, num_stages = self.rebuild
            self.ir = build_ir(fn, arg_types, constexprs, hints, num_warps=num_warps, num_stages=num_stages)
        name = self.metadata.kernel_name
        if callable(grid):
            grid = grid(dict(zip([p.name for p in self.params], args)))
        check_grid(normalize_grid(grid, None, name), name)
        interpreter.launch(self.ir, grid, [unwrap(a) for a in args], num_warps=int(self.metadata.num_warps))
        return self

    # -- disk format ------------------------------------------------------------
    def to_entry(self):
        meta = {"metadata": dict(self.metadata), "params": [p.__dict__ for p in self.params],
                "arg_names": self.arg_names}
        blobs = {k: self.asm[k] for k in ("ir", "cuda", "ptx", "cubin") if k in self.asm.keys()}
        return meta, blobs

    @classmethod
    def from_entry(cls, key: str, meta: dict, blobs: dict, expect: dict | None = None):
        """The kernel of a cache entry; ``ValueError`` when the entry does not follow ``check_entry``'s
        schema (or, with ``expect``, was built with other options)."""
        check_entry(meta, blobs, expect)
        params = [Param(**p) for p in meta["params"]]
        return cls(AsmDict(blobs), KernelMetadata(meta["metadata"]), params, key, meta.get("arg_names"))


#: the metadata fields of a cache entry every launch or report reads, with the types they must have
_MD_INTS = ("num_warps", "num_stages", "n_regs", "n_spills", "shared", "dynamic_shared", "static_shared")
_MD_STRS = ("name", "kernel_name", "target")
_PARAM_CODES = frozenset(("?", "b", "B", "h", "H", "i", "I", "q", "Q", "f", "d", "e", "bf16"))
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _is_int(v) -> bool:
    return type(v) is int


def check_entry(meta, blobs, expect: dict | None = None) -> None:
    """``ValueError`` unless a kernel's cache entry ``(meta, blobs)`` is one ``to_entry`` writes: the
    metadata's launch fields of the right types and ranges (``num_warps`` a power of 2 up to 32, the shared
    sizes adding up, ``name`` an identifier), every parameter a ``{name, type, ctype, code}`` record with a
    known struct code, the argument names strings that include the parameters, the ``cubin`` bytes and the
    texts strings.  ``expect`` (``target``, ``num_warps``, ``num_stages``, ``debug``, ``maxnreg``): the
    options the entry must have been built with.  An entry whose checksum is right can still have been
    written by another program or another version: such an entry is a miss, never launched."""
    if not isinstance(meta, dict) or not isinstance(blobs, dict):
        raise ValueError("malformed metadata: not an object")
    md = meta.get("metadata")
    if not isinstance(md, dict):
        raise ValueError("malformed metadata: no 'metadata' object")
    for k in _MD_INTS:
        if not _is_int(md.get(k)) or md[k] < 0:
            raise ValueError(f"malformed metadata: {k} = {md.get(k)!r} (a non-negative integer expected)")
    for k in _MD_STRS:
        if not isinstance(md.get(k), str) or not md[k]:
            raise ValueError(f"malformed metadata: {k} = {md.get(k)!r} (a string expected)")
    if not _IDENT.fullmatch(md["name"]):
        raise ValueError(f"malformed metadata: the kernel's symbol {md['name']!r} is not an identifier")
    nw = md["num_warps"]
    if not 1 <= nw <= 32 or nw & (nw - 1):
        raise ValueError(f"malformed metadata: num_warps = {nw} (a power of 2 from 1 to 32 expected)")
    if md["shared"] != md["static_shared"] + md["dynamic_shared"]:
        raise ValueError("malformed metadata: shared is not static_shared + dynamic_shared")
    if md.get("maxnreg") is not None and (not _is_int(md["maxnreg"]) or md["maxnreg"] <= 0):
        raise ValueError(f"malformed metadata: maxnreg = {md['maxnreg']!r}")
    if "debug" in md and not isinstance(md["debug"], bool):
        raise ValueError(f"malformed metadata: debug = {md['debug']!r}")
    for k in ("file",):
        if md.get(k) is not None and not isinstance(md[k], str):
            raise ValueError(f"malformed metadata: {k} = {md[k]!r}")
    if md.get("line") is not None and not _is_int(md["line"]):
        raise ValueError(f"malformed metadata: line = {md['line']!r}")
    for k in ("signature", "constexprs", "hints"):
        if k in md and not isinstance(md[k], dict):
            raise ValueError(f"malformed metadata: {k} is not an object")
    tms = md.get("tensormaps", [])
    if not isinstance(tms, list) or not all(isinstance(t, dict) for t in tms):
        raise ValueError("malformed metadata: tensormaps is not a list of objects")
    params = meta.get("params")
    if not isinstance(params, list):
        raise ValueError("malformed metadata: no parameter list")
    for p in params:
        if not (isinstance(p, dict) and set(p) == {"name", "type", "ctype", "code"}
                and isinstance(p["name"], str) and isinstance(p["type"], str)
                and (p["ctype"] is None or isinstance(p["ctype"], str)) and p["code"] in _PARAM_CODES):
            raise ValueError(f"malformed metadata: bad parameter record {p!r}")
    names = meta.get("arg_names", md.get("arg_names"))
    if names is not None:
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise ValueError("malformed metadata: arg_names is not a list of strings")
        if not {p["name"] for p in params} <= set(names):
            raise ValueError("malformed metadata: a parameter is missing from arg_names")
    if not isinstance(blobs.get("cubin"), (bytes, bytearray)) or not blobs["cubin"]:
        raise ValueError("malformed entry: no cubin")
    for k in ("ir", "cuda", "ptx"):
        if k in blobs and not isinstance(blobs[k], str):
            raise ValueError(f"malformed entry: the {k} blob is not text")
    for k, want in (expect or {}).items():
        if md.get(k) != want:
            raise ValueError(f"the entry was built with {k} = {md.get(k)!r}, not {want!r}")


# ---------------------------------------------------------------------------
# the pipeline
# ---------------------------------------------------------------------------

_MEMORY: dict = {}  # cache key -> CompiledKernel (process-wide)
_KEY_LOCKS: dict = {}
_KEY_LOCKS_LOCK = threading.Lock()


def _key_lock(key: str) -> threading.Lock:
    with _KEY_LOCKS_LOCK:
        lk = _KEY_LOCKS.get(key)
        if lk is None:
            lk = _KEY_LOCKS[key] = threading.Lock()
        return lk


def cache_key(fn, arg_types: dict, constexprs: dict, hints: dict, target: str, num_warps: int, num_stages: int,
              debug: bool = False, fingerprint: str | None = None, maxnreg: int | None = None) -> str:
    # (maxnreg absent: the keys of every earlier build)
    extra: dict[str, object] = {} if maxnreg is None else {"maxnreg": int(maxnreg)}
    # the pipeline's proxy fence and copy placement, the conversions' addresses (NEWT_CPASYNC_FENCE,
    # NEWT_PIPE_ISSUE, NEWT_CONVERT_ADDR; absent when all are unset)
    pipe_flags = "/".join(os.environ.get(k, "") for k in ("NEWT_CPASYNC_FENCE", "NEWT_PIPE_ISSUE", "NEWT_CONVERT_ADDR"))
    if pipe_flags != "//":
        extra["pipeline_flags"] = pipe_flags
    return _cache.hash_key({**extra,
        "newt": package_fingerprint(),
        "nvrtc": nvrtc_version(),
        "target": target,
        "source": fingerprint or source_fingerprint(fn),
        "arg_types": {k: str(v) for k, v in arg_types.items()},
        "constexprs": {k: stable_repr(v) for k, v in constexprs.items()},
        "hints": {k: int(v) for k, v in (hints or {}).items()},
        "num_warps": int(num_warps),
        "num_stages": int(num_stages),
        "debug": bool(debug),
        # wgmma | mma_sync on sm_90a, wgmma's N-split tiles, staging dot operands at their loads; x + dot folded
        # (dot/fold.py), fp8 A from registers (dot/fp8_regs.py), 1-D loads in slice layouts (plan.py): absent when unset
        "dot_lowering": os.environ.get("NEWT_DOT_LOWERING", "") + os.environ.get("NEWT_WGMMA_SPLIT_N", "")
        + os.environ.get("NEWT_STAGE_AT_LOAD", "") + os.environ.get("NEWT_FRESH_CONVERT", "")
        + os.environ.get("NEWT_STMATRIX", "")
        + "".join(f"/{k}={os.environ[k]}" for k in ("NEWT_DOT_FOLD_ADD", "NEWT_FP8_A_REGS", "NEWT_SLICE_LOADS",
                                                 "NEWT_ASYNC_RA", "NEWT_WGMMA_ZERO_START", "NEWT_RING_1D",
                                                 "NEWT_PIPE_ROWS", "NEWT_OPAQUE_TRIP")
                 if k in os.environ),
        # (NEWT_WARP_SPECIALIZE, NEWT_WS_PINGPONG, NEWT_WS_OVERLAP: warpspec/pingpong/overlap.py; none if unset)
        "tma": os.environ.get("NEWT_TMA", "") + (f"/ws={os.environ['NEWT_WARP_SPECIALIZE']}"
                                                 if os.environ.get("NEWT_WARP_SPECIALIZE") else "")
        + (f"/pp={os.environ['NEWT_WS_PINGPONG']}" if os.environ.get("NEWT_WS_PINGPONG") else "")
        + (f"/ov={os.environ['NEWT_WS_OVERLAP']}" if os.environ.get("NEWT_WS_OVERLAP") else ""),
    })


def compile_specialization(fn, arg_types: dict, constexprs: dict, hints: dict, target: str, num_warps: int = 4,
                           num_stages: int = 3, debug: bool = False, fingerprint: str | None = None,
                           use_cache: bool = True, maxnreg: int | None = None) -> CompiledKernel:
    """Compile one specialization (memory cache, then disk cache, then the compiler).  ``maxnreg``: the
    registers-per-thread cap (Triton's launch option), None for the compiler's choice."""
    key = cache_key(fn, arg_types, constexprs, hints, target, num_warps, num_stages, debug, fingerprint, maxnreg)
    if use_cache:
        hit = _MEMORY.get(key)
        if hit is not None:
            return _with_rebuild(hit, fn, arg_types, constexprs, hints, num_warps, num_stages)
    with _key_lock(key):
        if use_cache:
            hit = _MEMORY.get(key)
            if hit is not None:
                return _with_rebuild(hit, fn, arg_types, constexprs, hints, num_warps, num_stages)
            disk = _cache.get_cache()
            expect = {"target": target, "num_warps": int(num_warps), "num_stages": int(num_stages),
                      "debug": bool(debug), "maxnreg": maxnreg}
            # an entry that does not follow the schema is removed and reported as a miss (then rebuilt)
            entry = disk.get(key, validate=lambda meta, blobs: check_entry(meta, blobs, expect))
            if entry is not None:
                try:
                    meta, blobs = entry
                    ck = CompiledKernel.from_entry(key, meta, blobs, expect=expect)
                except (KeyError, TypeError, ValueError, AttributeError):  # (checked above: not expected)
                    ck = None
                if ck is not None:
                    _MEMORY[key] = ck
                    return _with_rebuild(ck, fn, arg_types, constexprs, hints, num_warps, num_stages)
        ck = build(fn, arg_types, constexprs, hints, target, num_warps, num_stages, debug, key, maxnreg)
        if use_cache:
            _MEMORY[key] = ck
            _cache.get_cache().put(key, *ck.to_entry())
        return _with_rebuild(ck, fn, arg_types, constexprs, hints, num_warps, num_stages)


def _with_rebuild(ck: CompiledKernel, fn, arg_types, constexprs, hints, num_warps, num_stages) -> CompiledKernel:
    if ck.rebuild is None:
        ck.rebuild = (fn, dict(arg_types), dict(constexprs), dict(hints or {}), num_warps, num_stages)
    return ck


def _backend():
    try:
        from newt.backend import cuda as backend
    except ImportError as e:
        raise RuntimeError("the CUDA backend (newt.backend.cuda) is not available: " + str(e)) from e
    return backend


def target_shared_limit(target: str) -> int | None:
    """The target's shared-memory limit per block (bytes), None for a target the backend does not know."""
    from newt.backend.cuda.targets import TARGETS
    t = TARGETS.get(target)
    return t.max_shared if t is not None else None


def build(fn, arg_types: dict, constexprs: dict, hints: dict, target: str, num_warps: int, num_stages: int,
          debug: bool, key: str, maxnreg: int | None = None) -> CompiledKernel:
    """Run the front end and the backend (no caches)."""
    from newt.frontend import build_ir

    from .driver import struct_code
    backend = _backend()
    irfn = build_ir(fn, arg_types, constexprs, hints, num_warps=num_warps, num_stages=num_stages)
    kname = irfn.name
    try:
        module = backend.generate_cuda(irfn, target=target, num_warps=num_warps, num_stages=num_stages,
                                       **({"maxnreg": maxnreg} if maxnreg is not None else {}))
    except CompilationError as e:
        oor = _as_out_of_resources(e, kname, target)
        if oor is not None:
            raise oor from e
        raise
    dyn = module.shared_bytes
    limit = target_shared_limit(target)
    if limit is not None and dyn > limit:
        raise OutOfResources(kname, "shared memory", dyn, limit, f"target {target}")
    try:
        binary = backend.compile_cuda(module, target)
    except CompilationError as e:
        # a register cap below what one instruction needs (a wgmma's accumulators): ptxas refuses the kernel,
        # and the backend says so as data on its diagnostic
        res = next((d.data for d in e.diagnostics if d.data.get("resource") == "registers"), None) if maxnreg else None
        if res is None:
            raise
        if res["needed"] is None:  # ptxas could not allocate the kernel's values within the cap
            raise OutOfResources(kname, "registers", res["limit"] + 1, res["limit"],
                                 f"maxnreg={maxnreg}: ptxas cannot allocate this kernel's registers within "
                                 f"{res['limit']} per thread on target {target}") from e
        raise OutOfResources(kname, "registers", res["needed"], res["limit"],
                             f"maxnreg={maxnreg}: ptxas needs at least {res['needed']} registers per thread for an "
                             f"instruction of this kernel on target {target}") from e
    static = binary.static_shared
    rt = [p for p in irfn.params if not p.constexpr]
    params = []
    for p, mp in zip(rt, module.params, strict=True):
        params.append(Param(p.name, str(p.type), mp.ctype, struct_code(mp.ctype, p.type)))
    loc = irfn.loc
    md = KernelMetadata(
        name=module.name, kernel_name=kname, target=target, num_warps=int(num_warps), num_stages=int(num_stages),
        n_regs=binary.n_regs, n_spills=binary.n_spills,
        shared=static + dyn, dynamic_shared=dyn, static_shared=static,
        file=loc.file if loc else None, line=loc.line if loc else None,
        signature={k: str(v) for k, v in arg_types.items()},
        constexprs={k: stable_repr(v) for k, v in constexprs.items()},
        hints={k: int(v) for k, v in (hints or {}).items()}, debug=bool(debug),
        nvrtc=nvrtc_version(), newt=package_fingerprint(),
        spill_stores=binary.spill_stores, spill_loads=binary.spill_loads, stack_frame=binary.stack_frame,
        compile_seconds=binary.compile_seconds,
        arg_names=[p.name for p in irfn.params],
        tensormaps=list(module.metadata.get("tensormaps") or []),  # TMA (tensormap.py): encoded per launch
        maxnreg=maxnreg,
        # fewer than num_stages where the asked depth overflowed shared memory (codegen._generate_fitting)
        pipeline_stages=int(module.metadata.get("num_stages_used", num_stages)),
    )
    if module.producer_warps:  # a warp-specialized loop: the block has this many warps more (warpspec.py)
        md["producer_warps"] = int(module.producer_warps)
    if module.metadata.get("ws_pingpong"):  # its consumer warpgroups take turns (pingpong.py)
        md["ws_pingpong"] = int(module.metadata["ws_pingpong"])
    if module.metadata.get("ws_overlap"):  # its first dot issued one iteration ahead (overlap.py)
        md["ws_overlap"] = 1
    if limit is not None and md.shared > limit:
        raise OutOfResources(kname, "shared memory", md.shared, limit, f"target {target}")
    asm = AsmDict(ir=str(irfn), cuda=module.source, ptx=_text(binary.ptx), cubin=bytes(binary.cubin))
    ck = CompiledKernel(asm, md, params, key)
    ck.ir = irfn
    ck.warnings = list(irfn.warnings)
    return ck


def _as_out_of_resources(e: CompilationError, kname: str, target: str) -> OutOfResources | None:
    """The backend reports a too-large footprint as a compile error whose diagnostic carries
    ``data={"resource", "required", "limit"}``: make it OutOfResources (the autotuner skips those
    quietly, like a config that does not fit the GPU)."""
    for d in e.diagnostics:
        if "resource" in d.data:
            return OutOfResources(kname, d.data["resource"], int(d.data["required"]), int(d.data["limit"]),
                                  f"target {target}")
    return None


def _text(x) -> str:
    if isinstance(x, (bytes, bytearray)):
        return bytes(x).rstrip(b"\0").decode("utf-8", "replace")
    return str(x)


# ---------------------------------------------------------------------------
# newt.compile
# ---------------------------------------------------------------------------


def _unwrap(fn):
    """The JITFunction under autotune/heuristics wrappers."""
    seen = 0
    while not hasattr(fn, "constexpr_names") or type(fn).__name__ in ("Autotuner", "Heuristics"):
        inner = getattr(fn, "fn", None)
        if inner is None or seen > 16:
            break
        fn = inner
        seen += 1
    return fn


def compile(fn, signature: dict | None = None, constexprs: dict | None = None, target: str = "sm_90a",
            num_warps: int = 4, num_stages: int = 3, hints: dict | None = None, debug: bool = False,
            cache: bool = True, maxnreg: int | None = None) -> CompiledKernel:
    """Compile ``fn`` for one signature without a GPU.

    ``signature`` maps run-time parameters to types (``"*fp32"``, ``"i32"``,
    ``nl.float16`` ...; ``"*fp32:16"`` adds the divisibility hint, Triton's
    ``"constexpr"`` marks a parameter given in ``constexprs``); ``constexprs``
    maps constexpr parameters to values.  Returns a :class:`CompiledKernel` whose
    ``asm`` holds ``ir``, ``cuda``, ``ptx``, ``cubin`` (and ``sass`` on access)
    and whose ``metadata`` holds ``n_regs``, ``n_spills``, ``shared`` ...
    """
    import inspect

    from .grid import check_options
    base = _unwrap(fn)
    check_options(getattr(base, "__name__", "kernel"), num_warps, num_stages, 1, maxnreg)
    signature = dict(signature or {})
    constexprs = dict(constexprs or {})
    hints = dict(hints or {})
    if hasattr(base, "arg_names"):
        names = list(base.arg_names)
        cx_names = set(base.constexpr_names)
        sig = base.signature
        kname = base.__name__
    else:
        sig = inspect.signature(base)
        names = list(sig.parameters)
        cx_names = set()
        kname = getattr(base, "__name__", "kernel")
        for n, p in sig.parameters.items():
            ann = p.annotation
            if ann is lc.constexpr or (isinstance(ann, str) and ann.split(".")[-1].strip() == "constexpr"):
                cx_names.add(n)
    for n in list(signature) + list(constexprs) + list(hints):
        if n not in names:
            raise TypeError(f"{kname}(): {n!r} is not a parameter (parameters: {', '.join(names)})")
    arg_types, cvals = {}, {}
    for n in names:
        if n in constexprs:
            cvals[n] = constexprs[n].value if isinstance(constexprs[n], lc.constexpr) else constexprs[n]
            continue
        ty = signature.get(n)
        if ty is None or (isinstance(ty, str) and ty.strip() == "constexpr"):
            if n in cx_names:
                d = sig.parameters[n].default
                if d is not inspect.Parameter.empty:
                    cvals[n] = d.value if isinstance(d, lc.constexpr) else d
                    continue
                raise TypeError(f"{kname}(): no value given for constexpr parameter {n!r} "
                                f"(pass constexprs={{{n!r}: ...}})")
            raise TypeError(f"{kname}(): no type given for parameter {n!r} "
                            f"(pass signature={{{n!r}: '*fp32'}} or similar)")
        if n in cx_names:
            raise TypeError(f"{kname}(): parameter {n!r} is nl.constexpr: give its value in constexprs, not a type "
                            "in signature")
        if isinstance(ty, str):
            s = ty.strip()
            if ":" in s:
                s, hint = s.split(":", 1)
                hints[n] = int(hint)
            try:
                ty = lc.dtype_from_name(s)
            except ValueError:
                raise TypeError(f"{kname}(): parameter {n!r}: unknown type {ty!r} (use '*fp32', 'i32', 'fp16' ...)") \
                    from None
        elif isinstance(ty, lc.constexpr):
            ty = ty.value
        if not isinstance(ty, lc.dtype):
            raise TypeError(f"{kname}(): parameter {n!r}: the type must be a string like '*fp32' or a newt dtype")
        arg_types[n] = ty
    return compile_specialization(base, arg_types, cvals, hints, target, num_warps, num_stages, debug,
                                  use_cache=cache, maxnreg=maxnreg)


def clear_memory_cache():
    _MEMORY.clear()


__all__ = ["compile", "compile_specialization", "CompiledKernel", "KernelMetadata", "AsmDict", "Param",
           "source_fingerprint", "package_fingerprint", "nvrtc_version", "cache_key", "stable_repr"]
