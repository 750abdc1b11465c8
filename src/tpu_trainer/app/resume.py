"""Resuming a run after a preemption: its segments in the store, and the budgets that say how
often a run comes back.

A run is one or more segments (``store/segments.py``): the first attempt, then one per resume.
:class:`SegmentBook` keeps the current segment of a launcher's run: where its lines begin in
worker 0's log, its first step (which ends the recovery from the interruption before it), and
how it ended. :class:`Budgets` holds the two budgets a run draws on: preemptions (the capacity
was taken back; MaxText restores its last durable checkpoint) and transient errors (the
diagnosis marks the error as one that goes away by itself); any other error never retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.app.ending import Cut, facts_in_log, wasted_steps
from tpu_trainer.store.db import RunStore, SegmentEnd


@dataclass
class Budgets:
    """What is left of a run's two budgets."""

    preemptions: int = 0
    errors: int = 0

    def take(self, *, preempted: bool) -> bool:
        """Spend one retry of the kind the interruption calls for; False when none is left."""
        if preempted:
            if self.preemptions <= 0:
                return False
            self.preemptions -= 1
            return True
        if self.errors <= 0:
            return False
        self.errors -= 1
        return True


@dataclass
class SegmentBook:
    """The current segment of one run, kept in the store as it goes."""

    store: RunStore
    run_id: str
    log: Path
    """Worker 0's log: every segment appends to it."""
    n: int = 0
    start: int = 0
    """Where the current segment's lines begin in the log."""
    wasted: int | None = None
    """The steps the previous segment did after its last durable checkpoint."""
    _first_step_seen: bool = False

    def begin(self, zone: str | None) -> None:
        self.n = self.store.start_segment(self.run_id, zone)
        self.start = self.log.stat().st_size if self.log.is_file() else 0
        self._first_step_seen = False

    def on_line(self, line: str) -> None:
        """Worker 0's lines as they arrive: the first step ends the recovery."""
        if not self._first_step_seen and self.n and "completed step" in line:
            self._first_step_seen = True
            self.store.segment_first_step(self.run_id, self.n, self.wasted)

    def end(self, cut: Cut | None, cause: str | None = None) -> None:
        """The segment ended: interrupted (``cut``), failed (``cause``) or finished (neither)."""
        if not self.n:
            return
        facts = cut.facts if cut else facts_in_log(self.log, self.start)
        end = SegmentEnd(
            cause=cut.cause.value if cut else cause,
            last_step=facts.last_step,
            durable_step=facts.durable_step,
            restored_step=facts.restored_step,
        )
        self.store.end_segment(self.run_id, self.n, end)

    def next_after(self, cut: Cut | None) -> str:
        """Before the next segment: what the interrupted one leaves to redo, said as text."""
        self.wasted = wasted_steps(cut.facts) if cut is not None else None
        return f"{self.wasted if self.wasted is not None else 'no'} step(s) to redo"

    def summary(self) -> str:
        """What the run's interruptions cost (for the display and the README row's note)."""
        resumed = [s for s in self.store.segments(self.run_id) if s.n > 1]
        if not resumed:
            return ""
        wasted = sum(s.wasted_steps or 0 for s in resumed)
        recovery = sum(s.recovery_s or 0.0 for s in resumed)
        return (
            f"{len(resumed)} interruption(s) resumed: {wasted} step(s) redone, "
            f"{recovery:.1f} s from interruption to the next first step"
        )
