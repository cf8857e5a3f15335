"""The editor e2e (code-server, Chromium, Neovim; minutes, installs tooling) is not part of the fast suite:
``python -m pytest`` skips it; ``python -m pytest -m e2e`` (or ``bash .ci/e2e.sh``) runs it. It is skipped,
not deselected, so that a run of this folder alone never ends with pytest's exit code 5."""

from __future__ import annotations

import os

import pytest


def _asked_for(config) -> bool:
    markexpr = getattr(config.option, "markexpr", "") or ""
    return "e2e" in markexpr and "not e2e" not in markexpr or os.environ.get("NEWT_E2E") == "1"


def pytest_collection_modifyitems(config, items):
    if _asked_for(config):
        return
    skip = pytest.mark.skip(reason="the editor e2e runs with `python -m pytest -m e2e` or `bash .ci/e2e.sh`")
    for item in items:
        if item.get_closest_marker("e2e") is not None:  # the marker, not the folder's name (also a keyword)
            item.add_marker(skip)
