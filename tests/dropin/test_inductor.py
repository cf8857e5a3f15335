"""torch.compile (inductor's Triton code generation) under the drop-in.

With ``torch._inductor.config.cpu_backend = "triton"`` inductor generates Triton kernels for CPU tensors and
compiles them as it does for a GPU: ``triton.compile(ASTSource(...), target=GPUTarget("cpu", ...))`` through
the drop-in (newt's front end; the kernels run on newt's interpreter).  Each compiled function is checked
against eager.  The settings the drop-in makes for a CUDA device are checked as settings, and one
inductor-generated kernel is compiled for sm_90a (a cubin, through NVRTC, with no GPU).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch  # (module scope: triton_op reads the annotations ``torch.Tensor`` of the op below)

# torch's inductor decides once, when first imported, whether a ``triton`` exists; where another test of the
# same process imported it without the drop-in on a machine without Triton, torch.compile cannot use the drop-in
# any more (newt.dropin.install() warns). ``./dev test`` runs these tests in a process of their own.
pytestmark = pytest.mark.own_process


@pytest.fixture(autouse=True)
def _inductor_not_imported_without_triton():
    from newt.dropin import inductor_decided_without_triton
    if inductor_decided_without_triton():
        if os.environ.get("NEWT_TEST_OWN_PROCESS") == "1":  # (./dev test's own step: this must not happen)
            pytest.fail("torch's inductor was imported without a triton before these tests, in their own process")
        pytest.skip("another test of this process imported torch's inductor without a triton first: run with "
                    "`python -m pytest -m own_process -n 0 tests/dropin` (as ./dev test does)")

USER_KERNELS = """
import triton
import triton.language as tl


@triton.jit
def add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)
"""


@pytest.fixture
def inductor(dropin, tmp_path, monkeypatch):
    """The drop-in with inductor generating Triton for the CPU, in a cache directory of its own; yields the
    list of kernels ``triton.compile`` built (``newt.dropin.compiler``'s compiled kernels)."""
    import torch._dynamo
    import torch._inductor.config as cfg
    dc = _compiler_module()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))  # (inductor sets it where it is unset)
    torch._dynamo.reset()
    dc._COMPILED.clear()
    try:
        # (torch's config module: its own patch(), monkeypatch's undo deletes the setting)
        with cfg.patch(cpu_backend="triton", fx_graph_cache=False):
            yield dc._COMPILED
    finally:
        torch._dynamo.reset()
        dc._COMPILED.clear()


def _compiler_module():
    """newt.dropin.compiler (a stand-in with an empty record where it is missing, so that each test fails
    on what torch.compile does without it, not here)."""
    try:
        from newt.dropin import compiler
    except ImportError:
        import types
        return types.SimpleNamespace(_COMPILED={})
    return compiler


def _names(compiled) -> set:
    return {ck.name for ck in compiled.values()}


def test_pointwise(inductor):
    def f(x, y):
        return (x * y).sin() + torch.sigmoid(y)

    x, y = torch.randn(300), torch.randn(300)
    torch.testing.assert_close(torch.compile(f)(x, y), f(x, y))
    assert any(n.startswith("triton_poi_") for n in _names(inductor))
    assert all(ck.metadata.target.backend == "cpu" for ck in inductor.values())


def test_reductions_sum_and_softmax_over_rows(inductor):
    def f(x):
        return x.sum(-1), torch.softmax(x, -1)

    x = torch.randn(37, 129)
    for got, want in zip(torch.compile(f)(x), f(x)):
        torch.testing.assert_close(got, want)
    assert any(n.startswith(("triton_per_", "triton_red_")) for n in _names(inductor))


def test_looped_reduction(inductor):
    """Inductor's looped (``triton_red_``) reduction kernel, persistent reductions turned off."""
    import torch._inductor.config as cfg

    def f(x):
        return torch.log_softmax(x, -1)

    x = torch.randn(4, 3000)
    with cfg.patch({"triton.persistent_reductions": False}):
        torch.testing.assert_close(torch.compile(f)(x), f(x))
    assert any(n.startswith("triton_red_") for n in _names(inductor))


