"""``torch``, imported on first use: the op entries (``deuteron/ops/``) and the helpers they share are read by
the editor's static checker, which must never import torch; their code touches ``torch.*`` only when it runs."""

from __future__ import annotations

__all__ = ["torch"]


class _LazyTorch:
    """Stands for the ``torch`` module; the first attribute read imports it (each attribute is then cached)."""

    def __getattr__(self, name):
        import torch as _t
        v = getattr(_t, name)
        if not name.startswith("__"):
            setattr(self, name, v)
        return v

    def __repr__(self):
        return "<torch, imported on first use>"


torch = _LazyTorch()
