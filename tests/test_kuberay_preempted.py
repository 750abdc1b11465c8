"""A Ray job on KubeRay whose TPU slice is reclaimed mid-run: Ray fails the job, the cluster's
worker pods say why (DisruptionTarget). With --auto-resume the RayCluster is made again and the
job submitted again under the same run_name, so MaxText restores its last durable checkpoint;
without it the run ends interrupted. Transient errors retry on a budget of their own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import FIXTURES
from kuberay_setup import SETTINGS, TOKEN, Cloud, kinds_left, kuberay_cloud, kuberay_run
from resume_checks import live_resources, segments
from tpu_trainer.app.outcome import RunOutcome
from tpu_trainer.fakecloud import load_scenario
from tpu_trainer.fakecloud.ray_dashboard import (
    FakeRayDashboard,
    JobScript,
    ray_job_log,
    reclaimed_jobs,
)
from tpu_trainer.fakecloud.state import read_state
from tpu_trainer.launchers.kuberay.manifests import kuberay_plan
from tpu_trainer.launchers.kuberay.run import KubeRayRun
from tpu_trainer.launchers.ray.follow import Deadlines
from tpu_trainer.plan.plan import Plan
from tpu_trainer.simcloud.kube.node_shutdown import reclaim_workers
from tpu_trainer.simcloud.kube.raycluster import configure_ray
from tpu_trainer.store.db import RunStatus

pytestmark = pytest.mark.e2e

SCENARIO = FIXTURES / "scenarios" / "kuberay_preempted.yaml"
RUN_ID = "5eedc0de"
STEPS = (("steps", "50"), ("checkpoint_period", "10"), ("enable_checkpointing", "true"))


def _command(plan: Plan) -> str:
    """The MaxText arguments the job's entry script runs."""
    return " ".join(plan.expand(text) for text in plan.program_arg_texts)


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    with kuberay_cloud(tmp_path, load_scenario(SCENARIO), RUN_ID, STEPS) as made:
        yield made


@dataclass(frozen=True)
class Ran:
    run: KubeRayRun
    outcome: RunOutcome
    submitted: list[str]
    """The Ray jobs' submission ids, in order."""


def _start(
    cloud: Cloud, scripts: tuple[JobScript, ...], *, replace: bool = False, **retries: int
) -> Ran:
    """Run the recipe on KubeRay against a fake dashboard playing ``scripts`` in turn (with
    ``replace`` the operator deletes and makes again a worker pod that ended, as KubeRay does)."""
    first, *later = scripts
    with FakeRayDashboard(TOKEN, first, later=later) as dash:
        configure_ray(
            cloud.state, dashboard_port=dash.port, token=TOKEN, replace_ended_workers=replace
        )
        run = kuberay_run(
            cloud,
            RUN_ID,
            deadlines=Deadlines(start_s=60, finish_s=60, poll_s=0.05),
            auto_resume=retries.get("auto_resume", 0),
            error_retries=retries.get("error_retries", 0),
        )
        outcome = run.start()
    return Ran(run, outcome, list(dash.jobs))


def _nothing_left(cloud: Cloud) -> None:
    assert kinds_left(cloud.state) == set()
    assert live_resources(cloud.store.path) == []


def _reclaimed(cloud: Cloud) -> tuple[JobScript, JobScript]:
    after = load_scenario(SCENARIO).workloads.reclaim_after_step
    assert after == 30
    name = kuberay_plan(cloud.plan, SETTINGS, RUN_ID).name

    def reclaim() -> None:  # the cloud takes the slice back under the run's RayCluster
        assert reclaim_workers(cloud.state, name) > 0

    return reclaimed_jobs(after, _command(cloud.plan), reclaim)


