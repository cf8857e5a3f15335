"""Issue 13's offline checks, asserted on the SASS (cuobjdump, from the nvidia-cuda-cuobjdump wheel): for
sm_90a every dot kernel of examples/ (newt and deuteron) and of the dot tests compiles to the warpgroup
MMA (HGMMA / QGMMA / IGMMA) wherever its tile is a whole warpgroup tile, mma.sync (HMMA) elsewhere;
the Triton-style masked-K matmul spills nothing on sm_90a, sm_80 and sm_89; the tutorial-class
attention forward spills no more than Triton's compile of the same source (Triton's PTX through its
own ptxas, -v)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import newt

ROOT = Path(__file__).resolve().parents[2]


def _sass(ck) -> str:
    from newt.backend.cuda import sass
    try:
        return sass(ck.asm["cubin"])
    except RuntimeError as e:
        pytest.skip(f"cuobjdump unavailable: {e}")


def _mma_kinds(sass: str) -> set:
    return set(re.findall(r"\b([HQI]GMMA|HMMA|IMMA)\.", sass))


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _jit(k):
    while hasattr(k, "fn") and not hasattr(k, "constexpr_names"):
        k = k.fn
    return k


def _wgmma_tile(bm: int, num_warps: int) -> bool:
    """wgmma takes the tile (dot/wgmma.py supports): whole warpgroups, each with its own 64 rows."""
    return num_warps % 4 == 0 and bm >= 64 * (num_warps // 4)


# ---------------------------------------------------------------------------------------------------
# examples/
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ex_matmul():
    # the example turns the interpreter on when no GPU is there (setdefault): keep it off, for its GPU configs
    old = os.environ.get("NEWT_INTERPRET")
    os.environ["NEWT_INTERPRET"] = "0"
    try:
        return _load(ROOT / "examples" / "matmul.py", "_sass_ex_matmul")
    finally:
        if old is None:
            os.environ.pop("NEWT_INTERPRET", None)
        else:
            os.environ["NEWT_INTERPRET"] = old


def _ex_matmul_cases():
    # (config index in examples/matmul.py's GPU configs, dtype, with the leaky_relu epilogue)
    return [(i, "fp16", False) for i in range(8)] + [(0, "bf16", False), (0, "fp16", True), (2, "bf16", True)]


@pytest.mark.parametrize("idx,dt,epi", _ex_matmul_cases())
def test_example_matmul_sass(ex_matmul, idx, dt, epi):
    cfg = ex_matmul.configs()[idx]
    kw = cfg.kwargs
    sig = {"a_ptr": f"*{dt}:16", "b_ptr": f"*{dt}:16", "c_ptr": f"*{dt}:16"}
    sig.update({n: "i32:16" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
    ce = dict(kw, EPILOGUE=ex_matmul.leaky_relu if epi else None, stride_ak=1, stride_bn=1, stride_cn=1)
    ck = newt.compile(_jit(ex_matmul.matmul_kernel), signature=sig, constexprs=ce, target="sm_90a",
                      num_warps=cfg.num_warps, num_stages=cfg.num_stages, cache=False)
    assert ck.metadata.n_spills == 0, (kw, ck.metadata)
    kinds = _mma_kinds(_sass(ck))
    assert kinds == ({"HGMMA"} if _wgmma_tile(kw["BLOCK_M"], cfg.num_warps) else {"HMMA"}), (kw, kinds)


ATTN_SIG = {"Q": "*fp16:16", "K": "*fp16:16", "V": "*fp16:16", "Out": "*fp16:16", "sm_scale": "fp32",
            **{n: "i32:16" for n in ("stride_qz", "stride_qh", "stride_qm", "stride_kz", "stride_kh", "stride_kn",
                                     "stride_vz", "stride_vh", "stride_vn", "stride_oz", "stride_oh", "stride_om",
                                     "H", "N_CTX")}}


@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, False), (128, True)])
def test_example_attention_sass(d, causal):
    """examples/attention.py at the blocks its ``attention()`` launches on a GPU: both dots HGMMA, no spill."""
    mod = _load(ROOT / "examples" / "attention.py", "_sass_ex_attention")
    bm, bn = 128, (64 if d <= 64 or not causal else 32)
    ck = newt.compile(_jit(mod.attention_fwd), signature=ATTN_SIG,
                      constexprs=dict(HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal), target="sm_90a",
                      num_warps=8, num_stages=3, cache=False)
    assert ck.metadata.n_spills == 0, ck.metadata
    sass = _sass(ck)
    assert _mma_kinds(sass) == {"HGMMA"}
    assert re.search(rf"HGMMA\.64x{bn}x16\.F32", sass) and re.search(rf"HGMMA\.64x{d}x16\.F32", sass)


@pytest.mark.parametrize("name", ["matmul", "matmul_epilogue", "attention"])
def test_deuteron_example_dots_sass(name):
    """deuteron's dot examples at their default config: the generated newt kernels are HGMMA, no spill."""
    from deuteron.compile import compile_binary
    from deuteron.kernel import Kernel, _HostRun, _runtime_args
    sys.path.insert(0, str(ROOT / "examples" / "deuteron"))
    try:
        mod = _load(ROOT / "examples" / "deuteron" / f"{name}.py", f"_sass_dt_{name}")
    finally:
        sys.path.remove(str(ROOT / "examples" / "deuteron"))
    k = next(v for v in vars(mod).values() if isinstance(v, Kernel))
    b = k._bind(mod.make_args("cpu"), {})
    e = k._entry(b)
    run = _HostRun(e, e.space.default(), "source")
    run.execute(b)
    n = 0
    for gen, m, prog, loc in run.built:
        ck = compile_binary(gen, m, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a")
        assert ck.metadata["n_spills"] == 0, (name, ck.metadata)
        kinds = _mma_kinds(_sass(ck))
        assert kinds == {"HGMMA"}, (name, kinds)
        n += 1
    assert n


# ---------------------------------------------------------------------------------------------------
# the dot tests' kernels (tests/ops/test_dot*.py) at warpgroup tiles
# ---------------------------------------------------------------------------------------------------


def _ops(name):
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        return importlib.import_module(f"ops.{name}")
    finally:
        sys.path.remove(str(ROOT / "tests"))


_GMMA = {"fp16": "HGMMA", "bf16": "HGMMA", "fp8e4nv": "QGMMA", "fp8e5": "QGMMA"}
DOT_TEST_CASES = [("dot_kernel", (64, 16, 128), dt) for dt in _GMMA] + \
    [("dot_promoted_kernel", sh, dt) for sh in ((64, 16, 128), (64, 64, 64)) for dt in ("fp8e4nv", "fp8e5")]


@pytest.mark.parametrize("kernel,shape,dt", DOT_TEST_CASES)
def test_dot_test_kernels_sass(kernel, shape, dt):
    """test_dot.py's single-tile dots (4 warps, with an accumulator) at its shapes of 64 rows: the
    low-precision dot of every dtype and the fp8 one with max_num_imprecise_acc."""
    import newt.language as nl
    mod = _ops("test_dot")
    M, N, K = shape
    sig = {"a_ptr": f"*{dt}:16", "b_ptr": f"*{dt}:16", "c_ptr": "*fp32:16", "out_ptr": "*fp32:16"}
    ce = dict(M=M, N=N, K=K)
    if kernel == "dot_kernel":
        ce.update(PREC=None, USE_ACC=True, OUT=nl.float32)
    ck = newt.compile(getattr(mod, kernel), signature=sig, constexprs=ce, target="sm_90a", num_warps=4, num_stages=3,
                      cache=False)
    assert ck.metadata.n_spills == 0
    assert _mma_kinds(_sass(ck)) == {_GMMA[dt]}


@pytest.mark.parametrize("case", ["tf32", "int8"])
def test_wgmma_dtype_test_kernels_sass(case, monkeypatch):
    """test_dot_wgmma_dtypes.py's matmul at its first configuration, both operand majors as launched there."""
    import newt.language as nl
    mod = _ops("test_dot_wgmma_dtypes")
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")  # tf32/int8: wgmma when asked for, until a GPU run
    cases = mod.TF32_CASES if case == "tf32" else mod.INT8_CASES
    _, _, _, bm, bn, bk, w, s = cases[0]
    dt, acc = ("fp32", "fp32") if case == "tf32" else ("i8", "i32")
    for b_unit in ("stride_bn", "stride_bk"):
        runtime = [n for n in ("stride_am", "stride_bk", "stride_bn", "stride_cm") if n != b_unit]
        sig = {"a_ptr": f"*{dt}:16", "b_ptr": f"*{dt}:16", "c_ptr": f"*{acc}:16",
               **{n: "i32:16" for n in ["M", "N", "K"] + runtime}}
        ce = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "ACC": nl.float32 if case == "tf32" else nl.int32,
              "stride_ak": 1, b_unit: 1}
        ck = newt.compile(mod.mm_kernel, signature=sig, constexprs=ce, target="sm_90a", num_warps=w, num_stages=s,
                          cache=False)
        assert ck.metadata.n_spills == 0
        assert _mma_kinds(_sass(ck)) == {"HGMMA" if case == "tf32" else "IGMMA"}


