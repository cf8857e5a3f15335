"""Offline (no GPU) checks of the CUDA backend: every corpus kernel compiles to cubin for sm_80 and
sm_90a through NVRTC, the ptxas report shows no spills in the example configs, and the SASS holds
tensor-core instructions for dots and 128-bit global accesses for vector add and softmax."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

import newt
import newt.language as nl
from newt.backend.cuda import TARGETS, compile_cuda, generate_cuda, get_target

sys.path.insert(0, os.path.dirname(__file__))
from kernels import ROOT, P, aligned, corpus_configs, f16, f32, i32, ir

pytest.importorskip("cuda.bindings.nvrtc")

CONFIGS = corpus_configs()
#: configurations whose register demand exceeds 255 even in Triton's layouts (tile too big per thread)
HEAVY = {("attention.py", 3)}


def _id(c):
    cx = ",".join(f"{k}={v}" for k, v in c[3].items() if k.isupper() and k != "ACTIVATION" or k == "ACTIVATION" and v)
    dt = str(next(iter(c[2].values()))).lstrip("*")
    return f"{c[0]}:{c[1]}[{cx}]{dt}w{c[5]}s{c[6]}"


@pytest.fixture(scope="module")
def built():
    cache = {}

    def get(cfg, target):
        key = (_id(cfg), target)
        if key not in cache:
            f = ir(*cfg)
            m = generate_cuda(f, target, cfg[5], cfg[6])
            cache[key] = compile_cuda(m, target)
        return cache[key]
    return get


def _sass(b):
    from newt.backend.cuda import sass
    try:
        return sass(b.cubin)
    except RuntimeError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_corpus_compiles(cfg, target, built):
    b = built(cfg, target)
    assert b.cubin[:4] == b"\x7fELF"
    assert ".entry " + b.name in b.ptx or f".entry {b.name}(" in b.ptx
    assert b.n_regs > 0
    heavy = (cfg[0], cfg[3].get("STAGE")) in HEAVY or (cfg[0] == "matmul.py" and cfg[3]["BLOCK_M"] *
                                                        cfg[3]["BLOCK_N"] // (32 * cfg[5]) >= 128)
    if not heavy:
        assert b.n_spills == 0, b.log
    assert b.stack_frame == 0 or heavy, b.log


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_vector_add_uses_128_bit_accesses(target, built):
    b = built(CONFIGS[0], target)
    s = _sass(b)
    assert len(re.findall(r"LDG\.E\.128", s)) == 4  # 2 x 16 bytes per thread for each of x and y
    assert len(re.findall(r"STG\.E\.128", s)) == 2
    assert "LDL" not in s and "STL" not in s


@pytest.mark.parametrize("idx", [1, 2], ids=["fp32", "fp16"])
def test_softmax_uses_vector_accesses(idx, built):
    b = built(CONFIGS[idx], "sm_90a")
    s = _sass(b)
    if idx == 1:
        assert re.search(r"LDG\.E\.128", s) and re.search(r"STG\.E\.128", s)
    else:  # 1024 fp16 over 256 threads: 4 elements = 8 bytes per thread
        assert re.search(r"LDG\.E\.64", s) and re.search(r"STG\.E\.64", s)
    assert "SHFL.BFLY" in s  # warp-shuffle reductions


def test_softmax_fp16_wide_rows_use_128_bit_accesses():
    f = ir("softmax.py", "softmax_kernel", dict(out_ptr=P(f16), in_ptr=P(f16), in_row_stride=i32, out_row_stride=i32,
                                               n_rows=i32, n_cols=i32), dict(BLOCK_SIZE=4096, num_stages=2),
           aligned("out_ptr", "in_ptr", "in_row_stride", "out_row_stride", "n_cols"), 8, 2)
    b = compile_cuda(generate_cuda(f, "sm_90a", 8, 2))
    s = _sass(b)
    assert re.search(r"LDG\.E\.128", s) and re.search(r"STG\.E\.128", s)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_matmul_uses_tensor_cores_and_cp_async(target, built):
    cfg = next(c for c in CONFIGS if c[0] == "matmul.py" and c[3]["BLOCK_M"] == 128 and c[3]["BLOCK_N"] == 128)
    b = built(cfg, target)
    s = _sass(b)
    if target == "sm_90a":  # wgmma: operands straight from shared memory through descriptors
        assert re.search(r"HGMMA\.64x128x16\.F32", s) and "LDSM" not in s
    else:
        assert "HMMA.16816.F32" in s
        assert "LDSM" in s                 # ldmatrix
    assert "LDGSTS" in s                   # cp.async
    assert "DEPBAR" in s or "LDGDEPBAR" in s
    m = b.module
    assert m.metadata["pipelined_loops"] == 1
    nbuf = 5 if target == "sm_90a" else 4  # wgmma in flight into the next iteration: one buffer more
    assert m.shared_bytes == nbuf * (128 * 32 + 32 * 128) * 2  # 4 stages of A and B tiles
    assert m.needs_shared_opt_in


def test_num_stages_changes_the_code():
    cfg = next(c for c in CONFIGS if c[0] == "matmul.py" and c[3]["BLOCK_M"] == 128 and c[3]["BLOCK_N"] == 128)
    srcs = {}
    for s in (1, 2, 3, 4):
        m = generate_cuda(ir(*cfg[:5], cfg[5], s), "sm_90a", cfg[5], s)
        srcs[s] = m
    assert srcs[1].metadata["pipelined_loops"] == 0
    assert "cp_async" not in srcs[1].source.split("extern \"C\"")[1]
    for s in (2, 3, 4):
        assert f"cp_async_wait<{s - 2}>" in srcs[s].source
        # s stages of the 128x32 A tile, and one more buffer for the wgmma left in flight
        assert f"constexpr int SMEM_PIPE1 = {(s + 1) * 8192};" in srcs[s].source
        assert srcs[s].shared_bytes >= s * 16384
    assert len({m.source for m in srcs.values()}) == 4


def test_attention_uses_tensor_cores(built):
    cfg = next(c for c in CONFIGS if c[0] == "attention.py")
    s = _sass(built(cfg, "sm_90a"))
    assert s.count("HGMMA.64x64x16.F32") >= 4  # wgmma on sm_90a (mma.sync: tests below)
    assert "MUFU.EX2" in s


DOT_SRC = textwrap.dedent('''
    import newt
    import newt.language as nl

    @newt.jit
    def dot_kernel(a_ptr, b_ptr, c_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr, PREC: nl.constexpr):
        rm = nl.arange(0, M)
        rn = nl.arange(0, N)
        rk = nl.arange(0, K)
        a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = nl.load(b_ptr + rk[:, None] * N + rn[None, :])
        c = nl.dot(a, b, input_precision=PREC)
        nl.store(c_ptr + rm[:, None] * N + rn[None, :], c)
''')


@pytest.fixture(scope="module")
def dot_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("k") / "dotk.py"
    p.write_text(DOT_SRC)
    return str(p)


@pytest.mark.parametrize("dt,acc,prec,instr", [(nl.float16, nl.float32, None, "HMMA.16816.F32"),
                                               (nl.bfloat16, nl.float32, None, "HMMA.16816.F32.BF16"),
                                               (nl.float32, nl.float32, "tf32", "HMMA.1688.F32.TF32"),
                                               (nl.int8, nl.int32, None, "IMMA.16832.S8.S8"),
                                               (nl.float32, nl.float32, "ieee", "FFMA"),
                                               (nl.float64, nl.float64, None, "DFMA")])
def test_dot_instructions(dot_file, dt, acc, prec, instr):
    f = ir(dot_file, "dot_kernel", {"a_ptr": P(dt), "b_ptr": P(dt), "c_ptr": P(acc)},
           {"M": 64, "N": 64, "K": 64, "PREC": prec}, aligned("a_ptr", "b_ptr", "c_ptr"))
    b = compile_cuda(generate_cuda(f, "sm_80", 4, 3))
    assert instr in _sass(b)
    assert b.n_spills == 0


def test_generated_cuda_is_readable():
    cfg = CONFIGS[0]
    m = generate_cuda(ir(*cfg), "sm_90a", 4, 3)
    src = m.source
    assert 'extern "C" __global__ void __launch_bounds__(128) add_kernel(' in src
    assert "// vector_add.py:13: x = nl.load(x_ptr + offsets, mask=mask)" in src
    assert m.name == "add_kernel"
    assert [p.name for p in m.params] == ["x_ptr", "y_ptr", "out_ptr", "n_elements"]
    assert [p.ctype for p in m.params] == ["float*", "float*", "float*", "int"]
    assert [p.size for p in m.params] == [8, 8, 8, 4]
    assert m.shared_bytes == 0 and not m.needs_shared_opt_in
    assert any("blocked" in d for d in m.layouts.values())
    # every CUDA line that came from an op maps back to the user's file
    locs = [loc for loc in m.line_locs if loc is not None]
    assert locs and all(loc.file.endswith("vector_add.py") for loc in locs)


def test_generate_cuda_needs_neither_torch_nor_cuda():
    code = textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {os.path.join(ROOT, "tests", "backend")!r})
        from kernels import ir, P, f32, i32, aligned
        from newt.backend.cuda import generate_cuda
        f = ir("vector_add.py", "add_kernel", dict(x_ptr=P(f32), y_ptr=P(f32), out_ptr=P(f32), n_elements=i32),
               dict(BLOCK_SIZE=1024), aligned("x_ptr"))
        generate_cuda(f, "sm_90a", 4, 3)
        bad = [m for m in sys.modules if m == "torch" or m.startswith("cuda")]
        assert not bad, bad
    ''')
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stderr


def test_nvrtc_failure_names_kernel_and_line():
    cfg = CONFIGS[0]
    m = generate_cuda(ir(*cfg), "sm_90a", 4, 3)
    lines = m.source.splitlines()
    k = next(i for i, t in enumerate(lines) if "nl.store" in t)
    lines.insert(k + 1, "  this_is_not_cuda;")
    m.source = "\n".join(lines)
    m.line_locs.insert(k + 1, m.line_locs[k + 1])
    with pytest.raises(newt.CompilationError) as ei:
        compile_cuda(m)
    msg = str(ei.value)
    assert "add_kernel" in msg
    assert "vector_add.py:15" in msg                 # the user's line
    assert "nl.store(out_ptr + offsets" in msg         # shown with a caret
    width = len(str(len(lines)))
    assert f"{k + 2:>{width}} |   this_is_not_cuda;" in msg  # the CUDA with line numbers
    assert "identifier \"this_is_not_cuda\" is undefined" in msg  # the NVRTC log


def test_shared_memory_over_the_target_limit_is_an_error():
    cfg = next(c for c in CONFIGS if c[0] == "matmul.py" and c[3]["BLOCK_M"] == 128 and c[3]["BLOCK_N"] == 256)
    # 128x256x64 fp16 with 8 stages: 8 * 48 KB does not fit anywhere, so stages are reduced to fit
    m = generate_cuda(ir(*cfg[:5], 8, 8), "sm_80", 8, 8)
    assert m.shared_bytes <= TARGETS["sm_80"].max_shared


@pytest.mark.parametrize("name", ["sm_80", "sm_89", "sm_90a", "sm_120"])
def test_targets_compile_vector_add(name):
    tgt = get_target(name)
    assert tgt.max_shared > 48 * 1024
    b = compile_cuda(generate_cuda(ir(*CONFIGS[0]), name, 4, 3))
    assert b.target == name and b.cubin


def test_target_lookup():
    assert get_target("sm90a") is TARGETS["sm_90a"]
    assert get_target((8, 0)) is TARGETS["sm_80"]
    assert get_target(120).name == "sm_120"
    assert TARGETS["sm_90a"].wgmma and not TARGETS["sm_80"].wgmma
    with pytest.raises(ValueError, match="unknown CUDA target"):
        get_target("sm_70")


def test_num_warps_range():
    f = ir(*CONFIGS[0])
    for nw in (1, 2, 4, 8, 16, 32):
        m = generate_cuda(f, "sm_90a", nw, 3)
        assert f"__launch_bounds__({32 * nw}" in m.source
        assert compile_cuda(m).n_spills == 0
    with pytest.raises(ValueError):
        generate_cuda(f, "sm_90a", 3, 3)


def test_device_print_and_assert_compile(tmp_path):
    src = textwrap.dedent('''
        import newt
        import newt.language as nl

        @newt.jit
        def dbg(x_ptr, n, BLOCK: nl.constexpr):
            offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
            x = nl.load(x_ptr + offs, mask=offs < n, other=0.0)
            nl.device_print("x=", x)
            nl.device_assert(x >= 0, "x must be non-negative")
            nl.device_print("n", n)
    ''')
    p = tmp_path / "dbg.py"
    p.write_text(src)
    f = ir(str(p), "dbg", {"x_ptr": P(f32), "n": i32}, {"BLOCK": 64})
    m = generate_cuda(f, "sm_90a", 2, 3)
    assert "printf(" in m.source and "__assertfail(" in m.source and "x must be non-negative" in m.source
    b = compile_cuda(m)
    assert "vprintf" in b.ptx and "__assertfail" in b.ptx


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_register_count_from_the_cubin_matches_ptxas(target, built):
    """The ``.nv.info`` register count (used when NVRTC's log holds no ptxas report) agrees with the
    report for every corpus configuration; a log without a report still gives the cubin's count."""
    from newt.backend.cuda.compiler import cubin_register_count
    for cfg in CONFIGS:
        b = built(cfg, target)
        assert b.n_regs > 0 and cubin_register_count(b.cubin, b.name) == b.n_regs, _id(cfg)
        assert cubin_register_count(b.cubin) == b.n_regs  # the first (only) kernel
    assert cubin_register_count(b.cubin, "no_such_kernel") is None
    assert cubin_register_count(b"not an ELF") is None and cubin_register_count(b.cubin[:100]) is None


def test_nvrtc_cache_is_off_so_every_compile_reports(monkeypatch):
    """NVRTC 12.9+ caches compiles (also across processes, through the driver's cache on a GPU machine)
    and prints no ptxas report on a hit: newt passes --no-cache and keeps its own cache."""
    from cuda.bindings import nvrtc

    from newt.backend.cuda import compiler
    seen = []
    real = nvrtc.nvrtcCompileProgram

    def spy(prog, n, opts):
        seen.append(list(opts))
        return real(prog, n, opts)
    monkeypatch.setattr(nvrtc, "nvrtcCompileProgram", spy)
    cfg = CONFIGS[0]
    for _ in range(2):
        b = compile_cuda(generate_cuda(ir(*cfg), "sm_90a", cfg[5], cfg[6]))
        assert "Used" in b.log and b.n_regs > 0
    assert all((b"--no-cache" in o) == (compiler.nvrtc_version() >= (12, 9)) for o in seen) and len(seen) == 2
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: (12, 8))
    assert compiler.cache_options() == []


