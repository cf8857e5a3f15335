"""Warp specialization on sm_90a (issue 24, ``newt/backend/cuda/warpspec.py``).

Offline: the protocol's phase arithmetic on a model of mbarriers (every interleaving of producer and
consumer steps, with and without a wgmma left in flight), the generated code keeping that arithmetic, the
SASS of the descriptor matmul and attention (SETMAXNREG both ways, the TMA copies only in the producer's
branch, mbarrier waits and HGMMA in the consumers', the consumers' named barrier, no spill), the knob and
``NEWT_WARP_SPECIALIZE=1``, the launch's extra warpgroup, loops that do not qualify left as they were, and
the interpreter ignoring the knob.  On the GPU (``-m gpu``): matmuls and attention (causal and not, d=64
and 128) against torch, in a subprocess with a timeout so that a deadlock fails instead of hanging."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys

import pytest

import newt
import newt.language as nl
from newt.backend.cuda import warpspec

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@newt.jit
def ws_matmul(a_desc, b_desc, c_desc, K, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr, WS: nl.constexpr):
    pid_m = nl.program_id(0)
    pid_n = nl.program_id(1)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in nl.range(0, nl.cdiv(K, BK), warp_specialize=WS):
        a = a_desc.load([pid_m * BM, k * BK])
        b = b_desc.load([k * BK, pid_n * BN])
        acc = nl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@newt.jit
def ws_attn(desc_q, desc_k, desc_v, desc_o, N_CTX, qk_scale, HEAD_DIM: nl.constexpr, BLOCK_M: nl.constexpr,
            BLOCK_N: nl.constexpr, CAUSAL: nl.constexpr, WS: nl.constexpr):
    # tutorial 06's forward on descriptors, causal in one loop (up to the diagonal block, masked there)
    start_m = nl.program_id(0)
    row0 = nl.program_id(1) * N_CTX
    offs_m = start_m * BLOCK_M + nl.arange(0, BLOCK_M)
    offs_n = nl.arange(0, BLOCK_N)
    q = desc_q.load([row0 + start_m * BLOCK_M, 0])
    m_i = nl.zeros([BLOCK_M], dtype=nl.float32) - float("inf")
    l_i = nl.zeros([BLOCK_M], dtype=nl.float32)
    acc = nl.zeros([BLOCK_M, HEAD_DIM], dtype=nl.float32)
    hi = (start_m + 1) * BLOCK_M if CAUSAL else N_CTX
    for start_n in nl.range(0, hi, BLOCK_N, warp_specialize=WS):
        qk = nl.dot(q, desc_k.load([row0 + start_n, 0]).T) * qk_scale
        if CAUSAL:
            qk = nl.where(offs_m[:, None] >= start_n + offs_n[None, :], qk, -float("inf"))
        m_ij = nl.maximum(m_i, nl.max(qk, 1))
        p = nl.math.exp2(qk - m_ij[:, None])
        alpha = nl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + nl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = nl.dot(p.to(q.dtype), desc_v.load([row0 + start_n, 0]), acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    desc_o.store([row0 + start_m * BLOCK_M, 0], acc.to(desc_o.dtype))


@newt.jit
def ws_persistent(a_desc, b_desc, c_desc, M, N, K, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr,
                  GROUP_M: nl.constexpr, NUM_SMS: nl.constexpr, WS: nl.constexpr):
    # Triton's persistent form: a tile loop over at most NUM_SMS programs, the K loop inside
    start = nl.program_id(0)
    tiles_m = nl.cdiv(M, BM)
    tiles_n = nl.cdiv(N, BN)
    k_tiles = nl.cdiv(K, BK)
    for tile in nl.range(start, tiles_m * tiles_n, NUM_SMS):
        per_group = GROUP_M * tiles_n
        first_m = (tile // per_group) * GROUP_M
        rows = nl.minimum(tiles_m - first_m, GROUP_M)
        tile_m = first_m + (tile % per_group) % rows
        tile_n = (tile % per_group) // rows
        acc = nl.zeros((BM, BN), dtype=nl.float32)
        for k in nl.range(0, k_tiles, warp_specialize=WS):
            acc = nl.dot(a_desc.load([tile_m * BM, k * BK]), b_desc.load([k * BK, tile_n * BN]), acc)
        c_desc.store([tile_m * BM, tile_n * BN], acc.to(c_desc.dtype))


@newt.jit
def ws_store_first(a_desc, b_desc, c_desc, K, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    pid_m = nl.program_id(0)
    pid_n = nl.program_id(1)
    c_desc.store([pid_m * BM, pid_n * BN], nl.zeros((BM, BN), dtype=nl.float16))  # a write before the loop
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in nl.range(0, nl.cdiv(K, BK), warp_specialize=True):
        acc = nl.dot(a_desc.load([pid_m * BM, k * BK]), b_desc.load([k * BK, pid_n * BN]), acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


# ---------------------------------------------------------------------------
# the protocol on a model of mbarriers
# ---------------------------------------------------------------------------

ORDERS = ["p", "c", "pc", "cp", "ppc", "pcc", "ppppc", "cccp", "pcpcc"]


@pytest.mark.parametrize("behind", [False, True], ids=["waits", "in_flight"])
@pytest.mark.parametrize("nb", [2, 3, 4, 5])
def test_protocol_runs_every_interleaving_without_deadlock_or_overwrite(nb, behind):
    """Every iteration count up to 3 rings, every schedule of ``ORDERS``: each iteration reads the data of
    its own iteration, no slot is refilled while a wgmma may read it, nothing deadlocks."""
    for n, order in itertools.product(range(0, 3 * nb + 2), ORDERS):
        trace = warpspec.simulate(n, nb, behind, order)
        assert [t[1] for t in trace if t[0] == "c"] == list(range(n))
        assert [t[2] for t in trace if t[0] == "p"] == [j % nb for j in range(n)]


@pytest.mark.parametrize("behind", [False, True], ids=["waits", "in_flight"])
@pytest.mark.parametrize("nb", [2, 3, 4])
def test_protocol_carries_over_runs_of_the_loop(nb, behind):
    """A tile loop around the loop (the persistent matmul): the ring's slots and phases carry over from one
    run to the next (runs shorter and longer than the ring, and empty ones)."""
    runs = [3, 1, 0, 4, 2, 5, nb, 2 * nb + 1]
    for order in ORDERS:
        trace = warpspec.simulate(runs, nb, behind, order)
        assert [t[1] for t in trace if t[0] == "c"] == list(range(sum(runs)))


def test_the_model_catches_a_wrong_parity_and_an_early_release():
    """The model is not vacuous: a producer waiting for the un-flipped parity deadlocks at once; releasing
    the slot of a wgmma still in flight lets a fast producer overwrite it."""
    with pytest.raises(AssertionError, match="deadlock"):
        warpspec.simulate(5, 3, False, "p", producer_xor=0)
    with pytest.raises(AssertionError, match="refills slot"):
        warpspec.simulate(6, 2, True, "ppc", release_lag=0)
    with pytest.raises(AssertionError, match="deadlock"):  # the in-flight slot not released after the drain
        warpspec.simulate([3] * 8, 3, True, "p", drain_release=False)


# ---------------------------------------------------------------------------
# generated code and SASS (offline)
# ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for k in ("NEWT_WARP_SPECIALIZE", "NEWT_WS_PINGPONG", "NEWT_WS_OVERLAP", "NEWT_DOT_LOWERING", "NEWT_CPASYNC_FENCE",
              "NEWT_PIPE_ISSUE", "NEWT_CONVERT_ADDR", "NEWT_STMATRIX", "NEWT_TARGET"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("NEWT_TMA", "1")


def _descs(shapes, blocks, dt):
    from newt.tools.tensor_descriptor import TensorDescriptor
    return [TensorDescriptor.from_tensor(torch.empty(*s, dtype=dt), list(b)) for s, b in zip(shapes, blocks)]


def compile_mm(cfg=(128, 256, 64, 3, 8), dt=torch.float16, ws=True, M=1024, N=1024, K=1024):
    bm, bn, bk, s, w = cfg
    descs = _descs([(M, K), (K, N), (M, N)], [(bm, bk), (bk, bn), (bm, bn)], dt)
    return newt.jit(ws_matmul.fn).warmup(*descs, K, BM=bm, BN=bn, BK=bk, WS=ws, num_warps=w, num_stages=s,
                            grid=(M // bm, N // bn))


def compile_persistent(cfg=(128, 128, 64, 3, 8), dt=torch.float16, ws=True, M=2048, N=2048, K=1024, sms=132):
    bm, bn, bk, s, w = cfg
    descs = _descs([(M, K), (K, N), (M, N)], [(bm, bk), (bk, bn), (bm, bn)], dt)
    return newt.jit(ws_persistent.fn).warmup(*descs, M, N, K, BM=bm, BN=bn, BK=bk, GROUP_M=8, NUM_SMS=sms, WS=ws,
                                             num_warps=w, num_stages=s, grid=(sms,))


def compile_attn(d=128, cfg=(128, 64, 8, 3), causal=False, ws=True, dt=torch.float16, H=2, N=1024):
    bm, bn, w, s = cfg
    descs = _descs([(H * N, d)] * 4, [(bm, d), (bn, d), (bn, d), (bm, d)], dt)
    return newt.jit(ws_attn.fn).warmup(*descs, N, 0.125, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, WS=ws,
                          num_warps=w, num_stages=s, grid=(N // bm, H))


def _sass(ck) -> list[tuple[int, str]]:
    from newt.backend.cuda import sass
    try:
        text = sass(ck.asm["cubin"])
    except RuntimeError as e:
        pytest.skip(f"cuobjdump unavailable: {e}")
    return [(int(a, 16), t) for a, t in re.findall(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text, re.M)]


def _reach(ins, start: int) -> set[int]:
    """Addresses of the SASS reachable from ``start`` (branches, predicated or not; EXIT ends a path)."""
    addrs = [a for a, _ in ins]
    text = dict(ins)
    nxt = {a: b for a, b in zip(addrs, addrs[1:])}
    seen: set[int] = set()
    todo = [start]
    while todo:
        a = todo.pop()
        if a in seen or a not in text:
            continue
        seen.add(a)
        t = text[a]
        pred = t.startswith("@")
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", t)
        if m:
            todo.append(int(m.group(1), 16))
        if re.search(r"\b(EXIT|RET)\b", t) and not pred:
            continue
        if m and not pred:
            continue
        if a in nxt:
            todo.append(nxt[a])
    return seen


def _check_split(ck, nw: int):
    """The SASS shape of a warp-specialized kernel (see the module doc), by reachability from the producer's
    ``setmaxnreg.dec`` (the compiler may place either branch first)."""
    ins = _sass(ck)

    def at(pat, within=None):
        return [a for a, t in ins if (within is None or a in within) and re.search(pat, t)]
    dealloc = at(r"USETMAXREG\.DEALLOC\.CTAPOOL 0x28\b")
    assert len(dealloc) == 1, "the producer gives back its registers (setmaxnreg.dec 40)"
    _, creg, entry = warpspec.register_split(nw)
    alloc = at(rf"USETMAXREG\.TRY_ALLOC\.CTAPOOL \w+, {creg:#x}\b")
    assert len(alloc) == (1 if creg > entry else 0)
    producer = _reach(ins, dealloc[0])
    hgmma = at(r"\bHGMMA\b")
    assert hgmma and not at(r"\bHGMMA\b", producer), "the producer runs no wgmma"
    assert len(at(r"\bUTMALDG\b", producer)) >= 2, "the producer issues the copies"
    assert at(r"SYNCS\.PHASECHK", producer), "and waits for empty[s]"
    consumer = _reach(ins, min(hgmma))
    assert not at(r"\bUTMALDG\b", consumer) and not at(r"USETMAXREG", consumer), "the consumers copy nothing"
    assert at(r"SYNCS\.PHASECHK", consumer) and at(r"SYNCS\.ARRIVE", consumer), "wait full[s], release empty[s]"
    if alloc:
        assert alloc[0] not in producer and set(hgmma) <= _reach(ins, alloc[0])
    assert at(rf"BAR\.SYNC\.DEFER_BLOCKING 0x1, {32 * nw:#x}\b", consumer), "the consumers' named barrier"
    assert ck.metadata.n_spills == 0


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("cfg", [(128, 256, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 64, 3, 8)],
                         ids=lambda c: "x".join(map(str, c)))
def test_matmul_splits_into_producer_and_consumers(cfg, dt):
    ck = compile_mm(cfg, dt)
    assert ck.metadata["producer_warps"] == 4 and ck.metadata.num_warps == cfg[4]
    assert f"__launch_bounds__({32 * cfg[4] + 128}, 1)" in ck.asm["cuda"]
    _check_split(ck, cfg[4])


@pytest.mark.parametrize("cfg", [(128, 128, 64, 3, 8), (128, 256, 64, 2, 8), (128, 128, 64, 4, 4)],
                         ids=lambda c: "x".join(map(str, c)))
def test_persistent_matmul_producer_walks_the_tile_loop(cfg):
    """The K loop inside the tile loop: the producer runs the tile loop too (the tile coordinates re-rendered,
    its copies run ahead into the next tile), the consumers drain and release the last slot after each K
    loop, and the epilogue's scratch lies beside the ring (the producer may be filling it meanwhile)."""
    ck = compile_persistent(cfg)
    assert ck.metadata["producer_warps"] == 4
    _check_split(ck, cfg[4])
    src = ck.asm["cuda"]
    prod = src.split("// producer warpgroup", 1)[1].split("return;", 1)[0]
    assert re.search(r"for \(int tile\d+ = \w+; tile\d+ < \w+; tile\d+ \+= 132\) \{", prod) and "while (" in prod
    assert re.search(r"if \((prev\d+) >= 0\) \{ ws_arrive\(.*\); \1 = -1; \}", src)
    offs = dict(re.findall(r"constexpr int (SMEM_\w+) = (\d+);", src))
    ring_end = max(int(v) for k, v in offs.items() if k.startswith("SMEM_PIPE")) + 1
    assert all(int(v) >= ring_end for k, v in offs.items() if k.startswith("SMEM_SCRATCH")), offs


