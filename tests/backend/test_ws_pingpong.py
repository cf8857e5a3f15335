"""Ping-pong between consumer warpgroups (issue 24, ``newt/backend/cuda/pingpong.py``, ``NEWT_WS_PINGPONG=1``).

Offline: the protocol on a model of named barriers and the ring (every schedule given, 2-4 warpgroups, with and
without P.V in flight, and the model catching the wrong variants), the generated code ordering the same steps,
the SASS of bench_ws.py's attention configs (the turn barriers by id, HGMMA not serialized, the softmax's
MUFU.EX2 between a warpgroup's BAR.ARV and its next BAR.SYNC, SETMAXNREG, no spill), the flag unset or the kernel
not eligible leaving the code byte for byte as it was, the fallback, the cache key and the interpreter.  On the
GPU (``-m gpu``): attention d=64/128, causal and not, fp16/bf16 against torch under the flag, in a subprocess
with a timeout so that a deadlock fails instead of hanging."""

from __future__ import annotations

import itertools
import os
import re
import sys

import pytest

import newt
from newt.backend.cuda import overlap, pingpong

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
try:
    import test_warp_specialize as ws
finally:
    sys.path.remove(HERE)

# ---------------------------------------------------------------------------
# the protocol on a model
# ---------------------------------------------------------------------------

ORDERS = ["p0123", "0123p", "3210p", "p", "0", "1", "01p", "10p", "00p1", "11p0", "p0p1p2p3", "3p21p0", "0p0p1"]


@pytest.mark.parametrize("behind", [False, True], ids=["waits", "in_flight"])
@pytest.mark.parametrize("groups", [2, 3, 4])
def test_turns_run_every_schedule_without_deadlock(groups, behind):
    """Every trip count up to three rings, rings of 2-5 slots (3+ with P.V in flight: the ring has one more
    buffer then), every schedule of ``ORDERS``: no deadlock, one warpgroup in a turn at a time, turns round
    robin, every barrier phase one arrive + one sync, nothing pending at exit, no slot overwritten while read."""
    for nb in range(3 if behind else 2, 6):
        for n, order in itertools.product(range(0, 3 * nb + 2), ORDERS):
            trace = pingpong.simulate(n, groups, nb, behind, order)
            for k in range(groups):
                mine = [s for a, s in trace if a == k and s[0] == "mma"]
                assert mine == [("mma", (g, i)) for i in range(n) for g in ("qk", "pv")]
            assert [s for a, s in trace if a == "p"] == list(range(n))


def test_the_model_catches_the_wrong_variants():
    """Not vacuous: warpgroup 0 waiting for a first token deadlocks; the last warpgroup passing a token after
    its last turn leaves an arrival pending at exit; a block-wide barrier inside a turn deadlocks (one inside
    the softmax does not, it only serializes); warpgroups running different trip counts deadlock (so the loop
    bounds must be the same for the whole block, as newt's scalar bounds are)."""
    with pytest.raises(AssertionError, match="deadlock"):
        pingpong.simulate(4, 2, 3, True, "p01", skip_first=False)
    with pytest.raises(AssertionError, match="pending arrivals"):
        pingpong.simulate(4, 2, 3, True, "p01", last_arrive=True)
    with pytest.raises(AssertionError, match="deadlock"):
        pingpong.simulate(4, 2, 3, True, "p01", barrier_at="turn")
    pingpong.simulate(4, 2, 3, True, "p01", barrier_at="softmax")
    with pytest.raises(AssertionError, match="deadlock"):
        pingpong.simulate([5, 4], 2, 3, True, "p01")
    with pytest.raises(AssertionError, match="deadlock"):
        pingpong.simulate([2, 3, 3], 3, 3, False, "p012")


