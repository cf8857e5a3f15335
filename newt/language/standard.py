"""Ops written in the newt language itself.

These functions are inlined by the front end at each call site, exactly like a
user's ``@newt.jit`` helper, so the interpreter and the CUDA backend see only
primitive IR ops and always agree on them.
"""

from __future__ import annotations

from . import builtins as _b
from .core import constexpr, inline_jit

#: Triton's private helpers that published kernels import (``from triton.language.standard import _log2``)
__triton_private__ = ("_log2", "_is_power_of_two")


def _log2(i):
    """floor(log2(i)) of a compile-time integer (0 for i <= 1): Triton's ``standard._log2``."""
    i = i.value if isinstance(i, constexpr) else i
    n = 0
    while i > 1:
        i >>= 1
        n += 1
    return n


def _is_power_of_two(i):
    """Whether a compile-time integer is a power of two: Triton's ``standard._is_power_of_two``."""
    i = i.value if isinstance(i, constexpr) else i
    return i != 0 and (i & (i - 1)) == 0


@inline_jit
def cdiv(x, div):
    """Ceiling division ``(x + div - 1) // div``."""
    return (x + div - 1) // div


@inline_jit(method=True)
def sigmoid(x):
    """Elementwise logistic function ``1 / (1 + exp(-x))``."""
    return 1 / (1 + _b.exp(-x))


@inline_jit(method=True)
def softmax(x, dim=None, keep_dims: constexpr = False, ieee_rounding: constexpr = False):
    """Softmax of ``x`` along ``dim`` (0 when ``None``), computed stably (the max is subtracted first).

    The result has the shape of ``x``; ``keep_dims`` is accepted for Triton compatibility.
    """
    _dim = 0 if dim is None else dim
    z = x - _b.max(x, _dim, keep_dims=True)
    num = _b.exp(z)
    den = _b.sum(num, _dim, keep_dims=True)
    if ieee_rounding:
        return _b.div_rn(num, den)
    return num / den


@inline_jit
def zeros_like(input):
    """A block of zeros with the shape and dtype of ``input``."""
    return _b.zeros(input.shape, input.dtype)


@inline_jit
def full_like(input, value):
    """A block with the shape and dtype of ``input`` filled with ``value``."""
    return _b.full(input.shape, value, input.dtype)


@inline_jit(method=True)
def ravel(x):
    """Flatten ``x`` to one dimension (row-major)."""
    return _b.reshape(x, x.numel)


@inline_jit(method=True)
def interleave(a, b):
    """Interleave the last dimensions of two blocks: ``[a0, b0, a1, b1, ...]`` (two scalars give ``[a, b]``)."""
    c = _b.join(a, b)
    if len(c.shape) == 1:
        return c
    return _b.reshape(c, c.shape[:-2] + (2 * c.shape[-2],))


@inline_jit
def swizzle2d(i, j, size_i, size_j, size_g):
    """Map a row-major (i, j) grid index to a grouped order that improves L2 reuse (groups of ``size_g`` rows)."""
    ij = i * size_j + j
    size_gj = size_g * size_j
    group_id = ij // size_gj
    off_i = group_id * size_g
    size_g = _b.minimum(size_i - off_i, size_g)
    ij = ij % size_gj
    new_i = off_i + ij % size_g
    new_j = ij // size_g
    return new_i, new_j