def test_a_split_that_does_not_fit_falls_back():
    """128x256x64 in 3 stages: the ring (4 slots of 48 KB) and the epilogue's own 64 KB do not fit beside
    each other; the kernel is the ordinary pipeline (which lets the epilogue reuse the ring)."""
    ck = compile_persistent((128, 256, 64, 3, 8))
    assert "producer_warps" not in ck.metadata and ck.metadata.n_spills == 0


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d,cfg", [(64, (128, 64, 8, 3)), (128, (128, 64, 8, 3)), (128, (128, 128, 8, 2)),
                                   (64, (128, 64, 4, 2))])
def test_attention_splits_into_producer_and_consumers(d, cfg, causal):
    ck = compile_attn(d, cfg, causal)
    assert ck.metadata["producer_warps"] == 4
    _check_split(ck, cfg[2])


def _protocol_lines(src: str, nb: int, nw: int):
    bar = re.search(r"mbar_init\(smem_u32\(smem \+ (\w+)\) \+ 8 \* b, 1\); "
                    r"mbar_init\(smem_u32\(smem \+ \1\) \+ 8 \* \((\d+) \+ b\), (\d+)\)", src)
    assert bar and int(bar.group(2)) == nb and int(bar.group(3)) == 32 * nw, "full: count 1, empty: every consumer"
    b = bar.group(1)
    prod = re.search(rf"mbar_wait\(\(smem_u32\(smem \+ {b}\) \+ 8 \* \({nb} \+ (\w+)\)\), (\w+) \^ 1u\);", src)
    cons = re.search(rf"mbar_wait\(\(smem_u32\(smem \+ {b}\) \+ 8 \* \((\w+)\)\), (\w+)\);", src)
    assert prod and cons, "producer waits empty[slot] for parity ^ 1, consumer full[rd] for parity"
    for slot, ph in (prod.groups(), cons.groups()):
        assert f"if (++{slot} == {nb}) {{ {slot} = 0; {ph} ^= 1u; }}" in src, "the phase flips when the slot wraps"
    return b, cons.group(1)


