"""``newt.language.extra.libdevice``: the libdevice functions under the backend-neutral name Triton uses
(``from triton.language.extra.libdevice import tanh``).  newt has one GPU backend, so these are
``newt.language.extra.cuda.libdevice``'s functions."""

from .cuda.libdevice import *  # noqa: F403
from .cuda.libdevice import __all__  # noqa: F401
