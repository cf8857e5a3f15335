"""Autotuned matrix multiplication with a fused epilogue.

Each program computes one BLOCK_M x BLOCK_N tile of ``C = A @ B``, walking
over K in BLOCK_K steps with ``nl.dot`` (tensor cores) and an fp32
accumulator.  Programs are numbered in groups of GROUP_M tile rows so that
neighbouring programs reuse the same tiles of A and B from the L2 cache.
The epilogue is a jit function passed as a constexpr (here a leaky ReLU, or
None): it is inlined into the kernel, so the activation costs no extra pass
over C.  ``@newt.autotune`` picks the tile shape, warps and pipeline depth per
(M, N, K) the first time it sees them.

    python examples/matmul.py [--bench]       # NEWT_PRINT_AUTOTUNING=1 shows the winners

Without a GPU it runs through newt's interpreter on small matrices (the
autotuner then times each config once on the CPU).
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


def configs():
    if INTERPRET:
        return [newt.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}, num_warps=4, num_stages=2),
                newt.Config({"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 4}, num_warps=4, num_stages=2)]
    shapes = [  # BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps
        (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4),
        (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 32, 5, 2), (128, 256, 32, 3, 8),
    ]
    return [newt.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_stages=s, num_warps=w)
            for m, n, k, s, w in shapes]


@newt.jit
def leaky_relu(x):
    return nl.where(x >= 0, x, 0.01 * x)


@newt.autotune(configs=configs(), key=["M", "N", "K"])
@newt.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, BLOCK_K: nl.constexpr, GROUP_M: nl.constexpr,
                  EPILOGUE: nl.constexpr):
    # which tile of C: program ids walk down GROUP_M tile rows before moving right
    pid = nl.program_id(0)
    tiles_m = nl.cdiv(M, BLOCK_M)
    tiles_n = nl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = nl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % rows_in_group
    tile_n = (pid % per_group) // rows_in_group

    rm = tile_m * BLOCK_M + nl.arange(0, BLOCK_M)
    rn = tile_n * BLOCK_N + nl.arange(0, BLOCK_N)
    rk = nl.arange(0, BLOCK_K)
    # rows/columns past the edge read row/column 0 (in bounds); their results are never stored
    a_tile = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :] * stride_ak
    b_tile = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :] * stride_bn

    acc = nl.zeros((BLOCK_M, BLOCK_N), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = nl.load(a_tile, mask=rk[None, :] < k_left, other=0.0)
        b = nl.load(b_tile, mask=rk[:, None] < k_left, other=0.0)
        acc = nl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    if EPILOGUE is not None:
        acc = EPILOGUE(acc)
    c = acc.to(c_ptr.dtype.element_ty)
    c_tile = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    nl.store(c_tile, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor, activation=None) -> torch.Tensor:
    assert a.shape[1] == b.shape[0], "inner dimensions differ"
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda meta: (newt.cdiv(M, meta["BLOCK_M"]) * newt.cdiv(N, meta["BLOCK_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), EPILOGUE=activation)
    return c


@nh.reference(matmul_kernel)
def matmul_reference(a, b, c, M, N, K, *strides, EPILOGUE=None, **config):
    out = a.float() @ b.float()
    if EPILOGUE is leaky_relu:
        out = torch.where(out >= 0, out, 0.01 * out)
    return {"c_ptr": out.to(c.dtype)}


@nh.example(matmul_kernel, atol=2e-2, rtol=2e-2)
def ragged(device):
    """What the editor's Verify and Autotune run: shapes that are no multiple of any block, with and without
    the fused leaky ReLU (the autotuned BLOCK_* and GROUP_M come from the configs)."""
    cases = []
    for epilogue in (None, leaky_relu):
        a = torch.randn(100, 72, device=device, dtype=torch.float16)
        b = torch.randn(72, 90, device=device, dtype=torch.float16)
        c = torch.empty(100, 90, device=device, dtype=torch.float16)
        grid = lambda meta: (newt.cdiv(100, meta["BLOCK_M"]) * newt.cdiv(90, meta["BLOCK_N"]),)
        cases.append(nh.Case(grid=grid, args=(a, b, c, 100, 90, 72, a.stride(0), a.stride(1), b.stride(0),
                                             b.stride(1), c.stride(0), c.stride(1)),
                             kwargs={"EPILOGUE": epilogue}, name="leaky_relu" if epilogue else "plain"))
    return cases


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", action="store_true", help="time newt against torch (GPU only)")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    shapes = [(64, 64, 64), (50, 70, 40)] if INTERPRET else [(512, 512, 512), (1000, 1100, 900), (4096, 4096, 4096)]
    dtypes = (torch.float16,) if INTERPRET else (torch.float16, torch.bfloat16)
    n = 0
    for M, N, K in shapes:
        for dtype in dtypes:
            a = torch.randn(M, K, device=DEVICE, dtype=dtype)
            b = torch.randn(K, N, device=DEVICE, dtype=dtype)
            ref = (a.float() @ b.float())
            scale = K ** 0.5
            tol = dict(atol=2e-2 * scale, rtol=2e-2) if dtype == torch.float16 else dict(atol=5e-2 * scale, rtol=4e-2)
            newt.testing.assert_close(matmul(a, b).float(), ref, err_msg=f"matmul {M}x{N}x{K} {dtype}", **tol)
            lrelu = torch.where(ref >= 0, ref, 0.01 * ref)
            newt.testing.assert_close(matmul(a, b, leaky_relu).float(), lrelu,
                                      err_msg=f"matmul+leaky_relu {M}x{N}x{K} {dtype}", **tol)
            n += 2
    print(f"matmul: newt matches torch on {n} cases"
          f" ({'interpreter' if INTERPRET else torch.cuda.get_device_name()}); "
          f"last best config: {matmul_kernel.best_config}")
    if args.bench and DEVICE == "cuda" and not INTERPRET:
        for size in (1024, 2048, 4096, 8192):
            bench(size)
    return 0


def bench(size: int) -> None:
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    t_newt = newt.testing.do_bench(lambda: matmul(a, b))
    t_torch = newt.testing.do_bench(lambda: a @ b)
    tflops = lambda ms: 2 * size ** 3 / ms * 1e-9
    print(f"  {size}^3 fp16: newt {tflops(t_newt):6.1f} TFLOP/s   torch (cuBLAS) {tflops(t_torch):6.1f} "
          f"TFLOP/s   [{matmul_kernel.best_config}]")


if __name__ == "__main__":
    raise SystemExit(main())