def test_generated_code_keeps_the_models_arithmetic():
    """What :func:`warpspec.simulate` models is what the CUDA says: barrier counts, the two parities, the
    phase flip on wrap, and the release -- one iteration late for the in-flight accumulation (matmul),
    where the body's wgmma waits for itself (a dot whose result is used in the loop) right away."""
    src = compile_mm().asm["cuda"]
    b, rd = _protocol_lines(src, 4, 8)  # 3 stages + 1: the accumulation stays in flight
    prev = re.search(rf"if \((\w+) >= 0\) ws_arrive\(\(smem_u32\(smem \+ {b}\) \+ 8 \* \(4 \+ \1\)\)\);", src)
    assert prev and f"{prev.group(1)} = {rd};" in src
    src = compile_attn(d=128, cfg=(128, 64, 4, 2)).asm["cuda"]
    b, rd = _protocol_lines(src, 2, 4)  # P.V waits (d=128 at 4 warps): no extra buffer, release at once
    assert f"ws_arrive((smem_u32(smem + {b}) + 8 * (2 + {rd})));" in src and "prev" not in src


def test_the_knob_and_the_flag(monkeypatch):
    """``warp_specialize=True`` alone splits the loop; False does not unless NEWT_WARP_SPECIALIZE=1."""
    assert "producer_warps" not in compile_mm(ws=False).metadata
    monkeypatch.setenv("NEWT_WARP_SPECIALIZE", "1")
    ck = compile_mm(ws=False)
    assert ck.metadata["producer_warps"] == 4 and "ws_setmaxnreg_dec<40>" in ck.asm["cuda"]


