"""Following a Ray job to its end: status from the Jobs API, logs as they grow, two deadlines.

The job's fate comes from ``GET /api/jobs/<id>`` (the ``ray job`` CLI exits 0 for failed jobs).
Its log is read again on every poll and only new lines are handled: all of them go to
``job.log``, worker 0's (without Ray's prefixes, each step once) to ``worker0.log``, which the
collect stage reads like any other launcher's worker-0 log.

Deadlines: Ray waits forever for a TPU slice it cannot schedule, so a job that has not started
training (still PENDING, or RUNNING with no training worker yet) within ``start_s`` is stopped
and reported with the slice's shape; a job still running after ``finish_s`` is stopped too. A
fatal error in any line (out of memory, mesh, a config error) stops the job at once, and so
does the hang watchdog (:mod:`tpu_trainer.app.watchdog`), fed each training worker's lines: no
first step by the start-up deadline, or no new step for k × the steady step time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import IO

from tpu_trainer.app.display import Display
from tpu_trainer.app.ending import Cause, Cut, cut_in_log
from tpu_trainer.app.resume import FAILED, FINISHED, SegmentOutcome, transient_failure
from tpu_trainer.app.watchdog_run import LogWatch
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock, Pending, Tick, wait_until
from tpu_trainer.infra.ray_jobs import JobInfo, JobStatus, LogCursor, RayJobsClient
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.launchers.ray.log import (
    TRAIN_WORKER,
    RayLine,
    Worker0Lines,
    parse_ray_line,
    training_started,
    waiting_reason,
)
from tpu_trainer.plan.diagnose import LiveScanner, Match, clean_line

WAIT_SIGNATURES = frozenset({"ray-tpu-head"})
"""Known errors that mean "still waiting for workers", not "failed": Ray retries them (the
slice may be on its way: autoscaling, a node pool coming up), so the start deadline judges."""


class JobEnd(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    """Stopped by someone else (``ray job stop``, the dashboard)."""
    NOT_STARTED = "not-started"
    """Training did not start before the start deadline (the job was stopped)."""
    TIMED_OUT = "timed-out"
    FATAL = "fatal"
    """A fatal error in the log (the job was stopped)."""
    HUNG = "hung"
    """The watchdog saw no progress (the job was stopped)."""
    INTERRUPTED = "interrupted"
    """Ray says SUCCEEDED, but worker 0's log stops short of the last step (a preemption's
    SIGTERM stop, another stop, or a log that just ends); or Ray says FAILED because the
    capacity was taken back (MaxText's SIGTERM stop, or the cluster's word)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Deadlines:
    start_s: float = 1800.0
    """Until training starts: an unschedulable TPU slice never gets there."""
    finish_s: float = 7 * 24 * 3600.0
    poll_s: float = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Waiting:
    """How to explain a job that never got its workers."""

    shape: str
    """``tpu7x-4x4x8 x 1 (32 hosts x 4 chips, ...)``."""
    fix: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowedJob:
    end: JobEnd
    info: JobInfo | None
    message: str = ""
    fatal: tuple[Match, ...] = ()
    cut: Cut | None = None
    """What an interrupted job kept (its log's facts), and why it stopped."""

    @property
    def ok(self) -> bool:
        return self.end is JobEnd.SUCCEEDED

    def segment(self) -> SegmentOutcome:
        """How the job's segment of the run ended: finished, interrupted (a preemption may be
        resumed), failed with an error the diagnosis marks transient (retried on its own
        budget), or failed."""
        if self.ok:
            return FINISHED
        if self.cut is not None:
            return SegmentOutcome(cut=self.cut, message=self.message)
        first = self.fatal[0] if self.fatal else None
        if first is not None and first.transient and self.end in (JobEnd.FATAL, JobEnd.FAILED):
            return transient_failure(first.title, self.message)
        return SegmentOutcome(cause=FAILED.cause, message=self.message)


@dataclass
class JobLogs:
    """Where a job's lines go: ``job.log`` (all), ``worker0.log`` (worker 0), and a callback
    with each worker-0 line (the step display)."""

    job_log: Path
    worker0_log: Path
    on_worker0_line: Callable[[str], None]
    redact: Redactor = field(default_factory=Redactor)
    worker0: Worker0Lines = field(default_factory=Worker0Lines)
    scanner: LiveScanner = field(default_factory=LiveScanner)
    started: bool = False
    waiting_for: str | None = None
    watch: LogWatch | None = None
    """The hang watchdog, fed every training worker's lines."""
    held: tuple[int, int] = (0, 0)
    """The first lines ``job.log`` and ``worker0.log`` already hold (a job followed again
    from its first line after the process that followed it died): read, scanned and
    watched, not written or shown again."""
    _seen: list[int] = field(default_factory=lambda: [0, 0])
    _files: list[IO[str]] = field(default_factory=list)

    def __enter__(self) -> JobLogs:
        self.job_log.parent.mkdir(parents=True, exist_ok=True)
        self._files = [
            self.job_log.open("a", encoding="utf-8"),
            self.worker0_log.open("a", encoding="utf-8"),
        ]
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._write_worker0(self.worker0.finish())
        for f in self._files:
            f.close()

    def feed(self, raw: str) -> None:
        line = parse_ray_line(raw)
        self._seen[0] += 1
        if self._seen[0] > self.held[0]:
            self._files[0].write(self.redact(clean_line(raw)) + "\n")
        self.scanner.feed(line.text)
        if self.watch is not None and line.actor == TRAIN_WORKER:
            self.watch.feed(worker_host(line), line.text)
        if not self.started and training_started(line):
            self.started = True
        reason = waiting_reason(line)
        if reason is not None:
            self.waiting_for = reason
        self._write_worker0(self.worker0.feed_parsed(line))

    def fatal(self) -> list[Match]:
        """Fatal errors seen so far (a slice Ray keeps waiting for is not one)."""
        return [m for m in self.scanner.fatal if m.signature not in WAIT_SIGNATURES]

    def flush(self) -> None:
        for f in self._files:
            f.flush()

    def _write_worker0(self, lines: list[str]) -> None:
        if not lines:
            return
        out = self._files[1]
        for text in lines:
            self._seen[1] += 1
            if self._seen[1] > self.held[1]:
                out.write(self.redact(text) + "\n")
                self.on_worker0_line(text)


