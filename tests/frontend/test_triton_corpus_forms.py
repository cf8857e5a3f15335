"""Forms of valid Triton code found by ``newt check`` over more libraries (flash-linear-attention's ``fla/ops``,
FlagGems' ``src/flag_gems/ops`` and ``fused``) on which the front end once reported a false error: each has a
minimal kernel here, written for this test, that must analyze with no error, and, where the form has a wrong
use, the error that use still gets."""

from __future__ import annotations

import torch
from triton_snippets import TRITON, _diags, _errors, _fmt  # noqa: F401

import newt
import newt.language as nl


def test_a_decorator_of_another_package_may_supply_launch_arguments():
    # a library's own autotuner (``@libtuner(configs=...)``) sets BLOCK: the launch does not pass it
    ds = _errors("""
    from mylib.utils import libtuner

    @libtuner(configs=[triton.Config({"BLOCK": 128})], key=["n"])
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, 1.0, mask=offs < n)

    def run(x):
        k[(1,)](x, x.numel())
    """)
    assert not ds, _fmt(ds)


def test_heuristics_from_code_the_file_does_not_spell_may_supply_launch_arguments():
    ds = _errors("""
    from mylib import runtime

    @triton.heuristics(runtime.get_heuristic_config("k"))
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, 1.0, mask=offs < n)

    def run(x):
        k[(1,)](x, x.numel())
    """)
    assert not ds, _fmt(ds)


def test_a_missing_launch_argument_of_a_plain_kernel_is_still_an_error():
    ds = _errors("""
    @triton.heuristics({"EVEN": lambda a: a["n"] % 128 == 0})
    @triton.jit
    def k(x_ptr, n, EVEN: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, 1.0, mask=offs < n)

    def run(x):
        k[(1,)](x, x.numel())
    """)
    assert [d.code for d in ds] == ["N060"] and "BLOCK" in ds[0].message, _fmt(ds)


def test_a_module_alias_of_another_packages_function_is_callable():
    # ``_tanh = tl_extra_shim.tanh`` at module level: a jit function of the library's own (its value unknown here)
    ds = _errors("""
    from mylib.utils import tl_extra_shim

    _tanh = tl_extra_shim.tanh

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, _tanh(tl.load(x_ptr + offs)))
    """)
    assert not ds, _fmt(ds)


def test_a_module_alias_of_a_missing_language_function_is_still_an_error():
    ds = _errors("""
    _tanh = tl.no_such_function

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, _tanh(tl.load(x_ptr + offs)))
    """)
    assert [d.code for d in ds] == ["N006"], _fmt(ds)


def test_a_config_dict_chosen_by_an_imported_flag_is_not_known():
    # ``{'grf_mode': 'large'} if IS_INTEL else {}``: the flag is another module's, its value unknown here
    ds = _errors("""
    from mylib.utils import IS_INTEL

    extra = {"grf_mode": "large"} if IS_INTEL else {}

    @triton.autotune(configs=[triton.Config(extra, num_warps=w) for w in (2, 4)], key=["n"])
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, 1.0, mask=offs < n)
    """)
    assert not ds, _fmt(ds)


def test_a_config_key_that_is_no_parameter_is_still_an_error():
    ds = _errors("""
    @triton.autotune(configs=[triton.Config({"grf_mode": "large"}, num_warps=4)], key=["n"])
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, 1.0, mask=offs < n)
    """)
    assert [d.code for d in ds] == ["N060"], _fmt(ds)


def test_the_language_through_tritons_core_module():
    # Triton's ``triton.language.core`` defines the language's functions; code calls them there
    ds = _errors("""
    import triton.language.core as core
    from triton.language.core import broadcast_to

    @triton.jit
    def k(x_ptr, n_dims: core.constexpr, BLOCK: core.constexpr):
        core.static_assert(BLOCK % 2 == 0)
        x = tl.load(x_ptr + core.arange(0, BLOCK))
        y = core.reshape(x, [BLOCK // 2, 2])
        m = broadcast_to(core.arange(0, 2)[None, :], [BLOCK // 2, 2])
        z = core.where(m > 0, y, tl.core.reshape(y, [BLOCK // 2, 2]))
        for i in core.static_range(n_dims):
            z = z + i
        tl.store(x_ptr + tl.arange(0, BLOCK), core.reshape(z, [BLOCK]))
    """)
    assert not ds, _fmt(ds)


