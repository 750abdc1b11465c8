"""A TPU slice taken back under a RayCluster in the Kubernetes API emulator, seen through the
real kubectl: the kubelet's graceful node shutdown (pods Failed with DisruptionTarget, its
Shutdown and Killing events), the Failed pods kept for a reader by default, and KubeRay v1.7's
deletion of them (DeletedWorkerPod) and new pods when the settings ask for it; what the tool
reads of it (``launchers.kuberay.lost_workers``) from either."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_simkube_kubectl import Cluster
from test_simkube_raycluster import CPU_POOL, TPU_POOL, raycluster
from tpu_trainer.fakecloud import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.launchers.kuberay.lost_workers import (
    deleted_failed,
    hosts_of,
    lost_deleted,
    lost_pod,
    shut_down_nodes,
)
from tpu_trainer.simcloud.kube.node_shutdown import SHUTDOWN_MESSAGE, reclaim_workers
from tpu_trainer.simcloud.kube.raycluster import configure_ray
from tpu_trainer.simcloud.kube.server import KubeServer

pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    scenario = {"project": "demo-project", "region": "us-central1", "cluster": {"name": "demo-cluster"}, "node_pools": [CPU_POOL, TPU_POOL]}  # fmt: skip
    state = init_state(parse_scenario(scenario), tmp_path / "state.json")
    with KubeServer(state, idle_seconds=120) as server:
        yield Cluster(tmp_path, server)


def _items(cluster: Cluster, *args: str) -> list[dict[str, Any]]:
    shown = cluster.kubectl("get", *args, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    items: list[dict[str, Any]] = json.loads(shown.stdout)["items"]
    return items


def _started(cluster: Cluster, obj: dict[str, Any], *, replace: bool = False) -> list[str]:
    """Apply ``obj``; the names of its running worker pods."""
    configure_ray(cluster.root / "state.json", replace_ended_workers=replace)
    applied = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(obj))
    assert applied.returncode == 0, applied.stderr
    workers = _items(cluster, "pods", "-l", "ray.io/node-type=worker")
    assert workers and all(p["status"]["phase"] == "Running" for p in workers)
    return sorted(p["metadata"]["name"] for p in workers)


def test_the_nodes_under_the_workers_shut_down_as_the_kubelet_leaves_them(
    cluster: Cluster,
) -> None:
    before = _started(cluster, raycluster())
    assert reclaim_workers(cluster.root / "state.json", "demo") == 2
    pods = _items(cluster, "pods", "-l", "ray.io/cluster=demo")
    workers = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    # kept Failed for a reader (the default), not made again
    assert sorted(p["metadata"]["name"] for p in workers) == before
    for pod in workers:
        status = pod["status"]
        assert (status["phase"], status["reason"], status["message"]) == (
            "Failed",
            "Terminated",
            SHUTDOWN_MESSAGE,
        )
        conditions = {c["type"]: (c["status"], c.get("reason")) for c in status["conditions"]}
        assert conditions["DisruptionTarget"] == ("True", "TerminationByKubelet")
        assert conditions["Ready"] == conditions["ContainersReady"] == ("False", "PodFailed")
        (container,) = status["containerStatuses"]
        assert container["state"]["terminated"]["exitCode"] == 137
        assert lost_pod(pod) == (
            f"TPU worker pod {pod['metadata']['name']} lost (DisruptionTarget, "
            f"TerminationByKubelet: {SHUTDOWN_MESSAGE})"
        )
    (head,) = [p for p in pods if p not in workers]
    assert head["status"]["phase"] == "Running"  # on a CPU node that did not shut down
    # the kubelet's events: the node's Shutdown, a Killing per container naming the node
    events = _items(cluster, "events")
    nodes = {p["spec"]["nodeName"] for p in workers}
    shut = [e for e in events if e["reason"] == "Shutdown"]
    assert {e["involvedObject"]["name"] for e in shut} == nodes == shut_down_nodes(events)
    assert {(e["involvedObject"]["kind"], e["source"]["component"]) for e in shut} == {
        ("Node", "kubelet")
    }
    killing = [e for e in events if e["reason"] == "Killing"]
    assert {e["message"] for e in killing} == {"Stopping container ray-worker"}
    assert {e["involvedObject"]["fieldPath"] for e in killing} == {"spec.containers{ray-worker}"}
    assert hosts_of(events, before) == {p["metadata"]["name"]: p["spec"]["nodeName"] for p in workers}  # fmt: skip
    # a second shutdown finds nothing left running there
    assert reclaim_workers(cluster.root / "state.json", "demo") == 0


def test_kuberay_deletes_a_failed_replica_whole_and_makes_it_again_and_the_events_say_so(
    cluster: Cluster,
) -> None:
    before = _started(cluster, raycluster(), replace=True)
    uid = _items(cluster, "rayclusters")[0]["metadata"]["uid"]
    assert reclaim_workers(cluster.root / "state.json", "demo") == 2
    workers = _items(cluster, "pods", "-l", "ray.io/node-type=worker")
    assert workers == []  # deleted; KubeRay requeues before it makes new ones
    after = _items(cluster, "pods", "-l", "ray.io/node-type=worker")
    assert len(after) == 2 and all(p["status"]["phase"] == "Running" for p in after)
    assert not {p["metadata"]["name"] for p in after} & set(before)
    events = _items(cluster, "events", "--field-selector=reason=DeletedWorkerPod")
    messages = sorted(e["message"] for e in events)
    trigger = messages[0].split("The worker Pod ")[1].split()[0]  # the pod KubeRay looked at
    assert trigger in before
    assert messages == [
        f"Deleted worker Pod default/{pod} for group tpu-group: The worker Pod {trigger} status "
        "is Failed which is a terminal state. KubeRay will delete the Pod and create new Pods "
        "in the next reconciliation if necessary."
        for pod in before
    ]
    assert {e["involvedObject"]["uid"] for e in events} == {uid}
    # what the tool reads once the pods are gone
    every = _items(cluster, "events")
    assert sorted(deleted_failed(every, uid)) == before
    assert deleted_failed(every, "an-earlier-cluster-of-that-name") == []
    hosts = hosts_of(every, before)
    down = shut_down_nodes(every)
    said = lost_deleted(before[0], hosts.get(before[0]), down)
    assert said == (
        f"TPU worker pod {before[0]} lost (its node {hosts[before[0]]} shut down; "
        "KubeRay deleted the Failed pod)"
    )


def test_a_single_host_worker_is_deleted_with_kuberays_single_host_words(
    cluster: Cluster,
) -> None:
    obj = raycluster()
    group = obj["spec"]["workerGroupSpecs"][0]
    group["numOfHosts"] = 1
    (before,) = _started(cluster, obj, replace=True)
    uid = _items(cluster, "rayclusters")[0]["metadata"]["uid"]
    assert reclaim_workers(cluster.root / "state.json", "demo") == 1
    assert _items(cluster, "pods", "-l", "ray.io/node-type=worker") == []
    (event,) = _items(cluster, "events", "--field-selector=reason=DeletedWorkerPod")
    assert event["message"].startswith(
        f"Deleted worker Pod default/{before}; Pod status: Failed; Pod restart policy: Always; "
        "Ray container terminated status: &ContainerStateTerminated{ExitCode:137,Signal:0,"
        "Reason:Error,Message:,StartedAt:"
    )
    assert deleted_failed([event], uid) == [before]
