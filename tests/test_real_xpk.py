"""The real xpk 1.16, the tool's (``runtime.xpk_runtime``), in a rehearsal's environment: its
gcloud calls go through the rehearsal's gcloud to the emulated Google APIs, its kubectl calls
and its Kubernetes Python client to the emulated cluster, its image check to the emulated
registry, and nothing leaves the machine. Each xpk command is a Python start-up, its own gcloud
calls and xpk's 10 s poll of every command it streams: few of them."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tpu_trainer.fakecloud import fake_cloud_env, init_state, recorded_calls, write_shims
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.fakecloud.state import project_number, read_state
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.runtime.xpk_runtime import install_xpk
from tpu_trainer.simcloud.rehearsal import emulated_env, recorded_problems

pytestmark = pytest.mark.e2e

PROJECT, REGION, ZONE, CLUSTER = "demo-project", "us-central1", "us-central1-a", "demo-cluster"
SCENARIO = {
    "project": PROJECT,
    "region": REGION,
    "cluster": {"name": CLUSTER},
    "node_pools": [
        {"name": "default-pool", "machine_type": "e2-standard-8", "node_count": 1, "zone": ZONE},
        {
            "name": "tpu-pool",
            "machine_type": "ct6e-standard-4t",
            "node_count": 2,
            "zone": ZONE,
            "tpu_topology": "2x4",
        },
    ],
    "reservations": [{"name": "res-a", "zone": ZONE, "host_count": 4}],
    "behaviours": {"missing_images": ["gcr.io/demo-project/gone"]},
}
WHERE = [f"--cluster={CLUSTER}", f"--project={PROJECT}", f"--zone={ZONE}", "--skip-validation"]


@dataclass
class Cloud:
    root: Path
    env: dict[str, str]
    xpk: str

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        number = f"--project-number={project_number(read_state(self.root / 'state.json'))}"
        scratch = self.root / "tmp"  # xpk leaves a file per command it runs in TMPDIR
        scratch.mkdir(exist_ok=True)
        return subprocess.run(
            [self.xpk, *argv, *WHERE, number],
            env={**self.env, "TMPDIR": str(scratch)},
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    def gcloud_calls(self) -> list[str]:
        return [" ".join(c) for c in recorded_calls(self.root / "state.json")]

    def kubectl(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", *argv],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def names(self, kind: str) -> list[str]:
        shown = self.kubectl("get", kind, "-o", "json")
        return [o["metadata"]["name"] for o in json.loads(shown.stdout)["items"]]


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    root = tmp_path_factory.mktemp("real-xpk")
    xpk_dir = install_xpk(SubprocessRunner(), print)  # the cache's (scripts/test.sh makes it)
    state = init_state(parse_scenario(SCENARIO), root / "state.json")
    write_shims(root / "bin")
    env = emulated_env(root, fake_cloud_env(root / "bin", state, {"PATH": "/usr/bin:/bin"}))
    yield Cloud(root, {**env, "HOME": str(root)}, str(xpk_dir / "xpk"))
    assert recorded_problems(root) == []


def test_workload_create_list_delete(cloud: Cloud) -> None:
    created = cloud.run(
        "workload", "create", "--priority=very-high", "--max-restarts=0", "--device-type=v6e-8",
        "--num-slices=1", "--docker-image=gcr.io/demo-project/runner:v1", "--workload=demo-run",
        "--command=python3 -c 1",
    )  # fmt: skip
    assert created.returncode == 0, created.stdout[-3000:] + created.stderr[-2000:]
    assert cloud.names("jobsets") == ["demo-run"]
    calls = cloud.gcloud_calls()
    assert any("container images describe gcr.io/demo-project/runner:v1" in c for c in calls)
    # xpk's retry without --dns-endpoint wrote the kubeconfig its kubectl and client use
    fetched = f"gcloud container clusters get-credentials {CLUSTER} --location={REGION}"
    assert any(c.startswith(fetched) for c in calls), calls
    assert any(c.startswith("gcloud monitoring dashboards list") for c in calls)
    assert "GKE Dashboard List request returned ERROR" not in created.stdout

    listed = cloud.run("workload", "list")
    assert listed.returncode == 0, listed.stdout[-3000:]
    assert "demo-run" in listed.stdout

    deleted = cloud.run("workload", "delete", "--workload=demo-run")
    assert deleted.returncode == 0, deleted.stdout[-3000:]
    assert cloud.names("jobsets") == []


def test_an_image_the_registry_does_not_hold_stops_xpk_with_its_own_message(cloud: Cloud) -> None:
    created = cloud.run(
        "workload", "create", "--device-type=v6e-8", "--num-slices=1",
        "--docker-image=gcr.io/demo-project/gone", "--workload=no-image", "--command=true",
    )  # fmt: skip
    assert created.returncode == 1
    assert "Failed to validate your docker image" in created.stdout
    assert "no-image" not in cloud.names("jobsets")


def test_cluster_adapt_configures_kueue_on_a_cluster_with_jobset_and_kueue(cloud: Cloud) -> None:
    adapted = cloud.run(
        "cluster", "adapt", "--tpu-type=v6e-8", "--num-slices=1", "--reservation=res-a"
    )
    out = adapted.stdout
    assert adapted.returncode == 0, out[-3000:] + adapted.stderr[-2000:]
    assert "Cluster has Jobset version 0.12.0 >= 0.10.1. Skipping installation." in out
    assert "Cluster has Kueue version 0.19.2 >= v0.17.1. Skipping installation." in out
    assert "memory_limit" not in out + adapted.stderr  # xpk 1.16.0 has no such bug
    assert cloud.names("resourceflavors.v1beta2.kueue.x-k8s.io") == ["1xv6e-8"]
    assert cloud.names("provisioningrequestconfigs.v1beta2.kueue.x-k8s.io") == ["dws-config"]
    assert "very-high" in cloud.names("priorityclasses")
    manager = cloud.kubectl(
        "get", "deployment", "kueue-controller-manager", "-n", "kueue-system", "-o", "json"
    )
    limits = json.loads(manager.stdout)["spec"]["template"]["spec"]["containers"][0]
    assert limits["resources"]["limits"]["memory"] == "4096Mi"  # xpk's patch, kept
