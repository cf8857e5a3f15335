"""Every located error of the layers below the runtime is a newt.diagnostics.LocatedError with a code."""

from __future__ import annotations

import pytest

import newt
import newt.language as nl
from newt.diagnostics import LocatedError


@newt.jit
def oob(x_ptr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, nl.load(x_ptr + offs) + 1)


def test_interpreter_errors_are_located_errors_with_codes_and_data():
    torch = pytest.importorskip("torch")
    from newt import interpreter as ni
    from newt.runtime import interpret as nri

    with pytest.raises(ni.OutOfBoundsError) as ei:
        nri.launch_jit(oob, (2,), (torch.zeros(40),), {"BLOCK": 32})
    e = ei.value
    assert isinstance(e, LocatedError) and isinstance(e, IndexError)
    assert e.code == "I002" and e.location is e.loc and e.location is not None
    assert e.data["kernel"] == "oob" and e.data["pid"] == (1, 0, 0)
    assert e.data["access"] == "load" and e.data["offset"] == 40 and e.data["numel"] == 40
    # the one caret renderer, with the line-number gutter
    assert f"{e.loc.line:>5} | " in str(e) and "^~" in str(e)


def test_every_interpreter_error_class_has_its_documented_code():
    import os

    from newt.interpreter import errors as E
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "diagnostics.md")).read()
    classes = [E.InterpreterError, E.OutOfBoundsError, E.MisalignedAddressError, E.DeviceAssertionError,
               E.DeadlockError]
    codes = [c.code for c in classes]
    assert len(set(codes)) == len(codes)
    for c in codes:
        assert f'<a id="{c.lower()}"></a>' in doc and f"### {c} " in doc
