"""benchmarks/run_device.sh's ``hopper25`` part (issue 24), checked without a GPU so the device call cannot
fail on a typo: its bench.py command line parses, selects the fp16/bf16 matmul rows 2048^3-8192^3, then the
attention rows (d=128 before d=64, causal and not, fp16 and bf16, 4x32x4096 and 16x16x1024), and its variant
sets only flags the backend reads; the GPU tests it names exist and carry the gpu mark."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _block() -> str:
    text = (ROOT / "benchmarks" / "run_device.sh").read_text()
    return text.split("\n    hopper25)\n", 1)[1].split(";;", 1)[0].replace("\\\n", " ")


def _bench_args() -> list[str]:
    cmd = re.search(r"python3 benchmarks/bench\.py (.*?) --out ", _block()).group(1)
    return shlex.split(cmd)


def test_hopper25_selects_the_cells_and_a_real_variant(monkeypatch, tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    seen = {}
    monkeypatch.setattr(bench, "offline", lambda selected, variants: seen.update(cells=selected, variants=variants)
                        or 0)
    monkeypatch.setattr(bench, "VARIANT_ENV", {})
    assert bench.main(_bench_args() + ["--out", str(tmp_path), "--offline"]) == 0
    cells = seen["cells"]
    attn = [c for c in cells if c[0] == "attention"]
    mm = [c for c in cells if c[0] == "matmul"]
    assert len(cells) == len(attn) + len(mm) and cells[:len(mm)] == mm
    assert [c[1][3] for c in attn] == [128] * 8 + [64] * 8  # d=128 (the widest gap) before a budget can cut
    assert {(c[1], c[2]) for c in attn} == {((z, h, n, d, causal), dt) for z, h, n in ((4, 32, 4096), (16, 16, 1024))
                                            for d in (64, 128) for causal in (0, 1)
                                            for dt in ("float16", "bfloat16")}
    assert {(c[1], c[2]) for c in mm} == {((s, s, s), dt) for s in (2048, 4096, 8192) for dt in ("float16", "bfloat16")}
    (name, env), = seen["variants"].items()
    assert name == "newt[flags]"
    assert env == {"NEWT_CPASYNC_FENCE": "0", "NEWT_PIPE_ISSUE": "late", "NEWT_CONVERT_ADDR": "split"}
    backend = "".join(p.read_text() for p in (ROOT / "newt" / "backend" / "cuda").rglob("*.py"))
    for k, v in env.items():
        assert f'"{k}"' in backend and f'"{v}"' in backend, k


def test_hopper25_gpu_tests_exist():
    files = re.findall(r"tests/backend/\w+\.py", _block())
    assert files
    for f in files:
        text = (ROOT / f).read_text()
        assert "@pytest.mark.gpu" in text, f


def test_variant_arguments_are_checked():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert bench.parse_variant("x:NEWT_A=1,NEWT_B=late") == ("newt[x]", {"NEWT_A": "1", "NEWT_B": "late"})
    for bad in ("x", "x:", "x:FOO=1", "1x:NEWT_A=1", "x:NEWT_A"):
        try:
            bench.parse_variant(bad)
        except ValueError:
            continue
        raise AssertionError(bad)


def test_variant_rows_are_timed_checked_and_reported(monkeypatch):
    """run_cells -> score -> render_md with a variant, on stand-ins for the GPU calls: the variant runs the
    newt launch with its own module under its flags into newt's (re-poisoned) output, is timed in the same
    rounds, and gets its ratios and table."""
    import os
    import types

    torch = __import__("pytest").importorskip("torch")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    ref = torch.arange(8.0)
    seen = []

    def fake_case(kind, shape, dtype):
        outs = {i: torch.full((8,), float("nan")) for i in ("newt", "triton", "torch")}

        def kernel(impl):
            def call(m):
                seen.append((impl, m.tag, os.environ.get("NEWT_PIPE_ISSUE")))
                if m.tag != "broken":
                    outs[impl].copy_(ref)
            return call
        calls = {"newt": kernel("newt"), "triton": kernel("triton"), "torch": lambda m: outs["torch"].copy_(ref)}
        return outs, calls, ref, ("TFLOPs", 2e9)

    speed = {"bench": 2.0, "variant": 1.0, "triton": 1.5}

    def fake_ms(call, warmup, rep):
        call()
        return speed.get(seen[-1][1], 3.0) if seen else 3.0
    monkeypatch.setattr(bench, "make_case", fake_case)
    monkeypatch.setattr(bench, "median_ms", fake_ms)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.delenv("NEWT_PIPE_ISSUE", raising=False)
    monkeypatch.setattr(bench, "VARIANT_ENV", {"newt[flags]": {"NEWT_PIPE_ISSUE": "late"}})
    mod = lambda tag: types.SimpleNamespace(tag=tag, attn_fwd=types.SimpleNamespace(best_config=f"cfg-{tag}"))
    modules = {"newt": mod("bench"), "newt[flags]": mod("variant"), "triton": mod("triton")}
    results = bench.run_cells([("attention", (1, 1, 64, 64, 0), "float16")], modules, float("inf"), lambda s: None,
                              rounds=2)
    assert ("newt", "variant", "late") in seen and ("newt", "bench", None) in seen
    assert os.environ.get("NEWT_PIPE_ISSUE") is None
    im = results[0]["impls"]
    assert im["newt[flags]"]["ok"] and im["newt[flags]"]["config"] == "cfg-variant"
    summary = bench.score(results, {})
    v = results[0]["variants"]["newt[flags]"]
    assert abs(v["vs_newt"] - 2.0) < 1e-9 and abs(v["vs_triton"] - 1.5) < 1e-9
    assert abs(summary["variants"]["newt[flags]"]["attention_geomean_vs_newt"] - 2.0) < 1e-9
    md = bench.render_md({"info": {}, "summary": summary, "results": results,
                          "variant_env": {"newt[flags]": {"NEWT_PIPE_ISSUE": "late"}}})
    assert "## Variant `newt[flags]` (NEWT_PIPE_ISSUE=late), same run" in md and "| 2.00x | 1.50x |" in md
    # a variant that leaves newt's output unwritten is caught (the output is poisoned before its first call)
    modules["newt[flags]"] = mod("broken")
    results = bench.run_cells([("attention", (1, 1, 64, 64, 0), "float16")], modules, float("inf"), lambda s: None,
                              rounds=1)
    assert results[0]["impls"]["newt[flags]"]["ok"] is False and results[0]["impls"]["newt"]["ok"]
