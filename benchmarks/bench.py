"""newt vs Triton vs torch on the same kernels, with the same config sweeps.

    python3 benchmarks/bench.py --out DIR [--quick] [--only add,softmax,...] [--budget SECONDS]
    python3 benchmarks/bench.py --rescore DIR/results.json [--anchors DIR]   # redo the report offline
    python3 benchmarks/bench.py ... --variant NAME:NEWT_FLAG=V[,...]   # also newt under flags, same run
    python3 benchmarks/bench.py ... --offline   # no GPU: compile every config newt (and each variant) would time

``--variant`` adds ``newt[NAME]``: bench.py's kernels in a module of their own, compiled, autotuned and
launched with those environment flags set (only around its calls), checked against torch and timed in the
same interleaved rounds; results.md gets a table per variant (variant / newt, variant vs Triton, newt vs
Triton, vs torch).  ``--matmul-sizes`` and ``--attention-dims`` select (and order) matmul and attention
cells; ``--dtypes`` naming bfloat16 adds bf16 attention cells.

Every kernel is written once, in ``TEMPLATE``; ``$P``/``$L`` become
``newt``/``nl`` and ``triton``/``tl``, so both compilers see the same source,
the same ``autotune`` config lists and the same launch wrappers.  Every
implementation is timed by the same timer: ``newt.testing.do_bench`` (CUDA
events, 256 MB written to flush the L2 before every repetition, median of
the repetitions after warm-up), in ``--rounds`` rounds that alternate the
implementations; a cell's time is the median of its rounds.  Each result is
checked against torch first.

Cells: add (2^20, 2^24, 2^28 fp32); softmax and layer norm (8192 rows x
1024..16384, fp16 and fp32); matmul fp16, bf16, fp8 e4m3 (fp16 out) and fp32 with
TF32 tensor cores (1024^3..8192^3); attention forward (fp16, d = 64 and 128,
causal and not, 4x32x4096 and 16x16x1024: the kernel of ``backend_perf.py``,
same source for newt and Triton, against torch SDPA).  Writes ``results.json``, ``results.md`` and
``results.png`` (when matplotlib is installed) to ``--out``; ratios are
speed-ups (other time / newt time: above 1 means newt is faster), against
Triton in the same run and against the Triton anchors in
``shared/anchors/`` (found next to the repository, or ``--anchors``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from backend_perf import ATTN_TEMPLATE
from common import (
    environment,
    fmt_ms,
    fmt_ratio,
    geomean,
    instantiate,
    load_anchors,
    median_ms,
    norm_dtype,
    write_json,
)

TEMPLATE = r'''
import $P
import $P.language as $L


def add_configs():
    return [$P.Config({"BLOCK": b}, num_warps=w) for b, w in ((1024, 4), (2048, 4), (2048, 8), (4096, 4),
                                                              (4096, 8), (8192, 8))]


def row_configs():
    return [$P.Config({}, num_warps=w) for w in (4, 8, 16, 32)]


def matmul_configs(fp32=False, fp8=False):
    shapes = [  # BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps
        (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4),
        (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 256, 32, 3, 8), (64, 64, 32, 5, 2),
    ]
    if fp32:
        shapes = [(m, n, k // 2, s, w) for m, n, k, s, w in shapes]
    if fp8:  # the same bytes per row of a K tile
        shapes = [(m, n, k * 2, s, w) for m, n, k, s, w in shapes]
    return [$P.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_stages=s, num_warps=w)
            for m, n, k, s, w in shapes]


def num_sms():
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(0).multi_processor_count
    except Exception:  # noqa: BLE001
        pass
    return 132


def persistent_configs():
    # the programs loop over the tiles: NUM_SMS programs (one per SM), or two per SM for tiles whose
    # shared memory lets two blocks share an SM
    sms = num_sms()
    shapes = [  # BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps, programs per SM
        (128, 256, 64, 3, 8, 1), (256, 128, 64, 3, 8, 1), (128, 128, 64, 3, 8, 1), (128, 128, 64, 4, 4, 1),
        (128, 256, 32, 3, 8, 1), (128, 128, 32, 4, 4, 2), (128, 64, 32, 4, 4, 2),
    ]
    return [$P.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8, "NUM_SMS": sms * per},
                      num_stages=s, num_warps=w) for m, n, k, s, w, per in shapes]


@$P.autotune(configs=add_configs(), key=["n"])
@$P.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: $L.constexpr):
    offs = $L.program_id(0) * BLOCK + $L.arange(0, BLOCK)
    mask = offs < n
    x = $L.load(x_ptr + offs, mask=mask)
    y = $L.load(y_ptr + offs, mask=mask)
    $L.store(out_ptr + offs, x + y, mask=mask)


@$P.autotune(configs=row_configs(), key=["n_cols"])
@$P.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: $L.constexpr):
    row = $L.program_id(0)
    cols = $L.arange(0, BLOCK)
    mask = cols < n_cols
    x = $L.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf")).to($L.float32)
    x = x - $L.max(x, axis=0)
    num = $L.exp(x)
    y = num / $L.sum(num, axis=0)
    $L.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@$P.autotune(configs=row_configs(), key=["N"])
@$P.jit
def layernorm_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK: $L.constexpr):
    row = $L.program_id(0)
    cols = $L.arange(0, BLOCK)
    mask = cols < N
    x = $L.load(X + row * stride + cols, mask=mask, other=0.0).to($L.float32)
    mean = $L.sum(x, axis=0) / N
    xc = $L.where(mask, x - mean, 0.0)
    var = $L.sum(xc * xc, axis=0) / N
    rstd = 1.0 / $L.sqrt(var + eps)
    $L.store(Mean + row, mean)
    $L.store(Rstd + row, rstd)
    w = $L.load(W + cols, mask=mask).to($L.float32)
    b = $L.load(B + cols, mask=mask).to($L.float32)
    $L.store(Y + row * stride + cols, (xc * rstd * w + b).to(Y.dtype.element_ty), mask=mask)


@$P.jit
def _matmul_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                 BLOCK_M: $L.constexpr, BLOCK_N: $L.constexpr, BLOCK_K: $L.constexpr, GROUP_M: $L.constexpr):
    pid = $L.program_id(0)
    tiles_m = $L.cdiv(M, BLOCK_M)
    tiles_n = $L.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows = $L.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % rows
    tile_n = (pid % per_group) // rows
    rm = tile_m * BLOCK_M + $L.arange(0, BLOCK_M)
    rn = tile_n * BLOCK_N + $L.arange(0, BLOCK_N)
    rk = $L.arange(0, BLOCK_K)
    a_tile = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :] * stride_ak
    b_tile = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :] * stride_bn
    acc = $L.zeros((BLOCK_M, BLOCK_N), dtype=$L.float32)
    for k in range(0, $L.cdiv(K, BLOCK_K)):
        a = $L.load(a_tile, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = $L.load(b_tile, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
        acc = $L.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    c_tile = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    $L.store(c_tile, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


@$P.jit
def _tile_coords(tile, tiles_m, tiles_n, GROUP_M: $L.constexpr):
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = $L.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@$P.jit
def _matmul_persistent(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                       stride_cn, BLOCK_M: $L.constexpr, BLOCK_N: $L.constexpr, BLOCK_K: $L.constexpr,
                       GROUP_M: $L.constexpr, NUM_SMS: $L.constexpr):
    # persistent: each program walks the tiles start, start + NUM_SMS, ... (a grid of at most NUM_SMS)
    start = $L.program_id(0)
    tiles_m = $L.cdiv(M, BLOCK_M)
    tiles_n = $L.cdiv(N, BLOCK_N)
    k_tiles = $L.cdiv(K, BLOCK_K)
    rk = $L.arange(0, BLOCK_K)
    for tile in $L.range(start, tiles_m * tiles_n, NUM_SMS, flatten=True):
        tile_m, tile_n = _tile_coords(tile, tiles_m, tiles_n, GROUP_M)
        rm = tile_m * BLOCK_M + $L.arange(0, BLOCK_M)
        rn = tile_n * BLOCK_N + $L.arange(0, BLOCK_N)
        a_tile = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :] * stride_ak
        b_tile = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :] * stride_bn
        acc = $L.zeros((BLOCK_M, BLOCK_N), dtype=$L.float32)
        for k in range(0, k_tiles):
            a = $L.load(a_tile, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
            b = $L.load(b_tile, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
            acc = $L.dot(a, b, acc)
            a_tile += BLOCK_K * stride_ak
            b_tile += BLOCK_K * stride_bk
        c = acc.to(c_ptr.dtype.element_ty)
        c_tile = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
        $L.store(c_tile, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


matmul_kernel = $P.autotune(configs=matmul_configs(), key=["M", "N", "K"])(_matmul_tile)
matmul_kernel_persistent = $P.autotune(configs=persistent_configs(), key=["M", "N", "K"])(_matmul_persistent)
matmul_kernel_fp32 = $P.autotune(configs=matmul_configs(fp32=True), key=["M", "N", "K"])(_matmul_tile)
matmul_kernel_fp8 = $P.autotune(configs=matmul_configs(fp8=True), key=["M", "N", "K"])(_matmul_tile)
''' + ATTN_TEMPLATE


def cdiv(a, b):
    return (a + b - 1) // b


def next_pow2(n):
    return 1 << (n - 1).bit_length()


# --- launch wrappers (identical for both packages) ------------------------------------------------


def run_add(m, x, y, out):
    n = x.numel()
    m.add_kernel[lambda meta: (cdiv(n, meta["BLOCK"]),)](x, y, out, n)


def run_softmax(m, x, y):
    rows, cols = x.shape
    m.softmax_kernel[(rows,)](y, x, x.stride(0), y.stride(0), cols, BLOCK=next_pow2(cols))


def run_layernorm(m, x, w, b, y, mean, rstd):
    rows, cols = x.shape
    m.layernorm_kernel[(rows,)](x, y, w, b, mean, rstd, x.stride(0), cols, 1e-5, BLOCK=next_pow2(cols))


def run_matmul(m, a, b, c):
    M, K = a.shape
    N = b.shape[1]
    kernel = {4: m.matmul_kernel_fp32, 2: m.matmul_kernel, 1: m.matmul_kernel_fp8}[a.dtype.itemsize]
    grid = lambda meta: (cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"]),)
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def run_matmul_persistent(m, a, b, c):
    M, K = a.shape
    N = b.shape[1]
    grid = lambda meta: (min(meta["NUM_SMS"], cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"])),)
    m.matmul_kernel_persistent[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                     c.stride(0), c.stride(1))


def run_attention(m, q, k, v, o, causal):
    Z, H, N, D = q.shape
    grid = lambda meta: (N // meta["BLOCK_M"], Z * H)
    m.attn_fwd[grid](q, k, v, 1.0 / D ** 0.5, o, q.stride(2), k.stride(2), v.stride(2), o.stride(2), N,
                     HEAD_DIM=D, STAGE=3 if causal else 1)


def best_config(m, kind, dtype_size=2) -> str | None:
    attr = {"add": "add_kernel", "softmax": "softmax_kernel", "layernorm": "layernorm_kernel",
            "matmul": {4: "matmul_kernel_fp32", 1: "matmul_kernel_fp8"}.get(dtype_size, "matmul_kernel"),
            "matmul_masked": "matmul_kernel", "matmul_persistent": "matmul_kernel_persistent",
            "attention": "attn_fwd"}[kind]
    cfg = getattr(getattr(m, attr), "best_config", None)
    return str(cfg) if cfg is not None else None


# --- cells -------------------------------------------------------------------------------------------


MATMUL_KINDS = ("matmul", "matmul_masked", "matmul_persistent")


def cells(quick: bool, only=None, dtypes=None, sizes=None, dims=None) -> list:
    out = []
    if quick:
        out += [("add", (1 << 24,), "float32"), ("softmax", (8192, 4096), "float16"),
                ("softmax", (8192, 4096), "float32"), ("layernorm", (8192, 4096), "float16"),
                ("matmul", (4096, 4096, 4096), "float16")]
    else:
        out += [("add", (n,), "float32") for n in (1 << 20, 1 << 24, 1 << 28)]
        for kind in ("softmax", "layernorm"):
            for dt in ("float16", "float32"):
                out += [(kind, (8192, c), dt) for c in (1024, 2048, 4096, 8192, 16384)]
        for dt in ("float16", "bfloat16", "float8_e4m3fn", "float32"):
            out += [("matmul", (s, s, s), dt) for s in (1024, 2048, 4096, 8192)]
        # matmul variants, only when --only names them: the persistent kernel (a tile loop over NUM_SMS
        # programs), and the masked K loop with K - 1 (nothing divisible by 16: 2-byte loads, staged every
        # iteration)
        if only and "matmul_persistent" in only:
            out += [("matmul_persistent", (s, s, s), dt) for dt in ("float16", "bfloat16") for s in (2048, 4096, 8192)]
        if only and "matmul_masked" in only:
            out += [("matmul_masked", (s, s, s - 1), dt) for dt in ("float16", "bfloat16") for s in (2048, 4096)]
        # bf16 attention only when --dtypes names bfloat16 (the kernel casts P and O to the inputs' dtype)
        adts = ("float16", "bfloat16") if dtypes and "bfloat16" in dtypes else ("float16",)
        out += [("attention", (z, h, n, d, causal), dt) for dt in adts for (z, h, n) in ((4, 32, 4096), (16, 16, 1024))
                for d in (64, 128) for causal in (0, 1)]
    if only:
        out = [c for c in out if c[0] in only]
        if isinstance(only, (list, tuple)):  # in the order --only names the kinds (stable within a kind)
            out.sort(key=lambda c: only.index(c[0]))
    if dtypes:
        out = [c for c in out if c[2] in dtypes]
    if sizes:
        out = [c for c in out if c[0] not in MATMUL_KINDS or c[1][0] in sizes]
    if dims:  # attention head dims, in this order (a budget cuts the last ones first)
        out = [c for c in out if c[0] != "attention" or c[1][3] in dims]
        out.sort(key=lambda c: dims.index(c[1][3]) if c[0] == "attention" else -1)
    return out


def make_case(kind, shape, dtype):
    """(inputs, {impl: callable}, reference check(outputs) -> error, bytes or flops)."""
    import torch
    import torch.nn.functional as F
    dt = getattr(torch, dtype)
    dev = "cuda"
    torch.manual_seed(0)
    if kind == "add":
        (n,) = shape
        x, y = torch.randn(n, device=dev, dtype=dt), torch.randn(n, device=dev, dtype=dt)
        outs = {impl: torch.empty_like(x) for impl in ("newt", "triton", "torch")}
        calls = {"newt": lambda m: run_add(m, x, y, outs["newt"]), "triton": lambda m: run_add(m, x, y, outs["triton"]),
                 "torch": lambda m: torch.add(x, y, out=outs["torch"])}
        ref = x + y
        work = ("GBps", 3 * n * x.element_size())
    elif kind == "softmax":
        x = torch.randn(*shape, device=dev, dtype=dt)
        outs = {impl: torch.empty_like(x) for impl in ("newt", "triton", "torch")}
        calls = {"newt": lambda m: run_softmax(m, x, outs["newt"]),
                 "triton": lambda m: run_softmax(m, x, outs["triton"]),
                 "torch": lambda m: outs.__setitem__("torch", torch.softmax(x, dim=-1))}
        ref = torch.softmax(x.float(), dim=-1).to(dt)
        work = ("GBps", 2 * x.numel() * x.element_size())
    elif kind == "layernorm":
        M, N = shape
        x = -2.3 + 0.5 * torch.randn(M, N, device=dev, dtype=dt)
        w, b = torch.rand(N, device=dev, dtype=dt), torch.rand(N, device=dev, dtype=dt)
        outs = {impl: torch.empty_like(x) for impl in ("newt", "triton", "torch")}
        stats = {impl: (torch.empty(M, device=dev), torch.empty(M, device=dev)) for impl in ("newt", "triton")}
        calls = {"newt": lambda m: run_layernorm(m, x, w, b, outs["newt"], *stats["newt"]),
                 "triton": lambda m: run_layernorm(m, x, w, b, outs["triton"], *stats["triton"]),
                 "torch": lambda m: outs.__setitem__("torch", F.layer_norm(x, (N,), w, b, 1e-5))}
        ref = F.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5).to(dt)
        work = ("GBps", 2 * x.numel() * x.element_size())
    elif kind in MATMUL_KINDS:
        M, N, K = shape
        fp8 = dt.itemsize == 1
        a = torch.randn(M, K, device=dev).to(dt) if fp8 else torch.randn(M, K, device=dev, dtype=dt)
        bm = torch.randn(K, N, device=dev).to(dt) if fp8 else torch.randn(K, N, device=dev, dtype=dt)
        odt = torch.float16 if fp8 else dt
        outs = {impl: torch.empty(M, N, device=dev, dtype=odt) for impl in ("newt", "triton", "torch")}
        if fp8:  # cuBLAS through _scaled_mm (B column-major, unit scales)
            one = torch.ones((), device=dev)
            b_col = bm.t().contiguous().t()

            def torch_call(m):
                outs["torch"] = torch._scaled_mm(a, b_col, one, one, out_dtype=odt)
        else:
            def torch_call(m):
                torch.matmul(a, bm, out=outs["torch"])
        run = run_matmul_persistent if kind == "matmul_persistent" else run_matmul
        calls = {"newt": lambda m: run(m, a, bm, outs["newt"]),
                 "triton": lambda m: run(m, a, bm, outs["triton"]), "torch": torch_call}
        ref = (a.float() @ bm.float())
        work = ("TFLOPs", 2 * M * N * K)
    elif kind == "attention":
        Z, H, N, D, causal = shape
        q, k, v = (torch.randn(Z, H, N, D, device=dev, dtype=dt) for _ in range(3))
        outs = {impl: torch.full_like(q, float("nan")) for impl in ("newt", "triton", "torch")}
        calls = {"newt": lambda m: run_attention(m, q, k, v, outs["newt"], causal),
                 "triton": lambda m: run_attention(m, q, k, v, outs["triton"], causal),
                 "torch": lambda m: outs.__setitem__("torch", F.scaled_dot_product_attention(
                     q, k, v, is_causal=bool(causal)))}
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=bool(causal))
        work = ("TFLOPs", 4 * Z * H * N * N * D * (0.5 if causal else 1.0))
    else:
        raise ValueError(kind)
    return outs, calls, ref, work


def error_of(kind, out, ref) -> float:
    import torch
    if kind in MATMUL_KINDS:  # relative Frobenius error (K-long sums: elementwise tolerances mislead)
        return float(torch.linalg.norm(out.float() - ref.float()) / torch.linalg.norm(ref.float()))
    return float((out.float() - ref.float()).abs().max())


TOLERANCE = {"add": 1e-5, "softmax": 1e-2, "layernorm": 3e-2, "matmul": 2e-2, "matmul_masked": 2e-2,
             "matmul_persistent": 2e-2, "attention": 2e-2}


def run_cells(selected, modules, deadline, log, rounds: int = 3) -> list:
    import torch
    results = []
    for i, (kind, shape, dtype) in enumerate(selected):
        if time.time() > deadline:
            log(f"[{i + 1}/{len(selected)}] {kind} {shape} {dtype}: skipped (time budget spent)")
            results.append({"kind": kind, "shape": list(shape), "dtype": dtype, "skipped": "time budget"})
            continue
        torch.backends.cuda.matmul.allow_tf32 = dtype == "float32" and kind == "matmul"
        cell = {"kind": kind, "shape": list(shape), "dtype": "tf32" if (kind == "matmul" and dtype == "float32")
                else dtype, "impls": {}}
        t_cell = time.time()
        try:
            outs, calls, ref, (unit, work) = make_case(kind, shape, dtype)
        except Exception as e:
            cell["error"] = f"{type(e).__name__}: {e}"
            results.append(cell)
            continue
        variants = [i for i in modules if i.startswith("newt[")]
        impls = [i for i in ("newt", *variants, "triton", "torch") if i == "torch" or modules.get(i) is not None]
        for impl in impls:
            if impl in variants:  # newt's launch with the variant's module and flags, into newt's output
                outs["newt"].fill_(float("nan") if outs["newt"].is_floating_point() else 0)
                # (compiled in this process's threads: the tuning workers were spawned without the flags)
                calls[impl] = with_env({**VARIANT_ENV[impl], "NEWT_TUNE_AUTOTUNE": "threads"}, calls["newt"])
                cell["impls"][impl] = first_call(kind, dtype, impl, modules.get(impl), calls[impl],
                                                 {impl: outs["newt"]}, ref)
            else:
                cell["impls"][impl] = first_call(kind, dtype, impl, modules.get(impl), calls[impl], outs, ref)
        timed = {i: functools.partial(calls[i], modules.get(i)) for i in impls}
        time_rounds(cell["impls"], timed, unit, work, rounds)
        del timed
        del outs, calls, ref
        torch.cuda.empty_cache()
        cell["seconds"] = round(time.time() - t_cell, 2)
        results.append(cell)
        log(f"[{i + 1}/{len(selected)}] {describe(cell)}")
    return results


#: "newt[NAME]" -> the environment its module is compiled and launched under (--variant NAME:ENV=VAL,...)
VARIANT_ENV: dict = {}


def parse_variant(text: str) -> tuple[str, dict]:
    """``NAME:ENV=VAL[,ENV=VAL...]`` -> ("newt[NAME]", {ENV: VAL}).  Raises ValueError on a malformed one."""
    name, sep, rest = text.partition(":")
    env = {}
    for kv in rest.split(","):
        k, eq, v = kv.strip().partition("=")
        if not eq or not k.startswith("NEWT_") or not k.replace("_", "").isalnum():
            raise ValueError(f"--variant {text!r}: expected NAME:NEWT_FLAG=VALUE[,NEWT_FLAG=VALUE...]")
        env[k] = v
    if not sep or not name.isidentifier() or not env:
        raise ValueError(f"--variant {text!r}: expected NAME:NEWT_FLAG=VALUE[,NEWT_FLAG=VALUE...]")
    return f"newt[{name}]", env


def with_env(env: dict, call):
    """``call(m)`` with ``env`` set in os.environ (restored after): the variant's compiles and cache keys."""
    def run(m):
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return call(m)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return run


