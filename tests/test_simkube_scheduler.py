"""Placing controller-made pods on the emulated nodes (selector, taints, room left), the
scheduler's reasons when none fits, and the replica arithmetic of KubeRay's worker groups."""

from __future__ import annotations

from typing import Any

import pytest

from tpu_trainer.simcloud.kube.raycluster_status import desired_workers
from tpu_trainer.simcloud.kube.scheduler import format_quantity, place, quantity

pytestmark = pytest.mark.unit

TPU = {
    "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
    "cloud.google.com/gke-tpu-topology": "2x4",
}


def _node(name: str, labels: dict[str, str], *, tpu: bool = False, ready: bool = True) -> Any:
    capacity = {"cpu": "8", "memory": "32Gi", **({"google.com/tpu": "4"} if tpu else {})}
    taints = [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}] if tpu else []
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
        "status": {
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _pod(cpu: str, tpu: str | None = None, selector: dict[str, str] | None = None) -> Any:
    requests = {"cpu": cpu, **({"google.com/tpu": tpu} if tpu else {})}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if selector:
        spec["nodeSelector"] = selector
    return {"metadata": {"name": "p"}, "spec": spec}


NODES = [_node("cpu-0", {}), _node("tpu-0", TPU, tpu=True), _node("tpu-1", TPU, tpu=True)]


def test_quantities_read_and_written_as_the_api_server_does() -> None:
    assert quantity("500m") == 0.5 and quantity("16Gi") == 16 * 2**30 and quantity("4") == 4
    assert quantity("bogus") == 0
    assert format_quantity(136, "cpu") == "136" and format_quantity(0.5, "cpu") == "500m"
    assert format_quantity(48 * 2**30, "memory") == "48Gi"


def test_a_tpu_pod_tolerates_gkes_taint_and_takes_the_room_left() -> None:
    pod = _pod("2", "4", TPU)
    assert place(pod, NODES, []) == ("tpu-0", "")
    taken = {**_pod("2", "4", TPU), "spec": {**pod["spec"], "nodeName": "tpu-0"}}
    assert place(pod, NODES, [taken]) == ("tpu-1", "")


def test_a_cpu_pod_does_not_land_on_a_tainted_tpu_node() -> None:
    full = {**_pod("8"), "spec": {**_pod("8")["spec"], "nodeName": "cpu-0"}}
    node, why = place(_pod("1"), NODES, [full])
    assert node == ""
    assert why == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint "
        "{google.com/tpu: present}. preemption: 0/3 nodes are available: 1 No preemption "
        "victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    )


def test_no_node_and_not_ready_nodes_are_said_as_the_scheduler_says_them() -> None:
    assert place(_pod("1"), [], []) == ("", "no nodes available to schedule pods")
    node, why = place(_pod("1"), [_node("cpu-0", {}, ready=False)], [])
    assert node == "" and "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in why


@pytest.mark.parametrize(
    ("group", "hosts"),
    [
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 3, "numOfHosts": 4}, 8),
        ({"replicas": 5, "minReplicas": 1, "maxReplicas": 3, "numOfHosts": 2}, 6),
        ({"replicas": 0, "minReplicas": 2, "numOfHosts": 1}, 2),
        ({"replicas": 3, "suspend": True}, 0),
    ],
)
def test_a_worker_group_wants_replicas_within_its_bounds_times_hosts(
    group: dict[str, Any], hosts: int
) -> None:
    assert desired_workers(group) == hosts
