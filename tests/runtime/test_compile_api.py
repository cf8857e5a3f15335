"""``newt.compile`` with the real backend and no GPU: asm, metadata, errors, the disk cache."""

from __future__ import annotations

import re

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import compiler, driver

from . import kernels as K
from .conftest import needs_backend

pytestmark = needs_backend

SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_compile_returns_asm_and_metadata(target):
    ck = newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 1024}, target=target, num_warps=4)
    asm = ck.asm
    assert "func @add_kernel" in asm["ir"]
    assert 'extern "C"' in asm["cuda"] and ck.metadata.name in asm["cuda"]
    assert f".target {target}" in asm["ptx"]
    assert isinstance(asm["cubin"], bytes) and asm["cubin"][:4] == b"\x7fELF"
    assert "sass" in asm
    assert f"code for {target}" in asm["sass"]
    md = ck.metadata
    assert md.n_regs > 0 and md.n_spills == 0 and md.shared == 0 and md.num_warps == 4
    assert md.target == target and md.kernel_name == "add_kernel" and md.line == 10
    assert ck.n_regs == md.n_regs and ck.shared == md["shared"]
    assert [p.name for p in ck.params] == ["x_ptr", "y_ptr", "out_ptr", "n_elements"]
    assert [p.code for p in ck.params] == ["Q", "Q", "Q", "i"]


def test_hints_give_128_bit_accesses():
    plain = newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 1024})
    hinted = newt.compile(K.add_kernel, signature={k: v + ":16" for k, v in SIG.items()},
                          constexprs={"BLOCK_SIZE": 1024})
    assert hinted.metadata.hints == {"x_ptr": 16, "y_ptr": 16, "out_ptr": 16, "n_elements": 16}
    assert "LDG.E.128" in hinted.asm["sass"] and "STG.E.128" in hinted.asm["sass"]
    assert "LDG.E.128" not in plain.asm["sass"]
    same = newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 1024},
                        hints={"x_ptr": 16, "y_ptr": 16, "out_ptr": 16, "n_elements": 16})
    assert same.cache_key == hinted.cache_key


def test_signature_accepts_dtypes_and_constexpr_markers():
    ck = newt.compile(K.add_kernel, signature={"x_ptr": nl.pointer_type(nl.float16), "y_ptr": "*fp16",
                                               "out_ptr": "*fp16", "n_elements": nl.int64, "BLOCK_SIZE": "constexpr"},
                      constexprs={"BLOCK_SIZE": 256})
    assert ck.metadata.signature == {"x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*fp16", "n_elements": "i64"}
    # a constexpr with a default needs no value
    ck = newt.compile(K.scalars_kernel, signature={"out_ptr": "*fp32", "a": "fp32", "b": "i32", "flag": "i1"})
    assert ck.metadata.constexprs == {"BLOCK": "int:16"}
    assert [p.code for p in ck.params] == ["Q", "f", "i", "?"]


def test_compile_accepts_wrappers_and_plain_functions():
    tuned = newt.autotune([newt.Config({"BLOCK_SIZE": 64})], key=["n_elements"])(K.add_kernel)
    assert newt.compile(tuned, signature=SIG, constexprs={"BLOCK_SIZE": 64}).metadata.kernel_name == "add_kernel"
    assert newt.compile(K.add_kernel.fn, signature=SIG, constexprs={"BLOCK_SIZE": 64}).metadata.kernel_name == \
        "add_kernel"


@pytest.mark.parametrize("kw,msg", [
    (dict(signature={**SIG, "n_elements": "int99"}, constexprs={"BLOCK_SIZE": 64}),
     "parameter 'n_elements': unknown type 'int99'"),
    (dict(signature={k: v for k, v in SIG.items() if k != "y_ptr"}, constexprs={"BLOCK_SIZE": 64}),
     "no type given for parameter 'y_ptr'"),
    (dict(signature=SIG), "no value given for constexpr parameter 'BLOCK_SIZE'"),
    (dict(signature={**SIG, "BLOCK_SIZE": "i32"}), "parameter 'BLOCK_SIZE' is nl.constexpr"),
    (dict(signature={**SIG, "bogus": "i32"}, constexprs={"BLOCK_SIZE": 64}), "'bogus' is not a parameter"),
])
def test_signature_errors_name_the_parameter(kw, msg):
    with pytest.raises(TypeError, match=re.escape(msg)):
        newt.compile(K.add_kernel, **kw)


def test_compile_error_points_at_the_users_line(tmp_path):
    @newt.jit
    def broken(x_ptr, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        nl.store(x_ptr + offs, nl.load(x_ptr + offs) + undefined_name)  # noqa: F821

    with pytest.raises(newt.CompilationError) as ei:
        newt.compile(broken, signature={"x_ptr": "*fp32"}, constexprs={"BLOCK": 64})
    text = str(ei.value)
    assert "test_compile_api.py:" in text and "undefined_name" in text


def test_out_of_shared_memory_is_reported_for_the_target():
    from newt.runtime.errors import OutOfResources

    @newt.jit
    def big(a_ptr, b_ptr, c_ptr, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
        rm = nl.arange(0, BM)
        rn = nl.arange(0, BN)
        rk = nl.arange(0, BK)
        acc = nl.zeros((BM, BN), dtype=nl.float32)
        for k in range(0, 4):
            a = nl.load(a_ptr + rm[:, None] * BK + rk[None, :] + k * BK)
            b = nl.load(b_ptr + rk[:, None] * BN + rn[None, :] + k * BK * BN)
            acc = nl.dot(a, b, acc)
        nl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)

    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16"}
    with pytest.raises(OutOfResources, match="out of shared memory"):
        newt.compile(big, signature=sig, constexprs={"BM": 256, "BN": 256, "BK": 128}, num_warps=8, num_stages=4,
                     target="sm_89")


def test_warmup_without_a_gpu_compiles_for_the_default_target(monkeypatch):
    monkeypatch.setattr(driver, "_HAS_GPU", False)
    k = newt.jit(K.add_kernel.fn)
    ck = k.warmup(torch.float16, torch.float16, torch.float16, 4096, BLOCK_SIZE=1024, grid=(4,))
    assert ck.metadata.target == "sm_90a" and ck.metadata.signature["x_ptr"] == "*fp16"
    assert ck.metadata.hints == {"x_ptr": 16, "y_ptr": 16, "out_ptr": 16, "n_elements": 16}
    assert "LDG.E.128" in ck.asm["sass"]


def test_disk_cache_skips_nvrtc(monkeypatch, isolated_cache):
    ck1 = newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 512})
    compiler.clear_memory_cache()
    from newt.backend import cuda as backend

    def no_nvrtc(*a, **k):
        raise AssertionError("the disk cache should have answered")
    monkeypatch.setattr(backend, "compile_cuda", no_nvrtc)
    ck2 = newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 512})
    assert ck2.asm["cubin"] == ck1.asm["cubin"] and ck2.asm["ptx"] == ck1.asm["ptx"]
    assert dict(ck2.metadata) == dict(ck1.metadata)
    assert "code for sm_90a" in ck2.asm["sass"]


def test_constexpr_jit_function_is_inlined():
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    relu = newt.compile(K.helper_kernel, signature=sig, constexprs={"BLOCK": 128, "ACT": K.relu})
    none = newt.compile(K.helper_kernel, signature=sig, constexprs={"BLOCK": 128, "ACT": None})
    assert relu.cache_key != none.cache_key
    assert relu.asm["ir"].count("where") > none.asm["ir"].count("where")