# ---------------------------------------------------------------------------------------------------
# the masked-K matmul (bench.py's _matmul_tile, Triton's tutorial form)
# ---------------------------------------------------------------------------------------------------


def _bench_module(impl: str):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench
        from common import instantiate
        return instantiate(bench.TEMPLATE, impl, "sass_checks")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


@pytest.mark.parametrize("target,dt,bk", [("sm_90a", "fp16", 64), ("sm_90a", "bf16", 64), ("sm_90a", "fp32", 32),
                                          ("sm_90a", "fp8e4nv", 128),
                                          ("sm_80", "fp16", 64), ("sm_80", "bf16", 64), ("sm_80", "fp32", 32),
                                          ("sm_89", "fp16", 64), ("sm_89", "fp32", 32)])
def test_masked_k_matmul_no_spill(target, dt, bk, monkeypatch):
    """128 x 128 x (64 bytes a row of a K tile: 32 fp32, 64 16-bit, 128 fp8), 8 warps, 3 stages, Triton's
    default specialization (pointers and ints divisible by 16): no spill, the tensor cores of the target."""
    monkeypatch.setenv("NEWT_DOT_LOWERING", "wgmma")  # tf32: wgmma when asked for, until a GPU run
    m = _bench_module("newt")
    sig = {"a_ptr": f"*{dt}:16", "b_ptr": f"*{dt}:16", "c_ptr": f"*{'fp16' if dt.startswith('fp8') else dt}:16"}
    sig.update({n: "i32:16" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
    ck = newt.compile(_jit(m._matmul_tile), signature=sig,
                      constexprs={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": bk, "GROUP_M": 8, "stride_ak": 1,
                                  "stride_bn": 1, "stride_cn": 1}, target=target, num_warps=8, num_stages=3,
                      cache=False)
    assert ck.metadata.n_spills == 0, ck.metadata
    want = {"fp32": "HGMMA", "fp8e4nv": "QGMMA"}.get(dt, "HGMMA") if target == "sm_90a" else "HMMA"
    assert _mma_kinds(_sass(ck)) == {want}


# what is known divisible by 16 (pointers / M, N, K / the runtime strides); stride_ak, stride_bn, stride_cn
# are 1 (specialized as Triton and newt's launcher do) except in "runtime-unit", where every stride is a
# run-time int.  With K not known divisible the masks change inside 8-element groups: 2-byte loads that
# cp.async cannot take, so the operands are loaded into registers and staged every iteration
UNALIGNED = {"nothing": ("", "", ""), "pointers": (":16", "", ""), "pointers+strides": (":16", "", ":16"),
             "runtime-unit": ("", "", "")}


@pytest.mark.parametrize("known", list(UNALIGNED))
@pytest.mark.parametrize("dt", ["fp16", "bf16"])
def test_unaligned_masked_k_matmul_no_spill(known, dt, monkeypatch):
    """Issue 24: the masked-K matmul (128x128x64, 8 warps, 3 stages) with nothing known divisible: HGMMA
    and 0 spill bytes (216-220 bytes before, Triton 3.9: none).  Each operand is written to its staging
    tile right after its load (one barrier before the first load), so the 2 x 32 loaded values a thread
    holds are never live together."""
    monkeypatch.delenv("NEWT_DOT_LOWERING", raising=False)
    m = _bench_module("newt")
    ph, ih, sh = UNALIGNED[known]
    sig = {"a_ptr": f"*{dt}{ph}", "b_ptr": f"*{dt}{ph}", "c_ptr": f"*{dt}{ph}"}
    sig.update({n: f"i32{ih}" for n in ("M", "N", "K")})
    sig.update({n: f"i32{sh}" for n in ("stride_am", "stride_bk", "stride_cm")})
    ce = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}
    if known == "runtime-unit":
        sig.update({n: "i32" for n in ("stride_ak", "stride_bn", "stride_cn")})
    else:
        ce.update(stride_ak=1, stride_bn=1, stride_cn=1)
    ck = newt.compile(_jit(m._matmul_tile), signature=sig, constexprs=ce, target="sm_90a", num_warps=8,
                      num_stages=3, cache=False)
    src = ck.asm["cuda"]
    assert "stage operand a" in src and "where it is loaded" in src
    assert ck.metadata.n_spills == 0, ck.metadata
    sass = _sass(ck)
    assert _mma_kinds(sass) == {"HGMMA"}
    assert not re.search(r"\b(LDL|STL)\b", sass)


@pytest.mark.parametrize("cfg", [(128, 256, 128, 3, 8), (128, 128, 128, 4, 4), (256, 128, 128, 3, 8)],
                         ids=lambda c: "x".join(map(str, c)))
def test_fp8_matmul_configs_no_spill(cfg):
    """bench.py's fp8 configs with a 128-deep K tile, B N-major (transposed in shared memory while the
    previous wgmma is in flight): no spill, as in Triton (176 and 208 bytes before the transposition
    loop was unrolled by two instead of fully)."""
    bm, bn, bk, s, w = cfg
    m = _bench_module("newt")
    sig = {"a_ptr": "*fp8e4nv:16", "b_ptr": "*fp8e4nv:16", "c_ptr": "*fp16:16"}
    sig.update({n: "i32:16" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
    ck = newt.compile(_jit(m._matmul_tile), signature=sig,
                      constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "stride_ak": 1,
                                  "stride_bn": 1, "stride_cn": 1}, target="sm_90a", num_warps=w, num_stages=s,
                      cache=False)
    assert "transpose the" in ck.asm["cuda"]
    assert ck.metadata.n_spills == 0, ck.metadata
    assert _mma_kinds(_sass(ck)) == {"QGMMA"}


# ---------------------------------------------------------------------------------------------------
# attention: no more spill than Triton's compile of the same source
# ---------------------------------------------------------------------------------------------------


def _triton_spills(impl_mod, cfg) -> int:
    """Bytes Triton's own compile of ``attn_fwd`` spills (stores + loads), its PTX through the ptxas it
    uses for sm_90a (``-v``)."""
    triton = pytest.importorskip("triton")
    try:
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.compiler import get_ptxas
        from triton.compiler import ASTSource
    except ImportError as e:
        pytest.skip(f"triton without an offline NVIDIA compiler: {e}")
    bm, bn, w, s, d, stage = cfg
    k = impl_mod.attn_fwd
    while not isinstance(k, triton.runtime.JITFunction):
        k = k.fn
    sig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "sm_scale": "fp32", "Out": "*fp16"}
    sig.update({n: "i32" for n in ("stride_qm", "stride_kn", "stride_vn", "stride_om", "N_CTX")})
    ce = {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "STAGE": stage}
    sig.update({n: "constexpr" for n in ce})
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(sig) if n not in ce and n != "sm_scale"}
    had = os.environ.get("TRITON_DEFAULT_FP_FUSION")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    try:
        tk = triton.compile(ASTSource(k, sig, ce, attrs), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": w, "num_stages": s})
    finally:  # leave the environment as it was (tests/conftest.py warns otherwise)
        if had is None:
            os.environ.pop("TRITON_DEFAULT_FP_FUSION", None)
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "k.ptx")
        Path(p).write_text(tk.asm["ptx"])
        r = subprocess.run([get_ptxas(90).path, "-v", "--gpu-name=sm_90a", p, "-o", p + ".o"], capture_output=True,
                           text=True, check=True)
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stderr)
    assert m, r.stderr
    return int(m.group(1)) + int(m.group(2))


