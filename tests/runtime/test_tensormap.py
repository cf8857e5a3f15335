"""TMA tensor maps on the host (``newt/runtime/tensormap.py``) and their launch parameters
(``driver.py``): the ``cuTensorMapEncodeTiled`` arguments and their validation offline, the 128-byte
``__grid_constant__`` parameter through the launch path (fake driver), the real encode on a GPU."""

from __future__ import annotations

import struct

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import driver, tensormap
from newt.runtime.tensormap import TensorMapError, TensorMapMaker, encode_arguments
from newt.tools.tensor_descriptor import TensorDescriptor

from .conftest import needs_backend


def _recipe(rank=2, dtype="fp16", eb=2, box=None, swizzle=128, fill="zero"):
    box = box or [64] * (rank - 1) + [128 // eb if swizzle else 16 // eb]
    return {"arg": "x_desc", "dtype": dtype, "elem_bytes": eb, "base": 0, "dims": [["p", 1 + d] for d in range(rank)],
            "strides": [["p", 1 + rank + d] for d in range(rank)], "box": box, "swizzle": swizzle, "fill": fill}


@pytest.mark.parametrize("rank", [2, 3, 4, 5])
@pytest.mark.parametrize("dtype,eb,code", [("fp16", 2, 6), ("bf16", 2, 9), ("fp32", 4, 7), ("fp8e4nv", 1, 0),
                                           ("int8", 1, 0), ("fp8e5", 1, 0)])
@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
def test_arguments_are_in_tma_order_with_byte_strides(rank, dtype, eb, code, swizzle):
    inner = (swizzle or 16) // eb
    box = [2 + d for d in range(rank - 1)] + [inner]
    dims = [3 + 5 * d for d in range(rank - 1)] + [1000]
    # row-major strides of a tensor whose rows are padded to 1024 elements
    strides = [1] * rank
    for d in range(rank - 2, -1, -1):
        strides[d] = strides[d + 1] * (1024 if d == rank - 2 else dims[d + 1])
    a = encode_arguments(_recipe(rank, dtype, eb, box, swizzle), 0x7f0000001000, dims, strides, kernel="k")
    assert a.data_type == code and a.rank == rank and a.address == 0x7f0000001000
    assert a.global_dim == tuple(reversed(dims))
    assert a.global_strides == tuple(s * eb for s in reversed(strides[:-1]))
    assert a.box_dim == tuple(reversed(box)) and a.element_strides == (1,) * rank
    assert a.swizzle == {0: 0, 32: 1, 64: 2, 128: 3}[swizzle] and a.interleave == 0 and a.oob_fill == 0


def test_nan_padding_asks_for_nan_fill():
    a = encode_arguments(_recipe(fill="nan"), 1 << 20, [10, 100], [128, 1])
    assert a.oob_fill == 1
    with pytest.raises(TensorMapError, match="NaN padding"):
        encode_arguments(_recipe(dtype="int8", eb=1, fill="nan"), 1 << 20, [10, 100], [128, 1])


@pytest.mark.parametrize("base,dims,strides,recipe,msg", [
    (0x1008, [10, 100], [128, 1], {}, "16-byte aligned base"),
    (0x1000, [10, 100], [100, 1], {}, r"stride 100 of dimension 0 is 200 bytes"),
    (0x1000, [10, 100], [128, 2], {}, "innermost stride must be 1"),
    (0x1000, [0, 100], [128, 1], {}, "dimension 0 has size 0"),
    (0x1000, [10, 100], [128, 1], {"box": [512, 64]}, "box dimension 0 is 512"),
    (0x1000, [10, 100], [128, 1], {"box": [64, 128]}, "more than the 128-byte swizzle"),
    (0x1000, [10, 100], [128, 1], {"box": [64, 4]}, "inner dimension is 8 bytes"),
    (0x1000, [10, 100], [128, 1], {"swizzle": 16}, "swizzle must be"),
    (0x1000, [10, 100, 3], [128, 1, 1], {}, "needs 2 sizes and strides"),
])
def test_bad_values_name_the_kernel_and_the_argument(base, dims, strides, recipe, msg):
    rec = {**_recipe(), **recipe}
    with pytest.raises(TensorMapError, match=msg) as e:
        encode_arguments(rec, base, dims, strides, kernel="my_kernel")
    assert str(e.value).startswith("my_kernel: argument 'x_desc': ")
    assert e.value.kernel == "my_kernel" and e.value.arg == "x_desc"


def test_the_maker_encodes_once_per_distinct_values():
    calls = []

    def fake(a, kernel, arg):
        calls.append(a)
        return bytes([len(calls)]) * 128
    mk = TensorMapMaker(_recipe(), "k", encoder=fake)
    x = mk(1 << 20, 10, 100, 128, 1)
    assert len(x) == 128 and mk(1 << 20, 10, 100, 128, 1) is x and len(calls) == 1
    assert mk(1 << 20, 11, 100, 128, 1) != x and len(calls) == 2
    assert calls[1].global_dim == (100, 11)


def test_param_layout_puts_tensor_maps_on_64_bytes():
    fmt, offs, size = driver.param_layout(["Q", "i", "tmap", "i", "tmap"])
    assert offs == [0, 8, 64, 192, 256] and size == 384
    assert struct.calcsize(fmt) == size
    buf = driver.ParamBuffer(["Q", "i", "tmap"])
    assert buf.data.__array_interface__["data"][0] % 64 == 0


@newt.jit
def _copy_tiles(x_desc, y_desc, BM: nl.constexpr, BN: nl.constexpr):
    m = nl.program_id(0) * BM
    n = nl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]) * 2)