def test_register_count_without_a_ptxas_report(monkeypatch):
    from newt.backend.cuda import compiler
    cfg = CONFIGS[0]
    m = generate_cuda(ir(*cfg), "sm_90a", cfg[5], cfg[6])
    expected = compile_cuda(m).n_regs
    monkeypatch.setattr(compiler, "parse_ptxas_report", lambda log, name=None: {
        "n_regs": 0, "spill_stores": 0, "spill_loads": 0, "stack_frame": 0, "static_shared": 0})
    assert compile_cuda(generate_cuda(ir(*cfg), "sm_90a", cfg[5], cfg[6])).n_regs == expected > 0


def test_volatile_scalar_load_is_the_same_in_every_thread():
    """The GPU suite's CAS retry loop (tests/ops/test_atomics.py) branches on a volatile scalar load: thread
    0 reads it and every thread gets its value, so the loop cannot diverge (a diverged loop deadlocks at the
    CAS broadcast's barrier)."""
    f = ir(os.path.join(ROOT, "tests", "ops", "test_atomics.py"), "cas_counter_kernel",
           {"ptr": P(i32), "n_iter": i32}, {})
    m = generate_cuda(f, "sm_90a", 4, 3)
    body = m.source[m.source.index("nl.load(ptr, volatile=True)"):]
    load = body[:body.index("nl.atomic_cas")]
    assert "threadIdx.x == 0" in load  # one thread reads
    assert load.count("__syncthreads();") == 2 and "smem +" in load  # and its value is broadcast
    compile_cuda(m)


