"""The ping-pong and the intra-warpgroup overlap together (issue 24, ``newt/backend/cuda/ppov.py``; both
``NEWT_WS_PINGPONG=1`` and ``NEWT_WS_OVERLAP=1``).

Offline: the schedule on a model of named barriers, wgmma groups and the ring (every schedule given, 2-4
warpgroups, rings of 3-5 slots, and the model catching the wrong variants), the generated code ordering the
model's steps, the SASS of bench_ws.py's attention configs (d = 64/128, causal and not, fp16/bf16: HGMMA count,
no C7514/C7515 in ptxas's output, no spill, the turn barriers by id, every ``MUFU.EX2`` of the loop before the
wait for the previous P.V and before the turn, the next QK's HGMMAs then P.V's in one turn, unserialized), the
flags unset or alone leaving the code as it was (the combined path not entered), kernels that do not qualify,
the fallback, the cache key, the benchmark's column and the device script.  On the GPU (``-m gpu``): attention
d=64/128, causal and not, fp16/bf16 against torch under both flags, in a subprocess with a timeout so that a
deadlock fails instead of hanging."""

from __future__ import annotations

import itertools
import os
import re
import sys

import pytest

torch = pytest.importorskip("torch")

from newt.backend.cuda import ppov  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
try:
    import test_warp_specialize as ws
    import test_ws_pingpong as wpp
finally:
    sys.path.remove(HERE)

ORDERS = wpp.ORDERS

# ---------------------------------------------------------------------------
# the schedule on a model
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("groups", [2, 3, 4])
def test_the_schedule_runs_every_interleaving_without_deadlock(groups):
    """Rings of 3-5 slots, every trip count up to three rings, every schedule of ``ORDERS``: no deadlock, one
    warpgroup in a turn at a time, turns round robin, every arrive matched by one sync and nothing pending at
    exit, S and the accumulator read only once their wgmma retired, every slot released once by every
    warpgroup, no slot refilled while read; each warpgroup issues QK(0), then QK(j + 1) and P.V(j) per turn."""
    for nb in range(3, 6):
        for n, order in itertools.product(range(0, 3 * nb + 2), ORDERS):
            trace = ppov.simulate(n, groups, nb, order)
            for k in range(groups):
                mine = [s[1] for a, s in trace if a == k and s[0] == "commit"]
                assert mine == [("qk", 0)] + [x for j in range(n) for x in (("qk", j + 1), ("pv", j))]
                assert [s[1] for a, s in trace if a == k and s[0] == "release"] == list(range(n))
            assert [s for a, s in trace if a == "p"] == list(range(n))


def test_the_model_catches_the_wrong_variants():
    """Not vacuous: warpgroup 0 waiting for a first token deadlocks; the last warpgroup passing the token after
    its last turn leaves an arrival pending; a ``wait_group 2`` after the turn reads S in flight, no wait before
    the accumulator's rescale reads it in flight, a release in the slot's own iteration frees it while P.V reads
    it; different trip counts and a ring of two slots deadlock.  (Releasing right after the ``wait_group 0`` is
    fine too: release_lag=0.)"""
    cases = [({"skip_first": False}, "deadlock"), ({"last_arrive": True}, "pending arrivals"),
             ({"qk_wait": 2}, r"S\(\d+\) read in flight"), ({"acc_wait": False}, "accumulator read"),
             ({"release_lag": -1}, "released while read")]
    for kw, msg in cases:
        with pytest.raises(AssertionError, match=msg):
            for order in ORDERS:
                ppov.simulate(5, 2, 3, order, **kw)
    for order in ORDERS:
        ppov.simulate(5, 2, 3, order, release_lag=0)
    with pytest.raises(AssertionError, match="deadlock"):
        ppov.simulate([5, 4], 2, 3, "p01")
    with pytest.raises(AssertionError, match="deadlock"):
        ppov.simulate(7, 2, 2, "p01")


# ---------------------------------------------------------------------------
# generated code and SASS (offline)
# ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for k in ("NEWT_WARP_SPECIALIZE", "NEWT_WS_PINGPONG", "NEWT_WS_OVERLAP", "NEWT_DOT_LOWERING", "NEWT_CPASYNC_FENCE",
              "NEWT_PIPE_ISSUE", "NEWT_CONVERT_ADDR", "NEWT_STMATRIX", "NEWT_TARGET"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("NEWT_TMA", "1")


