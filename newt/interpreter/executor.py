"""Running a kernel's IR over a grid of programs.

``Plan`` turns an ``ir.Function`` into flat instruction lists (one per region)
once; ``Executor`` runs them over a batch of programs at a time.  Values carry
a leading program dimension (see ``ops``); structured control flow runs SIMT
style: when programs disagree on a branch or a trip count, both branches (or
the extra iterations) run with an *active mask* of programs, and the results
are merged with ``where``.  Side effects (loads, stores, atomics, prints,
asserts) only happen for active programs.

Execution modes (``Analysis.sequential_reason`` decides, ``mode=`` overrides):

* ``vectorized``: all programs of a batch run together in lockstep, op by op.
  Programs that only communicate through memory with atomics whose results
  nobody reads cannot tell the difference.
* ``sequential``: one program after the other in order of their linear id
  (x fastest), used when a program can observe another one: an atomic whose
  result is used (tickets, locks, counters) or a ``volatile`` load (spin-waits).
"""

from __future__ import annotations

import math
import os
import sys

import torch

from newt.ir.ops import PURE, TERMINATORS
from newt.ir.types import scalar_of

from . import dtypes as D
from .analysis import Analysis
from .errors import DeadlockError, InterpreterError
from .memory import Memory
from .ops import OPS, bshape, op

#: lanes (programs x largest block) that one vectorized batch may hold
LANE_BUDGET = int(os.environ.get("NEWT_INTERPRET_LANES", 1 << 20))
#: iterations after which a while loop starts checking whether it can still make progress
STUCK_CHECK_AFTER = 10_000



class RegionPlan:
    __slots__ = ("args", "instrs", "term")

    def __init__(self, args, instrs, term):
        self.args = args
        self.instrs = instrs
        self.term = term


class Plan:
    """The executable form of one ``ir.Function`` (built once, cached on the function)."""

    def __init__(self, fn):
        self.fn = fn
        self.analysis = Analysis(fn)
        self._slots: dict[int, int] = {}
        self._regions: dict[int, RegionPlan] = {}
        self._dead = self._dead_ops(fn)
        self.body = self.region(fn.body)
        self.n_slots = len(self._slots)
        self.param_slots = [self.slot(p.value) for p in fn.params if not p.constexpr and p.value is not None]
        self.run_params = [p for p in fn.params if not p.constexpr and p.value is not None]

    def slot(self, v) -> int:
        k = id(v)
        s = self._slots.get(k)
        if s is None:
            s = len(self._slots)
            self._slots[k] = s
        return s

    @staticmethod
    def _dead_ops(fn):
        """Ops worth running: every op with an effect, and the pure ops their values need."""
        from .analysis import walk_regions
        ops = list(walk_regions(fn.body))
        uses: dict[int, int] = {}
        for o in ops:
            for v in o.operands:
                uses[id(v)] = uses.get(id(v), 0) + 1
        dead: set[int] = set()
        changed = True
        while changed:
            changed = False
            for o in ops:
                if id(o) in dead or o.name not in PURE or o.regions:
                    continue
                if all(uses.get(id(r), 0) == 0 for r in o.results):
                    dead.add(id(o))
                    changed = True
                    for v in o.operands:
                        uses[id(v)] -= 1
        return dead

    def region(self, region) -> RegionPlan:
        rp = self._regions.get(id(region))
        if rp is not None:
            return rp
        args = [self.slot(a) for a in region.args]
        instrs = []
        term = None
        for o in region.ops:
            if o.name in TERMINATORS:
                term = [self.slot(v) for v in o.operands]
                continue
            if id(o) in self._dead:
                continue
            make = OPS.get(o.name)
            if make is None:
                raise InterpreterError(f"the interpreter does not implement the IR op '{o.name}'",
                                       kernel=self.fn.name, loc=o.loc)
            f = make(o, self)
            ins = tuple(self.slot(v) for v in o.operands)
            outs = tuple(self.slot(r) for r in o.results)
            instrs.append([f, ins, outs, (), o])
        self._add_frees(region, instrs, term)
        rp = RegionPlan(args, [tuple(i[:4]) for i in instrs], term)
        self._regions[id(region)] = rp
        return rp


    def _add_frees(self, region, instrs, term):
        """After its last use in this region, a value defined here is dropped (peak memory of big batches)."""
        from .analysis import walk_regions
        defined = {self.slot(a) for a in region.args}
        for ins in instrs:
            defined.update(ins[2])
        last: dict[int, int] = {s: -1 for s in defined}
        for i, ins in enumerate(instrs):
            o = ins[4]
            for s in ins[2]:
                last[s] = max(last[s], i)
            used = [self.slot(v) for v in o.operands]
            for r in o.regions:
                used.extend(self.slot(v) for n in walk_regions(r) for v in n.operands)
            for s in used:
                if s in last:
                    last[s] = i
        keep = set(term or ())
        frees: dict[int, list] = {}
        for s, i in last.items():
            if s not in keep and i >= 0:
                frees.setdefault(i, []).append(s)
        for i, ins in enumerate(instrs):
            ins[3] = tuple(frees.get(i, ()))


