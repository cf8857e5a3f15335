"""``nl.tuple``: Triton's ``tl.tuple``, a tuple of kernel values.

In a kernel, ``nl.tuple(iterable)`` is the tuple of the iterable's elements (``nl.tuple((1, 2)) == (1, 2)``;
``nl.tuple(t) + (6, 7)``); tuples are compile-time structures whose elements may be run-time values.
Outside a kernel it is a Python tuple.
"""

from __future__ import annotations

import builtins


class tuple(builtins.tuple):  # Triton's name
    """A tuple of kernel values (``nl.tuple(iterable)``)."""

    __newt_tuple__ = True

    def __repr__(self):
        return f"nl.tuple({builtins.tuple(self)!r})"
