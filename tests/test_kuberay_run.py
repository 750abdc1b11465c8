"""The KubeRay launcher end to end against the simulated cloud: the real kubectl against the
Kubernetes API emulator, whose KubeRay controller makes the RayCluster's pods, head Service and
token Secret, and whose port-forward tunnel reaches a fake Ray dashboard on 127.0.0.1 that plays
the job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import new_run
from kuberay_setup import (
    CPU_ONLY,
    SETTINGS,
    TOKEN,
    Cloud,
    kinds_left,
    kuberay_cloud,
    kuberay_run,
    ray_job_chunks,
)
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.fakecloud import parse_scenario
from tpu_trainer.fakecloud.ray_dashboard import FakeRayDashboard, JobScript
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.kuberay.run import KubeRayRun
from tpu_trainer.launchers.ray.follow import Deadlines
from tpu_trainer.simcloud.kube.raycluster import configure_ray
from tpu_trainer.store.db import ResourceState, RunStatus

pytestmark = pytest.mark.e2e

RUN_ID = "feedf00d"


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    # the job log's 12 steps are all the run asks for: Ray's SUCCEEDED is then the truth
    with kuberay_cloud(tmp_path, parse_scenario(CPU_ONLY), RUN_ID, (("steps", "12"),)) as made:
        yield made


def _run(cloud: Cloud, **kwargs: object) -> KubeRayRun:
    return kuberay_run(cloud, RUN_ID, **kwargs)


def test_a_kuberay_run_creates_follows_records_and_deletes_everything(cloud: Cloud) -> None:
    script = JobScript(
        statuses=("PENDING", "RUNNING", "RUNNING", "SUCCEEDED"), chunks=ray_job_chunks()
    )
    with FakeRayDashboard(TOKEN, script) as dash:
        configure_ray(cloud.state, dashboard_port=dash.port, token=TOKEN)
        run = _run(cloud, deadlines=Deadlines(start_s=60, finish_s=60, poll_s=0.05))
        outcome = run.start()

    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    store = cloud.store
    assert [s["step"] for s in store.steps(RUN_ID)] == list(range(12))
    assert outcome.readme is not None and f"tpu-trainer run {RUN_ID}" in outcome.readme.read_text()
    resources = {(r.kind, r.state) for r in store.resources(RUN_ID)}
    assert resources == {
        ("raycluster", ResourceState.DELETED),
        ("configmap", ResourceState.DELETED),
    }
    assert kinds_left(cloud.state) == set()  # the operator's Secret went with its cluster
    kubectl = [argv for argv, *_ in store.commands(RUN_ID) if argv[0] == "kubectl"]
    verbs = [next(a for a in argv[1:] if not a.startswith("-")) for argv in kubectl]
    assert verbs[:3] == ["apply", "apply", "apply"] and verbs[-2:] == ["delete", "delete"]
    assert "--dry-run=server" in kubectl[0] and "--dry-run=server" not in kubectl[1]
    assert "port-forward" in verbs
    # the job: the mounted entry script, Ray's log deduplication off, authorized calls only
    (job,) = dash.jobs.values()
    assert job.entrypoint == "python /tpu-trainer/train_entry.py"
    assert job.runtime_env["env_vars"]["RAY_DEDUP_LOGS"] == "0"
    assert all(ok for *_, ok in dash.calls)
    # worker 0's log holds 4411's lines only, without Ray's prefixes
    worker0 = (run.run_dir / "worker0.log").read_text()
    assert "RayTrainWorker" not in worker0 and worker0.count("completed step: 3,") == 1
    assert (run.run_dir / "raycluster.yaml").is_file() and (
        run.run_dir / "train_entry.py"
    ).is_file()
    # the token is in no file: the secret's recorded output is masked
    for path in [*run.run_dir.rglob("*"), store.path]:
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    secret_reads = [a for a, *_ in store.commands(RUN_ID) if "secret" in a]
    assert secret_reads and all("token:***" in " ".join(a) for a in secret_reads)


def test_a_slice_that_never_comes_fails_the_run_with_its_shape_and_still_deletes(
    cloud: Cloud,
) -> None:
    waiting = "(JaxTrainer pid=812) Failed to reserve TPU head for slice with shape: tpu7x-64, retrying in 10s\n"
    with FakeRayDashboard(TOKEN, JobScript(statuses=("RUNNING",), chunks=(waiting,))) as dash:
        configure_ray(cloud.state, dashboard_port=dash.port, token=TOKEN)
        outcome = _run(cloud, deadlines=Deadlines(start_s=0.5, finish_s=60, poll_s=0.05)).start()
    assert outcome.status is RunStatus.FAILED
    assert outcome.error is not None
    assert "1 x tpu7x-4x4x4 (16 hosts x 4 chips each" in outcome.error
    assert "--tpu-topology=4x4x4" in outcome.error
    assert "Failed to reserve TPU head" in outcome.error
    assert dash.jobs[f"tpu-trainer-{RUN_ID}"].status == "STOPPED"
    assert kinds_left(cloud.state) == set()
    row = cloud.store.run(RUN_ID)
    assert row is not None and row.status is RunStatus.FAILED


def test_a_head_that_never_gets_ready_fails_and_still_deletes(cloud: Cloud) -> None:
    configure_ray(cloud.state, dashboard_port=None, token=TOKEN, head_ready=False)
    with pytest.raises(TpuTrainerError, match="was not ready within"):
        _run(cloud, head_timeout_s=0.2).start()
    row = cloud.store.run(RUN_ID)
    assert row is not None and row.status is RunStatus.FAILED
    assert {r.state for r in cloud.store.resources(RUN_ID)} == {ResourceState.DELETED}
    assert kinds_left(cloud.state) == set()


class _InterruptingDisplay(SilentDisplay):
    """Ctrl-C while the job waits for its workers."""

    def waiting(self, label: str, elapsed_s: float) -> None:  # noqa: ARG002
        if label.startswith("Requesting resources"):
            raise KeyboardInterrupt


def test_ctrl_c_while_following_stops_the_job_cancels_the_run_and_deletes(cloud: Cloud) -> None:
    asking = "(TrainController pid=9) Requesting resources: {'TPU': 4} * 16\n"
    with FakeRayDashboard(TOKEN, JobScript(statuses=("RUNNING",), chunks=(asking,))) as dash:
        configure_ray(cloud.state, dashboard_port=dash.port, token=TOKEN)
        run = _run(cloud, deadlines=Deadlines(start_s=60, finish_s=60, poll_s=0.05))
        run.display = _InterruptingDisplay()
        with pytest.raises(KeyboardInterrupt):
            run.start()
    assert dash.jobs[f"tpu-trainer-{RUN_ID}"].status == "STOPPED"
    row = cloud.store.run(RUN_ID)
    assert row is not None and row.status is RunStatus.CANCELLED
    assert kinds_left(cloud.state) == set()


def _record_run(cloud: Cloud) -> None:
    new_run(
        cloud.store,
        RUN_ID,
        LaunchPath.KUBERAY,
        "tpu7x-4x4x4",
        project="demo-project",
        cluster="demo-cluster",
        region="us-central1",
    )


def test_teardown_of_a_crashed_run_deletes_what_is_left_and_notes_what_is_gone(
    cloud: Cloud,
) -> None:
    from tpu_trainer.infra.gcloud import Gcloud
    from tpu_trainer.infra.xpk import Xpk
    from tpu_trainer.launchers.kuberay.cluster import KubeRayCluster, KubeRayTeardown
    from tpu_trainer.launchers.kuberay.manifests import kuberay_plan

    store, display = cloud.store, SilentDisplay()
    _record_run(cloud)
    kplan = kuberay_plan(cloud.plan, SETTINGS, RUN_ID)
    kubectl = cloud.kubectl
    cluster = KubeRayCluster(
        kubectl, cloud.runner, store, display, RUN_ID, "demo-project", "demo-cluster"
    )
    cluster.create(kplan)  # then the process "dies"; the ConfigMap is removed by hand
    assert cloud.runner.run(["kubectl", "delete", "configmap", f"{kplan.name}-entry"]).ok
    teardown = KubeRayTeardown(
        store, Gcloud(cloud.runner, "demo-project"), Xpk(cloud.runner), display, kubectl
    )
    report = teardown.run(RUN_ID)
    assert report.deleted == [f"raycluster {kplan.name}"]
    assert report.already_gone == [f"configmap {kplan.name}-entry"]
    assert report.clean and kinds_left(cloud.state) == set()
    assert {r.state for r in store.resources(RUN_ID)} == {ResourceState.DELETED}


def test_a_raycluster_the_cluster_refuses_stops_the_create_before_anything_is_made(
    cloud: Cloud,
) -> None:
    from tpu_trainer.infra.kube_check import ClusterRefusedError
    from tpu_trainer.launchers.kuberay.cluster import KubeRayCluster
    from tpu_trainer.launchers.kuberay.manifests import kuberay_plan

    _record_run(cloud)
    kplan = kuberay_plan(cloud.plan, SETTINGS, RUN_ID)
    kplan.cluster["spec"]["workerGroupSpecs"][0]["numOfHost"] = 4  # KubeRay spells numOfHosts
    cluster = KubeRayCluster(
        cloud.kubectl, cloud.runner, cloud.store, SilentDisplay(), RUN_ID, "demo-project",
        "demo-cluster",
    )  # fmt: skip
    with pytest.raises(ClusterRefusedError) as refused:
        cluster.create(kplan)
    (rejection,) = refused.value.rejections
    assert rejection.subject == f"RayCluster {kplan.name}"
    assert "spec.workerGroupSpecs[0].numOfHost" in rejection.fields
    assert "nothing was applied" in refused.value.message
    assert cloud.store.resources(RUN_ID) == [] and kinds_left(cloud.state) == set()


@pytest.mark.parametrize(
    ("poll", "head", "job"), [(0.2, 0.2, 0.2), (7.0, 7.0, 5.0), (30.0, 10.0, 5.0)]
)
def test_the_cli_poll_shortens_the_heads_checks_and_the_jobs_reads(
    tmp_path: Path, poll: float, head: float, job: float
) -> None:
    from conftest import RECIPES, plan_for
    from tpu_trainer.app.services import Services
    from tpu_trainer.cli.kuberay_cli import KubeRayStart, kuberay_run
    from tpu_trainer.infra.runner import DryRunRunner, SubprocessRunner
    from tpu_trainer.store.db import RunStore

    store = RunStore(tmp_path / "runs.db")
    services = Services(DryRunRunner(SubprocessRunner()), store, SilentDisplay(), "p")
    plan = plan_for(RECIPES["tee-upload"])
    start = KubeRayStart(services, "r1", plan, "req", "img", "en", (0, 1), poll)
    run = kuberay_run(start)
    assert (run.poll_seconds, run.deadlines.poll_s) == (head, job)