def test_the_launch_has_the_producer_warpgroup(monkeypatch):
    ck = compile_mm()
    assert ck.n_max_threads == 32 * 8 + 128
    from newt.runtime import driver
    monkeypatch.setattr(driver, "load_function", lambda compiled, dev: (None, None))  # (no GPU to load on)
    assert driver.Launcher(ck, 0).block == 384 and driver.Launcher(compile_mm(ws=False), 0).block == 256
    from newt.backend.cuda import generate_cuda
    assert ck.ir is not None
    assert generate_cuda(ck.ir, "sm_90a", 8, 3).threads == 384


def test_without_the_knob_nothing_changes():
    """Unset, the code has nothing of warp specialization (and it equals the knob's False)."""
    for ck in (compile_mm(ws=False), compile_attn(ws=False)):
        src = ck.asm["cuda"]
        assert not re.search(r"ws_setmaxnreg|ws_arrive|ws_consumer|#define __syncthreads|producer", src)
        assert "producer_warps" not in ck.metadata


def test_loops_that_do_not_qualify_are_left_alone(monkeypatch):
    """bench.py's matmul (rows wrapped with ``% M``: not a TMA box, its copies stay cp.async), the same
    kernel under ``maxnreg``, and a kernel with TMA off: the flag changes nothing."""
    sys.path.insert(0, HERE)
    try:
        from hopper_kernels import matmul
    finally:
        sys.path.remove(HERE)
    base = matmul(monkeypatch, {"NEWT_TMA": "1"}).asm["cuda"]
    assert matmul(monkeypatch, {"NEWT_TMA": "1", "NEWT_WARP_SPECIALIZE": "1"}).asm["cuda"] == base
    monkeypatch.setenv("NEWT_TMA", "0")
    monkeypatch.setenv("NEWT_WARP_SPECIALIZE", "1")
    assert "producer_warps" not in compile_mm().metadata
    monkeypatch.setenv("NEWT_TMA", "1")
    bm, bn, bk = 128, 128, 64
    descs = _descs([(512, 512)] * 3, [(bm, bk), (bk, bn), (bm, bn)], torch.float16)
    ck = newt.jit(ws_matmul.fn).warmup(*descs, 512, BM=bm, BN=bn, BK=bk, WS=True, num_warps=8, num_stages=3,
                                       maxnreg=128, grid=(4, 4))
    assert "producer_warps" not in ck.metadata
    # a store before the loop: the producer warps would write it again
    ck = newt.jit(ws_store_first.fn).warmup(*descs, 512, BM=bm, BN=bn, BK=bk, num_warps=8, num_stages=3,
                                            grid=(4, 4))
    assert "producer_warps" not in ck.metadata and "tma_load_2d" in ck.asm["cuda"]