# --- performance-shaped code: barriers, registers, vector widths ------------------------------------


def _loop_body(src: str) -> str:
    """The text of the first software-pipelined loop's body (up to its epilogue wait)."""
    start = src.index("cp_async_wait<")
    return src[start:src.index("cp_async_wait<0>", start)]


@pytest.mark.parametrize("stage", [1, 3])
def test_attention_loop_stages_nothing(stage, monkeypatch):
    """Q is loop-invariant: staged once where it is defined; P comes from the first dot's accumulator
    registers.  The loop keeps one barrier (the pipeline's) per iteration (the mma.sync lowering)."""
    monkeypatch.setenv("NEWT_DOT_LOWERING", "mma_sync")
    cfg = next(c for c in CONFIGS if c[0] == "attention.py" and c[3]["STAGE"] == stage)
    m = generate_cuda(ir(*cfg), "sm_90a", cfg[5], cfg[6])
    body = _loop_body(m.source)
    assert "stage operand" not in body
    assert body.count("__syncthreads()") == 1
    assert "is loop-invariant where the dot uses it: staged in shared memory once" in m.source
    assert "const int ab = ((kk) / 16) * 8" in body  # P's fragments packed from registers
    b = compile_cuda(m)
    assert b.n_spills == 0 and b.stack_frame == 0, b.log


