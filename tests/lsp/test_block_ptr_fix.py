"""The N080 quick fix: a block-pointer kernel rewritten to tensor descriptors.  The rewritten file has no
N080 and no error, and the rewritten kernel computes what the original does (interpreter)."""

from __future__ import annotations

import importlib.util
import sys

import torch

from lsp_server.analysis import analyze, lsp_diagnostics
from lsp_server.features import code_actions
from lsp_server.positions import LineIndex

SRC = '''import triton
import triton.language as tl


@triton.jit
def scale_rows(x_ptr, y_ptr, M, N, stride_m, alpha, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    x_bp = tl.make_block_ptr(base=x_ptr, shape=(M, N), strides=(stride_m, 1), offsets=(pid * BM, 0),
                             block_shape=(BM, BN), order=(1, 0))
    y_bp = tl.make_block_ptr(y_ptr, (M, N), (stride_m, 1), (pid * BM, 0), (BM, BN), (1, 0))
    for _ in range(0, N, BN):
        x = tl.load(x_bp, boundary_check=(0, 1), padding_option="zero")
        tl.store(y_bp, x * alpha, boundary_check=(0, 1))
        x_bp = tl.advance(x_bp, (0, BN))
        y_bp = tl.advance(y_bp, (0, BN))


@triton.jit
def not_common(x_ptr, M, BM: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (M,), (1,), (0,), (BM,), (0,))
    q = p
    tl.store(q, tl.zeros((BM,), tl.float32), boundary_check=(0,))
'''

URI = "file:///tmp/bp_fix_kernels.py"


def _apply(text, edits):
    idx = LineIndex(text)
    spans = sorted(((idx.offset(e.range.start), idx.offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for s0, s1, new in spans:
        text = text[:s0] + new + text[s1:]
    return text


def _actions_at(a, d):
    ld = next(x for x, y in zip(lsp_diagnostics(a, related=False), a.file.diagnostics) if y is d)
    return [x for x in code_actions(a, ld.range) if "tensor descriptor" in x.title]


def _fix_all(text):
    while True:
        a = analyze(text, URI)
        fixable = [d for d in a.file.diagnostics if d.code == "N080" and _actions_at(a, d)]
        if not fixable:
            return text, a
        act = _actions_at(a, fixable[0])[0]
        text = _apply(text, act.edit.changes[URI])


def _load(text, tmp_path, name):
    # the module runs on newt (a Triton file's imports read as newt's), as the drop-in mode does
    path = tmp_path / f"{name}.py"
    path.write_text(text.replace("import triton.language as tl", "import newt.language as tl")
                    .replace("import triton", "import newt as triton"))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_fix_rewrites_the_common_form(tmp_path):
    a = analyze(SRC, URI)
    n080 = [d for d in a.file.diagnostics if d.code == "N080"]
    assert len(n080) == 3 and all(d.severity.name == "WARNING" for d in n080)
    assert not _actions_at(a, n080[2])  # `q = p`: not the common form, the warning stays without a fix
    fixed, a2 = _fix_all(SRC)
    assert [d.code for d in a2.file.diagnostics if d.severity.name == "ERROR"] == []
    # only not_common's is left (one line further down: y_bp's definition became two lines)
    assert [d.span.line for d in a2.file.diagnostics if d.code == "N080"] == [21]
    assert "x_bp = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[stride_m, 1], block_shape=[BM, BN])" \
        in fixed
    assert "x_bp_off0, x_bp_off1 = pid * BM, 0" in fixed
    assert "x = x_bp.load([x_bp_off0, x_bp_off1])" in fixed
    assert "y_bp.store([y_bp_off0, y_bp_off1], x * alpha)" in fixed
    assert "x_bp_off1 = x_bp_off1 + BN" in fixed and "advance" not in fixed.split("def not_common")[0]

    # the rewritten kernel computes what the block-pointer one does
    from newt.runtime.interpret import launch_jit
    before, after = _load(SRC, tmp_path, "bp_before"), _load(fixed, tmp_path, "bp_after")
    x = torch.randn(37, 70)
    outs = []
    for mod in (before, after):
        y = torch.zeros(37, 70)
        launch_jit(mod.scale_rows, (3,), (x, y, 37, 70, 70, 1.5), {"BM": 16, "BN": 32})
        outs.append(y)
    torch.testing.assert_close(outs[0], x * 1.5)
    torch.testing.assert_close(outs[1], outs[0])


def test_no_fix_for_column_major_order():
    text = SRC.replace("(BM, BN), (1, 0))", "(BM, BN), (0, 1))")
    a = analyze(text, URI)
    d = next(d for d in a.file.diagnostics if d.code == "N080" and d.span.line == 10)
    assert _actions_at(a, d) == []
