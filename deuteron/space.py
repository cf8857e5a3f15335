"""The configuration space of one kernel for one argument signature.

Built from a discovery trace: which block sizes are tunable (and their
bounds), which whole-dimension reductions can be looped, the multi-dimensional
grid loops, the user tunables.  It gives the default config (good heuristics,
the seed of every search), validates user configs (``D005`` at run time) and
enumerates neighbours for the search.
"""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace

from .config import PID_TYPES, Config, ConfigError

__all__ = ["SlotSpec", "RSpec", "ConfigSpace", "RANGE_CHOICES", "count_tile_loops", "descriptor_indexing",
           "tma_active", "gpu_target"]

#: the per-loop knobs the wide space (effort ``full``) searches, and their choices (0: newt's default, the
#: compiler's choice).  newt honors ``nl.range(loop_unroll_factor=)`` (a ``#pragma unroll`` on the loop in the
#: CUDA source).  Not searched: ``range_num_stages`` (newt's pipeliner honors a loop's own depth, but with one
#: tile loop -- matmul, attention -- ``range_num_stages=[s]`` is the very cubin of ``num_stages=s``, which the
#: space already searches), and, because newt's code generator ignores them and every value would compile to
#: the same cubin, ``range_flattens`` and ``range_multi_buffers``.  ``indexing`` (the descriptor form: TMA
#: copies) and ``range_warp_specializes`` (a TMA producer warpgroup) are moves of their own, only where newt
#: uses TMA on the GPU (:meth:`ConfigSpace._descriptor_moves`).
RANGE_CHOICES = {"range_unroll_factors": (0, 1, 2, 4)}
#: the register caps the wide space tries (newt's ``maxnreg``; 0: none, the compiler's choice under
#: ``__launch_bounds__``): fewer registers for more resident warps, or fewer spills forced elsewhere
MAXNREG_CHOICES = (0, 64, 128, 168)
#: pid types the search tries: ``"persistent_interleaved"`` is ``"persistent"`` under another name
SEARCH_PID_TYPES = tuple(p for p in PID_TYPES if p != "persistent_interleaved")


def count_tile_loops(programs) -> int:
    """The most tile loops inside one kernel (``for tile in dt.tile(...)`` within the grid loop) of the
    discovered programs: the length of the config's ``range_*`` lists."""
    from .program import IfStmt, LoopStmt

    def count(block) -> int:
        n = 0
        for st in block.stmts:
            if isinstance(st, LoopStmt):
                n += (st.kind == "tile") + count(st.body)
            elif isinstance(st, IfStmt):
                n += count(st.then_block) + count(st.else_block)
        return n

    return max((count(p.body) for p in programs), default=0)


def descriptor_indexing(cfg: Config) -> bool:
    """Whether ``cfg`` asks for the descriptor form (``indexing="tensor_descriptor"``, for one memory op or
    all): deuteron's generated tile loads and stores then go through ``nl.make_tensor_descriptor`` where one is
    exact (``deuteron/codegen_desc.py``), which newt copies with TMA on sm_90a."""
    v = cfg.indexing
    if v is None:
        return False
    return any(x == "tensor_descriptor" for x in ([v] if isinstance(v, str) else v))


def gpu_target(device):
    """What newt's backend does for ``device`` (``newt.tune.target_features``: ``wgmma``, ``tma``; the current
    GPU's target, or ``NEWT_TARGET`` without one) as attributes; None on the CPU or for an unknown target."""
    if getattr(device, "type", device) != "cuda":
        return None
    try:
        from newt.tune import target_features
        return SimpleNamespace(**target_features())
    except Exception:  # an unknown target or a bad NEWT_TMA value: the search proposes no target-specific forms
        return None


