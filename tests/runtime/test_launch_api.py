"""Triton's launch API on newt: kernels from exec()'d / replaced source, reinterpret and wrappers, tuple
arguments, nl.tuple, constexpr_function, launch_cooperative_grid, set_allocator, bad launches and options."""

from __future__ import annotations

import json
import linecache
import sys
from collections import namedtuple

import pytest
import torch

import newt
import newt.language as nl
from newt.frontend.source import NoSourceError
from newt.runtime.errors import LaunchError

from . import kernels as K
from .fakes import install_fake_c_launcher


@pytest.fixture(params=["python", "compiled"])
def gpu(request, fake_gpu, fake_backend, cuda_ok, monkeypatch):
    """The GPU launch path over the fake driver (tests/runtime/fakes.py), through both launchers."""
    if request.param == "compiled" and install_fake_c_launcher(monkeypatch, fake_gpu) is None:
        pytest.skip("the compiled launcher cannot be built here (no C compiler)")
    K.grid3_kernel.clear_cache()
    yield fake_gpu
    K.grid3_kernel.clear_cache()

SRC = '''
@newt.jit(interpret=True)
def kernel(X, Y, N: nl.constexpr):
    offs = nl.arange(0, N)
    nl.store(Y + offs, nl.load(X + offs) OP 2)
'''


def _exec_variant(op):
    ns = {}
    src = SRC.replace("OP", op)
    exec(src, {"newt": newt, "nl": nl}, ns)  # a string no file or linecache entry holds
    return ns["kernel"]


def test_kernel_from_exec_string_without_linecache():
    x = torch.arange(8, dtype=torch.float32)
    y = torch.empty_like(x)
    _exec_variant("*")[(1,)](x, y, N=8)
    assert torch.equal(y, x * 2)
    _exec_variant("-")[(1,)](x, y, N=8)
    assert torch.equal(y, x - 2)


def test_exec_source_errors_point_into_the_recovered_text():
    k = _exec_variant("+ nl.nope +")
    with pytest.raises(newt.CompilationError) as ei:
        k[(1,)](torch.zeros(8), torch.zeros(8), N=8)
    msg = str(ei.value)
    assert ":5:" in msg and "nl.nope" in msg  # line 5 of the exec'd string, with its text


def test_kernel_from_exec_of_linecache_registered_text():
    name = "<launch-api-test-cell>"
    text = SRC.replace("OP", "+")
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    ns = {}
    exec(compile(text, name, "exec"), {"newt": newt, "nl": nl}, ns)
    x = torch.arange(8, dtype=torch.float32)
    y = torch.empty_like(x)
    ns["kernel"][(1,)](x, y, N=8)
    assert torch.equal(y, x + 2)


def test_no_source_text_is_a_clear_error():
    ns = {}
    exec(compile("def k(X):\n    pass\n", "<nowhere>", "exec"), {}, ns)
    fn = ns.pop("k")
    jf = newt.jit(fn, interpret=True)  # decorated after exec returned: the text is gone
    with pytest.raises(NoSourceError, match="cannot read the source of kernel 'k'.*linecache"):
        jf[(1,)](torch.zeros(1))


def test_unsafe_update_src_and_src_property():
    k = _exec_variant("+")
    assert k.src.startswith("def kernel(X, Y, N: nl.constexpr):")
    with pytest.raises(AttributeError, match="_unsafe_update_src"):
        k.src = "def kernel(): pass"
    x = torch.arange(4, dtype=torch.float32)
    y = torch.empty_like(x)
    k[(1,)](x, y, N=4)
    assert torch.equal(y, x + 2)
    k._unsafe_update_src(k.src.replace("+ 2", "* 10"))
    k[(1,)](x, y, N=4)
    assert torch.equal(y, x * 10)
    assert "* 10" in k.src


def test_code_object_replacement_recompiles():
    def f(Y, N: nl.constexpr):
        nl.store(Y + nl.arange(0, N), 5.0)

    def g(Y, N: nl.constexpr):
        nl.store(Y + nl.arange(0, N), 7.0)

    k = newt.jit(f, interpret=True)
    y = torch.zeros(4)
    k[(1,)](y, N=4)
    assert torch.all(y == 5)
    f.__code__ = g.__code__
    k[(1,)](y, N=4)
    assert torch.all(y == 7)


