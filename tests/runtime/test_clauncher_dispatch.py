"""The compiled launch path (``_launch.c``'s ``Dispatcher``, ``TuneDispatcher``, ``GridGetItem``) against the
Python fast path it stands in front of, which stays the reference: the same specialization key on random
arguments, the same launches, the same errors, and the Python path taken for everything unusual.  Runs
without a GPU, over the fake driver (tests/runtime/fakes.py) and the extension's stand-in cuLaunchKernel."""

from __future__ import annotations

import ctypes
import struct

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import newt
import newt.language as nl
from newt.runtime import clauncher
from newt.runtime.jit import build_fast_path, c_fast_path

from . import kernels as K
from .fakes import install_fake_c_launcher


@pytest.fixture
def gpu(fake_gpu, fake_backend, cuda_ok, monkeypatch):
    if install_fake_c_launcher(monkeypatch, fake_gpu) is None:
        pytest.skip("the compiled launcher cannot be built here (no C compiler)")
    for k in (K.add_kernel, K.scalars_kernel, K.dns_kernel, K.stages_kernel):
        k.clear_cache()
    yield fake_gpu
    for k in (K.add_kernel, K.scalars_kernel, K.dns_kernel, K.stages_kernel):
        k.clear_cache()


@newt.jit
def mixed(x_ptr, y_ptr, n, m, f, flag, opt, BLOCK: nl.constexpr, MODE: nl.constexpr = "a"):
    offs = nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, nl.load(y_ptr + offs) * f + n + m, mask=offs < n)


@newt.jit(do_not_specialize=["x_ptr", "n", "f"])
def mixed_dns(x_ptr, y_ptr, n, m, f, flag, opt, BLOCK: nl.constexpr, MODE: nl.constexpr = "a"):
    offs = nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, nl.load(y_ptr + offs) * f + n + m, mask=offs < n)


class Stop(Exception):
    pass


def python_key(kernel, grid, args, kwargs):
    """The key the generated Python fast path computes for the call (it stops at its cache miss)."""
    fast = build_fast_path(kernel)
    seen = {}

    def miss(key, dev, values, nw, ns, nc, warmup, cooperative=False, maxnreg=None):
        seen["key"] = key
        raise Stop
    fast.__globals__["_nwt_miss"] = miss
    fast.__globals__["_nwt_cache"] = {}
    with pytest.raises(Stop):
        fast(grid, *args, **kwargs)
    return seen["key"]


def same_key(a, b) -> bool:
    return len(a) == len(b) and all(type(x) is type(y) and (x is y or x == y) for x, y in zip(a, b))


EDGE_INTS = [0, 1, -1, 15, 16, -16, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 16, 2 ** 32 - 1, 2 ** 32, 2 ** 63 - 1, 2 ** 63,
             2 ** 63 + 16, 2 ** 64 - 16, 2 ** 64 - 1, 2 ** 64, -(2 ** 31), -(2 ** 31) - 1, -(2 ** 31) - 16,
             -(2 ** 63), -(2 ** 63) + 16, -(2 ** 63) - 1]
ints = st.one_of(st.sampled_from(EDGE_INTS), st.integers(min_value=-(2 ** 64), max_value=2 ** 64))
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8, torch.float64]


@st.composite
def tensors(draw):
    dt = draw(st.sampled_from(DTYPES))
    off = draw(st.integers(min_value=0, max_value=20))
    return torch.zeros(64, dtype=dt)[off:]  # the offset moves data_ptr off and on 16-byte alignment


scalars = st.one_of(ints, st.floats(allow_nan=True), st.booleans(), st.none())
values = st.one_of(tensors(), scalars)
constexprs = st.one_of(st.integers(min_value=-3, max_value=300), st.text(max_size=3), st.booleans(),
                       st.floats(allow_nan=False), st.none(), st.sampled_from([nl.float16, nl.int32]))


