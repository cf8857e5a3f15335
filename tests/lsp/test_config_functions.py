"""Compile asks only for what the file does not give (issue 23): autotune configs built by a function of the
file (``configs=get_autotune_config()``, the tutorials' and examples' form) are evaluated statically —
literal-building statements only, nothing of the workspace runs — so Compile on an autotuned matmul needs no
quick pick, while a constexpr that truly depends on run-time data (softmax's ``next_power_of_2(n_cols)``)
is still asked for."""

from __future__ import annotations

import pytest

from lsp_server.analysis import analyze, lsp_diagnostics
from lsp_server.concrete import SpecError, concrete_spec
from newt.frontend import analyze_source

from .conftest import ROOT

KERNEL = '''
@triton.autotune(configs={configs}, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = tl.arange(0, BLOCK_SIZE_N)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc)
'''

TUTORIAL = '''import torch
import triton
import triton.language as tl


def is_cuda():
    return triton.runtime.driver.active.get_current_target().backend == "cuda"


def get_cuda_autotune_config():
    return [
        triton.Config({'BLOCK_SIZE_M': 128, 'BLOCK_SIZE_N': 256, 'BLOCK_SIZE_K': 64, 'GROUP_SIZE_M': 8}, num_stages=3,
                      num_warps=8),
        triton.Config({'BLOCK_SIZE_M': 64, 'BLOCK_SIZE_N': 256, 'BLOCK_SIZE_K': 32, 'GROUP_SIZE_M': 8}, num_stages=4,
                      num_warps=4),
    ]


def get_hip_autotune_config():
    sizes = [
        {'BLOCK_SIZE_M': 32, 'BLOCK_SIZE_N': 32, 'BLOCK_SIZE_K': 32, 'GROUP_SIZE_M': 6},
    ]
    return [triton.Config(s | {'matrix_instr_nonkdim': 16}, num_warps=8, num_stages=2) for s in sizes]


def get_autotune_config():
    if is_cuda():
        return get_cuda_autotune_config()
    else:
        return get_hip_autotune_config()
''' + KERNEL.format(configs="get_autotune_config()")

LOOP = '''import triton
import triton.language as tl


def configs():
    out = []
    for bm in (64, 128):
        for bn in [64, 128]:
            if bm * bn > 8192:
                continue
            out.append(triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": 32,
                                      "GROUP_SIZE_M": 8}, num_warps=4))
    return out


CONFIGS = configs()
''' + KERNEL.format(configs="CONFIGS")


def test_the_tutorial_form_gives_its_configs_and_compile_needs_no_pick():
    fa = analyze_source(TUTORIAL, "t.py")
    ka = fa.kernel_named("matmul_kernel")
    labels = [r.spec.label for r in ka.results[1:]]
    assert len(labels) == 3, labels  # both paths of `if is_cuda()`: 2 CUDA configs and 1 HIP config
    assert "BLOCK_SIZE_M=128, BLOCK_SIZE_N=256" in labels[0]
    # the HIP path's matrix_instr_nonkdim is no parameter of the kernel: not an error on an undecidable path
    assert [d.code for d in fa.diagnostics if d.severity == 1] == []
    a = analyze(TUTORIAL, "file:///t.py")
    c = concrete_spec(a, a.kernel_named("matmul_kernel"))  # no SpecError: no quick pick
    assert c.constexprs == {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
    assert (c.num_warps, c.num_stages) == (8, 3)
    assert not [d for d in lsp_diagnostics(a) if d.severity == 1]


def test_a_config_key_that_is_no_parameter_is_still_an_error_on_a_decided_path():
    text = TUTORIAL.replace("    if is_cuda():\n        return get_cuda_autotune_config()\n    else:\n"
                            "        return get_hip_autotune_config()", "    return get_hip_autotune_config()")
    fa = analyze_source(text, "t.py")
    assert [d.code for d in fa.diagnostics if d.severity == 1] == ["N060"]


def test_loops_and_appends_build_configs():
    fa = analyze_source(LOOP, "l.py")
    labels = [r.spec.label for r in fa.kernel_named("matmul_kernel").results[1:]]
    assert len(labels) == 3, labels  # 128x128 skipped by the `continue`
    assert not any("BLOCK_SIZE_M=128, BLOCK_SIZE_N=128" in x for x in labels)
    assert all("BLOCK_SIZE_K=32" in x for x in labels)


def test_a_function_that_does_more_than_build_literals_is_not_run():
    text = LOOP.replace("    out = []\n", "    out = []\n    print('side effect')\n")
    fa = analyze_source(text, "l.py")
    assert len(fa.kernel_named("matmul_kernel").results) == 1  # generic only: the configs are unknown
    assert [d.code for d in fa.diagnostics if d.severity == 1] == []


def test_compile_on_the_examples_asks_only_for_run_time_values():
    """examples/matmul.py (configs=configs(), `if INTERPRET:` undecidable): no pick; fused_softmax's
    BLOCK_SIZE = next_power_of_2(n_cols) of a tensor's shape: from its harness example, else asked for."""
    path = ROOT / "examples" / "matmul.py"
    a = analyze(path.read_text(encoding="utf-8"), path.as_uri())
    ka = a.kernel_named("matmul_kernel")
    assert len(ka.results) == 11  # generic + 2 interpreter configs + 8 GPU configs
    c = concrete_spec(a, ka)
    assert set(c.constexprs) >= {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"}
    path = ROOT / "examples" / "fused_softmax.py"
    text = path.read_text(encoding="utf-8")
    a = analyze(text, path.as_uri())
    # the file's harness example gives BLOCK_SIZE: Compile uses it
    assert concrete_spec(a, a.kernel_named("softmax_kernel")).constexprs["BLOCK_SIZE"] == 1024
    # without it, the launch's next_power_of_2(n_cols) of a tensor's shape is asked for, with the reason
    start, end = text.index("@nh.example(softmax_kernel)"), text.index("def main(")
    a = analyze(text[:start] + text[end:], path.as_uri())
    with pytest.raises(SpecError) as ei:
        concrete_spec(a, a.kernel_named("softmax_kernel"))
    assert "BLOCK_SIZE" in ei.value.data["missing"] and "only known at run time" in str(ei.value)


def test_every_example_kernel_compiles_without_a_quick_pick():
    """With the configs, the launches and the harness examples read statically, no kernel of examples/ needs
    a pick (before: 6 of them did); attention's CAUSAL comes from its example's `for causal in (False, True)`,
    its sm_scale is the example's fp32 literal, its pointers the example's fp16 tensors."""
    for path in sorted((ROOT / "examples").glob("*.py")):
        a = analyze(path.read_text(encoding="utf-8"), path.as_uri())
        for ka in a.kernels:
            if not ka.helper:
                concrete_spec(a, ka)  # raises SpecError when a quick pick would be needed
    path = ROOT / "examples" / "attention.py"
    a = analyze(path.read_text(encoding="utf-8"), path.as_uri())
    c = concrete_spec(a, a.kernel_named("attention_fwd"))
    assert c.constexprs["CAUSAL"] is False and str(c.arg_types["sm_scale"]) == "fp32"
    assert str(c.arg_types["Q"]) == "*fp16"
