"""Host TensorDescriptors and TMA tensor maps on the compiled launch path (``_launch.c``): the ``Dispatcher``
keys newt's own ``TensorDescriptor`` itself (``desc_entry``, the key ``specialize._desc_entries`` makes), and the
``Launcher`` encodes a kernel's tensor maps through their makers and passes them by value, where both used to
hand every such launch to Python.  The Python path stays the reference: the same keys, the same launched values
and tensor-map bytes, the same errors.  No GPU: the fake driver (tests/runtime/fakes.py) and the extension's
stand-in cuLaunchKernel."""

from __future__ import annotations

import struct

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import newt
import newt.language as nl
from newt.runtime import tensormap
from newt.runtime.jit import build_fast_path, c_fast_path
from newt.runtime.tensormap import TensorMapError
from newt.tools.tensor_descriptor import TensorDescriptor as TD

from .conftest import needs_backend
from .fakes import install_fake_c_launcher
from .test_clauncher_dispatch import python_key, same_key


@pytest.fixture
def cgpu(fake_gpu, cuda_ok, monkeypatch):
    if install_fake_c_launcher(monkeypatch, fake_gpu) is None:
        pytest.skip("the compiled launcher cannot be built here (no C compiler)")
    return fake_gpu


@newt.jit
def _copy(x_desc, y_desc, n, BM: nl.constexpr, BN: nl.constexpr):
    m = nl.program_id(0) * BM
    y_desc.store([m, 0], x_desc.load([m, 0]) + n)


@newt.jit(do_not_specialize=["x_desc", "n"])
def _copy_dns(x_desc, y_desc, n, BM: nl.constexpr, BN: nl.constexpr):
    m = nl.program_id(0) * BM
    y_desc.store([m, 0], x_desc.load([m, 0]) + n)


DIMS = [1, 2, 15, 16, 17, 64, 96, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 40, 2 ** 63 + 16]
BLOCKS = [1, 2, 8, 16, 32, 64, 3, 48, 0]


@st.composite
def descriptors(draw):
    dt = draw(st.sampled_from([torch.float16, torch.float32, torch.int8, torch.bfloat16]))
    off = draw(st.integers(min_value=0, max_value=9))
    base = torch.zeros(64, dtype=dt)[off:]
    rank = draw(st.integers(min_value=1, max_value=3))
    shape = [draw(st.sampled_from(DIMS)) for _ in range(rank)]
    strides = [draw(st.sampled_from(DIMS)) for _ in range(rank - 1)] + [1]
    block = [draw(st.sampled_from(BLOCKS)) for _ in range(rank)]
    d = TD.__new__(TD)  # (the constructor's own checks are not what is tested here: the launch's are)
    d.base, d.shape, d.strides, d.block_shape = base, shape, strides, block
    d.padding = draw(st.sampled_from(["zero", "nan", None, ""]))
    return d


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=descriptors(), b=descriptors(), n=st.sampled_from([1, 16, 7, 2 ** 33]), dns=st.booleans())
def test_the_compiled_key_of_descriptors_is_the_python_key(cgpu, a, b, n, dns):
    kernel = _copy_dns if dns else _copy
    disp = c_fast_path(kernel, build_fast_path(kernel))
    try:
        expect = python_key(kernel, (1,), (a, b, n), {"BM": 16, "BN": 16})
    except (TypeError, ValueError):  # what the launch refuses (a block, a 65-bit size): the Python path's error
        assert disp.key((1,), a, b, n, BM=16, BN=16) is None
        return
    got = disp.key((1,), a, b, n, BM=16, BN=16)
    assert got is not None, "newt's own descriptors on tensors are keyed in C"
    assert same_key(got, expect) and hash(got) == hash(expect), (got, expect)


def test_descriptors_of_other_kinds_take_the_python_path(cgpu):
    x = torch.zeros(64, 64, dtype=torch.float16)
    disp = c_fast_path(_copy, build_fast_path(_copy))
    good = TD.from_tensor(x, [16, 16])
    assert disp.key((1,), good, good, 3, BM=16, BN=16) is not None

    class Other:  # Triton's own class, or any duck-typed descriptor
        base, shape, strides, block_shape = x, [64, 64], [64, 1], [16, 16]
    on_wrapper = TD.from_tensor(x, [16, 16])
    on_wrapper.base = torch.nn.Parameter(x)  # a tensor subclass
    torch_ints = TD.from_tensor(x, [16, 16])
    torch_ints.shape = [torch.tensor(64), 64]
    for odd in (Other(), on_wrapper, torch_ints):
        assert disp.key((1,), odd, good, 3, BM=16, BN=16) is None
        assert same_key(python_key(_copy, (1,), (odd, good, 3), {"BM": 16, "BN": 16}),
                        python_key(_copy, (1,), (good, good, 3), {"BM": 16, "BN": 16}))