def test_sort_uses_triton_language_core_helpers(inductor):
    """``torch.sort`` compiles to inductor's bitonic sort helpers, which call ``tl.core.get_int_dtype(bitwidth=,
    signed=)`` at compile time (ml-cross-entropy's backward on the H100 stopped there with N004)."""
    def f(x):
        return torch.sort(x, -1)

    x = torch.randn(8, 64)
    got, want = torch.compile(f)(x), f(x)
    torch.testing.assert_close(got.values, want.values)
    torch.testing.assert_close(got.indices, want.indices)
    assert any("sort" in n for n in _names(inductor))


def test_fused_multi_output_kernel(inductor):
    def f(x):
        y = x.relu()
        return y * 2, y.exp(), (y - 1).abs()

    x = torch.randn(64, 17)
    outs = torch.compile(f)(x)
    for got, want in zip(outs, f(x)):
        torch.testing.assert_close(got, want)
    assert len(_names(inductor)) == 1  # the three outputs from one fused kernel (its configs compiled)
    ck = next(iter(inductor.values()))
    assert sum(t.startswith("*") for t in ck.src.signature.values()) == 4  # one input, three outputs


def test_dynamic_shapes_two_sizes(inductor):
    def f(x):
        return torch.nn.functional.gelu(x) + torch.tanh(x) * torch.erf(x)  # (erf: libdevice)

    cf = torch.compile(f, dynamic=True)
    for n in (33, 100):
        x = torch.randn(n, 7)
        torch.testing.assert_close(cf(x), f(x))
    # one kernel, the size a run-time argument (no recompilation for the second size)
    assert len({ck.src.fn for ck in inductor.values()}) == 1
    (ck,) = list(inductor.values())[:1]
    assert "xnumel" in ck.src.signature and ck.src.signature["xnumel"] != "constexpr"


def test_backward_of_a_compiled_function(inductor):
    def loss(w, x):
        return torch.log_softmax(x @ w, -1)[:, 0].sum() + (w * w).sum()

    w = torch.randn(8, 5, requires_grad=True)
    x = torch.randn(6, 8)
    got = torch.compile(loss)(w, x)
    got.backward()
    g_compiled, w.grad = w.grad.clone(), None
    want = loss(w, x)
    want.backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(g_compiled, w.grad)
    assert len(inductor) >= 2  # forward and backward kernels


def test_indirect_indexing_with_device_assert(inductor):
    def f(x, i):
        return x[i] * 2

    x, i = torch.randn(10, 5), torch.tensor([3, 0, 9, 3])
    torch.testing.assert_close(torch.compile(f)(x, i), f(x, i))
    # inductor compiles with debug=True and bounds-checks the index with tl.device_assert
    assert any("device_assert" in ck.src.fn.src for ck in inductor.values())


