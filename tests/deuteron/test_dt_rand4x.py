"""dt.rand4x (Helion's hl.rand4x): four uniform blocks from one Philox round per offset; the kernel (newt's
nl.rand4x) and kernel.ref (the op entry's eager Philox) draw the same numbers."""

from __future__ import annotations

import pytest
import torch
from dt_helpers import check, raises_at, write_module

import deuteron as dt
import newt
import newt.language as nl

DEV = "cuda" if torch.cuda.is_available() else "cpu"


@newt.jit(interpret=True)
def _newt_rand4x(o0, o1, o2, o3, seed, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    a, b, c, d = nl.rand4x(seed, offs.to(nl.int64) * 3 - 5)
    nl.store(o0 + offs, a, mask=m)
    nl.store(o1 + offs, b, mask=m)
    nl.store(o2 + offs, c, mask=m)
    nl.store(o3 + offs, d, mask=m)


def test_the_eager_reference_gives_newts_numbers():
    from deuteron.language import _CONTEXT
    from deuteron.ops.random import rand4x
    n = 700
    outs = [torch.empty(n) for _ in range(4)]
    for seed in (0, 99, 2**40 + 3):
        _newt_rand4x[(3,)](*outs, seed, n, BLOCK=256)
        token = _CONTEXT.set(object())  # kernel.ref's context (the stub runs only there)
        try:
            want = rand4x(seed, torch.arange(n, dtype=torch.int64) * 3 - 5)
        finally:
            _CONTEXT.reset(token)
        for got, w in zip(outs, want):
            assert torch.equal(got, w)


@dt.kernel
def dropout3(x: torch.Tensor, seed: int) -> torch.Tensor:
    out = torch.empty_like(x)
    (n,) = x.shape
    for tile in dt.tile(n):
        r0, r1, r2, _ = dt.rand4x(seed, tile.index.to(torch.int64))
        keep = (r0 > 0.1) & (r1 > 0.2) & (r2 > 0.3)
        out[tile] = x[tile] * keep.to(x.dtype)
    return out


@dt.kernel
def four(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([4, m, n], dtype=torch.float32, device=x.device)
    for tm, tn in dt.tile([m, n]):
        offs = tm.index[:, None] * n + tn.index[None, :]  # int32 offsets
        a, b, c, d = dt.rand4x(11, offs)
        out[0, tm, tn] = a
        out[1, tm, tn] = b
        out[2, tm, tn] = c
        out[3, tm, tn] = d + x[tm, tn]
    return out


@pytest.mark.parametrize("cfg", [None, dict(block_sizes=[64])])
def test_kernel_and_ref_agree(cfg):
    x = torch.randn(300, device=DEV)
    got = dropout3(x, 5) if cfg is None else dropout3.run_with(cfg, x, 5)
    assert torch.equal(got, dropout3.ref(x, 5))
    kept = float((got != 0).float().mean())
    assert abs(kept - 0.9 * 0.8 * 0.7) < 0.1
    assert not torch.equal(got, dropout3(x, 6))


def test_int32_offsets_and_the_four_are_independent():
    x = torch.zeros(20, 24, device=DEV)
    got = four.run_with(dict(block_sizes=[8, 16]), x)
    assert torch.equal(got, four.ref(x))
    flat = got.reshape(4, -1)
    assert all(0.0 <= float(v.min()) and float(v.max()) < 1.0 for v in flat)
    assert float(torch.corrcoef(flat).abs().triu(1).max()) < 0.2
    src = four.to_newt_source(x)
    assert "nl.rand4x(11, " in src


def test_bad_offsets_are_reported_at_the_call(tmp_path):
    mod = write_module(tmp_path, "r4x_bad", """
        @dt.kernel
        def k(x):
            out = torch.empty_like(x)
            for t in dt.tile(x.size(0)):
                r0, r1, r2, r3 = dt.rand4x(3, x[t])
                out[t] = r0
            return out
        """)
    e = raises_at(mod, lambda: mod.k(torch.zeros(16)), "D004", "dt.rand4x(3, x[t])", "dt.rand4x")
    assert "int32 or int64 block" in e.diagnostics[0].message


def test_the_editor_knows_it():
    from lsp_server import language
    assert dt.rand4x.__name__ == "rand4x"
    m = language.lookup("deuteron.rand4x")
    assert m is not None and m.signature.startswith("rand4x(seed, offsets")
    fa, marks, _ = check("""
        @dt.kernel
        def k(x):
            out = torch.empty_like(x)
            for t in dt.tile(x.size(0)):
                r = «dt.rand4x(1)
                out[t] = r[0]
            return out
        """)
    found = [(d.span.line, d.span.col) for d in fa.diagnostics if d.code == "D004"]
    assert found == marks, [d.message for d in fa.diagnostics]
