"""deuteron (and Helion) kernels in the editor: the static tile-shape inference's D006 as a diagnostic at the
user's range, value hovers and inlay hints with the tile shape and, where known, the dtype."""

from __future__ import annotations

import pytest
from lsprotocol import types as lsp

from lsp_server.analysis import analyze, lsp_diagnostics
from lsp_server.deuteron_hints import deuteron_inlay_hints, hint_label
from lsp_server.engine import _with_deuteron_hints
from lsp_server.hover import hover

pytest.importorskip("deuteron")

KERNELS = """import torch
import deuteron as dt


@dt.kernel
def add_t(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = x[tm, tn] + y[tn, tm]
    return out


@dt.kernel
def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in dt.tile(m):
        row = x[tile_m, :].to(torch.float32)
        mx = torch.amax(row, dim=1, keepdim=True)
        e = torch.exp(row - mx)
        out[tile_m, :] = (e / e.sum(dim=1, keepdim=True)).to(out.dtype)
    return out


@dt.kernel
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=torch.float16, device=x.device)
    for tile_m, tile_n in dt.tile([m, n]):
        acc = dt.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in dt.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(torch.float16)
    return out
"""

URI = "file:///tmp/dt_hints.py"


def _pos(text: str, needle: str, delta: int = 0) -> lsp.Position:
    i = text.index(needle) + delta
    line = text.count("\n", 0, i)
    return lsp.Position(line, i - (text.rfind("\n", 0, i) + 1))


def test_the_transposed_tiles_are_an_editor_diagnostic_at_the_expression():
    a = analyze(KERNELS, URI)
    ds = [d for d in lsp_diagnostics(a) if d.code == "D006"]
    assert len(ds) == 1, [(d.code, d.message) for d in lsp_diagnostics(a)]
    d = ds[0]
    start = _pos(KERNELS, "x[tm, tn] + y[tn, tm]")
    assert (d.range.start.line, d.range.start.character) == (start.line, start.character)
    assert d.range.end.character == start.character + len("x[tm, tn] + y[tn, tm]")
    assert "shapes [tm, tn] and [tn, tm] do not broadcast together" in d.message
    assert d.severity == lsp.DiagnosticSeverity.Error


def _hints(a, rng=None, shapes=True, dtypes=True):
    out = {}
    for h in deuteron_inlay_hints(a, rng, shapes, dtypes):
        out[(h.position.line, h.position.character)] = h.label
    return out


def _after(text, needle):
    p = _pos(text, needle, len(needle))
    return (p.line, p.character)


def test_inlay_hints_show_tile_shapes_and_known_dtypes():
    a = analyze(KERNELS, URI)
    h = _hints(a)
    assert h[_after(KERNELS, "        row")] == ": fp32[tile_m, :n]"
    assert h[_after(KERNELS, "        mx")] == ": fp32[tile_m, 1]"
    assert h[_after(KERNELS, "        e")] == ": fp32[tile_m, :n]"
    assert h[_after(KERNELS, "        acc")] == ": fp32[tile_m, tile_n]"
    assert h[_after(KERNELS, "            acc")] == ": fp32[tile_m, tile_n]"
    # host code and tile loop variables get none from here
    assert _after(KERNELS, "    out") not in h
    assert all(hh.kind == lsp.InlayHintKind.Type for hh in deuteron_inlay_hints(a))


def test_inlay_hints_follow_the_shape_and_dtype_switches_and_the_range():
    a = analyze(KERNELS, URI)
    assert _hints(a, shapes=False)[_after(KERNELS, "        row")] == ": fp32"
    assert _hints(a, dtypes=False)[_after(KERNELS, "        row")] == ": [tile_m, :n]"
    assert _hints(a, shapes=False, dtypes=False) == {}
    line = _pos(KERNELS, "        acc = dt.zeros").line
    only = _hints(a, lsp.Range(start=lsp.Position(line, 0), end=lsp.Position(line, 80)))
    assert list(only.values()) == [": fp32[tile_m, tile_n]"]
    assert hint_label(None) is None


