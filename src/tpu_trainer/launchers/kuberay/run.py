"""One run on KubeRay: RayCluster -> head -> Ray job (JaxTrainer + MaxText) -> results -> delete.

The RayCluster and the ConfigMap holding the entry script are written to the store before
they are applied, and deleted on success, failure, Ctrl-C and SIGTERM (``tpu-trainer gc``
finishes the job after a SIGKILL). The job is followed through Ray's Jobs API over
``kubectl port-forward``; worker 0's MaxText lines become the run's metrics and README section.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tpu_trainer.app.display import Display
from tpu_trainer.app.results import Versions
from tpu_trainer.app.services import new_run_id
from tpu_trainer.app.stages import Stages
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.ray_jobs import RayJobsClient
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.infra.xpk import Xpk
from tpu_trainer.launchers.gke.run import RunOutcome
from tpu_trainer.launchers.gke.teardown import teardown_always
from tpu_trainer.launchers.kuberay.cluster import KubeRayCluster, KubeRayTeardown
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
from tpu_trainer.launchers.ray.job import JobRequest, RayJob
from tpu_trainer.plan.plan import Plan
from tpu_trainer.plan.plan_json import plan_json
from tpu_trainer.store.db import RunStatus, RunStore


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
class KubeRayRun:
    store: RunStore
    runner: CommandRunner
    display: Display
    plan: Plan
    request: str
    settings: RaySettings
    kubectl: Kubectl | None = None
    """kubectl for the GKE cluster (default: the current context)."""
    lang: str = "zh"
    run_id: str = field(default_factory=new_run_id)
    head_timeout_s: float = 900.0
    poll_seconds: float = 10.0
    deadlines: Deadlines = field(default_factory=Deadlines)
    env: Mapping[str, str] | None = None
    """Where ``RAY_AUTH_TOKEN`` is looked up first (default: this process's environment)."""

    @property
    def run_dir(self) -> Path:
        return self.store.path.parent / "runs" / self.run_id

    def start(self) -> RunOutcome:
        plan, config = self.plan, self.plan.config
        kplan = kuberay_plan(plan, self.settings, self.run_id)
        self.store.create_run(
            self.run_id,
            model=plan.model,
            request=self.request,
            launcher="kuberay",
            device_type=plan.slice.device_type,
            precision=plan.precision.value,
            project=config.project_id,
            cluster=config.cluster_name,
            region=config.region,
            zone=None,
            plan_json=plan_json(plan),
        )
        self.display.info(
            f"run {self.run_id}: {plan.model} on {plan.num_slices} x {plan.slice} with KubeRay "
            f"(RayCluster {kplan.name})"
        )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "raycluster.yaml").write_text(
            manifest_yaml(kplan.objects), encoding="utf-8"
        )
        (self.run_dir / ENTRY_SCRIPT).write_text(kplan.entry_script, encoding="utf-8")
        kubectl = self.kubectl or Kubectl(self.runner)
        teardown = KubeRayTeardown(
            self.store,
            Gcloud(self.runner, config.project_id),
            Xpk(self.runner),
            self.display,
            kubectl,
        )
        outcome = RunOutcome(self.run_id, RunStatus.RUNNING, workload=kplan.submission_id)
        try:
            with teardown_always(self.store, self.run_id, teardown):
                self._body(kubectl, kplan, outcome)
        except TpuTrainerError as e:
            outcome.error = e.message
            raise
        finally:
            row = self.store.run(self.run_id)
            outcome.status = row.status if row else RunStatus.FAILED
        return outcome

    def _body(self, kubectl: Kubectl, kplan: KubeRayPlan, outcome: RunOutcome) -> None:
        stages = Stages(self.store, self.display, self.run_id)
        cluster = KubeRayCluster(
            kubectl,
            self.runner,
            self.store,
            self.display,
            self.run_id,
            self.plan.config.project_id,
            self.plan.config.cluster_name,
        )
        stages.start("provision")
        cluster.create(kplan)
        stages.done("provision", detail=f"RayCluster {kplan.name} in {kplan.namespace}")
        stages.start("head")
        cluster.wait_head(kplan, self.head_timeout_s, self.poll_seconds)
        stages.done("head", detail=head_service(kplan.name))
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
            job = RayJob(
                stages,
                self.plan,
                self.run_dir,
                self.lang,
                Versions(),
                redactor=Redactor(extra=[token]),
            )
            request = JobRequest(
                entrypoint=kplan.entrypoint,
                submission_id=kplan.submission_id,
                env=kplan.job_env,
                waiting=waiting_for_slices(self.plan, kplan),
                deadlines=self.deadlines,
            )
            result = job.run(client, request)
        outcome.error = result.error
        if result.recorded is not None:
            outcome.metrics, outcome.readme = result.recorded.metrics, result.recorded.readme
