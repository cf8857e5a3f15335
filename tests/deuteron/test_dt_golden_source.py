"""The newt source deuteron generates for kernels over every op family, pinned byte for byte (golden/*.py.txt,
generated before deuteron's op table replaced the tracer's and generator's name lists and if-chains; the
NaN-propagating maximum / amax / argmax of issue 22 then changed elementwise, reductions and combine_scan, on
purpose).  A change
here is a change of every user's generated code: regenerate a file only on purpose
(``python tests/deuteron/test_dt_golden_source.py``) and read its diff."""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden")


def _generated(name):
    import golden_kernels as gk
    for n, k, args in gk.cases():
        if n == name:
            return k.to_newt_source(*args).replace(os.path.dirname(gk.__file__), "<tests/deuteron>")
    raise KeyError(name)


def _names():
    return sorted(f[:-len(".py.txt")] for f in os.listdir(GOLDEN) if f.endswith(".py.txt"))


def test_every_case_is_pinned():
    import golden_kernels as gk
    assert [n for n, _, _ in gk.cases()] and sorted(n for n, _, _ in gk.cases()) == _names()


@pytest.mark.parametrize("name", _names())
def test_generated_source_is_unchanged(name):
    want = open(os.path.join(GOLDEN, name + ".py.txt"), encoding="utf-8").read()
    got = _generated(name)
    assert got == want, f"the newt source of golden_kernels.{name} changed"


if __name__ == "__main__":  # regenerate (on purpose only)
    sys.path.insert(0, HERE)
    for n in _names() or [n for n, _, _ in __import__("golden_kernels").cases()]:
        with open(os.path.join(GOLDEN, n + ".py.txt"), "w", encoding="utf-8") as f:
            f.write(_generated(n))