def test_attention_q_in_registers_with_8_warps(monkeypatch):
    """With 8 warps Q's fragments are 16 registers per thread: converted once, kept in registers (mma.sync)."""
    monkeypatch.setenv("NEWT_DOT_LOWERING", "mma_sync")
    cfg = next(c for c in CONFIGS if c[0] == "attention.py" and c[3]["STAGE"] == 1)
    m = generate_cuda(ir(*cfg[:5], 8, 3), "sm_90a", 8, 3)
    body = _loop_body(m.source)
    assert "mma_a[" in m.source and "staged in shared memory once" not in m.source
    assert body.count("__syncthreads()") == 1 and "ldmatrix_x4(af" not in body
    s = _sass(compile_cuda(m))
    assert s.count("HMMA.16816.F32") == 64 and "LDL" not in s


def test_reductions_need_one_barrier_each():
    """Cross-warp partials go through two reserved buffers in turn: softmax's two reductions need one
    barrier each, and shuffles of commutative combines need no lane selects."""
    f = ir("softmax.py", "softmax_kernel", dict(out_ptr=P(f16), in_ptr=P(f16), in_row_stride=i32, out_row_stride=i32,
                                               n_rows=i32, n_cols=i32), dict(BLOCK_SIZE=4096, num_stages=2),
           aligned("out_ptr", "in_ptr", "in_row_stride", "out_row_stride", "n_cols"), 8, 2)
    m = generate_cuda(f, "sm_90a", 8, 2)
    assert "SMEM_RED0" in m.source and "SMEM_RED1" in m.source
    assert "(lane_id & 1) ?" not in m.source
    s = _sass(compile_cuda(m))
    # the row loop (tl.range over rows) re-enters: its first reduction keeps a barrier, the second not
    assert s.count("BAR.SYNC") == 3


