"""``compile_cuda``: CUDA C++ -> PTX and cubin through NVRTC (``cuda.bindings.nvrtc``), with the
ptxas report parsed into registers, spills and shared memory."""

from __future__ import annotations

import functools
import os
import re
import time
from dataclasses import dataclass, field

from .targets import get_target

__all__ = ["CompiledBinary", "compile_cuda", "nvrtc_version", "parse_ptxas_report"]


@dataclass
class CompiledBinary:
    name: str            # kernel symbol
    target: str
    ptx: str
    cubin: bytes
    log: str             # NVRTC log (holds the ptxas -v report)
    n_regs: int
    n_spills: int        # bytes spilled (stores + loads)
    spill_stores: int
    spill_loads: int
    stack_frame: int
    shared: int          # bytes: static (ptxas) + dynamic (the module's)
    static_shared: int
    dynamic_shared: int
    num_warps: int
    compile_seconds: float = 0.0
    module: object = field(default=None, repr=False)

    @property
    def metadata(self) -> dict:
        return {"n_regs": self.n_regs, "n_spills": self.n_spills, "shared": self.shared, "name": self.name,
                "num_warps": self.num_warps, "target": self.target, "stack_frame": self.stack_frame,
                "needs_shared_opt_in": self.dynamic_shared > 48 * 1024}


@functools.cache
def nvrtc_version() -> tuple:
    from cuda.bindings import nvrtc
    err, major, minor = nvrtc.nvrtcVersion()
    return (major, minor)


def cache_options() -> list:
    """``--no-cache`` where NVRTC has its own cache (12.9 and later): on a hit ptxas does not run, so the
    log has no report (registers, spills).  newt caches compiled kernels itself, keyed on everything that
    matters, and needs the report of every compile."""
    return ["--no-cache"] if nvrtc_version() >= (12, 9) else []