@st.composite
def calls(draw):
    args = [draw(values) for _ in range(7)]
    kwargs = {"BLOCK": draw(constexprs)}
    if draw(st.booleans()):
        kwargs["MODE"] = draw(constexprs)
    for opt, choices in (("num_warps", [1, 4, 8, None]), ("num_stages", [1, 2, 3, None])):
        if draw(st.booleans()):
            kwargs[opt] = draw(st.sampled_from(choices))
    by_name = draw(st.integers(min_value=0, max_value=7))  # the last arguments given by keyword
    names = mixed.arg_names[:7]
    for i in range(7 - by_name, 7):
        kwargs[names[i]] = args[i]
    return tuple(args[:7 - by_name]), kwargs


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=calls(), dns=st.booleans())
def test_the_compiled_key_is_the_python_key(gpu, call, dns):
    kernel = mixed_dns if dns else mixed
    args, kwargs = call
    disp = c_fast_path(kernel, build_fast_path(kernel))
    assert type(disp).__name__ == "Dispatcher"
    try:
        expect = python_key(kernel, (1,), args, kwargs)
    except TypeError as e:  # an int beyond 64 bits: the C side hands the call to the Python path
        assert "does not fit in 64 bits" in str(e)
        assert disp.key((1,), *args, **kwargs) is None
        return
    got = disp.key((1,), *args, **kwargs)
    assert got is not None, "every argument here is one the compiled path keys itself"
    assert same_key(got, expect), (got, expect)
    assert hash(got) == hash(expect)


def test_the_key_of_tensors_follows_alignment_and_dtype(gpu):
    disp = c_fast_path(K.add_kernel, build_fast_path(K.add_kernel))
    x = torch.zeros(64)
    k0 = disp.key((1,), x, x, x, 64, BLOCK_SIZE=16)
    k1 = disp.key((1,), x[1:], x, x, 64, BLOCK_SIZE=16)
    k4 = disp.key((1,), x[4:], x, x, 64, BLOCK_SIZE=16)
    assert k0[:2] == (torch.float32, True) and k1[:2] == (torch.float32, False) and k4 == k0
    assert disp.key((1,), x.half(), x, x, 64, BLOCK_SIZE=16)[0] is torch.float16
    assert disp.key((1,), x, x, x, 1, BLOCK_SIZE=16)[6:8] == ("c1", None)


# --- the same launches as the Python path ------------------------------------------------------------


def _run(fn, *a, **kw):
    try:
        fn(*a, **kw)
        return None
    except Exception as e:
        return type(e), str(e)


class StreamLike:
    cuda_stream = 4242