def test_cross_warp_stage_is_one_shared_load_and_a_butterfly(tmp_path):
    """A row reduction over 16 warps: each lane reads one warp's partial and log2(16) shuffles combine
    them (not 16 loads per thread), which keeps softmax 8192 fp16 at 16 warps within 32 registers
    (Triton's count: 4 blocks per SM instead of 3)."""
    src = textwrap.dedent('''
        import newt
        import newt.language as nl

        @newt.jit
        def softmax_rows(out_ptr, in_ptr, stride, n_cols, BLOCK: nl.constexpr):
            row = nl.program_id(0)
            cols = nl.arange(0, BLOCK)
            mask = cols < n_cols
            x = nl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(nl.float32)
            x = x - nl.max(x, axis=0)
            num = nl.exp(x)
            nl.store(out_ptr + row * stride + cols, (num / nl.sum(num, axis=0)).to(nl.float16), mask=mask)
    ''')
    p = tmp_path / "rows.py"
    p.write_text(src)
    f = ir(str(p), "softmax_rows", {"out_ptr": P(f16), "in_ptr": P(f16), "stride": i32, "n_cols": i32},
           {"BLOCK": 8192}, aligned("out_ptr", "in_ptr", "stride", "n_cols"), 16, 3)
    m = generate_cuda(f, "sm_90a", 16, 3)
    assert m.source.count("[lane_id & 15];") == 2 and "for (int q = 1; q < 16" not in m.source
    b = compile_cuda(m)
    assert b.metadata["n_regs"] <= 32


