"""``newt.language.extra.cuda``: NVIDIA-specific functions (Triton's ``triton.language.extra.cuda``)."""

from . import libdevice  # noqa: F401

__all__ = ["libdevice"]
