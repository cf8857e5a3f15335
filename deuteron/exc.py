"""deuteron's error and warning classes in one namespace (``dt.exc``, Helion's ``helion.exc``).

Errors are the per-cause classes of :mod:`deuteron.errors` (each with its D-code); warnings are the classes
``@dt.kernel(ignore_warnings=[...])`` takes, one per warning code.  Torch-free.
"""

from __future__ import annotations

from .errors import *  # noqa: F403  (every per-cause class)
from .errors import Cause, DeuteronError, TraceError  # noqa: F401
from .errors import __all__ as _errors_all

__all__ = list(_errors_all) + ["DeuteronWarning", "TensorOperationInWrapper", "NoEagerOracle", "WARNINGS"]


class DeuteronWarning(UserWarning):
    """A warning deuteron's checker reports (a diagnostic of severity warning); ``code`` is its D-code."""

    code = ""


class TensorOperationInWrapper(DeuteronWarning):
    """D001: tensor work outside any tile loop runs eagerly on the host, not in the kernel."""

    code = "D001"


class NoEagerOracle(DeuteronWarning):
    """D004 as a warning: the kernel decides on where a tile of tunable block size starts or ends (``if
    tile.begin < n``), which ``kernel.ref`` (the loop run as one tile) cannot reproduce; the autotuner and the
    editor's Verify check configs against the default config's output instead (Helion's rule).  Said once per
    kernel and argument signature."""

    code = "D004"


#: class name -> class, for the static checker (which reads ``ignore_warnings=[dt.exc.<Name>]`` as text)
WARNINGS = {c.__name__: c for c in (TensorOperationInWrapper, NoEagerOracle)}
