"""The inductor settings the drop-in makes, so that ``torch.compile`` runs its Triton kernels on newt.

=====================================  ========  ==================================================================
``torch._inductor.config``              value     why
=====================================  ========  ==================================================================
``compile_threads``                     ``1``     inductor's parallel compile workers are fresh interpreters
                                                  (``python -m torch._inductor.compile_worker``) that never import
                                                  newt: their ``import triton`` finds the installed Triton (or
                                                  nothing), and they pickle Triton's compiled kernels back.  Under
                                                  the drop-in inductor compiles in its own process, through
                                                  ``triton.compile`` (newt.dropin.compiler).
``use_static_cuda_launcher``            False     the static launcher reads a Triton cubin from Triton's cache
                                                  directory and launches it with Triton's parameter ABI (a global
                                                  and a profile scratch pointer after the kernel's own
                                                  parameters); newt's cubins take the run-time parameters only.
                                                  Inductor launches through the compiled kernel's ``run`` instead.
=====================================  ========  ==================================================================

They are made when ``torch._inductor.config`` is imported while the drop-in is installed (the drop-in's
finder runs :func:`configure` after the module loads), or at ``install()`` when it was imported before;
``uninstall()`` puts the previous values back (:func:`restore`).  ``TORCHINDUCTOR_COMPILE_THREADS`` and
the other environment variables are left alone: setting the config wins over them.
"""

from __future__ import annotations

import sys

__all__ = ["SETTINGS", "configure", "restore", "CONFIG_MODULE"]

CONFIG_MODULE = "torch._inductor.config"

#: what the drop-in sets in ``torch._inductor.config``
SETTINGS: dict[str, object] = {"compile_threads": 1, "use_static_cuda_launcher": False}

_saved: dict[str, object] = {}


def configure(module=None) -> bool:
    """Make :data:`SETTINGS` in ``torch._inductor.config`` (``module``, else the imported one); False when
    inductor's config is not imported (nothing to do yet)."""
    cfg = module if module is not None else sys.modules.get(CONFIG_MODULE)
    if cfg is None:
        return False
    for k, v in SETTINGS.items():
        if k not in _saved:
            _saved[k] = getattr(cfg, k, None)
        setattr(cfg, k, v)
    return True


def restore() -> None:
    """Put back the values :func:`configure` replaced (``uninstall()``)."""
    cfg = sys.modules.get(CONFIG_MODULE)
    if cfg is not None:
        for k, v in _saved.items():
            setattr(cfg, k, v)
    _saved.clear()