@dataclass
class RayJobFollower:
    client: RayJobsClient
    submission_id: str
    display: Display
    logs: JobLogs
    waiting: Waiting
    deadlines: Deadlines = field(default_factory=Deadlines)
    clock: Clock = SYSTEM_CLOCK

    def run(self) -> FollowedJob:
        """Poll until the job ends or a deadline passes; stop the job if we give up on it."""
        cursor = LogCursor()

        def check(tick: Tick) -> FollowedJob | Pending:
            info = self.client.status(self.submission_id)
            self._read(cursor)
            if info.status.terminal:
                self._read(cursor, final=True)
                return self._ended(info)
            fatal = self.logs.fatal()
            if fatal:
                return self._give_up(JobEnd.FATAL, info, _fatal_message(fatal[0]), tuple(fatal))
            hang = self.logs.watch.check() if self.logs.watch is not None else None
            if hang is not None:
                return self._give_up(JobEnd.HUNG, info, hang.message)
            waited = tick.now()
            if not self.logs.started and waited > self.deadlines.start_s:
                return self._give_up(JobEnd.NOT_STARTED, info, self._not_started(waited))
            if waited > self.deadlines.finish_s:
                message = f"the job did not finish within {self.deadlines.finish_s:.0f} s"
                return self._give_up(JobEnd.TIMED_OUT, info, message)
            if self.logs.started:
                return Pending("")
            return Pending(
                self.logs.waiting_for or f"job {self.submission_id} is {info.status.value}"
            )

        return wait_until(
            check, interval=self.deadlines.poll_s, on_tick=self._waiting, clock=self.clock
        )

    def _waiting(self, label: str, waited: float) -> None:
        """The live line, until training starts (then worker 0's lines speak)."""
        if label:
            self.display.waiting(label, waited)

    def _read(self, cursor: LogCursor, *, final: bool = False) -> None:
        lines = cursor.new_lines(self.client.logs(self.submission_id))
        if final:
            lines += cursor.rest()
        for raw in lines:
            self.logs.feed(raw)
        self.logs.flush()

    def _ended(self, info: JobInfo) -> FollowedJob:
        if info.status is JobStatus.SUCCEEDED:
            return FollowedJob(end=JobEnd.SUCCEEDED, info=info)
        fatal = tuple(self.logs.fatal())
        if fatal:
            return FollowedJob(
                end=JobEnd.FAILED, info=info, message=_fatal_message(fatal[0]), fatal=fatal
            )
        end = JobEnd.STOPPED if info.status is JobStatus.STOPPED else JobEnd.FAILED
        code = f", driver exit code {info.driver_exit_code}" if info.driver_exit_code else ""
        why = info.message or info.error_type or "no message"
        return FollowedJob(end=end, info=info, message=f"the job {end.value}{code}: {why}")

    def _give_up(
        self, end: JobEnd, info: JobInfo, message: str, fatal: tuple[Match, ...] = ()
    ) -> FollowedJob:
        self.display.warn(f"{message}; stopping job {self.submission_id}")
        self.client.stop(self.submission_id)
        return FollowedJob(end=end, info=info, message=message, fatal=fatal)

    def _not_started(self, waited: float) -> str:
        seen = f"; Ray's last word: {self.logs.waiting_for}" if self.logs.waiting_for else ""
        return (
            f"training did not start within {waited:.0f} s: Ray could not get the workers "
            f"for {self.waiting.shape} (Ray retries forever){seen} — fix: {self.waiting.fix}"
        )


def worker_host(line: RayLine) -> str:
    """How the watchdog names a training worker: its node and process."""
    where = f"{line.ip}, " if line.ip else ""
    return f"worker {where}pid {line.pid}"


def judge_ending(
    followed: FollowedJob,
    worker0_log: Path,
    steps: int | None,
    start: int = 0,
    taken_back: Callable[[], str | None] | None = None,
) -> FollowedJob:
    """A job Ray calls SUCCEEDED finished only when worker 0's log (from byte ``start``: this
    segment's lines) reached its last step (``steps - 1``, or MaxText's target loss); otherwise
    it was interrupted. A job Ray calls FAILED was interrupted by a preemption when MaxText
    logged its SIGTERM stop or ``taken_back`` (asked only then: the cluster's word that the
    capacity went) says so."""
    if followed.end not in (JobEnd.SUCCEEDED, JobEnd.FAILED, JobEnd.FATAL):
        return followed
    cut = cut_in_log(worker0_log, steps, start)
    clean = followed.ok and cut is None
    cloud_says = None if clean or taken_back is None else taken_back()
    if cloud_says is not None:
        cut = cut_in_log(worker0_log, steps, start, cloud_says=cloud_says)
    if cut is None or (not followed.ok and cut.cause is not Cause.PREEMPTED):
        return followed
    return replace(followed, end=JobEnd.INTERRUPTED, message=cut.message, cut=cut)


def _fatal_message(match: Match) -> str:
    return f"{match.title}: {match.excerpt} — fix: {match.fix}"