def _flags(monkeypatch, pp=True, ov=True):
    for k, on in (("NEWT_WS_PINGPONG", pp), ("NEWT_WS_OVERLAP", ov)):
        if on:
            monkeypatch.setenv(k, "1")
        else:
            monkeypatch.delenv(k, raising=False)


BENCH = wpp.BENCH  # bench_ws.py's attention configs at d = 64 and 128


def _events(src: str) -> list[str]:
    """The consumers' code from the split to the end, as the model's steps (plus "loop" and "pin")."""
    return wpp.consumer_events(src, [
        (r"ws_pp_sync", "sync"), (r"ws_pp_arrive_last", "arrive"), (r"ws_pp_pin", "pin"),
        (r"mbar_wait\(", "wait_full"), (r"wgmma_commit\(\)", "commit"), (r"wgmma_wait<0>", "wait0"),
        (r"wgmma_wait<1>", "wait1"), (r"ws_arrive\(", "release"), (r"^\s*for \(int v", "loop")])


def _model_events(steps) -> list[str]:
    names = {"wait_full": "wait_full", "sync": "sync", "commit": "commit", "arrive": "arrive", "release": "release"}
    return [f"wait{a}" if s == "wait" else names[s] for s, a in steps if s in names or s == "wait"]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d,cfg", BENCH)
def test_generated_code_orders_the_models_steps(monkeypatch, d, cfg, causal):
    """Before the loop: the first slot (guarded), warpgroups but 0 wait for their first turn, QK(0) committed, the
    token passed (unless last), waited for.  In the loop: the softmax, the pin, the wait for the previous P.V,
    the rescale and P's conversion, the next slot (guarded), the turn: the next QK committed, P.V committed,
    the token passed (unless last), ``wait_group 1`` retiring the next QK, the previous slot released; after
    the loop the drain and the last release -- the model's ``program`` step for step."""
    _flags(monkeypatch)
    ck = ws.compile_attn(d, cfg, causal)
    assert ck.metadata["ws_pingpong"] == 2 and ck.metadata["ws_overlap"] == 1 and ck.metadata["producer_warps"] == 4
    src = ck.asm["cuda"]
    ev = _events(src)
    pre = ["wait_full", "sync", "commit", "arrive", "wait0"]
    turn = ["wait0", "wait_full", "sync", "commit", "wait1", "commit", "arrive", "wait1", "release"]
    assert ev == pre + ["loop", "pin"] + turn + ["wait0", "release"], ev
    # the model's program: its prologue, one middle iteration and its end, in the same order
    prog = ppov.program(1, 2, 3)
    assert _model_events(prog[:prog.index(("softmax", 0))]) == pre
    mid = prog[prog.index(("softmax", 1)):prog.index(("softmax", 2))]
    assert _model_events(mid) == turn
    assert _model_events(prog[-2:]) == ["wait0", "release"]
    # the helper: one predicated bar.arrive per warpgroup, the last one's also on "not last"
    assert ('asm volatile("{ .reg .pred p0, p1, q; setp.ne.s32 q, %1, 0; setp.eq.s32 p0, %0, 0; '
            '@p0 bar.arrive 3, 256; setp.eq.and.s32 p1, %0, 1, !q; @p1 bar.arrive 2, 256; }"') in src
    loop = src.split("for (int v", 1)[1]
    first = re.search(r"if \((0 < \w+)\) mbar_wait", src).group(1)  # the loop's condition at its lower bound
    assert f"ws_pp_arrive_last(wg, !({first}));" in src.split("for (int v", 1)[0]
    assert re.search(r"ws_pp_arrive_last\(wg, !\(\(v\d+ \+ 64\) < \w+\)\);", loop)
    assert "ws_pp_pass(warp_id" not in src and "if ((warp_id >> 2) != 0) ws_pp_sync(warp_id >> 2);" in src
    # within the loop: every exp2 before the pin, the pin before the wait, P's conversion and the rescale after it
    head = loop.split("ws_pp_pin(", 1)[0]
    tail = loop.split("ws_pp_pin(", 1)[1]
    assert head.count("ex2_approx_ftz") == 2 and "ex2_approx_ftz" not in tail.split("ws_pp_sync", 1)[0]
    assert tail.index("wgmma_wait<0>") < tail.index("f32_to_") < tail.index("ws_pp_sync(")
    assert re.search(r"wgmma_wait<0>\(\);[^\n]*\n(?:\s*#pragma unroll\n\s*for [^\n]*wgmma_keep\(v\d+\[i\]\);\n)+", tail)