def test_a_name_the_language_lacks_is_still_an_error_through_core():
    ds = _errors("""
    import triton.language.core as core

    @triton.jit
    def k(x_ptr, BLOCK: core.constexpr):
        tl.store(x_ptr + core.arange(0, BLOCK), core.no_such_function(BLOCK))
    """)
    assert [d.code for d in ds] == ["N004"], _fmt(ds)


def test_a_pointer_as_a_condition_is_a_null_test():
    # Triton casts the condition to int1, and a pointer's int1 is "its address != 0"
    ds = _errors("""
    @triton.jit
    def k(x_ptr, w_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        if w_ptr:
            w = tl.load(w_ptr + offs).to(tl.float32)
        else:
            w = 1.0
        nonnull = w_ptr.to(tl.int1)
        tl.store(x_ptr + offs, w * nonnull, mask=offs < n)

    def run(x, w):
        k[(1,)](x, w, x.numel(), BLOCK=128)
    """)
    assert not ds, _fmt(ds)


def test_a_pointer_to_a_narrow_integer_is_still_an_error():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, x_ptr.to(tl.int32))

    def run():
        x = torch.empty(128, dtype=torch.float32)
        k[(1,)](x, BLOCK=128)
    """, header=TRITON + "import torch\n")
    assert [d.code for d in ds] == ["N024"], _fmt(ds)


def test_dtype_predicates_of_an_unknown_dtype_are_unknown():
    # a helper checked on its own: x's dtype is not known, so no branch of the chain is known to be taken
    ds = _errors("""
    @triton.jit
    def to_key(x, descending: tl.constexpr = False):
        if x.dtype.is_floating():
            out = x + 1
        elif x.dtype.is_int_signed():
            out = x - 1
        return out
    """)
    assert not ds, _fmt(ds)


def test_dtype_predicates_of_a_known_dtype_still_decide():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs).to(tl.int16)
        if x.dtype.is_floating():
            out = x + 1
        tl.store(x_ptr + offs, out)
    """)
    assert [d.code for d in ds] == ["N003"], _fmt(ds)


def test_a_raise_in_a_branch_no_known_specialization_takes_is_silent():
    # the ``else: raise`` of a chain over a dtype the generic check does not know
    ds = _errors("""
    @triton.jit
    def as_int(x):
        if tl.constexpr(x.dtype.primitive_bitwidth) == 16:
            idtype = tl.int16
        elif tl.constexpr(x.dtype.primitive_bitwidth) == 32:
            idtype = tl.int32
        else:
            raise ValueError("unsupported dtype")
        return x.to(idtype, bitcast=True)
    """)
    assert not ds, _fmt(ds)


def test_a_raise_every_specialization_reaches_is_still_an_error():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs).to(tl.float32)
        if x.dtype.is_floating():
            raise ValueError("floats are not supported")
        tl.store(x_ptr + offs, x)
    """)
    assert [d.code for d in ds] == ["N002"], _fmt(ds)


def test_float_of_an_unknown_constexpr_is_not_an_integer():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, BT: tl.constexpr):
        levels = tl.log2(float(BT)).to(tl.int32) + 1
        tl.store(x_ptr, levels)
    """)
    assert not ds, _fmt(ds)


