"""Layer normalisation, forward and backward, as a ``torch.autograd.Function``.

Forward: one program per row computes the mean and the reciprocal standard
deviation in fp32 (kept for the backward pass) and writes
``y = (x - mean) * rstd * w + b``.

Backward: one program per row computes ``dx``; the weight and bias gradients
are sums over all rows, so each program adds its row's contribution into one
of ``GROUP`` partial buffers with atomic adds (rows ``i``, ``i + GROUP``, ...
share a buffer, which keeps contention low), and a second kernel sums the
``GROUP`` partials column by column.

    python examples/layer_norm.py [--bench]

Without a GPU it runs through newt's interpreter on small matrices.
"""

from __future__ import annotations

import argparse
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("NEWT_INTERPRET", "1")

import newt
import newt.harness as nh
import newt.language as nl

INTERPRET = os.environ.get("NEWT_INTERPRET", "").lower() in ("1", "true", "yes", "on")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@newt.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, row_stride, N, eps, BLOCK_N: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK_N)
    valid = cols < N
    x = nl.load(X + row * row_stride + cols, mask=valid, other=0.0).to(nl.float32)
    mean = nl.sum(x, axis=0) / N
    centered = nl.where(valid, x - mean, 0.0)
    var = nl.sum(centered * centered, axis=0) / N
    rstd = 1.0 / nl.sqrt(var + eps)
    nl.store(Mean + row, mean)
    nl.store(Rstd + row, rstd)
    w = nl.load(W + cols, mask=valid).to(nl.float32)
    b = nl.load(B + cols, mask=valid).to(nl.float32)
    y = centered * rstd * w + b
    nl.store(Y + row * row_stride + cols, y.to(Y.dtype.element_ty), mask=valid)


@newt.jit
def layer_norm_bwd_dx(DX, DY, PartialDW, PartialDB, X, W, Mean, Rstd, row_stride, N,
                      GROUP: nl.constexpr, BLOCK_N: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK_N)
    valid = cols < N
    x = nl.load(X + row * row_stride + cols, mask=valid, other=0.0).to(nl.float32)
    dy = nl.load(DY + row * row_stride + cols, mask=valid, other=0.0).to(nl.float32)
    w = nl.load(W + cols, mask=valid).to(nl.float32)
    mean = nl.load(Mean + row)
    rstd = nl.load(Rstd + row)
    xhat = nl.where(valid, (x - mean) * rstd, 0.0)
    wdy = w * dy
    c1 = nl.sum(xhat * wdy, axis=0) / N
    c2 = nl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    nl.store(DX + row * row_stride + cols, dx.to(DX.dtype.element_ty), mask=valid)
    group = row % GROUP
    nl.atomic_add(PartialDW + group * N + cols, dy * xhat, mask=valid)
    nl.atomic_add(PartialDB + group * N + cols, dy, mask=valid)


@newt.jit
def layer_norm_bwd_dwdb(PartialDW, PartialDB, DW, DB, N, GROUP: nl.constexpr, BLOCK_N: nl.constexpr):
    cols = nl.program_id(0) * BLOCK_N + nl.arange(0, BLOCK_N)
    valid = cols < N
    dw = nl.zeros((BLOCK_N,), dtype=nl.float32)
    db = nl.zeros((BLOCK_N,), dtype=nl.float32)
    for g in range(0, GROUP):
        dw += nl.load(PartialDW + g * N + cols, mask=valid, other=0.0)
        db += nl.load(PartialDB + g * N + cols, mask=valid, other=0.0)
    nl.store(DW + cols, dw.to(DW.dtype.element_ty), mask=valid)
    nl.store(DB + cols, db.to(DB.dtype.element_ty), mask=valid)