def _ptxas_log(monkeypatch):
    """Compile with the caches off and return the list NVRTC's logs (ptxas's output) are appended to."""
    from newt.backend.cuda import compiler as cc
    from newt.runtime import compiler as rc
    monkeypatch.setattr(rc, "_MEMORY", {})
    logs: list[str] = []
    orig = cc._compile_once

    def once(*a, **k):
        b = orig(*a, **k)
        logs.append(b.log)
        return b
    monkeypatch.setattr(cc, "_compile_once", once)
    monkeypatch.setenv("NEWT_DISABLE_CACHE", "1")
    return logs


def _check_split(ck, nw: int):
    """test_warp_specialize's ``_check_split`` with this path's registers: the producer keeps 24
    (``warpspec.PPOV_PRODUCER_REGS``), two consumer warpgroups get 240."""
    ins = wpp._sass(ck)
    pr, creg, _ = ws.warpspec.register_split(nw, ws.warpspec.PPOV_PRODUCER_REGS)
    assert (pr, creg) == (24, 240)

    def at(pat, within=None):
        return [a for a, t in ins if (within is None or a in within) and re.search(pat, t)]
    dealloc = at(rf"USETMAXREG\.DEALLOC\.CTAPOOL {pr:#x}\b")
    alloc = at(rf"USETMAXREG\.TRY_ALLOC\.CTAPOOL \w+, {creg:#x}\b")
    assert len(dealloc) == 1 and len(alloc) == 1, "setmaxnreg.dec 24 / .inc 240"
    producer = ws._reach(ins, dealloc[0])
    hgmma = at(r"\bHGMMA\b")
    assert hgmma and not at(r"\bHGMMA\b", producer) and len(at(r"\bUTMALDG\b", producer)) >= 2
    consumer = ws._reach(ins, min(hgmma))
    assert not at(r"\bUTMALDG\b", consumer) and alloc[0] not in producer and set(hgmma) <= ws._reach(ins, alloc[0])
    assert at(rf"BAR\.SYNC\.DEFER_BLOCKING 0x1, {32 * nw:#x}\b", consumer), "the consumers' named barrier"


def _loop(ins):
    """(head, end) indices of the consumers' main loop: from the head the back-edge after P.V jumps to."""
    text = [t for _, t in ins]
    addr = [a for a, _ in ins]
    pv = [k for k, t in enumerate(text) if re.search(r"\bHGMMA\.\S+ R\d+, R\d+", t)]
    back = [(k, int(m.group(1), 16)) for k, t in enumerate(text)
            if k > pv[-1] and (m := re.search(r"\bBRA (?:\S+ )?0x([0-9a-f]+)", t))]
    end, head = next((k, addr.index(a)) for k, a in back if a < addr[pv[0]])
    return head, end


def _mark(t: str) -> str:
    for pat, m in ((r"\bHGMMA\.\S+ R\d+, gdesc", "Q"), (r"\bHGMMA\.\S+ R\d+, R\d+", "P"), (r"\bBAR\.ARV 0x[23]\b", "A"),
                   (r"BAR\.SYNC\.DEFER_BLOCKING 0x[23]\b", "S"), (r"MUFU\.EX2", "E"),
                   (r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0\b", "0"), (r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1\b", "1"),
                   (r"WARPGROUP\.ARRIVE\b", "w"), (r"^STS\b", "T"), (r"SYNCS\.ARRIVE", "R")):
        if re.search(pat, t):
            return m
    return ""