def test_log2_of_an_integer_constexpr_is_still_an_error_where_known():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, BT: tl.constexpr):
        tl.store(x_ptr, tl.log2(int(BT)))

    def run(x):
        k[(1,)](x, BT=16)
    """)
    assert [d.code for d in ds] == ["N023"], _fmt(ds)


def test_a_parameter_of_unknown_kind_may_be_a_tuple():
    # ``res`` is a tuple of pointers at every launch; the file does not say so
    ds = _errors("""
    @triton.jit
    def k(res, o, L2: tl.constexpr, BL: tl.constexpr):
        o_l = tl.arange(0, BL)
        p_v = res[0] + o_l * 0
        for i in tl.static_range(1, L2):
            p_v = tl.where(o_l == i, res[i], p_v)
        tl.store(o + o_l, tl.load(p_v))
    """)
    assert not ds, _fmt(ds)


def test_indexing_a_scalar_parameter_is_still_an_error():
    ds = _errors("""
    @triton.jit
    def k(o, n: tl.int32, BL: tl.constexpr):
        tl.store(o + tl.arange(0, BL), n[0])
    """)
    assert [d.code for d in ds] == ["N002"], _fmt(ds)


def test_a_helper_defined_under_a_module_level_if_exists():
    ds = _errors("""
    from mylib import IS_BLACKWELL

    if IS_BLACKWELL:
        @triton.jit
        def safe_dot(a, b):
            return tl.dot(a, b) + 0.0
    else:
        @triton.jit
        def safe_dot(a, b):
            return tl.dot(a, b)

    @triton.jit
    def k(a_ptr, o_ptr, B: tl.constexpr):
        offs = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
        a = tl.load(a_ptr + offs)
        tl.store(o_ptr + offs, safe_dot(a, a))
    """)
    assert not ds, _fmt(ds)


def test_a_name_defined_nowhere_is_still_an_error():
    ds = _errors("""
    @triton.jit
    def k(a_ptr, o_ptr, B: tl.constexpr):
        offs = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
        a = tl.load(a_ptr + offs)
        tl.store(o_ptr + offs, safe_dot(a, a))
    """)
    assert [d.code for d in ds] == ["N003"], _fmt(ds)


def test_a_name_assigned_after_a_run_time_early_return_is_defined():
    ds = _errors("""
    @triton.jit
    def k(y, S, T, BD: tl.constexpr, LEFT: tl.constexpr):
        i_s = tl.program_id(0)
        if LEFT:
            if i_s < S - T:
                return
            i_t = i_s - (S - T)
        else:
            if i_s >= T:
                return
            i_t = i_s
        tl.store(y + i_t * BD + tl.arange(0, BD), 1.0)

    def run(y, S, T):
        k[(S,)](y, S, T, BD=16, LEFT=True)
    """)
    assert not ds, _fmt(ds)


def test_a_name_assigned_on_one_run_time_path_is_still_maybe_undefined():
    ds = _errors("""
    @triton.jit
    def k(y, S, T, BD: tl.constexpr):
        i_s = tl.program_id(0)
        if i_s < S - T:
            i_t = i_s
        tl.store(y + i_t * BD + tl.arange(0, BD), 1.0)

    def run(y, S, T):
        k[(S,)](y, S, T, BD=16)
    """)
    assert [d.code for d in ds] == ["N007"], _fmt(ds)


def test_a_name_assigned_after_a_run_time_early_return_runs_on_the_interpreter():
    @newt.jit(interpret=True)
    def k(y, S, T, BD: nl.constexpr, LEFT: nl.constexpr):
        i_s = nl.program_id(0)
        if LEFT:
            if i_s < S - T:
                return
            i_t = i_s - (S - T)
        else:
            if i_s >= T:
                return
            i_t = i_s
        nl.store(y + i_t * BD + nl.arange(0, BD), (i_s + 1).to(nl.float32))

    for left, want in ((True, [3.0, 4.0, 5.0]), (False, [1.0, 2.0, 3.0])):
        y = torch.zeros(3 * 4)
        k[(5,)](y, 5, 3, BD=4, LEFT=left)
        assert y.view(3, 4)[:, 0].tolist() == want
        assert (y.view(3, 4) == y.view(3, 4)[:, :1]).all()


def test_a_new_name_bound_to_the_same_value_on_both_paths_is_defined():
    ds = _errors("""
    @triton.jit
    def k(o, task_num, IS_VARLEN: tl.constexpr):
        pid = tl.program_id(0)
        if IS_VARLEN:
            i_tg = pid
        else:
            i_tg = pid
        if pid < task_num:
            j = pid
        else:
            j = pid
        tl.store(o + i_tg + j, 1.0)
    """)
    assert not ds, _fmt(ds)


def test_a_same_value_bound_to_the_same_name_runs_on_the_interpreter():
    @newt.jit(interpret=True)
    def k(o, n):
        pid = nl.program_id(0)
        if pid < n:
            j = pid
        else:
            j = pid
        nl.store(o + j, (j * 2).to(nl.float32))

    y = torch.zeros(4)
    k[(4,)](y, 2)
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_a_local_annotated_constexpr_may_hold_a_run_time_value():
    # Triton 3.9's code generator binds it as it is
    ds = _errors("""
    @triton.jit
    def k(x_ptr, n, tiles_per_cta, TILE_N: tl.constexpr):
        CTA_N: tl.constexpr = TILE_N * tiles_per_cta
        start = CTA_N * tl.program_id(0)
        for off in range(start, start + CTA_N, TILE_N):
            offs = off + tl.arange(0, TILE_N)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)
    """)
    assert not ds, _fmt(ds)


def test_a_run_time_value_annotated_constexpr_is_still_an_error_where_a_size_is_needed():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, tiles_per_cta, TILE_N: tl.constexpr):
        CTA_N: tl.constexpr = TILE_N * tiles_per_cta
        tl.store(x_ptr + tl.arange(0, CTA_N), 1.0)
    """)
    assert [d.code for d in ds] == ["N010"], _fmt(ds)


