"""Issue 25 (dtdesc): ``indexing="tensor_descriptor"`` makes real tensor descriptors.

The descriptor form's tile loads and stores go through ``nl.make_tensor_descriptor`` (made once, before the loops)
and ``desc.load/store`` at the tiles' starts where a descriptor is exact, chosen per access
(``deuteron/codegen_desc.py``); every other access keeps pointers with its bounds masks.  Checked here: the
generated newt, the fallbacks (transposed, gathered, shifted, scalar-indexed, broadcast, unaligned, too narrow
or too wide, rank 1, atomics), results in the interpreter against the pointer form and torch (ragged shapes,
loads and stores, looped reductions), the kernel cache (a later non-contiguous call never reuses a descriptor
kernel), sm_90a cubins under newt's default ``NEWT_TMA`` (TMA copies, a producer warpgroup), the quick search on
a simulated sm_90a, and on a GPU the results against torch.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from dt_helpers import compile_config_sm90, needs_nvrtc

import deuteron as dt
from deuteron.autotune.plan import quick_plan
from deuteron.space import descriptor_indexing, tma_active

DESC = "tensor_descriptor"


@dt.kernel
def add2(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in dt.tile(x.size()):
        out[tm, tn] = x[tm, tn] + y[tm, tn]
    return out


@dt.kernel(static_shapes=False)
def add2_dyn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in dt.tile(x.size()):
        out[tm, tn] = x[tm, tn] * 2.0 + y[tm, tn]
    return out


@dt.kernel
def gather_rows(x: torch.Tensor, idx: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    m, n = z.size()
    out = torch.empty_like(z)
    for tm, tn in dt.tile([m, n]):
        rows = idx[tm]
        out[tm, tn] = x[rows, tn] + z[tm, tn]
    return out


@dt.kernel
def shifted(x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    m, n = z.size()
    out = torch.empty_like(z)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = x[tm.index + 1, tn] + z[tm, tn]
    return out


@dt.kernel
def scalar_row(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in dt.tile(x.size()):
        out[tm, tn] = x[tm, tn] + b[1, tn]
    return out


@dt.kernel
def column_broadcast(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in dt.tile(x.size()):
        v = x[tm, tn]
        out[tm, tn] = v.sum(dim=0)
    return out


@dt.kernel
def add1(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = x[t] + 1.0
    return out


@dt.kernel
def copy_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tm, tn in dt.tile(x.size()):
        out[tm, tn] = x[tm, tn]
    return out


@dt.kernel
def scatter_add(x: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
    for tm, tn in dt.tile(x.size()):
        dt.atomic_add(acc, [tm, tn], x[tm, tn])
    return acc


def _matmul():
    return importlib.import_module("matmul").matmul


def _softmax():
    return importlib.import_module("softmax").softmax


def _kernel_text(src: str) -> str:
    """The generated kernel's body (the descriptors' comment and definitions first)."""
    return src.split("@newt.jit\n")[-1].split("\n\n\ndef ")[0]


def _notes(src: str) -> str:
    return "\n".join(ln for ln in _kernel_text(src).splitlines() if ln.strip().startswith("#"))


def _mm_cfg(**kw):
    return dt.Config(block_sizes=[32, 32, 16], num_warps=4, num_stages=2, indexing=DESC, **kw)


# ---------------------------------------------------------------------------------------------- generated newt


def test_matmul_descriptor_form_makes_tensor_descriptors():
    x = torch.randn(100, 72, dtype=torch.float16)
    y = torch.randn(72, 80, dtype=torch.float16)
    src = _matmul().to_newt_source(x, y, config=_mm_cfg())
    body = _kernel_text(src)
    assert "x_desc = nl.make_tensor_descriptor(x, shape=[100, 72], strides=[72, 1], " \
           "block_shape=[_BLOCK_0, _BLOCK_2])" in body
    assert "y_desc = nl.make_tensor_descriptor(y, shape=[72, 80], strides=[80, 1], " \
           "block_shape=[_BLOCK_2, _BLOCK_1])" in body
    assert "out_desc = nl.make_tensor_descriptor(out, shape=[100, 80]" in body
    assert "x_desc.load([begin_m, begin_k])" in body and "y_desc.load([begin_k, begin_n])" in body
    assert "out_desc.store([begin_m, begin_n], acc.to(nl.float16))" in body
    assert "nl.load(" not in body and "nl.store(" not in body and "mask" not in body
    # made once, before the loops
    lines = body.splitlines()
    first_desc = max(i for i, ln in enumerate(lines) if "make_tensor_descriptor" in ln)
    assert first_desc < min(i for i, ln in enumerate(lines) if ln.strip().startswith("for "))
    # the comment says which accesses use one
    assert "tensor descriptors" in _notes(src) and "x[tile_m, tile_k] (line 20)" in _notes(src)
    # the pointer form is unchanged
    plain = _matmul().to_newt_source(x, y, config=_mm_cfg().replace(indexing=None))
    assert "make_tensor_descriptor" not in plain and "nl.load(x + " in plain


def test_elementwise_descriptor_form_loads_and_stores_through_descriptors():
    x = torch.randn(37, 72)
    src = add2.to_newt_source(x, x.clone(), config=dt.Config(block_sizes=[16, 32], indexing=DESC))
    body = _kernel_text(src)
    assert body.count("nl.make_tensor_descriptor(") == 3
    assert "x_desc.load([begin_tm, begin_tn])" in body and "y_desc.load([begin_tm, begin_tn])" in body
    assert "out_desc.store([begin_tm, begin_tn], load_x + load_y)" in body
    assert "mask" not in body  # 37 rows are ragged: the descriptors' bounds check them


def test_transposed_input_falls_back_per_access():
    x = torch.randn(100, 72, dtype=torch.float16)
    yt = torch.randn(80, 72, dtype=torch.float16).t()  # (72, 80), strides (1, 72)
    src = _matmul().to_newt_source(x, yt, config=_mm_cfg())
    body = _kernel_text(src)
    assert "x_desc.load([begin_m, begin_k])" in body and "out_desc.store(" in body
    assert "y_desc" not in body
    assert "nl.load(y + (offs_k[:, None] + offs_n[None, :] * 72), mask=mask_k[:, None] & mask_n[None, :]" in body
    assert "y[tile_k, tile_n] (line 20): the last dimension is not contiguous (stride 72)" in _notes(src)


def test_gather_falls_back_per_access():
    x = torch.randn(50, 64)
    idx = torch.randint(0, 50, (40,))
    z = torch.randn(40, 64)
    cfg = dt.Config(block_sizes=[16, 32], indexing=DESC)
    src = gather_rows.to_newt_source(x, idx, z, config=cfg)
    body = _kernel_text(src)
    assert "z_desc.load([begin_tm, begin_tn])" in body and "out_desc.store(" in body
    assert "x_desc" not in body and "nl.load(x + " in body
    notes = _notes(src)
    assert "x[rows, tn] (line 50): a gathered index" in notes
    assert "idx[tm] (line 49): rank 1" in notes
    torch.testing.assert_close(gather_rows.run_with(cfg, x, idx, z), x[idx] + z)


@pytest.mark.parametrize("kernel,args,why", [
    (shifted, lambda: (torch.randn(41, 64), torch.randn(40, 64)), "x[tm.index + 1, tn]"),
    (scalar_row, lambda: (torch.randn(40, 64), torch.randn(3, 64)), "b[1, tn] (line 67): a scalar index"),
])
def test_computed_and_scalar_indices_fall_back(kernel, args, why):
    a = args()
    cfg = dt.Config(block_sizes=[16, 32], indexing=DESC)
    src = kernel.to_newt_source(*a, config=cfg)
    body = _kernel_text(src)
    assert "out_desc.store([begin_tm, begin_tn]" in body
    notes = _notes(src)
    if kernel is shifted:
        assert "z_desc.load(" in body and "x_desc" not in body
        assert "x[<index>, tn] (line 59): a gathered index" in notes
        expected = a[0][1:] + a[1]
    else:
        assert "x_desc.load(" in body and "b_desc." not in body and why in notes
        expected = a[0] + a[1][1]
    torch.testing.assert_close(kernel.run_with(cfg, *a), expected)


def test_broadcast_store_falls_back():
    x = torch.randn(64, 64)
    cfg = dt.Config(block_sizes=[64, 32], indexing=DESC)
    src = column_broadcast.to_newt_source(x, config=cfg)
    body = _kernel_text(src)
    assert "x_desc.load([begin_tm, begin_tn])" in body and "out_desc" not in body
    assert "out[tm, tn] (line 76): a broadcast value" in _notes(src)
    torch.testing.assert_close(column_broadcast.run_with(cfg, x), x.sum(0).expand(64, 64))


def test_unaligned_rows_fall_back():
    """fp16 rows of 100 elements (200 bytes): not a multiple of 16 bytes, no descriptor (TMA cannot stride so)."""
    x = torch.randn(37, 100, dtype=torch.float16)
    y = torch.randn(37, 104, dtype=torch.float16)[:, :100]  # rows of 208 bytes: y may take one
    cfg = dt.Config(block_sizes=[16, 32], indexing=DESC)
    src = add2.to_newt_source(x, y, config=cfg)
    body = _kernel_text(src)
    assert "y_desc.load(" in body and "x_desc" not in body and "out_desc" not in body
    notes = _notes(src)
    assert "x[tm, tn] (line 32): the stride of dimension 0 (100 elements) is not a positive multiple of 16 " \
           "bytes" in notes
    assert "out[tm, tn] (line 32): the stride of dimension 0 (100 elements)" in notes
    torch.testing.assert_close(add2.run_with(cfg, x, y), x + y)


@pytest.mark.parametrize("block,why", [([16, 4], "the block's last dimension is 8 bytes"),
                                       ([16, 512], "a block of 512 elements along dimension 1"),
                                       ([64, 64], "a block of 64 elements along dimension 0, more than the bound 37"),
                                       ([1, 64], "tile tm has block size 1")])
def test_boxes_tma_cannot_copy_fall_back(block, why):
    x = torch.randn(37, 512, dtype=torch.float16)
    cfg = dt.Config(block_sizes=block, indexing=DESC)
    src = add2.to_newt_source(x, x.clone(), config=cfg)
    assert "make_tensor_descriptor" not in src and why in _notes(src)
    torch.testing.assert_close(add2.run_with(cfg, x, x), x + x)


def test_rank_one_bool_and_atomics_keep_pointers():
    src = add1.to_newt_source(torch.randn(100), config=dt.Config(block_sizes=[32], indexing=DESC))
    assert "make_tensor_descriptor" not in src and "rank 1 (newt keeps rank-1 boxes on the pointer path)" in src
    b = torch.rand(37, 64) > 0.5
    src = add2.to_newt_source(b, b.clone(), config=dt.Config(block_sizes=[16, 32], indexing=DESC))
    assert "make_tensor_descriptor" not in src and "bool elements (TMA does not move them)" in src
    x = torch.randn(37, 64)
    cfg = dt.Config(block_sizes=[16, 32], indexing=DESC)
    src = scatter_add.to_newt_source(x, torch.zeros(37, 64), config=cfg)
    body = _kernel_text(src)
    assert "x_desc.load([begin_tm, begin_tn])" in body and "nl.atomic_add(acc + " in body and "acc_desc" not in body
    torch.testing.assert_close(scatter_add.run_with(cfg, x, torch.zeros(37, 64)), x)


def test_indexing_list_chooses_per_access():
    """``indexing`` as a list: one entry per load/store in source order (x, y, out)."""
    x = torch.randn(100, 72, dtype=torch.float16)
    y = torch.randn(72, 80, dtype=torch.float16)
    cfg = _mm_cfg().replace(indexing=[DESC, "pointer", DESC])
    body = _kernel_text(_matmul().to_newt_source(x, y, config=cfg))
    assert "x_desc.load(" in body and "out_desc.store(" in body and "y_desc" not in body and "nl.load(y + " in body
    torch.testing.assert_close(_matmul().run_with(cfg, x, y).float(), x.float() @ y.float(), atol=1e-1, rtol=1e-2)


# ---------------------------------------------------------------------------------------------- results


@pytest.mark.parametrize("m,k,n,bs", [(100, 72, 80, [32, 32, 16]), (64, 64, 64, [32, 32, 16]),
                                      (33, 48, 17, [16, 16, 16]), (130, 40, 96, [64, 32, 32])])
def test_matmul_descriptor_form_equals_pointer_form_and_torch(m, k, n, bs):
    x = torch.randn(m, k, dtype=torch.float16)
    y = torch.randn(k, n, dtype=torch.float16)
    cfg = dt.Config(block_sizes=bs, num_warps=4, num_stages=2, indexing=DESC)
    assert "x_desc.load(" in _matmul().to_newt_source(x, y, config=cfg)
    got = _matmul().run_with(cfg, x, y)
    plain = _matmul().run_with(cfg.replace(indexing=None), x, y)
    torch.testing.assert_close(got, plain)
    torch.testing.assert_close(got.float(), x.float() @ y.float(), atol=1e-1, rtol=1e-2)


@pytest.mark.parametrize("shape,bs", [((37, 72), [16, 32]), ((64, 64), [32, 32]), ((5, 132), [4, 64]),
                                      ((100, 8), [32, 8])])
def test_elementwise_descriptor_form_equals_pointer_form_and_torch(shape, bs):
    x = torch.randn(*shape)
    y = torch.randn(*shape)
    cfg = dt.Config(block_sizes=bs, indexing=DESC)
    assert "out_desc.store(" in add2.to_newt_source(x, y, config=cfg)
    got = add2.run_with(cfg, x, y)
    torch.testing.assert_close(got, add2.run_with(cfg.replace(indexing=None), x, y))
    torch.testing.assert_close(got, x + y)


def test_ragged_store_writes_nothing_past_the_bounds():
    """A store's out-of-bounds lanes are clipped: the elements of a larger buffer around the output stay."""
    base = torch.full((40, 80), 7.0)
    out_view = base[:37, :72]  # strides (80, 1): 320-byte rows, a descriptor
    x = torch.randn(37, 72)
    cfg = dt.Config(block_sizes=[16, 32], indexing=DESC)
    assert "out_desc.store(" in copy_into.to_newt_source(x, out_view, config=cfg)
    copy_into.run_with(cfg, x, out_view)
    torch.testing.assert_close(base[:37, :72], x)
    assert (base[37:, :] == 7.0).all() and (base[:, 72:] == 7.0).all()


