"""The ring of a warp-specialized loop as its schedule models replay it (``warpspec.simulate`` and the
``simulate`` of ``pingpong``, ``overlap`` and ``ppov``): a module of its own, importing nothing of the backend,
so that each model can use it without an import cycle."""

from __future__ import annotations

__all__ = ["RingModel", "TurnBarriers"]


class RingModel:
    """The ring's mbarriers and its producer, as the schedule models replay them (:func:`simulate`, and
    ``pingpong`` / ``overlap`` / ``ppov``'s ``simulate``): per slot the phase numbers of ``full`` and ``empty``
    and the iteration whose tiles it holds (``content``); the producer fills slot after slot, ``total``
    iterations, each once ``empty`` has completed the phase of parity ``phase ^ producer_xor``.  The consumers'
    side is each model's own: it reads ``full_phase`` / ``content`` and completes ``empty_phase``."""

    def __init__(self, nb: int, total: int, trace: list, producer_xor: int = 1, slot_in_trace: bool = False):
        self.nb, self.total, self.trace = nb, total, trace
        self.producer_xor, self.slot_in_trace = producer_xor, slot_in_trace
        self.full_phase = [0] * nb
        self.empty_phase = [0] * nb
        self.empty_count = [0] * nb  # releases of the slot in its current phase (``release``)
        self.content: list[int | None] = [None] * nb
        self.j = self.slot = self.phase = 0

    @staticmethod
    def done(phase_no: int, parity: int) -> bool:
        """try_wait.parity: the phase with this parity has completed."""
        return (phase_no & 1) != parity

    def produce(self, readers) -> bool:
        """Fill the next slot if its ``empty`` barrier lets the producer; ``readers(slot)``: who still reads the
        slot (nothing may: an AssertionError).  Returns whether it moved."""
        if self.j >= self.total or not self.done(self.empty_phase[self.slot], self.phase ^ self.producer_xor):
            return False
        who = readers(self.slot)
        assert not who, f"producer refills slot {self.slot} while {who} read it"
        self.content[self.slot] = self.j
        self.full_phase[self.slot] += 1     # expect_tx + the copies: one arrival, the transaction complete
        self.trace.append(("p", self.j, self.slot) if self.slot_in_trace else ("p", self.j))
        self.j += 1
        self.slot += 1
        if self.slot == self.nb:
            self.slot, self.phase = 0, self.phase ^ 1
        return True

    def release(self, slot: int, consumers: int) -> None:
        """One consumer (warpgroup) releases ``slot``; its ``empty`` barrier completes a phase once all
        ``consumers`` have."""
        self.empty_count[slot] += 1
        if self.empty_count[slot] == consumers:
            self.empty_count[slot] = 0
            self.empty_phase[slot] += 1

    def run(self, produce, step, progs: list, pc: list, order: str) -> None:
        """Replay the producer (``produce()``) and the consumer warpgroups (``step(k)`` runs warpgroup ``k``'s
        next action of ``progs[k]``, ``pc[k]`` its position) until every warpgroup is done: each move the side
        ``order`` names next (cycled: "p", "0", "1", ...) goes first, the others in turn after it when it cannot
        move; an AssertionError names every side's position when none can (a deadlock)."""
        import itertools
        groups = len(progs)
        agents: dict = {"p": produce, **{str(k): (lambda k=k: step(k)) for k in range(groups)}}
        names = list(agents)
        picks = itertools.cycle(order)
        while any(pc[k] < len(progs[k]) for k in range(groups)):
            first = next(picks)
            start = names.index(first) if first in agents else 0
            if not any(agents[names[(start + j) % len(names)]]() for j in range(len(names))):
                raise AssertionError("deadlock: " + ", ".join(
                    f"warpgroup {k} at {progs[k][pc[k]] if pc[k] < len(progs[k]) else 'exit'}" for k in range(groups))
                    + f", producer at iteration {self.j}")


class TurnBarriers:
    """The named barriers that pass the turn between consumer warpgroups (the ping-pong's, in ``pingpong`` and
    ``ppov``'s ``simulate``), and who holds the turn: barrier ``b`` belongs to warpgroup ``b``; a phase completes
    on two participants, the previous warpgroup's ``bar.arrive`` and the owner's ``bar.sync`` (which blocks until
    then).  ``first``: the hardware id of barrier 0, for the messages; ``first_holds``: warpgroup 0 starts in its
    turn (it skips its first ``bar.sync``)."""

    def __init__(self, n: int, first: int = 0, first_holds: bool = False):
        self.first = first
        self.count = [0] * n          # participants in the current phase of barrier b
        self.waiting = [False] * n    # warpgroup b is blocked in its bar.sync
        self.passed = [False] * n     # the phase warpgroup b synced on has completed
        self.in_turn = [k == 0 and first_holds for k in range(n)]
        self.turns: list[int] = [0] if first_holds else []  # the order in which turns begin

    def _complete(self, b: int):
        self.count[b] = 0
        assert self.waiting[b], f"barrier {self.first + b}: a phase completed by two arrivals (no bar.sync in it)"
        self.waiting[b] = False
        self.passed[b] = True

    def _join(self, b: int):
        self.count[b] += 1
        assert self.count[b] <= 2
        if self.count[b] == 2:
            self._complete(b)

    def arrive(self, b: int):
        """``bar.arrive`` on barrier ``b`` (does not block)."""
        self._join(b)

    def sync(self, k: int) -> bool:
        """Warpgroup ``k``'s ``bar.sync`` on its own barrier: whether it has passed (else it stays blocked and
        is asked again)."""
        if not self.waiting[k] and not self.passed[k]:
            self.waiting[k] = True
            self._join(k)
        if not self.passed[k]:
            return False
        self.passed[k] = False
        return True

    def take_turn(self, k: int) -> bool:
        """Warpgroup ``k``'s ``bar.sync``, then its turn: whether it holds the turn now (else it is blocked)."""
        if not self.sync(k):
            return False
        assert not any(self.in_turn), f"warpgroup {k} enters a turn while {self.in_turn.index(True)} holds one"
        self.in_turn[k] = True
        self.turns.append(k)
        return True

    def leave_turn(self, k: int):
        """Warpgroup ``k`` ends its turn (its ``bar.arrive`` for the next one is :meth:`arrive`)."""
        assert self.in_turn[k], f"warpgroup {k} passes a turn it does not hold"
        self.in_turn[k] = False

    def check_exit(self):
        assert not any(self.count), f"named barriers left with pending arrivals at exit: {self.count}"
        n = len(self.count)
        assert self.turns == [t % n for t in range(len(self.turns))], f"turns out of round-robin order: {self.turns}"