def sass_order(ins) -> str:
    """The loop's marks (``_mark``), runs collapsed: e.g. ``ET0SwQ1wPA1R``."""
    head, end = _loop(ins)
    marks = [m for t in (t for _, t in ins[head:end + 1]) if (m := _mark(t))]
    return "".join(m for i, m in enumerate(marks) if i == 0 or m != marks[i - 1])


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d,cfg", BENCH)
def test_sass_issues_both_gemms_in_a_turn_with_the_softmax_outside(monkeypatch, d, cfg, causal, dt):
    """SASS of bench_ws.py's attention under both flags: the split (``_check_split``: SETMAXNREG both ways, the
    producer at 24 registers and the consumers at 240, copies in the producer, HGMMA in the consumers); no spill; no
    C7514/C7515 (serialized wgmma) in ptxas's output; HGMMA = 2 QK (before the loop and in it, d/16 each) + P.V
    (BLOCK_N/16); the turn barriers ``BAR.SYNC 0x2/0x3, 0x100`` and ``BAR.ARV 0x2/0x3, 0x100``; and the loop in
    this order: every ``MUFU.EX2`` (the softmax, while the previous P.V runs), the pin's ``STS``, the wait for
    that P.V (``DEPBAR.LE gsb0, 0x0``), the turn's ``BAR.SYNC``, the next QK's HGMMAs, its (no-op)
    ``DEPBAR.LE gsb0, 0x1``, one ``WARPGROUP.ARRIVE``, P.V's HGMMAs chained (only the last one closes a group), the
    token passed (``BAR.ARV``), ``DEPBAR.LE gsb0, 0x1`` retiring the QK, the slot's release."""
    logs = _ptxas_log(monkeypatch)
    _flags(monkeypatch)
    ck = ws.compile_attn(d, cfg, causal, dt=dt)
    assert ck.metadata["ws_pingpong"] == 2 and ck.metadata["ws_overlap"] == 1
    assert logs and "ptxas" in logs[-1]
    assert not re.search(r"C751[0-9]", "\n".join(logs)), "\n".join(logs)
    _check_split(ck, cfg[2])
    assert ck.metadata.n_spills == 0
    ins = wpp._sass(ck)
    text = [t for _, t in ins]
    n_qk, n_pv = d // 16, cfg[1] // 16
    assert sum(bool(re.search(r"\bHGMMA\b", t)) for t in text) == 2 * n_qk + n_pv
    for b in (2, 3):
        assert any(re.search(rf"BAR\.SYNC\.DEFER_BLOCKING 0x{b}, 0x100\b", t) for t in text), b
        assert any(re.search(rf"BAR\.ARV 0x{b}, 0x100\b", t) for t in text), b
    order = sass_order(ins)
    assert re.fullmatch(r"ET0S+wQ1wPA+1R", order), order
    head, end = _loop(ins)
    loop = text[head:end + 1]
    assert sum("MUFU.EX2" in t for t in loop) == cfg[1] // 2 + 2  # P's (BLOCK_N / 2 a thread), alpha's (2 rows)
    pv = [t for t in loop if re.search(r"\bHGMMA\.\S+ R\d+, R\d+", t)]
    assert len(pv) == n_pv and [t.endswith("gsb0") for t in pv] == [False] * (n_pv - 1) + [True]
    assert sum(bool(re.search(r"\bHGMMA\.\S+ R\d+, gdesc", t)) for t in loop) == n_qk


def test_the_gpu_tests_configs_compile_to_the_combined_path(monkeypatch):
    """The GPU test's configs beyond the bench's (BLOCK_N = 128, 2 stages: a ring of 3 slots) take the combined
    path offline too, with no spill."""
    _flags(monkeypatch)
    for d, causal, cfg in CASES[4:]:
        ck = ws.compile_attn(d, cfg, causal, N=2048)
        assert ck.metadata["ws_pingpong"] == 2 and ck.metadata["ws_overlap"] == 1 and ck.metadata.n_spills == 0


@pytest.mark.parametrize("bn,stages", [(64, 3), (128, 2)])
def test_no_more_spills_than_the_pingpong_or_the_overlap(monkeypatch, bn, stages):
    """d = 128 (the issue's cells), causal and not: no spill, as the ping-pong and the overlap alone.  At BLOCK_N
    = 128 the combined path holds two 64x128 S tiles besides the accumulator and P: with the producer at 40
    registers (the consumers at 232) it spilled 60 and 92 bytes; the producer at 24 (consumers 240) fits."""
    for causal in (False, True):
        spills = {}
        for pp, ov in ((True, False), (False, True), (True, True)):
            _flags(monkeypatch, pp, ov)
            spills[pp, ov] = ws.compile_attn(128, (128, bn, 8, stages), causal, N=2048).metadata.n_spills
            # (N = 2048: test_ws_pingpong's fallback test compiles (128, 128, 8, 2) at 1024 and wants no cache hit)
        assert spills[True, True] == 0 and spills[True, True] <= min(spills.values()), spills


