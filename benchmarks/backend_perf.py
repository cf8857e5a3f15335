"""The CUDA backend's own performance checks (complements the runtime engineer's ``bench.py``).

    python3 benchmarks/backend_perf.py --compile [--nvrtc-lib DIR]   # no GPU: compile every bench kernel
    python3 benchmarks/backend_perf.py --compare-triton [--nvrtc-lib DIR] [--nvjitlink-lib DIR]  # no GPU
    python3 benchmarks/backend_perf.py --compare-attention [--nvrtc-lib DIR]  # no GPU
    python3 benchmarks/backend_perf.py --out DIR [--budget SECONDS]  # GPU: attention + matmul per config

``--compile`` builds, for sm_90a through NVRTC, every kernel specialization that ``bench.py`` times
(add, softmax and layer norm for every row width and dtype, matmul fp16/bf16/tf32 in every config,
with the runtime's specialization: strides equal to 1 are constexpr, sizes divisible by 16 hinted)
plus the attention configs below, and prints registers, spills, shared memory and SASS counts (128-bit
global accesses, tensor-core instructions, barriers).  It fails on a compile error and on spills in
the memory-bound kernels.  ``--nvrtc-lib`` loads another NVRTC first (the device machine has 13.0).

``--compare-attention`` (no GPU) compiles the attention kernel of every config with newt and with the
installed Triton for sm_90a (d = 64 and 128, causal and not) and prints registers, spill bytes, shared
memory, resident blocks per SM and the SASS instructions of each pipelined loop body (by opcode family
where they differ): the offline view of where newt's inner loop does more work than Triton's.

``--compare-triton`` (no GPU either) compiles the memory-bound cells that were under 0.95x of Triton
(softmax 2048 fp16, layer norm 16384 fp16/fp32, every ``num_warps`` of the sweep) with newt and with
the installed Triton (``triton.compile`` of the same source for ``GPUTarget("cuda", 90, 32)``) and
prints registers, spill bytes, resident blocks per SM and SASS counts side by side.  Triton's PTX is
assembled by Triton's own ptxas and, with ``--nvjitlink-lib`` (a directory holding libnvJitLink.so
13.0, e.g. from the ``nvidia-nvjitlink==13.0.88`` wheel), also by ptxas 13.0, the device NVRTC's.

On the GPU it times, with ``newt.testing.do_bench`` (the same timer as bench.py: CUDA events, L2
flushed, median), the fused attention forward of ``tests/frontend/corpus/good/attention.py`` written
once for newt and Triton (only ``nl``/``tl`` differ), autotuned over the same configs, against torch's
SDPA, and the matmul of bench.py at 4096^3 fp16 config by config.  Results go to
``DIR/backend_perf.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, geomean, instantiate, median_ms, write_json

#: (BLOCK_M, BLOCK_N, num_warps, num_stages) swept by both compilers
ATTN_CONFIGS = [(128, 64, 4, 3), (128, 64, 8, 3), (64, 64, 4, 3)]

ATTN_TEMPLATE = r'''
import $P
import $P.language as $L


def attn_configs():
    return [$P.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
            for m, n, w, s in ATTN_CONFIGS]


ATTN_CONFIGS = @@CONFIGS@@


@$P.jit
def _attn_inner(acc, l_i, m_i, q, K_block_ptr, V_block_ptr, start_m, qk_scale, stride_kn, stride_vn, N_CTX,
                BLOCK_M: $L.constexpr, BLOCK_N: $L.constexpr, STAGE: $L.constexpr, offs_m, offs_n):
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
    else:
        lo, hi = 0, N_CTX
    K_ptrs = K_block_ptr + lo * stride_kn
    V_ptrs = V_block_ptr + lo * stride_vn
    for start_n in range(lo, hi, BLOCK_N):
        k = $L.load(K_ptrs)
        qk = $L.dot(q, k)
        if STAGE == 2:
            mask = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + $L.where(mask, 0, -1.0e6)
            m_ij = $L.maximum(m_i, $L.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = $L.maximum(m_i, $L.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = $L.math.exp2(qk)
        l_ij = $L.sum(p, 1)
        alpha = $L.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[:, None]
        v = $L.load(V_ptrs)
        p = p.to(q.dtype)
        acc = $L.dot(p, v, acc)
        m_i = m_ij
        K_ptrs += BLOCK_N * stride_kn
        V_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@$P.autotune(configs=attn_configs(), key=["N_CTX", "HEAD_DIM", "STAGE"])
@$P.jit
def attn_fwd(Q, K, V, sm_scale, Out, stride_qm, stride_kn, stride_vn, stride_om, N_CTX,
             HEAD_DIM: $L.constexpr, BLOCK_M: $L.constexpr, BLOCK_N: $L.constexpr, STAGE: $L.constexpr):
    start_m = $L.program_id(0)
    off_hz = $L.program_id(1)
    base = off_hz * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + $L.arange(0, BLOCK_M)
    offs_n = $L.arange(0, BLOCK_N)
    offs_d = $L.arange(0, HEAD_DIM)
    q = $L.load(Q + base + offs_m[:, None] * stride_qm + offs_d[None, :])
    K_ptrs = K + base + offs_n[None, :] * stride_kn + offs_d[:, None]
    V_ptrs = V + base + offs_n[:, None] * stride_vn + offs_d[None, :]
    m_i = $L.zeros([BLOCK_M], dtype=$L.float32) - float("inf")
    l_i = $L.zeros([BLOCK_M], dtype=$L.float32) + 1.0
    acc = $L.zeros([BLOCK_M, HEAD_DIM], dtype=$L.float32)
    qk_scale = sm_scale * 1.44269504
    if STAGE & 1:
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K_ptrs, V_ptrs, start_m, qk_scale, stride_kn, stride_vn,
                                    N_CTX, BLOCK_M, BLOCK_N, 4 - STAGE, offs_m, offs_n)
    if STAGE & 2:
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K_ptrs, V_ptrs, start_m, qk_scale, stride_kn, stride_vn,
                                    N_CTX, BLOCK_M, BLOCK_N, 2, offs_m, offs_n)
    acc = acc / l_i[:, None]
    $L.store(Out + base + offs_m[:, None] * stride_om + offs_d[None, :], acc.to(Out.dtype.element_ty))
'''.replace("@@CONFIGS@@", repr(ATTN_CONFIGS))

ATTN_SIGNATURE = {"Q": "*fp16:16", "K": "*fp16:16", "V": "*fp16:16", "sm_scale": "fp32", "Out": "*fp16:16",
                  "stride_qm": "i32:16", "stride_kn": "i32:16", "stride_vn": "i32:16", "stride_om": "i32:16",
                  "N_CTX": "i32:16"}


def attn_signature(dtype: str = "fp16") -> dict:
    """``ATTN_SIGNATURE`` with Q, K, V and Out of ``dtype`` (fp16 | bf16)."""
    return {k: v.replace("fp16", dtype) for k, v in ATTN_SIGNATURE.items()}


ATTN_SHAPES = [(4, 32, 4096, 64, False), (4, 32, 4096, 64, True), (16, 16, 1024, 64, False),
               (16, 16, 1024, 64, True)]
MATMUL_CONFIGS = [(128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4),
                  (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 256, 32, 3, 8), (64, 64, 32, 5, 2)]


# ----------------------------------------------------------------------------------------------------
# offline: compile everything bench.py and this script launch
# ----------------------------------------------------------------------------------------------------


def _load_nvrtc(libdir: str):
    import ctypes
    import glob
    import os
    for pat in ("libnvrtc-builtins.so.*", "libnvrtc.so.*"):
        for f in sorted(glob.glob(os.path.join(libdir, pat))):
            if ".alt." not in f:
                ctypes.CDLL(f, mode=ctypes.RTLD_GLOBAL)
                break


def _sass_counts(ck) -> dict:
    try:
        text = ck.asm["sass"]
    except Exception as e:  # (no cuobjdump: counts are skipped)
        return {"sass": f"unavailable ({type(e).__name__})"}
    ins = re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?(\S+)", text, re.M)

    def n(p):
        return sum(1 for x in ins if x.startswith(p))
    return {"instructions": len(ins), "LDG.128": n("LDG.E.128"), "STG.128": n("STG.E.128"), "HMMA": n("HMMA"),
            "LDSM": n("LDSM"), "LDGSTS": n("LDGSTS"), "BAR": n("BAR.SYNC"), "LDL/STL": n("LDL") + n("STL")}


def compile_all(target: str = "sm_90a", smoke: bool = False) -> int:
    """``smoke``: the first kernel of each family only (the CPU smoke run of tests/test_benchmarks.py)."""
    import bench

    import newt
    m = instantiate(bench.TEMPLATE, "newt", "bench")
    a = instantiate(ATTN_TEMPLATE, "newt", "attn")
    rows = []
    bad = []

    def unwrap(k):
        while hasattr(k, "fn") and not hasattr(k, "constexpr_names"):
            k = k.fn
        return k

    families: set = set()

    def one(label, kern, sig, cx, w, s, memory_bound):
        if smoke and label.split()[0] in families:
            return
        families.add(label.split()[0])
        t0 = time.time()
        try:
            ck = newt.compile(unwrap(kern), signature=sig, constexprs=cx, target=target, num_warps=w, num_stages=s,
                              cache=False)
        except Exception as e:
            bad.append(f"{label}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            print(f"{label:58s} FAILED {bad[-1]}", flush=True)
            return
        md = ck.metadata
        row = {"kernel": label, "regs": md.n_regs, "spills": md.n_spills, "shared": md.shared,
               "seconds": round(time.time() - t0, 2), **_sass_counts(ck)}
        rows.append(row)
        if memory_bound and md.n_spills:
            bad.append(f"{label}: {md.n_spills} bytes spilled")
        print(f"{label:58s} regs {md.n_regs:3d} spills {md.n_spills:5d} smem {md.shared:6d} "
              + " ".join(f"{k} {v}" for k, v in row.items() if k not in ("kernel", "regs", "spills", "shared")),
              flush=True)

    for b, w in ((1024, 4), (2048, 4), (2048, 8), (4096, 4), (4096, 8), (8192, 8)):
        one(f"add BLOCK={b} w{w}", m.add_kernel, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "out_ptr": "*fp32:16",
                                                  "n": "i32:16"}, {"BLOCK": b}, w, 3, True)
    for dt in ("fp16", "fp32"):
        for c in (1024, 2048, 4096, 8192, 16384):
            for w in (4, 8, 16, 32):
                one(f"softmax {dt} BLOCK={c} w{w}", m.softmax_kernel,
                    {"out_ptr": f"*{dt}:16", "in_ptr": f"*{dt}:16", "in_stride": "i32:16", "out_stride": "i32:16",
                     "n_cols": "i32:16"}, {"BLOCK": c}, w, 3, w >= 8 or c <= 8192)
                one(f"layernorm {dt} BLOCK={c} w{w}", m.layernorm_kernel,
                    {"X": f"*{dt}:16", "Y": f"*{dt}:16", "W": f"*{dt}:16", "B": f"*{dt}:16", "Mean": "*fp32:16",
                     "Rstd": "*fp32:16", "stride": "i32:16", "N": "i32:16", "eps": "fp32"}, {"BLOCK": c}, w, 3,
                    w >= 8 or c <= 8192)
    for dt in ("fp16", "bf16", "fp32"):
        for bm, bn, bk, s, w in MATMUL_CONFIGS:
            if dt == "fp32":
                bk //= 2
            one(f"matmul {dt} {bm}x{bn}x{bk} s{s} w{w}", m._matmul_tile,
                {"a_ptr": f"*{dt}:16", "b_ptr": f"*{dt}:16", "c_ptr": f"*{dt}:16", "M": "i32:16", "N": "i32:16",
                 "K": "i32:16", "stride_am": "i32:16", "stride_bk": "i32:16", "stride_cm": "i32:16"},
                {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "stride_ak": 1, "stride_bn": 1,
                 "stride_cn": 1}, w, s, False)
    for d in (64, 128):
        for bm, bn, w, s in ATTN_CONFIGS:
            for stage in (1, 3):
                one(f"attention d{d} {bm}x{bn} STAGE={stage} s{s} w{w}", a.attn_fwd, ATTN_SIGNATURE,
                    {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "STAGE": stage}, w, s, False)
    print(f"\n{len(rows)} kernels compiled for {target}; {len(bad)} problems")
    for b in bad:
        print("  " + b)
    return 1 if bad else 0


# ----------------------------------------------------------------------------------------------------
# offline: newt vs Triton, registers and SASS of the cells under 0.95x
# ----------------------------------------------------------------------------------------------------

#: (kind, dtype, columns) x num_warps 4..32: the bench sweep of the cells that were under 0.95x
COMPARE_CELLS = [("softmax", "fp16", 2048), ("layernorm", "fp16", 16384), ("layernorm", "fp32", 16384)]


def blocks_per_sm(regs: int, threads: int, shared: int = 0) -> int:
    """Resident blocks per SM on sm_90: 64K registers (allocated per warp in units of 256), 2048
    threads, 32 blocks, 228 KB of shared memory (1 KB reserved per block)."""
    per_warp = ((max(regs, 1) * 32 + 255) // 256) * 256
    warps = threads // 32
    by_regs = 65536 // (per_warp * warps)
    by_smem = (228 * 1024) // (shared + 1024)
    return max(0, min(by_regs, 2048 // threads, 32, by_smem))


def _sass_mix(text: str) -> dict:
    ins = re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?(\S+)", text, re.M)
    ins = [x for x in ins if x != "NOP"]

    def n(*ps):
        return sum(1 for x in ins if x.startswith(ps))
    return {"instructions": len(ins), "LDG/STG.128": n("LDG.E.128", "STG.E.128"),
            "64-bit address ops": n("IADD3.X", "LEA.HI.X", "IMAD.WIDE"), "ISETP": n("ISETP"),
            "SHFL": n("SHFL"), "BAR": n("BAR.SYNC"), "LDL/STL": n("LDL", "STL")}


def _ptxas_verbose(ptxas: str, ptx: str) -> tuple:
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        r = subprocess.run([ptxas, "-arch=sm_90a", "-v", str(src), "-o", str(out)], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-500:])
        return _parse_ptxas(r.stdout + r.stderr), out.read_bytes()


def _parse_ptxas(log: str) -> tuple:
    regs = int(re.search(r"[Uu]sed (\d+) registers", log).group(1))
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    return regs, (int(m.group(1)) + int(m.group(2))) if m else 0


def _nvjitlink_cubin(libdir: str, ptx: str) -> tuple:
    """Assemble PTX with the nvJitLink in ``libdir`` (its ptxas): (regs, spill bytes), cubin."""
    import ctypes
    import glob
    import os
    for f in sorted(glob.glob(os.path.join(libdir, "libnvJitLink.so*"))):
        ctypes.CDLL(f, mode=ctypes.RTLD_GLOBAL)
        break
    from cuda.bindings import nvjitlink
    major, minor = nvjitlink.version()
    # PTX from a newer Triton says a newer ISA version than this ptxas knows; the kernels use nothing newer
    ptx = re.sub(r"^\.version \d+\.\d+", f".version {9 if major >= 13 else 8}.{0 if major >= 13 else 5}", ptx,
                 flags=re.M)
    h = nvjitlink.create(2, ["-arch=sm_90a", "-verbose"])
    try:
        data = ptx.encode()
        nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "triton.ptx")
        nvjitlink.complete(h)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(h))
        nvjitlink.get_linked_cubin(h, cubin)
        log = bytearray(nvjitlink.get_info_log_size(h))
        nvjitlink.get_info_log(h, log)
    finally:
        nvjitlink.destroy(h)
    return _parse_ptxas(log.decode(errors="replace")), bytes(cubin), f"{major}.{minor}"


def compare_triton(nvjitlink_lib: str | None = None) -> int:
    import os

    import bench

    import newt
    from newt.backend.cuda import sass
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.compiler import get_ptxas
    except Exception as e:
        print(f"Triton cannot compile here: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    mn = instantiate(bench.TEMPLATE, "newt", "cmp")
    mt = instantiate(bench.TEMPLATE, "triton", "cmp")
    ptxas = get_ptxas(90).path
    tri_ver = re.search(r"release ([\d.]+)", __import__("subprocess").run(
        [ptxas, "--version"], capture_output=True, text=True).stdout)
    sigs = {
        "softmax": (["out_ptr", "in_ptr", "in_stride", "out_stride", "n_cols"],
                    lambda dt: [f"*{dt}", f"*{dt}", "i32", "i32", "i32"], 5),
        "layernorm": (["X", "Y", "W", "B", "Mean", "Rstd", "stride", "N", "eps"],
                      lambda dt: [f"*{dt}"] * 4 + ["*fp32", "*fp32", "i32", "i32", "fp32"], 8),
    }
    from newt.backend.cuda.compiler import nvrtc_version
    tv = tri_ver.group(1) if tri_ver else "?"
    print(f"newt: NVRTC {nvrtc_version()}; Triton {triton.__version__} with its ptxas {tv}"
          + (" and ptxas from nvJitLink" if nvjitlink_lib else ""))
    header = f"{'cell':30s} {'newt regs/spill/blk':>20s} {'Triton regs/spill/blk':>22s}"
    if nvjitlink_lib:
        header += f" {'Triton@nvJitLink':>18s}"
    print(header + "   SASS newt | Triton (instr, LDG/STG.128, 64-bit addr, ISETP, SHFL, BAR)")
    rows = []
    for kind, dt, cols in COMPARE_CELLS:
        names, types, n_aligned = sigs[kind]
        for w in (4, 8, 16, 32):
            label = f"{kind} {dt} {cols} w{w}"
            sig_n = {nm: (t + ":16" if i < n_aligned else t) for i, (nm, t) in enumerate(zip(names, types(dt)))}
            kn = getattr(mn, f"{kind}_kernel")
            while hasattr(kn, "fn") and not hasattr(kn, "constexpr_names"):
                kn = kn.fn
            ck = newt.compile(kn, signature=sig_n, constexprs={"BLOCK": cols}, target="sm_90a", num_warps=w,
                              num_stages=3, cache=False)
            nmix = _sass_mix(ck.asm["sass"])
            kt = getattr(mt, f"{kind}_kernel").fn
            sig_t = dict(zip(names, types(dt)))
            sig_t["BLOCK"] = "constexpr"
            src = triton.compiler.ASTSource(fn=kt, signature=sig_t, constexprs={(len(names),): cols},
                                            attrs={(i,): [["tt.divisibility", 16]] for i in range(n_aligned)})
            tk = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": w, "num_stages": 3})
            (t_regs, t_spill), _ = _ptxas_verbose(ptxas, tk.asm["ptx"])
            tmix = _sass_mix(sass(tk.asm["cubin"]))
            row = {"cell": label, "newt": {"regs": ck.metadata.n_regs, "spills": ck.metadata.n_spills,
                                           "blocks_per_sm": blocks_per_sm(ck.metadata.n_regs, 32 * w), **nmix},
                   "triton": {"regs": t_regs, "spills": t_spill, "blocks_per_sm": blocks_per_sm(t_regs, 32 * w),
                              **tmix}}
            nr = row["newt"]
            line = (f"{label:30s} {nr['regs']:>8d}/{nr['spills']:<4d}/{nr['blocks_per_sm']:<5d}"
                    f" {t_regs:>10d}/{t_spill:<4d}/{row['triton']['blocks_per_sm']:<5d}")
            if nvjitlink_lib:
                (j_regs, j_spill), _, jv = _nvjitlink_cubin(nvjitlink_lib, tk.asm["ptx"])
                row["triton_nvjitlink"] = {"regs": j_regs, "spills": j_spill, "ptxas": jv,
                                           "blocks_per_sm": blocks_per_sm(j_regs, 32 * w)}
                line += f" {j_regs:>9d}/{j_spill:<4d}/{row['triton_nvjitlink']['blocks_per_sm']:<3d}"
            keys = ("instructions", "LDG/STG.128", "64-bit address ops", "ISETP", "SHFL", "BAR")
            line += ("   " + ",".join(str(nmix[k]) for k in keys) + " | " + ",".join(str(tmix[k]) for k in keys))
            print(line, flush=True)
            rows.append(row)
    return 0


def sass_loops(text: str, min_instructions: int = 64) -> list:
    """The bodies of the SASS loops (a backward branch to a lower address) with at least
    ``min_instructions``: per loop, a Counter of opcode families (the mnemonic before the first dot)."""
    import collections
    ins = [(int(a, 16), t) for a, t in re.findall(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text, re.M)]
    out = []
    for addr, t in ins:
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", t)
        if not m or int(m.group(1), 16) >= addr:
            continue
        lo = int(m.group(1), 16)
        body = [re.sub(r"^@!?U?P\w+\s+", "", x) for a, x in ins if lo <= a <= addr]
        if len(body) >= min_instructions:
            out.append(collections.Counter(x.split()[0].split(".")[0] for x in body))
    return out


def compare_attention() -> int:
    """newt vs Triton (installed, ``triton.compile`` for sm_90a) on the attention configs, offline."""
    import os

    import newt
    from newt.backend.cuda import sass
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.compiler import get_ptxas
    except Exception as e:
        print(f"Triton cannot compile here: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    from newt.backend.cuda.compiler import nvrtc_version
    mn = instantiate(ATTN_TEMPLATE, "newt", "cmp_attn")
    mt = instantiate(ATTN_TEMPLATE, "triton", "cmp_attn")
    kn = mn.attn_fwd
    while hasattr(kn, "fn") and not hasattr(kn, "constexpr_names"):
        kn = kn.fn
    kt = mt.attn_fwd
    while hasattr(kt, "fn") and type(kt).__name__ == "Autotuner":
        kt = kt.fn
    names = list(ATTN_SIGNATURE)
    ptxas = get_ptxas(90).path
    print(f"newt: NVRTC {nvrtc_version()}; Triton {triton.__version__} with its ptxas")
    print(f"{'config':34s} {'newt regs/spill/smem/blk':>26s} {'Triton regs/spill/smem/blk':>28s}"
          "   loop SASS newt | Triton")
    for d in (64, 128):
        for bm, bn, w, s in ATTN_CONFIGS:
            for stage in (1, 3):
                label = f"d{d} {bm}x{bn} w{w} s{s} STAGE={stage}"
                cx = {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "STAGE": stage}
                ck = newt.compile(kn, signature=ATTN_SIGNATURE, constexprs=cx, target="sm_90a", num_warps=w,
                                  num_stages=s, cache=False)
                nl_ = sass_loops(ck.asm["sass"])
                sig_t = {k: v.split(":")[0] for k, v in ATTN_SIGNATURE.items()}
                sig_t.update({k: "constexpr" for k in cx})
                consts = {(len(names) + i,): v for i, v in enumerate(cx.values())}
                src = triton.compiler.ASTSource(fn=kt, signature=sig_t, constexprs=consts,
                                                attrs={(i,): [["tt.divisibility", 16]] for i, k in enumerate(names)
                                                       if ATTN_SIGNATURE[k].endswith(":16")})
                tk = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": w, "num_stages": s})
                (t_regs, t_spill), cubin = _ptxas_verbose(ptxas, tk.asm["ptx"])
                tl_ = sass_loops(sass(cubin))
                md = ck.metadata
                t_smem = tk.metadata.shared
                nb = blocks_per_sm(md.n_regs, 32 * w, md.shared)
                tb = blocks_per_sm(t_regs, 32 * w, t_smem)
                loops = " ; ".join(f"{sum(a.values())} | {sum(b.values())}" for a, b in zip(nl_, tl_))
                print(f"{label:34s} {md.n_regs:>8d}/{md.n_spills:<5d}/{md.shared:<7d}/{nb:<3d}"
                      f" {t_regs:>10d}/{t_spill:<5d}/{t_smem:<7d}/{tb:<3d}   {loops}", flush=True)
                for a, b in zip(nl_, tl_):
                    diff = {k: (a.get(k, 0), b.get(k, 0)) for k in sorted(set(a) | set(b))
                            if a.get(k, 0) != b.get(k, 0)}
                    print(" " * 36 + "differ: " + ", ".join(f"{k} {x}/{y}" for k, (x, y) in diff.items()))
    return 0


# ----------------------------------------------------------------------------------------------------
# GPU
# ----------------------------------------------------------------------------------------------------


def _attn_cell(mods, Z, H, N, D, causal) -> dict:
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    q = torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16)
    k = torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16)
    v = torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16)
    sm_scale = 1.0 / math.sqrt(D)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    flops = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
    cell = {"shape": [Z, H, N, D], "causal": causal, "impls": {}}

    def torch_call():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def kernel_call(m, o):
        def call():
            grid = lambda meta: (N // meta["BLOCK_M"], Z * H)
            m.attn_fwd[grid](q, k, v, sm_scale, o, q.stride(2), k.stride(2), v.stride(2), o.stride(2), N,
                             HEAD_DIM=D, STAGE=3 if causal else 1)
        return call

    for impl in ("newt", "triton", "torch"):
        e = {}
        try:
            if impl == "torch":
                call = torch_call
                o = call()
            else:
                m = mods.get(impl)
                if m is None:
                    continue
                o = torch.full_like(q, float("nan"))
                call = kernel_call(m, o)
                t0 = time.time()
                call()
                torch.cuda.synchronize()
                e["first_call_s"] = round(time.time() - t0, 2)
                cfg = getattr(m.attn_fwd, "best_config", None)
                e["config"] = str(cfg) if cfg is not None else None
            err = float((o.float() - ref).abs().max())
            e["max_err"] = err
            e["ok"] = bool(err < 2e-2)
            ms = median_ms(call)
            e["ms"] = ms
            e["TFLOPs"] = flops / ms * 1e-9
        except Exception as ex:
            e["failed"] = f"{type(ex).__name__}: {ex}".splitlines()[0][:300]
        cell["impls"][impl] = e
    n, t = cell["impls"].get("newt", {}), cell["impls"].get("triton", {})
    cell["vs_triton"] = t["ms"] / n["ms"] if "ms" in n and "ms" in t else None
    return cell


def run_attention(mods, deadline, log) -> list:
    import torch
    out = []
    for (Z, H, N, D, causal) in ATTN_SHAPES:
        if time.time() > deadline:
            out.append({"shape": [Z, H, N, D], "causal": causal, "skipped": "time budget"})
            continue
        cell = _attn_cell(mods, Z, H, N, D, causal)
        out.append(cell)
        log(f"attention {Z}x{H}x{N}x{D} causal={causal}: " + ", ".join(
            f"{i} {e['ms'] * 1000:.1f} us ({e['TFLOPs']:.0f} TFLOP/s, err {e['max_err']:.1e})" if "ms" in e
            else f"{i} {e.get('failed', '?')[:80]}" for i, e in cell["impls"].items()))
        torch.cuda.empty_cache()
    return out


def _matmul_call(m, a, b, c, size, cfg):
    bm, bn, bk, s, w = cfg
    grid = ((size // bm) * (size // bn),)

    def call():
        m._matmul_tile[grid](a, b, c, size, size, size, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                             c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                             num_warps=w, num_stages=s)
    return call


def run_matmul_configs(mods, deadline, log, size=4096) -> list:
    import torch
    out = []
    torch.manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    for cfg in MATMUL_CONFIGS:
        if time.time() > deadline:
            out.append({"config": list(cfg), "skipped": "time budget"})
            continue
        row = {"config": list(cfg)}
        for impl in ("newt", "triton"):
            m = mods.get(impl)
            if m is None:
                continue
            c = torch.full((size, size), float("nan"), device="cuda", dtype=torch.float16)
            call = _matmul_call(m, a, b, c, size, cfg)
            try:
                call()
                torch.cuda.synchronize()
                err = float(torch.linalg.norm(c.float() - ref) / torch.linalg.norm(ref))
                ms = median_ms(call)
                row[impl] = {"ms": ms, "TFLOPs": 2 * size ** 3 / ms * 1e-9, "rel_err": err}
            except Exception as ex:
                row[impl] = {"failed": f"{type(ex).__name__}: {ex}".splitlines()[0][:300]}
        n, t = row.get("newt", {}), row.get("triton", {})
        row["vs_triton"] = t["ms"] / n["ms"] if "ms" in n and "ms" in t else None
        out.append(row)
        parts = []
        for i in ("newt", "triton"):
            e = row.get(i, {})
            parts.append(f"{i} {e['TFLOPs']:.0f} TFLOP/s (err {e['rel_err']:.1e})" if "ms" in e
                         else f"{i} {e.get('failed', '?')[:60]}")
        log(f"matmul {size}^3 fp16 {'x'.join(map(str, cfg[:3]))} s{cfg[3]} w{cfg[4]}: " + ", ".join(parts))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compile", action="store_true", help="no GPU: compile every bench kernel for sm_90a")
    p.add_argument("--target", default="sm_90a")
    p.add_argument("--smoke", action="store_true", help="with --compile: one kernel per family")
    p.add_argument("--nvrtc-lib", default=None, help="directory of another libnvrtc.so to load first")
    p.add_argument("--compare-triton", action="store_true",
                   help="no GPU: registers/spills/SASS of the under-0.95x cells, newt vs the installed Triton")
    p.add_argument("--compare-attention", action="store_true",
                   help="no GPU: registers/spills/shared memory/loop SASS of the attention configs, newt vs Triton")
    p.add_argument("--nvjitlink-lib", default=None,
                   help="with --compare-triton: directory of a libnvJitLink.so (13.0) to assemble Triton's PTX too")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent))
    p.add_argument("--budget", type=float, default=120.0, help="seconds; later measurements are skipped")
    p.add_argument("--no-matmul", action="store_true")
    args = p.parse_args(argv)
    if args.nvrtc_lib:
        _load_nvrtc(args.nvrtc_lib)
    if args.compile:
        return compile_all(args.target, smoke=args.smoke)
    if args.compare_triton:
        return compare_triton(args.nvjitlink_lib)
    if args.compare_attention:
        return compare_attention()
    import torch
    if not torch.cuda.is_available():
        print("backend_perf.py needs a CUDA GPU (or --compile)", file=sys.stderr)
        return 2
    t0 = time.time()
    deadline = t0 + args.budget
    log = lambda s: print(f"{time.time() - t0:7.1f}s  {s}", flush=True)
    import bench
    mods = {"newt": {"attn": instantiate(ATTN_TEMPLATE, "newt", "attn"), "bench": instantiate(bench.TEMPLATE, "newt",
                                                                                               "bperf")}}
    try:
        mods["triton"] = {"attn": instantiate(ATTN_TEMPLATE, "triton", "attn"),
                          "bench": instantiate(bench.TEMPLATE, "triton", "bperf")}
    except Exception as e:
        log(f"Triton unavailable: {type(e).__name__}: {e}")
    data = {"info": environment()}
    data["attention"] = run_attention({k: v["attn"] for k, v in mods.items()}, deadline, log)
    if not args.no_matmul:
        data["matmul_configs"] = run_matmul_configs({k: v["bench"] for k, v in mods.items()}, deadline, log)
    data["attention_geomean_vs_triton"] = geomean([c.get("vs_triton") for c in data["attention"]])
    data["seconds"] = round(time.time() - t0, 1)
    write_json(Path(args.out) / "backend_perf.json", data)
    log(f"attention newt/Triton geomean {data['attention_geomean_vs_triton']:.2f}x; wrote "
        f"{Path(args.out) / 'backend_perf.json'}")
    print(json.dumps({"attention": [(c["shape"], c["causal"], c.get("vs_triton")) for c in data["attention"]],
                      "matmul": [(r["config"], r.get("vs_triton")) for r in data.get("matmul_configs", [])]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