@pytest.mark.parametrize("n,rl", [(256, None), (200, 64), (200, None)])
def test_softmax_whole_rows_through_descriptors(n, rl):
    """``x[tile_m, :]`` (a whole dimension): offset 0, or each chunk's start in a looped reduction; a row of 200
    in one block of 256 keeps pointers (a box larger than the tensor)."""
    x = torch.randn(37, n, dtype=torch.float16)
    cfg = dt.Config(block_sizes=[16], reduction_loops=[rl], indexing=DESC)
    src = _softmax().to_newt_source(x, config=cfg)
    body = _kernel_text(src)
    if n == 200 and rl is None:
        assert "make_tensor_descriptor" not in body
        assert "x[tile_m, :] (line 21): a block of 256 elements along dimension 1, more than the bound 200" in body
    else:
        assert ("x_desc.load([begin_m, 0])" if rl is None else "x_desc.load([begin_m, roff_r0])") in body
        assert "out_desc.store(" in body
    got = _softmax().run_with(cfg, x)
    torch.testing.assert_close(got, _softmax().run_with(cfg.replace(indexing=None), x))
    torch.testing.assert_close(got.float(), torch.softmax(x.float(), -1), atol=1e-2, rtol=1e-2)


def test_store_with_a_ragged_inner_bound_keeps_pointers():
    """TMA stores write whole 16-byte chunks of a row: a store whose last bound is 100 fp16 elements (200 bytes)
    would overwrite the 4 elements after it in a wider buffer, so it keeps pointers; the load of a tensor of the
    same bound takes a descriptor (loads clip per element)."""
    base = torch.full((40, 128), 7.0, dtype=torch.float16)
    out_view = base[:37, :100]  # 256-byte rows: aligned, but the bound is not
    x = torch.randn(37, 104, dtype=torch.float16)[:, :100]
    cfg = dt.Config(block_sizes=[16, 64], indexing=DESC)
    src = copy_into.to_newt_source(x, out_view, config=cfg)
    body = _kernel_text(src)
    assert "x_desc.load([begin_tm, begin_tn])" in body and "out_desc" not in body
    assert "out[tm, tn] (line 91): a store whose last bound (100) is not a multiple of 16 bytes" in body
    copy_into.run_with(cfg, x, out_view)
    torch.testing.assert_close(base[:37, :100], x)
    assert (base[37:, :] == 7.0).all() and (base[:, 100:] == 7.0).all()


