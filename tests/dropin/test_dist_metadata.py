"""``importlib.metadata`` in drop-in mode: libraries gate code on the installed Triton's distribution version
(ml-cross-entropy: ``packaging.version.parse(importlib.metadata.version("triton")) >= "3.2.0"``), which on a
CPU-only machine without Triton raised ``PackageNotFoundError`` before any kernel ran."""

from __future__ import annotations

import importlib.metadata

import pytest


def test_the_served_package_has_a_distribution_version(dropin):
    assert importlib.metadata.version("triton") == dropin.TRITON_API_VERSION
    assert importlib.metadata.distribution("triton").metadata["Name"] == "triton"


def test_other_distributions_are_not_answered_by_the_drop_in(dropin):
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("surely-not-an-installed-package-x")
    import torch
    assert importlib.metadata.version("torch").split("+")[0] == torch.__version__.split("+")[0]


def test_leaving_the_drop_in_forgets_the_version(dropin):
    dropin.uninstall()
    try:
        v = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        v = None
    assert v != dropin.TRITON_API_VERSION or _real_triton_is(v)


def _real_triton_is(v) -> bool:
    """An installed Triton of that very version would answer the same (not the drop-in)."""
    return any(d.metadata["Name"] == "triton" and d.version == v for d in importlib.metadata.distributions()
               if d.__class__.__name__ != "_ServedDistribution")
