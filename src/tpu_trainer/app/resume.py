"""Resuming a run after a preemption: its segments in the store, and the budgets that say how
often a run comes back.

A run is one or more segments (``store/segments.py``): the first attempt, then one per resume.
:class:`SegmentBook` keeps the current segment of a launcher's run: where its lines begin in
worker 0's log (and in any other file its lines go to, written beside the log in
``segment.json`` so that a process carrying on after a crash knows it), its first step (which
ends the recovery from the interruption before it), and how it ended. :class:`Budgets` holds the two budgets a run draws on: preemptions (the capacity
was taken back; MaxText restores its last durable checkpoint) and transient errors (the
diagnosis marks the error as one that goes away by itself); any other error never retries.
:class:`SegmentOutcome` says how one segment ended, and so whether a budget is drawn on.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from tpu_trainer.app.display import Display
from tpu_trainer.app.ending import Cause, Cut, facts_in_log, wasted_steps
from tpu_trainer.app.guard import RunTeardown
from tpu_trainer.errors import InputError
from tpu_trainer.frameworks.maxtext.ending import EndFacts
from tpu_trainer.store.db import RunRow, RunStatus, RunStore, SegmentEnd, SegmentRow


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
SEGMENT_MARK = "segment.json"
"""Beside worker 0's log: the current segment's number and where its lines begin in each of
its files (byte offsets)."""


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
    also: tuple[Path, ...] = field(default=(), kw_only=True)
    """Other files every segment appends its lines to (a Ray job's whole log)."""
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
            self.n = done[-1].n
            marked = self._marked(self.n)
            self.start = marked[0] if marked else 0
            self.end(SegmentOutcome(cause=CRASHED))
            done = self.store.segments(self.run_id)
        self.wasted = _left_to_redo(done[-1])
        self.n = 0

    def adopt(self) -> None:
        """Follow again the segment a process that died left open: it ends as this process
        sees it end, judged by the lines appended to the log from now on (following its
        workload again replays them all)."""
        done = self.store.segments(self.run_id)
        if not done or done[-1].ended_at is not None:
            return
        self.n = done[-1].n
        self.start = _size(self.log)
        self._first_step_seen = done[-1].first_step_at is not None

    def reattach(self, started_by: int | None) -> tuple[int, ...] | None:
        """Carry on, in the same segment, following what a process that died left open (a
        program or a job that keeps its whole output, started by segment ``started_by``): its
        output is read again from the first line, and the lines this segment's files already
        hold are passed over. Returns how many whole lines each file (the log, then ``also``)
        already holds. None (nothing to carry on) when no segment is open, when the output is
        another segment's, or when it is not known where the open segment's lines begin (no
        record of it beside the log, and it is not the run's first segment)."""
        done = self.store.segments(self.run_id)
        if not done or done[-1].ended_at is not None or done[-1].n != started_by:
            return None
        n = done[-1].n
        marked = self._marked(n)
        if marked is None and n == 1:  # the first segment's lines begin each file
            marked = tuple(0 for _ in self.files)
        if marked is None:
            return None
        self.n, self.start = n, marked[0]
        self._first_step_seen = done[-1].first_step_at is not None
        self.wasted = _left_to_redo(done[-2]) if len(done) > 1 else None
        return tuple(_whole_lines(path, at) for path, at in zip(self.files, marked, strict=True))

    def begin(self, zone: str | None) -> None:
        self.n = self.store.start_segment(self.run_id, zone)
        self.start = _size(self.log)
        self._first_step_seen = False
        mark = {"n": self.n, "starts": [_size(path) for path in self.files]}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        (self.log.parent / SEGMENT_MARK).write_text(json.dumps(mark), encoding="utf-8")

    @property
    def files(self) -> tuple[Path, ...]:
        """Every file a segment's lines go to: worker 0's log first."""
        return (self.log, *self.also)

    def _marked(self, n: int) -> tuple[int, ...] | None:
        """Where segment ``n``'s lines begin in each of its files, as :meth:`begin` wrote it."""
        try:
            mark = json.loads((self.log.parent / SEGMENT_MARK).read_text(encoding="utf-8"))
            starts = tuple(int(at) for at in mark["starts"])
            same = mark["n"] == n and len(starts) == len(self.files)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return starts if same else None

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


def _left_to_redo(segment: SegmentRow) -> int | None:
    """The steps an interrupted segment ran after its last durable checkpoint (None when it
    was not interrupted)."""
    if segment.cause is None:
        return None
    facts = EndFacts(
        last_step=segment.last_step,
        durable_step=segment.durable_step,
        restored_step=segment.restored_step,
    )
    return wasted_steps(facts)


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def _whole_lines(path: Path, start: int) -> int:
    """The whole lines ``path`` holds after byte ``start``; a last line a process that died
    left unfinished is cut off (it is read again whole)."""
    if not path.is_file():
        return 0
    with path.open("rb+") as f:
        f.seek(start)
        data = f.read()
        whole = data.rfind(b"\n") + 1
        if whole < len(data):
            f.truncate(start + whole)
    return data.count(b"\n", 0, whole)
