"""Values of a kernel's structure (sites, loops, problems, notes) and name resolution: the torch-free
parts that ``deuteron.structure`` and the tile-loop checker (``deuteron.device_check``) share."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .config import _FIELDS as CONFIG_FIELDS  # noqa: F401  (torch-free)

KERNEL_OPTIONS = ("config", "configs", "autotune_effort", "static_shapes", "autotune_callback", "print_config",
                  "autotune_log", "autotune_baseline_fn", "autotune_baseline_atol", "autotune_baseline_rtol",
                  "autotune_accuracy_check", "autotune_config_overrides", "ignore_warnings", "dot_precision",
                  "backend")
EFFORTS = ("none", "quick", "full")

#: Helion settings accepted by ``@dt.kernel`` with no effect on what is computed: knobs of Helion's autotuner (its
#: timeouts, processes, logging, population, search budget), its debugging output and its torch.compile fusion
#: (deuteron's own search is configured by ``autotune_effort`` and the DEUTERON_AUTOTUNE_* variables)
HELION_IGNORED_OPTIONS = (
    "autotune_compile_timeout", "autotune_benchmark_subprocess", "autotune_benchmark_timeout", "autotune_precompile",
    "autotune_precompile_jobs", "autotune_random_seed", "autotune_best_of_k", "autotune_rebenchmark_threshold",
    "autotune_suspicious_rebenchmark_ratio", "autotune_search_acf", "autotune_progress_bar",
    "autotune_max_generations", "autotune_budget_seconds", "autotune_ignore_errors", "autotune_adaptive_timeout",
    "autotune_log_level", "autotune_log_details", "autotune_cache", "autotune_seed_configs",
    "autotune_initial_population_strategy", "autotune_best_available_max_configs",
    "autotune_best_available_max_cache_scan", "autotune_log_search_space", "autotune_log_search_space_verbose",
    "autotune_log_search_space_path", "autotune_benchmark_fn", "autotune_baseline_accuracy_check_fn",
    "autotune_config_filter", "autotuner_fn", "autotune_force_persistent", "disable_autotuner_heuristics",
    "force_autotune", "print_output_code", "print_repro", "output_origin_lines", "debug_dtype_asserts",
    "allow_warp_specialize", "triton_do_not_specialize", "torch_compile_fusion",
    "autotune_with_torch_compile_fusion", "index_dtype", "persistent_reserved_sms", "fast_math",
)


# ---------------------------------------------------------------------------
# name resolution
# ---------------------------------------------------------------------------


class Resolver:
    """Maps an expression (``dt.tile``, ``torch.exp``) to a dotted name (``deuteron.tile``) or None."""

    def qualname(self, node) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError

    def dt_name(self, node) -> str | None:
        """``tile`` for ``dt.tile`` / ``deuteron.tile`` / ``from deuteron import tile``."""
        q = self.qualname(node)
        if q is None:
            return None
        for prefix in ("deuteron.language.", "deuteron."):
            if q.startswith(prefix):
                rest = q[len(prefix):]
                return rest if "." not in rest else None
        return None


class StaticResolver(Resolver):
    """Resolution through the module's import aliases (``import deuteron as dt``)."""

    def __init__(self, aliases: dict, shadowed: set = frozenset()):
        self.aliases = aliases
        self.shadowed = shadowed

    def qualname(self, node) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.shadowed:
                return None
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------


@dataclass
class Problem:
    code: str
    severity: str  # "error" | "warning"
    node: ast.AST
    message: str
    hint: str | None = None


class Note:
    """What the editor shows when hovering a deuteron expression (``describe()``)."""

    __slots__ = ("kind", "text")

    def __init__(self, kind: str, text: str):
        self.kind = kind
        self.text = text

    def describe(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Note({self.kind}: {self.text})"


@dataclass
class TileSite:
    """A ``dt.tile`` / ``dt.grid`` call that a ``for`` loop iterates over."""

    node: ast.Call
    loop: ast.For
    kind: str  # "tile" | "grid"
    depth: int  # 0: a kernel's grid loop
    static_ndim: int | None  # number of dimensions when the source tells
    as_list: bool | None  # the loop variable is a tuple of tiles
    fixed: list | None  # per dimension: True when block_size= fixes it (static view)
    target_names: list  # loop variable names
    index: int = 0  # order among all sites (source order)
    jagged: bool = False  # dt.jagged_tile(lengths): masked per parent lane past its length
    #: per dimension: True when block_size= is a dt.register_block_size value (tunable, but that call's slot:
    #: the tile adds no entry of its own to config.block_sizes)
    registered: list | None = None

    @property
    def line(self) -> int:
        return self.node.lineno


@dataclass
class DeviceLoop:
    """An outermost tile loop: one generated kernel."""

    index: int
    node: ast.For
    site: TileSite
    assigned: set = field(default_factory=set)  # names bound inside (device locals)
    reads: set = field(default_factory=set)  # names read inside that are not device locals


def _targets(node) -> list[str]:
    out = []
    if isinstance(node, ast.Name):
        out.append(node.id)
    elif isinstance(node, (ast.Tuple, ast.List)):
        for e in node.elts:
            out.extend(_targets(e))
    elif isinstance(node, ast.Starred):
        out.extend(_targets(node.value))
    return out


def _assigned_names(stmts) -> set:
    out = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                out.add(n.id)
    return out


def _is_pow2(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


_ALLOC_FNS = {"empty", "zeros", "ones", "full", "empty_strided", "rand", "randn", "tensor"}
_LIKE_FNS = {"empty_like", "zeros_like", "ones_like", "full_like", "randn_like", "rand_like"}
_SAME_RANK_METHODS = {"contiguous", "clone", "to", "float", "half", "bfloat16", "t", "transpose", "permute",
                      "detach", "cuda", "cpu", "type_as", "abs", "exp", "neg", "mul", "add", "sub", "div",
                      "new_empty_strided"}
_NEW_METHODS = {"new_empty", "new_zeros", "new_ones", "new_full"}
_VIEW_METHODS = {"view", "reshape", "expand", "new_empty", "new_zeros", "new_ones"}
def _pow2_near(v: int) -> int:
    if v <= 1:
        return 1
    lo = 1 << (v.bit_length() - 1)
    hi = lo << 1
    return lo if v - lo <= hi - v else hi


def _walk_in_order(stmts):
    """Nodes in source order (statements, then their expressions), for before/after questions."""
    nodes = []
    for s in stmts:
        for n in ast.walk(s):
            if hasattr(n, "lineno"):
                nodes.append(n)
    nodes.sort(key=lambda n: (n.lineno, n.col_offset))
    return nodes