def _user_kernels(tmp_path):
    path = tmp_path / "inductor_user_kernels.py"
    path.write_text(USER_KERNELS)
    spec = importlib.util.spec_from_file_location("inductor_user_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["inductor_user_kernels"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_user_kernel_next_to_compiled_code(inductor, tmp_path):
    """A ``@triton.jit`` kernel called from a compiled function, directly and through
    ``torch.library.triton_op`` / ``wrap_triton``: inductor compiles it with its own kernels."""
    import triton
    from torch.library import triton_op, wrap_triton
    k = _user_kernels(tmp_path).add_one

    @triton_op("newt_inductor_test::add_one", mutates_args={})
    def add_one_op(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        wrap_triton(k)[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)
        return y

    def direct(x):
        y = torch.empty_like(x)
        n = x.numel()
        k[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)
        return (y * 3).sin()

    def via_op(x):
        return add_one_op(x.cos()) * 2

    x = torch.randn(100)
    torch.testing.assert_close(torch.compile(direct)(x), ((x + 1) * 3).sin())
    torch.testing.assert_close(torch.compile(via_op)(x), (x.cos() + 1) * 2)
    assert "add_one" in _names(inductor)


def test_inductor_settings_for_a_cuda_device(dropin):
    """What inductor reads before it compiles for a GPU: the drop-in's backend under "nvidia", its hash,
    make_backend/parse_options, the static CUDA launcher off and compile workers off (also when inductor's
    config is imported after install(), and put back by uninstall())."""
    import torch._inductor.async_compile as ac
    import torch._inductor.config as cfg
    import torch.utils._triton as tu
    import triton
    import triton.backends
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend
    from triton.runtime.driver import driver

    from newt.dropin import inductor as di
    assert cfg.use_static_cuda_launcher is False and cfg.use_static_triton_launcher is False
    assert cfg.compile_threads == 1 and not ac.AsyncCompile.use_process_pool()
    assert {"nvidia", "cpu"} <= set(triton.backends.backends)
    from torch._inductor.runtime import triton_helpers as th
    th.set_driver_to_gpu()
    assert driver.active.get_current_target().backend == "cuda"
    th.set_driver_to_cpu()
    assert driver.active.get_current_target().backend == "cpu"
    th.set_driver_to_gpu()
    be = make_backend(GPUTarget("cuda", 90, 32))
    opts = be.parse_options({"num_warps": 8, "num_stages": 2, "debug": True, "launch_pdl": False,
                             "unknown_option": 1})
    assert (opts.num_warps, opts.num_stages, opts.debug, opts.arch) == (8, 2, True, "sm_90a")
    assert be.binary_ext == "cubin" and "newt" in be.hash()
    assert th.get_backend_options()["num_warps"] == 4
    tu.triton_backend.cache_clear()
    tu.triton_hash_with_backend.cache_clear()
    assert len(tu.triton_hash_with_backend()) == 64
    from torch._inductor.runtime.runtime_utils import triton_hash_to_path_key
    assert triton_hash_to_path_key("ab" * 32) != "ab" * 32  # (triton.runtime.cache._base32)
    assert triton.knobs.runtime.launch_enter_hook is None
    # inductor's config imported after install(): the finder makes the settings when it loads
    saved = {k: v for k, v in sys.modules.items() if k == di.CONFIG_MODULE}
    dropin.uninstall()
    assert cfg.use_static_cuda_launcher == di._saved.get("use_static_cuda_launcher", cfg.use_static_cuda_launcher)
    assert cfg.compile_threads != 1 or di.SETTINGS["compile_threads"] == 1
    del sys.modules[di.CONFIG_MODULE]
    try:
        dropin.install()
        import torch._inductor.config as fresh
        assert fresh is not cfg and fresh.use_static_cuda_launcher is False and fresh.compile_threads == 1
    finally:
        sys.modules.update(saved)
        torch._inductor.config = cfg  # (the import bound the package's attribute to the fresh module)
        dropin.uninstall()
        dropin.install()


def test_static_launcher_declines_a_dropin_kernel(inductor):
    """Even with the static launcher switched back on, inductor finds no Triton cubin of a drop-in kernel in
    Triton's cache layout and launches through the kernel's own ``run``."""
    import torch._inductor.config as cfg
    assert cfg.use_static_cuda_launcher is False

    def f(x):
        return x * 2 + 1

    x = torch.randn(50)
    torch.compile(f)(x)
    ck = next(iter(inductor.values()))
    from torch._inductor.runtime.triton_heuristics import HeuristicType, StaticTritonCompileResult
    with cfg.patch(use_static_cuda_launcher=True):
        assert StaticTritonCompileResult.can_statically_launch(ck, {}, {"device_type": "cuda"},
                                                               HeuristicType.POINTWISE) is None


def test_an_inductor_kernel_compiles_for_sm90a(inductor):
    """One kernel inductor generated (on the CPU run) through ``triton.compile(ASTSource(...),
    target=GPUTarget("cuda", 90, 32))``: newt's CUDA backend builds a cubin with no GPU, and the compiled
    kernel, launched as Triton's launcher is (``run(gx, gy, gz, stream, function, metadata, ...)``), runs on
    the interpreter here and gives eager's result."""
    pytest.importorskip("cuda.bindings.nvrtc")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    def f(x):
        return (x.sin() * 2).sum(-1)

    x = torch.randn(8, 100)
    torch.compile(f)(x)
    assert len(_names(inductor)) == 1
    src = next(iter(inductor.values())).src
    consts = {src.fn.arg_names[k[0]]: v for k, v in src.constants.items()}
    binary = triton.compile(ASTSource(src.fn, src.signature, consts, src.attrs), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 4, "num_stages": 1, "debug": True})
    assert binary.asm["cubin"][:4] == b"\x7fELF" and binary.kernel == binary.asm["cubin"]
    assert binary.metadata.arch == "sm_90a" and binary.metadata.num_warps == 4
    assert binary.metadata.name == binary.name and isinstance(binary.metadata.shared, int)
    assert binary.n_regs > 0 and binary.n_spills == 0
    assert binary.packed_metadata[:2] == (4, 1)
    assert len(binary.hash) == 64 and binary.launch_metadata((1, 1, 1), 0) is None
    # run as inductor's generated launcher does: every argument, the constexprs included
    out = torch.empty(8)
    args = {"in_ptr0": x, "out_ptr0": out, "xnumel": 8, "r0_numel": 100, **consts}
    assert set(src.fn.arg_names) <= set(args), src.fn.arg_names
    xblock = consts.get("XBLOCK", 1)
    binary._init_handles()
    binary.run(triton.cdiv(8, xblock), 1, 1, 0, binary.function, binary.packed_metadata, None, None, None,
               *[args[n] for n in src.fn.arg_names])
    torch.testing.assert_close(out, f(x))


GPU_SCRIPT = r"""
import torch
import newt.dropin
newt.dropin.install()
import triton  # noqa: F401  (newt's)
from newt.dropin import compiler as dc
torch.manual_seed(0)


def pointwise(x, y):
    return (x * y).sin() + torch.sigmoid(y)


def rows(x):
    return x.sum(-1), torch.softmax(x.float(), -1)


def mlp(x, w):
    return torch.nn.functional.gelu(x @ w).sum()


x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
torch.testing.assert_close(torch.compile(pointwise)(x, y), pointwise(x, y))
h = torch.randn(257, 1031, device="cuda", dtype=torch.float16)
for a, b in zip(torch.compile(rows)(h), rows(h)):
    torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)
xs = torch.randn(64, 96, device="cuda", requires_grad=True)
w = torch.randn(96, 80, device="cuda", requires_grad=True)
torch.compile(mlp)(xs, w).backward()
g = xs.grad.clone(); xs.grad = None
mlp(xs, w).backward()
torch.testing.assert_close(g, xs.grad, atol=1e-3, rtol=1e-3)
names = {ck.name for ck in dc._COMPILED.values()}
assert any(n.startswith("triton_poi_") for n in names), names
assert any(n.startswith(("triton_red_", "triton_per_")) for n in names), names
assert all(ck.metadata.target.backend == "cuda" for ck in dc._COMPILED.values())
print("INDUCTOR-GPU-OK", len(names))
"""


@pytest.mark.gpu
def test_torch_compile_on_the_gpu_runs_newt_kernels(tmp_path):
    """On a GPU: inductor's own CUDA code generation (pointwise, row reductions in fp16, a backward) under the
    drop-in, each compiled by newt and launched by newt's launcher, against eager; a fresh process (the drop-in
    must be in place before torch._inductor is imported) with caches of its own."""
    import os
    import subprocess
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "ind"),
               TRITON_CACHE_DIR=str(tmp_path / "tri"), NEWT_CACHE_DIR=str(tmp_path / "newt"))
    r = subprocess.run([sys.executable, "-c", GPU_SCRIPT], capture_output=True, text=True, env=env, timeout=400)
    assert r.returncode == 0 and "INDUCTOR-GPU-OK" in r.stdout, (r.stdout[-2000:], r.stderr[-4000:])