def test_tritons_int_dtype_and_log2_helpers():
    # ``tl.core.get_int_dtype`` and ``standard._log2``, which sorting kernels reach into
    ds = _errors("""
    from triton.language.standard import _log2

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        idtype = tl.core.get_int_dtype(bitwidth=x.dtype.primitive_bitwidth, signed=True)
        n_dims: tl.constexpr = _log2(x.shape[0])
        m: tl.constexpr = tl.standard._log2(BLOCK)
        y = x.to(idtype, bitcast=True) + n_dims + m
        tl.store(x_ptr + tl.arange(0, BLOCK), y.to(x.dtype, bitcast=True))

    def run(x):
        k[(1,)](x, BLOCK=64)
    """)
    assert not ds, _fmt(ds)


def test_a_private_name_triton_does_not_export_is_still_an_error():
    ds = _errors("""
    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), tl.standard._no_such_helper(BLOCK))
    """)
    assert [d.code for d in ds] == ["N004"], _fmt(ds)


def test_get_int_dtype_and_log2_values():
    from newt.language import core, standard

    assert core.get_int_dtype(16, True) == nl.int16 and core.get_int_dtype(32, False) == nl.uint32
    assert core.get_int_dtype(1, True) == nl.int1
    assert [standard._log2(v) for v in (1, 2, 64, 100)] == [0, 1, 6, 6]
    assert standard._is_power_of_two(64) and not standard._is_power_of_two(96)


