"""One run on KubeRay: RayCluster -> head -> Ray job (JaxTrainer + MaxText) -> results -> delete.

The RayCluster and the ConfigMap holding the entry script are written to the store before
they are applied, and deleted on success, failure, Ctrl-C and SIGTERM (``tpu-trainer gc``
finishes the job after a SIGKILL). The job is followed through Ray's Jobs API over
``kubectl port-forward``; worker 0's MaxText lines become the run's metrics and README section.
``resume RUN`` follows again the job a process that died left on its RayCluster (Ray keeps its
whole log), or runs a new segment on a RayCluster made again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from tpu_trainer.app.display import Display
from tpu_trainer.app.guard import RunTeardown
from tpu_trainer.app.launcher import Launcher, RunRecord
from tpu_trainer.app.outcome import RunOutcome
from tpu_trainer.app.plan_json import plan_json
from tpu_trainer.app.results import Versions
from tpu_trainer.app.resume import (
    FAILED,
    FINISHED,
    Budgets,
    SegmentBook,
    SegmentOutcome,
    running_again,
    stopped_run,
)
from tpu_trainer.app.watchdog_run import plan_watchdog
from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.ray_jobs import JobInfo, RayJobsClient
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.infra.xpk import Xpk
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.kuberay.cluster import (
    RAYCLUSTER,
    KubeRayCluster,
    KubeRayTeardown,
    head_ready,
)
from tpu_trainer.launchers.kuberay.manifests import (
    ACCELERATOR_LABEL,
    TOPOLOGY_LABEL,
    WORKER_GROUP,
    KubeRayPlan,
    RaySettings,
    head_service,
    kuberay_plan,
    manifest_yaml,
)
from tpu_trainer.launchers.ray.entry import ENTRY_SCRIPT
from tpu_trainer.launchers.ray.follow import Deadlines, Waiting
from tpu_trainer.launchers.ray.job import JobRequest, RayJob, job_logs
from tpu_trainer.plan.plan import Plan
from tpu_trainer.store.db import LIVE_STATES, RunStatus, RunStore


def waiting_for_slices(plan: Plan, kplan: KubeRayPlan) -> Waiting:
    """The shape of the TPU workers a job waits for, and how to give them to it (pure)."""
    s = plan.slice
    shape = (
        f"{plan.num_slices} x {s.device_type} ({s.hosts} hosts x {s.chips_per_host} chips each, "
        f"nodes labelled {ACCELERATOR_LABEL}={s.accelerator.gke_accelerator}, "
        f"{TOPOLOGY_LABEL}={s.topology_name})"
    )
    fix = (
        f"give the cluster {plan.num_slices} node pool(s) of that shape (machine type "
        f"{s.machine_type}, --tpu-topology={s.topology_name}, {s.hosts} nodes) or free one; "
        f"`kubectl get pods -l ray.io/cluster={kplan.name},ray.io/group={WORKER_GROUP} "
        f"--namespace={kplan.namespace}` shows why the TPU workers are Pending"
    )
    return Waiting(shape=shape, fix=fix)


@dataclass
class KubeRayRun(Launcher):
    """The KubeRay launcher: provision (RayCluster) -> head -> Ray job -> results."""

    launch_path = LaunchPath.KUBERAY
    store: RunStore
    runner: CommandRunner
    display: Display
    plan: Plan
    request: str
    settings: RaySettings
    kubectl: Kubectl | None = None
    """kubectl for the GKE cluster (default: the current context)."""
    lang: str = "zh"
    run_id: str = field(kw_only=True)
    head_timeout_s: float = 900.0
    poll_seconds: float = 10.0
    deadlines: Deadlines = field(default_factory=Deadlines)
    env: Mapping[str, str] | None = None
    """Where ``RAY_AUTH_TOKEN`` is looked up first (default: this process's environment)."""
    auto_resume: int = 0
    """How many preemptions the run resumes after (a new RayCluster, MaxText restoring)."""
    error_retries: int = 0
    """How many transient errors (as the diagnosis marks them) the run retries."""

    _kplan: KubeRayPlan | None = None
    _book: SegmentBook | None = None

    @property
    def book(self) -> SegmentBook:
        """The run's segments: one per RayCluster and job."""
        if self._book is None:
            job_log, worker0_log = job_logs(self.run_dir)
            self._book = SegmentBook(self.store, self.run_id, worker0_log, also=(job_log,))
        return self._book

    @property
    def kplan(self) -> KubeRayPlan:
        if self._kplan is None:
            self._kplan = kuberay_plan(self.plan, self.settings, self.run_id)
        return self._kplan

    # ---- the template's parts ------------------------------------------------------------
    def _check(self) -> None:
        _ = self.kplan  # a plan KubeRay cannot run is refused before the run is recorded

    def _record(self) -> RunRecord:
        plan, config = self.plan, self.plan.config
        return RunRecord(
            model=plan.model,
            device_type=plan.slice.device_type,
            precision=plan.precision.value,
            project=config.project_id,
            cluster=config.cluster_name,
            region=config.region,
            plan_json=plan_json(plan),
        )

    def _headline(self) -> str:
        plan = self.plan
        return (
            f"run {self.run_id}: {plan.model} on {plan.num_slices} x {plan.slice} with KubeRay "
            f"(RayCluster {self.kplan.name})"
        )

    def _new_outcome(self) -> RunOutcome:
        return RunOutcome(self.run_id, RunStatus.RUNNING, workload=self.kplan.submission_id)

    def _teardown(self) -> RunTeardown:
        return KubeRayTeardown(
            self.store,
            Gcloud(self.runner, self.plan.config.project_id),
            Xpk(self.runner),
            self.display,
            self._kubectl,
        )

    @property
    def _kubectl(self) -> Kubectl:
        return self.kubectl or Kubectl(self.runner)

    def _launch(self, *, outcome: RunOutcome, held: tuple[int, ...] | None = None) -> None:
        """One segment, then one more after each preemption (or transient error) while its
        budget lasts: the RayCluster is deleted, made again (its TPU workers wait for
        capacity as the first time), and the job submitted again with the same ``run_name``,
        so MaxText restores its last durable checkpoint. ``held``: the first segment is the
        open one whose job is followed again (:meth:`SegmentBook.reattach`)."""
        kplan = self.kplan
        self._write_manifests(kplan)
        budgets = Budgets(self.auto_resume, self.error_retries)
        while True:
            if held is None:
                self._provision(kplan)
                self.book.begin(None)
            end = FAILED
            try:
                end = self._job(kplan, held)
            finally:
                self.book.end(end)
            held = None
            if not budgets.allow(end):
                break
            self.book.carry_on(end, self.display, self._teardown())
        outcome.error = None if end is FINISHED else end.message
        note = self.book.summary()
        if note:
            self.display.info(note)
        recorded = self._ray_job().record(note)
        if recorded is not None:
            outcome.metrics, outcome.readme = recorded.metrics, recorded.readme

    def resume(self) -> RunOutcome:
        """Carry on a run whose process died, or that ended interrupted. While the run's
        RayCluster is there with its head ready and Ray still knows the job of the segment
        the dead process left open (running, or ended), that segment carries on: the job is
        followed again from the first line of its log. Otherwise that segment ends as
        ``crashed``, what the run still holds is deleted, and a new segment runs on a
        RayCluster made again (the same ``run_name``: MaxText restores its last durable
        checkpoint)."""
        row = stopped_run(self.store, self.run_id)
        if row.status is RunStatus.SUCCEEDED:
            raise InputError(f"run {self.run_id} succeeded: there is nothing to resume")
        running_again(self.store, self.run_id)
        open_n = self._open_segment()
        job = self._job_left(self.kplan, open_n) if open_n is not None else None
        held = self.book.reattach(open_n) if job is not None else None
        if held is None:
            self.book.pick_up()
        if job is not None and held is not None:
            say = (
                f"Ray job {job.submission_id} is {job.status.value} on RayCluster "
                f"{self.kplan.name}: following it again in segment {open_n}"
            )
        else:
            say = "the next segment runs on a RayCluster made again"
        self.display.info(f"resuming run {self.run_id}: {say}")
        outcome = self._new_outcome()

        def body() -> None:
            if held is None and self.store.resources(self.run_id, states=LIVE_STATES):
                self._teardown().run(self.run_id)
            self._launch(outcome=outcome, held=held)

        return self._guarded(outcome, body)

    def _open_segment(self) -> int | None:
        done = self.store.segments(self.run_id)
        return done[-1].n if done and done[-1].ended_at is None else None

    def _job_left(self, kplan: KubeRayPlan, n: int) -> JobInfo | None:
        """The job segment ``n`` submitted, as Ray on the run's RayCluster knows it (None: the
        RayCluster, its head or the job is gone)."""
        live = self.store.resources(self.run_id, states=LIVE_STATES)
        if not any(r.kind == RAYCLUSTER for r in live):
            return None
        found = self._kubectl.get(RAYCLUSTER, kplan.name, kplan.namespace)
        if found is None or not head_ready(found):
            return None
        cluster = self._cluster
        try:
            with cluster.dashboard(kplan) as address:
                env = dict(self.env if self.env is not None else os.environ)
                client = RayJobsClient(address, cluster.token(kplan, env))
                return client.status(segment_submission(kplan.submission_id, n))
        except TpuTrainerError as e:
            self.display.warn(f"Ray on RayCluster {kplan.name} cannot say: {e.message}")
            return None

    # ---- steps ---------------------------------------------------------------------------
    def _write_manifests(self, kplan: KubeRayPlan) -> None:
        """The RayCluster and the entry script, kept in the run's folder."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "raycluster.yaml").write_text(
            manifest_yaml(kplan.objects), encoding="utf-8"
        )
        (self.run_dir / ENTRY_SCRIPT).write_text(kplan.entry_script, encoding="utf-8")

    @property
    def _cluster(self) -> KubeRayCluster:
        config = self.plan.config
        return KubeRayCluster(
            self._kubectl,
            self.runner,
            self.store,
            self.display,
            self.run_id,
            config.project_id,
            config.cluster_name,
        )

    def _provision(self, kplan: KubeRayPlan) -> None:
        stages, cluster = self.stages, self._cluster
        stages.start("provision")
        cluster.create(kplan)
        stages.done("provision", detail=f"RayCluster {kplan.name} in {kplan.namespace}")
        stages.start("head")
        cluster.wait_head(kplan, self.head_timeout_s, self.poll_seconds)
        stages.done("head", detail=head_service(kplan.name))

    def _ray_job(self, token: str | None = None) -> RayJob:
        return RayJob(
            self.stages,
            self.plan,
            self.run_dir,
            self.lang,
            Versions(),
            redactor=Redactor(extra=[token] if token else []),
            on_line=self.book.on_line,
        )

    def _job(self, kplan: KubeRayPlan, held: tuple[int, ...] | None = None) -> SegmentOutcome:
        """The Ray job through the dashboard's port-forward: how its segment ended (``held``:
        the job the open segment submitted, followed again)."""
        cluster = self._cluster
        with cluster.dashboard(kplan) as address:
            token = cluster.token(kplan, dict(self.env if self.env is not None else os.environ))
            client = RayJobsClient(
                address,
                token,
                hint=f"the port-forward to svc/{head_service(kplan.name)} ended; "
                f"is the head pod still running? (`kubectl get pods -l ray.io/cluster={kplan.name}`)",
            )
            version = client.version().get("ray_version", "?")
            self.display.info(f"Ray {version} at {address} (through kubectl port-forward)")
            request = JobRequest(
                entrypoint=kplan.entrypoint,
                submission_id=segment_submission(kplan.submission_id, self.book.n),
                env=kplan.job_env,
                waiting=waiting_for_slices(self.plan, kplan),
                deadlines=self.deadlines,
                watchdog=plan_watchdog(self.store, self.plan),
            )
            followed = self._ray_job(token).follow(
                client,
                request,
                start=self.book.start,
                taken_back=lambda: cluster.taken_back(kplan),
                held=None if held is None else (held[1], held[0]),
            )
        return followed.segment()


def segment_submission(first: str, n: int) -> str:
    """The Ray job's submission id in segment ``n``: the first keeps the run's, a later one
    (on a RayCluster made again) says which segment it is."""
    return first if n <= 1 else f"{first}-{n}"