def first_call(kind, dtype, impl, m, call, outs, ref) -> dict:
    """The first call (autotuning and compiling), then the result checked against the reference."""
    import torch
    entry = {}
    try:
        t0 = time.time()
        call(m)
        torch.cuda.synchronize()
        entry["first_call_s"] = round(time.time() - t0, 3)
        err = error_of(kind, outs[impl], ref)
        entry["error"] = err
        entry["ok"] = bool(err <= TOLERANCE[kind] * (10 if dtype == "bfloat16" else 1))
        if impl != "torch":
            entry["config"] = best_config(m, kind, 4 if dtype == "float32" else 1 if "float8" in dtype else 2)
    except Exception as e:
        entry["failed"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        entry["traceback"] = traceback.format_exc()[-2000:]
    return entry


def time_rounds(entries: dict, calls: dict, unit: str, work, rounds: int, rep: float = 40.0):
    """Time the implementations in ``rounds`` interleaved rounds (newt, Triton, torch, newt, ...), so clock
    and thermal drift reach all of them alike; each entry gets the median of its rounds' medians."""
    import statistics
    live = [i for i, e in entries.items() if "failed" not in e]
    for _ in range(rounds):
        for impl in list(live):
            try:
                entries[impl].setdefault("rounds_ms", []).append(median_ms(calls[impl], warmup=10, rep=rep))
            except Exception as e:
                entries[impl]["failed"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
                entries[impl]["traceback"] = traceback.format_exc()[-2000:]
                live.remove(impl)
    for impl in live:
        ts = entries[impl]["rounds_ms"]
        ms = statistics.median(ts)
        entries[impl]["ms"] = ms
        entries[impl]["spread"] = (max(ts) - min(ts)) / ms
        entries[impl][unit] = work / ms * (1e-6 if unit == "GBps" else 1e-9)


def describe(cell) -> str:
    parts = [f"{cell['kind']} {'x'.join(map(str, cell['shape']))} {cell['dtype']}:"]
    for impl, e in cell.get("impls", {}).items():
        if "ms" in e:
            parts.append(f"{impl} {e['ms']:.4f} ms{'' if e.get('ok', True) else ' (WRONG)'}")
        elif "failed" in e:
            parts.append(f"{impl} FAILED ({e['failed'][:80]})")
    return " ".join(parts)


# --- scoring and reports -------------------------------------------------------------------------------

MEMORY_BOUND = ("add", "softmax", "layernorm")


def score(results, anchors) -> dict:
    for cell in results:
        im = cell.get("impls", {})
        n = im.get("newt", {}).get("ms")
        for other in ("triton", "torch"):
            o = im.get(other, {}).get("ms")
            cell[f"vs_{other}"] = (o / n) if (n and o) else None
        key_dtype = "float32" if cell["dtype"] == "tf32" else norm_dtype(cell["dtype"])
        a = anchors.get((cell["kind"], tuple(cell["shape"]), key_dtype, "triton"))
        cell["anchor_triton_ms"] = a
        cell["vs_anchor_triton"] = (a / n) if (a and n) else None
        n_ms = im.get("newt", {}).get("ms")
        for v, e in im.items():
            if v.startswith("newt[") and e.get("ms"):
                cell.setdefault("variants", {})[v] = {
                    "vs_newt": (n_ms / e["ms"]) if n_ms else None,
                    **{f"vs_{o}": (im[o]["ms"] / e["ms"]) if im.get(o, {}).get("ms") else None
                       for o in ("triton", "torch")}}
    mem = [c for c in results if c["kind"] in MEMORY_BOUND and c.get("vs_triton")]
    mm = [c for c in results if c["kind"] == "matmul" and c.get("vs_triton")]
    at = [c for c in results if c["kind"] == "attention" and c.get("vs_triton")]
    pers = [c for c in results if c["kind"] == "matmul_persistent" and c.get("vs_triton")]
    masked = [c for c in results if c["kind"] == "matmul_masked" and c.get("vs_triton")]
    summary = {
        "memory_bound_geomean_vs_triton": geomean([c["vs_triton"] for c in mem]),
        "memory_bound_min_vs_triton": min((c["vs_triton"] for c in mem), default=None),
        "memory_bound_worst_cell": None,
        "memory_bound_geomean_vs_anchor_triton": geomean([c["vs_anchor_triton"] for c in mem
                                                          if c.get("vs_anchor_triton")]),
        "matmul_geomean_vs_triton": geomean([c["vs_triton"] for c in mm]),
        "matmul_geomean_vs_torch": geomean([c["vs_torch"] for c in mm if c.get("vs_torch")]),
        "persistent_geomean_vs_triton": geomean([c["vs_triton"] for c in pers]),
        "persistent_geomean_vs_torch": geomean([c["vs_torch"] for c in pers if c.get("vs_torch")]),
        "masked_k_geomean_vs_triton": geomean([c["vs_triton"] for c in masked]),
        "attention_geomean_vs_triton": geomean([c["vs_triton"] for c in at]),
        "attention_geomean_vs_torch": geomean([c["vs_torch"] for c in at if c.get("vs_torch")]),
        "cells": len(results), "cells_measured": sum(1 for c in results if c.get("impls")),
        "wrong_results": [describe(c) for c in results if any(not e.get("ok", True) for e in c.get("impls", {})
                                                              .values())],
        "failures": [f"{c['kind']} {c['shape']} {c['dtype']} {impl}: {e['failed']}" for c in results
                     for impl, e in c.get("impls", {}).items() if "failed" in e],
    }
    names = sorted({v for c in results for v in c.get("variants", {})})
    summary["variants"] = {v: {f"{kind}_geomean_{r}": geomean([c["variants"][v][r] for c in results
                                                              if c["kind"] == kind and c["variants"].get(v, {}).get(r)
                                                              and "variants" in c])
                               for kind in ("matmul", "attention") for r in ("vs_newt", "vs_triton", "vs_torch")}
                           for v in names}
    if mem:
        worst = min(mem, key=lambda c: c["vs_triton"])
        summary["memory_bound_worst_cell"] = f"{worst['kind']} {'x'.join(map(str, worst['shape']))} {worst['dtype']}"
    summary["memory_bound_target_met"] = bool(mem) and summary["memory_bound_geomean_vs_triton"] >= 1.0 and \
        summary["memory_bound_min_vs_triton"] >= 0.95
    return summary


def render_md(data) -> str:
    info, summary, results = data["info"], data["summary"], data["results"]
    L = [f"# newt vs Triton vs torch — {info.get('gpu', '?')}", ""]
    L.append(f"Run {info.get('date')} on `{info.get('host', '?')}` (git {info.get('git', '?')}): "
             f"{info.get('gpu', '?')} ({info.get('sms', '?')} SMs, compute {info.get('cc', '?')}, driver "
             f"{info.get('driver', '?')}), torch {info.get('torch')}, Triton {info.get('triton')}, cuda-bindings "
             f"{info.get('cuda_bindings')}, NVRTC {info.get('nvrtc')}, newt {info.get('newt')}, Python "
             f"{info.get('python')}.")
    L.append("")
    L.append("Method: newt and Triton compile the same kernel source (`benchmarks/bench.py`, only `nl`/`tl` "
             "differ) and autotune over the same configs; every implementation is timed by "
             "`newt.testing.do_bench` (CUDA events, L2 flushed by writing 256 MB before each repetition, "
             f"10 ms warm-up, 40 ms of repetitions, median) in {data.get('rounds', 1)} rounds that alternate "
             "newt, Triton and torch; a cell's time is the median of its rounds. Ratios are speed-ups: other "
             "time / newt time (above 1.00x newt is faster). Results are checked against torch (fp32 reference) first. "
             "fp32 matmul runs on TF32 tensor cores in all three (torch with `allow_tf32=True`).")
    if data.get("anchors"):
        L.append(f"Anchors: `{Path(data['anchors']).name}` (Triton 3.6 on the H200, same method).")
    else:
        L.append("Anchors: not found on this machine (rerun `bench.py --rescore results.json --anchors DIR`).")
    L.append("")
    L.append("## Summary")
    L.append("")
    g = summary.get("memory_bound_geomean_vs_triton")
    L.append(f"- Memory-bound cells (add, softmax, layer norm): newt/Triton geomean **{fmt_ratio(g)}**, "
             f"worst {fmt_ratio(summary.get('memory_bound_min_vs_triton'))} "
             f"({summary.get('memory_bound_worst_cell') or '—'}); target (geomean ≥ 1.00x, no cell under 0.95x) "
             f"{'**met**' if summary.get('memory_bound_target_met') else '**not met**'}.")
    ga = fmt_ratio(summary.get("memory_bound_geomean_vs_anchor_triton"))
    L.append(f"- Against the anchored Triton figures: geomean {ga} on the memory-bound cells.")
    L.append(f"- Matmul (newt on sm_90a: wgmma + cp.async pipeline, `NEWT_DOT_LOWERING` "
             f"{os.environ.get('NEWT_DOT_LOWERING') or 'unset (wgmma)'}; fp8 on wgmma k32, its N-major B "
             f"transposed in shared memory; tf32 on wgmma k8 too): newt/Triton geomean "
             f"{fmt_ratio(summary.get('matmul_geomean_vs_triton'))}, newt/cuBLAS "
             f"{fmt_ratio(summary.get('matmul_geomean_vs_torch'))}.")
    if summary.get("persistent_geomean_vs_triton"):
        L.append(f"- Persistent matmul (a tile loop over NUM_SMS programs, same source): newt/Triton geomean "
                 f"{fmt_ratio(summary.get('persistent_geomean_vs_triton'))}, newt/cuBLAS "
                 f"{fmt_ratio(summary.get('persistent_geomean_vs_torch'))}.")
    if summary.get("masked_k_geomean_vs_triton"):
        L.append(f"- Masked-K matmul with K = s - 1 (nothing divisible by 16): newt/Triton geomean "
                 f"{fmt_ratio(summary.get('masked_k_geomean_vs_triton'))}.")
    if summary.get("attention_geomean_vs_triton"):
        L.append(f"- Attention forward (same source): newt/Triton geomean "
                 f"{fmt_ratio(summary.get('attention_geomean_vs_triton'))}, newt/SDPA "
                 f"{fmt_ratio(summary.get('attention_geomean_vs_torch'))}.")
    if summary.get("wrong_results"):
        L.append(f"- **Wrong results**: {'; '.join(summary['wrong_results'])}")
    if summary.get("failures"):
        L.append(f"- Failures: {'; '.join(summary['failures'])}")
    if data.get("plot"):
        L.append("")
        L.append(f"![newt / Triton speed per cell]({data['plot']})")
    elif data.get("plot_note"):
        L.append(f"- Plot: {data['plot_note']}")
    for kind, title, unit in (("add", "Vector add", "GBps"), ("softmax", "Softmax (8192 rows)", "GBps"),
                              ("layernorm", "Layer norm forward (8192 rows)", "GBps"),
                              ("matmul", "Matmul (M = N = K)", "TFLOPs"),
                              ("matmul_persistent", "Persistent matmul (M = N = K)", "TFLOPs"),
                              ("matmul_masked", "Masked-K matmul (K = M - 1)", "TFLOPs"),
                              ("attention", "Attention forward (Z x H x N x D, causal)", "TFLOPs")):
        rows = [c for c in results if c["kind"] == kind]
        if not rows:
            continue
        L += ["", f"## {title}", ""]
        u = "GB/s" if unit == "GBps" else "TFLOP/s"
        L.append(f"| shape | dtype | newt ms | Triton ms | torch ms | newt {u} | vs Triton | vs torch | vs anchor "
                 "Triton | newt config | Triton config | error |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c in rows:
            if c.get("skipped") or "impls" not in c:
                L.append(f"| {'x'.join(map(str, c['shape']))} | {c['dtype']} | " + (c.get("skipped") or c.get(
                    "error", "?")) + " |||||||||")
                continue
            im = c["impls"]
            n, t, o = im.get("newt", {}), im.get("triton", {}), im.get("torch", {})

            def ms(e):
                return fmt_ms(e.get("ms")) if "ms" in e else ("FAILED" if "failed" in e else "—")
            perf = n.get(unit)
            err = n.get("error")
            L.append(f"| {'x'.join(map(str, c['shape']))} | {c['dtype']} | {ms(n)} | {ms(t)} | {ms(o)} | "
                     f"{'—' if perf is None else f'{perf:.0f}' if unit == 'GBps' else f'{perf:.1f}'} | "
                     f"{fmt_ratio(c.get('vs_triton'))} | {fmt_ratio(c.get('vs_torch'))} | "
                     f"{fmt_ratio(c.get('vs_anchor_triton'))} | {n.get('config') or '—'} | {t.get('config') or '—'} | "
                     f"{'—' if err is None else f'{err:.1e}'}{'' if n.get('ok', True) else ' WRONG'} |")
    for v, g in summary.get("variants", {}).items():
        flags = ", ".join(f"{k}={x}" for k, x in data.get("variant_env", {}).get(v, {}).items())
        L += ["", f"## Variant `{v}` ({flags}), same run", ""]
        L.append("Geomeans: " + "; ".join(f"{k.replace('_geomean_', ' ')} {fmt_ratio(x)}" for k, x in g.items()
                                          if x == x))
        L.append("")
        L.append("| kind | shape | dtype | newt ms | variant ms | variant / newt | variant vs Triton | newt vs Triton "
                 "| variant vs torch | variant config | error |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for c in results:
            e = c.get("impls", {}).get(v)
            if not e:
                continue
            r = c.get("variants", {}).get(v, {})
            n = c["impls"].get("newt", {})
            ok = "" if e.get("ok", True) else " WRONG"
            L.append(f"| {c['kind']} | {'x'.join(map(str, c['shape']))} | {c['dtype']} | "
                     f"{fmt_ms(n.get('ms')) if 'ms' in n else '—'} | "
                     f"{fmt_ms(e.get('ms')) if 'ms' in e else ('FAILED' if 'failed' in e else '—')} | "
                     f"{fmt_ratio(r.get('vs_newt'))} | {fmt_ratio(r.get('vs_triton'))} | "
                     f"{fmt_ratio(c.get('vs_triton'))} | {fmt_ratio(r.get('vs_torch'))} | {e.get('config') or '—'} | "
                     f"{fmt_err(e.get('error'))}{ok} |")
    fails = [(c, impl, e) for c in results for impl, e in c.get("impls", {}).items() if "failed" in e]
    if fails:
        L += ["", "## Failures", ""]
        for c, impl, e in fails:
            L.append(f"- {c['kind']} {'x'.join(map(str, c['shape']))} {c['dtype']} **{impl}**: `{e['failed']}`")
    L.append("")
    return "\n".join(L)


def plot(results, path: Path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, "matplotlib is not installed on this machine: no plot"
    rows = [c for c in results if c.get("vs_triton")]
    if not rows:
        return None, "nothing measured: no plot"
    labels = [f"{c['kind']} {'x'.join(map(str, c['shape']))} {c['dtype']}" for c in rows]
    colors = {"add": "#4c72b0", "softmax": "#55a868", "layernorm": "#c44e52", "matmul": "#8172b2",
              "matmul_persistent": "#64b5cd", "matmul_masked": "#937860",
              "attention": "#ccb974"}
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.5))
    y = list(range(len(rows)))
    ax.barh(y, [c["vs_triton"] for c in rows], color=[colors.get(c["kind"], "gray") for c in rows])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.axvline(0.95, color="black", linewidth=0.5, linestyle="--")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("speed-up of newt over Triton (Triton time / newt time)")
    ax.set_title("newt vs Triton, same kernels and configs")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path.name, None


def write_reports(data, out: Path):
    out.mkdir(parents=True, exist_ok=True)
    name, note = plot(data["results"], out / "results.png")
    data["plot"], data["plot_note"] = name, note
    write_json(out / "results.json", data)
    (out / "results.md").write_text(render_md(data))


def fmt_err(x) -> str:
    return "—" if x is None else f"{x:.1e}"


_TL_DTYPE = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


def offline_specializations(kind, shape, dtype):
    """(kernel attribute, signature, constexprs) the runtime specializes a cell's launch to (sizes and
    strides divisible by 16 hinted, unit strides constexpr), or None where the offline check does not
    cover the kind."""
    from backend_perf import attn_signature
    t = _TL_DTYPE.get(dtype)
    if t is None:
        return None
    if kind in ("matmul", "matmul_masked"):
        M, N, K = shape
        h = lambda n: "i32:16" if n % 16 == 0 else "i32"
        sig = {"a_ptr": f"*{t}:16", "b_ptr": f"*{t}:16", "c_ptr": f"*{t}:16", "M": h(M), "N": h(N), "K": h(K),
               "stride_am": h(K), "stride_bk": h(N), "stride_cm": h(N)}
        attr = "matmul_kernel_fp32" if t == "fp32" else "matmul_kernel"
        return attr, sig, {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}
    if kind == "attention" and t in ("fp16", "bf16"):
        Z, H, N, D, causal = shape
        return "attn_fwd", attn_signature(t), {"HEAD_DIM": D, "STAGE": 3 if causal else 1}
    return None


def offline(selected, variants: dict, target: str = "sm_90a") -> int:
    """``--offline``: compile every autotune config of every newt implementation each selected cell would
    time, for ``target``, without a GPU; print registers, spills and shared memory; 1 on any failure."""
    import newt
    impls = {"newt": {}, **variants}
    mods = {impl: instantiate(TEMPLATE, "newt", f"bench_offline{i}") for i, impl in enumerate(impls)}
    done, bad, skipped = set(), [], set()
    t0 = time.time()
    for kind, shape, dtype in selected:
        spec = offline_specializations(kind, shape, dtype)
        if spec is None:
            skipped.add(f"{kind} {dtype}")
            continue
        attr, sig, cx = spec
        for impl, env in impls.items():
            tuner = getattr(mods[impl], attr)
            fn = tuner
            while hasattr(fn, "fn") and not hasattr(fn, "constexpr_names"):
                fn = fn.fn
            for cfg in tuner.configs:
                key = (impl, attr, tuple(sorted(sig.items())), tuple(sorted(cx.items())), str(cfg))
                if key in done:
                    continue
                done.add(key)
                label = f"{impl:12s} {kind} {'x'.join(map(str, shape))} {dtype} {cfg.kwargs} w{cfg.num_warps} " \
                        f"s{cfg.num_stages}"
                compile_one = functools.partial(newt.compile, fn, signature=sig, constexprs={**cx, **cfg.kwargs},
                                                target=target, num_warps=cfg.num_warps,
                                                num_stages=cfg.num_stages, cache=False)
                try:
                    ck = with_env(env, lambda _m, c=compile_one: c())(None)
                except Exception as e:
                    bad.append(f"{label}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                    print(f"FAILED {bad[-1]}", flush=True)
                    continue
                md = ck.metadata
                print(f"{label:100s} regs {md.n_regs:3d} spills {md.n_spills:5d} smem {md.shared:6d}", flush=True)
    print(f"offline: {len(done)} compiles for {target} in {time.time() - t0:.0f} s, {len(bad)} failed"
          + (f"; not covered offline: {', '.join(sorted(skipped))}" if skipped else ""))
    for b in bad:
        print("  " + b)
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).resolve().parent), help="directory for the reports")
    p.add_argument("--quick", action="store_true", help="a small subset of the cells")
    p.add_argument("--only", default="", help="comma-separated kinds: add,softmax,layernorm,matmul,attention, "
                   "matmul_persistent, matmul_masked (the last two only when named)")
    p.add_argument("--dtypes", default="", help="comma-separated torch dtypes of the cells (float16,float8_e4m3fn,...)")
    p.add_argument("--budget", type=float, default=330.0, help="seconds; later cells are skipped (default 330)")
    p.add_argument("--anchors", default=None, help="directory of the anchor JSON files")
    p.add_argument("--no-triton", action="store_true", help="skip Triton")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds per cell (default 3)")
    p.add_argument("--rescore", default=None, help="rebuild the reports from an existing results.json")
    p.add_argument("--variant", action="append", default=[], metavar="NAME:NEWT_FLAG=V[,...]",
                   help="also time newt compiled and launched with these environment flags (its own module, "
                   "autotuned over the same configs), reported as newt[NAME] against newt, Triton and torch")
    p.add_argument("--matmul-sizes", default="", help="comma-separated M (= N = K) of the matmul cells (default all)")
    p.add_argument("--attention-dims", default="", help="comma-separated head dims of the attention cells, in the "
                   "order to run them (default 64,128)")
    p.add_argument("--offline", action="store_true",
                   help="no GPU: build the cell list and compile, for sm_90a, every autotune config of every newt "
                   "implementation (and variant) the run would time; exit 1 on a compile failure")
    args = p.parse_args(argv)
    try:
        variants = dict(parse_variant(v) for v in args.variant)
    except ValueError as e:
        p.error(str(e))
    VARIANT_ENV.update(variants)
    out = Path(args.out)
    anchors, anchor_path = load_anchors(args.anchors)
    if args.rescore:
        data = json.loads(Path(args.rescore).read_text())
        data["summary"] = score(data["results"], anchors)
        data["anchors"] = anchor_path
        write_reports(data, out)
        print((out / "results.md").read_text())
        return 0

    only = [s.strip() for s in args.only.split(",") if s.strip()]
    sizes = {int(x) for x in args.matmul_sizes.split(",") if x.strip()}
    dims = [int(x) for x in args.attention_dims.split(",") if x.strip()]
    selected = cells(args.quick, only, [d for d in args.dtypes.split(",") if d] or None, sizes, dims)
    if args.offline:
        return offline(selected, variants)
    import torch
    if not torch.cuda.is_available():
        print("bench.py needs a CUDA GPU", file=sys.stderr)
        return 2
    t_start = time.time()
    log = lambda s: print(f"{time.time() - t_start:7.1f}s  {s}", flush=True)
    modules = {"newt": instantiate(TEMPLATE, "newt", "bench")}
    for i, v in enumerate(variants):
        modules[v] = instantiate(TEMPLATE, "newt", f"bench_variant{i}")
    if not args.no_triton:
        try:
            modules["triton"] = instantiate(TEMPLATE, "triton", "bench")
        except Exception as e:
            log(f"Triton unavailable: {type(e).__name__}: {e}")
    info = environment()
    log(f"{info.get('gpu')}: {len(selected)} cells")
    results = run_cells(selected, modules, t_start + args.budget, log, rounds=args.rounds)
    data = {"info": info, "results": results, "anchors": anchor_path, "quick": args.quick, "rounds": args.rounds,
            "seconds": round(time.time() - t_start, 1), "variant_env": variants}
    data["summary"] = score(results, anchors)
    write_reports(data, out)
    s = data["summary"]
    log(f"memory-bound geomean vs Triton {fmt_ratio(s['memory_bound_geomean_vs_triton'])}, worst "
        f"{fmt_ratio(s['memory_bound_min_vs_triton'])} ({s['memory_bound_worst_cell']}); matmul vs Triton "
        f"{fmt_ratio(s['matmul_geomean_vs_triton'])}; wrote {out / 'results.md'}")
    return 0 if not s["wrong_results"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