def test_a_pointer_condition_runs_on_the_interpreter():
    @newt.jit(interpret=True)
    def k(x_ptr, w_ptr, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        if w_ptr:
            w = nl.load(w_ptr + offs)
        else:
            w = 1.0
        nl.store(x_ptr + offs, nl.load(x_ptr + offs) * w)

    x = torch.ones(4)
    k[(1,)](x, torch.full((4,), 3.0), BLOCK=4)
    assert x.tolist() == [3.0] * 4
    k[(1,)](x, None, BLOCK=4)
    assert x.tolist() == [3.0] * 4


def test_an_unknown_value_after_a_run_time_early_return_stays_unknown():
    # after ``if ...: return`` the rest runs under a guard; a name the generic check only knows as "unknown"
    # (bound on both sides of a branch over an unknown constexpr) must not become an N042
    ds = _errors("""
    @triton.jit
    def k(x, y, T, BD: tl.constexpr, PACK: tl.constexpr):
        i_s = tl.program_id(0)
        if i_s >= T:
            return
        o_d = tl.arange(0, BD)
        if PACK:
            b_x = tl.load(x + i_s * BD + o_d)
        else:
            b_x = tl.load(x + o_d).to(tl.float16)
        tl.store(y + i_s * BD + o_d, b_x)
    """)
    assert not ds, _fmt(ds)


def test_is_on_a_dtype_the_generic_check_does_not_know_is_unknown():
    ds = _errors("""
    @triton.jit
    def info(dtype, return_max):
        if dtype is tl.int8:
            return 127 if return_max else -128
        elif dtype is tl.uint32:
            return 7
        else:
            raise ValueError("Unknown dtype")

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.store(x_ptr + offs, x + info(x_ptr.dtype.element_ty, True))
    """)
    assert not ds, _fmt(ds)


def test_is_on_a_known_dtype_still_decides():
    ds = _errors("""
    @triton.jit
    def info(dtype):
        if dtype is tl.int8:
            return 127
        else:
            raise ValueError("Unknown dtype")

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, info(tl.float32))
    """)
    assert "N002" in [d.code for d in ds], _fmt(ds)


def test_the_pointer_condition_and_the_early_return_compile_for_the_gpu():
    # offline, through NVRTC for sm_90a (no GPU needed): the CUDA backend takes the null test and the guard
    @newt.jit
    def kp(x_ptr, w_ptr, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        if w_ptr:
            w = nl.load(w_ptr + offs)
        else:
            w = 1.0
        nl.store(x_ptr + offs, nl.load(x_ptr + offs) * w)

    @newt.jit
    def kr(y, S, T, BD: nl.constexpr, LEFT: nl.constexpr):
        i_s = nl.program_id(0)
        if LEFT:
            if i_s < S - T:
                return
            i_t = i_s - (S - T)
        else:
            if i_s >= T:
                return
            i_t = i_s
        nl.store(y + i_t * BD + nl.arange(0, BD), (i_s + 1).to(nl.float32))

    assert kp.warmup(torch.float32, torch.float32, BLOCK=128, grid=(1,)).n_regs > 0
    for left in (True, False):
        assert kr.warmup(torch.float32, 5, 3, BD=4, LEFT=left, grid=(1,)).n_regs > 0


_SCALE_KERNEL = """
@triton.jit
def sum_and_scale(x_ptr, out_ptr, n, BY_WEIGHT: tl.constexpr, scale=1.0, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    v = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0))
    if BY_WEIGHT:
        s = tl.sum(tl.load(scale + offs, mask=offs < n, other=0.0))
    else:
        s = scale
    tl.store(out_ptr, v / s)

def run():
    x = torch.randn(128, device="cuda")
    out = torch.empty(1, device="cuda")
    w = torch.rand(128, device="cuda")
    sum_and_scale[(1,)](x, out, x.numel(), True, scale=w)
    sum_and_scale[(1,)](x, out, x.numel(), False)
"""


def test_a_parameter_one_launch_gives_a_tensor_and_another_leaves_at_its_number_default():
    # FlagGems' fused/cross_entropy_loss.py: ``scale=1.0`` is a pointer only where BY_WEIGHT; the launch that
    # leaves it out passes the number 1.0, so the tensor of the other launch says nothing about it (was N022)
    ds = _errors(_SCALE_KERNEL)
    assert not ds, _fmt(ds)


def test_a_launch_that_gives_the_tensor_still_types_it():
    # the pointer launch keeps its dtype: a float pointer used with ``^`` is still reported at its launch's
    # specialization
    ds = _errors(_SCALE_KERNEL.replace("tl.store(out_ptr, v / s)", "tl.store(out_ptr, v / s)\n    if BY_WEIGHT:\n"
                          "        tl.store(out_ptr, tl.load(scale) ^ 1)"))
    assert any(d.code == "N021" for d in ds), _fmt(ds)