def test_the_flag_is_in_the_cache_key(monkeypatch):
    from newt.runtime.compiler import cache_key

    def key():
        return cache_key(None, {"a": "*fp16"}, {"B": 64}, {}, "sm_90a", 8, 3, False, "fingerprint", None)
    base = key()
    monkeypatch.setenv("NEWT_WARP_SPECIALIZE", "1")
    assert key() != base
    monkeypatch.delenv("NEWT_WARP_SPECIALIZE")
    assert key() == base


def test_the_interpreter_ignores_the_knob(monkeypatch):
    from newt.tools.tensor_descriptor import TensorDescriptor
    kernel = newt.jit(interpret=True)(ws_matmul.fn)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(48, 80, generator=g).half()
    b = torch.randn(80, 40, generator=g).half()
    outs = []
    for ws in (False, True):
        c = torch.full((48, 40), float("nan")).half()
        ds = [TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [16, 32]), (b, [32, 16]), (c, [16, 16]))]
        kernel[(3, 3)](*ds, 80, BM=16, BN=16, BK=32, WS=ws)
        outs.append(c)
    assert torch.equal(outs[0], outs[1])
    torch.testing.assert_close(outs[0].float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)


def _ws24_block() -> str:
    text = open(os.path.join(ROOT, "benchmarks", "run_device.sh")).read()
    return text.split("\n    ws24)\n", 1)[1].split(";;", 1)[0].replace("\\\n", " ")


