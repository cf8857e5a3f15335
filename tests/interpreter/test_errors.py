"""The memory checker and run-time errors: exact kernel, file:line:col, program id, offset."""

from __future__ import annotations

import inspect

import pytest
import torch

import newt
import newt.language as nl
from newt import interpreter as ni
from newt.interpreter import executor
from newt.runtime import interpret as nri


def line_of(fn, text: str) -> int:
    """The line number in this file of the first line of ``fn`` containing ``text``."""
    src, start = inspect.getsourcelines(fn.fn if hasattr(fn, "fn") else fn)
    for i, line in enumerate(src):
        if text in line:
            return start + i
    raise AssertionError(text)


def col_of(fn, text: str, what: str) -> int:
    src, _ = inspect.getsourcelines(fn.fn)
    line = next(s for s in src if text in s)
    return line.index(what) + 1


@newt.jit
def oob_load_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)  # no mask: the last program reads past the end
    nl.store(out_ptr + offs, x, mask=offs < 100)


def test_unmasked_load_past_the_end():
    x = torch.randn(100)
    out = torch.zeros(100)
    with pytest.raises(ni.OutOfBoundsError) as ei:
        nri.launch_jit(oob_load_kernel, (4,), (x, out), {"BLOCK": 32})
    e = ei.value
    line = line_of(oob_load_kernel, "x = nl.load(x_ptr + offs)")
    col = col_of(oob_load_kernel, "x = nl.load(x_ptr + offs)", "nl.load")
    assert e.loc.line == line and e.loc.col == col
    assert e.kernel == "oob_load_kernel"
    assert e.pid == (3, 0, 0)
    assert e.access == "load" and e.arg == "x_ptr"
    assert e.offset == 100 and e.index == (4,) and e.numel == 100
    msg = str(e)
    assert f"{__file__}:{line}:{col}" in msg
    assert "kernel 'oob_load_kernel'" in msg and "program id (3, 0, 0)" in msg
    assert "element offset 100 from 'x_ptr'" in msg and "block index (4,)" in msg
    assert "x = nl.load(x_ptr + offs)" in msg and "^" in msg  # the source line and a caret
    assert "28 lanes of this access are out of bounds" in msg
    assert not out.any(), "nothing may run after the failing access"


@newt.jit
def masked_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=1.0)
    nl.store(out_ptr + offs, x, mask=offs < n)


def test_masked_lanes_are_never_checked():
    x = torch.randn(100)
    out = torch.zeros(100)
    nri.launch_jit(masked_kernel, (4,), (x, out, 100), {"BLOCK": 32})
    assert torch.equal(out, x)


@newt.jit
def oob_store_kernel(out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK) - 3
    nl.store(out_ptr + offs, 1.0, mask=offs < n)  # the mask forgets the lower bound


def test_store_before_the_start():
    out = torch.zeros(64)
    with pytest.raises(ni.OutOfBoundsError) as ei:
        nri.launch_jit(oob_store_kernel, (1,), (out, 64), {"BLOCK": 64})
    e = ei.value
    assert e.access == "store" and e.offset == -3 and e.index == (0,) and e.arg == "out_ptr"
    assert e.loc.line == line_of(oob_store_kernel, "nl.store(out_ptr + offs, 1.0")
    assert "before its first element" in str(e)
    assert not out.any()


@newt.jit
def loop_pointer_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    p = x_ptr
    acc = nl.zeros([BLOCK], dtype=nl.float32)
    for _ in range(0, n):
        acc += nl.load(p + nl.arange(0, BLOCK))
        p += BLOCK
    nl.store(out_ptr + nl.arange(0, BLOCK), acc)


def test_loop_carried_pointer_names_its_parameter():
    x = torch.randn(4 * 16)
    y = torch.randn(1000)  # another tensor the walk could land in is not an excuse
    out = torch.zeros(16)
    with pytest.raises(ni.OutOfBoundsError) as ei:
        nri.launch_jit(loop_pointer_kernel, (1,), (x, out, 5), {"BLOCK": 16})
    assert ei.value.arg == "x_ptr" and ei.value.offset == 64
    del y


