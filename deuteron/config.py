"""``dt.Config``: one point of a deuteron kernel's configuration space.

A config says how the tile program is mapped onto the GPU; it never changes
what the kernel computes (the autotuner checks every config against the eager
oracle before timing it).  Torch-free: the language server and the static
checker read configs too.

Fields (all optional; missing ones take the kernel's defaults):

``block_sizes``      one power of two per tunable block dimension, in source order: every
                     ``dt.tile`` dimension without a fixed ``block_size=`` and every
                     ``dt.register_block_size`` call.
``loop_orders``      one permutation per multi-dimensional grid loop (``dt.tile([m, n])`` at the
                     top level): ``[1, 0]`` makes dimension 1 the fastest-varying program id.
``l2_groupings``     one int per multi-dimensional grid loop: groups of that many rows are
                     scheduled together (better L2 reuse for matmul-like kernels); 1 = off.
``reduction_loops``  one entry per whole-dimension (``:``) reduction axis, in order of appearance:
                     ``None`` = persistent (the whole axis in one block), an int = a looped
                     reduction over chunks of that many elements.
``num_warps``        warps per program (1..32, a power of two).
``num_stages``       software-pipelining depth of loads in inner loops.
``pid_type``         ``"flat"`` (one program id axis, decomposed), ``"xyz"`` (one launch axis per
                     grid dimension), ``"persistent"`` = ``"persistent_interleaved"`` (one program per SM,
                     program p taking tiles p, p + P, ...) or ``"persistent_blocked"`` (program p taking
                     one contiguous run of tiles).
``range_unroll_factors``, ``range_num_stages``, ``range_multi_buffers``, ``range_warp_specializes``,
``range_flattens``   one entry per tile loop inside the kernel, in source order: newt's ``nl.range``
                     ``loop_unroll_factor`` / ``num_stages`` / ``not disallow_acc_multi_buffer`` /
                     ``warp_specialize`` / ``flatten`` (0, None or False: newt's default).
``indexing``         ``"pointer"``, ``"block_ptr"`` or ``"tensor_descriptor"`` (one value or one per
                     load/store, in source order): ``"tensor_descriptor"`` makes tensor descriptors for the
                     tile accesses where one is exact (``deuteron/codegen_desc.py``: TMA copies on sm_90a),
                     the others -- and ``"pointer"`` / ``"block_ptr"`` -- use pointer arithmetic (the
                     generated kernel says which in a comment).
``atomic_indexing``  the same choices for the atomics (Helion's field; pointer arithmetic here too).
``maxnreg``          registers per thread, 1-255 (newt's ``maxnreg`` launch option: ``__maxnreg__`` in the
                     CUDA); None or 0: the compiler's choice.
anything else        the value of a ``dt.register_tunable(name, ...)``.
"""

from __future__ import annotations

import json

__all__ = ["Config", "ConfigError", "PID_TYPES"]

PID_TYPES = ("flat", "xyz", "persistent", "persistent_interleaved", "persistent_blocked")
INDEXINGS = ("pointer", "block_ptr", "tensor_descriptor")

#: per-loop fields (one entry per tile loop inside the kernel) and the kind of their entries
RANGE_FIELDS = {"range_unroll_factors": int, "range_num_stages": int, "range_multi_buffers": bool,
                "range_warp_specializes": bool, "range_flattens": bool}

_FIELDS = ("block_sizes", "loop_orders", "l2_groupings", "reduction_loops", "num_warps", "num_stages", "pid_type",
           "indexing", "atomic_indexing", "maxnreg") + tuple(RANGE_FIELDS)


class ConfigError(ValueError):
    """A config that does not fit a kernel (the D005 diagnostic at run time)."""


def _indexing(value, name: str):
    """``indexing`` / ``atomic_indexing``: one of INDEXINGS, or a list of them (one per memory op)."""
    if value is None:
        return None
    for v in ([value] if isinstance(value, str) else _as_list(value)):
        if v not in INDEXINGS:
            raise ConfigError(f"{name} must be one of {', '.join(map(repr, INDEXINGS))}, not {v!r}")
    return list(value) if isinstance(value, (list, tuple)) else value


