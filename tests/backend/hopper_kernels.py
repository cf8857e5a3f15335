"""bench.py's matmul and attention kernels compiled for sm_90a under environment flags, and the SASS of their
pipelined loops: shared by test_attention_sass.py and test_matmul_sass.py (issue 24)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import newt

ROOT = Path(__file__).resolve().parents[2]
#: the flags these tests switch; unset: the default
FLAGS = ("NEWT_CPASYNC_FENCE", "NEWT_PIPE_ISSUE", "NEWT_CONVERT_ADDR")
#: the two pipeline flags (no proxy fence per iteration, copies after the last dot)
ON = {"NEWT_CPASYNC_FENCE": "0", "NEWT_PIPE_ISSUE": "late"}
#: every flag: the variant benchmarks/run_device.sh's hopper25 part times
ALL = {**ON, "NEWT_CONVERT_ADDR": "split"}


def _modules(tag: str):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench
        from backend_perf import ATTN_TEMPLATE, attn_signature
        from common import instantiate
        return instantiate(bench.TEMPLATE, "newt", f"mm_{tag}"), instantiate(ATTN_TEMPLATE, "newt", f"at_{tag}"), \
            attn_signature
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _unwrap(k):
    while hasattr(k, "fn") and not hasattr(k, "constexpr_names"):
        k = k.fn
    return k


def set_flags(monkeypatch, env: dict):
    for k in FLAGS:
        monkeypatch.delenv(k, raising=False)
    for k in ("NEWT_DOT_LOWERING", "NEWT_TMA", "NEWT_STMATRIX"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def attention(monkeypatch, env: dict, d=128, stage=1, cfg=(128, 64, 8, 3), dt="fp16"):
    """bench.py's attention forward (``STAGE`` 1: non-causal, 3: causal) compiled with ``env`` set."""
    set_flags(monkeypatch, env)
    _, a, sig = _modules("hopper25")
    bm, bn, w, s = cfg
    return newt.compile(_unwrap(a.attn_fwd), signature=sig(dt),
                        constexprs={"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "STAGE": stage},
                        target="sm_90a", num_warps=w, num_stages=s, cache=False)


def matmul(monkeypatch, env: dict, cfg=(128, 256, 64, 3, 8), dt="fp16", aligned=True):
    """bench.py's matmul tile kernel with the runtime's specialization (unit strides constexpr; sizes and
    strides divisible by 16 when ``aligned``)."""
    set_flags(monkeypatch, env)
    m, _, _ = _modules("hopper25")
    bm, bn, bk, s, w = cfg
    h = ":16" if aligned else ""
    sig = {"a_ptr": f"*{dt}:16", "b_ptr": f"*{dt}:16", "c_ptr": f"*{dt}:16"}
    sig.update({n: "i32" + h for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
    return newt.compile(_unwrap(m._matmul_tile), signature=sig,
                        constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "stride_ak": 1,
                                    "stride_bn": 1, "stride_cn": 1},
                        target="sm_90a", num_warps=w, num_stages=s, cache=False)


def sass_text(ck) -> str:
    from newt.backend.cuda import sass
    try:
        return sass(ck.asm["cubin"])
    except RuntimeError as e:
        pytest.skip(f"cuobjdump unavailable: {e}")


def loops(text: str, min_instructions: int = 64) -> list[list[str]]:
    """The SASS loops (a backward branch) of at least ``min_instructions``: each a list of instructions
    (predicate guards removed), in address order."""
    ins = [(int(a, 16), t) for a, t in re.findall(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text, re.M)]
    out = []
    for addr, t in ins:
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", t)
        if not m or int(m.group(1), 16) >= addr:
            continue
        lo = int(m.group(1), 16)
        body = [re.sub(r"^@!?U?P\w+\s+", "", x) for a, x in ins if lo <= a <= addr]
        if len(body) >= min_instructions:
            out.append(body)
    return out


def first(body: list[str], prefix: str) -> int:
    return next((i for i, x in enumerate(body) if x.startswith(prefix)), -1)


def last(body: list[str], prefix: str) -> int:
    return max((i for i, x in enumerate(body) if x.startswith(prefix)), default=-1)


def count(body: list[str], prefix: str) -> int:
    return sum(1 for x in body if x.startswith(prefix))


# ---- Triton 3.6's tutorial 06 backward, compiled through the drop-in (test_tut06_bwd.py, test_ring1d.py) -------

def tutorial_dir() -> Path | None:
    """Where Triton's tutorial files are (``$TUT_DIR``, ``.ext/triton-tutorials``), or None (the tests skip)."""
    import os
    for p in (os.environ.get("TUT_DIR"), ROOT / ".ext" / "triton-tutorials",
              ROOT.parent.parent / "main" / ".ext" / "triton-tutorials"):
        if p and (Path(p) / "06-fused-attention.py").is_file():
            return Path(p)
    return None


def tutorial_bwd(d: int, causal: bool, prefixes: tuple, env: dict | None = None) -> tuple[list[list[int]], int, int]:
    """Triton's own ``_attn_bwd`` (tutorial 06, ``--capability 9.0``, BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128,
    BLOCK_N2=32, 4 warps, 5 stages) compiled for sm_90a in a fresh process under ``env``: for each SASS loop the
    count of each opcode prefix in ``prefixes``, then the spill bytes and the shared memory.  Skips the test
    where the tutorial file is not here."""
    import os
    import subprocess
    tdir = tutorial_dir()
    if tdir is None:
        pytest.skip("Triton's tutorial files are not here (.ext/triton-tutorials or $TUT_DIR)")
    code = f"""
import os, sys
os.environ["NEWT_TARGET"] = "sm_90a"; os.environ["PYTEST_VERSION"] = "1"
sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import newt.dropin
newt.dropin.install(capability=(9, 0))
import torch
import triton_tutorial_timings as T
from hopper_kernels import loops, count
from newt.backend.cuda import sass
mod = T.load({str(tdir)!r}, "06")
q = torch.empty((1, 2, 1024, {d}), dtype=torch.float16); m = torch.empty((1, 2, 1024), dtype=torch.float32)
ck = mod._attn_bwd.warmup(q, q, q, 0.5, q, q, q, q, m, m, *q.stride(), 2, 1024, BLOCK_M1=32, BLOCK_N1=128,
                          BLOCK_M2=128, BLOCK_N2=32, BLK_SLICE_FACTOR=2, HEAD_DIM={d}, num_warps=4, num_stages=5,
                          CAUSAL={bool(causal)}, grid=(8, 1, 2))
for b in loops(sass(ck.asm["cubin"])):
    print("LOOP", *[count(b, p) for p in {tuple(prefixes)!r}])
print("SPILLS", ck.n_spills, ck.metadata.shared)
"""
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.splitlines()
    counts = [list(map(int, x.split()[1:])) for x in out if x.startswith("LOOP")]
    spills, shared = map(int, next(x for x in out if x.startswith("SPILLS")).split()[1:])
    return counts, spills, shared
