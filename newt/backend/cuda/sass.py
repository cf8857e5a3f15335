"""``newt.backend.cuda.sass``: the module the runtime imports for ``asm["sass"]``.

``sass(cubin)`` and ``find_cuobjdump()`` live in :mod:`.disasm`.  Importing this submodule rebinds
the package attribute ``newt.backend.cuda.sass`` (a function) to the module, so the module is made
callable: ``newt.backend.cuda.sass(cubin)`` works either way.
"""

from __future__ import annotations

import sys
import types

from .disasm import find_cuobjdump, sass

__all__ = ["sass", "find_cuobjdump"]


class _CallableModule(types.ModuleType):
    def __call__(self, cubin: bytes) -> str:
        return sass(cubin)


sys.modules[__name__].__class__ = _CallableModule