def test_python_dash_c_kernel(tmp_path):
    import subprocess
    code = ("import torch, newt, newt.language as nl\n"
            "@newt.jit(interpret=True)\n"
            "def k(Y):\n"
            "    nl.store(Y, 42)\n"
            "y = torch.zeros(1, dtype=torch.int32)\n"
            "k[(1,)](y)\n"
            "print(int(y[0]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "42"


# -- reinterpret / wrappers -------------------------------------------------------------------

@newt.jit(interpret=True)
def _copy_kernel(X, Y, N: nl.constexpr):
    offs = nl.arange(0, N)
    nl.store(Y + offs, nl.load(X + offs))


@newt.jit(interpret=True)
def _shift_kernel(X, Y, N: nl.constexpr):
    offs = nl.arange(0, N)
    nl.store(Y + offs, nl.load(X + offs) >> 4)


def test_reinterpret_as_unsigned():
    x = torch.tensor([-1, -16, 16, 0], dtype=torch.int8)
    y = torch.zeros(4, dtype=torch.int8)
    _shift_kernel[(1,)](newt.reinterpret(x, nl.uint8), newt.reinterpret(y, nl.uint8), N=4)
    assert y.tolist() == [15, 15, 1, 0]  # logical shifts: the kernel saw u8
    _shift_kernel[(1,)](x, y, N=4)
    assert y.tolist() == [-1, -1, 1, 0]  # arithmetic shifts on i8


def test_reinterpret_round_trip_and_wrapper_protocol():
    x = torch.arange(4, dtype=torch.int32)
    w = newt.reinterpret(x, nl.uint32)
    assert isinstance(w, newt.TensorWrapper) and w.base is x and w.dtype is nl.uint32
    assert w.data_ptr() == x.data_ptr() and w.shape == x.shape
    assert newt.reinterpret(w, torch.int32) is x
    with pytest.raises(TypeError, match="cannot reinterpret a list"):
        newt.reinterpret([1, 2], nl.uint8)

    class MyWrapper:  # any object with data_ptr(), dtype and base
        def __init__(self, base):
            self.base, self.dtype, self.device = base, nl.float32, base.device

        def data_ptr(self):
            return self.base.data_ptr()

    src = torch.tensor([1.0, 2.5, -3.0, 4.0]).view(torch.int32)
    out = torch.zeros(4)
    _copy_kernel[(1,)](MyWrapper(src), out, N=4)
    assert out.tolist() == [1.0, 2.5, -3.0, 4.0]


def test_wrapper_with_an_unknown_dtype_names_the_parameter():
    class Odd:
        name = "complex32"

    with pytest.raises(TypeError, match="argument 'X'"):
        _copy_kernel[(1,)](newt.TensorWrapper(torch.zeros(4), Odd()), torch.zeros(4), N=4)


def _ir(warm):
    """The IR an interpreted kernel's warmup built: its compiled kernel carries it (without NVRTC the warmup
    returns the IR itself)."""
    return getattr(warm, "ir", None) or warm


def test_wrapper_specializes_as_its_dtype_pointer():
    ck = _copy_kernel.warmup(newt.reinterpret(torch.zeros(4, dtype=torch.int16), nl.float16),
                             torch.zeros(4, dtype=torch.float16), N=4, grid=(1,))
    assert "%X: *fp16" in str(_ir(ck))


# -- tuples -----------------------------------------------------------------------------------

P = namedtuple("P", ["ptr", "scale"])


@newt.jit(interpret=True)
def _tuple_kernel(Out, ptrs, vals, nested):
    x0, x1 = ptrs
    nl.store(Out + 0, nl.load(x0) + vals[0])
    nl.store(Out + 1, nl.load(x1) * vals[1])
    nl.static_assert(vals[2] is None)
    nl.store(Out + 2, nl.load(nested[1][0]) * nested[1][1] + nested[0])


def test_tuple_namedtuple_and_nested_arguments():
    out = torch.zeros(3)
    args = ((torch.tensor([2.0]), torch.tensor([3.0])), (1.5, 4, None), (7, P(torch.tensor([10.0]), 3)))
    _tuple_kernel[(1,)](out, *args)
    assert out.tolist() == [3.5, 12.0, 37.0]
    fn = _ir(_tuple_kernel.warmup(out, *args, grid=(1,)))
    names = [p.name for p in fn.params if not p.constexpr]
    assert names == ["Out", "ptrs.0", "ptrs.1", "vals.0", "vals.1", "nested.0", "nested.1.0", "nested.1.1"]


def test_tuple_elements_specialize_like_arguments():
    out = torch.zeros(3)
    a = (torch.tensor([2.0]), torch.tensor([3.0]))
    fn1 = _ir(_tuple_kernel.warmup(out, a, (1.5, 4, None), (7, P(torch.tensor([10.0]), 1)), grid=(1,)))
    assert "nested.1.1" not in [p.name for p in fn1.params]  # an int equal to 1 became constexpr
    with pytest.raises(TypeError, match=r"argument '(ptrs\[0\]|ptrs\.0)' is a dtype"):
        _tuple_kernel[(1,)](out, (torch.float32, a[1]), (1.5, 4, None), (7, P(a[0], 3)))


@newt.jit(interpret=True)
def _nl_tuple_kernel(Out):
    t = nl.tuple((4, 5)) + (6, 7)
    nl.static_assert(nl.tuple((1, 2)) == (1, 2))
    nl.store(Out, t[0] + t[3])


def test_nl_tuple():
    out = torch.zeros(1, dtype=torch.int32)
    _nl_tuple_kernel[(1,)](out)
    assert out.item() == 11
    assert nl.tuple([1, 2]) == (1, 2)


# -- constexpr_function, cooperative launches, allocator --------------------------------------

@newt.constexpr_function
def _double(x):
    return 2 * x


@newt.jit(interpret=True)
def _cxfn_kernel(Y, N: nl.constexpr):
    nl.store(Y + nl.arange(0, _double(N)), 1)


def test_constexpr_function():
    y = torch.zeros(8, dtype=torch.int32)
    _cxfn_kernel[(1,)](y, 4)
    assert y.tolist() == [1] * 8
    assert _double(nl.constexpr(3)) == 6


def test_launch_cooperative_grid_on_the_interpreter():
    y = torch.zeros(8, dtype=torch.int32)
    _cxfn_kernel[(1,)](y, 2, launch_cooperative_grid=True)
    assert y.tolist() == [1] * 4 + [0] * 4


def test_launch_cooperative_grid_uses_the_cooperative_launch(gpu):
    out = torch.empty(64, dtype=torch.int32)
    K.grid3_kernel[(1,)](out, X=4, Y=8, launch_cooperative_grid=True)
    K.grid3_kernel[(1,)](out, X=4, Y=8)
    assert [ln.cooperative for ln in gpu.launches] == [True, False]


def test_set_allocator():
    from newt.runtime.allocator import allocate_scratch, get_allocator
    newt.set_allocator(None)
    with pytest.raises(RuntimeError, match="k: this kernel needs 64 bytes.*newt.set_allocator"):
        allocate_scratch("k", 64, 16)
    calls = []

    def alloc(size, alignment, stream):
        calls.append((size, alignment, stream))
        return torch.empty(size, dtype=torch.int8)

    newt.set_allocator(alloc)
    try:
        assert get_allocator() is alloc
        buf = allocate_scratch("k", 128, 1, None)
        assert buf.numel() == 128 and calls == [(128, 1, None)]
        with pytest.raises(TypeError, match="expects a callable"):
            newt.set_allocator(3)
    finally:
        newt.set_allocator(None)


# -- bad launches and options ---------------------------------------------------------------------

@newt.jit(interpret=True)
def _grid_kernel(X, n: nl.int32):
    nl.store(X + nl.program_id(0), n)


@pytest.mark.parametrize("grid,axis", [((2 ** 31,), "x"), ((1, 65536), "y"), ((1, 1, 70000), "z"),
                                        (lambda meta: (1, 1, 65536), "z")])
def test_grid_limits_on_the_interpreter(grid, axis):
    with pytest.raises(LaunchError, match=f"_grid_kernel: invalid grid .*dimension {axis} is .*CUDA's limit"):
        _grid_kernel[grid](torch.zeros(4, dtype=torch.int32), 3)


@pytest.mark.parametrize("grid", [(2 ** 31,), (1, 65536), (1, 1, 65536)])
def test_grid_limits_on_the_gpu_path(gpu, grid):
    with pytest.raises(LaunchError, match="grid3_kernel: invalid grid .*CUDA's limit"):
        K.grid3_kernel[grid](torch.empty(64, dtype=torch.int32), X=4, Y=8)
    assert gpu.launches == []


def test_bad_scalar_arguments_name_the_parameter():
    x = torch.zeros(4, dtype=torch.int32)
    with pytest.raises(TypeError, match=r"argument 'n' is declared a scalar \(nl.int32\) but got None"):
        _grid_kernel[(1,)](x, None)
    with pytest.raises(TypeError, match="argument 'n' is declared a scalar .* but got a tensor"):
        _grid_kernel[(1,)](x, x)
    with pytest.raises(TypeError, match="argument 'X' is a tensor on the meta device"):
        _grid_kernel[(1,)](torch.empty(4, device="meta"), 1)


@pytest.mark.parametrize("opts,msg", [({"num_stages": 0}, "num_stages must be an int >= 1"),
                                      ({"num_warps": 3}, "num_warps must be a power of two")])
def test_compile_rejects_bad_options(opts, msg):
    with pytest.raises(ValueError, match=msg):
        newt.compile(_grid_kernel, signature={"X": "*i32", "n": "i32"}, **opts)
    with pytest.raises(ValueError, match=msg):
        _grid_kernel[(1,)](torch.zeros(4, dtype=torch.int32), 3, **opts)


@pytest.mark.parametrize("header", [[1, 2], {"key": "k"}, {"key": "k", "meta": {}, "blobs": [["a", "s"]]},
                                    {"key": "k", "meta": [], "blobs": []}])
def test_malformed_header_with_valid_checksum_is_rebuilt(tmp_path, header):
    import hashlib

    from newt.runtime import cache as C
    dc = C.DiskCache(tmp_path)
    key = "ab" * 32
    h = json.dumps(header).encode()
    body = len(h).to_bytes(8, "little") + h
    data = C.MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body
    p = dc.path(key)
    p.parent.mkdir(parents=True)
    p.write_bytes(data)
    with pytest.warns(RuntimeWarning, match="malformed header"):
        assert dc.get(key) is None
    assert not p.exists()
