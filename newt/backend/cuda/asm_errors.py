"""A ptxas error inside the PTX of ``nl.inline_asm_elementwise``, reported at the user's call (B003).

NVRTC's log names a line of the PTX it generated ("ptxas application ptx input, line 140; error : ...").
On such a failure the PTX is generated again (a ``compute_`` target runs no ptxas) with line info; the
``.loc`` before that line names the CUDA line, whose ``asm(...)`` statement ``lower_asm`` marked, and the
module's ``line_locs`` the user's line.  The PTX between ``// begin inline asm`` and the failing line
gives the line inside the user's asm.
"""

from __future__ import annotations

import re

from .lower_asm import MARKER

_PTXAS = re.compile(r"ptxas[^\n]*?line (\d+); error\s*:\s*(.*)")


def _ptx_of(module, target_name: str, options: list) -> str | None:
    from cuda.bindings import nvrtc
    arch = target_name.replace("sm_", "compute_")
    fname = f"{module.kernel or module.name}.cu"
    hdr_names = [k.encode() for k in module.headers]
    hdr_srcs = [v.encode() for v in module.headers.values()]
    err, prog = nvrtc.nvrtcCreateProgram(module.source.encode(), fname.encode(), len(hdr_srcs), hdr_srcs, hdr_names)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return None
    try:
        opts = [f"--gpu-architecture={arch}", "-std=c++17", "-default-device", "-lineinfo"] + [
            o for o in options if not o.startswith("--gpu-architecture") and o != "--ptxas-options=-v"]
        bopts = [o.encode() for o in opts]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(bopts), bopts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return None
        _, n = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * n
        nvrtc.nvrtcGetPTX(prog, buf)
        return buf.decode(errors="replace").rstrip("\x00")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def inline_asm_error(module, log: str, target_name: str, options=()):
    """A ``CompilationError`` (B003) at the user's ``nl.inline_asm_elementwise`` call, or None when the
    ptxas error is not inside an inline asm of the kernel."""
    if MARKER not in module.source:
        return None
    m = _PTXAS.search(log)
    if m is None:
        return None
    ptx_line, msg = int(m.group(1)), m.group(2).strip()
    ptx = _ptx_of(module, target_name, list(options))
    if ptx is None:
        return None
    lines = ptx.splitlines()
    if not 0 < ptx_line <= len(lines):
        return None
    cu_line, begin = None, None
    for k in range(ptx_line - 1, -1, -1):
        t = lines[k].strip()
        if begin is None and t.startswith("// begin inline asm"):
            begin = k
        mm = re.match(r"\.loc\s+\d+\s+(\d+)\s+\d+", t)
        if mm:
            cu_line = int(mm.group(1))
            break
    src = module.source.splitlines()
    if cu_line is None or not 0 < cu_line <= len(src) or MARKER not in src[cu_line - 1] or begin is None:
        return None
    loc = None
    for j in range(cu_line - 1, -1, -1):
        if j < len(module.line_locs) and module.line_locs[j] is not None:
            loc = module.line_locs[j]
            break
    if loc is None:
        return None
    from newt.diagnostics import CompilationError, Diagnostic, Severity, Span

    from .codegen import _source_text
    asm_line = ptx_line - begin - 1
    text = lines[ptx_line - 1].strip()
    d = Diagnostic("B003", Severity.ERROR, Span(loc.line, loc.col, loc.end_line, loc.end_col),
                   f"ptxas rejected the inline asm for {module.target}: {msg} (asm line {asm_line}: `{text}`)",
                   hint="the asm needs an instruction this target lacks, or has a PTX error; the interpreter "
                        "(NEWT_INTERPRET=1) can still run the PTX subset it knows",
                   file=loc.file, kernel=module.kernel, data={"ptx_line": ptx_line, "asm_line": asm_line,
                                                              "ptxas": msg, "target": module.target})
    return CompilationError([d], _source_text(loc.file), kernel=module.kernel,
                            extra=f"NVRTC log:\n{log}")