def test_the_engine_adds_deuteron_hints_to_newt_hints_in_order():
    a = analyze(KERNELS, URI)
    newt_hint = lsp.InlayHint(position=lsp.Position(0, 3), label=": x")
    merged = _with_deuteron_hints([newt_hint], a, None, {"shapes": True, "dtypes": True})
    assert merged[0] is newt_hint and len(merged) == 1 + len(deuteron_inlay_hints(a))
    keys = [(m.position.line, m.position.character) for m in merged]
    assert keys == sorted(keys)


def _hover_text(a, pos):
    h = hover(a, pos, markdown=True)
    return h.contents.value if h else ""


def test_value_hovers_show_the_block_shape_and_dtype():
    a = analyze(KERNELS, URI)
    assert "block fp32[tile_m, :n]" in _hover_text(a, _pos(KERNELS, "        e = torch", 8))
    assert "block [tile_m, tile_k]" in _hover_text(a, _pos(KERNELS, "x[tile_m, tile_k]", 1))
    assert "block fp16[tile_m, tile_n]" in _hover_text(a, _pos(KERNELS, "acc.to(torch.float16)", 5))


def test_a_helion_file_gets_the_same_hints():
    text = KERNELS.replace("import deuteron as dt\n", "import helion\nimport helion.language as hl\n") \
        .replace("@dt.kernel", "@helion.kernel").replace("dt.tile", "hl.tile").replace("dt.zeros", "hl.zeros")
    a = analyze(text, "file:///tmp/hl_hints.py")
    assert _hints(a)[_after(text, "        acc")] == ": fp32[tile_m, tile_n]"
    assert [d.code for d in lsp_diagnostics(a) if d.code == "D006"] == ["D006"]


def test_one_walker_of_assigned_names_serves_newt_and_deuteron_hints():
    """deuteron's inlay hints walk the assigned names with the newt hints' own walker (one definition)."""
    import lsp_server.deuteron_hints as dh
    import lsp_server.features as features
    assert dh._assign_targets is features._assign_targets
    assert not hasattr(dh, "_assigned_names")


LAUNCHED = """import torch
import deuteron as dt

M = 64


@dt.kernel
def mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    k2, n = w.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = x[tm, :] @ w[:, tn]
    return out


def check(n):
    x = torch.randn([M, 64], dtype=torch.float16)
    w = torch.randn(128, n).half()
    return mm(x, w)


if __name__ == "__main__":
    check(32)
"""


def test_the_editor_reports_what_the_files_launch_shapes_reveal():
    """The editor (no workspace code run: the text alone) reports the matmul's inner dimensions the launch gives
    (64 against 128) at the expression, in the tracer's words, and says which launch gave the shapes."""
    a = analyze(LAUNCHED, "file:///tmp/dt_launched.py")
    ds = [d for d in lsp_diagnostics(a) if d.code == "D006"]
    assert len(ds) == 1, [(d.code, d.message) for d in lsp_diagnostics(a)]
    start = _pos(LAUNCHED, "x[tm, :] @ w[:, tn]")
    assert (ds[0].range.start.line, ds[0].range.start.character) == (start.line, start.character)
    assert ds[0].range.end.character == start.character + len("x[tm, :] @ w[:, tn]")
    assert "matmul inner dimensions differ: [tm, :64] @ [:128, tn]" in ds[0].message
    assert ds[0].severity == lsp.DiagnosticSeverity.Error
    # the same file with a launch whose sizes agree: nothing to report
    ok = analyze(LAUNCHED.replace("torch.randn(128, n)", "torch.randn(64, n)"), "file:///tmp/dt_launched.py")
    assert not [d for d in lsp_diagnostics(ok) if d.code in ("D006", "D007")]