@newt.jit
def oob_atomic_kernel(h_ptr, x_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    b = nl.load(x_ptr + offs)
    nl.atomic_add(h_ptr + b, 1)


def test_atomic_out_of_bounds():
    h = torch.zeros(8, dtype=torch.int32)
    x = torch.tensor([0, 1, 2, 9, 3, 4, 5, 6], dtype=torch.int32)
    with pytest.raises(ni.OutOfBoundsError) as ei:
        nri.launch_jit(oob_atomic_kernel, (1,), (h, x), {"BLOCK": 8})
    e = ei.value
    assert e.access == "atomic" and e.offset == 9 and e.index == (3,)


@newt.jit
def null_kernel(x_ptr, out_ptr):
    nl.store(out_ptr, nl.load(x_ptr))


def test_null_pointer():
    fn, _ = nri.build(null_kernel, (torch.zeros(1), torch.zeros(1)))
    with pytest.raises(ni.OutOfBoundsError, match="'x_ptr' is a null pointer"):
        ni.launch(fn, (1,), [None, torch.zeros(1)])


@newt.jit
def view_kernel(x_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, 7.0, mask=offs < n)


def test_checker_uses_the_tensor_not_its_storage():
    base = torch.zeros(100)
    view = base[10:20]
    nri.launch_jit(view_kernel, (1,), (view, 10), {"BLOCK": 16})
    assert base[10:20].tolist() == [7.0] * 10 and not base[:10].any() and not base[20:].any()
    with pytest.raises(ni.OutOfBoundsError) as ei:
        nri.launch_jit(view_kernel, (1,), (view, 12), {"BLOCK": 16})
    assert ei.value.offset == 10 and "(1 past the last one)" in str(ei.value)


@newt.jit
def misaligned_kernel(x_ptr, out_ptr):
    p = (x_ptr + 1).to(nl.pointer_type(nl.int32), bitcast=True)
    nl.store(out_ptr, nl.load(p))


def test_misaligned_address():
    x = torch.zeros(16, dtype=torch.uint8)
    out = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(ni.MisalignedAddressError, match="not a multiple of 4"):
        nri.launch_jit(misaligned_kernel, (1,), (x, out), {})


@newt.jit
def assert_kernel(x_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=0)
    nl.device_assert(x >= 0, "x must be non-negative", mask=offs < n)


def test_device_assert():
    x = torch.arange(40, dtype=torch.int32)
    nri.launch_jit(assert_kernel, (2,), (x, 40), {"BLOCK": 32})
    x[35] = -1
    with pytest.raises(ni.DeviceAssertionError) as ei:
        nri.launch_jit(assert_kernel, (2,), (x, 40), {"BLOCK": 32})
    e = ei.value
    assert isinstance(e, AssertionError)
    assert e.pid == (1, 0, 0) and e.loc.line == line_of(assert_kernel, "nl.device_assert")
    assert "x must be non-negative at block index (3,)" in str(e)


@newt.jit
def py_assert_kernel(x_ptr):
    v = nl.load(x_ptr + nl.program_id(0))
    assert v < 10, "too big"


def test_python_assert_in_kernel():
    x = torch.tensor([1, 2, 30, 4], dtype=torch.int32)
    with pytest.raises(ni.DeviceAssertionError, match="too big") as ei:
        nri.launch_jit(py_assert_kernel, (4,), (x,), {})
    assert ei.value.pid == (2, 0, 0)


@newt.jit
def assume_kernel(x_ptr, n):
    nl.assume(n > 0)
    nl.store(x_ptr, n)


def test_false_assumption_is_reported():
    x = torch.zeros(1, dtype=torch.int32)
    nri.launch_jit(assume_kernel, (1,), (x, 5), {})
    with pytest.raises(ni.InterpreterError, match="nl.assume"):
        nri.launch_jit(assume_kernel, (1,), (x, -5), {})


@newt.jit
def wait_for_later_kernel(flag_ptr, out_ptr):
    pid = nl.program_id(0)
    if pid == 0:
        while nl.atomic_add(flag_ptr, 0) == 0:  # waits for program 1, which runs later
            pass
    else:
        nl.atomic_xchg(flag_ptr, 1)
    nl.store(out_ptr + pid, 1)


def test_deadlock_is_detected(monkeypatch):
    monkeypatch.setattr(executor, "STUCK_CHECK_AFTER", 50)
    flag = torch.zeros(1, dtype=torch.int32)
    out = torch.zeros(2, dtype=torch.int32)
    with pytest.raises(ni.DeadlockError) as ei:
        nri.launch_jit(wait_for_later_kernel, (2,), (flag, out), {})
    e = ei.value
    assert e.pid == (0, 0, 0)
    assert e.loc.line == line_of(wait_for_later_kernel, "while nl.atomic_add")
    assert "cannot wait for a later one" in str(e)


@newt.jit
def spin_lock_kernel(lock_ptr, data_ptr):
    while nl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    nl.store(data_ptr, nl.load(data_ptr) + 1)
    nl.atomic_xchg(lock_ptr, 0)


def test_lockstep_spin_lock_deadlock_is_explained(monkeypatch):
    monkeypatch.setattr(executor, "STUCK_CHECK_AFTER", 20)
    lock = torch.zeros(1, dtype=torch.int32)
    data = torch.zeros(1)
    with pytest.raises(ni.DeadlockError, match="mode='sequential'"):
        nri.launch_jit(spin_lock_kernel, (4,), (lock, data), {}, mode="vectorized")
    lock.zero_()
    data.zero_()
    nri.launch_jit(spin_lock_kernel, (4,), (lock, data), {})  # auto: sequential
    assert data.item() == 4.0


def test_bad_arguments():
    fn, _ = nri.build(masked_kernel, (torch.zeros(4), torch.zeros(4), 4), {"BLOCK": 4})
    with pytest.raises(TypeError, match="takes 3 run-time arguments"):
        ni.launch(fn, (1,), [torch.zeros(4)])
    with pytest.raises(TypeError, match="'x_ptr' is a pointer"):
        ni.launch(fn, (1,), [1.0, torch.zeros(4), 4])
    with pytest.raises(TypeError, match="does not fit"):
        ni.launch(fn, (1,), [torch.zeros(4), torch.zeros(4), 2 ** 40])
    with pytest.raises(ValueError, match="1 to 3 dimensions"):
        ni.launch(fn, (1, 1, 1, 1), [torch.zeros(4), torch.zeros(4), 4])
