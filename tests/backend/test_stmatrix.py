"""The stmatrix epilogue (issue 24, ``NEWT_STMATRIX=1``, sm_90a, off by default until a GPU run): the store
side of the accumulator's conversion through shared memory as ``stmatrix.m8n8.x4`` (one instruction a
warp for four 8x8 matrices of 16-bit values) instead of one 32-bit store per register pair.  Checked
offline: the emitted addresses, evaluated for every warp and lane under stmatrix's definition (lane
8j + r gives row r of matrix j; thread l's word j lands in row l / 4 of matrix j at column 2 (l % 4)),
put every element where the ordinary stores put it; the SASS has ``STSM`` and no ``STS``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import newt

ROOT = Path(__file__).resolve().parents[2]


def _compile(monkeypatch, stm: bool, cfg, dt="fp16"):
    if stm:
        monkeypatch.setenv("NEWT_STMATRIX", "1")
    else:
        monkeypatch.delenv("NEWT_STMATRIX", raising=False)
    monkeypatch.delenv("NEWT_DOT_LOWERING", raising=False)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench
        from common import instantiate
        m = instantiate(bench.TEMPLATE, "newt", "stm_epilogue_test")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    k = m._matmul_tile
    while hasattr(k, "fn") and not hasattr(k, "constexpr_names"):
        k = k.fn
    bm, bn, bk, s, w = cfg
    sig = {"a_ptr": f"*{dt}:16", "b_ptr": f"*{dt}:16", "c_ptr": f"*{dt}:16"}
    sig.update({n: "i32:16" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
    return newt.compile(k, signature=sig, constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8,
                                                      "stride_ak": 1, "stride_bn": 1, "stride_cn": 1},
                        target="sm_90a", num_warps=w, num_stages=s, cache=False)


def _thread_env(src: str, lane: int, warp: int) -> dict:
    env = {"lane_id": lane, "warp_id": warp}
    for name, expr in re.findall(r"const int (tf\d+) = ([^;]+);", src):
        env[name] = eval(expr, {}, dict(env))  # (C integer expressions of the generated code)
    return env


def _ordinary_offsets(src: str, nw: int) -> dict:
    """(warp, lane, register) -> element offset in the conversion buffer, from the 32-bit stores."""
    m = re.search(r"for \(int i = 0; i < (\d+); i \+= 2\) \{ const int f = ([^;]+); \*reinterpret_cast<unsigned\*>"
                  r"\(cv\d+ \+ f \+ \(f >> (\d+)\) \* (\d+)\)", src)
    assert m, "no 32-bit conversion stores"
    n, fe, sh, pad = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
    out = {}
    for w in range(nw):
        for lane in range(32):
            env = _thread_env(src, lane, w)
            for i in range(0, n, 2):
                f = eval(fe, {}, dict(env, i=i))
                a = f + (f >> sh) * pad
                out[(w, lane, i)], out[(w, lane, i + 1)] = a, a + 1
    return out


def _stmatrix_offsets(src: str, nw: int) -> dict:
    m = re.search(r"const int (stm_j\d+) = lane_id >> 3, (stm_r\d+) = \(lane_id & 7\) << 2;", src)
    assert m, "no stmatrix"
    jn, rn = m.groups()
    m = re.search(r"for \(int i = 0; i < (\d+); i \+= 8\) \{ const int f = ([^;]+); stmatrix_x4\(smem_u32\(cv\d+ \+ "
                  r"f \+ \(f >> (\d+)\) \* (\d+)\)", src)
    assert m
    n, fe, sh, pad = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
    out = {}
    for w in range(nw):
        for i in range(0, n, 8):
            rows = []
            for lane in range(32):  # the address each lane gives
                env = dict(_thread_env(src, lane, w), i=i)
                env[jn], env[rn] = lane >> 3, (lane & 7) << 2
                f = eval(fe, {}, env)
                rows.append(f + (f >> sh) * pad)
            for lane in range(32):  # where each thread's four words land
                for j in range(4):
                    a = rows[8 * j + lane // 4] + 2 * (lane % 4)
                    out[(w, lane, i + 2 * j)], out[(w, lane, i + 2 * j + 1)] = a, a + 1
    return out


CFGS = [(128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (64, 64, 32, 5, 2)]


@pytest.mark.parametrize("cfg", CFGS, ids=lambda c: "x".join(map(str, c)))
def test_stmatrix_puts_every_element_where_the_stores_did(cfg, monkeypatch):
    plain = _compile(monkeypatch, False, cfg).asm["cuda"]
    stm = _compile(monkeypatch, True, cfg).asm["cuda"]
    assert "stmatrix_x4(" not in plain
    want, got = _ordinary_offsets(plain, cfg[4]), _stmatrix_offsets(stm, cfg[4])
    assert got == want
    # 16-byte aligned rows, as stmatrix requires
    assert all(a % 8 == 0 for (w, lane, r), a in got.items() if lane % 4 == 0 and r % 2 == 0)


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
@pytest.mark.parametrize("cfg", CFGS[:3], ids=lambda c: "x".join(map(str, c)))
def test_stmatrix_sass(cfg, dt, monkeypatch):
    """STSM instead of STS in the epilogue, no spill, fewer instructions (128x256x64: 1264 -> 1032 with
    NVRTC 13.5)."""
    from newt.backend.cuda import sass
    plain, stm = _compile(monkeypatch, False, cfg, dt), _compile(monkeypatch, True, cfg, dt)
    try:
        tp, ts = sass(plain.asm["cubin"]), sass(stm.asm["cubin"])
    except RuntimeError as e:
        pytest.skip(f"cuobjdump unavailable: {e}")
    assert stm.metadata.n_spills == 0
    assert re.search(r"\bSTSM\.16\.M88\.4\b", ts) and not re.search(r"\bSTS\b|\bSTS\.", ts)
    assert "STSM" not in tp
    count = lambda t: len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", t, re.M))
    assert count(ts) < count(tp)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CFGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("dt", ["fp16", "bf16"])
def test_stmatrix_matmul_on_the_gpu(cfg, dt, monkeypatch):
    import torch
    ck = _compile(monkeypatch, True, cfg, dt)
    assert "stmatrix_x4(" in ck.asm["cuda"]
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dt]
    M, N, K = 512, 768, 320
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
    bm, bn = cfg[0], cfg[1]
    grid = (-(-M // bm) * -(-N // bn),)
    ck[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0))
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err < (1e-2 if dt == "bf16" else 3e-3), err
