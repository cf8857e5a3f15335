"""Offline checks of how the CUDA backend forms addresses and masks in memory-bound kernels.

* Pointer blocks of the form ``scalar pointer + arange-based offsets`` are materialized as one
  per-thread base address plus a register offset that is a constant once unrolled
  (``Emitter.affine``).  The addresses must be exactly those of the direct per-element
  materialization: ``test_split_addresses_equal_direct_ones`` evaluates both forms of the generated
  C++ in Python for every thread of the block.
* In the SASS, the accesses of one tensor share one base register with immediate offsets, and
  ``cols < n`` is compared once per 16-byte vector (the axis analysis' constancy), not per element.
* Dot-free kernels compute the warp index without a shuffle.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap

import pytest

from newt.backend.cuda import compile_cuda, generate_cuda
from newt.backend.cuda.emitter import Emitter

sys.path.insert(0, os.path.dirname(__file__))
from kernels import P, aligned, f16, f32, i32, ir

pytest.importorskip("cuda.bindings.nvrtc")

SRC = textwrap.dedent('''
    import newt
    import newt.language as nl

    @newt.jit
    def rows(x_ptr, y_ptr, stride, n, BLOCK: nl.constexpr):
        row = nl.program_id(0)
        cols = nl.arange(0, BLOCK)
        mask = cols < n
        x = nl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(nl.float32)
        nl.store(y_ptr + row * stride + cols, (x * 2.0).to(y_ptr.dtype.element_ty), mask=mask)

    @newt.jit
    def tile2d(x_ptr, y_ptr, stride, BM: nl.constexpr, BN: nl.constexpr):
        pid = nl.program_id(0)
        rm = pid * BM + nl.arange(0, BM)
        rn = nl.arange(0, BN)
        x = nl.load(x_ptr + rm[:, None] * 64 + rn[None, :] - 3)
        t = nl.load(x_ptr + rn[:, None] * 2 + (rm[None, :] + 5) * stride)
        u = nl.load(nl.permute(x_ptr + 7 - rn[:, None] * 2 + rm[None, :] * 128, (1, 0)))
        nl.store(y_ptr + rm[:, None] * BN + rn[None, :], x + nl.permute(t, (1, 0)) + u)

    @newt.jit
    def mm(a_ptr, b_ptr, c_ptr, K, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
        rm = nl.arange(0, BM)
        rn = nl.arange(0, BN)
        rk = nl.arange(0, BK)
        acc = nl.zeros((BM, BN), dtype=nl.float32)
        for k in range(0, K, BK):
            a = nl.load(a_ptr + rm[:, None] * 256 + (k + rk)[None, :])
            b = nl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
            acc = nl.dot(a, b, acc)
        nl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)

    @newt.jit
    def layernorm(X, Y, W, B, stride, N, eps, BLOCK: nl.constexpr):
        row = nl.program_id(0)
        cols = nl.arange(0, BLOCK)
        mask = cols < N
        x = nl.load(X + row * stride + cols, mask=mask, other=0.0).to(nl.float32)
        mean = nl.sum(x, axis=0) / N
        xc = nl.where(mask, x - mean, 0.0)
        rstd = 1.0 / nl.sqrt(nl.sum(xc * xc, axis=0) / N + eps)
        w = nl.load(W + cols, mask=mask).to(nl.float32)
        b = nl.load(B + cols, mask=mask).to(nl.float32)
        nl.store(Y + row * stride + cols, (xc * rstd * w + b).to(Y.dtype.element_ty), mask=mask)
''')


@pytest.fixture(scope="module")
def src_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("addr") / "addr.py"
    p.write_text(SRC)
    return str(p)


def _rows(src_file, dt=f16, block=2048, warps=4):
    return ir(src_file, "rows", {"x_ptr": P(dt), "y_ptr": P(dt), "stride": i32, "n": i32}, {"BLOCK": block},
              aligned("x_ptr", "y_ptr", "stride", "n"), warps, 3)


def _tile(src_file, bm=32, bn=64, warps=4):
    return ir(src_file, "tile2d", {"x_ptr": P(f32), "y_ptr": P(f32), "stride": i32}, {"BM": bm, "BN": bn},
              aligned("x_ptr", "y_ptr", "stride"), warps, 3)


def _layernorm(src_file, dt, block, warps):
    return ir(src_file, "layernorm", {"X": P(dt), "Y": P(dt), "W": P(dt), "B": P(dt), "stride": i32, "N": i32,
                                      "eps": f32}, {"BLOCK": block}, aligned("X", "Y", "W", "B", "stride", "N"),
              warps, 3)


# ---------------------------------------------------------------------------------------------
# a tiny evaluator of the generated index/pointer code (pointers are integers in elements)
# ---------------------------------------------------------------------------------------------

_CAST = re.compile(r"\((?:unsigned int|int|unsigned long long|long long|unsigned)\)")
_SCALAR = re.compile(r"^\s*(?:const \w+|\w+\* const) (\w+) = (.*);$")
_DECL = re.compile(r"^\s*[\w:]+\*? (\w+)\[(\d+)\];")
_LOOP = re.compile(r"^\s*for \(int i = 0; i < (\d+); \+\+i\) (\w+)\[i\] = (.*);$")
_ONE = re.compile(r"^\s*\{ const int i = 0; (\w+)\[i\] = (.*); \}$")


def _py(expr: str) -> str:
    e = _CAST.sub("", expr).replace("opaque_ptr(", "(").replace("threadIdx.x", "TID").replace("blockIdx.x", "PID")
    e = e.replace("__shfl_sync(0xffffffffu, ", "_first(").replace("&&", " and ").replace("||", " or ")
    return re.sub(r"\b(\d+)u\b", r"\1", e)


def _eval_arrays(source: str, env: dict) -> dict:
    """Run the scalar declarations and the per-register loops of ``source`` whose right-hand sides
    are integer/pointer expressions; other lines (loads, floats, shuffles) are skipped."""
    env = dict(env)
    env["_first"] = lambda v, _lane: v
    arrays = {}
    for line in source.splitlines():
        line = line.split("  //")[0].rstrip()
        m = _LOOP.match(line) or _ONE.match(line)
        if m:
            if _LOOP.match(line):
                n, name, rhs = int(m.group(1)), m.group(2), m.group(3)
            else:
                n, name, rhs = 1, m.group(1), m.group(2)
            try:
                vals = [eval(_py(rhs), {}, {**env, **arrays, "i": i}) for i in range(n)]
            except Exception:  # (not index math)
                continue
            arrays[name] = vals
            continue
        m = _SCALAR.match(line)
        if m:
            try:
                env[m.group(1)] = eval(_py(m.group(2)), {}, {**env, **arrays})
            except Exception:
                pass
    return arrays


def _pointer_arrays(source: str, env: dict, params) -> list:
    """Values of the pointer arrays that global loads and stores use, in the order of the accesses."""
    ptrs = {m.group(2) for m in re.finditer(r"^\s*(\w+)\* (\w+)\[\d+\];", source, re.M)}
    used = []
    for line in source.splitlines():
        if re.search(r"\b(?:ld|st)_global\w*\(", line):
            used += [n for n in re.findall(r"(\w+)\[i\]", line) if n in ptrs]
    arrays = _eval_arrays(source, env)
    return [(n, arrays[n]) for n in used]


def _direct(fn, *args, **kw):
    saved = Emitter.affine
    Emitter.affine = lambda self, v, lay: None
    try:
        return generate_cuda(fn, *args, **kw)
    finally:
        Emitter.affine = saved


@pytest.mark.parametrize("case", ["rows_fp16", "rows_fp32_w8", "tile2d", "tile2d_w2", "layernorm"])
def test_split_addresses_equal_direct_ones(src_file, case):
    if case.startswith("rows"):
        fn = _rows(src_file, f16 if "fp16" in case else f32, 2048, 8 if "w8" in case else 4)
        warps = 8 if "w8" in case else 4
        params = {"x_ptr": 1 << 20, "y_ptr": 1 << 24, "stride": 4096, "n": 2000}
    elif case.startswith("tile2d"):
        warps = 2 if "w2" in case else 4
        fn = _tile(src_file, warps=warps)
        params = {"x_ptr": 1 << 20, "y_ptr": 1 << 24, "stride": 96}
    else:
        warps = 4
        fn = _layernorm(src_file, f32, 1024, warps)
        params = {"X": 1 << 20, "Y": 1 << 24, "W": 1 << 26, "B": 1 << 27, "stride": 1024, "N": 1000, "eps": 0.0}
    split = generate_cuda(fn, "sm_90a", warps, 3)
    direct = _direct(fn, "sm_90a", warps, 3)
    assert "opaque_ptr(" in split.source and "opaque_ptr(" not in direct.source
    checked = 0
    for tid in range(0, 32 * warps, 7):
        env = {**{p.cname: params[p.name] for p in split.params}, "TID": tid, "PID": 3}
        a = _pointer_arrays(split.source, env, split.params)
        b = _pointer_arrays(direct.source, env, direct.params)
        assert a and len(a) == len(b), (len(a), len(b))
        assert [v for _, v in a] == [v for _, v in b], f"thread {tid}: split addresses differ from the direct ones"
        checked += sum(len(v) for _, v in a)
    assert checked > 0


def test_pointer_blocks_are_a_base_plus_constant_offsets(src_file):
    m = generate_cuda(_rows(src_file), "sm_90a", 4, 3)
    bases = re.findall(r"half_t\* const (\w+_base\d+) = opaque_ptr\(\((\w+) \+ (tf\d+)\)\);", m.source)
    assert len(bases) == 2, m.source  # x and y: one base each, this thread's offset folded in
    for base, _, _ in bases:
        assert re.search(rf"\w+\[i\] = {base} \+ \(\(\(i\) & 7\) \| \(\(\(\(i\) >> 3\) & 1\) << 10\)\);", m.source)


def _sass_of(b):
    from newt.backend.cuda import sass
    try:
        return sass(b.cubin)
    except RuntimeError as e:
        pytest.skip(str(e))


def _accesses(text, op):
    return re.findall(rf"{op}\.E\.128 (?:R\d+, )?desc\[UR\d+\]\[(R\d+)\.64(?:\+(0x[0-9a-f]+))?\]", text)


@pytest.mark.parametrize("dt,block,warps", [(f16, 16384, 8), (f32, 16384, 4), (f16, 2048, 4)])
def test_layernorm_accesses_use_immediate_offsets(src_file, dt, block, warps):
    m = generate_cuda(_layernorm(src_file, dt, block, warps), "sm_90a", warps, 3)
    b = compile_cuda(m)
    text = _sass_of(b)
    vec = 16 // (2 if dt is f16 else 4)
    per_tensor = block // (32 * warps) // vec
    loads = _accesses(text, "LDG")
    stores = _accesses(text, "STG")
    assert len(loads) == 3 * per_tensor and len(stores) == per_tensor
    # the accesses of a tensor are a few base registers plus immediate offsets, not one 64-bit add each
    offs = sum(1 for _, o in loads + stores if o)
    assert offs >= (4 * per_tensor) // 2, (offs, loads, stores)
    n64 = len(re.findall(r"\b(?:IADD3\.X|LEA\.HI\.X)\b", text))
    assert n64 <= 8, n64
    # ``cols < N`` once per 16-byte vector: at most two compares per vector (ptxas may recompute a mask
    # for the final stores rather than keep it), not one per element
    assert len(re.findall(r"\bISETP\.GE\.AND\b", text)) <= 2 * per_tensor + 2


@pytest.mark.parametrize("dt,block,warps,max_regs", [(f16, 16384, 8, 128), (f16, 16384, 16, 64),
                                                      (f32, 16384, 8, 170), (f16, 2048, 4, 40)])
def test_layernorm_register_budget(src_file, dt, block, warps, max_regs):
    """The register counts that set the occupancy of the bench's layer norm (8192 rows): fp16 16384
    columns with 8 warps fits two blocks per SM (at most 128 registers, as Triton's), 16 warps two
    blocks (64); fp32 with 8 warps stays one block (as Triton's 154), 2048 fp16 columns with 4 warps
    at most 40 (Triton's 39).  None spills.  (Checked with NVRTC 13.5 and 13.0, the device's.)"""
    m = generate_cuda(_layernorm(src_file, dt, block, warps), "sm_90a", warps, 3)
    b = compile_cuda(m)
    assert b.n_spills == 0, b.log
    assert b.n_regs <= max_regs, (b.n_regs, m.metadata)


def test_pipelined_lookahead_bases_use_the_lookahead_iteration(src_file):
    """The cp.async lookahead re-renders the loop's load slice with its own induction variable: the
    per-thread bases it declares must be computed from that variable, not from the loop's."""
    f = ir(src_file, "mm", {"a_ptr": P(f16), "b_ptr": P(f16), "c_ptr": P(f32), "K": i32},
           {"BM": 64, "BN": 64, "BK": 32}, aligned("a_ptr", "b_ptr", "c_ptr", "K"), 4, 3)
    m = generate_cuda(f, "sm_90a", 4, 3)
    assert m.metadata["pipelined_loops"] == 1
    bases = re.findall(r"half_t\* const \w+ = opaque_ptr\((.*)\);", m.source)
    assert len(bases) >= 4 and all("ahead_iv" in b for b in bases), bases
    assert compile_cuda(m).n_spills == 0


def test_masks_are_computed_once_per_vector(src_file):
    m = generate_cuda(_layernorm(src_file, f32, 4096, 4), "sm_90a", 4, 3)
    # 32 registers per thread in runs of 4 (16-byte vectors): the compare indexes its operands with
    # the run's first register, so the unrolled copies are one expression per run
    line = next(s for s in m.source.splitlines() if "] < " in s and "for (int i" in s)
    assert "[(i & 28)]" in line, line


def test_dot_free_kernels_compute_the_warp_index_without_a_shuffle(src_file):
    m = generate_cuda(_rows(src_file), "sm_90a", 4, 3)
    assert "const int warp_id = (int)threadIdx.x >> 5;" in m.source
    assert "__shfl_sync(0xffffffffu, (int)threadIdx.x >> 5" not in m.source
    text = _sass_of(compile_cuda(m))
    assert "SHFL.IDX" not in text
