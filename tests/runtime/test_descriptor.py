"""Host-side ``TensorDescriptor`` arguments (Triton's ``triton.tools.tensor_descriptor``): validation,
specialization, the parameters the kernel receives, the interpreter, the CUDA path."""

from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import specialize as sp
from newt.tools.tensor_descriptor import TensorDescriptor

from .conftest import needs_backend
from .fakes import install_fake_c_launcher


@newt.jit
def scale_tiles(x_desc, y_desc, BM: nl.constexpr, BN: nl.constexpr):
    m = nl.program_id(0) * BM
    n = nl.program_id(1) * BN
    t = x_desc.load([m, n])
    y_desc.store([m, n], t * 2 + 1)


@newt.jit
def desc_and_make(x_desc, out_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    """The same block read through the host descriptor and through nl.make_tensor_descriptor."""
    a = x_desc.load([0, 0])
    d = nl.make_tensor_descriptor(out_ptr, [M, N], [N, 1], [BM, BN])
    d.store([0, 0], a)


def _interp(k):
    return newt.jit(interpret=True)(k.fn)


@pytest.mark.parametrize("shape,block", [((40, 48), (16, 32)), ((16, 32), (16, 32)), ((5, 12), (8, 8))])
def test_interpreter_loads_and_stores_blocks_masked_to_the_shape(shape, block):
    x = torch.randn(shape)
    y = torch.full(shape, -7.0)
    k = _interp(scale_tiles)
    grid = (newt.cdiv(shape[0], block[0]), newt.cdiv(shape[1], block[1]))
    k[grid](TensorDescriptor.from_tensor(x, block), TensorDescriptor.from_tensor(y, block), BM=block[0], BN=block[1])
    torch.testing.assert_close(y, x * 2 + 1)


def test_a_strided_view_and_nan_padding():
    base = torch.randn(32, 64)
    view = base[:, 8:40]  # strides (64, 1), offset: still 16-byte aligned
    y = torch.zeros(32, 32)
    k = _interp(scale_tiles)
    xd = TensorDescriptor(view, view.shape, view.stride(), [16, 16])
    k[(2, 2)](xd, TensorDescriptor.from_tensor(y, [16, 16]), BM=16, BN=16)
    torch.testing.assert_close(y, view * 2 + 1)

    @newt.jit(interpret=True)
    def read_padded(x_desc, out_ptr, B: nl.constexpr):
        offs = nl.arange(0, B)
        nl.store(out_ptr + offs, x_desc.load([0]))
    x = torch.randn(5)
    out = torch.zeros(8)
    read_padded[(1,)](TensorDescriptor(x, [5], [1], [8], padding="nan"), out, B=8)
    torch.testing.assert_close(out[:5], x)
    assert out[5:].isnan().all()


def test_host_descriptor_and_make_tensor_descriptor_agree():
    x = torch.randn(16, 32)
    out = torch.zeros(16, 32)
    _interp(desc_and_make)[(1,)](TensorDescriptor.from_tensor(x, [16, 32]), out, 16, 32, BM=16, BN=32)
    torch.testing.assert_close(out, x)


def test_specialization_is_a_tuple_with_a_compile_time_block():
    x = torch.randn(40, 48)
    d = TensorDescriptor.from_tensor(x, [16, 32])
    spec = sp.specialize(scale_tiles, (d, d), {"BM": 16, "BN": 32})
    ta = spec.arg_types["x_desc"]
    assert isinstance(ta, sp.DescArg) and ta.block_shape == (16, 32) and ta.padding == "zero"
    # base (a 16-byte aligned pointer), the shape (40: no hint, 48: divisible by 16), the strides (48; 1 is a constant)
    assert str(ta) == "desc[16, 32](*fp32:16, i32, i32:16, i32:16, constexpr 1)"
    assert spec.runtime_names[:4] == ["x_desc.0", "x_desc.1", "x_desc.2", "x_desc.3"]
    assert spec.runtime_args[:4] == [x, 40, 48, 48]
    other = sp.specialize(scale_tiles, (TensorDescriptor.from_tensor(x, [16, 16]), d), {"BM": 16, "BN": 32})
    assert other.key != spec.key  # a new block shape is a new specialization


@pytest.mark.parametrize("launcher", ["python", "compiled"])
def test_the_launch_passes_base_shape_and_strides(launcher, fake_gpu, fake_backend, cuda_ok, monkeypatch):
    if launcher == "compiled" and install_fake_c_launcher(monkeypatch, fake_gpu) is None:
        pytest.skip("the compiled launcher cannot be built here (no C compiler)")
    x = torch.randn(40, 48)
    y = torch.empty(40, 48)
    k = newt.jit(scale_tiles.fn)
    ck = k[(3, 2)](TensorDescriptor.from_tensor(x, [16, 32]), TensorDescriptor.from_tensor(y, [16, 32]),
                   BM=16, BN=32)
    assert [p.name for p in ck.params] == ["x_desc.0", "x_desc.1", "x_desc.2", "x_desc.3",
                                           "y_desc.0", "y_desc.1", "y_desc.2", "y_desc.3"]
    assert fake_gpu.launches[-1].values == (x.data_ptr(), 40, 48, 48, y.data_ptr(), 40, 48, 48)
    k[(3, 2)](TensorDescriptor.from_tensor(x, [16, 32]), TensorDescriptor.from_tensor(y, [16, 32]), BM=16, BN=32)
    assert fake_backend.compiled == 1  # the same specialization: the cached launcher
    (ln,) = k._cache.values()
    assert (ln.compiled is not None) == (launcher == "compiled")  # tuple elements: the C path picks them too
    assert fake_gpu.launches[-1].values == (x.data_ptr(), 40, 48, 48, y.data_ptr(), 40, 48, 48)


def test_triton_s_own_descriptor_is_accepted():
    tt = pytest.importorskip("triton.tools.tensor_descriptor")
    x = torch.randn(16, 32)
    y = torch.zeros(16, 32)
    _interp(scale_tiles)[(1, 1)](tt.TensorDescriptor.from_tensor(x, [16, 32]),
                                 tt.TensorDescriptor.from_tensor(y, [16, 32]), BM=16, BN=32)
    torch.testing.assert_close(y, x * 2 + 1)


@pytest.mark.parametrize("args,msg", [
    (((4, 8), (8, 1), (3, 8)), "not a power of two"),
    (((4, 8), (1, 4), (4, 8)), "last stride must be 1"),
    (((4, 8), (8, 1), (4,)), "different lengths"),
    (((4, 6), (6, 1), (4, 8)), "multiples of 16 bytes"),
    (((), (), ()), "rank must be 1 to 5"),
])
def test_bad_descriptors_are_refused(args, msg):
    x = torch.randn(64)
    with pytest.raises(ValueError, match=msg):
        TensorDescriptor(x, *args)
    with pytest.raises(ValueError, match="padding"):
        TensorDescriptor(x, [64], [1], [16], padding="inf")
    with pytest.raises(ValueError, match="16-byte aligned"):
        TensorDescriptor(x[1:], [63], [1], [16])


def test_the_block_width_is_checked_at_the_launch_after_a_pre_hook_set_it():
    # Triton's tutorial 06 builds placeholder descriptors (block_shape=[1, 1]) and its autotuner's pre_hook sets
    # the config's block before the launch: the 16-byte rule applies to the block the launch sees
    x = torch.randn(16, 32)
    y = torch.zeros(16, 32)
    dx = TensorDescriptor(x, [16, 32], [32, 1], [1, 1])
    dy = TensorDescriptor(y, [16, 32], [32, 1], [1, 1])
    with pytest.raises(ValueError, match="at least 16 bytes"):
        _interp(scale_tiles)[(1, 1)](dx, dy, BM=16, BN=32)
    dx.block_shape = [16, 32]
    dy.block_shape = [16, 32]
    _interp(scale_tiles)[(1, 1)](dx, dy, BM=16, BN=32)
    torch.testing.assert_close(y, x * 2 + 1)


def test_a_descriptor_whose_base_is_not_a_tensor_names_the_parameter():
    class D:
        base, shape, strides, block_shape = 1234, [16], [1], [16]
    with pytest.raises(TypeError, match=r"'x_desc'.*base must be a tensor"):
        sp.specialize(scale_tiles, (D(), D()), {"BM": 16, "BN": 16})


@needs_backend
def test_compiles_to_cubin_for_sm80_and_sm90a():
    for target in ("sm_80", "sm_90a"):
        from newt.runtime import compiler
        ck = compiler.compile_specialization(
            scale_tiles, sp.specialize(scale_tiles, (TensorDescriptor.from_tensor(torch.randn(40, 48), [16, 32]),) * 2,
                                       {"BM": 16, "BN": 32}).arg_types, {"BM": 16, "BN": 32}, {}, target)
        assert ck.asm["cubin"] and "x_desc_0" in ck.asm["cuda"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_on_the_gpu(dtype):
    x = torch.randn(100, 72, device="cuda").to(dtype)
    y = torch.full_like(x, -7)
    k = newt.jit(scale_tiles.fn)
    k[(newt.cdiv(100, 32), newt.cdiv(72, 32))](TensorDescriptor.from_tensor(x, [32, 32]),
                                               TensorDescriptor.from_tensor(y, [32, 32]), BM=32, BN=32)
    torch.testing.assert_close(y, x * 2 + 1)
