"""The type rules of the ``nl.*`` builtins, one module per family (the families of ``newt/language``).

Importing this package registers every rule in ``newt.frontend.ops.RULES``.
"""

from . import asm, blockptr, creation, debug, dot, elementwise, libdevice, memory, reduce, shape  # noqa: F401
