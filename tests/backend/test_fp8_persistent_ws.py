"""The fp8 persistent matmul that ``benchmarks/bench_ws.py`` times against cuBLAS (issue 24: fp8 >= 0.90x cuBLAS):
e4m3 A (M x K) and B stored N x K (K-major, as fp8 wgmma reads B), a tile loop over the SMs, the K loop inside.
Offline: with ``NEWT_TMA=1 NEWT_WARP_SPECIALIZE=1`` its 128x256x128, 2-stage, 8-warp tile compiles for sm_90a to
the producer/consumer split (a producer warpgroup issuing TMA copies, consumers on QGMMA) with no spill; the
interpreter's result matches torch.  The GPU timing is bench_ws.py's ``persistent_fp8`` cells."""

from __future__ import annotations

import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


@pytest.fixture
def bench(monkeypatch):
    for k in ("NEWT_WS_PINGPONG", "NEWT_WS_OVERLAP", "NEWT_DOT_LOWERING", "NEWT_TARGET", "NEWT_INTERPRET"):
        monkeypatch.delenv(k, raising=False)
    import bench_ws
    from common import instantiate
    return bench_ws, instantiate


def _descs(M, N, K, cfg):
    from newt.tools.tensor_descriptor import TensorDescriptor
    bm, bn, bk = cfg[:3]
    a = torch.empty(M, K, dtype=torch.float8_e4m3fn)
    bt = torch.empty(N, K, dtype=torch.float8_e4m3fn)
    c = torch.empty(M, N, dtype=torch.float16)
    return [TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(bt, [bn, bk]),
            TensorDescriptor.from_tensor(c, [bm, bn])]


@pytest.mark.parametrize("ws", ["1", "0"])
def test_fp8_persistent_kmajor_splits_on_qgmma_without_spills(bench, ws, monkeypatch, tmp_path):
    bench_ws, instantiate = bench
    monkeypatch.setenv("NEWT_TMA", "1")
    monkeypatch.setenv("NEWT_WARP_SPECIALIZE", ws)
    mod = instantiate(bench_ws.TEMPLATE, "newt", f"fp8p_{ws}")
    cfg = bench_ws.PERSISTENT_FP8_CFG
    bm, bn, bk, stages, warps = cfg
    M = N = K = 4096
    ck = mod.matmul_persistent_kmajor.warmup(*_descs(M, N, K, cfg), M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                            GROUP_M=8, NUM_SMS=132, num_warps=warps, num_stages=stages,
                                            grid=(132,))
    assert ck.n_spills == 0
    assert len(ck.metadata["tensormaps"]) == 3
    assert bool(ck.metadata.get("producer_warps")) == (ws == "1")
    cu = ck.asm["cuda"]
    assert "wgmma.mma_async" in cu and ".e4m3.e4m3" in cu
    assert ("setmaxnreg" in cu) == (ws == "1")


def test_fp8_persistent_kmajor_matches_torch_in_the_interpreter(bench, monkeypatch):
    bench_ws, instantiate = bench
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    mod = instantiate(bench_ws.TEMPLATE, "newt", "fp8p_interp")
    torch.manual_seed(0)
    M, N, K = 192, 128, 256  # 3 x 2 tiles of 64 over 4 programs: two programs take two tiles
    a = torch.randn(M, K).to(torch.float8_e4m3fn)
    bt = torch.randn(N, K).to(torch.float8_e4m3fn)
    c = torch.empty(M, N, dtype=torch.float16)
    mod.persistent_kmajor(a, bt, c, (64, 64, 64, 2, 4), 4)()
    ref = a.float() @ bt.float().T
    assert ((c.float() - ref).norm() / ref.norm()).item() < 2e-3
