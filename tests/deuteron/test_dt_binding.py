"""Binding a deuteron kernel's call: the generated binder agrees with ``inspect`` (after apply_defaults)
and wrong calls fail with Python's own message, prefixed by the kernel's name."""

from __future__ import annotations

import inspect

import pytest

from deuteron.kernel import _make_binder


def f_plain(x, y, eps=1e-5):
    pass


def f_kwonly(x, *, scale=2.0, flag=False):
    pass


def f_posonly(x, y=3, /, z=4):
    pass


def f_var(x, *rest, **kw):
    pass


CALLS = {
    f_plain: [((1, 2), {}), ((1,), {"y": 2}), ((), {"x": 1, "y": 2, "eps": 0.1}), ((1, 2, 3), {})],
    f_kwonly: [((1,), {}), ((1,), {"flag": True}), ((), {"x": 1, "scale": 0.5})],
    f_posonly: [((1,), {}), ((1, 2), {"z": 5}), ((1, 2, 3), {})],
}


@pytest.mark.parametrize("fn", list(CALLS), ids=lambda f: f.__name__)
def test_binder_matches_inspect(fn):
    sig = inspect.signature(fn)
    bind = _make_binder(sig)
    for args, kwargs in CALLS[fn]:
        ref = sig.bind(*args, **kwargs)
        ref.apply_defaults()
        a, k, named = bind(*args, **kwargs)
        assert a == ref.args and k == ref.kwargs and named == dict(ref.arguments)
        assert list(named) == list(sig.parameters)


def test_variadic_signatures_use_inspect():
    assert _make_binder(inspect.signature(f_var)) is None


def test_wrong_calls_keep_pythons_message():
    import deuteron as dt

    @dt.kernel
    def k(x, y, eps: float = 1e-5):
        return x

    with pytest.raises(TypeError, match=r"^k\(\): missing a required argument: 'y'"):
        k(1)
    with pytest.raises(TypeError, match=r"^k\(\): too many positional arguments"):
        k(1, 2, 3, 4)
    with pytest.raises(TypeError, match=r"^k\(\): got an unexpected keyword argument 'z'"):
        k(1, 2, z=3)