# ---------------------------------------------------------------------------
# generated code and SASS (offline)
# ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for k in ("NEWT_WARP_SPECIALIZE", "NEWT_WS_PINGPONG", "NEWT_WS_OVERLAP", "NEWT_DOT_LOWERING", "NEWT_CPASYNC_FENCE",
              "NEWT_PIPE_ISSUE", "NEWT_CONVERT_ADDR", "NEWT_STMATRIX", "NEWT_TARGET"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("NEWT_TMA", "1")


def _pp(monkeypatch, on=True):
    if on:
        monkeypatch.setenv("NEWT_WS_PINGPONG", "1")
    else:
        monkeypatch.delenv("NEWT_WS_PINGPONG", raising=False)


#: bench_ws.py's attention configs (BLOCK_M, BLOCK_N, warps, stages) and the two d of the issue
BENCH = [(64, (128, 64, 8, 3)), (128, (128, 64, 8, 3))]


def _strip_pp(src: str) -> str:
    """``src`` less the ping-pong's own lines (its helper block, calls and comments)."""
    out, skip = [], False
    for line in src.splitlines():
        if line.startswith("// ---- ping-pong"):
            skip = True
            continue
        if skip:
            if line.strip() == "":
                skip = False
            continue
        if "ws_pp_" in line or "// ping-pong:" in line:
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def consumer_events(src: str, pats) -> list[str]:
    """The consumers' code from the split to the end as steps: each line that matches one of ``pats`` (regex,
    step name; the first that matches) becomes that step."""
    body = src.split("ws_setmaxnreg_inc<", 1)[1].split("#undef __syncthreads", 1)[0]
    out = []
    for line in body.splitlines():
        for p, name in pats:
            if re.search(p, line):
                out.append(name)
                break
    return out


def _events(src: str) -> list[str]:
    """The consumer's loop as the model's steps: turn barriers, ring waits/releases, wgmma commits/waits."""
    return consumer_events(src, [
        (r"ws_pp_sync", "sync"), (r"ws_pp_arrive", "arrive"), (r"ws_pp_pass", "arrive"),
        (r"mbar_wait\(", "wait_full"), (r"wgmma_commit\(\)", "commit"), (r"wgmma_wait<0>", "wait0"),
        (r"wgmma_wait<1>", "wait1"), (r"ws_arrive\(", "release"), (r"^\s*for \(int v", "loop")])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d,cfg", BENCH)