@needs_backend
def test_the_launch_passes_a_tensor_map_per_recipe(fake_gpu, cuda_ok, monkeypatch):
    """Compiled for sm_90a (the fake GPU's target), the descriptor load and store go through TMA: the
    launch appends their 128-byte tensor maps, encoded from the launch's descriptor values."""
    seen = []

    def fake_encode(a, kernel, arg):
        seen.append((a, kernel, arg))
        return struct.pack("<16Q", a.address, *a.global_dim, *a.global_strides, *a.box_dim,
                           *([0] * (15 - 2 * a.rank - (a.rank - 1))))
    monkeypatch.setattr(tensormap, "encode", fake_encode)
    monkeypatch.setenv("NEWT_TMA", "1")  # (opt-in until a GPU run has checked it)
    _copy_tiles.clear_cache()
    x = torch.randn(100, 80).half()   # rows of 160 bytes: a stride the specialization proves 16-byte aligned
    y = torch.empty(100, 80).half()
    ck = _copy_tiles[(4, 2)](TensorDescriptor.from_tensor(x, [32, 64]), TensorDescriptor.from_tensor(y, [32, 64]),
                             BM=32, BN=64)
    recipes = ck.metadata["tensormaps"]
    assert [r["arg"] for r in recipes] == ["x_desc", "y_desc"] and recipes[1]["box"] == [32, 64]
    assert "newt_tmap0" in ck.asm["cuda"] and "__grid_constant__" in ck.asm["cuda"]
    (ln,) = fake_gpu.launches
    n = len(ck.params)
    assert ln.values[:n] == (x.data_ptr(), 100, 80, 80, y.data_ptr(), 100, 80, 80)
    assert len(ln.values) == n + 2
    for tm, t in zip(ln.values[n:], (x, y)):
        assert isinstance(tm, bytes) and len(tm) == 128
        assert struct.unpack_from("<Q", tm)[0] == t.data_ptr()
    assert [(k, arg) for _, k, arg in seen] == [("_copy_tiles", "x_desc"), ("_copy_tiles", "y_desc")]
    a = seen[1][0]
    assert a.global_dim == (80, 100) and a.global_strides == (160,) and a.box_dim == (64, 32) and a.swizzle == 3
    # the same tensors again: no new encode
    _copy_tiles[(4, 2)](TensorDescriptor.from_tensor(x, [32, 64]), TensorDescriptor.from_tensor(y, [32, 64]),
                        BM=32, BN=64)
    assert len(seen) == 2 and len(fake_gpu.launches) == 2


@needs_backend
def test_an_unproven_stride_keeps_the_pointer_path(fake_gpu, cuda_ok, monkeypatch):
    """72 fp16 columns: the specialization does not know the stride is a multiple of 16 bytes."""
    monkeypatch.setenv("NEWT_TMA", "1")
    _copy_tiles.clear_cache()
    x = torch.randn(100, 72).half()
    ck = _copy_tiles[(4, 2)](TensorDescriptor.from_tensor(x, [32, 64]), TensorDescriptor.from_tensor(x, [32, 64]),
                             BM=32, BN=64)
    assert ck.metadata["tensormaps"] == [] and "newt_tmap" not in ck.asm["cuda"]
    (ln,) = fake_gpu.launches
    assert len(ln.values) == len(ck.params)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("rank", [2, 3, 4, 5])
def test_the_driver_encodes_the_maps(rank):
    driver.ensure_context(torch.cuda.current_device())
    x = torch.empty([4] * (rank - 1) + [256], device="cuda", dtype=torch.float16)
    strides = list(x.stride())
    a = encode_arguments(_recipe(rank, box=[2] * (rank - 1) + [64]), x.data_ptr(), list(x.shape), strides)
    out = tensormap.encode(a, "k", "x")
    assert len(out) == 128 and any(out)


def test_map_bytes_reads_the_driver_objects_storage():
    """The encoded map's bytes come from the CUtensorMap itself (its words are cuuint64_t objects:
    struct.pack of them failed on the H200, 2026-12-02 09:15)."""
    import struct as _struct

    d = pytest.importorskip("cuda.bindings.driver")
    from newt.runtime.tensormap import map_bytes
    t = d.CUtensorMap()
    words = [(i * 0x9E3779B97F4A7C15) & (2**64 - 1) for i in range(16)]
    t.opaque = [d.cuuint64_t(w) for w in words]
    b = map_bytes(t)
    assert len(b) == 128 and list(_struct.unpack("<16Q", b)) == words
