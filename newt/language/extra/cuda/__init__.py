"""``newt.language.extra.cuda``: NVIDIA-specific functions (Triton's ``triton.language.extra.cuda``)."""

from . import libdevice

__all__ = ["libdevice"]
