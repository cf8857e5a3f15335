"""``newt.language.extra``: functions outside Triton's core language, laid out as Triton's
``triton.language.extra`` (``extra.libdevice``, ``extra.cuda.libdevice``)."""

from . import cuda, libdevice

__all__ = ["cuda", "libdevice"]
