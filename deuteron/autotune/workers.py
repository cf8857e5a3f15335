"""Worker processes for the autotuner: newt's tuning worker layer (``newt.tune.workers``).

The autotuner compiles candidates through ``newt.tune``'s executor (compile
workers, then one screening-and-timing worker per GPU).  :class:`WorkerPool`
is the same process pool running deuteron's own screening handler
(``deuteron.autotune.worker.screen``: compile and launch a generated kernel
once on saved arguments), kept for tools that screen saved launches.  A
kernel that faults (illegal address) poisons only its worker's CUDA context,
is reported and the worker replaced.
"""

from __future__ import annotations

from pathlib import Path

from newt.tune import ProcessPool, read_frame, write_frame

__all__ = ["WorkerPool", "save_args", "load_args", "read_frame", "write_frame"]


# ---------------------------------------------------------------------------
# arguments for trial launches
# ---------------------------------------------------------------------------


def save_args(path: Path, args: list):
    """Save launch arguments with their exact strides and storage offsets."""
    import torch
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            st = a.untyped_storage()
            raw = torch.empty(0, dtype=torch.uint8).set_(st.cpu() if st.device.type != "cpu" else st)
            out.append(("tensor", raw.clone(), str(a.dtype).replace("torch.", ""), tuple(a.shape), tuple(a.stride()),
                        a.storage_offset()))
        else:
            out.append(("value", a))
    import io

    from ..runtime import atomic_write
    buf = io.BytesIO()
    torch.save(out, buf)
    atomic_write(path, buf.getvalue())


def load_args(path: str, device: str):
    import torch
    items = torch.load(path, weights_only=False)
    out = []
    for it in items:
        if it[0] == "tensor":
            _, raw, dtype, shape, stride, offset = it
            raw = raw.to(device)
            t = torch.empty(0, dtype=getattr(torch, dtype), device=device)
            t.set_(raw.untyped_storage(), offset, shape, stride)
            out.append(t)
        else:
            out.append(it[1])
    return out


# ---------------------------------------------------------------------------
# the pool: newt.tune's worker layer, with deuteron's screening handler
# ---------------------------------------------------------------------------


class WorkerPool(ProcessPool):
    """Screening workers (``deuteron.autotune.worker.screen``): ``n`` processes on ``device``."""

    def __init__(self, n: int, device: str, log_path: Path, timeout: float = 120.0):
        env = {"DEUTERON_WORKER": "1", "DEUTERON_WORKER_DEVICE": device}
        super().__init__(n, log_path, timeout, envs=[env] * max(1, n),
                         handler="deuteron.autotune.worker:screen", name="screen")
        self.device = device
