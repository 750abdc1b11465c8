"""One run on GKE through xpk or gcluster (:mod:`.submitter`): prerequisites -> provision -> configure -> scripts -> submit ->
follow -> results, torn down always."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from tpu_trainer.app.display import Display
from tpu_trainer.app.ending import cut_in_log, steps_of
from tpu_trainer.app.files import write_generated
from tpu_trainer.app.guard import RunTeardown
from tpu_trainer.app.launcher import Launcher, RunRecord
from tpu_trainer.app.live_steps import LiveSteps
from tpu_trainer.app.outcome import RunOutcome
from tpu_trainer.app.plan_json import plan_json
from tpu_trainer.app.resume import (
    FAILED,
    FINISHED,
    Budgets,
    SegmentBook,
    SegmentOutcome,
    running_again,
    stopped_run,
    transient_failure,
)
from tpu_trainer.app.services import Services
from tpu_trainer.app.step_display import StepDisplay
from tpu_trainer.app.watchdog_run import LogWatch, watchdog_settings
from tpu_trainer.config.model import Config
from tpu_trainer.errors import InputError
from tpu_trainer.infra.runner import CommandFailed
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.gke import kueue_setup
from tpu_trainer.launchers.gke.provision import Provisioner
from tpu_trainer.launchers.gke.submit_script import SubmitScript
from tpu_trainer.launchers.gke.submitter import (
    SUBMITTER_KEY,
    OwnPolicy,
    Submitter,
    Target,
    WaitOutcome,
    submitter_named,
)
from tpu_trainer.launchers.gke.teardown import Teardown
from tpu_trainer.plan.plan import Plan
from tpu_trainer.plan.scripts import render_setup, render_submit
from tpu_trainer.store.db import LIVE_STATES, ResourceState, RunStatus, RunStore


@dataclass
class GkeRun(Launcher):
    """The GKE launcher: ``plan`` is the plan for the configured zone; the zone the node pool
    ends up in gives the scripts' plan (:meth:`Plan.with_zone`), the recipe is not read again."""

    launch_path = LaunchPath.XPK
    svc: Services
    config: Config
    plan: Plan
    request: str
    run_id: str = field(kw_only=True)
    wait_timeout_s: int = 24 * 3600
    schedule_timeout_s: int = 1800
    """How long the pods may stay unscheduled (Kueue or the scheduler) before the run fails."""
    poll_seconds: float = 30.0
    lang: str = "zh"
    auto_resume: int = 0
    """How many preemptions the run resumes after (a budget of its own)."""
    error_retries: int = 0
    """How many transient errors (as the diagnosis marks them) the run retries."""
    store: RunStore = field(init=False)
    display: Display = field(init=False)
    _steps: StepDisplay | None = None
    _book: SegmentBook | None = None
    _project_number: str | None = None
    """The project's number, read with the prerequisites (handed to xpk)."""
    _kueue_ready: bool = False
    """Provisioning found Kueue ready for the slice (the configure stage reads it no more)."""

    @property
    def book(self) -> SegmentBook:
        """The run's segments: one per submitted workload."""
        if self._book is None:
            self._book = SegmentBook(self.store, self.run_id, self.log_path)
        return self._book

    def __post_init__(self) -> None:
        self.svc = self.svc.for_run(self.run_id)
        self.store, self.display = self.svc.store, self.svc.display

    # ---- the template's parts ------------------------------------------------------------
    def _record(self) -> RunRecord:
        plan = self.plan
        return RunRecord(
            model=plan.model,
            device_type=plan.slice.device_type,
            precision=plan.precision.value,
            project=self.config.project_id,
            cluster=self.config.cluster_name,
            region=self.config.region,
            plan_json=plan_json(plan),
        )

    def _headline(self) -> str:
        plan = self.plan
        return f"run {self.run_id}: {plan.model} on {plan.slice} x{plan.num_slices}"

    @property
    def _submitter(self) -> Submitter:
        """The tool the recipe submits with (xpk or gcluster)."""
        return submitter_named(
            self.plan.recipe.submitter,
            self.svc.xpk,
            self.svc.kubectl,
            poll_seconds=self.poll_seconds,
            clock=self.svc.clock,
        )

    def _target(self, plan: Plan, zone: str) -> Target:
        config = self.config
        return Target(
            workload=plan.workload_name,
            cluster=config.cluster_name,
            project=config.project_id,
            zone=zone,
        )

    def _teardown(self) -> RunTeardown:
        return Teardown.of(self.svc, poll_seconds=self.poll_seconds)

    def _launch(self, *, outcome: RunOutcome) -> None:
        """One segment, then one more after each preemption (or transient error) while its
        budget lasts: the same workload name (MaxText's ``run_name``) so MaxText restores its
        last checkpoint, on capacity found again through the same ordered reservations."""
        budgets = Budgets(self.auto_resume, self.error_retries)
        script: SubmitScript | None = None
        try:
            while True:
                zone = self._provision(self.plan, outcome)
                self._configure(self.plan)
                plan = self._scripts(self.plan.with_zone(zone))
                self.book.begin(zone)
                script = self._submit(plan, plan.files[1], zone, outcome)
                end = self._follow(plan, zone)
                if not budgets.allow(end):
                    break
                script.finish()
                self.book.carry_on(end, self.display, self._teardown())
            self._results(plan, outcome)
        except BaseException:
            if script is not None:
                script.stop()
            raise
        if script is not None:
            script.finish()  # before the teardown: the submit script has said all it will

    def resume(self) -> RunOutcome:
        """Pick up a run whose process died after submitting: follow its workload again, then
        collect, report and tear down as usual. Earlier stages are not replayed. A run that
        ended interrupted (its workload gone) gets a new segment instead."""
        store = self.store
        row = stopped_run(store, self.run_id)
        workload = next(
            (r for r in store.resources(self.run_id, states=LIVE_STATES) if r.kind == "workload"),
            None,
        )
        if workload is None and row.status is RunStatus.INTERRUPTED:
            return self._next_segment_of_stopped_run()
        if workload is None or not row.zone:
            raise InputError(
                f"run {self.run_id} never submitted a workload, so there is nothing to follow",
                fix=f"`tpu-trainer cleanup {self.run_id}`, then train again",
            )
        running_again(store, self.run_id)
        self.book.adopt()
        zone = row.zone
        plan = replace(self.plan.with_zone(zone), workload_name=workload.name)
        self.display.info(f"resuming run {self.run_id}: following {workload.name}")
        outcome = RunOutcome(self.run_id, RunStatus.RUNNING, zone=zone, workload=workload.name)

        def body() -> None:
            self._follow(plan, zone)
            self._results(plan, outcome)

        return self._guarded(outcome, body)

    def _next_segment_of_stopped_run(self) -> RunOutcome:
        """Capacity again, and the same workload name, so MaxText restores its checkpoint."""
        names = [r.name for r in self.store.resources(self.run_id) if r.kind == "workload"]
        if not names:
            raise InputError(
                f"run {self.run_id} never submitted a workload: there is nothing to resume",
                fix="train again",
            )
        self.plan = replace(self.plan, workload_name=names[-1])
        running_again(self.store, self.run_id)
        self.book.pick_up()
        self.display.info(f"resuming run {self.run_id}: {names[-1]} again on new capacity")
        outcome = RunOutcome(self.run_id, RunStatus.RUNNING, workload=names[-1])
        return self._guarded(outcome, lambda: self._launch(outcome=outcome))

    # ---- steps ---------------------------------------------------------------------------
    def _provision(self, plan: Plan, outcome: RunOutcome) -> str:
        """The prerequisites, then node pools (or the ones already there): their zone."""
        stages = self.stages
        stages.start("prerequisites")
        from tpu_trainer.launchers.gke.preflight import before_create

        ready = before_create(plan, self.config, self.svc.gcloud)
        self._project_number = ready.project_number
        stages.done("prerequisites")
        stages.start("provision")
        prov = Provisioner(
            self.svc.gcloud,
            self.svc.xpk,
            self.svc.kubectl,
            self.store,
            self.run_id,
            self.config,
            plan.slice,
            plan.num_slices,
            self.display,
            poll_seconds=self.poll_seconds,
            cluster=ready.cluster,
            pools=ready.pools,
            project_number=ready.project_number,
            reservations=ready.reservations,
            adapt_with_xpk=self._submitter.kueue.adapt_with_xpk,
        )
        try:
            made = prov.ensure()
        finally:
            outcome.attempts = list(prov.attempts)
        self._kueue_ready = prov.kueue_ready
        outcome.zone, outcome.pool = made.zone, made.pool
        self.store.update_run(self.run_id, zone=made.zone)
        stages.done("provision", detail=f"{', '.join(made.pools)} in {made.zone}")
        return made.zone

    def _configure(self, plan: Plan) -> None:
        stages = self.stages
        stages.start("configure")
        if self._kueue_ready:  # read while provisioning, and nothing has changed it since
            stages.done("configure", detail="0 repaired (Kueue read while provisioning)")
            return
        fixed = kueue_setup.ensure(
            self.svc.kubectl,
            self.svc.runner,
            self.config.cluster_name,
            plan.slice,
            plan.num_slices,
            self.display,
            xpk_configmap=self._submitter.kueue.xpk_configmap,
            local_queue=plan.local_queue,
        )
        stages.done("configure", detail=f"{len(fixed)} repaired")

    def _scripts(self, plan: Plan) -> Plan:
        stages = self.stages
        stages.start("scripts")
        setup, submit = plan.files
        write_generated(setup, render_setup(plan), executable=True)
        write_generated(submit, render_submit(plan), executable=True)
        stages.done("scripts", detail=str(submit))
        return plan

    def _results(self, plan: Plan, outcome: RunOutcome) -> None:
        """Metrics into the store, and (with a steady state) a section in the model's README."""
        from tpu_trainer.app.results import record_results

        interrupted = self.book.summary()
        if interrupted:
            self.display.info(interrupted)
        recorded = record_results(self.stages, plan, self.log_path, self.lang, note=interrupted)
        if recorded is not None:
            outcome.metrics, outcome.readme = recorded.metrics, recorded.readme

    def _submit(self, plan: Plan, script: Path, zone: str, outcome: RunOutcome) -> SubmitScript:
        """Run the submit script until the workload exists: the follow may start while the
        script's last steps run (:class:`SubmitScript`; its ``finish`` waits for them)."""
        self.stages.start("submit")
        name, submitter = plan.workload_name, self._submitter
        config = self.config
        own = OwnPolicy(self.store, self.svc.gcloud, self.run_id, config.project_id, config.region)
        policy_rid = own.before_submit(submitter, plan.slice.workload_policy)
        rid = self.store.resource_intent(
            self.run_id,
            kind="workload",
            name=name,
            project=config.project_id,
            location=zone,
            cluster=config.cluster_name,
            detail={"zone": zone, SUBMITTER_KEY: submitter.name},
        )
        env = {**submitter.script_env(self._project_number), "WORKLOAD_NAME": name}
        running = SubmitScript(
            self.svc.runner,
            script,
            env,
            lambda line: submitter.says_submitted(line, name),
            self.display,
        )
        result = running.run()
        try:
            own.after_submit(policy_rid, plan.slice.workload_policy or "")
            if result is not None and not result.ok:
                # xpk may fail after the JobSet exists: teardown asks the cluster and deletes it
                self.store.resource_state(rid, ResourceState.MAYBE, exit_code=result.code)
                self.stages.done("submit", "failed", result.text()[-500:])
                raise CommandFailed(result, fix=f"see the output of {script}")
            self.store.resource_state(rid, ResourceState.CREATED)
            outcome.workload = name
            self.stages.done("submit", detail=name)
        except BaseException:
            running.stop()
            raise
        return running

    def _follow(self, plan: Plan, zone: str) -> SegmentOutcome:
        """Follow the workload to its end: how its segment ended."""
        end = FAILED
        try:
            end = self._follow_workload(plan, zone)
        finally:
            self.book.end(end)
        return end

    def _follow_workload(self, plan: Plan, zone: str) -> SegmentOutcome:
        self.stages.start("follow")
        from tpu_trainer.launchers.gke.follow import Follower

        watch = self._watchdog(plan)
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
            watch=watch,
            live=LiveSteps(self.store, self.run_id),
        )
        followed = follower.run()
        if followed.hang is not None:
            self._hung(followed.hang.message)
            return FAILED
        if not followed.started and not followed.fatal:
            message = followed.message or "the workload's pods did not start"
            self.stages.done("follow", "failed", message)
            self.store.finish_run(self.run_id, RunStatus.FAILED, message[:2000])
            self.display.warn(message)
            return FAILED
        if followed.fatal:
            first = followed.fatal[0]
            message = f"{first.title}: {first.excerpt} — fix: {first.fix}"
            self.stages.done("follow", "failed", message)
            self.store.finish_run(self.run_id, RunStatus.FAILED, message[:2000])
            self.display.warn(f"fatal error in the workload's log: {message}")
            return transient_failure(first.title, message) if first.transient else FAILED
        submitter = self._submitter
        target = self._target(plan, zone)
        verdict = submitter.wait(target, follower.ending, self.wait_timeout_s)
        ending = follower.ending()  # the JobSet's own Completed/Failed condition, when it has one
        if ending is not None:
            verdict = WaitOutcome.SUCCEEDED if ending.succeeded else WaitOutcome.FAILED
            self.display.info(ending.describe(plan.workload_name))
        self.stages.done("follow", verdict.value)
        if verdict is WaitOutcome.SUCCEEDED:
            cut = cut_in_log(self.log_path, steps_of(plan), self.book.start)
            if cut is not None:
                self.store.finish_run(self.run_id, RunStatus.INTERRUPTED, cut.message)
                self.display.warn(f"the workload exited 0 but was {cut.message}")
                return SegmentOutcome(cut=cut, message=cut.message)
            self.store.finish_run(self.run_id, RunStatus.SUCCEEDED)
            return FINISHED
        message = {
            WaitOutcome.FAILED: ending.describe(plan.workload_name)
            if ending is not None
            else "the workload finished but failed",
            WaitOutcome.TIMEOUT: f"the workload did not finish within {self.wait_timeout_s} s",
        }[verdict]
        self.store.finish_run(self.run_id, RunStatus.FAILED, message)
        return FAILED

    def _watchdog(self, plan: Plan) -> LogWatch:
        settings = watchdog_settings(
            self.store,
            plan.model,
            plan.slice.device_type,
            k=self.config.watchdog_k,
            first_step_deadline_s=self.config.first_step_deadline,
        )
        return LogWatch(settings, clock=self.svc.clock)

    def _hung(self, message: str) -> None:
        """The watchdog's decision: the run fails, and what it holds is deleted at once (the
        ``stop`` stage), before its steps are collected; the guard's teardown then finds
        nothing left."""
        self.stages.done("follow", "failed", message)
        self.store.finish_run(self.run_id, RunStatus.FAILED, message[:2000])
        self.display.warn(f"watchdog: {message}; stopping the run and tearing down")
        self.stages.start("stop")
        decided = self.svc.clock.now()
        report = self._teardown().run(self.run_id)
        took = self.svc.clock.now() - decided
        detail = f"{report.summary()}; {took:.0f} s after the decision"
        self.stages.done("stop", "ok" if report.clean else "failed", detail)

    @property
    def log_path(self) -> Path:
        """Worker 0's log, kept beside the run store."""
        return self.store.path.parent / "runs" / self.run_id / "worker0.log"

    def on_log_line(self, line: str) -> None:
        """Each line of worker 0's log as it arrives: show each completed step; a segment's
        first step ends the recovery from the interruption before it."""
        self.book.on_line(line)
        if self._steps is None:
            self._steps = StepDisplay(self.display)
        self._steps(line)