def test_the_process_record_of_compiled_kernels_is_bounded(inductor, monkeypatch):
    """``triton.compile``'s in-process record keeps the most recent kernels only (a long torch.compile session
    builds thousands): past its bound the oldest goes, a hit moves a kernel to the newest end, and a kernel that
    went is compiled again (from newt's disk cache) as an equal build."""
    import triton
    from triton.compiler import ASTSource
    dc = _compiler_module()
    monkeypatch.setattr(dc, "_COMPILED_MAX", 2)

    def f(x):
        return x.cos() + 1

    torch.compile(f)(torch.randn(20))
    src = next(iter(inductor.values())).src
    consts = {src.fn.arg_names[k[0]]: v for k, v in src.constants.items()}

    def build(warps):
        return triton.compile(ASTSource(src.fn, src.signature, consts, src.attrs), target=("cpu", 0, 32),
                              options={"num_warps": warps})
    dc._COMPILED.clear()
    a, b = build(1), build(2)
    assert build(1) is a and list(dc._COMPILED.values()) == [b, a]  # the hit moved to the newest end
    c = build(4)
    assert len(dc._COMPILED) == 2 and list(dc._COMPILED.values()) == [a, c]  # b, the oldest, went
    b2 = build(2)
    assert b2 is not b and b2.hash == b.hash and b2.name == b.name
    assert list(dc._COMPILED.values()) == [c, b2]