def test_a_descriptor_on_the_cpu_is_reported_for_its_base(fake_gpu, monkeypatch):
    """Without the test's `cuda_ok`, a CPU tensor under a descriptor gets the Python path's message, naming
    element [0] of the argument, from the compiled dispatcher too."""
    if install_fake_c_launcher(monkeypatch, fake_gpu) is None:
        pytest.skip("the compiled launcher cannot be built here (no C compiler)")
    x = torch.zeros(64, 64, dtype=torch.float16)
    d = TD.from_tensor(x, [16, 16])
    disp = c_fast_path(_copy, build_fast_path(_copy))
    msgs = []
    for f in (disp, disp.py_fast):
        with pytest.raises(ValueError) as e:
            f((1,), d, d, 3, BM=16, BN=16)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "'x_desc[0]'" in msgs[0] and "cpu" in msgs[0]


def _fake_encode(a, kernel, arg):
    return struct.pack("<16Q", a.address, *a.global_dim, *a.global_strides, *a.box_dim,
                       *([0] * (15 - 2 * a.rank - (a.rank - 1))))


@needs_backend
def test_tensor_maps_are_encoded_and_launched_in_c(cgpu, monkeypatch):
    """A TMA kernel (sm_90a, descriptor tiles on TMA): the second launch is a hit in the compiled dispatcher and
    the compiled launcher, which passes the maker's 128 bytes per map; the values the GPU gets are the Python
    launch's, and tensors seen before encode nothing again."""
    encoded = []
    monkeypatch.setattr(tensormap, "encode", lambda a, k, arg: encoded.append(arg) or _fake_encode(a, k, arg))
    monkeypatch.setenv("NEWT_TMA", "desc")
    _copy.clear_cache()
    x = torch.randn(128, 64).half()
    y = torch.empty(128, 64).half()
    launches = []
    for use_c in (False, True):
        _copy.clear_cache()
        cgpu.launches.clear()
        fast = _copy.grid_launcher()
        assert type(fast).__name__ == "Dispatcher"
        f = fast if use_c else fast.py_fast
        for n in (3, 5):
            ck = f((4,), TD.from_tensor(x, [32, 64]), TD.from_tensor(y, [32, 64]), n, BM=32, BN=64)
        launches.append([ln.values for ln in cgpu.launches])
        if use_c:
            assert fast.stats()["hits"] == 1
            (ln,) = [v for v in _copy._cache.values()]
            assert type(ln.launch).__name__ == "Launcher", "tensor maps no longer keep a kernel off the C launcher"
    assert launches[0] == launches[1]
    recipes = ck.metadata["tensormaps"]
    assert [r["arg"] for r in recipes] == ["x_desc", "y_desc"]
    last = launches[1][-1]
    n = len(ck.params)
    assert last[:n] == (x.data_ptr(), 128, 64, 64, y.data_ptr(), 128, 64, 64, 5)
    assert [struct.unpack_from("<Q", t)[0] for t in last[n:]] == [x.data_ptr(), y.data_ptr()]
    assert encoded == ["x_desc", "y_desc"] * 2  # once per kernel build (cleared between), not per launch


@needs_backend
def test_a_tensor_map_the_maker_refuses_raises_as_in_python(cgpu, monkeypatch):
    """A launch whose tensor map the encode refuses (here: the driver's refusal of one tensor, stood in for)
    raises the same TensorMapError from the compiled launcher, which hands such a launch to the Python one."""
    x = torch.randn(128, 64).half()
    y = torch.randn(128, 64).half()

    def encode(a, kernel, arg):
        if a.address == y.data_ptr():
            raise TensorMapError(f"{kernel}: argument {arg!r}: cuTensorMapEncodeTiled failed (stand-in)", kernel, arg)
        return _fake_encode(a, kernel, arg)
    monkeypatch.setattr(tensormap, "encode", encode)
    monkeypatch.setenv("NEWT_TMA", "desc")
    _copy.clear_cache()
    fast = _copy.grid_launcher()
    fast((4,), TD.from_tensor(x, [32, 64]), TD.from_tensor(x, [32, 64]), 1, BM=32, BN=64)  # compiles, launches
    errors = []
    for f in (fast.py_fast, fast):
        with pytest.raises(TensorMapError) as e:
            f((4,), TD.from_tensor(x, [32, 64]), TD.from_tensor(y, [32, 64]), 1, BM=32, BN=64)
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "'y_desc'" in errors[0]
    assert fast.stats()["hits"] == 1 and len(cgpu.launches) == 1
