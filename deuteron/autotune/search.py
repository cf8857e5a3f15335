"""Search strategies over a kernel's config space: pattern search, differential evolution, a surrogate model.

Every strategy proposes batches of configs and lets the tuner evaluate a whole
batch at once (``tuner.evaluate``: deduplicated by config and by generated
source, compiled in parallel on newt.tune's workers, failures classified), so
a batch compiles on every core while the previous one is timed.

* :class:`Genome` -- configs as vectors of choice indices, one gene per tunable
  value (block sizes, reduction loops, warps, stages, L2 groupings, loop
  orders, pid type, user tunables; in the wide space of effort ``full`` also
  each tile loop's unroll factor and pipelining depth); the choices of each
  gene are found by sampling the space, so genes that the space grows later
  are included.
* :func:`differential_evolution` -- DE/rand/1/bin over the genome: a
  population, mutants ``a + F (b - c)`` on ordinal genes, binomial crossover,
  greedy selection; one generation is one batch.
* :func:`surrogate_search` -- model-guided: a scikit-learn extra-trees
  regressor fitted on log(time) of every evaluated config (failures get a
  penalty), proposing the configs with the lowest lower confidence bound
  (mean - std over the trees) from a pool of neighbours, mutants and random
  points.  Without scikit-learn it falls back to differential evolution.
"""

from __future__ import annotations

import math

from ..config import RANGE_FIELDS, Config
from ..space import normalize_ranges

__all__ = ["Genome", "differential_evolution", "surrogate_search", "have_sklearn"]


def have_sklearn() -> bool:
    try:
        import sklearn.ensemble  # noqa: F401
    except ImportError:
        return False
    return True


def _flat(cfg: Config) -> dict:
    """gene name -> value (hashable)."""
    d = cfg.to_dict()
    out = {}
    for k, v in d.items():
        if isinstance(v, list) and k != "loop_orders":
            for i, x in enumerate(v):
                out[(k, i)] = x
        elif isinstance(v, list):
            for i, x in enumerate(v):
                out[(k, i)] = tuple(x)
        elif isinstance(v, dict):
            for kk, x in v.items():
                out[(k, kk)] = x
        else:
            out[(k, None)] = v
    return out


def _unflat(genes: dict, base: Config) -> Config:
    d = base.to_dict()
    for (k, i), v in genes.items():
        if i is None:
            d[k] = v
        elif isinstance(i, int) and isinstance(d.get(k), list):
            lst = list(d[k])
            if i < len(lst):
                lst[i] = list(v) if k == "loop_orders" else v
            d[k] = lst
        elif isinstance(i, int) and k in RANGE_FIELDS and v is not None:  # a per-loop knob the base leaves unset
            lst = list(d.get(k) or [])
            lst += [0] * (i + 1 - len(lst))
            lst[i] = v
            d[k] = lst
        elif isinstance(d.get(k), dict):
            d[k] = {**d[k], i: v}
    return normalize_ranges(Config.from_dict(d))


def _order(v):
    if v is None:
        return (0, 0, "")
    if isinstance(v, bool):
        return (1, int(v), "")
    if isinstance(v, (int, float)):
        return (1, v, "")
    return (2, 0, repr(v))


class Genome:
    def __init__(self, space, rng, samples: int = 300, wide: bool = False):
        self.space = space
        self.rng = rng
        self.base = space.default()
        doms: dict = {}
        pts = [self.base] + [space.random(rng, wide=wide) for _ in range(samples)] + space.neighbors(self.base,
                                                                                                     wide=wide)
        for c in pts:
            for g, v in _flat(c).items():
                doms.setdefault(g, set()).add(v)
        for g in doms:  # a per-loop knob (or the register cap) left unset is 0 (newt's default): a choice of its own
            if g[0] in RANGE_FIELDS or g[0] == "maxnreg":
                doms[g].add(0)
            elif g[0] == "indexing":  # unset (pointer arithmetic) beside the descriptor form the TMA moves add
                doms[g].add(None)
        self.genes = sorted(doms, key=repr)
        self.domains = {g: sorted(doms[g], key=_order) for g in self.genes}
        self.ordinal = {g: all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.domains[g])
                        for g in self.genes}

    def encode(self, cfg: Config) -> list:
        f = _flat(cfg)
        out = []
        for g in self.genes:
            dom = self.domains[g]
            v = f.get(g)
            if v is None and (g[0] in RANGE_FIELDS or g[0] == "maxnreg"):
                v = 0
            out.append(dom.index(v) if v in dom else 0)
        return out

    def decode(self, vec) -> Config | None:
        genes = {g: self.domains[g][int(i)] for g, i in zip(self.genes, vec)}
        try:
            cfg = _unflat(genes, self.base)
        except Exception:  # not a valid config
            return None
        return cfg if self.space.feasible(cfg) else None

    def mutant(self, a, b, c, target, f: float = 0.7, cr: float = 0.7):
        """DE/rand/1/bin: ``a + f (b - c)`` on ordinal genes, a random pick of a/b on categorical ones, then
        binomial crossover with ``target`` (at least one gene from the mutant)."""
        rng = self.rng
        n = len(self.genes)
        forced = rng.randrange(n) if n else 0
        out = []
        for j, g in enumerate(self.genes):
            if rng.random() < cr or j == forced:
                size = len(self.domains[g])
                if self.ordinal[g]:
                    v = int(round(a[j] + f * (b[j] - c[j])))
                    if b[j] != c[j] and v == a[j]:
                        v += 1 if b[j] > c[j] else -1
                else:
                    v = a[j] if rng.random() < 0.5 else b[j]
                out.append(min(max(v, 0), size - 1))
            else:
                out.append(target[j])
        return out


