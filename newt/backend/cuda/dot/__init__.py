"""``nl.dot`` lowerings, one per kind of hardware, behind one interface.

``select_dot_lowering(op, target)`` picks the first lowering in ``LOWERINGS``
that supports the op on the target.  Today: ``MmaSyncLowering`` (sm_80+
tensor cores through mma.sync, operands from swizzled shared memory through
ldmatrix) and ``FmaLowering`` (fp32 "ieee", fp64, batched dots, fp8 on
targets without fp8 MMA), with ``WgmmaLowering`` (Hopper ``wgmma.mma_async``
for fp16/bf16, fp8, tf32 and int8, operands from shared memory through matrix
descriptors; ``transpose.py`` makes an fp8/int8/tf32 operand K-major) in front of
them on sm_90a, chosen by ``NEWT_DOT_LOWERING=wgmma|mma_sync`` (tf32 and int8
only with ``wgmma`` set explicitly until a GPU run has checked them).
"""

from __future__ import annotations

from .base import DotLowering, OperandTile, stage_to_smem  # noqa: F401
from .fma import FmaLowering
from .mma_sync import MmaSyncLowering
from .wgmma import WgmmaLowering

#: tried in order; the first whose ``supports`` says yes lowers the dot
LOWERINGS: list[DotLowering] = [WgmmaLowering(), MmaSyncLowering(), FmaLowering()]


def select_dot_lowering(op, target, num_warps=None) -> DotLowering:
    for low in LOWERINGS:
        if isinstance(low, WgmmaLowering):
            if low.supports(op, target, num_warps):
                return low
        elif low.supports(op, target):
            return low
    raise NotImplementedError(f"no dot lowering for {op}")


__all__ = ["DotLowering", "OperandTile", "MmaSyncLowering", "FmaLowering", "WgmmaLowering", "LOWERINGS",
           "select_dot_lowering"]
