"""Resuming a run after a preemption: its segments in the store, and the budgets that say how
often a run comes back.

A run is one or more segments (``store/segments.py``): the first attempt, then one per resume.
:class:`SegmentBook` keeps the current segment of a launcher's run: where its lines begin in
worker 0's log, its first step (which ends the recovery from the interruption before it), and
how it ended. :class:`Budgets` holds the two budgets a run draws on: preemptions (the capacity
was taken back; MaxText restores its last durable checkpoint) and transient errors (the
diagnosis marks the error as one that goes away by itself); any other error never retries.
:class:`SegmentOutcome` says how one segment ended, and so whether a budget is drawn on.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.app.display import Display
from tpu_trainer.app.ending import Cause, Cut, facts_in_log, wasted_steps
from tpu_trainer.app.guard import RunTeardown
from tpu_trainer.errors import InputError
from tpu_trainer.frameworks.maxtext.ending import EndFacts
from tpu_trainer.store.db import RunRow, RunStatus, RunStore, SegmentEnd


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentOutcome:
    """How one segment ended: ``cut`` when it stopped short (preempted, stopped, unfinished),
    ``cause`` when it failed (``failed``, or why a transient error is retried), neither when it
    finished."""

    cut: Cut | None = None
    cause: str | None = None
    message: str = ""
    transient: bool = False
    """The failure is one the diagnosis says goes away by itself (retried on its budget)."""

    @property
    def retry(self) -> bool:
        """Whether another segment may follow (a budget still has to allow it)."""
        return self.cut.resumable if self.cut is not None else self.transient

    @property
    def preempted(self) -> bool:
        """The budget this segment draws on: preemptions (else errors)."""
        return self.cut is not None

    @property
    def stored_cause(self) -> str | None:
        return self.cut.cause.value if self.cut is not None else self.cause


FINISHED = SegmentOutcome()
FAILED = SegmentOutcome(cause="failed")
CRASHED = "crashed"
"""A segment whose process died (``resume RUN`` ends it)."""


def transient_failure(title: str, message: str) -> SegmentOutcome:
    """A failure the diagnosis marks transient: the segment says why it is retried."""
    return SegmentOutcome(cause=f"transient error: {title}", message=message, transient=True)


def stopped_run(store: RunStore, run_id: str) -> RunRow:
    """The stored run ``resume RUN`` picks up: it must exist, and its process be gone."""
    row = store.run(run_id)
    if row is None:
        raise InputError(f"no run {run_id}", fix="see `tpu-trainer runs`")
    if row.process_alive():
        raise InputError(
            f"run {run_id} is still running (pid {row.pid})", fix="it needs no resuming"
        )
    return row


def running_again(store: RunStore, run_id: str) -> None:
    """The stored run is this process's again, and running."""
    store.update_run(
        run_id,
        status=RunStatus.RUNNING,
        error=None,
        finished_at=None,
        pid=os.getpid(),
        host=socket.gethostname(),
    )


@dataclass
class Budgets:
    """What is left of a run's two budgets."""

    preemptions: int = 0
    errors: int = 0

    def allow(self, end: SegmentOutcome) -> bool:
        """Whether ``end`` is followed by another segment; spends that segment's budget."""
        return end.retry and self.take(preempted=end.preempted)

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

    def pick_up(self) -> None:
        """This process carries on a run another one started: a segment that process left
        open (it died) ends as ``crashed`` with the log's facts, and the next segment counts
        what the last one left to redo."""
        done = self.store.segments(self.run_id)
        if not done:
            return
        if done[-1].ended_at is None:
            self.n, self.start = done[-1].n, 0
            self.end(SegmentOutcome(cause=CRASHED))
            done = self.store.segments(self.run_id)
        last = done[-1]
        facts = EndFacts(
            last_step=last.last_step,
            durable_step=last.durable_step,
            restored_step=last.restored_step,
        )
        self.wasted = wasted_steps(facts) if last.cause is not None else None
        self.n = 0

    def adopt(self) -> None:
        """Follow again the segment a process that died left open: it ends as this process
        sees it end, judged by the lines appended to the log from now on (following its
        workload again replays them all)."""
        done = self.store.segments(self.run_id)
        if not done or done[-1].ended_at is not None:
            return
        self.n = done[-1].n
        self.start = self.log.stat().st_size if self.log.is_file() else 0
        self._first_step_seen = done[-1].first_step_at is not None

    def begin(self, zone: str | None) -> None:
        self.n = self.store.start_segment(self.run_id, zone)
        self.start = self.log.stat().st_size if self.log.is_file() else 0
        self._first_step_seen = False

    def on_line(self, line: str) -> None:
        """Worker 0's lines as they arrive: the first step ends the recovery."""
        if not self._first_step_seen and self.n and "completed step" in line:
            self._first_step_seen = True
            self.store.segment_first_step(self.run_id, self.n, self.wasted)

    def end(self, end: SegmentOutcome) -> None:
        """The segment ended: interrupted (``cut``), failed (``cause``) or finished (neither),
        with the log's facts (its last step, last durable checkpoint, restored step)."""
        if not self.n:
            return
        cut = end.cut
        facts = cut.facts if cut else facts_in_log(self.log, self.start)
        stored = SegmentEnd(
            cause=end.stored_cause,
            last_step=facts.last_step,
            durable_step=facts.durable_step,
            restored_step=facts.restored_step,
        )
        self.store.end_segment(self.run_id, self.n, stored)

    def carry_on(self, end: SegmentOutcome, display: Display, teardown: RunTeardown) -> None:
        """Between two segments: say what the interrupted one leaves to redo, give back what
        it held (``teardown``: a preempted VM or slice cannot be used again), and carry on as
        a running run."""
        display.warn(f"resuming after the interruption ({end.message}); {self.next_after(end)}")
        teardown.run(self.run_id)
        self.store.update_run(self.run_id, status=RunStatus.RUNNING, error=None, finished_at=None)

    def next_after(self, end: SegmentOutcome) -> str:
        """Before the next segment: what the interrupted one leaves to redo, said as text."""
        cut = end.cut
        if cut is None:  # a failed segment: the steps after its last durable checkpoint
            cut = Cut(Cause.UNFINISHED, end.message, facts_in_log(self.log, self.start))
        self.wasted = wasted_steps(cut.facts)
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
