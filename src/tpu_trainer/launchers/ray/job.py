"""One Ray job from submission to results, whatever made the cluster: submit, follow, collect.

Shared by the KubeRay launcher and the one for a Ray head on this machine. The job's log lands
in ``runs/<run>/job.log`` and worker 0's lines in ``runs/<run>/worker0.log``, which the same
collect and report stages as every other launcher turn into metrics and a README section.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tpu_trainer.app.ending import steps_of
from tpu_trainer.app.results import Recorded, Versions, record_results
from tpu_trainer.app.stages import Stages
from tpu_trainer.app.step_display import StepDisplay
from tpu_trainer.app.watchdog import WatchdogSettings
from tpu_trainer.app.watchdog_run import LogWatch
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.ray_jobs import RayJobsClient, submit_body
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.launchers.ray.follow import (
    Deadlines,
    FollowedJob,
    JobEnd,
    JobLogs,
    RayJobFollower,
    Waiting,
    judge_ending,
)
from tpu_trainer.plan.plan import Plan
from tpu_trainer.store.db import RunStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRequest:
    """What to submit, and how to judge a job that waits."""

    entrypoint: str
    submission_id: str
    env: Mapping[str, str]
    waiting: Waiting
    deadlines: Deadlines = field(default_factory=Deadlines)
    watchdog: WatchdogSettings | None = None
    """The hang watchdog's settings (None: no watchdog)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobResult:
    followed: FollowedJob
    recorded: Recorded | None

    @property
    def error(self) -> str | None:
        return None if self.followed.ok else self.followed.message


def job_logs(run_dir: Path) -> tuple[Path, Path]:
    """``job.log`` (every line) and ``worker0.log`` (worker 0's) of a run."""
    return run_dir / "job.log", run_dir / "worker0.log"


@dataclass
class RayJob:
    stages: Stages
    plan: Plan
    run_dir: Path
    lang: str = "zh"
    versions: Versions = field(default_factory=Versions)
    redactor: Redactor = field(default_factory=Redactor)
    on_line: Callable[[str], None] | None = None
    """Each worker-0 line as it arrives, besides the step display (a run's segment book)."""

    def run(self, client: RayJobsClient, request: JobRequest) -> JobResult:
        """Submit, follow to the end, record steps and metrics (and the README section when
        there is a steady state); the run's final status is written to the store."""
        followed = self.follow(client, request)
        return JobResult(followed=followed, recorded=self.record())

    def follow(
        self,
        client: RayJobsClient,
        request: JobRequest,
        *,
        start: int = 0,
        taken_back: Callable[[], str | None] | None = None,
        held: tuple[int, int] | None = None,
    ) -> FollowedJob:
        """Submit, follow to the end and judge how the job ended (:func:`judge_ending`; its
        lines in ``worker0.log`` from byte ``start`` on); the run's status is written to the
        store. With ``held``, the job was submitted already (by a process that died): it is
        followed again from its first line, the lines ``job.log`` and ``worker0.log`` already
        hold passed over."""
        store, run_id, display = self.stages.store, self.stages.run_id, self.stages.display
        if held is None:
            submitted = self._submit(client, request)
        else:
            submitted = request.submission_id
            display.info(f"following Ray job {submitted} again, from its first line")

        self.stages.start("follow")
        job_log, worker0_log = job_logs(self.run_dir)
        steps = StepDisplay(display)
        watch = None if request.watchdog is None else LogWatch(request.watchdog)
        with JobLogs(
            job_log,
            worker0_log,
            self._each_line(steps),
            redact=self.redactor,
            watch=watch,
            held=held or (0, 0),
        ) as logs:
            follower = RayJobFollower(
                client, submitted, display, logs, request.waiting, request.deadlines
            )
            try:
                followed = follower.run()
            except BaseException:  # Ctrl-C, SIGTERM, a lost connection: the job goes too
                with contextlib.suppress(TpuTrainerError):
                    client.stop(submitted)
                raise
        followed = judge_ending(followed, worker0_log, steps_of(self.plan), start, taken_back)
        self.stages.done(
            "follow",
            "ok" if followed.ok else "failed",
            followed.message or f"{steps.lines} worker-0 lines",
        )
        if followed.ok:
            store.finish_run(run_id, RunStatus.SUCCEEDED)
        else:
            status = (
                RunStatus.INTERRUPTED if followed.end is JobEnd.INTERRUPTED else RunStatus.FAILED
            )
            store.finish_run(run_id, status, followed.message[:2000])
            display.warn(followed.message)
        return followed

    def _submit(self, client: RayJobsClient, request: JobRequest) -> str:
        self.stages.start("submit")
        body = submit_body(
            request.entrypoint,
            request.submission_id,
            request.env,
            {"tpu-trainer-run": self.stages.run_id},
        )
        submitted = client.submit(body) or request.submission_id
        self.stages.done("submit", detail=f"job {submitted} at {client.address}")
        self.stages.display.info(f"submitted Ray job {submitted}")
        return submitted

    def record(self, note: str = "") -> Recorded | None:
        """Worker 0's steps and metrics into the store, and the README section when there is
        a steady state (the run's ending read from the store)."""
        _, worker0_log = job_logs(self.run_dir)
        return record_results(self.stages, self.plan, worker0_log, self.lang, self.versions, note)

    def _each_line(self, steps: StepDisplay) -> Callable[[str], None]:
        if self.on_line is None:
            return steps
        also = self.on_line

        def each(line: str) -> None:
            also(line)
            steps(line)

        return each
