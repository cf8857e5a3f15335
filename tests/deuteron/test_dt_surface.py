"""Helion-style surface (issue 12): callable kernel arguments, branches on host constants, op spellings."""

from __future__ import annotations

import torch
from dt_helpers import raises_at, write_module

import deuteron as dt


@dt.kernel
def matmul_epilogue(x, w, epilogue=lambda acc, tile: acc):
    m, k = x.shape
    _, n = w.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in dt.tile([m, n]):
        acc = dt.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in dt.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, tile_n])
        out[tile_m, tile_n] = epilogue(acc, (tile_m, tile_n)).to(out.dtype)
    return out


def test_default_lambda_epilogue():
    x, w = torch.randn(40, 24), torch.randn(24, 48)
    torch.testing.assert_close(matmul_epilogue(x, w), x @ w, atol=1e-4, rtol=1e-4)


def test_multi_line_lambda_capturing_a_local_tensor():
    x, w, bias = torch.randn(40, 24), torch.randn(24, 48), torch.randn(48)
    got = matmul_epilogue(x, w, lambda acc, tile: torch.relu(
        acc + bias[tile[1]]
    ))
    torch.testing.assert_close(got, torch.relu(x @ w + bias), atol=1e-4, rtol=1e-4)
    # the same lambda code with another captured tensor: read at launch, not baked in
    for _ in range(2):
        bias = torch.randn(48)
        got = matmul_epilogue(x, w, lambda acc, tile: torch.relu(
            acc + bias[tile[1]]  # noqa: B023 (called right away)
        ))
        torch.testing.assert_close(got, torch.relu(x @ w + bias), atol=1e-4, rtol=1e-4)


def test_another_callable_retraces_and_the_oracle_agrees():
    x, w = torch.randn(32, 16), torch.randn(16, 32)
    scale = 3.0
    first = matmul_epilogue(x, w, lambda acc, tile: acc * scale)
    torch.testing.assert_close(first, x @ w * 3, atol=1e-4, rtol=1e-4)
    scale = 5.0  # a captured number is a guard: a new value gets a new program
    second = matmul_epilogue(x, w, lambda acc, tile: acc * scale)
    torch.testing.assert_close(second, x @ w * 5, atol=1e-4, rtol=1e-4)

    def gelu_epilogue(acc, tile):
        y = torch.nn.functional.gelu(acc)
        return y - 1.0
    got = matmul_epilogue(x, w, gelu_epilogue)
    torch.testing.assert_close(got, torch.nn.functional.gelu(x @ w) - 1.0, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(matmul_epilogue.ref(x, w, gelu_epilogue), got, atol=1e-4, rtol=1e-4)


@dt.kernel
def attention_scores(q, k, score_mod):
    m, d = q.shape
    n, _ = k.shape
    out = torch.empty([m, n], dtype=torch.float32, device=q.device)
    for tm, tn in dt.tile([m, n]):
        s = q[tm, :] @ k[tn, :].T
        out[tm, tn] = score_mod(s, tm, tn)
    return out


def test_score_modifier_with_tile_indices():
    q, k = torch.randn(32, 16), torch.randn(48, 16)

    def causal(s, tm, tn):
        return torch.where(tm.index[:, None] >= tn.index[None, :], s, float("-inf"))
    exp = torch.where(torch.arange(32)[:, None] >= torch.arange(48)[None, :], q @ k.T, float("-inf"))
    torch.testing.assert_close(attention_scores(q, k, causal), exp, atol=1e-4, rtol=1e-4)


def test_a_tensor_captured_by_a_module_helper_is_d004(tmp_path):
    mod = write_module(tmp_path, "k_captured", """
    TABLE = torch.arange(16.0)

    def shift(v):
        return v + TABLE[0]

    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = shift(x[t])
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(16)), "D004", "return v + TABLE[0]", "TABLE",
              contains="captured")


@dt.kernel
def cross_entropy(logits, labels, shift_labels=None):
    n, v = logits.shape
    out = torch.empty([n], dtype=torch.float32, device=logits.device)
    for tile_n in dt.tile(n):
        rows = logits[tile_n, :]
        if shift_labels is not None:
            lab = shift_labels[tile_n]
        else:
            lab = labels[tile_n]
        picked = rows.amax(dim=-1)
        out[tile_n] = torch.logsumexp(rows, dim=-1) - picked + lab.to(torch.float32)
    return out


def test_branch_on_a_host_constant_not_taken_is_not_traced():
    logits, labels = torch.randn(20, 30), torch.randint(0, 30, (20,))
    exp = torch.logsumexp(logits, -1) - logits.amax(-1) + labels.float()
    torch.testing.assert_close(cross_entropy(logits, labels), exp, atol=1e-5, rtol=1e-5)
    shifted = torch.randint(0, 30, (20,))
    exp2 = torch.logsumexp(logits, -1) - logits.amax(-1) + shifted.float()
    torch.testing.assert_close(cross_entropy(logits, labels, shifted), exp2, atol=1e-5, rtol=1e-5)


@dt.kernel
def silu_of_sum(x, y):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        out[t] = torch.nn.functional.silu(x[t] + y[t]) + torch.nn.functional.hardtanh(x[t])
    return out


def test_compound_operands_are_parenthesized():
    x, y = torch.randn(64) * 3, torch.randn(64)
    exp = torch.nn.functional.silu(x + y) + torch.nn.functional.hardtanh(x)
    torch.testing.assert_close(silu_of_sum(x, y), exp, atol=1e-5, rtol=1e-5)
    assert "* nl.sigmoid(" in silu_of_sum.to_newt_source(x, y)


def test_arguments_bind_with_the_op_signature(tmp_path):
    mod = write_module(tmp_path, "k_bind", """
    @dt.kernel
    def f(x):
        out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
        for t in dt.tile(x.size(0)):
            out[t] = x[t, :].sum(dim=1, keepdims=True)
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(8, 8)), "D004", "out[t] = x[t, :].sum(", contains="keepdims")


