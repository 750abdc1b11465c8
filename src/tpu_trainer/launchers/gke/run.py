"""One run on GKE through xpk: provision -> configure -> scripts -> submit -> follow -> teardown."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tpu_trainer.app.files import write_generated
from tpu_trainer.app.services import Services, new_run_id
from tpu_trainer.app.stages import Stages
from tpu_trainer.app.step_display import StepDisplay
from tpu_trainer.config.model import Config
from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.infra.runner import CommandFailed
from tpu_trainer.infra.xpk import WaitOutcome, wait_outcome, workload_wait_argv
from tpu_trainer.launchers.gke import kueue_setup
from tpu_trainer.launchers.gke.provision import Attempt, Provisioner
from tpu_trainer.launchers.gke.scripts import render_setup, render_submit
from tpu_trainer.launchers.gke.teardown import Teardown, TeardownReport, teardown_always
from tpu_trainer.plan.plan import Plan
from tpu_trainer.plan.plan_json import plan_json
from tpu_trainer.store.db import LIVE_STATES, ResourceState, RunStatus

PlanForZone = Callable[[str | None], Plan]
"""Rebuilds the plan for the zone the node pool ended up in."""


@dataclass
class RunOutcome:
    run_id: str
    status: RunStatus
    zone: str | None = None
    pool: str | None = None
    workload: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    teardown: TeardownReport | None = None
    error: str | None = None
    metrics: dict[str, object] | None = None
    readme: Path | None = None


@dataclass
class GkeRun:
    svc: Services
    config: Config
    plan_for_zone: PlanForZone
    request: str
    wait_timeout_s: int = 24 * 3600
    schedule_timeout_s: int = 1800
    """How long the pods may stay unscheduled (Kueue or the scheduler) before the run fails."""
    poll_seconds: float = 30.0
    run_id: str = field(default_factory=new_run_id)
    _steps: StepDisplay | None = None
    _started: float = field(default_factory=time.monotonic)
    lang: str = "zh"

    def start(self) -> RunOutcome:
        plan = self.plan_for_zone(None)
        store = self.svc.store
        store.create_run(
            self.run_id,
            model=plan.model,
            request=self.request,
            launcher="xpk",
            device_type=plan.slice.device_type,
            precision=plan.precision.value,
            project=self.config.project_id,
            cluster=self.config.cluster_name,
            region=self.config.region,
            zone=None,
            plan_json=plan_json(plan),
        )
        self.svc.current.run_id = self.run_id
        self.svc.display.info(f"run {self.run_id}: {plan.model} on {plan.slice} x{plan.num_slices}")
        outcome = RunOutcome(self.run_id, RunStatus.RUNNING)
        return self._guarded(outcome, lambda: self._body(plan, outcome))

    def resume(self) -> RunOutcome:
        """Pick up a run whose process died after submitting: follow its workload again, then
        collect, report and tear down as usual. Earlier stages are not replayed."""
        store = self.svc.store
        row = store.run(self.run_id)
        if row is None:
            raise InputError(f"no run {self.run_id}", fix="see `tpu-trainer runs`")
        if row.process_alive():
            raise InputError(
                f"run {self.run_id} is still running (pid {row.pid})", fix="it needs no resuming"
            )
        workload = next(
            (r for r in store.resources(self.run_id, states=LIVE_STATES) if r.kind == "workload"),
            None,
        )
        if workload is None or not row.zone:
            raise InputError(
                f"run {self.run_id} never submitted a workload, so there is nothing to follow",
                fix=f"`tpu-trainer cleanup {self.run_id}`, then train again",
            )
        store.update_run(
            self.run_id,
            status=RunStatus.RUNNING,
            error=None,
            finished_at=None,
            pid=os.getpid(),
            host=socket.gethostname(),
        )
        self.svc.current.run_id = self.run_id
        plan = replace(self.plan_for_zone(row.zone), workload_name=workload.name)
        self.svc.display.info(f"resuming run {self.run_id}: following {workload.name}")
        outcome = RunOutcome(self.run_id, RunStatus.RUNNING, zone=row.zone, workload=workload.name)

        def body() -> None:
            self._follow(plan, row.zone or "")
            self._results(plan, outcome)

        return self._guarded(outcome, body)

    def _guarded(self, outcome: RunOutcome, body: Callable[[], None]) -> RunOutcome:
        """Run ``body`` with teardown guaranteed; the outcome carries the stored final status."""
        store = self.svc.store
        teardown = Teardown(
            store, self.svc.gcloud, self.svc.xpk, self.svc.display, poll_seconds=self.poll_seconds
        )
        try:
            with teardown_always(store, self.run_id, teardown):
                body()
        except TpuTrainerError as e:
            outcome.error = e.message
            raise
        finally:
            row = store.run(self.run_id)
            outcome.status = row.status if row else RunStatus.FAILED
        return outcome

    @property
    def _stages(self) -> Stages:
        return Stages(self.svc.store, self.svc.display, self.run_id, self._started)

    def _stage(self, name: str) -> None:
        self._stages.start(name)

    def _done(self, name: str, status: str = "ok", detail: str = "") -> None:
        self._stages.done(name, status, detail)

    def _body(self, plan: Plan, outcome: RunOutcome) -> None:
        self._stage("prerequisites")
        from tpu_trainer.launchers.gke.preflight import before_create

        before_create(plan, self.config, self.svc.gcloud)
        self._done("prerequisites")
        self._stage("provision")
        prov = Provisioner(
            self.svc.gcloud,
            self.svc.xpk,
            self.svc.kubectl,
            self.svc.store,
            self.run_id,
            self.config,
            plan.slice,
            plan.num_slices,
            self.svc.display,
            poll_seconds=self.poll_seconds,
        )
        try:
            made = prov.ensure()
        finally:
            outcome.attempts = prov.attempts
        outcome.zone, outcome.pool = made.zone, made.pool
        self.svc.store.update_run(self.run_id, zone=made.zone)
        self._done("provision", detail=f"{', '.join(made.pools)} in {made.zone}")

        self._stage("configure")
        fixed = kueue_setup.ensure(
            self.svc.kubectl,
            self.svc.runner,
            self.config.cluster_name,
            plan.slice,
            plan.num_slices,
            self.svc.display,
        )
        self._done("configure", detail=f"{len(fixed)} repaired")

        self._stage("scripts")
        plan = self.plan_for_zone(made.zone)
        setup, submit = plan.files
        write_generated(setup, render_setup(plan), executable=True)
        write_generated(submit, render_submit(plan), executable=True)
        self._done("scripts", detail=str(submit))

        self._submit(plan, submit, made.zone, outcome)
        self._follow(plan, made.zone)
        self._results(plan, outcome)

    def _results(self, plan: Plan, outcome: RunOutcome) -> None:
        """Metrics into the store, and (with a steady state) a section in the model's README."""
        from tpu_trainer.app.results import record_results

        recorded = record_results(self._stages, plan, self.log_path, self.lang)
        if recorded is not None:
            outcome.metrics, outcome.readme = recorded.metrics, recorded.readme

    def _submit(self, plan: Plan, script: Path, zone: str, outcome: RunOutcome) -> None:
        self._stage("submit")
        name = plan.workload_name
        rid = self.svc.store.resource_intent(
            self.run_id,
            kind="workload",
            name=name,
            project=self.config.project_id,
            location=zone,
            cluster=self.config.cluster_name,
            detail={"zone": zone},
        )
        result = self.svc.runner.run(
            ["bash", str(script)], env={"WORKLOAD_NAME": name}, timeout=1800
        )
        if not result.ok:
            # xpk may fail after the JobSet exists: teardown asks the cluster and deletes it.
            self.svc.store.resource_state(rid, ResourceState.MAYBE, exit_code=result.code)
            self._done("submit", "failed", result.text()[-500:])
            raise CommandFailed(result, fix=f"see the output of {script}")
        self.svc.store.resource_state(rid, ResourceState.CREATED)
        outcome.workload = name
        self._done("submit", detail=name)

    def _follow(self, plan: Plan, zone: str) -> None:
        self._stage("follow")
        from tpu_trainer.launchers.gke.follow import Follower

        follower = Follower(
            self.svc.kubectl,
            self.svc.runner,
            self.svc.display,
            plan.workload_name,
            expected_pods=plan.slice.hosts * plan.num_slices,
            log_path=self.log_path,
            on_line=self.on_log_line,
            poll_seconds=self.poll_seconds,
            start_timeout_s=self.wait_timeout_s,
            schedule_timeout_s=self.schedule_timeout_s,
        )
        followed = follower.run()
        if not followed.started and not followed.fatal:
            message = followed.message or "the workload's pods did not start"
            self._done("follow", "failed", message)
            self.svc.store.finish_run(self.run_id, RunStatus.FAILED, message[:2000])
            self.svc.display.warn(message)
            return
        if followed.fatal:
            first = followed.fatal[0]
            message = f"{first.title}: {first.excerpt} — fix: {first.fix}"
            self._done("follow", "failed", message)
            self.svc.store.finish_run(self.run_id, RunStatus.FAILED, message[:2000])
            self.svc.display.warn(f"fatal error in the workload's log: {message}")
            return
        argv = workload_wait_argv(
            workload=plan.workload_name,
            cluster=self.config.cluster_name,
            project=self.config.project_id,
            zone=zone,
            timeout_s=self.wait_timeout_s,
        )
        result = self.svc.xpk.run(argv, timeout=self.wait_timeout_s + 600)
        verdict = wait_outcome(result.code)
        self._done("follow", verdict.value)
        if verdict is WaitOutcome.SUCCEEDED:
            self.svc.store.finish_run(self.run_id, RunStatus.SUCCEEDED)
            return
        message = {
            WaitOutcome.FAILED: "the workload finished but failed",
            WaitOutcome.TIMEOUT: f"the workload did not finish within {self.wait_timeout_s} s",
            WaitOutcome.ERROR: f"xpk could not wait for the workload (exit {result.code})",
        }[verdict]
        self.svc.store.finish_run(self.run_id, RunStatus.FAILED, message)

    @property
    def log_path(self) -> Path:
        """Worker 0's log, kept beside the run store."""
        return self.svc.store.path.parent / "runs" / self.run_id / "worker0.log"

    def on_log_line(self, line: str) -> None:
        """Each line of worker 0's log as it arrives: show each completed step."""
        if self._steps is None:
            self._steps = StepDisplay(self.svc.display)
        self._steps(line)