# ---------------------------------------------------------------------------------------------- the kernel cache


def test_a_later_non_contiguous_call_never_reuses_a_descriptor_kernel():
    cfg = _mm_cfg()
    mm = _matmul()
    x = torch.randn(100, 72, dtype=torch.float16)
    y = torch.randn(72, 80, dtype=torch.float16)
    assert "y_desc.load(" in mm.to_newt_source(x, y, config=cfg)
    torch.testing.assert_close(mm.run_with(cfg, x, y).float(), x.float() @ y.float(), atol=1e-1, rtol=1e-2)
    yt = y.t().contiguous().t()  # the same values, strides (1, 72)
    assert mm.bind(x, y) is not mm.bind(x, yt)
    assert "y_desc" not in mm.to_newt_source(x, yt, config=cfg)
    torch.testing.assert_close(mm.run_with(cfg, x, yt).float(), x.float() @ y.float(), atol=1e-1, rtol=1e-2)


def test_dynamic_shapes_key_on_contiguity_and_stride_alignment():
    """``static_shapes=False``: one kernel for many shapes, so the key records which strides are 1 and which are
    16-byte multiples -- what the descriptors were chosen on."""
    cfg = dt.Config(block_sizes=[16, 32], indexing=DESC)
    x, y = torch.randn(37, 72), torch.randn(37, 72)
    src = add2_dyn.to_newt_source(x, y, config=cfg)
    assert "x_desc = nl.make_tensor_descriptor(x, shape=[x_size_0, x_size_1], strides=[x_stride_0, 1]" in src
    torch.testing.assert_close(add2_dyn.run_with(cfg, x, y), x * 2 + y)
    x2, y2 = torch.randn(60, 88), torch.randn(60, 88)  # another shape of the same key: the same kernel
    assert add2_dyn.bind(x2, y2) is add2_dyn.bind(x, y)
    torch.testing.assert_close(add2_dyn.run_with(cfg, x2, y2), x2 * 2 + y2)
    xs = torch.randn(37, 73)[:, :72]  # rows of 292 bytes
    assert add2_dyn.bind(xs, y) is not add2_dyn.bind(x, y)
    src = add2_dyn.to_newt_source(xs, y, config=cfg)
    assert "x_desc" not in src and "y_desc" in src
    assert "x[tm, tn] (line 40): the stride of dimension 0 is not a positive multiple of 16 bytes" in src
    torch.testing.assert_close(add2_dyn.run_with(cfg, xs, y), xs * 2 + y)
    xt = torch.randn(72, 37).t()
    assert add2_dyn.bind(xt, y) is not add2_dyn.bind(x, y)
    assert "x_desc" not in add2_dyn.to_newt_source(xt, y, config=cfg)
    torch.testing.assert_close(add2_dyn.run_with(cfg, xt, y), xt * 2 + y)


