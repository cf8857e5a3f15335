"""Helion files as written, checked statically with no false error (issue 25): two forms of Helion's own examples
at ef091f41 that ``newt check`` flagged although Helion runs them.

* A tile as a size in a shape method's argument list -- ``linear/linear_attention_engine.py``'s
  ``ltri[None, :, :].broadcast_to([tile_bhn, C, C])`` -- was D003 "tile used as a value": the checker knew tiles as
  sizes only in ``new_zeros``-like methods and ``reshape`` / ``view``, while tracing takes a tile as a size in
  ``expand`` / ``broadcast_to`` too.  Which methods read tiles as sizes is now the op table's ``tile_args``.
* A name imported from a Helion module deuteron does not provide -- ``distributed/all_gather_matmul.py``'s
  ``from helion.runtime.triton.helpers import triton_wait_signal``, called in the file's ``@triton.jit`` helper --
  was N006 "a deuteron.runtime.triton.helpers.triton_wait_signal object cannot be called inside a kernel": the
  name was read as deuteron's own, which does not exist.  Another project's name the analysis cannot see (Helion's
  is a Triton jit function) is now unknown, and silent, as any other package's is."""

from __future__ import annotations

import textwrap

import pytest

import deuteron.frontend  # noqa: F401  (registers the deuteron kind and the helion -> deuteron module alias)
from newt.frontend import analyze_source

HELION = """
import torch
import helion
import helion.language as hl
import triton
import triton.language as tl
"""


def _diags(body: str):
    fa = analyze_source(HELION + textwrap.dedent(body), "ex.py")
    return [(d.code, d.span.line, d.message) for d in fa.diagnostics if str(d.severity) == "error"]


@pytest.mark.parametrize("form", ["x[tile_b, :].broadcast_to([tile_b, C])", "x[tile_b, :].expand(tile_b, C)",
                                  "x[tile_b, :].reshape([tile_b, C])", "x[tile_b, :].view(tile_b, C)"])
def test_a_tile_as_a_size_in_a_shape_method_is_no_error(form):
    assert _diags(f"""
    @helion.kernel()
    def k(x: torch.Tensor) -> torch.Tensor:
        B, C = x.size()
        out = torch.empty_like(x)
        for tile_b in hl.tile(B):
            out[tile_b, :] = {form} * 2
        return out
    """) == []


def test_a_tile_used_as_a_number_is_still_d003():
    got = _diags("""
    @helion.kernel()
    def k(x: torch.Tensor) -> torch.Tensor:
        B, C = x.size()
        out = torch.empty_like(x)
        for tile_b in hl.tile(B):
            out[tile_b, :] = x[tile_b, :].sum(tile_b, keepdim=True)  # a tile where a method wants a number
        return out
    """)
    assert [(c, m) for c, _, m in got] == [("D003", "tile 'tile_b' used as a value")]


def test_a_helion_helper_deuteron_lacks_is_unknown_not_an_error():
    assert _diags("""
    from helion.runtime.triton.helpers import triton_wait_signal

    @triton.jit
    def wait_at(progress, idx):
        triton_wait_signal(progress + idx, 1, 0, "acquire", "gpu", "ld", False)
    """) == []


def test_a_missing_name_of_newt_itself_is_still_an_error():
    got = _diags("""
    from triton.language.extra.no_such_module import no_such_fn

    @triton.jit
    def k(x):
        no_such_fn(x)
    """)
    assert [c for c, _, _ in got] == ["N006"]
