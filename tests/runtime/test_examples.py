"""The examples: they run through the interpreter here, compile to cubin for sm_80 and sm_90a (no spills, the
expected SASS), and run on the GPU in the gpu suite."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import newt

from .conftest import needs_backend, needs_interpreter

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["vector_add", "fused_softmax", "layer_norm", "matmul", "attention"]
TARGETS = ["sm_80", "sm_90a"]


def run_example(name: str, env_extra: dict, timeout=900):
    env = dict(os.environ)
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, str(ROOT / "examples" / f"{name}.py")], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=str(ROOT))


@needs_interpreter
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_through_the_interpreter(name, isolated_cache):
    r = run_example(name, {"NEWT_INTERPRET": "1", "NEWT_CACHE_DIR": str(isolated_cache)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches torch" in r.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_on_the_gpu(name):
    r = run_example(name, {"NEWT_INTERPRET": "0"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches torch" in r.stdout and "interpreter" not in r.stdout


# --- offline compilation of every example kernel -------------------------------------------------


def load_example(name: str):
    """Import an example as compiled code (NEWT_INTERPRET=0 while importing: the GPU configs)."""
    old = os.environ.get("NEWT_INTERPRET")
    os.environ["NEWT_INTERPRET"] = "0"
    try:
        spec = importlib.util.spec_from_file_location(f"newt_example_{name}", ROOT / "examples" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if old is None:
            os.environ.pop("NEWT_INTERPRET", None)
        else:
            os.environ["NEWT_INTERPRET"] = old
    return mod


def ptr(dtype):
    return f"*{dtype}:16"


def i32(*names):
    return {n: "i32:16" for n in names}


def example_specs():
    """(example, kernel attribute, signature, constexprs, num_warps, num_stages, SASS checks) as launched."""
    specs = []
    for dt in ("fp32", "fp16"):
        specs.append(("vector_add", "add_kernel", {"x_ptr": ptr(dt), "y_ptr": ptr(dt), "out_ptr": ptr(dt),
                                                   **i32("n_elements")}, {"BLOCK_SIZE": 1024}, 4, 3, [r"LDG\.E\.128",
                                                                                                      r"STG\.E\.128"]))
        specs.append(("fused_softmax", "softmax_kernel", {"out_ptr": ptr(dt), "in_ptr": ptr(dt),
                                                          **i32("in_row_stride", "out_row_stride", "n_rows", "n_cols")},
                      {"BLOCK_SIZE": 4096, "num_stages": 4}, 8, 4, [r"LDG\.E\.128"]))
        specs.append(("layer_norm", "layer_norm_fwd", {"X": ptr(dt), "Y": ptr(dt), "W": ptr(dt), "B": ptr(dt),
                                                       "Mean": ptr("fp32"), "Rstd": ptr("fp32"),
                                                       **i32("row_stride", "N"), "eps": "fp32"},
                      {"BLOCK_N": 4096}, 16, 3, [r"LDG\.E\.128"]))
    specs.append(("layer_norm", "layer_norm_bwd_dx", {"DX": ptr("fp16"), "DY": ptr("fp16"), "PartialDW": ptr("fp32"),
                                                      "PartialDB": ptr("fp32"), "X": ptr("fp16"), "W": ptr("fp16"),
                                                      "Mean": ptr("fp32"), "Rstd": ptr("fp32"),
                                                      **i32("row_stride", "N")},
                  {"GROUP": 64, "BLOCK_N": 4096}, 16, 3, [r"(ATOMG|RED)\.E\.ADD\.F32"]))
    specs.append(("layer_norm", "layer_norm_bwd_dwdb", {"PartialDW": ptr("fp32"), "PartialDB": ptr("fp32"),
                                                        "DW": ptr("fp16"), "DB": ptr("fp16"), **i32("N")},
                  {"GROUP": 64, "BLOCK_N": 128}, 4, 3, []))
    for dt in ("fp16", "bf16"):
        for cfg in ((128, 128, 64, 4, 4), (64, 128, 32, 4, 4)):
            bm, bn, bk, stages, warps = cfg
            specs.append(("matmul", "matmul_kernel", {"a_ptr": ptr(dt), "b_ptr": ptr(dt), "c_ptr": ptr(dt),
                                                      **i32("M", "N", "K", "stride_am", "stride_bk", "stride_cm")},
                          {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": bm, "BLOCK_N": bn,
                           "BLOCK_K": bk, "GROUP_M": 8, "EPILOGUE": None}, warps, stages, ["HG?MMA"]))
    specs.append(("matmul", "matmul_kernel", {"a_ptr": ptr("fp16"), "b_ptr": ptr("fp16"), "c_ptr": ptr("fp16"),
                                              **i32("M", "N", "K", "stride_am", "stride_bk", "stride_cm")},
                  {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32,
                   "GROUP_M": 8, "EPILOGUE": "leaky_relu"}, 4, 4, ["HG?MMA"]))
    for causal in (False, True):
        specs.append(("attention", "attention_fwd",
                      {"Q": ptr("fp16"), "K": ptr("fp16"), "V": ptr("fp16"), "Out": ptr("fp16"), "sm_scale": "fp32",
                       **i32("stride_qz", "stride_qh", "stride_qm", "stride_kz", "stride_kh", "stride_kn",
                             "stride_vz", "stride_vh", "stride_vn", "stride_oz", "stride_oh", "stride_om", "H",
                             "N_CTX")},
                      {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": causal}, 8, 3, ["HG?MMA"]))
    return specs


SPECS = example_specs()


@needs_backend
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("spec", SPECS, ids=[f"{s[1]}-{i}" for i, s in enumerate(SPECS)])
def test_example_kernel_compiles_offline(spec, target):
    name, attr, sig, cx, warps, stages, sass_needles = spec
    mod = load_example(name)
    kernel = getattr(mod, attr)
    cx = dict(cx)
    if cx.get("EPILOGUE") == "leaky_relu":
        cx["EPILOGUE"] = mod.leaky_relu
    ck = newt.compile(kernel, signature=sig, constexprs=cx, target=target, num_warps=warps, num_stages=stages)
    md = ck.metadata
    assert md.n_spills == 0, f"{attr} spills {md.n_spills} bytes on {target} ({md.n_regs} registers)"
    sass = ck.asm["sass"]
    assert f"code for {target}" in sass
    for needle in sass_needles:
        assert re.search(rf"\b{needle}", sass), f"{attr}: no {needle} in the SASS for {target}"