def _launch_params(n: int):
    block = newt.next_power_of_2(n)
    if block > 32768:
        raise ValueError(f"layer_norm: rows of {n} elements do not fit in one program (at most 32768)")
    num_warps = min(max(block // 256, 1), 16)
    return block, num_warps


class LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        M, N = x2.shape
        y = torch.empty_like(x2)
        mean = torch.empty(M, dtype=torch.float32, device=x.device)
        rstd = torch.empty(M, dtype=torch.float32, device=x.device)
        block, num_warps = _launch_params(N)
        layer_norm_fwd[(M,)](x2, y, weight, bias, mean, rstd, x2.stride(0), N, eps, BLOCK_N=block,
                             num_warps=num_warps)
        ctx.save_for_backward(x2, weight, mean, rstd)
        ctx.block, ctx.num_warps = block, num_warps
        return y.view_as(x)

    @staticmethod
    def backward(ctx, dy):
        x2, w, mean, rstd = ctx.saved_tensors
        M, N = x2.shape
        dy2 = dy.reshape(M, N).contiguous()
        group = 64 if N <= 8192 else 32 if N <= 16384 else 16
        group = min(group, newt.next_power_of_2(M))
        partial_dw = torch.zeros(group, N, dtype=torch.float32, device=x2.device)
        partial_db = torch.zeros(group, N, dtype=torch.float32, device=x2.device)
        dx = torch.empty_like(x2)
        layer_norm_bwd_dx[(M,)](dx, dy2, partial_dw, partial_db, x2, w, mean, rstd, x2.stride(0), N,
                                GROUP=group, BLOCK_N=ctx.block, num_warps=ctx.num_warps)
        dw = torch.empty_like(w)
        db = torch.empty_like(w)
        block_cols = min(128, newt.next_power_of_2(N))
        layer_norm_bwd_dwdb[(newt.cdiv(N, block_cols),)](partial_dw, partial_db, dw, db, N, GROUP=group,
                                                         BLOCK_N=block_cols)
        return dx.view_as(dy), None, dw, db, None


def layer_norm(x, normalized_shape, weight, bias, eps=1e-5):
    return LayerNorm.apply(x, normalized_shape, weight, bias, eps)


# --- what the editor's Verify and Autotune run: one example and reference per kernel -----------------------


def _stats(x, eps):
    x = x.float()
    mean = x.mean(dim=-1)
    rstd = 1.0 / torch.sqrt(x.var(dim=-1, unbiased=False) + eps)
    return mean, rstd


@nh.reference(layer_norm_fwd)
def layer_norm_fwd_reference(X, Y, W, B, Mean, Rstd, row_stride, N, eps, BLOCK_N):
    mean, rstd = _stats(X, eps)
    y = (X.float() - mean[:, None]) * rstd[:, None] * W.float() + B.float()
    return {"Y": y.to(Y.dtype), "Mean": mean, "Rstd": rstd}


@nh.example(layer_norm_fwd)
def fwd_rows(device):
    M, N = 19, 300
    x = torch.randn(M, N, device=device, dtype=torch.float16)
    w, b = torch.randn(N, device=device, dtype=torch.float16), torch.randn(N, device=device, dtype=torch.float16)
    y = torch.empty_like(x)
    mean = torch.empty(M, device=device, dtype=torch.float32)
    rstd = torch.empty(M, device=device, dtype=torch.float32)
    return nh.Case(grid=(M,), args=(x, y, w, b, mean, rstd, x.stride(0), N, 1e-5), kwargs={"BLOCK_N": 512})


@nh.reference(layer_norm_bwd_dx)
def layer_norm_bwd_dx_reference(DX, DY, PartialDW, PartialDB, X, W, Mean, Rstd, row_stride, N, GROUP, BLOCK_N):
    xhat = (X.float() - Mean[:, None]) * Rstd[:, None]
    wdy = W.float() * DY.float()
    c1 = (xhat * wdy).sum(dim=-1, keepdim=True) / N
    c2 = wdy.sum(dim=-1, keepdim=True) / N
    dx = (wdy - (xhat * c1 + c2)) * Rstd[:, None]
    groups = torch.arange(X.shape[0], device=X.device) % GROUP
    pdw = PartialDW.index_add(0, groups, DY.float() * xhat)
    pdb = PartialDB.index_add(0, groups, DY.float())
    return {"DX": dx.to(DX.dtype), "PartialDW": pdw, "PartialDB": pdb}


@nh.example(layer_norm_bwd_dx, atol=2e-2, rtol=2e-2)
def bwd_dx_rows(device):
    M, N, group = 19, 300, 4
    x = torch.randn(M, N, device=device, dtype=torch.float16)
    dy = torch.randn(M, N, device=device, dtype=torch.float16)
    w = torch.randn(N, device=device, dtype=torch.float16)
    mean, rstd = _stats(x, 1e-5)
    pdw = torch.zeros(group, N, device=device, dtype=torch.float32)
    pdb = torch.zeros(group, N, device=device, dtype=torch.float32)
    dx = torch.empty_like(x)
    return nh.Case(grid=(M,), args=(dx, dy, pdw, pdb, x, w, mean, rstd, x.stride(0), N),
                   kwargs={"GROUP": group, "BLOCK_N": 512})


@nh.reference(layer_norm_bwd_dwdb)
def layer_norm_bwd_dwdb_reference(PartialDW, PartialDB, DW, DB, N, GROUP, BLOCK_N):
    return {"DW": PartialDW.sum(0).to(DW.dtype), "DB": PartialDB.sum(0).to(DB.dtype)}


@nh.example(layer_norm_bwd_dwdb)
def bwd_dwdb_columns(device):
    group, N = 4, 300
    pdw = torch.randn(group, N, device=device, dtype=torch.float32)
    pdb = torch.randn(group, N, device=device, dtype=torch.float32)
    dw = torch.empty(N, device=device, dtype=torch.float32)
    db = torch.empty(N, device=device, dtype=torch.float32)
    return nh.Case(grid=(newt.cdiv(N, 128),), args=(pdw, pdb, dw, db, N), kwargs={"GROUP": group, "BLOCK_N": 128})


def _check(M, N, dtype) -> None:
    x = (-2.3 + 0.5 * torch.randn(M, N, device=DEVICE, dtype=dtype)).requires_grad_(True)
    w = torch.rand(N, device=DEVICE, dtype=dtype, requires_grad=True)
    b = torch.rand(N, device=DEVICE, dtype=dtype, requires_grad=True)
    dy = 0.1 * torch.randn(M, N, device=DEVICE, dtype=dtype)
    y = layer_norm(x, (N,), w, b)
    y.backward(dy)
    got = [y, x.grad, w.grad, b.grad]
    for t in (x, w, b):
        t.grad = None
    ref = torch.nn.functional.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5)
    ref.backward(dy.float())
    expect = [t.detach().to(dtype) for t in (ref, x.grad, w.grad, b.grad)]
    tol = {torch.float32: (1e-4, 1e-4), torch.float16: (2e-2, 1e-2), torch.bfloat16: (6e-2, 2e-2)}[dtype]
    for name, g, e in zip(("y", "dx", "dw", "db"), got, expect):
        scale = max(1.0, float(e.abs().max()))  # dw/db are sums over M rows
        newt.testing.assert_close(g.detach(), e, atol=tol[0] * scale, rtol=tol[1],
                                  err_msg=f"layer_norm {name} {M}x{N} {dtype}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", action="store_true", help="time newt against torch (GPU only)")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    shapes = [(3, 10), (17, 64)] if INTERPRET else [(1, 7), (1151, 1024), (4096, 4096), (2048, 8192)]
    dtypes = (torch.float32, torch.float16) if INTERPRET else (torch.float32, torch.float16, torch.bfloat16)
    n = 0
    for M, N in shapes:
        for dtype in dtypes:
            _check(M, N, dtype)
            n += 1
    print(f"layer_norm: newt forward and backward matches torch on {n} cases"
          f" ({'interpreter' if INTERPRET else torch.cuda.get_device_name()})")
    if args.bench and DEVICE == "cuda" and not INTERPRET:
        for N in (1024, 4096, 8192):
            bench(N)
    return 0


def bench(N: int) -> None:
    x = torch.randn(8192, N, device="cuda", dtype=torch.float16)
    w = torch.rand(N, device="cuda", dtype=torch.float16)
    b = torch.rand(N, device="cuda", dtype=torch.float16)
    t_newt = newt.testing.do_bench(lambda: layer_norm(x, (N,), w, b))
    t_torch = newt.testing.do_bench(lambda: torch.nn.functional.layer_norm(x, (N,), w, b))
    gbps = lambda ms: 2 * x.numel() * 2 / ms * 1e-6
    print(f"  forward 8192x{N} fp16: newt {gbps(t_newt):7.0f} GB/s   torch {gbps(t_torch):7.0f} GB/s")


if __name__ == "__main__":
    raise SystemExit(main())