def test_flags_unset_or_alone_do_not_enter_the_combined_path(monkeypatch):
    """With neither flag, or one of them, the combined path is never entered (its functions raise here) and its
    helper is absent; the code is what test_ws_pingpong and test_warp_specialize pin for those flags (checked
    byte for byte against the commit before this path for the four attention configs, the matmul and the
    persistent matmul, 18 sources, when it landed)."""
    def boom(*a, **k):
        raise AssertionError("ppov entered")
    for name in ("before_loop", "in_loop", "helpers"):
        monkeypatch.setattr(ppov, name, boom)
    for pp, ov in ((False, False), (True, False), (False, True)):
        _flags(monkeypatch, pp, ov)
        for d, cfg in BENCH:
            for causal in (False, True):
                ck = ws.compile_attn(d, cfg, causal)
                assert "ws_pp_arrive_last" not in ck.asm["cuda"] and "ppov:" not in ck.asm["cuda"]
                assert (ck.metadata.get("ws_pingpong") == 2) == pp and (ck.metadata.get("ws_overlap") == 1) == ov


def test_kernels_that_do_not_qualify(monkeypatch):
    """Both flags leave the matmul and the persistent matmul (one dot) as they were, and attention at 4 warps
    (one consumer warpgroup: no ping-pong) takes the overlap alone, byte for byte."""
    _flags(monkeypatch, False, False)
    mm, pm = ws.compile_mm().asm["cuda"], ws.compile_persistent().asm["cuda"]
    _flags(monkeypatch, False, True)
    a4 = ws.compile_attn(64, (128, 64, 4, 3)).asm["cuda"]
    _flags(monkeypatch)
    assert ws.compile_mm().asm["cuda"] == mm and ws.compile_persistent().asm["cuda"] == pm
    ck = ws.compile_attn(64, (128, 64, 4, 3))
    assert ck.asm["cuda"] == a4 and "ws_pingpong" not in ck.metadata and ck.metadata["ws_overlap"] == 1


def test_a_body_that_synchronizes_the_block_falls_back_to_the_overlap(monkeypatch):
    """``pingpong.check_body`` rejecting the body: the kernel is generated again without the ping-pong, so with
    the overlap alone."""
    from newt.backend.cuda import pingpong
    from newt.runtime import compiler as rc

    def unfit(chunk):
        raise pingpong.PingPongUnfit
    monkeypatch.setattr(pingpong, "check_body", unfit)
    monkeypatch.setattr(rc, "_MEMORY", {})  # (compiled afresh: no cache hit from another test)
    monkeypatch.setenv("NEWT_DISABLE_CACHE", "1")
    _flags(monkeypatch)
    ck = ws.compile_attn(128, (128, 128, 8, 2))
    assert ck.metadata["producer_warps"] == 4 and "ws_pingpong" not in ck.metadata and ck.metadata["ws_overlap"] == 1
    assert "ws_pp_" not in ck.asm["cuda"]


def test_the_flags_are_in_the_cache_key(monkeypatch):
    from newt.runtime.compiler import cache_key

    def key():
        return cache_key(None, {"a": "*fp16"}, {"B": 64}, {}, "sm_90a", 8, 3, False, "fingerprint", None)
    keys = set()
    for pp, ov in itertools.product((False, True), repeat=2):
        _flags(monkeypatch, pp, ov)
        keys.add(key())
    assert len(keys) == 4


