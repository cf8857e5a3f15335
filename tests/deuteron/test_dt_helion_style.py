"""Kernels written the way Helion's examples are: they must check statically clean and run right."""

from __future__ import annotations

from pathlib import Path

import torch

import deuteron as dt

DEV = "cuda" if torch.cuda.is_available() else "cpu"


@dt.kernel
def sum_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in dt.tile(m):
        out[tile_m] = x[tile_m, :].sum(-1)
    return out


@dt.kernel
def embedding(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x_flat = x.reshape(-1)
    _, embedding_dim = weight.size()
    out = torch.empty([x_flat.size(0), embedding_dim], dtype=weight.dtype, device=weight.device)
    for tile_b, tile_e in dt.tile([x_flat.size(0), embedding_dim]):
        out[tile_b, tile_e] = weight[x_flat[tile_b], tile_e]
    return out.view(*x.size(), embedding_dim)


@dt.kernel
def softmax_two_pass(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    block_size_m = dt.register_block_size(m)
    block_size_n = dt.register_block_size(n)
    for tile_m in dt.tile(m, block_size=block_size_m):
        mi = dt.full([tile_m], float("-inf"), dtype=torch.float32)
        di = dt.zeros([tile_m], dtype=torch.float32)
        for tile_n in dt.tile(n, block_size=block_size_n):
            values = x[tile_m, tile_n]
            local_amax = torch.amax(values, dim=1)
            mi_next = torch.maximum(mi, local_amax)
            di = di * torch.exp(mi - mi_next) + torch.exp(values - mi_next[:, None]).sum(dim=1)
            mi = mi_next
        for tile_n in dt.tile(n, block_size=block_size_n):
            values = x[tile_m, tile_n]
            out[tile_m, tile_n] = torch.exp(values - mi[:, None]) / di[:, None]
    return out


@dt.kernel
def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    n, v = logits.shape
    losses = torch.zeros([n], dtype=logits.dtype, device=logits.device)
    logits_flat = logits.view(-1)
    for tile_n in dt.tile(n):
        labels_tile = labels[tile_n]
        flat_indices = tile_n.index * v + labels_tile
        logits_at_target = logits_flat[flat_indices]
        logits_rows = logits[tile_n, :]
        max_logits = torch.amax(logits_rows, dim=-1, keepdim=True)
        sum_exp = torch.sum(torch.exp(logits_rows - max_logits), dim=-1, keepdim=True)
        log_sum_exp = max_logits.squeeze(-1) + torch.log(sum_exp.squeeze(-1))
        losses[tile_n] = log_sum_exp - logits_at_target
    return losses


@dt.kernel
def fp8_like_scale(x: torch.Tensor, scale: float) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.float16, device=x.device)
    for tile in dt.tile(x.size()):
        out[tile] = (x[tile].to(torch.float32) * scale).clamp(-448.0, 448.0).to(torch.float16)
    return out


def test_static_checker_is_clean_on_this_file():
    from newt.frontend import analyze_source
    fa = analyze_source(Path(__file__).read_text(), __file__)
    assert [d.format() for d in fa.diagnostics] == []
    assert sum(k.kind == "deuteron" for k in fa.kernels) == 5


def test_sum_rows():
    x = torch.randn(100, 300, device=DEV)
    torch.testing.assert_close(sum_rows(x), x.sum(-1), atol=1e-4, rtol=1e-4)


def test_embedding_gather():
    w = torch.randn(50, 70, device=DEV)
    idx = torch.randint(0, 50, (3, 9), device=DEV)
    torch.testing.assert_close(embedding(idx, w), torch.nn.functional.embedding(idx, w))


def test_online_softmax_with_registered_block_sizes():
    x = torch.randn(70, 333, device=DEV)
    torch.testing.assert_close(softmax_two_pass(x), torch.softmax(x, -1), atol=1e-5, rtol=1e-5)
    got = softmax_two_pass.run_with(dict(block_sizes=[16, 64]), x)
    torch.testing.assert_close(got, torch.softmax(x, -1), atol=1e-5, rtol=1e-5)


def test_cross_entropy_gather_from_a_flat_view():
    logits = torch.randn(37, 100, device=DEV)
    labels = torch.randint(0, 100, (37,), device=DEV)
    exp = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    torch.testing.assert_close(cross_entropy(logits, labels), exp, atol=1e-5, rtol=1e-5)


def test_scale_and_clamp():
    x = torch.randn(64, 48, device=DEV) * 300
    torch.testing.assert_close(fp8_like_scale(x, 2.0), (x * 2).clamp(-448, 448).half())
