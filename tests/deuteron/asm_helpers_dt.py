"""Kernels of tests/deuteron/test_dt_inline_asm.py: Helion's inline-asm helpers (examples/blackwell_attention.py
``_mul_f32x2`` / ``_fma_f32x2`` and examples/nvfp4_gemv.py ``_e4m3_byte_to_f32``) ported to ``dt.``."""

import torch

import deuteron as dt


def _mul_f32x2(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Vectorized F32 PTX MUL"""
    return dt.inline_asm_elementwise(
        """
            {
                .reg .b64 ra, rb, rc;
                mov.b64 ra, { $2, $3 };
                mov.b64 rb, { $4, $5 };
                mul.f32x2 rc, ra, rb;
                mov.b64 { $0, $1 }, rc;
            }
            """,
        "=r,=r,r,r,r,r",
        [a, b],
        dtype=torch.float32,
        is_pure=True,
        pack=2,
    )


def _fma_f32x2(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Vectorized F32 PTX FMA, as Helion wrote it: three arguments but the constraints of two (Helion's example
    never calls it: VECT_MUL = 1)."""
    return dt.inline_asm_elementwise(
        """
            {
                .reg .b64 ra, rb, rc;
                mov.b64 ra, { $2, $3 };
                mov.b64 rb, { $4, $5 };
                mul.f32x2 rc, ra, rb;
                mov.b64 { $0, $1 }, rc;
            }
            """,
        "=r,=r,r,r,r,r",
        [a, b, c],
        dtype=torch.float32,
        is_pure=True,
        pack=2,
    )


def _fma_f32x2_fixed(a, b, c):
    """The FMA the helper's name promises: fma.rn.f32x2 on three packed pairs."""
    return dt.inline_asm_elementwise(
        """
            {
                .reg .b64 ra, rb, rc, rd;
                mov.b64 ra, { $2, $3 };
                mov.b64 rb, { $4, $5 };
                mov.b64 rc, { $6, $7 };
                fma.rn.f32x2 rd, ra, rb, rc;
                mov.b64 { $0, $1 }, rd;
            }
            """,
        "=r,=r,r,r,r,r,r,r",
        [a, b, c],
        dtype=torch.float32,
        is_pure=True,
        pack=2,
    )


def _e4m3_byte_to_f32(scale_byte):
    """Decode one E4M3 scale byte to fp32 (Triton inline PTX)."""
    return dt.inline_asm_elementwise(
        """
        {
          .reg .b16 sc, scale_lo, scale_hi;
          .reg .b32 scale_h2;
          mov.b32 {sc, _}, $1;
          cvt.rn.f16x2.e4m3x2 scale_h2, sc;
          mov.b32 {scale_lo, scale_hi}, scale_h2;
          cvt.f32.f16 $0, scale_lo;
        }
        """,
        "=f,r",
        [scale_byte],
        dtype=torch.float32,
        is_pure=True,
        pack=1,
    )


@dt.kernel(config=dt.Config(block_sizes=[16, 32]))
def scale_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = _mul_f32x2(x[tm, tn], y[tm, None]) + 1.0
    return out


@dt.kernel(config=dt.Config(block_sizes=[64]))
def fma_as_helion_wrote_it(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    for t in dt.tile(a.size(0)):
        out[t] = _fma_f32x2(a[t], b[t], c[t])
    return out


@dt.kernel(config=dt.Config(block_sizes=[64]))
def fma_fixed(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    for t in dt.tile(a.size(0)):
        out[t] = _fma_f32x2_fixed(a[t], b[t], c[t])
    return out


@dt.kernel(config=dt.Config(block_sizes=[128]))
def decode_scales(s: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(w)
    for t in dt.tile(s.size(0)):
        out[t] = w[t] * _e4m3_byte_to_f32(s[t])
    return out


@dt.kernel(config=dt.Config(block_sizes=[64]))
def sign_and_abs(x: torch.Tensor) -> tuple:
    a = torch.empty_like(x)
    b = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    for t in dt.tile(x.size(0)):
        mag, neg = dt.inline_asm_elementwise(
            "{ .reg .pred p; setp.lt.f32 p, $2, 0f00000000; selp.b32 $1, 1, 0, p; abs.f32 $0, $2; }",
            "=f,=r,f", [x[t]], (torch.float32, torch.int32), True, 1)
        a[t] = mag
        b[t] = neg
    return a, b


@dt.kernel(config=dt.Config(block_sizes=[64]))
def asm_not_constant(x: torch.Tensor, k: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = dt.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x[t]], torch.float32, True, k)
    return out


@dt.kernel(config=dt.Config(block_sizes=[64]))
def asm_outside_subset(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = dt.inline_asm_elementwise("brev.b32 $0, $1;", "=r,r", [x[t]], torch.int32, True, 1)
    return out
