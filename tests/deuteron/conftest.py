"""deuteron tests: a private cache directory, the examples on sys.path, helpers for exact positions."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "deuteron"


@pytest.fixture(autouse=True, scope="session")
def _deuteron_cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("deuteron-cache")
    old = os.environ.get("DEUTERON_CACHE_DIR")
    os.environ["DEUTERON_CACHE_DIR"] = str(d)
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    yield d
    if old is None:
        os.environ.pop("DEUTERON_CACHE_DIR", None)
    else:
        os.environ["DEUTERON_CACHE_DIR"] = old


@pytest.fixture
def device():
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"