def test_the_device_part_runs_these_gpu_tests_and_the_benchmark_within_420_s():
    block = _ws24_block()
    assert re.search(r"pytest .*-m gpu\s+tests/backend/test_warp_specialize\.py tests/backend/test_ws_pingpong\.py",
                     block)
    assert "benchmarks/bench_ws.py --out" in block
    limits = [int(x) for x in re.findall(r"timeout \$\{\w+:-(\d+)\}", block)]
    assert len(limits) == 2 and sum(limits) <= 420
    # the GPU tests' own subprocess limits (both files, run one after the other) fit in the pytest call's
    files = [__file__, os.path.join(HERE, "test_ws_pingpong.py")]
    parts = [int(x) for f in files for x in re.findall(r'_run_gpu_part\("\w+", (\d+)\)', open(f).read())]
    assert len(parts) == 5 and sum(parts) < limits[0]


def test_the_benchmarks_newt_ws_column_is_warp_specialized(monkeypatch):
    """bench_ws.py's kernels compile (offline) to the split under its newt_ws environment, and not without."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_ws
        from common import instantiate
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    for impl, env in bench_ws.NEWT_ENV.items():
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        for k in {"NEWT_WARP_SPECIALIZE", "NEWT_WS_PINGPONG", "NEWT_WS_OVERLAP"} - set(env):
            monkeypatch.delenv(k, raising=False)
        m = instantiate(bench_ws.TEMPLATE, "newt", f"ws_offline_{impl}")
        bm, bn, bk, s, w = bench_ws.MM_CFG
        a = torch.empty(2048, 2048, dtype=torch.bfloat16)
        ds = [m.TensorDescriptor.from_tensor(a, blk) for blk in ([bm, bk], [bk, bn], [bm, bn])]
        ck = m.matmul_tma.warmup(*ds, 2048, 2048, 2048, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                 num_stages=s, num_warps=w, grid=(128,))
        d = 128
        bm, bn, w, s = bench_ws.ATTN_CFG[d]
        q = torch.empty(4096, d, dtype=torch.float16)
        ds = [m.TensorDescriptor.from_tensor(q, [bm if i in (0, 3) else bn, d]) for i in range(4)]
        ca = m.attn_desc.warmup(*ds, 1024, 0.1, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=True, num_warps=w,
                                num_stages=s, grid=(8, 4))
        bm, bn, bk, s, w = bench_ws.PERSISTENT_CFG
        ds = [m.TensorDescriptor.from_tensor(a, blk) for blk in ([bm, bk], [bk, bn], [bm, bn])]
        cp = m.matmul_persistent.warmup(*ds, 2048, 2048, 2048, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                        NUM_SMS=132, num_stages=s, num_warps=w, grid=(132,))
        for k in (ck, ca, cp):
            assert k.metadata.get("producer_warps") == (4 if impl != "newt" else None)
            assert k.metadata.n_spills == 0
        # the ping-pong (newt_pp) and the overlap (newt_ov): attention only, the matmuls have one dot
        assert [k.metadata.get("ws_pingpong") for k in (ck, ca, cp)] == \
            [None, 2 if impl in ("newt_pp", "newt_ppov") else None, None]
        assert [k.metadata.get("ws_overlap") for k in (ck, ca, cp)] == \
            [None, 1 if impl in ("newt_ov", "newt_ppov") else None, None]


# ---------------------------------------------------------------------------
# GPU (a subprocess with a timeout: a deadlocked kernel fails the test instead of hanging the suite)
# ---------------------------------------------------------------------------

MM_CASES = [((512, 512, 512), (128, 256, 64, 3, 8)), ((1000, 1032, 968), (128, 256, 64, 3, 8)),
            ((4096, 4096, 4096), (128, 256, 64, 3, 8)), ((2047, 1544, 3000), (128, 128, 64, 4, 4)),
            ((1536, 2048, 520), (128, 128, 64, 3, 8)), ((777, 264, 64), (128, 128, 64, 3, 8))]
ATTN_CASES = [(d, causal, cfg) for d, cfgs in ((64, [(128, 64, 8, 3), (128, 64, 4, 2)]),
                                               (128, [(128, 64, 8, 3), (128, 128, 8, 2)]))
              for cfg in cfgs for causal in (False, True)]


def _tma_strides(K, N) -> bool:
    """Whether the row strides of A (K) and B and C (N) are multiples of 16 elements, the divisibility the
    specialization records, from which tma.py proves 16-byte strides: then the loop must split."""
    return K % 16 == 0 and N % 16 == 0


def test_ragged_strides_may_keep_the_pointer_path():
    """What the GPU parts expect: aligned strides split; 1000x1032x968 (both strides 8 mod 16) keeps the pointer
    path unsplit, and gives no error (the GPU part checks its result)."""
    assert compile_mm((128, 256, 64, 3, 8), M=1000, N=1032, K=968).metadata.get("producer_warps", 0) == 0
    assert compile_mm((128, 256, 64, 3, 8), M=1024, N=1024, K=1024).metadata["producer_warps"] == 4
    assert _tma_strides(1024, 1024) and not _tma_strides(968, 1032)


def _gpu_matmul():
    from newt.tools.tensor_descriptor import TensorDescriptor
    for dt in (torch.float16, torch.bfloat16):
        for (M, N, K), (bm, bn, bk, s, w) in MM_CASES:
            g = torch.Generator(device="cuda").manual_seed(M + N + K)
            a = torch.randn(M, K, device="cuda", dtype=dt, generator=g)
            b = torch.randn(K, N, device="cuda", dtype=dt, generator=g)
            c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
            ds = [TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [bm, bk]), (b, [bk, bn]), (c, [bm, bn]))]
            grid = (-(-M // bm), -(-N // bn))
            ws_matmul[grid](*ds, K, BM=bm, BN=bn, BK=bk, WS=True, num_warps=w, num_stages=s)
            torch.cuda.synchronize()
            ref = a.double() @ b.double()
            err = ((c.double() - ref).norm() / ref.norm()).item()
            ck = ws_matmul.warmup(*ds, K, BM=bm, BN=bn, BK=bk, WS=True, num_warps=w, num_stages=s, grid=grid)
            # TMA (and so the split) needs strides the specialization proves 16-byte multiples: with K and N
            # multiples of 16 it must split; ragged ones (1000x1032x968) may keep the pointer path, unsplit, and are
            # checked for their result all the same
            assert ck.metadata.get("producer_warps", 0) == 4 or not _tma_strides(K, N)
            print(f"matmul {dt} {M}x{N}x{K} {(bm, bn, bk, s, w)}: rel err {err:.2e}", flush=True)
            assert not c.isnan().any() and err < (1e-2 if dt == torch.bfloat16 else 3e-3), err


PERSISTENT_CASES = [((2048, 2048, 1024), (128, 128, 64, 3, 8), 132), ((1000, 1032, 968), (128, 256, 64, 2, 8), 5),
                    ((777, 264, 136), (128, 128, 64, 4, 4), 3), ((4096, 4096, 4096), (128, 256, 64, 2, 8), 132)]


def _gpu_persistent():
    """The tile loop with few programs (each walks many tiles: the ring carries over) and with many."""
    from newt.tools.tensor_descriptor import TensorDescriptor
    for dt in (torch.float16, torch.bfloat16):
        for (M, N, K), (bm, bn, bk, s, w), sms in PERSISTENT_CASES:
            g = torch.Generator(device="cuda").manual_seed(M + N + K)
            a = torch.randn(M, K, device="cuda", dtype=dt, generator=g)
            b = torch.randn(K, N, device="cuda", dtype=dt, generator=g)
            c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
            ds = [TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [bm, bk]), (b, [bk, bn]), (c, [bm, bn]))]
            grid = (min(sms, -(-M // bm) * -(-N // bn)),)
            kw = dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, NUM_SMS=grid[0], WS=True, num_warps=w, num_stages=s)
            ws_persistent[grid](*ds, M, N, K, **kw)
            torch.cuda.synchronize()
            split = ws_persistent.warmup(*ds, M, N, K, grid=grid, **kw).metadata.get("producer_warps", 0)
            assert split == 4 or not _tma_strides(K, N)
            ref = a.double() @ b.double()
            err = ((c.double() - ref).norm() / ref.norm()).item()
            print(f"persistent {dt} {M}x{N}x{K} {(bm, bn, bk, s, w)} {grid[0]} programs: rel err {err:.2e}", flush=True)
            assert not c.isnan().any() and err < (1e-2 if dt == torch.bfloat16 else 3e-3), err


def gpu_attention(cases=None, meta=None, label: str = "attention"):
    """``ws_attn`` for each of ``cases`` ((d, causal, (BLOCK_M, BLOCK_N, warps, stages)); default ATTN_CASES) in
    fp16 and bf16 against torch in float64, after checking its compiled metadata holds ``meta`` (default: the
    producer/consumer split); prints one "max err" line a case (test_ws_pingpong and test_ws_ppov use it too)."""
    from newt.tools.tensor_descriptor import TensorDescriptor
    cases = ATTN_CASES if cases is None else cases
    meta = {"producer_warps": 4} if meta is None else meta
    H, N = 3, 1024
    for dt in (torch.float16, torch.bfloat16):
        for d, causal, (bm, bn, w, s) in cases:
            g = torch.Generator(device="cuda").manual_seed(d)
            q, k, v = (torch.randn(H * N, d, device="cuda", generator=g).to(dt) for _ in range(3))
            o = torch.full((H * N, d), float("nan"), device="cuda", dtype=dt)
            ds = [TensorDescriptor.from_tensor(t, [bm if i in (0, 3) else bn, d]) for i, t in enumerate((q, k, v, o))]
            scale = 1.0 / d ** 0.5
            kw = dict(HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, WS=True, num_warps=w, num_stages=s)
            ws_attn[(N // bm, H)](*ds, N, scale * 1.4426950408889634, **kw)
            torch.cuda.synchronize()
            ck = ws_attn.warmup(*ds, N, scale * 1.4426950408889634, grid=(N // bm, H), **kw)
            got = {key: ck.metadata.get(key) for key in meta}
            assert got == meta, f"{label}: compiled with {got}, expected {meta}"
            qd, kd, vd = (t.double().reshape(H, N, d) for t in (q, k, v))
            sc = qd @ kd.transpose(1, 2) * scale
            if causal:
                sc = sc.masked_fill(torch.ones(N, N, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
            ref = (torch.softmax(sc, -1) @ vd).reshape(H * N, d)
            err = (o.double() - ref).abs().max().item()
            print(f"{label} {dt} d={d} causal={causal} {(bm, bn, w, s)}: max err {err:.2e}", flush=True)
            assert not o.isnan().any() and err < (2e-2 if dt == torch.bfloat16 else 4e-3), err


def _run_gpu_part(part: str, timeout: int, script: str = __file__, hang: str = "a deadlocked producer/consumer?"):
    """``python script part`` (a GPU part of this file, or of another warp-specialization test file) in a
    subprocess with a timeout, so that a deadlocked kernel fails the test instead of hanging it; its stdout."""
    env = dict(os.environ, NEWT_TMA="1", PYTHONPATH=ROOT)
    try:
        r = subprocess.run([sys.executable, os.path.abspath(script), part], env=env, cwd=ROOT, timeout=timeout,
                           capture_output=True, text=True)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"{part}: no result in {timeout} s ({hang}); last output:\n{out[-2000:]}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


@pytest.mark.gpu
def test_warp_specialized_matmul_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    out = _run_gpu_part("matmul", 60)
    assert out.count("rel err") == 2 * len(MM_CASES)


@pytest.mark.gpu
def test_warp_specialized_persistent_matmul_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    out = _run_gpu_part("persistent", 50)
    assert out.count("rel err") == 2 * len(PERSISTENT_CASES)


@pytest.mark.gpu
def test_warp_specialized_attention_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    out = _run_gpu_part("attention", 95)
    assert out.count("max err") == 2 * len(ATTN_CASES)


if __name__ == "__main__":  # the GPU parts, run by the tests above in a subprocess
    os.environ["NEWT_TMA"] = "1"
    {"matmul": _gpu_matmul, "persistent": _gpu_persistent, "attention": gpu_attention}[sys.argv[1]]()
