"""Persistent matmul (issue 24): bench.py's ``_matmul_persistent`` -- Triton's persistent tutorial form, a
tile loop ``nl.range(start, tiles, NUM_SMS, flatten=True)`` over a grid of at most NUM_SMS programs with
the masked K loop inside -- is right on the interpreter and compiles for sm_90a to HGMMA with the inner
loop software-pipelined and no spill; its autotune configs carry NUM_SMS."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

import newt

ROOT = Path(__file__).resolve().parents[2]


def _bench(impl="newt"):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench
        from common import instantiate
        return bench, instantiate(bench.TEMPLATE, impl, "persistent_test")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _jit(k):
    while hasattr(k, "fn") and not hasattr(k, "constexpr_names"):
        k = k.fn
    return k


@pytest.mark.parametrize("shape,sms", [((40, 56, 36), 3), ((64, 64, 64), 1), ((33, 70, 50), 5), ((16, 16, 16), 8)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_persistent_matmul_on_the_interpreter(shape, sms, dtype, monkeypatch):
    """Fewer programs than tiles (each program takes several, the last ones fewer), more programs than
    tiles (the extra ones do nothing), unaligned M/N/K: every tile of C written once, right."""
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    _, m = _bench()
    M, N, K = shape
    torch.manual_seed(0)
    a = torch.randn(M, K).to(dtype)
    b = torch.randn(K, N).to(dtype)
    c = torch.full((M, N), float("nan"), dtype=dtype)
    bm = bn = bk = 16
    tiles = -(-M // bm) * -(-N // bn)
    grid = (min(sms, tiles),)
    _jit(m._matmul_persistent)[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                      c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=2,
                                      NUM_SMS=grid[0])
    ref = a.float() @ b.float()
    assert not torch.isnan(c.float()).any()
    torch.testing.assert_close(c.float(), ref, rtol=2e-2, atol=5e-2 if dtype == torch.bfloat16 else 2e-2)


def test_persistent_configs_search_num_sms():
    _, m = _bench()
    cfgs = _jit_configs(m.matmul_kernel_persistent)
    sms = {c.kwargs["NUM_SMS"] for c in cfgs}
    n = m.num_sms()  # the device's SM count (132 without a GPU)
    assert sms == {n, 2 * n}
    assert all({"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"} <= set(c.kwargs) for c in cfgs)


def _jit_configs(k):
    return list(k.configs)


SIG = {"a_ptr": "*{dt}:16", "b_ptr": "*{dt}:16", "c_ptr": "*{dt}:16",
       **{n: "i32:16" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")}}


@pytest.mark.parametrize("cfg", [(128, 256, 64, 3, 8), (128, 128, 64, 3, 8), (128, 128, 32, 4, 4)],
                         ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("dt", ["fp16", "bf16"])
def test_persistent_matmul_is_hgmma_on_sm90a(cfg, dt, monkeypatch):
    monkeypatch.delenv("NEWT_DOT_LOWERING", raising=False)
    _, m = _bench()
    bm, bn, bk, s, w = cfg
    sig = {k: v.format(dt=dt) for k, v in SIG.items()}
    ck = newt.compile(_jit(m._matmul_persistent), signature=sig,
                      constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "NUM_SMS": 132,
                                  "stride_ak": 1, "stride_bn": 1, "stride_cn": 1},
                      target="sm_90a", num_warps=w, num_stages=s, cache=False)
    src = ck.asm["cuda"]
    assert src.count(f"software pipeline, {s} stages") == 1  # the K loop, inside the tile loop
    assert re.search(r"\+= 132\) \{", src)  # the tile loop's step
    assert ck.metadata.n_spills == 0, ck.metadata
    from newt.backend.cuda import sass
    try:
        text = sass(ck.asm["cubin"])
    except RuntimeError as e:
        pytest.skip(f"cuobjdump unavailable: {e}")
    assert set(re.findall(r"\b([HQI]GMMA|HMMA)\.", text)) == {"HGMMA"}
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in text  # the accumulation stays in flight in the K loop


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1000, 1200, 520), (2048, 2048, 2048), (300, 520, 200)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_persistent_matmul_on_the_gpu(shape, dtype):
    """bench.py's persistent matmul, autotuned over its configs (both NUM_SMS values), against torch."""
    _, m = _bench()
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    bench, _ = _bench()
    bench.run_matmul_persistent(m, a, b, c)
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err < (1e-2 if dtype == torch.bfloat16 else 3e-3), err


def test_bench_cells_and_report():
    """The variants are cells when named (--only) and reported in their own tables and summary lines."""
    bench, _ = _bench()
    sel = bench.cells(False, {"matmul_persistent", "matmul_masked", "attention"})
    kinds = [c[0] for c in sel]
    assert kinds.count("matmul_persistent") == 6 and kinds.count("matmul_masked") == 4
    assert kinds.count("attention") == 8 and "matmul" not in kinds
    assert all(c[1][2] % 16 for c in sel if c[0] == "matmul_masked")
    assert not any(c[0].startswith("matmul_") for c in bench.cells(False, None))
    results = []
    for kind, shape, dt in [next(c for c in sel if c[0] == k) for k in ("matmul_persistent", "matmul_masked")]:
        results.append({"kind": kind, "shape": list(shape), "dtype": dt,
                        "impls": {"newt": {"ms": 1.0, "TFLOPs": 100.0, "ok": True, "error": 1e-4},
                                  "triton": {"ms": 1.1}, "torch": {"ms": 0.9}}})
    summary = bench.score(results, {})
    assert abs(summary["persistent_geomean_vs_triton"] - 1.1) < 1e-9
    assert abs(summary["masked_k_geomean_vs_triton"] - 1.1) < 1e-9
    md = bench.render_md({"info": {}, "summary": summary, "results": results})
    assert "## Persistent matmul" in md and "## Masked-K matmul" in md and "Persistent matmul (a tile loop" in md
