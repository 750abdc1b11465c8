"""KubeRay v1.7's RayCluster controller in the Kubernetes API emulator, seen through the real
kubectl: the pods (names, labels, containers) on the emulated nodes, the head Service, the token
Secret, the status and conditions KubeRay writes, ``port-forward svc/<cluster>-head-svc`` to the
head's dashboard, and the cascade when the cluster is deleted."""

from __future__ import annotations

import base64
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_simkube_kubectl import Cluster
from tpu_trainer.fakecloud import crd, init_state
from tpu_trainer.fakecloud.ray_dashboard import FakeRayDashboard
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.simcloud.kube.raycluster import configure_ray
from tpu_trainer.simcloud.kube.server import KubeServer

pytestmark = pytest.mark.e2e

TOKEN = "made-by-the-operator-0a1b2c"
CPU_POOL = {"name": "default-pool", "machine_type": "e2-standard-8", "node_count": 2, "zone": "us-central1-a"}  # fmt: skip
TPU_POOL = {"name": "tpu-pool", "machine_type": "ct6e-standard-4t", "node_count": 2, "zone": "us-central1-a", "tpu_topology": "2x4"}  # fmt: skip


def raycluster(name: str = "demo", replicas: int = 1) -> dict[str, Any]:
    """A RayCluster as the KubeRay launcher writes one: a CPU head, a 2-host v6e worker group."""
    worker = {
        "name": "ray-worker",
        "image": "ray:2.60",
        "resources": {"requests": {"cpu": "2", "google.com/tpu": "4"}, "limits": {"google.com/tpu": "4"}},
    }  # fmt: skip
    head = {
        "name": "ray-head",
        "image": "ray:2.60",
        "ports": [
            {"containerPort": 6379, "name": "gcs-server"},
            {"containerPort": 8265, "name": "dashboard"},
            {"containerPort": 10001, "name": "client"},
        ],
        "resources": {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"memory": "8Gi"}},
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "rayVersion": "2.60.0",
            "authOptions": {"mode": "token"},
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
            "workerGroupSpecs": [
                {
                    "groupName": "tpu-group",
                    "replicas": replicas,
                    "minReplicas": replicas,
                    "maxReplicas": replicas,
                    "numOfHosts": 2,
                    "rayStartParams": {},
                    "template": {
                        "spec": {
                            "containers": [worker],
                            "nodeSelector": {
                                "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                "cloud.google.com/gke-tpu-topology": "2x4",
                            },
                        }
                    },
                }
            ],
        },
    }


def _cluster(tmp_path: Path, *pools: dict[str, Any]) -> Iterator[Cluster]:
    scenario = {"project": "demo-project", "region": "us-central1", "cluster": {"name": "demo-cluster"}, "node_pools": list(pools)}  # fmt: skip
    state = init_state(parse_scenario(scenario), tmp_path / "state.json")
    with KubeServer(state, idle_seconds=120) as server:
        yield Cluster(tmp_path, server)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from _cluster(tmp_path, CPU_POOL, TPU_POOL)


@pytest.fixture
def cpu_only(tmp_path: Path) -> Iterator[Cluster]:
    yield from _cluster(tmp_path, CPU_POOL)


def _json(cluster: Cluster, *args: str) -> Any:
    shown = cluster.kubectl(*args, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _apply(cluster: Cluster, obj: dict[str, Any]) -> None:
    applied = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(obj))
    assert applied.returncode == 0, applied.stderr


def _conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c["reason"], c["message"]) for c in obj["status"]["conditions"]
    }


