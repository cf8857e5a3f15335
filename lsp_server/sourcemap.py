"""Source <-> generated code: which line of the user's file each line of the generated CUDA, PTX and SASS
comes from, and the SASS instruction mix of each source line.

The chain is the compiler's own line information:

* CUDA: the backend records, per generated line, the IR location it came from (``CudaModule.line_locs``);
* PTX: NVRTC's ``-lineinfo`` writes ``.loc FILE LINE COL`` before the instructions of each CUDA line (with
  ``inlined_at FILE LINE COL`` for code inlined from a helper: the call site is the kernel's line);
* SASS: ``nvdisasm --print-line-info-inline`` annotates the cubin's instructions with their CUDA line
  (``//## File "k.cu", line 52``); the SASS view (cuobjdump's text) is matched by instruction address.

Every map is a list with one entry per line of the text: the 1-based line of the user's file, or None.
Pure text processing; running nvdisasm is :func:`nvdisasm_line_info` (the worker calls it).
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import tempfile

__all__ = ["cuda_lines", "ptx_lines", "sass_addresses", "sass_lines", "instruction_mix", "hottest_lines",
           "nvdisasm_line_info", "MIX_CLASSES", "with_header"]

#: the instruction classes the kernel hover names (others count in the line's total only)
MIX_CLASSES = ("HGMMA", "QGMMA", "IGMMA", "HMMA", "IMMA", "LDG", "STG", "LDGSTS", "UTMALDG", "UTMASTG", "LDSM",
               "LDS", "STS", "LDL", "STL")

_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+\d+)?")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_SASS_FILE = re.compile(r'^\s*//## File ')
_SASS_AT = re.compile(r'"([^"]*)", line (\d+)')
_ENCODING = re.compile(r"^\s+/\* 0x[0-9a-fA-F]+ \*/\s*$")
_ADDR = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*)$")


def cuda_lines(line_locs) -> list:
    """Per line of the generated CUDA, the user's line (``line_locs`` holds IR ``Loc``s or None)."""
    return [getattr(loc, "line", None) if loc is not None else None for loc in line_locs]


def _main_files(files: dict) -> set:
    """The ids of the generated ``.cu`` file (not the prelude header)."""
    return {fid for fid, path in files.items() if path.endswith(".cu")}


def ptx_lines(ptx: str, cuda: list) -> list:
    """Per line of ``ptx``, the user's line of the CUDA line its instructions come from."""
    lines = ptx.splitlines()
    files = {}
    for ln in lines:
        m = _FILE.match(ln)
        if m:
            files[m.group(1)] = m.group(2)
    main = _main_files(files) or {"1"}
    out: list = []
    cur = None
    for ln in lines:
        m = _LOC.match(ln)
        if m:
            fid, line, ifid, iline = m.groups()
            # code inlined from a helper: the call site is the kernel's line
            cu = int(iline) if iline and ifid in main else int(line) if fid in main else None
            cur = cuda[cu - 1] if cu is not None and 0 < cu <= len(cuda) else None
            out.append(None)
            continue
        s = ln.strip()
        if not s or s.startswith(("//", ".", "{", "}", "$")) or s.endswith(":"):
            out.append(None)
            if s == "}":
                cur = None
            continue
        out.append(cur)
    return out


def sass_addresses(line_info: str) -> dict:
    """``nvdisasm --print-line-info-inline`` text -> {instruction address: CUDA line of the ``.cu`` file; for code
    inlined from a helper, the line of the call}."""
    out: dict = {}
    cur = None
    for ln in line_info.splitlines():
        if _SASS_FILE.match(ln):
            # ``File "k.cu", line 11 inlined at "k.cu", line 272``: the outermost call site is the kernel's line
            at = [(f, int(n)) for f, n in _SASS_AT.findall(ln) if f.endswith(".cu")]
            cur = at[-1][1] if at else None
            continue
        a = _ADDR.match(ln)
        if a and cur is not None:
            out[int(a.group(1), 16)] = cur
    return out


def sass_lines(sass: str, addresses: dict, cuda: list) -> list:
    """Per line of the SASS view (cuobjdump's text), the user's line of its instruction (the line of an
    instruction's second encoding word, ``/* 0x... */`` alone, goes with the instruction)."""
    out: list = []
    prev = None
    for ln in sass.splitlines():
        a = _ADDR.match(ln)
        if a:
            cu = addresses.get(int(a.group(1), 16))
            prev = cuda[cu - 1] if cu is not None and 0 < cu <= len(cuda) else None
            out.append(prev)
        elif _ENCODING.match(ln):
            out.append(prev)
        else:
            prev = None
            out.append(None)
    return out


def _opcode(instr: str) -> str | None:
    s = instr.strip()
    if s.startswith("{"):
        s = s[1:].strip()
    if s.startswith("@"):
        parts = s.split(None, 1)
        s = parts[1] if len(parts) > 1 else ""
    tok = s.split(None, 1)[0] if s else ""
    tok = tok.rstrip(";")
    return tok.split(".")[0] if tok and tok[0].isalpha() else None


def instruction_mix(sass: str, lines: list) -> dict:
    """{user line: Counter of opcode classes, with ``"total"``} over the SASS view's instructions."""
    mix: dict = collections.defaultdict(collections.Counter)
    for ln, src in zip(sass.splitlines(), lines):
        if src is None:
            continue
        a = _ADDR.match(ln)
        if not a:
            continue
        op = _opcode(a.group(2))
        if op is None:
            continue
        c = mix[src]
        c["total"] += 1
        if op in MIX_CLASSES:
            c[op] += 1
    return dict(mix)


def hottest_lines(mix: dict, n: int = 5) -> list:
    """The ``n`` user lines with the most instructions: ``[{"line", "total", "mix": {class: count}}]``."""
    top = sorted(mix.items(), key=lambda kv: (-kv[1]["total"], kv[0]))[:n]
    return [{"line": line, "total": c["total"],
             "mix": {k: c[k] for k in MIX_CLASSES if c.get(k)}} for line, c in top]


def with_header(header: str, raw: list) -> list:
    """A raw text's map as the map of a document that shows ``header`` above that text."""
    return [None] * header.count("\n") + list(raw)


def _nvdisasm() -> str | None:
    from newt.backend.cuda.disasm import _wheel_bins
    for d in _wheel_bins():
        p = os.path.join(d, "nvdisasm")
        if os.access(p, os.X_OK):
            return p
    import shutil
    found = shutil.which("nvdisasm")
    if found is None and os.access("/usr/local/cuda/bin/nvdisasm", os.X_OK):
        found = "/usr/local/cuda/bin/nvdisasm"
    return found


def nvdisasm_line_info(cubin: bytes) -> str | None:
    """``nvdisasm --print-line-info-inline --print-code`` of a cubin; None without nvdisasm or when it fails."""
    tool = _nvdisasm()
    if tool is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        r = subprocess.run([tool, "--print-line-info-inline", "--print-code", path], capture_output=True, text=True,
                           timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        os.unlink(path)
    return r.stdout if r.returncode == 0 else None
