"""Targets are data: one ``Target`` per supported GPU architecture.

Everything up to the cubin works from this table alone (no GPU needed).  The
runtime reads ``max_shared`` / ``shared_opt_in`` to decide whether a kernel
needs ``cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)`` before launch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Target", "TARGETS", "get_target", "DEFAULT_SHARED_LIMIT"]

#: dynamic shared memory a kernel may use without opting in
DEFAULT_SHARED_LIMIT = 48 * 1024


@dataclass(frozen=True)
class Target:
    name: str                 # "sm_90a": what NVRTC's --gpu-architecture takes
    capability: tuple         # (9, 0)
    max_shared: int           # bytes of dynamic shared memory one block may opt in to
    shared_per_sm: int        # bytes of shared memory per multiprocessor
    registers_per_thread: int = 255
    max_threads: int = 1024
    mma_sync: bool = True     # mma.sync m16n8k16 / ldmatrix / cp.async (sm_80+)
    wgmma: bool = False       # Hopper warpgroup MMA (sm_90a only)
    tma: bool = False         # cp.async.bulk.tensor
    fp8_mma: bool = False     # mma.sync with e4m3/e5m2 operands (sm_89+)
    fp8_cvt: bool = False     # cvt to/from e4m3x2 / e5m2x2 in hardware
    bf16_atomic_add: bool = False  # atom.add.noftz.bf16 (sm_90+)
    features: frozenset = field(default_factory=frozenset)

    @property
    def sm(self) -> int:
        return self.capability[0] * 10 + self.capability[1]

    @property
    def shared_opt_in(self) -> int:
        """Bytes above which the kernel needs cuFuncSetAttribute before launch."""
        return DEFAULT_SHARED_LIMIT

    def describe(self) -> str:
        feats = [n for n in ("mma_sync", "wgmma", "tma", "fp8_mma") if getattr(self, n)]
        return (f"{self.name} (compute {self.capability[0]}.{self.capability[1]}, "
                f"{self.max_shared // 1024} KB shared/block, {', '.join(feats)})")


TARGETS: dict[str, Target] = {
    "sm_80": Target("sm_80", (8, 0), max_shared=163 * 1024, shared_per_sm=164 * 1024,
                    features=frozenset({"cp.async", "ldmatrix", "mma.sync"})),
    "sm_89": Target("sm_89", (8, 9), max_shared=99 * 1024, shared_per_sm=100 * 1024, fp8_mma=True, fp8_cvt=True,
                    features=frozenset({"cp.async", "ldmatrix", "mma.sync", "fp8"})),
    "sm_90a": Target("sm_90a", (9, 0), max_shared=227 * 1024, shared_per_sm=228 * 1024, wgmma=True, tma=True,
                     fp8_mma=True, fp8_cvt=True, bf16_atomic_add=True,
                     features=frozenset({"cp.async", "ldmatrix", "mma.sync", "fp8", "wgmma", "tma", "mbarrier",
                                         "stmatrix"})),
    "sm_120": Target("sm_120", (12, 0), max_shared=99 * 1024, shared_per_sm=100 * 1024, fp8_mma=True, fp8_cvt=True,
                     bf16_atomic_add=True, features=frozenset({"cp.async", "ldmatrix", "mma.sync", "fp8", "tma"})),
}
TARGETS["sm_90"] = TARGETS["sm_90a"]


def pick_target(major: int, minor: int) -> str | None:
    """The best target for a device of compute capability ``major.minor``: its arch-specific target
    (``sm_90a``), else its own, else the newest one of the same major with a lower minor (a cubin runs on
    later minors of its major; arch-specific ``a`` targets run on their own device only).  None when no
    target's cubins run there."""
    for t in (f"sm_{major}{minor}a", f"sm_{major}{minor}"):
        if t in TARGETS:
            return t
    best = None
    for t in TARGETS:
        digits = t[3:].rstrip("a")
        if t.endswith("a") or not digits.isdigit():
            continue
        tmaj, tmin = int(digits[:-1]), int(digits[-1])
        if tmaj == major and tmin <= minor and (best is None or tmin > best[0]):
            best = (tmin, t)
    return best[1] if best is not None else None


def get_target(target) -> Target:
    """``"sm_90a"``, ``"sm90a"``, ``90``, ``(9, 0)`` or a ``Target`` -> ``Target``."""
    if isinstance(target, Target):
        return target
    if isinstance(target, tuple):
        target = f"sm_{target[0]}{target[1]}"
    if isinstance(target, int):
        target = f"sm_{target}"
    name = str(target).strip().lower()
    if not name.startswith("sm_"):
        name = "sm_" + name.removeprefix("sm")
    if name in TARGETS:
        return TARGETS[name]
    raise ValueError(f"unknown CUDA target {target!r}; known targets: "
                     + ", ".join(k for k in TARGETS if k != "sm_90"))
