"""Triton's loop knobs on ``nl.range`` (issue 24), read off the generated CUDA and the SASS (no GPU):
``num_stages`` per loop overrides the kernel's, ``loop_unroll_factor`` becomes ``#pragma unroll n``;
``flatten``, ``warp_specialize`` and ``disallow_acc_multi_buffer`` are accepted and change nothing
(docs/backend.md says why)."""

from __future__ import annotations

import re

import pytest

import newt
import newt.language as nl


@newt.jit
def mm_loop(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
            BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, BLOCK_K: nl.constexpr, LOOP_STAGES: nl.constexpr,
            UNROLL: nl.constexpr, FLATTEN: nl.constexpr, WS: nl.constexpr, NO_MB: nl.constexpr):
    pid_m = nl.program_id(0)
    pid_n = nl.program_id(1)
    rm = pid_m * BLOCK_M + nl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + nl.arange(0, BLOCK_N)
    rk = nl.arange(0, BLOCK_K)
    a_tile = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :]
    b_tile = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :]
    acc = nl.zeros((BLOCK_M, BLOCK_N), dtype=nl.float32)
    for k in nl.range(0, nl.cdiv(K, BLOCK_K), num_stages=LOOP_STAGES, loop_unroll_factor=UNROLL, flatten=FLATTEN,
                      warp_specialize=WS, disallow_acc_multi_buffer=NO_MB):
        a = nl.load(a_tile, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = nl.load(b_tile, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
        acc = nl.dot(a, b, acc)
        a_tile += BLOCK_K
        b_tile += BLOCK_K * stride_bk
    c_tile = c_ptr + rm[:, None] * stride_cm + rn[None, :]
    nl.store(c_tile, acc.to(nl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@newt.jit
def row_sum(x_ptr, out_ptr, n_chunks, BLOCK: nl.constexpr, UNROLL: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    acc = nl.zeros((BLOCK,), dtype=nl.float32)
    for i in nl.range(0, n_chunks, loop_unroll_factor=UNROLL):
        acc += nl.load(x_ptr + i * BLOCK + offs)
    nl.store(out_ptr + offs, acc)


MM_SIG = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16",
          **{n: "i32:16" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")}}


def _mm(kernel_stages, loop_stages=None, unroll=None, flatten=False, ws=False, no_mb=False, target="sm_90a"):
    ce = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, LOOP_STAGES=loop_stages, UNROLL=unroll, FLATTEN=flatten, WS=ws,
              NO_MB=no_mb)
    return newt.compile(mm_loop, signature=MM_SIG, constexprs=ce, target=target, num_warps=8,
                        num_stages=kernel_stages, cache=False)


def _stages(src: str):
    m = re.search(r"software pipeline, (\d+) stages", src)
    return int(m.group(1)) if m else None


@pytest.mark.parametrize("kernel,loop,want", [(3, None, 3), (3, 4, 4), (3, 2, 2), (1, 3, 3), (4, 1, None),
                                              (3, 0, None)])
def test_loop_num_stages_overrides_the_kernels(kernel, loop, want):
    ck = _mm(kernel, loop)
    src = ck.asm["cuda"]
    assert _stages(src) == want
    assert src.count("software pipeline,") == (0 if want is None else 1)
    if want:
        assert f"cp_async_wait<{want - 2}>();" in src


def test_loop_num_stages_changes_the_ring():
    """The ring is one buffer per stage (plus one for the wgmma left in flight): 2 -> 4 stages, 3 -> 5 tiles."""
    per = (128 * 64 + 64 * 128) * 2
    s2, s4 = _mm(3, 2), _mm(3, 4)
    assert s4.metadata.shared - s2.metadata.shared == 2 * per


@pytest.mark.parametrize("unroll", [None, 1, 2, 8])
def test_loop_unroll_factor_is_a_pragma(unroll):
    """``loop_unroll_factor=n``: ``#pragma unroll n`` before the loop; in the SASS the loop body holds n
    copies of its one 16-byte load and the remainder loop one (n + 1); 1 keeps the loop rolled.  Without
    the knob NVCC chooses (29 loads in 13.5: unrolled by 4 and more)."""
    ck = newt.compile(row_sum, signature={"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "n_chunks": "i32"},
                      constexprs=dict(BLOCK=512, UNROLL=unroll), target="sm_90a", num_warps=4, cache=False)
    src = ck.asm["cuda"]
    loop = re.search(r"(#pragma unroll \d+\n\s*)?for \(int (\w+) = 0; \2 < n_chunks", src)
    assert loop, src
    assert (loop.group(1) or "").strip() == (f"#pragma unroll {unroll}" if unroll else "")
    from newt.backend.cuda import sass
    try:
        text = sass(ck.asm["cubin"])
    except RuntimeError as e:
        pytest.skip(f"cuobjdump unavailable: {e}")
    n_ldg = len(re.findall(r"\bLDG\.E\.128\b", text))
    if unroll is None:
        assert n_ldg > 9
    else:
        assert n_ldg == (1 if unroll == 1 else unroll + 1)


def test_loop_unroll_factor_on_the_pipelined_loop():
    src = _mm(3, None, unroll=2).asm["cuda"]
    assert re.search(r"#pragma unroll 2\n\s*for \(int \w+ = 0;", src)
    assert _stages(src) == 3


@pytest.mark.parametrize("knob", ["flatten", "ws", "no_mb"])
def test_accepted_knobs_leave_the_code_unchanged(knob):
    """flatten / warp_specialize / disallow_acc_multi_buffer: accepted, same CUDA as without them."""
    base = _mm(3).asm["cuda"]
    other = _mm(3, **{knob: True}).asm["cuda"]
    strip = lambda s: re.sub(r"//[^\n]*", "", s)  # (comments name the source lines)
    assert strip(base) == strip(other)