# (BLOCK_M, BLOCK_N, num_warps, num_stages, HEAD_DIM, STAGE): the two configurations (d=128 at 8
# warps; d=64 causal at 4 warps) and d=128 at 4 warps, where both compilers run out of registers
ATTN_CFGS = [(128, 64, 8, 3, 128, 1), (128, 64, 4, 3, 64, 3), (128, 64, 4, 3, 128, 1), (64, 64, 4, 3, 64, 3)]


@pytest.mark.parametrize("cfg", ATTN_CFGS, ids=lambda c: "-".join(map(str, c)))
def test_attention_spills_no_more_than_triton(cfg):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from backend_perf import ATTN_TEMPLATE
        from common import instantiate
        nmod = instantiate(ATTN_TEMPLATE, "newt", "sass_attn")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    bm, bn, w, s, d, stage = cfg
    sig = {"Q": "*fp16:16", "K": "*fp16:16", "V": "*fp16:16", "sm_scale": "fp32", "Out": "*fp16:16"}
    sig.update({n: "i32:16" for n in ("stride_qm", "stride_kn", "stride_vn", "stride_om", "N_CTX")})
    ck = newt.compile(_jit(nmod.attn_fwd), signature=sig,
                      constexprs={"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "STAGE": stage}, target="sm_90a",
                      num_warps=w, num_stages=s, cache=False)
    assert _mma_kinds(_sass(ck)) == {"HGMMA"}
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        tmod = instantiate(ATTN_TEMPLATE, "triton", "sass_attn")
    except ImportError as e:
        pytest.skip(f"triton not importable: {e}")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    theirs = _triton_spills(tmod, cfg)
    assert ck.metadata.n_spills <= theirs, (cfg, ck.metadata.n_spills, theirs)
