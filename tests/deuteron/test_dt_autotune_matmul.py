"""Why deuteron's matmul trails Triton (0.97x, H100, 2026-12-06) is not its config search (docs/deuteron.md,
"Benchmarks"): the quick search starts from Triton's winning config for 4096^3 fp16, and at that config the
generated newt kernel compiles for sm_90a no heavier than the hand-written newt kernel of
benchmarks/deuteron_bench.py (static shapes: no masks, no index wrapping)."""

from __future__ import annotations

import os
import re
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "deuteron"))
sys.path.insert(0, os.path.join(ROOT, "tests", "backend"))

from matmul import matmul  # noqa: E402  (examples/deuteron/matmul.py)

from deuteron.autotune import Tuner  # noqa: E402

#: Triton's (and hand-written newt's) winner at 4096^3 fp16 on the H100 (results_hopper24_2026-12-06.md)
TRITON_WINNER = dict(block_sizes=[128, 256, 64], num_warps=8, num_stages=3, l2_groupings=[8])


def _args():
    return torch.empty(4096, 4096, dtype=torch.float16), torch.empty(4096, 4096, dtype=torch.float16)


def test_quick_search_starts_from_tritons_matmul_winner():
    x, y = _args()
    b = matmul._bind((x, y), {})
    t = Tuner(matmul, matmul._entry(b), b, "quick", None, None)
    default = matmul.default_config(x, y)
    seeds = [c.to_dict() for c in t.seed_configs(default)] + [default.to_dict()]
    assert any(all(s.get(k) == v for k, v in TRITON_WINNER.items()) for s in seeds), seeds


def _sass_counts(fn, warps, stages):
    from newt.backend.cuda import compile_cuda, generate_cuda, sass
    m = generate_cuda(fn, "sm_90a", warps, stages)
    b = compile_cuda(m)
    try:
        text = sass(b.cubin)
    except RuntimeError as e:
        pytest.skip(str(e))
    ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", text, re.M)
    return b, {op: ops.count(op) for op in ("HGMMA", "LDGSTS")}, len(ops)


def test_generated_matmul_is_no_heavier_than_the_hand_written_one(tmp_path):
    pytest.importorskip("cuda.bindings.nvrtc")
    from kernels import P, aligned, f16, i32, ir  # tests/backend/kernels.py

    x, y = _args()
    cfg = matmul.default_config(x, y).replace(**TRITON_WINNER)
    src = matmul.to_newt_source(x, y, config=cfg)
    body = src.split("def _matmul_launch")[0]
    # static shapes: unmasked loads and stores, no ``% M`` index wrapping (the only ``%`` is the L2 swizzle's)
    assert "mask" not in body and not re.search(r"%\s*4096", body), body
    gen = tmp_path / "generated.py"
    gen.write_text(src)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import deuteron_bench
    hand = tmp_path / "hand.py"
    hand.write_text(deuteron_bench.TEMPLATE.replace("$P", "newt").replace("$L", "nl"))
    bm, bn, bk = TRITON_WINNER["block_sizes"]
    w, s = TRITON_WINNER["num_warps"], TRITON_WINNER["num_stages"]
    fd = ir(str(gen), "_matmul_kernel", {"x": P(f16), "y": P(f16), "out": P(f16)},
            {"_BLOCK_0": bm, "_BLOCK_1": bn, "_BLOCK_2": bk}, aligned("x", "y", "out"), w, s)
    # the hand-written kernel as the runtime specializes it for contiguous 4096^3: unit strides constant,
    # the rest divisible by 16
    ints = ("M", "N", "K", "sam", "sbk", "scm")
    fh = ir(str(hand), "matmul_kernel", {"a": P(f16), "b": P(f16), "c": P(f16), **{n: i32 for n in ints}},
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "sak": 1, "sbn": 1, "scn": 1},
            aligned("a", "b", "c", *ints), w, s)
    bd, od, nd = _sass_counts(fd, w, s)
    bh, oh, nh = _sass_counts(fh, w, s)
    assert bd.n_spills == 0 and bh.n_spills == 0
    assert od == oh and od["HGMMA"] > 0, (od, oh)  # the same tensor-core and async-copy work
    assert bd.n_regs <= bh.n_regs, (bd.n_regs, bh.n_regs)
    assert nd <= nh, (nd, nh)
