"""benchmarks/bench.py without a GPU: its newt kernels compile, and the report is built from results."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

import newt

from .conftest import needs_backend

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("newt_bench_script", ROOT / "benchmarks" / "bench.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        import common
    finally:
        sys.path.pop(0)
    return mod, common


def test_template_is_the_same_source_for_both_packages():
    bench, common = load_bench()
    import string
    newt_src = string.Template(bench.TEMPLATE).substitute(P="newt", L="nl")
    triton_src = string.Template(bench.TEMPLATE).substitute(P="triton", L="tl")
    assert re.sub(r"\bnl\b", "tl", re.sub(r"\bnewt\b", "triton", newt_src)) == triton_src
    assert "import newt.language as nl" in newt_src and "triton" not in newt_src


@needs_backend
@pytest.mark.parametrize("which", ["add", "softmax", "layernorm", "matmul", "matmul_fp32"])
def test_bench_kernels_compile_for_the_h200(which):
    bench, common = load_bench()
    m = common.instantiate(bench.TEMPLATE, "newt", "bench_offline")
    f16 = "*fp16:16"
    if which == "add":
        cfg = m.add_kernel.configs[0]
        ck = newt.compile(m.add_kernel, signature={"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "out_ptr": "*fp32:16",
                                                   "n": "i32:16"}, constexprs=cfg.kwargs, num_warps=cfg.num_warps)
        assert "LDG.E.128" in ck.asm["sass"]
    elif which == "softmax":
        ck = newt.compile(m.softmax_kernel, signature={"out_ptr": f16, "in_ptr": f16, "in_stride": "i32:16",
                                                       "out_stride": "i32:16", "n_cols": "i32:16"},
                          constexprs={"BLOCK": 4096}, num_warps=8)
        assert "LDG.E.128" in ck.asm["sass"]
    elif which == "layernorm":
        ck = newt.compile(m.layernorm_kernel, signature={"X": f16, "Y": f16, "W": f16, "B": f16, "Mean": "*fp32:16",
                                                         "Rstd": "*fp32:16", "stride": "i32:16", "N": "i32:16",
                                                         "eps": "fp32"}, constexprs={"BLOCK": 8192}, num_warps=16)
    else:
        fp32 = which == "matmul_fp32"
        kernel = m.matmul_kernel_fp32 if fp32 else m.matmul_kernel
        cfg = kernel.configs[2]
        p = "*fp32:16" if fp32 else f16
        ck = newt.compile(kernel, signature={"a_ptr": p, "b_ptr": p, "c_ptr": p, "M": "i32:16", "N": "i32:16",
                                             "K": "i32:16", "stride_am": "i32:16", "stride_bk": "i32:16",
                                             "stride_cm": "i32:16"},
                          constexprs=dict(cfg.kwargs, stride_ak=1, stride_bn=1, stride_cn=1),
                          num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        assert "HGMMA" in ck.asm["sass"] or "HMMA" in ck.asm["sass"]  # wgmma on sm_90a (tf32 too)
    assert ck.metadata.n_spills == 0


def test_report_from_results(tmp_path):
    bench, common = load_bench()
    anchors = {("add", (1 << 24,), "float32", "triton"): 0.0525, ("softmax", (8192, 4096), "float16", "triton"): 0.0372}
    results = [
        {"kind": "add", "shape": [1 << 24], "dtype": "float32", "impls": {
            "newt": {"ms": 0.050, "GBps": 4026.0, "ok": True, "error": 0.0, "config": "BLOCK: 4096, num_warps: 8"},
            "triton": {"ms": 0.0525, "GBps": 3834.0, "ok": True, "error": 0.0},
            "torch": {"ms": 0.053, "GBps": 3800.0, "ok": True, "error": 0.0}}},
        {"kind": "softmax", "shape": [8192, 4096], "dtype": "float16", "impls": {
            "newt": {"ms": 0.040, "GBps": 3355.0, "ok": True, "error": 1e-3},
            "triton": {"ms": 0.037, "GBps": 3600.0, "ok": True, "error": 1e-3},
            "torch": {"failed": "RuntimeError: boom"}}},
        {"kind": "matmul", "shape": [4096, 4096, 4096], "dtype": "float16", "impls": {
            "newt": {"ms": 0.30, "TFLOPs": 458.0, "ok": True, "error": 2e-4},
            "triton": {"ms": 0.22, "TFLOPs": 630.0, "ok": True, "error": 2e-4},
            "torch": {"ms": 0.21, "TFLOPs": 654.0, "ok": True, "error": 0.0}}},
        {"kind": "layernorm", "shape": [8192, 16384], "dtype": "float32", "skipped": "time budget"},
    ]
    summary = bench.score(results, anchors)
    assert summary["memory_bound_geomean_vs_triton"] == pytest.approx((1.05 * 0.925) ** 0.5)
    assert summary["memory_bound_min_vs_triton"] == pytest.approx(0.925)
    assert summary["memory_bound_worst_cell"] == "softmax 8192x4096 float16"
    assert not summary["memory_bound_target_met"]
    assert results[0]["vs_anchor_triton"] == pytest.approx(1.05)
    assert summary["failures"] == ["softmax [8192, 4096] float16 torch: RuntimeError: boom"]
    data = {"info": {"gpu": "NVIDIA H200", "date": "today"}, "results": results, "summary": summary,
            "anchors": "/x/h200.json"}
    bench.write_reports(data, tmp_path)
    md = (tmp_path / "results.md").read_text()
    assert "# newt vs Triton vs torch — NVIDIA H200" in md
    assert "| 16777216 | float32 | 0.0500 | 0.0525 | 0.0530 | 4026 | 1.05x | 1.06x | 1.05x |" in md
    assert "**not met**" in md and "time budget" in md
    assert json.loads((tmp_path / "results.json").read_text())["summary"]["memory_bound_worst_cell"]
    # rescoring an existing results.json works offline
    assert bench.main(["--rescore", str(tmp_path / "results.json"), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "results.md").exists()