# ---------------------------------------------------------------------------------------------- sm_90a, offline


def _compile(k, args, cfg):
    return compile_config_sm90(k, args, cfg)


@needs_nvrtc
@pytest.mark.parametrize("ws", [False, True])
def test_matmul_descriptor_form_compiles_to_tma_under_newts_default(ws, monkeypatch, tmp_path):
    monkeypatch.delenv("NEWT_TMA", raising=False)
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path))
    x = torch.randn(1000, 1000, dtype=torch.float16)
    cfg = dt.Config(block_sizes=[128, 128, 64], num_warps=4, num_stages=3, indexing=DESC,
                    range_warp_specializes=[True] if ws else None)
    md, sass = _compile(_matmul(), (x, x), cfg)
    assert len(md.get("tensormaps") or []) == 3 and "UTMALDG" in sass and "HGMMA" in sass
    assert (md.get("producer_warps") or 0) == (4 if ws else 0)
    md, sass = _compile(_matmul(), (x, x), cfg.replace(indexing=None))
    assert not md.get("tensormaps") and "UTMALDG" not in sass and not md.get("producer_warps")


@needs_nvrtc
def test_elementwise_descriptor_form_compiles_to_tma_loads_and_stores(monkeypatch, tmp_path):
    monkeypatch.delenv("NEWT_TMA", raising=False)
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path))
    x = torch.randn(1000, 1000, dtype=torch.float16)
    md, sass = _compile(add2, (x, x.clone()), dt.Config(block_sizes=[32, 64], num_warps=4, indexing=DESC))
    assert md.get("tensormaps") and "UTMALDG" in sass and "UTMASTG" in sass