def test_the_benchmarks_newt_ppov_column(monkeypatch):
    """bench_ws.py: newt_ppov is newt_ws plus both flags, attention only, must show both metadata keys, and its
    table has the column and its ratios (ppov/ws, ppov/pp, ppov/ov, ppov/torch) beside the others; the bench's
    attention kernel compiles to the combined path under that environment (offline)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_ws
        from common import instantiate
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    assert bench_ws.NEWT_ENV["newt_ppov"] == {**bench_ws.NEWT_ENV["newt_ws"], "NEWT_WS_PINGPONG": "1",
                                              "NEWT_WS_OVERLAP": "1"}
    assert bench_ws.PPOV_META == {"newt_ppov": ("ws_pingpong", "ws_overlap")} and bench_ws.PP_KINDS == ("attention",)
    e = {"ms": 1.0, "TFLOPs": 400.0}
    cell = {"kind": "attention", "dtype": "float16", "shape": [4, 32, 4096, 128, False],
            "impls": {"newt": e, "newt_ws": e, "newt_pp": {"ms": 0.8, "TFLOPs": 500.0},
                      "newt_ov": {"ms": 0.5, "TFLOPs": 800.0}, "newt_ppov": {"ms": 0.4, "TFLOPs": 1000.0},
                      "triton": e, "torch": e},
            "ppov_vs_newt_ws": 2.5, "ppov_vs_newt_pp": 2.0, "ppov_vs_newt_ov": 1.25, "ppov_vs_torch": 2.5}
    md = bench_ws.render_md({"environment": {"gpu": "H100"}, "results": [cell]})
    head = next(line for line in md.splitlines() if line.startswith("| kind"))
    row = next(line for line in md.splitlines() if line.startswith("| attention")).split(" | ")
    cols = head.split(" | ")
    assert row[cols.index("newt_ppov")] == "1000"
    assert [row[cols.index(c)] for c in ("ppov/ws", "ppov/pp", "ppov/ov", "ppov/torch")] == \
        ["2.50x", "2.00x", "1.25x", "2.50x"]
    for k, v in bench_ws.NEWT_ENV["newt_ppov"].items():
        monkeypatch.setenv(k, v)
    m = instantiate(bench_ws.TEMPLATE, "newt", "ws_offline_ppov")
    d = 128
    bm, bn, w, s = bench_ws.ATTN_CFG[d]
    q = torch.empty(4096, d, dtype=torch.float16)
    ds = [m.TensorDescriptor.from_tensor(q, [bm if i in (0, 3) else bn, d]) for i in range(4)]
    ca = m.attn_desc.warmup(*ds, 1024, 0.1, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=True, num_warps=w,
                            num_stages=s, grid=(8, 4))
    assert ca.metadata["ws_pingpong"] == 2 and ca.metadata["ws_overlap"] == 1 and ca.metadata.n_spills == 0


def test_the_device_part_runs_these_gpu_tests_within_its_limits():
    """run_device.sh ws24: this file is on its pytest line, and the GPU parts' subprocess limits of the three files
    fit in that call's timeout (the part's two timeouts add up to 420 s at most)."""
    block = ws._ws24_block()
    assert re.search(r"pytest .*-m gpu\s+tests/backend/test_warp_specialize\.py tests/backend/test_ws_pingpong\.py "
                     r"tests/backend/test_ws_ppov\.py", block)
    limits = [int(x) for x in re.findall(r"timeout \$\{\w+:-(\d+)\}", block)]
    assert len(limits) == 2 and sum(limits) <= 420
    files = [ws.__file__, wpp.__file__, __file__]
    parts = [int(x) for f in files for x in re.findall(r'_run_gpu_part\("\w+", (\d+)\)', open(f).read())]
    assert len(parts) == 6 and sum(parts) < limits[0]


# ---------------------------------------------------------------------------
# GPU (a subprocess with a timeout: a deadlocked turn fails the test instead of hanging the suite)
# ---------------------------------------------------------------------------

#: (d, causal, (BLOCK_M, BLOCK_N, warps, stages)): the bench's configs, and BLOCK_N = 128 in 2 stages (a ring of 3
#: slots, the least the schedule takes; causal: a trip count of 1 in the first row block)
CASES = [(d, causal, (128, 64, 8, 3)) for d in (64, 128) for causal in (False, True)] + \
        [(128, causal, (128, 128, 8, 2)) for causal in (False, True)]


def _gpu_attention():
    ws.gpu_attention(CASES, {"ws_pingpong": 2, "ws_overlap": 1}, "ppov attention")


def _run_gpu_part(part: str, timeout: int):
    return ws._run_gpu_part(part, timeout, script=__file__, hang="deadlocked turns?")


@pytest.mark.gpu
def test_pingpong_with_overlap_attention_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    out = _run_gpu_part("attention", 45)
    assert out.count("max err") == 2 * len(CASES)


if __name__ == "__main__":  # the GPU part, run by the test above in a subprocess
    os.environ["NEWT_TMA"] = "1"
    os.environ["NEWT_WS_PINGPONG"] = "1"
    os.environ["NEWT_WS_OVERLAP"] = "1"
    _gpu_attention()
