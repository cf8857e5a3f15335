"""bench.py's attention forward on sm_90a (issue 24), offline: the d=128 inner loop's SASS (P fed to the P·V
HGMMA from registers, the HGMMA shapes, MUFU.EX2 per element, one barrier), spills against Triton 3.6's, and
the two pipeline flags (``NEWT_CPASYNC_FENCE=0``: no proxy fence per iteration; ``NEWT_PIPE_ISSUE=late``: QK's
HGMMA right after the barrier, the K/V copies after P·V) changing exactly that; on the GPU (``-m gpu``) the
flagged kernels against torch's SDPA."""

from __future__ import annotations

import math
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hopper_kernels import ALL, ON, attention, count, first, last, loops, sass_text

#: Triton 3.6 (its ptxas), same source and signature, sm_90a, 2026-12-06: spill bytes per
#: (head dim, BLOCK_M, BLOCK_N, warps, STAGE) — the bar "no more spill than Triton's" is measured against
TRITON_SPILLS = {(64, 128, 64, 4, 1): 0, (64, 128, 64, 8, 1): 0, (64, 64, 64, 4, 1): 0,
                 (128, 128, 64, 4, 1): 528, (128, 128, 64, 4, 3): 2424, (128, 128, 64, 8, 1): 0,
                 (128, 128, 64, 8, 3): 0, (128, 64, 64, 4, 1): 0, (128, 64, 64, 4, 3): 0}


def _main_loop(ck) -> list[str]:
    ls = loops(sass_text(ck))
    assert ls, "no pipelined loop in the SASS"
    return max(ls, key=len)


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
@pytest.mark.parametrize("env", [{}, ON], ids=["default", "flags"])
def test_d128_loop_feeds_pv_from_registers(env, dt, monkeypatch):
    """One QK (8 x HGMMA.64x64x16 from shared memory) and one P·V (4 x HGMMA.64x128x16 whose A is registers:
    no shared-memory round trip for P) per iteration, 32 + 2 MUFU.EX2 (p and alpha), one barrier, no spill."""
    ck = attention(monkeypatch, env, dt=dt)
    assert ck.metadata.n_spills == 0
    body = _main_loop(ck)
    qk = [x for x in body if x.startswith("HGMMA.64x64x16")]
    pv = [x for x in body if x.startswith("HGMMA.64x128x16")]
    assert len(qk) == 8 and all(re.match(r"HGMMA\.64x64x16\.F32\S* R\d+, gdesc", x) for x in qk)
    assert len(pv) == 4 and all(re.match(r"HGMMA\.64x128x16\.F32\S* R\d+, R\d+, gdesc", x) for x in pv)
    assert count(body, "MUFU.EX2") == 34
    assert count(body, "BAR.SYNC") == 1
    assert count(body, "STS") == 0 and count(body, "LDS") <= 8  # (LDS: ptxas' `@!PT LDS RZ` placeholders)
    assert count(body, "STL") == count(body, "LDL") == 0


@pytest.mark.parametrize("key", sorted(TRITON_SPILLS), ids=lambda k: "d{}_{}x{}_w{}_st{}".format(*k))
def test_no_more_spill_than_triton(key, monkeypatch):
    d, bm, bn, w, stage = key
    for env in ({}, ON):
        ck = attention(monkeypatch, env, d=d, stage=stage, cfg=(bm, bn, w, 3))
        assert ck.metadata.n_spills <= TRITON_SPILLS[key], (env, ck.metadata.n_spills)


def test_cpasync_fence_flag(monkeypatch):
    """Default: ``fence.proxy.async`` (MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S) at the loop top; NEWT_CPASYNC_FENCE=0:
    none in the loop (Q's staging, plain stores read by wgmma, keeps its fence before the loop)."""
    dflt = attention(monkeypatch, {})
    off = attention(monkeypatch, {"NEWT_CPASYNC_FENCE": "0"})
    b0, b1 = _main_loop(dflt), _main_loop(off)
    assert count(b0, "MEMBAR.ALL.CTA") == 1 and count(b0, "FENCE.VIEW.ASYNC.S") == 1
    assert count(b1, "MEMBAR") == 0 and count(b1, "FENCE") == 0
    assert "fence_proxy_async();  // plain stores" in off.asm["cuda"]
    assert "NEWT_CPASYNC_FENCE=0" in off.asm["cuda"] and "NEWT_CPASYNC_FENCE=0" not in dflt.asm["cuda"]
    assert len(b1) < len(b0)


@pytest.mark.parametrize("stage", [1, 3])
def test_late_issue_flag(stage, monkeypatch):
    """Default: the K/V copies (LDGSTS) between the barrier and QK's first HGMMA; NEWT_PIPE_ISSUE=late: QK's
    HGMMA is the first tensor-core work after the barrier and every copy follows P·V's last HGMMA."""
    dflt, late = attention(monkeypatch, {}, stage=stage), attention(monkeypatch, {"NEWT_PIPE_ISSUE": "late"},
                                                                      stage=stage)
    for body in loops(sass_text(dflt)):
        assert first(body, "LDGSTS") < first(body, "HGMMA")
    bodies = loops(sass_text(late))
    assert len(bodies) == (2 if stage == 3 else 1)
    for body in bodies:
        assert first(body, "BAR.SYNC") < first(body, "HGMMA") < first(body, "LDGSTS")
        assert last(body, "HGMMA") < first(body, "LDGSTS")
        assert count(body, "LDGSTS") == 8 and count(body, "BAR.SYNC") == 1


@pytest.mark.gpu
@pytest.mark.parametrize("env", [{}, {"NEWT_CPASYNC_FENCE": "0"}, {"NEWT_PIPE_ISSUE": "late"},
                                 {"NEWT_CONVERT_ADDR": "split"}, ALL],
                         ids=["default", "nofence", "late", "split", "all"])
@pytest.mark.parametrize("dt", ["fp16", "bf16"])
@pytest.mark.parametrize("d,stage,cfg", [(128, 1, (128, 64, 8, 3)), (128, 3, (128, 64, 8, 3)),
                                         (64, 1, (128, 64, 4, 3)), (64, 3, (64, 64, 4, 3)),
                                         (128, 3, (64, 64, 4, 3))])
def test_attention_flags_on_the_gpu(d, stage, cfg, dt, env, monkeypatch):
    """Against SDPA in float64; without the proxy fence, 20 runs on the same inputs agree bit for bit (a
    missing ordering shows as a moving result), and with every flag the output is bit for bit the default's
    (the flags move no arithmetic)."""
    import torch
    import torch.nn.functional as F
    ck = attention(monkeypatch, env, d=d, stage=stage, cfg=cfg, dt=dt)
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dt]
    Z, H, N = 2, 3, 1024
    q, k, v = (torch.randn(Z, H, N, d, device="cuda", dtype=tdt) for _ in range(3))

    def run(kernel):
        o = torch.full_like(q, float("nan"))
        kernel[(N // cfg[0], Z * H)](q, k, v, 1.0 / math.sqrt(d), o, q.stride(2), k.stride(2), v.stride(2),
                                     o.stride(2), N)
        torch.cuda.synchronize()
        return o
    o = run(ck)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=stage == 3)
    assert not o.isnan().any()
    err = (o.double() - ref).abs().max().item()
    assert err < (3e-2 if dt == "bf16" else 4e-3), err
    if env.get("NEWT_CPASYNC_FENCE") == "0":
        assert all(torch.equal(run(ck), o) for _ in range(20))
    if env == ALL:
        assert torch.equal(run(attention(monkeypatch, {}, d=d, stage=stage, cfg=cfg, dt=dt)), o)
