"""bench.py's matmul on sm_90a (issue 24), offline: the K loop of the 128x256x64 8-warp 3-stage tile (and
128x128x64 at 4 warps) by default and under the pipeline flags. Default: the proxy fence, the barrier, the
copies, then the HGMMAs. ``NEWT_CPASYNC_FENCE=0 NEWT_PIPE_ISSUE=late``: Triton 3.6's loop — the barrier, the
HGMMAs, the wait for the previous iteration's, then the copies; no fence, no more instructions, no spill.
On the GPU (``-m gpu``) the flagged kernels against a float64 product, aligned and with K = 8m + 1 (masked
K loop, nothing divisible by 16)."""

from __future__ import annotations

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hopper_kernels import ALL, ON, count, first, last, loops, matmul, sass_text

CFGS = [(128, 256, 64, 3, 8), (128, 128, 64, 4, 4)]


def _loop(ck) -> list[str]:
    ls = loops(sass_text(ck), min_instructions=32)
    assert len(ls) == 1, [len(x) for x in ls]
    return ls[0]


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
@pytest.mark.parametrize("cfg", CFGS, ids=lambda c: "x".join(map(str, c)))
def test_default_loop_unchanged(cfg, dt, monkeypatch):
    body = _loop(matmul(monkeypatch, {}, cfg, dt))
    assert count(body, "MEMBAR.ALL.CTA") == 1 and count(body, "FENCE.VIEW.ASYNC.S") == 1
    assert first(body, "BAR.SYNC") < first(body, "LDGSTS") < first(body, "HGMMA")


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
@pytest.mark.parametrize("cfg", CFGS, ids=lambda c: "x".join(map(str, c)))
def test_flags_give_tritons_loop_order(cfg, dt, monkeypatch):
    dflt = matmul(monkeypatch, {}, cfg, dt)
    ck = matmul(monkeypatch, ON, cfg, dt)
    body, b0 = _loop(ck), _loop(dflt)
    assert ck.metadata.n_spills == 0
    assert count(body, "MEMBAR") == 0 and count(body, "FENCE") == 0
    # per warpgroup: its 64-row blocks x the k steps of 16
    per_wg = cfg[0] // (64 * (cfg[4] // 4)) * cfg[2] // 16
    assert count(body, "BAR.SYNC") == 1 and count(body, "HGMMA") == count(b0, "HGMMA") == per_wg
    # the barrier, every HGMMA, the wait for the previous iteration's group (depth 1), then every copy
    assert first(body, "BAR.SYNC") < first(body, "HGMMA")
    wait = first(body, "WARPGROUP.DEPBAR.LE")
    assert "gsb0, 0x1" in body[wait] and last(body, "HGMMA") < wait < first(body, "LDGSTS")
    assert count(body, "LDGSTS") == count(b0, "LDGSTS")
    assert len(body) <= len(b0)


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
def test_flags_masked_k_no_spill(dt, monkeypatch):
    """The unaligned masked-K tile (nothing divisible by 16) keeps HGMMA and 0 spill under the flags."""
    ck = matmul(monkeypatch, ON, (128, 128, 64, 3, 8), dt, aligned=False)
    t = sass_text(ck)
    assert ck.metadata.n_spills == 0 and "HGMMA" in t


@pytest.mark.gpu
@pytest.mark.parametrize("env", [{"NEWT_CPASYNC_FENCE": "0"}, {"NEWT_PIPE_ISSUE": "late"},
                                 {"NEWT_CONVERT_ADDR": "split"}, ALL],
                         ids=["nofence", "late", "split", "all"])
@pytest.mark.parametrize("dt", ["fp16", "bf16"])
@pytest.mark.parametrize("cfg", CFGS + [(256, 128, 64, 3, 8), (64, 64, 32, 5, 2)], ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "maskedK"])
def test_matmul_flags_on_the_gpu(cfg, dt, env, aligned, monkeypatch):
    """Against a float64 product; without the proxy fence, 20 runs agree bit for bit; with every flag the
    result is bit for bit the default kernel's."""
    import torch
    ck = matmul(monkeypatch, env, cfg, dt, aligned=aligned)
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dt]
    M, N, K = (512, 768, 1024) if aligned else (512, 768, 1025)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    grid = (-(-M // cfg[0]) * -(-N // cfg[1]),)

    def run(kernel):
        c = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
        kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0))
        torch.cuda.synchronize()
        return c
    c = run(ck)
    ref = a.double() @ b.double()
    assert not c.isnan().any()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err < (1e-2 if dt == "bf16" else 3e-3), err
    if env.get("NEWT_CPASYNC_FENCE") == "0":
        assert all(torch.equal(run(ck), c) for _ in range(20))
    if env == ALL:
        assert torch.equal(run(matmul(monkeypatch, {}, cfg, dt, aligned=aligned)), c)