@dt.kernel
def poly(x, coeffs: dt.constexpr, eps: dt.constexpr):
    out = torch.empty_like(x)
    for t in dt.tile(x.size(0)):
        v = x[t]
        acc = torch.zeros_like(v)
        for i in dt.static_range(len(coeffs)):
            acc = acc * v + coeffs[i]
        out[t] = acc + eps
    return out


def test_static_range_unrolls_and_constexpr_bakes_values():
    x = torch.randn(50)
    got = poly(x, (1.0, -2.0, 0.5), 0.25)
    torch.testing.assert_close(got, (1.0 * x - 2.0) * x + 0.5 + 0.25, atol=1e-5, rtol=1e-5)
    src = poly.to_newt_source(x, (1.0, -2.0, 0.5), 0.25)
    assert "eps" not in src.split("def launch")[0].split("):")[0]  # not a run-time parameter of the kernel
    assert "0.25" in src
    torch.testing.assert_close(poly(x, (3.0,), 1.0), torch.full_like(x, 4.0))


@dt.kernel
def layer_norm_grad_like(x, w):
    m, n = x.shape
    dw = w.new_zeros([m, n])
    for tm in dt.tile(m):
        row = x[tm, :]
        part = w.new_zeros([tm, n]) + row * w[None, :]
        dw[tm, :] = part
    return dw


def test_host_tensor_new_zeros_inside_a_tile_loop():
    x, w = torch.randn(20, 30), torch.randn(30)
    torch.testing.assert_close(layer_norm_grad_like(x, w), x * w, atol=1e-6, rtol=1e-6)


def test_static_checker_is_clean_on_this_file():
    from pathlib import Path

    from newt.frontend import analyze_source
    fa = analyze_source(Path(__file__).read_text(), __file__)
    assert [d.format() for d in fa.diagnostics] == []


@dt.kernel
def skip_blocks(x, nonzero_from: int, flip: int):
    m, n = x.shape
    out = torch.zeros([m], dtype=torch.float32, device=x.device)
    for tm in dt.tile(m):
        acc = dt.zeros([tm], dtype=torch.float32)
        for tn in dt.tile(n, block_size=16):
            if tn.end <= nonzero_from:
                continue  # a block sparse layout: nothing to add here
            acc = acc + x[tm, tn].sum(-1)
        if flip > 0:
            out[tm] = -acc
            continue
        out[tm] = acc
    return out


def test_continue_in_tile_loops():
    x = torch.randn(100, 90)
    x[:, :32] = 0
    exp = x.sum(-1)
    for flip, sign in ((0, 1), (1, -1)):
        got = skip_blocks.run_with(dict(block_sizes=[16]), x, 32, flip)
        torch.testing.assert_close(got, sign * exp, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(skip_blocks.ref(x, 32, flip), sign * exp, atol=1e-4, rtol=1e-4)
