"""The oracle never disagrees with PyTorch: what eager PyTorch would decide or reject differently is an error
at the user's line before anything runs (issue 12)."""

from __future__ import annotations

import torch
from dt_helpers import raises_at, write_module


def test_if_on_a_reduced_tile_is_d004(tmp_path):
    mod = write_module(tmp_path, "k_if_sum", """
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            if x[t].sum() > 0:
                out[t] = x[t]
            else:
                out[t] = -x[t]
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(4096)), "D004", "if x[t].sum() > 0:", "x[t].sum() > 0",
              contains="once per tile")


def test_float_of_a_tile_max_is_d004(tmp_path):
    mod = write_module(tmp_path, "k_float_max", """
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            m = float(x[t].max())
            out[t] = x[t] - m
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(4096)), "D004", "m = float(x[t].max())", "float(",
              contains="once per tile")


def test_conditional_expression_on_a_reduced_tile_is_d004(tmp_path):
    mod = write_module(tmp_path, "k_ifexp", """
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = x[t] if x[t].amax() > 1.0 else x[t] * 2
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(256)), "D004", "out[t] = x[t] if", "x[t].amax() > 1.0")


def test_if_on_a_scalar_parameter_is_still_a_kernel_branch(tmp_path):
    mod = write_module(tmp_path, "k_if_param", """
    @dt.kernel
    def f(x, s: float):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            if s > 0:
                out[t] = x[t] * s
            else:
                out[t] = x[t]
        return out
    """)
    x = torch.randn(100)
    torch.testing.assert_close(mod.f(x, 2.0), x * 2)
    torch.testing.assert_close(mod.f(x, -1.0), x)


def test_if_on_a_grid_element_is_allowed(tmp_path):
    """With dt.grid a load is one element in the kernel and in PyTorch: both decide on the same value."""
    mod = write_module(tmp_path, "k_if_grid", """
    @dt.kernel
    def f(x, y):
        out = torch.empty_like(y)
        for i in dt.grid(x.size(0)):
            if x[i] > 0:
                out[i, :] = y[i, :]
            else:
                out[i, :] = -y[i, :]
        return out
    """)
    x, y = torch.randn(16), torch.randn(16, 32)
    torch.testing.assert_close(mod.f(x, y), torch.where(x[:, None] > 0, y, -y))


def test_shorter_operand_is_a_shape_error_at_the_users_line(tmp_path):
    mod = write_module(tmp_path, "k_short", """
    @dt.kernel
    def f(x, y):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = x[t] + y[t]
        return out
    """)
    raises_at(mod, lambda: mod.f(torch.randn(100), torch.randn(60)), "D006", "out[t] = x[t] + y[t]", "y[t]",
              contains="size 60")
    # the eager PyTorch version rejects it too
    try:
        mod.f.ref(torch.randn(100), torch.randn(60))
    except RuntimeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("torch accepted a 100 + 60 broadcast")


def test_longer_operand_is_fine(tmp_path):
    mod = write_module(tmp_path, "k_long", """
    @dt.kernel
    def f(x, y):
        out = torch.empty_like(x)
        for t in dt.tile(x.size(0)):
            out[t] = x[t] + y[t]
        return out
    """)
    x, y = torch.randn(60), torch.randn(100)
    torch.testing.assert_close(mod.f(x, y), x + y[:60])


def test_mixed_dtype_matmul_is_rejected_like_torch(tmp_path):
    mod = write_module(tmp_path, "k_mixed_mm", """
    @dt.kernel
    def f(x, w):
        m, k = x.shape
        _, n = w.shape
        out = torch.empty([m, n], dtype=torch.float32, device=x.device)
        for tm, tn in dt.tile([m, n]):
            acc = dt.zeros([tm, tn], dtype=torch.float32)
            for tk in dt.tile(k):
                acc = acc + x[tm, tk] @ w[tk, tn]
            out[tm, tn] = acc
        return out
    """)
    x, w = torch.randn(32, 32).half(), torch.randn(32, 32)
    err = raises_at(mod, lambda: mod.f(x, w), "D007", "acc = acc + x[tm, tk] @ w[tk, tn]", "x[tm, tk] @",
                    contains="torch.float16 and torch.float32")
    data = err.diagnostics[0].data  # one class per cause, its fields as structured data
    assert data["cause"] == "MatmulDtypes" and data["a"] == torch.float16 and data["b"] == torch.float32
    try:
        mod.f.ref(x, w)
    except RuntimeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("the oracle accepted fp16 @ fp32")


def test_dot_accepts_mixed_inputs(tmp_path):
    mod = write_module(tmp_path, "k_mixed_dot", """
    @dt.kernel
    def f(x, w):
        m, k = x.shape
        _, n = w.shape
        out = torch.empty([m, n], dtype=torch.float32, device=x.device)
        for tm, tn in dt.tile([m, n]):
            acc = dt.zeros([tm, tn], dtype=torch.float32)
            for tk in dt.tile(k):
                acc = dt.dot(x[tm, tk], w[tk, tn].to(torch.float16), acc=acc)
            out[tm, tn] = acc
        return out
    """)
    x, w = torch.randn(32, 32).half(), torch.randn(32, 32)
    torch.testing.assert_close(mod.f(x, w), x.float() @ w.half().float(), atol=1e-2, rtol=1e-2)