def _env(src: str, lane: int, warp: int) -> dict:
    env = {"lane_id": lane, "warp_id": warp}
    for name, expr in re.findall(r"const int (tf\d+) = ([^;]+);", src):
        env[name] = eval(expr, {}, dict(env))  # (C integer expressions of the generated code)
    return env


def _conversion_addresses(src: str, split: bool, nw: int) -> dict:
    """(side, warp, lane, register) -> element index in the conversion buffer, for the epilogue's store
    (accumulator layout) and load (store layout) sides, evaluated from the generated C++."""
    if split:
        accs = []
        for m in re.finditer(r"for \(int i = 0; i < (\d+); i \+= (\d+)\) [^\n]*?\(cv\d+ \+ (ta\d+) \+ \(", src):
            depth, j = 1, m.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(src[j], 0)
                j += 1
            accs.append((m.group(1), m.group(2), m.group(3), src[m.end() - 1:j]))
        bases = dict(re.findall(r"const int (ta\d+) = ([^;]+);", src))
    else:
        accs = re.findall(r"for \(int i = 0; i < (\d+); i \+= (\d+)\) \{ const int f = ([^;]+); (?:const uint4 w = )?"
                          r"\*reinterpret_cast<(?:const )?\w+\*>\(cv\d+ \+ (f \+ \(f >> \d+\) \* \d+)\)", src)
    assert len(accs) == 2, accs
    out = {}
    for side, acc in enumerate(accs):
        n, step = int(acc[0]), int(acc[1])
        for w in range(nw):
            for lane in range(32):
                env = _env(src, lane, w)
                for i in range(0, n, step):
                    if split:
                        a = eval(bases[acc[2]], {}, env) + eval(acc[3], {}, {**env, "i": i})
                    else:
                        f = eval(acc[2], {}, {**env, "i": i})
                        a = eval(acc[3], {}, {"f": f})
                    out[(side, w, lane, i)] = a
    return out


@pytest.mark.parametrize("cfg", CFGS + [(256, 128, 64, 3, 8), (64, 64, 32, 5, 2)], ids=lambda c: "x".join(map(str, c)))
def test_split_conversion_addresses(cfg, monkeypatch):
    """``NEWT_CONVERT_ADDR=split``: the epilogue's conversion addresses as the thread's base plus a constant
    per register: the same element index for every warp, lane and register as the per-access form, and
    fewer SASS instructions after the K loop (128x256x64 w8: 603 -> 296 with NVRTC 13.5)."""
    plain = matmul(monkeypatch, {}, cfg)
    split = matmul(monkeypatch, {"NEWT_CONVERT_ADDR": "split"}, cfg)
    assert "conversion's addresses" in split.asm["cuda"] and "conversion's addresses" not in plain.asm["cuda"]
    want = _conversion_addresses(plain.asm["cuda"], False, cfg[4])
    got = _conversion_addresses(split.asm["cuda"], True, cfg[4])
    assert got == want
    assert split.metadata.n_spills == 0

    def after_loop(ck):
        text = sass_text(ck)
        ins = re.findall(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text, re.M)
        end = max(int(a, 16) for a, t in ins if re.search(r"\bBRA\b.*?0x([0-9a-f]+)", t)
                  and int(re.search(r"0x([0-9a-f]+)", t.split("BRA")[1]).group(1), 16) < int(a, 16))
        return sum(1 for a, t in ins if int(a, 16) > end and t != "NOP")
    assert after_loop(split) < after_loop(plain)


def test_flags_are_in_the_cache_key(monkeypatch):
    """Each flag changes the runtime's cache key; with all unset the key is the one of earlier builds."""
    from newt.runtime.compiler import cache_key

    def key(env):
        for k in ("NEWT_CPASYNC_FENCE", "NEWT_PIPE_ISSUE", "NEWT_CONVERT_ADDR"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        return cache_key(None, {"a": "*fp16"}, {"B": 64}, {}, "sm_90a", 8, 3, False, "fingerprint", None)
    base = key({})
    keys = {key({"NEWT_CPASYNC_FENCE": "0"}), key({"NEWT_PIPE_ISSUE": "late"}), key({"NEWT_CONVERT_ADDR": "split"}),
            key(ON), base}
    assert len(keys) == 5
    monkeypatch.setenv("NEWT_STMATRIX", "")
    assert key({}) == base
