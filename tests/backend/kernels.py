"""Concrete specializations of the corpus and example kernels, for the backend tests.

Kernels are read from source text through the front end (``StaticEnv``), so a
file's module-level code (autotune decorators, torch imports) never runs.
"""

from __future__ import annotations

import os
from functools import cache

import newt.language as nl
from newt.frontend import build_ir
from newt.frontend.check import ModuleScan, StaticEnv
from newt.frontend.source import SourceFile, parse_with_recovery

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "frontend", "corpus", "good")
EXAMPLES = os.path.join(ROOT, "examples")

P = nl.pointer_type
f16, bf16, f32, f64, i32, i64 = nl.float16, nl.bfloat16, nl.float32, nl.float64, nl.int32, nl.int64


@cache
def _env(path: str):
    with open(path) as fh:
        src = SourceFile(fh.read(), path)
    chunks, _ = parse_with_recovery(src)
    scan = ModuleScan(src, chunks)
    return StaticEnv(scan, src), scan


def jit_source(path: str, name: str):
    env, _ = _env(path)
    return env.jit_source(name)


def kernel_names(path: str) -> list:
    _, scan = _env(path)
    return [n for n in scan.kernel_order if scan.kernels[n].kind == "jit"]


def ir(path: str, name: str, arg_types: dict, constexprs: dict, div=None, num_warps=4, num_stages=3):
    if not os.path.isabs(path):
        path = os.path.join(CORPUS, path)
    return build_ir(jit_source(path, name), arg_types, constexprs, divisibility=div, num_warps=num_warps,
                    num_stages=num_stages)


def aligned(*names):
    return {n: 16 for n in names}


# (file, kernel, arg types, constexprs, divisibility, num_warps, num_stages): the configurations the
# corpus files launch with (their launch sites / autotune configs)
def corpus_configs():
    out = []
    add = ("vector_add.py", "add_kernel", dict(x_ptr=P(f32), y_ptr=P(f32), out_ptr=P(f32), n_elements=i32),
           dict(BLOCK_SIZE=1024), aligned("x_ptr", "y_ptr", "out_ptr", "n_elements"), 4, 3)
    out.append(add)
    for dt in (f32, f16):
        out.append(("softmax.py", "softmax_kernel",
                    dict(out_ptr=P(dt), in_ptr=P(dt), in_row_stride=i32, out_row_stride=i32, n_rows=i32, n_cols=i32),
                    dict(BLOCK_SIZE=1024, num_stages=2),
                    aligned("out_ptr", "in_ptr", "in_row_stride", "out_row_stride", "n_cols"), 8, 2))
    out.append(("layer_norm.py", "layer_norm_fwd",
                dict(X=P(f16), Y=P(f16), W=P(f16), B=P(f16), Mean=P(f32), Rstd=P(f32), stride=i32, N=i32, eps=f32),
                dict(BLOCK_SIZE=1024), aligned("X", "Y", "W", "B", "Mean", "Rstd", "stride", "N"), 8, 3))
    out.append(("dropout.py", "seeded_dropout",
                dict(x_ptr=P(f32), output_ptr=P(f32), n_elements=i32, p=f32, seed=i32),
                dict(BLOCK_SIZE=1024), aligned("x_ptr", "output_ptr", "n_elements"), 4, 3))
    mm_types = dict(a_ptr=P(f16), b_ptr=P(f16), c_ptr=P(f16), M=i32, N=i32, K=i32, stride_am=i32, stride_bk=i32,
                    stride_cm=i32)
    for bm, bn, bk, s, w in [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4),
                             (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (32, 64, 32, 5, 2)]:
        out.append(("matmul.py", "matmul_kernel", mm_types,
                    dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, ACTIVATION="", stride_ak=1, stride_bn=1,
                         stride_cn=1),
                    aligned("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"), w, s))
    out.append(("matmul.py", "matmul_kernel", mm_types,
                dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, ACTIVATION="leaky_relu", stride_ak=1,
                     stride_bn=1, stride_cn=1), aligned("a_ptr", "b_ptr", "c_ptr"), 4, 3))
    for stage in (1, 3):
        out.append(("attention.py", "attn_fwd",
                    dict(Q=P(f16), K=P(f16), V=P(f16), sm_scale=f32, Out=P(f16), stride_qm=i32, stride_kn=i32,
                         stride_vn=i32, stride_om=i32, N_CTX=i32),
                    dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, STAGE=stage),
                    aligned("Q", "K", "V", "Out", "stride_qm", "stride_kn", "stride_vn", "stride_om", "N_CTX"), 4, 3))
    out.append(("misc.py", "histogram_kernel", dict(x_ptr=P(i32), hist_ptr=P(i32), n=i32), dict(NUM_BINS=16, BLOCK=256),
                aligned("x_ptr", "hist_ptr"), 4, 3))
    out.append(("misc.py", "cumsum_kernel", dict(x_ptr=P(f32), y_ptr=P(f32)), dict(BLOCK=128), aligned(), 4, 3))
    out.append(("misc.py", "argmax_rows", dict(x_ptr=P(f32), out_ptr=P(i32), stride=i32), dict(N=64), aligned(), 4, 3))
    out.append(("misc.py", "first_negative", dict(x_ptr=P(f32), out_ptr=P(i32), n=i32), {}, aligned(), 4, 3))
    out.append(("misc.py", "early_exit", dict(x_ptr=P(f32), n=i32), dict(BLOCK=64), aligned(), 4, 3))
    out.append(("misc.py", "grid3d", dict(x_ptr=P(f32)), dict(BLOCK=32), aligned(), 4, 3))
    return out
