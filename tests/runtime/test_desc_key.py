"""The specialization key of a host ``TensorDescriptor`` argument: newt's own descriptor class takes a one-pass
path (``specialize._desc_entries``; a launch of tutorial 06's forward passes four a call) which must give
exactly what the generic path gives any descriptor-like object (Triton's, a duck type)."""

from __future__ import annotations

import pytest

from newt.runtime.specialize import key_entries
from newt.tools.tensor_descriptor import TensorDescriptor

torch = pytest.importorskip("torch")


class DuckDescriptor:
    """Anything with ``base``/``shape``/``strides``/``block_shape`` (the generic path)."""

    def __init__(self, d: TensorDescriptor):
        self.base, self.shape, self.strides, self.block_shape = d.base, d.shape, d.strides, d.block_shape
        self.padding = d.padding


CASES = [
    ((64, 32), (32, 1), (16, 16)),          # fp16 rows of 64 bytes
    ((1, 64), (64, 1), (1, 64)),            # a size of 1: a constexpr entry
    ((3, 5, 48), (240, 48, 1), (1, 2, 16)),  # sizes not multiples of 16
    ((1 << 20, 16), (16, 1), (64, 16)),     # a large size
]


@pytest.mark.parametrize("shape,strides,block", CASES)
@pytest.mark.parametrize("dns", [False, True])
def test_newts_descriptor_key_equals_the_generic_path(shape, strides, block, dns):
    n = 1
    for s, st in zip(shape, strides):
        n = max(n, (s - 1) * st + 1)
    base = torch.empty(n + 64, dtype=torch.float16)
    for off in (0, 8):  # 16-byte aligned base, and 16 bytes in (still aligned); then a view 16 bytes in
        t = base[off:]
        d = TensorDescriptor(t, list(shape), list(strides), list(block), padding="nan" if dns else "zero")
        fast = key_entries("k", "desc", d, dns, check_cuda=False)
        generic = key_entries("k", "desc", DuckDescriptor(d), dns, check_cuda=False)
        assert fast == generic
        assert fast[1][0] == "desc" and fast[0][0] == t.data_ptr()


def test_a_size_of_one_is_a_constexpr_entry_unless_do_not_specialize():
    t = torch.empty(64, dtype=torch.float16)
    d = TensorDescriptor(t, [1, 64], [64, 1], [1, 64])
    ps, (kind, es, block, padding), _ = key_entries("k", "d", d, False)
    assert ps[1] == 1 and es[1] == ("c1", None)
    assert es[2] == ("i32", True) and block == (1, 64) and padding == "zero"
    ps, (_, es, _, _), _ = key_entries("k", "d", d, True)
    assert es[1] == ("i32", False)


def test_a_dtype_base_for_warmup_and_a_bad_base_go_the_generic_way():
    d = TensorDescriptor(torch.empty(64, dtype=torch.float16), [4, 16], [16, 1], [4, 16])
    d.base = torch.float16  # warmup's stand-in for a tensor
    assert key_entries("k", "d", d, False) == key_entries("k", "d", DuckDescriptor(d), False)
    d.base = 3.5
    with pytest.raises(TypeError, match="base must be a tensor"):
        key_entries("k", "d", d, False)


def test_only_newts_own_descriptor_takes_the_one_pass_path(monkeypatch):
    from newt.runtime import specialize
    seen = []
    real = specialize._desc_entries
    monkeypatch.setattr(specialize, "_desc_entries", lambda *a: seen.append(a[2]) or real(*a))
    d = TensorDescriptor(torch.empty(64, dtype=torch.float16), [4, 16], [16, 1], [4, 16])
    key_entries("k", "d", d, False)
    key_entries("k", "d", DuckDescriptor(d), False)
    assert seen == [d]