def _ms(tuner, cfg) -> float:
    c = tuner.results.get(cfg.key())
    if c is None or c.status != "ok" or c.ms is None:
        return math.inf
    return c.ms


def differential_evolution(tuner, genome: Genome, population: list, generations: int | None = None,
                           f: float = 0.7, cr: float = 0.7) -> list:
    """Evolve ``population`` (configs, evaluated first) while the tuner's budget lasts; returns it."""
    rng = genome.rng
    pop = [c for c in population if c is not None]
    tuner.evaluate(pop)
    pop = [c for c in pop if c.key() in tuner.results]
    if len(pop) < 4:
        return pop
    gen = 0
    while tuner.budget_left() and (generations is None or gen < generations):
        gen += 1
        trials = []
        vecs = [genome.encode(c) for c in pop]
        for i in range(len(pop)):
            for _ in range(8):  # a feasible, new trial for this slot
                a, b, c = rng.sample([k for k in range(len(pop)) if k != i], 3)
                t = genome.decode(genome.mutant(vecs[a], vecs[b], vecs[c], vecs[i], f, cr))
                if t is not None and t.key() not in tuner.results:
                    break
                t = None
            trials.append(t)
        new = [t for t in trials if t is not None]
        if not new:
            break
        tuner.evaluate(new)
        improved = 0
        for i, t in enumerate(trials):
            if t is not None and _ms(tuner, t) < _ms(tuner, pop[i]):
                pop[i] = t
                improved += 1
        if improved == 0 and gen >= 2:
            break
    return pop


def surrogate_search(tuner, genome: Genome, population: list, batch: int = 8, rounds: int | None = None,
                     kappa: float = 1.0, pool_size: int = 120) -> None:
    """Model-guided search (see the module's docstring); stops after three rounds without improvement."""
    if not have_sklearn():
        differential_evolution(tuner, genome, population)
        return
    import numpy as np
    from sklearn.ensemble import ExtraTreesRegressor
    rng = genome.rng
    stale = 0
    r = 0
    while tuner.budget_left() and (rounds is None or r < rounds):
        r += 1
        done = list(tuner.results.values())
        oks = [c.ms for c in done if c.status == "ok" and c.ms]
        if len(oks) < 3:
            tuner.evaluate([tuner.space.random(rng, wide=getattr(tuner, "wide", False)) for _ in range(batch)])
            continue
        worst = math.log(max(oks)) + math.log(4.0)
        X = np.array([genome.encode(c.config) for c in done], dtype=float)
        y = np.array([math.log(c.ms) if c.status == "ok" and c.ms else worst for c in done])
        model = ExtraTreesRegressor(n_estimators=64, min_samples_leaf=1, random_state=rng.randrange(1 << 30))
        model.fit(X, y)
        ranked = tuner.ranked()
        best_before = ranked[0].ms if ranked else math.inf
        wide = getattr(tuner, "wide", False)
        pool = {}
        for c in ranked[:5]:
            for nb in tuner.space.neighbors(c.config, wide=wide):
                pool.setdefault(nb.key(), nb)
        vecs = [genome.encode(c.config) for c in ranked[:16]]
        for _ in range(pool_size // 2):
            if len(vecs) >= 4:
                a, b, c, t = rng.sample(vecs, 4)
                m = genome.decode(genome.mutant(a, b, c, t))
                if m is not None:
                    pool.setdefault(m.key(), m)
        for _ in range(pool_size // 4):
            m = tuner.space.random(rng, wide=wide)
            pool.setdefault(m.key(), m)
        cands = [c for k, c in pool.items() if k not in tuner.results]
        if not cands:
            break
        P = np.array([genome.encode(c) for c in cands], dtype=float)
        per_tree = np.stack([t.predict(P) for t in model.estimators_])
        score = per_tree.mean(axis=0) - kappa * per_tree.std(axis=0)
        order = np.argsort(score)
        tuner.evaluate([cands[i] for i in order[:batch]])
        ranked = tuner.ranked()
        if ranked and ranked[0].ms < best_before * 0.995:
            stale = 0
        else:
            stale += 1
            if stale >= 3:
                break