@pytest.mark.parametrize("replace", [False, True], ids=["failed-pods-kept", "kuberay-replaced"])
def test_a_reclaimed_ray_job_resumes_on_a_new_raycluster_and_finishes(
    cloud: Cloud, replace: bool
) -> None:
    ran = _start(cloud, _reclaimed(cloud), replace=replace, auto_resume=2)
    outcome = ran.outcome
    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    assert segments(cloud.store.path) == [
        (1, "preempted", 30, 30, None, None),
        (2, None, 49, 40, 30, 0),
    ]
    (second,) = [s for s in cloud.store.segments(RUN_ID) if s.n == 2]
    assert second.recovery_s is not None and second.recovery_s > 0
    # a new job id on the new RayCluster, the same MaxText run_name in the entry script
    assert ran.submitted == [f"tpu-trainer-{RUN_ID}", f"tpu-trainer-{RUN_ID}-2"]
    applied = [a for a, *_ in cloud.store.commands(RUN_ID) if a[0] == "kubectl" and "apply" in a]
    checked = [a for a in applied if "--dry-run=server" in a]
    assert len(applied) - len(checked) == 4  # the ConfigMap and the RayCluster, twice
    assert len(checked) == 2  # each pair checked by the cluster first, in one call
    log = (ran.run.run_dir / "worker0.log").read_text(encoding="utf-8")
    assert "completed step: 31," in log.split("restoring from this run's directory step 30")[1]
    assert [s["step"] for s in cloud.store.steps(RUN_ID)][-1] == 49
    row = cloud.store.run(RUN_ID)
    assert row is not None and row.error is None
    assert outcome.readme is not None
    readme = outcome.readme.read_text(encoding="utf-8")
    assert "1 interruption(s) resumed: 0 step(s) redone" in readme
    _nothing_left(cloud)


def test_without_auto_resume_the_reclaimed_ray_job_ends_interrupted(cloud: Cloud) -> None:
    ran = _start(cloud, _reclaimed(cloud))
    assert ran.outcome.status is RunStatus.INTERRUPTED
    row = cloud.store.run(RUN_ID)
    assert row is not None and row.error is not None
    assert row.error.startswith("interrupted at step 30 of 50 (preempted: TPU worker pod ")
    assert "DisruptionTarget, TerminationByKubelet" in row.error
    assert "last durable checkpoint: step 30" in row.error
    assert segments(cloud.store.path) == [(1, "preempted", 30, 30, None, None)]
    assert ran.submitted == [f"tpu-trainer-{RUN_ID}"]
    _nothing_left(cloud)


def test_once_kuberay_made_the_lost_workers_again_the_events_still_say_why(cloud: Cloud) -> None:
    """On a real cluster KubeRay deletes a Failed worker replica and makes it again long
    before Ray gives the job up: the pods say nothing then, the namespace's Events do."""
    ran = _start(cloud, _reclaimed(cloud), replace=True)
    assert ran.outcome.status is RunStatus.INTERRUPTED
    row = cloud.store.run(RUN_ID)
    assert row is not None and row.error is not None
    assert row.error.startswith("interrupted at step 30 of 50 (preempted: TPU worker pod ")
    assert re.search(
        r"lost \(its node gke-demo-cluster-tpu-pool-\w+-\w+ shut down; KubeRay deleted the "
        r"Failed pod\) and 15 more",
        row.error,
    ), row.error
    assert "last durable checkpoint: step 30" in row.error
    assert segments(cloud.store.path) == [(1, "preempted", 30, 30, None, None)]
    reads = [
        a
        for a, *_ in cloud.store.commands(RUN_ID)
        if a[0] == "kubectl" and [w for w in a if not w.startswith("-")][1:3] == ["get", "events"]
    ]
    assert reads, "the events were not read"
    deleted = [
        e
        for key, e in read_state(cloud.state)["kube_api"]["objects"].items()
        if key.startswith("/events/") and e["reason"] == "DeletedWorkerPod"
    ]
    assert len(deleted) == 16  # the replica KubeRay deleted, every host of it
    _nothing_left(cloud)


RESET = "E1122 grpc.cc:12] UNAVAILABLE: Connection reset by peer (from /job:tpu_worker)"


def test_a_transient_error_retries_the_ray_job_on_its_own_budget(cloud: Cloud) -> None:
    failing = JobScript(
        statuses=("PENDING", "RUNNING", "FAILED"),
        chunks=ray_job_log(f"completed step: 0, seconds: 2.7, loss: 9.1\n{RESET}\n", chunks=2),
        message="Job failed due to an application error",
        driver_exit_code=1,
    )
    ran = _start(cloud, (failing,), auto_resume=3, error_retries=1)
    assert ran.outcome.status is RunStatus.FAILED
    why = "transient error: A TPU worker connection dropped (transient)"
    assert segments(cloud.store.path, "n, cause") == [(1, why), (2, why)]
    assert ran.submitted == [f"tpu-trainer-{RUN_ID}", f"tpu-trainer-{RUN_ID}-2"]
    _nothing_left(cloud)
