"""deuteron's autotuner.

A real search over the kernel's config space (``deuteron.space``): pattern
search from good seeds (the heuristic default, classic tile shapes, random
points), moving to the best neighbours until nothing improves; ``full``
effort searches wider and longer.  For every candidate:

1. the generated source is deduplicated (identical kernels are compiled and
   timed once);
2. on a GPU, worker processes compile it in parallel and launch it once on
   copies of its arguments (a fault stays in the worker and is reported; a
   config that does not fit the hardware is skipped quietly);
3. the main process runs it on fresh arguments whose outputs are filled with
   NaN and compares every output with the eager oracle (``kernel.ref``), with
   a tolerance by dtype -- only then is it timed.

A config that fails any step is never chosen.  The winner is written to the
on-disk config cache and printed as a line to paste into ``@dt.kernel``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import sys
import time

from ..config import Config
from .cache import ConfigCache, cache_key, versions
from .progress import Progress

__all__ = ["autotune", "Tuner", "Candidate", "EFFORT_BUDGETS"]

#: effort -> (max configs, max seconds, seeds, search frontier width).  ``full`` stops taking new configs after
#: 50 s (a batch under way finishes: the whole tune stays well under 90 s).  quick: 40 configs (72 until
#: 2026-12-07: attention's quick tune took 20.8 s on an H100 for 72; its winner, [1, 128, 64] 8 warps 3 stages,
#: is the second seed and its neighbours are the first pattern-search batch, ``deuteron_bench.py --plan``)
EFFORT_BUDGETS = {
    "quick": (40, 15.0, 14, 2),
    "full": (480, 50.0, 48, 5),
}
#: effort -> a timing is stopped after a first estimate above this many times the best so far ("hopeless")
CUTOFFS = {"quick": 2.0, "full": 3.0}
#: effort -> the search: "pattern" (seeds, then the best neighbours), "de" (differential evolution, then
#: pattern search), "surrogate" (differential evolution, a surrogate model, then pattern search)
ALGORITHMS = {"quick": "pattern", "full": "surrogate"}
CPU_BUDGET = (4, 120.0, 1, 1)
_STOP = object()  # Tuner._admit: the batch's budget is spent


class Candidate:
    def __init__(self, config: Config):
        self.config = config
        self.status = "pending"  # ok | wrong | fault | out_of_resources | compile_error | timeout | error | invalid
        self.ms = None
        self.error = None
        self.source_key = None
        self.launches = []  # (gen, module, prog, host_locals): host_locals None once released
        self.tasks = None  # (compile tasks, timing task), made once
        self.screen_left = 0
        self.max_err = None
        self.duplicate_of = None

    def __repr__(self):
        return f"Candidate({self.config}, {self.status}, {self.ms})"

    def release(self):
        """Drop the host code's locals of the generating run (the candidate's own clones of the arguments and
        the outputs its host code allocated): what the worker tasks need is in ``tasks`` by then.  A tune keeps
        every candidate until it ends, and with the locals 365 full-effort candidates of a 4x32x4096x64
        attention held 42 GiB of GPU memory (H100, 2026-12-07: the full tune died out of memory)."""
        self.launches = [(gen, mod, prog, None) for gen, mod, prog, _ in self.launches]


def autotune(kernel, entry, bound, effort: str = "quick", configs=None, callback=None, force: bool = False) -> Config:
    cb = callback or kernel.autotune_callback
    cache = ConfigCache()
    key = cache_key(kernel, entry, effort, configs)
    if not force and os.environ.get("DEUTERON_AUTOTUNE_CACHE", "1") != "0":
        hit = cache.get(key)
        if hit is not None:
            try:
                cfg = entry.space.complete(hit["config"])
                if cb is not None:
                    cb({"kind": "end", "kernel": kernel.__name__, "best_config": str(cfg), "best_ms": hit.get("ms"),
                        "tested": 0, "failed": 0, "elapsed": 0.0, "message": "from the config cache"})
                return cfg
            except Exception:  # a stale entry: tune again
                pass
    tuner = Tuner(kernel, entry, bound, effort, configs, cb)
    best = tuner.run()
    cache.put(key, best.config, best.ms, {"kernel": kernel.__qualname__, "effort": effort,
                                          "tested": tuner.tested, "seconds": round(tuner.elapsed(), 2),
                                          "versions": versions(entry.device)})
    show = kernel.print_config
    if show is None:
        show = bool(getattr(sys.stderr, "isatty", lambda: False)()) and os.environ.get("DEUTERON_PROGRESS") != "0"
    if show:
        sys.stderr.write(f"[deuteron] {kernel.__name__}: {tuner.tested} configs in {tuner.elapsed():.1f}s, best "
                         f"{best.ms:.4f} ms; to skip tuning next time:\n    @dt.kernel(config={best.config})\n")
    return best.config


class Tuner:
    def __init__(self, kernel, entry, bound, effort, configs, callback):
        self.kernel = kernel
        self.entry = entry
        self.bound = bound
        self.space = entry.space
        self.effort = effort if effort in EFFORT_BUDGETS else "quick"
        self.configs = configs
        self.gpu = entry.device.type == "cuda"
        # candidates are compiled and screened in worker processes on a GPU (DEUTERON_AUTOTUNE_ISOLATE=1 forces it
        # on the CPU; =0 is the serial path: compile, then time, one config after the other in this process)
        iso = os.environ.get("DEUTERON_AUTOTUNE_ISOLATE")
        self.isolate = iso == "1" or (self.gpu and iso != "0")
        budget = EFFORT_BUDGETS[self.effort] if self.gpu else CPU_BUDGET
        self.max_configs = int(os.environ.get("DEUTERON_AUTOTUNE_MAX_CONFIGS", budget[0]))
        self.max_seconds = float(os.environ.get("DEUTERON_AUTOTUNE_SECONDS", budget[1]))
        self.n_seeds = budget[2]
        self.width = budget[3]
        # what a quick tune here would use (configs, seeds, width): effort full runs that search first
        q = EFFORT_BUDGETS["quick"] if self.gpu else CPU_BUDGET
        self.quick_budget = (int(os.environ.get("DEUTERON_AUTOTUNE_MAX_CONFIGS", q[0])), q[2], q[3])
        # effort full searches the wide space: each tile loop's unroll factor and pipelining depth as well
        self.wide = self.effort == "full" and os.environ.get("DEUTERON_AUTOTUNE_WIDE", "1") != "0"
        if self.wide:
            from ..space import count_tile_loops
            self.space.range_loops = count_tile_loops(entry.discovered.values())
        # TMA on this GPU (sm_90a, newt's default NEWT_TMA=desc or 1): a kernel with a matmul also tries the
        # descriptor form (tensor descriptors: TMA copies) and, with one tile loop, its warp-specialized pipeline
        # (a TMA producer warpgroup; seeds and neighbours)
        self.space.tma_loops, self.space.wgmma = 0, False
        if self.gpu and self.space.has_dot:
            from ..space import count_tile_loops, gpu_target, tma_active
            self.space.wgmma = bool(getattr(gpu_target(entry.device), "wgmma", False))
            if tma_active(entry.device) and self.space.descriptor_tiles():
                self.space.tma_loops = count_tile_loops(entry.discovered.values())
        if configs:
            self.max_configs = max(self.max_configs, len(configs))
        self.t0 = time.perf_counter()
        # where the time goes (seconds): main-process phases, worker totals, marks (elapsed at the first result)
        self.phases: dict = {}
        self.progress = Progress(kernel.__name__, min(self.max_configs, len(configs) if configs else
                                                      self.max_configs), callback)
        self.results: dict = {}  # config key -> Candidate
        self.by_source: dict = {}  # source key -> Candidate
        self.tested = 0
        self.pool = None
        self.rng = random.Random(int(os.environ.get("DEUTERON_AUTOTUNE_SEED", "1234")))
        tf32 = False
        try:
            import torch
            tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
        except Exception:
            pass
        self._tf32 = tf32
        self._expected = None  # the oracle's outputs: computed on first use (after the workers were started)
        self.poison = self._write_only_params()
        self.log = kernel.autotune_log
        self._own_pool = False
        # executor path: while a batch's last candidates finish, the likely next batch (the leaders'
        # neighbours) is generated and compiled on the idle workers (DEUTERON_AUTOTUNE_SPECULATE=0: off)
        self._speculate_ok = False
        self._pre: dict = {}  # config key -> prepared candidate not yet admitted
        self._pre_state: dict = {}  # candidate -> [compile tasks left, entries, compile task ids]
        self._spec_compile: dict = {}  # executor task id -> (candidate, compile task), for those candidates

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def expected(self):
        if self._expected is None:
            from ..oracle import Expected
            t = time.perf_counter()
            reference = None
            if self.entry.oracle_gap is not None and getattr(self.kernel, "autotune_baseline_fn", None) is None:
                reference = self._default_config_output
            self._expected = Expected(self.kernel, self.bound, tf32=self._tf32, reference=reference,
                                      poison=self.poison)
            self._add("oracle", t)
        return self._expected

    def _default_config_output(self, *args, **kwargs):
        """The oracle of a kernel kernel.ref cannot stand for (``entry.oracle_gap``: an `if` on where a tile of
        tunable size starts): the default config's output, outputs NaN-filled like every candidate's (Helion's
        rule: every config is checked against the default config)."""
        from ..oracle import nan_allocations
        self.entry.warn_no_oracle("the autotuner checks every config against the default config's output")
        with nan_allocations():
            return self.entry.run(self.kernel._bind(args, kwargs), self.entry.baseline_config())

    def _add(self, phase: str, since: float) -> None:
        """Add the seconds since ``since`` (a perf_counter value) to ``phase``."""
        self.phases[phase] = self.phases.get(phase, 0.0) + (time.perf_counter() - since)

    def _mark(self, name: str) -> None:
        """Remember when ``name`` first happened (elapsed seconds)."""
        self.phases.setdefault(name, self.elapsed())

    def phase_report(self) -> dict:
        """The phases, rounded, with the total and what the main process spent outside them."""
        out = {k: round(v, 3) for k, v in self.phases.items()}
        total = self.elapsed()
        busy = sum(v for k, v in self.phases.items() if k in _MAIN_PHASES)
        out["total"] = round(total, 3)
        out["main_other"] = round(max(0.0, total - busy), 3)
        return out

    def _write_only_params(self) -> set:
        out = set()
        loaded = set()
        for prog in self.entry.discovered.values():
            for ta in prog.tensors.values():
                names = {s[1] for s in ta.sources if s[0] == "local"}
                if ta.write_only:
                    out |= names
                else:
                    loaded |= names
        return {n for n in out - loaded if n in self.kernel.signature.parameters}

    # ------------------------------------------------------------------ driver
    def run(self) -> Candidate:
        self.progress.begin(self.space.describe())
        try:
            if self.isolate:
                t = time.perf_counter()
                self._start_pool()
                self._add("pool_start", t)
            if self.configs:
                self.evaluate(self.configs)
            else:
                self.search()
            best = self.finish()
            self._forget_speculation()  # what was generated ahead and not needed (compiles still running end there)
        except BaseException:
            if self.pool is not None:
                self.pool.cancel()  # Ctrl-C / an error: stop every worker now (a shared pool restarts lazily)
            raise
        finally:
            if self.pool is not None and self._own_pool:
                self.pool.close()
        self.progress.end(best.config, best.ms, phases=self.phase_report())
        return best

    def budget_left(self) -> bool:
        return self.tested < self.max_configs and self.elapsed() < self.max_seconds

    def algorithm(self) -> str:
        a = os.environ.get("DEUTERON_AUTOTUNE_ALGORITHM") or ALGORITHMS.get(self.effort, "pattern")
        return a if a in ("pattern", "de", "surrogate") else "pattern"

    def search(self):
        default = self.space.default()
        algo = self.algorithm()
        if algo != "pattern" and (self.gpu or os.environ.get("DEUTERON_AUTOTUNE_ALGORITHM")):
            from .search import Genome, differential_evolution, surrogate_search
            # quick's seeds (the same random draws as a quick tune), then this effort's own random points
            n = self.n_seeds
            self.n_seeds = self.quick_budget[1]
            try:
                seeds = [default] + self.seed_configs(default)
            finally:
                self.n_seeds = n
            self._quick_phase(seeds)
            if not self.budget_left():
                return  # quick's search took the whole budget
            seeds += [self.space.random(self.rng, around=default, wide=self.wide) for _ in range(n)]
            genome = Genome(self.space, self.rng, wide=self.wide)
            # the population: the leaders so far, then the seeds not evaluated yet, then random points
            pop = [c.config for c in self.ranked()[:8]]
            size = max(8, min(self.n_seeds, self.max_configs // 4))
            pop += [c for c in seeds if c.key() not in self.results][:max(0, size - len(pop))]
            while len(pop) < 8:
                pop.append(self.space.random(self.rng, wide=self.wide))
            room = self.max_configs
            # the population search takes about half of what is left, the model the rest, pattern search refines
            self.max_configs = min(room, self.tested + max(len(pop), (room - self.tested) // 2))
            try:
                pop = differential_evolution(self, genome, pop, generations=None if algo == "de" else 3)
            finally:
                self.max_configs = room
            if algo == "surrogate":
                cap = room
                self.max_configs = min(room, self.tested + max(8, (room - self.tested) * 3 // 4))
                try:
                    surrogate_search(self, genome, pop, batch=max(4, self.width * 2))
                finally:
                    self.max_configs = cap
        else:
            seeds = [default] + self.seed_configs(default)
            self._speculate_ok = True  # pattern search: the next batch is the leaders' neighbours
            self.evaluate(seeds[:max(1, min(self.n_seeds, self.max_configs))])
        self._speculate_ok = True
        self._refine()

    def _quick_phase(self, seeds):
        """Effort ``full`` starts with quick's search -- its seeds, its pattern search, within its config
        budget -- so it evaluates what quick would have and can only end as fast or faster; the population
        search and the model then start from quick's leaders."""
        qmax, qseeds, qwidth = self.quick_budget
        room, width, wide = self.max_configs, self.width, self.wide
        self.max_configs = min(room, self.tested + qmax)
        self.width, self.wide = qwidth, False
        self._speculate_ok = True
        try:
            self.evaluate(seeds[:max(1, min(qseeds, self.max_configs))])
            self._refine()
        finally:
            self.max_configs, self.width, self.wide = room, width, wide
            self._forget_speculation()
            self._speculate_ok = False
        self.phases["quick_phase_s"] = round(self.elapsed(), 3)

    def _refine(self):
        """Pattern search: move to the best neighbours of the leaders until nothing improves."""
        stale = 0
        while self.budget_left():
            ok = self.ranked()
            if not ok:
                more = [self.space.random(self.rng) for _ in range(4)]
                if not self.evaluate(more):
                    break
                continue
            best_ms = ok[0].ms
            cands = self._neighbours(ok)
            if not cands:
                break
            room = self.max_configs - self.tested
            # the best one's neighbours first
            cands = cands[:max(1, room)]
            self.evaluate(cands)
            new = self.ranked()
            if new and new[0].ms < best_ms * 0.995:
                stale = 0
            else:
                stale += 1
                if stale >= 2:
                    break

    def _neighbours(self, ok) -> list:
        """The next pattern-search batch: the unseen neighbours of the leaders, the best one's first."""
        cands: list = []
        keys: set = set()
        for c in ok[:self.width]:
            for nb in self.space.neighbors(c.config, wide=self.wide):
                if nb.key() not in self.results and nb.key() not in keys:
                    keys.add(nb.key())
                    cands.append(nb)
        return cands

    def seed_configs(self, default: Config) -> list:
        sp = self.space
        out = []
        dot = [s for s in sp.slots if s.used_in_dot]
        if dot:
            mn = [s for s in dot if s.dot_role == "mn"]
            k = [s for s in dot if s.dot_role == "k"]
            shapes = [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4),
                      (64, 256, 32, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 128, 64, 8, 3),
                      (64, 64, 64, 4, 4), (128, 256, 32, 8, 4), (256, 128, 32, 8, 4), (64, 64, 32, 2, 5)]
            for bm, bn, bk, w, st in shapes:
                bs = list(default.block_sizes)
                if len(mn) >= 1:
                    bs[mn[0].index] = min(max(bm, mn[0].lo), mn[0].hi)
                if len(mn) >= 2:
                    bs[mn[1].index] = min(max(bn, mn[1].lo), mn[1].hi)
                for s in k:
                    bs[s.index] = min(max(bk, s.lo), s.hi)
                c = default.replace(block_sizes=bs, num_warps=w, num_stages=st)
                if sp.feasible(c):
                    out.append(c)
            out = self._descriptor_seeds(default, out) + out
        else:
            grid = [s for s in sp.slots if s.is_grid]
            for f in (0.25, 0.5, 2, 4):
                for w in (default.num_warps // 2, default.num_warps, default.num_warps * 2):
                    if not 1 <= w <= 16:
                        continue
                    bs = list(default.block_sizes)
                    for s in grid:
                        bs[s.index] = int(min(max(bs[s.index] * f, s.lo), s.hi))
                    c = default.replace(block_sizes=bs, num_warps=w)
                    if sp.feasible(c):
                        out.append(c)
            for r in sp.rspecs:
                for ch in r.choices()[1:]:
                    if ch >= 512:
                        rl = list(default.reduction_loops)
                        rl[r.index] = ch
                        c = default.replace(reduction_loops=rl)
                        if sp.feasible(c):
                            out.append(c)
        for _ in range(self.n_seeds):
            out.append(sp.random(self.rng, around=default))
        seen = {default.key()}
        uniq = []
        for c in out:
            if c.key() not in seen:
                seen.add(c.key())
                uniq.append(c)
        self.rng.shuffle(uniq) if not dot else None
        return uniq

    def _descriptor_seeds(self, default: Config, classic: list) -> list:
        """With TMA (``space.tma_loops``): the descriptor form of the default and of the first three classic
        tiles (Hopper's large-matmul winners), and, for a kernel with one tile loop, the warp-specialized
        128x256x64 pipeline: 3 stages, and persistent at 2 stages -- newt's persistent warp-specialized matmul,
        1.00-1.02x cuBLAS (benchmarks/bench_ws.py ``PERSISTENT_CFG``; 3 stages do not fit beside the persistent
        epilogue, and newt then keeps the ordinary pipeline)."""
        sp = self.space
        if not sp.tma_loops:
            return []
        out = [c.replace(indexing="tensor_descriptor") for c in [default] + classic[:3]]
        if sp.tma_loops == 1 and classic:
            big = classic[0].replace(indexing="tensor_descriptor", range_warp_specializes=[True])
            out += [big, big.replace(pid_type="persistent", num_stages=2)]
        return [c for c in out if sp.feasible(c)]

    def ranked(self) -> list:
        ok = [c for c in self.results.values() if c.status == "ok" and c.ms is not None]
        ok.sort(key=lambda c: c.ms)
        return ok

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, configs) -> int:
        """Evaluate a batch of configs (within the budget); returns how many were new."""
        t = time.perf_counter()
        try:
            return self._evaluate(configs)
        finally:
            self.phases["batches"] = self.phases.get("batches", 0) + 1
            self._add("in_batches", t)

    def _evaluate(self, configs) -> int:
        if self.isolate:
            return self._evaluate_stream(configs)
        todo = []
        for cfg in configs:
            cand = self._admit(cfg, len(todo))
            if cand is _STOP:
                break
            if cand is not None:
                todo.append(cand)
        for c in todo:
            if c.duplicate_of is not None:
                self._copy_dup(c)
            else:
                self.check_and_time(c)
            self.record(c)
        return len(todo)

    def _admit(self, cfg, n_open: int):
        """The next candidate of a batch (``n_open``: admitted, not yet recorded): ``_STOP`` when the budget is
        spent, None when the config was seen before or does not generate (recorded), else a generated
        Candidate (``duplicate_of`` set when its source is one already seen)."""
        if (not self.budget_left() and n_open) or self.tested + n_open >= self.max_configs:
            return _STOP
        if cfg.key() in self.results:
            return None
        cand = self._pre.pop(cfg.key(), None)
        if cand is None:
            cand = Candidate(cfg)
            self.prepare(cand)
            if not self.isolate:
                cand.release()  # the serial path runs it through the kernel's entry: no worker tasks to make
        self.results[cfg.key()] = cand
        if cand.status != "pending":
            self.record(cand)
            return None
        dup = self.by_source.get(cand.source_key)
        if dup is not None:
            cand.duplicate_of = dup
            cand.release()  # a duplicate takes its original's results: nothing of its own runs
        else:
            self.by_source[cand.source_key] = cand
        return cand

    def prepare(self, cand: Candidate):
        """Generate the candidate's kernels (no launch); invalid configs stop here."""
        from ..errors import DeuteronError
        from ..hostrun import _HostRun
        from ..oracle import nan_allocations
        t = time.perf_counter()
        try:
            self._prepare(cand, DeuteronError, _HostRun, nan_allocations)
        finally:
            self._add("generate", t)

    def _prepare(self, cand, DeuteronError, _HostRun, nan_allocations):
        args, kwargs = self.expected.fresh_args(self.poison)
        b = self.kernel._bind(args, kwargs)
        run = _HostRun(self.entry, cand.config, "source")
        try:
            with nan_allocations():
                run.execute(b)
        except DeuteronError as e:
            cand.status = "invalid"
            cand.error = str(e).splitlines()[-1] if str(e) else "invalid config"
            return
        except Exception as e:  # the host code failed with this config
            cand.status = "error"
            cand.error = f"{type(e).__name__}: {e}"
            return
        cand.launches = run.built
        key = []
        for gen, _mod, _prog, _loc in run.built:
            key.append((hashlib.sha256(gen.source.encode()).hexdigest()[:20], tuple(sorted(gen.constexprs.items())),
                        gen.num_warps, gen.num_stages))
        cand.source_key = tuple(key)

    def _copy_dup(self, c):
        d = c.duplicate_of
        c.status, c.ms, c.error, c.max_err = d.status, d.ms, d.error, d.max_err

    def record(self, cand: Candidate):
        cand.release()
        self.tested += 1
        err = cand.error if cand.status != "ok" else None
        quiet = cand.status in ("out_of_resources",)
        self.progress.report(cand.config, cand.ms, cand.status, None if quiet else err)
        if self.log:
            try:
                with open(self.log, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"kernel": self.kernel.__name__, "config": cand.config.to_dict(),
                                        "status": cand.status, "ms": cand.ms, "error": err,
                                        "duplicate": cand.duplicate_of is not None,
                                        "elapsed": round(self.elapsed(), 3)}) + "\n")
            except OSError:
                pass

    def check_and_time(self, cand: Candidate, timed_ms: float | None = None):
        """Run on fresh arguments (outputs NaN-filled), compare with the oracle, then time (unless a worker
        timed it already: ``timed_ms``)."""
        t = time.perf_counter()
        try:
            self._check_and_time(cand, timed_ms)
        finally:
            self._add("check", t)

    def _check_and_time(self, cand: Candidate, timed_ms: float | None):
        from ..errors import DeuteronError, GeneratedKernelError
        from .worker import classify
        args, kwargs = self.expected.fresh_args(self.poison)
        b = self.kernel._bind(args, kwargs)
        try:
            result = self.entry.run(b, cand.config, prefill=True)
            if self.gpu:
                from newt.runtime import synchronize
                synchronize()
        except DeuteronError as e:
            if isinstance(e, GeneratedKernelError):  # newt's compile error, moved to the user's line
                r = classify(e.__cause__ if e.__cause__ is not None else e)
                cand.status, cand.error = r["status"], r["message"]
            else:
                cand.status, cand.error = "invalid", str(e).splitlines()[-1]
            return
        except Exception as e:
            r = classify(e)
            cand.status, cand.error = r["status"], r["message"]
            if r.get("fatal"):
                raise
            return
        ok, msg, err = self.expected.check(result, args, kwargs)
        cand.max_err = err
        if not ok:
            cand.status, cand.error = "wrong", f"does not match {self.expected.what}: {msg}"
            return
        cand.ms = timed_ms if timed_ms is not None else self.time(cand.config, b)
        cand.status = "ok"

    def time(self, cfg, b, rep: float | None = None) -> float:
        if not self.gpu:
            t0 = time.perf_counter()
            self.entry.run(b, cfg)
            return (time.perf_counter() - t0) * 1e3
        from newt.testing import do_bench
        return float(do_bench(lambda: self.entry.run(b, cfg), warmup=5, rep=rep or 25))

    def finish(self) -> Candidate:
        ok = self.ranked()
        if not ok:
            from ..errors import DeuteronError
            lines = []
            for c in list(self.results.values())[:12]:
                lines.append(f"  {c.config}: {c.status}: {c.error}")
            src = self.kernel.source
            raise DeuteronError.at(src.src, src.fdef, "D005", f"autotuning {self.kernel.__name__}: no config "
                                   "compiled, ran and matched the eager reference", kernel=self.kernel.__name__,
                                   extra="\n".join(lines))
        if self.gpu and len(ok) > 1:
            # re-time the leaders in this process, in interleaved rounds, and rank them by the median: noise
            # must not pick the winner (the minimum of a screening time and a re-time favours a lucky sample)
            t = time.perf_counter()
            args, kwargs = self.expected.fresh_args(set())
            b = self.kernel._bind(args, kwargs)
            leaders = ok[:4]
            rounds: dict = {id(c): [] for c in leaders}
            for _ in range(3):
                for c in leaders:
                    rounds[id(c)].append(self.time(c.config, b, rep=25))
            for c in leaders:
                c.ms = sorted(rounds[id(c)])[1]
            ok = sorted(leaders, key=lambda c: c.ms) + ok[4:]
            self._add("retime", t)
        return ok[0]

    # ------------------------------------------------------------------ the executor: compile, screen, time
    def _start_pool(self):
        """Compile workers (every core, no GPU) and one screening/timing worker per GPU (newt.tune), shared by
        every tune of this process (started once, warm for the next tune); a small tune -- fewer than
        ``DEUTERON_AUTOTUNE_MIN_WORKER_CONFIGS`` (8) configs -- runs in this process (compile threads) unless
        such a pool is already running or ``DEUTERON_AUTOTUNE_ISOLATE=1`` asks for workers."""
        from newt.tune import AdaptiveTimeout, ThreadExecutor, shared_executor, visible_gpus
        n = os.environ.get("DEUTERON_AUTOTUNE_WORKERS")
        opts: dict = {}
        kind = os.environ.get("NEWT_TUNE_CLUSTER") or "local"
        if "://" not in kind and kind not in ("dask",):
            kind = "local"
            if n:
                opts["compile_workers"] = int(n)
            if self.gpu:
                dev = self.entry.device
                gpus = visible_gpus()
                ng = int(os.environ.get("DEUTERON_AUTOTUNE_GPUS", "0") or 0) or len(gpus)
                if dev.index is not None and ng == 1 and dev.index < len(gpus):
                    opts["gpus"] = [gpus[dev.index]]
                else:
                    opts["gpus"] = gpus[:max(1, ng)]
            else:
                opts["gpus"] = []
                opts["time_env"] = {"NEWT_INTERPRET": "1"}
            if opts.get("gpus") == visible_gpus() and "time_env" not in opts:
                del opts["gpus"]  # the default: the same executor as @newt.autotune's
            if not os.environ.get("NEWT_TUNE_EXECUTOR"):
                kind = None
        planned = len(self.configs) if self.configs else self.max_configs
        small = planned < int(os.environ.get("DEUTERON_AUTOTUNE_MIN_WORKER_CONFIGS", "8"))
        if (kind in (None, "local") and self.gpu and small and os.environ.get("DEUTERON_AUTOTUNE_ISOLATE") != "1"
                and shared_executor(kind, create=False, **opts) is None):
            self.pool, self._own_pool = ThreadExecutor(), True
        else:
            self.pool, self._own_pool = shared_executor(kind, **opts), False
            if hasattr(self.pool, "start"):
                self.pool.start()  # the workers import and warm up while the first configs are generated
        self.compile_timeout = AdaptiveTimeout(float(os.environ.get("DEUTERON_AUTOTUNE_TIMEOUT", 120)))
        self.time_timeout = float(os.environ.get("DEUTERON_AUTOTUNE_TIMEOUT", 120))

    def _tasks_of(self, c):
        """The candidate's compile tasks and its screening/timing task (inputs made on the worker), made once
        (a candidate generated ahead is asked again when admitted; the timing's cut-off is set at submission)."""
        if c.tasks is None:
            t = time.perf_counter()
            try:
                c.tasks = self._make_tasks(c)
            finally:
                self._add("tasks", t)
            c.release()
        return c.tasks

    def _make_tasks(self, c):
        from newt.tune import ArgSpec, KernelRef, TimeTask, compile_spec_for, default_target

        from ..hostrun import _runtime_args
        from ..runtime import num_sms
        compiles, launches = [], []
        for gen, mod, prog, host_locals in c.launches:
            file = mod.__file__
            if not os.path.exists(file):  # the cache dir was cleared since the candidate was built
                from ..runtime import load_module
                mod = load_module(gen.source, stem=os.path.basename(file).rsplit("_", 1)[0])
                file = mod.__file__
            with open(file, "rb") as f:
                data = f.read()
            # the text is shipped: a worker never depends on the file still being there (or being the same)
            sha, text = hashlib.sha256(data).hexdigest(), data.decode("utf-8")
            args = _runtime_args(gen, prog, host_locals, self.kernel.fn.__globals__)
            kw = dict(gen.constexprs)
            if self.gpu:
                try:
                    kernel = getattr(mod, gen.kernel_name)
                    # the kernel's constexprs only: _NUM_SMS is the launch function's (the persistent grid), and
                    # passing it here made every persistent candidate compile on the GPU worker instead
                    compiles.append(compile_spec_for(kernel, args, kw, gen.num_warps, gen.num_stages,
                                                     target=default_target(), maxnreg=gen.maxnreg,
                                                     ref=KernelRef(file, gen.kernel_name, sha, None, text)))
                except Exception:  # the screening worker compiles it then (serially: counted)
                    compiles.append(None)
                    self.phases["compiled_on_gpu_worker"] = self.phases.get("compiled_on_gpu_worker", 0) + 1
            if gen.needs_num_sms:
                kw["_NUM_SMS"] = num_sms(self.entry.device)
            specs = [ArgSpec.of(a, seed=1000 + i) for i, a in enumerate(args)]
            launches.append((KernelRef(file, gen.launch_name, sha, None, text), specs,
                             {**kw, "num_warps": gen.num_warps, "num_stages": gen.num_stages}, None))
        return compiles, TimeTask(launches[0][0], [], launches=launches, warmup=5, rep=25,
                                  label=str(c.config))  # (its cut-off: set in _submit_time)

    def _cutoff(self) -> float | None:
        """The hopeless cut-off for a timing submitted now: a multiple (``CUTOFFS``, or
        ``DEUTERON_AUTOTUNE_CUTOFF``) of the best time so far; None before the first."""
        ok = self.ranked()
        if not ok or not self.gpu:
            return None
        return ok[0].ms * float(os.environ.get("DEUTERON_AUTOTUNE_CUTOFF") or CUTOFFS.get(self.effort, 3.0))

    def _evaluate_stream(self, configs) -> int:
        """The executor path: each candidate is generated here and its kernels submitted to the compile
        workers at once (they compile while the next candidates are generated); when all of a candidate's
        kernels are compiled it is screened and timed on a GPU worker, then checked against the oracle here.
        Returns how many candidates were new."""
        from newt.tune import COMPILE

        st = _Stream()
        slots = max(1, self.pool.compile_slots)
        configs = list(configs)
        nxt, stop = 0, False
        try:
            while True:
                while not stop and nxt < len(configs) and len(st.compile_of) < 2 * slots:
                    cand = self._admit(configs[nxt], len(st.open))
                    nxt += 1
                    if cand is _STOP:
                        stop = True
                        break
                    if cand is None:
                        continue
                    st.todo.append(cand)
                    st.open.add(cand)
                    pre = self._pre_state.pop(cand, None)
                    if cand.duplicate_of is not None:
                        if pre is not None:
                            for tid in pre[2]:
                                self._spec_compile.pop(tid, None)
                        continue
                    compiles, st.timing[cand] = self._tasks_of(cand)
                    if pre is not None:  # generated (and compiled, or compiling) ahead: take it over
                        st.waiting[cand], st.entries[cand] = pre[0], pre[1]
                        for tid in pre[2]:
                            if tid in self._spec_compile:
                                st.compile_of[tid] = self._spec_compile.pop(tid)
                        if pre[0] == 0:
                            self._submit_time(st, cand)
                        continue
                    real = [t for t in compiles if t is not None]
                    st.waiting[cand], st.entries[cand] = len(real), []
                    if not real:
                        self._submit_time(st, cand)
                    for t in real:
                        tid = self.pool.submit(COMPILE, t, "compile", self.compile_timeout.current())
                        st.compile_of[tid] = (cand, t)
                    self._drain(st, 0)  # results that came in meanwhile: keep the GPU worker fed
                if not st.compile_of and not st.time_of and (stop or nxt >= len(configs)):
                    break
                ahead = (stop or nxt >= len(configs)) and self._speculate(slots, len(st.open))  # all submitted
                self._drain(st, 0 if ahead else 0.05)
                if not self.budget_left() and self.elapsed() > self.max_seconds * 1.5:
                    self.pool.cancel()
                    self._forget_speculation()
                    for c in st.todo:
                        if c.status == "pending" and c.duplicate_of is None:
                            c.status, c.error = "timeout", "autotuning ran out of time"
                            self._finish_one(st, c)
                    break
        except BaseException:
            self.pool.cancel()
            self._forget_speculation()
            raise
        for c in st.todo:
            if c.duplicate_of is not None:
                self._copy_dup(c)
                self.record(c)
            elif c.status == "pending":
                c.status, c.error = "error", "never screened"
                self._finish_one(st, c)
        return len(st.todo)

    def _submit_time(self, st, c):
        from newt.tune import TIME
        tt = st.timing[c]
        tt.entries = st.entries[c]  # the cubins travel with the task: the worker needs no shared cache
        tt.cutoff_ms = self._cutoff()  # the best time when it is submitted, not when it was generated
        st.time_of[self.pool.submit(TIME, tt, "time", self.time_timeout)] = c

    def _forget_speculation(self):
        self._pre.clear()
        self._pre_state.clear()
        self._spec_compile.clear()

    def _speculate(self, slots: int, n_open: int) -> bool:
        """Generate one candidate of the likely next batch and submit its kernels, when compile workers are
        idle (the batch's last candidates are being timed) and the budget has room for it; True if it did."""
        from newt.tune import COMPILE
        if not self._speculate_ok or os.environ.get("DEUTERON_AUTOTUNE_SPECULATE", "1") == "0":
            return False
        room = self.max_configs - self.tested - n_open - len(self._pre)
        if len(self._spec_compile) >= slots or len(self._pre) >= 4 * slots or room <= 0 or not self.budget_left():
            return False
        running = getattr(self.pool, "pending", lambda: 0)()
        if running >= slots:
            return False
        ok = self.ranked()
        nxt = next((c for c in self._neighbours(ok) if c.key() not in self._pre), None) if ok else None
        if nxt is None:
            return False
        cand = Candidate(nxt)
        self.prepare(cand)
        self._pre[nxt.key()] = cand
        if cand.status != "pending" or cand.source_key in self.by_source:
            cand.release()
            return True  # invalid, or a duplicate: nothing to compile
        compiles, _ = self._tasks_of(cand)
        real = [t for t in compiles if t is not None]
        ids = []
        for t in real:
            tid = self.pool.submit(COMPILE, t, "compile", self.compile_timeout.current())
            self._spec_compile[tid] = (cand, t)
            ids.append(tid)
        self._pre_state[cand] = [len(real), [], ids]
        return True

    def _drain(self, st, timeout: float) -> int:
        """Handle every result the executor has (waiting at most ``timeout`` for the first); returns how
        many."""
        from newt.tune import install
        t = time.perf_counter()
        got = self.pool.poll(timeout)
        self._add("wait", t)
        for tid, res in got:
            kind = "compile" if (tid in self._spec_compile or tid in st.compile_of) else "time"
            sec = res.get("seconds")
            if isinstance(sec, (int, float)):
                self.phases[f"{kind}_worker"] = self.phases.get(f"{kind}_worker", 0.0) + float(sec)
            self._mark(f"first_{kind}_result")
            if tid in self._spec_compile:  # a candidate generated ahead, not yet admitted
                c, t = self._spec_compile.pop(tid)
                pre = self._pre_state.get(c)
                if pre is None:
                    continue
                if res.get("status") != "ok":
                    c.status, c.error = res.get("status"), res.get("message")  # recorded when admitted
                    self._pre_state.pop(c, None)
                    continue
                self.compile_timeout.observe(res.get("seconds"))
                install(res, t.key)
                pre[1].append({"key": t.key, "entry": res.get("entry")})
                pre[0] -= 1
                continue
            if tid in st.compile_of:
                c, t = st.compile_of.pop(tid)
                if c.status != "pending":
                    continue
                if res.get("status") != "ok":
                    c.status, c.error = res.get("status"), res.get("message")
                    self._finish_one(st, c)
                    continue
                self.compile_timeout.observe(res.get("seconds"))
                install(res, t.key)
                st.entries[c].append({"key": t.key, "entry": res.get("entry")})
                st.waiting[c] -= 1
                if st.waiting[c] == 0:
                    self._submit_time(st, c)
            elif tid in st.time_of:
                c = st.time_of.pop(tid)
                if c.status != "pending":
                    continue
                status = res.get("status")
                if status not in ("ok", "hopeless"):
                    c.status, c.error = status, res.get("message")
                else:
                    self._check_screened(c, res)
                self._finish_one(st, c)
        return len(got)

    def _check_screened(self, c, res):
        """A candidate that ran on a worker: compare with the oracle here; its time is the worker's."""
        if not self.gpu:
            self.check_and_time(c)  # interpreted: timed here like the serial path
            return
        if res.get("status") == "hopeless":
            c.status, c.error, c.ms = "hopeless", res.get("message"), None
            return
        ms = res.get("ms")
        self.check_and_time(c, timed_ms=ms)

    def _finish_one(self, st, c):
        if c in st.open:
            st.open.discard(c)
            self.record(c)


class _Stream:
    """The state of one batch on the executor path."""

    def __init__(self):
        self.todo: list = []  # the batch's candidates, in order
        self.open: set = set()  # admitted, not yet recorded
        self.compile_of: dict = {}  # executor task id -> (candidate, compile task)
        self.time_of: dict = {}  # executor task id -> candidate
        self.waiting: dict = {}  # candidate -> compile tasks left
        self.entries: dict = {}  # candidate -> compiled entries (bytes) for its timing task
        self.timing: dict = {}  # candidate -> its timing task


#: the main process's own phases (``Tuner.phases``); the rest are worker totals, marks and counts
_MAIN_PHASES = ("oracle", "pool_start", "generate", "tasks", "check", "wait", "retime")


def _finite(x):
    return x is not None and math.isfinite(x)
