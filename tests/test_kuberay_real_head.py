"""A real Ray head behind the emulated cluster's RayCluster: the KubeRay launcher's own steps
(create, wait for the head, read the operator's token, ``kubectl port-forward
svc/<cluster>-head-svc``) through the real kubectl, and Ray's Jobs API through the tunnel: a job
submitted, followed to SUCCEEDED, its log read."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import CONFIG, NOW, RECIPES, RECIPES_ROOT
from ray_head import RayHead, local_ray_head
from test_simkube_kubectl import Cluster
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.fakecloud import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.ray_jobs import JobStatus, RayJobsClient, submit_body
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.kuberay.cluster import KubeRayCluster
from tpu_trainer.launchers.kuberay.manifests import RaySettings, kuberay_plan
from tpu_trainer.plan.plan import PlanOptions
from tpu_trainer.simcloud.kube.raycluster import configure_ray
from tpu_trainer.simcloud.kube.server import KubeServer
from tpu_trainer.store.db import RunStore

pytestmark = pytest.mark.runtime

RUN_ID = "0ddba11"


@pytest.fixture(scope="module")
def head() -> Iterator[RayHead]:
    with local_ray_head() as started:
        yield started


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    pool = {"name": "default-pool", "machine_type": "e2-standard-8", "node_count": 2, "zone": "us-central1-a"}  # fmt: skip
    scenario = {"project": "demo-project", "region": "us-central1", "cluster": {"name": "demo-cluster"}, "node_pools": [pool]}  # fmt: skip
    state = init_state(parse_scenario(scenario), tmp_path / "state.json")
    with KubeServer(state, idle_seconds=120) as server:
        yield Cluster(tmp_path, server)


def test_a_job_runs_on_the_real_head_through_the_port_forward(
    head: RayHead, cluster: Cluster, tmp_path: Path
) -> None:
    configure_ray(
        cluster.root / "state.json",
        dashboard_port=int(head.url.rsplit(":", 1)[1]),
        token=head.token,
    )
    plan = plan_request(
        Request(str(RECIPES_ROOT / RECIPES["tee-upload"]), config_path=CONFIG),
        PlanOptions(user="test_user", now=NOW),
    )
    kplan = kuberay_plan(plan, RaySettings(image="ray:2.60.0"), RUN_ID)
    runner = SubprocessRunner(env=dict(cluster.env))
    store = RunStore(tmp_path / "runs.db")
    store.create_run(
        RUN_ID,
        model=plan.model,
        request="r",
        launcher=LaunchPath.KUBERAY,
        device_type=plan.slice.device_type,
        precision="bf16",
        project="demo-project",
        cluster="demo-cluster",
        region="us-central1",
        zone=None,
        plan_json=None,
    )
    ray = KubeRayCluster(Kubectl(runner), runner, store, SilentDisplay(), RUN_ID, "demo-project", "demo-cluster")  # fmt: skip
    ray.create(kplan)
    ray.wait_head(kplan, timeout_s=30, poll_s=0.2)
    token = ray.token(kplan, {})
    assert token == head.token  # the operator's Secret holds the head's token
    with ray.dashboard(kplan) as address:
        assert address != head.url  # kubectl's own local port, not the head's
        client = RayJobsClient(address, token)
        assert client.version()["ray_version"] == "2.60.0"
        entry = f"{head.python} -c 'print(\"through the tunnel\")'"
        job = client.submit(submit_body(entry, f"tpu-trainer-{RUN_ID}", {"RAY_DEDUP_LOGS": "0"}))
        deadline = time.monotonic() + 120
        while not (info := client.status(job)).status.terminal and time.monotonic() < deadline:
            time.sleep(0.5)
        assert info.status is JobStatus.SUCCEEDED, info
        assert "through the tunnel" in client.logs(job)
    store.close()