def get_plan(fn) -> Plan:
    p = getattr(fn, "_newt_interpreter_plan", None)
    if p is None:
        p = Plan(fn)
        try:
            fn._newt_interpreter_plan = p
        except AttributeError:  # pragma: no cover - Function always takes attributes
            pass
    return p


# ---------------------------------------------------------------------------
# the executor
# ---------------------------------------------------------------------------


def _merge(mask, a, b):
    """``where(mask per program, a, b)`` for values of any rank and dtype."""
    r = max(a.dim(), b.dim()) - 1
    m = mask.view((mask.shape[0],) + (1,) * r)
    if a.dtype in D.FP8_TORCH:
        return torch.where(m, a.view(torch.int8), b.view(torch.int8)).view(a.dtype)
    return torch.where(m, a, b)


def _pack(vals):
    if not vals:
        return None
    if len(vals) == 1:
        return vals[0]
    return tuple(vals)


class Executor:
    def __init__(self, plan: Plan, grid, mem: Memory, *, stdout=None, print_mode=None):
        self.plan = plan
        self.kernel_name = plan.fn.name
        self.grid = grid
        self.grid_t = [torch.tensor([g], dtype=torch.int32) for g in grid]
        self.mem = mem
        self.env = [None] * plan.n_slots
        self.stdout = stdout
        self.print_mode = print_mode
        self.P = 1
        self.start = 0
        self.active: torch.Tensor | None = None  # which programs of the batch run (None: all)
        self.n_active = 1
        self.pid_t: list[torch.Tensor] | None = None
        self.printed: list = []  # (program index in the batch, lines) from device_print

    # ------------------------------------------------------------------ batches
    def set_batch(self, start: int, end: int):
        self.start = start
        self.P = end - start
        self.active = None
        self.n_active = self.P
        gx, gy, _ = self.grid
        lin = torch.arange(start, end, dtype=torch.int64)
        self.pid_t = [(lin % gx).to(torch.int32), ((lin // gx) % gy).to(torch.int32),
                      (lin // (gx * gy)).to(torch.int32)]

    def run(self, start: int, end: int, params):
        self.set_batch(start, end)
        env = self.env
        for s, v in zip(self.plan.param_slots, params):
            env[s] = v
        try:
            self.run_region(self.plan.body, ())
        finally:
            self.flush_prints()

    def flush_prints(self):
        """Write what ``device_print`` collected, grouped by program (in program order)."""
        if not self.printed:
            return
        out = self.stdout or sys.stdout
        lines = [ln for _, chunk in sorted(self.printed, key=lambda x: x[0]) for ln in chunk]
        self.printed = []
        if lines:
            out.write("\n".join(lines) + "\n")

    def pid_of(self, p: int):
        gx, gy, _ = self.grid
        lin = self.start + p
        return (lin % gx, (lin // gx) % gy, lin // (gx * gy))

    def active_programs(self):
        if self.active is None:
            return range(self.P)
        return torch.nonzero(self.active).view(-1).tolist()

    def lane_position(self, lane: int, shape):
        """(program id, block index) of flat lane ``lane`` of a value of ``shape``."""
        block = tuple(shape[1:])
        n = math.prod(block) if block else 1
        p = lane // n
        if shape[0] == 1 and self.P > 1:
            progs = self.active_programs()
            p = progs[0] if len(progs) else 0
        i = lane % n
        idx = []
        for d in reversed(block):
            idx.append(i % d)
            i //= d
        return self.pid_of(p), tuple(reversed(idx))

    def provenance_of(self, o):
        return self.plan.analysis.provenance.get(id(o))

    # ------------------------------------------------------------------ regions
    def run_region(self, rp: RegionPlan, argvals):
        env = self.env
        for s, v in zip(rp.args, argvals):
            env[s] = v
        for f, ins, outs, frees in rp.instrs:
            r = f(self, [env[i] for i in ins])
            if outs:
                if len(outs) == 1:
                    env[outs[0]] = r
                else:
                    for s, v in zip(outs, r):
                        env[s] = v
            for s in frees:
                env[s] = None
        if rp.term is None:
            return []
        return [env[i] for i in rp.term]

    def run_masked(self, active, n_active, rp, argvals):
        saved = self.active, self.n_active
        self.active, self.n_active = active, n_active
        try:
            return self.run_region(rp, argvals)
        finally:
            self.active, self.n_active = saved

    def eval_combine(self, rp: RegionPlan, lhs, rhs):
        """Run a combine region elementwise over blocks (each element is a lane)."""
        shape = bshape(*[t.shape for t in lhs + rhs])
        n = math.prod(shape)
        flat = [t.expand(shape).reshape(n) for t in lhs + rhs]
        saved = self.P, self.active, self.n_active
        self.P, self.active, self.n_active = n, None, n
        try:
            vals = self.run_region(rp, flat)
        finally:
            self.P, self.active, self.n_active = saved
        return [(v.expand(n) if v.shape[0] != n else v).reshape(shape) for v in vals]

    def uniform_int(self, t):
        """The value of a per-program scalar if all active programs agree on it, else None."""
        if t.shape[0] == 1:
            return int(t.item())
        v = t if self.active is None else t[self.active]
        lo, hi = torch.aminmax(v)
        lo, hi = int(lo), int(hi)
        return lo if lo == hi else None


# ---------------------------------------------------------------------------
# structured control flow
# ---------------------------------------------------------------------------


@op("scf.if")
def _scf_if(o, plan):
    then_p, else_p = plan.region(o.regions[0]), plan.region(o.regions[1])

    def f(ex, args):
        c = args[0]
        if c.shape[0] == 1:
            return _pack(ex.run_region(then_p if bool(c) else else_p, ()))
        act = ex.active
        ct = c if act is None else c & act
        nt = int(ct.sum())
        if nt == ex.n_active:
            return _pack(ex.run_region(then_p, ()))
        if nt == 0:
            return _pack(ex.run_region(else_p, ()))
        ce = ~c if act is None else act & ~c
        tv = ex.run_masked(ct, nt, then_p, ())
        ev = ex.run_masked(ce, ex.n_active - nt, else_p, ())
        return _pack([_merge(c, t, e) for t, e in zip(tv, ev)])
    return f


@op("scf.for")
def _scf_for(o, plan):
    body = plan.region(o.regions[0])
    iv_dt = D.rep_dtype(scalar_of(o.operands[0].type))

    def f(ex, args):
        lb, ub, st = args[0], args[1], args[2]
        carried = list(args[3:])
        i, u, s = ex.uniform_int(lb), ex.uniform_int(ub), ex.uniform_int(st)
        if i is not None and u is not None and s is not None:
            if s == 0:
                if i > u:
                    raise DeadlockError(f"the for loop steps by 0 from {i} with bound {u}: it never ends",
                                        kernel=ex.kernel_name, loc=o.loc)
                return _pack(carried)
            if s > 0:
                while i < u:
                    carried = ex.run_region(body, [torch.tensor([i], dtype=iv_dt)] + carried)
                    i += s
            else:
                while i > u:
                    carried = ex.run_region(body, [torch.tensor([i], dtype=iv_dt)] + carried)
                    i += s
            return _pack(carried)
        return _pack(_simt_for(ex, o, body, iv_dt, lb, ub, st, carried))
    return f


def _simt_for(ex, o, body, iv_dt, lb, ub, st, carried):
    """A for loop whose bounds differ between programs: iterate while any program is in range."""
    outer = ex.active
    iv = lb.to(torch.int64).expand(ex.P)
    ub = ub.to(torch.int64)
    st = st.to(torch.int64)
    pos = st > 0
    if bool(((st == 0) & (iv > ub) if outer is None else (st == 0) & (iv > ub) & outer).any()):
        raise DeadlockError("the for loop steps by 0 in some program: it never ends", kernel=ex.kernel_name,
                            loc=o.loc)
    while True:
        cont = torch.where(pos, iv < ub, iv > ub)
        act = cont if outer is None else cont & outer
        n = int(act.sum())
        if n == 0:
            return carried
        if n == ex.n_active:
            carried = ex.run_region(body, [iv.to(iv_dt)] + carried)
        else:
            new = ex.run_masked(act, n, body, [iv.to(iv_dt)] + carried)
            carried = [_merge(act, a, b) for a, b in zip(new, carried)]
        iv = iv + st


@op("scf.while")
def _scf_while(o, plan):
    before, after = plan.region(o.regions[0]), plan.region(o.regions[1])

    def f(ex, args):
        state = list(args)
        act, n_act = ex.active, ex.n_active
        results = None
        it = 0
        prev = None
        while True:
            vals = ex.run_masked(act, n_act, before, state)
            cond, fwd = vals[0], vals[1:]
            if cond.shape[0] == 1:
                stay, n_stay = (act, n_act) if bool(cond) else (None, 0)
            else:
                stay = cond if act is None else cond & act
                n_stay = int(stay.sum())
            if n_stay == 0:
                if results is None or act is None:
                    results = fwd
                else:
                    results = [_merge(act, a, b) for a, b in zip(fwd, results)]
                break
            if n_stay < n_act:
                leaving = ~cond if act is None else act & ~cond
                results = fwd if results is None else [_merge(leaving, a, b) for a, b in zip(fwd, results)]
                act, n_act = stay, n_stay
            state = ex.run_masked(act, n_act, after, fwd)
            it += 1
            # a stuck loop stays stuck: compare one pair of consecutive iterations out of every 64
            if it >= STUCK_CHECK_AFTER and it % 64 in (0, 1):
                prev = _check_progress(ex, o, act, state, prev if it % 64 == 1 else None, it)
        return _pack(results)
    return f


def _check_progress(ex, o, act, state, prev, it):
    """Raise when a loop iteration changed neither its active programs' state nor memory."""
    snap = [s if act is None or s.shape[0] == 1 else s[act] for s in state]
    epoch = ex.mem.epoch
    if prev is not None and prev[0] == epoch and len(prev[1]) == len(snap) and all(
            a.shape == b.shape and torch.equal(a, b) for a, b in zip(prev[1], snap)):
        progs = ex.active_programs() if act is None else torch.nonzero(act).view(-1).tolist()
        pid = ex.pid_of(progs[0]) if len(progs) else None
        if ex.P == 1:
            hint = ("in sequential mode programs run one after another in order of their ids, so a program "
                    "cannot wait for a later one")
        else:
            hint = ("the programs run in lockstep here; a program spin-waiting on another needs "
                    "mode='sequential' (or NEWT_INTERPRET_MODE=sequential)")
        raise DeadlockError(f"this while loop ran {it} iterations and its last one changed neither its loop "
                            "variables nor memory, so it can never finish", kernel=ex.kernel_name, loc=o.loc,
                            pid=pid, hint=hint)
    return (epoch, [s.clone() for s in snap])


# ---------------------------------------------------------------------------
# launching
# ---------------------------------------------------------------------------


def normalize_grid(grid):
    if isinstance(grid, int):
        grid = (grid,)
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3:
        raise ValueError(f"the grid must have 1 to 3 dimensions, got {grid}")
    if any(g < 0 for g in grid):
        raise ValueError(f"grid dimensions must be >= 0, got {grid}")
    return grid + (1,) * (3 - len(grid))


def choose_mode(plan: Plan, mode: str | None) -> str:
    mode = (mode or os.environ.get("NEWT_INTERPRET_MODE") or "auto").strip().lower()
    if mode not in ("auto", "vectorized", "sequential"):
        raise ValueError(f"mode must be 'auto', 'vectorized' or 'sequential', got {mode!r}")
    if mode == "auto":
        return "sequential" if plan.analysis.sequential_reason else "vectorized"
    return mode


def _scalar_arg(p, v):
    dt = p.type
    if isinstance(v, torch.Tensor):
        if v.numel() != 1:
            raise TypeError(f"argument {p.name!r} is a scalar parameter ({dt!r}) but got a tensor of shape "
                            f"{tuple(v.shape)}")
        v = v.item()
    if hasattr(v, "item") and not isinstance(v, (int, float, bool)):
        v = v.item()  # numpy scalars
    if dt.is_floating():
        if not isinstance(v, (int, float, bool)):
            raise TypeError(f"argument {p.name!r} ({dt!r}) needs a number, got {type(v).__name__}")
        return D.python_constant(float(v), dt)
    if not isinstance(v, (int, bool)):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise TypeError(f"argument {p.name!r} ({dt!r}) needs an integer, got {v!r}")
    v = int(v)
    bits = dt.primitive_bitwidth
    if dt.name == "int1":
        lo, hi = 0, 1
    elif dt.is_int_signed():
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        lo, hi = -(1 << (bits - 1)), (1 << bits) - 1  # negative values pass as their two's complement bits
    if not lo <= v <= hi:
        raise TypeError(f"argument {p.name!r}: {v} does not fit in {dt!r}")
    return D.python_constant(v, dt)


def launch(fn, grid, args, *, num_warps: int = 4, mode: str | None = None, stdout=None,
           print_mode: str | None = None):
    """Run ``fn`` (an ``ir.Function``) over ``grid`` on the CPU; see ``newt.interpreter``."""
    plan = get_plan(fn)
    grid = normalize_grid(grid)
    params = plan.run_params
    args = list(args)
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise TypeError(f"kernel '{fn.name}' takes {len(params)} run-time arguments ({names}), got {len(args)}")
    mem = Memory()
    values = []
    for p, a in zip(params, args):
        if p.type.is_ptr():
            if a is None:
                values.append(torch.zeros(1, dtype=torch.int64))
                from .memory import ArgInfo
                info = ArgInfo(p.name, 0, 0, None, 0, None)
                mem.args.append(info)
                mem.by_name[p.name] = info
                continue
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"argument {p.name!r} is a pointer ({p.type}) and needs a torch tensor, "
                                f"got {type(a).__name__}")
            addr, _ = mem.add_tensor(p.name, a)
            values.append(torch.tensor([addr], dtype=torch.int64))
        else:
            values.append(_scalar_arg(p, a))
    mem.finalize()
    mem.check_alignment = plan.analysis.check_alignment
    total = grid[0] * grid[1] * grid[2]
    if total == 0:
        return
    m = choose_mode(plan, mode)
    ex = Executor(plan, grid, mem, stdout=stdout, print_mode=print_mode)
    if m == "sequential":
        batch = 1
    else:
        batch = max(1, min(total, LANE_BUDGET // max(plan.analysis.max_numel, 1)))
    threads = _threads()
    saved_threads = torch.get_num_threads()
    if threads and threads != saved_threads:
        torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            for start in range(0, total, batch):
                ex.run(start, min(start + batch, total), values)
    finally:
        if threads and threads != saved_threads:
            torch.set_num_threads(saved_threads)
        mem.write_back()


def _threads() -> int:
    """torch intra-op threads while a kernel runs: ``NEWT_INTERPRET_THREADS`` (0 = leave torch's setting).

    The default is 1: the interpreter issues many small ops, which gain little from
    threads, and on a busy machine torch's worker threads spin so much that a kernel
    can take 100x longer.  Large kernels on an idle many-core machine may prefer more.
    """
    v = os.environ.get("NEWT_INTERPRET_THREADS", "1").strip()
    try:
        return max(0, int(v))
    except ValueError:
        raise ValueError(f"NEWT_INTERPRET_THREADS must be an integer, got {v!r}") from None