def test_the_operator_makes_pods_service_and_secret_and_writes_ready(cluster: Cluster) -> None:
    configure_ray(cluster.root / "state.json", token=TOKEN)
    _apply(cluster, raycluster())
    pods = _json(cluster, "get", "pods", "-l", "ray.io/cluster=demo")["items"]
    names = sorted(p["metadata"]["name"] for p in pods)
    assert len(names) == 3
    assert re.fullmatch(r"demo-head-[bcdfghjklmnpqrstvwxz2456789]{5}", names[0])
    assert all(re.fullmatch(r"demo-tpu-group-worker-[a-z0-9]{5}", n) for n in names[1:])
    head = next(p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "head")
    assert head["metadata"]["labels"] == {
        "ray.io/is-ray-node": "yes",
        "ray.io/cluster": "demo",
        "ray.io/node-type": "head",
        "ray.io/group": "headgroup",
        "ray.io/identifier": "demo-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    ray = head["spec"]["containers"][0]
    assert ray["command"] == ["/bin/bash", "-c", "--"] and "ray start --head" in ray["args"][0]
    assert {"name": "metrics", "containerPort": 8080, "protocol": "TCP"} in ray["ports"]
    env = {e["name"]: e for e in ray["env"]}
    assert env["RAY_AUTH_MODE"]["value"] == "token"
    assert env["RAY_AUTH_TOKEN"]["valueFrom"] == {
        "secretKeyRef": {"name": "demo", "key": "auth_token"}
    }
    workers = [p for p in pods if p is not head]
    labels = [p["metadata"]["labels"] for p in workers]
    assert {lbl["ray.io/replica-host-index"] for lbl in labels} == {"0", "1"}
    assert len({lbl["ray.io/worker-group-replica-name"] for lbl in labels}) == 1
    assert all(lbl["ray.io/worker-group-replica-index"] == "0" for lbl in labels)
    nodes = {p["spec"]["nodeName"] for p in workers}
    assert len(nodes) == 2 and all("-tpu-pool-" in n for n in nodes)  # 4 chips each: one per host
    assert "-default-pool-" in head["spec"]["nodeName"]
    assert all(p["status"]["phase"] == "Running" for p in pods)
    # the head Service (headless), selecting the head pod, one port per head port
    service = _json(cluster, "get", "svc", "demo-head-svc")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"]["ray.io/node-type"] == "head"
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports == {"client": 10001, "dashboard": 8265, "gcs-server": 6379, "metrics": 8080}
    # the token Secret, named after the cluster, owned by it
    secret = _json(cluster, "get", "secret", "demo")
    assert base64.b64decode(secret["data"]["auth_token"]).decode() == TOKEN
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
    # the status KubeRay writes, valid against the CRD
    obj = _json(cluster, "get", "raycluster", "demo")
    assert crd.validate(obj) == []
    status = obj["status"]
    assert status["state"] == "ready"
    assert (status["desiredWorkerReplicas"], status["readyWorkerReplicas"]) == (2, 2)
    assert (status["desiredCPU"], status["desiredMemory"], status["desiredTPU"]) == (
        "8",
        "8Gi",
        "8",
    )
    assert status["endpoints"]["dashboard"] == "8265"
    assert status["head"]["podName"] == head["metadata"]["name"]
    assert _conditions(obj)["HeadPodReady"] == ("True", "HeadPodRunningAndReady", "")
    assert _conditions(obj)["RayClusterProvisioned"][:2] == (
        "True",
        "AllPodRunningAndReadyFirstTime",
    )
    table = cluster.kubectl("get", "raycluster", "demo")
    assert table.stdout.split("\n")[0].split() == [
        "NAME", "DESIRED", "WORKERS", "AVAILABLE", "WORKERS", "CPUS", "MEMORY", "GPUS", "STATUS", "AGE"
    ]  # fmt: skip
    # the operator's events on the cluster
    said = _json(cluster, "get", "events", "--field-selector=involvedObject.kind=RayCluster")
    reasons = sorted(e["reason"] for e in said["items"])
    assert reasons == ["CreatedHeadPod", "CreatedService", "CreatedWorkerPod", "CreatedWorkerPod"]
    assert {e["source"]["component"] for e in said["items"]} == {"raycluster-controller"}
    # deleting the cluster deletes what the operator made for it
    assert cluster.kubectl("delete", "raycluster", "demo").returncode == 0
    left = cluster.kubectl("get", "pods,services,secrets", "-o", "name")
    assert left.stdout == "", left.stdout


def test_tpu_workers_without_a_node_pool_stay_pending_with_the_schedulers_reason(
    cpu_only: Cluster,
) -> None:
    cluster = cpu_only
    _apply(cluster, raycluster())
    workers = _json(cluster, "get", "pods", "-l", "ray.io/group=tpu-group")["items"]
    assert len(workers) == 2
    for pod in workers:
        assert pod["status"]["phase"] == "Pending"
        (scheduled,) = pod["status"]["conditions"]
        assert (scheduled["type"], scheduled["reason"]) == ("PodScheduled", "Unschedulable")
        assert scheduled["message"] == (
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        )
    warned = _json(cluster, "get", "events", "--field-selector=reason=FailedScheduling")["items"]
    assert len(warned) == 2 and {e["type"] for e in warned} == {"Warning"}
    assert {e["involvedObject"]["name"] for e in warned} == {p["metadata"]["name"] for p in workers}
    described = cluster.kubectl("describe", "pod", workers[0]["metadata"]["name"])
    assert "FailedScheduling" in described.stdout and "default-scheduler" in described.stdout
    obj = _json(cluster, "get", "raycluster", "demo")
    assert "state" not in obj["status"]  # ready needs every pod
    assert _conditions(obj)["HeadPodReady"][0] == "True"
    assert _conditions(obj)["RayClusterProvisioned"][:2] == ("False", "RayClusterPodsProvisioning")
    assert cluster.kubectl("delete", "raycluster", "demo").returncode == 0


def test_a_head_whose_image_never_comes_says_why(cluster: Cluster) -> None:
    configure_ray(cluster.root / "state.json", head_ready=False)
    _apply(cluster, raycluster())
    obj = _json(cluster, "get", "raycluster", "demo")
    status, reason, message = _conditions(obj)["HeadPodReady"]
    assert (status, reason) == ("False", "ImagePullBackOff")
    assert message == (
        'containers with unready status: [ray-head]; ray-head: Back-off pulling image "ray:2.60"'
    )
    # a random token (base64 of 32 bytes) when the settings name none
    token = base64.b64decode(_json(cluster, "get", "secret", "demo")["data"]["auth_token"])
    assert len(base64.b64decode(token)) == 32


def test_port_forward_to_the_head_service_reaches_the_heads_dashboard(cluster: Cluster) -> None:
    with FakeRayDashboard(TOKEN) as dashboard:
        configure_ray(cluster.root / "state.json", dashboard_port=dashboard.port, token=TOKEN)
        _apply(cluster, raycluster())
        proc = cluster.follow("port-forward", "svc/demo-head-svc", ":8265", "--address=127.0.0.1")
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            found = re.search(r"127\.0\.0\.1:(\d+) -> 8265", line)
            assert found, line
            request = urllib.request.Request(
                f"http://127.0.0.1:{found[1]}/api/version",
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                assert json.loads(answer.read())["ray_version"] == "2.60.0"
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
    assert dashboard.calls == [("GET", "/api/version", True)]
