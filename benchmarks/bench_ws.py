"""Warp specialization (issue 24, ``NEWT_WARP_SPECIALIZE=1``): tensor-descriptor matmul and attention forward,
newt with TMA (``NEWT_TMA=1``) against the same newt kernel warp-specialized, for attention also warp-specialized
with the ping-pong between its consumer warpgroups (``newt_pp``, ``NEWT_WS_PINGPONG=1``), with QK issued one
iteration ahead (``newt_ov``, ``NEWT_WS_OVERLAP=1``) and with both (``newt_ppov``), Triton on the same source,
and torch (cuBLAS; SDPA) in one run (each round runs every implementation in turn).

    python3 benchmarks/bench_ws.py --out DIR [--budget S] [--rounds N]

The kernels are written once (``TEMPLATE``: ``$P``/``$L`` -> newt/nl or triton/tl): the matmul is
``bench_tma.py``'s; the attention is tutorial 06's forward on descriptors with the causal case in one loop
(up to the diagonal block, masked there), heads stacked along the descriptors' rows.  Every result is
checked against torch before it is timed (``newt_ws`` must also have compiled to the producer/consumer
split: ``metadata["producer_warps"]``).  Times: ``newt.testing.do_bench`` (L2 flushed, median) in
interleaved rounds, a cell's time the median of its rounds.  The persistent matmul (a tile loop over the
device's SMs, the K loop inside) is warp-specialized with the producer walking the tile loop.  Cell order:
``cells()``; ``--budget`` stops starting new cells.  Writes ``bench_ws.json`` and ``bench_ws.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, instantiate, median_ms, write_json

TEMPLATE = r'''
import $P
import $P.language as $L
from $P.tools.tensor_descriptor import TensorDescriptor


@$P.jit
def matmul_tma(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: $L.constexpr, BLOCK_N: $L.constexpr,
               BLOCK_K: $L.constexpr, GROUP_M: $L.constexpr):
    pid = $L.program_id(0)
    num_m = $L.cdiv(M, BLOCK_M)
    num_n = $L.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = $L.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    acc = $L.zeros((BLOCK_M, BLOCK_N), dtype=$L.float32)
    for k in range(0, $L.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = $L.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@$P.jit
def matmul_persistent(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: $L.constexpr, BLOCK_N: $L.constexpr,
                      BLOCK_K: $L.constexpr, GROUP_M: $L.constexpr, NUM_SMS: $L.constexpr):
    start = $L.program_id(0)
    tiles_m = $L.cdiv(M, BLOCK_M)
    tiles_n = $L.cdiv(N, BLOCK_N)
    k_tiles = $L.cdiv(K, BLOCK_K)
    for tile in range(start, tiles_m * tiles_n, NUM_SMS):
        group = GROUP_M * tiles_n
        first_m = (tile // group) * GROUP_M
        size_m = $L.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (tile % group) % size_m
        pid_n = (tile % group) // size_m
        acc = $L.zeros((BLOCK_M, BLOCK_N), dtype=$L.float32)
        for k in range(0, k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            acc = $L.dot(a, b, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@$P.jit
def matmul_persistent_kmajor(a_desc, bt_desc, c_desc, M, N, K, BLOCK_M: $L.constexpr, BLOCK_N: $L.constexpr,
                             BLOCK_K: $L.constexpr, GROUP_M: $L.constexpr, NUM_SMS: $L.constexpr):
    # the persistent matmul with B stored N x K (K-major, as fp8 wgmma reads B): C = A @ Bt.T
    start = $L.program_id(0)
    tiles_m = $L.cdiv(M, BLOCK_M)
    tiles_n = $L.cdiv(N, BLOCK_N)
    k_tiles = $L.cdiv(K, BLOCK_K)
    for tile in range(start, tiles_m * tiles_n, NUM_SMS):
        group = GROUP_M * tiles_n
        first_m = (tile // group) * GROUP_M
        size_m = $L.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (tile % group) % size_m
        pid_n = (tile % group) // size_m
        acc = $L.zeros((BLOCK_M, BLOCK_N), dtype=$L.float32)
        for k in range(0, k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            b = bt_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
            acc = $L.dot(a, b.T, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@$P.jit
def attn_desc(desc_q, desc_k, desc_v, desc_o, N_CTX, qk_scale, HEAD_DIM: $L.constexpr, BLOCK_M: $L.constexpr,
              BLOCK_N: $L.constexpr, CAUSAL: $L.constexpr):
    start_m = $L.program_id(0)
    row0 = $L.program_id(1) * N_CTX
    offs_m = start_m * BLOCK_M + $L.arange(0, BLOCK_M)
    offs_n = $L.arange(0, BLOCK_N)
    q = desc_q.load([row0 + start_m * BLOCK_M, 0])
    m_i = $L.zeros([BLOCK_M], dtype=$L.float32) - float("inf")
    l_i = $L.zeros([BLOCK_M], dtype=$L.float32)
    acc = $L.zeros([BLOCK_M, HEAD_DIM], dtype=$L.float32)
    hi = (start_m + 1) * BLOCK_M if CAUSAL else N_CTX
    for start_n in range(0, hi, BLOCK_N):
        qk = $L.dot(q, desc_k.load([row0 + start_n, 0]).T) * qk_scale
        if CAUSAL:
            qk = $L.where(offs_m[:, None] >= start_n + offs_n[None, :], qk, -float("inf"))
        m_ij = $L.maximum(m_i, $L.max(qk, 1))
        p = $L.math.exp2(qk - m_ij[:, None])
        alpha = $L.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + $L.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = $L.dot(p.to(q.dtype), desc_v.load([row0 + start_n, 0]), acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    desc_o.store([row0 + start_m * BLOCK_M, 0], acc.to(desc_o.dtype))


def matmul(a, b, c, cfg):
    bm, bn, bk, stages, warps = cfg
    M, K = a.shape
    N = b.shape[1]
    ad = TensorDescriptor.from_tensor(a, [bm, bk])
    bd = TensorDescriptor.from_tensor(b, [bk, bn])
    cd = TensorDescriptor.from_tensor(c, [bm, bn])
    grid = ($P.cdiv(M, bm) * $P.cdiv(N, bn),)

    def call():
        return matmul_tma[grid](ad, bd, cd, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                num_stages=stages, num_warps=warps)
    return call


def persistent(a, b, c, cfg, sms):
    bm, bn, bk, stages, warps = cfg
    M, K = a.shape
    N = b.shape[1]
    ad = TensorDescriptor.from_tensor(a, [bm, bk])
    bd = TensorDescriptor.from_tensor(b, [bk, bn])
    cd = TensorDescriptor.from_tensor(c, [bm, bn])
    grid = (min(sms, $P.cdiv(M, bm) * $P.cdiv(N, bn)),)

    def call():
        return matmul_persistent[grid](ad, bd, cd, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                       NUM_SMS=grid[0], num_stages=stages, num_warps=warps)
    return call


def persistent_kmajor(a, bt, c, cfg, sms):
    bm, bn, bk, stages, warps = cfg
    M, K = a.shape
    N = bt.shape[0]
    ad = TensorDescriptor.from_tensor(a, [bm, bk])
    bd = TensorDescriptor.from_tensor(bt, [bn, bk])
    cd = TensorDescriptor.from_tensor(c, [bm, bn])
    grid = (min(sms, $P.cdiv(M, bm) * $P.cdiv(N, bn)),)

    def call():
        return matmul_persistent_kmajor[grid](ad, bd, cd, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                              NUM_SMS=grid[0], num_stages=stages, num_warps=warps)
    return call


def attention(q, k, v, o, n_ctx, causal, cfg):
    bm, bn, warps, stages = cfg
    rows, d = q.shape
    dq, dk, dv, do = (TensorDescriptor.from_tensor(t, [bm if i in (0, 3) else bn, d])
                      for i, t in enumerate((q, k, v, o)))
    grid = (n_ctx // bm, rows // n_ctx)
    scale = 1.4426950408889634 / d ** 0.5

    def call():
        return attn_desc[grid](dq, dk, dv, do, n_ctx, scale, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                               num_warps=warps, num_stages=stages)
    return call
'''

#: newt's columns and the environment each compiles under (read at the kernel's first call)
NEWT_ENV = {"newt": {"NEWT_TMA": "1"}, "newt_ws": {"NEWT_TMA": "1", "NEWT_WARP_SPECIALIZE": "1"},
            "newt_pp": {"NEWT_TMA": "1", "NEWT_WARP_SPECIALIZE": "1", "NEWT_WS_PINGPONG": "1"},
            "newt_ov": {"NEWT_TMA": "1", "NEWT_WARP_SPECIALIZE": "1", "NEWT_WS_OVERLAP": "1"},
            "newt_ppov": {"NEWT_TMA": "1", "NEWT_WARP_SPECIALIZE": "1", "NEWT_WS_PINGPONG": "1",
                          "NEWT_WS_OVERLAP": "1"}}
#: the kinds newt_pp, newt_ov and newt_ppov run on (they need two dots in the loop: attention; pingpong.py,
#: overlap.py, ppov.py)
PP_KINDS = ("attention",)
#: the metadata key each of those columns must show (else the cell reports it failed)
SCHEDULE_META = {"newt_pp": "ws_pingpong", "newt_ov": "ws_overlap"}
#: newt_ppov must show both (the two schedules combined, ppov.py)
PPOV_META = {"newt_ppov": ("ws_pingpong", "ws_overlap")}
MM_CFG = (128, 256, 64, 3, 8)          # bench.py's matmul tile: BLOCK_M, BLOCK_N, BLOCK_K, stages, warps
#: the persistent tile: 128x256 in 2 stages (3 do not fit beside the epilogue's scratch under the split)
PERSISTENT_CFG = (128, 256, 64, 2, 8)
#: the fp8 persistent tile (e4m3, B K-major): 128x256x128 in 2 stages splits with 0 spill bytes on sm_90a (offline,
#: 2026-12-07); 3 stages do not fit beside the epilogue under the split
PERSISTENT_FP8_CFG = (128, 256, 128, 2, 8)
ATTN_CFG = {64: (128, 64, 8, 3), 128: (128, 64, 8, 3)}   # BLOCK_M, BLOCK_N, warps, stages


def cells():
    """Most telling first (a budget cuts the tail): fp16 before bf16; per dtype the 8192^3 matmul, persistent
    matmul and the long-sequence attention d=128, then 4096^3 and the rest."""
    out = []
    for dt in ("float16", "bfloat16"):
        for s in (8192, 4096):
            out += [("matmul", (s, s, s), dt), ("persistent", (s, s, s), dt)]
            if s == 8192:
                out += [("attention", (4, 32, 4096, 128, causal), dt) for causal in (False, True)]
        out += [("matmul", (2048,) * 3, dt), ("persistent", (2048,) * 3, dt)]
        out += [("attention", (z, h, n, d, causal), dt) for d in (128, 64) for causal in (False, True)
                for z, h, n in ((4, 32, 4096), (16, 16, 1024)) if (z, h, n, d) != (4, 32, 4096, 128)]
    # fp8 e4m3 (issue 24's fp8 >= 0.90x cuBLAS): last, so a budget for the others is unchanged (--only persistent_fp8)
    out += [("persistent_fp8", (s, s, s), "float8_e4m3fn") for s in (8192, 4096, 2048)]
    return out


def triton_alloc():
    try:
        import torch
        import triton

        def alloc(size, alignment, stream):
            return torch.empty(size, device="cuda", dtype=torch.int8)
        triton.set_allocator(alloc)
    except Exception:  # (an older Triton: host descriptors need no allocator)
        pass


def make_cell(kind, shape, dtype, mods):
    """(call makers per impl, output tensors per impl, reference, flops)."""
    import torch
    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    calls, outs = {}, {}
    if kind not in PP_KINDS:
        mods = {k: v for k, v in mods.items() if k not in SCHEDULE_META and k not in PPOV_META}
    if kind == "persistent_fp8":  # A M x K, B stored N x K; cuBLAS through _scaled_mm (unit scales), fp16 out
        M, N, K = shape
        a = torch.randn(M, K, device="cuda").to(dt)
        bt = torch.randn(N, K, device="cuda").to(dt)
        ref = a.float() @ bt.float().T
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        for impl, m in mods.items():
            outs[impl] = torch.empty(M, N, device="cuda", dtype=torch.float16)
            calls[impl] = (lambda m=m, c=outs[impl]: m.persistent_kmajor(a, bt, c, PERSISTENT_FP8_CFG, sms))
        outs["torch"] = torch.empty(M, N, device="cuda", dtype=torch.float16)
        one = torch.ones((), device="cuda")

        def cublas():
            return lambda: torch._scaled_mm(a, bt.T, one, one, out_dtype=torch.float16, out=outs["torch"])
        calls["torch"] = cublas
        return calls, outs, ref, 2.0 * M * N * K
    if kind in ("matmul", "persistent"):
        M, N, K = shape
        a = torch.randn(M, K, device="cuda", dtype=dt)
        b = torch.randn(K, N, device="cuda", dtype=dt)
        ref = (a.float() @ b.float())
        for impl, m in mods.items():
            outs[impl] = torch.empty(M, N, device="cuda", dtype=dt)
            if kind == "matmul":
                calls[impl] = (lambda m=m, c=outs[impl]: m.matmul(a, b, c, MM_CFG))
            else:
                sms = torch.cuda.get_device_properties(0).multi_processor_count
                calls[impl] = (lambda m=m, c=outs[impl], sms=sms: m.persistent(a, b, c, PERSISTENT_CFG, sms))
        outs["torch"] = torch.empty(M, N, device="cuda", dtype=dt)
        calls["torch"] = lambda: (lambda: torch.matmul(a, b, out=outs["torch"]))
        return calls, outs, ref, 2.0 * M * N * K
    z, h, n, d, causal = shape
    q, k, v = (torch.randn(z * h * n, d, device="cuda", dtype=dt) for _ in range(3))
    q4, k4, v4 = (t.view(z, h, n, d) for t in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, is_causal=causal).reshape(z * h * n, d)
    for impl, m in mods.items():  # (newt_pp: attention only)
        outs[impl] = torch.empty(z * h * n, d, device="cuda", dtype=dt)
        calls[impl] = (lambda m=m, o=outs[impl]: m.attention(q, k, v, o, n, causal, ATTN_CFG[d]))
    outs["torch"] = torch.empty(z * h * n, d, device="cuda", dtype=dt)

    def sdpa():
        def run():
            outs["torch"].view(z, h, n, d).copy_(
                torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, is_causal=causal))
        return run
    calls["torch"] = sdpa
    flops = 4.0 * z * h * n * n * d * (0.5 if causal else 1.0)
    return calls, outs, ref.float(), flops


def run_cell(kind, shape, dtype, mods, rounds):
    import torch
    cell = {"kind": kind, "shape": list(shape), "dtype": dtype, "impls": {}}
    makers, outs, ref, flops = make_cell(kind, shape, dtype, mods)
    ready = {}
    for impl, make in makers.items():
        e = cell["impls"][impl] = {}
        env = NEWT_ENV.get(impl, {})
        old = {k: os.environ.get(k) for k in env}
        try:
            os.environ.update(env)
            call = make()
            ck = call()
            torch.cuda.synchronize()
            if impl == "newt_ws" and not (getattr(ck, "metadata", None) or {}).get("producer_warps"):
                e["failed"] = "not warp-specialized (metadata has no producer_warps)"
                continue
            if impl in SCHEDULE_META and not (getattr(ck, "metadata", None) or {}).get(SCHEDULE_META[impl]):
                e["failed"] = f"metadata has no {SCHEDULE_META[impl]}"
                continue
            missing = [k for k in PPOV_META.get(impl, ()) if not (getattr(ck, "metadata", None) or {}).get(k)]
            if missing:
                e["failed"] = f"metadata has no {' and no '.join(missing)}"
                continue
            err = ((outs[impl].float() - ref).norm() / ref.norm()).item()
            e["rel_error"] = err
            if not err < 2e-2:
                e["failed"] = f"wrong result: relative error {err:.3g}"
                continue
            ready[impl] = call
        except Exception as ex:  # (reported in the table)
            e["failed"] = f"{type(ex).__name__}: {ex}".splitlines()[0][:300]
            e["traceback"] = traceback.format_exc()[-2000:]
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    for _ in range(rounds):
        for impl, call in ready.items():
            cell["impls"][impl].setdefault("rounds_ms", []).append(median_ms(call, warmup=10, rep=40))
    for impl in ready:
        e = cell["impls"][impl]
        e["ms"] = statistics.median(e["rounds_ms"])
        e["TFLOPs"] = flops / e["ms"] * 1e-9
    nt = cell["impls"].get("newt", {}).get("ms")
    for impl in ("newt_ws", "newt_pp", "newt_ov", "newt_ppov", "triton", "torch"):
        o = cell["impls"].get(impl, {}).get("ms")
        if nt and o:
            cell[f"{impl}_vs_newt"] = nt / o
    for short in ("pp", "ov", "ppov"):
        mine = cell["impls"].get(f"newt_{short}", {}).get("ms")
        for impl in ("newt_ws", "triton", "torch") + (("newt_pp", "newt_ov") if short == "ppov" else ()):
            o = cell["impls"].get(impl, {}).get("ms")
            if mine and o:
                cell[f"{short}_vs_{impl}"] = o / mine
    ws = cell["impls"].get("newt_ws", {}).get("ms")
    for impl in ("triton", "torch"):
        o = cell["impls"].get(impl, {}).get("ms")
        if ws and o:
            cell[f"ws_vs_{impl}"] = o / ws
    return cell


def describe(cell) -> str:
    parts = [f"{cell['kind']} {cell['dtype']} {tuple(cell['shape'])}"]
    for impl, e in cell["impls"].items():
        parts.append(f"{impl}: " + (f"{e['TFLOPs']:.0f} TFLOP/s" if "TFLOPs" in e else e.get("failed", "?")))
    return " | ".join(parts)


def render_md(data) -> str:
    env = data["environment"]
    lines = ["# Warp specialization (NEWT_WARP_SPECIALIZE=1), descriptor kernels, same source", "",
             f"{env.get('gpu', '?')}; " + ", ".join(f"{k} {v}" for k, v in env.items() if k != "gpu"), "",
             "TFLOP/s; ratios are the other's time over the warp-specialized kernel's (above 1: newt_ws faster).", "",
             "newt_pp: newt_ws plus the ping-pong between its two consumer warpgroups (NEWT_WS_PINGPONG=1); newt_ov: "
             "newt_ws plus QK of tile j + 1 issued before the softmax of tile j (NEWT_WS_OVERLAP=1); newt_ppov: both "
             "(NEWT_WS_PINGPONG=1 NEWT_WS_OVERLAP=1: a turn issues the next QK and this P.V, ppov.py); attention only.",
             "",
             "| kind | dtype | shape | newt | newt_ws | newt_pp | newt_ov | newt_ppov | Triton | torch | ppov/ws "
             "| ppov/pp | ppov/ov | ppov/torch | ws/newt | ws/Triton | ws/torch | pp/ws | pp/Triton | pp/torch | ov/ws "
             "| ov/Triton | ov/torch |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def tf(e):
        return f"{e['TFLOPs']:.0f}" if "TFLOPs" in e else "failed: " + e.get("failed", "?")[:60]

    def r(c, k):
        v = c.get(k)
        return f"{v:.2f}x" if v else "-"
    for c in data["results"]:
        im = c["impls"]
        ws_newt = c.get("newt_ws_vs_newt")  # newt's time over newt_ws's
        pp, ov, ppov = (tf(im[k]) if k in im else "-" for k in ("newt_pp", "newt_ov", "newt_ppov"))
        mine = " | ".join(r(c, f"ppov_vs_{o}") for o in ("newt_ws", "newt_pp", "newt_ov", "torch"))
        lines.append(f"| {c['kind']} | {c['dtype']} | {tuple(c['shape'])} | {tf(im.get('newt', {}))} | "
                     f"{tf(im.get('newt_ws', {}))} | {pp} | {ov} | {ppov} | {tf(im.get('triton', {}))} | "
                     f"{tf(im.get('torch', {}))} | {mine} | {f'{ws_newt:.2f}x' if ws_newt else '-'} | "
                     f"{r(c, 'ws_vs_triton')} | "
                     f"{r(c, 'ws_vs_torch')} | " + " | ".join(r(c, f"{k}_vs_{o}") for k in ("pp", "ov")
                                                              for o in ("newt_ws", "triton", "torch")) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.0, help="seconds after which no new cell starts (0: none)")
    ap.add_argument("--only", default="", help="matmul, persistent, attention and/or persistent_fp8, comma-separated")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("bench_ws.py needs a CUDA GPU", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    triton_alloc()
    mods = {"newt": instantiate(TEMPLATE, "newt", "ws_base"), "newt_ws": instantiate(TEMPLATE, "newt", "ws_split"),
            "newt_pp": instantiate(TEMPLATE, "newt", "ws_pingpong"),
            "newt_ov": instantiate(TEMPLATE, "newt", "ws_overlap"),
            "newt_ppov": instantiate(TEMPLATE, "newt", "ws_ppov"),
            "triton": instantiate(TEMPLATE, "triton", "ws_triton")}
    only = {x for x in args.only.split(",") if x}
    t0 = time.monotonic()
    results = []
    for kind, shape, dtype in cells():
        if only and kind not in only:
            continue
        if args.budget and time.monotonic() - t0 > args.budget:
            print(f"budget of {args.budget:.0f} s spent: {kind} {shape} {dtype} and later cells not run", flush=True)
            break
        cell = run_cell(kind, shape, dtype, mods, args.rounds)
        results.append(cell)
        print(describe(cell), flush=True)
        write_json(out / "bench_ws.json", {"environment": {}, "results": results})  # (partial runs)
    data = {"environment": environment(), "results": results}
    write_json(out / "bench_ws.json", data)
    (out / "bench_ws.md").write_text(render_md(data))
    print(render_md(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
