"""The drop-in mode changes ``sys.meta_path`` and ``sys.modules``: each test that turns it on gets it back off
(and any ``triton``/``helion`` module imported before it put back) through the ``dropin`` fixture."""

from __future__ import annotations

import sys

import pytest

SERVED = ("triton", "helion")


@pytest.fixture
def dropin():
    import newt.dropin as nd
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in SERVED}
    meta = list(sys.meta_path)
    nd.install()
    try:
        yield nd
    finally:
        nd.uninstall()
        for k in [k for k in sys.modules if k.split(".")[0] in SERVED]:
            del sys.modules[k]
        sys.modules.update(saved)
        sys.meta_path[:] = meta
