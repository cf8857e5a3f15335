# ruff: noqa: B023, F821  (benchmark closures read the loop variables at call time, on purpose)
"""Timing of the backend's kernels against Triton with the same source (only tl/nl differ).

Run on the GPU machine: ``python3 tests/backend/bench_triton.py [out.json]``.  Launches go through
cuda.bindings.driver directly (tests/backend/gpu_launch.py), not the newt runtime.  Medians of
triton.testing.do_bench (L2 flushed between runs).
"""

from __future__ import annotations

import datetime
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from gpu_launch import compile_fn, launch
from kernels import CORPUS, jit_source

import newt.language as nl

P = nl.pointer_type


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_ptr = in_ptr + row_idx * in_row_stride
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        row = tl.load(row_ptr + cols, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        out = numerator / denominator
        tl.store(out_ptr + row_idx * out_row_stride + cols, out, mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  ACTIVATION: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


NL = {torch.float32: nl.float32, torch.float16: nl.float16, torch.bfloat16: nl.bfloat16}


def main(out_path=None):
    rows = []
    dev = torch.cuda.get_device_name()
    corpus = lambda f, k: jit_source(os.path.join(CORPUS, f), k)

    # vector add
    add_nw = corpus("vector_add.py", "add_kernel")
    for n in (1 << 20, 1 << 24, 1 << 28):
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        o = torch.empty_like(x)
        b = compile_fn(add_nw, {"x_ptr": P(nl.float32), "y_ptr": P(nl.float32), "out_ptr": P(nl.float32),
                                "n_elements": nl.int32}, {"BLOCK_SIZE": 1024},
                       div={"x_ptr": 16, "y_ptr": 16, "out_ptr": 16, "n_elements": 16})
        g = (triton.cdiv(n, 1024),)
        launch(b, g, x, y, o, n)
        assert torch.equal(o, x + y)
        t_newt = bench(lambda: launch(b, g, x, y, o, n, sync=False))
        t_tri = bench(lambda: add_kernel[g](x, y, o, n, BLOCK_SIZE=1024))
        gbs = 3 * n * 4 / t_newt * 1e-6
        rows.append(dict(kind="add", shape=[n], dtype="fp32", newt_ms=t_newt, triton_ms=t_tri,
                         ratio=t_tri / t_newt, newt_GBps=gbs, regs=b.n_regs))
        print(rows[-1], flush=True)
        del x, y, o

    # softmax
    sm_nw = corpus("softmax.py", "softmax_kernel")
    for dt in (torch.float32, torch.float16):
        for cols in (1024, 4096, 16384):
            M = 8192
            x = torch.randn(M, cols, device="cuda", dtype=dt)
            o = torch.empty_like(x)
            nw = 8 if cols <= 4096 else 16
            b = compile_fn(sm_nw, {"out_ptr": P(NL[dt]), "in_ptr": P(NL[dt]), "in_row_stride": nl.int32,
                                   "out_row_stride": nl.int32, "n_rows": nl.int32, "n_cols": nl.int32},
                           {"BLOCK_SIZE": cols, "num_stages": 2},
                           div={"out_ptr": 16, "in_ptr": 16, "in_row_stride": 16, "out_row_stride": 16,
                                "n_rows": 16, "n_cols": 16}, num_warps=nw)
            g = (M,)
            launch(b, g, o, x, x.stride(0), o.stride(0), M, cols)
            torch.testing.assert_close(o.float(), torch.softmax(x.float(), -1), rtol=2e-3, atol=2e-3)
            t_newt = bench(lambda: launch(b, g, o, x, x.stride(0), o.stride(0), M, cols, sync=False))
            t_tri = bench(lambda: softmax_kernel[g](o, x, x.stride(0), o.stride(0), M, cols, BLOCK_SIZE=cols,
                                                    num_stages=2, num_warps=nw))
            gbs = 2 * x.numel() * x.element_size() / t_newt * 1e-6
            rows.append(dict(kind="softmax", shape=[M, cols], dtype=str(dt).split(".")[-1], newt_ms=t_newt,
                             triton_ms=t_tri, ratio=t_tri / t_newt, newt_GBps=gbs, regs=b.n_regs, num_warps=nw))
            print(rows[-1], flush=True)

    # matmul
    mm_nw = corpus("matmul.py", "matmul_kernel")
    for dt in (torch.float16,):
        for (bm, bn, bk, s, w) in ((128, 128, 32, 4, 4), (128, 256, 64, 3, 8), (128, 128, 64, 3, 4)):
            for n in (4096,):
                M = N = K = n
                a = torch.randn(M, K, device="cuda", dtype=dt)
                bb = torch.randn(K, N, device="cuda", dtype=dt)
                c = torch.empty(M, N, device="cuda", dtype=torch.float16)
                kb = compile_fn(mm_nw, {"a_ptr": P(NL[dt]), "b_ptr": P(NL[dt]), "c_ptr": P(nl.float16),
                                        "M": nl.int32, "N": nl.int32, "K": nl.int32, "stride_am": nl.int32,
                                        "stride_bk": nl.int32, "stride_cm": nl.int32},
                                {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "ACTIVATION": "",
                                 "stride_ak": 1, "stride_bn": 1, "stride_cn": 1},
                                div={"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "M": 16, "N": 16, "K": 16,
                                     "stride_am": 16, "stride_bk": 16, "stride_cm": 16}, num_warps=w, num_stages=s)
                g = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
                args = (a, bb, c, M, N, K, a.stride(0), bb.stride(0), c.stride(0))
                launch(kb, g, *args)
                ref = (a.float() @ bb.float())
                err = ((c.float() - ref).norm() / ref.norm()).item()
                t_newt = bench(lambda: launch(kb, g, *args, sync=False))
                t_tri = bench(lambda: matmul_kernel[g](a, bb, c, M, N, K, a.stride(0), a.stride(1), bb.stride(0),
                                                       bb.stride(1), c.stride(0), c.stride(1), BLOCK_M=bm,
                                                       BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, ACTIVATION="",
                                                       num_warps=w, num_stages=s))
                t_torch = bench(lambda: torch.matmul(a, bb))
                tf = 2 * M * N * K / t_newt * 1e-9
                rows.append(dict(kind="matmul", shape=[M, N, K], dtype=str(dt).split(".")[-1],
                                 config=[bm, bn, bk, s, w], newt_ms=t_newt, triton_ms=t_tri, torch_ms=t_torch,
                                 ratio=t_tri / t_newt, newt_TFLOPs=tf, rel_err=err, regs=kb.n_regs,
                                 spills=kb.n_spills))
                print(rows[-1], flush=True)
    info = dict(date=datetime.date.today().isoformat(), gpu=dev, torch=torch.__version__, triton=triton.__version__,
                cuda_bindings=__import__("cuda.bindings").bindings.__version__)
    from newt.backend.cuda.compiler import nvrtc_version
    info["nvrtc"] = "{}.{}".format(*nvrtc_version())
    print(json.dumps(info))
    print(f"{'kind':8} {'shape':22} {'dtype':8} {'newt ms':>9} {'triton ms':>9} {'triton/newt':>11}")
    for r in rows:
        print(f"{r['kind']:8} {str(r['shape']):22} {r['dtype']:8} {r['newt_ms']:9.4f} {r['triton_ms']:9.4f} "
              f"{r['ratio']:11.3f}")
    if out_path:
        with open(out_path, "w") as f:
            json.dump(dict(info=info, results=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