def _is_pow2(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and (v & (v - 1)) == 0


class Config:
    """A deuteron kernel configuration.  ``str(config)`` is a line to paste into ``@dt.kernel(config=...)``."""

    __slots__ = _FIELDS + ("tunables", "_key")

    def __init__(self, block_sizes=None, loop_orders=None, l2_groupings=None, reduction_loops=None,
                 num_warps=None, num_stages=None, pid_type=None, indexing=None, range_unroll_factors=None,
                 range_num_stages=None, range_multi_buffers=None, range_warp_specializes=None, range_flattens=None,
                 atomic_indexing=None, maxnreg=None, **tunables):
        self.block_sizes = None if block_sizes is None else [_as_int(b, "block_sizes") for b in _as_list(block_sizes)]
        self.loop_orders = None if loop_orders is None else [[_as_int(i, "loop_orders") for i in o]
                                                             for o in _as_list(loop_orders)]
        self.l2_groupings = None if l2_groupings is None else [_as_int(g, "l2_groupings")
                                                               for g in _as_list(l2_groupings)]
        self.reduction_loops = None if reduction_loops is None else [
            None if r is None else _as_int(r, "reduction_loops") for r in _as_list(reduction_loops)]
        self.num_warps = None if num_warps is None else _as_int(num_warps, "num_warps")
        self.num_stages = None if num_stages is None else _as_int(num_stages, "num_stages")
        if pid_type is not None and pid_type not in PID_TYPES:
            raise ConfigError(f"pid_type must be one of {', '.join(map(repr, PID_TYPES))}, not {pid_type!r}")
        self.pid_type = pid_type
        self.indexing = _indexing(indexing, "indexing")
        self.atomic_indexing = _indexing(atomic_indexing, "atomic_indexing")
        self.maxnreg = None if maxnreg in (None, 0) else _as_int(maxnreg, "maxnreg")
        if self.maxnreg is not None and not 1 <= self.maxnreg <= 255:
            raise ConfigError(f"maxnreg must be from 1 to 255 registers per thread (or None), not {maxnreg!r}")
        given = {"range_unroll_factors": range_unroll_factors, "range_num_stages": range_num_stages,
                 "range_multi_buffers": range_multi_buffers, "range_warp_specializes": range_warp_specializes,
                 "range_flattens": range_flattens}
        for name, kind in RANGE_FIELDS.items():
            v = given[name]
            if v is not None:
                v = [None if x is None else (bool(x) if kind is bool else _as_int(x, name)) for x in _as_list(v)]
                if kind is int and any(x is not None and x < 0 for x in v):
                    raise ConfigError(f"{name}: entries must be >= 0, got {v}")
            setattr(self, name, v)
        self.tunables = dict(tunables)
        self._key = None
        self.check_basic()

    # -- validation that needs no kernel --------------------------------------------
    def check_basic(self) -> None:
        for b in self.block_sizes or ():
            if not _is_pow2(b):
                raise ConfigError(f"block size {b} is not a power of two")
        for r in self.reduction_loops or ():
            if r is not None and not _is_pow2(r):
                raise ConfigError(f"reduction loop size {r} is not a power of two (use None for persistent)")
        for o in self.loop_orders or ():
            if sorted(o) != list(range(len(o))):
                raise ConfigError(f"loop order {o} is not a permutation of 0..{len(o) - 1}")
        for g in self.l2_groupings or ():
            if g < 1:
                raise ConfigError(f"l2 grouping {g} must be >= 1")
        if self.num_warps is not None and (not _is_pow2(self.num_warps) or self.num_warps > 32):
            raise ConfigError(f"num_warps={self.num_warps} must be a power of two between 1 and 32")
        if self.num_stages is not None and not (1 <= self.num_stages <= 8):
            raise ConfigError(f"num_stages={self.num_stages} must be between 1 and 8")

    # -- mapping-like access -------------------------------------------------------------
    def to_dict(self) -> dict:
        """Only the fields that are set (JSON-friendly)."""
        d = {}
        for f in _FIELDS:
            v = getattr(self, f)
            if v is not None and not (isinstance(v, list) and not v and f != "block_sizes"):
                d[f] = v
        d.update(self.tunables)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        if isinstance(d, Config):
            return d
        if not isinstance(d, dict):
            raise ConfigError(f"a config must be a dict or dt.Config, not {type(d).__name__}")
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Config":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"not a JSON config: {e}") from None
        return cls.from_dict(d)

    def get(self, name, default=None):
        if name in _FIELDS:
            v = getattr(self, name)
            return default if v is None else v
        return self.tunables.get(name, default)

    def __getitem__(self, name):
        v = self.get(name)
        if v is None:
            raise KeyError(name)
        return v

    def replace(self, **changes) -> "Config":
        d = self.to_dict()
        for k, v in changes.items():
            if v is None:
                d.pop(k, None)
            else:
                d[k] = v
        return Config(**d)

    def merged_over(self, defaults: "Config") -> "Config":
        """This config with every unset field taken from ``defaults``."""
        d = defaults.to_dict()
        d.update(self.to_dict())
        return Config(**d)

    def key(self) -> str:
        """A string identifying the config (configs are treated as immutable: use ``replace``)."""
        k = self._key
        if k is None:
            k = self._key = self.to_json()
        return k

    def __eq__(self, other) -> bool:
        return isinstance(other, Config) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        parts = []
        for k, v in self.to_dict().items():
            parts.append(f"{k}={v!r}")
        return "dt.Config(" + ", ".join(parts) + ")"

    __str__ = __repr__


def _as_list(v):
    if isinstance(v, (list, tuple)):
        return list(v)
    raise ConfigError(f"expected a list, got {v!r}")


def _as_int(v, field: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            import numbers
            if isinstance(v, numbers.Integral):
                return int(v)
        except Exception:
            pass
        raise ConfigError(f"{field}: expected an int, got {v!r}")
    return int(v)
