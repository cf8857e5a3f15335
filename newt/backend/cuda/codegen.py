"""``generate_cuda``: tile IR -> ``CudaModule`` (pure Python; no CUDA needed)."""

from __future__ import annotations

import functools
import linecache
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from newt.ir.types import is_block, type_str

# importing the lowering modules registers their lowerings
from . import (  # noqa: F401
    lower_asm,
    lower_basic,
    lower_dot,
    lower_gather,
    lower_histogram,
    lower_memory,
    lower_poll,
    lower_reduce,
)
from .axisinfo import analyze_axis_info
from .ctypes import ctype
from .dot import select_dot_lowering
from .dot.fold import fold_dot_adds
from .elementwise import libdevice_declaration
from .emitter import BackendError, Chunk, Emitter
from .pingpong import PingPongUnfit
from .pipeline import plan_pipelines
from .plan import plan_layouts
from .prelude import HEADER_NAME, PRELUDE
from .targets import get_target
from .tma import kernel_params as tma_params
from .warpspec import PRODUCER_WARPS

__all__ = ["CudaModule", "CudaParam", "generate_cuda"]

_CPP_KEYWORDS = {
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const",
    "constexpr", "continue", "default", "delete", "do", "double", "else", "enum", "explicit", "export", "extern",
    "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new",
    "noexcept", "not", "nullptr", "operator", "or", "private", "protected", "public", "register", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "template", "this", "throw", "true", "try", "typedef",
    "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "while", "xor", "smem",
    "lane_id", "warp_id", "tid", "i", "r", "k", "f", "b", "j", "q", "w", "main", "printf", "min", "max",
}


@dataclass
class CudaParam:
    name: str        # the kernel parameter's name
    cname: str       # its C++ name in the generated source
    ctype: str       # C++ type ("float*", "int", ...)
    dtype: str       # newt signature type ("*fp32", "i32", ...)
    size: int        # bytes the runtime packs for it


@dataclass
class CudaModule:
    source: str                      # the CUDA C++ (includes HEADER_NAME)
    name: str                        # extern "C" symbol of the kernel
    params: list                     # CudaParam per run-time parameter, in order
    shared_bytes: int                # dynamic shared memory to launch with
    num_warps: int
    num_stages: int
    target: str
    layouts: dict                    # "%id" -> layout description (for the language server)
    headers: dict = field(default_factory=dict)   # include name -> text (passed to NVRTC)
    line_locs: list = field(default_factory=list)  # per source line: the IR Loc it came from (or None)
    kernel: str = ""                 # the user's kernel name
    file: str = ""                   # the user's file
    metadata: dict = field(default_factory=dict)
    #: ``rerender(min_blocks=n)``: the same kernel generated again with ``__launch_bounds__(threads, n)``
    #: (0: no second argument); None for a module not made by ``generate_cuda``
    rerender: Callable[..., CudaModule] | None = field(default=None, repr=False, compare=False)
    #: warps beyond ``num_warps`` (a warp-specialized loop's producer warpgroup, ``warpspec.py``)
    producer_warps: int = 0

    @property
    def threads(self) -> int:
        return 32 * (self.num_warps + self.producer_warps)

    @property
    def needs_shared_opt_in(self) -> bool:
        """True when the launch must first raise CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES."""
        return self.shared_bytes > 48 * 1024

    def full_source(self) -> str:
        """The source with the prelude pasted in (compiles on its own)."""
        return self.source.replace(f'#include "{HEADER_NAME}"', self.headers.get(HEADER_NAME, ""))

    def numbered(self) -> str:
        lines = self.source.splitlines()
        w = len(str(len(lines)))
        return "\n".join(f"{i + 1:>{w}} | {t}" for i, t in enumerate(lines))


def _cname(name: str) -> str:
    n = re.sub(r"\W", "_", name)
    if n in _CPP_KEYWORDS or n.startswith("__") or re.match(r"^(v|t|tf|w|acc|red|scan|pre|has|cv|sa|sb|y)\d", n):
        n = "arg_" + n
    return n