def tma_active(device) -> bool:
    """Whether newt compiles the tiles of deuteron's descriptor form (``indexing="tensor_descriptor"``) to TMA
    copies for ``device``: a CUDA device whose target has TMA (sm_90a) with newt's ``NEWT_TMA`` at its default
    (``desc``: tensor descriptors' tiles) or ``1`` (``all``).  The descriptor form makes real tensor descriptors
    (``deuteron/codegen_desc.py``), whose tiles newt tags and sends through TMA in both modes, and whose
    warp-specialized loops get a TMA producer warpgroup.  (Until issue 25's dtdesc the form only kept bounds masks
    on pointer loads, which newt turned into TMA under ``NEWT_TMA=1`` only: the H100's quick winner of
    2026-12-07, "tensor_descriptor" and warp-specialized, had no TMA copy.)  False on the CPU, without TMA
    on the target and with ``NEWT_TMA=0``."""
    target = gpu_target(device)
    return target is not None and target.tma in ("desc", "all")


def normalize_ranges(cfg: Config) -> Config:
    """``cfg`` without ``range_*`` lists that set nothing (every entry 0 or None): one key per kernel."""
    drop = {f: None for f in RANGE_CHOICES if getattr(cfg, f) is not None and not any(getattr(cfg, f))}
    return cfg.replace(**drop) if drop else cfg

MAX_BLOCK_ELEMS = 1 << 16  # a value of more elements than this is not worth compiling
#: the most elements of one value per thread (``elems / (32 * num_warps)``) the search proposes, in every kernel.
#: newt gives each thread its elements of a block value as registers and renders every op as a fully unrolled loop
#: over them (docs/backend.md, "The output"), so the CUDA, the PTX and ptxas' work grow with this count. In a kernel
#: with a matmul (benchmarks/deuteron_bench.py --plan, 4096^3 fp16) a 128x256 accumulator over 8 warps (128 a
#: thread) takes 154-176 registers and no spills; over 4 warps, and 256x256 over 8 (256 a thread), 255 registers and
#: about 10.8 KB of spills.  Without one (issue 25, session 14: Helion's layer_norm_bwd, rms_norm_bwd, jagged_mean,
#: jagged_dense_add through deuteron, sm_90a, NVRTC 13.5): 1024 a thread, 32,000-45,000 lines of PTX, 110-180 KB of
#: spills and 10-20 s of compile, 47-125 s for jagged_mean's 32x256x8; 512, 16,000-24,000 lines, 60-80 KB and
#: 4-11 s; 256, ptxas settles on 32 registers and spills 20-67 KB (1.2-5.8 s); 128, 128-255 registers and 0-5 KB in
#: most, 14-15 KB at 32 registers in two, 0.5-1.1 s at up to 8 warps and 1.6-3.1 s at 16 (three compiles) -- a tune
#: that proposed the larger counts paid those compiles (about half of layer_norm_bwd's proposals at 8192 columns)
#: and timed kernels that cannot win.  The rule drops a thread count, never a tile: a tile of up to MAX_BLOCK_ELEMS
#: keeps 16 warps (128 a thread).  docs/backend.md, "The output".
ELEMS_PER_THREAD = 128
#: (the same bound, under the name it had while it held for kernels with a matmul only)
DOT_ELEMS_PER_THREAD = ELEMS_PER_THREAD
#: rows of a dot's first tile per warpgroup (four warps) below which newt's sm_90a lowering uses mma.sync
WGMMA_ROWS = 64
HARD_BLOCK_ELEMS = 1 << 20


def np2(n: int) -> int:
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


class SlotSpec:
    def __init__(self, index, kind, label, lo, hi, used_in_dot=False, dot_role=None, is_grid=False, extent=None):
        self.index = index
        self.kind = kind  # "tile" | "register"
        self.label = label
        self.lo = lo
        self.hi = hi
        self.used_in_dot = used_in_dot
        self.dot_role = dot_role  # "mn" | "k" | None
        self.is_grid = is_grid
        self.extent = extent

    def choices(self) -> list:
        out = []
        v = self.lo
        while v <= self.hi:
            out.append(v)
            v *= 2
        return out

    def __repr__(self):
        return f"SlotSpec({self.index}: {self.label} {self.lo}..{self.hi}{' dot' if self.used_in_dot else ''})"