def test_argmax_shuffles_keep_the_lane_order():
    cfg = next(c for c in CONFIGS if c[1] == "argmax_rows")
    m = generate_cuda(ir(*cfg), "sm_90a", cfg[5], cfg[6])
    assert "(lane_id & 1) ?" in m.source or "(lane_id & 2) ?" in m.source


def test_mma_kernels_cap_registers_explicitly():
    cfg = next(c for c in CONFIGS if c[0] == "matmul.py" and c[3]["BLOCK_M"] == 128 and c[3]["BLOCK_N"] == 256)
    m = generate_cuda(ir(*cfg), "sm_90a", cfg[5], cfg[6])
    assert f"__launch_bounds__({32 * cfg[5]}, 1)" in m.source
    assert m.metadata["min_blocks"] == 1


def test_matmul_epilogue_converts_with_vector_accesses(monkeypatch):
    monkeypatch.setenv("NEWT_TMA", "0")  # the pointer-path epilogue (with TMA the store is a bulk copy: test_tma.py)
    cfg = next(c for c in CONFIGS if c[0] == "matmul.py" and c[3]["BLOCK_M"] == 128 and c[3]["BLOCK_N"] == 128)
    b = compile_cuda(generate_cuda(ir(*cfg), "sm_90a", cfg[5], cfg[6]))
    s = _sass(b)
    assert "LDS.128" in s            # 8 halves at a time back from shared memory
    assert "STS.U16" not in s        # accumulator pairs go out as 32-bit words
    assert "STG.E.128" in s