def test_generated_code_orders_the_models_steps(monkeypatch, d, cfg, causal):
    """Warpgroups other than 0 wait for their first turn before the loop; in the loop: full[s], QK committed,
    the token passed *before* QK's wait (the next warpgroup queues its GEMMs behind it), the softmax, the
    turn taken before P.V, P.V committed and left in flight, the ring's release; after the loop the last turn
    passed on by every warpgroup but the last, then the drain -- the model's ``_program``."""
    _pp(monkeypatch)
    ck = ws.compile_attn(d, cfg, causal)
    assert ck.metadata["ws_pingpong"] == 2 and ck.metadata["producer_warps"] == 4
    src = ck.asm["cuda"]
    ev = _events(src)
    assert ev == ["sync", "loop", "wait_full", "commit", "arrive", "wait0", "sync", "commit", "wait1", "release",
                  "arrive", "wait0", "release"], ev
    assert "if ((warp_id >> 2) != 0) ws_pp_sync(warp_id >> 2);" in src
    assert "ws_pp_pass(warp_id >> 2);" in src
    assert ('void ws_pp_pass(int wg) {\n  asm volatile("{ .reg .pred p0; setp.eq.s32 p0, %0, 0; '
            '@p0 bar.arrive 3, 256; }"') in src, "every warpgroup but the last passes the token after the loop"
    # the barriers: warpgroup k syncs on 2 + k, arrives on 2 + (k + 1) % 2, 256 threads each
    assert 'setp.eq.s32 p0, %0, 0; @p0 bar.sync 2, 256; setp.eq.s32 p1, %0, 1; @p1 bar.sync 3, 256;' in src
    assert 'setp.eq.s32 p0, %0, 0; @p0 bar.arrive 3, 256; setp.eq.s32 p1, %0, 1; @p1 bar.arrive 2, 256;' in src
    # the pin: every P fragment XOR-ed into one shared store right before the turn's sync
    pin = re.search(r"ws_pp_pin\(smem_u32\(smem \+ \w+\) \+ \d+, ((?:af\[\d+\]\[\d\](?: \^ )?)+)\);\s*//[^\n]*\n"
                    r"\s*ws_pp_sync\(wg\);", src)
    assert pin and len(pin.group(1).split(" ^ ")) == 4 * (64 // 16), "P.V's A fragments (K = BLOCK_N = 64)"
    assert pingpong.PP_BARRIER0 == 2 and ws.warpspec.CONSUMER_BARRIER == 1, "distinct from the consumers' barrier"
    # the model's program, one iteration, has the same order of turn and ring steps
    prog = [s for s, _ in pingpong._program(1, 2, 1, True, True, False, None)]
    assert [s for s in prog if s in ("sync", "arrive", "wait_full")] == ["sync", "wait_full", "arrive", "sync"]


def test_eligible_rows_are_wgmma_warpgroups_along_m():
    """pp_plan's row test (M >= 64 G, G a power of two) is dot/wgmma's split: G warpgroups along M, none along N."""
    from newt.backend.cuda.dot.wgmma import warpgroups
    for nw in (8, 16):
        for M in (64, 128, 192, 256, 512):
            for N in (16, 64, 128, 256):
                assert (M >= 64 * (nw // 4)) == (warpgroups(M, N, nw) == (nw // 4, 1, False)), (nw, M, N)


def _sass(ck):
    return ws._sass(ck)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d,cfg", BENCH)
def test_sass_takes_turns_with_the_softmax_outside(monkeypatch, d, cfg, causal, dt):
    """SASS: the split as before (``_check_split``: SETMAXNREG both ways, copies in the producer, HGMMA in the
    consumers, the consumers' barrier 1, no spill), plus ``BAR.SYNC 0x2/0x3, 0x100`` and ``BAR.ARV 0x2/0x3,
    0x100``; the HGMMAs of QK chained without a wait between them (ptxas did not serialize the wgmma pipeline);
    and every ``MUFU.EX2`` of the loop (the softmax) after a ``BAR.ARV`` and before the ``BAR.SYNC`` that opens
    P.V's turn -- the point of the ping-pong."""
    _pp(monkeypatch)
    ck = ws.compile_attn(d, cfg, causal, dt=dt)
    assert ck.metadata["ws_pingpong"] == 2
    ws._check_split(ck, cfg[2])
    ins = _sass(ck)
    text = [t for _, t in ins]
    for b in (2, 3):
        assert any(re.search(rf"BAR\.SYNC\.DEFER_BLOCKING 0x{b}, 0x100\b", t) for t in text), b
        assert any(re.search(rf"BAR\.ARV 0x{b}, 0x100\b", t) for t in text), b
    assert ck.metadata.n_spills == 0
    pv = min(k for k, t in enumerate(text) if re.search(r"\bHGMMA\.\S+ R\d+, R\d+", t))  # P.V: A in registers
    hg = [k for k, t in enumerate(text) if re.search(r"\bHGMMA\.\S+ R\d+, gdesc", t) and k < pv]  # QK
    assert len(hg) >= 4 and not any("WARPGROUP.DEPBAR" in text[k] for k in range(hg[0], hg[-1])), \
        "QK's HGMMAs are not serialized"
    arv = [k for k, t in enumerate(text) if re.search(r"BAR\.ARV 0x[23]\b", t)]
    syn = [k for k, t in enumerate(text) if re.search(r"BAR\.SYNC\.DEFER_BLOCKING 0x[23]\b", t)]
    ex2 = [k for k, t in enumerate(text) if "MUFU.EX2" in t and k < pv]
    assert ex2, "the softmax"
    first_arv = min(k for k in arv if k > hg[-1])
    last_sync = max(k for k in syn if k < pv)
    assert all(first_arv < k < last_sync for k in ex2), (first_arv, last_sync, ex2)
    # the whole loop, from the head its back-edge jumps to: QK's HGMMAs, the token passed, the softmax, the turn
    # taken, P.V's HGMMAs -- in that order, nothing of one turn outside it
    addr = [a for a, _ in ins]
    back = [(k, int(m.group(1), 16)) for k, t in enumerate(text)
            if k > pv and (m := re.search(r"\bBRA (?:\S+ )?0x([0-9a-f]+)", t))]
    end, head = next((k, addr.index(a)) for k, a in back if a <= addr[hg[0]])
    def mark(k, t):
        return ("Q" if k in hg else "P" if re.search(r"\bHGMMA\.\S+ R\d+, R\d+", t) else "A" if k in arv
                else "S" if k in syn else "E" if "MUFU.EX2" in t else "")
    marks = [m for k in range(head, end + 1) if (m := mark(k, text[k]))]
    order = "".join(m for i, m in enumerate(marks) if i == 0 or m != marks[i - 1])
    assert order == "QAESP", order


def test_byte_identical_without_the_flag_and_only_its_lines_with_it(monkeypatch):
    """Unset, nothing of the ping-pong is in the code (and the ws code is what test_warp_specialize pins);
    set, the code is the unset code plus the ping-pong's own lines, nothing else changed."""
    for d, cfg in BENCH:
        for causal in (False, True):
            _pp(monkeypatch, False)
            off = ws.compile_attn(d, cfg, causal).asm["cuda"]
            assert "ws_pp_" not in off and "ping-pong" not in off
            _pp(monkeypatch)
            on = ws.compile_attn(d, cfg, causal).asm["cuda"]
            assert on != off and _strip_pp(on) == off


def test_kernels_that_do_not_qualify_are_unchanged(monkeypatch):
    """The flag leaves these byte for byte as they were: the matmul (one dot), the persistent matmul (a tile
    loop around the loop), attention at 4 warps (one warpgroup), attention not warp-specialized."""
    cases = [lambda: ws.compile_mm(), lambda: ws.compile_persistent(), lambda: ws.compile_attn(64, (128, 64, 4, 2)),
             lambda: ws.compile_attn(128, (128, 64, 8, 3), ws=False)]
    for make in cases:
        _pp(monkeypatch, False)
        off = make()
        _pp(monkeypatch)
        on = make()
        assert on.asm["cuda"] == off.asm["cuda"] and "ws_pingpong" not in on.metadata


def test_a_body_that_synchronizes_the_block_falls_back(monkeypatch):
    """``check_body`` rejects a body with a block-wide barrier (a turn would deadlock on it: the model above);
    the kernel is then generated again warp-specialized without the ping-pong."""
    from newt.backend.cuda.emitter import Chunk
    c = Chunk(0)
    c.line("__syncthreads();")
    with pytest.raises(pingpong.PingPongUnfit):
        pingpong.check_body(c)
    pingpong.check_body(Chunk(0))
    _pp(monkeypatch)

    def unfit(chunk):
        raise pingpong.PingPongUnfit
    monkeypatch.setattr(pingpong, "check_body", unfit)
    ck = ws.compile_attn(128, (128, 64, 8, 2))  # (a config no other test compiles: no cache hit)
    assert ck.metadata["producer_warps"] == 4 and "ws_pingpong" not in ck.metadata
    assert "ws_pp_" not in ck.asm["cuda"]


def test_the_flag_is_in_the_cache_key(monkeypatch):
    from newt.runtime.compiler import cache_key

    def key():
        return cache_key(None, {"a": "*fp16"}, {"B": 64}, {}, "sm_90a", 8, 3, False, "fingerprint", None)
    base = key()
    _pp(monkeypatch)
    assert key() != base
    _pp(monkeypatch, False)
    assert key() == base


def test_the_interpreter_ignores_the_flag(monkeypatch):
    from newt.tools.tensor_descriptor import TensorDescriptor
    kernel = newt.jit(interpret=True)(ws.ws_attn.fn)
    g = torch.Generator().manual_seed(0)
    H, N, d, bm, bn = 1, 64, 16, 32, 16
    q, k, v = (torch.randn(H * N, d, generator=g).half() for _ in range(3))
    outs = []
    for on in (False, True):
        _pp(monkeypatch, on)
        o = torch.full((H * N, d), float("nan")).half()
        ds = [TensorDescriptor.from_tensor(t, [bm if i in (0, 3) else bn, d]) for i, t in enumerate((q, k, v, o))]
        kernel[(N // bm, H)](*ds, N, 0.25 * 1.4426950408889634, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=True,
                             WS=True)
        outs.append(o)
    assert torch.equal(outs[0], outs[1]) and not outs[0].isnan().any()


def test_the_benchmarks_newt_pp_column():
    """bench_ws.py: newt_pp is newt_ws plus the flag, on the attention rows only, and its table shows its ratios
    (the column's kernels compile to the ping-pong offline: test_warp_specialize's benchmark test)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_ws
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    assert bench_ws.NEWT_ENV["newt_pp"] == {**bench_ws.NEWT_ENV["newt_ws"], "NEWT_WS_PINGPONG": "1"}
    assert bench_ws.NEWT_ENV["newt_ov"] == {**bench_ws.NEWT_ENV["newt_ws"], "NEWT_WS_OVERLAP": "1"}
    assert bench_ws.PP_KINDS == ("attention",)
    assert bench_ws.SCHEDULE_META == {"newt_pp": "ws_pingpong", "newt_ov": "ws_overlap"}
    e = {"ms": 1.0, "TFLOPs": 400.0}
    cell = {"kind": "attention", "dtype": "float16", "shape": [4, 32, 4096, 128, False],
            "impls": {"newt": e, "newt_ws": e, "newt_pp": {"ms": 0.8, "TFLOPs": 500.0},
                      "newt_ov": {"ms": 0.5, "TFLOPs": 800.0}, "triton": e, "torch": e},
            "newt_ws_vs_newt": 1.0, "ws_vs_triton": 1.0, "ws_vs_torch": 1.0,
            "pp_vs_newt_ws": 1.25, "pp_vs_triton": 1.25, "pp_vs_torch": 1.25,
            "ov_vs_newt_ws": 2.0, "ov_vs_triton": 2.0, "ov_vs_torch": 2.0}
    mm = {"kind": "matmul", "dtype": "float16", "shape": [8192] * 3, "impls": {"newt": e, "newt_ws": e}}
    md = bench_ws.render_md({"environment": {"gpu": "H100"}, "results": [cell, mm]})
    rows = [line for line in md.splitlines() if line.startswith("| attention") or line.startswith("| matmul")]
    assert rows[0].split(" | ")[5:7] == ["500", "800"]
    assert rows[0].endswith("| 1.25x | 1.25x | 1.25x | 2.00x | 2.00x | 2.00x |")
    assert rows[1].split(" | ")[5:7] == ["-", "-"] and rows[1].endswith("| - | - | - | - | - | - |")


# ---------------------------------------------------------------------------
# the intra-warpgroup overlap (NEWT_WS_OVERLAP=1, overlap.py)
# ---------------------------------------------------------------------------


def test_overlap_ring_runs_every_schedule_and_needs_three_slots(monkeypatch):
    """QK one iteration ahead on the ring's model: every trip count up to three rings of 3-5 slots and every
    schedule of ``warpspec``'s tests; two slots deadlock (hence ``num_stages + 1 >= 3``); and the model catches
    a release before the wait that retires the slot's wgmma."""
    for nb in (3, 4, 5):
        for n, order in itertools.product(range(0, 3 * nb + 2), ws.ORDERS):
            trace = overlap.simulate(n, nb, order)
            assert [x for a, x in trace if a == "p"] == list(range(n))
    with pytest.raises(AssertionError, match="deadlock"):
        overlap.simulate(5, 2, "pc")
    good = overlap.program

    def early(n):  # slot j released right after P.V(j) is issued, before the wait that retires it
        out = []
        for k, i in good(n):
            if k == "release":
                continue
            out.append((k, i))
            if k == "issue_pv":
                out.append(("release", i))
        return out
    monkeypatch.setattr(overlap, "program", early)
    with pytest.raises(AssertionError, match="released while read|refills slot|deadlock|reads slot"):
        for order in ws.ORDERS:
            overlap.simulate(6, 3, order)


def _ov(monkeypatch, on=True):
    monkeypatch.delenv("NEWT_WS_PINGPONG", raising=False)
    if on:
        monkeypatch.setenv("NEWT_WS_OVERLAP", "1")
    else:
        monkeypatch.delenv("NEWT_WS_OVERLAP", raising=False)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d,cfg", BENCH)
def test_overlap_code_issues_the_next_qk_before_the_softmax(monkeypatch, d, cfg, causal):
    """Before the loop: the first slot waited for (guarded), QK issued and waited for.  In the loop: the next
    slot waited for (guarded: the last iteration issues on a slot nobody fills), the next QK committed and not
    waited for, the softmax on the previous S, P.V committed and waited for (retiring both), the next S fenced
    and carried, the slot of the previous iteration released -- the model's ``program``."""
    _ov(monkeypatch)
    ck = ws.compile_attn(d, cfg, causal)
    assert ck.metadata["ws_overlap"] == 1 and "ws_pingpong" not in ck.metadata
    src = ck.asm["cuda"]
    ev = _events(src)
    assert ev == ["wait_full", "commit", "wait0", "loop", "wait_full", "commit", "wait1", "commit", "wait0",
                  "release", "wait0", "release"], ev  # (wait1 after the next QK: nothing older is pending there)
    loop = src.split("for (int v", 1)[1]
    assert re.search(r"if \(0 < \w+\) mbar_wait", src) and re.search(r"if \(\(v\d+ \+ 64\) < \w+\) mbar_wait", loop)
    nxt = re.search(r"wgmma_m64n\d+k16_f16_00\(&(acc\d+)\[0\], da, db\);", loop).group(1)
    body = loop.split("ex2_approx_ftz", 1)[0]
    assert f"wgmma_keep({nxt}[i])" not in body and f"= {nxt}[i]" not in body, "nothing reads the next S before its wait"
    after = loop.split("wgmma_wait<0>();", 1)[1]
    assert after.index(f"wgmma_keep({nxt}[i])") < after.index(f"= {nxt}[i];  // S of the next iteration")
    # the model's program, two iterations, in the same order
    assert [k for k, _ in overlap.program(2)] == ["wait", "issue_qk", "wait_all", "wait", "issue_qk", "issue_pv",
                                                  "wait_all", "release", "issue_qk", "issue_pv", "wait_all",
                                                  "release", "release"]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d,cfg", BENCH)
def test_overlap_sass_runs_the_next_qk_during_the_softmax(monkeypatch, d, cfg, causal):
    """SASS of the loop: the next QK's HGMMAs issued among the softmax's MUFU.EX2 (ptxas interleaves them; at
    least 3/4 of the exp2 after its first HGMMA: 34/34 of 34 at d=128, 31 and 34 at d=64), and no
    ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` from there to P.V's last HGMMA (the QK is not waited for before the
    softmax; ptxas did not serialize the wgmmas: C7514/C7515 would put a wait after each); no spill."""
    _ov(monkeypatch)
    ck = ws.compile_attn(d, cfg, causal)
    assert ck.metadata["ws_overlap"] == 1
    ws._check_split(ck, cfg[2])
    ins = _sass(ck)
    text = [t for _, t in ins]
    addr = [a for a, _ in ins]
    pv = [k for k, t in enumerate(text) if re.search(r"\bHGMMA\.\S+ R\d+, R\d+", t)]
    back = [(k, int(m.group(1), 16)) for k, t in enumerate(text)
            if k > pv[-1] and (m := re.search(r"\bBRA (?:\S+ )?0x([0-9a-f]+)", t))]
    end, head = next((k, addr.index(a)) for k, a in back if a < addr[pv[0]])
    qk = [k for k in range(head, end) if re.search(r"\bHGMMA\.\S+ R\d+, gdesc", text[k])]
    ex2 = [k for k in range(head, end) if "MUFU.EX2" in text[k]]
    assert qk and ex2 and 4 * sum(k > qk[0] for k in ex2) >= 3 * len(ex2) and max(pv) < end
    assert not [k for k in range(qk[0], max(pv)) if re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0\b", text[k])]
    assert ck.metadata.n_spills == 0


def test_overlap_unset_or_with_the_pingpong_changes_nothing(monkeypatch):
    """Unset, the code is the plain warp-specialized loop; with NEWT_WS_PINGPONG=1 as well both are taken, as
    one schedule (``ppov.py``; its tests: test_ws_ppov.py); the matmul (one dot) is left as it was."""
    for d, cfg in BENCH:
        _ov(monkeypatch, False)
        off = ws.compile_attn(d, cfg).asm["cuda"]
        assert "qk_cur" not in off
        _ov(monkeypatch)
        monkeypatch.setenv("NEWT_WS_PINGPONG", "1")
        both = ws.compile_attn(d, cfg)
        assert both.metadata["ws_pingpong"] == 2 and both.metadata["ws_overlap"] == 1
        assert "ws_pp_arrive_last" in both.asm["cuda"]
    _ov(monkeypatch, False)
    mm = ws.compile_mm().asm["cuda"]
    _ov(monkeypatch)
    assert ws.compile_mm().asm["cuda"] == mm


def test_the_overlap_flag_is_in_the_cache_key(monkeypatch):
    from newt.runtime.compiler import cache_key

    def key():
        return cache_key(None, {"a": "*fp16"}, {"B": 64}, {}, "sm_90a", 8, 3, False, "fingerprint", None)
    base = key()
    _ov(monkeypatch)
    assert key() != base
    _ov(monkeypatch, False)
    assert key() == base


# ---------------------------------------------------------------------------
# GPU (a subprocess with a timeout: a deadlocked turn fails the test instead of hanging the suite)
# ---------------------------------------------------------------------------

PP_CASES = [(d, causal, (128, 64, 8, 3)) for d in (64, 128) for causal in (False, True)] + \
           [(128, False, (128, 128, 8, 2))]


def _gpu_attention(meta="ws_pingpong", want=2):
    ws.gpu_attention(PP_CASES, {meta: want}, f"{meta} attention")


def _run_gpu_part(part: str, timeout: int):
    return ws._run_gpu_part(part, timeout, script=__file__, hang="deadlocked turns?")


@pytest.mark.gpu
def test_pingpong_attention_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    out = _run_gpu_part("attention", 45)
    assert out.count("max err") == 2 * len(PP_CASES)


@pytest.mark.gpu
def test_overlapped_attention_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    out = _run_gpu_part("overlap", 45)
    assert out.count("max err") == 2 * len(PP_CASES)


if __name__ == "__main__":  # the GPU parts, run by the tests above in a subprocess
    os.environ["NEWT_TMA"] = "1"
    os.environ.pop("NEWT_WS_PINGPONG", None)
    os.environ.pop("NEWT_WS_OVERLAP", None)
    if sys.argv[1] == "attention":
        os.environ["NEWT_WS_PINGPONG"] = "1"
        _gpu_attention("ws_pingpong", 2)
    else:
        os.environ["NEWT_WS_OVERLAP"] = "1"
        _gpu_attention("ws_overlap", 1)
