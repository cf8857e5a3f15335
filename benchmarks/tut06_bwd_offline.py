"""Tutorial 06's backward and fp8 forward compiled offline for sm_90a, newt (the drop-in) against Triton (AOT).

    python benchmarks/tut06_bwd_offline.py [TUT_DIR] [--triton-path DIR] [--json OUT.json] [--smoke]

TUT_DIR holds Triton's ``06-fused-attention.py`` (default ``.ext/triton-tutorials``; without it nothing is
compiled).  ``--smoke``: newt's side of the d=64 backward only.  Each kernel is compiled at the
tutorial's launch: ``_attn_bwd`` with BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32, BLK_SLICE_FACTOR=2,
4 warps, 5 stages (d=64 and d=128, causal and not); ``_attn_fwd`` in fp8 e5m2 with V transposed, BLOCK_M=128,
BLOCK_N=64, 4 warps, 2 stages (its ``PYTEST_VERSION`` config), d=64 and d=128.  newt through ``newt.dropin``
(``--capability 9.0``, host descriptors become pointer loads as with TMA off), Triton with
``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 128))`` in a subprocess whose ``sys.path`` starts
with ``--triton-path`` (default ``/work/ext/tsite``), assembled by Triton's own ptxas.  Per kernel: registers,
spill bytes, shared memory, and per SASS loop (a backward branch over >= 64 instructions) the opcode counts.
Nothing here runs a kernel.  benchmarks/tut06_bwd_offline.md has the tables and what they led to.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = ("bwd64", "bwd64c", "bwd128", "bwd128c", "fp8_64", "fp8_128")
BWD = dict(BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32, BLK_SLICE_FACTOR=2)


def _counts(text: str) -> tuple[list, dict]:
    sys.path.insert(0, HERE)
    from backend_perf import sass_loops
    allc = collections.Counter(x.split()[0].split(".")[0] for x in re.findall(
        r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?(.*?)\s*;", text, re.M))
    return [dict(c) for c in sass_loops(text)], dict(allc)


def _load(tut_dir: str):
    sys.path.insert(0, HERE)
    os.environ["PYTEST_VERSION"] = "1"  # the tutorial's single forward config
    import triton_tutorial_timings as T
    return T.load(tut_dir, "06")


def _kernel(k):
    while type(k).__name__ == "Autotuner":
        k = k.fn
    return k


def newt_side(tut_dir: str, kernels=KERNELS) -> list:
    os.environ.setdefault("NEWT_TARGET", "sm_90a")
    import newt.dropin
    newt.dropin.install(capability=(9, 0))
    import torch

    from newt.backend.cuda import sass
    from newt.tools.tensor_descriptor import TensorDescriptor as TD
    mod = _load(tut_dir)
    out = []
    Z, H, N = 1, 2, 1024
    for label in kernels:
        if label.startswith("bwd"):
            d = int(label[3:].rstrip("c"))
            q = torch.empty((Z, H, N, d), dtype=torch.float16)
            m = torch.empty((Z, H, N), dtype=torch.float32)
            ck = _kernel(mod._attn_bwd).warmup(q, q, q, 0.5, q, q, q, q, m, m, *q.stride(), H, N, HEAD_DIM=d,
                                               CAUSAL=label.endswith("c"), num_warps=4, num_stages=5,
                                               grid=(N // 128, 1, Z * H), **BWD)
        else:
            d = int(label.split("_")[1])
            q = torch.empty((Z, H, N, d), dtype=torch.float8_e5m2)
            y = Z * H * N
            m = torch.empty((Z, H, N), dtype=torch.float32)
            descs = (TD(q, [y, d], [d, 1], [128, d]), TD(q, [y, d], [d, 1], [64, d]), TD(q, [d, y], [N, 1], [d, 64]),
                     TD(q, [y, d], [d, 1], [128, d]))
            ck = _kernel(mod._attn_fwd).warmup(0.5, m, Z, H, *descs, N, HEAD_DIM=d, BLOCK_M=128, BLOCK_N=64,
                                               FP8_OUTPUT=True, STAGE=1, warp_specialize=False, IS_HOPPER=True,
                                               num_warps=4, num_stages=2, grid=(N // 128, Z * H, 1))
        loops, allc = _counts(sass(ck.asm["cubin"]))
        md = ck.metadata
        out.append({"label": label, "regs": md.n_regs, "spills": md.n_spills, "shared": md.shared, "loops": loops,
                    "all": allc})
    return out


def triton_side(tut_dir: str) -> list:
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import get_ptxas

    class _NoGpu:  # the tutorial asks the driver for its device and target at import
        def get_active_torch_device(self):
            return torch.device("cpu")

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)
    triton.runtime.driver._active = triton.runtime.driver._default = _NoGpu()
    torch.cuda.get_device_capability = lambda *a: (9, 0)
    mod = _load(tut_dir)
    ptxas = get_ptxas(90)
    ptxas = getattr(ptxas, "path", ptxas)
    sys.path.insert(0, os.path.dirname(HERE))
    from newt.backend.cuda.disasm import sass
    div = {"stride_z", "stride_h", "stride_tok", "H", "N_CTX"}
    out = []
    for label in KERNELS:
        if label.startswith("bwd"):
            d = int(label[3:].rstrip("c"))
            fn = mod._attn_bwd
            sig = {**{k: "*fp16" for k in ("Q", "K", "V")}, "sm_scale": "fp32", "DO": "*fp16", "DQ": "*fp16",
                   "DK": "*fp16", "DV": "*fp16", "M": "*fp32", "D": "*fp32", "stride_z": "i32", "stride_h": "i32",
                   "stride_tok": "i32", "stride_d": "constexpr", "H": "i32", "N_CTX": "i32"}
            cv = {"stride_d": 1, **BWD, "HEAD_DIM": d, "CAUSAL": label.endswith("c")}
            w, s = 4, 5
        else:
            d = int(label.split("_")[1])
            fn = _kernel(mod._attn_fwd)
            sig = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32",
                   "desc_q": f"tensordesc<fp8e5[128,{d}]>", "desc_k": f"tensordesc<fp8e5[64,{d}]>",
                   "desc_v": f"tensordesc<fp8e5[{d},64]>", "desc_o": f"tensordesc<fp8e5[128,{d}]>", "N_CTX": "i32"}
            cv = {"HEAD_DIM": d, "BLOCK_M": 128, "BLOCK_N": 64, "FP8_OUTPUT": True, "STAGE": 1,
                  "warp_specialize": False, "IS_HOPPER": True}
            w, s = 4, 2
        for k in cv:
            sig.setdefault(k, "constexpr")
        names = list(sig)
        src = triton.compiler.ASTSource(
            fn=fn, signature=sig, constexprs={(names.index(k),): v for k, v in cv.items()},
            attrs={(i,): [["tt.divisibility", 16]] for i, (k, v) in enumerate(sig.items())
                   if v.startswith("*") or k in div})
        tk = triton.compile(src, target=GPUTarget("cuda", 90, 128), options={"num_warps": w, "num_stages": s})
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "k.ptx"), "w") as f:
                f.write(tk.asm["ptx"])
            r = subprocess.run([ptxas, "-arch=sm_90a", "-v", os.path.join(tmp, "k.ptx"), "-o",
                                os.path.join(tmp, "k.cubin")], capture_output=True, text=True)
            log = r.stdout + r.stderr
            with open(os.path.join(tmp, "k.cubin"), "rb") as f:
                cubin = f.read()
        sp = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
        loops, allc = _counts(sass(cubin))
        out.append({"label": label, "regs": int(re.search(r"Used (\d+) registers", log).group(1)),
                    "spills": int(sp.group(1)) + int(sp.group(2)), "shared": tk.metadata.shared, "loops": loops,
                    "all": allc})
    return out


KEYS = ("HGMMA", "QGMMA", "WARPGROUP", "BAR", "STS", "LDS", "LDG", "LDGSTS", "STL", "LDL", "FADD", "FMUL", "MUFU",
        "F2FP", "SHFL", "PRMT", "LOP3", "FSETP", "SEL")


def table(newt: list, triton: list) -> str:
    T = {r["label"]: r for r in triton}
    lines = []
    for n in newt:
        t = T.get(n["label"], {"regs": "-", "spills": "-", "shared": "-", "loops": []})
        lines += [f"### {n['label']}", "", "| | newt | Triton |", "|---|---|---|"]
        for nm, f in (("registers", "regs"), ("spill bytes", "spills"), ("shared memory", "shared")):
            lines.append(f"| {nm} | {n[f]} | {t[f]} |")
        for i in range(max(len(n["loops"]), len(t["loops"]))):
            a = n["loops"][i] if i < len(n["loops"]) else {}
            b = t["loops"][i] if i < len(t["loops"]) else {}
            lines.append(f"| loop {i + 1}: instructions | {sum(a.values())} | {sum(b.values())} |")
            lines += [f"| loop {i + 1}: {k} | {a.get(k, 0)} | {b.get(k, 0)} |" for k in KEYS if a.get(k) or b.get(k)]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", default=os.path.join(os.path.dirname(HERE), ".ext", "triton-tutorials"),
                    help="folder with Triton's 06-fused-attention.py")
    ap.add_argument("--smoke", action="store_true", help="newt's d=64 backward only")
    ap.add_argument("--triton-path", default="/work/ext/tsite", help="prepended to the Triton side's sys.path")
    ap.add_argument("--side", choices=("newt", "triton"), help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write both sides' figures here")
    a = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(a.dir, "06-fused-attention.py")):
        print(f"tut06_bwd_offline: no 06-fused-attention.py in {a.dir!r}; nothing compiled")
        return 0
    if a.side:
        res = newt_side(a.dir, ("bwd64",) if a.smoke else KERNELS) if a.side == "newt" else triton_side(a.dir)
        print(json.dumps(res))
        return 0
    root = os.path.dirname(HERE)
    sides = {}
    for side, path in (("newt", root), ("triton", a.triton_path + os.pathsep + root)):
        if a.smoke and side == "triton":
            sides[side] = []
            continue
        env = dict(os.environ, PYTHONPATH=path, TRITON_DEFAULT_FP_FUSION="1")
        r = subprocess.run([sys.executable, __file__, a.dir, "--side", side] + (["--smoke"] if a.smoke else []),
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            print(f"{side}: failed\n{r.stderr[-2000:]}", file=sys.stderr)
            sides[side] = []
            continue
        sides[side] = json.loads(r.stdout.strip().splitlines()[-1])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(sides, f, indent=1)
    print(table(sides["newt"], sides["triton"]))
    return 0 if sides["newt"] else 1


if __name__ == "__main__":
    sys.exit(main())