def test_wide_kernels_drop_two_blocks_per_sm_when_it_spills(tmp_path):
    src = textwrap.dedent('''
        import newt
        import newt.language as nl

        @newt.jit
        def wide(x_ptr, w_ptr, b_ptr, y_ptr, N, BLOCK: nl.constexpr):
            cols = nl.arange(0, BLOCK)
            row = nl.program_id(0)
            x = nl.load(x_ptr + row * N + cols)
            w = nl.load(w_ptr + cols)
            b = nl.load(b_ptr + cols)
            mean = nl.sum(x, axis=0) / N
            xc = x - mean
            rstd = 1.0 / nl.sqrt(nl.sum(xc * xc, axis=0) / N + 1e-5)
            nl.store(y_ptr + row * N + cols, xc * rstd * w + b)
    ''')
    p = tmp_path / "wide.py"
    p.write_text(src)
    def build(block):
        f = ir(str(p), "wide", {"x_ptr": P(f32), "w_ptr": P(f32), "b_ptr": P(f32), "y_ptr": P(f32), "N": i32},
               {"BLOCK": block}, aligned("x_ptr", "w_ptr", "b_ptr", "y_ptr", "N"), 16, 3)
        m = generate_cuda(f, "sm_90a", 16, 3)
        assert "__launch_bounds__(512, 2)" in m.source  # at most 64 registers
        return m, compile_cuda(m)
    # 16384 fp32 values of x, w and b over 512 threads: 96 per thread fit in 128 registers, not in 64
    m, b = build(16384)
    assert b.n_spills == 0, b.log
    assert m.metadata["min_blocks"] in (0, 1) and "min_blocks_dropped" in m.metadata
    assert "__launch_bounds__(512, 2)" not in m.source and m.metadata["launch_bounds"] in m.source
    # twice that spills either way: the version that spills least (more than 64 registers) is kept
    m, b = build(32768)
    assert m.metadata["min_blocks"] in (0, 1) and b.n_regs > 64
    assert "__launch_bounds__(512, 2)" not in m.source
    # small rows keep two blocks per SM
    m, b = build(4096)
    assert b.n_spills == 0 and m.metadata["min_blocks"] == 2 and "__launch_bounds__(512, 2)" in m.source


def test_tf32x3_issues_three_mma_per_tile(dot_file, monkeypatch):
    # the mma.sync lowering of both (on sm_90a plain tf32 takes wgmma by default; tf32x3 stays on mma.sync)
    monkeypatch.setenv("NEWT_DOT_LOWERING", "mma_sync")
    counts = {}
    for prec in ("tf32", "tf32x3"):
        f = ir(dot_file, "dot_kernel", {"a_ptr": P(f32), "b_ptr": P(f32), "c_ptr": P(f32)},
               {"M": 64, "N": 64, "K": 64, "PREC": prec}, aligned("a_ptr", "b_ptr", "c_ptr"))
        m = generate_cuda(f, "sm_90a", 4, 3)
        b = compile_cuda(m)
        assert b.n_spills == 0
        counts[prec] = _sass(b).count("HMMA.1688.F32.TF32")
    assert counts["tf32"] > 0 and counts["tf32x3"] == 3 * counts["tf32"]


def test_every_cast_compiles():
    """Casts between all dtypes (and the rtz downcasts) compile; float -> int helpers test NaN first."""
    path = os.path.join(ROOT, "tests", "ops", "test_casts.py")
    dts = [nl.int1, nl.int8, nl.int16, nl.int32, nl.int64, nl.uint8, nl.uint16, nl.uint32, nl.uint64, nl.float16,
           nl.bfloat16, nl.float32, nl.float64, nl.float8e4nv, nl.float8e5]
    from newt.backend.cuda.prelude import PRELUDE
    assert PRELUDE.count("return f != f ? 0") == 8
    for src in dts:
        for dst in dts:
            if src == nl.int1 and dst == nl.int1:
                continue
            for mode in (("", "rtz") if src.is_floating() and dst.is_floating() and
                         src.primitive_bitwidth > dst.primitive_bitwidth else ("",)):
                f = ir(path, "cast_kernel", {"x_ptr": P(src), "out_ptr": P(dst), "n": i32},
                       {"DST": dst, "MODE": mode, "BLOCK": 128}, aligned("x_ptr", "out_ptr"))
                m = generate_cuda(f, "sm_90a", 4, 3)
                if mode == "rtz" and src == nl.float64 and dst != nl.float16:
                    assert "f64_to_f32_rz(" in m.source
                # NVRTC for the conversions the float -> int, rtz and fp8 helpers implement
                if src.is_floating() and (not dst.is_floating() or mode or dst == nl.float8e5):
                    assert compile_cuda(m).cubin