class RSpec:
    def __init__(self, index, size, label):
        self.index = index
        self.size = size
        self.label = label
        self.pad = np2(size)

    def choices(self) -> list:
        out = [None]
        c = 16
        while c < self.pad:
            out.append(c)
            c *= 2
        return out


class ConfigSpace:
    def __init__(self, slots, rspecs, grid_loops, tunables, has_dot, has_loops, value_dims, fixed_dims_elems,
                 grid_extents):
        self.slots: list[SlotSpec] = slots
        self.rspecs: list[RSpec] = rspecs
        self.grid_loops: list[int] = grid_loops  # ndim of each multi-dimensional grid loop
        self.tunables: dict = tunables  # name -> fragment
        self.has_dot = has_dot
        self.has_loops = has_loops
        self.value_dims = value_dims  # list of tuples of ("s", slot) | ("r", rspec, pad) | ("c", n)
        self.fixed_dims_elems = fixed_dims_elems
        self.grid_extents = grid_extents
        #: tile loops inside a kernel (the ``range_*`` knobs of the wide space); set by the tuner from the
        #: discovered programs (:func:`count_tile_loops`), 0 = no per-loop knobs
        self.range_loops = 0
        #: the tile loops inside a kernel when newt turns descriptor-form tiles into TMA copies on the target
        #: (sm_90a unless ``NEWT_TMA=0``; set by the tuner, :func:`tma_active`); 0 = no TMA: the search then
        #: never proposes ``indexing="tensor_descriptor"`` (masked loads and stores without TMA gain nothing)
        self.tma_loops = 0
        #: the target lowers dots to warpgroup MMA (sm_90a; set by the tuner): the search then skips dot tiles
        #: that newt lowers to mma.sync instead (:meth:`feasible`)
        self.wgmma = False

    # ------------------------------------------------------------------ validation
    def complete(self, cfg: Config | None) -> Config:
        """``cfg`` with every missing field from the defaults, checked against the kernel (raises ConfigError)."""
        d = self.default()
        if cfg is None:
            return d
        out = cfg.merged_over(d)
        self.check(out, given=cfg)
        return out

    def check(self, cfg: Config, given: Config | None = None):
        given = given or cfg
        if given.block_sizes is not None and len(given.block_sizes) != len(self.slots):
            names = ", ".join(s.label for s in self.slots) or "none"
            raise ConfigError(f"config.block_sizes has {len(given.block_sizes)} entries but this kernel has "
                              f"{len(self.slots)} tunable block size(s) ({names})")
        for s, v in zip(self.slots, cfg.block_sizes or []):
            if s.used_in_dot and v < 16:
                raise ConfigError(f"block_sizes[{s.index}] = {v} ({s.label}) is used by a matmul, which needs at "
                                  "least 16")
            if v > (1 << 20):
                raise ConfigError(f"block_sizes[{s.index}] = {v} is too large")
        if given.reduction_loops is not None and len(given.reduction_loops) != len(self.rspecs):
            raise ConfigError(f"config.reduction_loops has {len(given.reduction_loops)} entries but this kernel has "
                              f"{len(self.rspecs)} loopable reduction dimension(s)")
        if given.loop_orders is not None and len(given.loop_orders) != len(self.grid_loops):
            raise ConfigError(f"config.loop_orders has {len(given.loop_orders)} entries but this kernel has "
                              f"{len(self.grid_loops)} multi-dimensional grid loop(s)")
        for o, n in zip(cfg.loop_orders or [], self.grid_loops):
            if sorted(o) != list(range(n)):
                raise ConfigError(f"loop order {o} is not a permutation of 0..{n - 1}")
        if given.l2_groupings is not None and len(given.l2_groupings) != len(self.grid_loops):
            raise ConfigError(f"config.l2_groupings has {len(given.l2_groupings)} entries but this kernel has "
                              f"{len(self.grid_loops)} multi-dimensional grid loop(s)")
        for k in given.tunables:
            if k not in self.tunables:
                raise ConfigError(f"unknown config entry {k!r} (this kernel's tunables: "
                                  f"{', '.join(self.tunables) or 'none'})")
        for k, frag in self.tunables.items():
            v = cfg.tunables.get(k)
            if v is not None and v not in frag.choices():
                raise ConfigError(f"config.{k} = {v!r} is not one of {frag.choices()}")
        if cfg.pid_type == "xyz" and any(n > 3 for n in self.grid_loops):
            raise ConfigError("pid_type='xyz' supports at most 3 grid dimensions")
        for g, n in zip(cfg.l2_groupings or [], self.grid_loops):
            if g > 1 and n > 3:
                raise ConfigError(f"l2 grouping {g} needs a grid loop of at most 3 dimensions (this one has {n})")

    def elems(self, cfg: Config) -> int:
        """The largest number of elements of one value in the kernel under ``cfg``."""
        best = 1
        for dims in self.value_dims:
            n = 1
            for d in dims:
                if d[0] == "s":
                    n *= cfg.block_sizes[d[1]]
                elif d[0] == "r":
                    rl = cfg.reduction_loops[d[1]] if cfg.reduction_loops else None
                    n *= rl if rl is not None else d[2]
                else:
                    n *= d[1]
            best = max(best, n)
        return best

    def feasible(self, cfg: Config) -> bool:
        try:
            self.check(cfg)
        except ConfigError:
            return False
        e = self.elems(cfg)
        if e > MAX_BLOCK_ELEMS:
            return False
        if cfg.num_warps * 32 > e * 4 and e >= 32 and cfg.num_warps > 1:
            return False  # more threads than a quarter of the elements: wasteful
        if e > ELEMS_PER_THREAD * 32 * cfg.num_warps:
            return False  # a value this large per thread spills, and takes ptxas seconds to minutes (above)
        for s in self.batch_slots():
            if cfg.block_sizes[s.index] > max(1, s.lo):
                return False  # a batched dot: no wgmma on sm_90a (attention's [2, 128, 64]: 0 HGMMA, 253 registers)
        if self.wgmma and self.has_dot and not self._wgmma_tile(cfg):
            return False
        return True

    def _wgmma_tile(self, cfg: Config) -> bool:
        """Whether newt can lower this config's dots to wgmma: warpgroups of four warps, each taking at least
        64 rows of the dot's first tile (``WGMMA_ROWS``).  On sm_90a (``deuteron_bench.py --plan``, matmul 4096^3
        and attention 4x32x4096x64) every config the plan compiled without an HGMMA broke this: 2 warps, or 8
        warps over 64 rows, or 16 over 128.  Where the dimension is shorter than 64 anyway, anything goes."""
        mn = [s for s in self.slots if s.dot_role == "mn"]
        if not mn or mn[0].hi < WGMMA_ROWS:
            return True
        w = cfg.num_warps or 4
        return w % 4 == 0 and cfg.block_sizes[mn[0].index] >= WGMMA_ROWS * (w // 4)

    def descriptor_tiles(self) -> bool:
        """Whether every value of the kernel is made of tiles only (no whole-dimension ``:`` slice, no fixed
        extent): the kernels whose loads the descriptor form's tensor descriptors cover (attention's
        ``q[tile_b, tile_m, :]`` indexes with a tile of block size 1 in the search, which keeps pointers:
        ``deuteron/codegen_desc.py``), where the search proposes it."""
        return bool(self.value_dims) and all(d[0] == "s" for dims in self.value_dims for d in dims)

    def batch_slots(self) -> list:
        """In a kernel with a matmul, the block sizes that are not the matmul's own but share a value with one
        (attention's head/batch tile): a block of more than one there makes every dot a batched dot, which newt
        does not lower to wgmma; the search keeps them at 1 (a user config may set anything)."""
        if not self.has_dot:
            return []
        dot = {s.index for s in self.slots if s.used_in_dot}
        out = set()
        for dims in self.value_dims:
            idx = {d[1] for d in dims if d[0] == "s"}
            if idx & dot:
                out |= idx - dot
        return [s for s in self.slots if s.index in out and not s.used_in_dot]

    # ------------------------------------------------------------------ defaults
    def default(self) -> Config:
        bs = [s.lo for s in self.slots]
        for s in self.slots:
            if s.used_in_dot:
                want = 64 if s.dot_role == "k" else 128
                bs[s.index] = max(s.lo, min(s.hi, want))
            elif s.kind == "register":
                bs[s.index] = max(s.lo, min(s.hi, 64))
            else:
                bs[s.index] = max(s.lo, min(s.hi, 1024))
        rl = [None] * len(self.rspecs)
        for r in self.rspecs:
            if r.pad > 16384:
                rl[r.index] = 4096
        cfg = Config(block_sizes=bs, reduction_loops=rl)
        # shrink non-dot blocks until each value has at most ~4096 elements (1024 for purely elementwise)
        target = 4096 if self.rspecs or any(d for dims in self.value_dims for d in dims if d[0] == "r") else 1024
        for _ in range(64):
            e = self.elems(cfg)
            limit = max(target, self._fixed_elems(cfg))
            if e <= limit:
                break
            cand = [s for s in self.slots if not s.used_in_dot and cfg.block_sizes[s.index] > s.lo]
            if not cand:
                break
            big = max(cand, key=lambda s: (cfg.block_sizes[s.index], -s.index))
            bs = list(cfg.block_sizes)
            bs[big.index] //= 2
            cfg = cfg.replace(block_sizes=bs)
        e = self.elems(cfg)
        if self.has_dot:
            mn = [cfg.block_sizes[s.index] for s in self.slots if s.dot_role == "mn"]
            prod = 1
            for v in mn:
                prod *= v
            warps = 8 if prod >= 128 * 128 else 4
        else:
            warps = min(8, max(1, np2(e // 256)))
        stages = 3 if self.has_dot else (2 if self.has_loops else 1)
        return cfg.replace(num_warps=warps, num_stages=stages, pid_type="flat",
                           loop_orders=[list(range(n)) for n in self.grid_loops] or None,
                           l2_groupings=[8 if self.has_dot and n <= 3 else 1 for n in self.grid_loops] or None,
                           **{k: f.default for k, f in self.tunables.items()})

    def _fixed_elems(self, cfg: Config) -> int:
        best = 1
        for dims in self.value_dims:
            n = 1
            for d in dims:
                if d[0] == "r":
                    rl = cfg.reduction_loops[d[1]] if cfg.reduction_loops else None
                    n *= rl if rl is not None else d[2]
                elif d[0] == "c":
                    n *= d[1]
            best = max(best, n)
        return best

    # ------------------------------------------------------------------ search moves
    def neighbors(self, cfg: Config, wide: bool = False) -> list:
        """Configs one move away: a block size (or two, keeping the area; a matmul block doubled with one
        stage fewer), a reduction loop, warps, stages, an L2 grouping, a loop order, the pid type, a tunable;
        ``wide`` (effort ``full``) adds each tile loop's unroll factor."""
        out = []
        bs = list(cfg.block_sizes or [])
        for s in self.slots:
            for f in (2, 0.5):
                v = int(bs[s.index] * f)
                if s.lo <= v <= s.hi:
                    nb = list(bs)
                    nb[s.index] = v
                    out.append(cfg.replace(block_sizes=nb))
        # a matmul block doubled with one pipeline stage fewer (the shared memory of a stage doubles: a larger
        # tile often only fits, or only wins, with fewer stages -- attention's 128x128 key tile on the H200 ran
        # 1.80 ms at 4 stages and 1.25 ms at 3, and a one-move search from 128x64 at 4 stages never got there)
        st = cfg.num_stages or 1
        if self.has_dot and self.has_loops and st > 2:
            for s in self.slots:
                v = bs[s.index] * 2
                if s.used_in_dot and v <= s.hi:
                    nb = list(bs)
                    nb[s.index] = v
                    out.append(cfg.replace(block_sizes=nb, num_stages=st - 1))
        # two block sizes at once (keeps the tile's area: 64x128 <-> 128x64)
        for a, b in itertools.combinations(self.slots, 2):
            for fa, fb in ((2, 0.5), (0.5, 2)):
                va, vb = int(bs[a.index] * fa), int(bs[b.index] * fb)
                if a.lo <= va <= a.hi and b.lo <= vb <= b.hi:
                    nb = list(bs)
                    nb[a.index], nb[b.index] = va, vb
                    out.append(cfg.replace(block_sizes=nb))
        rl = list(cfg.reduction_loops or [])
        for r in self.rspecs:
            ch = r.choices()
            cur = rl[r.index]
            i = ch.index(cur) if cur in ch else 0
            for j in (i - 1, i + 1):
                if 0 <= j < len(ch) and j != i:
                    nr = list(rl)
                    nr[r.index] = ch[j]
                    out.append(cfg.replace(reduction_loops=nr) if any(x is not None for x in nr) else
                               Config(**{**cfg.to_dict(), "reduction_loops": nr}))
            if cur is not None:
                nr = list(rl)
                nr[r.index] = None
                out.append(Config(**{**cfg.to_dict(), "reduction_loops": nr}))
        for f in (2, 0.5):
            w = int(cfg.num_warps * f)
            if 1 <= w <= 16:
                out.append(cfg.replace(num_warps=w))
        if self.has_loops:
            for st in (cfg.num_stages - 1, cfg.num_stages + 1):
                if 1 <= st <= 6:
                    out.append(cfg.replace(num_stages=st))
        for k, n in enumerate(self.grid_loops):
            groups = list(cfg.l2_groupings or [1] * len(self.grid_loops))
            for f in (2, 0.5):
                g = int(groups[k] * f)
                if 1 <= g <= 64:
                    ng = list(groups)
                    ng[k] = g
                    out.append(cfg.replace(l2_groupings=ng))
            orders = [list(o) for o in (cfg.loop_orders or [list(range(m)) for m in self.grid_loops])]
            for i in range(n - 1):
                no = [list(o) for o in orders]
                no[k][i], no[k][i + 1] = no[k][i + 1], no[k][i]
                out.append(cfg.replace(loop_orders=no))
        out += self._descriptor_moves(cfg)
        for p in SEARCH_PID_TYPES:
            if p != cfg.pid_type and not (p == "xyz" and not self.grid_extents) and not (
                    {p, cfg.pid_type} == {"persistent", "persistent_interleaved"}):
                out.append(cfg.replace(pid_type=p))
        if wide:
            out += self._range_moves(cfg)
            cur = cfg.maxnreg or 0
            j = MAXNREG_CHOICES.index(cur) if cur in MAXNREG_CHOICES else 0
            for k in (j - 1, j + 1):
                if 0 <= k < len(MAXNREG_CHOICES):
                    out.append(cfg.replace(maxnreg=MAXNREG_CHOICES[k] or None))
        for k, frag in self.tunables.items():
            ch = frag.choices()
            cur = cfg.tunables.get(k, frag.default)
            i = ch.index(cur) if cur in ch else 0
            for j in (i - 1, i + 1):
                if 0 <= j < len(ch):
                    out.append(cfg.replace(**{k: ch[j]}))
        uniq = {}
        for c in out:
            c = normalize_ranges(c)
            if self.feasible(c) and c.key() != cfg.key():
                uniq.setdefault(c.key(), c)
        return list(uniq.values())

    def _descriptor_moves(self, cfg: Config) -> list:
        """With TMA on the target (``tma_loops``), for a kernel with a matmul: the other indexing (pointer <->
        the descriptor form, whose tiles newt loads with TMA), and, in the descriptor form of a kernel with one
        tile loop, that loop warp-specialized or not (a TMA producer warpgroup beside ``num_warps`` consumer
        warps: newt/backend/cuda/warpspec.py; newt keeps the ordinary pipeline where it does not apply)."""
        if not (self.tma_loops and self.has_dot):
            return []
        desc = descriptor_indexing(cfg)
        out = [cfg.replace(indexing=None if desc else "tensor_descriptor", range_warp_specializes=None)]
        if desc and self.tma_loops == 1:
            ws = bool(cfg.range_warp_specializes and cfg.range_warp_specializes[0])
            out.append(cfg.replace(range_warp_specializes=None if ws else [True]))
        return out

    def _range_moves(self, cfg: Config) -> list:
        out = []
        for field, choices in RANGE_CHOICES.items():
            cur = list(getattr(cfg, field) or [])
            cur += [0] * (self.range_loops - len(cur))
            for i in range(self.range_loops):
                v = cur[i] or 0
                j = choices.index(v) if v in choices else 0
                for k in (j - 1, j + 1):
                    if 0 <= k < len(choices):
                        nv = list(cur)
                        nv[i] = choices[k]
                        out.append(cfg.replace(**{field: nv}))
        return out

    def random(self, rng: random.Random, around: Config | None = None, wide: bool = False) -> Config:
        """A random feasible config (block sizes, reduction loops, warps, stages, L2 groupings, tunables; ``wide``:
        each tile loop's unroll factor and pipelining depth too); ``around``'s other fields."""
        base = around or self.default()
        for _ in range(50):
            bs = [rng.choice(s.choices()) for s in self.slots]
            rl = [rng.choice(r.choices()) for r in self.rspecs]
            cfg = Config(**{**base.to_dict(), "block_sizes": bs, "reduction_loops": rl,
                            "num_warps": rng.choice([2, 4, 8]),
                            "num_stages": rng.choice([1, 2, 3, 4, 5]) if self.has_loops else base.num_stages,
                            **({"l2_groupings": [rng.choice([1, 2, 4, 8, 16]) if n <= 3 else 1
                                                  for n in self.grid_loops]}
                               if self.grid_loops else {}),
                            **{k: rng.choice(f.choices()) for k, f in self.tunables.items()}})
            if wide and self.range_loops:
                cfg = normalize_ranges(cfg.replace(**{f: [rng.choice(ch) for _ in range(self.range_loops)]
                                                      for f, ch in RANGE_CHOICES.items()}))
            if wide:
                cfg = cfg.replace(maxnreg=rng.choice(MAXNREG_CHOICES) or None)
            if self.feasible(cfg):
                return cfg
        return base

    def size(self) -> int:
        n = 1
        for s in self.slots:
            n *= len(s.choices())
        for r in self.rspecs:
            n *= len(r.choices())
        for f in self.tunables.values():
            n *= len(f.choices())
        return n * 5 * 3

    def describe(self) -> str:
        parts = [f"block_sizes: {[f'{s.label} {s.lo}..{s.hi}' for s in self.slots]}"]
        if self.rspecs:
            parts.append(f"reduction_loops: {[f'{r.label} ({r.size})' for r in self.rspecs]}")
        if self.grid_loops:
            parts.append(f"grid loops: {self.grid_loops}")
        if self.tunables:
            parts.append(f"tunables: {sorted(self.tunables)}")
        return "; ".join(parts)

    def validate_or_raise(self, cfg: Config):
        self.check(cfg)