def _param_size(ty) -> int:
    if ty.is_ptr():
        return 8
    return max(1, ty.primitive_bitwidth // 8)


def generate_cuda(fn, target="sm_90a", num_warps: int = 4, num_stages: int = 3, *,
                  device_asserts: bool = True, min_blocks: int | None = None,
                  maxnreg: int | None = None, zero_start: frozenset = frozenset(),
                  opaque_trip: bool = False) -> CudaModule:
    """Lower one concrete ``ir.Function`` to CUDA C++ for ``target``.

    ``min_blocks`` is the second ``__launch_bounds__`` argument (resident blocks per SM; 0: none);
    None lets the backend choose (see ``_min_blocks``).  ``maxnreg`` (Triton's launch option) caps the
    registers per thread: the kernel is declared ``__maxnreg__(maxnreg)`` instead of ``__launch_bounds__``
    (CUDA allows only one of the two) and ``min_blocks`` does not apply.

    Raises ``newt.CompilationError`` (pointing at the user's line) for what the
    backend cannot lower.
    """
    tgt = get_target(target)
    num_warps = int(num_warps)
    if num_warps < 1 or num_warps > 32 or num_warps & (num_warps - 1):
        raise ValueError(f"num_warps must be a power of two in 1..32, got {num_warps}")
    num_stages = max(1, int(num_stages or 1))
    if maxnreg is not None and (not isinstance(maxnreg, int) or isinstance(maxnreg, bool) or
                                not 1 <= maxnreg <= 255):
        raise ValueError(f"maxnreg must be an int from 1 to 255 (registers per thread), got {maxnreg!r}")
    fold_dot_adds(fn)  # x + dot(a, b, 0) -> dot(a, b, x) (dot/fold.py)
    fn.number()
    try:
        module = _generate_fitting(fn, tgt, num_warps, num_stages, device_asserts, 0 if maxnreg else min_blocks,
                                   maxnreg, zero_start, opaque_trip)
    except BackendError as e:
        raise _backend_error(fn, e) from None
    module.rerender = functools.partial(generate_cuda, fn, target, num_warps, num_stages,
                                        device_asserts=device_asserts, maxnreg=maxnreg)
    return module


def _generate_fitting(fn, tgt, num_warps, num_stages, device_asserts, want_blocks, maxnreg=None,
                      zero_start=frozenset(), opaque_trip=False) -> CudaModule:
    """``_generate``, with fewer pipeline stages where the asked number overflows shared memory.

    newt's shared-memory plan is coarser than Triton's (a tile staged once for a dot, a K-major copy and the
    scratch used inside a pipelined loop overlap no ring), so a kernel Triton fits can overflow here at the
    same ``num_stages`` (ml-cross-entropy's ``_cce_backward_kernel``: 361 KB at 4 stages on sm_90a).  Rather
    than refuse it, the kernel is built with the largest smaller depth that fits (down to 1: no software
    pipeline); ``metadata["num_stages_used"]`` says which.  Where none fits, the asked depth's error stands."""
    try:
        return _generate(fn, tgt, num_warps, num_stages, device_asserts, want_blocks, maxnreg, zero_start=zero_start,
                         opaque_trip=opaque_trip)
    except BackendError as e:
        if e.data.get("resource") != "shared memory" or num_stages <= 1 or \
                not any(op.name == "scf.for" for op in fn.walk()):
            raise
        first = e
    for k in range(num_stages - 1, 0, -1):
        try:
            module = _generate(fn, tgt, num_warps, k, device_asserts, want_blocks, maxnreg, zero_start=zero_start,
                               opaque_trip=opaque_trip)
        except BackendError as e:
            if e.data.get("resource") != "shared memory":
                raise first from None
            continue
        module.num_stages = num_stages
        module.metadata["num_stages_used"] = k
        return module
    raise first


def _generate(fn, tgt, num_warps, num_stages, device_asserts, want_blocks, maxnreg=None, ws=True,
              pp=True, zero_start=frozenset(), opaque_trip=False) -> CudaModule:
    axis = analyze_axis_info(fn)
    plan = plan_layouts(fn, num_warps, axis, lambda op: select_dot_lowering(op, tgt, num_warps))
    pipes = plan_pipelines(fn, tgt, num_stages, plan, axis, 0 if maxnreg or not ws else num_warps, pingpong=pp)
    em = Emitter(fn, tgt, num_warps, num_stages, plan, axis, device_asserts=device_asserts, pipes=pipes)
    em.__dict__["zero_start"] = zero_start  # dots whose first k step gets scale-d 0 (wgmma._starts_from_zero)
    em.__dict__["opaque_trip"] = opaque_trip  # constant loop bounds hidden from the optimizer (pipeline.py)
    for name, size in pipes.buffers:  # pipeline buffers first: they live through their loops
        em.smem_persistent(size, name)
    # parameters
    params = []
    sig = []
    for p in fn.params:
        if p.constexpr:
            continue
        cn = _cname(p.name)
        em.names[p.value] = cn
        em.used_names.add(cn)
        em.scalars[p.value] = cn
        ct = ctype(p.type)
        params.append(CudaParam(p.name, cn, ct, type_str(p.type), _param_size(p.type)))
        sig.append(f"    {ct} {cn}")
    body = Chunk(1)
    top = body.sub(0)
    smem_decl = body.sub(0)
    ids = body.sub(0)
    em.top = body.sub(0)
    main = body.sub(0)
    try:
        em.emit_region(fn.body, main)
    except PingPongUnfit:  # the loop body synchronizes the block: no ping-pong (pingpong.py)
        return _generate(fn, tgt, num_warps, num_stages, device_asserts, want_blocks, maxnreg, ws, pp=False,
                         zero_start=zero_start, opaque_trip=opaque_trip)
    for op in fn.walk():  # libdevice functions: declared, NVRTC links their definitions
        if op.name == "libdevice":
            sym, decl = libdevice_declaration(op.attrs["fn"], [o.type for o in op.operands])
            em.helpers.setdefault(sym, decl)
    tmap_decls, tmaps = tma_params(em)  # TMA tensor maps: parameters after the ordinary ones (tma.py)
    sig += tmap_decls
    # shared memory: pipeline buffers first; scratch outside pipelined loops overlaps them
    # wgmma's swizzled tiles must start on their swizzle pattern's period (up to 1024 bytes)
    sm_al = 1024 if any(d.name == "wgmma" for d in plan.dot.values()) else 0
    if sm_al:
        for u in em.smem_uses + em.reserved:
            u.size = (u.size + sm_al - 1) // sm_al * sm_al
    pers = sum(u.size for u in em.smem_uses if u.persistent)
    # a producer that walks a tile loop refills the ring while the consumers run the tile's epilogue: no
    # scratch overlaps the ring then (warpspec.py)
    beside = pipes.ws_outer is not None
    scratch_base, scratch_end = _scratch_offsets(em.smem_uses, pers, beside)
    off = 0
    for u in em.smem_uses:
        if u.persistent:
            smem_decl.line(f"constexpr int {u.name} = {off};")
            off += u.size
    for u in em.smem_uses:
        if not u.persistent:
            smem_decl.line(f"constexpr int {u.name} = {scratch_base[u.name]};")
    shared = max(scratch_end)
    red = em.reduce_bytes
    if red:  # the two reduction buffers overlap nothing (see Emitter.reduce_buffer)
        base = (shared + 15) // 16 * 16
        smem_decl.line(f"constexpr int SMEM_RED0 = {base};")
        smem_decl.line(f"constexpr int SMEM_RED1 = {base + red};")
        shared = base + 2 * red
    for u in em.reserved:  # operands staged once: live from their definition to the kernel's end
        al = sm_al or 128
        base = (shared + al - 1) // al * al
        smem_decl.line(f"constexpr int {u.name} = {base};")
        shared = base + u.size
    if shared > tgt.max_shared and pipes.ws is not None:  # the split's barriers / separate scratch do not fit
        return _generate(fn, tgt, num_warps, num_stages, device_asserts, want_blocks, maxnreg, ws=False,
                         zero_start=zero_start, opaque_trip=opaque_trip)
    if shared > tgt.max_shared:
        raise BackendError(f"the kernel needs {shared} bytes of shared memory but {tgt.name} allows "
                           f"{tgt.max_shared}; use smaller blocks or fewer stages (num_stages={num_stages})",
                           None, data={"resource": "shared memory", "required": shared, "limit": tgt.max_shared,
                                       "target": tgt.name})
    if em.smem_uses or red or em.reserved:
        top.line(f"extern __shared__ __align__({sm_al or 128}) unsigned char smem[];")
    ids.line("const int lane_id = threadIdx.x & 31;")
    if pipes.ws is not None:  # the producer warpgroup runs the prologue as warps 0..3 (warpspec.py)
        ids.line(f"const int warp_id = __shfl_sync(0xffffffffu, ((int)threadIdx.x >> 5) & {num_warps - 1}, 0);")
    elif em.plan.dot:  # a shuffle makes the warp index provably uniform (uniform registers in mma addressing)
        ids.line("const int warp_id = __shfl_sync(0xffffffffu, (int)threadIdx.x >> 5, 0);")
    else:  # no shuffle on the way to the first load's address (it delays every access by its latency)
        ids.line("const int warp_id = (int)threadIdx.x >> 5;")
    # assemble
    head = [f"// Generated by newt's CUDA backend from {fn.file}",
            f"// kernel {fn.name}: target {tgt.name}, num_warps={num_warps}, num_stages={num_stages}, "
            f"{shared} bytes of dynamic shared memory",
            f'#include "{HEADER_NAME}"', ""]
    for h in em.helpers.values():
        head.extend(h.rstrip("\n").split("\n"))
        head.append("")
    kname = _cname(fn.name)
    min_blocks = _min_blocks(fn, num_warps, em) if want_blocks is None else f", {want_blocks}" if want_blocks else ""
    pw = PRODUCER_WARPS if pipes.ws is not None else 0
    if pw:  # one block per SM: setmaxnreg's budget (warpspec.register_split) is the whole register file
        min_blocks = ", 1"
    bounds = f"{32 * (num_warps + pw)}{min_blocks}"
    qualifier = f"__maxnreg__({maxnreg})" if maxnreg else f"__launch_bounds__({bounds})"
    head.append(f'extern "C" __global__ void {qualifier} {kname}(')
    head.append(",\n".join(sig) + ") {" if sig else ") {")
    out_lines: list[str] = []
    locs: list = []
    for line in "\n".join(head).split("\n"):
        out_lines.append(line)
        locs.append(None)
    body.render(out_lines, locs)
    if pw:
        out_lines.append("#undef __syncthreads")
        locs.append(None)
    out_lines.append("}")
    locs.append(None)
    source = "\n".join(out_lines) + "\n"
    layouts = {}
    for op in fn.walk():
        for r in op.results:
            if is_block(r.type):
                d = plan.describe(r)
                if d:
                    layouts[f"%{r.id}"] = d
    meta = {"pipelined_loops": len(em.pipelines), "num_stages_used": num_stages,
            "dot_lowerings": sorted({d.name for d in plan.dot.values()}),
            "needs_shared_opt_in": shared > 48 * 1024, "min_blocks": int(min_blocks[2:] or 0),
            "launch_bounds": qualifier, "tensormaps": tmaps, "maxnreg": maxnreg}
    if pw:
        meta["producer_warps"] = pw
    if pipes.pingpong is not None:
        meta["ws_pingpong"] = pipes.pingpong.groups
    if pipes.overlap is not None:
        meta["ws_overlap"] = 1
    if em.__dict__.get("zero_dots"):  # accumulator array -> dot result id (compiler._zero_start_retry)
        meta["zero_dots"] = dict(em.__dict__["zero_dots"])
    if zero_start:
        meta["zero_start"] = sorted(zero_start)
    if em.__dict__.get("const_trip_loops"):  # pipelined loops of a constant trip count (compiler._opaque_trip_retry)
        meta["const_trip_loops"] = em.__dict__["const_trip_loops"]
        meta["opaque_trip"] = bool(em.__dict__.get("opaque_trip_applied"))
    return CudaModule(source=source, name=kname, params=params, shared_bytes=shared, num_warps=num_warps,
                      num_stages=num_stages, target=tgt.name, layouts=layouts, headers={HEADER_NAME: PRELUDE},
                      line_locs=locs, kernel=fn.name, file=fn.file, metadata=meta, producer_warps=pw)


def _backend_error(fn, e: BackendError):
    from newt.diagnostics import CompilationError, Diagnostic, Severity, Span
    loc = e.location or fn.loc
    span = Span(loc.line, loc.col, loc.end_line, loc.end_col) if loc else Span(1, 1, 1, 2)
    d = Diagnostic(e.code, Severity.ERROR, span, f"CUDA backend: {e.message}", hint=e.hint,
                   file=loc.file if loc else fn.file, kernel=fn.name, data=dict(e.data))
    return CompilationError([d], _source_text(getattr(loc, "file", fn.file)), kernel=fn.name)


def _source_text(path):
    if not path or path.startswith("<"):
        return None
    lines = linecache.getlines(path)
    return "".join(lines) if lines else None


def _min_blocks(fn, num_warps, em) -> str:
    """The second ``__launch_bounds__`` argument.

    * Wide dot-free kernels (>= 16 warps) ask for two resident blocks per SM (<= 64 registers at 512
      threads): memory-bound kernels need the occupancy to keep enough loads in flight.  When that
      makes ptxas spill, ``compile_cuda`` compiles again without it (``metadata["min_blocks"]``).
    * Kernels with tensor-core dots say 1: it caps registers at 255 explicitly.  Without a cap,
      ptxas (12.x/13.x) sometimes settles on 32 registers and kilobytes of local memory for big
      accumulator tiles it cannot fit."""
    if num_warps >= 16 and not em.plan.dot:
        return ", 2"
    if any(d.name != "fma" for d in em.plan.dot.values()):
        return ", 1"
    return ""


def _scratch_offsets(uses, pers: int, beside: bool) -> tuple[dict, tuple[int, int]]:
    """Where each scratch area starts, and where the two classes of areas end: areas used inside a
    software-pipelined loop (or beside a producer's ring) start after the pipeline buffers (``pers``), the
    others at 0; within a class the areas share bytes (each use is ordered against the others by barriers).
    Areas the async proxy also accesses (a wgmma operand staged by plain stores, a TMA tile) start after their
    class's plain-access areas.  This was session 13's suspect for Helion's gather_gemv giving wrong rows through
    deuteron (the rows under a layout conversion's 524 bytes); the H200 showed it was not the cause (session 14:
    the pipeline's copy code had put that conversion in the ring, ``pipeline.emit_pipelined_for``), so the
    separation is a precaution, not a fix shown to be needed.  Sizes are already rounded to the swizzle period
    where wgmma is used, so the moved areas keep their alignment."""
    base: dict = {}
    ends = []
    for inside in (True, False):
        cls = [u for u in uses if not u.persistent and bool(u.inside or beside) == inside]
        start = pers if inside else 0
        plain = max((u.size for u in cls if not u.async_proxy), default=0)
        end = start
        for u in cls:
            base[u.name] = start + (plain if u.async_proxy else 0)
            end = max(end, base[u.name] + u.size)
        ends.append(end)
    return base, (ends[0], ends[1])
