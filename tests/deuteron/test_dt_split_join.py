"""Reshapes that split or merge whole dimensions between tiles, dt.split and dt.join (Helion's rope): the kernel
and kernel.ref against torch."""

from __future__ import annotations

import pytest
import torch
from dt_helpers import write_module

import newt

DEV = "cuda" if torch.cuda.is_available() else "cpu"

ROTATE = """
@dt.kernel
def rotate(x, c, s):
    b, t, d = x.shape
    half = d // 2
    out = torch.empty_like(x)
    for tb, tt in dt.tile([b, t]):
        pair = x[tb, tt, :].to(torch.float32).reshape([tb, tt, 2, half]).permute(0, 1, 3, 2)
        first, second = dt.split(pair)
        cf = c[tb, tt, :half].to(torch.float32)
        sf = s[tb, tt, :half].to(torch.float32)
        out[tb, tt, :] = dt.join(first * cf - second * sf, second * cf + first * sf).permute(
            0, 1, 3, 2).reshape([tb, tt, d]).to(out.dtype)
    return out
"""


def _want(x, c, s):
    half = x.shape[-1] // 2
    a, b = x[..., :half].float(), x[..., half:].float()
    cf, sf = c[..., :half].float(), s[..., :half].float()
    return torch.cat([a * cf - b * sf, b * cf + a * sf], -1).to(x.dtype)


@pytest.mark.parametrize("cfg", [None, dict(block_sizes=[1, 8]), dict(block_sizes=[2, 16], pid_type="xyz")])
def test_rotate_halves_by_reshape_split_join(tmp_path, cfg):
    mod = write_module(tmp_path, f"rot_{0 if cfg is None else cfg['block_sizes'][0]}", ROTATE)
    x, c, s = (torch.randn(3, 37, 64, device=DEV) for _ in range(3))
    got = mod.rotate(x, c, s) if cfg is None else mod.rotate.run_with(cfg, x, c, s)
    torch.testing.assert_close(got, _want(x, c, s), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mod.rotate.ref(x, c, s), _want(x, c, s), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("body, cause", [
    ("out[t, :] = x[t, :].reshape([t, 3, 11]).sum(1).sum(1)[:, None] + x[t, :]", "ReshapeDims"),  # 33 != 30
    ("out[t, :] = x[t, :].reshape([t, 2, 15]).sum(1).sum(1)[:, None] + x[t, :]", "ReshapeDims"),  # 15: not a power of 2
    ("out[t, :] = dt.split(x[t, :])[0] + x[t, :]", "SplitJoin"),  # the last dim has 30 elements
])
def test_reshapes_and_splits_that_do_not_fit_are_d004(tmp_path, body, cause):
    mod = write_module(tmp_path, f"rs_bad_{abs(hash(body))}", f"""
@dt.kernel
def f(x):
    m, n = x.shape
    out = torch.empty_like(x)
    for t in dt.tile(m):
        {body}
    return out
""")
    with pytest.raises(newt.CompilationError) as ei:
        mod.f(torch.randn(8, 30, device=DEV))
    d = ei.value.diagnostics[0]
    assert d.code == "D004" and d.data.get("cause") == cause and d.span.line == 10, d.format()