LAUNCH_CASES = [
    ((4,), (1000,), {"BLOCK_SIZE": 256}),
    ((4, 2), (1000,), {"BLOCK_SIZE": 256, "num_warps": 8}),
    ((1, 2, 3), (1,), {"BLOCK_SIZE": 16}),
    (lambda meta: (meta["n_elements"] // meta["BLOCK_SIZE"],), (512,), {"BLOCK_SIZE": 128}),
    (lambda meta: [meta["num_warps"], 2], (64,), {"BLOCK_SIZE": 64, "num_warps": 2}),  # a list: normalized
    (lambda meta: 3, (64,), {"BLOCK_SIZE": 64}),  # an int
    (lambda meta: "x", (64,), {"BLOCK_SIZE": 64}),
    (7, (64,), {"BLOCK_SIZE": 64}),
    ((0,), (64,), {"BLOCK_SIZE": 64}),  # an empty grid: no launch
    ((2 ** 31,), (64,), {"BLOCK_SIZE": 64}),  # beyond CUDA's limit: LaunchError
    ((-1,), (64,), {"BLOCK_SIZE": 64}),
    ((1.5,), (64,), {"BLOCK_SIZE": 64}),
    ("x", (64,), {"BLOCK_SIZE": 64}),
    (None, (64,), {"BLOCK_SIZE": 64}),
    ((1, 2, 3, 4), (64,), {"BLOCK_SIZE": 64}),
    ((1,), (64,), {"BLOCK_SIZE": 64, "stream": 77}),
    ((1,), (64,), {"BLOCK_SIZE": 64, "stream": StreamLike()}),
    ((1,), (64,), {"BLOCK_SIZE": 64, "stream": None}),
    ((1,), (64,), {"BLOCK_SIZE": 64, "num_stages": 2}),
    ((1,), (64,), {"BLOCK_SIZE": 64, "num_warps": 3}),  # refused at the miss
    ((1,), (), {"BLOCK_SIZE": 64}),  # n_elements missing
    ((1,), (64, 5), {"BLOCK_SIZE": 64}),  # one argument too many
    ((1,), (64,), {"BLOCK_SIZE": 64, "BLOCK_SIZ": 3}),  # a misspelt keyword
    ((1,), (64,), {"BLOCK_SIZE": 64, "n_elements": 3}),  # given twice
    ((1,), (64,), {}),  # the constexpr missing
    ((1,), (2 ** 70,), {"BLOCK_SIZE": 64}),  # an int beyond 64 bits
    ((1,), (64.0,), {"BLOCK_SIZE": 64}),  # a float where an int was
    ((1,), (True,), {"BLOCK_SIZE": 64}),
]


@pytest.mark.parametrize("case", range(len(LAUNCH_CASES)))
def test_launches_and_errors_match_the_python_path(gpu, case):
    grid, rest, kw = LAUNCH_CASES[case]
    x = torch.randn(1024)
    outcomes = []
    for use_c in (False, True):
        K.add_kernel.clear_cache()
        gpu.launches.clear()
        fast = K.add_kernel.grid_launcher()
        assert type(fast).__name__ == "Dispatcher"
        f = fast if use_c else fast.py_fast
        first = _run(f, grid, x, x, x, *rest, **kw)  # a miss (compiles), then a hit
        second = _run(f, grid, x, x, x, *rest, **kw)
        outcomes.append((first, second, [(ln.grid, ln.block, ln.stream, ln.values) for ln in gpu.launches]))
    assert outcomes[0] == outcomes[1]


def test_a_hit_is_launched_in_c_and_a_miss_or_warmup_in_python(gpu, fake_backend):
    x = torch.randn(64)
    K.add_kernel[(1,)](x, x, x, 64, BLOCK_SIZE=64)
    disp = K.add_kernel._fast
    assert disp.stats() == {"hits": 0, "forwarded": 1}
    K.add_kernel[(2,)](x, x, x, 48, BLOCK_SIZE=64)
    assert disp.stats() == {"hits": 1, "forwarded": 1}
    assert gpu.launches[-1].values == (x.data_ptr(),) * 3 + (48,) and gpu.launches[-1].grid == (2, 1, 1)
    ck = K.add_kernel.warmup(x, x, x, 48, BLOCK_SIZE=64, grid=(1,))
    assert disp.stats()["forwarded"] == 2 and ck is K.add_kernel[(1,)](x, x, x, 48, BLOCK_SIZE=64)
    assert fake_backend.compiled == 1
    K.add_kernel.clear_cache()  # the dispatcher holds nothing of its own: a cleared cache is a miss
    disp((1,), x, x, x, 48, BLOCK_SIZE=64)
    assert disp.stats()["forwarded"] == 3 and len(K.add_kernel._cache) == 1


@pytest.mark.parametrize("arg", ["tuple", "descriptor", "parameter", "numpy", "bytes"])
def test_unusual_arguments_take_the_python_path(gpu, arg):
    import numpy as np
    x = torch.randn(64)
    K.add_kernel[(1,)](x, x, x, 64, BLOCK_SIZE=64)
    disp = K.add_kernel._fast
    before = disp.stats()
    if arg == "bytes":  # a CUtensorMap given as 128 bytes: not an argument the key knows yet -> its error
        with pytest.raises(TypeError, match="cannot pass a bytes"):
            K.add_kernel[(1,)](x, x, x, bytes(128), BLOCK_SIZE=64)
    elif arg == "tuple":
        with pytest.raises(Exception):  # noqa: B017 - whatever the Python path says of it
            K.add_kernel[(1,)](x, x, x, (64,), BLOCK_SIZE=64)
    elif arg == "descriptor":
        from newt.tools.tensor_descriptor import TensorDescriptor
        with pytest.raises(Exception):  # noqa: B017
            K.add_kernel[(1,)](x, x, x, TensorDescriptor.from_tensor(x, [16]), BLOCK_SIZE=64)
    elif arg == "parameter":  # a tensor subclass
        K.add_kernel[(1,)](torch.nn.Parameter(x), x, x, 64, BLOCK_SIZE=64)
        assert gpu.launches[-1].values[0] == x.data_ptr()
    else:
        K.add_kernel[(1,)](x, x, x, np.int64(64), BLOCK_SIZE=64)
        assert gpu.launches[-1].values[3] == 64
    after = disp.stats()
    assert after["forwarded"] == before["forwarded"] + 1 and after["hits"] == before["hits"]


def test_the_grid_callable_sees_every_argument_and_the_options(gpu):
    x = torch.randn(64)
    seen = []

    def grid_of(meta):
        seen.append(dict(meta))
        return (1,)
    K.add_kernel[grid_of](x, x, x, 64, BLOCK_SIZE=64)
    K.add_kernel[grid_of](x, x, x, 64, BLOCK_SIZE=64)  # the compiled path
    assert K.add_kernel._fast.stats()["hits"] == 1
    assert seen[0] == seen[1] and list(seen[1]) == ["x_ptr", "y_ptr", "out_ptr", "n_elements", "BLOCK_SIZE",
                                                    "num_warps", "num_stages"]
    assert seen[1]["num_warps"] == 4 and seen[1]["num_stages"] == 3 and seen[1]["x_ptr"] is x


def test_a_parameter_named_num_stages_is_the_option(gpu):
    out = torch.empty(16)
    for _ in range(2):
        K.stages_kernel[(1,)](out, 16, BLOCK=16, num_stages=2)
    disp = K.stages_kernel._fast
    assert disp.stats()["hits"] == 1
    key = disp.key((1,), out, 16, 16, 2)
    assert key[-4] == 2 and same_key(key, python_key(K.stages_kernel, (1,), (out, 16, 16, 2), {}))


def test_a_replaced_kernel_code_is_seen(gpu, fake_backend):
    @newt.jit
    def k(x_ptr, BLOCK: nl.constexpr):
        nl.store(x_ptr + nl.arange(0, BLOCK), 1.0)

    def k2(x_ptr, BLOCK: nl.constexpr):
        nl.store(x_ptr + nl.arange(0, BLOCK), 2.0)
    x = torch.empty(16)
    k[(1,)](x, BLOCK=16)
    k[(1,)](x, BLOCK=16)
    b = k[(1,)]
    assert type(b).__name__ == "Bound" and b.grid == (1,) and b.func is k._fast
    preset = k.preset_launcher({"BLOCK": 16})
    preset((1,), x)
    assert fake_backend.compiled == 1 and preset.stats()["hits"] == 1
    k.fn.__code__ = k2.__code__
    k[(1,)](x, BLOCK=16)  # the compiled __getitem__ sees the new code and goes through the Python one
    assert fake_backend.compiled == 2
    preset((1,), x)  # a preset dispatcher made before checks the code too
    assert fake_backend.compiled == 2 and preset.stats() == {"hits": 1, "forwarded": 1}


# --- autotuned kernels ------------------------------------------------------------------------------


def _tuned(config_hook=None):
    """add_kernel tuned over BLOCK_SIZE 64 and 128 (128 wins) with a do_bench double."""
    state = {}

    def bench(fn, quantiles=None):
        fn()
        return [{64: 2.0, 128: 1.0}[state["b"]]] * 3

    def hook(nargs):
        state["b"] = nargs["BLOCK_SIZE"]
    configs = [newt.Config({"BLOCK_SIZE": b}, num_warps=4, pre_hook=config_hook) for b in (64, 128)]
    return newt.autotune(configs, key=["n_elements"], do_bench=bench, pre_hook=hook)(newt.jit(K.add_kernel.fn))


def grid(meta):
    return (newt.cdiv(meta["n_elements"], meta["BLOCK_SIZE"]),)


def test_an_autotuned_hit_is_launched_in_c(gpu):
    k = _tuned()
    x = torch.randn(1024)
    k[grid](x, x, x, 1024)
    tuner = k._c_launch
    assert type(tuner).__name__ == "TuneDispatcher"
    n = len(gpu.launches)
    k.best_config = None
    k[grid](x, x, x, 1024)
    assert tuner.stats()["hits"] == 1 and k.best_config.kwargs == {"BLOCK_SIZE": 128}
    assert len(gpu.launches) == n + 1 and gpu.launches[-1].grid == (8, 1, 1)
    args = (x, x, x, 1024)
    assert tuner.key(grid, *args) == k._key_fn(args) == k._tuning_key(args, {})
    assert tuner.key(grid, x, x, x, 2.5) is None and k._key_fn((x, x, x, 2.5)) is None
    k[grid](x, x, x, 1024, stream=0)  # keywords: Autotuner._launch
    assert tuner.stats()["forwarded"] == 1 and len(gpu.launches) == n + 2
    h = x.half()
    k[grid](h, h, h, 512)  # a new tuning key: the Python path tunes, then the compiled one launches it
    k[grid](h, h, h, 512)
    assert tuner.stats()["hits"] == 2 and gpu.launches[-1].grid == (4, 1, 1)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=ints, dt=st.sampled_from(DTYPES), other=st.one_of(st.none(), st.floats(), st.booleans(), ints))
def test_the_compiled_tuning_key_is_the_python_one(gpu, n, dt, other):
    from newt.tune.autotuner import _c_tuner, _key_function
    k = newt.autotune([newt.Config({"BLOCK_SIZE": 64})], key=["n_elements", "y_ptr"])(newt.jit(K.add_kernel.fn))
    x = torch.zeros(8, dtype=dt)
    first = (x, other, x, n)
    tuner, kf = _c_tuner(k, first), _key_function(k._key_pos, first)
    for args in (first, (x, other, x, n + 1), (x, x, x, n), (x, other, x), (x.half(), other, x, n)):
        expect = kf(args)
        got = tuner.key(grid, *args)
        assert (got is None) == (expect is None)
        if got is not None:
            assert same_key(got, expect) and same_key(got, k._tuning_key(args, {}))


def test_an_autotuned_config_with_a_pre_hook_takes_the_python_path(gpu):
    calls = []
    k = _tuned(config_hook=lambda nargs: calls.append(nargs["BLOCK_SIZE"]))
    x = torch.randn(1024)
    k[grid](x, x, x, 1024)
    calls.clear()
    k[grid](x, x, x, 1024)
    assert calls == [128] and k._c_launch.stats() == {"hits": 0, "forwarded": 1}


# --- the Launcher: by-value blobs (a CUtensorMap), read in place --------------------------------------


def test_blob_codes():
    assert clauncher.CODES["128s"] == clauncher.BLOB + 16 and clauncher.CODES["Q"] == 8
    for bad in ("127s", "0s", f"{clauncher.BLOB_MAX + 8}s", "xs", "z"):
        with pytest.raises(KeyError):
            clauncher.CODES[bad]


def test_a_128_byte_parameter_is_passed_by_value():
    mod = clauncher.module()
    if mod is None:
        pytest.skip("the compiled launcher cannot be built here (no C compiler)")
    seen, fallbacks = [], []

    def callback(func, gx, gy, gz, bx, by, bz, shm, stream, params, has_extra, coop):
        ptrs = (ctypes.c_void_p * 3).from_address(params)
        seen.append((ctypes.string_at(ptrs[0], 8), ctypes.string_at(ptrs[1], 128), ctypes.string_at(ptrs[2], 4)))
        return 0
    launch, _ = mod.fake_driver(callback)
    codes = bytes(clauncher.CODES[c] for c in ("Q", "128s", "i"))
    ln = mod.Launcher(launch, False, 0x1000, 128, 0, codes, (0, 1, 2), 3, lambda *a: None,
                      lambda *a: fallbacks.append(a), None, None)
    tmap = bytes(range(128))
    ln(1, 1, 1, 0, 0xABCDEF0, tmap, -5)
    assert seen == [(struct.pack("<Q", 0xABCDEF0), tmap, struct.pack("<i", -5))]
    ln(1, 1, 1, 0, 0xABCDEF0, tmap[:127], -5)  # the wrong size: the Python launch (which raises or packs)
    ln(1, 1, 1, 0, 0xABCDEF0, bytearray(tmap), -5)  # mutable: not read in place without the GIL
    assert len(seen) == 1 and len(fallbacks) == 2 and fallbacks[1][5] == bytearray(tmap)


def test_without_the_extension_the_python_fast_path_is_used(gpu, monkeypatch):
    monkeypatch.setenv("NEWT_C_LAUNCHER", "0")
    K.add_kernel.clear_cache()
    x = torch.randn(16)
    K.add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)
    assert type(K.add_kernel._fast).__name__ == "function"
    assert gpu.launches[-1].values == (x.data_ptr(),) * 3 + (16,)


def test_a_patched_tensor_type_is_seen(gpu):
    """The dispatcher calls torch.Tensor's dtype getter directly while the type is unchanged; a patched
    type is followed (and the getter taken up again once the patch is gone)."""
    disp = c_fast_path(K.add_kernel, build_fast_path(K.add_kernel))
    x = torch.zeros(64)
    assert disp.key((1,), x, x, x, 64, BLOCK_SIZE=16)[0] is torch.float32
    assert "dtype" not in torch.Tensor.__dict__
    torch.Tensor.dtype = property(lambda self: torch.float16)
    try:
        got = disp.key((1,), x, x, x, 64, BLOCK_SIZE=16)
        assert got[0] is torch.float16 and same_key(got, python_key(K.add_kernel, (1,), (x, x, x, 64),
                                                                    {"BLOCK_SIZE": 16}))
    finally:
        del torch.Tensor.dtype
    assert disp.key((1,), x, x, x, 64, BLOCK_SIZE=16)[0] is torch.float32
