"""What the builder knows about the function being read: specialization, frames, loop contexts."""

from __future__ import annotations

from dataclasses import dataclass, field

from newt.diagnostics import Span

from .values import AV, JitSource

FLAG_RET, FLAG_BRK, FLAG_CNT, RETVAL, LOOPIV = "$ret", "$brk", "$cnt", "$rv", "$iv"

#: codes that do not depend on the specialization (kept inside speculative branches)
STRUCTURAL_CODES = {"N001", "N002", "N003", "N004", "N005", "N006", "N044", "N045"}

MAX_INLINE_DEPTH = 32
MAX_UNROLL = 4096


@dataclass
class Spec:
    """What is known about one specialization of a kernel."""

    label: str = "generic"
    constexprs: dict = field(default_factory=dict)  # name -> python value
    arg_types: dict = field(default_factory=dict)  # name -> dtype (pointer_type / scalar)
    pointer_params: set = field(default_factory=set)  # generic: params inferred to be pointers
    divisibility: dict = field(default_factory=dict)  # name -> 16 (alignment hints)
    num_warps: int | None = None
    num_stages: int | None = None
    origins: dict = field(default_factory=dict)  # constexpr name -> Span of where its value came from
    context: str | None = None  # shown with diagnostics of this specialization
    launched: bool = False  # known to be launched (returning a value is an error)
    concrete: bool = False  # every parameter type and constexpr is known (compile path)


@dataclass
class LoopCtx:
    has_break: bool


class Frame:
    def __init__(self, fn: JitSource, call_span: Span | None, is_kernel: bool):
        self.fn = fn
        self.call_span = call_span
        self.is_kernel = is_kernel
        self.scope: dict[str, AV] = {}
        self.loops: list[LoopCtx] = []