def parse_ptxas_report(log: str, name: str | None = None) -> dict:
    """Registers, spills, stack and static shared memory of ``name`` (or of the first entry) from ``-v``."""
    out = {"n_regs": 0, "spill_stores": 0, "spill_loads": 0, "stack_frame": 0, "static_shared": 0}
    lines = log.splitlines()
    start = 0
    if name is not None:
        for i, ln in enumerate(lines):
            if "Compiling entry function" in ln and f"'{name}'" in ln:
                start = i
                break
    in_entry = False
    for ln in lines[start:]:
        if "Compiling entry function" in ln:
            if in_entry:
                break
            in_entry = True
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", ln)
        if m and in_entry:
            out["stack_frame"], out["spill_stores"], out["spill_loads"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", ln)
        if m and in_entry:
            out["n_regs"] = int(m.group(1))
            m2 = re.search(r"(\d+) bytes smem", ln)
            if m2:
                out["static_shared"] = int(m2.group(1))
    return out


_EIATTR_REGCOUNT = 0x2F  # .nv.info attribute: (symbol index u32, registers u32)
_EIFMT_SVAL = 0x04  # a record with a u16 size and that many bytes


def cubin_register_count(cubin: bytes, name: str | None = None) -> int | None:
    """Registers per thread of kernel ``name`` (or of the first kernel) from the cubin's ``.nv.info``.

    The ptxas report in NVRTC's log is the usual source; this reads the same number from the ELF
    (``EIATTR_REGCOUNT`` records: symbol index, count) for when the log has no report.  None when
    the cubin holds no such record or is not a 64-bit little-endian ELF.
    """
    import struct
    try:
        named = _elf_sections(cubin)
        if named is None:
            return None
        secs = [sec for _, sec in named]

        def cstr(base, off):
            return cubin[base + off:cubin.index(b"\0", base + off)].decode(errors="replace")
        info = next((sec for nm, sec in named if nm == ".nv.info"), None)
        symtab = next((sec for sec in secs if sec[1] == 2), None)  # SHT_SYMTAB
        if info is None or symtab is None:
            return None
        strbase = secs[symtab[6]][4]
        symbols = [cstr(strbase, struct.unpack_from("<I", cubin, symtab[4] + 24 * i)[0])
                   for i in range(symtab[5] // 24)]
        p, end = info[4], info[4] + info[5]
        found = []
        while p + 4 <= end:
            fmt, attr = cubin[p], cubin[p + 1]
            if fmt == _EIFMT_SVAL:
                (size,) = struct.unpack_from("<H", cubin, p + 2)
                payload, p = cubin[p + 4:p + 4 + size], p + 4 + size
            else:
                payload, p = b"", p + 4
            if attr == _EIATTR_REGCOUNT and len(payload) >= 8:
                sym, regs = struct.unpack_from("<II", payload)
                found.append((symbols[sym] if sym < len(symbols) else None, regs))
    except (struct.error, IndexError, ValueError):
        return None
    for sym, regs in found:
        if name is None or sym == name:
            return regs
    return None


def _check(res, what):
    from cuda.bindings import nvrtc
    err = res[0] if isinstance(res, tuple) else res
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{what} failed: {err}")
    return res[1:] if isinstance(res, tuple) and len(res) > 2 else (res[1] if isinstance(res, tuple) and
                                                                     len(res) == 2 else None)


def compile_cuda(module, target=None, *, extra_options=(), lineinfo: bool = True) -> CompiledBinary:
    """Compile a ``CudaModule`` to PTX and a cubin for ``target`` (default: the module's).

    A failure raises ``newt.CompilationError`` naming the user's kernel and (where the
    failing CUDA line maps back to one) the user's line, with the generated CUDA (line
    numbers included) and the NVRTC log.

    A kernel that asked for two resident blocks per SM (``metadata["min_blocks"] == 2``) and
    spills under that register cap is compiled again without the second argument (ptxas' own
    choice, which may fit without spilling just under the cap) and, if that spills too, with one
    block per SM (the whole register file; ``(threads, 1)``: with no second argument ptxas may
    settle on 32 registers once spilling is unavoidable); the version that spills least is kept
    and ``module.source`` and its metadata then describe it.
    """
    b = _compile_once(module, target, extra_options, lineinfo)
    md = module.metadata
    b = _zero_start_retry(module, b, target, extra_options, lineinfo)
    b = _opaque_trip_retry(module, b, target, extra_options, lineinfo)
    if b.n_spills and md.get("min_blocks") == 2 and module.rerender is not None:
        best, chosen, spent = b, None, b.compile_seconds
        # first without a second argument (ptxas' own choice: often no spill below the cap's count,
        # e.g. 127 registers where a 128 cap spills 8 bytes), then the whole register file
        for blocks in (0, 1):
            alt = module.rerender(min_blocks=blocks)
            b2 = _compile_once(alt, target, extra_options, lineinfo)
            spent += b2.compile_seconds
            if b2.n_spills < best.n_spills:
                best, chosen = b2, alt
                md.update(min_blocks=blocks, launch_bounds=alt.metadata["launch_bounds"],
                          min_blocks_dropped=f"{b.n_spills} bytes spilled at 2 blocks/SM, {b2.n_spills} with "
                                             f"{alt.metadata['launch_bounds']}")
            if not best.n_spills:
                break
        if chosen is not None:  # the module now describes what was kept
            module.source, module.line_locs = chosen.source, chosen.line_locs
            best.module = module
        best.compile_seconds = spent
        return best
    want = _next_block_within_reach(b, module, target) if md.get("min_blocks") == 1 else 0
    if want and module.rerender is not None:
        # a tensor-core kernel just above the register cap of one more resident block per SM (causal attention
        # 128x64 at 8 warps: ptxas' free choice 142 registers, 128 without a spill at 2 blocks; 64x64 at 4
        # warps: 144 -> 128 at 4 blocks; Triton's builds of the same kernels 127 and 128): ask for it
        from newt.diagnostics import CompilationError
        alt = module.rerender(min_blocks=want)
        try:
            b2 = _compile_once(alt, target, extra_options, lineinfo)
        except CompilationError:  # ptxas cannot fit an instruction in that cap (a wgmma's accumulators): keep b
            return b
        b2.compile_seconds += b.compile_seconds
        if b2.n_spills == 0:
            md.update(min_blocks=want, launch_bounds=alt.metadata["launch_bounds"],
                      min_blocks_raised=f"{b.n_regs} registers, {b2.n_regs} at {want} blocks/SM")
            module.source, module.line_locs = alt.source, alt.line_locs
            b2.module = module
            return b2
    return b


_C7519 = re.compile(r"\(C7519\) warpgroup\.arrive is injected in around line (\d+)")


def unfolded_zero_dots(module, b) -> list:
    """The result ids of the dots on a zero accumulator whose zeroed registers ptxas did not fold into the
    wgmma: ptxas reports ``(C7519) warpgroup.arrive is injected in around line N ... to allow use of registers
    in GMMA`` (N a PTX line) when registers a wgmma reads were written after ``wgmma.fence``; a dot on a zero
    accumulator writes zeros there, which ptxas usually turns into scale-d 0 (``HGMMA ..., RZ, !UPT``) but in
    some kernels only for the first instruction: the rest get a register move per element every time the dot
    runs and the group is split by the injected arrive (tutorial 06's causal backward, the loops after the
    masked ones: 44-64 ``IMAD.MOV`` an iteration at d=64, Triton 3.9 passes scale-d 0 and has none).  The PTX
    line's ``.loc`` (the wgmma helper inlined at a CUDA line) names the call, the call its accumulator array,
    the module's ``zero_dots`` the dot."""
    dots = module.metadata.get("zero_dots") or {}
    lines = [int(n) for n in _C7519.findall(b.log)]
    if not dots or not lines:
        return []
    ptx = b.ptx.split("\n")
    src = module.source.split("\n")
    found: list = []
    for n in lines:
        cu = None
        for k in range(min(n, len(ptx)) - 1, -1, -1):
            m = re.match(r"\s*\.loc\s+\d+\s+(\d+)\s+\d+(?:,.*inlined_at\s+\d+\s+(\d+)\s+\d+)?", ptx[k])
            if m:
                cu = int(m.group(2) or m.group(1))
                break
        if cu is None or not 0 < cu <= len(src):
            continue
        m = re.search(r"\(&(\w+)\[\d+\]", src[cu - 1])
        rid = dots.get(m.group(1)) if m else None
        if rid is not None and rid not in found:
            found.append(rid)
    return found


def kernel_text_bytes(cubin: bytes, name: str | None = None) -> int | None:
    """Bytes of SASS of kernel ``name`` (or of the first kernel): the size of the cubin's ``.text.<name>``
    section (16 bytes an instruction on sm_70 and later).  None when the ELF has no such section."""
    for nm, sec in _elf_sections(cubin) or ():
        if nm.startswith(".text.") and (name is None or nm == ".text." + name):
            return int(sec[5])
    return None


def _elf_sections(cubin: bytes) -> list | None:
    """The section headers of a 64-bit little-endian ELF as (name, (sh_name, sh_type, sh_flags, sh_addr,
    sh_offset, sh_size, sh_link, sh_info, sh_addralign, sh_entsize)); None for anything else or a malformed file."""
    import struct
    try:
        if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
            return None
        (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        secs = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
        base = secs[shstrndx][4]
        return [(cubin[base + sec[0]:cubin.index(b"\0", base + sec[0])].decode(errors="replace"), sec)
                for sec in secs]
    except (struct.error, IndexError, ValueError):
        return None


def _zero_start_retry(module, b, target, extra_options, lineinfo):
    """Dots on a zero accumulator inside loops (``tl.dot(a, b)``, the module's ``zero_dots``) whose zeroed
    registers ptxas may not fold into the wgmma: the kernel is generated again with their first k step at
    scale-d 0 (write-only accumulators: nothing to zero, ``dot/wgmma.py _zero_start``) and that version kept
    where it spills no more and has less SASS (``kernel_text_bytes``); ``metadata["zero_start"]`` then lists
    the dots and ``module.source`` is the kept version.  Where ptxas says which dots it could not fold (C7519,
    ``unfolded_zero_dots``; ptxas 12.x prints it, NVRTC 13's does not) only those are tried.
    Opt-in, ``NEWT_WGMMA_ZERO_START=trial``: on the H100 (2026-12-07, session 12) it gave tutorial 06's causal d=64
    backward no visible gain (1.08x Triton's time before, 1.079x with it, not the same run) for a second compile
    of every attention kernel; unset or ``=0`` none, ``=1`` every such dot with no second compile.
    Exact: scale-d 0 computes A·B where the zeroed accumulator computed A·B + 0 (the same but for the sign of
    an exact zero sum, as in Triton, which starts its dots this way)."""
    if os.environ.get("NEWT_WGMMA_ZERO_START", "") != "trial" or module.rerender is None:
        return b
    md = module.metadata
    dots = md.get("zero_dots") or {}
    if not dots or md.get("ws_overlap") or md.get("ws_pingpong") or module.producer_warps:
        return b  # (warp-specialized loops schedule their dots themselves: left as they are)
    ids = unfolded_zero_dots(module, b) if lineinfo else []
    have = frozenset(md.get("zero_start") or ())
    want = have | frozenset(ids or dots.values())
    if want == have:
        return b
    return _keep_smaller_variant(module, b, target, extra_options, lineinfo, "zero_start", sorted(want),
                                 f"{len(want)} dots: ", zero_start=want)


def _keep_smaller_variant(module, b, target, extra_options, lineinfo, tag: str, value, why: str = "", **render):
    """``b``'s kernel generated again with ``render`` (``module.rerender`` keywords) and compiled; the new
    version is kept where it spills no more and has less SASS (``kernel_text_bytes``): ``metadata[tag] = value``
    and ``metadata[tag + "_gain"]``, ``module.source`` and later rerenders then follow it.  Otherwise ``b``
    stays, byte for byte, and ``metadata[tag + "_rejected"]`` says why (``why`` first)."""
    md = module.metadata
    kw = {} if md.get("maxnreg") else {"min_blocks": md.get("min_blocks", 0)}
    alt = module.rerender(**kw, **render)
    from newt.diagnostics import CompilationError
    try:
        b2 = _compile_once(alt, target, extra_options, lineinfo)
    except CompilationError:
        return b
    b2.compile_seconds += b.compile_seconds
    t1, t2 = kernel_text_bytes(b.cubin, module.name), kernel_text_bytes(b2.cubin, module.name)
    if b2.n_spills > b.n_spills or t1 is None or t2 is None or t2 >= t1:
        md[f"{tag}_rejected"] = f"{why}{b.n_spills} -> {b2.n_spills} spill bytes, {t1} -> {t2} bytes of SASS"
        b.compile_seconds = b2.compile_seconds
        return b
    md[tag] = value
    md[f"{tag}_gain"] = f"{t1} -> {t2} bytes of SASS, {b.n_spills} -> {b2.n_spills} spill bytes"
    module.source, module.line_locs = alt.source, alt.line_locs
    module.rerender = functools.partial(module.rerender, **render)
    b2.module = module
    return b2


def _opaque_trip_retry(module, b, target, extra_options, lineinfo):
    """A kernel with software-pipelined loops of a constant trip count (``metadata["const_trip_loops"]``) is
    generated again with those bounds opaque to the optimizer (``pipeline.opaque_trip_count``: ptxas can
    otherwise take the loops off the uniform datapath) and that version kept where it spills no more and has
    less SASS (``kernel_text_bytes``); ``metadata["opaque_trip"]`` then says so and ``module.source`` is the kept
    version.  ``NEWT_OPAQUE_TRIP=0`` or ``=1`` (never / always opaque): no trial.  Exact: the same bound."""
    md = module.metadata
    if os.environ.get("NEWT_OPAQUE_TRIP", "trial") in ("0", "1") or module.rerender is None:
        return b
    if not md.get("const_trip_loops") or md.get("opaque_trip"):
        return b
    return _keep_smaller_variant(module, b, target, extra_options, lineinfo, "opaque_trip", True, opaque_trip=True)


def _next_block_within_reach(b, module, target) -> int:
    """The resident blocks per SM to ask for (``__launch_bounds__(T, n)``), 0 for none: one more than the
    registers allow now (64K per SM, allocated 8 per thread at a time), when the registers are at most a
    quarter above that count's cap, nothing spills, and the shared memory and threads of that many blocks
    fit."""
    threads = module.threads
    if b.n_spills or not b.n_regs or module.producer_warps:  # (warp-specialized: one block per SM)
        return 0
    want = 65536 // (threads * ((b.n_regs + 7) // 8 * 8)) + 1
    cap = min(255, 65536 // (want * threads) // 8 * 8)
    tgt = get_target(target or module.target)
    if not cap < b.n_regs <= cap + cap // 4 or want * threads > 2048:
        return 0
    return want if want * (b.shared + 1024) <= tgt.shared_per_sm else 0


def _compile_once(module, target, extra_options, lineinfo) -> CompiledBinary:
    from cuda.bindings import nvrtc
    tgt = get_target(target or module.target)
    t0 = time.perf_counter()
    hdr_names = [k.encode() for k in module.headers]
    hdr_srcs = [v.encode() for v in module.headers.values()]
    fname = f"{module.kernel or module.name}.cu"
    err, prog = nvrtc.nvrtcCreateProgram(module.source.encode(), fname.encode(), len(hdr_srcs), hdr_srcs, hdr_names)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcCreateProgram failed: {err}")
    try:
        opts = [f"--gpu-architecture={tgt.name}", "-std=c++17", "--ptxas-options=-v", "-default-device",
                *cache_options()]
        if lineinfo:
            opts.append("-lineinfo")
        opts += list(extra_options)
        bopts = [o.encode() for o in opts]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(bopts), bopts)
        _, n = nvrtc.nvrtcGetProgramLogSize(prog)
        buf = b" " * n
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.decode(errors="replace").replace("\x00", "").strip()  # (ptxas' part may start with a NUL)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            from .asm_errors import inline_asm_error  # ptxas on the user's inline asm: B003 at the call
            raise inline_asm_error(module, log, tgt.name, opts) or _compile_error(module, log, fname)
        _, n = nvrtc.nvrtcGetPTXSize(prog)
        pbuf = b" " * n
        nvrtc.nvrtcGetPTX(prog, pbuf)
        ptx = pbuf.decode(errors="replace").rstrip("\x00")
        _, n = nvrtc.nvrtcGetCUBINSize(prog)
        cbuf = b" " * n
        nvrtc.nvrtcGetCUBIN(prog, cbuf)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    rep = parse_ptxas_report(log, module.name)
    if not rep["n_regs"]:  # no ptxas report in the log: the cubin itself records the register count
        rep["n_regs"] = cubin_register_count(bytes(cbuf), module.name) or 0
    dyn = module.shared_bytes
    return CompiledBinary(
        name=module.name, target=tgt.name, ptx=ptx, cubin=bytes(cbuf), log=log, n_regs=rep["n_regs"],
        n_spills=rep["spill_stores"] + rep["spill_loads"], spill_stores=rep["spill_stores"],
        spill_loads=rep["spill_loads"], stack_frame=rep["stack_frame"], shared=rep["static_shared"] + dyn,
        static_shared=rep["static_shared"], dynamic_shared=dyn, num_warps=module.num_warps,
        compile_seconds=time.perf_counter() - t0, module=module)


def _compile_error(module, log: str, fname: str):
    from newt.diagnostics import CompilationError, Diagnostic, Severity, Span
    # first error line: "name.cu(123): error: message"
    loc = None
    msg = "NVRTC could not compile the generated CUDA"
    for ln in log.splitlines():
        m = re.match(r"^(.*)\((\d+)\): (error|catastrophic error): (.*)$", ln.strip())
        if m:
            msg += f": {m.group(4)}"
            k = int(m.group(2)) - 1
            if 0 <= k < len(module.line_locs):
                for j in range(k, -1, -1):
                    if module.line_locs[j] is not None:
                        loc = module.line_locs[j]
                        break
            break
    extra = f"generated CUDA ({module.target}):\n{module.numbered()}\n\nNVRTC log:\n{log}"
    data = resource_failure(log)
    if loc is not None:
        span = Span(loc.line, loc.col, loc.end_line, loc.end_col)
        d = Diagnostic("B001", Severity.ERROR, span, msg, file=loc.file, kernel=module.kernel, data=data)
        from .codegen import _source_text
        return CompilationError([d], _source_text(loc.file), kernel=module.kernel, extra=extra)
    d = Diagnostic("B001", Severity.ERROR, Span(1, 1, 1, 2), msg, file=module.file or "<generated>",
                   kernel=module.kernel, data=data)
    return CompilationError([d], None, kernel=module.kernel, extra=extra)


def resource_failure(log: str) -> dict:
    """What a compiler log says about a resource the kernel needs beyond a limit, as data the runtime reads
    (``{"resource": "registers", "needed": 168, "limit": 64}`` for ptxas' "Insufficient registers (64) ...
    register target of 168"): the backend reads its tools' text, nobody above it does. ``{}`` when none."""
    m = re.search(r"Insufficient registers \((\d+)\).*?register target of (\d+)", log, re.S)
    if m is not None:
        return {"resource": "registers", "needed": int(m.group(2)), "limit": int(m.group(1))}
    # "(C7600) Register allocation failed with register count of '64'": no instruction needs more, but ptxas
    # cannot fit the kernel's live values in the cap (a maxnreg below the kernel's need; how many it needs is
    # not said: ``needed`` None)
    m = re.search(r"Register allocation failed with register count of '?(\d+)'?", log)
    if m is not None:
        return {"resource": "registers", "needed": None, "limit": int(m.group(1))}
    return {}
