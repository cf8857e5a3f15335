"""benchmarks/run_device.sh's ``hopper25`` part (issue 24), checked without a GPU so the device call cannot
fail on a typo: its bench.py command line parses, selects the attention rows (d=64/128, causal and not, fp16
and bf16, 4x32x4096 and 16x16x1024) before the fp16/bf16 matmul rows 2048^3-8192^3, and its variant sets only
flags the backend reads; the GPU tests it names exist and carry the gpu mark."""

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
    assert len(cells) == len(attn) + len(mm) and cells[:len(attn)] == attn
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