# ---------------------------------------------------------------------------------------------- the search


def test_quick_search_on_sm90a_proposes_the_descriptor_form_by_default(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("the target is the GPU's")
    monkeypatch.delenv("NEWT_TMA", raising=False)
    monkeypatch.setenv("NEWT_TARGET", "sm_90a")
    assert tma_active(torch.device("cuda"))
    x = torch.randn(4096, 4096, dtype=torch.float16)
    p = quick_plan(_matmul(), (x, x))  # tma: as newt does on the target under the current env
    desc = [c for c in p["seeds"] if descriptor_indexing(c)]
    assert desc and any(c.range_warp_specializes == [True] for c in desc)
    assert any(c.range_warp_specializes == [True] and c.pid_type == "persistent" for c in desc)
    monkeypatch.setenv("NEWT_TMA", "0")
    assert not tma_active(torch.device("cuda"))
    assert not any(descriptor_indexing(c) for c in quick_plan(_matmul(), (x, x))["seeds"])


# ---------------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_descriptor_form_on_gpu_matches_torch():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    x = torch.randn(1000, 520, device="cuda", dtype=torch.float16)
    y = torch.randn(520, 776, device="cuda", dtype=torch.float16)
    for cfg in (dt.Config(block_sizes=[128, 128, 64], num_warps=4, num_stages=3, indexing=DESC),
                dt.Config(block_sizes=[128, 256, 64], num_warps=8, num_stages=3, indexing=DESC,
                          range_warp_specializes=[True]),
                dt.Config(block_sizes=[128, 256, 64], num_warps=8, num_stages=2, indexing=DESC,
                          range_warp_specializes=[True], pid_type="persistent")):
        got = _matmul().run_with(cfg, x, y)
        torch.testing.assert_close(got.float(), x.float() @ y.float(), atol=2e-1, rtol=2e-2,
                                   msg=lambda m, c=cfg: f"{c}: {m}")
    a = torch.randn(1000, 1000, device="cuda")[:999, :968]  # ragged, rows of 4000 bytes
    b = torch.randn(999, 968, device="cuda")
    cfg = dt.Config(block_sizes=[32, 64], indexing=DESC)
    assert "out_desc.store(" in add2.to_newt_source(a, b, config=cfg)
    torch.testing.assert_close(add2.run_with(cfg, a, b), a + b)
